#include "compiler/choir/passes/loop_order.h"

#include <cmath>
#include <functional>

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

int unitStrideLoads(const Module& m, const ExprRef& e, int var) {
  int n = 0;
  visitExpr(e, [&](const Expr& x) {
    if (x.kind == ExprKind::kLoad && flatCoeff(m.buffers[x.buffer], x.index, var) == 1) ++n;
  });
  return n;
}

void orderReduce(const Module& m, Stmt& r) {
  if (r.domain.size() < 2) return;
  size_t best = r.domain.size() - 1;
  int best_count = unitStrideLoads(m, r.value, r.domain[best].var);
  for (size_t i = 0; i + 1 < r.domain.size(); ++i) {
    const int c = unitStrideLoads(m, r.value, r.domain[i].var);
    if (c > best_count) {
      best = i;
      best_count = c;
    }
  }
  LoopHeader h = r.domain[best];
  r.domain.erase(r.domain.begin() + static_cast<std::ptrdiff_t>(best));
  r.domain.push_back(h);
}

// Loads in `e` that walk `var` with a stride other than 0 and 1.
int stridedLoads(const Module& m, const ExprRef& e, int var) {
  int n = 0;
  visitExpr(e, [&](const Expr& x) {
    if (x.kind != ExprKind::kLoad) return;
    const int64_t c = flatCoeff(m.buffers[x.buffer], x.index, var);
    if (c != 0 && c != 1) ++n;
  });
  return n;
}

// A loop over a fresh copy of `h` around `body`, with h.var renamed.
Stmt freshLoop(Module& m, const LoopHeader& h, Stmt body) {
  LoopHeader copy = h;
  copy.var = m.newVar();
  Substitution s;
  s.set(h.var, Affine::var(copy.var));
  std::function<void(Stmt&)> rename = [&](Stmt& st) {
    substituteStmt(st, s);
    for (Stmt& c : st.body) rename(c);
  };
  rename(body);
  return Stmt::loopOf(copy, {std::move(body)});
}

// Rewrites `loops { reduce buf[idx] over (r...) = v }` whose reduction
// cannot walk memory contiguously, but whose innermost output loop can, into
// accumulation in the output:
//   loops[:-1] { for o: buf = identity;
//                for r...: for o: buf = combine(buf, v);
//                [for o: buf = buf / count] }
// so the output loop becomes the contiguous (vectorizable) innermost loop.
// This is the i-k-j order of a matrix product.
bool accumulateInOutput(Module& m, Kernel& k, const std::vector<LoopHeader>& loops, const Stmt& r) {
  if (loops.empty()) return false;
  const LoopHeader& o = loops.back();
  const Buffer& out = m.buffers[r.buffer];
  if (flatCoeff(out, r.index, o.var) != 1) return false;
  if (stridedLoads(m, r.value, r.domain.back().var) == 0) return false;
  if (stridedLoads(m, r.value, o.var) != 0) return false;
  const DType dtype = out.dtype;
  auto load_out = [&] { return makeLoad(dtype, r.buffer, r.index); };
  std::vector<Stmt> body;
  body.push_back(freshLoop(m, o, Stmt::store(r.buffer, r.index, makeConstant(dtype, combinerIdentity(r.combiner, dtype)))));
  Stmt acc = freshLoop(m, o, Stmt::store(r.buffer, r.index, makeOp(r.combiner, dtype, {load_out(), r.value})));
  for (size_t d = r.domain.size(); d-- > 0;) acc = Stmt::loopOf(r.domain[d], {std::move(acc)});
  body.push_back(std::move(acc));
  if (r.mean_count != 0) {
    body.push_back(freshLoop(m, o, Stmt::store(r.buffer, r.index,
                                                makeOp(OpCode::kDiv, dtype,
                                                       {load_out(), makeConstant(dtype, double(r.mean_count))}))));
  }
  std::vector<Stmt> nest = std::move(body);
  for (size_t i = loops.size() - 1; i-- > 0;) nest = {Stmt::loopOf(loops[i], std::move(nest))};
  k.body = std::move(nest);
  return true;
}

void orderKernel(Module& m, Kernel& k) {
  if (k.body.size() != 1) return;
  // Collect a perfect nest.
  std::vector<LoopHeader> loops;
  Stmt* s = &k.body[0];
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) {
    loops.push_back(s->loop);
    s = &s->body[0];
  }
  if (s->kind == StmtKind::kReduce) {
    orderReduce(m, *s);
    const Stmt r = *s;
    if (accumulateInOutput(m, k, loops, r)) return;
  }
  if (s->kind != StmtKind::kStore || loops.size() < 2) return;
  const Affine flat = flatIndex(m.buffers[s->buffer], s->index);
  size_t unit = loops.size();
  for (size_t i = 0; i < loops.size(); ++i) {
    if (flat.coeffOf(loops[i].var) == 1) unit = i;
  }
  if (unit == loops.size() || unit == loops.size() - 1) return;
  LoopHeader h = loops[unit];
  loops.erase(loops.begin() + static_cast<std::ptrdiff_t>(unit));
  loops.push_back(h);
  Stmt inner = std::move(*s);
  for (size_t i = loops.size(); i-- > 0;) inner = Stmt::loopOf(loops[i], {std::move(inner)});
  k.body[0] = std::move(inner);
}

}  // namespace

absl::StatusOr<Module> orderLoops(Module m) {
  for (Kernel& k : m.kernels) orderKernel(m, k);
  return m;
}

}  // namespace accy::choir
