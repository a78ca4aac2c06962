// The ops type of compiler/codegen/math/elementary.h over SPIR-V SSA ids
// (target.cc instantiates the exact-mode elementary functions
// with it).
#ifndef ACCY_COMPILER_CODEGEN_SPIRV_SPIRV_OPS_H_
#define ACCY_COMPILER_CODEGEN_SPIRV_SPIRV_OPS_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <vector>

#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/spirv/module_builder.h"

namespace accy::spirv {

// The ops type of compiler/codegen/math/elementary.h over SPIR-V SSA ids:
// exact-mode transcendentals as instruction sequences. Arithmetic results
// are decorated NoContraction so that no compiler fuses the error-free
// transformations the algorithms rely on; fma is a separate multiply and
// add (Vulkan does not promise a fused one).
class SpirvOps {
 public:
  using Vec = uint32_t;
  using Mask = uint32_t;

  SpirvOps(ModuleBuilder& b, uint32_t float_type, uint32_t uint_type, bool f64)
      : b_(b), f_(float_type), u_(uint_type), f64_(f64) {}

  const math::LaneMath& c() const { return f64_ ? math::kF64 : math::kF32; }
  bool fusedMultiplyAdd() const { return false; }

  Vec num(double v) { return b_.constantBits(f_, math::laneBits(v, f64_), f64_ ? 64 : 32); }
  Vec bits(uint64_t b) { return b_.constantBits(f_, f64_ ? b : (b & 0xffffffffu), f64_ ? 64 : 32); }
  Vec zero() { return num(0.0); }

  Vec add(Vec a, Vec b) { return exact(op::FAdd, {a, b}); }
  Vec sub(Vec a, Vec b) { return exact(op::FSub, {a, b}); }
  Vec mul(Vec a, Vec b) { return exact(op::FMul, {a, b}); }
  Vec div(Vec a, Vec b) { return exact(op::FDiv, {a, b}); }
  Vec fma(Vec a, Vec b, Vec c) { return add(mul(a, b), c); }
  Vec neg(Vec a) { return b_.value(op::FNegate, f_, {a}); }
  Vec abs(Vec a) { return bitAnd(a, bits(~c().sign_mask & (f64_ ? ~uint64_t{0} : 0xffffffffu))); }
  // To nearest, ties to even. f32 through GLSL's RoundEven. f64 by adding
  // and subtracting 2^52 to |a| (the add rounds to nearest even, exactly
  // where |a| < 2^52; larger values are integers already), then a's sign
  // (round(-0.3) is -0): lavapipe's f64 RoundEven rounds ties up on x86-64
  // hosts without AVX-512 (round(-1.5) gave -1 on an AMD EPYC with AVX2),
  // and the IEEE additions give the same result on every device.
  Vec round(Vec a) {
    if (!f64_) return b_.value(op::ExtInst, f_, {b_.importGlsl(), 2 /* RoundEven */, a});
    const Vec big = num(4503599627370496.0);  // 2^52
    const Vec mag = abs(a);
    const Vec near = sub(add(mag, big), big);
    const Vec rounded = select(cmp(math::Cmp::kLt, mag, big), near, mag);
    return bitOr(rounded, bitAnd(a, bits(c().sign_mask)));
  }
  Vec minRaw(Vec a, Vec b) { return b_.value(op::Select, f_, {b_.value(op::FOrdLessThan, b_.typeBool(), {a, b}), a, b}); }
  Vec maxRaw(Vec a, Vec b) {
    return b_.value(op::Select, f_, {b_.value(op::FOrdGreaterThan, b_.typeBool(), {a, b}), a, b});
  }
  Vec bitAnd(Vec a, Vec b) { return integer(199, a, b); }
  Vec bitOr(Vec a, Vec b) { return integer(197, a, b); }
  Vec bitXor(Vec a, Vec b) { return integer(198, a, b); }
  Vec intAdd(Vec a, Vec b) { return integer(op::IAdd, a, b); }
  Vec shl(Vec a, int n) { return shift(196, a, n); }
  Vec shr(Vec a, int n) { return shift(op::ShiftRightLogical, a, n); }

  Mask cmp(math::Cmp p, Vec a, Vec b) {
    static constexpr uint16_t kOps[] = {op::FOrdLessThan, op::FOrdLessThanEqual, op::FOrdGreaterThan,
                                        op::FOrdGreaterThanEqual, op::FOrdEqual, op::FUnordNotEqual};
    return b_.value(kOps[static_cast<int>(p)], b_.typeBool(), {a, b});
  }
  Mask both(Mask a, Mask b) { return b_.value(op::LogicalAnd, b_.typeBool(), {a, b}); }
  Mask either(Mask a, Mask b) { return b_.value(op::LogicalOr, b_.typeBool(), {a, b}); }
  Vec select(Mask m, Vec t, Vec f) { return b_.value(op::Select, f_, {m, t, f}); }

  Vec horner(Vec x, std::span<const double> coefficients) { return math::hornerByFma(*this, x, coefficients); }

  // Runs `body` only in invocations where `m` is set (a structured
  // selection); `body` replaces values of `vars`, which hold the
  // replacements afterwards. The values pass through function variables.
  template <class F>
  void whenAny(Mask m, std::span<Vec> vars, F&& body) {
    std::vector<uint32_t> slots;
    for (Vec v : vars) {
      slots.push_back(b_.localVariable(b_.typePointer(kFunction, f_)));
      b_.inst(op::Store, {slots.back(), v});
    }
    const uint32_t then = b_.id(), merge = b_.id();
    b_.inst(op::SelectionMerge, {merge, 0});
    b_.inst(op::BranchConditional, {m, then, merge});
    b_.label(then);
    body();
    for (size_t i = 0; i < vars.size(); ++i) b_.inst(op::Store, {slots[i], vars[i]});
    b_.inst(op::Branch, {merge});
    b_.label(merge);
    for (size_t i = 0; i < vars.size(); ++i) vars[i] = b_.value(op::Load, f_, {slots[i]});
  }

 private:
  Vec exact(uint16_t opcode, std::initializer_list<uint32_t> args) {
    const uint32_t v = b_.value(opcode, f_, args);
    b_.decorate(v, {42 /* NoContraction */});
    return v;
  }
  Vec integer(uint16_t opcode, Vec a, Vec b) {
    const uint32_t x = b_.value(op::Bitcast, u_, {a});
    const uint32_t y = b_.value(op::Bitcast, u_, {b});
    return b_.value(op::Bitcast, f_, {b_.value(opcode, u_, {x, y})});
  }
  Vec shift(uint16_t opcode, Vec a, int n) {
    const uint32_t x = b_.value(op::Bitcast, u_, {a});
    const uint32_t amount = b_.constantBits(b_.typeInt(32, false), static_cast<uint32_t>(n), 32);
    return b_.value(op::Bitcast, f_, {b_.value(opcode, u_, {x, amount})});
  }

  ModuleBuilder& b_;
  uint32_t f_, u_;
  bool f64_;
};

}  // namespace accy::spirv

#endif  // ACCY_COMPILER_CODEGEN_SPIRV_SPIRV_OPS_H_
