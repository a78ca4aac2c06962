// One CUDA device opened for compute: the driver library, the chosen
// device, its primary context, and the limits the PTX compiler and the
// loader check against.
//
// Choice: among the devices the driver enumerates (CUDA_VISIBLE_DEVICES
// applies), the one with the most multiprocessors, skipping devices whose
// compute mode prohibits contexts; ties go to the lowest ordinal, so a
// machine of identical GPUs uses device 0.
//
// Contexts: the device's primary context (the one the CUDA runtime shares),
// retained by `open` and released by the destructor. Nothing is left
// current on a caller's thread: every use pushes the context for its
// duration (ContextScope) and pops it, so the backend coexists with other
// CUDA code in the process.
//
// Thread safety: everything is read-only after `open`. The device is shared
// (shared_ptr) by the backend, every program loaded on it and every host
// registration; the last owner releases the primary context. The driver
// library stays loaded for the life of the process; see CudaLibrary.
#ifndef ACCY_BACKENDS_CUDA_CUDA_DEVICE_H_
#define ACCY_BACKENDS_CUDA_CUDA_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/cuda/cuda_loader.h"

namespace accy::cuda {

// What the device allows, from cuDeviceGetAttribute and cuDeviceTotalMem.
struct DeviceLimits {
  int sm = 0;                          // compute capability, major * 10 + minor
  int multiprocessors = 0;             // MULTIPROCESSOR_COUNT
  uint32_t max_threads_per_block = 0;  // min(MAX_THREADS_PER_BLOCK, MAX_BLOCK_DIM_X)
  uint32_t max_grid_x = 0;             // MAX_GRID_DIM_X
  uint32_t warp_size = 0;              // WARP_SIZE
  uint64_t total_memory = 0;           // bytes
  bool host_register = false;          // HOST_REGISTER_SUPPORTED and CAN_MAP_HOST_MEMORY
};

class CudaDevice : public std::enable_shared_from_this<CudaDevice> {
 public:
  // Opens the driver at `library_path`, initializes it (cuInit), picks the
  // device and retains its primary context. Unimplemented, saying what is
  // missing, when there is no driver library, the driver does not
  // initialize (no GPU, the toolkit's stub library, a kernel-module
  // mismatch) or it finds no usable device; another failing call gives its
  // cudaError.
  static absl::StatusOr<std::shared_ptr<CudaDevice>> open(const std::string& library_path = kCudaLibrary);

  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  ~CudaDevice();

  const CudaFunctions& cu() const { return library_->functions(); }
  CUdevice device() const { return device_; }
  CUcontext context() const { return context_; }
  int ordinal() const { return ordinal_; }
  const DeviceLimits& limits() const { return limits_; }
  // e.g. "NVIDIA H200".
  const std::string& name() const { return name_; }
  // cuDriverGetVersion: 12080 for CUDA 12.8.
  int driverVersion() const { return driver_version_; }

  // OK while the device can run work; once a failure turned out to be
  // sticky (an illegal address, an uncorrectable ECC error, a lost device:
  // the driver then fails every call on the context until the process
  // restarts), LaunchFailed saying so, for every later launch and for the
  // daemon's health service.
  absl::Status health() const;
  // After a failed launch: probes the context with a small allocation; a
  // probe that fails too marks the device lost with both errors.
  void probeAfterFailure(const absl::Status& failure) const;
  // How long a launch may wait for its stream (0: no limit); one that
  // waits longer marks the device lost (markLost) and its resources are
  // kept, never freed (park): the device may still be using them.
  void setLaunchTimeout(std::chrono::milliseconds timeout) { launch_timeout_ = timeout; }
  std::chrono::milliseconds launchTimeout() const { return launch_timeout_; }
  void markLost(absl::Status why) const;
  void park(std::shared_ptr<void> resources) const;

 private:
  CudaDevice() = default;

  std::shared_ptr<const CudaLibrary> library_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;  // retained primary context; null until retained
  int ordinal_ = -1;
  int driver_version_ = 0;
  DeviceLimits limits_;
  std::string name_;
  mutable std::mutex health_mu_;
  mutable absl::Status lost_;
  std::chrono::milliseconds launch_timeout_{600000};
};

// Makes the device's primary context current on this thread for the scope's
// life: pushes it on construction (status() says whether that worked) and
// pops it on destruction.
class ContextScope {
 public:
  explicit ContextScope(const CudaDevice& device);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  const absl::Status& status() const { return status_; }

 private:
  const CudaFunctions& cu_;
  bool pushed_ = false;
  absl::Status status_;
};

// Host memory page-locked and mapped for the device's DMA engines
// (cuMemHostRegister with PORTABLE | DEVICEMAP): copies between it and
// device memory run asynchronously at full bus speed instead of through the
// driver's staging buffers. Unregistered when destroyed; it keeps the device
// (and so the context) alive until then. The memory must stay mapped for
// the registration's whole life.
class HostRegistration {
 public:
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The range's address for kernels (cuMemHostGetDevicePointer); on 64-bit
  // systems with unified addressing, the host address itself.
  CUdeviceptr devicePointer() const { return device_pointer_; }

 private:
  friend absl::StatusOr<std::unique_ptr<HostRegistration>> registerHostMemory(std::shared_ptr<const CudaDevice>, void*,
                                                                              size_t);
  HostRegistration(std::shared_ptr<const CudaDevice> device, void* data, size_t size)
      : device_(std::move(device)), data_(data), size_(size) {}

  std::shared_ptr<const CudaDevice> device_;
  void* data_;
  size_t size_;
  CUdeviceptr device_pointer_ = 0;
};

// Registers [data, data + size) with `device`. InvalidBuffer for a null or
// empty range; Unimplemented when the device cannot map host memory; the
// cudaError of cuMemHostRegister otherwise (CUDA_ERROR_HOST_MEMORY_ALREADY_
// REGISTERED for a range overlapping a registered one).
absl::StatusOr<std::unique_ptr<HostRegistration>> registerHostMemory(std::shared_ptr<const CudaDevice> device,
                                                                     void* data, size_t size);

// The highest PTX ISA version (times 10) the JIT of a driver of
// `driver_version` (cuDriverGetVersion, e.g. 12040) accepts: 84 for 12.4,
// 90 for 13.0; 90 for drivers newer than this table.
int maxPtxVersionForDriver(int driver_version);

// The lowest PTX ISA version (times 10) with a `.target sm_<sm>`: 78 for
// sm_90, 70 for sm_80, 86 for sm_100.
int minPtxVersionForSm(int sm);

}  // namespace accy::cuda

#endif  // ACCY_BACKENDS_CUDA_CUDA_DEVICE_H_
