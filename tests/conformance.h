// Shared checking for backend conformance: run a program on a backend and
// on the reference evaluator and compare every output element within the
// tolerance stated for its dtype.
#ifndef ACCY_TESTS_CONFORMANCE_H_
#define ACCY_TESTS_CONFORMANCE_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "accy/accy.h"
#include "gtest/gtest.h"

namespace accy::testing {

// Tolerances, justified in docs/CONFORMANCE.md: f32 backends compute in
// f32 (rounding at every op, up to 4 ulp per transcendental, reassociated
// sums) against a double-precision oracle; f64 backends differ from it by
// a few ulp per op. Integers and bools are exact.
inline double tolerance(tensor::DType dtype, double reference) {
  switch (dtype) {
    case tensor::DType::f32:
      return 2e-4 * (1 + std::fabs(reference));
    case tensor::DType::f64:
      return 1e-10 * (1 + std::fabs(reference));
    default:
      return 0;
  }
}

// Output buffers start poisoned before every run: each element a NaN whose
// payload bytes are 0xA5 for floats (f32 0x7fa5a5a5, f64
// 0x7ff5a5a5a5a5a5a5), 0xA5 bytes otherwise. A kernel that writes nothing
// then cannot pass where the evaluator says 0, NaN or true: matches()
// refuses the pattern itself (no computed NaN carries that payload) and any
// bool byte other than 0 or 1.
inline void poison(tensor::DType dtype, std::span<std::byte> bytes) {
  const int64_t size = tensor::dtypeSize(dtype);
  std::fill(bytes.begin(), bytes.end(), std::byte{0xA5});
  for (size_t e = 0; e + size <= bytes.size(); e += size) {
    if (dtype == tensor::DType::f32) bytes[e + 3] = std::byte{0x7f};
    if (dtype == tensor::DType::f64) {
      bytes[e + 7] = std::byte{0x7f};
      bytes[e + 6] = std::byte{0xf5};
    }
  }
}

// A fresh output buffer for `s`, poisoned.
inline std::vector<std::byte> poisonedOutput(const tensor::Spec& s) {
  std::vector<std::byte> out(s.byteSize());
  poison(s.dtype, out);
  return out;
}

template <typename T>
void poison(std::span<T> values) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  poison(std::is_same_v<T, float> ? tensor::DType::f32 : tensor::DType::f64, std::as_writable_bytes(values));
}

// Whether the element at `p` still holds the poison pattern.
inline bool isPoison(tensor::DType dtype, const std::byte* p) {
  std::byte pattern[8];
  poison(dtype, std::span<std::byte>(pattern, tensor::dtypeSize(dtype)));
  return std::memcmp(p, pattern, tensor::dtypeSize(dtype)) == 0;
}

// Compares `actual` (bytes of `dtype`) with `expected` element by element.
inline ::testing::AssertionResult matches(tensor::DType dtype, const std::vector<std::byte>& actual,
                                          const std::vector<std::byte>& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "size differs";
  const int64_t size = tensor::dtypeSize(dtype);
  for (size_t e = 0; e < actual.size() / size; ++e) {
    if (isPoison(dtype, &actual[e * size])) {
      return ::testing::AssertionFailure() << "element " << e << " was never written (it still holds the poison pattern)";
    }
    if (dtype == tensor::DType::bool_ && std::to_integer<int>(actual[e]) > 1) {
      return ::testing::AssertionFailure() << "element " << e << " is byte " << std::to_integer<int>(actual[e])
                                           << ", not a bool (0 or 1)";
    }
    const double a = tensor::loadElement(dtype, &actual[e * size]);
    const double x = tensor::loadElement(dtype, &expected[e * size]);
    if (std::isnan(x) && std::isnan(a)) continue;
    if (std::isinf(x) && a == x) continue;
    if (!(std::fabs(a - x) <= tolerance(dtype, x))) {
      return ::testing::AssertionFailure() << "element " << e << ": got " << a << ", evaluator says " << x
                                           << " (tolerance " << tolerance(dtype, x) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline std::vector<std::span<const std::byte>> views(const std::vector<std::vector<std::byte>>& bufs) {
  std::vector<std::span<const std::byte>> out;
  for (const auto& b : bufs) out.emplace_back(b.data(), b.size());
  return out;
}

}  // namespace accy::testing

#endif  // ACCY_TESTS_CONFORMANCE_H_
