#include "compiler/codegen/wasm/kernel_emitter.h"

#include <functional>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/passes/vectorize.h"
#include "compiler/choir/rewrite.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::wasm {

using choir::Affine;
using choir::DType;
using choir::Expr;
using choir::ExprKind;
using choir::OpCode;
using choir::Stmt;

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


}  // namespace

// The primitives of op_semantics.h on WebAssembly: every value is a local
// (an i32, i64, f32 or f64, or a v128 of lanes in a vector loop, where a
// bool is a lane mask). What a vector loop cannot hold (i64 lanes, casts,
// integer division) is refused; the vectorizer does not make such loops.
class Primitives {
 public:
  using Value = uint32_t;
  Primitives(FunctionBody& f, ConstantPool& pool, bool vector) : f_(f), pool_(pool), vector_(vector) {}
  const absl::Status& status() const { return error_; }

  Value constant(DType d, double v) {
    const double c = tensor::convertValue(v, DType::f64, d);
    if (vector_) {
      if (d == DType::i64) return fail("an i64 value in a vector loop");
      const uint64_t bits = d == DType::bool_ ? (c != 0 ? 0xffffffffu : 0) : constantBits(c, d);
      return pool_.get(ValType::kV128, bits, isWide(d) ? 64 : 32);
    }
    return pool_.get(valType(d), constantBits(c, d), isWide(d) ? 64 : 32);
  }
  Value arith(codegen::Arith a, DType d, Value x, Value y) {
    const int k = static_cast<int>(a);
    if (isFloat(d)) {
      WasmOps o = ops(d);
      switch (a) {
        case codegen::Arith::kAdd:
          return o.add(x, y);
        case codegen::Arith::kSub:
          return o.sub(x, y);
        case codegen::Arith::kMul:
          return o.mul(x, y);
        case codegen::Arith::kDiv:
          return o.div(x, y);
      }
    }
    if (vector_) {
      static constexpr uint32_t kV[] = {simd::kI32x4Add, simd::kI32x4Sub, simd::kI32x4Mul, 0};
      if (d != DType::i32 || kV[k] == 0) return fail(strCat(tensor::dtypeName(d), " division in a vector loop"));
      return simdBinary(kV[k], x, y);
    }
    static constexpr uint8_t k32[] = {op::kI32Add, op::kI32Sub, op::kI32Mul, op::kI32DivS};
    static constexpr uint8_t k64[] = {op::kI64Add, op::kI64Sub, op::kI64Mul, op::kI64DivS};
    if (d == DType::u32 && a == codegen::Arith::kDiv) return binary(op::kI32DivU, x, y, valType(d));
    return binary(d == DType::i64 ? k64[k] : k32[k], x, y, valType(d));
  }
  Value negate(DType d, Value x) {
    if (isFloat(d)) return ops(d).neg(x);
    if (vector_) return simdUnary(simd::kI32x4Neg, x, d);
    return arith(codegen::Arith::kSub, d, constant(d, 0), x);
  }
  Value absFloat(DType d, Value x) { return ops(d).abs(x); }
  Value sqrt(DType d, Value x) { return ops(d).sqrt(x); }
  Value compare(codegen::Cmp c, DType d, Value x, Value y) {
    const int i = static_cast<int>(c);
    if (isFloat(d)) return ops(d).cmp(static_cast<math::Cmp>(i), x, y);
    if (vector_) {
      if (d != DType::i32) return fail(strCat(tensor::dtypeName(d), " comparison in a vector loop"));
      static constexpr uint32_t kV[] = {simd::kI32x4LtS, simd::kI32x4LeS, simd::kI32x4GtS,
                                        simd::kI32x4GeS, simd::kI32x4Eq,  simd::kI32x4Ne};
      return simdBinary(kV[i], x, y);
    }
    static constexpr uint8_t k32[] = {op::kI32LtS, op::kI32LeS, op::kI32GtS, op::kI32GeS, op::kI32Eq, op::kI32Ne};
    static constexpr uint8_t kU32[] = {op::kI32LtU, op::kI32LeU, op::kI32GtU, op::kI32GeU, op::kI32Eq, op::kI32Ne};
    static constexpr uint8_t k64[] = {op::kI64LtS, op::kI64LeS, op::kI64GtS, op::kI64GeS, op::kI64Eq, op::kI64Ne};
    return binary(d == DType::i64 ? k64[i] : d == DType::u32 ? kU32[i] : k32[i], x, y, ValType::kI32);
  }
  Value isNan(DType d, Value x) { return ops(d).cmp(math::Cmp::kNe, x, x); }
  Value select(DType d, Value c, Value t, Value f) {
    f_.get(t);
    f_.get(f);
    f_.get(c);
    if (vector_) {
      f_.simdOp(simd::kBitSelect);
      return keep(ValType::kV128);
    }
    f_.op(op::kSelect);
    return keep(valType(d));
  }
  Value logicAnd(Value x, Value y) { return vector_ ? simdBinary(simd::kAnd, x, y) : binary(op::kI32And, x, y, ValType::kI32); }
  Value logicOr(Value x, Value y) { return vector_ ? simdBinary(simd::kOr, x, y) : binary(op::kI32Or, x, y, ValType::kI32); }
  // Bitwise on lanes too (v128.and/or/xor are the same on every lane type).
  Value bitAnd(DType d, Value x, Value y) { return bitwise(d, x, y, op::kI32And, op::kI64And, simd::kAnd); }
  Value bitOr(DType d, Value x, Value y) { return bitwise(d, x, y, op::kI32Or, op::kI64Or, simd::kOr); }
  Value bitXor(DType d, Value x, Value y) { return bitwise(d, x, y, op::kI32Xor, op::kI64Xor, simd::kXor); }
  // Arithmetic on i32 and i64, logical on u32.
  Value shiftRight(DType d, Value x, int n) {
    if (vector_) return fail("integer shifts in a vector loop");
    f_.get(x);
    if (d == DType::i64) {
      f_.i64Const(n);
      f_.op(op::kI64ShrS);
    } else {
      f_.i32Const(n);
      f_.op(d == DType::u32 ? op::kI32ShrU : op::kI32ShrS);
    }
    return keep(valType(d));
  }
  Value shiftLeftBy(DType d, Value x, Value n) { return shiftBy(d, x, n, op::kI32Shl, op::kI32Shl, op::kI64Shl); }
  Value shiftRightBy(DType d, Value x, Value n) { return shiftBy(d, x, n, op::kI32ShrS, op::kI32ShrU, op::kI64ShrS); }
  Value bitcast(DType from, DType to, Value v) {
    if (vector_) return fail("a bitcast in a vector loop");
    if (valType(from) == valType(to)) return v;  // i32 <-> u32
    f_.get(v);
    switch (to) {
      case DType::f32:
        f_.op(op::kF32ReinterpretI32);
        break;
      case DType::f64:
        f_.op(op::kF64ReinterpretI64);
        break;
      case DType::i64:
        f_.op(op::kI64ReinterpretF64);
        break;
      case DType::i32:
      case DType::u32:
      case DType::bool_:
        f_.op(op::kI32ReinterpretF32);
        break;
    }
    return keep(valType(to));
  }
  Value convert(DType from, DType to, Value v) {
    if (vector_) return fail("a cast in a vector loop");
    f_.get(v);
    switch (to) {
      case DType::i32:
      case DType::u32: {  // i32 <-> u32 keeps the bits
        const bool u = to == DType::u32;
        if (from == DType::i64) f_.op(op::kI32WrapI64);
        if (from == DType::f32) f_.fcOp(u ? fc::kI32TruncSatF32U : fc::kI32TruncSatF32S);
        if (from == DType::f64) f_.fcOp(u ? fc::kI32TruncSatF64U : fc::kI32TruncSatF64S);
        break;
      }
      case DType::i64:
        if (from == DType::i32) f_.op(op::kI64ExtendI32S);
        if (from == DType::u32) f_.op(op::kI64ExtendI32U);
        if (from == DType::f32) f_.fcOp(fc::kI64TruncSatF32S);
        if (from == DType::f64) f_.fcOp(fc::kI64TruncSatF64S);
        break;
      case DType::f32:
        if (from == DType::i32) f_.op(op::kF32ConvertI32S);
        if (from == DType::u32) f_.op(op::kF32ConvertI32U);
        // Through f64, as the evaluator rounds (once to f64, then to f32).
        if (from == DType::i64) f_.op(op::kF64ConvertI64S), f_.op(op::kF32DemoteF64);
        if (from == DType::f64) f_.op(op::kF32DemoteF64);
        break;
      case DType::f64:
        if (from == DType::i32) f_.op(op::kF64ConvertI32S);
        if (from == DType::u32) f_.op(op::kF64ConvertI32U);
        if (from == DType::i64) f_.op(op::kF64ConvertI64S);
        if (from == DType::f32) f_.op(op::kF64PromoteF32);
        break;
      case DType::bool_:
        return fail("a conversion to bool as a primitive");
    }
    return keep(valType(to));
  }
  // trunc_sat has exactly the cast's meaning: NaN to 0, saturating.
  Value truncateSaturating(DType from, DType to, Value v) { return convert(from, to, v); }
  // a > b ? a : b, b when unordered: pmax(b, a) = b < a ? a : b in lanes
  // (one instruction), a select of a comparison in scalar code.
  Value greaterOrSecond(DType d, Value a, Value b) {
    if (!vector_) return select(d, compare(codegen::Cmp::kGt, d, a, b), a, b);
    return simdBinary(d == DType::f64 ? simd::kF64x2Pmax : simd::kF32x4Pmax, b, a);
  }
  // a < b ? a : b, b when unordered: pmin(b, a) = a < b ? a : b.
  Value lessOrSecond(DType d, Value a, Value b) {
    if (!vector_) return select(d, compare(codegen::Cmp::kLt, d, a, b), a, b);
    return simdBinary(d == DType::f64 ? simd::kF64x2Pmin : simd::kF32x4Pmin, b, a);
  }
  Value intMax(DType d, Value x, Value y) { return vector_ ? simdBinary(simd::kI32x4MaxS, x, y) : pick(codegen::Cmp::kGt, d, x, y); }
  Value intMin(DType d, Value x, Value y) { return vector_ ? simdBinary(simd::kI32x4MinS, x, y) : pick(codegen::Cmp::kLt, d, x, y); }

