// A SPIR-V executable loaded on a Vulkan device.
//
// Load validates the executable (the layout in compiler/codegen/spirv/
// compile.h) and creates, once, one shader module and compute pipeline per
// distinct kernel module (entry point "main"), and for each module a
// descriptor set layout of the STORAGE_BUFFER bindings it declares (set 0,
// binding = buffer index, read from its OpDecorate Binding) and a pipeline
// layout of that set: a kernel binds only the buffers it uses, so a program
// of more buffers than the device allows a stage (lavapipe: 32) runs as
// long as each kernel stays within it.
//
// A launch copies the caller's inputs and outputs into host-visible,
// host-coherent storage buffers (so outputs start with the caller's
// contents, as on the CPU where they are used in place), submits one command
// buffer that dispatches every kernel in order with a compute-to-compute
// memory barrier between kernels, waits for it, and copies the outputs
// back. The buffers, descriptor set, command buffer (recorded once) and
// fence of a launch are pooled and reused; launches from many threads at
// once each take their own set, and only queue submission is serialized.
#ifndef ACCY_BACKENDS_VULKAN_VULKAN_PROGRAM_H_
#define ACCY_BACKENDS_VULKAN_VULKAN_PROGRAM_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/backend.h"
#include "backends/resource_pool.h"
#include "backends/vulkan/vulkan_device.h"
#include "compiler/executable/executable.h"

namespace accy::vulkan {

class VulkanProgram final : public backends::LoadedProgram {
 public:
  // InvalidProgram when `exe` fails validateExecutable or a kernel's module
  // is empty, not word-aligned or lacks the SPIR-V magic; Unimplemented when
  // exe.target is not "spirv" or the device's limits (workgroup count,
  // storage buffer range, the storage buffers one kernel binds) are too
  // small; the vulkanError of a
  // failing Vulkan call (pipeline creation included) otherwise.
  static absl::StatusOr<std::shared_ptr<const VulkanProgram>> load(std::shared_ptr<const VulkanDevice> device,
                                                                   executable::Executable exe);

  VulkanProgram(const VulkanProgram&) = delete;
  VulkanProgram& operator=(const VulkanProgram&) = delete;
  ~VulkanProgram() override;

  // Buffers: exactly the executable's input and output counts and byte
  // sizes, aligned to their element size, outputs disjoint from each other
  // and from the inputs; anything else fails with InvalidBuffer before
  // anything runs. A failing Vulkan call gives its vulkanError.
  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override;

  // A scan of this program as its body, on the device: every step of a
  // chunk (at most kCommandsPerSubmit commands) recorded in one command
  // buffer and submitted once, the host waiting once a chunk (and asking
  // the caller's stop check there); nullopt for a program with an input or
  // output no kernel binds.
  std::optional<absl::Status> launchRepeated(const Repeat& repeat, absl::Span<const std::span<const std::byte>> inputs,
                                             absl::Span<const std::span<std::byte>> outputs) const override;

  const executable::Executable& executable() const override { return exe_; }

  static constexpr int64_t kCommandsPerSubmit = 1 << 16;
  // Fewer commands a submit for launchRepeated (tests of its chunks).
  void setCommandsPerSubmit(int64_t commands) const { commands_per_submit_ = commands; }
  const VulkanDevice& device() const { return *device_; }

  struct LaunchResources;

 private:
  struct Kernel {
    VkPipeline pipeline = VK_NULL_HANDLE;
    uint32_t groups = 1;
    size_t module = 0;  // index into module_layouts_
  };
  // What one distinct module binds: its buffers, their set layout and the
  // pipeline layout of that one set.
  struct ModuleLayout {
    std::vector<uint32_t> bindings;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout pipeline_layout = VK_NULL_HANDLE;
  };

  VulkanProgram(std::shared_ptr<const VulkanDevice> device, executable::Executable exe);
  absl::Status checkBuffers(absl::Span<const std::span<const std::byte>> inputs,
                            absl::Span<const std::span<std::byte>> outputs) const;
  absl::StatusOr<std::unique_ptr<LaunchResources>> makeResources() const;
  absl::Status record(LaunchResources& r) const;
  static absl::Status makeHostBuffers(const VulkanDevice& device, const std::vector<int64_t>& bytes,
                                      LaunchResources& r);
  absl::Status makeDescriptorSets(LaunchResources& r, const std::function<VkBuffer(uint32_t)>& buffer_of) const;
  absl::Status makeCommands(LaunchResources& r, VkCommandPoolCreateFlags flags) const;
  absl::Status submitAndWait(LaunchResources& r) const;
  absl::Status runRepeated(LaunchResources& r, const Repeat& repeat,
                           absl::Span<const std::span<const std::byte>> inputs,
                           absl::Span<const std::span<std::byte>> outputs, const std::vector<int>& in,
                           const std::vector<int>& out) const;
  // Runs `work` on launch resources from the pool (the device's health
  // asked first), gives them back after, drops them on failure, and parks
  // them with the device when it is lost (a hung launch may still use them).
  absl::Status withResources(const std::function<absl::Status(LaunchResources&)>& work) const;
  absl::Status run(LaunchResources& r, absl::Span<const std::span<const std::byte>> inputs,
                   absl::Span<const std::span<std::byte>> outputs) const;

  std::shared_ptr<const VulkanDevice> device_;
  executable::Executable exe_;
  std::vector<VkShaderModule> modules_;
  std::vector<VkPipeline> pipelines_;  // one per distinct module
  std::vector<Kernel> kernels_;        // one per launch step
  std::vector<ModuleLayout> module_layouts_;  // one per distinct module

  mutable std::atomic<int64_t> commands_per_submit_{kCommandsPerSubmit};
  // Launch resources not in use.
  mutable backends::ResourcePool<LaunchResources> idle_;
};

}  // namespace accy::vulkan

#endif  // ACCY_BACKENDS_VULKAN_VULKAN_PROGRAM_H_
