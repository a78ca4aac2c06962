#include "backends/cuda/cuda_backend.h"

#include <algorithm>

#include "backends/cuda/cuda_program.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(const std::string& library_path, const BackendOptions& options) {
    info_.name = "cuda";
    info_.targets = {"ptx"};
    info_.min_buffer_alignment = 1;  // buffers are copied; each needs its element size
    absl::StatusOr<std::shared_ptr<cuda::CudaDevice>> device = cuda::CudaDevice::open(library_path);
    if (!device.ok()) {
      info_.unavailable_reason = messageWithoutKind(device.status());
      return;
    }
    (*device)->setLaunchTimeout(std::chrono::milliseconds(std::max<int64_t>(options.launch_timeout_ms, 0)));
    device_ = *std::move(device);
    info_.available = true;
    const cuda::DeviceLimits& l = device_->limits();
    target_.sm = l.sm;
    target_.ptx_version = std::min(cuda::maxPtxVersionForDriver(device_->driverVersion()),
                                   std::max(ptx::TargetInfo{}.ptx_version, cuda::minPtxVersionForSm(l.sm)));
    target_.max_threads_per_block = l.max_threads_per_block;
    target_.max_grid_x = l.max_grid_x;
    target_.warp_size = l.warp_size;
    const int v = device_->driverVersion();
    device_name_ = strCat(device_->name(), " (device ", device_->ordinal(), ", sm_", l.sm, ", ", l.multiprocessors,
                          " SMs, ", l.total_memory >> 30, " GiB, driver ", v / 1000, ".", v % 1000 / 10, ")");
  }

  const DeviceInfo& info() const override { return info_; }

  // cuMemHostRegister (see cuda::HostRegistration).
  absl::StatusOr<std::shared_ptr<void>> registerHostMemory(void* data, size_t size) const override {
    if (!info_.available) return std::shared_ptr<void>();
    ACCY_ASSIGN_OR_RETURN(std::unique_ptr<cuda::HostRegistration> registration,
                          cuda::registerHostMemory(device_, data, size));
    return std::shared_ptr<void>(std::move(registration));
  }

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable exe) const override {
    ACCY_RETURN_IF_ERROR(requireDevice());
    ACCY_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::CudaProgram> loaded,
                          cuda::CudaProgram::load(device_, std::move(exe)));
    return std::shared_ptr<const LoadedProgram>(std::move(loaded));
  }

  absl::Status health() const override { return device_ != nullptr ? device_->health() : absl::OkStatus(); }

  absl::Status requireDevice() const {
    if (device_ != nullptr) return absl::OkStatus();
    return makeError(ErrorKind::kUnimplemented, strCat("device cuda is not available: ", info_.unavailable_reason));
  }

  std::any deviceDescription() const override { return device_ != nullptr ? std::any(target_) : std::any(); }

  const ptx::TargetInfo& targetInfo() const { return target_; }
  const std::string& deviceName() const { return device_name_; }
  const std::shared_ptr<const cuda::CudaDevice>& device() const { return device_; }

 private:
  DeviceInfo info_;
  std::shared_ptr<const cuda::CudaDevice> device_;
  ptx::TargetInfo target_;
  std::string device_name_;
};

}  // namespace

std::unique_ptr<Backend> makeCudaBackend(const BackendOptions& options) {
  return makeCudaBackendFrom(options, cuda::kCudaLibrary);
}

std::unique_ptr<Backend> makeCudaBackendFrom(const BackendOptions& options, const std::string& library_path) {
  return std::make_unique<CudaBackend>(library_path, options);
}

ptx::TargetInfo cudaTargetInfo(const Backend& backend) {
  const auto* c = dynamic_cast<const CudaBackend*>(&backend);
  return c != nullptr && c->info().available ? c->targetInfo() : ptx::TargetInfo{};
}

std::string cudaDeviceName(const Backend& backend) {
  const auto* c = dynamic_cast<const CudaBackend*>(&backend);
  return c != nullptr ? c->deviceName() : std::string();
}

std::shared_ptr<const cuda::CudaDevice> cudaDevice(const Backend& backend) {
  const auto* c = dynamic_cast<const CudaBackend*>(&backend);
  return c != nullptr && c->info().available ? c->device() : nullptr;
}

}  // namespace accy::backends
