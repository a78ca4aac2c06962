// Vulkan conformance on a real device (Mesa's lavapipe in CI): the device
// suite (tests/device_suite.h) compiled to SPIR-V (exact
// mode). Skipped, with the reason, where no Vulkan device is available;
// nothing else is skipped.
#include "backends/vulkan/vulkan_backend.h"
#include "compiler/codegen/spirv/compile.h"
#include "gtest/gtest.h"
#include "tests/device_suite.h"

namespace accy::testing {
namespace {

backends::Backend& vulkan() {
  static std::unique_ptr<backends::Backend> b = backends::makeVulkanBackend(backends::BackendOptions{});
  return *b;
}

GpuUnderTest gpu() {
  GpuUnderTest g;
  g.backend = &vulkan();
  g.target = "spirv";
  // With the cooperative forms on, as a GPU gets them, though lavapipe, a
  // CPU device, does not choose them for itself.
  g.compile_for_gpu = [](const tensor::Program& program) {
    spirv::TargetInfo target = backends::vulkanTargetInfo(vulkan());
    target.cooperative_workgroups = true;
    return spirv::compileProgram(program, target);
  };
  g.int64 = backends::vulkanTargetInfo(vulkan()).int64;
  g.note = "subgroup size " + std::to_string(backends::vulkanTargetInfo(vulkan()).subgroup_size);
  return g;
}

// The device suite (tests/device_suite.h) on the Vulkan device.
const bool registered = registerDeviceSuite({
    .name = "vulkan",
    .unavailable = [] { return vulkan().info().available ? std::string() : "no Vulkan device: " + vulkan().info().unavailable_reason; },
    .device = gpu,
    .refuses = {},
    .leaves_out = {},
});

}  // namespace
}  // namespace accy::testing
