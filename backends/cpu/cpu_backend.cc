#include "backends/cpu/cpu_backend.h"

#include <algorithm>

#include "backends/cpu/cpu_program.h"
#include "compiler/codegen/x86_64/compile.h"
#include "base/errors.h"
#include "base/status_macros.h"

namespace accy::backends {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options) : threads_(x64::resolveThreads(options.threads)) {
    info_.name = "cpu";
    info_.targets = {"x86_64"};
    info_.min_buffer_alignment = 1;  // each buffer needs its element size
#if defined(__x86_64__)
    info_.available = true;
#else
    info_.unavailable_reason = "x86-64 code cannot run on this host";
#endif
  }
  const DeviceInfo& info() const override { return info_; }

  // Large kernels get a parallel loop even for one thread: a launch runs
  // it in pieces where its caller may ask it to stop (base/stop.h:
  // accyd's cancelled or late calls), and as one call otherwise. (kFast:
  // the x86-64 target has only its accurate sequences.)
  std::any deviceDescription() const override {
    x64::CompileOptions o;
    o.threads = std::max(threads_, 2);
    return o;
  }

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable exe) const override {
    ACCY_ASSIGN_OR_RETURN(cpu::LoadedExecutable loaded, cpu::LoadedExecutable::load(std::move(exe), threads_));
    return std::shared_ptr<const LoadedProgram>(std::make_shared<cpu::LoadedExecutable>(std::move(loaded)));
  }

 private:
  int threads_;
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options) { return std::make_unique<CpuBackend>(options); }

}  // namespace accy::backends
