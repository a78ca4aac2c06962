// Running recorded programs on the host CPU as x86-64 machine code.
#ifndef ACCY_ACCY_CPU_H_
#define ACCY_ACCY_CPU_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy {
namespace cpu {
class LoadedExecutable;
}
namespace backends {
class StagedProgram;
}
namespace target {
// True where compileCpu and runCpu generate code that runs in process.
#if defined(__x86_64__)
inline constexpr bool kNativeCpuArtifactsSupported = true;
#else
inline constexpr bool kNativeCpuArtifactsSupported = false;
#endif
}  // namespace target

namespace tensor {

// How a scatterAdd's loop over its indices is split across threads
// (CpuOptions::scatter_split).
enum class ScatterSplit {
  kColumns,  // each thread its columns of every row
  kRanges,   // each thread the rows of its range of the scattered axis, whole
};

struct CpuOptions {
  // Threads one launch may use; 0 means every CPU the process may use (its
  // affinity mask and CPU quota).
  int threads = 0;
  // A scan whose body is loop-free and too small to split across threads
  // runs as one kernel with its step loop inside (carries of one vector
  // held in registers; docs/SEMANTICS.md, "Loops"). Off, every scan runs
  // step by step, each step a launch of its body.
  bool scans_in_kernel = true;
  // With scans_in_kernel: when > 0, a scan runs at most about this much
  // work (backends::StageOptions::scan_kernel_work) in one launch of its
  // kernel, the rest in further launches over the steps that follow, with
  // the thread's stop check asked between them (accyd sets 2^22).
  int64_t scan_kernel_work = 0;
  // How a scatterAdd's loop over its indices is split across threads: each
  // thread its columns of every row (the default), or the rows of its
  // range of the scattered axis, whole (docs/SEMANTICS.md, "scatterAdd").
  // The bits are the same either way, at every thread count.
  ScatterSplit scatter_split = ScatterSplit::kColumns;
};

// A program compiled for this CPU: load once, launch many times, from any
// number of threads at once.
class CpuExecutable {
 public:
  static absl::StatusOr<CpuExecutable> compile(const Program& program, const CpuOptions& options = {});

  // Runs on the caller's buffers in place; see cpu::LoadedExecutable::launch
  // for the checks (InvalidBuffer).
  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const;

  // The compiled code and plans. A program with loops runs as stages
  // (backends/staged_program.h): then this holds only its target, inputs
  // and outputs, and stages() the rest.
  const executable::Executable& executable() const;
  // The staged plan of a program with loops (backends/staged_program.h);
  // null for one without.
  const backends::StagedProgram* stages() const { return staged_.get(); }

  // The compiled program as bytes that restore() turns back into an
  // executable without compiling (compiler/executable/saved_program.h: the
  // machine code and plans, this compiler's build record, a SHA-256).
  // Needs a build with a record (a stamped build, `make release`):
  // UnrecordedCompilerBuild otherwise.
  absl::StatusOr<std::string> save() const;
  // The same into `path` (written whole, then renamed into place).
  absl::Status saveToFile(const std::string& path) const;
  // Saved bytes back into an executable. UnrecordedCompilerBuild in a build
  // without a record; InvalidArgument for bytes that are not a saved
  // program, are truncated or damaged; UnsupportedVersion naming what
  // differs when another compiler build saved them; Unimplemented naming
  // both ISAs when this CPU cannot run the code. Nothing runs unless all
  // of it holds. Restored bytes become machine code: restore only bytes
  // you trust as you would a library you load.
  static absl::StatusOr<CpuExecutable> restore(std::string_view bytes, const CpuOptions& options = {});
  static absl::StatusOr<CpuExecutable> restoreFromFile(const std::string& path, const CpuOptions& options = {});
  // A restored (or otherwise obtained) x86_64 executable, checked against
  // this CPU and loaded.
  static absl::StatusOr<CpuExecutable> load(executable::Executable exe, const CpuOptions& options = {});

 private:
  explicit CpuExecutable(std::shared_ptr<const cpu::LoadedExecutable> loaded) : loaded_(std::move(loaded)) {}
  CpuExecutable(std::shared_ptr<const backends::StagedProgram> staged, executable::Executable info)
      : staged_(std::move(staged)), staged_info_(std::move(info)) {}
  std::shared_ptr<const cpu::LoadedExecutable> loaded_;
  std::shared_ptr<const backends::StagedProgram> staged_;
  executable::Executable staged_info_;
};

// Any compiled executable (a GPU target's from Function::compile, or a CPU
// one) saved as bytes and restored without compiling, under the rules of
// CpuExecutable::save and restore: UnrecordedCompilerBuild in a build
// without a record, damaged, truncated and foreign bytes or another
// compiler build refused by name. A GPU executable is checked again by the
// backend that loads it (its device's limits and features).
absl::StatusOr<std::string> saveExecutable(const executable::Executable& exe);
absl::StatusOr<executable::Executable> restoreExecutable(std::string_view bytes);
// The same through a file (written whole, then renamed into place); errors
// name the file.
absl::Status saveExecutableToFile(const executable::Executable& exe, const std::string& path);
absl::StatusOr<executable::Executable> restoreExecutableFromFile(const std::string& path);

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
