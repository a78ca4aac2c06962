// What every GPU target's compileProgram does around its kernels: the
// program through the pipeline with the GPU mapping, verified; an
// executable with the module's buffer plan and the program's specs; each
// kernel's code appended with its launch step.
#ifndef ACCY_COMPILER_CODEGEN_GPU_GPU_PROGRAM_H_
#define ACCY_COMPILER_CODEGEN_GPU_GPU_PROGRAM_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/pipeline.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::gpu {

// `pipeline.gpu_map` must be set (the target's mapping options).
absl::StatusOr<choir::Module> mapProgram(const tensor::Program& program, const choir::PipelineOptions& pipeline);

// An executable of `target` and `isa` with `m`'s buffers and no code yet.
executable::Executable gpuExecutable(std::string target, std::string isa, const choir::Module& m,
                                     const tensor::Program& program);

// Appends kernel `k`'s code and its launch step (entry offset: where the
// code starts).
void appendKernel(executable::Executable& exe, const choir::Kernel& k, std::span<const uint8_t> code,
                  int64_t workgroups, int64_t work);

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_GPU_PROGRAM_H_
