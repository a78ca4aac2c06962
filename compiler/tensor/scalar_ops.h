// Element semantics of every scalar op, in double precision, shared by the
// reference evaluator and by compile-time constant folding. Floating values
// are computed in double; integer and bool values are exact integers held in
// doubles (i64 exactly up to 2^53) with the wrap-around, truncating division
// and saturating casts described in docs/SEMANTICS.md.
#ifndef ACCY_COMPILER_TENSOR_SCALAR_OPS_H_
#define ACCY_COMPILER_TENSOR_SCALAR_OPS_H_

#include <cstdint>
#include <utility>

#include "compiler/tensor/program.h"

namespace accy::tensor {

// Result of a Unary op on `a` of `dtype`.
double applyUnary(OpCode op, DType dtype, double a);
// Result of a Binary or Compare op on operands of `dtype`. Compare ops give
// 1 or 0.
double applyBinary(OpCode op, DType dtype, double a, double b);
// Converts a value held for dtype `from` to dtype `to` (cast semantics).
double convertValue(double v, DType from, DType to);
// The value whose bits are those of `v` held for `from` (bitcast between
// dtypes of one width; i64 values beyond 2^53 are as exact as the
// evaluator's doubles hold them).
double bitcastValue(double v, DType from, DType to);
// Random123's Threefry-2x32 with 20 rounds: the two words of the
// encryption of counter (c0, c1) under key (k0, k1).
std::pair<uint32_t, uint32_t> threefry2x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1);
// `v` as an int64, saturating at the int64 range (which doubles cannot
// represent exactly at its top) and mapping NaN to 0: the one safe way to
// turn an evaluator value into a machine integer.
int64_t toInt64(double v);
// base^exponent of docs/SEMANTICS.md, wrapping in 64 bits: a negative
// exponent gives 1 for base 1, +-1 for base -1 (by parity), 0 otherwise.
// The x86-64 kernels call it through their runtime table.
int64_t intPow(int64_t base, int64_t exponent);

// Folds `v` into the range of an integer or bool dtype by wrapping; floats
// are returned unchanged.
double wrapToDType(double v, DType dtype);

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_SCALAR_OPS_H_
