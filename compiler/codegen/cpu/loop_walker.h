// The CPU targets' one walk of a Choir kernel: statements, counted loops,
// innermost store loops (vector lanes, then a scalar tail), reductions
// (four vector accumulators over an unrolled step, a vector step, a scalar
// tail, the lanes combined at the end), row bases cached per innermost loop,
// values numbered and evaluated once per point, and every op given its
// meaning by compiler/codegen/semantics/op_semantics.h. The x86-64 emitter
// and the WebAssembly emitter derive from it (as the GPU targets share
// compiler/codegen/gpu/kernel_emitter over gpu::Target) and supply
// primitives only: how an index, a load, a store, a loop and a value are
// written in their instruction set.
//
// Loop nests are walked without recursion per axis: a reduction's domain
// opens its loops in a row and closes them in reverse (a kernel's own loop
// statements recurse once per nesting level of the statement tree, which
// the language bounds; docs/LIMITS.md).
//
// A target T derives from LoopWalker<T, Value, Index> (Value: an emitted
// value, Index: an integer variable holding a loop counter, a limit or a
// row base) and provides, as members the walker calls:
//
//   Loops
//     Index newIndex();                       a fresh counter
//     void zeroIndex(Index i);                i = 0
//     void setIndex(Index i, Index from);     i = from
//     Index constantIndex(int64_t v);         a fresh index holding v
//     Index limitLess(Index limit, int64_t k);  a fresh index: limit - k
//     Index begin(), end();                   this launch's share of the
//                                             outermost parallel loop
//     OpenLoop openLoop(Index i, Index limit, int64_t step);
//     void closeLoop(const OpenLoop&);
//         for (; i < limit; i += step) between the two
//     OpenGuard beginGuard(const Value& b);
//     void endGuard(const OpenGuard&);
//         if (b) between the two (b a scalar bool: a store's guard)
//     absl::Status checkLoop(const choir::LoopHeader&);  refuse what the
//         target cannot count (an extent past its index width)
//   Memory
//     void preloadBuffer(int buffer);         every buffer a kernel names,
//                                             before its first statement
//     Index computeRowBase(int buffer, const choir::Affine& rest);
//         the address (or offset) of buffer[rest] for a cached row base
//     Value scalarLoad(const choir::Expr& load, const Mode&);
//     Value vectorLoad(const choir::Expr& load, int key, const Mode&);
//         key: the load's value number (a broadcast is loaded once per loop)
//     void storeValue(int buffer, const std::vector<choir::Affine>& index,
//                     const Value& v, const Mode&);
//   Values
//     using Prims = ...;   the primitives op_semantics.h drives
//     Prims prims(const Mode&);   depending on mode.vector only
//     const char* emitterName();             "x86-64 emitter"
//     bool contractsMultiplyAdd(choir::DType);  add(mul(a, b), c) as one
//         fused multiply-add (optional, with multiplyAdd: none without)
//     Value multiplyAdd(choir::DType, const Value& a, const Value& b,
//                       const Value& c, const Mode&);
//     Value indexValue(const choir::Affine&);  an index expression's value,
//     choir::DType indexDType();               held in this dtype
//     Index valueIndex(const Value&);          and back: a value of
//         indexDType (a clamped index read from data) as an index
//     Value accumulator(choir::OpCode combiner, choir::DType, bool vector);
//         a fresh variable holding the combiner's identity
//     void assign(choir::DType, const Value& var, const Value& v, bool vector);
//     void combineLanes(choir::OpCode combiner, choir::DType, const Value& lanes,
//                       Value& acc);  acc = combiner over acc and every lane
//     std::vector<Value> laneValues(choir::DType, const Value& lanes);
//         each lane as a scalar value, first lane first (a compensated
//         sum adds them one by one)
//   Schedules: how wide each innermost loop runs (1: scalar), and what the
//   target does around its loops (hoisting, broadcasts, streaming)
//     int storeWidth(const choir::Stmt& loop, bool parallel);
//     int storeCopies(const choir::Stmt& loop, int width);   (optional)
//         vector steps evaluated together, their instructions interleaved
//         (independent chains for a core whose vector loop is latency-bound:
//         2 on x86-64 for a Threefry encryption), else 1
//     Mode beginVectorStore(const choir::Stmt& loop, int width, const Mode& lanes);
//         returns the lanes' mode (stream set for non-temporal stores)
//     absl::Status alignStream(const choir::Stmt& loop, Index i, Index limit,
//                              int width, const Mode& scalar);
//         scalar iterations until the output is aligned (optional: a target
//         without it never sets stream)
//     void endVectorStore(const Mode& lanes);
//     OpenAligned beginAlignedRow(const choir::Stmt& loop, Index i, int width);
//     void elseAligned(const OpenAligned&); void endAligned(const OpenAligned&);
//         (optional, with alignStream) if the streamed row at i is aligned
//         to the vector, the first part, else the second
//     void beginScalarStore(); void endScalarStore();   (optional)
//     int reduceWidth(const choir::Stmt& reduce);
//     void beginReduce(const choir::Stmt& reduce, choir::DType, int width);
//     void beginReduceBody(const choir::Stmt& reduce, const Mode& lanes);
//     void endReduceBody();
//     void prefetch(Index base, int64_t bytes);   (optional, with indexAhead)
//         hint the cache lines of [base, base + bytes)
//     Index indexAhead(Index i, Index limit, int64_t d);  min(i + d, limit - 1)
//     Value indexLanes(const choir::Affine&, choir::DType, const Mode&);
//         (optional) an index value (i32 or u32) in the lanes of a vector
//         loop: its value at each lane's position
//     Value uniformMask(const Value& b);   (optional) a vector mask of a scalar
//         bool: every lane b (a `where` condition the same along the loop)
//     std::optional<absl::Status> specialLoop(const choir::Stmt& loop, bool outermost);
//         a loop the target emits its own way (x86-64's blocked product), or
//         nullopt (optional)
#ifndef ACCY_COMPILER_CODEGEN_CPU_LOOP_WALKER_H_
#define ACCY_COMPILER_CODEGEN_CPU_LOOP_WALKER_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/rewrite.h"
#include "compiler/choir/value_numbering.h"
#include "compiler/choir/work.h"
#include "compiler/codegen/semantics/op_semantics.h"

