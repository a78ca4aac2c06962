#include "compiler/choir/passes/fuse.h"

#include <algorithm>
#include <functional>

#include "absl/container/flat_hash_map.h"

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

// How a buffer is used and, for an inlined producer, what its value costs
// once its own producers are inlined into it.
struct BufferFacts {
  int writers = 0;         // kernels that write it
  int64_t loads = 0;       // load nodes that read it, over all kernels
  int64_t max_trips = 0;   // most evaluations of one such load in one run
  // Where it is read: the first statement and index, and whether any load
  // is elsewhere (another statement or another index). Loads at one site
  // are one evaluation: every emitter shares equal subexpressions.
  const Stmt* site_stmt = nullptr;
  const std::vector<Affine>* site_index = nullptr;
  bool several_sites = false;
  bool gathered = false;   // a load reads it at positions bound to data
  bool clamped = false;    // a load reads it at clamped positions (pad, or data)
  uint64_t clamped_dims = 0;  // the dimensions such a load's index binds (bit d; the last for d >= 63)
  bool inlined = false;    // its producer is substituted at every load
  int producer = -1;       // the kernel, when inlined
  // Of the producer's value with its own inlined producers substituted:
  int64_t nodes = 1;       // expression nodes
  int64_t work = 1;        // of which not position work (ValueFacts::work)
  int64_t registers = 1;   // values live at once to evaluate it (Sethi-Ullman)
  bool expensive = false;  // holds a transcendental, a division, a power
  bool index = false;      // holds a position value (an iota, a pad's guard)
  uint64_t index_dims = 0; // the producer's dimensions those values use (bit d; the last for d >= 63)
  // The buffers the producer's value reads, its inlined producers' included
  // (sorted; kept only when FuseLimits::max_buffers bounds them).
  std::vector<int> leaves;
};

