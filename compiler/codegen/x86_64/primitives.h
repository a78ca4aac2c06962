// The x86-64 primitives op_semantics.h drives (KernelEmitter::Prims), and
// the small facts about dtypes every file of the emitter uses. Included by
// the emitter's .cc files only.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_PRIMITIVES_H_
#define ACCY_COMPILER_CODEGEN_X86_64_PRIMITIVES_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/codegen/x86_64/kernel_emitter.h"
#include "compiler/codegen/x86_64/math.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::x64 {

// The names every file of the emitter uses.
namespace x86 = asmjit::x86;
using asmjit::Label;
using choir::Affine;
using choir::DType;
using choir::Expr;
using choir::ExprKind;
using choir::ExprRef;
using choir::LoopTag;
using choir::OpCode;
using choir::Stmt;
using choir::StmtKind;

inline Lane laneOf(choir::DType d) { return d == choir::DType::f64 ? Lane::kF64 : Lane::kF32; }
inline bool isFloat(choir::DType d) { return d == choir::DType::f32 || d == choir::DType::f64; }
// log2 of the element size: the scale of an indexed address.
inline int shiftOf(choir::DType d) {
  switch (tensor::dtypeSize(d)) {
    case 8:
      return 3;
    case 4:
      return 2;
    default:
      return 0;
  }
}
inline bool fitsImm32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}
// x < y as y > x, and so on: the comparison with its operands swapped.
inline codegen::Cmp reversed(codegen::Cmp c) {
  switch (c) {
    case codegen::Cmp::kLt:
      return codegen::Cmp::kGt;
    case codegen::Cmp::kLe:
      return codegen::Cmp::kGe;
    case codegen::Cmp::kGt:
      return codegen::Cmp::kLt;
    case codegen::Cmp::kGe:
      return codegen::Cmp::kLe;
    case codegen::Cmp::kEq:
    case codegen::Cmp::kNe:
      break;
  }
  return c;
}
inline absl::Status notEmitted(std::string_view what) {
  return makeError(ErrorKind::kUnimplemented, strCat("x86-64 emitter: ", what));
}

// The primitives of op_semantics.h on x86-64: floats in vector registers
// (the loop's Simd in a vector loop, a scalar one otherwise), integers and
// scalar bools in general registers (i32 held sign-extended to 64 bits),
// the bools of a vector loop as masks. In a vector loop i32 and u32 values
// run in the 32-bit integer lanes of the loop's Simd (an f32 one: the
// vectorizer's lanes32 mixes them with f32); what cannot be emitted is
// refused with the first error kept.
class KernelEmitter::Prims {
 public:
  using Value = Val;
  Prims(KernelEmitter& e, const Mode& mode) : e_(e), cc_(e.cc_), mode_(mode), vec_(mode.vector ? e.vsimd_ : nullptr) {}
  const absl::Status& status() const { return error_; }

