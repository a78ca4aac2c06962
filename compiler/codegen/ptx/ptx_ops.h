// The ops type of compiler/codegen/math/elementary.h over PTX virtual
// registers: exact-mode transcendentals as instruction sequences.
//
// Every floating operation carries an explicit rounding modifier (add.rn,
// mul.rn, ...): PTX lets the assembler contract a multiply and an add
// without one into an fma, which would break the error-free
// transformations the algorithms rely on. fma is the real fused fma.rn, so
// fusedMultiplyAdd() is true: twoProd takes one fma instead of Dekker's
// split product. No .ftz: subnormal inputs and results are kept, as on the
// x86-64 emitter with the default MXCSR. Bit operations move the value to
// an integer register and back (ptxas removes the moves).
#ifndef ACCY_COMPILER_CODEGEN_PTX_PTX_OPS_H_
#define ACCY_COMPILER_CODEGEN_PTX_PTX_OPS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/ptx/emitter.h"

namespace accy::ptx {

class PtxOps {
 public:
  using Vec = std::string;
  using Mask = std::string;

  PtxOps(Emitter& e, bool f64) : e_(e), f64_(f64) {}

  const math::LaneMath& c() const { return f64_ ? math::kF64 : math::kF32; }
  bool fusedMultiplyAdd() const { return true; }

  Vec num(double v) {
    Vec d = freg();
    e_.ins("mov", t(), " ", d, ", ", f64_ ? f64Literal(v) : f32Literal(static_cast<float>(v)));
    return d;
  }
  Vec bits(uint64_t b) {
    Vec d = freg();
    e_.ins("mov", bt(), " ", d, ", ", absl::StrFormat("0x%X", f64_ ? b : (b & 0xffffffffu)));
    return d;
  }
  Vec zero() { return num(0.0); }

  Vec add(const Vec& a, const Vec& b) { return bin("add.rn", a, b); }
  Vec sub(const Vec& a, const Vec& b) { return bin("sub.rn", a, b); }
  Vec mul(const Vec& a, const Vec& b) { return bin("mul.rn", a, b); }
  Vec div(const Vec& a, const Vec& b) { return bin("div.rn", a, b); }
  Vec fma(const Vec& a, const Vec& b, const Vec& c) {
    Vec d = freg();
    e_.ins("fma.rn", t(), " ", d, ", ", a, ", ", b, ", ", c);
    return d;
  }
  Vec neg(const Vec& a) { return un("neg", a); }
  Vec abs(const Vec& a) { return un("abs", a); }
  Vec round(const Vec& a) { return un(f64_ ? "cvt.rni.f64" : "cvt.rni.f32", a); }
  // The second operand when either is NaN (the comparison is false).
  Vec minRaw(const Vec& a, const Vec& b) { return select(cmp(math::Cmp::kLt, a, b), a, b); }
  Vec maxRaw(const Vec& a, const Vec& b) { return select(cmp(math::Cmp::kGt, a, b), a, b); }

  Vec bitAnd(const Vec& a, const Vec& b) { return integer("and", bt(), a, b); }
  Vec bitOr(const Vec& a, const Vec& b) { return integer("or", bt(), a, b); }
  Vec bitXor(const Vec& a, const Vec& b) { return integer("xor", bt(), a, b); }
  Vec intAdd(const Vec& a, const Vec& b) { return integer("add", f64_ ? ".s64" : ".s32", a, b); }
  Vec shl(const Vec& a, int n) { return shift("shl", bt(), a, n); }
  Vec shr(const Vec& a, int n) { return shift("shr", f64_ ? ".u64" : ".u32", a, n); }

  Mask cmp(math::Cmp p, const Vec& a, const Vec& b) {
    static constexpr const char* kOps[] = {"lt", "le", "gt", "ge", "eq", "neu"};
    Mask m = e_.reg(RegClass::kPred);
    e_.ins("setp.", kOps[static_cast<int>(p)], t(), " ", m, ", ", a, ", ", b);
    return m;
  }
  Mask both(const Mask& a, const Mask& b) { return pred("and", a, b); }
  Mask either(const Mask& a, const Mask& b) { return pred("or", a, b); }
  Vec select(const Mask& m, const Vec& yes, const Vec& no) {
    Vec d = freg();
    e_.ins("selp", t(), " ", d, ", ", yes, ", ", no, ", ", m);
    return d;
  }

  // Runs `body` only in threads where `m` is set; `body` replaces values of
  // `vars`, which hold the replacements afterwards.
  template <class F>
  void whenAny(const Mask& m, std::span<Vec> vars, F&& body) {
    std::vector<Vec> keep;
    for (Vec& v : vars) {
      keep.push_back(freg());
      e_.ins("mov", t(), " ", keep.back(), ", ", v);
      v = keep.back();
    }
    const std::string skip = e_.label();
    e_.ins("@!", m, " bra ", skip);
    body();
    for (size_t i = 0; i < vars.size(); ++i) {
      e_.ins("mov", t(), " ", keep[i], ", ", vars[i]);
      vars[i] = keep[i];
    }
    e_.place(skip);
  }

  Vec horner(const Vec& x, std::span<const double> coefficients) { return math::hornerByFma(*this, x, coefficients); }

 private:
  const char* t() const { return f64_ ? ".f64" : ".f32"; }
  const char* bt() const { return f64_ ? ".b64" : ".b32"; }
  Vec freg() { return e_.reg(f64_ ? RegClass::kF64 : RegClass::kF32); }
  Vec ireg() { return e_.reg(f64_ ? RegClass::kB64 : RegClass::kB32); }
  Vec bin(const char* op, const Vec& a, const Vec& b) {
    Vec d = freg();
    e_.ins(op, t(), " ", d, ", ", a, ", ", b);
    return d;
  }
  Vec un(const char* op, const Vec& a) {
    Vec d = freg();
    e_.ins(op, t(), " ", d, ", ", a);
    return d;
  }
  Vec toInt(const Vec& a) {
    Vec r = ireg();
    e_.ins("mov", bt(), " ", r, ", ", a);
    return r;
  }
  Vec toFloat(const Vec& r) {
    Vec d = freg();
    e_.ins("mov", bt(), " ", d, ", ", r);
    return d;
  }
  Vec integer(const char* op, const char* type, const Vec& a, const Vec& b) {
    Vec x = toInt(a), y = toInt(b), r = ireg();
    e_.ins(op, type, " ", r, ", ", x, ", ", y);
    return toFloat(r);
  }
  Vec shift(const char* op, const char* type, const Vec& a, int n) {
    Vec x = toInt(a), r = ireg();
    e_.ins(op, type, " ", r, ", ", x, ", ", n);
    return toFloat(r);
  }
  Mask pred(const char* op, const Mask& a, const Mask& b) {
    Mask m = e_.reg(RegClass::kPred);
    e_.ins(op, ".pred ", m, ", ", a, ", ", b);
    return m;
  }

  Emitter& e_;
  bool f64_;
};

}  // namespace accy::ptx

#endif  // ACCY_COMPILER_CODEGEN_PTX_PTX_OPS_H_
