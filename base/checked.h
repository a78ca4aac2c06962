// Arithmetic on integers that come from a client (counts, extents, strides,
// operand numbers read off the wire): every sum, difference and product of
// them goes through these, which say when the exact result does not fit in
// an int64_t instead of wrapping (or, for signed types, being undefined).
// The validator and shape inference check a result against its bound only
// after computing it exactly, so a client can never pass a check through a
// sum that wrapped negative.
#ifndef ACCY_BASE_CHECKED_H_
#define ACCY_BASE_CHECKED_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>

namespace accy {

// a + b, a - b, a * b, or nullopt when the exact result is outside int64_t.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checkedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// The sum of every term, or nullopt when it or a partial sum overflows.
inline std::optional<int64_t> checkedSum(std::initializer_list<int64_t> terms) {
  int64_t total = 0;
  for (int64_t t : terms) {
    if (__builtin_add_overflow(total, t, &total)) return std::nullopt;
  }
  return total;
}

// Whether `index` names one of `size` things: 0 <= index < size, compared
// without converting a negative index to a huge unsigned one.
inline bool inRange(int64_t index, size_t size) { return index >= 0 && static_cast<uint64_t>(index) < size; }

// Whether `count` things starting at `first` lie within `size`
// (0 <= first, 0 <= count, first + count <= size), computed exactly.
inline bool spanInRange(int64_t first, int64_t count, size_t size) {
  if (first < 0 || count < 0) return false;
  const std::optional<int64_t> end = checkedAdd(first, count);
  return end.has_value() && static_cast<uint64_t>(*end) <= size;
}

}  // namespace accy

#endif  // ACCY_BASE_CHECKED_H_