  Value constant(choir::DType d, double v) {
    const double c = tensor::convertValue(v, choir::DType::f64, d);
    if (isFloat(d)) return vec(simd(d).constantValue(c));
    if (mode_.vector) {
      if (!lanes32(d)) return fail(strCat(tensor::dtypeName(d), " constant in a vector loop"));
      return vec(vec_->constantBitsValue(static_cast<uint32_t>(tensor::toInt64(c))));
    }
    Val r;
    r.imm = tensor::toInt64(c);
    return r;
  }
  Value arith(codegen::Arith a, choir::DType d, const Val& x, const Val& y) {
    if (isFloat(d)) {
      Simd& s = simd(d);
      Val r = vec(s.newVec("arith"));
      switch (a) {
        case codegen::Arith::kAdd:
          s.add(r.v, x.v, y.v);
          break;
        case codegen::Arith::kSub:
          s.sub(r.v, x.v, y.v);
          break;
        case codegen::Arith::kMul:
          s.mul(r.v, x.v, y.v);
          break;
        case codegen::Arith::kDiv:
          s.div(r.v, x.v, y.v);
          break;
      }
      return r;
    }
    if (mode_.vector) {
      if (!lanes32(d) || a == codegen::Arith::kDiv) return fail(strCat(tensor::dtypeName(d), " division in a vector loop"));
      Val r = vec(vec_->newVec("arith"));
      switch (a) {
        case codegen::Arith::kAdd:
          vec_->intAdd(r.v, x.v, y.v);
          break;
        case codegen::Arith::kSub:
          vec_->intSub(r.v, x.v, y.v);
          break;
        case codegen::Arith::kMul:
        case codegen::Arith::kDiv:
          vec_->intMul(r.v, x.v, y.v);
          break;
      }
      return r;
    }
    Val r;
    r.g = cc_.newInt64("arith");
    // A constant operand of an add or a multiply goes second, as the
    // instruction's immediate.
    const auto [p, q, swapped] = constantSecond(x, y, a != codegen::Arith::kSub && a != codegen::Arith::kDiv);
    const std::optional<int32_t> k = q.imm32();
    switch (a) {
      case codegen::Arith::kAdd:
        if (k) {
          cc_.lea(r.g, x86::ptr(e_.gp(p), *k));
        } else {
          e_.moveInto(r.g, p);
          cc_.add(r.g, e_.gp(q));
        }
        break;
      case codegen::Arith::kSub:
        e_.moveInto(r.g, p);
        k ? cc_.sub(r.g, *k) : cc_.sub(r.g, e_.gp(q));
        break;
      case codegen::Arith::kMul:
        if (k) {
          cc_.imul(r.g, e_.gp(p), *k);
        } else {
          e_.moveInto(r.g, p);
          cc_.imul(r.g, e_.gp(q));
        }
        break;
      case codegen::Arith::kDiv: {  // never by 0 or -1
        asmjit::x86::Gp hi = cc_.newInt64("hi");
        e_.moveInto(r.g, x);
        cc_.cqo(hi, r.g);
        cc_.idiv(hi, r.g, e_.gp(y));
        break;
      }
    }
    e_.sext32(r.g, d);
    return r;
  }
  Value negate(choir::DType d, const Val& x) {
    if (isFloat(d)) return floatUnary(d, &Simd::neg, x);
    if (mode_.vector) {
      if (!lanes32(d)) return fail("i64 negation in a vector loop");
      Val r = vec(vec_->newVec("neg"));
      Val zero = constant(d, 0);
      vec_->intSub(r.v, zero.v, x.v);
      return r;
    }
    Val r;
    r.g = cc_.newInt64("neg");
    e_.moveInto(r.g, x);
    cc_.neg(r.g);
    e_.sext32(r.g, d);
    return r;
  }
  Value absFloat(choir::DType d, const Val& x) { return floatUnary(d, &Simd::abs, x); }
  Value sqrt(choir::DType d, const Val& x) { return floatUnary(d, &Simd::sqrt, x); }
  Value compare(codegen::Cmp c, choir::DType d, const Val& x, const Val& y) {
    if (isFloat(d)) return maskOrBool(d, simd(d).cmp(static_cast<Cmp>(c), x.v, y.v));
    if (mode_.vector) {
      if (!lanes32(d)) return fail(strCat(tensor::dtypeName(d), " comparison in a vector loop"));
      Val r;
      r.kind = Val::Kind::kMask;
      r.m = vec_->intCmp(static_cast<Cmp>(c), tensor::isUnsigned(d), x.v, y.v);
      return r;
    }
    // A constant goes second, as cmp's immediate (the condition reversed
    // when the operands swap).
    const auto [p, q, swapped] = constantSecond(x, y);
    if (swapped) c = reversed(c);
    Val r;
    r.g = cc_.newInt64("cmp");
    const x86::Gp pg = e_.gp(p);
    cc_.xor_(r.g.r32(), r.g.r32());
    if (const std::optional<int32_t> k = q.imm32()) {
      cc_.cmp(pg, *k);
    } else {
      const x86::Gp qg = e_.gp(q);
      cc_.cmp(pg, qg);
    }
    using x86::CondCode;
    const CondCode cond = c == codegen::Cmp::kLt   ? CondCode::kL
                          : c == codegen::Cmp::kLe ? CondCode::kLE
                          : c == codegen::Cmp::kGt ? CondCode::kG
                          : c == codegen::Cmp::kGe ? CondCode::kGE
                          : c == codegen::Cmp::kEq ? CondCode::kE
                                                   : CondCode::kNE;
    cc_.set(cond, r.g.r8());
    r.flags = Val::Flags{cc_.cursor(), cond};  // (set leaves the flags as they are)
    return r;
  }
  Value isNan(choir::DType d, const Val& x) { return maskOrBool(d, simd(d).cmp(Cmp::kUnordered, x.v, x.v)); }
  Value select(choir::DType d, const Val& c, const Val& t, const Val& f) { return e_.select(c, t, f, d, mode_); }
  Value logicAnd(const Val& x, const Val& y) { return logic(x, y, true); }
  Value logicOr(const Val& x, const Val& y) { return logic(x, y, false); }
  Value bitAnd(choir::DType d, const Val& x, const Val& y) {
    return intBinary(d, x, y, &x86::Compiler::and_, &Simd::intAnd, &x86::Compiler::and_);
  }
  Value bitOr(choir::DType d, const Val& x, const Val& y) {
    return intBinary(d, x, y, &x86::Compiler::or_, &Simd::intOr, &x86::Compiler::or_);
  }
  Value bitXor(choir::DType d, const Val& x, const Val& y) {
    return intBinary(d, x, y, &x86::Compiler::xor_, &Simd::intXor, &x86::Compiler::xor_);
  }
  // An arithmetic shift of the 64-bit register: arithmetic on i32 (held
  // sign-extended) and i64, logical on u32 (held zero-extended).
  Value shiftRight(choir::DType d, const Val& x, int n) {
    if (mode_.vector) {
      if (!lanes32(d)) return fail("i64 shifts in a vector loop");
      Val r = vec(vec_->newVec("shr"));
      tensor::isUnsigned(d) ? vec_->intShr(r.v, x.v, n) : vec_->intSar(r.v, x.v, n);
      return r;
    }
    Val r;
    r.g = cc_.newInt64("sar");
    e_.moveInto(r.g, x);
    cc_.sar(r.g, n);
    return r;
  }
  // n in [0, width).
  Value shiftLeft(choir::DType d, const Val& x, int n) {
    if (mode_.vector) {
      if (!lanes32(d)) return fail("i64 shifts in a vector loop");
      Val r = vec(vec_->newVec("shl"));
      vec_->intShl(r.v, x.v, n);
      return r;
    }
    Val r;
    r.g = cc_.newInt64("shl");
    e_.moveInto(r.g, x);
    cc_.shl(r.g, n);
    e_.sext32(r.g, d);
    return r;
  }
  // u32 rotated left by n in [1, 32): one instruction (vprold in AVX-512
  // lanes, rol on a register holding the value zero-extended).
  Value rotateLeft(choir::DType d, const Val& x, int n) {
    if (mode_.vector) {
      if (d != choir::DType::u32) return fail("a rotate of a signed or 64-bit value in a vector loop");
      Val r = vec(vec_->newVec("rotl"));
      vec_->intRotl(r.v, x.v, n);
      return r;
    }
    if (d != choir::DType::u32) return fail("a rotate of a signed or 64-bit value");
    Val r;
    r.g = cc_.newInt64("rotl");
    e_.moveInto(r.g, x);
    cc_.rol(r.g.r32(), n);  // a 32-bit op: the upper half cleared, as u32 is held
    return r;
  }
  // Counts in [0, width): the register allocator puts the count in cl. A
  // vector loop shifts by constants only (vectorize.h).
  Value shiftLeftBy(choir::DType d, const Val& x, const Val& n) {
    Val r = intBinary(d, x, n, &x86::Compiler::shl, nullptr);
    if (scalarInt(d)) e_.sext32(r.g, d);
    return r;
  }
  Value shiftRightBy(choir::DType d, const Val& x, const Val& n) {
    return intBinary(d, x, n, &x86::Compiler::sar, nullptr);
  }
  Value bitcast(choir::DType from, choir::DType to, const Val& a) {
    if (mode_.vector) {  // the same register, read as another 4-byte dtype
      if (!lanes32(from) && from != choir::DType::f32) return fail("a 64-bit bitcast in a vector loop");
      return vec(a.v);
    }
    const bool vex = e_.isa_ != Isa::kSse41;
    const bool wide = tensor::dtypeSize(from) == 8;
    if (isFloat(from)) {
      Val r;
      r.g = cc_.newInt64("bits");
      if (wide) {
        vex ? cc_.vmovq(r.g, a.v.xmm()) : cc_.movq(r.g, a.v.xmm());
      } else {
        vex ? cc_.vmovd(r.g.r32(), a.v.xmm()) : cc_.movd(r.g.r32(), a.v.xmm());
        e_.sext32(r.g, to);
      }
      return r;
    }
    if (isFloat(to)) {
      Val r = vec(e_.scalarSimd(to).newVec("bits"));
      if (wide) {
        vex ? cc_.vmovq(r.v.xmm(), e_.gp(a)) : cc_.movq(r.v.xmm(), e_.gp(a));
      } else {
        vex ? cc_.vmovd(r.v.xmm(), e_.gp(a).r32()) : cc_.movd(r.v.xmm(), e_.gp(a).r32());
      }
      return r;
    }
    Val r;  // i32 <-> u32: the low 32 bits, sign- or zero-extended
    r.g = cc_.newInt64("bits");
    const x86::Gp from_g = e_.gp(a);
    to == choir::DType::u32 ? cc_.mov(r.g.r32(), from_g.r32()) : cc_.movsxd(r.g, from_g.r32());
    return r;
  }
  Value convert(choir::DType from, choir::DType to, const Val& a) {
    if (mode_.vector) return convertLanes(from, to, a);
    const bool vex = e_.isa_ != Isa::kSse41;
    if (isFloat(from) && isFloat(to)) {
      Val r = vec(e_.scalarSimd(to).newVec("cvt"));
      e_.scalarSimd(to).zero(r.v);
      if (from == choir::DType::f32) {
        vex ? cc_.vcvtss2sd(r.v.xmm(), r.v.xmm(), a.v.xmm()) : cc_.cvtss2sd(r.v.xmm(), a.v.xmm());
      } else {
        vex ? cc_.vcvtsd2ss(r.v.xmm(), r.v.xmm(), a.v.xmm()) : cc_.cvtsd2ss(r.v.xmm(), a.v.xmm());
      }
      return r;
    }
    if (isFloat(from)) {  // a value made finite and in range: truncation
      Val r;
      r.g = cc_.newInt64("cvt");
      const bool f32 = from == choir::DType::f32;
      if (to != choir::DType::i32) {  // i64, or u32 through 64 bits (a value in [0, 2^32))
        f32 ? (vex ? cc_.vcvttss2si(r.g, a.v.xmm()) : cc_.cvttss2si(r.g, a.v.xmm()))
            : (vex ? cc_.vcvttsd2si(r.g, a.v.xmm()) : cc_.cvttsd2si(r.g, a.v.xmm()));
        e_.sext32(r.g, to);
      } else {
        f32 ? (vex ? cc_.vcvttss2si(r.g.r32(), a.v.xmm()) : cc_.cvttss2si(r.g.r32(), a.v.xmm()))
            : (vex ? cc_.vcvttsd2si(r.g.r32(), a.v.xmm()) : cc_.cvttsd2si(r.g.r32(), a.v.xmm()));
        cc_.movsxd(r.g, r.g.r32());
      }
      return r;
    }
    if (isFloat(to)) {  // from an integer held sign- (u32: zero-) extended in 64 bits
      Val r = vec(e_.scalarSimd(to).newVec("cvt"));
      e_.scalarSimd(to).zero(r.v);
      if (to == choir::DType::f32) {
        vex ? cc_.vcvtsi2ss(r.v.xmm(), r.v.xmm(), e_.gp(a)) : cc_.cvtsi2ss(r.v.xmm(), e_.gp(a));
      } else {
        vex ? cc_.vcvtsi2sd(r.v.xmm(), r.v.xmm(), e_.gp(a)) : cc_.cvtsi2sd(r.v.xmm(), e_.gp(a));
      }
      return r;
    }
    Val r;
    r.g = cc_.newInt64("cvt");
    e_.moveInto(r.g, a);
    e_.sext32(r.g, to);
    return r;
  }
  // maxps / minps: the first operand when greater (less), else the second.
  Value greaterOrSecond(choir::DType d, const Val& a, const Val& b) { return floatBinary(d, &Simd::maxRaw, a, b); }
  Value lessOrSecond(choir::DType d, const Val& a, const Val& b) { return floatBinary(d, &Simd::minRaw, a, b); }
  Value intMax(choir::DType d, const Val& x, const Val& y) { return pick(d, x, y, true); }
  Value intMin(choir::DType d, const Val& x, const Val& y) { return pick(d, x, y, false); }

