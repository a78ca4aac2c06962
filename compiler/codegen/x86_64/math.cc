#include "compiler/codegen/x86_64/math.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/codegen/x86_64/runtime.h"

namespace accy::x64 {

namespace {

namespace x86 = asmjit::x86;
using x86::Vec;

// Value-returning wrappers over Simd: every result is a fresh virtual
// register, which keeps the algorithms below readable and alias-free.
class Ops {
 public:
  using Vec = x86::Vec;
  using Mask = x64::Mask;
  // `runtime`: the register holding the runtime table (runtime.h), for the
  // calls out of line; unused by functions other than sin and cos.
  explicit Ops(Simd& s, x86::Gp runtime = x86::Gp())
      : s_(s), c_(s.lane() == Lane::kF32 ? math::kF32 : math::kF64), runtime_(runtime) {}

  const math::LaneMath& c() const { return c_; }
  bool fusedMultiplyAdd() const { return s_.isa() != Isa::kSse41; }

  // Constants are the hoisted registers themselves: read, never written.
  Vec num(double v) { return s_.constantValue(v); }
  Vec bits(uint64_t b) { return s_.constantBitsValue(b); }
  Vec zero() {
    Vec d = tmp();
    s_.zero(d);
    return d;
  }

  Vec add(Vec a, Vec b) { return bin(&Simd::add, a, b); }
  Vec sub(Vec a, Vec b) { return bin(&Simd::sub, a, b); }
  Vec mul(Vec a, Vec b) { return bin(&Simd::mul, a, b); }
  Vec div(Vec a, Vec b) { return bin(&Simd::div, a, b); }
  Vec bitAnd(Vec a, Vec b) { return bin(&Simd::bitAnd, a, b); }
  Vec bitOr(Vec a, Vec b) { return bin(&Simd::bitOr, a, b); }
  Vec bitXor(Vec a, Vec b) { return bin(&Simd::bitXor, a, b); }
  Vec intAdd(Vec a, Vec b) { return bin(&Simd::intAdd, a, b); }
  // NaN in `b` comes through; the hardware min/max return their second operand then.
  Vec minRaw(Vec a, Vec b) { return bin(&Simd::minRaw, a, b); }
  Vec maxRaw(Vec a, Vec b) { return bin(&Simd::maxRaw, a, b); }

  // a * b + c, rounded once where the ISA fuses it.
  Vec fma(Vec a, Vec b, Vec c) {
    Vec d = tmp();
    s_.fma(d, a, b, c);
    return d;
  }
  // The same where the caller reads `c` no more: a temporary of this Ops is
  // overwritten in place (no copy); anything else (an input, a constant) is
  // left alone.
  Vec fmaLast(Vec a, Vec b, Vec c) {
    if (!owned_.contains(c.id())) return fma(a, b, c);
    s_.fma(c, a, b, c);
    return c;
  }
  Vec abs(Vec a) { return un(&Simd::abs, a); }
  Vec neg(Vec a) { return un(&Simd::neg, a); }
  Vec round(Vec a) { return un(&Simd::round, a); }
  Vec shl(Vec a, int n) {
    Vec d = tmp();
    s_.intShl(d, a, n);
    return d;
  }
  Vec shr(Vec a, int n) {
    Vec d = tmp();
    s_.intShr(d, a, n);
    return d;
  }

  Mask cmp(math::Cmp p, Vec a, Vec b) {
    static constexpr x64::Cmp kMap[] = {x64::Cmp::kLt, x64::Cmp::kLe, x64::Cmp::kGt,
                                        x64::Cmp::kGe, x64::Cmp::kEq, x64::Cmp::kNe};
    return s_.cmp(kMap[static_cast<int>(p)], a, b);
  }
  Mask both(const Mask& a, const Mask& b) { return s_.maskAnd(a, b); }
  Mask either(const Mask& a, const Mask& b) { return s_.maskOr(a, b); }
  Vec select(const Mask& m, Vec t, Vec f) {
    Vec d = tmp();
    s_.select(d, m, t, f);
    return d;
  }

  // AVX-512's vpternlog (elementary.h's fallbacks otherwise).
  bool ternaryLogic() const { return s_.isa() == Isa::kAvx512; }
  Vec xorAnd(Vec a, Vec b, Vec m) { return ternary(a, b, m, 0xf0 ^ (0xcc & 0xaa), &Ops::bitXor, &Ops::bitAnd); }
  Vec orAnd(Vec a, Vec b, Vec m) { return ternary(a, b, m, 0xf0 | (0xcc & 0xaa), &Ops::bitOr, &Ops::bitAnd); }
  Vec xor3(Vec a, Vec b, Vec m) { return ternary(a, b, m, 0xf0 ^ 0xcc ^ 0xaa, &Ops::bitXor, &Ops::bitXor); }

  // c[0] + x * (c[1] + x * (...)), accumulated in one register.
  Vec horner(Vec x, std::span<const double> c) {
    if (c.size() == 1) return num(c[0]);
    Vec acc = fma(num(c.back()), x, num(c[c.size() - 2]));
    for (size_t i = c.size() - 2; i-- > 0;) s_.fma(acc, acc, x, num(c[i]));
    return acc;
  }

