// The fusion limits of the CPU targets (x86-64 and WebAssembly): the
// defaults, and a cheap producer read under a broadcast (an operand of a
// product) is stored once its recomputation passes 64 nodes per element,
// so that products read plain loads and take the blocked microkernel
// (x86_64/kernel_emitter.h, Product; wasm's products alike).
#ifndef ACCY_COMPILER_CODEGEN_CPU_FUSE_LIMITS_H_
#define ACCY_COMPILER_CODEGEN_CPU_FUSE_LIMITS_H_

#include "compiler/choir/pipeline.h"

namespace accy::codegen {

inline choir::FuseLimits cpuFuseLimits() {
  choir::FuseLimits limits;
  limits.max_recomputed_nodes = 64;
  return limits;
}

}  // namespace accy::codegen

#endif  // ACCY_COMPILER_CODEGEN_CPU_FUSE_LIMITS_H_
