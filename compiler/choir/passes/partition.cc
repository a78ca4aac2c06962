#include "compiler/choir/passes/partition.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "base/strings.h"
#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

struct Range {
  int64_t lo = 0, hi = 0;  // inclusive
};
using Ranges = std::map<int, Range>;

int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }  // b > 0
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

// The range of `a` over `ranges`, leaving out `skip`'s term; nothing when a
// variable's range is unknown.
std::optional<Range> rangeOf(const Affine& a, const Ranges& ranges, int skip = -1) {
  Range r{a.constant, a.constant};
  for (const Affine::Term& t : a.terms) {
    if (t.var == skip) continue;
    auto it = ranges.find(t.var);
    if (it == ranges.end()) return std::nullopt;
    const int64_t x = t.coeff * it->second.lo, y = t.coeff * it->second.hi;
    r.lo += std::min(x, y);
    r.hi += std::max(x, y);
  }
  return r;
}

// A test `a >= k` on an integer position.
struct Test {
  Affine a;
  int64_t k = 0;
};

bool integral(const Expr& c, int64_t* k) {
  if (c.kind != ExprKind::kConstant || c.constant != std::floor(c.constant) || std::fabs(c.constant) > 9.0e15) {
    return false;
  }
  *k = static_cast<int64_t>(c.constant);
  return true;
}

bool integerIndex(const Expr& e) {
  return e.kind == ExprKind::kIndex && (e.dtype == DType::i32 || e.dtype == DType::i64);
}

// The position `x` of a clamp min(max(x, 0), hi) of an integer position,
// with hi; nullptr when `e` is not one.
const Expr* clampedPosition(const Expr& e, int64_t* hi) {
  *hi = clampBound(e);
  if (*hi < 0) return nullptr;
  const Expr& x = *e.args[0]->args[0];
  return integerIndex(x) && x.dtype == e.dtype ? &x : nullptr;
}

// The tests `e` itself makes (not its operands'): a comparison of a
// position with a constant, or the two sides of a clamp.
std::vector<Test> testsOf(const Expr& e) {
  std::vector<Test> out;
  if (e.kind != ExprKind::kOp) return out;
  int64_t k = 0;
  if (e.args.size() == 2 && integerIndex(*e.args[0]) && integral(*e.args[1], &k)) {
    const Affine& a = e.args[0]->index[0];
    // Only the four orderings make a test; no switch over every op.
    if (e.op == OpCode::kGe) {
      out.push_back({a, k});
    } else if (e.op == OpCode::kGt) {
      out.push_back({a, k + 1});
    } else if (e.op == OpCode::kLt) {
      out.push_back({scale(a, -1), 1 - k});
    } else if (e.op == OpCode::kLe) {
      out.push_back({scale(a, -1), -k});
    }
    return out;
  }
  int64_t hi = 0;
  if (const Expr* x = clampedPosition(e, &hi)) {
    out.push_back({x->index[0], 0});
    out.push_back({scale(x->index[0], -1), -hi});
  }
  return out;
}

// 1 when the test holds over `ranges`, 0 when it never does, -1 when that
// depends on the point.
int decide(const Test& t, const Ranges& ranges) {
  const std::optional<Range> r = rangeOf(t.a, ranges);
  if (!r) return -1;
  if (r->lo >= t.k) return 1;
  if (r->hi < t.k) return 0;
  return -1;
}

class Partitioner {
 public:
  Partitioner(Module& m, const PartitionOptions& o) : m_(m), o_(o) {}

  // The kernel, or one kernel per piece of its outermost loop when that
  // loop splits (each piece then keeps a loop of its own for the threads).
  std::vector<Kernel> kernel(Kernel& k) {
    copies_ = 0;
    ranges_.clear();
    std::vector<Kernel> out;
    if (k.body.size() == 1 && k.body[0].kind == StmtKind::kLoop && k.body[0].loop.tag == LoopTag::kSerial &&
        k.body[0].loop.extent >= o_.min_outer_extent) {
      const std::vector<int64_t> points = pointsFor(k.body[0]);
      const int added = static_cast<int>(points.size());
      if (added > 0 && added + 1 <= o_.max_pieces) {
        copies_ += added;
        std::vector<Stmt> pieces = split(k.body[0], points);
        for (size_t i = 0; i < pieces.size(); ++i) {
          Stmt& piece = pieces[i];
          ranges_[piece.loop.var] = {0, piece.loop.extent - 1};
          foldList(piece.body);
          list(piece.body, 1);
          ranges_.erase(piece.loop.var);
          Kernel part = k;
          part.name = strCat(k.name, "_part", i);
          part.body = {std::move(piece)};
          out.push_back(std::move(part));
        }
        return out;
      }
    }
    list(k.body, 0);
    out.push_back(std::move(k));
    return out;
  }

