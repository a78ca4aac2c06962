// Vulkan conformance on a real device (Mesa's lavapipe in CI): the GPU
// conformance suite (tests/gpu_conformance.h) compiled to SPIR-V (exact
// mode). Skipped, with the reason, where no Vulkan device is available;
// nothing else is skipped.
#include "backends/vulkan/vulkan_backend.h"
#include "compiler/codegen/spirv/compile.h"
#include "gtest/gtest.h"
#include "tests/gpu_conformance.h"

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

#define SKIP_WITHOUT_VULKAN()                                                                     \
  if (!vulkan().info().available) GTEST_SKIP() << "no Vulkan device: " << vulkan().info().unavailable_reason

TEST(VulkanConformance, EveryOp) {
  SKIP_WITHOUT_VULKAN();
  checkEveryOp(gpu());
}
TEST(VulkanConformance, IntegerPowEdgeCases) {
  SKIP_WITHOUT_VULKAN();
  checkIntegerPowEdgeCases(gpu());
}
TEST(VulkanConformance, BoolBuffersMixedWithNumbers) {
  SKIP_WITHOUT_VULKAN();
  checkBoolBuffersMixedWithNumbers(gpu());
}
TEST(VulkanConformance, TiledProducts) {
  SKIP_WITHOUT_VULKAN();
  checkTiledProducts(gpu());
}
TEST(VulkanConformance, TreeReductions) {
  SKIP_WITHOUT_VULKAN();
  checkTreeReductions(gpu());
}
TEST(VulkanConformance, ReductionsAsTheDeviceChooses) {
  SKIP_WITHOUT_VULKAN();
  checkReductionsAsTheDeviceChooses(gpu());
}
TEST(VulkanConformance, RandomPrograms) {
  SKIP_WITHOUT_VULKAN();
  checkRandomPrograms(gpu());
}
TEST(VulkanConformance, TransformedPrograms) {
  SKIP_WITHOUT_VULKAN();
  checkTransformedPrograms(gpu());
}
TEST(VulkanConformance, TheThreeToneTests) {
  SKIP_WITHOUT_VULKAN();
  checkTheThreeToneTests(gpu());
}

}  // namespace
}  // namespace accy::testing
