// CPU parallelism: marks a kernel's outermost loop to be split across the
// thread pool when the kernel does enough work to pay for it.
#ifndef ACCY_COMPILER_CHOIR_PASSES_PARALLELIZE_H_
#define ACCY_COMPILER_CHOIR_PASSES_PARALLELIZE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// How a scatter's serial loop over its indices is split across threads;
// both keep each element's additions in the serial loop's order, from one
// thread (the same bits at every thread count).
enum class ScatterSplit : uint8_t {
  // Each thread its part of the row the inner loop walks, for every index.
  kColumns,
  // Each thread the indices whose element falls in its range of the stored
  // axis, whole rows: every thread reads every index, and no two threads
  // write neighbouring parts of one row.
  kRanges,
};

struct ParallelizeOptions {
  int threads = 1;                           // 1 disables the pass
  int64_t min_points = int64_t{1} << 15;     // iteration points per kernel
  ScatterSplit scatter_split = ScatterSplit::kColumns;
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
// written by one thread, in the serial loop's order); with
// ScatterSplit::kRanges, the stored axis is cut into ranges instead, each
// thread's store guarded by its range.
absl::StatusOr<Module> parallelizeLoops(Module module, const ParallelizeOptions& options);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_PARALLELIZE_H_
