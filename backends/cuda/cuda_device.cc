#include "backends/cuda/cuda_device.h"

#include <algorithm>
#include <vector>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::cuda {
namespace {

absl::Status unavailable(std::string what) { return makeError(ErrorKind::kUnimplemented, what); }

// `status` as Unimplemented, its message without its kind prefix, after `context`.
absl::Status unavailableBecause(const std::string& context, const absl::Status& status) {
  return unavailable(strCat(context, messageWithoutKind(status)));
}

std::string versionText(int v) { return strCat(v / 1000, ".", v % 1000 / 10); }

struct Candidate {
  int ordinal = -1;
  CUdevice device = 0;
  std::string name;
  DeviceLimits limits;
};

absl::StatusOr<Candidate> describe(const CudaFunctions& cu, int ordinal) {
  Candidate c;
  c.ordinal = ordinal;
  ACCY_CU_CALL(cu, cuDeviceGet, &c.device, ordinal);
  char name[256] = {};
  ACCY_CU_CALL(cu, cuDeviceGetName, name, static_cast<int>(sizeof(name) - 1), c.device);
  c.name = name;
  auto attribute = [&](CUdevice_attribute a, int* value) -> absl::Status {
    ACCY_CU_CALL(cu, cuDeviceGetAttribute, value, a, c.device);
    return absl::OkStatus();
  };
  int major = 0, minor = 0, sms = 0, threads = 0, block_x = 0, grid_x = 0, warp = 0, can_map = 0, can_register = 0;
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &threads));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &block_x));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &grid_x));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE, &warp));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, &can_map));
  ACCY_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, &can_register));
  size_t memory = 0;
  ACCY_CU_CALL(cu, cuDeviceTotalMem, &memory, c.device);
  c.limits.sm = major * 10 + minor;
  c.limits.multiprocessors = sms;
  c.limits.max_threads_per_block = static_cast<uint32_t>(std::max(0, std::min(threads, block_x)));
  c.limits.max_grid_x = static_cast<uint32_t>(std::max(0, grid_x));
  c.limits.warp_size = static_cast<uint32_t>(std::max(0, warp));
  c.limits.total_memory = memory;
  c.limits.host_register = can_map != 0 && can_register != 0;
  return c;
}

}  // namespace

absl::StatusOr<std::shared_ptr<CudaDevice>> CudaDevice::open(const std::string& library_path) {
  ACCY_ASSIGN_OR_RETURN(std::shared_ptr<const CudaLibrary> library, CudaLibrary::open(library_path));
  // What is acquired below is released by ~CudaDevice on any early return.
  std::shared_ptr<CudaDevice> d(new CudaDevice());
  d->library_ = library;
  const CudaFunctions& cu = library->functions();

  const CUresult init = cu.cuInit(0);
  if (init != CUDA_SUCCESS) {
    return unavailableBecause(init == CUDA_ERROR_NO_DEVICE ? "no CUDA device: " : "the CUDA driver did not start: ",
                              cudaError(init, "cuInit", __FILE__, __LINE__, &cu));
  }
  ACCY_CU_CALL(cu, cuDriverGetVersion, &d->driver_version_);
  int count = 0;
  ACCY_CU_CALL(cu, cuDeviceGetCount, &count);
  if (count <= 0) {
    return unavailable(strCat("no CUDA device (the CUDA ", versionText(d->driver_version_), " driver in ", library_path,
                              " found none)"));
  }

  // The device with the most multiprocessors; the lowest ordinal on a tie.
  Candidate best;
  std::string skipped;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    ACCY_ASSIGN_OR_RETURN(Candidate c, describe(cu, ordinal));
    int mode = CU_COMPUTEMODE_DEFAULT;
    ACCY_CU_CALL(cu, cuDeviceGetAttribute, &mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, c.device);
    if (mode == CU_COMPUTEMODE_PROHIBITED) {
      strAppend(&skipped, skipped.empty() ? "" : "; ", "device ", ordinal, " (", c.name,
                ") is in compute mode 'prohibited'");
      continue;
    }
    if (best.ordinal < 0 || c.limits.multiprocessors > best.limits.multiprocessors) best = std::move(c);
  }
  if (best.ordinal < 0) return unavailable(strCat("no usable CUDA device: ", skipped));

  d->ordinal_ = best.ordinal;
  d->device_ = best.device;
  d->name_ = best.name;
  d->limits_ = best.limits;
  CUcontext context = nullptr;
  ACCY_CU_CALL(cu, cuDevicePrimaryCtxRetain, &context, d->device_);
  d->context_ = context;
  return d;
}

