// Inline vector math: sin, cos, exp, log, tanh, sigmoid and pow emitted as
// polynomial instruction sequences (no calls into libm; sin and cos call a
// host function for arguments beyond their fast range), for f32 and f64
// lanes at every width a Simd supports, scalar included.
//
// Each function emits f(a) lane-wise and returns the register holding it
// (a fresh one, or a hoisted constant's: read it, never write it); inputs
// are not modified. Accuracy, ranges and the behaviour for inf and NaN are
// measured by math_test.cc and recorded in docs/MATH_ACCURACY.md.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_MATH_H_
#define ACCY_COMPILER_CODEGEN_X86_64_MATH_H_

#include <optional>

#include "compiler/codegen/x86_64/simd.h"
#include "compiler/tensor/program.h"

namespace accy::x64 {

// sin and cos call the runtime table (runtime.h) held in `runtime` for
// arguments beyond the fast range (|x| > 8192 for f32, 2^20 for f64).
asmjit::x86::Vec emitSin(Simd& s, asmjit::x86::Vec a, asmjit::x86::Gp runtime);
asmjit::x86::Vec emitCos(Simd& s, asmjit::x86::Vec a, asmjit::x86::Gp runtime);
asmjit::x86::Vec emitExp(Simd& s, asmjit::x86::Vec a);
asmjit::x86::Vec emitLog(Simd& s, asmjit::x86::Vec a);
asmjit::x86::Vec emitTanh(Simd& s, asmjit::x86::Vec a);
// 1 / (1 + exp(-a))
asmjit::x86::Vec emitSigmoid(Simd& s, asmjit::x86::Vec a);
// a^b with the C pow conventions for the cases listed in MATH_ACCURACY.md.
asmjit::x86::Vec emitPow(Simd& s, asmjit::x86::Vec a, asmjit::x86::Vec b);
// The elementary function of `op` (the op table's Elementary column) through
// compiler/codegen/semantics/op_semantics.h's one dispatch; nullopt for an
// op without one. `b` is pow's exponent.
std::optional<asmjit::x86::Vec> emitElementary(Simd& s, tensor::OpCode op, asmjit::x86::Vec a, asmjit::x86::Vec b,
                                               asmjit::x86::Gp runtime);

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_MATH_H_
