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

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_REGISTRY_H_
