#include "compiler/choir/passes/vectorize.h"

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
      return false;
  }
  return false;
}

namespace {

// Whether every value in `e` has the dtype `lane` (f32, f64, or i32 under
// the ops above), comparisons aside, and every load walks `var` with stride
// 0 or 1. A load at data-dependent positions qualifies when the positions
// do not change along `var` (an embedding row read along its features):
// the emitter computes them once per row, and its bound values, integers,
// are not lanes.
bool uniformLanes(const Module& m, const ExprRef& e, int var, DType* lane, bool uniform_conditions) {
  countWork();
  const Expr& x = *e;
  if (uniform_conditions && x.kind == ExprKind::kOp && x.op == OpCode::kWhere && x.args[0]->dtype == DType::bool_ &&
      isFloating(x.dtype) && *lane == x.dtype && invariantIn(m, x.args[0], var)) {
    return uniformLanes(m, x.args[1], var, lane, true) && uniformLanes(m, x.args[2], var, lane, true);
  }
  if (x.kind == ExprKind::kIndex || (x.kind == ExprKind::kOp && tensor::opCategory(x.op) == tensor::OpCategory::Cast)) {
    return false;
  }
  const bool is_compare = x.kind == ExprKind::kOp && tensor::opCategory(x.op) == tensor::OpCategory::Compare;
  if (*lane == DType::i32 && x.kind == ExprKind::kOp && !int32LaneOp(x.op)) return false;
  if (!is_compare) {
    if (x.dtype != DType::f32 && x.dtype != DType::f64 && x.dtype != DType::i32) return false;
    if (*lane != x.dtype) return false;
  }
  if (x.kind == ExprKind::kLoad) {
    for (const ExprRef& a : x.args) {
      if (!invariantIn(m, a, var)) return false;
    }
    const int64_t c = flatCoeff(m.buffers[x.buffer], x.index, var);
    return c == 0 || c == 1;
  }
  for (const ExprRef& a : x.args) {
    if (!uniformLanes(m, a, var, lane, uniform_conditions)) return false;
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
      DType lane = m.buffers[st.buffer].dtype;
      const int width = lanesFor(o, lane, s.loop.extent);
      bool positions_fixed = true;  // a store's bound positions, the same along the loop
      for (const ExprRef& a : st.args) positions_fixed = positions_fixed && invariantIn(m, a, s.loop.var);
      if (s.loop.tag == LoopTag::kSerial && vectorLane(o, lane) && s.loop.extent >= width && positions_fixed &&
          flatCoeff(m.buffers[st.buffer], st.index, s.loop.var) == 1 &&
          uniformLanes(m, st.value, s.loop.var, &lane, o.uniform_conditions)) {
        s.loop.tag = LoopTag::kVectorized;
        s.loop.vector_width = width;
      }
      continue;
    }
    if (s.kind == StmtKind::kReduce) {
      LoopHeader& h = s.domain.back();
      DType lane = m.buffers[s.buffer].dtype;
      const int width = lanesFor(o, lane, h.extent);
      if (h.tag == LoopTag::kSerial && vectorLane(o, lane) && h.extent >= width &&
          uniformLanes(m, s.value, h.var, &lane, o.uniform_conditions)) {
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