namespace accy::codegen::cpu {

// Where an expression is evaluated: one point (scalar), or the lanes of the
// innermost loop variable `inner_var`, whose value is `inner` + `offset`
// (a copy of an unrolled step addresses its lanes by displacement).
template <class Index>
struct Mode {
  bool vector = false;
  int inner_var = -1;
  Index inner{};
  int64_t offset = 0;
  // Stores are non-temporal: vector stores aligned; scalar ones (aligning
  // a streamed row, its tail) too, so no line is written both through the
  // cache and past it.
  bool stream = false;
};

// A row base: a buffer and the flat index without the inner variable.
struct RowKey {
  int buffer = 0;
  choir::Affine rest;
  friend bool operator==(const RowKey& a, const RowKey& b) { return a.buffer == b.buffer && a.rest == b.rest; }
  template <typename H>
  friend H AbslHashValue(H h, const RowKey& k) {
    h = H::combine(std::move(h), k.buffer, k.rest.constant, k.rest.terms.size());
    for (const choir::Affine::Term& t : k.rest.terms) h = H::combine(std::move(h), t.var, t.coeff);
    return h;
  }
};

// A reduction's vector step is unrolled into this many independent
// accumulators, when its value has at most kUnrollNodes nodes (each copy is
// code to emit and to allocate registers for: a long fused chain already
// has enough independent work per lane for the core to overlap steps).
inline constexpr int kUnroll = 4;
inline constexpr int kUnrollNodes = 32;
// A floating sum's unrolled steps are cascaded in blocks of
// choir::kCascade (reduce()).
using choir::kCascade;
// A cascaded sum of a value of at most this many nodes, none expensive
// (an elementary function is tens of instructions), writes its blocks of
// kCascade steps out (reduce()).
inline constexpr int64_t kStraightNodes = 6;
// An innermost store loop of at most this many whole vectors is written
// out step by step (no counter, no branch): a short row's loop overhead is
// most of its instructions, and a loop over random rows (a scatter's) keeps
// more rows in flight the fewer instructions each row takes.
inline constexpr int64_t kStraightStores = 8;
// The deepest expression one kernel's walk takes (exprsInto nests a level
// per operation): twice what fusion makes at most (choir::kMaxFusedNodes),
// and within a thread's 8 MiB stack at the walk's frame size (about 600
// bytes a level with optimization; a few times that under
// AddressSanitizer). Deeper, a clear error, not a crash.
inline constexpr int kMaxExprDepth = 2048;

template <class T, class Value, class Index>
class LoopWalker {
 public:
  using Mode = cpu::Mode<Index>;
  // A value at each copy of a step: one, or as many as storeCopies() asks.
  using Values = absl::InlinedVector<Value, 2>;

 protected:
  explicit LoopWalker(const choir::Module& module) : m_(module) {}

  // Preloads every buffer `kernel` names, then emits its statements.
  absl::Status walk(const choir::Kernel& kernel) {
    std::set<int> used;
    choir::visitStmts(kernel.body, [&](const choir::Stmt& s) {
      if (s.buffer >= 0) used.insert(s.buffer);
      auto loads = [&](const choir::Expr& e) {
        if (e.kind == choir::ExprKind::kLoad) used.insert(e.buffer);
      };
      if (s.value) choir::visitExpr(s.value, loads);
      for (const choir::ExprRef& a : s.args) choir::visitExpr(a, loads);
      if (s.guard) choir::visitExpr(s.guard, loads);
    });
    for (int b : used) self().preloadBuffer(b);
    return stmts(kernel.body, /*outermost=*/true);
  }

  absl::Status stmts(const std::vector<choir::Stmt>& body, bool outermost) {
    for (const choir::Stmt& s : body) {
      switch (s.kind) {
        case choir::StmtKind::kLoop:
          ACCY_RETURN_IF_ERROR(loop(s, outermost));
          break;
        case choir::StmtKind::kStore:
          cse_.clear();
          ACCY_RETURN_IF_ERROR(store(s, Mode{}));
          break;
        case choir::StmtKind::kReduce:
          ACCY_RETURN_IF_ERROR(reduce(s));
          break;
        case choir::StmtKind::kBarrier:
          return unimplemented("workgroup barriers have no CPU form");
      }
    }
    return absl::OkStatus();
  }

  // for (i = start; i < limit; i += step) body
  template <typename Body>
  absl::Status counted(Index i, Index limit, int64_t step, Body&& body) {
    const auto open = self().openLoop(i, limit, step);
    ACCY_RETURN_IF_ERROR(body());
    self().closeLoop(open);
    return absl::OkStatus();
  }

  absl::Status loop(const choir::Stmt& s, bool outermost) {
    switch (s.loop.tag) {
      case choir::LoopTag::kGpuBlock:
      case choir::LoopTag::kGpuThread:
        return unimplemented(strCat("loop i", s.loop.var, " is mapped to a GPU dimension"));
      case choir::LoopTag::kSerial:
      case choir::LoopTag::kUnrolled:
      case choir::LoopTag::kVectorized:
      case choir::LoopTag::kCpuParallel:
        break;
    }
    ACCY_RETURN_IF_ERROR(self().checkLoop(s.loop));
    if (s.body.size() == 1 && s.body[0].kind == choir::StmtKind::kStore) return innermostStore(s, outermost);
    if constexpr (requires(T& t) { t.specialLoop(s, outermost); }) {
      if (std::optional<absl::Status> special = self().specialLoop(s, outermost)) return *special;
    }
    const Index i = self().newIndex();
    vars_[s.loop.var] = i;
    const Index limit = startLoop(s, i, outermost && s.loop.tag == choir::LoopTag::kCpuParallel);
    open_.push_back(Around{s.loop.var, i, limit});
    const absl::Status st = counted(i, limit, 1, [&] { return stmts(s.body, false); });
    open_.pop_back();
    return st;
  }

  // The innermost loop of a store: vectors of the target's width, then the
  // scalar tail (unless the extent is known to be whole vectors).
  absl::Status innermostStore(const choir::Stmt& l, bool outermost) {
    const choir::Stmt& st = l.body[0];
    const Index i = self().newIndex();
    vars_[l.loop.var] = i;
    const bool parallel = outermost && l.loop.tag == choir::LoopTag::kCpuParallel;
    startIndex(i, parallel);
    beginRows();
    prepareRows(st, l.loop.var);
    if constexpr (requires(T& t) { t.prefetch(i, int64_t{0}); }) {
      if (!outermost) ACCY_RETURN_IF_ERROR(prefetchRows(l));
    }
    // A guard the same along the loop (a scatter's test of its index, with
    // the index's row hoisted) is tested once, around the whole loop.
    std::optional<typename T::OpenGuard> around;
    if (st.guard && hoisted(st.bound) && choir::invariantIn(m_, st.guard, l.loop.var)) {
      // (cse_ holds the hoisted positions' values, at this same point: the
      // guard's reads of the index reuse them)
      ACCY_ASSIGN_OR_RETURN(const Value g, expr(st.guard, Mode{}));
      around = self().beginGuard(g);
      guard_outside_ = &st;
    }
    // The limit is emitted where a loop first needs it: a straight row of a
    // few vectors (below) has none, and every use of it follows the first
    // in the same branch.
    std::optional<Index> limit_value;
    auto limit = [&]() -> Index {
      if (!limit_value) limit_value = loopLimit(l, parallel);
      return *limit_value;
    };
    const absl::Status body = innermostStoreLoop(l, st, i, limit, parallel);
    if (around) {
      self().endGuard(*around);
      guard_outside_ = nullptr;
    }
    endRows();
    return body;
  }

