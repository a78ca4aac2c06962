// Byte views of caller memory, the currency of every run and launch API.
#ifndef ACCY_ACCY_BYTES_H_
#define ACCY_ACCY_BYTES_H_

#include <cstddef>
#include <span>

namespace accy {

// A read-only byte view of any contiguous range of trivially copyable
// elements: C arrays, std::array, std::vector, std::span.
template <typename Range>
std::span<const std::byte> bytes(const Range& range) {
  return std::as_bytes(std::span(std::data(range), std::size(range)));
}

// A writable byte view of a contiguous range the caller owns.
template <typename Range>
std::span<std::byte> writableBytes(Range& range) {
  return std::as_writable_bytes(std::span(std::data(range), std::size(range)));
}

// A span is a view already; a temporary one is fine.
template <typename T, size_t N>
std::span<std::byte> writableBytes(std::span<T, N> range) {
  return std::as_writable_bytes(std::span<T>(range.data(), range.size()));
}

}  // namespace accy

#endif  // ACCY_ACCY_BYTES_H_
