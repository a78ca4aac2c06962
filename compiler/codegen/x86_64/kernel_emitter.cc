#include "compiler/codegen/x86_64/kernel_emitter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "compiler/choir/printer.h"
#include "compiler/choir/rewrite.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "compiler/codegen/x86_64/math.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "base/check.h"
#include "base/errors.h"
#include "compiler/tensor/scalar_ops.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::x64 {

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
using tensor::OpCategory;

namespace {

Lane laneOf(DType d) { return d == DType::f64 ? Lane::kF64 : Lane::kF32; }
bool isFloat(DType d) { return d == DType::f32 || d == DType::f64; }
int shiftOf(DType d) {
  switch (tensor::dtypeSize(d)) {
    case 8:
      return 3;
    case 4:
      return 2;
    default:
      return 0;
  }
}
bool fitsImm32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

absl::Status unimplemented(std::string_view what) {
  return makeError(ErrorKind::kUnimplemented, strCat("x86-64 emitter: ", what));
}

}  // namespace

// The primitives of op_semantics.h on x86-64: floats in vector registers
// (the loop's Simd in a vector loop, a scalar one otherwise), integers and
// scalar bools in general registers (i32 held sign-extended to 64 bits),
// the bools of a vector loop as masks. Integer values do not run in vector
// loops (the vectorizer makes none on this target); what cannot be emitted
// is refused with the first error kept.
class KernelEmitter::Prims {
 public:
  using Value = Val;
  Prims(KernelEmitter& e, const Mode& mode) : e_(e), cc_(e.cc_), mode_(mode) {}
  const absl::Status& status() const { return error_; }

  Value constant(DType d, double v) {
    const double c = tensor::convertValue(v, DType::f64, d);
    if (isFloat(d)) return vec(simd(d).constantValue(c));
    if (mode_.vector) return fail(strCat(tensor::dtypeName(d), " constant in a vector loop"));
    Val r;
    r.g = cc_.newInt64("k");
    cc_.mov(r.g, tensor::toInt64(c));
    return r;
  }
  Value arith(codegen::Arith a, DType d, const Val& x, const Val& y) {
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
    if (!scalarInt(d)) return fail(strCat(tensor::dtypeName(d), " arithmetic in a vector loop"));
    Val r;
    r.g = cc_.newInt64("arith");
    switch (a) {
      case codegen::Arith::kAdd:
        cc_.mov(r.g, x.g);
        cc_.add(r.g, y.g);
        break;
      case codegen::Arith::kSub:
        cc_.mov(r.g, x.g);
        cc_.sub(r.g, y.g);
        break;
      case codegen::Arith::kMul:
        cc_.mov(r.g, x.g);
        cc_.imul(r.g, y.g);
        break;
      case codegen::Arith::kDiv: {  // never by 0 or -1
        x86::Gp hi = cc_.newInt64("hi");
        cc_.mov(r.g, x.g);
        cc_.cqo(hi, r.g);
        cc_.idiv(hi, r.g, y.g);
        break;
      }
    }
    e_.sext32(r.g, d);
    return r;
  }
  Value negate(DType d, const Val& x) {
    if (isFloat(d)) return floatUnary(d, &Simd::neg, x);
    if (!scalarInt(d)) return fail("integer negation in a vector loop");
    Val r;
    r.g = cc_.newInt64("neg");
    cc_.mov(r.g, x.g);
    cc_.neg(r.g);
    e_.sext32(r.g, d);
    return r;
  }
  Value absFloat(DType d, const Val& x) { return floatUnary(d, &Simd::abs, x); }
  Value sqrt(DType d, const Val& x) { return floatUnary(d, &Simd::sqrt, x); }
  Value compare(codegen::Cmp c, DType d, const Val& x, const Val& y) {
    if (isFloat(d)) return maskOrBool(d, simd(d).cmp(static_cast<Cmp>(c), x.v, y.v));
    if (!scalarInt(d)) return fail("integer comparison in a vector loop");
    Val r;
    r.g = cc_.newInt64("cmp");
    cc_.xor_(r.g.r32(), r.g.r32());
    cc_.cmp(x.g, y.g);
    switch (c) {
      case codegen::Cmp::kLt:
        cc_.setl(r.g.r8());
        break;
      case codegen::Cmp::kLe:
        cc_.setle(r.g.r8());
        break;
      case codegen::Cmp::kGt:
        cc_.setg(r.g.r8());
        break;
      case codegen::Cmp::kGe:
        cc_.setge(r.g.r8());
        break;
      case codegen::Cmp::kEq:
        cc_.sete(r.g.r8());
        break;
      case codegen::Cmp::kNe:
        cc_.setne(r.g.r8());
        break;
    }
    return r;
  }
  Value isNan(DType d, const Val& x) { return maskOrBool(d, simd(d).cmp(Cmp::kUnordered, x.v, x.v)); }
  Value select(DType d, const Val& c, const Val& t, const Val& f) { return e_.select(c, t, f, d, mode_); }
  Value logicAnd(const Val& x, const Val& y) { return logic(x, y, true); }
  Value logicOr(const Val& x, const Val& y) { return logic(x, y, false); }
  Value bitAnd(DType d, const Val& x, const Val& y) {
    if (!scalarInt(d)) return fail("integer bit operations in a vector loop");
    Val r;
    r.g = cc_.newInt64("and");
    cc_.mov(r.g, x.g);
    cc_.and_(r.g, y.g);
    return r;
  }
  Value shiftRight(DType d, const Val& x, int n) {
    if (!scalarInt(d)) return fail("integer shifts in a vector loop");
    Val r;
    r.g = cc_.newInt64("sar");
    cc_.mov(r.g, x.g);
    cc_.sar(r.g, n);
    return r;
  }
  Value convert(DType from, DType to, const Val& a) {
    if (mode_.vector) return fail("cast in a vector loop");
    const bool vex = e_.isa_ != Isa::kSse41;
    if (isFloat(from) && isFloat(to)) {
      Val r = vec(e_.scalarSimd(to).newVec("cvt"));
      e_.scalarSimd(to).zero(r.v);
      if (from == DType::f32) {
        vex ? cc_.vcvtss2sd(r.v.xmm(), r.v.xmm(), a.v.xmm()) : cc_.cvtss2sd(r.v.xmm(), a.v.xmm());
      } else {
        vex ? cc_.vcvtsd2ss(r.v.xmm(), r.v.xmm(), a.v.xmm()) : cc_.cvtsd2ss(r.v.xmm(), a.v.xmm());
      }
      return r;
    }
    if (isFloat(from)) {  // a value made finite and in range: truncation
      Val r;
      r.g = cc_.newInt64("cvt");
      const bool f32 = from == DType::f32;
      if (to == DType::i64) {
        f32 ? (vex ? cc_.vcvttss2si(r.g, a.v.xmm()) : cc_.cvttss2si(r.g, a.v.xmm()))
            : (vex ? cc_.vcvttsd2si(r.g, a.v.xmm()) : cc_.cvttsd2si(r.g, a.v.xmm()));
      } else {
        f32 ? (vex ? cc_.vcvttss2si(r.g.r32(), a.v.xmm()) : cc_.cvttss2si(r.g.r32(), a.v.xmm()))
            : (vex ? cc_.vcvttsd2si(r.g.r32(), a.v.xmm()) : cc_.cvttsd2si(r.g.r32(), a.v.xmm()));
        cc_.movsxd(r.g, r.g.r32());
      }
      return r;
    }
    if (isFloat(to)) {  // from an integer held sign-extended in 64 bits
      Val r = vec(e_.scalarSimd(to).newVec("cvt"));
      e_.scalarSimd(to).zero(r.v);
      if (to == DType::f32) {
        vex ? cc_.vcvtsi2ss(r.v.xmm(), r.v.xmm(), a.g) : cc_.cvtsi2ss(r.v.xmm(), a.g);
      } else {
        vex ? cc_.vcvtsi2sd(r.v.xmm(), r.v.xmm(), a.g) : cc_.cvtsi2sd(r.v.xmm(), a.g);
      }
      return r;
    }
    Val r;
    r.g = cc_.newInt64("cvt");
    cc_.mov(r.g, a.g);
    e_.sext32(r.g, to);
    return r;
  }
  // maxps / minps: the first operand when greater (less), else the second.
  Value greaterOrSecond(DType d, const Val& a, const Val& b) { return floatBinary(d, &Simd::maxRaw, a, b); }
  Value lessOrSecond(DType d, const Val& a, const Val& b) { return floatBinary(d, &Simd::minRaw, a, b); }
  Value intMax(DType d, const Val& x, const Val& y) { return pick(d, x, y, true); }
  Value intMin(DType d, const Val& x, const Val& y) { return pick(d, x, y, false); }