  Value variable(DType d, Value init) {
    const uint32_t var = f_.local(valType(d));
    f_.get(init);
    f_.set(var);
    return var;
  }
  Value read(DType, Value var) { return var; }
  void write(DType, Value var, Value v) {
    f_.get(v);
    f_.set(var);
  }
  absl::Status loopWhile(const std::function<Value()>& cond, const std::function<absl::Status()>& body, int64_t) {
    f_.block();
    f_.loop();
    const Value c = cond();
    f_.get(c);
    f_.op(op::kI32Eqz);
    f_.op(op::kBrIf), f_.u32(1);
    ACCY_RETURN_IF_ERROR(body());
    f_.op(op::kBr), f_.u32(0);
    f_.end();
    f_.end();
    return absl::OkStatus();
  }
  Value exactMath(OpCode o, DType d, Value x, Value y) {
    WasmOps w = ops(d);
    if (std::optional<uint32_t> r = codegen::elementaryOf(w, o, x, y)) return *r;
    return fail(strCat("op ", tensor::opName(o)));
  }
  bool fastMode() const { return false; }
  std::optional<Value> fastForm(OpCode, DType, Value, Value) { return std::nullopt; }

 private:
  WasmOps ops(DType d) { return WasmOps(f_, pool_, d == DType::f64, vector_); }
  Value keep(ValType t) {
    const uint32_t r = f_.local(t);
    f_.set(r);
    return r;
  }
  Value binary(uint8_t opcode, Value x, Value y, ValType t) {
    f_.get(x);
    f_.get(y);
    f_.op(opcode);
    return keep(t);
  }
  Value simdBinary(uint32_t opcode, Value x, Value y) {
    f_.get(x);
    f_.get(y);
    f_.simdOp(opcode);
    return keep(ValType::kV128);
  }
  Value simdUnary(uint32_t opcode, Value x, DType d) {
    if (d != DType::i32) return fail(strCat(tensor::dtypeName(d), " lanes in a vector loop"));
    f_.get(x);
    f_.simdOp(opcode);
    return keep(ValType::kV128);
  }
  Value pick(codegen::Cmp c, DType d, Value x, Value y) { return select(d, compare(c, d, x, y), x, y); }
  Value bitwise(DType d, Value x, Value y, uint8_t op32, uint8_t op64, uint32_t lanes) {
    if (vector_) return d == DType::i32 ? simdBinary(lanes, x, y) : fail(strCat(tensor::dtypeName(d), " lanes in a vector loop"));
    return binary(d == DType::i64 ? op64 : op32, x, y, valType(d));
  }
  Value shiftBy(DType d, Value x, Value n, uint8_t op_i32, uint8_t op_u32, uint8_t op_i64) {
    if (vector_) return fail("integer shifts by a value in a vector loop");
    return binary(d == DType::i64 ? op_i64 : d == DType::u32 ? op_u32 : op_i32, x, n, valType(d));
  }
  Value fail(std::string what) {
    if (error_.ok()) error_ = unimplemented(what);
    return pool_.get(vector_ ? ValType::kV128 : ValType::kI32, 0, 32);
  }

