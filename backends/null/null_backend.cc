#include "backends/null/null_backend.h"

#include "base/errors.h"

namespace accy::backends {
namespace {

class NullBackend final : public Backend {
 public:
  NullBackend() {
    info_.name = "null";
    info_.available = false;
    info_.unavailable_reason = "the null backend is a template; it runs nothing";
  }
  const DeviceInfo& info() const override { return info_; }
  using Backend::compile;
  absl::StatusOr<executable::Executable> compile(const tensor::Program&, const std::string& target,
                                                 const CompileOptions&) const override {
    return makeError(ErrorKind::kUnimplemented, "null backend: cannot compile for " + target);
  }
  absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable) const override {
    return makeError(ErrorKind::kUnimplemented, "null backend: cannot load executables");
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Backend> makeNullBackend(const BackendOptions&) { return std::make_unique<NullBackend>(); }

}  // namespace accy::backends