  Value variable(DType d, const Val& init) {
    Val v = init;
    if (isFloat(d)) {
      v = vec(simd(d).newVec("var"));
      simd(d).mov(v.v, init.v);
    } else {
      v.g = cc_.newInt64("var");
      cc_.mov(v.g, init.g);
    }
    return v;
  }
  Value read(DType, const Val& var) { return var; }
  void write(DType d, const Val& var, const Val& v) {
    if (isFloat(d)) {
      simd(d).mov(var.v, v.v);
    } else {
      cc_.mov(var.g, v.g);
    }
  }
  absl::Status loopWhile(const std::function<Val()>& cond, const std::function<absl::Status()>& body, int64_t) {
    if (mode_.vector) return unimplemented("a loop in a vector loop");
    Label top = cc_.newLabel(), done = cc_.newLabel();
    cc_.bind(top);
    const Val c = cond();
    cc_.test(c.g, c.g);
    cc_.jz(done);
    ACCY_RETURN_IF_ERROR(body());
    cc_.jmp(top);
    cc_.bind(done);
    return absl::OkStatus();
  }
  Value exactMath(OpCode o, DType d, const Val& x, const Val& y) {
    if (std::optional<x86::Vec> r = emitElementary(simd(d), o, x.v, y.v, e_.runtime_)) return vec(*r);
    return fail(strCat("op ", tensor::opName(o)));
  }
  bool fastMode() const { return false; }
  std::optional<Val> fastForm(OpCode, DType, const Val&, const Val&) { return std::nullopt; }

 private:
  Simd& simd(DType d) { return mode_.vector ? *mode_.simd : e_.scalarSimd(d); }
  bool scalarInt(DType d) const { return !mode_.vector && !isFloat(d); }
  static Val vec(x86::Vec v) {
    Val r;
    r.kind = Val::Kind::kVec;
    r.v = v;
    return r;
  }
  Val floatUnary(DType d, void (Simd::*op)(x86::Vec, x86::Vec), const Val& x) {
    Simd& s = simd(d);
    Val r = vec(s.newVec("un"));
    (s.*op)(r.v, x.v);
    return r;
  }
  Val floatBinary(DType d, void (Simd::*op)(x86::Vec, x86::Vec, x86::Vec), const Val& x, const Val& y) {
    Simd& s = simd(d);
    Val r = vec(s.newVec("bin"));
    (s.*op)(r.v, x.v, y.v);
    return r;
  }
  Val maskOrBool(DType d, const Mask& m) {
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
      r.m = both ? mode_.simd->maskAnd(x.m, y.m) : mode_.simd->maskOr(x.m, y.m);
      return r;
    }
    r.g = cc_.newInt64(both ? "and" : "or");
    cc_.mov(r.g, x.g);
    both ? cc_.and_(r.g, y.g) : cc_.or_(r.g, y.g);
    return r;
  }
  Val pick(DType d, const Val& x, const Val& y, bool greater) {
    if (!scalarInt(d)) return fail("integer max and min in a vector loop");
    Val r;
    r.g = cc_.newInt64(greater ? "max" : "min");
    cc_.mov(r.g, x.g);
    cc_.cmp(x.g, y.g);
    greater ? cc_.cmovl(r.g, y.g) : cc_.cmovg(r.g, y.g);
    return r;
  }
  Val fail(std::string what) {
    if (error_.ok()) error_ = unimplemented(what);
    Val r;
    if (mode_.vector) {
      r.kind = Val::Kind::kVec;
      r.v = mode_.simd->newVec("none");
    } else {
      r.g = cc_.newInt64("none");
    }
    return r;
  }

  KernelEmitter& e_;
  x86::Compiler& cc_;
  const Mode& mode_;
  absl::Status error_;
};

KernelEmitter::KernelEmitter(x86::Compiler& cc, const choir::Module& module, Isa isa, int64_t stream_above)
    : cc_(cc),
      m_(module),
      isa_(isa),
      stream_above_(stream_above),
      scalar32_(cc, isa, Lane::kF32, 16, true),
      scalar64_(cc, isa, Lane::kF64, 16, true) {}

Simd& KernelEmitter::scalarSimd(DType dtype) { return dtype == DType::f64 ? scalar64_ : scalar32_; }

absl::Status KernelEmitter::emit(const choir::Kernel& kernel, Label* entry) {
  asmjit::FuncNode* f = cc_.addFunc(
      asmjit::FuncSignatureT<void, void* const*, int64_t, int64_t, const void* const*>(
          asmjit::CallConvId::kHost));
  if (isa_ != Isa::kSse41) f->frame().setAvxEnabled();
  if (isa_ == Isa::kAvx512) f->frame().setAvx512Enabled();
  *entry = f->label();
  buffers_ = cc_.newIntPtr("buffers");
  begin_ = cc_.newInt64("begin");
  end_ = cc_.newInt64("end");
  runtime_ = cc_.newIntPtr("runtime");
  f->setArg(0, buffers_);
  f->setArg(1, begin_);
  f->setArg(2, end_);
  f->setArg(3, runtime_);
  // Load every buffer pointer the kernel touches up front, so no path
  // through the code can use one before it is loaded.
  std::set<int> used;
  choir::visitStmts(kernel.body, [&](const Stmt& s) {
    if (s.buffer >= 0) used.insert(s.buffer);
    if (s.value) {
      choir::visitExpr(s.value, [&](const Expr& e) {
        if (e.kind == ExprKind::kLoad) used.insert(e.buffer);
      });
    }
  });
  for (int b : used) {
    x86::Gp r = cc_.newIntPtr("base");
    cc_.mov(r, x86::qword_ptr(buffers_, b * 8));
    base_[b] = r;
  }
  absl::Status st = stmts(kernel.body, /*outermost=*/true);
  cc_.endFunc();
  return st;
}

x86::Gp KernelEmitter::bufferBase(int buffer) {
  auto it = base_.find(buffer);
  ACCY_CHECK(it != base_.end(), "buffer %d not preloaded", buffer);
  return it->second;
}

