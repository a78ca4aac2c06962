#include "backends/cuda/cuda_backend.h"

#include <algorithm>

#include "backends/cuda/cuda_program.h"
#include "backends/device_backend.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {
namespace {

class CudaBackend final : public DeviceBackend<cuda::CudaDevice, cuda::CudaProgram, ptx::TargetInfo> {
 public:
  CudaBackend(const std::string& library_path, const BackendOptions& options)
      : DeviceBackend("cuda", "ptx", cuda::CudaDevice::open(library_path), options) {
    if (device_ == nullptr) return;
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

  // cuMemHostRegister (see cuda::HostRegistration).
  absl::StatusOr<std::shared_ptr<void>> registerHostMemory(void* data, size_t size) const override {
    if (!info_.available) return std::shared_ptr<void>();
    ACCY_ASSIGN_OR_RETURN(std::unique_ptr<cuda::HostRegistration> registration,
                          cuda::registerHostMemory(device_, data, size));
    return std::shared_ptr<void>(std::move(registration));
  }
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
