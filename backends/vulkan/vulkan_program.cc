#include "backends/vulkan/vulkan_program.h"

#include "backends/buffer_checks.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "base/errors.h"
#include "base/stop.h"
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
  std::vector<VkDescriptorSet> descriptor_sets;  // one per distinct module
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

// The buffers the module from `start` to `end` binds: the Binding
// decorations of its variables (OpDecorate, opcode 71; decoration 33), all
// in descriptor set 0 (decoration 34), each a buffer of the executable.
absl::StatusOr<std::vector<uint32_t>> moduleBindings(const executable::Executable& exe, uint64_t start, uint64_t end,
                                                     const std::string& what) {
  std::vector<uint32_t> words((end - start) / 4);
  std::memcpy(words.data(), exe.code.data() + start, words.size() * 4);
  std::set<uint32_t> bindings;
  for (size_t at = kSpirvHeaderBytes / 4; at < words.size();) {
    const uint32_t count = words[at] >> 16, opcode = words[at] & 0xffff;
    if (count == 0 || at + count > words.size()) {
      return invalidProgram(strCat(what, ": its SPIR-V module has an instruction of ", count, " words at word ", at,
                                   " running past its end (", words.size(), " words)"));
    }
    if (opcode == 71 /* OpDecorate */ && count >= 4) {
      const uint32_t decoration = words[at + 2], value = words[at + 3];
      if (decoration == 34 /* DescriptorSet */ && value != 0) {
        return invalidProgram(strCat(what, ": its module uses descriptor set ", value, "; Accy's kernels use set 0"));
      }
      if (decoration == 33 /* Binding */) {
        if (value >= exe.artifact_plan.buffers.size()) {
          return invalidProgram(strCat(what, ": its module binds buffer ", value, "; the executable has ",
                                       exe.artifact_plan.buffers.size()));
        }
        bindings.insert(value);
      }
    }
    at += count;
  }
  return std::vector<uint32_t>(bindings.begin(), bindings.end());
}

absl::Status checkLimits(const executable::Executable& exe, const DeviceLimits& limits) {
  const std::vector<executable::BufferPlan>& plans = exe.artifact_plan.buffers;
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
  auto destroy = [device, pipelines = pipelines_, modules = modules_, layouts = module_layouts_](void*) {
    const VulkanFunctions& vk = device->vk();
    const VkDevice dev = device->device();
    for (VkPipeline p : pipelines) vk.vkDestroyPipeline(dev, p, nullptr);
    for (VkShaderModule m : modules) vk.vkDestroyShaderModule(dev, m, nullptr);
    for (const ModuleLayout& l : layouts) {
      if (l.pipeline_layout != VK_NULL_HANDLE) vk.vkDestroyPipelineLayout(dev, l.pipeline_layout, nullptr);
      if (l.set_layout != VK_NULL_HANDLE) vk.vkDestroyDescriptorSetLayout(dev, l.set_layout, nullptr);
    }
  };
  // A lost device may still run a hung launch of these pipelines: they go
  // when the device is destroyed, after it is idle.
  if (!device_->health().ok()) {
    device_->park(std::shared_ptr<void>(static_cast<void*>(nullptr), destroy));
    return;
  }
  destroy(nullptr);
}

namespace {

// A barrier from every shader and transfer write before it to every shader
// and transfer access after it (a loop's steps, one after another).
void fullBarrier(const VulkanFunctions& vk, VkCommandBuffer cb) {
  VkMemoryBarrier all{};
  all.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  all.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  all.dstAccessMask =
      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vk.vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &all, 0, nullptr, 0, nullptr);
}

}  // namespace