absl::Status KernelEmitter::stmts(const std::vector<Stmt>& body, bool outermost) {
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::kLoop:
        ACCY_RETURN_IF_ERROR(loop(s, outermost));
        break;
      case StmtKind::kStore:
        cse_.clear();
        ACCY_RETURN_IF_ERROR(store(s, Mode{}));
        break;
      case StmtKind::kReduce:
        ACCY_RETURN_IF_ERROR(reduce(s));
        break;
      case StmtKind::kBarrier:
        return unimplemented("workgroup barriers have no CPU form");
    }
  }
  return absl::OkStatus();
}

namespace {

// Emits `for (i = start; i < limit; i += step)` around `body`.
template <typename Body>
absl::Status countedLoop(x86::Compiler& cc, x86::Gp i, x86::Gp limit, int64_t step, Body&& body) {
  Label top = cc.newLabel(), done = cc.newLabel();
  cc.cmp(i, limit);
  cc.jge(done);
  cc.bind(top);
  ACCY_RETURN_IF_ERROR(body());
  cc.add(i, step);
  cc.cmp(i, limit);
  cc.jl(top);
  cc.bind(done);
  return absl::OkStatus();
}

x86::Gp constantReg(x86::Compiler& cc, int64_t v) {
  x86::Gp r = cc.newInt64("c");
  cc.mov(r, v);
  return r;
}

}  // namespace

absl::Status KernelEmitter::loop(const Stmt& s, bool outermost) {
  switch (s.loop.tag) {
    case LoopTag::kGpuBlock:
    case LoopTag::kGpuThread:
      return unimplemented(strCat("loop i", s.loop.var, " is mapped to a GPU dimension"));
    case LoopTag::kSerial:
    case LoopTag::kUnrolled:
    case LoopTag::kVectorized:
    case LoopTag::kCpuParallel:
      break;
  }
  if (s.body.size() == 1 && s.body[0].kind == StmtKind::kStore) return innermostStore(s, outermost);
  if (Product p; matchProduct(s, &p)) return blockedProduct(s, p, outermost);
  x86::Gp i = cc_.newInt64("i");
  vars_[s.loop.var] = i;
  x86::Gp limit;
  if (outermost && s.loop.tag == LoopTag::kCpuParallel) {
    cc_.mov(i, begin_);
    limit = end_;
  } else {
    cc_.xor_(i, i);
    limit = constantReg(cc_, s.loop.extent);
  }
  return countedLoop(cc_, i, limit, 1, [&] { return stmts(s.body, false); });
}

namespace {

// Register blocks of the product microkernel: rows x vectors of columns.
// Accumulators, one vector per column block and one broadcast stay within
// the ISA's vector registers (AVX-512: 24 + 4 + 1 of 32; AVX2: 12 + 2 + 1
// of 16; SSE4.1, without FMA, 8 + 2 + 1 and a product temporary of 16).
int productRows(Isa isa) { return isa == Isa::kSse41 ? 4 : 6; }
int productVectors(Isa isa) { return isa == Isa::kAvx512 ? 4 : 2; }

}  // namespace

bool KernelEmitter::matchProduct(const Stmt& l, Product* p) const {
  if (l.body.size() != 2 && l.body.size() != 3) return false;
  const Stmt& init = l.body[0];
  const Stmt& k_loop = l.body[1];
  if (init.kind != StmtKind::kLoop || init.loop.tag != LoopTag::kVectorized || init.body.size() != 1) return false;
  const Stmt& zero = init.body[0];
  if (zero.kind != StmtKind::kStore || zero.value->kind != ExprKind::kConstant || zero.value->constant != 0 ||
      std::signbit(zero.value->constant)) {
    return false;
  }
  if (k_loop.kind != StmtKind::kLoop || k_loop.loop.tag != LoopTag::kSerial || k_loop.body.size() != 1) return false;
  const Stmt& j_loop = k_loop.body[0];
  if (j_loop.kind != StmtKind::kLoop || j_loop.loop.tag != LoopTag::kVectorized || j_loop.body.size() != 1 ||
      j_loop.loop.extent != init.loop.extent || j_loop.loop.vector_width != init.loop.vector_width) {
    return false;
  }
  const Stmt& acc = j_loop.body[0];
  if (acc.kind != StmtKind::kStore || acc.buffer != zero.buffer) return false;
  const choir::Buffer& c = m_.buffers[acc.buffer];
  if (!isFloat(c.dtype)) return false;
  const int i = l.loop.var, j0 = init.loop.var, j = j_loop.loop.var, k = k_loop.loop.var;
  // Both statements write C[i, j] for the same (i, j); rows apart.
  const Affine at_init = choir::flatIndex(c, zero.index), at_acc = choir::flatIndex(c, acc.index);
  if (at_init.coeffOf(j0) != 1 || at_acc.coeffOf(j) != 1 || at_acc.coeffOf(k) != 0 || at_acc.coeffOf(i) == 0) {
    return false;
  }
  if (!(choir::add(at_init, Affine::var(j0, -1)) == choir::add(at_acc, Affine::var(j, -1)))) return false;
  const int size = static_cast<int>(tensor::dtypeSize(c.dtype));
  const Expr& v = *acc.value;
  if (v.kind != ExprKind::kOp || v.op != OpCode::kAdd || v.dtype != c.dtype) return false;
  for (int side = 0; side < 2; ++side) {
    const Expr& self = *v.args[side];
    const Expr& prod = *v.args[1 - side];
    if (self.kind != ExprKind::kLoad || self.buffer != acc.buffer || !(self.index == acc.index)) continue;
    if (prod.kind != ExprKind::kOp || prod.op != OpCode::kMul || prod.dtype != c.dtype) continue;
    for (int order = 0; order < 2; ++order) {
      const Expr& x = *prod.args[order];
      const Expr& y = *prod.args[1 - order];
      if (x.kind != ExprKind::kLoad || y.kind != ExprKind::kLoad || x.dtype != c.dtype || y.dtype != c.dtype ||
          x.buffer == acc.buffer || y.buffer == acc.buffer) {
        continue;
      }
      const choir::Buffer& xa = m_.buffers[x.buffer];
      const choir::Buffer& yb = m_.buffers[y.buffer];
      if (choir::flatCoeff(xa, x.index, j) != 0 || choir::flatCoeff(yb, y.index, j) != 1 ||
          choir::flatCoeff(yb, y.index, i) != 0) {
        continue;
      }
      // Displacements within a block and per-k steps fit an instruction.
      const int64_t rows = productRows(isa_);
      if (!fitsImm32(choir::flatCoeff(xa, x.index, i) * size * rows) ||
          !fitsImm32(choir::flatCoeff(c, acc.index, i) * size * rows) ||
          !fitsImm32(choir::flatCoeff(xa, x.index, k) * size) || !fitsImm32(choir::flatCoeff(yb, y.index, k) * size)) {
        return false;
      }
      *p = Product{&k_loop, &j_loop, &acc, &x, &y};
      if (l.body.size() == 3) {
        const Stmt& e = l.body[2];
        if (e.kind != StmtKind::kLoop || e.loop.tag != LoopTag::kVectorized || e.body.size() != 1 ||
            e.body[0].kind != StmtKind::kStore || e.loop.extent != j_loop.loop.extent ||
            e.loop.vector_width != j_loop.loop.vector_width) {
          return false;
        }
        p->epilogue = &e.body[0];
        p->epilogue_var = e.loop.var;
      }
      return true;
    }
  }
  return false;
}

