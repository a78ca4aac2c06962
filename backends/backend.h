// The one interface every device runtime implements.
//
// A Backend describes its device and loads executables (validated once, at
// load) into LoadedPrograms that launch on caller buffers any number of
// times, from any number of threads. It compiles nothing and knows no
// emitter (as IREE's HAL drivers never link the compiler): compiling for a
// device is backends::compileOn (compile_program.h), which hands the
// device's description to the target registry. Backends are created from
// one explicit list in backends/registry.cc; nothing registers itself.
#ifndef ACCY_BACKENDS_BACKEND_H_
#define ACCY_BACKENDS_BACKEND_H_

#include <any>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::backends {

// A launch of one LoadedProgram with its buffers bound, run many times
// with some of them moved between runs (a loop's steps: the carries
// swapped, the xs and ys slices advanced). The caller vouches for every
// buffer it binds as for LoadedProgram::launchTrusted, and binds every
// input and output before the first run.
class BoundLaunch {
 public:
  virtual ~BoundLaunch() = default;
  virtual void bindInput(size_t i, std::span<const std::byte> buffer) = 0;
  virtual void bindOutput(size_t k, std::span<std::byte> buffer) = 0;
  virtual absl::Status run() = 0;
};

class LoadedProgram {
 public:
  virtual ~LoadedProgram() = default;
  // Runs on the caller's buffers; InvalidBuffer for wrong counts, sizes,
  // alignment or overlapping outputs, before anything runs.
  virtual absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                              absl::Span<const std::span<std::byte>> outputs) const = 0;
  // launch() for a caller that vouches for the buffers (the counts, byte
  // sizes, alignment and disjoint outputs launch checks): a staged
  // program's steps, run on buffers it made to its stages' specs
  // (staged_program.h). A backend may skip its checks here; by default it
  // does not.
  virtual absl::Status launchTrusted(absl::Span<const std::span<const std::byte>> inputs,
                                     absl::Span<const std::span<std::byte>> outputs) const {
    return launch(inputs, outputs);
  }
  // A BoundLaunch of this program. By default each run is a launchTrusted
  // of the bound buffers; a backend may set a run up once instead (the
  // CPU's pointer table and scratch).
  virtual std::unique_ptr<BoundLaunch> bind() const;
  // Runs this program as the body of a scan of `steps` steps, every step on
  // the device without a host wait between steps, where the backend can
  // (Vulkan: the steps recorded in one command buffer); nullopt where it
  // cannot, and the caller runs the steps itself. The program's inputs are
  // the carries (`carries` of them), one slice of each of `xs` values, then
  // captures; its outputs the next carries, then one slice of each y.
  // `inputs` holds the initial carries, each xs value whole (the loop's
  // axis first: slice t is the t-th of `steps` equal parts), the captures;
  // `outputs` the final carries, then each y whole (slice t the t-th part).
  // The caller vouches for the buffers, as for launchTrusted.
  struct Repeat {
    int64_t steps = 0;
    size_t carries = 0;
    size_t xs = 0;
  };
  virtual std::optional<absl::Status> launchRepeated(const Repeat& /*repeat*/,
                                                     absl::Span<const std::span<const std::byte>> /*inputs*/,
                                                     absl::Span<const std::span<std::byte>> /*outputs*/) const {
    return std::nullopt;
  }
  virtual const executable::Executable& executable() const = 0;
};

struct DeviceInfo {
  std::string name;                  // "cpu", "vulkan", "cuda", "null"
  std::vector<std::string> targets;  // artifact targets it runs: "x86_64", "spirv", "ptx"
  int64_t min_buffer_alignment = 1;
  bool available = false;
  std::string unavailable_reason;    // when !available: what is missing
};

struct CompileOptions {
  // The arithmetic mode (compiler/codegen/arithmetic_mode.h). A mode the
  // target does not compile (kTf32 on any target but "ptx") fails with the
  // target registry's InvalidArgument (codegen::checkMode,
  // compiler/codegen/targets.h); a dot kernel that cannot use tf32 fails
  // naming why.
  codegen::ArithmeticMode mode = codegen::ArithmeticMode::kExact;
};

struct BackendOptions {
  int threads = 0;  // CPU threads a launch may use; 0 means every hardware thread
  // GPU devices (vulkan): how long a launch may take on the device before
  // it counts as hung; the device is then marked lost (health(), every
  // later launch fails at once saying why). 0: no limit.
  int64_t launch_timeout_ms = 600000;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;
  virtual absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable exe) const = 0;
  // The optional host-memory capability: a handle that keeps [data, data +
  // size) registered with the device (so launches whose buffers lie in it
  // move them by DMA) until it is destroyed, which must happen before the
  // memory is unmapped. Devices with nothing to register (the default), or
  // unavailable ones, return a null handle, which is not an error. A
  // failure (the range is already registered, the driver refuses) leaves
  // launches working as before, through the driver's staging copies.
  virtual absl::StatusOr<std::shared_ptr<void>> registerHostMemory(void* /*data*/, size_t /*size*/) const {
    return std::shared_ptr<void>();
  }
  // The description of this device that a compile for it hands its target
  // (codegen::CompileRequest::device in compiler/codegen/targets.h: the
  // device's limits and features, e.g. an spirv::TargetInfo; backends::
  // compileOn). Empty (the target's defaults) where the device has nothing
  // to describe (the default) or is unavailable.
  virtual std::any deviceDescription() const { return std::any(); }
  // OK while the device can run launches; otherwise why it cannot (a GPU
  // left in a sticky error state, a lost device), which every launch then
  // reports too. accyd turns it into the device's health status.
  virtual absl::Status health() const { return absl::OkStatus(); }
};

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_BACKEND_H_
