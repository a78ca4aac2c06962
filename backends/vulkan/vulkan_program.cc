#include "backends/vulkan/vulkan_program.h"

#include "backends/buffer_checks.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::vulkan {

// Everything one launch needs, reusable launch after launch: the buffers
// never change size and the command buffer is recorded once.
struct VulkanProgram::LaunchResources {
  explicit LaunchResources(const VulkanDevice* d) : device(d) {}
  LaunchResources(const LaunchResources&) = delete;
  LaunchResources& operator=(const LaunchResources&) = delete;
  ~LaunchResources() {
    const VulkanFunctions& vk = device->vk();
    const VkDevice dev = device->device();
    for (VkBuffer b : buffers) vk.vkDestroyBuffer(dev, b, nullptr);
    if (memory != VK_NULL_HANDLE) vk.vkFreeMemory(dev, memory, nullptr);  // unmaps too
    if (descriptor_pool != VK_NULL_HANDLE) vk.vkDestroyDescriptorPool(dev, descriptor_pool, nullptr);
    if (command_pool != VK_NULL_HANDLE) vk.vkDestroyCommandPool(dev, command_pool, nullptr);
    if (fence != VK_NULL_HANDLE) vk.vkDestroyFence(dev, fence, nullptr);
  }

  const VulkanDevice* device;
  std::vector<VkBuffer> buffers;       // one per artifact-plan buffer
  std::vector<VkDeviceSize> offsets;   // of each buffer in `memory`
  VkDeviceMemory memory = VK_NULL_HANDLE;
  std::byte* mapped = nullptr;         // all of `memory`
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
  VkDescriptorSet descriptor_set = VK_NULL_HANDLE;
  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
};

namespace {

constexpr uint32_t kSpirvMagic = 0x07230203;
constexpr size_t kSpirvHeaderBytes = 20;  // magic, version, generator, bound, schema

absl::Status invalidProgram(std::string what) { return makeError(ErrorKind::kInvalidProgram, what); }
VkDeviceSize roundUp(VkDeviceSize n, VkDeviceSize to) { return (n + to - 1) / to * to; }

// Storage buffers hold whole 32-bit words, and Vulkan has no empty buffers.
VkDeviceSize deviceBytes(int64_t bytes) { return roundUp(std::max<VkDeviceSize>(bytes, 4), 4); }

// The distinct entry offsets, ascending: kernel k's module runs from its
// entry offset to the next larger one (or the end of the code), so kernels
// may share a module.
std::vector<uint64_t> moduleStarts(const executable::Executable& exe) {
  std::set<uint64_t> starts;
  for (const executable::LaunchStep& s : exe.launch_plan.steps) starts.insert(s.entry_offset);
  return std::vector<uint64_t>(starts.begin(), starts.end());
}

uint64_t moduleEnd(const executable::Executable& exe, const std::vector<uint64_t>& starts, uint64_t start) {
  const auto next = std::upper_bound(starts.begin(), starts.end(), start);
  return next == starts.end() ? exe.code.size() : *next;
}

absl::Status checkModules(const executable::Executable& exe, const std::vector<uint64_t>& starts) {
  for (size_t k = 0; k < exe.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = exe.launch_plan.steps[k];
    const uint64_t end = moduleEnd(exe, starts, s.entry_offset);
    const std::string what = strCat("kernel ", k, " (", s.kernel, ")");
    if (s.entry_offset % 4 != 0 || (end - s.entry_offset) % 4 != 0) {
      return invalidProgram(strCat(what, ": its SPIR-V module (bytes ", s.entry_offset, " to ", end,
                                   ") is not whole 32-bit words"));
    }
    const uint8_t* p = exe.code.data() + s.entry_offset;
    if (end - s.entry_offset < kSpirvHeaderBytes ||
        (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24) != kSpirvMagic) {
      return invalidProgram(strCat(what, ": no SPIR-V module at byte ", s.entry_offset,
                                   " (a module starts with the magic 0x07230203)"));
    }
  }
  return absl::OkStatus();
}

absl::Status checkLimits(const executable::Executable& exe, const DeviceLimits& limits) {
  const std::vector<executable::BufferPlan>& plans = exe.artifact_plan.buffers;
  if (plans.size() > limits.max_storage_buffers) {
    return makeError(ErrorKind::kUnimplemented, strCat("the executable binds ", plans.size(),
                                                       " storage buffers; this device allows ",
                                                       limits.max_storage_buffers));
  }
  for (size_t b = 0; b < plans.size(); ++b) {
    if (plans[b].bytes < 0) return invalidProgram(strCat("executable: buffer ", b, " has a negative size"));
    if (static_cast<uint64_t>(plans[b].bytes) > limits.max_storage_buffer_range) {
      return makeError(ErrorKind::kUnimplemented, strCat("buffer ", b, " is ", plans[b].bytes,
                                                         " bytes; this device's storage buffers hold at most ",
                                                         limits.max_storage_buffer_range));
    }
  }
  for (size_t k = 0; k < exe.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = exe.launch_plan.steps[k];
    if (std::max<int64_t>(s.parallel_extent, 1) > limits.max_workgroup_count_x) {
      return makeError(ErrorKind::kUnimplemented, strCat("kernel ", k, " (", s.kernel, ") dispatches ",
                                                         s.parallel_extent, " workgroups; this device allows ",
                                                         limits.max_workgroup_count_x));
    }
  }
  return absl::OkStatus();
}

}  // namespace

