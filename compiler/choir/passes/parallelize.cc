#include "compiler/choir/passes/parallelize.h"

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

int64_t points(const std::vector<Stmt>& stmts) {
  int64_t total = 0;
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) {
      total += s.loop.extent * points(s.body);
    } else {
      int64_t p = 1;
      for (const LoopHeader& h : s.domain) p *= h.extent;
      total += p;
    }
  }
  return total;
}

// True when every store or reduce under `s` indexes its buffer with the
// loop variable, so distinct iterations write distinct elements.
bool writesDisjoint(const Module& m, const Stmt& loop) {
  bool ok = true;
  visitStmts(loop.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) {
      const int64_t c = flatIndex(m.buffers[s.buffer], s.index).coeffOf(loop.loop.var);
      if (c == 0) ok = false;
    }
  });
  return ok;
}

}  // namespace

absl::StatusOr<Module> parallelizeLoops(Module m, const ParallelizeOptions& options) {
  if (options.threads <= 1) return m;
  for (Kernel& k : m.kernels) {
    if (k.body.size() != 1 || k.body[0].kind != StmtKind::kLoop) continue;
    Stmt& outer = k.body[0];
    if (outer.loop.extent < 2 || outer.loop.tag != LoopTag::kSerial) continue;
    if (points(k.body) < options.min_points || !writesDisjoint(m, outer)) continue;
    outer.loop.tag = LoopTag::kCpuParallel;
  }
  return m;
}

}  // namespace accy::choir
