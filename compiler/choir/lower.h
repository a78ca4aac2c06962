// Lowering: tensor::Program -> Choir module, one kernel per op that needs
// memory of its own.
//
// Layout ops that only re-index (transpose, rename, broadcast, slice,
// split), constants, iota and inputs become index arithmetic at their uses;
// every other op gets a kernel writing a buffer: a loop nest over the
// result's axes for elementwise ops, a kReduce for reductions and dot, a
// loop nest over the operand's axes for merge, one nest per piece for
// concat. Outputs are written straight into output buffers. Dead nodes are
// dropped. The fusion pass then merges kernels.
#ifndef ACCY_COMPILER_CHOIR_LOWER_H_
#define ACCY_COMPILER_CHOIR_LOWER_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/tensor/program.h"

namespace accy::choir {

struct LowerOptions {
  // scatter_add as an ordered scatter into sums (a store at data-dependent
  // positions under a serial loop over the indices): what CPU targets run.
  // Off, the target-neutral form: a reduction per element over every index.
  bool serial_scatter = false;
  // GPU targets (serial_scatter off): scatter_add by ranges of rows, one
  // invocation per range and column walking the indices in order (a
  // guarded store), when that reads fewer indices than the reduction form
  // and the walk is at most this long (a device's loop limit: llvmpipe's).
  // 0: never.
  int64_t scatter_range_walk = 0;
};

// The GPU form of scatter_add cuts the rows of x's axis into ranges so that
// ranges x columns (x's other elements) reaches kScatterInvocations, with at
// most kMaxScatterRanges ranges.
inline constexpr int64_t kScatterInvocations = 16384;
inline constexpr int64_t kMaxScatterRanges = 1024;

absl::StatusOr<Module> lowerProgram(const tensor::Program& program, const LowerOptions& options = {});

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_LOWER_H_
