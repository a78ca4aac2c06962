// How far arithmetic may deviate from the reference semantics: one enum for
// every target and every layer (emitters, backends, accyd's Compile option,
// the CLI's --mode).
//   kExact: the default everywhere; accurate instruction sequences.
//   kFast:  approximate transcendentals where a target has them (SPIR-V's
//           GLSL.std.450, PTX's .approx; x86-64 keeps its accurate code).
//   kTf32:  kExact, and f32 `dot` kernels on NVIDIA tensor cores with TF32
//           inputs; target "ptx" only, refused by name elsewhere.
#ifndef ACCY_COMPILER_CODEGEN_ARITHMETIC_MODE_H_
#define ACCY_COMPILER_CODEGEN_ARITHMETIC_MODE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace accy::codegen {

enum class ArithmeticMode : uint8_t { kExact, kFast, kTf32 };

// "exact", "fast", "tf32"; InvalidArgument naming anything else.
absl::StatusOr<ArithmeticMode> parseArithmeticMode(std::string_view name);
const char* arithmeticModeName(ArithmeticMode mode);

}  // namespace accy::codegen

#endif  // ACCY_COMPILER_CODEGEN_ARITHMETIC_MODE_H_