  FunctionBody& f_;
  ConstantPool& pool_;
  bool vector_;
  absl::Status error_;
};


namespace {

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
    case DType::u32:
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
    case DType::u32:
    case DType::bool_:
      return ValType::kI32;
  }
  return ValType::kI32;
}

KernelEmitter::KernelEmitter(const choir::Module& module, FunctionBody& f) : LoopWalker(module), f_(f), pool_(f) {}

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
  ACCY_RETURN_IF_ERROR(walk(kernel));
  // The constants go first.
  std::vector<uint8_t> body = std::move(f_.code());
  f_.code() = pool_.prologue();
  f_.code().insert(f_.code().end(), body.begin(), body.end());
  return absl::OkStatus();
}

// Every buffer the kernel touches: its address from the table, up front.
void KernelEmitter::preloadBuffer(int buffer) {
  f_.get(0);
  f_.memory(op::kI32Load, 2, static_cast<uint64_t>(buffer) * 4);
  base_[buffer] = keep(ValType::kI32);
}

void KernelEmitter::zeroIndex(uint32_t i) {
  f_.i32Const(0);
  f_.set(i);
}

void KernelEmitter::setIndex(uint32_t i, uint32_t from) {
  f_.get(from);
  f_.set(i);
}

uint32_t KernelEmitter::limitLess(uint32_t limit, int64_t k) {
  f_.get(limit);
  f_.i32Const(static_cast<int32_t>(k));
  f_.op(op::kI32Sub);
  return keep(ValType::kI32);
}

