// Shared checking for backend conformance: run a program on a backend and
// on the reference evaluator and compare every output element within the
// tolerance stated for its dtype.
#ifndef ACCY_TESTS_CONFORMANCE_H_
#define ACCY_TESTS_CONFORMANCE_H_

#include <cmath>
#include <cstddef>
#include <span>
#include <string>
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

// Compares `actual` (bytes of `dtype`) with `expected` element by element.
inline ::testing::AssertionResult matches(tensor::DType dtype, const std::vector<std::byte>& actual,
                                          const std::vector<std::byte>& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "size differs";
  const int64_t size = tensor::dtypeSize(dtype);
  for (size_t e = 0; e < actual.size() / size; ++e) {
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
