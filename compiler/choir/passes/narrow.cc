#include "compiler/choir/passes/narrow.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

struct Range {
  int64_t lo = std::numeric_limits<int64_t>::max();
  int64_t hi = std::numeric_limits<int64_t>::min();
  void add(int64_t a, int64_t b) {
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  }
};

// The writer's nest: the loop of each of T's dimensions, or nothing when
// the kernel is not of the form narrowProducers takes.
std::optional<std::vector<Stmt*>> writerNest(Module& m, int k) {
  Kernel& kernel = m.kernels[static_cast<size_t>(k)];
  if (kernel.body.size() != 1) return std::nullopt;
  std::vector<Stmt*> loops;
  Stmt* s = &kernel.body[0];
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) {
    loops.push_back(s);
    s = &s->body[0];
  }
  if ((s->kind != StmtKind::kStore && s->kind != StmtKind::kReduce) || !s->bound.empty()) return std::nullopt;
  const Buffer& t = m.buffers[static_cast<size_t>(s->buffer)];
  if (s->index.size() != t.shape.size() || kernelReads(kernel, s->buffer)) return std::nullopt;
  std::vector<Stmt*> loop_of_dim;
  for (size_t d = 0; d < s->index.size(); ++d) {
    const Affine& a = s->index[d];
    if (a.constant != 0 || a.terms.size() != 1 || a.terms[0].coeff != 1) return std::nullopt;
    Stmt* found = nullptr;
    for (Stmt* l : loops) {
      if (l->loop.var == a.terms[0].var) found = l;
    }
    if (found == nullptr || found->loop.extent != t.shape[d] || found->loop.tag != LoopTag::kSerial) return std::nullopt;
    if (std::find(loop_of_dim.begin(), loop_of_dim.end(), found) != loop_of_dim.end()) return std::nullopt;
    loop_of_dim.push_back(found);
  }
  return loop_of_dim;
}

// The loads of every temporary, per dimension, over the extents of the
// loops around them (`ranges[buffer]`, empty for the other buffers).
void collectReads(const Module& m, const std::vector<Stmt>& stmts, std::map<int, int64_t>& extents,
                  std::vector<std::vector<Range>>& ranges) {
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) {
      extents[s.loop.var] = s.loop.extent;
      collectReads(m, s.body, extents, ranges);
      extents.erase(s.loop.var);
      continue;
    }
    for (const LoopHeader& h : s.domain) extents[h.var] = h.extent;
    auto look = [&](const ExprRef& e) {
      if (!e) return;
      visitExpr(e, [&](const Expr& x) {
        if (x.kind != ExprKind::kLoad) return;
        std::vector<Range>& of = ranges[static_cast<size_t>(x.buffer)];
        for (size_t d = 0; d < x.index.size() && d < of.size(); ++d) {
          const Affine& a = x.index[d];
          int64_t lo = a.constant, hi = a.constant;
          bool known = true;
          for (const Affine::Term& t : a.terms) {
            auto it = extents.find(t.var);
            if (it == extents.end()) {
              known = false;
              break;
            }
            const int64_t span = t.coeff * (it->second - 1);
            lo += std::min<int64_t>(0, span);
            hi += std::max<int64_t>(0, span);
          }
          const int64_t last = m.buffers[static_cast<size_t>(x.buffer)].shape[d] - 1;
          if (!known) {
            of[d].add(0, last);
          } else {
            of[d].add(std::max<int64_t>(lo, 0), std::min(hi, last));
          }
        }
      });
    };
    look(s.value);
    for (const ExprRef& a : s.args) look(a);
    if (s.guard) look(s.guard);
    for (const LoopHeader& h : s.domain) extents.erase(h.var);
  }
}

}  // namespace

absl::StatusOr<Module> narrowProducers(Module m) {
  // One pass over the kernels for the writers and one for the reads, so
  // the pass is linear in the module (a program of 65,536 nodes lowers to
  // thousands of kernels and temporaries).
  const size_t n = m.buffers.size();
  std::vector<int> writers(n, 0), writer(n, -1);
  for (size_t k = 0; k < m.kernels.size(); ++k) {
    std::vector<int> written;
    visitStmts(m.kernels[k].body, [&](const Stmt& s) {
      if (s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) written.push_back(s.buffer);
    });
    std::sort(written.begin(), written.end());
    written.erase(std::unique(written.begin(), written.end()), written.end());
    for (int b : written) {
      ++writers[static_cast<size_t>(b)];
      writer[static_cast<size_t>(b)] = static_cast<int>(k);
    }
  }
  std::vector<std::vector<Range>> ranges(n);
  bool any = false;
  for (size_t b = 0; b < n; ++b) {
    const Buffer& t = m.buffers[b];
    if (t.role == BufferRole::kTemp && !t.shape.empty() && writers[b] == 1) {
      ranges[b].resize(t.shape.size());
      any = true;
    }
  }
  if (!any) return m;
  // A writer that reads its own temporary is refused below (writerNest), so
  // the reads of every kernel count.
  for (const Kernel& k : m.kernels) {
    std::map<int, int64_t> extents;
    collectReads(m, k.body, extents, ranges);
  }
  for (size_t b = 0; b < n; ++b) {
    if (ranges[b].empty()) continue;
    const std::optional<std::vector<Stmt*>> loop_of_dim = writerNest(m, writer[b]);
    if (!loop_of_dim) continue;
    const std::vector<int64_t> shape = m.buffers[b].shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      const Range& r = ranges[b][d];
      if (r.lo > r.hi) continue;  // never read: left to dead-code removal elsewhere
      if (r.lo == 0 && r.hi == shape[d] - 1) continue;
      Stmt* l = (*loop_of_dim)[d];
      const int old_var = l->loop.var;
      l->loop.var = m.newVar();
      l->loop.extent = r.hi - r.lo + 1;
      Substitution s;
      s.set(old_var, Affine{{{l->loop.var, 1}}, r.lo});
      for (Stmt& c : l->body) substituteTree(c, s);
    }
  }
  return m;
}

}  // namespace accy::choir