  template <class Limit>
  absl::Status innermostStoreLoop(const choir::Stmt& l, const choir::Stmt& st, Index i, Limit& limit, bool parallel) {
    const Mode scalar{false, l.loop.var, i};
    const int width = self().storeWidth(l, parallel);
    auto step = [&](const Mode& mode) {
      return [&] {
        cse_.clear();
        return store(st, mode);
      };
    };
    if (width > 1) {
      const Mode lanes = self().beginVectorStore(l, width, Mode{true, l.loop.var, i});
      int copies = 1;
      if constexpr (requires(T& t) { t.storeCopies(l, width); }) copies = self().storeCopies(l, width);
      // A few whole vectors (a scan's carry of a few lanes, a scatter's
      // or a gather's row of 64 features): their steps without a loop
      // around them; when streamed, only where the row is aligned (else
      // the loop below aligns it first).
      const bool straight = !parallel && copies == 1 && l.loop.extent % width == 0 &&
                            l.loop.extent / width <= kStraightStores;
      auto straightSteps = [&]() -> absl::Status {
        for (int64_t k = 0; k < l.loop.extent / width; ++k) {
          Mode at = lanes;
          at.offset = lanes.offset + k * width;
          ACCY_RETURN_IF_ERROR(step(at)());
        }
        return absl::OkStatus();
      };
      // The counted loop: the aligning steps of a streamed row, the
      // vectors, the tail.
      auto loopSteps = [&]() -> absl::Status {
        Mode edge = scalar;
        edge.stream = lanes.stream;
        if (lanes.stream) {
          if constexpr (requires(T& t) { t.alignStream(l, i, limit(), width, edge); }) {
            ACCY_RETURN_IF_ERROR(self().alignStream(l, i, limit(), width, edge));
          } else {
            return absl::InternalError(strCat(self().emitterName(), ": streamed stores without alignStream"));
          }
        }
        if (copies > 1 && l.loop.extent >= int64_t{copies} * width) {
          // Steps of `copies` vectors evaluated together, then single ones.
          const Index ulimit = self().limitLess(limit(), copies * width - 1);
          ACCY_RETURN_IF_ERROR(counted(i, ulimit, copies * width, [&] {
            cse_.clear();
            return storeCopiesAt(st, lanes, copies, width);
          }));
        }
        const Index vlimit = self().limitLess(limit(), width - 1);
        ACCY_RETURN_IF_ERROR(counted(i, vlimit, width, step(lanes)));
        if (parallel || lanes.stream || l.loop.extent % width != 0) {
          ACCY_RETURN_IF_ERROR(counted(i, limit(), 1, step(edge)));
        }
        return absl::OkStatus();
      };
      auto steps = [&]() -> absl::Status {
        if (straight && !lanes.stream) return straightSteps();
        if constexpr (requires(T& t) { t.beginAlignedRow(l, i, width); }) {
          if (straight) {
            const auto aligned = self().beginAlignedRow(l, i, width);
            ACCY_RETURN_IF_ERROR(straightSteps());
            self().elseAligned(aligned);
            ACCY_RETURN_IF_ERROR(loopSteps());
            self().endAligned(aligned);
            return absl::OkStatus();
          }
        }
        return loopSteps();
      };
      ACCY_RETURN_IF_ERROR(steps());
      self().endVectorStore(lanes);
    } else {
      if constexpr (requires(T& t) { t.beginScalarStore(); }) self().beginScalarStore();
      ACCY_RETURN_IF_ERROR(counted(i, limit(), 1, step(scalar)));
      if constexpr (requires(T& t) { t.endScalarStore(); }) self().endScalarStore();
    }
    return absl::OkStatus();
  }

  absl::Status store(const choir::Stmt& s, const Mode& mode) {
    // A store at data-dependent positions whose positions were not computed
    // before the loop: bound here, point by point.
    const bool bind_here = !s.bound.empty() && !hoisted(s.bound);
    if (bind_here) {
      if (mode.vector) return unimplemented("a store at data-dependent positions in a vector loop");
      ACCY_RETURN_IF_ERROR(bindData(s.bound, s.args, mode));
    }
    // A guard not tested around the loop: tested at this point.
    std::optional<typename T::OpenGuard> guard;
    if (s.guard && guard_outside_ != &s) {
      if (mode.vector) return unimplemented("a store guarded differently along a vector loop");
      ACCY_ASSIGN_OR_RETURN(const Value g, expr(s.guard, mode));
      guard = self().beginGuard(g);
    }
    ACCY_ASSIGN_OR_RETURN(const Value v, expr(s.value, mode));
    self().storeValue(s.buffer, s.index, v, mode);
    if (guard) self().endGuard(*guard);
    if (bind_here) unbindData(s.bound);
    return absl::OkStatus();
  }

  // `copies` vector steps of store `s` at once, at offsets 0, width, ...
  absl::Status storeCopiesAt(const choir::Stmt& s, const Mode& lanes, int copies, int width) {
    if (!s.bound.empty() && !hoisted(s.bound)) return unimplemented("a store at data-dependent positions in a vector loop");
    if (s.guard && guard_outside_ != &s) return unimplemented("a store guarded differently along a vector loop");
    std::vector<Mode> modes(copies, lanes);
    for (int c = 0; c < copies; ++c) modes[c].offset = lanes.offset + int64_t{c} * width;
    ACCY_ASSIGN_OR_RETURN(const Values v, exprs(s.value, modes));
    for (int c = 0; c < copies; ++c) self().storeValue(s.buffer, s.index, v[c], modes[c]);
    return absl::OkStatus();
  }

