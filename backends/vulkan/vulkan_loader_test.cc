// The Vulkan entry-point table: every entry resolves against this
// machine's loader and driver, and a missing library or entry point, or a
// failing call, gives a status that says which.
#include "backends/vulkan/vulkan_loader.h"

#include <string>

#include "backends/vulkan/vulkan_device.h"
#include "base/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::vulkan {
namespace {

using ::testing::HasSubstr;

TEST(VulkanLoader, EveryEntryPointResolves) {
  absl::StatusOr<std::shared_ptr<VulkanDevice>> device = VulkanDevice::open();
  if (!device.ok()) GTEST_SKIP() << "no Vulkan device here: " << device.status();
  const VulkanFunctions& vk = (*device)->vk();
  int resolved = 0;
  EXPECT_NE(vk.vkGetInstanceProcAddr, nullptr);
#define ACCY_VK_CHECK_ENTRY(name)                                \
  EXPECT_NE(vk.name, nullptr) << #name " did not resolve"; \
  ++resolved;
#define ACCY_VK_GLOBAL(name) ACCY_VK_CHECK_ENTRY(name)
#define ACCY_VK_INSTANCE(name) ACCY_VK_CHECK_ENTRY(name)
#define ACCY_VK_DEVICE(name) ACCY_VK_CHECK_ENTRY(name)
#include "backends/vulkan/vulkan_functions.inc"
#undef ACCY_VK_GLOBAL
#undef ACCY_VK_INSTANCE
#undef ACCY_VK_DEVICE
#undef ACCY_VK_CHECK_ENTRY
  EXPECT_GT(resolved, 40);
}

TEST(VulkanLoader, GlobalsResolveWhenTheLibraryOpens) {
  absl::StatusOr<std::shared_ptr<const VulkanLibrary>> library = VulkanLibrary::open();
  if (!library.ok()) GTEST_SKIP() << "no Vulkan loader here: " << library.status();
  const VulkanFunctions& vk = (*library)->globals();
  EXPECT_NE(vk.vkGetInstanceProcAddr, nullptr);
  EXPECT_NE(vk.vkCreateInstance, nullptr);
  EXPECT_NE(vk.vkEnumerateInstanceVersion, nullptr);
  EXPECT_EQ(vk.vkCreateDevice, nullptr);  // instance level: not yet
  EXPECT_EQ(vk.vkCreateBuffer, nullptr);  // device level: not yet
  EXPECT_EQ((*library)->path(), kVulkanLibrary);
}

TEST(VulkanLoader, ALibraryOpensOncePerProcess) {
  absl::StatusOr<std::shared_ptr<const VulkanLibrary>> first = VulkanLibrary::open();
  if (!first.ok()) GTEST_SKIP() << "no Vulkan loader here: " << first.status();
  absl::StatusOr<std::shared_ptr<const VulkanLibrary>> second = VulkanLibrary::open(kVulkanLibrary);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());
}

TEST(VulkanLoader, AMissingLibraryIsUnimplementedAndNamed) {
  absl::StatusOr<std::shared_ptr<const VulkanLibrary>> library = VulkanLibrary::open("libaccy-no-such-vulkan.so.1");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(errorKind(library.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(library.status().message()), HasSubstr("cannot load the Vulkan library"));
  EXPECT_THAT(std::string(library.status().message()), HasSubstr("libaccy-no-such-vulkan.so.1"));

  absl::StatusOr<std::shared_ptr<VulkanDevice>> device = VulkanDevice::open("libaccy-no-such-vulkan.so.1");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(errorKind(device.status()), ErrorKind::kUnimplemented);
}

TEST(VulkanLoader, ALibraryWithoutTheEntryPointIsUnimplemented) {
  absl::StatusOr<std::shared_ptr<const VulkanLibrary>> library = VulkanLibrary::open("libc.so.6");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(errorKind(library.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(library.status().message()), HasSubstr("libc.so.6 has no vkGetInstanceProcAddr"));
  EXPECT_THAT(std::string(library.status().message()), HasSubstr("vulkan_loader.cc:"));
}

TEST(VulkanLoader, ResultsHaveNames) {
  EXPECT_EQ(vkResultName(VK_SUCCESS), "VK_SUCCESS");
  EXPECT_EQ(vkResultName(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
  EXPECT_EQ(vkResultName(VK_ERROR_OUT_OF_POOL_MEMORY), "VK_ERROR_OUT_OF_POOL_MEMORY");
  EXPECT_EQ(vkResultName(static_cast<VkResult>(-12345)), "VkResult(-12345)");
}

TEST(VulkanLoader, ErrorsNameTheCallTheLineAndTheResult) {
  const absl::Status lost = vulkanError(VK_ERROR_DEVICE_LOST, "vkQueueSubmit", "backends/vulkan/x.cc", 42);
  EXPECT_EQ(errorKind(lost), ErrorKind::kLaunchFailed);
  EXPECT_EQ(std::string(lost.message()),
            "LaunchFailed: vkQueueSubmit failed with VK_ERROR_DEVICE_LOST at backends/vulkan/x.cc:42");
  EXPECT_EQ(errorKind(vulkanError(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory", "f", 1)),
            ErrorKind::kOutOfMemory);
  EXPECT_EQ(errorKind(vulkanError(VK_ERROR_INCOMPATIBLE_DRIVER, "vkCreateInstance", "f", 1)),
            ErrorKind::kUnimplemented);
}

// ACCY_VK_CALL returns the error from the enclosing function, naming the call.
VkResult failingCall(int) { return VK_ERROR_INITIALIZATION_FAILED; }
VkResult succeedingCall(int) { return VK_SUCCESS; }
struct FakeTable {
  PFN_vkVoidFunction unused = nullptr;
  VkResult (*vkCreateDevice)(int) = failingCall;
  VkResult (*vkCreateFence)(int) = succeedingCall;
};
absl::Status callBoth(const FakeTable& table) {
  ACCY_VK_CALL(table, vkCreateFence, 0);
  ACCY_VK_CALL(table, vkCreateDevice, 0);
  return absl::OkStatus();
}

TEST(VulkanLoader, CallMacroReturnsTheFailure) {
  const absl::Status s = callBoth(FakeTable{});
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(s.message()), HasSubstr("vkCreateDevice failed with VK_ERROR_INITIALIZATION_FAILED at "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("vulkan_loader_test.cc:"));
}

}  // namespace
}  // namespace accy::vulkan
