#include "compiler/choir/ir.h"

#include <algorithm>
#include <cmath>

namespace accy::choir {
namespace {

Affine normalize(Affine a) {
  std::sort(a.terms.begin(), a.terms.end(),
            [](const Affine::Term& x, const Affine::Term& y) { return x.var < y.var; });
  std::vector<Affine::Term> merged;
  for (const Affine::Term& t : a.terms) {
    if (!merged.empty() && merged.back().var == t.var) {
      merged.back().coeff += t.coeff;
    } else {
      merged.push_back(t);
    }
  }
  std::erase_if(merged, [](const Affine::Term& t) { return t.coeff == 0; });
  a.terms = std::move(merged);
  return a;
}

}  // namespace

int64_t Affine::coeffOf(int v) const {
  for (const Term& t : terms) {
    if (t.var == v) return t.coeff;
  }
  return 0;
}

Affine add(const Affine& a, const Affine& b) {
  Affine r = a;
  r.terms.insert(r.terms.end(), b.terms.begin(), b.terms.end());
  r.constant += b.constant;
  return normalize(std::move(r));
}

Affine scale(const Affine& a, int64_t k) {
  Affine r = a;
  for (Affine::Term& t : r.terms) t.coeff *= k;
  r.constant *= k;
  return normalize(std::move(r));
}

void Substitution::set(int var, Affine a) {
  for (auto& [v, value] : entries) {
    if (v == var) {
      value = std::move(a);
      return;
    }
  }
  entries.emplace_back(var, std::move(a));
}

const Affine* Substitution::find(int var) const {
  for (const auto& [v, value] : entries) {
    if (v == var) return &value;
  }
  return nullptr;
}

Affine substitute(const Affine& a, const Substitution& s) {
  countWork(static_cast<int64_t>(a.terms.size()) + 1);
  Affine r = Affine::constantOf(a.constant);
  for (const Affine::Term& t : a.terms) {
    if (const Affine* v = s.find(t.var)) {
      for (const Affine::Term& u : v->terms) r.terms.push_back({u.var, u.coeff * t.coeff});
      r.constant += v->constant * t.coeff;
    } else {
      r.terms.push_back(t);
    }
  }
  return normalize(std::move(r));
}

int64_t Buffer::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> Buffer::strides() const {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

ExprRef makeLoad(DType dtype, int buffer, std::vector<Affine> index) {
  countWork();
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::kLoad;
  e->dtype = dtype;
  e->buffer = buffer;
  e->index = std::move(index);
  return e;
}

ExprRef bindLoad(const ExprRef& load, int var, ExprRef value) {
  countWork();
  auto e = std::make_shared<Expr>(*load);
  e->bound.push_back(var);
  e->args.push_back(std::move(value));
  return e;
}

ExprRef clampIndex(ExprRef e, int64_t hi) {
  const DType d = e->dtype == DType::i32 && hi < (int64_t{1} << 31) ? DType::i32 : DType::i64;
  if (e->dtype != d) e = makeOp(OpCode::kCast, d, {std::move(e)});
  ExprRef low = makeOp(OpCode::kMax, d, {std::move(e), makeConstant(d, 0)});
  return makeOp(OpCode::kMin, d, {std::move(low), makeConstant(d, static_cast<double>(hi))});
}

ExprRef indexBelow(const ExprRef& e, int64_t n) {
  if (e->dtype == DType::i32 && n <= int64_t{UINT32_MAX}) {
    return makeOp(OpCode::kLt, DType::bool_,
                  {makeOp(OpCode::kBitcast, DType::u32, {e}), makeConstant(DType::u32, static_cast<double>(n))});
  }
  return makeOp(OpCode::kWhere, DType::bool_,
                {makeOp(OpCode::kGe, DType::bool_, {e, makeConstant(e->dtype, 0)}),
                 makeOp(OpCode::kLt, DType::bool_, {e, makeConstant(e->dtype, static_cast<double>(n))}),
                 makeConstant(DType::bool_, 0)});
}

bool isIndexBelow(const Expr& g, const ExprRef& e, int64_t n) {
  auto isConstant = [](const ExprRef& x, DType dtype, double v) {
    return x->kind == ExprKind::kConstant && x->dtype == dtype && x->constant == v;
  };
  auto isOp = [](const Expr& x, OpCode op, size_t args) {
    return x.kind == ExprKind::kOp && x.op == op && x.args.size() == args;
  };
  const double bound = static_cast<double>(n);
  if (e->dtype == DType::i32 && n <= int64_t{UINT32_MAX}) {
    return isOp(g, OpCode::kLt, 2) && isOp(*g.args[0], OpCode::kBitcast, 1) && g.args[0]->args[0] == e &&
           isConstant(g.args[1], DType::u32, bound);
  }
  return isOp(g, OpCode::kWhere, 3) && isConstant(g.args[2], DType::bool_, 0) && isOp(*g.args[0], OpCode::kGe, 2) &&
         g.args[0]->args[0] == e && isConstant(g.args[0]->args[1], e->dtype, 0) && isOp(*g.args[1], OpCode::kLt, 2) &&
         g.args[1]->args[0] == e && isConstant(g.args[1]->args[1], e->dtype, bound);
}

int64_t clampBound(const Expr& e) {
  const DType d = e.dtype;
  if (d != DType::i32 && d != DType::i64) return -1;
  auto isConst = [&](const ExprRef& x) { return x->kind == ExprKind::kConstant && x->dtype == d; };
  if (e.kind != ExprKind::kOp || e.op != OpCode::kMin || e.args.size() != 2) return -1;
  const Expr& low = *e.args[0];
  if (!isConst(e.args[1]) || low.kind != ExprKind::kOp || low.op != OpCode::kMax || low.dtype != d ||
      low.args.size() != 2 || !isConst(low.args[1]) || low.args[1]->constant != 0) {
    return -1;
  }
  const double hi = e.args[1]->constant;
  if (!(hi >= 0 && hi < 9.0e15)) return -1;
  return static_cast<int64_t>(hi);
}

ExprRef makeConstant(DType dtype, double value) {
  countWork();
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::kConstant;
  e->dtype = dtype;
  e->constant = value;
  return e;
}

ExprRef makeIndex(DType dtype, Affine index) {
  countWork();
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::kIndex;
  e->dtype = dtype;
  e->index = {std::move(index)};
  return e;
}

ExprRef makeOp(OpCode op, DType dtype, std::vector<ExprRef> args) {
  countWork();
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::kOp;
  e->op = op;
  e->dtype = dtype;
  e->args = std::move(args);
  return e;
}

const char* loopTagName(LoopTag tag) {
  switch (tag) {
    case LoopTag::kSerial:
      return "serial";
    case LoopTag::kUnrolled:
      return "unrolled";
    case LoopTag::kVectorized:
      return "vectorized";
    case LoopTag::kCpuParallel:
      return "cpu_parallel";
    case LoopTag::kGpuBlock:
      return "gpu_block";
    case LoopTag::kGpuThread:
      return "gpu_thread";
  }
  return "?";
}

Stmt Stmt::loopOf(LoopHeader header, std::vector<Stmt> body) {
  Stmt s;
  s.kind = StmtKind::kLoop;
  s.loop = header;
  s.body = std::move(body);
  return s;
}

Stmt Stmt::store(int buffer, std::vector<Affine> index, ExprRef value) {
  Stmt s;
  s.kind = StmtKind::kStore;
  s.buffer = buffer;
  s.index = std::move(index);
  s.value = std::move(value);
  return s;
}

bool cascades(OpCode combiner, DType dtype) { return combiner == OpCode::kAdd && tensor::isFloating(dtype); }

double combinerIdentity(OpCode combiner, DType dtype) {
  const bool f = tensor::isFloating(dtype);
  if (combiner == OpCode::kMul) return 1;
  if (combiner == OpCode::kMax) {
    if (dtype == DType::u32 || dtype == DType::bool_) return 0;
    return f ? -HUGE_VAL : dtype == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  }
  if (combiner == OpCode::kMin) {
    if (dtype == DType::u32) return 4294967295.0;
    return f ? HUGE_VAL : dtype == DType::i32 ? 2147483647.0 : dtype == DType::bool_ ? 1 : 9223372036854775807.0;
  }
  return 0;  // kAdd
}

}  // namespace accy::choir
