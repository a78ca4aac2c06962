// The ops type of compiler/codegen/math/elementary.h over WebAssembly
// locals: each value is a local (f32/f64 in scalar code, v128 holding
// f32x4 or f64x2 lanes in vector loops), each operation reads its operands
// with local.get and keeps its result with local.set, and the engine
// allocates registers. WebAssembly arithmetic is IEEE with no contraction,
// so the error-free transformations hold; there is no fused multiply-add
// outside relaxed SIMD (not deterministic), so fma is a multiply and an add.
#ifndef ACCY_COMPILER_CODEGEN_WASM_WASM_OPS_H_
#define ACCY_COMPILER_CODEGEN_WASM_WASM_OPS_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/wasm/encoder.h"

namespace accy::wasm {

// Constants of a function, each made once in its prologue and kept in a
// local (a v128.const in a vector loop would otherwise be rematerialized on
// every iteration by some engines).
class ConstantPool {
 public:
  explicit ConstantPool(FunctionBody& f) : f_(f) {}
  // A local of type `t` holding `bits` (for v128: the 64-bit pattern in
  // both halves, or the 32-bit one in every lane when `lane_bits` is 32).
  uint32_t get(ValType t, uint64_t bits, int lane_bits);
  const std::vector<uint8_t>& prologue() const { return prologue_; }

 private:
  FunctionBody& f_;
  std::map<std::tuple<ValType, uint64_t, int>, uint32_t> locals_;
  std::vector<uint8_t> prologue_;
};

class WasmOps {
 public:
  using Vec = uint32_t;
  using Mask = uint32_t;

  // `f64`: the lane type; `vector`: v128 lanes (f32x4 or f64x2), else one
  // scalar.
  WasmOps(FunctionBody& f, ConstantPool& pool, bool f64, bool vector)
      : f_(f), pool_(pool), f64_(f64), vector_(vector) {}

  const math::LaneMath& c() const { return f64_ ? math::kF64 : math::kF32; }
  bool fusedMultiplyAdd() const { return false; }

  Vec num(double v) { return bits(math::laneBits(v, f64_)); }
  Vec bits(uint64_t b) {
    return pool_.get(vector_ ? ValType::kV128 : (f64_ ? ValType::kF64 : ValType::kF32),
                     f64_ ? b : (b & 0xffffffffu), f64_ ? 64 : 32);
  }
  Vec zero() { return num(0.0); }

  Vec add(Vec a, Vec b) { return binary(a, b, op::kF32Add, op::kF64Add, simd::kF32x4Add, simd::kF64x2Add); }
  Vec sub(Vec a, Vec b) { return binary(a, b, op::kF32Sub, op::kF64Sub, simd::kF32x4Sub, simd::kF64x2Sub); }
  Vec mul(Vec a, Vec b) { return binary(a, b, op::kF32Mul, op::kF64Mul, simd::kF32x4Mul, simd::kF64x2Mul); }
  Vec div(Vec a, Vec b) { return binary(a, b, op::kF32Div, op::kF64Div, simd::kF32x4Div, simd::kF64x2Div); }
  Vec fma(Vec a, Vec b, Vec c) { return add(mul(a, b), c); }
  Vec neg(Vec a) { return unary(a, op::kF32Neg, op::kF64Neg, simd::kF32x4Neg, simd::kF64x2Neg); }
  Vec abs(Vec a) { return unary(a, op::kF32Abs, op::kF64Abs, simd::kF32x4Abs, simd::kF64x2Abs); }
  Vec sqrt(Vec a) { return unary(a, op::kF32Sqrt, op::kF64Sqrt, simd::kF32x4Sqrt, simd::kF64x2Sqrt); }
  Vec round(Vec a) {
    return unary(a, op::kF32Nearest, op::kF64Nearest, simd::kF32x4Nearest, simd::kF64x2Nearest);
  }
  // NaN-propagating minimum and maximum (WebAssembly's min and max).
  Vec min(Vec a, Vec b) { return binary(a, b, op::kF32Min, op::kF64Min, simd::kF32x4Min, simd::kF64x2Min); }
  Vec max(Vec a, Vec b) { return binary(a, b, op::kF32Max, op::kF64Max, simd::kF32x4Max, simd::kF64x2Max); }
  Vec minRaw(Vec a, Vec b) { return select(cmp(math::Cmp::kLt, a, b), a, b); }
  Vec maxRaw(Vec a, Vec b) { return select(cmp(math::Cmp::kGt, a, b), a, b); }
  Vec bitAnd(Vec a, Vec b) { return integer(a, b, op::kI32And, op::kI64And, simd::kAnd); }
  Vec bitOr(Vec a, Vec b) { return integer(a, b, op::kI32Or, op::kI64Or, simd::kOr); }
  Vec bitXor(Vec a, Vec b) { return integer(a, b, op::kI32Xor, op::kI64Xor, simd::kXor); }
  Vec intAdd(Vec a, Vec b) {
    return integer(a, b, op::kI32Add, op::kI64Add, f64_ ? simd::kI64x2Add : simd::kI32x4Add);
  }
  Vec shl(Vec a, int n) { return shift(a, n, op::kI32Shl, op::kI64Shl, simd::kI32x4Shl, simd::kI64x2Shl); }
  Vec shr(Vec a, int n) { return shift(a, n, op::kI32ShrU, op::kI64ShrU, simd::kI32x4ShrU, simd::kI64x2ShrU); }

  Mask cmp(math::Cmp p, Vec a, Vec b);
  Mask both(Mask a, Mask b) { return maskOp(a, b, op::kI32And); }
  Mask either(Mask a, Mask b) { return maskOp(a, b, op::kI32Or); }
  Vec select(Mask m, Vec t, Vec f);

  Vec horner(Vec x, std::span<const double> coefficients) { return math::hornerByFma(*this, x, coefficients); }

  // `body` runs only when some lane of `m` is set (a branch); the values it
  // leaves in `vars` are copied back into their locals.
  template <class F>
  void whenAny(Mask m, std::span<Vec> vars, F&& body) {
    std::vector<Vec> before(vars.begin(), vars.end());
    f_.get(m);
    if (vector_) f_.simdOp(simd::kAnyTrue);
    f_.ifThen();
    body();
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i] != before[i]) {
        f_.get(vars[i]);
        f_.set(before[i]);
      }
    }
    f_.end();
    for (size_t i = 0; i < vars.size(); ++i) vars[i] = before[i];
  }

  ValType laneType() const { return vector_ ? ValType::kV128 : (f64_ ? ValType::kF64 : ValType::kF32); }
  ValType maskType() const { return vector_ ? ValType::kV128 : ValType::kI32; }

 private:
  Vec keep(ValType t) {
    const uint32_t r = f_.local(t);
    f_.set(r);
    return r;
  }
  Vec unary(Vec a, uint8_t f32, uint8_t f64, uint32_t v32, uint32_t v64);
  Vec binary(Vec a, Vec b, uint8_t f32, uint8_t f64, uint32_t v32, uint32_t v64);
  Vec integer(Vec a, Vec b, uint8_t i32, uint8_t i64, uint32_t v);
  Vec shift(Vec a, int n, uint8_t i32, uint8_t i64, uint32_t v32, uint32_t v64);
  Mask maskOp(Mask a, Mask b, uint8_t i32);

  FunctionBody& f_;
  ConstantPool& pool_;
  bool f64_, vector_;
};

}  // namespace accy::wasm

#endif  // ACCY_COMPILER_CODEGEN_WASM_WASM_OPS_H_
