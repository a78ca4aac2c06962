// Program -> PTX Executable for the CUDA Driver API.
//
// Executable layout for target "ptx" (what backends/cuda loads):
//   - code: one PTX module as text (ASCII, NUL-free), `.version`, `.target`
//     and `.address_size 64` first, holding every kernel as an `.entry`
//     whose name is the launch step's `kernel`;
//   - launch_plan.steps[k].entry_offset: byte offset of kernel k's
//     `.visible .entry` line in the text (for diagnostics; the loader looks
//     the function up by name);
//   - launch_plan.steps[k].parallel_extent: blocks along x (y = z = 1);
//   - launch_plan.steps[k].group_size: threads per block along x (the entry
//     also carries `.reqntid` with the same number);
//   - every entry takes one `.param .u64` per artifact_plan buffer, in
//     buffer order (inputs, outputs and temporaries alike: global device
//     addresses), used or not.
// Kernels run in launch order on one stream.
#ifndef ACCY_COMPILER_CODEGEN_PTX_COMPILE_H_
#define ACCY_COMPILER_CODEGEN_PTX_COMPILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::ptx {

// The arithmetic modes of every target (compiler/codegen/arithmetic_mode.h):
// kFast uses the hardware approximations (sin.approx, ex2.approx, ...),
// kTf32 runs f32 `dot` on tensor cores with TF32 inputs.
using codegen::ArithmeticMode;

// What the device allows (from cuDeviceGetAttribute) and what is asked.
struct TargetInfo {
  int sm = 90;                          // compute capability, major * 10 + minor
  int ptx_version = 78;                 // ISA version * 10 (7.8 covers sm_90)
  uint32_t max_threads_per_block = 1024;
  uint32_t max_grid_x = 2147483647u;
  uint32_t warp_size = 32;
  ArithmeticMode mode = ArithmeticMode::kExact;
};

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target);

}  // namespace accy::ptx

#endif  // ACCY_COMPILER_CODEGEN_PTX_COMPILE_H_
