#include "backends/cpu/cpu_backend.h"

#include <algorithm>

#include "backends/cpu/cpu_program.h"
#include "compiler/codegen/targets.h"
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

  using Backend::compile;
  absl::StatusOr<executable::Executable> compile(const tensor::Program& program, const std::string& target,
                                                 const CompileOptions& options) const override {
    if (target != "x86_64") {
      return makeError(ErrorKind::kCompileFailed, "cpu backend: no target " + target + "; it compiles x86_64");
    }
    ACCY_RETURN_IF_ERROR(codegen::checkMode(target, options.mode));
    // kFast: the x86-64 target has only its accurate sequences.
    // Large kernels get a parallel loop even for one thread: a launch runs
    // it in pieces where its caller may ask it to stop (base/stop.h:
    // accyd's cancelled or late calls), and as one call otherwise.
    x64::CompileOptions o;
    o.threads = std::max(threads_, 2);
    return codegen::compileFor(target, program, codegen::CompileRequest{.mode = options.mode, .device = o});
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
