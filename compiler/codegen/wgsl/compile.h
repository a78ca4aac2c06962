// Program -> WGSL Executable for WebGPU compute (a browser, through
// web/accy.js).
//
// Executable layout for target "wgsl":
//   - code: the WGSL modules of the kernels, one after another, each a whole
//     module (UTF-8 text) with one `@compute` entry point named "main";
//   - launch_plan.steps[k].entry_offset: byte offset of kernel k's module
//     (its end is the next step's offset, or the end of the code); a tree
//     reduction's module is followed by kSubgroupsMarker and its variant
//     with subgroup operations;
//   - launch_plan.steps[k].parallel_extent: workgroups to dispatch along x;
//     group_size: the module's @workgroup_size;
//   - artifact_plan.buffers[b]: @group(0) @binding(b), a storage buffer;
//     a kernel declares only the buffers it uses (WebGPU allows 8 storage
//     buffers per stage by default); bool buffers hold one u32 (0 or 1)
//     per element in the kernels, one byte per element outside (the web
//     runtime widens and narrows them).
// WGSL has no f64 and no i64: programs that use them are refused with
// Unimplemented naming the dtype and where.
#ifndef ACCY_COMPILER_CODEGEN_WGSL_COMPILE_H_
#define ACCY_COMPILER_CODEGEN_WGSL_COMPILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::wgsl {

using codegen::ArithmeticMode;

// What the adapter allows (WebGPU's default limits unless the page asks for
// more).
struct TargetInfo {
  uint32_t max_workgroup_size = 256;     // maxComputeInvocationsPerWorkgroup
  uint32_t max_workgroups = 65535;       // maxComputeWorkgroupsPerDimension
  uint32_t workgroup_memory = 16384;     // maxComputeWorkgroupStorageSize
  // maxStorageBuffersPerShaderStage: fusion keeps every kernel within it.
  uint32_t max_storage_buffers = 8;
  // kExact (default): the elementary functions of compiler/codegen/math;
  // kFast: WGSL's built-ins.
  ArithmeticMode mode = ArithmeticMode::kExact;
  // Tree reductions also get a variant with subgroup shuffles (WebGPU's
  // `subgroups` feature), which web/accy.js runs where the device has the
  // feature; the plain module stays as the fallback.
  bool subgroups = true;
};

// Separates a kernel's plain module from its subgroups variant in the code.
inline constexpr char kSubgroupsMarker[] = "// --- the same kernel with subgroup operations ---\n";

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump = {});

}  // namespace accy::wgsl

#endif  // ACCY_COMPILER_CODEGEN_WGSL_COMPILE_H_
