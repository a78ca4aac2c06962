// Element semantics of every scalar op, in double precision, shared by the
// reference evaluator and by compile-time constant folding. Floating values
// are computed in double; integer and bool values are exact integers held in
// doubles (i64 exactly up to 2^53) with the wrap-around, truncating division
// and saturating casts described in docs/SEMANTICS.md.
#ifndef ACCY_COMPILER_TENSOR_SCALAR_OPS_H_
#define ACCY_COMPILER_TENSOR_SCALAR_OPS_H_

#include <cstdint>

#include "compiler/tensor/program.h"

namespace accy::tensor {

// Result of a Unary op on `a` of `dtype`.
double applyUnary(OpCode op, DType dtype, double a);
// Result of a Binary or Compare op on operands of `dtype`. Compare ops give
// 1 or 0.
double applyBinary(OpCode op, DType dtype, double a, double b);
// Converts a value held for dtype `from` to dtype `to` (cast semantics).
double convertValue(double v, DType from, DType to);
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
