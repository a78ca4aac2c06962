#include "backends/vulkan/vulkan_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::vulkan {
namespace {

std::string versionText(uint32_t v) {
  return strCat(VK_API_VERSION_MAJOR(v), ".", VK_API_VERSION_MINOR(v), ".", VK_API_VERSION_PATCH(v));
}

// Lower is preferred.
int typeRank(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return 3;
    default:  // VK_PHYSICAL_DEVICE_TYPE_OTHER and values newer than this header
      return 4;
  }
}

std::string typeName(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

absl::Status unavailable(std::string what) { return makeError(ErrorKind::kUnimplemented, what); }

}  // namespace

absl::StatusOr<std::shared_ptr<VulkanDevice>> VulkanDevice::open(const std::string& library_path) {
  ACCY_ASSIGN_OR_RETURN(std::shared_ptr<const VulkanLibrary> library, VulkanLibrary::open(library_path));
  // Everything created below is destroyed by ~VulkanDevice on any early return.
  std::shared_ptr<VulkanDevice> d(new VulkanDevice());
  d->library_ = library;
  d->vk_ = library->globals();
  const VulkanFunctions& vk = d->vk_;

  uint32_t instance_version = 0;
  ACCY_VK_CALL(vk, vkEnumerateInstanceVersion, &instance_version);
  if (instance_version < VK_API_VERSION_1_1) {
    return unavailable(strCat("the Vulkan loader ", library_path, " offers version ", versionText(instance_version),
                              "; Accy needs 1.1"));
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "accy";
  app.pEngineName = "accy";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo instance_info{};
  instance_info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  instance_info.pApplicationInfo = &app;
  ACCY_VK_CALL(vk, vkCreateInstance, &instance_info, nullptr, &d->instance_);
  ACCY_RETURN_IF_ERROR(resolveInstanceFunctions(d->instance_, &d->vk_));

  uint32_t count = 0;
  ACCY_VK_CALL(vk, vkEnumeratePhysicalDevices, d->instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> physicals(count);
  if (count > 0) ACCY_VK_CALL(vk, vkEnumeratePhysicalDevices, d->instance_, &count, physicals.data());
  physicals.resize(count);
  if (physicals.empty()) return unavailable("the Vulkan loader found no physical device (no driver installed?)");

  // The best device with Vulkan 1.1 and a compute queue family.
  int best_rank = 1 << 30;
  std::string skipped;
  VkPhysicalDeviceProperties best_properties{};
  for (VkPhysicalDevice p : physicals) {
    VkPhysicalDeviceProperties properties{};
    vk.vkGetPhysicalDeviceProperties(p, &properties);
    if (properties.apiVersion < VK_API_VERSION_1_1) {
      strAppend(&skipped, skipped.empty() ? "" : "; ", properties.deviceName, " speaks only Vulkan ",
                versionText(properties.apiVersion));
      continue;
    }
    uint32_t families = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(p, &families, nullptr);
    std::vector<VkQueueFamilyProperties> family(families);
    vk.vkGetPhysicalDeviceQueueFamilyProperties(p, &families, family.data());
    int compute = -1;
    for (uint32_t f = 0; f < families && compute < 0; ++f) {
      if (family[f].queueCount > 0 && (family[f].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0) compute = static_cast<int>(f);
    }
    if (compute < 0) {
      strAppend(&skipped, skipped.empty() ? "" : "; ", properties.deviceName, " has no compute queue");
      continue;
    }
    const int rank = typeRank(properties.deviceType);
    if (rank < best_rank) {
      best_rank = rank;
      d->physical_ = p;
      d->queue_family_ = static_cast<uint32_t>(compute);
      best_properties = properties;
    }
  }
  if (d->physical_ == VK_NULL_HANDLE) return unavailable(strCat("no Vulkan 1.1 device with compute: ", skipped));

  d->name_ = best_properties.deviceName;
  d->type_ = typeName(best_properties.deviceType);
  d->api_version_ = versionText(best_properties.apiVersion);
  const VkPhysicalDeviceLimits& l = best_properties.limits;
  // VK_KHR_8bit_storage (core in Vulkan 1.2; the instance asks for 1.1, so
  // it is enabled as the extension, which 1.2+ drivers still offer).
  uint32_t extension_count = 0;
  ACCY_VK_CALL(vk, vkEnumerateDeviceExtensionProperties, d->physical_, nullptr, &extension_count, nullptr);
  std::vector<VkExtensionProperties> extensions(extension_count);
  if (extension_count > 0) {
    ACCY_VK_CALL(vk, vkEnumerateDeviceExtensionProperties, d->physical_, nullptr, &extension_count, extensions.data());
  }
  extensions.resize(extension_count);
  const bool has_8bit_storage = std::any_of(extensions.begin(), extensions.end(), [](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, VK_KHR_8BIT_STORAGE_EXTENSION_NAME) == 0;
  });
  VkPhysicalDevice8BitStorageFeaturesKHR storage_8bit{};
  storage_8bit.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR;
  VkPhysicalDeviceFeatures2 features2{};
  features2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features2.pNext = has_8bit_storage ? &storage_8bit : nullptr;
  vk.vkGetPhysicalDeviceFeatures2(d->physical_, &features2);
  const VkPhysicalDeviceFeatures& features = features2.features;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceProperties2 properties2{};
  properties2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  properties2.pNext = &subgroup;
  vk.vkGetPhysicalDeviceProperties2(d->physical_, &properties2);
  d->limits_.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  d->limits_.max_workgroup_size_x = l.maxComputeWorkGroupSize[0];
  d->limits_.max_workgroup_count_x = l.maxComputeWorkGroupCount[0];
  d->limits_.max_storage_buffer_range = l.maxStorageBufferRange;
  d->limits_.max_storage_buffers = std::min(l.maxPerStageDescriptorStorageBuffers, l.maxDescriptorSetStorageBuffers);
  d->limits_.float64 = features.shaderFloat64 == VK_TRUE;
  d->limits_.int64 = features.shaderInt64 == VK_TRUE;
  d->limits_.storage_8bit = has_8bit_storage && storage_8bit.storageBuffer8BitAccess == VK_TRUE;
  // Tree reductions finish with subgroup shuffles (shuffle-relative).
  const bool subgroup_shuffles = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                                 (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) != 0 &&
                                 (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT) != 0;
  d->limits_.subgroup_size = subgroup_shuffles ? subgroup.subgroupSize : 0;
  d->limits_.cooperative_workgroups = best_properties.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (best_properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) d->limits_.max_loop_iterations = 65535;
  vk.vkGetPhysicalDeviceMemoryProperties(d->physical_, &d->memory_);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{};
  queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue_info.queueFamilyIndex = d->queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures enabled{};
  enabled.shaderFloat64 = features.shaderFloat64;
  enabled.shaderInt64 = features.shaderInt64;
  VkDeviceCreateInfo device_info{};
  device_info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  device_info.pEnabledFeatures = &enabled;
  VkPhysicalDevice8BitStorageFeaturesKHR enabled_8bit{};
  enabled_8bit.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES_KHR;
  enabled_8bit.storageBuffer8BitAccess = VK_TRUE;
  const char* const enabled_extensions[] = {VK_KHR_8BIT_STORAGE_EXTENSION_NAME};
  if (d->limits_.storage_8bit) {
    device_info.pNext = &enabled_8bit;
    device_info.enabledExtensionCount = 1;
    device_info.ppEnabledExtensionNames = enabled_extensions;
  }
  ACCY_VK_CALL(vk, vkCreateDevice, d->physical_, &device_info, nullptr, &d->device_);
  ACCY_RETURN_IF_ERROR(resolveDeviceFunctions(d->device_, &d->vk_));
  vk.vkGetDeviceQueue(d->device_, d->queue_family_, 0, &d->queue_);
  return d;
}

absl::Status VulkanDevice::health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return lost_;
}

void VulkanDevice::markLost(absl::Status why) const {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (lost_.ok()) lost_ = std::move(why);
}

void VulkanDevice::park(std::shared_ptr<void> resources) const {
  std::lock_guard<std::mutex> lock(health_mu_);
  parked_.push_back(std::move(resources));
}

VulkanDevice::~VulkanDevice() {
  if (device_ != VK_NULL_HANDLE) {
    if (vk_.vkDeviceWaitIdle != nullptr) vk_.vkDeviceWaitIdle(device_);
    parked_.clear();  // hung launches' resources, now that the device is idle
    if (vk_.vkDestroyDevice != nullptr) vk_.vkDestroyDevice(device_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE && vk_.vkDestroyInstance != nullptr) vk_.vkDestroyInstance(instance_, nullptr);
}

int VulkanDevice::hostMemoryType(uint32_t type_bits) const {
  const VkMemoryPropertyFlags needed = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int found = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[i].propertyFlags;
    if ((type_bits & (1u << i)) == 0 || (flags & needed) != needed) continue;
    if ((flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) != 0) return static_cast<int>(i);
    if (found < 0) found = static_cast<int>(i);
  }
  return found;
}

absl::Status VulkanDevice::submit(VkCommandBuffer command_buffer, VkFence fence) const {
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &command_buffer;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  ACCY_VK_CALL(vk_, vkQueueSubmit, queue_, 1, &info, fence);
  submits_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace accy::vulkan
