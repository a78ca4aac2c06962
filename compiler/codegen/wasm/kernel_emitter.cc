#include "compiler/codegen/wasm/kernel_emitter.h"

#include <functional>
#include <set>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/rewrite.h"
#include "compiler/codegen/gpu/elementary_op.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::wasm {

using choir::Affine;
using choir::DType;
using choir::Expr;
using choir::ExprKind;
using choir::ExprRef;
using choir::LoopTag;
using choir::OpCode;
using choir::Stmt;
using choir::StmtKind;

namespace {

bool isFloat(DType d) { return d == DType::f32 || d == DType::f64; }
bool isWide(DType d) { return d == DType::i64 || d == DType::f64; }

absl::Status unimplemented(std::string_view what) {
  return makeError(ErrorKind::kUnimplemented, strCat("wasm emitter: ", what));
}

int lanesOf(DType d) { return kVectorBytes / static_cast<int>(tensor::dtypeSize(d)); }

// The bits of a constant `v` of `dtype` (integers as their two's complement
// in the lane's width).
uint64_t constantBits(double v, DType dtype) {
  if (isFloat(dtype)) return math::laneBits(v, dtype == DType::f64);
  const uint64_t bits = static_cast<uint64_t>(tensor::toInt64(v));
  return dtype == DType::i64 ? bits : (bits & 0xffffffffu);
}

// The i32x4 instruction of an op on i32 lanes (the combiners included), or
// 0 when there is none.
uint32_t i32x4Op(OpCode op) {
  switch (op) {
    case OpCode::kNeg:
      return simd::kI32x4Neg;
    case OpCode::kAbs:
      return simd::kI32x4Abs;
    case OpCode::kAdd:
      return simd::kI32x4Add;
    case OpCode::kSub:
      return simd::kI32x4Sub;
    case OpCode::kMul:
      return simd::kI32x4Mul;
    case OpCode::kMax:
      return simd::kI32x4MaxS;
    case OpCode::kMin:
      return simd::kI32x4MinS;
#include "compiler/choir/lowered_op_cases.inc"
    case OpCode::kSin: case OpCode::kCos: case OpCode::kExp: case OpCode::kLog:
    case OpCode::kSqrt: case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kDiv: case OpCode::kPow:
    case OpCode::kLt: case OpCode::kLe: case OpCode::kGt: case OpCode::kGe: case OpCode::kEq:
    case OpCode::kNe: case OpCode::kWhere: case OpCode::kCast:
      return 0;
  }
  return 0;  // not reached: the switch covers every op
}

// Scalar loads and stores of each dtype, with their natural alignment
// (log2 bytes); bools are one byte.
struct MemoryOps {
  uint8_t load, store;
  uint32_t align;
};
MemoryOps memoryOps(DType d) {
  switch (d) {
    case DType::f32:
      return {op::kF32Load, op::kF32Store, 2};
    case DType::f64:
      return {op::kF64Load, op::kF64Store, 3};
    case DType::i32:
      return {op::kI32Load, op::kI32Store, 2};
    case DType::i64:
      return {op::kI64Load, op::kI64Store, 3};
    case DType::bool_:
      return {op::kI32Load8U, op::kI32Store8, 0};
  }
  return {op::kI32Load, op::kI32Store, 2};
}

}  // namespace

ValType valType(DType d) {
  switch (d) {
    case DType::f32:
      return ValType::kF32;
    case DType::f64:
      return ValType::kF64;
    case DType::i64:
      return ValType::kI64;
    case DType::i32:
    case DType::bool_:
      return ValType::kI32;
  }
  return ValType::kI32;
}

KernelEmitter::KernelEmitter(const choir::Module& module, FunctionBody& f) : m_(module), f_(f), pool_(f) {}

uint32_t KernelEmitter::keep(ValType t) {
  const uint32_t r = f_.local(t);
  f_.set(r);
  return r;
}

uint32_t KernelEmitter::i32Local(int64_t value) {
  f_.i32Const(static_cast<int32_t>(value));
  return keep(ValType::kI32);
}

absl::Status KernelEmitter::emit(const choir::Kernel& kernel) {
  // Every buffer the kernel touches: its address from the table, up front.
  std::set<int> used;
  choir::visitStmts(kernel.body, [&](const Stmt& s) {
    if (s.buffer >= 0) used.insert(s.buffer);
    if (s.value) {
      choir::visitExpr(s.value, [&](const Expr& e) {
        if (e.kind == ExprKind::kLoad) used.insert(e.buffer);
      });
    }
  });
  for (int b : used) {
    f_.get(0);
    f_.memory(op::kI32Load, 2, static_cast<uint64_t>(b) * 4);
    base_[b] = keep(ValType::kI32);
  }
  ACCY_RETURN_IF_ERROR(stmts(kernel.body, /*outermost=*/true));
  // The constants go first.
  std::vector<uint8_t> body = std::move(f_.code());
  f_.code() = pool_.prologue();
  f_.code().insert(f_.code().end(), body.begin(), body.end());
  return absl::OkStatus();
}

