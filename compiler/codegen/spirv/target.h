// SPIR-V as a target of the one GPU kernel emitter (compiler/codegen/gpu):
// one GPU-mapped Choir kernel -> one SPIR-V module (see compile.h for the
// executable layout and passes/gpu_map.h for the mapping it follows).
#ifndef ACCY_COMPILER_CODEGEN_SPIRV_TARGET_H_
#define ACCY_COMPILER_CODEGEN_SPIRV_TARGET_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/spirv/compile.h"

namespace accy::spirv {

struct TranslatedKernel {
  std::vector<uint32_t> words;
  int64_t workgroups = 1;  // to dispatch along x
};

absl::StatusOr<TranslatedKernel> translateKernel(const choir::Module& module, const choir::Kernel& kernel,
                                                 const TargetInfo& target);

}  // namespace accy::spirv

#endif  // ACCY_COMPILER_CODEGEN_SPIRV_TARGET_H_
