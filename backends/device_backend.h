// What the GPU device backends (vulkan, cuda) share: a device opened from
// its driver library (or the reason it could not be), the launch timeout,
// health, loading an executable as the device's program, and the device's
// description for the compile path (backends::compileOn). Each backend
// adds what is its own: its target's description and its device's name
// (describe), and any capability beyond the interface.
#ifndef ACCY_BACKENDS_DEVICE_BACKEND_H_
#define ACCY_BACKENDS_DEVICE_BACKEND_H_

#include <algorithm>
#include <any>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {

// Device: has setLaunchTimeout(std::chrono::milliseconds) and health().
// Program: Program::load(std::shared_ptr<const Device>, Executable) gives a
// std::shared_ptr<const Program>, a LoadedProgram. Target: the device's
// description, handed to its target's compile.
template <typename Device, typename Program, typename Target>
class DeviceBackend : public Backend {
 public:
  const DeviceInfo& info() const override { return info_; }
  absl::Status health() const override { return device_ != nullptr ? device_->health() : absl::OkStatus(); }

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable exe) const override {
    ACCY_RETURN_IF_ERROR(requireDevice());
    ACCY_ASSIGN_OR_RETURN(std::shared_ptr<const Program> loaded, Program::load(device_, std::move(exe)));
    return std::shared_ptr<const LoadedProgram>(std::move(loaded));
  }

  std::any deviceDescription() const override { return device_ != nullptr ? std::any(target_) : std::any(); }

  const Target& targetInfo() const { return target_; }
  const std::string& deviceName() const { return device_name_; }
  const std::shared_ptr<const Device>& device() const { return device_; }

 protected:
  // `device` as its driver opened it, or why it could not: the backend is
  // then unavailable, saying so (the message without its kind's prefix).
  DeviceBackend(std::string name, std::string target, absl::StatusOr<std::shared_ptr<Device>> device,
                const BackendOptions& options) {
    info_.name = std::move(name);
    info_.targets = {std::move(target)};
    info_.min_buffer_alignment = 1;  // buffers are copied; each needs its element size
    if (!device.ok()) {
      info_.unavailable_reason = messageWithoutKind(device.status());
      return;
    }
    (*device)->setLaunchTimeout(std::chrono::milliseconds(std::max<int64_t>(options.launch_timeout_ms, 0)));
    device_ = *std::move(device);
    info_.available = true;
  }

  absl::Status requireDevice() const {
    if (device_ != nullptr) return absl::OkStatus();
    return makeError(ErrorKind::kUnimplemented,
                     strCat("device ", info_.name, " is not available: ", info_.unavailable_reason));
  }

  DeviceInfo info_;
  std::shared_ptr<const Device> device_;
  Target target_;
  std::string device_name_;
};

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_DEVICE_BACKEND_H_