absl::Status KernelEmitter::stmts(const std::vector<Stmt>& body, bool outermost) {
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::kLoop:
        ACCY_RETURN_IF_ERROR(loop(s, outermost));
        break;
      case StmtKind::kStore:
        cse_.clear();
        ACCY_RETURN_IF_ERROR(store(s, Mode{}));
        break;
      case StmtKind::kReduce:
        ACCY_RETURN_IF_ERROR(reduce(s));
        break;
      case StmtKind::kBarrier:
        return unimplemented("workgroup barriers have no CPU form");
    }
  }
  return absl::OkStatus();
}

template <typename Body>
absl::Status KernelEmitter::counted(uint32_t i, uint32_t limit, int64_t step, Body&& body) {
  f_.block();
  f_.get(i);
  f_.get(limit);
  f_.op(op::kI32GeS);
  f_.op(op::kBrIf), f_.u32(0);
  f_.loop();
  ACCY_RETURN_IF_ERROR(body());
  f_.get(i);
  f_.i32Const(static_cast<int32_t>(step));
  f_.op(op::kI32Add);
  f_.tee(i);
  f_.get(limit);
  f_.op(op::kI32LtS);
  f_.op(op::kBrIf), f_.u32(0);
  f_.end();
  f_.end();
  return absl::OkStatus();
}

absl::Status KernelEmitter::loop(const Stmt& s, bool outermost) {
  if (s.loop.tag == LoopTag::kGpuBlock || s.loop.tag == LoopTag::kGpuThread) {
    return unimplemented(strCat("loop i", s.loop.var, " is mapped to a GPU dimension"));
  }
  if (s.loop.extent > INT32_MAX) return unimplemented(strCat("loop i", s.loop.var, " runs past 2^31 iterations"));
  if (s.body.size() == 1 && s.body[0].kind == StmtKind::kStore) return innermostStore(s, outermost);
  const uint32_t i = newLocal(ValType::kI32);
  vars_[s.loop.var] = i;
  uint32_t limit;
  if (outermost && s.loop.tag == LoopTag::kCpuParallel) {
    f_.get(begin_);
    f_.set(i);
    limit = end_;
  } else {
    f_.i32Const(0);
    f_.set(i);
    limit = i32Local(s.loop.extent);
  }
  return counted(i, limit, 1, [&] { return stmts(s.body, false); });
}

bool KernelEmitter::vectorizable(const ExprRef& e, int var, DType lane) const {
  if (!isFloat(lane) && lane != DType::i32) return false;
  bool ok = true;
  choir::visitExpr(e, [&](const Expr& x) {
    switch (x.kind) {
      case ExprKind::kLoad: {
        const int64_t c = choir::flatCoeff(m_.buffers[x.buffer], x.index, var);
        if (x.dtype != lane || (c != 0 && c != 1)) ok = false;
        break;
      }
      case ExprKind::kConstant:
        if (x.dtype != lane && x.dtype != DType::bool_) ok = false;
        break;
      case ExprKind::kIndex:
        ok = false;
        break;
      case ExprKind::kOp:
        if (x.op == OpCode::kCast) ok = false;
        // Bools only from comparing lane values.
        if (x.dtype != lane && !(x.dtype == DType::bool_ && x.args.size() == 2 && x.args[0]->dtype == lane)) ok = false;
        if (lane == DType::i32 && x.dtype == DType::i32 && x.op != OpCode::kWhere) {
          switch (x.op) {
            case OpCode::kAdd: case OpCode::kSub: case OpCode::kMul: case OpCode::kNeg: case OpCode::kAbs:
            case OpCode::kMax: case OpCode::kMin:
              break;
#include "compiler/choir/lowered_op_cases.inc"
            case OpCode::kSin: case OpCode::kCos: case OpCode::kExp: case OpCode::kLog:
            case OpCode::kSqrt: case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kDiv:
            case OpCode::kPow: case OpCode::kLt: case OpCode::kLe: case OpCode::kGt: case OpCode::kGe:
            case OpCode::kEq: case OpCode::kNe: case OpCode::kWhere: case OpCode::kCast:
              ok = false;
          }
        }
        break;
    }
  });
  return ok;
}

absl::Status KernelEmitter::innermostStore(const Stmt& l, bool outermost) {
  const Stmt& st = l.body[0];
  const DType dtype = m_.buffers[st.buffer].dtype;
  const uint32_t i = newLocal(ValType::kI32);
  vars_[l.loop.var] = i;
  const bool parallel = outermost && l.loop.tag == LoopTag::kCpuParallel;
  uint32_t limit;
  if (parallel) {
    f_.get(begin_);
    f_.set(i);
    limit = end_;
  } else {
    f_.i32Const(0);
    f_.set(i);
    limit = i32Local(l.loop.extent);
  }
  rows_.clear();
  rows_active_ = true;
  prepareRows(st, l.loop.var);
  const Mode scalar{false, l.loop.var, i};
  const bool vectorized = (l.loop.tag == LoopTag::kVectorized || (parallel && l.loop.vector_width > 1)) &&
                          choir::flatCoeff(m_.buffers[st.buffer], st.index, l.loop.var) == 1 &&
                          vectorizable(st.value, l.loop.var, dtype);
  if (vectorized) {
    const int lanes = lanesOf(dtype);
    const Mode vec{true, l.loop.var, i};
    broadcast_.clear();
    prepareBroadcasts(st.value, vec, st.buffer);
    f_.get(limit);
    f_.i32Const(lanes - 1);
    f_.op(op::kI32Sub);
    const uint32_t vlimit = keep(ValType::kI32);
    ACCY_RETURN_IF_ERROR(counted(i, vlimit, lanes, [&] {
      cse_.clear();
      return store(st, vec);
    }));
    broadcast_.clear();
  }
  if (!vectorized || parallel || l.loop.extent % lanesOf(dtype) != 0) {
    ACCY_RETURN_IF_ERROR(counted(i, limit, 1, [&] {
      cse_.clear();
      return store(st, scalar);
    }));
  }
  rows_active_ = false;
  rows_.clear();
  return absl::OkStatus();
}

