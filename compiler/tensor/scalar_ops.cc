#include "compiler/tensor/scalar_ops.h"

#include <cmath>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "base/check.h"

namespace accy::tensor {
namespace {

int64_t toInt(double v) { return toInt64(v); }

double wrapInt(int64_t v, DType dtype) {
  if (dtype == DType::i32) return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(v)));
  if (dtype == DType::u32) return static_cast<double>(static_cast<uint32_t>(v));
  if (dtype == DType::bool_) return v != 0 ? 1.0 : 0.0;
  return static_cast<double>(v);
}

double nanAware(double a, double b, bool want_max) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return want_max ? std::max(a, b) : std::min(a, b);
}

// x shifted by a count read as unsigned in the dtype's width: a count at or
// above the width gives 0 (left, and right on u32) or the sign fill (right
// on i32 and i64).
double shifted(int64_t x, int64_t count, DType dtype, bool left) {
  const int width = integerBits(dtype);
  const uint64_t c = width == 64 ? static_cast<uint64_t>(count) : static_cast<uint32_t>(count);
  if (c >= static_cast<uint64_t>(width)) return (left || isUnsigned(dtype) || x >= 0) ? 0.0 : -1.0;
  if (left) return wrapInt(static_cast<int64_t>(static_cast<uint64_t>(x) << c), dtype);
  if (isUnsigned(dtype)) return static_cast<double>(static_cast<uint32_t>(x) >> c);
  return wrapInt(x >> c, dtype);  // arithmetic on signed (C++20)
}

}  // namespace

std::pair<uint32_t, uint32_t> threefry2x32(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1) {
  static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = c0 + k0, x1 = c1 + k1;
  for (int r = 0; r < 20; ++r) {
    x0 += x1;
    x1 = std::rotl(x1, kRotations[r % 8]) ^ x0;
    if (r % 4 == 3) {
      const uint32_t s = static_cast<uint32_t>(r / 4 + 1);
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + s;
    }
  }
  return {x0, x1};
}

double bitcastValue(double v, DType from, DType to) {
  uint64_t bits = 0;
  switch (from) {
    case DType::f32:
      bits = std::bit_cast<uint32_t>(static_cast<float>(v));
      break;
    case DType::f64:
      bits = std::bit_cast<uint64_t>(v);
      break;
    case DType::i32:
    case DType::u32:
      bits = static_cast<uint32_t>(toInt64(v));
      break;
    case DType::i64:
      bits = static_cast<uint64_t>(toInt64(v));
      break;
    case DType::bool_:
      bits = v != 0;
      break;
  }
  switch (to) {
    case DType::f32:
      return std::bit_cast<float>(static_cast<uint32_t>(bits));
    case DType::f64:
      return std::bit_cast<double>(bits);
    case DType::i32:
      return static_cast<int32_t>(static_cast<uint32_t>(bits));
    case DType::u32:
      return static_cast<uint32_t>(bits);
    case DType::i64:
      return static_cast<double>(static_cast<int64_t>(bits));
    case DType::bool_:
      return bits != 0;
  }
  return 0;
}

int64_t intPow(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent % 2 == 0) ? 1 : -1;
    return 0;  // truncated 1/base^n, and 0 for a zero base (division by zero)
  }
  uint64_t result = 1;
  uint64_t b = static_cast<uint64_t>(base);
  while (exponent > 0) {
    if (exponent & 1) result *= b;
    b *= b;
    exponent >>= 1;
  }
  return static_cast<int64_t>(result);
}

