#include "backends/registry.h"

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/null/null_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {

namespace {

// The explicit list: each device's name and factory, in listing order.
// Only the devices asked for are made (a device opens its driver, and a
// driver such as Mesa's lavapipe costs time to load and to unload).
struct Entry {
  const char* name;
  std::unique_ptr<Backend> (*make)(const BackendOptions&);
};
constexpr Entry kDevices[] = {
    {"cpu", makeCpuBackend},
    {"vulkan", makeVulkanBackend},
    {"cuda", makeCudaBackend},
    {"null", makeNullBackend},
};

}  // namespace

std::vector<std::unique_ptr<Backend>> makeBackends(const BackendOptions& options) {
  std::vector<std::unique_ptr<Backend>> all;
  for (const Entry& e : kDevices) all.push_back(e.make(options));
  return all;
}

absl::StatusOr<std::vector<std::unique_ptr<Backend>>> selectBackends(const std::vector<std::string>& names,
                                                                      const BackendOptions& options) {
  std::string known;
  for (const Entry& e : kDevices) known += (known.empty() ? "" : ", ") + std::string(e.name);
  std::vector<std::unique_ptr<Backend>> chosen;
  for (const std::string& name : names) {
    const Entry* entry = nullptr;
    for (const Entry& e : kDevices) {
      if (name == e.name) entry = &e;
    }
    if (entry == nullptr) {
      return makeError(ErrorKind::kInvalidArgument, strCat("no device named '", name, "' (this build knows ", known, ")"));
    }
    for (const auto& b : chosen) {
      if (b->info().name == name) {
        return makeError(ErrorKind::kInvalidArgument, strCat("device '", name, "' is named twice"));
      }
    }
    std::unique_ptr<Backend> b = entry->make(options);
    if (!b->info().available) {
      return makeError(ErrorKind::kUnimplemented,
                       strCat("device ", name, " is not available: ", b->info().unavailable_reason));
    }
    chosen.push_back(std::move(b));
  }
  return chosen;
}

}  // namespace accy::backends