// The buffers `value` reads, each inlined load counted as what its
// producer reads (sorted, each once).
std::vector<int> leavesOf(const ExprRef& value, const std::vector<BufferFacts>& facts) {
  std::vector<int> out;
  visitExpr(value, [&](const Expr& e) {
    if (e.kind != ExprKind::kLoad) return;
    if (facts[e.buffer].inlined) {
      out.insert(out.end(), facts[e.buffer].leaves.begin(), facts[e.buffer].leaves.end());
    } else {
      out.push_back(e.buffer);
    }
  });
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The facts of `e` with every inlined load replaced by its producer's value.
struct ValueFacts {
  int64_t nodes = 0;
  int64_t registers = 1;
  bool expensive = false;
  bool index = false;
  // Computed only from positions and constants (a pad's guard, a clamp of a
  // position): integer work that the partition pass folds away in most
  // iterations (passes/partition.h).
  bool position = false;
  // Nodes that are not such position work: what a copy of the value costs
  // each time it is evaluated (`nodes` still bounds its size).
  int64_t work = 0;
};

ValueFacts valueFacts(const ExprRef& e, const std::vector<BufferFacts>& facts) {
  countWork();

  if (e->kind == ExprKind::kLoad && facts[e->buffer].inlined) {
    const BufferFacts& f = facts[e->buffer];
    return {f.nodes, f.registers, f.expensive, f.index, false, f.work};
  }
  // A division by a constant (a mean, a box filter's scale) is one vector
  // instruction: cheap enough to copy into each reader rather than store.
  const bool by_constant = e->kind == ExprKind::kOp && e->op == OpCode::kDiv && e->args.size() == 2 &&
                           e->args[1]->kind == ExprKind::kConstant;
  ValueFacts v{1, 1, e->kind == ExprKind::kOp && isExpensiveOp(e->op) && !by_constant,
               e->kind == ExprKind::kIndex, e->kind == ExprKind::kIndex, 1};
  std::vector<int64_t> needs;
  bool all_positions = e->kind == ExprKind::kOp && e->dtype != DType::f32 && e->dtype != DType::f64;
  bool any_position = false;
  for (const ExprRef& a : e->args) {
    const ValueFacts af = valueFacts(a, facts);
    v.nodes += af.nodes;
    v.work += af.work;
    v.expensive = v.expensive || af.expensive;
    v.index = v.index || af.index;
    needs.push_back(af.registers);
    all_positions = all_positions && (af.position || a->kind == ExprKind::kConstant);
    any_position = any_position || af.position;
  }
  if (v.position || (all_positions && any_position)) {
    v.position = true;
    v.work = 0;
    return v;
  }
  // Operands evaluated in decreasing order of need: operand i is evaluated
  // while the i values before it are held.
  std::sort(needs.begin(), needs.end(), std::greater<>());
  for (size_t i = 0; i < needs.size(); ++i) v.registers = std::max(v.registers, needs[i] + int64_t(i));
  return v;
}

// Rewrites expressions with every inlined load replaced by its producer's
// value, the producer's loop variables bound to the load's index. Each node
// of the result is made once, so the cost is the size of the result, which
// the limits below bound by a constant times the size of the program.
class Inliner {
 public:
  Inliner(Module& m, const std::vector<BufferFacts>& facts, const std::vector<Producer>& producers)
      : m_(m), facts_(facts), producers_(producers) {}

  // Variables a load binds to clamped positions (a pad's), which every
  // load of a producer inlined at that load binds too.
  struct Bindings {
    std::vector<int> vars;
    std::vector<ExprRef> values;
  };

  ExprRef rewrite(const ExprRef& e, const Substitution* s, const Bindings* outer = nullptr) {
    if (e->kind == ExprKind::kConstant) return e;
    if (e->kind == ExprKind::kLoad && facts_[e->buffer].inlined) {
      const Producer& p = producers_[facts_[e->buffer].producer];
      Substitution bind;
      for (size_t d = 0; d < p.loops.size(); ++d) {
        bind.set(p.loops[d].var, s != nullptr ? substitute(e->index[d], *s) : e->index[d]);
      }
      if (e->bound.empty()) return rewrite(p.store->value, &bind, outer);
      Bindings inner;
      if (outer != nullptr) inner = *outer;
      for (size_t j = 0; j < e->bound.size(); ++j) {
        inner.vars.push_back(e->bound[j]);
        inner.values.push_back(rewrite(e->args[j], s, outer));
      }
      return rewrite(p.store->value, &bind, &inner);
    }
    if (s == nullptr && outer == nullptr && !holdsInlinedLoad(e)) return e;
    countWork();
    auto copy = std::make_shared<Expr>(*e);
    if (s != nullptr) {
      for (Affine& a : copy->index) a = substitute(a, *s);
    }
    for (ExprRef& a : copy->args) a = rewrite(a, s, e->kind == ExprKind::kLoad ? nullptr : outer);
    if (e->kind == ExprKind::kLoad && outer != nullptr) {
      // The outer bindings first: this load's own values may use them.
      copy->bound.insert(copy->bound.begin(), outer->vars.begin(), outer->vars.end());
      copy->args.insert(copy->args.begin(), outer->values.begin(), outer->values.end());
    }
    if (e->kind == ExprKind::kLoad && !copy->bound.empty() && s != nullptr) {
      // A copy of a producer's load, one per place the producer is read:
      // variables of its own, so that no two loads bind one variable to
      // different values (choir/rewrite.h, freshenBound).
      renameBound(m_, *copy);
    }
    return copy;
  }

 private:
  // Whether a load of an inlined buffer is below `e` (remembered per node,
  // so that the question costs one visit of each node in all).
  bool holdsInlinedLoad(const ExprRef& e) {
    if (e->kind == ExprKind::kLoad && facts_[e->buffer].inlined) return true;
    if (e->args.empty()) return false;
    if (auto it = holds_.find(e.get()); it != holds_.end()) return it->second;
    bool holds = false;
    for (const ExprRef& a : e->args) holds = holdsInlinedLoad(a) || holds;
    holds_.emplace(e.get(), holds);
    return holds;
  }

  Module& m_;  // for fresh variables
  const std::vector<BufferFacts>& facts_;
  const std::vector<Producer>& producers_;
  absl::flat_hash_map<const Expr*, bool> holds_;
};

void countUses(const std::vector<Stmt>& stmts, int64_t trips, std::vector<BufferFacts>* facts) {
  for (const Stmt& s : stmts) {
    countWork();
    if (s.kind == StmtKind::kLoop) {
      countUses(s.body, trips * s.loop.extent, facts);
      continue;
    }
    if (!s.value) continue;
    int64_t t = trips;
    for (const LoopHeader& h : s.domain) t *= h.extent;
    auto count = [&](const Expr& e) {
      if (e.kind != ExprKind::kLoad) return;
      BufferFacts& f = (*facts)[e.buffer];
      ++f.loads;
      // A producer is not substituted at a data-dependent position (each
      // of its loads would read the indices again): it stays stored. At a
      // clamped position (a pad's) its loads take the load's bindings.
      for (const ExprRef& a : e.args) {
        visitExpr(a, [&](const Expr& x) { f.gathered = f.gathered || x.kind == ExprKind::kLoad; });
      }
      f.clamped = f.clamped || !e.bound.empty();
      for (size_t d = 0; d < e.index.size(); ++d) {
        for (int v : e.bound) {
          if (e.index[d].uses(v)) f.clamped_dims |= uint64_t{1} << std::min<size_t>(d, 63);
        }
      }
      f.max_trips = std::max(f.max_trips, t);
      if (f.site_stmt == nullptr) {
        f.site_stmt = &s;
        f.site_index = &e.index;
      } else if (f.site_stmt != &s || *f.site_index != e.index) {
        f.several_sites = true;
      }
    };
    visitExpr(s.value, count);
    for (const ExprRef& a : s.args) visitExpr(a, count);
    if (s.guard) visitExpr(s.guard, count);
  }
}

void countWriters(const std::vector<Stmt>& stmts, int kernel, std::vector<int>* last_writer,
                  std::vector<BufferFacts>* facts) {
  for (const Stmt& s : stmts) {
    countWork();
    if (s.kind == StmtKind::kLoop) countWriters(s.body, kernel, last_writer, facts);
    if ((s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) && (*last_writer)[s.buffer] != kernel) {
      (*last_writer)[s.buffer] = kernel;
      ++(*facts)[s.buffer].writers;
    }
  }
}

// The dimensions of producer `p` that the position values in its value
// (its inlined producers' included) use.
uint64_t indexDims(const std::vector<BufferFacts>& facts, const Producer& p) {
  auto dimsOf = [&](const Affine& a) {
    uint64_t dims = 0;
    for (size_t d = 0; d < p.loops.size(); ++d) {
      if (a.uses(p.loops[d].var)) dims |= uint64_t{1} << std::min<size_t>(d, 63);
    }
    return dims;
  };
  uint64_t dims = 0;
  visitExpr(p.store->value, [&](const Expr& x) {
    if (x.kind == ExprKind::kIndex) dims |= dimsOf(x.index[0]);
    if (x.kind == ExprKind::kLoad && facts[x.buffer].inlined && facts[x.buffer].index) {
      for (size_t d = 0; d < x.index.size(); ++d) {
        if ((facts[x.buffer].index_dims >> std::min<size_t>(d, 63)) & 1) dims |= dimsOf(x.index[d]);
      }
      for (const ExprRef& a : x.args) {  // its bound positions are evaluated here too
        visitExpr(a, [&](const Expr& y) {
          if (y.kind == ExprKind::kIndex) dims |= dimsOf(y.index[0]);
        });
      }
    }
  });
  return dims;
}

// Whether producer `p`, whose value (its own inlined producers included)
// has facts `v` and fits the limits, is inlined at every load.
bool inlinable(const Module& m, const std::vector<BufferFacts>& facts, const BufferFacts& f, const ValueFacts& v,
               const Producer& p, const FuseLimits& limits) {
  if (f.gathered) return false;
  // Positions are bound only inside loads: a position value of the producer
  // could not use them (its own, along a bound dimension, or its inlined
  // producers').
  if (f.clamped && v.index && (indexDims(facts, p) & f.clamped_dims) != 0) return false;
  if (v.nodes > limits.max_nodes || v.registers > limits.max_registers) return false;
  // Evaluated once per element: read at one site, under no loop its value
  // does not depend on.
  const bool once = !f.several_sites && f.max_trips <= m.buffers[p.store->buffer].elements();
  if (v.expensive && !once) return false;
  // Evaluations per element where it is read most often, bounded.
  const int64_t elements = std::max<int64_t>(1, m.buffers[p.store->buffer].elements());
  const int64_t repeats = (f.max_trips + elements - 1) / elements;
  if (repeats > 1 && v.work > limits.max_recomputed_nodes / repeats) return false;
  // Copies of the tree to each further load, bounded.
  return (f.loads - 1) * v.work <= limits.max_duplicated_nodes;
}

}  // namespace

