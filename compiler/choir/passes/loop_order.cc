#include "compiler/choir/passes/loop_order.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include "base/strings.h"
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
  substituteTree(body, s);
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
bool accumulateInOutput(Module& m, Kernel& k, const std::vector<LoopHeader>& loops, const Stmt& r,
                        bool relaid = false) {
  if (loops.empty()) return false;
  const LoopHeader& o = loops.back();
  const Buffer& out = m.buffers[r.buffer];
  if (flatCoeff(out, r.index, o.var) != 1) return false;
  if (!relaid && stridedLoads(m, r.value, r.domain.back().var) == 0) return false;
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

// Reductions whose innermost domain loop is this short make poor vector
// loops; products over such a domain (a convolution's window) are better
// accumulated in the output, along the output's contiguous loop.
constexpr int64_t kShortDomain = 16;
// Operands copied to a new layout are at most this large.
constexpr int64_t kMaxRelayoutBytes = int64_t{16} << 20;

// A sum of products over a domain whose innermost loop is short, where
// the output's contiguous loop `o` walks an operand with a stride: when
// that operand is the same for every row of the output (it depends on `o`
// and the domain only, like a convolution's weights), a kernel first copies
// it into a temporary laid out [domain..., o] (each row reused by every
// output row), and the reduction accumulates in the output over unit-stride
// loads (accumulateInOutput). Returns the copy kernels, or nothing when the
// reduction does not qualify.
std::vector<Kernel> relayoutForOutput(Module& m, const Kernel& k, const std::vector<LoopHeader>& loops, Stmt& r) {
  if (loops.size() < 2 || r.combiner != OpCode::kAdd || r.domain.empty()) return {};
  const LoopHeader& o = loops.back();
  if (r.domain.back().extent >= kShortDomain || flatCoeff(m.buffers[r.buffer], r.index, o.var) != 1) return {};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < loops.size(); ++i) rows *= loops[i].extent;
  if (rows < 4) return {};
  auto inDomain = [&](int v) {
    for (const LoopHeader& h : r.domain) {
      if (h.var == v) return true;
    }
    return false;
  };
  // The loads strided along o, each of which must qualify.
  std::vector<const Expr*> strided;
  bool qualifies = true;
  visitExpr(r.value, [&](const Expr& x) {
    if (x.kind != ExprKind::kLoad) return;
    const int64_t c = flatCoeff(m.buffers[x.buffer], x.index, o.var);
    if (c == 0 || c == 1) return;
    if (!x.bound.empty() || m.buffers[x.buffer].bytes() > kMaxRelayoutBytes) qualifies = false;
    for (const Affine& a : x.index) {
      for (const Affine::Term& t : a.terms) {
        if (t.var != o.var && !inDomain(t.var)) qualifies = false;
      }
    }
    strided.push_back(&x);
  });
  if (!qualifies || strided.empty()) return {};
  std::vector<Kernel> copies;
  std::vector<std::pair<const Expr*, ExprRef>> replaced;
  for (const Expr* x : strided) {
    bool seen = false;
    for (const auto& [old, with] : replaced) seen = seen || (old->buffer == x->buffer && old->index == x->index);
    if (seen) continue;
    // The new layout: the domain loops x uses, in the domain's order, then o.
    std::vector<LoopHeader> dims;
    for (const LoopHeader& h : r.domain) {
      for (const Affine& a : x->index) {
        if (a.uses(h.var)) {
          dims.push_back(h);
          break;
        }
      }
    }
    dims.push_back(o);
    Buffer t;
    t.name = strCat(k.name, "_relaid", copies.size());
    t.dtype = x->dtype;
    for (const LoopHeader& h : dims) t.shape.push_back(h.extent);
    const int tb = static_cast<int>(m.buffers.size());
    m.buffers.push_back(std::move(t));
    // The copy: t[d..., o] = x at (d..., o), over fresh loops.
    Substitution s;
    std::vector<LoopHeader> fresh;
    std::vector<Affine> at;
    for (const LoopHeader& h : dims) {
      LoopHeader f = h;
      f.var = m.newVar();
      f.tag = LoopTag::kSerial;
      s.set(h.var, Affine::var(f.var));
      at.push_back(Affine::var(f.var));
      fresh.push_back(f);
    }
    std::vector<Affine> from;
    for (const Affine& a : x->index) from.push_back(substitute(a, s));
    Stmt copy = Stmt::store(tb, at, makeLoad(x->dtype, x->buffer, std::move(from)));
    for (size_t d = fresh.size(); d-- > 0;) copy = Stmt::loopOf(fresh[d], {std::move(copy)});
    Kernel c;
    c.name = strCat(k.name, "_relayout", copies.size());
    c.body.push_back(std::move(copy));
    copies.push_back(std::move(c));
    std::vector<Affine> in_t;
    for (const LoopHeader& h : dims) in_t.push_back(Affine::var(h.var));
    replaced.push_back({x, makeLoad(x->dtype, tb, std::move(in_t))});
  }
  r.value = replaceLoads(r.value, [&](const ExprRef& e) {
    for (const auto& [old, with] : replaced) {
      if (old->buffer == e->buffer && old->index == e->index && e->bound.empty()) return with;
    }
    return e;
  });
  return copies;
}

