// The null backend: the template a new device backend starts from. It
// describes itself as unavailable, compiles nothing and loads nothing
// (Unimplemented, naming the device), and shows the three things a backend
// provides: info, compile, load.
#ifndef ACCY_BACKENDS_NULL_NULL_BACKEND_H_
#define ACCY_BACKENDS_NULL_NULL_BACKEND_H_

#include <memory>

#include "backends/backend.h"

namespace accy::backends {

std::unique_ptr<Backend> makeNullBackend(const BackendOptions& options);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_NULL_NULL_BACKEND_H_
