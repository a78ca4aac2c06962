// CPU parallelism: marks a kernel's outermost loop to be split across the
// thread pool when the kernel does enough work to pay for it.
#ifndef ACCY_COMPILER_CHOIR_PASSES_PARALLELIZE_H_
#define ACCY_COMPILER_CHOIR_PASSES_PARALLELIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

struct ParallelizeOptions {
  int threads = 1;                           // 1 disables the pass
  int64_t min_points = int64_t{1} << 15;     // iteration points per kernel
};

// Tags the outermost loop kCpuParallel when the kernel body is one loop of
// extent >= 2 and the kernel visits at least min_points iteration points
// (reduction domains included). Iterations of such a loop touch disjoint
// outputs, which lowering guarantees: the loop indexes the stored buffer.
// A kernel that is a single vectorized loop is first split into tiles (a
// divisor of its extent, at most 256) so the tile loop can go parallel.
// A kernel whose outer loop may write one element twice (a scatter's serial
// loop over its indices) has the row its inner loop walks split into parts
// instead, the parts loop outermost and parallel (each element is still
// written by one thread, in the serial loop's order).
absl::StatusOr<Module> parallelizeLoops(Module module, const ParallelizeOptions& options);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_PARALLELIZE_H_
