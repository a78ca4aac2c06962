// The op table (ops.inc): names and categories.
#include "compiler/tensor/program.h"

namespace accy::tensor {

std::string_view opName(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad) \
  case OpCode::e:             \
    return name;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return "?";
}

OpCategory opCategory(OpCode op) {
  switch (op) {
#define ACCY_OP(e, name, cat, grad) \
  case OpCode::e:             \
    return OpCategory::cat;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
  return OpCategory::Leaf;
}

}  // namespace accy::tensor
