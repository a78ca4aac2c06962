// What every GPU target's compileProgram does around its kernels: the
// program through the pipeline with the GPU mapping, verified; an
// executable with the module's buffer plan and the program's specs; each
// kernel's code appended with its launch step.
#ifndef ACCY_COMPILER_CODEGEN_GPU_GPU_PROGRAM_H_
#define ACCY_COMPILER_CODEGEN_GPU_GPU_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/pipeline.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::gpu {

// The program through the compile pipeline with the target's GPU mapping
// options, verified.
// `max_kernel_buffers`: the storage buffers one kernel may bind (fusion
// stays within it: choir::FuseLimits::max_buffers); 0 for no bound.
absl::StatusOr<choir::Module> mapProgram(const tensor::Program& program, const choir::GpuMapOptions& map,
                                         const choir::PassHook& dump, int64_t max_kernel_buffers = 0);

// An executable of `target` and `isa` with `m`'s buffers and no code yet.
executable::Executable gpuExecutable(std::string target, std::string isa, const choir::Module& m,
                                     const tensor::Program& program);

// Appends kernel `k`'s code and its launch step (entry offset: where the
// code starts).
void appendKernel(executable::Executable& exe, const choir::Kernel& k, std::span<const uint8_t> code,
                  int64_t workgroups, int64_t work);

// What a source target (MSL, WGSL) emits for one kernel: the emitter's
// result and the kernel's source text.
struct KernelText {
  int64_t workgroups = 1;
  int64_t work = 0;
  std::string text;
};
using EmitKernelText = std::function<absl::StatusOr<KernelText>(const choir::Module&, const choir::Kernel&)>;

// The one compile path of the source targets: the program mapped for a GPU
// with workgroups of at most `max_workgroup_size`, an executable of
// `target` and `isa`, and each kernel's text from `emit` appended in order.
absl::StatusOr<executable::Executable> compileSourceProgram(const tensor::Program& program,
                                                           int64_t max_workgroup_size, std::string target,
                                                           std::string isa, const choir::PassHook& dump,
                                                           const EmitKernelText& emit, int64_t max_kernel_buffers = 0);

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_GPU_PROGRAM_H_
