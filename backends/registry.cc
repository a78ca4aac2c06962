#include "backends/registry.h"

#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/null/null_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "compiler/tensor/errors.h"
#include "compiler/tensor/status_macros.h"
#include "compiler/tensor/strings.h"

namespace accy::backends {

std::vector<std::unique_ptr<Backend>> makeBackends(const BackendOptions& options) {
  std::vector<std::unique_ptr<Backend>> all;
  all.push_back(makeCpuBackend(options));
  all.push_back(makeVulkanBackend(options));
  all.push_back(makeCudaBackend(options));
  all.push_back(makeNullBackend(options));
  return all;
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> selectBackends(const std::vector<std::string>& names,
                                                                      const BackendOptions& options) {
  std::vector<std::unique_ptr<Backend>> all = makeBackends(options);
  std::string known;
  for (const auto& b : all) known += (known.empty() ? "" : ", ") + b->info().name;
  std::vector<std::unique_ptr<Backend>> chosen;
  for (const std::string& name : names) {
    bool found = false;
    for (auto& b : all) {
      if (b && b->info().name == name) {
        if (!b->info().available) {
          return makeError(ErrorKind::kUnimplemented,
                           strCat("device ", name, " is not available: ", b->info().unavailable_reason));
        }
        chosen.push_back(std::move(b));
        found = true;
        break;
      }
    }
    if (!found) {
      return makeError(ErrorKind::kInvalidArgument, strCat("no device named '", name, "' (this build knows ", known, ")"));
    }
  }
  return chosen;
}

absl::StatusOr<std::shared_ptr<void>> registerHostMemory(const Backend& backend, void* data, size_t size) {
  if (backend.info().name != "cuda" || !backend.info().available) return std::shared_ptr<void>();
  ACCY_ASSIGN_OR_RETURN(std::unique_ptr<cuda::HostRegistration> registration,
                        cudaRegisterHostMemory(backend, data, size));
  return std::shared_ptr<void>(std::move(registration));
}

}  // namespace accy::backends
