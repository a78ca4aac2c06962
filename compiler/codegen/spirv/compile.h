// Program -> SPIR-V Executable for Vulkan compute.
//
// Executable layout for target "spirv" (what backends/vulkan loads):
//   - code: the SPIR-V modules of the kernels, one after another, each a
//     whole module (little-endian 32-bit words starting with the magic
//     0x07230203) with one GLCompute entry point named "main";
//   - launch_plan.steps[k].entry_offset: byte offset of kernel k's module
//     (its end is the next step's offset, or the end of the code);
//   - launch_plan.steps[k].parallel_extent: the number of workgroups to
//     dispatch along x (y = z = 1); the workgroup size is in the module;
//   - artifact_plan.buffers[b]: descriptor set 0, binding b, a storage
//     buffer (inputs, outputs and temporaries alike); a kernel declares
//     every binding, used or not.
// Kernels run in launch order with a compute-to-compute memory barrier
// between them.
#ifndef ACCY_COMPILER_CODEGEN_SPIRV_COMPILE_H_
#define ACCY_COMPILER_CODEGEN_SPIRV_COMPILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::spirv {

using codegen::ArithmeticMode;

// What the device allows, from Vulkan's physical-device queries.
struct TargetInfo {
  uint32_t max_workgroup_size = 128;  // maxComputeWorkGroupInvocations (and size x)
  uint32_t max_workgroup_count = 65535;  // maxComputeWorkGroupCount[0]
  bool float64 = false;               // shaderFloat64
  bool int64 = false;                 // shaderInt64
  // storageBuffer8BitAccess (VK_KHR_8bit_storage): bool buffers, one byte
  // per element, are u8 arrays; without it they are refused.
  bool storage_8bit = false;
  uint32_t subgroup_size = 0;         // 0 when compute subgroup shuffles (shuffle-relative) are unavailable
  // Storage buffers one kernel may bind (maxPerStageDescriptorStorageBuffers
  // and maxDescriptorSetStorageBuffers, the smaller); 0: unknown. A kernel
  // binds only the buffers it uses; the loader refuses one past this.
  uint32_t max_storage_buffers = 0;
  // kFast uses GLSL.std.450 for f32 transcendentals; kExact (the default)
  // emits accurate instruction sequences. kTf32 is for NVIDIA tensor cores:
  // callers refuse it before compiling (codegen::checkMode).
  ArithmeticMode mode = ArithmeticMode::kExact;
  // Tile sum-of-products kernels (dot) through workgroup memory
  // (passes/gpu_map.h); off only to measure what tiling buys.
  bool tile_products = true;
  // Tiled products compute 4 x 4 outputs per invocation (register
  // blocking, passes/gpu_map.h); off only to measure what it buys.
  bool register_blocking = true;
  // Whether a workgroup's invocations run concurrently. When false (Vulkan
  // devices of type CPU: lavapipe runs a workgroup as one thread switching
  // at each barrier), reductions do not cooperate through workgroup memory
  // (no trees), and products are tiled only with register blocking, which
  // still wins there (measured in docs/PERFORMANCE.md).
  bool cooperative_workgroups = true;
  // The most loop iterations one invocation may run, over all its loops
  // together; 0 for no limit. Mesa's llvmpipe (lavapipe) ends every loop
  // of an invocation once they have run 65,535 iterations in all, silently
  // dropping the rest. With a limit, reductions longer than a quarter of it
  // use the workgroup forms (split across workgroups), which keep every
  // invocation's share short, and a kernel that would still pass the limit
  // fails to compile with Unimplemented instead of computing less.
  uint32_t max_loop_iterations = 0;
  // scatter_add by ranges of rows (passes/gpu_map.h); off only to measure
  // what it buys over the reduction form.
  bool scatter_ranges = true;
};

// `dump` sees the Choir module after each pass (choir/pipeline.h).
absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump = {});

}  // namespace accy::spirv

#endif  // ACCY_COMPILER_CODEGEN_SPIRV_COMPILE_H_
