#include "compiler/choir/lower.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/rewrite.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::choir {

// Reductions over at most this many points lower as their fold written out
// (a store), not as a reduction.
constexpr int64_t kUnrolledReducePoints = 9;
namespace {

using tensor::Node;
using tensor::OpCategory;
using IndexMap = std::map<std::string, Affine, std::less<>>;

bool isView(const Node& n) {
  switch (n.op) {
    case OpCode::kTranspose: case OpCode::kRename: case OpCode::kBroadcast: case OpCode::kSlice:
    case OpCode::kSplit: case OpCode::kPad: case OpCode::kWindow: case OpCode::kTake:
#define ACCY_CASES_Leaf 1
#include "compiler/tensor/op_cases.inc"
      return true;
    case OpCode::kMerge: case OpCode::kConcat: case OpCode::kScatterAdd:
#define ACCY_CASES_ALL
#define ACCY_CASES_Leaf 0
#define ACCY_CASES_Layout 0
#define ACCY_CASES_Index 0
#include "compiler/tensor/op_cases.inc"
      return false;
  }
  return false;  // not reached: the switch covers every op
}

std::vector<int64_t> shapeOf(const Node& n) {
  std::vector<int64_t> s;
  for (const tensor::Axis& a : n.axes) s.push_back(a.extent);
  return s;
}

OpCode combinerOf(OpCode reduce) {
  switch (reduce) {
    case OpCode::kReduceMax:
      return OpCode::kMax;
    case OpCode::kReduceMin:
      return OpCode::kMin;
    case OpCode::kReduceProd:
      return OpCode::kMul;
    case OpCode::kReduceSum: case OpCode::kReduceMean:
#define ACCY_CASES_ALL
#define ACCY_CASES_Reduce 0
#include "compiler/tensor/op_cases.inc"
      return OpCode::kAdd;
  }
  return OpCode::kAdd;  // not reached: the switch covers every op
}

class Lowering {
 public:
  Lowering(const tensor::Program& p, const LowerOptions& o) : p_(p), o_(o) {}