// block { if (i >= limit) break; loop { ...; i += step; if (i < limit) continue } }
KernelEmitter::OpenLoop KernelEmitter::openLoop(uint32_t i, uint32_t limit, int64_t step) {
  f_.block();
  f_.get(i);
  f_.get(limit);
  f_.op(op::kI32GeS);
  f_.op(op::kBrIf), f_.u32(0);
  f_.loop();
  return OpenLoop{i, limit, step};
}

void KernelEmitter::closeLoop(const OpenLoop& l) {
  f_.get(l.i);
  f_.i32Const(static_cast<int32_t>(l.step));
  f_.op(op::kI32Add);
  f_.tee(l.i);
  f_.get(l.limit);
  f_.op(op::kI32LtS);
  f_.op(op::kBrIf), f_.u32(0);
  f_.end();
  f_.end();
}

absl::Status KernelEmitter::checkLoop(const choir::LoopHeader& h) {
  if (h.extent > INT32_MAX) return unimplemented(strCat("loop i", h.var, " runs past 2^31 iterations"));
  return absl::OkStatus();
}

bool KernelEmitter::vectorizable(const choir::ExprRef& e, int var, DType lane) const {
  if (!isFloat(lane) && lane != DType::i32) return false;
  bool ok = true;
  choir::visitExpr(e, [&](const Expr& x) {
    switch (x.kind) {
      case ExprKind::kLoad: {
        const int64_t c = choir::flatCoeff(m_.buffers[x.buffer], x.index, var);
        if (x.dtype != lane || (c != 0 && c != 1) || !x.bound.empty()) ok = false;
        break;
      }
      case ExprKind::kConstant:
        if (x.dtype != lane && x.dtype != DType::bool_) ok = false;
        break;
      case ExprKind::kIndex:
        ok = false;
        break;
      case ExprKind::kOp:
        if (tensor::opCategory(x.op) == tensor::OpCategory::Cast) ok = false;
        // Bools only from comparing lane values.
        if (x.dtype != lane && !(x.dtype == DType::bool_ && x.args.size() == 2 && x.args[0]->dtype == lane)) ok = false;
        if (lane == DType::i32 && x.dtype == DType::i32 && !choir::int32LaneOp(x.op)) ok = false;
        break;
    }
  });
  return ok;
}