// A long sum into a small output (a convolution's weight gradient: 36,864
// sums of 100,352 products each) accumulated in the output row by row
// streams all of the reduction's operands once per output row. Instead,
// when the output fits the caches, a kernel first zeroes it and the sum
// runs with the domain's outer loops outermost: at each of their steps
// every output row takes the products of the domain's innermost loop while
// that slice of the operands stays in cache. The output's outer loops run
// with the longest innermost (the rows of a matrix product over that
// slice); each element still adds its terms in the domain's order, so the
// bits are those of accumulateInOutput.
//   zero kernel:  loops: buf = 0
//   this kernel:  for r[:-1] { loops[:-1] (longest last) { for r.back(): for o: buf = buf + v } }
constexpr int64_t kSmallOutputBytes = int64_t{1} << 20;
constexpr int64_t kMinOuterSteps = 16;
constexpr int64_t kRowParts = 4, kMinRowsPerPart = 8;
std::optional<Kernel> reductionOuter(Module& m, Kernel& k, const std::vector<LoopHeader>& loops, const Stmt& r) {
  if (loops.size() < 2 || r.domain.size() < 2 || r.combiner != OpCode::kAdd || r.mean_count != 0) return std::nullopt;
  const LoopHeader& o = loops.back();
  const Buffer& out = m.buffers[r.buffer];
  if (!isFloating(out.dtype) || out.bytes() > kSmallOutputBytes || flatCoeff(out, r.index, o.var) != 1) {
    return std::nullopt;
  }
  if (stridedLoads(m, r.value, o.var) != 0 || unitStrideLoads(m, r.value, o.var) == 0) return std::nullopt;
  int64_t outer_steps = 1;
  for (size_t d = 0; d + 1 < r.domain.size(); ++d) outer_steps *= r.domain[d].extent;
  if (outer_steps < kMinOuterSteps) return std::nullopt;
  Kernel zero;
  zero.name = strCat(k.name, "_zero");
  {
    Stmt st = Stmt::store(r.buffer, r.index, makeConstant(out.dtype, 0));
    for (size_t i = loops.size(); i-- > 0;) st = freshLoop(m, loops[i], std::move(st));
    zero.body.push_back(std::move(st));
  }
  std::vector<LoopHeader> rows(loops.begin(), loops.end() - 1);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const LoopHeader& a, const LoopHeader& b) { return a.extent < b.extent; });
  Stmt acc = Stmt::loopOf(o, {Stmt::store(r.buffer, r.index,
                                          makeOp(OpCode::kAdd, out.dtype, {makeLoad(out.dtype, r.buffer, r.index), r.value}))});
  // The longest row loop is split in parts run outermost: each part's rows
  // are other elements, so threads can take the parts (parallelize.h), at
  // the cost of reading the operands' shared slices once per part.
  std::optional<LoopHeader> parts;
  LoopHeader& longest = rows.back();
  for (int64_t n : {kRowParts, kRowParts / 2}) {
    if (n > 1 && longest.extent % n == 0 && longest.extent / n >= kMinRowsPerPart) {
      LoopHeader outer = longest, inner = longest;
      outer.var = m.newVar();
      outer.extent = n;
      inner.var = m.newVar();
      inner.extent = longest.extent / n;
      Substitution split;
      split.set(longest.var, add(Affine::var(outer.var, inner.extent), Affine::var(inner.var)));
      substituteStmt(acc, split);
      for (Stmt& c : acc.body) substituteStmt(c, split);
      longest = inner;
      parts = outer;
      break;
    }
  }
  acc = Stmt::loopOf(r.domain.back(), {std::move(acc)});
  for (size_t i = rows.size(); i-- > 0;) acc = Stmt::loopOf(rows[i], {std::move(acc)});
  for (size_t d = r.domain.size() - 1; d-- > 0;) acc = Stmt::loopOf(r.domain[d], {std::move(acc)});
  if (parts) acc = Stmt::loopOf(*parts, {std::move(acc)});
  k.body = {std::move(acc)};
  return zero;
}