CudaDevice::~CudaDevice() {
  if (context_ != nullptr) cu().cuDevicePrimaryCtxRelease(device_);
}

void CudaDevice::markLost(absl::Status why) const {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (lost_.ok()) lost_ = std::move(why);
}

void CudaDevice::park(std::shared_ptr<void> resources) const {
  // Never freed: freeing memory a hung kernel may still use would wait on
  // it, or worse. A lost device is the process's until it restarts.
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(resources));
}

absl::Status CudaDevice::health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return lost_;
}

void CudaDevice::probeAfterFailure(const absl::Status& failure) const {
  if (!health().ok()) return;
  CUresult r;
  {
    ContextScope scope(*this);
    if (!scope.status().ok()) {
      r = CUDA_ERROR_INVALID_CONTEXT;
    } else {
      CUdeviceptr probe = 0;
      r = cu().cuMemAlloc(&probe, 256);
      if (r == CUDA_SUCCESS) cu().cuMemFree(probe);
    }
  }
  if (r == CUDA_SUCCESS) return;
  const absl::Status probed = cudaError(r, "cuMemAlloc (probe)", __FILE__, __LINE__, &cu());
  std::lock_guard<std::mutex> lock(health_mu_);
  lost_ = makeError(ErrorKind::kLaunchFailed,
                    strCat("CUDA device ", ordinal_, " (", name_, ") is lost: after ", failure.message(),
                           ", a probe failed too (", probed.message(),
                           "); its context runs nothing more until the process restarts"));
}

ContextScope::ContextScope(const CudaDevice& device) : cu_(device.cu()) {
  const CUresult r = cu_.cuCtxPushCurrent(device.context());
  if (r == CUDA_SUCCESS) {
    pushed_ = true;
  } else {
    status_ = cudaError(r, "cuCtxPushCurrent", __FILE__, __LINE__, &cu_);
  }
}

ContextScope::~ContextScope() {
  if (pushed_) {
    CUcontext popped = nullptr;
    cu_.cuCtxPopCurrent(&popped);
  }
}

HostRegistration::~HostRegistration() {
  ContextScope scope(*device_);
  if (scope.status().ok()) device_->cu().cuMemHostUnregister(data_);
}

absl::StatusOr<std::unique_ptr<HostRegistration>> registerHostMemory(std::shared_ptr<const CudaDevice> device,
                                                                     void* data, size_t size) {
  if (data == nullptr || size == 0) {
    return makeError(ErrorKind::kInvalidBuffer, "cannot register an empty host range with a CUDA device");
  }
  if (!device->limits().host_register) {
    return unavailable(
        strCat("CUDA device ", device->ordinal(), " (", device->name(), ") cannot map registered host memory"));
  }
  const CudaFunctions& cu = device->cu();
  ContextScope scope(*device);
  ACCY_RETURN_IF_ERROR(scope.status());
  ACCY_CU_CALL(cu, cuMemHostRegister, data, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  // From here the registration object unregisters on every path.
  std::unique_ptr<HostRegistration> registration(new HostRegistration(device, data, size));
  ACCY_CU_CALL(cu, cuMemHostGetDevicePointer, &registration->device_pointer_, data, 0);
  return registration;
}

int maxPtxVersionForDriver(int driver_version) {
  const int major = driver_version / 1000, minor = driver_version % 1000 / 10;
  if (major >= 13) return 90;
  if (major == 12) {
    // 12.0-12.5 add one ISA version each; 12.6 kept 8.5; then 8.6, 8.7, 8.8.
    constexpr int kByMinor[] = {80, 81, 82, 83, 84, 85, 85, 86, 87, 88};
    return minor < 10 ? kByMinor[minor] : 88;
  }
  if (major == 11) return 70 + std::min(minor, 8);
  if (major == 10) return 63 + std::min(minor, 2);
  return 60;
}

int minPtxVersionForSm(int sm) {
  // (first sm, PTX ISA that introduced it), ascending.
  constexpr int kTable[][2] = {{70, 60}, {72, 61},  {75, 63},  {80, 70},  {86, 71},  {87, 74},  {89, 78},
                               {90, 78}, {100, 86}, {101, 86}, {103, 88}, {110, 90}, {120, 87}, {121, 88}};
  int version = 60;
  for (const auto& [first, isa] : kTable) {
    if (sm >= first) version = isa;
  }
  return version;
}

}  // namespace accy::cuda
