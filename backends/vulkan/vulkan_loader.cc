#include "backends/vulkan/vulkan_loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::vulkan {
namespace {

absl::Status missing(std::string_view name, std::string_view from, std::string_view file, int line) {
  return makeError(ErrorKind::kUnimplemented,
                   strCat("Vulkan entry point ", name, " is missing (", from, " returned null) at ", file, ":", line));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const VulkanLibrary>> VulkanLibrary::open(const std::string& path) {
  // Never destroyed: what they hold stays loaded until exit (see the header).
  static std::mutex* const mutex = new std::mutex;
  static auto* const opened = new std::map<std::string, std::shared_ptr<const VulkanLibrary>>;
  std::lock_guard<std::mutex> lock(*mutex);
  if (auto it = opened->find(path); it != opened->end()) return it->second;
  absl::StatusOr<std::shared_ptr<VulkanLibrary>> library = load(path);
  if (!library.ok()) return library.status();
  // The anchor instance loads the drivers. Where it fails (no driver, an old
  // loader) there is nothing to keep loaded, and VulkanDevice::open reports
  // the failure of its own vkCreateInstance.
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "accy";
  app.apiVersion = VK_API_VERSION_1_0;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  if ((*library)->globals_.vkCreateInstance(&info, nullptr, &(*library)->anchor_) != VK_SUCCESS) {
    (*library)->anchor_ = VK_NULL_HANDLE;
  }
  opened->emplace(path, *library);
  return std::shared_ptr<const VulkanLibrary>(*std::move(library));
}

absl::StatusOr<std::shared_ptr<VulkanLibrary>> VulkanLibrary::load(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return makeError(ErrorKind::kUnimplemented,
                     strCat("cannot load the Vulkan library ", path, ": ", why != nullptr ? why : "dlopen failed",
                            " (install a Vulkan loader and driver, e.g. libvulkan1 and mesa-vulkan-drivers)"));
  }
  // On a failure below, `library` closes the handle.
  std::shared_ptr<VulkanLibrary> library(new VulkanLibrary(handle, path));
  VulkanFunctions& vk = library->globals_;
  vk.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(handle, "vkGetInstanceProcAddr"));
  if (vk.vkGetInstanceProcAddr == nullptr) {
    return makeError(ErrorKind::kUnimplemented,
                     strCat(path, " has no vkGetInstanceProcAddr at ", __FILE__, ":", __LINE__));
  }
#define ACCY_VK_GLOBAL(name)                                                                          \
  vk.name = reinterpret_cast<PFN_##name>(vk.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));            \
  if (vk.name == nullptr) return missing(#name, "vkGetInstanceProcAddr(NULL)", __FILE__, __LINE__);
#define ACCY_VK_INSTANCE(name)
#define ACCY_VK_DEVICE(name)
#include "backends/vulkan/vulkan_functions.inc"
#undef ACCY_VK_GLOBAL
#undef ACCY_VK_INSTANCE
#undef ACCY_VK_DEVICE
  return library;
}

// Runs only for a library that failed to load: the others are kept.
VulkanLibrary::~VulkanLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::Status resolveInstanceFunctions(VkInstance instance, VulkanFunctions* vk) {
#define ACCY_VK_GLOBAL(name)
#define ACCY_VK_INSTANCE(name)                                                                        \
  vk->name = reinterpret_cast<PFN_##name>(vk->vkGetInstanceProcAddr(instance, #name));                \
  if (vk->name == nullptr) return missing(#name, "vkGetInstanceProcAddr", __FILE__, __LINE__);
#define ACCY_VK_DEVICE(name)
#include "backends/vulkan/vulkan_functions.inc"
#undef ACCY_VK_GLOBAL
#undef ACCY_VK_INSTANCE
#undef ACCY_VK_DEVICE
  return absl::OkStatus();
}

absl::Status resolveDeviceFunctions(VkDevice device, VulkanFunctions* vk) {
  if (vk->vkGetDeviceProcAddr == nullptr) {
    return missing("vkGetDeviceProcAddr", "the instance table", __FILE__, __LINE__);
  }
#define ACCY_VK_GLOBAL(name)
#define ACCY_VK_INSTANCE(name)
#define ACCY_VK_DEVICE(name)                                                                          \
  vk->name = reinterpret_cast<PFN_##name>(vk->vkGetDeviceProcAddr(device, #name));                    \
  if (vk->name == nullptr) return missing(#name, "vkGetDeviceProcAddr", __FILE__, __LINE__);
#include "backends/vulkan/vulkan_functions.inc"
#undef ACCY_VK_GLOBAL
#undef ACCY_VK_INSTANCE
#undef ACCY_VK_DEVICE
  return absl::OkStatus();
}

std::string vkResultName(VkResult result) {
  // VkResult is the driver's enum and grows with every header release; the
  // default covers values newer than this list.
  switch (result) {
#define ACCY_VK_RESULT(r) \
  case r:                 \
    return #r;
    ACCY_VK_RESULT(VK_SUCCESS)
    ACCY_VK_RESULT(VK_NOT_READY)
    ACCY_VK_RESULT(VK_TIMEOUT)
    ACCY_VK_RESULT(VK_EVENT_SET)
    ACCY_VK_RESULT(VK_EVENT_RESET)
    ACCY_VK_RESULT(VK_INCOMPLETE)
    ACCY_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    ACCY_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    ACCY_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    ACCY_VK_RESULT(VK_ERROR_DEVICE_LOST)
    ACCY_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    ACCY_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    ACCY_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    ACCY_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    ACCY_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    ACCY_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    ACCY_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    ACCY_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    ACCY_VK_RESULT(VK_ERROR_UNKNOWN)
    ACCY_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    ACCY_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    ACCY_VK_RESULT(VK_ERROR_FRAGMENTATION)
    ACCY_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    ACCY_VK_RESULT(VK_ERROR_VALIDATION_FAILED_EXT)
    ACCY_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
    ACCY_VK_RESULT(VK_ERROR_NOT_PERMITTED_KHR)
#undef ACCY_VK_RESULT
    default:
      return strCat("VkResult(", static_cast<int>(result), ")");
  }
}

absl::Status vulkanError(VkResult result, std::string_view call, std::string_view file, int line) {
  ErrorKind kind = ErrorKind::kLaunchFailed;
  switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_FRAGMENTATION:
    case VK_ERROR_TOO_MANY_OBJECTS:
      kind = ErrorKind::kOutOfMemory;
      break;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED:
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
      kind = ErrorKind::kUnimplemented;
      break;
    default:  // the driver's enum: every other result is a failed run
      break;
  }
  return makeError(kind, strCat(call, " failed with ", vkResultName(result), " at ", file, ":", line));
}

}  // namespace accy::vulkan