int64_t toInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (v < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

double wrapToDType(double v, DType dtype) {
  if (isFloating(dtype)) return v;
  if (dtype == DType::bool_) return v != 0 ? 1.0 : 0.0;
  const double t = std::trunc(v);
  if (std::fabs(t) < 9223372036854775808.0) return wrapInt(static_cast<int64_t>(t), dtype);
  // Beyond the int64 range: reduce modulo 2^64 first.
  const double two64 = 18446744073709551616.0;
  double m = std::fmod(t, two64);
  if (m < 0) m += two64;
  const uint64_t bits = m >= 9223372036854775808.0
                            ? static_cast<uint64_t>(m - 9223372036854775808.0) + (uint64_t{1} << 63)
                            : static_cast<uint64_t>(m);
  return wrapInt(static_cast<int64_t>(bits), dtype);
}

double applyUnary(OpCode op, DType dtype, double a) {
  const bool integer = !isFloating(dtype);
  switch (op) {
    case OpCode::kNeg:
      return integer ? wrapInt(static_cast<int64_t>(0ULL - static_cast<uint64_t>(toInt(a))), dtype)
                     : -a;
    case OpCode::kAbs:
      return integer ? wrapInt(a < 0 ? static_cast<int64_t>(0ULL - static_cast<uint64_t>(toInt(a)))
                                     : toInt(a),
                               dtype)
                     : std::fabs(a);
    case OpCode::kSin:
      return std::sin(a);
    case OpCode::kCos:
      return std::cos(a);
    case OpCode::kExp:
      return std::exp(a);
    case OpCode::kLog:
      return std::log(a);
    case OpCode::kSqrt:
      return std::sqrt(a);
    case OpCode::kTanh:
      return std::tanh(a);
    case OpCode::kSigmoid:
      return 1.0 / (1.0 + std::exp(-a));
    case OpCode::kErf:
      return std::erf(a);
    case OpCode::kFloor:
      return std::floor(a);
    case OpCode::kCeil:
      return std::ceil(a);
    case OpCode::kRound:  // half to even (the default rounding mode)
      return std::nearbyint(a);
    case OpCode::kLog1p:
      return std::log1p(a);
    case OpCode::kExpm1:
      return std::expm1(a);
    case OpCode::kBitNot:
      return dtype == DType::bool_ ? (a != 0 ? 0.0 : 1.0) : wrapInt(~toInt(a), dtype);
#define ACCY_CASES_ALL
#define ACCY_CASES_Unary 0
#include "compiler/tensor/op_cases.inc"
      break;
  }
  ACCY_CHECK(false, "applyUnary: %s is not a unary op", std::string(opName(op)).c_str());
  return 0;
}

double applyBinary(OpCode op, DType dtype, double a, double b) {
  const bool integer = !isFloating(dtype);
  const int64_t ia = integer ? toInt(a) : 0;
  const int64_t ib = integer ? toInt(b) : 0;
  auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  switch (op) {
    case OpCode::kAdd:
      return integer ? wrapInt(static_cast<int64_t>(u(ia) + u(ib)), dtype) : a + b;
    case OpCode::kSub:
      return integer ? wrapInt(static_cast<int64_t>(u(ia) - u(ib)), dtype) : a - b;
    case OpCode::kMul:
      return integer ? wrapInt(static_cast<int64_t>(u(ia) * u(ib)), dtype) : a * b;
    case OpCode::kDiv:
      if (!integer) return a / b;
      if (ib == 0) return 0;
      if (ib == -1) return wrapInt(static_cast<int64_t>(0ULL - u(ia)), dtype);
      return wrapInt(ia / ib, dtype);
    case OpCode::kMax:
      return integer ? static_cast<double>(std::max(ia, ib)) : nanAware(a, b, true);
    case OpCode::kMin:
      return integer ? static_cast<double>(std::min(ia, ib)) : nanAware(a, b, false);
    case OpCode::kPow:
      return integer ? wrapInt(intPow(ia, ib), dtype) : std::pow(a, b);
    case OpCode::kBitAnd:
      return wrapInt(ia & ib, dtype);
    case OpCode::kBitOr:
      return wrapInt(ia | ib, dtype);
    case OpCode::kBitXor:
      return wrapInt(ia ^ ib, dtype);
    case OpCode::kShiftLeft:
      return shifted(ia, ib, dtype, true);
    case OpCode::kShiftRight:
      return shifted(ia, ib, dtype, false);
    case OpCode::kLt:
      return a < b;
    case OpCode::kLe:
      return a <= b;
    case OpCode::kGt:
      return a > b;
    case OpCode::kGe:
      return a >= b;
    case OpCode::kEq:
      return a == b;
    case OpCode::kNe:
      return a != b;
#define ACCY_CASES_ALL
#define ACCY_CASES_Binary 0
#define ACCY_CASES_Compare 0
#include "compiler/tensor/op_cases.inc"
      break;
  }
  ACCY_CHECK(false, "applyBinary: %s is not a binary op", std::string(opName(op)).c_str());
  return 0;
}

double convertValue(double v, DType from, DType to) {
  switch (to) {
    case DType::f64:
      return v;
    case DType::f32:
      return static_cast<double>(static_cast<float>(v));
    case DType::bool_:
      return v != 0 ? 1.0 : 0.0;
    case DType::i32:
    case DType::i64:
    case DType::u32: {
      if (!isFloating(from)) return wrapToDType(v, to);
      if (std::isnan(v)) return 0;
      const double lo = to == DType::i32 ? -2147483648.0 : to == DType::u32 ? 0.0 : -9223372036854775808.0;
      const double hi = to == DType::i32 ? 2147483647.0 : to == DType::u32 ? 4294967295.0 : 9223372036854775807.0;
      const double t = std::trunc(v);
      return t < lo ? lo : (t > hi ? hi : t);
    }
  }
  return v;
}

}  // namespace accy::tensor
