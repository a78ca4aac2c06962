// Runs MSL executables on the CPU, to check the MSL emitter against the
// reference evaluator where no Metal device exists (docs/GPU.md, "Metal"):
// each load writes the kernels into one C++ file beside a stand-in for
// <metal_stdlib> (tools/msl/metal_stdlib), compiles it with clang++ (the
// generated code with warnings as errors, undefined behaviour trapping:
// a kernel that overflows a signed integer stops the process) into a
// shared library and loads it. A launch runs every threadgroup of a kernel whose threads meet
// (threadgroup memory, barriers, SIMD-group shuffles) as that many fibers,
// each thread with its own stack, switching where a thread waits at a
// barrier (SIMD groups of 32 exchange values through barriers of their
// own): every thread waits until all of its group arrive, and threads that
// cannot all arrive fail the launch at once. Kernels whose threads never
// meet run their threads' work on a few CPU threads.
//
// A check of the emitter, not a Metal device: Apple's compiler and GPUs are
// not involved. Not part of the library; used by tests/msl_conformance_test
// and `accy run --target=msl`.
#ifndef ACCY_TOOLS_MSL_SHIM_H_
#define ACCY_TOOLS_MSL_SHIM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "backends/backend.h"

namespace accy::mslshim {

// What the shim's threads did, since the process started.
struct ShimStats {
  int64_t barriers = 0;  // threadgroup_barrier calls
  int64_t shuffles = 0;  // simd_shuffle_down calls
  int64_t threads = 0;   // fibers started as a threadgroup's threads
};
ShimStats stats();

// clang++'s path ($ACCY_CLANG, else clang++ on the usual paths), or empty.
std::string clangPath();

struct Library;  // one clang++ run's kernels, loaded

// The shim as a backend of target "msl". Loading compiles; the library's
// files live in `work_dir` (which must exist) while it is loaded.
class ShimBackend final : public backends::Backend {
 public:
  explicit ShimBackend(std::string work_dir);
  const backends::DeviceInfo& info() const override { return info_; }
  // CompileFailed with clang's first error lines when the source does not
  // compile (the source is kept in the work directory and named).
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> load(executable::Executable exe) const override;

  // Compiles many executables' kernels in one clang++ run for every
  // `per_library` of them (a suite's hundreds of programs pay clang++'s
  // start and the header's parse once, not each); a later load of one of
  // them takes its kernels from that library. An executable the shim
  // refuses, or a run clang++ refuses, is left for load to compile alone
  // (and to report, by name).
  absl::Status preload(std::span<const executable::Executable> exes, size_t per_library = 64) const;

  // Seconds spent in clang++ and loads so far; programs loaded and clang++
  // runs.
  double compileSeconds() const { return *compile_seconds_; }
  int loads() const { return *loads_; }
  int compiles() const { return *compiles_; }

 private:
  absl::StatusOr<std::shared_ptr<Library>> compileLibrary(const std::string& units) const;

  struct Preloaded {
    std::mutex mutex;
    // An executable's untagged source -> the library holding it, its tag.
    std::map<std::string, std::pair<std::shared_ptr<Library>, std::string>> libraries;
  };
  std::string work_dir_;
  backends::DeviceInfo info_;
  std::shared_ptr<double> compile_seconds_ = std::make_shared<double>(0);
  std::shared_ptr<int> loads_ = std::make_shared<int>(0);
  std::shared_ptr<int> compiles_ = std::make_shared<int>(0);
  std::shared_ptr<Preloaded> preloaded_ = std::make_shared<Preloaded>();
};

}  // namespace accy::mslshim

#endif  // ACCY_TOOLS_MSL_SHIM_H_
