// Program -> x86-64 Executable: the Choir pipeline configured for the
// host (or a chosen ISA), then the emitter, then the plans.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_COMPILE_H_
#define ACCY_COMPILER_CODEGEN_X86_64_COMPILE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/cpu/fuse_limits.h"
#include "compiler/codegen/x86_64/simd.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::x64 {

// The fusion limits of this target: the CPU targets' (cpu/fuse_limits.h).
using codegen::cpuFuseLimits;

struct CompileOptions {
  // Threads a launch may use; 0 means every CPU the process may use (its
  // affinity mask and CPU quota: base/cpus.h). 1 compiles
  // without parallel loops.
  int threads = 0;
  // Instruction set; the host's best when unset.
  std::optional<Isa> isa;
  // How a scatter's loop over its indices is split across threads
  // (choir/passes/parallelize.h): each thread its columns of every row (the
  // default), or the rows of its range of the stored axis.
  choir::ScatterSplit scatter_split = choir::ScatterSplit::kColumns;
  // Fusion: off compiles every op as its own loop (for measuring what
  // fusion buys); the limits bound the fused kernels (choir/passes/fuse.h).
  bool fuse = true;
  choir::FuseLimits fuse_limits = cpuFuseLimits();
  // Elementwise kernels whose contiguous output is larger than this many
  // bytes store it with non-temporal stores, which skip reading the lines
  // in and leave the caches to the inputs: a third less memory traffic for
  // outputs that cannot stay in the cache anyway. Only light values (no
  // transcendental function or division, at most 16 nodes) stream: the
  // others are bound by arithmetic, where plain stores measured faster.
  // The default is the
  // 32 MiB of L3 one core reaches on the machines measured (a constant,
  // so that artifacts do not depend on where they were compiled); -1:
  // never.
  int64_t stream_stores_above = int64_t{32} << 20;
  // Receive the final Choir module and the assembly listing, when set.
  std::string* choir_text = nullptr;
  std::string* assembly = nullptr;
  // Sees the Choir module after each pass (choir/pipeline.h).
  choir::PassHook dump;
};

int resolveThreads(int threads);

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program,
                                                      const CompileOptions& options);

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_COMPILE_H_
