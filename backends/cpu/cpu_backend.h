// The CPU device behind the backend interface: x86-64 code run in the
// calling process.
#ifndef ACCY_BACKENDS_CPU_CPU_BACKEND_H_
#define ACCY_BACKENDS_CPU_CPU_BACKEND_H_

#include <memory>

#include "backends/backend.h"

namespace accy::backends {

std::unique_ptr<Backend> makeCpuBackend(const BackendOptions& options);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_CPU_CPU_BACKEND_H_