  // Runs `body` only when some lane of `m` is set; `body` replaces values
  // of `vars`, which hold the replacements afterwards. Constants in the
  // rarely taken body are loaded there, not hoisted into the loop's
  // registers.
  template <class F>
  void whenAny(const Mask& m, std::span<Vec> vars, F&& body) {
    std::vector<Vec> keep;
    for (Vec& v : vars) {
      keep.push_back(tmp());
      s_.mov(keep.back(), v);
      v = keep.back();
    }
    asmjit::Label skip = s_.cc().newLabel();
    s_.jumpIfNone(m, skip);
    Hoist* hoist = s_.hoist();
    s_.setHoist(nullptr);
    body();
    s_.setHoist(hoist);
    for (size_t i = 0; i < vars.size(); ++i) {
      s_.mov(keep[i], vars[i]);
      vars[i] = keep[i];
    }
    s_.cc().bind(skip);
  }

  // sin and cos's exact reduction, out of line: the lanes go through the
  // stack to the host function of the runtime table, which runs the same
  // algorithm (elementary.h over HostOps) on the lanes beyond the fast range.
  Vec sinCosLarge(Vec a, Vec fast, bool cosine) {
    x86::Compiler& cc = s_.cc();
    const int bytes = s_.lanes() * s_.laneBytes();
    const uint32_t align = static_cast<uint32_t>(bytes < 16 ? 16 : bytes);
    x86::Mem in = cc.newStack(static_cast<uint32_t>(bytes), align, "trig_in");
    x86::Mem out = cc.newStack(static_cast<uint32_t>(bytes), align, "trig_out");
    s_.store(in, a);
    s_.store(out, fast);
    x86::Gp in_ptr = cc.newIntPtr("trig_in_ptr"), out_ptr = cc.newIntPtr("trig_out_ptr");
    cc.lea(in_ptr, in);
    cc.lea(out_ptr, out);
    x86::Gp fn = cc.newIntPtr("trig_fn");
    const int slot = s_.lane() == Lane::kF32 ? kRtSinCosLargeF32 : kRtSinCosLargeF64;
    cc.mov(fn, x86::qword_ptr(runtime_, slot * 8));
    const int64_t flags = (fusedMultiplyAdd() ? kRtFused : 0) | (cosine ? kRtCosine : 0) |
                          (s_.isa() == Isa::kAvx512 ? kRtAvx512 : 0);
    asmjit::InvokeNode* call;
    cc.invoke(&call, fn,
              asmjit::FuncSignatureT<void, void*, void*, int64_t, int64_t>(asmjit::CallConvId::kHost));
    call->setArg(0, in_ptr);
    call->setArg(1, out_ptr);
    call->setArg(2, asmjit::Imm(s_.lanes()));
    call->setArg(3, asmjit::Imm(flags));
    Vec d = tmp();
    s_.load(d, out);
    return d;
  }

 private:
  using Binary = void (Simd::*)(Vec, Vec, Vec);
  using Unary = void (Simd::*)(Vec, Vec);
  Vec tmp() {
    Vec v = s_.newVec("m");
    owned_.insert(v.id());
    return v;
  }
  Vec bin(Binary op, Vec a, Vec b) {
    Vec d = tmp();
    (s_.*op)(d, a, b);
    return d;
  }
  Vec un(Unary op, Vec a) {
    Vec d = tmp();
    (s_.*op)(d, a);
    return d;
  }

  // outer(a, inner(b, m)): vpternlog `imm` on AVX-512, else two instructions.
  Vec ternary(Vec a, Vec b, Vec m, int imm, Vec (Ops::*outer)(Vec, Vec), Vec (Ops::*inner)(Vec, Vec)) {
    if (s_.isa() != Isa::kAvx512) return (this->*outer)(a, (this->*inner)(b, m));
    Vec d = tmp();
    s_.mov(d, a);
    s_.ternaryLogic(d, b, m, static_cast<uint8_t>(imm));
    return d;
  }

  Simd& s_;
  const math::LaneMath& c_;
  x86::Gp runtime_;
  // The registers tmp() made: the only ones fmaLast may overwrite.
  absl::flat_hash_set<uint32_t> owned_;
};

}  // namespace

Vec emitSin(Simd& s, Vec a, x86::Gp runtime) {
  Ops o(s, runtime);
  return math::sinOf(o, a);
}

Vec emitCos(Simd& s, Vec a, x86::Gp runtime) {
  Ops o(s, runtime);
  return math::cosOf(o, a);
}

Vec emitExp(Simd& s, Vec a) {
  Ops o(s);
  return math::expOf(o, a);
}

Vec emitLog(Simd& s, Vec a) {
  Ops o(s);
  return math::logOf(o, a);
}

Vec emitTanh(Simd& s, Vec a) {
  Ops o(s);
  return math::tanhOf(o, a);
}

Vec emitSigmoid(Simd& s, Vec a) {
  Ops o(s);
  return math::sigmoidOf(o, a);
}

Vec emitPow(Simd& s, Vec a, Vec b) {
  Ops o(s);
  return math::powOf(o, a, b);
}

std::optional<Vec> emitElementary(Simd& s, tensor::OpCode op, Vec a, Vec b, x86::Gp runtime) {
  Ops o(s, runtime);
  return codegen::elementaryOf(o, op, a, b);
}

}  // namespace accy::x64
