// The op table (ops.inc): every column, read through one function each.
#include "compiler/tensor/program.h"

namespace accy::tensor {

std::string_view opName(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return #name;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return "?";
}

OpCategory opCategory(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return OpCategory::cat;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return OpCategory::Leaf;
}

OpGradient opGradient(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return OpGradient::grad;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return OpGradient::None;
}

OpDTypes opDTypes(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return OpDTypes::dtypes;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return OpDTypes::Any;
}

OpCost opCost(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return OpCost::cost;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return OpCost::Cheap;
}

bool opIsElementary(OpCode op) {
#define ACCY_ELEMENTARY_IS_No false
#define ACCY_ELEMENTARY_IS_Fn(f) true
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return ACCY_ELEMENTARY_IS_##fn;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
#undef ACCY_ELEMENTARY_IS_No
#undef ACCY_ELEMENTARY_IS_Fn
  return false;
}

bool opTakes(OpCode op, DType dtype) {
  switch (opDTypes(op)) {
    case OpDTypes::Any:
      return true;
    case OpDTypes::Numeric:
      return dtype != DType::bool_;
    case OpDTypes::Floating:
      return isFloating(dtype);
    case OpDTypes::Integer:
      return isInteger(dtype);
    case OpDTypes::Bits:
      return isInteger(dtype) || dtype == DType::bool_;
  }
  return false;
}

}  // namespace accy::tensor
