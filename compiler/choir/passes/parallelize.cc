#include "compiler/choir/passes/parallelize.h"

#include <algorithm>

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

// True when every store or reduce under `s` indexes its buffer with the
// loop variable, so distinct iterations write distinct elements.
bool writesDisjoint(const Module& m, const Stmt& loop) {
  bool ok = true;
  visitStmts(loop.body, [&](const Stmt& s) {
    if (s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) {
      const int64_t c = flatCoeff(m.buffers[s.buffer], s.index, loop.loop.var);
      if (c == 0) ok = false;
    }
  });
  return ok;
}

// A kernel that is one innermost loop (already vectorized, say) cannot
// carry a second tag: split it into an outer loop of `tiles` iterations
// and an inner loop of extent / tiles that keeps the schedule. The tile
// count divides the extent, so no guard is needed; extents without a good
// divisor stay serial.
bool stripMine(Module& m, Kernel& k, int64_t min_tile) {
  Stmt& l = k.body[0];
  if (l.body.size() != 1 || l.body[0].kind == StmtKind::kLoop) return false;
  const int64_t n = l.loop.extent;
  const int64_t lanes = std::max(1, l.loop.vector_width);
  int64_t tiles = 0;
  for (int64_t t = std::min<int64_t>(256, n / min_tile); t >= 2; --t) {
    if (n % t == 0 && (n / t) % lanes == 0) {
      tiles = t;
      break;
    }
  }
  if (tiles == 0) return false;
  LoopHeader outer;
  outer.var = m.newVar();
  outer.extent = tiles;
  LoopHeader inner = l.loop;
  inner.var = m.newVar();
  inner.extent = n / tiles;
  Substitution s;
  s.set(l.loop.var, add(Affine::var(outer.var, inner.extent), Affine::var(inner.var)));
  Stmt body = l.body[0];
  substituteStmt(body, s);
  k.body[0] = Stmt::loopOf(outer, {Stmt::loopOf(inner, {std::move(body)})});
  return true;
}

}  // namespace

absl::StatusOr<Module> parallelizeLoops(Module m, const ParallelizeOptions& options) {
  if (options.threads <= 1) return m;
  for (Kernel& k : m.kernels) {
    if (k.body.size() != 1 || k.body[0].kind != StmtKind::kLoop) continue;
    if (k.body[0].loop.tag == LoopTag::kVectorized && statementPoints(k.body) >= options.min_points) {
      stripMine(m, k, std::max<int64_t>(4096, options.min_points / 8));
    }
    Stmt& outer = k.body[0];
    if (outer.loop.extent < 2 || outer.loop.tag != LoopTag::kSerial) continue;
    if (statementPoints(k.body) < options.min_points || !writesDisjoint(m, outer)) continue;
    outer.loop.tag = LoopTag::kCpuParallel;
  }
  return m;
}

}  // namespace accy::choir
