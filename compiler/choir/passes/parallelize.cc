#include "compiler/choir/passes/parallelize.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

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
// The most parts, from `most` down to 2, that split a loop of `extent`
// into equal parts of whole vectors of `lanes`; 0 when none does.
int64_t wholeParts(int64_t extent, int64_t lanes, int64_t most) {
  for (int64_t p = std::min(most, extent); p >= 2; --p) {
    if (extent % p == 0 && (extent / p) % lanes == 0) return p;
  }
  return 0;
}

// Splits loop `l` in `parts`: `l` becomes the loop within a part (a fresh
// variable, extent / parts), its body rewritten; returns the header of the
// loop over the parts, for the caller to place.
LoopHeader splitLoop(Module& m, Stmt& l, int64_t parts) {
  LoopHeader outer;
  outer.var = m.newVar();
  outer.extent = parts;
  const int old_var = l.loop.var;
  l.loop.var = m.newVar();
  l.loop.extent /= parts;
  Substitution s;
  s.set(old_var, add(Affine::var(outer.var, l.loop.extent), Affine::var(l.loop.var)));
  for (Stmt& c : l.body) substituteTree(c, s);
  return outer;
}

bool stripMine(Module& m, Kernel& k, int64_t min_tile) {
  Stmt& l = k.body[0];
  if (l.body.size() != 1 || l.body[0].kind == StmtKind::kLoop) return false;
  const int64_t tiles = wholeParts(l.loop.extent, std::max(1, l.loop.vector_width), std::min<int64_t>(256, l.loop.extent / min_tile));
  if (tiles == 0) return false;
  Stmt inner = std::move(l);
  const LoopHeader outer = splitLoop(m, inner, tiles);
  k.body[0] = Stmt::loopOf(outer, {std::move(inner)});
  return true;
}

// A kernel whose outer loop may write one element from several iterations
// (a scatter's serial loop over its indices) cannot split that loop. When
// an inner loop of its nest walks a row of the stored buffer (a scatter's
// features), the row can be split instead: a new outermost loop over
// `parts` of that inner loop, tagged parallel, with the nest inside it in
// its own order. Each part writes its own elements, and each element still
// takes its additions in the serial loop's order, from one thread: the same
// bits at every thread count.
//
// The nest must be a chain of loops, each with one statement, down to one
// store. The split loop's variable must pick the element within a "digit":
// every other term of the store's flat index is either a multiple of its
// coefficient times its extent (rows, data-bound or not) or belongs to a
// loop below it whose whole range stays under its coefficient. The value
// may read the stored buffer only at the stored element itself.
bool splitRows(Module& m, Kernel& k, int threads) {
  std::vector<Stmt*> chain;
  for (Stmt* s = &k.body[0]; s->kind == StmtKind::kLoop && s->body.size() == 1; s = &s->body[0]) chain.push_back(s);
  if (chain.size() < 2 || chain.back()->body[0].kind != StmtKind::kStore) return false;
  const Stmt& st = chain.back()->body[0];
  bool reads_elsewhere = false;
  visitExpr(st.value, [&](const Expr& x) {
    if (x.kind == ExprKind::kLoad && x.buffer == st.buffer && x.index != st.index) {
      reads_elsewhere = true;
    }
  });
  if (reads_elsewhere) return false;
  const Buffer& out = m.buffers[st.buffer];
  const Affine flat = flatIndex(out, st.index);
  for (size_t d = 1; d < chain.size(); ++d) {
    const LoopHeader& h = chain[d]->loop;
    const int64_t c = flat.coeffOf(h.var);
    if (c <= 0) continue;
    int64_t below = 0;  // the largest offset the loops under this one reach
    for (size_t e = d + 1; e < chain.size(); ++e) {
      below += std::abs(flat.coeffOf(chain[e]->loop.var)) * (chain[e]->loop.extent - 1);
    }
    if (below >= c) return false;
    for (const Affine::Term& t : flat.terms) {
      bool inner = t.var == h.var;
      for (size_t e = d + 1; e < chain.size(); ++e) inner = inner || t.var == chain[e]->loop.var;
      if (!inner && t.coeff % (c * h.extent) != 0) return false;
    }
    const int64_t lanes = h.tag == LoopTag::kVectorized ? std::max(1, h.vector_width) : 1;
    const int64_t parts = wholeParts(h.extent, lanes, threads);
    if (parts == 0) return false;
    LoopHeader part = splitLoop(m, *chain[d], parts);
    part.tag = LoopTag::kCpuParallel;
    Stmt nest = std::move(k.body[0]);
    k.body[0] = Stmt::loopOf(part, {std::move(nest)});
    return true;
  }
  return false;
}

// The other split of such a kernel (ScatterSplit::kRanges): a new outermost
// parallel loop over `parts` equal ranges of the data-bound variable of the
// store (a scatter's row), the nest inside unchanged, the store guarded by
// the index falling in the part's range. Each row is written by the one part
// whose range holds it, in the serial loop's order. The store must bind one
// variable to a clamp of an index and be guarded by that index being in the
// clamp's range (a scatter's test, choir::indexBelow): the parts' ranges
// cover that range exactly, so the part's test replaces it. The
// number of parts divides the rows (at most `threads`; none: no split).
bool splitRanges(Module& m, Kernel& k, int threads) {
  Stmt* s = &k.body[0];
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) s = &s->body[0];
  if (s->kind != StmtKind::kStore || !s->guard || s->bound.size() != 1 || s->args.size() != 1) return false;
  Stmt& st = *s;
  const int64_t hi = clampBound(*st.args[0]);
  if (hi < 1) return false;
  const int64_t rows = hi + 1;
  // The clamped index: min(max(raw, 0), hi); the guard, 0 <= raw < rows.
  const ExprRef raw = st.args[0]->args[0]->args[0];
  if (!isIndexBelow(*st.guard, raw, rows)) return false;
  int64_t parts = std::min<int64_t>(threads, rows);
  while (parts >= 2 && rows % parts != 0) --parts;
  if (parts < 2) return false;
  const int64_t chunk = rows / parts;
  LoopHeader part;
  part.var = m.newVar();
  part.extent = parts;
  part.tag = LoopTag::kCpuParallel;
  // first <= raw < first + chunk, as 0 <= raw - first < chunk (on i32 one
  // unsigned comparison; the difference wraps, and an index below first
  // comes out past every chunk).
  const DType d = raw->dtype;
  st.guard = indexBelow(makeOp(OpCode::kSub, d, {raw, makeIndex(d, Affine::var(part.var, chunk))}), chunk);
  Stmt nest = std::move(k.body[0]);
  k.body[0] = Stmt::loopOf(part, {std::move(nest)});
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
    if (statementPoints(k.body) < options.min_points) continue;
    if (writesDisjoint(m, outer)) {
      outer.loop.tag = LoopTag::kCpuParallel;
    } else if (options.scatter_split != ScatterSplit::kRanges || !splitRanges(m, k, options.threads)) {
      splitRows(m, k, options.threads);
    }
  }
  return m;
}

}  // namespace accy::choir
