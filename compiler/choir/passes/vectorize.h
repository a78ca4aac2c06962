// Vectorization: tags innermost loops whose body can run as SIMD lanes.
#ifndef ACCY_COMPILER_CHOIR_PASSES_VECTORIZE_H_
#define ACCY_COMPILER_CHOIR_PASSES_VECTORIZE_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// The ops an i32 vector loop may hold (VectorizeOptions::int32): add, sub,
// mul, neg, abs, max, min, where and comparisons, derived from the op
// table (cheap elementwise ops that take i32).
bool int32LaneOp(OpCode op);

struct VectorizeOptions {
  int vector_bytes = 16;  // the target's widest vector register
  // Also i32 loops whose values are i32 and whose ops are add, sub, mul,
  // neg, abs, max, min, where and comparisons (a target with i32 vector
  // lanes for them: wasm's i32x4).
  bool int32 = false;
  // Also `where(c, t, f)` whose condition c is the same along the loop (a
  // row's flag read from data, a comparison of its index): c is computed
  // once per step as a scalar, of any dtype, and fills a lane mask (a
  // target whose walker has uniformMask).
  bool uniform_conditions = false;
  // Also 4-byte lanes of mixed dtype (a target with 32-bit integer lanes
  // beside its f32 lanes: x86-64): f32, i32 and u32 values in one store
  // loop, or under an f32 reduction, with the cheap integer ops (as
  // `int32`, on u32 too), bit operations, shifts by a constant count,
  // bitcasts among the three, casts between i32 and u32 and from either to
  // f32, Threefry words, and index values of i32 or u32 (the lanes hold
  // consecutive positions).
  bool lanes32 = false;
  // Also (with lanes32) loads whose positions change along the loop (a
  // take along the vector axis: out[i] = x[idx[i]]): a 4-byte value read
  // at a position whose data-dependent part is i32 in lanes, with every
  // coefficient of the loop's and the load's bound variables non-negative
  // and their largest contribution below 2^31 elements (a target that
  // gathers lanes by 32-bit offsets: x86-64 with AVX2 or AVX-512); and
  // 4-byte loads that walk the loop with a stride past 1 (a column of a
  // row-major value), gathered at constant offsets; f64 loads of such a
  // stride in f64 lanes too.
  bool gathers = false;
};

// An innermost store loop, or the innermost loop of a reduction domain, is
// tagged kVectorized with vector_bytes / element-size lanes when: every
// value in the statement is f32, or every value is f64, or (with `int32`)
// every value is i32 under the ops above (comparisons giving bool may feed
// `where`), or (with `lanes32`) every value is f32, i32 or u32 under the
// ops listed there; it has no index values or casts (but those `lanes32`
// lists); every load walks
// the loop's variable with stride 0 or 1; a store walks it with stride 1;
// and the extent is at least one vector. The vector is the target's widest,
// or narrower (down to 16 bytes) for a loop shorter than the widest. The
// emitter adds the tail.
absl::StatusOr<Module> vectorizeLoops(Module module, const VectorizeOptions& options);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_VECTORIZE_H_
