#include "compiler/codegen/spirv/compile.h"

#include "compiler/choir/pipeline.h"
#include "compiler/codegen/gpu/gpu_program.h"
#include "compiler/codegen/spirv/target.h"
#include "base/status_macros.h"

namespace accy::spirv {

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump) {
  choir::GpuMapOptions map;
  map.max_workgroup_size = target.max_workgroup_size;
  // On a device that runs a workgroup as one thread (lavapipe), trees lose;
  // register-blocked tiles still win (docs/PERFORMANCE.md), plain ones do not.
  if (!target.tile_products || (!target.cooperative_workgroups && !target.register_blocking)) {
    map.min_extent_for_tiles = 0;
  }
  if (!target.cooperative_workgroups) map.min_domain_for_tree = INT64_MAX;
  if (target.max_loop_iterations > 0) map.max_serial_domain = target.max_loop_iterations / 4;
  if (!target.register_blocking) map.micro_tile = 1;
  map.scatter_ranges = target.scatter_ranges;
  ACCY_ASSIGN_OR_RETURN(const choir::Module m, gpu::mapProgram(program, map, dump, target.max_storage_buffers));
  executable::Executable exe =
      gpu::gpuExecutable("spirv", target.mode == ArithmeticMode::kFast ? "vulkan1.1-fast" : "vulkan1.1", m, program);
  for (const choir::Kernel& k : m.kernels) {
    ACCY_ASSIGN_OR_RETURN(TranslatedKernel t, translateKernel(m, k, target));
    const auto* bytes = reinterpret_cast<const uint8_t*>(t.words.data());
    gpu::appendKernel(exe, k, std::span<const uint8_t>(bytes, t.words.size() * 4), t.workgroups, /*work=*/0);
  }
  return exe;
}

}  // namespace accy::spirv
