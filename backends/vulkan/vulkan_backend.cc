#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>

#include "backends/device_backend.h"
#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_program.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {
namespace {

class VulkanBackend final : public DeviceBackend<vulkan::VulkanDevice, vulkan::VulkanProgram, spirv::TargetInfo> {
 public:
  VulkanBackend(const std::string& library_path, const BackendOptions& options)
      : DeviceBackend("vulkan", "spirv", vulkan::VulkanDevice::open(library_path), options) {
    if (device_ == nullptr) return;
    const vulkan::DeviceLimits& l = device_->limits();
    target_.max_workgroup_size = std::min(l.max_workgroup_invocations, l.max_workgroup_size_x);
    target_.max_workgroup_count = l.max_workgroup_count_x;
    target_.float64 = l.float64;
    target_.int64 = l.int64;
    target_.storage_8bit = l.storage_8bit;
    target_.subgroup_size = l.subgroup_size;
    target_.max_storage_buffers = l.max_storage_buffers;
    target_.cooperative_workgroups = l.cooperative_workgroups;
    target_.max_loop_iterations = l.max_loop_iterations;
    device_name_ = strCat(device_->name(), " (", device_->type(), ", Vulkan ", device_->apiVersion(), ")");
  }
};

}  // namespace

std::unique_ptr<Backend> makeVulkanBackend(const BackendOptions& options) {
  return makeVulkanBackendFrom(options, vulkan::kVulkanLibrary);
}

std::unique_ptr<Backend> makeVulkanBackendFrom(const BackendOptions& options, const std::string& library_path) {
  return std::make_unique<VulkanBackend>(library_path, options);
}

spirv::TargetInfo vulkanTargetInfo(const Backend& backend) {
  const auto* vulkan = dynamic_cast<const VulkanBackend*>(&backend);
  return vulkan != nullptr && vulkan->info().available ? vulkan->targetInfo() : spirv::TargetInfo{};
}

std::string vulkanDeviceName(const Backend& backend) {
  const auto* vulkan = dynamic_cast<const VulkanBackend*>(&backend);
  return vulkan != nullptr ? vulkan->deviceName() : std::string();
}

}  // namespace accy::backends
