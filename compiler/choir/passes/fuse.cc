#include "compiler/choir/passes/fuse.h"

#include <set>

#include "compiler/choir/printer.h"
#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

// The producer form: loops (outermost first) and the store at their vars.
struct Producer {
  std::vector<LoopHeader> loops;
  const Stmt* store = nullptr;
};

bool asProducer(const Module& m, const Kernel& k, Producer* out) {
  if (k.body.size() != 1) return false;
  const Stmt* s = &k.body[0];
  std::vector<LoopHeader> loops;
  while (s->kind == StmtKind::kLoop && s->body.size() == 1) {
    loops.push_back(s->loop);
    s = &s->body[0];
  }
  if (s->kind != StmtKind::kStore || m.buffers[s->buffer].role != BufferRole::kTemp) return false;
  if (s->index.size() != loops.size()) return false;
  for (size_t d = 0; d < loops.size(); ++d) {
    if (!(s->index[d] == Affine::var(loops[d].var))) return false;
  }
  out->loops = std::move(loops);
  out->store = s;
  return true;
}

// Counts, over every statement of `k`, the distinct load sites of `buffer`
// and the largest iteration count under which one of them is evaluated.
void measureUses(const Module& m, const std::vector<Stmt>& stmts, int buffer, int64_t trips,
                 std::set<std::string>* sites, int64_t* max_trips) {
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) {
      measureUses(m, s.body, buffer, trips * s.loop.extent, sites, max_trips);
      continue;
    }
    if (!s.value) continue;
    int64_t t = trips;
    for (const LoopHeader& h : s.domain) t *= h.extent;
    visitExpr(s.value, [&](const Expr& e) {
      if (e.kind != ExprKind::kLoad || e.buffer != buffer) return;
      std::string key;
      for (const Affine& a : e.index) key += toText(a) + ";";
      sites->insert(key);
      *max_trips = std::max(*max_trips, t);
    });
  }
}

}  // namespace

absl::StatusOr<Module> fuseKernels(Module m) {
  for (size_t pi = m.kernels.size(); pi-- > 0;) {
    Producer p;
    if (!asProducer(m, m.kernels[pi], &p)) continue;
    const int buffer = p.store->buffer;
    bool written_elsewhere = false;
    std::set<std::string> sites;
    int64_t max_trips = 0;
    for (size_t k = 0; k < m.kernels.size(); ++k) {
      if (k == pi) continue;
      written_elsewhere = written_elsewhere || kernelWrites(m.kernels[k], buffer);
      measureUses(m, m.kernels[k].body, buffer, 1, &sites, &max_trips);
    }
    if (written_elsewhere) continue;
    const ExprRef value = p.store->value;
    const int64_t elements = m.buffers[buffer].elements();
    if (exprIsExpensive(value) && (sites.size() > 1 || max_trips > elements)) continue;
    // Inline: each load buffer[idx...] becomes value with loop var d := idx[d].
    const std::vector<LoopHeader> loops = p.loops;
    auto inline_load = [&](const ExprRef& load) -> ExprRef {
      if (load->buffer != buffer) return load;
      Substitution s;
      for (size_t d = 0; d < loops.size(); ++d) s.set(loops[d].var, load->index[d]);
      return substituteExpr(value, s);
    };
    for (size_t k = 0; k < m.kernels.size(); ++k) {
      if (k == pi) continue;
      forEachValue(m.kernels[k].body, [&](ExprRef& e) { e = replaceLoads(e, inline_load); });
    }
    m.kernels.erase(m.kernels.begin() + static_cast<std::ptrdiff_t>(pi));
  }
  dropUnusedTemps(m);
  return m;
}

}  // namespace accy::choir
