#include "compiler/codegen/wasm/wasm_ops.h"

#include <utility>

namespace accy::wasm {

uint32_t ConstantPool::get(ValType t, uint64_t bits, int lane_bits) {
  const auto key = std::make_tuple(t, bits, lane_bits);
  if (auto it = locals_.find(key); it != locals_.end()) return it->second;
  const uint32_t local = f_.local(t);
  std::swap(f_.code(), prologue_);
  switch (t) {
    case ValType::kI32:
      f_.i32Const(static_cast<int32_t>(bits));
      break;
    case ValType::kI64:
      f_.i64Const(static_cast<int64_t>(bits));
      break;
    case ValType::kF32: {
      float v;
      const uint32_t b32 = static_cast<uint32_t>(bits);
      std::memcpy(&v, &b32, 4);
      f_.f32Const(v);
      break;
    }
    case ValType::kF64: {
      double v;
      std::memcpy(&v, &bits, 8);
      f_.f64Const(v);
      break;
    }
    case ValType::kV128: {
      uint8_t bytes[16];
      for (int i = 0; i < 16; i += lane_bits / 8) std::memcpy(bytes + i, &bits, lane_bits / 8);
      f_.v128Const(bytes);
      break;
    }
  }
  f_.set(local);
  std::swap(f_.code(), prologue_);
  locals_[key] = local;
  return local;
}

WasmOps::Vec WasmOps::unary(Vec a, uint8_t f32, uint8_t f64, uint32_t v32, uint32_t v64) {
  f_.get(a);
  if (vector_) {
    f_.simdOp(f64_ ? v64 : v32);
  } else {
    f_.op(f64_ ? f64 : f32);
  }
  return keep(laneType());
}

WasmOps::Vec WasmOps::binary(Vec a, Vec b, uint8_t f32, uint8_t f64, uint32_t v32, uint32_t v64) {
  f_.get(a);
  f_.get(b);
  if (vector_) {
    f_.simdOp(f64_ ? v64 : v32);
  } else {
    f_.op(f64_ ? f64 : f32);
  }
  return keep(laneType());
}

WasmOps::Vec WasmOps::integer(Vec a, Vec b, uint8_t i32, uint8_t i64, uint32_t v) {
  if (vector_) {
    f_.get(a);
    f_.get(b);
    f_.simdOp(v);
    return keep(ValType::kV128);
  }
  const uint8_t to_int = f64_ ? op::kI64ReinterpretF64 : op::kI32ReinterpretF32;
  f_.get(a);
  f_.op(to_int);
  f_.get(b);
  f_.op(to_int);
  f_.op(f64_ ? i64 : i32);
  f_.op(f64_ ? op::kF64ReinterpretI64 : op::kF32ReinterpretI32);
  return keep(laneType());
}

WasmOps::Vec WasmOps::shift(Vec a, int n, uint8_t i32, uint8_t i64, uint32_t v32, uint32_t v64) {
  f_.get(a);
  if (vector_) {
    f_.i32Const(n);
    f_.simdOp(f64_ ? v64 : v32);
    return keep(ValType::kV128);
  }
  f_.op(f64_ ? op::kI64ReinterpretF64 : op::kI32ReinterpretF32);
  if (f64_) {
    f_.i64Const(n);
  } else {
    f_.i32Const(n);
  }
  f_.op(f64_ ? i64 : i32);
  f_.op(f64_ ? op::kF64ReinterpretI64 : op::kF32ReinterpretI32);
  return keep(laneType());
}

WasmOps::Mask WasmOps::cmp(math::Cmp p, Vec a, Vec b) {
  static constexpr uint8_t kF32[] = {op::kF32Lt, op::kF32Le, op::kF32Gt, op::kF32Ge, op::kF32Eq, op::kF32Ne};
  static constexpr uint8_t kF64[] = {op::kF64Lt, op::kF64Le, op::kF64Gt, op::kF64Ge, op::kF64Eq, op::kF64Ne};
  static constexpr uint32_t kV32[] = {simd::kF32x4Lt, simd::kF32x4Le, simd::kF32x4Gt,
                                      simd::kF32x4Ge, simd::kF32x4Eq, simd::kF32x4Ne};
  static constexpr uint32_t kV64[] = {simd::kF64x2Lt, simd::kF64x2Le, simd::kF64x2Gt,
                                      simd::kF64x2Ge, simd::kF64x2Eq, simd::kF64x2Ne};
  const int i = static_cast<int>(p);
  f_.get(a);
  f_.get(b);
  if (vector_) {
    f_.simdOp(f64_ ? kV64[i] : kV32[i]);
  } else {
    f_.op(f64_ ? kF64[i] : kF32[i]);
  }
  return keep(maskType());
}

WasmOps::Mask WasmOps::maskOp(Mask a, Mask b, uint8_t i32) {
  f_.get(a);
  f_.get(b);
  if (vector_) {
    f_.simdOp(i32 == op::kI32And ? simd::kAnd : simd::kOr);
  } else {
    f_.op(i32);
  }
  return keep(maskType());
}

WasmOps::Vec WasmOps::select(Mask m, Vec t, Vec f) {
  f_.get(t);
  f_.get(f);
  f_.get(m);
  if (vector_) {
    f_.simdOp(simd::kBitSelect);
  } else {
    f_.op(op::kSelect);
  }
  return keep(laneType());
}

}  // namespace accy::wasm
