#include "backends/backend.h"

#include "compiler/tensor/errors.h"
#include "compiler/tensor/strings.h"

namespace accy::backends {

absl::StatusOr<ArithmeticMode> parseArithmeticMode(std::string_view name) {
  if (name == "exact") return ArithmeticMode::kExact;
  if (name == "fast") return ArithmeticMode::kFast;
  if (name == "tf32") return ArithmeticMode::kTf32;
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("unknown arithmetic mode '", name, "' (exact, fast or tf32)"));
}

absl::Status tf32NeedsCuda(std::string_view target) {
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("tf32 arithmetic runs on NVIDIA tensor cores and needs CUDA (target ptx); target ", target,
                          " has no tf32 mode"));
}

const char* arithmeticModeName(ArithmeticMode mode) {
  switch (mode) {
    case ArithmeticMode::kExact:
      return "exact";
    case ArithmeticMode::kFast:
      return "fast";
    case ArithmeticMode::kTf32:
      return "tf32";
  }
  return "?";
}

}  // namespace accy::backends