  // Binds `vars` to the clamped indices `values`, evaluated at `mode` (a
  // point), for the addresses that use them.
  absl::Status bindData(const std::vector<int>& vars, const std::vector<choir::ExprRef>& values, const Mode& mode) {
    for (size_t j = 0; j < vars.size(); ++j) {
      ACCY_ASSIGN_OR_RETURN(const Value b, expr(values[j], mode));
      auto p = self().prims(mode);
      OpSemantics<decltype(p)> sem(p, self().emitterName());
      const Value as_index = sem.convert(b, values[j]->dtype, self().indexDType());
      ACCY_RETURN_IF_ERROR(p.status());
      ACCY_RETURN_IF_ERROR(sem.status());
      vars_[vars[j]] = self().valueIndex(as_index);
      data_vars_.insert(vars[j]);
    }
    return absl::OkStatus();
  }
  void unbindData(const std::vector<int>& vars) {
    for (int var : vars) {
      vars_.erase(var);
      data_vars_.erase(var);
    }
  }

  // A reduction into one element: the domain's loops opened outermost
  // first; the innermost runs kUnroll accumulators over unrolled vector
  // steps, then single vector steps, then scalar steps (each only where the
  // known extent leaves iterations for it).
  absl::Status reduce(const choir::Stmt& s) {
    const choir::DType dtype = m_.buffers[s.buffer].dtype;
    Value acc = self().accumulator(s.combiner, dtype, false);
    const int width = self().reduceWidth(s);
    const bool vectorized = width > 1;
    self().beginReduce(s, dtype, width);
    std::vector<Value> vacc;
    if (vectorized) {
      for (int u = 0; u < kUnroll; ++u) vacc.push_back(self().accumulator(s.combiner, dtype, true));
    }
    // A compensated sum (Stmt::compensated) carries each accumulator's
    // rounding errors in an accumulator beside it, one vector of lanes
    // (no unrolled copies) and the scalar tail's.
    const bool compensated = s.compensated;
    Value error = compensated ? self().accumulator(s.combiner, dtype, false) : Value{};
    Value verror = compensated && vectorized ? self().accumulator(s.combiner, dtype, true) : Value{};
    using OpenLoop = decltype(self().openLoop(Index{}, Index{}, 1));
    std::vector<OpenLoop> open;
    for (size_t d = 0; d + 1 < s.domain.size(); ++d) {
      const choir::LoopHeader& h = s.domain[d];
      ACCY_RETURN_IF_ERROR(self().checkLoop(h));
      const Index i = self().newIndex();
      vars_[h.var] = i;
      self().zeroIndex(i);
      const Index limit = self().constantIndex(h.extent);
      open.push_back(self().openLoop(i, limit, 1));
    }
    const choir::LoopHeader& h = s.domain.back();
    ACCY_RETURN_IF_ERROR(self().checkLoop(h));
    const Index i = self().newIndex();
    vars_[h.var] = i;
    self().zeroIndex(i);
    beginRows();
    prepareRows(s.value, h.var);
    const Mode scalar{false, h.var, i};
    const Mode lanes{true, h.var, i};
    self().beginReduceBody(s, lanes);
    auto combineAt = [&](const Mode& mode, Value& into) -> absl::Status {
      cse_.clear();
      ACCY_ASSIGN_OR_RETURN(const Value x, expr(s.value, mode));
      if (compensated) {
        addCompensated(dtype, into, mode.vector ? verror : error, x, mode.vector);
      } else {
        combine(s.combiner, dtype, into, x, mode.vector);
      }
      return absl::OkStatus();
    };
    const bool unroll = vectorized && !compensated && h.extent >= kUnroll * width &&
                        choir::exprSize(s.value) <= kUnrollNodes;
    const int64_t after_unroll = unroll ? h.extent % (kUnroll * width) : h.extent;
    const int64_t step = int64_t{kUnroll} * width;
    // One unrolled step: a vector into each of `into`'s accumulators.
    auto unrolledStep = [&](std::vector<Value>& into) {
      return [&]() -> absl::Status {
        for (int u = 0; u < kUnroll; ++u) {
          Mode copy = lanes;
          copy.offset = int64_t{u} * width;
          ACCY_RETURN_IF_ERROR(combineAt(copy, into[u]));
        }
        return absl::OkStatus();
      };
    };
    // A long floating sum is cascaded (docs/MATH_ACCURACY.md, "Sums"): its
    // unrolled steps are summed in blocks of kCascade into accumulators of
    // their own, which are added into the level above, blocks of blocks
    // likewise. Each chain of additions then holds at most kCascade terms
    // (the top level's at most kCascade too), where one chain over the loop
    // held all extent / step of them; the order depends on the extent and
    // the width alone, so the bits do not change with threads or addresses.
    const int64_t unrolled_steps = unroll ? h.extent / step : 0;
    int levels = 0;
    if (choir::cascades(s.combiner, dtype) && h.extent < (int64_t{1} << 31)) {
      for (int64_t span = kCascade; span < unrolled_steps; span *= kCascade) ++levels;
    }
    if (unroll && levels == 0) {
      const Index ulimit = self().constantIndex(h.extent - (step - 1));
      ACCY_RETURN_IF_ERROR(counted(i, ulimit, step, unrolledStep(vacc)));
    } else if (unroll) {
      std::vector<std::vector<Value>> level(levels);
      for (std::vector<Value>& set : level) {
        for (int u = 0; u < kUnroll; ++u) set.push_back(self().accumulator(s.combiner, dtype, true));
      }
      const Value zero = self().accumulator(s.combiner, dtype, true);  // never written
      const bool straight = choir::exprSize(s.value) <= kStraightNodes && !choir::exprIsExpensive(s.value);
      // `count` steps from the current i into `into`, in blocks of
      // kCascade^lev steps, each summed one level down.
      std::function<absl::Status(int, int64_t, std::vector<Value>&)> cascade =
          [&](int lev, int64_t count, std::vector<Value>& into) -> absl::Status {
        if (lev == 0) return counted(i, self().limitLess(i, -count * step), step, unrolledStep(into));
        int64_t block = 1;
        for (int k = 0; k < lev; ++k) block *= kCascade;
        std::vector<Value>& below = level[lev - 1];
        auto oneBlock = [&](int64_t steps) -> absl::Status {
          for (Value& a : below) self().assign(dtype, a, zero, true);
          ACCY_RETURN_IF_ERROR(cascade(lev - 1, steps, below));
          for (int u = 0; u < kUnroll; ++u) combine(s.combiner, dtype, into[u], below[u], true);
          return absl::OkStatus();
        };
        const int64_t full = count / block;
        if (lev == 1 && full > 0 && straight) {
          // A light value's blocks of kCascade steps written out, one loop
          // step a block: no loop of kCascade iterations to leave (its exit
          // mispredicted every block cost 8% of a bandwidth-bound sum).
          const Index end = self().limitLess(i, -full * block * step);
          ACCY_RETURN_IF_ERROR(counted(i, end, block * step, [&]() -> absl::Status {
            for (Value& a : below) self().assign(dtype, a, zero, true);
            for (int64_t k = 0; k < block; ++k) {
              for (int u = 0; u < kUnroll; ++u) {
                Mode copy = lanes;
                copy.offset = k * step + int64_t{u} * width;
                ACCY_RETURN_IF_ERROR(combineAt(copy, below[u]));
              }
            }
            for (int u = 0; u < kUnroll; ++u) combine(s.combiner, dtype, into[u], below[u], true);
            return absl::OkStatus();
          }));
        } else if (full > 0) {
          const Index b = self().newIndex();
          self().zeroIndex(b);
          ACCY_RETURN_IF_ERROR(counted(b, self().constantIndex(full), 1, [&] { return oneBlock(block); }));
        }
        if (const int64_t rest = count % block; rest > 0) ACCY_RETURN_IF_ERROR(oneBlock(rest));
        return absl::OkStatus();
      };
      ACCY_RETURN_IF_ERROR(cascade(levels, unrolled_steps, vacc));
    }
    if (vectorized && after_unroll >= width) {
      const Index vlimit = self().constantIndex(h.extent - (width - 1));
      ACCY_RETURN_IF_ERROR(counted(i, vlimit, width, [&] { return combineAt(lanes, vacc[0]); }));
    }
    if (!vectorized || h.extent % width != 0) {
      ACCY_RETURN_IF_ERROR(
          counted(i, self().constantIndex(h.extent), 1, [&] { return combineAt(scalar, acc); }));
    }
    self().endReduceBody();
    endRows();
    for (size_t d = open.size(); d-- > 0;) self().closeLoop(open[d]);
    if (vectorized && compensated) {
      // Each lane's sum added to the tail's, compensated (the lanes of an
      // alternating-sign sum are large and cancel), their errors beside.
      for (const Value& lane : self().laneValues(dtype, vacc[0])) addCompensated(dtype, acc, error, lane, false);
      self().combineLanes(s.combiner, dtype, verror, error);
    } else if (vectorized) {
      for (int u = 1; u < kUnroll; ++u) combine(s.combiner, dtype, vacc[0], vacc[u], true);
      self().combineLanes(s.combiner, dtype, vacc[0], acc);
    }
    if (compensated) combine(s.combiner, dtype, acc, error, false);
    Value result = acc;
    if (s.mean_count != 0 || (dtype == choir::DType::bool_ && s.combiner == choir::OpCode::kAdd)) {
      const Mode point;
      auto p = self().prims(point);
      OpSemantics<decltype(p)> sem(p, self().emitterName());
      if (s.mean_count != 0) {
        result = sem.binary(choir::OpCode::kDiv, dtype, acc, p.constant(dtype, static_cast<double>(s.mean_count)));
      } else {  // a count of trues is true when not 0
        result = p.compare(Cmp::kNe, choir::DType::i32, acc, p.constant(choir::DType::i32, 0));
      }
      ACCY_RETURN_IF_ERROR(p.status());
      ACCY_RETURN_IF_ERROR(sem.status());
    }
    cse_.clear();
    self().storeValue(s.buffer, s.index, result, Mode{});
    return absl::OkStatus();
  }