VulkanProgram::VulkanProgram(std::shared_ptr<const VulkanDevice> device, executable::Executable exe)
    : device_(std::move(device)), exe_(std::move(exe)) {}

VulkanProgram::~VulkanProgram() {
  idle_.clear();
  const VulkanDevice* device = device_.get();
  auto destroy = [device, pipelines = pipelines_, modules = modules_, layout = pipeline_layout_,
                  set_layout = set_layout_](void*) {
    const VulkanFunctions& vk = device->vk();
    const VkDevice dev = device->device();
    for (VkPipeline p : pipelines) vk.vkDestroyPipeline(dev, p, nullptr);
    for (VkShaderModule m : modules) vk.vkDestroyShaderModule(dev, m, nullptr);
    if (layout != VK_NULL_HANDLE) vk.vkDestroyPipelineLayout(dev, layout, nullptr);
    if (set_layout != VK_NULL_HANDLE) vk.vkDestroyDescriptorSetLayout(dev, set_layout, nullptr);
  };
  // A lost device may still run a hung launch of these pipelines: they go
  // when the device is destroyed, after it is idle.
  if (!device_->health().ok()) {
    device_->park(std::shared_ptr<void>(static_cast<void*>(nullptr), destroy));
    return;
  }
  destroy(nullptr);
}

