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
  if (request.assembly != nullptr) o.assembly = request.assembly;
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

// --threads: the threads a launch may use (x86_64), or the workers a wasm
// module is compiled for.
absl::StatusOr<std::any> describeX86(const TargetFlags& given) {
  if (!given.threads) return std::any();
  x64::CompileOptions o;
  o.threads = *given.threads;
  return std::any(o);
}

absl::StatusOr<std::any> describeWasm(const TargetFlags& given) {
  if (!given.threads) return std::any();
  return std::any(wasm::TargetInfo{.threads = x64::resolveThreads(*given.threads)});
}

// --arch=sm_NN: a device of that compute capability, with the lowest PTX
// ISA version its architecture needs. The messages are the command line's
// own (no kind prefix): it prints them as they are.
absl::StatusOr<std::any> describePtx(const TargetFlags& given) {
  if (!given.arch) return std::any();
  const std::string& arch = *given.arch;
  // "sm_" and a number up to 999.
  bool number = arch.rfind("sm_", 0) == 0 && arch.size() >= 5 && arch.size() <= 3 + 18;
  int64_t sm = 0;
  for (size_t i = 3; number && i < arch.size(); ++i) {
    number = arch[i] >= '0' && arch[i] <= '9';
    sm = sm * 10 + (arch[i] - '0');
  }
  if (!number || sm > 999) return absl::InvalidArgumentError(strCat("--arch '", arch, "' is not sm_NN (e.g. sm_90)"));
  absl::StatusOr<ptx::PtxTarget> known = ptx::ptxTargetFor(static_cast<int>(sm));
  if (!known.ok()) return absl::InvalidArgumentError(strCat("--arch: ", known.status().message()));
  ptx::TargetInfo t;
  t.sm = static_cast<int>(sm);
  t.ptx_version = std::max(t.ptx_version, known->min_ptx_version);
  return std::any(t);
}

const std::vector<TargetEntry>& all() {
  using M = ArithmeticMode;
  using F = EmitForm;
  static const std::vector<TargetEntry> kTargets = {
      {.name = "x86_64",
       .summary = "x86-64 machine code run in the caller's process (SSE4.1, AVX2 or AVX-512)",
       .emits = {{"choir", F::kChoir}, {"asm", F::kAssembly}, {"artifact", F::kArtifact}},
       .modes = {M::kExact, M::kFast},
       .device = "cpu",
       .scans_in_kernel = true,
#if defined(__x86_64__)
       .available = true,
#else
       .available = false,
#endif
       .compile = compileX86,
       .flags = {"--threads"},
       .describe = describeX86},
      {.name = "spirv",
       .summary = "SPIR-V 1.3 compute modules for Vulkan",
       .emits = {{"spirv", F::kKernelFiles, "spv"}, {"artifact", F::kArtifact}},
       .modes = {M::kExact, M::kFast},
       .device = "vulkan",
       .gpu = true,
       .compile = compileSpirv},
      {.name = "ptx",
       .summary = "PTX text for the CUDA Driver API",
       .emits = {{"ptx", F::kCode}, {"choir", F::kChoir}},
       .code_emit = "ptx",
       .modes = {M::kExact, M::kFast, M::kTf32},
       .device = "cuda",
       .gpu = true,
       .compile = compilePtx,
       .flags = {"--arch"},
       .describe = describePtx},
      {.name = "wgsl",
       .summary = "WGSL modules for WebGPU, run in a web page by web/accy.js",
       .emits = {{"wgsl", F::kCode}, {"artifact", F::kArtifact}},
       .code_emit = "wgsl",
       .modes = {M::kExact, M::kFast},
       .device = "browser",
       .gpu = true,
       .compile = compileWgsl,
       .artifact = wgsl::artifactJson},
      {.name = "msl",
       .summary = "Metal Shading Language kernels, compiled by Metal when loaded (checked here through tools/msl)",
       .emits = {{"msl", F::kCode}, {"artifact", F::kArtifact}},
       .code_emit = "msl",
       .modes = {M::kExact, M::kFast},
       .device = "msl-shim",
       .gpu = true,
       .compile = compileMsl,
       .artifact = msl::artifactJson},
      {.name = "wasm",
       .summary = "a WebAssembly module with SIMD128, run by web/accy_wasm.js in node or a browser",
       .emits = {{"wasm", F::kModule}, {"wat", F::kWat}, {"artifact", F::kArtifact}},
       .code_emit = "wasm",
       .modes = {M::kExact, M::kFast},
       .device = "node",
       .scans_in_kernel = true,
       .compile = compileWasm,
       .artifact = wasm::artifactJson,
       .flags = {"--threads"},
       .describe = describeWasm},
      {.name = "reference",
       .summary = "the program itself, run by the reference evaluator (the null device)",
       .emits = {{"artifact", F::kArtifact}},
       .modes = {M::kExact, M::kFast},
       .device = "null",
       .loops_whole = true,
       .compile = compileReference},
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

absl::StatusOr<const Emit*> findEmit(const TargetEntry& target, std::string_view emit) {
  for (const Emit& e : target.emits) {
    if (e.name == emit) return &e;
  }
  std::string emits;
  for (const Emit& e : target.emits) strAppend(&emits, emits.empty() ? "" : ", ", e.name);
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("target ", target.name, " does not write --emit=", emit, " (it writes ", emits, ")"));
}

absl::Status checkEmit(const TargetEntry& target, std::string_view emit) { return findEmit(target, emit).status(); }

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