absl::Status KernelEmitter::blockedProduct(const Stmt& l, const Product& p, bool outermost) {
  const Stmt& acc = *p.acc;
  const DType dtype = m_.buffers[acc.buffer].dtype;
  const int size = static_cast<int>(tensor::dtypeSize(dtype));
  const int width = p.j_loop->loop.vector_width;
  const int64_t n = p.j_loop->loop.extent;
  const int64_t k_extent = p.k_loop->loop.extent;
  const int i_var = l.loop.var, j_var = p.j_loop->loop.var, k_var = p.k_loop->loop.var;
  const choir::Buffer& a_buf = m_.buffers[p.a->buffer];
  const choir::Buffer& b_buf = m_.buffers[p.b->buffer];
  const choir::Buffer& c_buf = m_.buffers[acc.buffer];
  const int32_t a_row = static_cast<int32_t>(choir::flatCoeff(a_buf, p.a->index, i_var) * size);
  const int32_t a_step = static_cast<int32_t>(choir::flatCoeff(a_buf, p.a->index, k_var) * size);
  const int32_t b_step = static_cast<int32_t>(choir::flatCoeff(b_buf, p.b->index, k_var) * size);
  const int32_t c_row = static_cast<int32_t>(choir::flatCoeff(c_buf, acc.index, i_var) * size);
  const int rows = productRows(isa_);
  const int vectors = static_cast<int>(std::min<int64_t>(productVectors(isa_), n / width));

  x86::Gp i = cc_.newInt64("i");
  x86::Gp j = cc_.newInt64("j");
  x86::Gp k_zero = constantReg(cc_, 0);
  vars_[i_var] = i;
  vars_[j_var] = j;
  vars_[k_var] = k_zero;  // the pointers below are taken at k = 0
  // Threads split the rows, or, when there are enough whole column blocks
  // (kColumnSplit), the column blocks: a launch's share [begin, end) of the
  // rows is mapped to the share [begin, end) * blocks / rows of the column
  // blocks, over every row. Split by columns, each thread packs only its
  // own columns of B (split by rows, every thread packs all of B: twice the
  // packing on two threads, and most of the work when the rows are few).
  constexpr int64_t kColumnSplit = 8;
  const bool parallel = outermost && l.loop.tag == LoopTag::kCpuParallel;
  const int64_t block = static_cast<int64_t>(vectors) * width;
  const int64_t column_blocks = n / block;
  const bool split_columns = parallel && column_blocks >= kColumnSplit && fitsImm32(column_blocks * block);
  x86::Gp start, limit, j_begin, j_end;
  if (parallel && !split_columns) {
    start = begin_;
    limit = end_;
  } else {
    start = constantReg(cc_, 0);
    limit = constantReg(cc_, l.loop.extent);
  }
  if (split_columns) {
    auto share = [&](x86::Gp row) {
      x86::Gp lo = cc_.newInt64("share"), hi = cc_.newInt64("share_hi"), rows_total = cc_.newInt64("rows");
      cc_.imul(lo, row, static_cast<int32_t>(column_blocks));
      cc_.xor_(hi, hi);
      cc_.mov(rows_total, l.loop.extent);
      cc_.div(hi, lo, rows_total);
      cc_.imul(lo, lo, static_cast<int32_t>(block));
      return lo;
    };
    j_begin = share(begin_);
    j_end = share(end_);
  } else {
    j_begin = constantReg(cc_, 0);
    j_end = constantReg(cc_, column_blocks * block);
  }
  x86::Gp rows_limit = cc_.newInt64("rows_limit");
  cc_.mov(rows_limit, limit);
  cc_.sub(rows_limit, rows - 1);
  Simd vec(cc_, isa_, laneOf(dtype), width * size);
  Simd scalar = vec.scalarForm();

  // The element address of `index` in `buffer` at the current i, j and k = 0.
  auto pointer = [&](int buffer, const std::vector<Affine>& index, const char* name) {
    x86::Gp ptr = cc_.newIntPtr(name);
    x86::Gp off = affineValue(choir::flatIndex(m_.buffers[buffer], index));
    cc_.lea(ptr, x86::ptr(bufferBase(buffer), off, shiftOf(dtype)));
    return ptr;
  };
  x86::Gp all_k = constantReg(cc_, k_extent);
  // R rows from i times V vectors (of s's lanes) from j, over k in
  // [k0, k0 + k_count): the sums start at zero when k0 is 0 and at C
  // otherwise (the partial sum of the k blocks before: the same additions
  // in the same order). B comes from `panel` (packed rows of panel_row
  // bytes, aligned) or, without one, from B itself.
  auto micro = [&](int r_count, int v_count, Simd& s, x86::Gp k0, x86::Gp k_count, x86::Gp panel,
                   int32_t panel_row) -> absl::Status {
    const int32_t v_bytes = s.scalar() ? size : width * size;
    vars_[k_var] = k0;
    x86::Gp pa = pointer(p.a->buffer, p.a->index, "pa");
    x86::Gp pc = pointer(acc.buffer, acc.index, "pc");
    x86::Gp pb;
    if (panel.isValid()) {
      pb = cc_.newIntPtr("pb");
      cc_.mov(pb, panel);
    } else {
      pb = pointer(p.b->buffer, p.b->index, "pb");
    }
    vars_[k_var] = k_zero;
    std::vector<x86::Vec> sums(static_cast<size_t>(r_count * v_count));
    for (x86::Vec& sum : sums) sum = s.newVec("sum");
    Label from_c = cc_.newLabel(), ready = cc_.newLabel();
    cc_.test(k0, k0);
    cc_.jnz(from_c);
    for (x86::Vec& sum : sums) s.zero(sum);
    cc_.jmp(ready);
    cc_.bind(from_c);
    for (int r = 0; r < r_count; ++r) {
      for (int v = 0; v < v_count; ++v) s.load(sums[r * v_count + v], x86::ptr(pc, r * c_row + v * v_bytes));
    }
    cc_.bind(ready);
    x86::Gp k = cc_.newInt64("k");
    cc_.xor_(k, k);
    ACCY_RETURN_IF_ERROR(countedLoop(cc_, k, k_count, 1, [&]() -> absl::Status {
      std::vector<x86::Vec> bv(static_cast<size_t>(v_count));
      for (int v = 0; v < v_count; ++v) {
        bv[v] = s.newVec("b");
        s.load(bv[v], x86::ptr(pb, v * v_bytes));
      }
      x86::Vec av = s.newVec("a");
      for (int r = 0; r < r_count; ++r) {
        if (s.scalar()) {
          s.load(av, x86::ptr(pa, r * a_row));
        } else {
          s.broadcastLoad(av, x86::ptr(pa, r * a_row));
        }
        for (int v = 0; v < v_count; ++v) {
          x86::Vec& sum = sums[static_cast<size_t>(r * v_count + v)];
          s.fma(sum, av, bv[v], sum);
        }
      }
      cc_.add(pa, a_step);
      cc_.add(pb, panel.isValid() ? panel_row : b_step);
      return absl::OkStatus();
    }));
    for (int r = 0; r < r_count; ++r) {
      for (int v = 0; v < v_count; ++v) s.store(x86::ptr(pc, r * c_row + v * v_bytes), sums[r * v_count + v]);
    }
    if (p.epilogue == nullptr) return absl::OkStatus();
    // The epilogue, once the tile holds its whole sum (after the last k
    // panel), element by element of the tile: row i + r, columns j + v W.
    Label skip = cc_.newLabel();
    if (panel.isValid()) {
      x86::Gp end = cc_.newInt64("k_end");
      cc_.mov(end, k0);
      cc_.add(end, k_count);
      cc_.cmp(end, all_k);
      cc_.jne(skip);
    }
    // Constants are loaded once per tile (the sums' registers are free by
    // now) and each row's addresses computed once for its vectors.
    const int lanes = s.scalar() ? 1 : width;
    const bool hoist = hoisting_.empty();
    if (hoist) beginHoist({&s, &scalar32_, &scalar64_});
    const bool rows_were_active = rows_active_;
    std::map<std::string, x86::Gp> outer_rows;
    outer_rows.swap(rows_);
    rows_active_ = true;
    for (int r = 0; r < r_count; ++r) {
      x86::Gp row = cc_.newInt64("row");
      cc_.lea(row, x86::ptr(i, r));
      vars_[i_var] = row;
      rows_.clear();
      prepareRowBases(*p.epilogue, p.epilogue_var);
      for (int v = 0; v < v_count; ++v) {
        x86::Gp column = cc_.newInt64("column");
        cc_.lea(column, x86::ptr(j, v * lanes));
        vars_[p.epilogue_var] = column;
        Mode mode{!s.scalar(), s.scalar() ? nullptr : &s, p.epilogue_var, column};
        cse_.clear();
        ACCY_RETURN_IF_ERROR(store(*p.epilogue, mode));
      }
    }
    rows_.swap(outer_rows);
    rows_active_ = rows_were_active;
    if (hoist) endHoist();
    cse_.clear();
    vars_[i_var] = i;
    cc_.bind(skip);
    return absl::OkStatus();
  };
  // Every row block of [start, limit) at the current j and k block.
  auto row_blocks = [&](int v_count, Simd& s, x86::Gp k0, x86::Gp k_count, x86::Gp panel,
                        int32_t panel_row) -> absl::Status {
    cc_.mov(i, start);
    ACCY_RETURN_IF_ERROR(countedLoop(cc_, i, rows_limit, rows,
                                     [&] { return micro(rows, v_count, s, k0, k_count, panel, panel_row); }));
    return countedLoop(cc_, i, limit, 1, [&] { return micro(1, v_count, s, k0, k_count, panel, panel_row); });
  };
  // Column blocks outermost. Whole blocks of `vectors` vectors pack their
  // B rows, kPanelRows at a time, into an aligned panel on the stack (the
  // microkernel then reads B contiguously and aligned, whatever the
  // caller's alignment); the remaining columns read B in place.
  constexpr int64_t kPanelRows = 256;
  const int64_t panel_rows = std::min<int64_t>(kPanelRows, k_extent);
  const int32_t panel_row = static_cast<int32_t>(block * size);
  x86::Mem panel_mem = cc_.newStack(static_cast<uint32_t>(panel_rows * panel_row), 64, "panel");
  x86::Gp panel = cc_.newIntPtr("panel");
  cc_.lea(panel, panel_mem);
  x86::Gp k0 = cc_.newInt64("k0");
  x86::Gp k_count = cc_.newInt64("k_count");
  cc_.mov(j, j_begin);
  ACCY_RETURN_IF_ERROR(countedLoop(cc_, j, j_end, block, [&]() -> absl::Status {
    cc_.xor_(k0, k0);
    return countedLoop(cc_, k0, all_k, panel_rows, [&]() -> absl::Status {
      // k_count = min(panel_rows, k_extent - k0)
      cc_.mov(k_count, all_k);
      cc_.sub(k_count, k0);
      x86::Gp most = constantReg(cc_, panel_rows);
      cc_.cmp(k_count, most);
      cc_.cmovg(k_count, most);
      // Pack B[k0 .. k0 + k_count, j .. j + block).
      vars_[k_var] = k0;
      x86::Gp src = pointer(p.b->buffer, p.b->index, "src");
      vars_[k_var] = k_zero;
      x86::Gp dst = cc_.newIntPtr("dst");
      cc_.mov(dst, panel);
      x86::Gp kk = cc_.newInt64("kk");
      cc_.xor_(kk, kk);
      ACCY_RETURN_IF_ERROR(countedLoop(cc_, kk, k_count, 1, [&]() -> absl::Status {
        for (int v = 0; v < vectors; ++v) {
          x86::Vec t = vec.newVec("pack");
          vec.load(t, x86::ptr(src, v * width * size));
          vec.store(x86::ptr(dst, v * width * size), t);
        }
        cc_.add(src, b_step);
        cc_.add(dst, panel_row);
        return absl::OkStatus();
      }));
      return row_blocks(vectors, vec, k0, k_count, panel, panel_row);
    });
  }));
  // The remaining columns: in the launch that ends the rows, when split
  // by columns (j is then at the end of the whole blocks).
  Label done = cc_.newLabel();
  if (split_columns) {
    cc_.cmp(end_, constantReg(cc_, l.loop.extent));
    cc_.jne(done);
  }
  x86::Gp none;
  if (n % block >= width) {
    ACCY_RETURN_IF_ERROR(countedLoop(cc_, j, constantReg(cc_, n - (width - 1)), width,
                                     [&] { return row_blocks(1, vec, k_zero, all_k, none, 0); }));
  }
  if (n % width != 0) {
    ACCY_RETURN_IF_ERROR(
        countedLoop(cc_, j, constantReg(cc_, n), 1, [&] { return row_blocks(1, scalar, k_zero, all_k, none, 0); }));
  }
  cc_.bind(done);
  return absl::OkStatus();
}

