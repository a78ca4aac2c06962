#include "compiler/codegen/ptx/compile.h"

#include <algorithm>

#include "compiler/choir/pipeline.h"
#include "compiler/choir/verifier.h"
#include "compiler/codegen/ptx/target.h"
#include "compiler/codegen/ptx/pipeline.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::ptx {
namespace {

absl::Status invalid(std::string_view what) {
  return makeError(ErrorKind::kInvalidArgument, strCat("PTX emitter: ", what));
}

absl::Status checkTarget(const TargetInfo& t) {
  if (t.warp_size != 32) return invalid(strCat("warp size ", t.warp_size, " (the emitter's shuffles assume 32)"));
  if (t.max_threads_per_block < 1) return invalid("max_threads_per_block is 0");
  if (t.max_grid_x < 1) return invalid("max_grid_x is 0");
  return absl::OkStatus();
}

std::string versionText(int v) { return strCat(v / 10, ".", v % 10); }

// `s` for a one-line comment: printable ASCII only.
std::string commentSafe(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

}  // namespace

absl::StatusOr<PtxTarget> ptxTargetFor(int sm) {
  // Architectures and the first PTX ISA version that knows each.
  static constexpr PtxTarget kKnown[] = {{70, 60}, {72, 61}, {75, 63},  {80, 70},  {86, 71},  {87, 74},  {89, 78},
                                         {90, 78}, {100, 86}, {103, 88}, {110, 90}, {120, 87}, {121, 88}};
  if (sm < 70) return invalid(strCat("sm_", sm, " is not supported (sm_70 or newer)"));
  PtxTarget best = kKnown[0];
  for (const PtxTarget& k : kKnown) {
    if (k.sm <= sm) best = k;
  }
  return best;
}

absl::StatusOr<choir::Module> gpuModule(const tensor::Program& program, const TargetInfo& target,
                                        const choir::PassHook& dump) {
  ACCY_RETURN_IF_ERROR(checkTarget(target));
  choir::PipelineOptions pipeline;
  choir::GpuMapOptions& map = pipeline.gpu_map.emplace();
  map.max_workgroup_size = target.max_threads_per_block;
  // Register blocking (R x R outputs per thread); the tf32 mma.sync path
  // computes one output per thread.
  map.micro_tile = target.mode == ArithmeticMode::kTf32 ? 1 : 4;
  pipeline.tf32 = target.mode == ArithmeticMode::kTf32;
  pipeline.dump = dump;
  ACCY_ASSIGN_OR_RETURN(choir::Module m, choir::compileToChoir(program, pipeline));
  ACCY_RETURN_IF_ERROR(choir::verifyModule(m));
  return m;
}

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target) {
  return compileProgramWith(program, target, EmitOptions{});
}

absl::StatusOr<executable::Executable> compileProgramWith(const tensor::Program& program, const TargetInfo& target,
                                                          const EmitOptions& emit) {
  ACCY_ASSIGN_OR_RETURN(const PtxTarget arch, ptxTargetFor(target.sm));
  ACCY_ASSIGN_OR_RETURN(choir::Module m, gpuModule(program, target, emit.dump));
  KernelOptions options;
  options.target = target;
  options.wide_indices = emit.wide_indices;
  std::vector<TranslatedKernel> kernels;
  int version = arch.min_ptx_version;
  for (const choir::Kernel& k : m.kernels) {
    options.tf32 = k.tf32;
    ACCY_ASSIGN_OR_RETURN(TranslatedKernel t, translateKernel(m, k, options));
    if (t.min_sm > arch.sm) {
      return invalid(strCat("kernel ", k.name, " needs sm_", t.min_sm, " but the target is sm_", target.sm));
    }
    version = std::max(version, t.min_ptx_version);
    kernels.push_back(std::move(t));
  }
  if (version > target.ptx_version) {
    return invalid(strCat("the module for sm_", arch.sm, " needs PTX ISA ", versionText(version),
                          " but the target allows only ", versionText(target.ptx_version),
                          " (TargetInfo::ptx_version)"));
  }
  executable::Executable exe;
  exe.target = "ptx";
  exe.isa = target.mode == ArithmeticMode::kExact ? strCat("sm_", arch.sm)
                                                  : strCat("sm_", arch.sm, "-", codegen::arithmeticModeName(target.mode));
  std::string text = strCat(".version ", versionText(version), "\n.target sm_", arch.sm, "\n.address_size 64\n\n");
  strAppend(&text, "// Accy PTX for program ", commentSafe(program.name), ": ", m.kernels.size(), " kernels, mode ",
            codegen::arithmeticModeName(target.mode), ", device sm_", target.sm, "\n\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const choir::Kernel& k = m.kernels[i];
    const TranslatedKernel& t = kernels[i];
    const size_t entry = t.text.find(".visible .entry");
    const uint64_t offset = text.size() + entry;
    strAppend(&text, t.text, "\n");
    exe.launch_plan.steps.push_back(executable::LaunchStep{k.name, offset, t.blocks, t.work, k.workgroup_size});
  }
  exe.code.assign(text.begin(), text.end());
  exe.artifact_plan = executable::planBuffers(m);
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  return exe;
}

}  // namespace accy::ptx