absl::Status KernelEmitter::store(const Stmt& s, const Mode& mode) {
  ACCY_ASSIGN_OR_RETURN(const uint32_t v, expr(s.value, mode));
  const DType dtype = m_.buffers[s.buffer].dtype;
  const uint64_t offset = pushAddress(s.buffer, s.index, mode);
  if (mode.vector) {
    f_.get(v);
    f_.simdMemory(simd::kStore, 0, offset);
  } else {
    storeScalar(dtype, offset, v);
  }
  return absl::OkStatus();
}

void KernelEmitter::pushAffine(const Affine& a) {
  f_.i32Const(static_cast<int32_t>(a.constant));
  for (const Affine::Term& t : a.terms) {
    f_.get(vars_.at(t.var));
    if (t.coeff != 1) {
      f_.i32Const(static_cast<int32_t>(t.coeff));
      f_.op(op::kI32Mul);
    }
    f_.op(op::kI32Add);
  }
}

uint32_t KernelEmitter::rowBase(int buffer, const Affine& rest) {
  const std::string key = strCat(buffer, ":", choir::toText(rest));
  if (rows_active_) {
    if (auto it = rows_.find(key); it != rows_.end()) return it->second;
  }
  const int64_t size = tensor::dtypeSize(m_.buffers[buffer].dtype);
  f_.get(base_.at(buffer));
  Affine scaled = choir::scale(rest, size);
  scaled.constant = 0;  // the constant goes in the instruction's offset
  if (!scaled.terms.empty()) {
    pushAffine(scaled);
    f_.op(op::kI32Add);
  }
  const uint32_t r = keep(ValType::kI32);
  if (rows_active_) rows_[key] = r;
  return r;
}

uint64_t KernelEmitter::pushAddress(int buffer, const std::vector<Affine>& index, const Mode& mode) {
  const DType dtype = m_.buffers[buffer].dtype;
  const int64_t size = tensor::dtypeSize(dtype);
  const Affine flat = choir::flatIndex(m_.buffers[buffer], index);
  const int64_t c = mode.inner_var >= 0 ? flat.coeffOf(mode.inner_var) : 0;
  const Affine rest = mode.inner_var >= 0 ? choir::add(flat, Affine::var(mode.inner_var, -c)) : flat;
  f_.get(rowBase(buffer, rest));
  if (c != 0) {
    f_.get(mode.inner);
    f_.i32Const(static_cast<int32_t>(c * size));
    f_.op(op::kI32Mul);
    f_.op(op::kI32Add);
  }
  // A negative constant part (never for in-bounds accesses of a lowered
  // module, whose constants are offsets into the buffer) stays in the
  // address.
  if (rest.constant < 0) {
    f_.i32Const(static_cast<int32_t>(rest.constant * size));
    f_.op(op::kI32Add);
    return 0;
  }
  return static_cast<uint64_t>(rest.constant * size);
}

void KernelEmitter::prepareRows(const ExprRef& e, int inner_var) {
  choir::visitExpr(e, [&](const Expr& x) {
    if (x.kind != ExprKind::kLoad) return;
    const Affine flat = choir::flatIndex(m_.buffers[x.buffer], x.index);
    rowBase(x.buffer, choir::add(flat, Affine::var(inner_var, -flat.coeffOf(inner_var))));
  });
}

void KernelEmitter::prepareRows(const Stmt& s, int inner_var) {
  if (s.value) prepareRows(s.value, inner_var);
  if (s.kind == StmtKind::kStore) {
    const Affine flat = choir::flatIndex(m_.buffers[s.buffer], s.index);
    rowBase(s.buffer, choir::add(flat, Affine::var(inner_var, -flat.coeffOf(inner_var))));
  }
}

void KernelEmitter::prepareBroadcasts(const ExprRef& e, const Mode& mode, int stored_buffer) {
  if (e->kind == ExprKind::kLoad && e->buffer != stored_buffer &&
      choir::flatCoeff(m_.buffers[e->buffer], e->index, mode.inner_var) == 0) {
    const int key = numbers_.number(e);
    if (broadcast_.contains(key)) return;
    const uint64_t offset = pushAddress(e->buffer, e->index, Mode{});
    f_.simdMemory(isWide(e->dtype) ? simd::kLoad64Splat : simd::kLoad32Splat, isWide(e->dtype) ? 3 : 2, offset);
    broadcast_[key] = keep(ValType::kV128);
    return;
  }
  for (const ExprRef& a : e->args) prepareBroadcasts(a, mode, stored_buffer);
}