absl::StatusOr<Module> fuseKernels(Module m, const FuseLimits& requested) {
  FuseLimits limits = requested;
  limits.max_nodes = std::min(limits.max_nodes, kMaxFusedNodes);
  const size_t kernels = m.kernels.size();
  std::vector<BufferFacts> facts(m.buffers.size());
  std::vector<int> last_writer(m.buffers.size(), -1);
  for (size_t k = 0; k < kernels; ++k) {
    countWriters(m.kernels[k].body, static_cast<int>(k), &last_writer, &facts);
    countUses(m.kernels[k].body, 1, &facts);
  }
  // Decide in program order: a producer's own producers are decided first,
  // so the facts of its value include what is inlined into it.
  std::vector<Producer> producers(kernels);
  std::vector<bool> removed(kernels, false);
  // The facts of `value` once it fits the limits: while it is too large or
  // needs too many registers, the largest producer it inlines directly is
  // stored instead (undoing that decision only shrinks the values that
  // inline it, so they still fit). Each step walks `value`'s own nodes.
  auto fit = [&](const ExprRef& value) {
    ValueFacts v = valueFacts(value, facts);
    while (v.nodes > limits.max_nodes || v.registers > limits.max_registers) {
      int largest = -1;
      visitExpr(value, [&](const Expr& e) {
        if (e.kind == ExprKind::kLoad && facts[e.buffer].inlined &&
            (largest < 0 || facts[e.buffer].nodes > facts[largest].nodes)) {
          largest = e.buffer;
        }
      });
      if (largest < 0) break;
      facts[largest].inlined = false;
      removed[facts[largest].producer] = false;
      v = valueFacts(value, facts);
    }
    // Within the buffers a kernel may bind (the one it writes besides):
    // the producer read directly whose value reads the most is stored.
    if (limits.max_buffers != std::numeric_limits<int64_t>::max()) {
      while (static_cast<int64_t>(leavesOf(value, facts).size()) + 1 > limits.max_buffers) {
        int widest = -1;
        visitExpr(value, [&](const Expr& e) {
          if (e.kind == ExprKind::kLoad && facts[e.buffer].inlined &&
              (widest < 0 || facts[e.buffer].leaves.size() > facts[widest].leaves.size())) {
            widest = e.buffer;
          }
        });
        if (widest < 0) break;
        facts[widest].inlined = false;
        removed[facts[widest].producer] = false;
      }
      v = valueFacts(value, facts);
    }
    return v;
  };
  for (size_t k = 0; k < kernels; ++k) {
    Producer& p = producers[k];
    if (asProducer(m, m.kernels[k], &p) && facts[p.store->buffer].writers == 1) {
      BufferFacts& f = facts[p.store->buffer];
      if (f.loads == 0) {  // nothing reads it: the kernel is dead
        removed[k] = true;
        continue;
      }
      const ValueFacts v = fit(p.store->value);
      if (inlinable(m, facts, f, v, p, limits)) {
        f.inlined = true;
        f.producer = static_cast<int>(k);
        f.nodes = v.nodes;
        f.work = v.work;
        f.registers = v.registers;
        f.expensive = v.expensive;
        f.index = v.index;
        f.index_dims = v.index ? indexDims(facts, p) : 0;
        if (limits.max_buffers != std::numeric_limits<int64_t>::max()) f.leaves = leavesOf(p.store->value, facts);
        removed[k] = true;
      }
      continue;
    }
    // A kernel that stays: each of its values within the limits.
    visitStmts(m.kernels[k].body, [&](const Stmt& s) {
      if (s.value) fit(s.value);
      if (s.guard) fit(s.guard);
    });
  }
  Inliner inliner(m, facts, producers);
  std::vector<Kernel> kept;
  kept.reserve(kernels);
  for (size_t k = 0; k < kernels; ++k) {
    if (removed[k]) continue;
    // Kept kernels are never read by the inliner (only removed producers
    // are), so each can move.
    Kernel kernel = std::move(m.kernels[k]);
    forEachValue(kernel.body, [&](ExprRef& e) { e = inliner.rewrite(e, nullptr); });
    kept.push_back(std::move(kernel));
  }
  m.kernels = std::move(kept);
  dropUnusedTemps(m);
  return m;
}

}  // namespace accy::choir
