// The Vulkan loader library, opened at run time.
//
// Accy never links -lvulkan: `VulkanLibrary::open` dlopens the loader
// (libvulkan.so.1), takes vkGetInstanceProcAddr from it with dlsym and
// resolves the global entry points; the instance and device entry points
// are resolved into a `VulkanFunctions` table once an instance and a device
// exist. Every entry point the backend calls is listed once, in
// vulkan_functions.inc. A machine without Vulkan builds and runs everything
// else: opening the library fails with a status, nothing more.
//
// Errors: a library that cannot be opened or lacks an entry point, and a
// call that does not return VK_SUCCESS, become an absl::Status naming the
// call, the source file and line, and (for calls) the VkResult by name.
#ifndef ACCY_BACKENDS_VULKAN_VULKAN_LOADER_H_
#define ACCY_BACKENDS_VULKAN_VULKAN_LOADER_H_

// Prototypes are never used: every call goes through a VulkanFunctions table.
#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace accy::vulkan {

// The loader library's soname on Linux.
inline constexpr char kVulkanLibrary[] = "libvulkan.so.1";

// One pointer per entry point in vulkan_functions.inc, null until resolved.
struct VulkanFunctions {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define ACCY_VK_GLOBAL(name) PFN_##name name = nullptr;
#define ACCY_VK_INSTANCE(name) PFN_##name name = nullptr;
#define ACCY_VK_DEVICE(name) PFN_##name name = nullptr;
#include "backends/vulkan/vulkan_functions.inc"
#undef ACCY_VK_GLOBAL
#undef ACCY_VK_INSTANCE
#undef ACCY_VK_DEVICE
};

// An open loader library.
//
// A library that opens stays open, with its drivers loaded, for the life of
// the process: `open` returns the same object for the same path, and the
// first open also creates one bare VkInstance that is never destroyed. The
// loader unloads a driver when its last instance is destroyed, and some
// drivers allocate once per load and never free (Mesa 22's lavapipe leaks a
// small table each time), so creating and destroying backends would leak on
// every cycle and pay the driver's load time again. Instances and devices
// the backend makes are still destroyed with it.
class VulkanLibrary {
 public:
  // Opens `path` (a soname or a file path) and resolves vkGetInstanceProcAddr
  // and the global entry points. Unimplemented, naming the library and the
  // dlerror text or the missing entry point, when that fails (a failed open
  // is not remembered: the next call tries again). Thread-safe.
  static absl::StatusOr<std::shared_ptr<const VulkanLibrary>> open(const std::string& path = kVulkanLibrary);

  VulkanLibrary(const VulkanLibrary&) = delete;
  VulkanLibrary& operator=(const VulkanLibrary&) = delete;
  ~VulkanLibrary();

  // vkGetInstanceProcAddr and the ACCY_VK_GLOBAL entries, resolved; the
  // instance and device entries null.
  const VulkanFunctions& globals() const { return globals_; }
  const std::string& path() const { return path_; }

 private:
  VulkanLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  static absl::StatusOr<std::shared_ptr<VulkanLibrary>> load(const std::string& path);

  void* handle_;
  std::string path_;
  VulkanFunctions globals_;
  VkInstance anchor_ = VK_NULL_HANDLE;  // keeps the drivers loaded; never destroyed
};

// Fills the ACCY_VK_INSTANCE entries of `vk` (whose vkGetInstanceProcAddr is
// set) for `instance`. Unimplemented naming the first entry point the
// driver does not provide.
absl::Status resolveInstanceFunctions(VkInstance instance, VulkanFunctions* vk);

// Fills the ACCY_VK_DEVICE entries of `vk` (whose instance entries are set)
// for `device`. Unimplemented naming the first missing entry point.
absl::Status resolveDeviceFunctions(VkDevice device, VulkanFunctions* vk);

// "VK_ERROR_DEVICE_LOST" for VK_ERROR_DEVICE_LOST; "VkResult(<n>)" for a
// value this header does not name.
std::string vkResultName(VkResult result);

// The status for `call` returning `result` at file:line: OutOfMemory for
// the out-of-memory results, Unimplemented for missing drivers, layers,
// extensions and features, LaunchFailed otherwise. The message reads
// "<call> failed with <VkResult name> at <file>:<line>".
absl::Status vulkanError(VkResult result, std::string_view call, std::string_view file, int line);

}  // namespace accy::vulkan

// Calls `vk.fn(args...)` and returns (from a function returning absl::Status
// or absl::StatusOr) the vulkanError naming `fn` when it does not return
// VK_SUCCESS.
#define ACCY_VK_CALL(vk, fn, ...)                                                   \
  do {                                                                              \
    const VkResult accy_vk_result_ = (vk).fn(__VA_ARGS__);                          \
    if (accy_vk_result_ != VK_SUCCESS) {                                            \
      return ::accy::vulkan::vulkanError(accy_vk_result_, #fn, __FILE__, __LINE__); \
    }                                                                               \
  } while (0)

#endif  // ACCY_BACKENDS_VULKAN_VULKAN_LOADER_H_
