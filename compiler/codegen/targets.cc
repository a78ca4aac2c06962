#include "compiler/codegen/targets.h"

#include <algorithm>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/codegen/msl/artifact.h"
#include "compiler/codegen/msl/compile.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/codegen/ptx/pipeline.h"
#include "compiler/codegen/spirv/compile.h"
#include "compiler/codegen/wasm/compile.h"
#include "compiler/codegen/wgsl/artifact.h"
#include "compiler/codegen/wgsl/compile.h"
#include "compiler/codegen/x86_64/compile.h"
#include "compiler/wire/wire.h"

namespace accy::codegen {
namespace {

// The device description of `request`, or the target's defaults; a wrong
// type is a caller's mistake, reported by name.
template <typename T>
absl::StatusOr<T> deviceOf(const CompileRequest& request, std::string_view target, std::string_view type) {
  if (!request.device.has_value()) return T{};
  if (const T* d = std::any_cast<T>(&request.device)) return *d;
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("target ", target, " describes its device with ", type, ", not the value given"));
}

absl::StatusOr<executable::Executable> compileX86(const tensor::Program& program, const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(x64::CompileOptions o, deviceOf<x64::CompileOptions>(request, "x86_64", "x64::CompileOptions"));
  // kFast: the x86-64 target has only its accurate sequences.
  if (request.dump) o.dump = request.dump;
  return x64::compileProgram(program, o);
}

absl::StatusOr<executable::Executable> compileSpirv(const tensor::Program& program, const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(spirv::TargetInfo t, deviceOf<spirv::TargetInfo>(request, "spirv", "spirv::TargetInfo"));
  t.mode = request.mode;
  return spirv::compileProgram(program, t, request.dump);
}

absl::StatusOr<executable::Executable> compileWgsl(const tensor::Program& program, const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(wgsl::TargetInfo t, deviceOf<wgsl::TargetInfo>(request, "wgsl", "wgsl::TargetInfo"));
  t.mode = request.mode;
  return wgsl::compileProgram(program, t, request.dump);
}

absl::StatusOr<executable::Executable> compileWasm(const tensor::Program& program, const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(wasm::TargetInfo t, deviceOf<wasm::TargetInfo>(request, "wasm", "wasm::TargetInfo"));
  t.mode = request.mode;
  return wasm::compileProgram(program, t, request.dump);
}

absl::StatusOr<executable::Executable> compileMsl(const tensor::Program& program, const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(msl::TargetInfo t, deviceOf<msl::TargetInfo>(request, "msl", "msl::TargetInfo"));
  t.mode = request.mode;
  return msl::compileProgram(program, t, request.dump);
}

absl::StatusOr<executable::Executable> compilePtx(const tensor::Program& program, const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(ptx::TargetInfo t, deviceOf<ptx::TargetInfo>(request, "ptx", "ptx::TargetInfo"));
  t.mode = request.mode;
  return ptx::compileProgramWith(program, t, ptx::EmitOptions{.dump = request.dump});
}

// The program itself (its wire encoding), which the reference evaluator
// runs: the null device's target, and the template a device starts from.
absl::StatusOr<executable::Executable> compileReference(const tensor::Program& program, const CompileRequest&) {
  ACCY_RETURN_IF_ERROR(tensor::validateProgram(program));
  executable::Executable exe;
  exe.target = "reference";
  exe.isa = "evaluator";
  const std::string bytes = wire::encode(program);
  exe.code.assign(bytes.begin(), bytes.end());
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  auto plan = [](choir::BufferRole role, size_t io, const tensor::Spec& spec) {
    executable::BufferPlan b;
    b.role = role;
    b.io_index = static_cast<int>(io);
    b.dtype = spec.dtype;
    b.bytes = spec.byteSize();
    b.alignment = static_cast<int64_t>(tensor::dtypeSize(spec.dtype));
    return b;
  };
  for (size_t i = 0; i < exe.inputs.size(); ++i) {
    exe.artifact_plan.buffers.push_back(plan(choir::BufferRole::kInput, i, exe.inputs[i]));
  }
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    exe.artifact_plan.buffers.push_back(plan(choir::BufferRole::kOutput, i, exe.outputs[i]));
  }
  exe.launch_plan.steps.push_back(executable::LaunchStep{"evaluate", 0, 0, 0});
  return exe;
}