uint32_t KernelEmitter::load(DType dtype, uint64_t offset) {
  const MemoryOps m = memoryOps(dtype);
  f_.memory(m.load, m.align, offset);
  return keep(valType(dtype));
}

void KernelEmitter::storeScalar(DType dtype, uint64_t offset, uint32_t v) {
  const MemoryOps m = memoryOps(dtype);
  f_.get(v);
  f_.memory(m.store, m.align, offset);
}

absl::StatusOr<uint32_t> KernelEmitter::expr(const ExprRef& e, const Mode& mode) {
  choir::countWork();  // a caller's stop check is asked as emitting goes (choir/work.h)
  const int key = numbers_.number(e);
  if (auto it = cse_.find(key); it != cse_.end()) return it->second;
  uint32_t v = 0;
  switch (e->kind) {
    case ExprKind::kLoad: {
      if (mode.vector) {
        if (auto it = broadcast_.find(key); it != broadcast_.end()) {
          v = it->second;
          break;
        }
        const int64_t c = choir::flatCoeff(m_.buffers[e->buffer], e->index, mode.inner_var);
        const uint64_t offset = pushAddress(e->buffer, e->index, mode);
        if (c == 0) {
          f_.simdMemory(isWide(e->dtype) ? simd::kLoad64Splat : simd::kLoad32Splat, isWide(e->dtype) ? 3 : 2,
                        offset);
        } else {
          f_.simdMemory(simd::kLoad, 0, offset);
        }
        v = keep(ValType::kV128);
      } else {
        const uint64_t offset = pushAddress(e->buffer, e->index, mode);
        v = load(e->dtype, offset);
      }
      break;
    }
    case ExprKind::kConstant: {
      const double c = tensor::convertValue(e->constant, DType::f64, e->dtype);
      const int lane_bits = isWide(e->dtype) ? 64 : 32;
      const uint64_t bits = e->dtype == DType::bool_ && mode.vector ? (c != 0 ? 0xffffffffu : 0)  // a mask
                                                                    : constantBits(c, e->dtype);
      if (mode.vector && isWide(e->dtype) && !isFloat(e->dtype)) {
        return unimplemented("i64 constant in a vector loop");
      }
      v = pool_.get(mode.vector ? ValType::kV128 : valType(e->dtype), bits, lane_bits);
      break;
    }
    case ExprKind::kIndex: {
      if (mode.vector) return unimplemented("index values in a vector loop");
      pushAffine(e->index[0]);
      const uint32_t iv = keep(ValType::kI32);
      v = cast(iv, DType::i32, e->dtype);
      break;
    }
    case ExprKind::kOp: {
      std::vector<uint32_t> args;
      for (const ExprRef& a : e->args) {
        ACCY_ASSIGN_OR_RETURN(const uint32_t av, expr(a, mode));
        args.push_back(av);
      }
      ACCY_ASSIGN_OR_RETURN(v, op(*e, args, mode));
      break;
    }
  }
  cse_[key] = v;
  return v;
}

absl::StatusOr<uint32_t> KernelEmitter::op(const Expr& e, const std::vector<uint32_t>& a, const Mode& mode) {
  const DType arg = e.args.empty() ? e.dtype : e.args[0]->dtype;
  switch (e.op) {
    case OpCode::kCast:
      if (mode.vector) return unimplemented("cast in a vector loop");
      return cast(a[0], arg, e.dtype);
    case OpCode::kWhere: {
      f_.get(a[1]);
      f_.get(a[2]);
      f_.get(a[0]);
      if (mode.vector) {
        f_.simdOp(simd::kBitSelect);
        return keep(ValType::kV128);
      }
      f_.op(op::kSelect);
      return keep(valType(e.dtype));
    }
    case OpCode::kLt:
    case OpCode::kLe:
    case OpCode::kGt:
    case OpCode::kGe:
    case OpCode::kEq:
    case OpCode::kNe: {
      if (isFloat(arg)) {
        WasmOps o(f_, pool_, arg == DType::f64, mode.vector);
        static constexpr math::Cmp kCmp[] = {math::Cmp::kLt, math::Cmp::kLe, math::Cmp::kGt,
                                             math::Cmp::kGe, math::Cmp::kEq, math::Cmp::kNe};
        return o.cmp(kCmp[static_cast<int>(e.op) - static_cast<int>(OpCode::kLt)], a[0], a[1]);
      }
      const int i = static_cast<int>(e.op) - static_cast<int>(OpCode::kLt);
      if (mode.vector) {
        if (arg != DType::i32) return unimplemented("i64 comparison in a vector loop");
        static constexpr uint32_t kV[] = {simd::kI32x4LtS, simd::kI32x4LeS, simd::kI32x4GtS,
                                          simd::kI32x4GeS, simd::kI32x4Eq,  simd::kI32x4Ne};
        f_.get(a[0]);
        f_.get(a[1]);
        f_.simdOp(kV[i]);
        return keep(ValType::kV128);
      }
      const bool wide = arg == DType::i64;
      static constexpr uint8_t k32[] = {op::kI32LtS, op::kI32LeS, op::kI32GtS, op::kI32GeS, op::kI32Eq, op::kI32Ne};
      static constexpr uint8_t k64[] = {op::kI64LtS, op::kI64LeS, op::kI64GtS, op::kI64GeS, op::kI64Eq, op::kI64Ne};
      f_.get(a[0]);
      f_.get(a[1]);
      f_.op(wide ? k64[i] : k32[i]);
      return keep(ValType::kI32);
    }
#include "compiler/choir/lowered_op_cases.inc"
    case OpCode::kNeg: case OpCode::kAbs: case OpCode::kSin: case OpCode::kCos:
    case OpCode::kExp: case OpCode::kLog: case OpCode::kSqrt: case OpCode::kTanh: case OpCode::kSigmoid:
    case OpCode::kAdd: case OpCode::kSub: case OpCode::kMul: case OpCode::kDiv: case OpCode::kMax:
    case OpCode::kMin: case OpCode::kPow:
      break;
  }
  if (isFloat(e.dtype)) return floatOp(e, a, mode.vector);
  if (mode.vector) {
    if (e.dtype == DType::i32) return int32VectorOp(e, a);
    return unimplemented(strCat(tensor::dtypeName(e.dtype), " ", tensor::opName(e.op), " in a vector loop"));
  }
  return intOp(e, a, arg);
}

