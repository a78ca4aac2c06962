// The explicit list of device backends. Adding a device means adding one
// line to registry.cc (and its directory); nothing registers itself.
#ifndef ACCY_BACKENDS_REGISTRY_H_
#define ACCY_BACKENDS_REGISTRY_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend.h"

namespace accy::backends {

// Every backend this build knows, available or not, in a fixed order.
std::vector<std::unique_ptr<Backend>> makeBackends(const BackendOptions& options);

// The backends named in `names` (e.g. {"cpu"}); InvalidArgument for a name
// this build does not know, Unimplemented for one whose device is missing.
absl::StatusOr<std::vector<std::unique_ptr<Backend>>> selectBackends(const std::vector<std::string>& names,
                                                                      const BackendOptions& options);

// The optional host-memory capability, for memory a host hands to launches
// again and again (accyd's shared-memory regions): makes [data, data + size)
// DMA-able for `backend`'s device and returns a handle that undoes it when
// its last copy goes; the handle must go before the memory is unmapped.
// Today only the cuda backend registers anything (cuMemHostRegister; see
// backends/cuda/README.md); every other backend, or an unavailable cuda
// one, returns a null handle, which is not an error. A failure (the range
// is already registered, the driver refuses) leaves launches working as
// before, through the driver's staging copies.
absl::StatusOr<std::shared_ptr<void>> registerHostMemory(const Backend& backend, void* data, size_t size);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_REGISTRY_H_
