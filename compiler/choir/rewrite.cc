#include "compiler/choir/rewrite.h"

namespace accy::choir {

void substituteStmt(Stmt& st, const Substitution& s) {
  for (Affine& a : st.index) a = substitute(a, s);
  if (st.value) st.value = substituteExpr(st.value, s);
  for (ExprRef& a : st.args) a = substituteExpr(a, s);
  if (st.guard) st.guard = substituteExpr(st.guard, s);
}

void substituteTree(Stmt& st, const Substitution& s) {
  substituteStmt(st, s);
  for (Stmt& c : st.body) substituteTree(c, s);
}

ExprRef substituteExpr(const ExprRef& e, const Substitution& s) {
  if (e->kind == ExprKind::kConstant) return e;
  countWork();
  auto copy = std::make_shared<Expr>(*e);
  for (Affine& a : copy->index) a = substitute(a, s);
  for (ExprRef& a : copy->args) a = substituteExpr(a, s);
  return copy;
}

void renameBound(Module& m, Expr& load) {
  Substitution s;
  for (int& v : load.bound) {
    const int fresh = m.newVar();
    s.set(v, Affine::var(fresh));
    v = fresh;
  }
  for (Affine& a : load.index) a = substitute(a, s);
}

ExprRef freshenBound(Module& m, const ExprRef& e) {
  if (e->args.empty()) return e;
  countWork();
  auto copy = std::make_shared<Expr>(*e);
  for (ExprRef& a : copy->args) a = freshenBound(m, a);
  if (e->kind == ExprKind::kLoad && !e->bound.empty()) renameBound(m, *copy);
  return copy;
}

ExprRef replaceLoads(const ExprRef& e, const std::function<ExprRef(const ExprRef&)>& f) {
  if (e->kind == ExprKind::kLoad && e->args.empty()) return f(e);
  if (e->args.empty()) return e;
  if (e->kind == ExprKind::kLoad) {  // the loads in its bound values first
    countWork();
    auto copy = std::make_shared<Expr>(*e);
    for (ExprRef& a : copy->args) a = replaceLoads(a, f);
    return f(copy);
  }
  countWork();
  auto copy = std::make_shared<Expr>(*e);
  for (ExprRef& a : copy->args) a = replaceLoads(a, f);
  return copy;
}

void forEachValue(std::vector<Stmt>& stmts, const std::function<void(ExprRef&)>& f) {
  for (Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) forEachValue(s.body, f);
    if (s.value) f(s.value);
    for (ExprRef& a : s.args) f(a);
    if (s.guard) f(s.guard);
  }
}

namespace {

bool readsIn(const ExprRef& e, int buffer) {
  if (e->kind == ExprKind::kLoad && e->buffer == buffer) return true;
  for (const ExprRef& a : e->args) {
    if (readsIn(a, buffer)) return true;
  }
  return false;
}

}  // namespace

bool kernelReads(const Kernel& k, int buffer) {
  bool found = false;
  visitStmts(k.body, [&](const Stmt& s) {
    if (s.value && readsIn(s.value, buffer)) found = true;
    for (const ExprRef& a : s.args) found = found || readsIn(a, buffer);
    if (s.guard && readsIn(s.guard, buffer)) found = true;
  });
  return found;
}

bool kernelWrites(const Kernel& k, int buffer) {
  bool found = false;
  visitStmts(k.body, [&](const Stmt& s) {
    if ((s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) && s.buffer == buffer) found = true;
  });
  return found;
}

Affine flatIndex(const Buffer& b, const std::vector<Affine>& index) {
  const std::vector<int64_t> strides = b.strides();
  Affine flat;
  for (size_t d = 0; d < index.size(); ++d) flat = add(flat, scale(index[d], strides[d]));
  return flat;
}

int64_t flatCoeff(const Buffer& b, const std::vector<Affine>& index, int var) {
  int64_t coeff = 0, stride = 1;
  for (size_t d = index.size(); d-- > 0;) {
    coeff += index[d].coeffOf(var) * stride;
    if (d < b.shape.size()) stride *= b.shape[d];
  }
  return coeff;
}