absl::StatusOr<uint32_t> KernelEmitter::int32VectorOp(const Expr& e, const std::vector<uint32_t>& a) {
  const uint32_t opcode = i32x4Op(e.op);
  if (opcode == 0) return unimplemented(strCat("i32 ", tensor::opName(e.op), " in a vector loop"));
  for (uint32_t x : a) f_.get(x);
  f_.simdOp(opcode);
  return keep(ValType::kV128);
}

absl::StatusOr<uint32_t> KernelEmitter::floatOp(const Expr& e, const std::vector<uint32_t>& a, bool vector) {
  WasmOps o(f_, pool_, e.dtype == DType::f64, vector);
  switch (e.op) {
    case OpCode::kNeg:
      return o.neg(a[0]);
    case OpCode::kAbs:
      return o.abs(a[0]);
    case OpCode::kSqrt:
      return o.sqrt(a[0]);
    case OpCode::kAdd:
      return o.add(a[0], a[1]);
    case OpCode::kSub:
      return o.sub(a[0], a[1]);
    case OpCode::kMul:
      return o.mul(a[0], a[1]);
    case OpCode::kDiv:
      return o.div(a[0], a[1]);
    case OpCode::kMax:
      return o.max(a[0], a[1]);
    case OpCode::kMin:
      return o.min(a[0], a[1]);
#include "compiler/choir/lowered_op_cases.inc"
    case OpCode::kSin: case OpCode::kCos: case OpCode::kExp: case OpCode::kLog:
    case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kPow: case OpCode::kLt: case OpCode::kLe:
    case OpCode::kGt: case OpCode::kGe: case OpCode::kEq: case OpCode::kNe: case OpCode::kWhere:
    case OpCode::kCast:
      break;
  }
  if (std::optional<uint32_t> r = gpu::elementaryOp(o, e.op, a[0], a.size() > 1 ? a[1] : a[0])) return *r;
  return unimplemented(strCat("op ", tensor::opName(e.op), " on ", tensor::dtypeName(e.dtype)));
}

