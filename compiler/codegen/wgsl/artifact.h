// The WGSL artifact a web page runs (web/accy.js; the format is in
// docs/WEB.md): JSON with the kernels' WGSL modules, the launch plan and
// the buffer descriptors.
#ifndef ACCY_COMPILER_CODEGEN_WGSL_ARTIFACT_H_
#define ACCY_COMPILER_CODEGEN_WGSL_ARTIFACT_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/executable/executable.h"

namespace accy::wgsl {

// The JSON artifact of an executable of target "wgsl" (InvalidArgument for
// another target).
absl::StatusOr<std::string> artifactJson(const executable::Executable& exe);

}  // namespace accy::wgsl

#endif  // ACCY_COMPILER_CODEGEN_WGSL_ARTIFACT_H_