// Host-visible, host-coherent storage buffers of `bytes` each (also copy
// sources and destinations), in one allocation, mapped: r's buffers,
// offsets, memory and mapped.
absl::Status VulkanProgram::makeHostBuffers(const VulkanDevice& device, const std::vector<int64_t>& bytes,
                                            LaunchResources& r) {
  const VulkanFunctions& vk = device.vk();
  const VkDevice dev = device.device();
  VkDeviceSize total = 0;
  uint32_t type_bits = ~0u;
  for (const int64_t size : bytes) {
    VkBufferCreateInfo buffer_info{};
    buffer_info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    buffer_info.size = deviceBytes(size);
    buffer_info.usage =
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    buffer_info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer = VK_NULL_HANDLE;
    ACCY_VK_CALL(vk, vkCreateBuffer, dev, &buffer_info, nullptr, &buffer);
    r.buffers.push_back(buffer);
    VkMemoryRequirements req{};
    vk.vkGetBufferMemoryRequirements(dev, buffer, &req);
    const VkDeviceSize offset = roundUp(total, std::max<VkDeviceSize>(req.alignment, 1));
    r.offsets.push_back(offset);
    total = offset + req.size;
    type_bits &= req.memoryTypeBits;
  }
  if (bytes.empty()) return absl::OkStatus();
  const int type = device.hostMemoryType(type_bits);
  if (type < 0) {
    return makeError(ErrorKind::kUnimplemented,
                     strCat("device ", device.name(), " has no host-coherent memory for storage buffers"));
  }
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = total;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  ACCY_VK_CALL(vk, vkAllocateMemory, dev, &alloc, nullptr, &r.memory);
  for (size_t b = 0; b < bytes.size(); ++b) {
    ACCY_VK_CALL(vk, vkBindBufferMemory, dev, r.buffers[b], r.memory, r.offsets[b]);
  }
  void* mapped = nullptr;
  ACCY_VK_CALL(vk, vkMapMemory, dev, r.memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  r.mapped = static_cast<std::byte*>(mapped);
  return absl::OkStatus();
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

  // Each module's bindings, within the device's storage buffers a stage,
  // before anything is created.
  std::vector<std::vector<uint32_t>> bindings_of(ordered.size());
  std::vector<bool> read(ordered.size(), false);
  for (size_t k = 0; k < e.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = e.launch_plan.steps[k];
    const size_t m = std::lower_bound(ordered.begin(), ordered.end(), s.entry_offset) - ordered.begin();
    if (read[m]) continue;
    read[m] = true;
    const std::string what = strCat("kernel ", k, " (", s.kernel, ")");
    ACCY_ASSIGN_OR_RETURN(bindings_of[m], moduleBindings(e, s.entry_offset, moduleEnd(e, ordered, s.entry_offset), what));
    if (bindings_of[m].size() > device->limits().max_storage_buffers) {
      return makeError(ErrorKind::kUnimplemented, strCat(what, " binds ", bindings_of[m].size(),
                                                         " storage buffers; this device allows ",
                                                         device->limits().max_storage_buffers, " a stage"));
    }
  }

  std::vector<VkPipeline> by_start(ordered.size(), VK_NULL_HANDLE);
  std::vector<size_t> layout_of(ordered.size(), 0);
  for (size_t k = 0; k < e.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = e.launch_plan.steps[k];
    const size_t m = std::lower_bound(ordered.begin(), ordered.end(), s.entry_offset) - ordered.begin();
    if (by_start[m] == VK_NULL_HANDLE) {
      ModuleLayout layout;
      layout.bindings = bindings_of[m];
      std::vector<VkDescriptorSetLayoutBinding> bindings(layout.bindings.size());
      for (size_t i = 0; i < bindings.size(); ++i) {
        bindings[i].binding = layout.bindings[i];
        bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        bindings[i].descriptorCount = 1;
        bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
      }
      VkDescriptorSetLayoutCreateInfo set_info{};
      set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
      set_info.bindingCount = static_cast<uint32_t>(bindings.size());
      set_info.pBindings = bindings.data();
      // Kept in module_layouts_ at once, so the destructor frees whatever
      // was made if a later call fails.
      program->module_layouts_.push_back(std::move(layout));
      ModuleLayout& made = program->module_layouts_.back();
      ACCY_VK_CALL(vk, vkCreateDescriptorSetLayout, dev, &set_info, nullptr, &made.set_layout);
      VkPipelineLayoutCreateInfo layout_info{};
      layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
      layout_info.setLayoutCount = 1;
      layout_info.pSetLayouts = &made.set_layout;
      ACCY_VK_CALL(vk, vkCreatePipelineLayout, dev, &layout_info, nullptr, &made.pipeline_layout);
      layout_of[m] = program->module_layouts_.size() - 1;
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
      pipeline_info.layout = program->module_layouts_[layout_of[m]].pipeline_layout;
      VkPipeline pipeline = VK_NULL_HANDLE;
      ACCY_VK_CALL(vk, vkCreateComputePipelines, dev, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &pipeline);
      program->pipelines_.push_back(pipeline);
      by_start[m] = pipeline;
    }
    program->kernels_.push_back(
        Kernel{by_start[m], static_cast<uint32_t>(std::max<int64_t>(s.parallel_extent, 1)), layout_of[m]});
  }
  return std::shared_ptr<const VulkanProgram>(std::move(program));
}

absl::Status VulkanProgram::checkBuffers(absl::Span<const std::span<const std::byte>> inputs,
                                         absl::Span<const std::span<std::byte>> outputs) const {
  return backends::checkLaunchBuffers(exe_, inputs, outputs);
}

absl::StatusOr<std::unique_ptr<VulkanProgram::LaunchResources>> VulkanProgram::makeResources() const {
  // Destroys whatever was made if a step below fails.
  auto r = std::make_unique<LaunchResources>(device_.get());
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;
  std::vector<int64_t> sizes;
  for (const executable::BufferPlan& plan : plans) sizes.push_back(plan.bytes);
  ACCY_RETURN_IF_ERROR(makeHostBuffers(*device_, sizes, *r));
  ACCY_RETURN_IF_ERROR(makeDescriptorSets(*r, [&](uint32_t b) { return r->buffers[b]; }));
  ACCY_RETURN_IF_ERROR(makeCommands(*r, 0));
  ACCY_RETURN_IF_ERROR(record(*r));
  return r;
}

absl::Status VulkanProgram::makeDescriptorSets(LaunchResources& r,
                                               const std::function<VkBuffer(uint32_t)>& buffer_of) const {
  const VulkanFunctions& vk = device_->vk();
  const VkDevice dev = device_->device();
  // One descriptor set per distinct module, of the buffers it binds.
  uint32_t descriptors = 0;
  std::vector<VkDescriptorSetLayout> set_layouts;
  for (const ModuleLayout& l : module_layouts_) {
    descriptors += static_cast<uint32_t>(l.bindings.size());
    set_layouts.push_back(l.set_layout);
  }
  if (set_layouts.empty()) return absl::OkStatus();
  VkDescriptorPoolSize pool_size{};
  pool_size.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
  pool_size.descriptorCount = std::max<uint32_t>(descriptors, 1);
  VkDescriptorPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool_info.maxSets = static_cast<uint32_t>(set_layouts.size());
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  ACCY_VK_CALL(vk, vkCreateDescriptorPool, dev, &pool_info, nullptr, &r.descriptor_pool);
  VkDescriptorSetAllocateInfo set_alloc{};
  set_alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  set_alloc.descriptorPool = r.descriptor_pool;
  set_alloc.descriptorSetCount = static_cast<uint32_t>(set_layouts.size());
  set_alloc.pSetLayouts = set_layouts.data();
  r.descriptor_sets.resize(set_layouts.size());
  ACCY_VK_CALL(vk, vkAllocateDescriptorSets, dev, &set_alloc, r.descriptor_sets.data());
  std::vector<VkDescriptorBufferInfo> infos(descriptors);
  std::vector<VkWriteDescriptorSet> writes(descriptors);
  size_t w = 0;
  for (size_t m = 0; m < module_layouts_.size(); ++m) {
    for (const uint32_t b : module_layouts_[m].bindings) {
      infos[w].buffer = buffer_of(b);
      infos[w].offset = 0;
      infos[w].range = VK_WHOLE_SIZE;
      writes[w].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[w].dstSet = r.descriptor_sets[m];
      writes[w].dstBinding = b;
      writes[w].descriptorCount = 1;
      writes[w].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[w].pBufferInfo = &infos[w];
      ++w;
    }
  }
  if (!writes.empty()) vk.vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  return absl::OkStatus();
}

absl::Status VulkanProgram::makeCommands(LaunchResources& r, VkCommandPoolCreateFlags flags) const {
  const VulkanFunctions& vk = device_->vk();
  const VkDevice dev = device_->device();
  VkCommandPoolCreateInfo command_pool_info{};
  command_pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  command_pool_info.flags = flags;
  command_pool_info.queueFamilyIndex = device_->queueFamily();
  ACCY_VK_CALL(vk, vkCreateCommandPool, dev, &command_pool_info, nullptr, &r.command_pool);
  VkCommandBufferAllocateInfo command_alloc{};
  command_alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  command_alloc.commandPool = r.command_pool;
  command_alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  command_alloc.commandBufferCount = 1;
  ACCY_VK_CALL(vk, vkAllocateCommandBuffers, dev, &command_alloc, &r.command_buffer);
  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  ACCY_VK_CALL(vk, vkCreateFence, dev, &fence_info, nullptr, &r.fence);
  return absl::OkStatus();
}

absl::Status VulkanProgram::submitAndWait(LaunchResources& r) const {
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
  return absl::OkStatus();
}

std::optional<absl::Status> VulkanProgram::launchRepeated(const Repeat& repeat,
                                                          absl::Span<const std::span<const std::byte>> inputs,
                                                          absl::Span<const std::span<std::byte>> outputs) const {
  std::optional<backends::RepeatBuffers> buffers =
      backends::repeatBuffers(exe_, repeat.steps, repeat.carries, repeat.xs, inputs, outputs);
  if (!buffers.has_value()) return std::nullopt;
  return withResources(
      [&](LaunchResources& r) { return runRepeated(r, repeat, inputs, outputs, buffers->in, buffers->out); });
}

// The steps of a scan whose body this program is: the carries in the
// program's input and output buffers of each (the odd steps bound with the
// two swapped, so nothing is copied), each xs slice copied on the device
// into the program's input before its step and each y slice out of its
// output after it, every step of a chunk recorded in one command buffer
// and the chunk submitted once. The host waits once a chunk, where the
// caller's stop check is asked.
absl::Status VulkanProgram::runRepeated(LaunchResources& r, const Repeat& repeat,
                                        absl::Span<const std::span<const std::byte>> inputs,
                                        absl::Span<const std::span<std::byte>> outputs, const std::vector<int>& in,
                                        const std::vector<int>& out) const {
  const VulkanFunctions& vk = device_->vk();
  const size_t nc = repeat.carries, nx = repeat.xs, ny = outputs.size() - nc;
  const int64_t steps = repeat.steps;
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;
  // The whole xs and ys, the swapped sets and the loop's own command buffer
  // (re-recorded each chunk), for this launch only.
  auto loop = std::make_unique<LaunchResources>(device_.get());
  absl::Status st = [&]() -> absl::Status {
    std::vector<int64_t> whole;
    for (size_t j = 0; j < nx; ++j) whole.push_back(static_cast<int64_t>(inputs[nc + j].size()));
    for (size_t y = 0; y < ny; ++y) whole.push_back(static_cast<int64_t>(outputs[nc + y].size()));
    ACCY_RETURN_IF_ERROR(makeHostBuffers(*device_, whole, *loop));
    ACCY_RETURN_IF_ERROR(makeDescriptorSets(*loop, [&](uint32_t b) {
      for (size_t c = 0; c < nc; ++c) {
        if (static_cast<int>(b) == in[c]) return r.buffers[out[c]];
        if (static_cast<int>(b) == out[c]) return r.buffers[in[c]];
      }
      return r.buffers[b];
    }));
    ACCY_RETURN_IF_ERROR(makeCommands(*loop, VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT));
    // Host writes before vkQueueSubmit are visible to the device.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i >= nc && i < nc + nx) {
        std::memcpy(loop->mapped + loop->offsets[i - nc], inputs[i].data(), inputs[i].size());
      } else if (!inputs[i].empty()) {
        std::memcpy(r.mapped + r.offsets[in[i]], inputs[i].data(), inputs[i].size());
      }
    }
    const int64_t per_step = static_cast<int64_t>(kernels_.size() + nx + ny) + 2;
    const int64_t chunk = std::max<int64_t>(1, commands_per_submit_.load() / per_step);
    for (int64_t t0 = 0; t0 < steps; t0 += chunk) {
      ACCY_RETURN_IF_ERROR(checkStop());
      const int64_t t1 = std::min(steps, t0 + chunk);
      const VkCommandBuffer cb = loop->command_buffer;
      ACCY_VK_CALL(vk, vkResetCommandBuffer, cb, 0);
      VkCommandBufferBeginInfo begin{};
      begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
      begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
      ACCY_VK_CALL(vk, vkBeginCommandBuffer, cb, &begin);
      for (int64_t t = t0; t < t1; ++t) {
        fullBarrier(vk, cb);  // the step before (or the chunk before) done
        for (size_t j = 0; j < nx; ++j) {
          const VkDeviceSize slice = static_cast<VkDeviceSize>(plans[in[nc + j]].bytes);
          if (slice == 0) continue;
          const VkBufferCopy region{static_cast<VkDeviceSize>(t) * slice, 0, slice};
          vk.vkCmdCopyBuffer(cb, loop->buffers[j], r.buffers[in[nc + j]], 1, &region);
        }
        const std::vector<VkDescriptorSet>& sets = t % 2 == 0 ? r.descriptor_sets : loop->descriptor_sets;
        for (size_t k = 0; k < kernels_.size(); ++k) {
          fullBarrier(vk, cb);
          vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, kernels_[k].pipeline);
          const size_t m = kernels_[k].module;
          if (!module_layouts_[m].bindings.empty()) {
            vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, module_layouts_[m].pipeline_layout, 0, 1,
                                       &sets[m], 0, nullptr);
          }
          vk.vkCmdDispatch(cb, kernels_[k].groups, 1, 1);
        }
        fullBarrier(vk, cb);
        for (size_t y = 0; y < ny; ++y) {
          const VkDeviceSize slice = static_cast<VkDeviceSize>(plans[out[nc + y]].bytes);
          if (slice == 0) continue;
          const VkBufferCopy region{0, static_cast<VkDeviceSize>(t) * slice, slice};
          vk.vkCmdCopyBuffer(cb, r.buffers[out[nc + y]], loop->buffers[nx + y], 1, &region);
        }
      }
      VkMemoryBarrier to_host{};
      to_host.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      to_host.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
      to_host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
      vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                              VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, nullptr, 0, nullptr);
      ACCY_VK_CALL(vk, vkEndCommandBuffer, cb);
      ACCY_RETURN_IF_ERROR(submitAndWait(*loop));
    }
    // Step t wrote the carries' output buffers when t is even.
    const bool in_output = (steps - 1) % 2 == 0;
    for (size_t c = 0; c < nc; ++c) {
      const int b = in_output ? out[c] : in[c];
      std::memcpy(outputs[c].data(), r.mapped + r.offsets[b], outputs[c].size());
    }
    for (size_t y = 0; y < ny; ++y) {
      std::memcpy(outputs[nc + y].data(), loop->mapped + loop->offsets[nx + y], outputs[nc + y].size());
    }
    return absl::OkStatus();
  }();
  // As with the program's own resources (withResources): a hung loop's
  // stay with the device.
  if (!st.ok() && !device_->health().ok()) device_->park(std::shared_ptr<LaunchResources>(std::move(loop)));
  return st;
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
    const size_t m = kernels_[k].module;
    if (!module_layouts_[m].bindings.empty()) {
      vk.vkCmdBindDescriptorSets(r.command_buffer, VK_PIPELINE_BIND_POINT_COMPUTE, module_layouts_[m].pipeline_layout,
                                 0, 1, &r.descriptor_sets[m], 0, nullptr);
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
  ACCY_RETURN_IF_ERROR(submitAndWait(r));
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
  return withResources([&](LaunchResources& r) { return run(r, inputs, outputs); });
}

absl::Status VulkanProgram::withResources(const std::function<absl::Status(LaunchResources&)>& work) const {
  ACCY_RETURN_IF_ERROR(device_->health());  // a lost device fails fast, saying why
  ACCY_ASSIGN_OR_RETURN(std::unique_ptr<LaunchResources> r, idle_.take([&] { return makeResources(); }));
  // On failure the resources are dropped, not pooled: their state is unknown;
  // a hung launch's stay with the device, which may still be using them.
  if (absl::Status st = work(*r); !st.ok()) {
    if (!device_->health().ok()) device_->park(std::shared_ptr<LaunchResources>(std::move(r)));
    return st;
  }
  idle_.give(std::move(r));
  return absl::OkStatus();
}

}  // namespace accy::vulkan