absl::StatusOr<std::shared_ptr<const VulkanProgram>> VulkanProgram::load(std::shared_ptr<const VulkanDevice> device,
                                                                         executable::Executable exe) {
  ACCY_RETURN_IF_ERROR(executable::validateExecutable(exe));
  if (exe.target != "spirv") {
    return makeError(ErrorKind::kUnimplemented, strCat("the Vulkan backend runs spirv code, not ", exe.target));
  }
  const std::vector<uint64_t> ordered = moduleStarts(exe);
  ACCY_RETURN_IF_ERROR(checkModules(exe, ordered));
  ACCY_RETURN_IF_ERROR(checkLimits(exe, device->limits()));

  std::shared_ptr<VulkanProgram> program(new VulkanProgram(device, std::move(exe)));
  const executable::Executable& e = program->exe_;
  const VulkanFunctions& vk = device->vk();
  const VkDevice dev = device->device();

  std::vector<VkDescriptorSetLayoutBinding> bindings(e.artifact_plan.buffers.size());
  for (size_t b = 0; b < bindings.size(); ++b) {
    bindings[b].binding = static_cast<uint32_t>(b);
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_info{};
  set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  set_info.bindingCount = static_cast<uint32_t>(bindings.size());
  set_info.pBindings = bindings.data();
  ACCY_VK_CALL(vk, vkCreateDescriptorSetLayout, dev, &set_info, nullptr, &program->set_layout_);
  VkPipelineLayoutCreateInfo layout_info{};
  layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &program->set_layout_;
  ACCY_VK_CALL(vk, vkCreatePipelineLayout, dev, &layout_info, nullptr, &program->pipeline_layout_);

  std::vector<VkPipeline> by_start(ordered.size(), VK_NULL_HANDLE);
  for (size_t k = 0; k < e.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = e.launch_plan.steps[k];
    const size_t m = std::lower_bound(ordered.begin(), ordered.end(), s.entry_offset) - ordered.begin();
    if (by_start[m] == VK_NULL_HANDLE) {
      const uint64_t end = moduleEnd(e, ordered, s.entry_offset);
      // Copied so the driver reads properly aligned words.
      std::vector<uint32_t> words((end - s.entry_offset) / 4);
      std::memcpy(words.data(), e.code.data() + s.entry_offset, words.size() * 4);
      VkShaderModuleCreateInfo module_info{};
      module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
      module_info.codeSize = words.size() * 4;
      module_info.pCode = words.data();
      VkShaderModule module = VK_NULL_HANDLE;
      ACCY_VK_CALL(vk, vkCreateShaderModule, dev, &module_info, nullptr, &module);
      program->modules_.push_back(module);
      VkComputePipelineCreateInfo pipeline_info{};
      pipeline_info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
      pipeline_info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
      pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
      pipeline_info.stage.module = module;
      pipeline_info.stage.pName = "main";
      pipeline_info.layout = program->pipeline_layout_;
      VkPipeline pipeline = VK_NULL_HANDLE;
      ACCY_VK_CALL(vk, vkCreateComputePipelines, dev, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &pipeline);
      program->pipelines_.push_back(pipeline);
      by_start[m] = pipeline;
    }
    program->kernels_.push_back(
        Kernel{by_start[m], static_cast<uint32_t>(std::max<int64_t>(s.parallel_extent, 1))});
  }
  return std::shared_ptr<const VulkanProgram>(std::move(program));
}

absl::Status VulkanProgram::checkBuffers(absl::Span<const std::span<const std::byte>> inputs,
                                         absl::Span<const std::span<std::byte>> outputs) const {
  return backends::checkLaunchBuffers(exe_, inputs, outputs);
}

absl::StatusOr<std::unique_ptr<VulkanProgram::LaunchResources>> VulkanProgram::makeResources() const {
  const VulkanFunctions& vk = device_->vk();
  const VkDevice dev = device_->device();
  // Destroys whatever was made if a step below fails.
  auto r = std::make_unique<LaunchResources>(device_.get());
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;

  VkDeviceSize total = 0;
  uint32_t type_bits = ~0u;
  for (const executable::BufferPlan& plan : plans) {
    VkBufferCreateInfo buffer_info{};
    buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    buffer_info.size = deviceBytes(plan.bytes);
    buffer_info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    ACCY_VK_CALL(vk, vkCreateBuffer, dev, &buffer_info, nullptr, &buffer);
    r->buffers.push_back(buffer);
    VkMemoryRequirements req{};
    vk.vkGetBufferMemoryRequirements(dev, buffer, &req);
    const VkDeviceSize offset = roundUp(total, std::max<VkDeviceSize>(req.alignment, 1));
    r->offsets.push_back(offset);
    total = offset + req.size;
    type_bits &= req.memoryTypeBits;
  }
  if (!plans.empty()) {
    const int type = device_->hostMemoryType(type_bits);
    if (type < 0) {
      return makeError(ErrorKind::kUnimplemented,
                       strCat("device ", device_->name(), " has no host-coherent memory for storage buffers"));
    }
    VkMemoryAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    alloc.allocationSize = total;
    alloc.memoryTypeIndex = static_cast<uint32_t>(type);
    ACCY_VK_CALL(vk, vkAllocateMemory, dev, &alloc, nullptr, &r->memory);
    for (size_t b = 0; b < plans.size(); ++b) {
      ACCY_VK_CALL(vk, vkBindBufferMemory, dev, r->buffers[b], r->memory, r->offsets[b]);
    }
    void* mapped = nullptr;
    ACCY_VK_CALL(vk, vkMapMemory, dev, r->memory, 0, VK_WHOLE_SIZE, 0, &mapped);
    r->mapped = static_cast<std::byte*>(mapped);

    VkDescriptorPoolSize pool_size{};
    pool_size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    pool_size.descriptorCount = static_cast<uint32_t>(plans.size());
    VkDescriptorPoolCreateInfo pool_info{};
    pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pool_info.maxSets = 1;
    pool_info.poolSizeCount = 1;
    pool_info.pPoolSizes = &pool_size;
    ACCY_VK_CALL(vk, vkCreateDescriptorPool, dev, &pool_info, nullptr, &r->descriptor_pool);
    VkDescriptorSetAllocateInfo set_alloc{};
    set_alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    set_alloc.descriptorPool = r->descriptor_pool;
    set_alloc.descriptorSetCount = 1;
    set_alloc.pSetLayouts = &set_layout_;
    ACCY_VK_CALL(vk, vkAllocateDescriptorSets, dev, &set_alloc, &r->descriptor_set);
    std::vector<VkDescriptorBufferInfo> infos(plans.size());
    std::vector<VkWriteDescriptorSet> writes(plans.size());
    for (size_t b = 0; b < plans.size(); ++b) {
      infos[b].buffer = r->buffers[b];
      infos[b].offset = 0;
      infos[b].range = VK_WHOLE_SIZE;
      writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[b].dstSet = r->descriptor_set;
      writes[b].dstBinding = static_cast<uint32_t>(b);
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &infos[b];
    }
    vk.vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }

  VkCommandPoolCreateInfo command_pool_info{};
  command_pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  command_pool_info.queueFamilyIndex = device_->queueFamily();
  ACCY_VK_CALL(vk, vkCreateCommandPool, dev, &command_pool_info, nullptr, &r->command_pool);
  VkCommandBufferAllocateInfo command_alloc{};
  command_alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  command_alloc.commandPool = r->command_pool;
  command_alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  command_alloc.commandBufferCount = 1;
  ACCY_VK_CALL(vk, vkAllocateCommandBuffers, dev, &command_alloc, &r->command_buffer);
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  ACCY_VK_CALL(vk, vkCreateFence, dev, &fence_info, nullptr, &r->fence);
  ACCY_RETURN_IF_ERROR(record(*r));
  return r;
}

absl::Status VulkanProgram::record(LaunchResources& r) const {
  const VulkanFunctions& vk = device_->vk();
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;  // no ONE_TIME_SUBMIT: it is resubmitted
  ACCY_VK_CALL(vk, vkBeginCommandBuffer, r.command_buffer, &begin);
  VkMemoryBarrier between{};
  between.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  between.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  between.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  for (size_t k = 0; k < kernels_.size(); ++k) {
    if (k > 0) {
      vk.vkCmdPipelineBarrier(r.command_buffer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &between, 0, nullptr, 0, nullptr);
    }
    vk.vkCmdBindPipeline(r.command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, kernels_[k].pipeline);
    if (r.descriptor_set != VK_NULL_HANDLE) {
      vk.vkCmdBindDescriptorSets(r.command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_, 0, 1,
                                 &r.descriptor_set, 0, nullptr);
    }
    vk.vkCmdDispatch(r.command_buffer, kernels_[k].groups, 1, 1);
  }
  // Makes the kernels' writes visible to the host once the fence signals.
  VkMemoryBarrier to_host{};
  to_host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk.vkCmdPipelineBarrier(r.command_buffer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                          &to_host, 0, nullptr, 0, nullptr);
  ACCY_VK_CALL(vk, vkEndCommandBuffer, r.command_buffer);
  return absl::OkStatus();
}

absl::Status VulkanProgram::run(LaunchResources& r, absl::Span<const std::span<const std::byte>> inputs,
                                absl::Span<const std::span<std::byte>> outputs) const {
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;
  // Host writes before vkQueueSubmit are visible to the device without a barrier.
  for (size_t b = 0; b < plans.size(); ++b) {
    const size_t bytes = static_cast<size_t>(plans[b].bytes);
    if (bytes == 0) continue;
    switch (plans[b].role) {
      case choir::BufferRole::kInput:
        std::memcpy(r.mapped + r.offsets[b], inputs[plans[b].io_index].data(), bytes);
        break;
      case choir::BufferRole::kOutput:
        std::memcpy(r.mapped + r.offsets[b], outputs[plans[b].io_index].data(), bytes);
        break;
      case choir::BufferRole::kTemp:
        break;
    }
  }
  const VulkanFunctions& vk = device_->vk();
  const VkDevice dev = device_->device();
  ACCY_RETURN_IF_ERROR(device_->submit(r.command_buffer, r.fence));
  // Bounded: a launch the device has not finished within its launch
  // timeout counts as hung, and the device as lost.
  const std::chrono::milliseconds limit = device_->launchTimeout();
  const uint64_t wait_ns = limit.count() > 0 ? static_cast<uint64_t>(limit.count()) * 1000000u : UINT64_MAX;
  const VkResult waited = vk.vkWaitForFences(dev, 1, &r.fence, VK_TRUE, wait_ns);
  if (waited == VK_TIMEOUT) {
    absl::Status hung = makeError(ErrorKind::kLaunchFailed,
                                  strCat("vulkan: a launch did not finish within ", limit.count(),
                                         " ms (the launch timeout); the device is marked lost"));
    device_->markLost(hung);
    return hung;
  }
  if (waited != VK_SUCCESS) return vulkanError(waited, "vkWaitForFences", __FILE__, __LINE__);
  ACCY_VK_CALL(vk, vkResetFences, dev, 1, &r.fence);
  for (size_t b = 0; b < plans.size(); ++b) {
    const size_t bytes = static_cast<size_t>(plans[b].bytes);
    if (plans[b].role == choir::BufferRole::kOutput && bytes > 0) {
      std::memcpy(outputs[plans[b].io_index].data(), r.mapped + r.offsets[b], bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status VulkanProgram::launch(absl::Span<const std::span<const std::byte>> inputs,
                                   absl::Span<const std::span<std::byte>> outputs) const {
  ACCY_RETURN_IF_ERROR(checkBuffers(inputs, outputs));
  if (kernels_.empty()) return absl::OkStatus();
  ACCY_RETURN_IF_ERROR(device_->health());  // a lost device fails fast, saying why
  ACCY_ASSIGN_OR_RETURN(std::unique_ptr<LaunchResources> r, idle_.take([&] { return makeResources(); }));
  // On failure the resources are dropped, not pooled: their state is unknown;
  // a hung launch's stay with the device, which may still be using them.
  if (absl::Status st = run(*r, inputs, outputs); !st.ok()) {
    if (!device_->health().ok()) device_->park(std::shared_ptr<LaunchResources>(std::move(r)));
    return st;
  }
  idle_.give(std::move(r));
  return absl::OkStatus();
}

}  // namespace accy::vulkan
