// Element types of Accy values.
#ifndef ACCY_COMPILER_TENSOR_DTYPE_H_
#define ACCY_COMPILER_TENSOR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace accy::tensor {

// Append only: the numeric values are used by the wire format.
enum class DType : uint8_t { f32 = 0, f64 = 1, i32 = 2, i64 = 3, bool_ = 4, u32 = 5 };

// `DType::bool_` is also reachable as `tensor::kBool`; `bool` is a keyword.
inline constexpr DType kBool = DType::bool_;

// Bytes per element: 4, 8, 4, 8, 1 and 4 (bool is one byte, 0 or 1).
int64_t dtypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "bool", "u32".
std::string_view dtypeName(DType dtype);
bool isFloating(DType dtype);
// i32, i64 and u32.
bool isInteger(DType dtype);
// u32: wrapping arithmetic modulo 2^32, unsigned comparisons, division and
// shifts (docs/SEMANTICS.md).
inline bool isUnsigned(DType dtype) { return dtype == DType::u32; }
// Bits per element of an integer dtype (32 or 64).
inline int integerBits(DType dtype) { return dtype == DType::i64 ? 64 : 32; }

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_DTYPE_H_
