#include "compiler/choir/passes/loop_order.h"

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

int unitStrideLoads(const Module& m, const ExprRef& e, int var) {
  int n = 0;
  visitExpr(e, [&](const Expr& x) {
    if (x.kind == ExprKind::kLoad && flatIndex(m.buffers[x.buffer], x.index).coeffOf(var) == 1) ++n;
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

void orderKernel(const Module& m, Kernel& k) {
  if (k.body.size() != 1) return;
  // Collect a perfect nest.
  std::vector<LoopHeader> loops;
  Stmt* s = &k.body[0];
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) {
    loops.push_back(s->loop);
    s = &s->body[0];
  }
  if (s->kind == StmtKind::kReduce) orderReduce(m, *s);
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