const std::vector<TargetEntry>& all() {
  using M = ArithmeticMode;
  static const std::vector<TargetEntry> kTargets = {
      {"x86_64", "x86-64 machine code run in the caller's process (SSE4.1, AVX2 or AVX-512)",
       {"choir", "asm", "artifact"}, "", {M::kExact, M::kFast}, "cpu", false,
#if defined(__x86_64__)
       true,
#else
       false,
#endif
       compileX86},
      {"spirv", "SPIR-V 1.3 compute modules for Vulkan", {"spirv", "artifact"}, "", {M::kExact, M::kFast}, "vulkan", true,
       true, compileSpirv},
      {"ptx", "PTX text for the CUDA Driver API", {"ptx", "choir"}, "ptx", {M::kExact, M::kFast, M::kTf32}, "cuda", true, true,
       compilePtx},
      {"wgsl", "WGSL modules for WebGPU, run in a web page by web/accy.js", {"wgsl", "artifact"}, "wgsl",
       {M::kExact, M::kFast}, "browser", true, true, compileWgsl, wgsl::artifactJson},
      {"msl", "Metal Shading Language kernels, compiled by Metal when loaded (checked here through tools/msl)",
       {"msl", "artifact"}, "msl", {M::kExact, M::kFast}, "msl-shim", true, true, compileMsl, msl::artifactJson},
      {"wasm", "a WebAssembly module with SIMD128, run by web/accy_wasm.js in node or a browser",
       {"wasm", "wat", "artifact"}, "wasm", {M::kExact, M::kFast}, "node", false, true, compileWasm,
       wasm::artifactJson},
      {"reference", "the program itself, run by the reference evaluator (the null device)", {"artifact"}, "",
       {M::kExact, M::kFast}, "null", false, true, compileReference},
  };
  return kTargets;
}

}  // namespace

std::span<const TargetEntry> targets() { return all(); }

std::string targetNames() {
  std::string names;
  for (const TargetEntry& t : all()) {
    if (t.available) strAppend(&names, names.empty() ? "" : ", ", t.name);
  }
  return names;
}

absl::StatusOr<const TargetEntry*> findTarget(std::string_view name) {
  for (const TargetEntry& t : all()) {
    if (t.name != name) continue;
    if (!t.available) {
      return makeError(ErrorKind::kUnimplemented, strCat("target ", name, " is not available on this host (available: ",
                                                         targetNames(), ")"));
    }
    return &t;
  }
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("target ", quoted(name), " is not available in this build (available: ", targetNames(), ")"));
}

absl::Status checkMode(std::string_view target, ArithmeticMode mode) {
  ACCY_ASSIGN_OR_RETURN(const TargetEntry* t, findTarget(target));
  if (std::find(t->modes.begin(), t->modes.end(), mode) != t->modes.end()) return absl::OkStatus();
  std::string which;
  for (const TargetEntry& other : all()) {
    if (std::find(other.modes.begin(), other.modes.end(), mode) != other.modes.end()) {
      strAppend(&which, which.empty() ? "" : ", ", other.name);
    }
  }
  if (mode == ArithmeticMode::kTf32) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("tf32 arithmetic runs on NVIDIA tensor cores and needs CUDA (target ", which, "); target ",
                            target, " has no tf32 mode"));
  }
  return makeError(ErrorKind::kInvalidArgument, strCat("target ", target, " has no ", arithmeticModeName(mode),
                                                       " mode (targets with one: ", which, ")"));
}

absl::Status checkEmit(const TargetEntry& target, std::string_view emit) {
  if (std::find(target.emits.begin(), target.emits.end(), emit) != target.emits.end()) return absl::OkStatus();
  std::string emits;
  for (std::string_view e : target.emits) strAppend(&emits, emits.empty() ? "" : ", ", e);
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("target ", target.name, " does not write --emit=", emit, " (it writes ", emits, ")"));
}

absl::StatusOr<executable::Executable> compileFor(std::string_view target, const tensor::Program& program,
                                                  const CompileRequest& request) {
  ACCY_ASSIGN_OR_RETURN(const TargetEntry* t, findTarget(target));
  ACCY_RETURN_IF_ERROR(checkMode(target, request.mode));
  // A caller's stop check (accyd's time limit, a cancelled call) is asked
  // inside the passes and emitters too, and unwinds the compile to here
  // (compiler/choir/work.h).
  try {
    choir::StopInsideCompile looks;
    return t->compile(program, request);
  } catch (const choir::StopRequested& stop) {
    return stop.status;
  }
}

}  // namespace accy::codegen