int KernelEmitter::loopWidth(int width, DType dtype, const ExprRef& value) const {
  // A light loop (a load and an add or two per element) is bound by its
  // loads. A 64-byte load from a buffer that is not 64-byte aligned (a
  // caller's std::vector is 16) always spans two cache lines and counts
  // twice against the load ports; a 32-byte one does so at most every
  // other time. Measured on Zen 5: a sum over 64 MiB takes 1.7x as long
  // with unaligned 64-byte loads as with 32-byte ones (docs/PERFORMANCE.md).
  constexpr int64_t kLightNodes = 6;
  if (isa_ == Isa::kAvx512 && width * tensor::dtypeSize(dtype) == 64 && choir::exprSize(value) <= kLightNodes) {
    return width / 2;
  }
  return width;
}

bool KernelEmitter::streams(const Stmt& l) const {
  const Stmt& st = l.body[0];
  const choir::Buffer& out = m_.buffers[st.buffer];
  if (!isFloat(out.dtype) || l.loop.vector_width <= 1) return false;
  if (choir::flatCoeff(out, st.index, l.loop.var) != 1) return false;
  // Streaming an output the kernel also reads would evict what it reads.
  // Only light values stream: where each vector takes tens of instructions
  // (a transcendental function, a division, a long chain) the loop is bound
  // by arithmetic, and there plain stores measured faster (sin(a x + b) c
  // over 64 MiB: 3.40 against 3.73 ms, docs/PERFORMANCE.md).
  constexpr int64_t kStreamNodes = 16;
  bool reads_output = false;
  const bool heavy = choir::exprSize(st.value) > kStreamNodes || choir::exprIsExpensive(st.value);
  choir::visitExpr(st.value, [&](const Expr& x) {
    if (x.kind == ExprKind::kLoad && x.buffer == st.buffer) reads_output = true;
  });
  return !reads_output && !heavy && stream_above_ >= 0 &&
         out.elements() * tensor::dtypeSize(out.dtype) > stream_above_;
}