 private:
  // Splits the loops of `stmts` (those at depth >= 1) and folds each piece.
  void list(std::vector<Stmt>& stmts, int depth) {
    std::vector<Stmt> out;
    out.reserve(stmts.size());
    for (Stmt& s : stmts) {
      if (s.kind != StmtKind::kLoop) {
        out.push_back(std::move(s));
        continue;
      }
      if (depth > 0 && s.loop.tag == LoopTag::kSerial) {
        const std::vector<int64_t> points = pointsFor(s);
        const int added = static_cast<int>(points.size());
        if (added > 0 && added + 1 <= o_.max_pieces && copies_ + added <= o_.max_copies) {
          copies_ += added;
          for (Stmt& piece : split(s, points)) {
            ranges_[piece.loop.var] = {0, piece.loop.extent - 1};
            foldList(piece.body);
            list(piece.body, depth + 1);
            ranges_.erase(piece.loop.var);
            out.push_back(std::move(piece));
          }
          continue;
        }
      }
      ranges_[s.loop.var] = {0, s.loop.extent - 1};
      list(s.body, depth + 1);
      ranges_.erase(s.loop.var);
      out.push_back(std::move(s));
    }
    stmts = std::move(out);
  }

  // Where in (0, extent) loop `l`'s variable decides a test of its body.
  std::vector<int64_t> pointsFor(const Stmt& l) {
    const int v = l.loop.var;
    const int64_t extent = l.loop.extent;
    std::set<int64_t> points;
    ranges_[v] = {0, extent - 1};
    auto onTest = [&](const Test& t) {
      const int64_t c = t.a.coeffOf(v);
      if (c == 0) return;
      const std::optional<Range> rest = rangeOf(t.a, ranges_, v);
      if (!rest) return;
      // Where the test flips for a value x of the rest: from there on it
      // holds (c > 0), or before there it holds (c < 0).
      auto flip = [&](int64_t x) { return c > 0 ? ceilDiv(t.k - x, c) : floorDiv(x - t.k, -c) + 1; };
      auto add = [&](int64_t q) {
        if (q > 0 && q < extent) points.insert(q);
      };
      // Over a short range of the rest (the taps of a window reaching two
      // or more past the edge), a point per value: each edge piece then
      // decides the test for every tap (a padding of 2 has edges of two
      // rows, each needing its own guards). Else the two ends only: the
      // pieces between them stay undecided.
      constexpr int64_t kEdgePoints = 8;
      if (rest->hi - rest->lo <= kEdgePoints) {
        for (int64_t x = rest->lo; x <= rest->hi; ++x) add(flip(x));
      } else {
        add(flip(rest->lo));
        add(flip(rest->hi));
      }
    };
    scanList(l.body, onTest);
    ranges_.erase(v);
    return {points.begin(), points.end()};
  }

  // Calls `f` for each test in `stmts`, with the ranges of their loops.
  template <class F>
  void scanList(const std::vector<Stmt>& stmts, F& f) {
    for (const Stmt& s : stmts) {
      std::vector<int> scoped;
      if (s.kind == StmtKind::kLoop) {
        ranges_[s.loop.var] = {0, s.loop.extent - 1};
        scoped.push_back(s.loop.var);
      }
      for (const LoopHeader& h : s.domain) {
        ranges_[h.var] = {0, h.extent - 1};
        scoped.push_back(h.var);
      }
      auto visit = [&](const Expr& x) {
        for (const Test& t : testsOf(x)) f(t);
      };
      if (s.value) visitExpr(s.value, visit);
      for (const ExprRef& a : s.args) visitExpr(a, visit);
      if (s.guard) visitExpr(s.guard, visit);
      scanList(s.body, f);
      for (int v : scoped) ranges_.erase(v);
    }
  }

