#include "compiler/codegen/arithmetic_mode.h"

#include "base/errors.h"
#include "base/strings.h"

namespace accy::codegen {

absl::StatusOr<ArithmeticMode> parseArithmeticMode(std::string_view name) {
  if (name == "exact") return ArithmeticMode::kExact;
  if (name == "fast") return ArithmeticMode::kFast;
  if (name == "tf32") return ArithmeticMode::kTf32;
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("unknown arithmetic mode '", quoted(name), "' (exact, fast or tf32)"));
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

}  // namespace accy::codegen
