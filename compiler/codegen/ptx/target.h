// PTX as a target of the one GPU kernel emitter (compiler/codegen/gpu): one
// GPU-mapped Choir kernel -> one `.visible .entry` (see compile.h for the
// executable layout and passes/gpu_map.h for the four forms it implements).
#ifndef ACCY_COMPILER_CODEGEN_PTX_TARGET_H_
#define ACCY_COMPILER_CODEGEN_PTX_TARGET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/ptx/compile.h"

namespace accy::ptx {

struct KernelOptions {
  TargetInfo target;
  // `dot` kernel in kTf32 mode: the tiled product on tensor cores
  // (mma.sync m16n8k8 tf32); translateKernel refuses, naming the kernel and
  // why, when the kernel cannot be computed that way.
  bool tf32 = false;
  // 64-bit index arithmetic even where every count fits 31 bits (it is
  // chosen by itself for larger buffers and loops); for tests.
  bool wide_indices = false;
};

struct TranslatedKernel {
  std::string text;        // the `.visible .entry` through its closing brace
  int64_t blocks = 1;      // to launch along x
  int64_t work = 0;        // iteration points (outputs x domain)
  int min_ptx_version = 0; // PTX ISA version * 10 its instructions need
  int min_sm = 0;          // compute capability its instructions need
};

absl::StatusOr<TranslatedKernel> translateKernel(const choir::Module& module, const choir::Kernel& kernel,
                                                 const KernelOptions& options);

}  // namespace accy::ptx

#endif  // ACCY_COMPILER_CODEGEN_PTX_TARGET_H_
