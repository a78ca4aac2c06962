// Element types of Accy values.
#ifndef ACCY_COMPILER_TENSOR_DTYPE_H_
#define ACCY_COMPILER_TENSOR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace accy::tensor {

// Append only: the numeric values are used by the wire format.
enum class DType : uint8_t { f32 = 0, f64 = 1, i32 = 2, i64 = 3, bool_ = 4 };

// `DType::bool_` is also reachable as `tensor::kBool`; `bool` is a keyword.
inline constexpr DType kBool = DType::bool_;

// Bytes per element: 4, 8, 4, 8 and 1 (bool is one byte, 0 or 1).
int64_t dtypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "bool".
std::string_view dtypeName(DType dtype);
bool isFloating(DType dtype);

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_DTYPE_H_
