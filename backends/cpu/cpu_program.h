// An x86-64 executable loaded on the CPU device: run in the calling process,
// on the caller's memory.
//
// An executable is loaded once (its code copied into fresh executable
// memory and its plans validated) and launched any number of times, from
// any number of threads at once: each launch has its own scratch for
// temporaries, taken from the executable's blocks kept from earlier
// launches (at most kKeptScratch of them, each the plan's scratch size),
// so a launch in a loop does not map and fault in fresh pages each time.
// Inputs and outputs are the caller's buffers, used in place.
#ifndef ACCY_BACKENDS_CPU_CPU_PROGRAM_H_
#define ACCY_BACKENDS_CPU_CPU_PROGRAM_H_

#include <cstddef>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/backend.h"
#include "compiler/executable/executable.h"

namespace accy::cpu {

struct LoadedCode;

class LoadedExecutable final : public backends::LoadedProgram {
 public:
  // Validates `exe` (InvalidProgram) and maps its code (OutOfMemory when
  // the system refuses executable memory). Fails with Unimplemented on a
  // host that is not x86-64 or lacks the ISA the code was built for.
  static absl::StatusOr<LoadedExecutable> load(executable::Executable exe, int threads);

  // Runs every kernel in order. Buffers: exactly the executable's input and
  // output counts and byte sizes, aligned to their element size, outputs
  // disjoint from each other and from the inputs; anything else fails with
  // InvalidBuffer before any code runs.
  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override;
  // The same without the buffer checks (backend.h).
  absl::Status launchTrusted(absl::Span<const std::span<const std::byte>> inputs,
                             absl::Span<const std::span<std::byte>> outputs) const override;
  // The pointer table and scratch set up once; each run only calls the
  // kernels.
  std::unique_ptr<backends::BoundLaunch> bind() const override;

  const executable::Executable& executable() const override;

 private:
  explicit LoadedExecutable(std::shared_ptr<const LoadedCode> code) : code_(std::move(code)) {}
  std::shared_ptr<const LoadedCode> code_;
};

}  // namespace accy::cpu

#endif  // ACCY_BACKENDS_CPU_CPU_PROGRAM_H_
