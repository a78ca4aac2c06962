// GPU mapping: chooses, for each kernel, how its loops map onto workgroups
// and invocations, from device limits. Shared by every GPU target (SPIR-V
// now, PTX next); nothing here names an API.
#ifndef ACCY_COMPILER_CHOIR_PASSES_GPU_MAP_H_
#define ACCY_COMPILER_CHOIR_PASSES_GPU_MAP_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

struct GpuMapOptions {
  int64_t max_workgroup_size = 128;     // device limit on invocations per workgroup
  int64_t min_domain_for_tree = 256;    // reductions at least this long cooperate...
  int64_t max_outputs_for_tree = 4096;  // ...when they have at most this many outputs
};

// Every kernel must be a perfect loop nest ending in one store or one
// reduction (what lowering and fusion produce). The workgroup size is the
// largest power of two within the device limit (at most 256).
//  - Store nests: every loop is tagged kGpuThread (dimension 0); the nest is
//    flattened onto the global invocation index, with a grid-stride loop
//    and a bounds guard for any extent.
//  - Reductions with few outputs and long domains: the output loops are
//    tagged kGpuBlock (one workgroup per output, grid-stride), the domain
//    loops kGpuThread: the workgroup's invocations split the domain and
//    combine in a workgroup-shared-memory tree.
//  - Other reductions: one invocation per output (output loops kGpuThread),
//    the domain sequential.
// Anything else fails with Unimplemented naming the kernel.
absl::StatusOr<Module> mapToGpu(Module module, const GpuMapOptions& options);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_GPU_MAP_H_