absl::StatusOr<uint32_t> KernelEmitter::intOp(const Expr& e, const std::vector<uint32_t>& a, DType arg) {
  const bool wide = e.dtype == DType::i64;
  const ValType t = wide ? ValType::kI64 : ValType::kI32;
  auto constant = [&](int64_t c) {
    if (wide) {
      f_.i64Const(c);
    } else {
      f_.i32Const(static_cast<int32_t>(c));
    }
  };
  auto zeroMinus = [&](uint32_t x) {
    constant(0);
    f_.get(x);
    f_.op(wide ? op::kI64Sub : op::kI32Sub);
  };
  uint32_t r = 0;
  switch (e.op) {
    case OpCode::kNeg:
      zeroMinus(a[0]);
      r = keep(t);
      break;
    case OpCode::kAbs:
      zeroMinus(a[0]);
      f_.get(a[0]);
      f_.get(a[0]);
      constant(0);
      f_.op(wide ? op::kI64LtS : op::kI32LtS);
      f_.op(op::kSelect);
      r = keep(t);
      break;
    case OpCode::kAdd:
    case OpCode::kSub:
    case OpCode::kMul: {
      f_.get(a[0]);
      f_.get(a[1]);
      const int k = e.op == OpCode::kAdd ? 0 : e.op == OpCode::kSub ? 1 : 2;
      static constexpr uint8_t k32[] = {op::kI32Add, op::kI32Sub, op::kI32Mul};
      static constexpr uint8_t k64[] = {op::kI64Add, op::kI64Sub, op::kI64Mul};
      f_.op(wide ? k64[k] : k32[k]);
      r = keep(t);
      break;
    }
    case OpCode::kMax:
    case OpCode::kMin:
      f_.get(a[0]);
      f_.get(a[1]);
      f_.get(a[0]);
      f_.get(a[1]);
      f_.op(e.op == OpCode::kMax ? (wide ? op::kI64GtS : op::kI32GtS) : (wide ? op::kI64LtS : op::kI32LtS));
      f_.op(op::kSelect);
      r = keep(t);
      break;
    case OpCode::kDiv: {
      // b == 0 gives 0 and b == -1 gives -a (wrapping); WebAssembly traps on
      // both, so the division sees 1 there instead.
      auto isConst = [&](uint32_t x, int64_t c) {
        f_.get(x);
        constant(c);
        f_.op(wide ? op::kI64Eq : op::kI32Eq);
      };
      constant(1);
      f_.get(a[1]);
      isConst(a[1], 0);
      isConst(a[1], -1);
      f_.op(op::kI32Or);
      f_.op(op::kSelect);
      const uint32_t safe = keep(t);
      f_.get(a[0]);
      f_.get(safe);
      f_.op(wide ? op::kI64DivS : op::kI32DivS);
      const uint32_t q = keep(t);
      zeroMinus(a[0]);
      f_.get(q);
      isConst(a[1], -1);
      f_.op(op::kSelect);
      constant(0);
      isConst(a[1], 0);
      f_.op(op::kI32Eqz);
      f_.op(op::kSelect);
      r = keep(t);
      break;
    }
    case OpCode::kPow: {
      // Exponentiation by squaring, wrapping; a negative exponent gives the
      // truncated 1 / base^n: 1 for base 1, +-1 for base -1, else 0.
      const uint32_t result = newLocal(t), b = newLocal(t), n = newLocal(t);
      f_.get(a[0]);
      f_.set(b);
      f_.get(a[1]);
      f_.set(n);
      f_.get(n);
      constant(0);
      f_.op(wide ? op::kI64LtS : op::kI32LtS);
      f_.ifThen();
      {
        constant(1);
        // base == -1: n odd ? -1 : 1
        constant(-1);
        constant(1);
        f_.get(n);
        constant(1);
        f_.op(wide ? op::kI64And : op::kI32And);
        if (wide) f_.op(op::kI32WrapI64);
        f_.op(op::kSelect);
        constant(0);
        f_.get(b);
        constant(-1);
        f_.op(wide ? op::kI64Eq : op::kI32Eq);
        f_.op(op::kSelect);
        f_.get(b);
        constant(1);
        f_.op(wide ? op::kI64Eq : op::kI32Eq);
        f_.op(op::kSelect);
        f_.set(result);
      }
      f_.op(op::kElse);
      {
        constant(1);
        f_.set(result);
        f_.block();
        f_.loop();
        f_.get(n);
        f_.op(wide ? op::kI64Eqz : op::kI32Eqz);
        f_.op(op::kBrIf), f_.u32(1);
        f_.get(n);
        constant(1);
        f_.op(wide ? op::kI64And : op::kI32And);
        if (wide) f_.op(op::kI32WrapI64);
        f_.ifThen();
        f_.get(result);
        f_.get(b);
        f_.op(wide ? op::kI64Mul : op::kI32Mul);
        f_.set(result);
        f_.end();
        f_.get(b);
        f_.get(b);
        f_.op(wide ? op::kI64Mul : op::kI32Mul);
        f_.set(b);
        f_.get(n);
        constant(1);
        f_.op(wide ? op::kI64ShrS : op::kI32ShrS);
        f_.set(n);
        f_.op(op::kBr), f_.u32(0);
        f_.end();
        f_.end();
      }
      f_.end();
      r = result;
      break;
    }
#include "compiler/choir/lowered_op_cases.inc"
    case OpCode::kSin: case OpCode::kCos: case OpCode::kExp: case OpCode::kLog:
    case OpCode::kSqrt: case OpCode::kTanh: case OpCode::kSigmoid: case OpCode::kLt: case OpCode::kLe:
    case OpCode::kGt: case OpCode::kGe: case OpCode::kEq: case OpCode::kNe: case OpCode::kWhere:
    case OpCode::kCast:
      return unimplemented(strCat("op ", tensor::opName(e.op), " on ", tensor::dtypeName(e.dtype)));
  }
  (void)arg;
  if (e.dtype == DType::bool_) {  // wrapped to a bool: nonzero is true
    f_.get(r);
    f_.i32Const(0);
    f_.op(op::kI32Ne);
    r = keep(ValType::kI32);
  }
  return r;
}