absl::Status KernelEmitter::innermostStore(const Stmt& l, bool outermost) {
  const Stmt& st = l.body[0];
  const DType dtype = m_.buffers[st.buffer].dtype;
  x86::Gp i = cc_.newInt64("i");
  vars_[l.loop.var] = i;
  const bool parallel = outermost && l.loop.tag == LoopTag::kCpuParallel;
  const bool vectorized = l.loop.tag == LoopTag::kVectorized ||
                          (parallel && l.loop.vector_width > 1);
  x86::Gp limit;
  if (parallel) {
    cc_.mov(i, begin_);
    limit = end_;
  } else {
    cc_.xor_(i, i);
    limit = constantReg(cc_, l.loop.extent);
  }
  rows_.clear();
  rows_active_ = true;
  prepareRowBases(st, l.loop.var);
  Mode scalar{false, nullptr, l.loop.var, i};
  absl::Status status;
  if (vectorized && isFloat(dtype)) {
    const int width = loopWidth(l.loop.vector_width, dtype, st.value);
    Simd simd(cc_, isa_, laneOf(dtype), width * static_cast<int>(tensor::dtypeSize(dtype)));
    beginHoist({&simd, &scalar32_, &scalar64_});
    const bool stream = streams(l);
    Mode vec{true, &simd, l.loop.var, i, stream};
    if (stream) {
      // Scalar iterations until the output is aligned to the vector (the
      // streaming stores need it); an output not aligned to its element
      // size never gets there and runs scalar, still correct.
      const int64_t size = tensor::dtypeSize(dtype);
      const x86::Gp row = rowBase(st.buffer, choir::add(choir::flatIndex(m_.buffers[st.buffer], st.index),
                                                        Affine::var(l.loop.var, -1)));
      Label top = cc_.newLabel(), aligned = cc_.newLabel();
      x86::Gp at = cc_.newIntPtr("at");
      cc_.bind(top);
      cc_.cmp(i, limit);
      cc_.jge(aligned);
      cc_.lea(at, x86::ptr(row, i, shiftOf(dtype)));
      cc_.test(at, width * size - 1);
      cc_.jz(aligned);
      cse_.clear();
      status = store(st, scalar);
      cc_.inc(i);
      cc_.jmp(top);
      cc_.bind(aligned);
    }
    x86::Gp vlimit = cc_.newInt64("vlimit");
    cc_.mov(vlimit, limit);
    cc_.sub(vlimit, width - 1);
    if (status.ok()) {
      status = countedLoop(cc_, i, vlimit, width, [&] {
        cse_.clear();
        return store(st, vec);
      });
    }
    // The scalar tail, unless the extent is known to be whole vectors.
    if (status.ok() && (parallel || stream || l.loop.extent % width != 0)) {
      status = countedLoop(cc_, i, limit, 1, [&] {
        cse_.clear();
        return store(st, scalar);
      });
    }
    // Streaming stores are weakly ordered: fence them before the launch
    // reports the kernel done.
    if (stream) cc_.sfence();
    endHoist();
  } else {
    beginHoist({&scalar32_, &scalar64_});
    status = countedLoop(cc_, i, limit, 1, [&] {
      cse_.clear();
      return store(st, scalar);
    });
    endHoist();
  }
  rows_active_ = false;
  rows_.clear();
  return status;
}

void KernelEmitter::beginHoist(std::initializer_list<Simd*> simds) {
  hoist_ = Hoist{};
  hoist_.point = cc_.cursor();
  hoisting_.assign(simds.begin(), simds.end());
  for (Simd* s : hoisting_) s->setHoist(&hoist_);
}

void KernelEmitter::endHoist() {
  for (Simd* s : hoisting_) s->setHoist(nullptr);
  hoisting_.clear();
  hoist_ = Hoist{};
}

absl::Status KernelEmitter::store(const Stmt& s, const Mode& mode) {
  ACCY_ASSIGN_OR_RETURN(Val v, expr(s.value, mode));
  const DType dtype = m_.buffers[s.buffer].dtype;
  x86::Mem mem = address(s.buffer, s.index, mode);
  if (mode.vector && mode.stream) {
    mode.simd->streamStore(mem, v.v);
  } else if (mode.vector) {
    mode.simd->store(mem, v.v);
  } else {
    storeScalar(dtype, mem, v);
  }
  return absl::OkStatus();
}

void KernelEmitter::prepareRowBases(const ExprRef& e, int inner_var) {
  choir::visitExpr(e, [&](const Expr& x) {
    if (x.kind != ExprKind::kLoad) return;
    Affine flat = choir::flatIndex(m_.buffers[x.buffer], x.index);
    Affine rest = choir::add(flat, Affine::var(inner_var, -flat.coeffOf(inner_var)));
    rowBase(x.buffer, rest);
  });
}

void KernelEmitter::prepareRowBases(const Stmt& s, int inner_var) {
  if (s.value) prepareRowBases(s.value, inner_var);
  if (s.kind == StmtKind::kStore) {
    Affine flat = choir::flatIndex(m_.buffers[s.buffer], s.index);
    rowBase(s.buffer, choir::add(flat, Affine::var(inner_var, -flat.coeffOf(inner_var))));
  }
}

x86::Gp KernelEmitter::affineValue(const Affine& a) {
  x86::Gp r = cc_.newInt64("idx");
  cc_.mov(r, a.constant);
  for (const Affine::Term& t : a.terms) {
    auto it = vars_.find(t.var);
    ACCY_CHECK(it != vars_.end(), "variable i%d is not bound", t.var);
    if (t.coeff == 1) {
      cc_.add(r, it->second);
      continue;
    }
    x86::Gp p = cc_.newInt64("term");
    if (fitsImm32(t.coeff)) {
      cc_.imul(p, it->second, t.coeff);
    } else {
      cc_.mov(p, t.coeff);
      cc_.imul(p, it->second);
    }
    cc_.add(r, p);
  }
  return r;
}

x86::Gp KernelEmitter::rowBase(int buffer, const Affine& rest) {
  const std::string key = strCat(buffer, ":", choir::toText(rest));
  if (rows_active_) {
    auto it = rows_.find(key);
    if (it != rows_.end()) return it->second;
  }
  const DType dtype = m_.buffers[buffer].dtype;
  x86::Gp r = cc_.newIntPtr("row");
  if (rest.terms.empty() && fitsImm32(rest.constant * tensor::dtypeSize(dtype))) {
    cc_.lea(r, x86::ptr(bufferBase(buffer), static_cast<int32_t>(rest.constant * tensor::dtypeSize(dtype))));
  } else {
    x86::Gp off = affineValue(rest);
    cc_.lea(r, x86::ptr(bufferBase(buffer), off, shiftOf(dtype)));
  }
  if (rows_active_) rows_[key] = r;
  return r;
}