bool invariantIn(const Module& m, const ExprRef& e, int var) {
  bool ok = true;
  visitExpr(e, [&](const Expr& x) {
    if (x.kind == ExprKind::kIndex && x.index[0].uses(var)) ok = false;
    if (x.kind == ExprKind::kLoad && flatCoeff(m.buffers[x.buffer], x.index, var) != 0) ok = false;
  });
  return ok;
}

int exprSize(const ExprRef& e) {
  int n = 0;
  visitExpr(e, [&](const Expr&) { ++n; });
  return n;
}

bool isExpensiveOp(OpCode op) { return tensor::opCost(op) == tensor::OpCost::Expensive; }

bool exprIsExpensive(const ExprRef& e) {
  bool expensive = false;
  visitExpr(e, [&](const Expr& x) { expensive = expensive || (x.kind == ExprKind::kOp && isExpensiveOp(x.op)); });
  return expensive;
}

void dropUnusedTemps(Module& m) {
  std::vector<bool> used(m.buffers.size(), false);
  for (size_t b = 0; b < m.buffers.size(); ++b) used[b] = m.buffers[b].role != BufferRole::kTemp;
  for (const Kernel& k : m.kernels) {
    if (k.gpu_partials >= 0) used[k.gpu_partials] = true;
    visitStmts(k.body, [&](const Stmt& s) {
      if (s.buffer >= 0) used[s.buffer] = true;
      if (s.value) {
        visitExpr(s.value, [&](const Expr& e) {
          if (e.kind == ExprKind::kLoad) used[e.buffer] = true;
        });
      }
      for (const ExprRef& a : s.args) {
        visitExpr(a, [&](const Expr& e) {
          if (e.kind == ExprKind::kLoad) used[e.buffer] = true;
        });
      }
      if (s.guard) {
        visitExpr(s.guard, [&](const Expr& e) {
          if (e.kind == ExprKind::kLoad) used[e.buffer] = true;
        });
      }
    });
  }
  std::vector<int> remap(m.buffers.size(), -1);
  std::vector<Buffer> kept;
  bool renumbered = false;
  for (size_t b = 0; b < m.buffers.size(); ++b) {
    if (!used[b]) continue;
    remap[b] = static_cast<int>(kept.size());
    renumbered = renumbered || remap[b] != static_cast<int>(b);
    kept.push_back(std::move(m.buffers[b]));
  }
  m.buffers = std::move(kept);
  if (!renumbered) return;
  std::function<ExprRef(const ExprRef&)> renumber = [&](const ExprRef& e) -> ExprRef {
    if (e->kind != ExprKind::kLoad && e->args.empty()) return e;
    countWork();
    auto copy = std::make_shared<Expr>(*e);
    if (copy->kind == ExprKind::kLoad) copy->buffer = remap[copy->buffer];
    for (ExprRef& a : copy->args) a = renumber(a);
    return copy;
  };
  std::function<void(std::vector<Stmt>&)> walk = [&](std::vector<Stmt>& stmts) {
    for (Stmt& s : stmts) {
      if (s.kind == StmtKind::kLoop) walk(s.body);
      if (s.buffer >= 0) s.buffer = remap[s.buffer];
      if (s.value) s.value = renumber(s.value);
      for (ExprRef& a : s.args) a = renumber(a);
      if (s.guard) s.guard = renumber(s.guard);
    }
  };
  for (Kernel& k : m.kernels) {
    walk(k.body);
    if (k.gpu_partials >= 0) k.gpu_partials = remap[k.gpu_partials];
  }
}

int64_t statementPoints(const std::vector<Stmt>& stmts) {
  int64_t total = 0;
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) {
      total += s.loop.extent * statementPoints(s.body);
    } else {
      int64_t p = 1;
      for (const LoopHeader& h : s.domain) p *= h.extent;
      total += p;
    }
  }
  return total;
}

}  // namespace accy::choir
