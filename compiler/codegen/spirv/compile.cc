#include "compiler/codegen/spirv/compile.h"

#include "compiler/choir/pipeline.h"
#include "compiler/choir/verifier.h"
#include "compiler/codegen/spirv/kernel_translator.h"
#include "base/status_macros.h"

namespace accy::spirv {

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump) {
  choir::PipelineOptions pipeline;
  pipeline.dump = dump;
  choir::GpuMapOptions& map = pipeline.gpu_map.emplace();
  map.max_workgroup_size = target.max_workgroup_size;
  // On a device that runs a workgroup as one thread (lavapipe), trees lose;
  // register-blocked tiles still win (docs/PERFORMANCE.md), plain ones do not.
  if (!target.tile_products || (!target.cooperative_workgroups && !target.register_blocking)) {
    map.min_extent_for_tiles = 0;
  }
  if (!target.cooperative_workgroups) map.min_domain_for_tree = INT64_MAX;
  if (target.max_loop_iterations > 0) map.max_serial_domain = target.max_loop_iterations / 4;
  if (!target.register_blocking) map.micro_tile = 1;
  ACCY_ASSIGN_OR_RETURN(choir::Module m, choir::compileToChoir(program, pipeline));
  ACCY_RETURN_IF_ERROR(choir::verifyModule(m));
  executable::Executable exe;
  exe.target = "spirv";
  exe.isa = target.mode == ArithmeticMode::kFast ? "vulkan1.1-fast" : "vulkan1.1";
  for (const choir::Kernel& k : m.kernels) {
    ACCY_ASSIGN_OR_RETURN(TranslatedKernel t, translateKernel(m, k, target));
    const uint64_t offset = exe.code.size();
    const auto* bytes = reinterpret_cast<const uint8_t*>(t.words.data());
    exe.code.insert(exe.code.end(), bytes, bytes + t.words.size() * 4);
    int64_t work = 0;
    exe.launch_plan.steps.push_back(executable::LaunchStep{k.name, offset, t.workgroups, work, k.workgroup_size});
  }
  exe.artifact_plan = executable::planBuffers(m);
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  return exe;
}

}  // namespace accy::spirv
