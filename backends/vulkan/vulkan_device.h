// One Vulkan device opened for compute: the instance, the chosen physical
// device, a logical device with one compute queue, and the limits the
// SPIR-V compiler and the loader check against.
//
// Choice: among physical devices that speak Vulkan 1.1 and have a queue
// family with compute, a discrete GPU first, then an integrated GPU, then a
// virtual one, then a CPU implementation (lavapipe/llvmpipe), then any
// other; ties go to the first enumerated. shaderFloat64 and shaderInt64 are
// enabled when the device has them, and so is storageBuffer8BitAccess (with
// the VK_KHR_8bit_storage extension) when the device offers the extension.
//
// Thread safety: everything but the queue is read-only after `open`;
// `submit` serializes queue access. The device is shared (shared_ptr) by
// the backend and every program loaded on it; the last owner waits for the
// device to go idle and destroys the device, then the instance. The loader
// library (and its drivers) stay loaded for the life of the process; see
// VulkanLibrary.
#ifndef ACCY_BACKENDS_VULKAN_VULKAN_DEVICE_H_
#define ACCY_BACKENDS_VULKAN_VULKAN_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "backends/vulkan/vulkan_loader.h"

namespace accy::vulkan {

// What the device allows, from the physical-device queries.
struct DeviceLimits {
  uint32_t max_workgroup_invocations = 0;  // maxComputeWorkGroupInvocations
  uint32_t max_workgroup_size_x = 0;       // maxComputeWorkGroupSize[0]
  uint32_t max_workgroup_count_x = 0;      // maxComputeWorkGroupCount[0]
  uint64_t max_storage_buffer_range = 0;   // maxStorageBufferRange, bytes
  uint32_t max_storage_buffers = 0;        // per stage and per set, the smaller
  bool float64 = false;                    // shaderFloat64 (enabled)
  bool int64 = false;                      // shaderInt64 (enabled)
  // storageBuffer8BitAccess of VK_KHR_8bit_storage (enabled, with the
  // extension): bool buffers, one byte per element.
  bool storage_8bit = false;
  // VkPhysicalDeviceSubgroupProperties::subgroupSize when compute shaders
  // have subgroup arithmetic; 0 otherwise.
  uint32_t subgroup_size = 0;
  // Whether a workgroup's invocations run concurrently (false for devices
  // of type CPU, such as lavapipe, which run a workgroup as one thread
  // that switches at every barrier).
  bool cooperative_workgroups = true;
  // Loop iterations one invocation may run in all (0: no limit). 65,535 on
  // devices of type CPU: llvmpipe (lavapipe) ends an invocation's loops
  // there (spirv::TargetInfo::max_loop_iterations).
  uint32_t max_loop_iterations = 0;
};

class VulkanDevice {
 public:
  // Opens the loader at `library_path` and the best compute device.
  // Unimplemented, saying what is missing, when there is no loader, no
  // Vulkan 1.1 instance or no compute-capable device; a failing Vulkan call
  // gives its vulkanError.
  static absl::StatusOr<std::shared_ptr<VulkanDevice>> open(const std::string& library_path = kVulkanLibrary);

  VulkanDevice(const VulkanDevice&) = delete;
  VulkanDevice& operator=(const VulkanDevice&) = delete;
  ~VulkanDevice();

  const VulkanFunctions& vk() const { return vk_; }
  VkDevice device() const { return device_; }
  uint32_t queueFamily() const { return queue_family_; }
  const DeviceLimits& limits() const { return limits_; }
  // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
  const std::string& name() const { return name_; }
  // "discrete GPU", "integrated GPU", "virtual GPU", "CPU" or "other".
  const std::string& type() const { return type_; }
  // The physical device's Vulkan version, "1.3.230".
  const std::string& apiVersion() const { return api_version_; }

  // The index of a HOST_VISIBLE | HOST_COHERENT memory type allowed by
  // `type_bits` (preferring HOST_CACHED); -1 when there is none.
  int hostMemoryType(uint32_t type_bits) const;

  // Submits `command_buffer` to the queue, signalling `fence`; any thread.
  absl::Status submit(VkCommandBuffer command_buffer, VkFence fence) const;
  // Command buffers submitted so far (a measure of host round trips).
  int64_t submits() const { return submits_.load(std::memory_order_relaxed); }

  // How long a launch may wait for its fence (0: no limit).
  void setLaunchTimeout(std::chrono::milliseconds timeout) { launch_timeout_ = timeout; }
  std::chrono::milliseconds launchTimeout() const { return launch_timeout_; }
  // OK, or why the device cannot run work any more (a launch that did not
  // finish in time): every later launch fails with it.
  absl::Status health() const;
  void markLost(absl::Status why) const;
  // Keeps a hung launch's resources alive (the device may still use them)
  // until the device is destroyed, after it is idle.
  void park(std::shared_ptr<void> resources) const;

 private:
  VulkanDevice() = default;

  std::shared_ptr<const VulkanLibrary> library_;
  VulkanFunctions vk_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceMemoryProperties memory_{};
  DeviceLimits limits_;
  std::string name_, type_, api_version_;
  mutable std::mutex queue_mutex_;
  mutable std::atomic<int64_t> submits_{0};
  std::chrono::milliseconds launch_timeout_{600000};
  mutable std::mutex health_mu_;
  mutable absl::Status lost_;
  mutable std::vector<std::shared_ptr<void>> parked_;
};

}  // namespace accy::vulkan

#endif  // ACCY_BACKENDS_VULKAN_VULKAN_DEVICE_H_