  // acc = acc + x, its rounding error added to `error` (OpSemantics::twoSum).
  void addCompensated(choir::DType dtype, Value& acc, Value& error, const Value& x, bool vector) {
    Mode mode;
    mode.vector = vector;
    auto p = self().prims(mode);
    const auto [sum, e] = OpSemantics<decltype(p)>(p, self().emitterName()).twoSum(dtype, acc, x);
    self().assign(dtype, acc, sum, vector);
    combine(choir::OpCode::kAdd, dtype, error, e, vector);
  }

  // acc = combiner(acc, x), in acc's variable (a loop-carried accumulator).
  void combine(choir::OpCode combiner, choir::DType dtype, Value& acc, const Value& x, bool vector) {
    Mode mode;
    mode.vector = vector;
    auto p = self().prims(mode);
    const Value r = OpSemantics<decltype(p)>(p, self().emitterName()).binary(combiner, dtype, acc, x);
    self().assign(dtype, acc, r, vector);
  }

  absl::StatusOr<Value> expr(const choir::ExprRef& e, const Mode& mode) {
    const Mode modes[1] = {mode};
    ACCY_ASSIGN_OR_RETURN(const Values v, exprs(e, modes));
    return v[0];
  }

  // The values of `e` at each of `modes`: one point, or copies of one
  // vector step at successive offsets. The copies are evaluated op by op
  // in lockstep, so that their instructions interleave and the core
  // overlaps their dependency chains. A target's primitives depend only on
  // whether a mode is a vector one, so one set serves every copy.
  absl::StatusOr<Values> exprs(const choir::ExprRef& e, std::span<const Mode> modes) {
    Values v;
    ACCY_RETURN_IF_ERROR(exprsInto(e, modes, v));
    return v;
  }
  // exprs into `v`. This function is the recursive walk only, and its frame
  // holds little: operands' values are written in place into the heap
  // (pushExprs), and what a node computes from them lives in the
  // out-of-line helpers below. An expression thousands of operations deep
  // (one fused kernel of a long chain) nests as many levels of it.
  absl::Status exprsInto(const choir::ExprRef& e, std::span<const Mode> modes, Values& v) {
    choir::countWork();  // a caller's stop check is asked as emitting goes (choir/work.h)
    const int key = numbers_.number(e);
    if (auto it = cse_.find(key); it != cse_.end()) {
      v = it->second;
      return absl::OkStatus();
    }
    if (expr_depth_ >= kMaxExprDepth) {
      return unimplemented(strCat("an expression more than ", kMaxExprDepth,
                                  " operations deep in one kernel (fusion makes at most choir::kMaxFusedNodes nodes a value)"));
    }
    const DepthScope depth(expr_depth_);
    std::vector<Values> args;
    switch (e->kind) {
      case choir::ExprKind::kLoad:
        if (!e->bound.empty() && !hoisted(e->bound) && modes[0].vector) {
          // Positions that change along the loop (a take along the vector
          // axis): the bound values in lanes, the lanes gathered.
          for (const choir::ExprRef& a : e->args) ACCY_RETURN_IF_ERROR(pushExprs(a, modes, args));
          ACCY_RETURN_IF_ERROR(gatheredValues(*e, args, modes, v));
          break;
        }
        ACCY_RETURN_IF_ERROR(loadValues(e, key, modes, v));
        break;
      case choir::ExprKind::kConstant:
      case choir::ExprKind::kIndex:
        ACCY_RETURN_IF_ERROR(leafValues(e, modes, v));
        break;
      case choir::ExprKind::kOp: {
        // add(mul(a, b), c) in floating point: one fused multiply-add where
        // the target contracts (one rounding instead of two).
        if (const int side = contractedSide(e); side >= 0) {
          const choir::ExprRef& m = e->args[side];
          ACCY_RETURN_IF_ERROR(pushExprs(m->args[0], modes, args));
          ACCY_RETURN_IF_ERROR(pushExprs(m->args[1], modes, args));
          ACCY_RETURN_IF_ERROR(pushExprs(e->args[1 - side], modes, args));
          multiplyAddValues(e->dtype, args, modes, v);
          cse_[key] = v;
          return absl::OkStatus();
        }
        args.reserve(e->args.size());
        for (const choir::ExprRef& a : e->args) {
          // A condition the same in every lane (vectorize.h): evaluated at
          // the point, apart from the lanes' values, then spread (once for
          // every copy).
          if (modes[0].vector && e->op == choir::OpCode::kWhere && args.empty() && spreadsUniformly() &&
              choir::invariantIn(m_, a, modes[0].inner_var)) {
            ACCY_RETURN_IF_ERROR(pushUniformMask(a, modes.size(), args));
            continue;
          }
          ACCY_RETURN_IF_ERROR(pushExprs(a, modes, args));
        }
        ACCY_RETURN_IF_ERROR(opValues(e, args, modes, v));
        break;
      }
    }
    cse_[key] = v;
    return absl::OkStatus();
  }

