// Running recorded programs on the host CPU as x86-64 machine code.
#ifndef ACCY_ACCY_CPU_H_
#define ACCY_ACCY_CPU_H_

#include <cstddef>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/cpu_backend.h"
#include "compiler/codegen/x86_64/compile.h"
#include "compiler/tensor/program.h"

namespace accy {
namespace target {
// True where compileCpu and runCpu generate code that runs in process.
#if defined(__x86_64__)
inline constexpr bool kNativeCpuArtifactsSupported = true;
#else
inline constexpr bool kNativeCpuArtifactsSupported = false;
#endif
}  // namespace target

namespace tensor {

struct CpuOptions {
  // Threads one launch may use; 0 means every hardware thread.
  int threads = 0;
};

// A program compiled for this CPU: load once, launch many times, from any
// number of threads at once.
class CpuExecutable {
 public:
  static absl::StatusOr<CpuExecutable> compile(const Program& program, const CpuOptions& options = {});

  // Runs on the caller's buffers in place; see cpu::LoadedExecutable::launch
  // for the checks (InvalidBuffer).
  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const {
    return loaded_.launch(inputs, outputs);
  }

  const executable::Executable& executable() const { return loaded_.executable(); }

 private:
  explicit CpuExecutable(cpu::LoadedExecutable loaded) : loaded_(std::move(loaded)) {}
  cpu::LoadedExecutable loaded_;
};

// Compiles `program` for this CPU and runs it once.
absl::Status runCpu(const Program& program, absl::Span<const std::span<const std::byte>> inputs,
                    absl::Span<const std::span<std::byte>> outputs, const CpuOptions& options = {});

// What the compiler makes of `program`: the scheduled Choir module and the
// x86-64 assembly listing.
absl::StatusOr<std::string> choirText(const Program& program, const CpuOptions& options = {});
absl::StatusOr<std::string> cpuAssembly(const Program& program, const CpuOptions& options = {});

}  // namespace tensor
}  // namespace accy

#endif  // ACCY_ACCY_CPU_H_
