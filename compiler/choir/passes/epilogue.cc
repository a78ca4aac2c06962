#include "compiler/choir/passes/epilogue.h"

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

// The loops from the top of `k` down to the product's row loop, and that
// row loop, when `k` is a product in the accumulate-in-output form.
struct ProductNest {
  std::vector<Stmt*> loops;  // outermost first; the last is the row loop
  const Stmt* acc = nullptr;  // C = add(C, ...) under the k loop
  const Stmt* j_loop = nullptr;
};

bool productNest(Kernel& k, ProductNest* out) {
  if (k.body.size() != 1 || k.body[0].kind != StmtKind::kLoop) return false;
  Stmt* s = &k.body[0];
  std::vector<Stmt*> loops = {s};
  while (s->body.size() == 1 && s->body[0].kind == StmtKind::kLoop) {
    s = &s->body[0];
    loops.push_back(s);
  }
  if (s->body.size() != 2) return false;
  const Stmt& init = s->body[0];
  const Stmt& k_loop = s->body[1];
  if (init.kind != StmtKind::kLoop || init.body.size() != 1 || init.body[0].kind != StmtKind::kStore ||
      init.body[0].value->kind != ExprKind::kConstant) {
    return false;
  }
  if (k_loop.kind != StmtKind::kLoop || k_loop.body.size() != 1 || k_loop.body[0].kind != StmtKind::kLoop) return false;
  const Stmt& j_loop = k_loop.body[0];
  if (j_loop.body.size() != 1 || j_loop.body[0].kind != StmtKind::kStore) return false;
  const Stmt& acc = j_loop.body[0];
  if (acc.buffer != init.body[0].buffer || acc.value->kind != ExprKind::kOp || acc.value->op != OpCode::kAdd ||
      j_loop.loop.extent != init.loop.extent) {
    return false;
  }
  out->loops = std::move(loops);
  out->acc = &acc;
  out->j_loop = &j_loop;
  return true;
}

// The perfect nest of `k` and its store, when it is one.
bool storeNest(const Kernel& k, std::vector<LoopHeader>* loops, const Stmt** store) {
  if (k.body.size() != 1) return false;
  const Stmt* s = &k.body[0];
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) {
    loops->push_back(s->loop);
    s = &s->body[0];
  }
  if (s->kind != StmtKind::kStore || !s->bound.empty()) return false;
  *store = s;
  return true;
}

bool readsBuffer(const Stmt& s, int buffer) {
  bool found = false;
  visitStmts(std::vector<Stmt>{s}, [&](const Stmt& x) {
    if (!x.value) return;
    visitExpr(x.value, [&](const Expr& e) { found = found || (e.kind == ExprKind::kLoad && e.buffer == buffer); });
  });
  return found;
}

bool tryFuse(Module& m, Kernel& product, const Kernel& consumer) {
  ProductNest p;
  if (!productNest(product, &p)) return false;
  std::vector<LoopHeader> loops;
  const Stmt* store = nullptr;
  if (!storeNest(consumer, &loops, &store)) return false;
  const int c = p.acc->buffer;
  if (store->buffer == c || readsBuffer(product.body[0], store->buffer)) return false;
  // The consumer's loops, outermost first, are the product's (outer loops
  // and row loop) and then the columns.
  if (loops.size() != p.loops.size() + 1) return false;
  for (size_t d = 0; d < p.loops.size(); ++d) {
    if (loops[d].extent != p.loops[d]->loop.extent) return false;
  }
  if (loops.back().extent != p.j_loop->loop.extent) return false;
  LoopHeader columns;
  columns.var = m.newVar();
  columns.extent = p.j_loop->loop.extent;
  Substitution s;
  for (size_t d = 0; d < p.loops.size(); ++d) s.set(loops[d].var, Affine::var(p.loops[d]->loop.var));
  s.set(loops.back().var, Affine::var(columns.var));
  Stmt moved = *store;
  for (Affine& a : moved.index) a = substitute(a, s);
  moved.value = substituteExpr(moved.value, s);
  // C read only at the element of this row and column.
  Substitution at_column;
  at_column.set(p.j_loop->loop.var, Affine::var(columns.var));
  std::vector<Affine> element = p.acc->index;
  for (Affine& a : element) a = substitute(a, at_column);
  bool same_element = true;
  visitExpr(moved.value, [&](const Expr& e) {
    if (e.kind == ExprKind::kLoad && e.buffer == c && !(e.index == element)) same_element = false;
  });
  if (!same_element) return false;
  p.loops.back()->body.push_back(Stmt::loopOf(columns, {std::move(moved)}));
  return true;
}

}  // namespace

absl::StatusOr<Module> fuseProductEpilogues(Module m) {
  std::vector<Kernel> out;
  out.reserve(m.kernels.size());
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    if (k + 1 < m.kernels.size() && tryFuse(m, m.kernels[k], m.kernels[k + 1])) {
      out.push_back(std::move(m.kernels[k]));
      ++k;  // the consumer now runs inside the product
      continue;
    }
    out.push_back(std::move(m.kernels[k]));
  }
  m.kernels = std::move(out);
  dropUnusedTemps(m);
  return m;
}

}  // namespace accy::choir
