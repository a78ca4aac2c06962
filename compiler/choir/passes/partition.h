// Boundary partitioning (index-set splitting): splits a loop at the
// iterations where the tests in its body that compare a position with a
// bound (pad's guards, the clamps of pad and window positions) change from
// undecided to decided, so that each piece knows their outcome and reads
// plain affine positions: a padded convolution's interior becomes a
// product of affine loads, its edges loops with constant guards.
#ifndef ACCY_COMPILER_CHOIR_PASSES_PARTITION_H_
#define ACCY_COMPILER_CHOIR_PASSES_PARTITION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

struct PartitionOptions {
  // Pieces one loop splits into, at most.
  int max_pieces = 5;
  // Copies of a kernel's loop nests the splitting may add, at most (code
  // size).
  int max_copies = 64;
  // A kernel's outermost loop splits only from this extent on, into one
  // kernel per piece (each keeps its own loop to split across threads).
  int64_t min_outer_extent = 32;
};

// For each serial loop (a kernel's outermost one splits into one kernel
// per piece, so that each keeps a loop for the threads), the tests in its body of the forms
//   cmp(index(a), K)  (cmp one of >=, >, <, <=)   and   clamp(index(a), hi)
// where a is affine in loop variables of known ranges, give the points
// where the loop's variable makes each test always true or always false.
// The loop becomes one loop per piece between those points (its variable
// renamed and offset), each piece with the tests it decides folded: a
// decided comparison is a constant, a select on a constant its branch, a
// clamp that cannot clip its operand (or always clips it) that operand
// (or the bound), and a load whose clamped position became affine a plain
// affine load. Results are bitwise the same: only decided tests fold.
absl::StatusOr<Module> partitionBoundaries(Module module, const PartitionOptions& options = {});

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_PARTITION_H_