  Value variable(choir::DType d, const Val& init) {
    Val v = init;
    v.imm.reset();
    v.flags.reset();
    if (isFloat(d)) {
      v = vec(simd(d).newVec("var"));
      simd(d).mov(v.v, init.v);
    } else {
      v.g = cc_.newInt64("var");
      e_.moveInto(v.g, init);
    }
    return v;
  }
  Value read(choir::DType, const Val& var) { return var; }
  void write(choir::DType d, const Val& var, const Val& v) {
    if (isFloat(d)) {
      simd(d).mov(var.v, v.v);
    } else {
      e_.moveInto(var.g, v);
    }
  }
  absl::Status loopWhile(const std::function<Val()>& cond, const std::function<absl::Status()>& body, int64_t) {
    if (mode_.vector) return notEmitted("a loop in a vector loop");
    asmjit::Label top = cc_.newLabel(), done = cc_.newLabel();
    cc_.bind(top);
    const x86::Gp c = e_.gp(cond());
    cc_.test(c, c);
    cc_.jz(done);
    ACCY_RETURN_IF_ERROR(body());
    cc_.jmp(top);
    cc_.bind(done);
    return absl::OkStatus();
  }
  Value exactMath(choir::OpCode o, choir::DType d, const Val& x, const Val& y) {
    if (std::optional<asmjit::x86::Vec> r = emitElementary(simd(d), o, x.v, y.v, e_.runtime_)) return vec(*r);
    return fail(strCat("op ", tensor::opName(o)));
  }
  bool fastMode() const { return false; }
  std::optional<Val> fastForm(choir::OpCode, choir::DType, const Val&, const Val&) { return std::nullopt; }