x86::Mem KernelEmitter::address(int buffer, const std::vector<Affine>& index, const Mode& mode) {
  const DType dtype = m_.buffers[buffer].dtype;
  Affine flat = choir::flatIndex(m_.buffers[buffer], index);
  const int64_t c = mode.inner_var >= 0 ? flat.coeffOf(mode.inner_var) : 0;
  Affine rest = mode.inner_var >= 0 ? choir::add(flat, Affine::var(mode.inner_var, -c)) : flat;
  x86::Gp base = rowBase(buffer, rest);
  if (c == 0) return x86::ptr(base);
  const int64_t disp = c * mode.offset * tensor::dtypeSize(dtype);
  if (!fitsImm32(disp)) {
    // A stride too large for a displacement: move the index register.
    x86::Gp moved = cc_.newInt64("moved");
    cc_.lea(moved, x86::ptr(mode.inner, static_cast<int32_t>(mode.offset)));
    Mode at = mode;
    at.inner = moved;
    at.offset = 0;
    return address(buffer, index, at);
  }
  if (c == 1) return x86::ptr(base, mode.inner, shiftOf(dtype), static_cast<int32_t>(disp));
  x86::Gp scaled = cc_.newInt64("scaled");
  if (fitsImm32(c)) {
    cc_.imul(scaled, mode.inner, c);
  } else {
    cc_.mov(scaled, c);
    cc_.imul(scaled, mode.inner);
  }
  return x86::ptr(base, scaled, shiftOf(dtype), static_cast<int32_t>(disp));
}

void KernelEmitter::sext32(x86::Gp r, DType dtype) {
  if (dtype == DType::i32) cc_.movsxd(r, r.r32());
}

KernelEmitter::Val KernelEmitter::loadScalar(DType dtype, const x86::Mem& mem) {
  Val v;
  x86::Mem m = mem;
  switch (dtype) {
    case DType::f32:
    case DType::f64: {
      Simd& s = scalarSimd(dtype);
      v.kind = Val::Kind::kVec;
      v.v = s.newVec("ld");
      s.load(v.v, m);
      return v;
    }
    case DType::i32:
      v.g = cc_.newInt64("ld");
      m.setSize(4);
      cc_.movsxd(v.g, m);
      return v;
    case DType::i64:
      v.g = cc_.newInt64("ld");
      m.setSize(8);
      cc_.mov(v.g, m);
      return v;
    case DType::bool_:
      v.g = cc_.newInt64("ld");
      m.setSize(1);
      cc_.movzx(v.g.r32(), m);
      return v;
  }
  return v;
}

void KernelEmitter::storeScalar(DType dtype, const x86::Mem& mem, const Val& v) {
  x86::Mem m = mem;
  switch (dtype) {
    case DType::f32:
    case DType::f64:
      scalarSimd(dtype).store(m, v.v);
      return;
    case DType::i32:
      m.setSize(4);
      cc_.mov(m, v.g.r32());
      return;
    case DType::i64:
      m.setSize(8);
      cc_.mov(m, v.g);
      return;
    case DType::bool_:
      m.setSize(1);
      cc_.mov(m, v.g.r8());
      return;
  }
}

x86::Gp KernelEmitter::maskToBool(const Mask& m, Simd& s) {
  x86::Gp r = cc_.newInt64("bool");
  if (s.isa() == Isa::kAvx512) {
    cc_.kmovw(r.r32(), m.k);
  } else if (s.isa() == Isa::kAvx2) {
    cc_.vmovd(r.r32(), m.v.xmm());
  } else {
    cc_.movd(r.r32(), m.v.xmm());
  }
  cc_.and_(r.r32(), 1);
  return r;
}

absl::StatusOr<KernelEmitter::Val> KernelEmitter::expr(const ExprRef& e, const Mode& mode) {
  choir::countWork();
  const int key = numbers_.number(e);
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;
  Val v;
  switch (e->kind) {
    case ExprKind::kLoad: {
      x86::Mem mem = address(e->buffer, e->index, mode);
      if (mode.vector) {
        v.kind = Val::Kind::kVec;
        v.v = mode.simd->newVec("ld");
        const int64_t c = choir::flatCoeff(m_.buffers[e->buffer], e->index, mode.inner_var);
        if (c == 0) {
          v.v = mode.simd->hoistedValue(strCat("load:", key), [&](x86::Vec r) { mode.simd->broadcastLoad(r, mem); });
        } else {
          mode.simd->load(v.v, mem);
        }
      } else {
        v = loadScalar(e->dtype, mem);
      }
      break;
    }
    case ExprKind::kConstant: {
      const double c = tensor::convertValue(e->constant, DType::f64, e->dtype);
      if (isFloat(e->dtype)) {
        Simd& s = mode.vector ? *mode.simd : scalarSimd(e->dtype);
        v.kind = Val::Kind::kVec;
        v.v = s.constantValue(c);
      } else {
        if (mode.vector) return unimplemented("integer constant in a vector loop");
        v.g = cc_.newInt64("k");
        cc_.mov(v.g, tensor::toInt64(c));
      }
      break;
    }
    case ExprKind::kIndex: {
      if (mode.vector) return unimplemented("index values in a vector loop");
      x86::Gp g = affineValue(e->index[0]);
      Val iv;
      iv.g = g;
      ACCY_ASSIGN_OR_RETURN(v, cast(iv, DType::i64, e->dtype));
      break;
    }
    case ExprKind::kOp: {
      // add(mul(a, b), c) in floating point becomes one fused multiply-add
      // where the ISA has FMA (one rounding instead of two).
      if (e->op == OpCode::kAdd && isFloat(e->dtype) && isa_ != Isa::kSse41) {
        for (int side = 0; side < 2; ++side) {
          const ExprRef& m = e->args[side];
          if (m->kind != ExprKind::kOp || m->op != OpCode::kMul) continue;
          if (cse_.contains(numbers_.number(m))) continue;
          ACCY_ASSIGN_OR_RETURN(Val a, expr(m->args[0], mode));
          ACCY_ASSIGN_OR_RETURN(Val b, expr(m->args[1], mode));
          ACCY_ASSIGN_OR_RETURN(Val c, expr(e->args[1 - side], mode));
          Simd& s = mode.vector ? *mode.simd : scalarSimd(e->dtype);
          v.kind = Val::Kind::kVec;
          v.v = s.newVec("fma");
          s.fma(v.v, a.v, b.v, c.v);
          cse_[key] = v;
          return v;
        }
      }
      std::vector<Val> args;
      std::vector<DType> types;
      for (const ExprRef& a : e->args) {
        ACCY_ASSIGN_OR_RETURN(Val av, expr(a, mode));
        args.push_back(av);
        types.push_back(a->dtype);
      }
      ACCY_ASSIGN_OR_RETURN(v, op(*e, args, types, mode));
      break;
    }
  }
  cse_[key] = v;
  return v;
}

absl::StatusOr<KernelEmitter::Val> KernelEmitter::op(const Expr& e, const std::vector<Val>& a,
                                                     const std::vector<DType>& types, const Mode& mode) {
  Prims p(*this, mode);
  codegen::OpSemantics<Prims> sem(p, "x86-64 emitter");
  const Val v = sem.op(e.op, e.dtype, types.empty() ? e.dtype : types[0], a);
  ACCY_RETURN_IF_ERROR(p.status());
  ACCY_RETURN_IF_ERROR(sem.status());
  return v;
}

KernelEmitter::Val KernelEmitter::select(const Val& c, const Val& t, const Val& f, DType type,
                                         const Mode& mode) {
  Val v;
  if (mode.vector) {
    v.kind = Val::Kind::kVec;
    v.v = mode.simd->newVec("sel");
    mode.simd->select(v.v, c.m, t.v, f.v);
    return v;
  }
  if (isFloat(type)) {
    Simd& s = scalarSimd(type);
    v.kind = Val::Kind::kVec;
    v.v = s.newVec("sel");
    Label use_f = cc_.newLabel(), done = cc_.newLabel();
    cc_.test(c.g, c.g);
    cc_.jz(use_f);
    s.mov(v.v, t.v);
    cc_.jmp(done);
    cc_.bind(use_f);
    s.mov(v.v, f.v);
    cc_.bind(done);
    return v;
  }
  v.g = cc_.newInt64("sel");
  cc_.mov(v.g, f.g);
  cc_.test(c.g, c.g);
  cc_.cmovnz(v.g, t.g);
  return v;
}