uint32_t KernelEmitter::cast(uint32_t a, DType from, DType to) {
  if (from == to) return a;
  if (from == DType::bool_ && to == DType::i32) return a;
  f_.get(a);
  switch (to) {
    case DType::bool_:
      switch (from) {
        case DType::f32:
          f_.f32Const(0);
          f_.op(op::kF32Ne);
          break;
        case DType::f64:
          f_.f64Const(0);
          f_.op(op::kF64Ne);
          break;
        case DType::i64:
          f_.i64Const(0);
          f_.op(op::kI64Ne);
          break;
        default:
          f_.i32Const(0);
          f_.op(op::kI32Ne);
          break;
      }
      break;
    case DType::i32:
      if (from == DType::i64) f_.op(op::kI32WrapI64);
      if (from == DType::f32) f_.fcOp(fc::kI32TruncSatF32S);
      if (from == DType::f64) f_.fcOp(fc::kI32TruncSatF64S);
      break;
    case DType::i64:
      if (from == DType::i32 || from == DType::bool_) f_.op(op::kI64ExtendI32S);
      if (from == DType::f32) f_.fcOp(fc::kI64TruncSatF32S);
      if (from == DType::f64) f_.fcOp(fc::kI64TruncSatF64S);
      break;
    case DType::f32:
      if (from == DType::i32 || from == DType::bool_) f_.op(op::kF32ConvertI32S);
      // Through f64, as the evaluator rounds (once to f64, then to f32).
      if (from == DType::i64) f_.op(op::kF64ConvertI64S), f_.op(op::kF32DemoteF64);
      if (from == DType::f64) f_.op(op::kF32DemoteF64);
      break;
    case DType::f64:
      if (from == DType::i32 || from == DType::bool_) f_.op(op::kF64ConvertI32S);
      if (from == DType::i64) f_.op(op::kF64ConvertI64S);
      if (from == DType::f32) f_.op(op::kF64PromoteF32);
      break;
  }
  return keep(valType(to));
}

uint32_t KernelEmitter::identity(OpCode combiner, DType dtype, bool vector) {
  const uint64_t bits = constantBits(choir::combinerIdentity(combiner, dtype), dtype);
  const uint32_t c = pool_.get(vector ? ValType::kV128 : valType(dtype), bits, isWide(dtype) ? 64 : 32);
  // A fresh local: the accumulator changes, the pooled constant must not.
  f_.get(c);
  return keep(vector ? ValType::kV128 : valType(dtype));
}

uint32_t KernelEmitter::combine(OpCode combiner, DType dtype, uint32_t acc, uint32_t x, bool vector) {
  if (vector && dtype == DType::i32) {
    f_.get(acc);
    f_.get(x);
    f_.simdOp(i32x4Op(combiner));
    f_.set(acc);
    return acc;
  }
  if (isFloat(dtype)) {
    WasmOps o(f_, pool_, dtype == DType::f64, vector);
    uint32_t r = 0;
    switch (combiner) {
      case OpCode::kMul:
        r = o.mul(acc, x);
        break;
      case OpCode::kMax:
        r = o.max(acc, x);
        break;
      case OpCode::kMin:
        r = o.min(acc, x);
        break;
#include "compiler/choir/lowered_op_cases.inc"
      case OpCode::kNeg: case OpCode::kAbs: case OpCode::kSin: case OpCode::kCos:
      case OpCode::kExp: case OpCode::kLog: case OpCode::kSqrt: case OpCode::kTanh: case OpCode::kSigmoid:
      case OpCode::kAdd: case OpCode::kSub: case OpCode::kDiv: case OpCode::kPow: case OpCode::kLt:
      case OpCode::kLe: case OpCode::kGt: case OpCode::kGe: case OpCode::kEq: case OpCode::kNe:
      case OpCode::kWhere: case OpCode::kCast:
        r = o.add(acc, x);
        break;
    }
    f_.get(r);
    f_.set(acc);
    return acc;
  }
  const bool wide = dtype == DType::i64;
  switch (combiner) {
    case OpCode::kMax:
    case OpCode::kMin:
      f_.get(acc);
      f_.get(x);
      f_.get(acc);
      f_.get(x);
      f_.op(combiner == OpCode::kMax ? (wide ? op::kI64GtS : op::kI32GtS) : (wide ? op::kI64LtS : op::kI32LtS));
      f_.op(op::kSelect);
      break;
    case OpCode::kMul:
      f_.get(acc);
      f_.get(x);
      f_.op(wide ? op::kI64Mul : op::kI32Mul);
      break;
#include "compiler/choir/lowered_op_cases.inc"
    case OpCode::kNeg: case OpCode::kAbs: case OpCode::kSin: case OpCode::kCos:
    case OpCode::kExp: case OpCode::kLog: case OpCode::kSqrt: case OpCode::kTanh: case OpCode::kSigmoid:
    case OpCode::kAdd: case OpCode::kSub: case OpCode::kDiv: case OpCode::kPow: case OpCode::kLt:
    case OpCode::kLe: case OpCode::kGt: case OpCode::kGe: case OpCode::kEq: case OpCode::kNe:
    case OpCode::kWhere: case OpCode::kCast:
      f_.get(acc);
      f_.get(x);
      f_.op(wide ? op::kI64Add : op::kI32Add);
      break;
  }
  f_.set(acc);
  return acc;
}

