#include "compiler/choir/passes/vectorize.h"

#include <algorithm>

#include "compiler/choir/rewrite.h"

namespace accy::choir {
namespace {

// Lanes for a loop of `extent` elements of `lane`: the widest vector the
// target has, halved (down to 16 bytes) while the loop is shorter than one
// vector, so that a short contiguous row (8 floats under AVX-512) still runs
// as one vector.
int lanesFor(const VectorizeOptions& o, DType lane, int64_t extent) {
  const int size = static_cast<int>(tensor::dtypeSize(lane));
  int bytes = o.vector_bytes;
  while (bytes > 16 && extent < bytes / size) bytes /= 2;
  return bytes / size;
}

}  // namespace

// Derived from the op table: the cheap elementwise ops of integer meaning
// (no division, no loop, no cast).
bool int32LaneOp(OpCode op) {
  switch (tensor::opCategory(op)) {
    case tensor::OpCategory::Unary:
    case tensor::OpCategory::Binary:
    case tensor::OpCategory::Compare:
    case tensor::OpCategory::Select:
      // Shifts by a value per lane have no one instruction on every target.
      if (op == OpCode::kShiftLeft || op == OpCode::kShiftRight) return false;
      return tensor::opTakes(op, DType::i32) && tensor::opCost(op) == tensor::OpCost::Cheap;
    case tensor::OpCategory::Leaf:
    case tensor::OpCategory::Cast:
    case tensor::OpCategory::Reduce:
    case tensor::OpCategory::Dot:
    case tensor::OpCategory::Layout:
    case tensor::OpCategory::Index:
    case tensor::OpCategory::Random:
    case tensor::OpCategory::Loop:
      return false;
  }
  return false;
}

namespace {

bool is32(DType d) { return d == DType::f32 || d == DType::i32 || d == DType::u32; }

// Whether a value of dtype `d` may run in the lanes of a loop of `lane`:
// the same dtype (f32, f64 or i32), or under lanes32 any 4-byte dtype in a
// loop of one.
bool sameLanes(const VectorizeOptions& o, DType lane, DType d) {
  if (o.lanes32 && is32(lane)) return is32(d);
  return d == lane && (d == DType::f32 || d == DType::f64 || d == DType::i32);
}

// Under lanes32: whether op `x` (its value, or a comparison's operands, of
// a 4-byte dtype) has a form in 32-bit lanes.
bool lanes32Op(const Expr& x) {
  const DType arg = x.args.empty() ? x.dtype : x.args[0]->dtype;
  switch (tensor::opCategory(x.op)) {
    case tensor::OpCategory::Unary:
    case tensor::OpCategory::Binary:
    case tensor::OpCategory::Compare:
    case tensor::OpCategory::Select: {
      const DType d = tensor::opCategory(x.op) == tensor::OpCategory::Compare ? arg : x.dtype;
      if (isFloating(d)) return true;
      // Shifts by a count known when emitting: one instruction each.
      if (x.op == OpCode::kShiftLeft || x.op == OpCode::kShiftRight) return x.args[1]->kind == ExprKind::kConstant;
      return tensor::opTakes(x.op, DType::i32) && tensor::opCost(x.op) == tensor::OpCost::Cheap;
    }
    case tensor::OpCategory::Cast:
      if (x.op == OpCode::kBitcast) return is32(arg) && is32(x.dtype);
      // i32 <-> u32 keep the bits; either to f32 rounds.
      return (arg == DType::i32 || arg == DType::u32) && is32(x.dtype);
    case tensor::OpCategory::Random:
      return true;
    case tensor::OpCategory::Leaf:
    case tensor::OpCategory::Reduce:
    case tensor::OpCategory::Dot:
    case tensor::OpCategory::Layout:
    case tensor::OpCategory::Index:
    case tensor::OpCategory::Loop:
      return false;
  }
  return false;
}

// Whether a load at positions that change along `var` can gather its
// lanes by 32-bit offsets (VectorizeOptions::gathers): a 4-byte value (or
// an f64 at positions that are not data: a stride), i32
// bound values, non-negative coefficients of `var` and of the bound
// variables, and their largest contribution to the position (the loop's
// widest vector, every bound value at its clamp) below 2^31.
bool gathersLanes(const Module& m, const Expr& load, int var) {
  if (!is32(load.dtype) && !(load.dtype == DType::f64 && load.bound.empty())) return false;
  const Affine flat = flatIndex(m.buffers[load.buffer], load.index);
  const int64_t step = flat.coeffOf(var);
  if (step < 0 || step >= (int64_t{1} << 31) / 64) return false;
  int64_t most = step * 64;  // past the widest vector's last lane
  for (size_t j = 0; j < load.bound.size(); ++j) {
    const int64_t c = flat.coeffOf(load.bound[j]);
    const int64_t hi = clampBound(*load.args[j]);
    if (c < 0 || hi < 0 || load.args[j]->dtype != DType::i32) return false;
    if (c > 0 && hi > (int64_t{1} << 31) / c) return false;
    most += c * hi;
    if (most >= (int64_t{1} << 31)) return false;
  }
  return true;
}

// Whether every value in `e` runs in the lanes of `lane` (sameLanes;
// comparisons aside) under ops those lanes have, and every load walks
// `var` with stride 0 or 1. A load at data-dependent positions qualifies
// when the positions do not change along `var` (an embedding row read
// along its features): the emitter computes them once per row, and its
// bound values, integers, are not lanes.
bool uniformLanes(const Module& m, const ExprRef& e, int var, DType lane, const VectorizeOptions& o) {
  countWork();
  const Expr& x = *e;
  const bool mixed = o.lanes32 && is32(lane);
  if (o.uniform_conditions && x.kind == ExprKind::kOp && x.op == OpCode::kWhere && x.args[0]->dtype == DType::bool_ &&
      (isFloating(x.dtype) || mixed) && sameLanes(o, lane, x.dtype) && invariantIn(m, x.args[0], var)) {
    return uniformLanes(m, x.args[1], var, lane, o) && uniformLanes(m, x.args[2], var, lane, o);
  }
  if (x.kind == ExprKind::kIndex) return mixed && (x.dtype == DType::i32 || x.dtype == DType::u32);
  const bool is_compare = x.kind == ExprKind::kOp && tensor::opCategory(x.op) == tensor::OpCategory::Compare;
  if (x.kind == ExprKind::kOp) {
    if (mixed) {
      if (!lanes32Op(x)) return false;
    } else {
      if (tensor::opCategory(x.op) == tensor::OpCategory::Cast) return false;
      if (lane == DType::i32 && !int32LaneOp(x.op)) return false;
    }
  }
  if (!is_compare && !sameLanes(o, lane, x.dtype)) return false;
  if (x.kind == ExprKind::kLoad) {
    bool fixed = true;
    for (const ExprRef& a : x.args) fixed = fixed && invariantIn(m, a, var);
    if (!fixed) {
      if (!(o.gathers && mixed && gathersLanes(m, x, var))) return false;
      for (const ExprRef& a : x.args) {
        if (!uniformLanes(m, a, var, lane, o)) return false;
      }
      return true;
    }
    const int64_t c = flatCoeff(m.buffers[x.buffer], x.index, var);
    // A stride past 1 (a column of a row-major value, a transposing copy)
    // is a gather of constant offsets where the target gathers: of 4-byte
    // values in 4-byte lanes, of f64 in f64 lanes (32-bit offsets both).
    const bool f64_lanes = lane == DType::f64 && x.dtype == DType::f64;
    return c == 0 || c == 1 || (o.gathers && (mixed || f64_lanes) && gathersLanes(m, x, var));
  }
  for (const ExprRef& a : x.args) {
    if (!uniformLanes(m, a, var, lane, o)) return false;
  }
  return true;
}

bool vectorLane(const VectorizeOptions& o, DType lane) { return isFloating(lane) || (o.int32 && lane == DType::i32); }

void visit(const Module& m, std::vector<Stmt>& stmts, const VectorizeOptions& o) {
  for (Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) {
      const bool innermost = s.body.size() == 1 && s.body[0].kind == StmtKind::kStore;
      if (!innermost) {
        visit(m, s.body, o);
        continue;
      }
      const Stmt& st = s.body[0];
      const DType lane = m.buffers[st.buffer].dtype;
      const int width = lanesFor(o, lane, s.loop.extent);
      bool positions_fixed = true;  // a store's bound positions, the same along the loop
      for (const ExprRef& a : st.args) positions_fixed = positions_fixed && invariantIn(m, a, s.loop.var);
      // and its guard (a scatter's test of its index), tested once around the loop
      if (st.guard) positions_fixed = positions_fixed && invariantIn(m, st.guard, s.loop.var);
      if (s.loop.tag == LoopTag::kSerial && (vectorLane(o, lane) || (o.lanes32 && is32(lane))) &&
          s.loop.extent >= width && positions_fixed && flatCoeff(m.buffers[st.buffer], st.index, s.loop.var) == 1 &&
          uniformLanes(m, st.value, s.loop.var, lane, o)) {
        s.loop.tag = LoopTag::kVectorized;
        s.loop.vector_width = width;
      }
      continue;
    }
    if (s.kind == StmtKind::kReduce) {
      LoopHeader& h = s.domain.back();
      const DType lane = m.buffers[s.buffer].dtype;
      const int width = lanesFor(o, lane, h.extent);
      if (h.tag == LoopTag::kSerial && vectorLane(o, lane) && h.extent >= width &&
          uniformLanes(m, s.value, h.var, lane, o)) {
        h.tag = LoopTag::kVectorized;
        h.vector_width = width;
      }
    }
  }
}

}  // namespace

absl::StatusOr<Module> vectorizeLoops(Module m, const VectorizeOptions& options) {
  for (Kernel& k : m.kernels) visit(m, k.body, options);
  return m;
}

}  // namespace accy::choir