  // The walk's recursion: the values of operand `a`, appended to `into`
  // (which only this call changes until it returns).
  absl::Status pushExprs(const choir::ExprRef& a, std::span<const Mode> modes, std::vector<Values>& into) {
    into.emplace_back();
    return exprsInto(a, modes, into.back());
  }
  static constexpr bool spreadsUniformly() {
    return requires(T& t, const Value& x) { t.uniformMask(x); };
  }
  [[gnu::noinline]] absl::Status pushUniformMask(const choir::ExprRef& a, size_t n, std::vector<Values>& into) {
    const absl::StatusOr<Value> c = apartFromCse([&] { return expr(a, Mode{}); });
    if (!c.ok()) return c.status();
    if constexpr (spreadsUniformly()) into.push_back(Values(n, self().uniformMask(*c)));
    return absl::OkStatus();
  }
  struct DepthScope {
    explicit DepthScope(int& d) : depth(d) { ++depth; }
    ~DepthScope() { --depth; }
    int& depth;
  };

  // The pieces of exprs that compute a node from its operands' values.
  // A load: at each copy's position, or at positions read from data (one
  // point; the vectorizer leaves such loads scalar).
  [[gnu::noinline]] absl::Status loadValues(const choir::ExprRef& e, int key, std::span<const Mode> modes, Values& v) {
    const Mode& mode = modes[0];
    const size_t n = modes.size();
    v.assign(n, Value());
    if (!e->bound.empty() && !hoisted(e->bound)) {
      // Variables bound to clamped indices read from data join the loop
      // variables for this load's address.
      if (mode.vector) return unimplemented("a load at data-dependent positions in a vector loop");
      if (n > 1) return unimplemented("a load at data-dependent positions in copies of a step");
      ACCY_RETURN_IF_ERROR(bindData(e->bound, e->args, mode));
      v[0] = self().scalarLoad(*e, mode);
      unbindData(e->bound);
      return absl::OkStatus();
    }
    for (size_t c = 0; c < n; ++c) {
      v[c] = mode.vector ? self().vectorLoad(*e, key, modes[c]) : self().scalarLoad(*e, modes[c]);
    }
    return absl::OkStatus();
  }
  [[gnu::noinline]] absl::Status gatheredValues(const choir::Expr& e, const std::vector<Values>& args,
                                               std::span<const Mode> modes, Values& v) {
    if constexpr (requires(T& t, const std::vector<Value>& b) { t.gatherLoad(e, b, modes[0]); }) {
      v.assign(modes.size(), Value());
      for (size_t c = 0; c < modes.size(); ++c) {
        std::vector<Value> lanes;
        for (const Values& av : args) lanes.push_back(av[c]);
        v[c] = self().gatherLoad(e, lanes, modes[c]);
      }
      return absl::OkStatus();
    } else {
      return unimplemented("a load at data-dependent positions in a vector loop");
    }
  }
  [[gnu::noinline]] absl::Status leafValues(const choir::ExprRef& e, std::span<const Mode> modes, Values& v) {
    const Mode& mode = modes[0];
    const size_t n = modes.size();
    v.assign(n, Value());
    if (e->kind == choir::ExprKind::kConstant) {
      auto p = self().prims(mode);
      v.assign(n, p.constant(e->dtype, e->constant));  // values are only read
      return p.status();
    }
    if (mode.vector) {
      if constexpr (requires(T& t) { t.indexLanes(e->index[0], e->dtype, mode); }) {
        for (size_t c = 0; c < n; ++c) v[c] = self().indexLanes(e->index[0], e->dtype, modes[c]);
        return absl::OkStatus();
      } else {
        return unimplemented("index values in a vector loop");
      }
    }
    const Value iv = self().indexValue(e->index[0]);
    const Mode point;
    auto p = self().prims(point);
    OpSemantics<decltype(p)> sem(p, self().emitterName());
    v.assign(n, sem.convert(iv, self().indexDType(), e->dtype));
    ACCY_RETURN_IF_ERROR(p.status());
    return sem.status();
  }
  // The operand of add(mul(a, b), c) that is the product, when the target
  // contracts it into one multiply-add (a product already computed is
  // reused instead); -1 otherwise.
  int contractedSide(const choir::ExprRef& e) {
    if constexpr (requires(T& t, const Value& x, const Mode& md) { t.multiplyAdd(e->dtype, x, x, x, md); }) {
      if (e->op != choir::OpCode::kAdd || !self().contractsMultiplyAdd(e->dtype)) return -1;
      for (int side = 0; side < 2; ++side) {
        const choir::ExprRef& m = e->args[side];
        if (m->kind != choir::ExprKind::kOp || m->op != choir::OpCode::kMul) continue;
        if (cse_.contains(numbers_.number(m))) continue;
        return side;
      }
    }
    return -1;
  }
  // args: a, b and c of a * b + c.
  [[gnu::noinline]] void multiplyAddValues(choir::DType dtype, const std::vector<Values>& args,
                                           std::span<const Mode> modes, Values& v) {
    v.assign(modes.size(), Value());
    if constexpr (requires(T& t, const Value& x, const Mode& md) { t.multiplyAdd(dtype, x, x, x, md); }) {
      for (size_t k = 0; k < modes.size(); ++k) {
        v[k] = self().multiplyAdd(dtype, args[0][k], args[1][k], args[2][k], modes[k]);
      }
    }
  }
  [[gnu::noinline]] absl::Status opValues(const choir::ExprRef& e, const std::vector<Values>& args,
                                         std::span<const Mode> modes, Values& v) {
    const Mode& mode = modes[0];
    const size_t n = modes.size();
    v.assign(n, Value());
    auto p = self().prims(mode);
    OpSemantics<decltype(p)> sem(p, self().emitterName());
    if (e->op == choir::OpCode::kThreefryWord0 || e->op == choir::OpCode::kThreefryWord1) {
      // One encryption gives both words: the other is kept for this
      // point under its own key, so a sampler reading both pays once.
      std::vector<std::array<Value, 4>> in(n);
      for (size_t c = 0; c < n; ++c) in[c] = {args[0][c], args[1][c], args[2][c], args[3][c]};
      const std::vector<std::pair<Value, Value>> words = sem.threefryWords(in);
      const bool second = e->op == choir::OpCode::kThreefryWord1;
      Values other(n);
      for (size_t c = 0; c < n; ++c) {
        v[c] = second ? words[c].second : words[c].first;
        other[c] = second ? words[c].first : words[c].second;
      }
      cse_[numbers_.otherThreefryWord(e)] = other;
    } else if ((e->op == choir::OpCode::kShiftLeft || e->op == choir::OpCode::kShiftRight) &&
               e->args[1]->kind == choir::ExprKind::kConstant) {
      // A count known now: a shift by an immediate (the only form a
      // vector loop has: vectorize.h).
      for (size_t c = 0; c < n; ++c) {
        v[c] = sem.shiftByConstant(e->op == choir::OpCode::kShiftLeft, e->dtype, args[0][c], e->args[1]->constant);
      }
    } else {
      std::vector<Value> at(args.size());
      for (size_t c = 0; c < n; ++c) {
        for (size_t j = 0; j < args.size(); ++j) at[j] = args[j][c];
        v[c] = sem.op(e->op, e->dtype, e->args.empty() ? e->dtype : e->args[0]->dtype, at);
      }
    }
    ACCY_RETURN_IF_ERROR(p.status());
    return sem.status();
  }