absl::Status KernelEmitter::reduce(const Stmt& s) {
  const DType dtype = m_.buffers[s.buffer].dtype;
  const uint32_t acc = identity(s.combiner, dtype, false);
  const choir::LoopHeader& inner = s.domain.back();
  const bool vectorized = inner.tag == LoopTag::kVectorized && vectorizable(s.value, inner.var, dtype);
  const int lanes = lanesOf(dtype);
  constexpr int kUnroll = 4;
  constexpr int kUnrollNodes = 32;
  std::vector<uint32_t> vacc;
  if (vectorized) {
    for (int u = 0; u < kUnroll; ++u) vacc.push_back(identity(s.combiner, dtype, true));
  }
  std::function<absl::Status(size_t)> level = [&](size_t d) -> absl::Status {
    const choir::LoopHeader& h = s.domain[d];
    if (h.extent > INT32_MAX) return unimplemented(strCat("loop i", h.var, " runs past 2^31 iterations"));
    const uint32_t i = newLocal(ValType::kI32);
    vars_[h.var] = i;
    f_.i32Const(0);
    f_.set(i);
    if (d + 1 < s.domain.size()) return counted(i, i32Local(h.extent), 1, [&] { return level(d + 1); });
    rows_.clear();
    rows_active_ = true;
    prepareRows(s.value, h.var);
    const Mode scalar{false, h.var, i};
    const bool unroll = vectorized && h.extent >= kUnroll * lanes && choir::exprSize(s.value) <= kUnrollNodes;
    const int64_t after_unroll = unroll ? h.extent % (kUnroll * lanes) : h.extent;
    if (vectorized) {
      const Mode vec{true, h.var, i};
      broadcast_.clear();
      prepareBroadcasts(s.value, vec, -1);
      if (unroll) {
        // Four independent accumulators: lanes u*lanes.. of each step read
        // through a second index local.
        const uint32_t j = newLocal(ValType::kI32);
        const Mode vj{true, h.var, j};
        ACCY_RETURN_IF_ERROR(counted(i, i32Local(h.extent - (kUnroll * lanes - 1)), kUnroll * lanes,
                                     [&]() -> absl::Status {
                                       for (int u = 0; u < kUnroll; ++u) {
                                         cse_.clear();
                                         f_.get(i);
                                         if (u > 0) {
                                           f_.i32Const(u * lanes);
                                           f_.op(op::kI32Add);
                                         }
                                         f_.set(j);
                                         ACCY_ASSIGN_OR_RETURN(const uint32_t x, expr(s.value, vj));
                                         combine(s.combiner, dtype, vacc[u], x, true);
                                       }
                                       return absl::OkStatus();
                                     }));
      }
      if (after_unroll >= lanes) {
        ACCY_RETURN_IF_ERROR(counted(i, i32Local(h.extent - (lanes - 1)), lanes, [&]() -> absl::Status {
          cse_.clear();
          ACCY_ASSIGN_OR_RETURN(const uint32_t x, expr(s.value, vec));
          combine(s.combiner, dtype, vacc[0], x, true);
          return absl::OkStatus();
        }));
      }
      broadcast_.clear();
    }
    if (!vectorized || h.extent % lanes != 0) {
      ACCY_RETURN_IF_ERROR(counted(i, i32Local(h.extent), 1, [&]() -> absl::Status {
        cse_.clear();
        ACCY_ASSIGN_OR_RETURN(const uint32_t x, expr(s.value, scalar));
        combine(s.combiner, dtype, acc, x, false);
        return absl::OkStatus();
      }));
    }
    rows_active_ = false;
    rows_.clear();
    return absl::OkStatus();
  };
  ACCY_RETURN_IF_ERROR(level(0));
  if (vectorized) {
    for (int u = 1; u < kUnroll; ++u) combine(s.combiner, dtype, vacc[0], vacc[u], true);
    for (int l = 0; l < lanes; ++l) {
      f_.get(vacc[0]);
      f_.simdOp(dtype == DType::f64   ? simd::kF64x2ExtractLane
                : dtype == DType::i32 ? simd::kI32x4ExtractLane
                                      : simd::kF32x4ExtractLane);
      f_.lane(static_cast<uint8_t>(l));
      combine(s.combiner, dtype, acc, keep(valType(dtype)), false);
    }
  }
  uint32_t result = acc;
  if (s.mean_count != 0) {
    Expr div;
    div.kind = ExprKind::kOp;
    div.op = OpCode::kDiv;
    div.dtype = dtype;
    uint32_t n;
    if (isFloat(dtype)) {
      WasmOps o(f_, pool_, dtype == DType::f64, false);
      n = o.num(static_cast<double>(s.mean_count));
      ACCY_ASSIGN_OR_RETURN(result, floatOp(div, {acc, n}, false));
    } else {
      if (dtype == DType::i64) {
        f_.i64Const(s.mean_count);
      } else {
        f_.i32Const(static_cast<int32_t>(s.mean_count));
      }
      n = keep(valType(dtype));
      ACCY_ASSIGN_OR_RETURN(result, intOp(div, {acc, n}, dtype));
    }
  } else if (dtype == DType::bool_ && s.combiner == OpCode::kAdd) {
    f_.get(acc);
    f_.i32Const(0);
    f_.op(op::kI32Ne);
    result = keep(ValType::kI32);
  }
  cse_.clear();
  const uint64_t offset = pushAddress(s.buffer, s.index, Mode{});
  storeScalar(dtype, offset, result);
  return absl::OkStatus();
}

}  // namespace accy::wasm