// Orders one kernel; returns kernels to run before it (relayoutForOutput).
std::vector<Kernel> orderKernel(Module& m, Kernel& k) {
  if (k.body.size() != 1) return {};
  // Collect a perfect nest.
  std::vector<LoopHeader> loops;
  Stmt* s = &k.body[0];
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) {
    loops.push_back(s->loop);
    s = &s->body[0];
  }
  if (s->kind == StmtKind::kReduce) {
    orderReduce(m, *s);
    Stmt r = *s;
    if (std::optional<Kernel> zero = reductionOuter(m, k, loops, r)) return {std::move(*zero)};
    if (accumulateInOutput(m, k, loops, r)) return {};
    std::vector<Kernel> copies = relayoutForOutput(m, k, loops, r);
    if (!copies.empty()) {
      if (accumulateInOutput(m, k, loops, r, /*relaid=*/true)) return copies;
      m.buffers.resize(m.buffers.size() - copies.size());  // not reached: the copies made o unit-stride
      return {};
    }
  }
  if (s->kind != StmtKind::kStore || loops.size() < 2) return {};
  const Affine flat = flatIndex(m.buffers[s->buffer], s->index);
  size_t unit = loops.size();
  for (size_t i = 0; i < loops.size(); ++i) {
    if (flat.coeffOf(loops[i].var) == 1) unit = i;
  }
  if (unit == loops.size()) return {};
  bool moved = false;
  auto moveTo = [&](size_t from, size_t to) {
    if (from == to) return;
    moved = true;
    const LoopHeader h = loops[from];
    loops.erase(loops.begin() + static_cast<std::ptrdiff_t>(from));
    loops.insert(loops.begin() + static_cast<std::ptrdiff_t>(to), h);
  };
  moveTo(unit, loops.size() - 1);
  // A transposing copy (a load strided along the innermost loop, with unit
  // stride along another): that other loop goes just outside the innermost,
  // so the lines one pass of the innermost loop reads serve the next passes
  // too (16 floats a line) while they are still in the first-level cache,
  // instead of coming back from further out once per element of the line.
  // Only when the pass's lines fit that cache and each pass stores at least
  // a line's worth of contiguous output.
  constexpr int64_t kTransposeLines = 256, kMinRun = 16;
  const LoopHeader& innermost = loops.back();
  if (innermost.extent >= kMinRun && innermost.extent <= kTransposeLines && loops.size() >= 3) {
    std::optional<size_t> along;
    bool agree = true;
    visitExpr(s->value, [&](const Expr& x) {
      if (x.kind != ExprKind::kLoad || !x.bound.empty()) return;
      const Buffer& b = m.buffers[x.buffer];
      const int64_t c = flatCoeff(b, x.index, innermost.var);
      if (c == 0 || c == 1) return;
      for (size_t i = 0; i + 1 < loops.size(); ++i) {
        if (flatCoeff(b, x.index, loops[i].var) != 1) continue;
        if (along && *along != i) agree = false;
        along = i;
      }
    });
    if (along && agree) moveTo(*along, loops.size() - 2);
  }
  if (!moved) return {};
  Stmt inner = std::move(*s);
  for (size_t i = loops.size(); i-- > 0;) inner = Stmt::loopOf(loops[i], {std::move(inner)});
  k.body[0] = std::move(inner);
  return {};
}

}  // namespace

absl::StatusOr<Module> orderLoops(Module m) {
  std::vector<Kernel> kernels;
  for (Kernel& k : m.kernels) {
    std::vector<Kernel> before = orderKernel(m, k);
    for (Kernel& c : before) kernels.push_back(std::move(c));
    kernels.push_back(std::move(k));
  }
  m.kernels = std::move(kernels);
  return m;
}

}  // namespace accy::choir