  // `l` cut at `points`: one loop per piece, each over a fresh variable
  // offset by the piece's start, with fresh variables for the loops and
  // domains inside (a variable is bound once per kernel).
  std::vector<Stmt> split(const Stmt& l, const std::vector<int64_t>& points) {
    std::vector<int64_t> bounds{0};
    bounds.insert(bounds.end(), points.begin(), points.end());
    bounds.push_back(l.loop.extent);
    std::vector<Stmt> pieces;
    for (size_t p = 0; p + 1 < bounds.size(); ++p) {
      Stmt piece = l;
      piece.loop.var = m_.newVar();
      piece.loop.extent = bounds[p + 1] - bounds[p];
      Substitution s;
      s.set(l.loop.var, Affine{{{piece.loop.var, 1}}, bounds[p]});
      renameList(piece.body, s);
      pieces.push_back(std::move(piece));
    }
    return pieces;
  }

  void renameList(std::vector<Stmt>& stmts, Substitution& s) {
    for (Stmt& st : stmts) {
      if (st.kind == StmtKind::kLoop) {
        const int fresh = m_.newVar();
        s.set(st.loop.var, Affine::var(fresh));
        st.loop.var = fresh;
      }
      for (LoopHeader& h : st.domain) {
        const int fresh = m_.newVar();
        s.set(h.var, Affine::var(fresh));
        h.var = fresh;
      }
      substituteStmt(st, s);
      if (st.value) st.value = freshenBound(m_, st.value);
      renameList(st.body, s);
    }
  }

  void foldList(std::vector<Stmt>& stmts) {
    for (Stmt& s : stmts) {
      std::vector<int> scoped;
      if (s.kind == StmtKind::kLoop) {
        ranges_[s.loop.var] = {0, s.loop.extent - 1};
        scoped.push_back(s.loop.var);
      }
      for (ExprRef& a : s.args) a = fold(a);
      for (const LoopHeader& h : s.domain) {
        ranges_[h.var] = {0, h.extent - 1};
        scoped.push_back(h.var);
      }
      if (s.value) s.value = fold(s.value);
      if (s.guard) s.guard = fold(s.guard);
      foldList(s.body);
      for (int v : scoped) ranges_.erase(v);
    }
  }

  ExprRef fold(const ExprRef& e) {
    if (e->args.empty()) return e;
    countWork();
    std::vector<ExprRef> args;
    bool changed = false;
    for (const ExprRef& a : e->args) {
      args.push_back(fold(a));
      changed = changed || args.back() != a;
    }
    ExprRef cur = e;
    if (changed) {
      auto copy = std::make_shared<Expr>(*e);
      copy->args = std::move(args);
      cur = std::move(copy);
    }
    const Expr& x = *cur;
    if (x.kind == ExprKind::kLoad) {
      // Bound positions that became affine join the index.
      Substitution s;
      auto copy = std::make_shared<Expr>(x);
      copy->bound.clear();
      copy->args.clear();
      for (size_t j = 0; j < x.bound.size(); ++j) {
        if (x.args[j]->kind == ExprKind::kIndex) {
          s.set(x.bound[j], x.args[j]->index[0]);
        } else {
          copy->bound.push_back(x.bound[j]);
          copy->args.push_back(x.args[j]);
        }
      }
      if (s.entries.empty()) return cur;
      for (Affine& a : copy->index) a = substitute(a, s);
      return copy;
    }
    if (x.kind != ExprKind::kOp) return cur;
    if (x.op == OpCode::kWhere && x.args[0]->kind == ExprKind::kConstant) {
      return x.args[x.args[0]->constant != 0 ? 1 : 2];
    }
    const std::vector<Test> tests = testsOf(x);
    if (tests.size() == 1) {
      const int d = decide(tests[0], ranges_);
      if (d >= 0) return makeConstant(x.dtype, d);
    } else if (tests.size() == 2) {  // a clamp
      int64_t hi = 0;
      const Expr* position = clampedPosition(x, &hi);
      const int low = decide(tests[0], ranges_), high = decide(tests[1], ranges_);
      if (low == 0) return makeIndex(x.dtype, Affine::constantOf(0));
      if (high == 0) return makeIndex(x.dtype, Affine::constantOf(hi));
      if (low == 1 && high == 1) return makeIndex(x.dtype, position->index[0]);
    }
    return cur;
  }

  Module& m_;
  const PartitionOptions& o_;
  int copies_ = 0;
  Ranges ranges_;
};

}  // namespace

absl::StatusOr<Module> partitionBoundaries(Module m, const PartitionOptions& options) {
  Partitioner p(m, options);
  std::vector<Kernel> kernels;
  for (Kernel& k : m.kernels) {
    for (Kernel& part : p.kernel(k)) kernels.push_back(std::move(part));
  }
  m.kernels = std::move(kernels);
  return m;
}

}  // namespace accy::choir
