// Executables as bytes, for accyd's disk cache: serialize, and parse back
// with every plan re-validated (InvalidProgram on anything inconsistent).
#ifndef ACCY_COMPILER_EXECUTABLE_CODEC_H_
#define ACCY_COMPILER_EXECUTABLE_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/executable/executable.h"

namespace accy::executable {

std::string serializeExecutable(const Executable& exe);
absl::StatusOr<Executable> parseExecutable(std::string_view bytes);

}  // namespace accy::executable

#endif  // ACCY_COMPILER_EXECUTABLE_CODEC_H_
