#include "compiler/tensor/dtype.h"

namespace accy::tensor {

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
    case DType::u32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::bool_:
      return 1;
  }
  return 0;
}

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::bool_:
      return "bool";
    case DType::u32:
      return "u32";
  }
  return "?";
}

bool isFloating(DType dtype) { return dtype == DType::f32 || dtype == DType::f64; }

bool isInteger(DType dtype) { return dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u32; }

}  // namespace accy::tensor
