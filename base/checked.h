// Arithmetic on integers that come from a client (counts, extents, strides,
// operand numbers read off the wire): every sum and product of
// them goes through these, which say when the exact result does not fit in
// an int64_t instead of wrapping (or, for signed types, being undefined).
// The validator and shape inference check a result against its bound only
// after computing it exactly, so a client can never pass a check through a
// sum that wrapped negative.
#ifndef ACCY_BASE_CHECKED_H_
#define ACCY_BASE_CHECKED_H_

#include <cstdint>
#include <optional>

namespace accy {

// a + b, a * b, or nullopt when the exact result is outside int64_t.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace accy

#endif  // ACCY_BASE_CHECKED_H_