 private:
  Simd& simd(choir::DType d) { return mode_.vector ? *vec_ : e_.scalarSimd(d); }
  bool scalarInt(choir::DType d) const { return !mode_.vector && !isFloat(d); }
  static bool lanes32(choir::DType d) { return d == choir::DType::i32 || d == choir::DType::u32; }
  // Casts in 32-bit lanes: i32 <-> u32 keep the bits; i32 to f32 is one
  // conversion; u32 to f32 converts its high and low 16 bits (each exact)
  // and adds them, hi * 65536 + lo, with one rounding.
  Val convertLanes(choir::DType from, choir::DType to, const Val& a) {
    if (lanes32(from) && lanes32(to)) return a;
    if (from == choir::DType::i32 && to == choir::DType::f32) {
      Val r = vec(vec_->newVec("cvt"));
      vec_->intToFloat(r.v, a.v);
      return r;
    }
    if (from == choir::DType::u32 && to == choir::DType::f32) {
      x86::Vec hi = vec_->newVec("hi"), lo = vec_->newVec("lo");
      vec_->intShr(hi, a.v, 16);
      vec_->intAnd(lo, a.v, vec_->constantBitsValue(0xffffu));
      vec_->intToFloat(hi, hi);
      vec_->intToFloat(lo, lo);
      Val r = vec(vec_->newVec("cvt"));
      vec_->fma(r.v, hi, vec_->constantValue(65536.0), lo);
      return r;
    }
    return fail(strCat("a cast from ", tensor::dtypeName(from), " to ", tensor::dtypeName(to), " in a vector loop"));
  }
  static Val vec(asmjit::x86::Vec v) {
    Val r;
    r.kind = Val::Kind::kVec;
    r.v = v;
    return r;
  }
  Val floatUnary(choir::DType d, void (Simd::*op)(asmjit::x86::Vec, asmjit::x86::Vec), const Val& x) {
    Simd& s = simd(d);
    Val r = vec(s.newVec("un"));
    (s.*op)(r.v, x.v);
    return r;
  }
  Val floatBinary(choir::DType d, void (Simd::*op)(asmjit::x86::Vec, asmjit::x86::Vec, asmjit::x86::Vec), const Val& x, const Val& y) {
    Simd& s = simd(d);
    Val r = vec(s.newVec("bin"));
    (s.*op)(r.v, x.v, y.v);
    return r;
  }
  Val maskOrBool(choir::DType d, const Mask& m) {
    Val r;
    if (mode_.vector) {
      r.kind = Val::Kind::kMask;
      r.m = m;
    } else {
      r.g = e_.maskToBool(m, simd(d));
    }
    return r;
  }
  Val logic(const Val& x, const Val& y, bool both) {
    Val r;
    if (mode_.vector) {
      r.kind = Val::Kind::kMask;
      r.m = both ? vec_->maskAnd(x.m, y.m) : vec_->maskOr(x.m, y.m);
      return r;
    }
    r.g = cc_.newInt64(both ? "and" : "or");
    e_.moveInto(r.g, x);
    both ? cc_.and_(r.g, e_.gp(y)) : cc_.or_(r.g, e_.gp(y));
    return r;
  }
  // With `op_imm` (a commutative operation) a constant operand is its
  // immediate.
  Val intBinary(choir::DType d, const Val& x, const Val& y, asmjit::Error (x86::Compiler::*op)(const x86::Gp&, const x86::Gp&),
                void (Simd::*lanes)(x86::Vec, x86::Vec, x86::Vec),
                asmjit::Error (x86::Compiler::*op_imm)(const x86::Gp&, const asmjit::Imm&) = nullptr) {
    if (mode_.vector) {
      if (!lanes32(d) || lanes == nullptr) return fail(strCat(tensor::dtypeName(d), " bit operation in a vector loop"));
      Val r = vec(vec_->newVec("bits"));
      (vec_->*lanes)(r.v, x.v, y.v);
      return r;
    }
    Val r;
    r.g = cc_.newInt64("bits");
    if (const auto [p, q, swapped] = constantSecond(x, y); op_imm != nullptr && q.imm32()) {
      e_.moveInto(r.g, p);
      (cc_.*op_imm)(r.g, asmjit::Imm(*q.imm32()));
      return r;
    }
    const x86::Gp yg = e_.gp(y);
    e_.moveInto(r.g, x);
    (cc_.*op)(r.g, yg);
    return r;
  }
  Val pick(choir::DType d, const Val& x, const Val& y, bool greater) {
    if (mode_.vector) {
      if (!lanes32(d)) return fail("i64 max and min in a vector loop");
      Val r = vec(vec_->newVec(greater ? "max" : "min"));
      vec_->intMinMax(greater, tensor::isUnsigned(d), r.v, x.v, y.v);
      return r;
    }
    Val r;
    r.g = cc_.newInt64(greater ? "max" : "min");
    // A constant bound: r = k, replaced by x when x is past it.
    const auto [p, q, swapped] = constantSecond(x, y);
    const x86::Gp pg = e_.gp(p);
    if (const std::optional<int32_t> k = q.imm32()) {
      e_.moveInto(r.g, q);
      cc_.cmp(pg, *k);
      greater ? cc_.cmovg(r.g, pg) : cc_.cmovl(r.g, pg);
      return r;
    }
    const x86::Gp qg = e_.gp(q);
    cc_.mov(r.g, pg);
    cc_.cmp(pg, qg);
    greater ? cc_.cmovl(r.g, qg) : cc_.cmovg(r.g, qg);
    return r;
  }
  // A pair of operands ordered so that a constant goes second, as the
  // instruction's immediate (only where the operation allows the swap).
  struct Ordered {
    const Val& p;
    const Val& q;
    bool swapped;
  };
  static Ordered constantSecond(const Val& x, const Val& y, bool may_swap = true) {
    const bool swap = may_swap && x.imm32() && !y.imm32();
    return {swap ? y : x, swap ? x : y, swap};
  }
  Val fail(std::string what) {
    if (error_.ok()) error_ = notEmitted(what);
    Val r;
    if (mode_.vector) {
      r.kind = Val::Kind::kVec;
      r.v = vec_->newVec("none");
    } else {
      r.g = cc_.newInt64("none");
    }
    return r;
  }

  KernelEmitter& e_;
  asmjit::x86::Compiler& cc_;
  const Mode mode_;
  Simd* vec_;  // the lanes of a vector loop
  absl::Status error_;
};

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_PRIMITIVES_H_
