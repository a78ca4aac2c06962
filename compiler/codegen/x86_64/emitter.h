// The x86-64 emitter: a scheduled Choir module -> position-independent
// machine code, one function per kernel, generated with asmjit.
//
// Kernel ABI (System V):
//   void kernel(void* const* buffers,   // one pointer per module buffer
//               int64_t begin, int64_t end,  // range of the cpu_parallel loop
//               const void* const* runtime); // runtime helper table
// A kernel whose outermost loop is cpu_parallel runs that loop over
// [begin, end); any other kernel ignores begin and end. The code refers to
// nothing outside itself (constants are RIP-relative, helpers come through
// `runtime`), so the bytes can be copied anywhere and compiling the same
// module twice gives the same bytes.
//
// Vector code follows the loop tags chosen by the vectorize pass; the ISA
// (SSE4.1, AVX2+FMA or AVX-512) is an option, normally the host's best.
// Ops the emitter cannot generate fail with Unimplemented naming the op.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_X86_64_EMITTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/x86_64/runtime.h"
#include "compiler/codegen/x86_64/simd.h"

namespace accy::x64 {

struct KernelEntry {
  std::string name;
  uint64_t offset = 0;           // entry point, bytes from the start of `code`
  int64_t parallel_extent = 0;   // extent of the cpu_parallel loop, 0 if none
  int64_t work = 0;              // iteration points, for scheduling
};

struct CpuArtifact {
  Isa isa = Isa::kSse41;
  std::vector<uint8_t> code;
  std::vector<KernelEntry> kernels;  // in launch order
};

struct EmitOptions {
  Isa isa = Isa::kSse41;
  // Vectorized stores to contiguous outputs of more than this many bytes
  // are non-temporal (-1: never).
  int64_t stream_stores_above = -1;
  // When set, receives the assembly listing.
  std::string* assembly = nullptr;
};

absl::StatusOr<CpuArtifact> emitModule(const choir::Module& module, const EmitOptions& options);

using KernelFn = void (*)(void* const* buffers, int64_t begin, int64_t end,
                          const void* const* runtime);

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_EMITTER_H_