int KernelEmitter::storeWidth(const Stmt& l, bool parallel) const {
  const Stmt& st = l.body[0];
  const DType dtype = m_.buffers[st.buffer].dtype;
  const bool vectorized = (l.loop.tag == choir::LoopTag::kVectorized || (parallel && l.loop.vector_width > 1)) &&
                          choir::flatCoeff(m_.buffers[st.buffer], st.index, l.loop.var) == 1 &&
                          vectorizable(st.value, l.loop.var, dtype);
  return vectorized ? lanesOf(dtype) : 1;
}

KernelEmitter::Mode KernelEmitter::beginVectorStore(const Stmt& l, int, const Mode& lanes) {
  broadcast_.clear();
  prepareBroadcasts(l.body[0].value, lanes, l.body[0].buffer);
  return lanes;
}

int KernelEmitter::reduceWidth(const Stmt& s) const {
  const DType dtype = m_.buffers[s.buffer].dtype;
  const choir::LoopHeader& inner = s.domain.back();
  return inner.tag == choir::LoopTag::kVectorized && vectorizable(s.value, inner.var, dtype) ? lanesOf(dtype) : 1;
}

void KernelEmitter::beginReduceBody(const Stmt& s, const Mode& lanes) {
  if (reduce_width_ <= 1) return;
  broadcast_.clear();
  prepareBroadcasts(s.value, lanes, -1);
}