  // Starts counter `i` of loop `l`: at this launch's share when `parallel`,
  // else at 0. Returns its limit.
  Index startLoop(const choir::Stmt& l, Index i, bool parallel) {
    startIndex(i, parallel);
    return loopLimit(l, parallel);
  }
  void startIndex(Index i, bool parallel) {
    if (parallel) {
      self().setIndex(i, self().begin());
    } else {
      self().zeroIndex(i);
    }
  }
  Index loopLimit(const choir::Stmt& l, bool parallel) {
    return parallel ? self().end() : self().constantIndex(l.loop.extent);
  }

  // Row bases: base + (flat index without the inner variable) * size,
  // computed before an innermost loop for every access in its body and
  // reused for each access inside it.
  void beginRows() {
    rows_.clear();
    rows_active_ = true;
  }
  void endRows() {
    rows_active_ = false;
    rows_.clear();
    forgetHoisted();
  }
  void forgetHoisted() {
    for (int var : hoisted_) vars_.erase(var);
    hoisted_.clear();
  }
  bool hoisted(const std::vector<int>& bound) const {
    for (int var : bound) {
      if (!hoisted_.contains(var)) return false;
    }
    return true;
  }
  // A load at data-dependent positions that do not change along the
  // innermost loop (an embedding row read along its features): its bound
  // values are computed once, before the loop, and its row base is cached
  // like any other; the loop then runs in vector lanes.
  void hoistBound(const std::vector<int>& vars, const std::vector<choir::ExprRef>& values, int inner_var) {
    if (inner_var < 0 || hoisted(vars)) return;
    for (const choir::ExprRef& a : values) {
      if (!choir::invariantIn(m_, a, inner_var)) return;
    }
    absl::StatusOr<std::vector<Index>> bound = pointIndices(values);
    if (!bound.ok()) return;  // then emitted point by point, which reports it
    for (size_t j = 0; j < vars.size(); ++j) {
      vars_[vars[j]] = (*bound)[j];
      hoisted_.insert(vars[j]);
    }
  }
  // `values` (clamped indices) evaluated at the current point, as indices.
  absl::StatusOr<std::vector<Index>> pointIndices(const std::vector<choir::ExprRef>& values) {
    std::vector<Index> out;
    for (const choir::ExprRef& value : values) {
      ACCY_ASSIGN_OR_RETURN(const Value b, expr(value, Mode{}));
      auto p = self().prims(Mode{});
      OpSemantics<decltype(p)> sem(p, self().emitterName());
      const Value as_index = sem.convert(b, value->dtype, self().indexDType());
      ACCY_RETURN_IF_ERROR(p.status());
      ACCY_RETURN_IF_ERROR(sem.status());
      out.push_back(self().valueIndex(as_index));
    }
    return out;
  }

