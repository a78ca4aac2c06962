#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>

#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_program.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {
namespace {

class VulkanBackend final : public Backend {
 public:
  VulkanBackend(const std::string& library_path, const BackendOptions& options) {
    info_.name = "vulkan";
    info_.targets = {"spirv"};
    info_.min_buffer_alignment = 1;  // buffers are copied; each needs its element size
    absl::StatusOr<std::shared_ptr<vulkan::VulkanDevice>> device = vulkan::VulkanDevice::open(library_path);
    if (!device.ok()) {
      info_.unavailable_reason = messageWithoutKind(device.status());
      return;
    }
    (*device)->setLaunchTimeout(std::chrono::milliseconds(std::max<int64_t>(options.launch_timeout_ms, 0)));
    device_ = *std::move(device);
    info_.available = true;
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

  const DeviceInfo& info() const override { return info_; }
  absl::Status health() const override { return device_ != nullptr ? device_->health() : absl::OkStatus(); }

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable exe) const override {
    ACCY_RETURN_IF_ERROR(requireDevice());
    ACCY_ASSIGN_OR_RETURN(std::shared_ptr<const vulkan::VulkanProgram> loaded,
                          vulkan::VulkanProgram::load(device_, std::move(exe)));
    return std::shared_ptr<const LoadedProgram>(std::move(loaded));
  }

  std::any deviceDescription() const override { return device_ != nullptr ? std::any(target_) : std::any(); }

  const spirv::TargetInfo& targetInfo() const { return target_; }
  const std::string& deviceName() const { return device_name_; }

 private:
  absl::Status requireDevice() const {
    if (device_ != nullptr) return absl::OkStatus();
    return makeError(ErrorKind::kUnimplemented, strCat("device vulkan is not available: ", info_.unavailable_reason));
  }

  DeviceInfo info_;
  std::shared_ptr<const vulkan::VulkanDevice> device_;
  spirv::TargetInfo target_;
  std::string device_name_;
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
