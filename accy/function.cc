#include "accy/function.h"

#include "compiler/tensor/status_macros.h"

namespace accy::tensor {

absl::StatusOr<Function> Function::fromProgram(Program program) {
  ACCY_RETURN_IF_ERROR(validateProgram(program));
  return Function(std::move(program));
}

}  // namespace accy::tensor