  // Rows at data-dependent positions that the innermost loop `l` walks (an
  // embedding gather's rows, a scatter's): the row the enclosing loop reaches
  // kPrefetchBytes of rows later is prefetched before this one is copied. A
  // random row misses every cache, and the core's own window reaches only a
  // few rows ahead. The look-ahead point is clamped to the loop's last
  // iteration, so the indices read to find it stay inside their buffer.
  static constexpr int64_t kPrefetchBytes = 8192;
  static constexpr int64_t kPrefetchMaxRows = 64;
  absl::Status prefetchRows(const choir::Stmt& l) {
    if (open_.empty()) return absl::OkStatus();
    const Around outer = open_.back();
    struct Row {
      int buffer;
      const std::vector<choir::Affine>* index;
      const std::vector<int>* vars;
      const std::vector<choir::ExprRef>* values;
      // A guard on the row that depends on the nest's position (a range of
      // rows per thread: passes/parallelize.h, ScatterSplit::kRanges): a
      // row outside it is another thread's, not prefetched here.
      const choir::ExprRef* guard = nullptr;
    };
    std::vector<Row> rows;
    auto consider = [&](int buffer, const std::vector<choir::Affine>& index, const std::vector<int>& vars,
                        const std::vector<choir::ExprRef>& values) {
      if (vars.empty() || !hoisted(vars)) return;
      bool moves = false;  // the row changes with the enclosing loop
      for (const choir::ExprRef& v : values) moves = moves || !choir::invariantIn(m_, v, outer.var);
      for (const Row& r : rows) {
        if (r.buffer == buffer && *r.index == index && *r.values == values) return;  // already there
      }
      if (moves) rows.push_back(Row{buffer, &index, &vars, &values});
    };
    const choir::Stmt& st = l.body[0];
    consider(st.buffer, st.index, st.bound, st.args);
    if (!rows.empty() && st.guard && choir::invariantIn(m_, st.guard, l.loop.var)) {
      bool positional = false;
      choir::visitExpr(st.guard, [&](const choir::Expr& x) { positional = positional || x.kind == choir::ExprKind::kIndex; });
      if (positional) rows.back().guard = &st.guard;
    }
    choir::visitExpr(st.value, [&](const choir::Expr& x) {
      if (x.kind == choir::ExprKind::kLoad) consider(x.buffer, x.index, x.bound, x.args);
    });
    if (rows.empty()) return absl::OkStatus();
    const std::map<int, Index> saved = vars_;
    const bool rows_were_active = rows_active_;
    rows_active_ = false;  // the cached row bases are this iteration's
    absl::Status status;
    for (const Row& r : rows) {
      const auto [rest, c] = splitIndex(r.buffer, *r.index, l.loop.var);
      if (c < 0) continue;
      const int64_t bytes = ((l.loop.extent - 1) * c + 1) * tensor::dtypeSize(m_.buffers[r.buffer].dtype);
      const int64_t ahead = std::clamp<int64_t>(kPrefetchBytes / bytes, 1, kPrefetchMaxRows);
      vars_[outer.var] = self().indexAhead(outer.i, outer.limit, ahead);
      std::optional<Value> in_guard;
      const absl::StatusOr<std::vector<Index>> at = apartFromCse([&]() -> absl::StatusOr<std::vector<Index>> {
        ACCY_ASSIGN_OR_RETURN(std::vector<Index> values, pointIndices(*r.values));
        if (r.guard != nullptr) {
          for (size_t j = 0; j < r.vars->size(); ++j) vars_[(*r.vars)[j]] = values[j];
          ACCY_ASSIGN_OR_RETURN(in_guard, expr(*r.guard, Mode{}));
        }
        return values;
      });
      if (!at.ok()) {
        status = at.status();
        break;
      }
      for (size_t j = 0; j < r.vars->size(); ++j) vars_[(*r.vars)[j]] = (*at)[j];
      std::optional<typename T::OpenGuard> around;
      if (in_guard) around = self().beginGuard(*in_guard);
      self().prefetch(self().computeRowBase(r.buffer, rest), bytes);
      if (around) self().endGuard(*around);
      vars_ = saved;
    }
    vars_ = saved;
    rows_active_ = rows_were_active;
    return status;
  }
  // fn() with an empty value cache (values at another point, or in another
  // mode, than the current one's), the current cache kept for after.
  template <class F>
  auto apartFromCse(F&& fn) {
    absl::flat_hash_map<int, Values> kept;
    kept.swap(cse_);
    auto result = fn();
    cse_.swap(kept);
    return result;
  }
  Index rowBase(int buffer, const choir::Affine& rest) {
    for (const choir::Affine::Term& t : rest.terms) {  // changes from point to point
      if (data_vars_.contains(t.var)) return self().computeRowBase(buffer, rest);
    }
    if (rows_active_) {
      if (auto it = rows_.find(RowKey{buffer, rest}); it != rows_.end()) return it->second;
    }
    const Index r = self().computeRowBase(buffer, rest);
    if (rows_active_) rows_.emplace(RowKey{buffer, rest}, r);
    return r;
  }
  // The flat index of buffer[index] split into the inner variable's
  // coefficient and the rest (the whole index when there is no inner
  // variable).
  std::pair<choir::Affine, int64_t> splitIndex(int buffer, const std::vector<choir::Affine>& index,
                                               int inner_var) const {
    choir::Affine flat = choir::flatIndex(m_.buffers[buffer], index);
    if (inner_var < 0) return {std::move(flat), 0};
    const int64_t c = flat.coeffOf(inner_var);
    return {choir::add(flat, choir::Affine::var(inner_var, -c)), c};
  }
  // `unbound`: variables bound point by point (a store's, not hoisted):
  // loads that use them get no row base here.
  void prepareRows(const choir::ExprRef& e, int inner_var, const std::vector<int>& unbound = {}) {
    choir::visitExpr(e, [&](const choir::Expr& x) {
      if (x.kind != choir::ExprKind::kLoad) return;
      for (const choir::Affine& a : x.index) {
        for (int var : unbound) {
          if (a.uses(var)) return;
        }
      }
      if (!x.bound.empty()) hoistBound(x.bound, x.args, inner_var);
      if (hoisted(x.bound)) rowBase(x.buffer, splitIndex(x.buffer, x.index, inner_var).first);
    });
  }
  void prepareRows(const choir::Stmt& s, int inner_var) {
    if (!s.bound.empty()) hoistBound(s.bound, s.args, inner_var);
    // Positions read from data that change from point to point: no row
    // base for what uses them.
    const std::vector<int> unbound = hoisted(s.bound) ? std::vector<int>{} : s.bound;
    if (s.value) prepareRows(s.value, inner_var, unbound);
    if (s.kind == choir::StmtKind::kStore && unbound.empty()) {
      rowBase(s.buffer, splitIndex(s.buffer, s.index, inner_var).first);
    }
  }

  absl::Status unimplemented(std::string_view what) {
    return makeError(ErrorKind::kUnimplemented, strCat(self().emitterName(), ": ", what));
  }

  const choir::Module& m_;
  std::map<int, Index> vars_;  // loop variable -> its counter
  absl::flat_hash_map<RowKey, Index, absl::Hash<RowKey>> rows_;  // valid inside one innermost loop
  int expr_depth_ = 0;  // exprs' nesting
  std::set<int> data_vars_;  // variables a load being emitted binds to data
  std::set<int> hoisted_;    // bound variables computed before the innermost loop
  struct Around {  // an open loop around the statement being emitted
    int var;
    Index i, limit;
  };
  std::vector<Around> open_;
  bool rows_active_ = false;
  const choir::Stmt* guard_outside_ = nullptr;  // the store whose guard is tested around its loop
  choir::ValueNumbering numbers_;         // the CSE keys, for the whole module
  absl::flat_hash_map<int, Values> cse_;  // one evaluation point (its copies)

 private:
  T& self() { return static_cast<T&>(*this); }
};

}  // namespace accy::codegen::cpu

#endif  // ACCY_COMPILER_CODEGEN_CPU_LOOP_WALKER_H_
