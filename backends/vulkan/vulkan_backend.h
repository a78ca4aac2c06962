// The Vulkan device: SPIR-V executables run through a Vulkan 1.1 compute
// queue, on whatever device the loader offers (lavapipe on a machine
// without a GPU).
//
// The backend loads libvulkan.so.1 at run time. Without a loader, a driver
// or a compute-capable device it still exists but reports
// info().available == false with info().unavailable_reason saying what is
// missing; compile and load then fail with Unimplemented and that reason.
//
// info(): name "vulkan", targets {"spirv"}, min_buffer_alignment 1 (each
// buffer needs its element size). compile(program, "spirv") runs
// accy::spirv::compileProgram with the device's limits. load() validates
// and prepares an executable once (see vulkan_program.h); its launches
// follow the LoadedProgram contract, from any number of threads.
#ifndef ACCY_BACKENDS_VULKAN_VULKAN_BACKEND_H_
#define ACCY_BACKENDS_VULKAN_VULKAN_BACKEND_H_

#include <memory>
#include <string>

#include "backends/backend.h"
#include "compiler/codegen/spirv/compile.h"

namespace accy::backends {

std::unique_ptr<Backend> makeVulkanBackend(const BackendOptions& options);

// The same, loading the Vulkan loader from `library_path` (a soname or a
// file) instead of libvulkan.so.1; for tests and diagnosis.
std::unique_ptr<Backend> makeVulkanBackendFrom(const BackendOptions& options, const std::string& library_path);

// The limits compile() targets on a backend made above: workgroup size
// (min of maxComputeWorkGroupInvocations and maxComputeWorkGroupSize[0]),
// maxComputeWorkGroupCount[0], shaderFloat64, shaderInt64 and the subgroup
// size. TargetInfo's defaults for an unavailable Vulkan backend or any
// other backend.
spirv::TargetInfo vulkanTargetInfo(const Backend& backend);

// The physical device in use, e.g. "llvmpipe (LLVM 15.0.6, 256 bits) (CPU,
// Vulkan 1.3.230)"; empty for an unavailable Vulkan backend or any other
// backend.
std::string vulkanDeviceName(const Backend& backend);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_VULKAN_VULKAN_BACKEND_H_
