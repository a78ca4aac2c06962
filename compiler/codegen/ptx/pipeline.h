// The steps of compileProgram (compile.h) before PTX text, for tools and
// tests: the Choir module the PTX emitter translates, and the PTX ISA
// version / .target it writes.
#ifndef ACCY_COMPILER_CODEGEN_PTX_PIPELINE_H_
#define ACCY_COMPILER_CODEGEN_PTX_PIPELINE_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::ptx {

// Lowered, fused, mapped to the GPU for `target` (passes/gpu_map.h) through
// choir's pipeline, and verified: what `accy compile --target=ptx
// --emit=choir` prints. `dump` sees the module after each pass.
absl::StatusOr<choir::Module> gpuModule(const tensor::Program& program, const TargetInfo& target,
                                        const choir::PassHook& dump = {});

// The `.target` for a device of compute capability `sm` (the newest
// architecture this emitter knows that is not newer than `sm`: PTX for
// sm_XY runs on every sm_MN >= XY) and the PTX ISA version (x10) that
// .target needs. InvalidArgument below sm_70.
struct PtxTarget {
  int sm = 0;
  int min_ptx_version = 0;
};
absl::StatusOr<PtxTarget> ptxTargetFor(int sm);

// compileProgram with choices no device makes, for tests.
struct EmitOptions {
  bool wide_indices = false;  // 64-bit index arithmetic in every kernel
  choir::PassHook dump;       // sees the module after each pass
};
absl::StatusOr<executable::Executable> compileProgramWith(const tensor::Program& program, const TargetInfo& target,
                                                          const EmitOptions& options);

}  // namespace accy::ptx

#endif  // ACCY_COMPILER_CODEGEN_PTX_PIPELINE_H_