  absl::StatusOr<Module> run() {
    ACCY_RETURN_IF_ERROR(tensor::validateProgram(p_));
    m_.name = p_.name;
    buffer_of_.assign(p_.nodes.size(), -1);
    markLive();
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      const Node& n = p_.nodes[p_.inputs[i]];
      buffer_of_[p_.inputs[i]] = addBuffer(strCat("in", i), n, BufferRole::kInput, int(i));
    }
    std::vector<int> output_buffers;
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      const int32_t id = p_.outputs[k];
      const int b = addBuffer(strCat("out", k), p_.nodes[id], BufferRole::kOutput, int(k));
      output_buffers.push_back(b);
      if (buffer_of_[id] < 0 && !isView(p_.nodes[id])) buffer_of_[id] = b;
    }
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      const Node& n = p_.nodes[i];
      if (!live_[i] || isView(n)) continue;
      if (buffer_of_[i] < 0) buffer_of_[i] = addBuffer(strCat("t", i), n, BufferRole::kTemp, -1);
      ACCY_RETURN_IF_ERROR(lowerNode(static_cast<int32_t>(i)));
    }
    // Outputs that are views, or that another output buffer already holds.
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      const int32_t id = p_.outputs[k];
      if (buffer_of_[id] == output_buffers[k]) continue;
      const Node& n = p_.nodes[id];
      IndexMap idx;
      std::vector<LoopHeader> loops = newLoops(n.axes, idx);
      emitNest(strCat("k_out", k, "_copy"), loops,
               Stmt::store(output_buffers[k], indexFor(n.axes, idx), access(id, idx)));
    }
    return std::move(m_);
  }

 private:
  void markLive() {
    live_.assign(p_.nodes.size(), false);
    for (int32_t id : p_.outputs) live_[id] = true;
    for (size_t i = p_.nodes.size(); i-- > 0;) {
      if (!live_[i]) continue;
      for (int32_t o : p_.nodes[i].operands) live_[o] = true;
    }
  }

  int addBuffer(std::string name, const Node& n, BufferRole role, int io) {
    Buffer b;
    b.name = std::move(name);
    b.dtype = n.dtype;
    b.shape = shapeOf(n);
    b.role = role;
    b.io_index = io;
    m_.buffers.push_back(std::move(b));
    return static_cast<int>(m_.buffers.size() - 1);
  }

  // A fresh variable per axis, recorded in `idx` by axis name.
  std::vector<LoopHeader> newLoops(const std::vector<tensor::Axis>& axes, IndexMap& idx) {
    std::vector<LoopHeader> loops;
    for (const tensor::Axis& a : axes) {
      LoopHeader h;
      h.var = m_.newVar();
      h.extent = a.extent;
      idx[a.name] = Affine::var(h.var);
      loops.push_back(h);
    }
    return loops;
  }

  static std::vector<Affine> indexFor(const std::vector<tensor::Axis>& axes, const IndexMap& idx) {
    std::vector<Affine> out;
    for (const tensor::Axis& a : axes) out.push_back(idx.find(a.name)->second);
    return out;
  }

  // Wraps `inner` in `loops` (outermost first) and appends the kernel.
  void emitNest(std::string name, const std::vector<LoopHeader>& loops, Stmt inner) {
    Stmt s = std::move(inner);
    for (size_t i = loops.size(); i-- > 0;) s = Stmt::loopOf(loops[i], {std::move(s)});
    m_.kernels.push_back(Kernel{std::move(name), {std::move(s)}});
  }

  // The scalar expression for element `idx` (affine per axis name) of node
  // `id`: a load for materialized nodes, index arithmetic through views.
  ExprRef access(int32_t id, const IndexMap& idx) {
    const Node& n = p_.nodes[id];
    if (buffer_of_[id] >= 0) return makeLoad(n.dtype, buffer_of_[id], indexFor(n.axes, idx));
    auto at = [&](const std::string& name) { return idx.find(name)->second; };
    const int32_t src = n.operands.empty() ? -1 : n.operands[0];
    IndexMap inner;
    switch (n.op) {
      case OpCode::kConstant:
        // The value the evaluator gives it: a NaN or out-of-range integer
        // constant converted as a cast converts it (NaN -> 0, saturated),
        // never a double that no integer holds.
        return makeConstant(n.dtype, tensor::convertValue(n.scalar, DType::f64, n.dtype));
      case OpCode::kIota:
        return makeIndex(n.dtype, at(n.names[0]));
      case OpCode::kTranspose:
      case OpCode::kBroadcast:
        for (const tensor::Axis& a : p_.nodes[src].axes) inner[a.name] = at(a.name);
        return access(src, inner);
      case OpCode::kRename:
        for (const tensor::Axis& a : p_.nodes[src].axes) {
          inner[a.name] = at(a.name == n.names[0] ? n.names[1] : a.name);
        }
        return access(src, inner);
      case OpCode::kSlice: {
        // A step that takes one element is 1 here: any step >= 1 is valid,
        // and a huge one (2^62) would overflow the products of views of views.
        const int64_t step = tensor::axisExtent(n.axes, n.names[0]) == 1 ? 1 : n.ints[2];
        for (const tensor::Axis& a : p_.nodes[src].axes) {
          inner[a.name] = a.name == n.names[0]
                              ? add(Affine::constantOf(n.ints[0]), scale(at(a.name), step))
                              : at(a.name);
        }
        return access(src, inner);
      }
      case OpCode::kSplit:
        for (const tensor::Axis& a : p_.nodes[src].axes) {
          inner[a.name] = a.name == n.names[0]
                              ? add(scale(at(n.names[1]), n.ints[0]), at(n.names[2]))
                              : at(a.name);
        }
        return access(src, inner);
      case OpCode::kWindow: {
        // As a slice's step: a stride that gives one window, or a dilation
        // of a one-element window, is 1 here.
        const int64_t stride = tensor::axisExtent(n.axes, n.names[0]) == 1 ? 1 : n.ints[1];
        const int64_t dilation = n.ints[0] == 1 ? 1 : n.ints[2];
        for (const tensor::Axis& a : p_.nodes[src].axes) {
          inner[a.name] = a.name == n.names[0]
                              ? add(scale(at(a.name), stride), scale(at(n.names[1]), dilation))
                              : at(a.name);
        }
        return access(src, inner);
      }
      case OpCode::kPad: {
        // Inside [before, before + extent) the operand at the position
        // less `before`, clamped so the read stays inside whatever the
        // position; outside, the value.
        const std::string& axis = n.names[0];
        const int64_t before = n.ints[0];
        const int64_t extent = tensor::axisExtent(p_.nodes[src].axes, axis);
        const int v = m_.newVar();
        for (const tensor::Axis& a : p_.nodes[src].axes) inner[a.name] = a.name == axis ? Affine::var(v) : at(a.name);
        // Positions in i32 where the padded axis allows (targets without i64).
        const DType d = before + extent + n.ints[1] < (int64_t{1} << 31) ? DType::i32 : DType::i64;
        const ExprRef pos = makeIndex(d, at(axis));
        const ExprRef read =
            bindVar(access(src, inner), v, clampIndex(makeIndex(d, add(at(axis), Affine::constantOf(-before))),
                                                      extent - 1));
        const ExprRef value = makeConstant(n.dtype, tensor::convertValue(n.scalar, DType::f64, n.dtype));
        const ExprRef low = makeOp(OpCode::kGe, DType::bool_, {pos, makeConstant(d, double(before))});
        const ExprRef high = makeOp(OpCode::kLt, DType::bool_, {pos, makeConstant(d, double(before + extent))});
        return makeOp(OpCode::kWhere, n.dtype, {low, makeOp(OpCode::kWhere, n.dtype, {high, read, value}), value});
      }
      case OpCode::kTake: {
        // The operand at the index read from `indices`, clamped.
        const std::string& axis = n.names[0];
        const int32_t ind = n.operands[1];
        const int64_t last = tensor::axisExtent(p_.nodes[src].axes, axis) - 1;
        if (p_.nodes[ind].op == OpCode::kConstant) {
          // A constant index: the clamped position is known, a plain read
          // (equal reads then share their value numbers).
          const Node& k = p_.nodes[ind];
          const double c =
              std::clamp(tensor::convertValue(k.scalar, DType::f64, k.dtype), 0.0, static_cast<double>(last));
          for (const tensor::Axis& a : p_.nodes[src].axes) {
            inner[a.name] = a.name == axis ? Affine::constantOf(static_cast<int64_t>(c)) : at(a.name);
          }
          return access(src, inner);
        }
        const ExprRef index = clampIndex(access(ind, restrictTo(p_.nodes[ind].axes, idx)), last);
        const int v = m_.newVar();
        for (const tensor::Axis& a : p_.nodes[src].axes) inner[a.name] = a.name == axis ? Affine::var(v) : at(a.name);
        return bindVar(access(src, inner), v, index);
      }
      case OpCode::kInput: case OpCode::kMerge: case OpCode::kConcat: case OpCode::kScatterAdd:
#define ACCY_CASES_ALL
#define ACCY_CASES_Leaf 0
#define ACCY_CASES_Layout 0
#define ACCY_CASES_Index 0
#include "compiler/tensor/op_cases.inc"
        break;
    }
    // Unreachable for validated programs: every other node has a buffer.
    return makeConstant(n.dtype, 0);
  }

  // `idx` restricted to `axes` (an operand's, all of them in idx).
  static IndexMap restrictTo(const std::vector<tensor::Axis>& axes, const IndexMap& idx) {
    IndexMap out;
    for (const tensor::Axis& a : axes) out[a.name] = idx.find(a.name)->second;
    return out;
  }

  // The last kernel of both scatter_add forms: out = x + sums.
  void emitXPlusSums(int32_t id, int sums, const std::string& name) {
    const Node& n = p_.nodes[id];
    IndexMap idx;
    auto loops = newLoops(n.axes, idx);
    emitNest(name, loops,
             Stmt::store(buffer_of_[id], indexFor(n.axes, idx),
                         makeOp(OpCode::kAdd, n.dtype,
                                {access(n.operands[0], idx), makeLoad(n.dtype, sums, indexFor(n.axes, idx))})));
  }

  // `e` with variable `v` bound to `value`: every load whose index uses v
  // binds it (bindLoad), and every index expression that uses it adds the
  // value instead. Loads inside bound values are rewritten first.
  ExprRef bindVar(const ExprRef& e, int v, const ExprRef& value) {
    switch (e->kind) {
      case ExprKind::kConstant:
        return e;
      case ExprKind::kIndex: {
        const int64_t c = e->index[0].coeffOf(v);
        if (c == 0) return e;
        const DType d = value->dtype;
        const ExprRef rest = makeIndex(d, add(e->index[0], Affine::var(v, -c)));
        const ExprRef scaled = makeOp(OpCode::kMul, d, {value, makeConstant(d, double(c))});
        ExprRef sum = makeOp(OpCode::kAdd, d, {rest, scaled});
        return e->dtype == d ? sum : makeOp(OpCode::kCast, e->dtype, {sum});
      }
      case ExprKind::kLoad:
      case ExprKind::kOp: {
        auto copy = std::make_shared<Expr>(*e);
        for (ExprRef& a : copy->args) a = bindVar(a, v, value);
        bool uses = false;
        if (e->kind == ExprKind::kLoad) {
          for (const Affine& a : e->index) uses = uses || a.uses(v);
        }
        if (uses) return bindLoad(copy, v, value);
        return copy;
      }
    }
    return e;
  }

  absl::Status lowerNode(int32_t id) {
    const Node& n = p_.nodes[id];
    const int out = buffer_of_[id];
    const std::string name = strCat("k", id, "_", tensor::opName(n.op));
    switch (tensor::opCategory(n.op)) {
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Compare:
      case OpCategory::Select:
      case OpCategory::Cast:
      case OpCategory::Random: {
        IndexMap idx;
        auto loops = newLoops(n.axes, idx);
        std::vector<ExprRef> args;
        for (int32_t o : n.operands) args.push_back(access(o, idx));
        emitNest(name, loops, Stmt::store(out, indexFor(n.axes, idx), makeOp(n.op, n.dtype, args)));
        return absl::OkStatus();
      }
      case OpCategory::Reduce:
      case OpCategory::Dot: {
        IndexMap idx;
        auto loops = newLoops(n.axes, idx);
        Stmt r;
        r.kind = StmtKind::kReduce;
        r.buffer = out;
        r.index = indexFor(n.axes, idx);
        if (n.op == OpCode::kDot) {
          const Node& a = p_.nodes[n.operands[0]];
          std::vector<tensor::Axis> k_axis;
          for (const tensor::Axis& ax : a.axes) {  // every contracted axis, in the left operand's order
            if (std::find(n.names.begin(), n.names.end(), ax.name) != n.names.end()) k_axis.push_back(ax);
          }
          r.domain = newLoops(k_axis, idx);
          r.value = makeOp(OpCode::kMul, n.dtype,
                           {access(n.operands[0], idx), access(n.operands[1], idx)});
          r.combiner = OpCode::kAdd;
          r.from_dot = true;
        } else {
          const Node& a = p_.nodes[n.operands[0]];
          std::vector<tensor::Axis> reduced;
          int64_t count = 1;
          for (const tensor::Axis& ax : a.axes) {
            if (std::find(n.names.begin(), n.names.end(), ax.name) != n.names.end()) {
              reduced.push_back(ax);
              count *= ax.extent;
            }
          }
          r.domain = newLoops(reduced, idx);
          r.value = access(n.operands[0], idx);
          r.combiner = combinerOf(n.op);
          r.mean_count = n.op == OpCode::kReduceMean ? count : 0;
          r.compensated = !n.ints.empty();  // ints = {1}: checked by shape inference
          if (count <= kUnrolledReducePoints && !r.compensated) {
            // A few points (a window's taps): the fold written out, in the
            // domain's row-major order as the reduction combines them, so
            // the output loop vectorizes and consumers fuse it like any
            // elementwise value.
            ExprRef acc;
            for (int64_t p = 0; p < count; ++p) {
              Substitution at;
              int64_t rest = p;
              for (size_t d = r.domain.size(); d-- > 0;) {
                at.set(r.domain[d].var, Affine::constantOf(rest % r.domain[d].extent));
                rest /= r.domain[d].extent;
              }
              ExprRef v = freshenBound(m_, substituteExpr(r.value, at));
              acc = acc ? makeOp(r.combiner, n.dtype, {acc, v}) : v;
            }
            if (r.mean_count != 0) acc = makeOp(OpCode::kDiv, n.dtype, {acc, makeConstant(n.dtype, double(count))});
            emitNest(name, loops, Stmt::store(out, r.index, acc));
            return absl::OkStatus();
          }
        }
        emitNest(name, loops, std::move(r));
        return absl::OkStatus();
      }
      case OpCategory::Layout:
        if (n.op == OpCode::kMerge) {
          const Node& a = p_.nodes[n.operands[0]];
          IndexMap idx;
          auto loops = newLoops(a.axes, idx);
          // merged index = row-major index over the listed axes.
          Affine merged;
          for (size_t p = 0; p + 1 < n.names.size(); ++p) {
            int64_t extent = 1;
            for (const tensor::Axis& ax : a.axes) {
              if (ax.name == n.names[p]) extent = ax.extent;
            }
            merged = add(scale(merged, extent), idx[n.names[p]]);
          }
          IndexMap out_idx = idx;
          out_idx[n.names.back()] = merged;
          emitNest(name, loops, Stmt::store(out, indexFor(n.axes, out_idx), access(n.operands[0], idx)));
          return absl::OkStatus();
        }
        if (n.op == OpCode::kConcat) {
          int64_t offset = 0;
          for (size_t piece = 0; piece < n.operands.size(); ++piece) {
            const Node& a = p_.nodes[n.operands[piece]];
            IndexMap idx;
            auto loops = newLoops(a.axes, idx);
            IndexMap out_idx = idx;
            out_idx[n.names[0]] = add(idx[n.names[0]], Affine::constantOf(offset));
            emitNest(strCat(name, "_", piece), loops,
                     Stmt::store(out, indexFor(n.axes, out_idx), access(n.operands[piece], idx)));
            for (const tensor::Axis& ax : a.axes) {
              if (ax.name == n.names[0]) offset += ax.extent;
            }
          }
          return absl::OkStatus();
        }
        break;
      case OpCategory::Index:
        if (n.op == OpCode::kScatterAdd) return lowerScatterAdd(id);
        break;
      case OpCategory::Leaf:
        break;
      case OpCategory::Loop:
        // Loops run as stages, each body compiled as a program of its own
        // (backends/staged_program.h; docs/SEMANTICS.md, "Loops"), never
        // as one module.
        return makeError(ErrorKind::kUnimplemented,
                         strCat("lowering: the ", tensor::opName(n.op), " %", id, " of ", p_.name,
                                " does not compile into one module; programs with loops run as stages "
                                "(CpuExecutable on x86-64, backends::StagedProgram on a device)"));
    }
    return makeError(ErrorKind::kUnimplemented,
                     strCat("lowering: no kernel form for ", tensor::opName(n.op)));
  }

  // scatter_add as a reduction: out[.., j, ..] = x[.., j, ..] + the sum,
  // from 0 in the row-major order of the indices' own axes, of the updates
  // whose index equals j (an index outside [0, extent) equals none: it is
  // dropped). Every element is one sequence of additions in a fixed order:
  // the same bits at every thread count. It reads each index once per
  // element of the axis: O(elements of x times the indices' own axes).
  absl::Status lowerScatterAdd(int32_t id) {
    const Node& n = p_.nodes[id];
    const std::string& axis = n.names[0];
    const Node& x = p_.nodes[n.operands[0]];
    const Node& ind = p_.nodes[n.operands[1]];
    std::vector<tensor::Axis> own;
    for (const tensor::Axis& a : ind.axes) {
      if (tensor::axisExtent(x.axes, a.name) == 0) own.push_back(a);
    }
    if (o_.serial_scatter && !own.empty()) return lowerScatterAddSerial(id, own);
    if (!own.empty() && o_.scatter_range_walk > 0) {
      const int64_t extent = tensor::axisExtent(x.axes, axis);
      int64_t columns = 1;
      for (const tensor::Axis& a : x.axes) {
        if (a.name != axis) columns *= a.extent;
      }
      int64_t walk = 1;
      for (const tensor::Axis& a : own) walk *= a.extent;
      const int64_t wanted = std::clamp<int64_t>((kScatterInvocations + columns - 1) / std::max<int64_t>(columns, 1), 1,
                                                 kMaxScatterRanges);
      // Fewer ranges than rows (else each row is its own range: the
      // reduction form's reads, and its walks may cooperate).
      if (wanted < extent && walk <= o_.scatter_range_walk) {
        const int64_t chunk = (extent + wanted - 1) / wanted;
        return lowerScatterAddRanges(id, own, (extent + chunk - 1) / chunk, chunk);
      }
    }
    IndexMap idx;
    auto loops = newLoops(n.axes, idx);
    auto domain = newLoops(own, idx);
    const ExprRef hit = makeOp(OpCode::kEq, DType::bool_,
                               {access(n.operands[1], restrictTo(ind.axes, idx)), makeIndex(ind.dtype, idx[axis])});
    const ExprRef update = makeOp(OpCode::kWhere, n.dtype,
                                  {hit, access(n.operands[2], restrictTo(p_.nodes[n.operands[2]].axes, idx)),
                                   makeConstant(n.dtype, 0)});
    const std::string name = strCat("k", id, "_scatter_add");
    if (domain.empty()) {  // one index per element: no sum
      emitNest(name, loops, Stmt::store(buffer_of_[id], indexFor(n.axes, idx),
                                        makeOp(OpCode::kAdd, n.dtype, {access(n.operands[0], idx), update})));
      return absl::OkStatus();
    }
    tensor::Node sums = n;
    const int t = addBuffer(strCat("t", id, "_sums"), sums, BufferRole::kTemp, -1);
    Stmt r;
    r.kind = StmtKind::kReduce;
    r.buffer = t;
    r.index = indexFor(n.axes, idx);
    r.domain = domain;
    r.value = update;
    r.combiner = OpCode::kAdd;
    emitNest(strCat(name, "_sums"), loops, std::move(r));
    emitXPlusSums(id, t, name);
    return absl::OkStatus();
  }

  // scatter_add with indices of their own axes, on a GPU: x's axis cut into
  // `ranges` ranges of `chunk` rows. One invocation per range and element
  // of x's other axes (the parallel loops) walks every index in order (the
  // indices' own axes, innermost: serial) and adds the updates whose index
  // falls in its range, a store guarded by that test: sums[j] += update,
  // into zeroed sums; then x + sums. Each element is written by one
  // invocation, its updates added in index order from +0 as in the other
  // forms: the same bits, no atomics. It reads ranges x columns x indices
  // indices, against the reduction form's extent x columns x indices.
  // Into a positive zero the output itself holds the sums (see below).
  absl::Status lowerScatterAddRanges(int32_t id, const std::vector<tensor::Axis>& own, int64_t ranges,
                                     int64_t chunk) {
    const Node& n = p_.nodes[id];
    const Node& x = p_.nodes[n.operands[0]];
    const auto [axis, ind, extent, name, into_zero] = scatterSite(id);
    const int sums = into_zero ? buffer_of_[id] : addBuffer(strCat("t", id, "_sums"), n, BufferRole::kTemp, -1);
    emitZero(strCat(name, "_zero"), sums, n.axes);
    IndexMap idx;
    LoopHeader range;
    range.var = m_.newVar();
    range.extent = ranges;
    std::vector<tensor::Axis> others;
    for (const tensor::Axis& a : x.axes) {
      if (a.name != axis) others.push_back(a);
    }
    std::vector<LoopHeader> loops = {range};
    for (const LoopHeader& h : newLoops(others, idx)) loops.push_back(h);
    for (const LoopHeader& h : newLoops(own, idx)) loops.push_back(h);
    const ExprRef raw = access(ind, restrictTo(p_.nodes[ind].axes, idx));
    const DType d = raw->dtype;
    const ExprRef no = makeConstant(DType::bool_, 0);
    const Affine first = Affine::var(range.var, chunk);
    // first <= raw < first + chunk, and raw < extent (the last range may
    // be short): an index outside [0, extent) is in no range, dropped.
    const ExprRef mine = makeOp(
        OpCode::kWhere, DType::bool_,
        {makeOp(OpCode::kGe, DType::bool_, {raw, makeIndex(d, first)}),
         makeOp(OpCode::kWhere, DType::bool_,
                {makeOp(OpCode::kLt, DType::bool_, {raw, makeIndex(d, add(first, Affine::constantOf(chunk)))}),
                 makeOp(OpCode::kLt, DType::bool_, {raw, makeConstant(d, static_cast<double>(extent))}), no}),
         no});
    emitNest(strCat(name, "_scatter"), loops, scatterStore(id, sums, idx, raw, mine));
    if (!into_zero) emitXPlusSums(id, sums, name);
    return absl::OkStatus();
  }

  void emitZero(std::string name, int buffer, const std::vector<tensor::Axis>& axes) {
    IndexMap idx;
    auto loops = newLoops(axes, idx);
    emitNest(std::move(name), loops,
             Stmt::store(buffer, indexFor(axes, idx), makeConstant(m_.buffers[buffer].dtype, 0)));
  }

  // scatter_add with indices of their own axes, on the CPU: sums zeroed;
  // then, serially over the indices' own axes in row-major order and in
  // lanes over x's other axes, sums[index] += update where the index is in
  // [0, extent) (a guarded store: an update at any other index is dropped,
  // its row not touched); then x + sums. The same additions in the same
  // order as the reduction form: the same bits, at every thread count (the
  // threads split x's other axes, each element written by one thread in the
  // serial order; passes/parallelize.h). The guard is tested once per index
  // on the CPU, around the loop over x's other axes.
  //
  // Into a positive zero (a gradient's scatter into zeros, a histogram), the
  // sums are the result: they are accumulated in the output itself.
  absl::Status lowerScatterAddSerial(int32_t id, const std::vector<tensor::Axis>& own) {
    const Node& n = p_.nodes[id];
    const Node& x = p_.nodes[n.operands[0]];
    const auto [axis, ind, extent, name, into_zero] = scatterSite(id);
    const int sums = into_zero ? buffer_of_[id] : addBuffer(strCat("t", id, "_sums"), n, BufferRole::kTemp, -1);
    emitZero(strCat(name, "_zero"), sums, n.axes);
    {  // scatter: the indices' own axes outermost, serial
      std::vector<tensor::Axis> order = own;
      for (const tensor::Axis& a : x.axes) {
        if (a.name != axis) order.push_back(a);
      }
      IndexMap idx;
      auto loops = newLoops(order, idx);
      const ExprRef raw = access(ind, restrictTo(p_.nodes[ind].axes, idx));
      emitNest(strCat(name, "_scatter"), loops, scatterStore(id, sums, idx, raw, indexBelow(raw, extent)));
    }
    if (!into_zero) emitXPlusSums(id, sums, name);
    return absl::OkStatus();
  }

  // The store both ordered forms of scatter_add node `id` make, under the
  // loops of `idx`: sums[.., raw, ..] += update where `guard` holds (the
  // index bound to a variable of its own, clamped into the axis).
  Stmt scatterStore(int32_t id, int sums, const IndexMap& idx, const ExprRef& raw, ExprRef guard) {
    const Node& n = p_.nodes[id];
    const ScatterSite site = scatterSite(id);
    const int v = m_.newVar();
    IndexMap at_sum = idx;
    at_sum[site.axis] = Affine::var(v);
    const std::vector<Affine> index = indexFor(n.axes, at_sum);
    const ExprRef update = access(n.operands[2], restrictTo(p_.nodes[n.operands[2]].axes, idx));
    Stmt st = Stmt::store(sums, index, makeOp(OpCode::kAdd, n.dtype, {makeLoad(n.dtype, sums, index), update}));
    st.bound = {v};
    st.args = {clampIndex(raw, site.extent - 1)};
    st.guard = std::move(guard);
    return st;
  }

  // What both ordered forms of scatter_add node `id` start from: its axis,
  // the indices' node, the axis's extent, the kernels' name prefix, and
  // whether x is +0 (the sums are then accumulated in the output).
  struct ScatterSite {
    std::string axis;
    int32_t ind;
    int64_t extent;
    std::string name;
    bool into_zero;
  };
  ScatterSite scatterSite(int32_t id) const {
    const Node& n = p_.nodes[id];
    return {n.names[0], n.operands[1], tensor::axisExtent(p_.nodes[n.operands[0]].axes, n.names[0]),
            strCat("k", id, "_scatter_add"), isPositiveZero(n.operands[0])};
  }

  // Whether node `id` is +0 (or integer 0) everywhere: a constant, maybe
  // broadcast.
  bool isPositiveZero(int32_t id) const {
    const Node* x = &p_.nodes[id];
    while (x->op == tensor::OpCode::kBroadcast) x = &p_.nodes[x->operands[0]];
    return x->op == tensor::OpCode::kConstant && x->scalar == 0 && !std::signbit(x->scalar);
  }

  const tensor::Program& p_;
  const LowerOptions o_;
  Module m_;
  std::vector<int> buffer_of_;
  std::vector<bool> live_;
};

}  // namespace

absl::StatusOr<Module> lowerProgram(const tensor::Program& program, const LowerOptions& options) {
  return Lowering(program, options).run();
}

}  // namespace accy::choir