absl::StatusOr<KernelEmitter::Val> KernelEmitter::cast(const Val& a, DType from, DType to) {
  const Mode scalar;
  Prims p(*this, scalar);
  codegen::OpSemantics<Prims> sem(p, "x86-64 emitter");
  const Val v = sem.convert(a, from, to);
  ACCY_RETURN_IF_ERROR(p.status());
  ACCY_RETURN_IF_ERROR(sem.status());
  return v;
}

KernelEmitter::Val KernelEmitter::identity(OpCode combiner, DType dtype, Simd* simd) {
  const double id = choir::combinerIdentity(combiner, dtype);
  Val v;
  if (isFloat(dtype)) {
    Simd& s = simd ? *simd : scalarSimd(dtype);
    v.kind = Val::Kind::kVec;
    v.v = s.newVec("acc");
    s.constant(v.v, id);
    return v;
  }
  v.g = cc_.newInt64("acc");
  if (combiner == OpCode::kMin && dtype == DType::i64) {
    cc_.mov(v.g, std::numeric_limits<int64_t>::max());
  } else {
    cc_.mov(v.g, static_cast<int64_t>(id));
  }
  return v;
}

// acc = combiner(acc, x), in acc's registers (a loop-carried accumulator).
void KernelEmitter::combine(OpCode combiner, DType dtype, Val& acc, const Val& x, Simd* simd) {
  Mode mode;
  mode.vector = simd != nullptr;
  mode.simd = simd;
  Prims p(*this, mode);
  codegen::OpSemantics<Prims> sem(p, "x86-64 emitter");
  const Val r = sem.binary(combiner, dtype, acc, x);
  if (isFloat(dtype)) {
    (simd ? *simd : scalarSimd(dtype)).mov(acc.v, r.v);
  } else {
    cc_.mov(acc.g, r.g);
  }
}

absl::Status KernelEmitter::reduce(const Stmt& s) {
  const DType dtype = m_.buffers[s.buffer].dtype;
  Val acc = identity(s.combiner, dtype, nullptr);
  const choir::LoopHeader& inner = s.domain.back();
  const bool vectorized = inner.tag == LoopTag::kVectorized && isFloat(dtype);
  const int width = vectorized ? loopWidth(inner.vector_width, dtype, s.value) : 1;
  Simd vsimd(cc_, isa_, laneOf(dtype),
             vectorized ? width * static_cast<int>(tensor::dtypeSize(dtype)) : 16);
  constexpr int kUnroll = 4;
  constexpr int kUnrollNodes = 32;
  std::vector<Val> vacc;
  if (vectorized) {
    for (int u = 0; u < kUnroll; ++u) vacc.push_back(identity(s.combiner, dtype, &vsimd));
  }
  // Domain loops, outermost first; the innermost evaluates the value.
  std::function<absl::Status(size_t)> level = [&](size_t d) -> absl::Status {
    const choir::LoopHeader& h = s.domain[d];
    x86::Gp i = cc_.newInt64("r");
    vars_[h.var] = i;
    cc_.xor_(i, i);
    if (d + 1 < s.domain.size()) {
      return countedLoop(cc_, i, constantReg(cc_, h.extent), 1, [&] { return level(d + 1); });
    }
    rows_.clear();
    rows_active_ = true;
    prepareRowBases(s.value, h.var);
    beginHoist({&vsimd, &scalar32_, &scalar64_});
    Mode scalar{false, nullptr, h.var, i};
    // The loops below are emitted only where they run: the extent is known,
    // so is what is left after whole unrolled steps and whole vectors. Each
    // copy of the value is code to emit and to register-allocate, so a large
    // value (a long fused chain: enough independent work per lane for the
    // core to overlap iterations) is not unrolled.
    const bool unroll = vectorized && h.extent >= kUnroll * width && choir::exprSize(s.value) <= kUnrollNodes;
    const int64_t after_unroll = unroll ? h.extent % (kUnroll * width) : h.extent;
    if (vectorized) {
      Mode vec{true, &vsimd, h.var, i};
      if (unroll) {
        x86::Gp ulimit = constantReg(cc_, h.extent - (kUnroll * width - 1));
        ACCY_RETURN_IF_ERROR(countedLoop(cc_, i, ulimit, kUnroll * width, [&]() -> absl::Status {
          // Lanes u*width.. of this step: each copy addresses its lanes
          // by displacement.
          for (int u = 0; u < kUnroll; ++u) {
            cse_.clear();
            Mode copy = vec;
            copy.offset = int64_t{u} * width;
            ACCY_ASSIGN_OR_RETURN(Val x, expr(s.value, copy));
            combine(s.combiner, dtype, vacc[u], x, &vsimd);
          }
          return absl::OkStatus();
        }));
      }
      if (after_unroll >= width) {
        x86::Gp vlimit = constantReg(cc_, h.extent - (width - 1));
        ACCY_RETURN_IF_ERROR(countedLoop(cc_, i, vlimit, width, [&]() -> absl::Status {
          cse_.clear();
          ACCY_ASSIGN_OR_RETURN(Val x, expr(s.value, vec));
          combine(s.combiner, dtype, vacc[0], x, &vsimd);
          return absl::OkStatus();
        }));
      }
    }
    if (!vectorized || h.extent % width != 0) {
      ACCY_RETURN_IF_ERROR(countedLoop(cc_, i, constantReg(cc_, h.extent), 1, [&]() -> absl::Status {
        cse_.clear();
        ACCY_ASSIGN_OR_RETURN(Val x, expr(s.value, scalar));
        combine(s.combiner, dtype, acc, x, nullptr);
        return absl::OkStatus();
      }));
    }
    endHoist();
    rows_active_ = false;
    rows_.clear();
    return absl::OkStatus();
  };
  ACCY_RETURN_IF_ERROR(level(0));
  if (vectorized) {
    for (int u = 1; u < kUnroll; ++u) combine(s.combiner, dtype, vacc[0], vacc[u], &vsimd);
    Val h;
    h.kind = Val::Kind::kVec;
    h.v = cc_.newXmm("h");
    Simd::Horizontal op = s.combiner == OpCode::kMul   ? Simd::Horizontal::kProd
                          : s.combiner == OpCode::kMax ? Simd::Horizontal::kMax
                          : s.combiner == OpCode::kMin ? Simd::Horizontal::kMin
                                                       : Simd::Horizontal::kSum;
    vsimd.horizontal(op, h.v, vacc[0].v);
    combine(s.combiner, dtype, acc, h, nullptr);
  }
  if (s.mean_count != 0) {
    const Mode scalar;
    Prims p(*this, scalar);
    codegen::OpSemantics<Prims> sem(p, "x86-64 emitter");
    acc = sem.binary(OpCode::kDiv, dtype, acc, p.constant(dtype, static_cast<double>(s.mean_count)));
    ACCY_RETURN_IF_ERROR(p.status());
    ACCY_RETURN_IF_ERROR(sem.status());
  }
  cse_.clear();
  storeScalar(dtype, address(s.buffer, s.index, Mode{}), acc);
  return absl::OkStatus();
}

}  // namespace accy::x64
