// The JSON artifact of the GPU targets whose host compiles kernel source at
// load time (WGSL in a web page, MSL on a Metal device): one form for both
// (docs/WEB.md, docs/GPU.md): the format, the ISA, the buffers, one entry
// per kernel (its name, workgroups and workgroup size, then the target's
// own fields), and the inputs' and outputs' specs.
#ifndef ACCY_COMPILER_EXECUTABLE_ARTIFACT_JSON_H_
#define ACCY_COMPILER_EXECUTABLE_ARTIFACT_JSON_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::executable {

// `s` as a JSON string, quoted and escaped.
std::string jsonString(std::string_view s);

// `s` as JSON: {"dtype": "f32", "axes": [{"name": "n", "extent": 8}]}.
std::string specJson(const tensor::Spec& s);

// Kernel k's source: the code from its entry offset to the next kernel's.
std::string_view kernelSource(const executable::Executable& exe, size_t k);

// The artifact of `exe`, whose target must be `target` (else
// InvalidArgument). `kernel_fields(k, source)` writes the target's fields of
// kernel k (", \"wgsl\": ..."), each starting with a comma; `extra_fields`
// (each starting with a comma) follow the ISA at the top level.
absl::StatusOr<std::string> artifactJson(
    const executable::Executable& exe, std::string_view target, std::string_view format,
    const std::function<absl::StatusOr<std::string>(size_t k, std::string_view source)>& kernel_fields,
    std::string_view extra_fields = "");

}  // namespace accy::executable

#endif  // ACCY_COMPILER_EXECUTABLE_ARTIFACT_JSON_H_