void KernelEmitter::storeValue(int buffer, const std::vector<Affine>& index, uint32_t v, const Mode& mode) {
  const uint64_t offset = pushAddress(buffer, index, mode);
  if (mode.vector) {
    f_.get(v);
    f_.simdMemory(simd::kStore, 0, offset);
  } else {
    storeScalar(m_.buffers[buffer].dtype, offset, v);
  }
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

uint32_t KernelEmitter::computeRowBase(int buffer, const Affine& rest) {
  const int64_t size = tensor::dtypeSize(m_.buffers[buffer].dtype);
  f_.get(base_.at(buffer));
  Affine scaled = choir::scale(rest, size);
  scaled.constant = 0;  // the constant goes in the instruction's offset
  if (!scaled.terms.empty()) {
    pushAffine(scaled);
    f_.op(op::kI32Add);
  }
  return keep(ValType::kI32);
}

uint64_t KernelEmitter::pushAddress(int buffer, const std::vector<Affine>& index, const Mode& mode) {
  const DType dtype = m_.buffers[buffer].dtype;
  const int64_t size = tensor::dtypeSize(dtype);
  const auto [rest, c] = splitIndex(buffer, index, mode.inner_var);
  f_.get(rowBase(buffer, rest));
  if (c != 0) {
    f_.get(mode.inner);
    f_.i32Const(static_cast<int32_t>(c * size));
    f_.op(op::kI32Mul);
    f_.op(op::kI32Add);
  }
  // The constant part, and the lanes of an unrolled copy (`offset` steps of
  // the inner variable on), go in the instruction's offset; a negative one
  // (never for in-bounds accesses of a lowered module, whose constants are
  // offsets into the buffer) stays in the address.
  const int64_t constant = (rest.constant + c * mode.offset) * size;
  if (constant < 0) {
    f_.i32Const(static_cast<int32_t>(constant));
    f_.op(op::kI32Add);
    return 0;
  }
  return static_cast<uint64_t>(constant);
}

void KernelEmitter::prepareBroadcasts(const choir::ExprRef& e, const Mode& mode, int stored_buffer) {
  if (e->kind == ExprKind::kLoad && e->buffer != stored_buffer &&
      choir::flatCoeff(m_.buffers[e->buffer], e->index, mode.inner_var) == 0) {
    const int key = numbers_.number(e);
    if (broadcast_.contains(key)) return;
    const uint64_t offset = pushAddress(e->buffer, e->index, Mode{});
    f_.simdMemory(isWide(e->dtype) ? simd::kLoad64Splat : simd::kLoad32Splat, isWide(e->dtype) ? 3 : 2, offset);
    broadcast_[key] = keep(ValType::kV128);
    return;
  }
  for (const choir::ExprRef& a : e->args) prepareBroadcasts(a, mode, stored_buffer);
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


uint32_t KernelEmitter::scalarLoad(const Expr& e, const Mode& mode) {
  const uint64_t offset = pushAddress(e.buffer, e.index, mode);
  return load(e.dtype, offset);
}

uint32_t KernelEmitter::vectorLoad(const Expr& e, int key, const Mode& mode) {
  if (auto it = broadcast_.find(key); it != broadcast_.end()) return it->second;
  const int64_t c = choir::flatCoeff(m_.buffers[e.buffer], e.index, mode.inner_var);
  const uint64_t offset = pushAddress(e.buffer, e.index, mode);
  if (c == 0) {
    f_.simdMemory(isWide(e.dtype) ? simd::kLoad64Splat : simd::kLoad32Splat, isWide(e.dtype) ? 3 : 2, offset);
  } else {
    f_.simdMemory(simd::kLoad, 0, offset);
  }
  return keep(ValType::kV128);
}

Primitives KernelEmitter::prims(const Mode& mode) { return Primitives(f_, pool_, mode.vector); }

uint32_t KernelEmitter::indexValue(const Affine& a) {
  pushAffine(a);
  return keep(ValType::kI32);
}

uint32_t KernelEmitter::accumulator(OpCode combiner, DType dtype, bool vector) {
  const uint64_t bits = constantBits(choir::combinerIdentity(combiner, dtype), dtype);
  const uint32_t c = pool_.get(vector ? ValType::kV128 : valType(dtype), bits, isWide(dtype) ? 64 : 32);
  // A fresh local: the accumulator changes, the pooled constant must not.
  f_.get(c);
  return keep(vector ? ValType::kV128 : valType(dtype));
}

void KernelEmitter::assign(DType, uint32_t var, uint32_t v, bool) {
  f_.get(v);
  f_.set(var);
}

void KernelEmitter::combineLanes(OpCode combiner, DType dtype, uint32_t lanes, uint32_t& acc) {
  for (int l = 0; l < lanesOf(dtype); ++l) {
    f_.get(lanes);
    f_.simdOp(dtype == DType::f64   ? simd::kF64x2ExtractLane
              : dtype == DType::i32 ? simd::kI32x4ExtractLane
                                    : simd::kF32x4ExtractLane);
    f_.lane(static_cast<uint8_t>(l));
    combine(combiner, dtype, acc, keep(valType(dtype)), false);
  }
}

std::vector<uint32_t> KernelEmitter::laneValues(DType dtype, uint32_t lanes) {
  std::vector<uint32_t> out;
  for (int l = 0; l < lanesOf(dtype); ++l) {
    f_.get(lanes);
    f_.simdOp(dtype == DType::f64 ? simd::kF64x2ExtractLane : simd::kF32x4ExtractLane);
    f_.lane(static_cast<uint8_t>(l));
    out.push_back(keep(valType(dtype)));
  }
  return out;
}

}  // namespace accy::wasm
