// The MSL artifact a Metal host loads (docs/GPU.md, "Metal"): JSON in the
// form of the WGSL artifact, each kernel's source with what the host binds
// to it; and the description line that heads each kernel's source.
#ifndef ACCY_COMPILER_CODEGEN_MSL_ARTIFACT_H_
#define ACCY_COMPILER_CODEGEN_MSL_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/dtype.h"

namespace accy::msl {

// What a kernel takes, in its parameters' order: the buffers it uses
// (`[[buffer(b)]]`, ascending), then the thread position builtins (lid,
// wid, gid) and, where it uses SIMD-group operations, the SIMD-group
// builtins (size, count, id, lane). And the threadgroup arrays its body
// declares (dtype and elements; bools one byte each).
struct KernelInfo {
  std::vector<int> bindings;
  std::vector<std::pair<tensor::DType, int64_t>> threadgroup;
  bool simdgroups = false;
  // Whether its threads meet: threadgroup memory or SIMD-group operations.
  bool cooperative() const { return simdgroups || !threadgroup.empty(); }
};

// "// accy-msl bindings=0,2 threadgroup=f32:256,bool:64 simdgroups=1\n"
std::string infoLine(const KernelInfo& info);
// The info of a kernel's source (its first line); InvalidArtifact when the
// line is missing or malformed.
absl::StatusOr<KernelInfo> kernelInfo(std::string_view source);

// The JSON artifact of an executable of target "msl" (InvalidArgument for
// another target).
absl::StatusOr<std::string> artifactJson(const executable::Executable& exe);

}  // namespace accy::msl

#endif  // ACCY_COMPILER_CODEGEN_MSL_ARTIFACT_H_
