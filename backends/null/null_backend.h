// The null backend: the smallest device that runs, and the template a new
// device backend starts from. Its target, "reference", compiles a program
// into its own wire encoding (compiler/wire) and runs it with the reference
// evaluator (compiler/tensor/evaluate.h) on the host. It shows what every
// backend provides (info, compile, load, launch with the buffer contract of
// buffer_checks.h) and passes the backend contract suite
// (tests/backend_contract_test.cc) like the real devices.
#ifndef ACCY_BACKENDS_NULL_NULL_BACKEND_H_
#define ACCY_BACKENDS_NULL_NULL_BACKEND_H_

#include <memory>

#include "backends/backend.h"

namespace accy::backends {

std::unique_ptr<Backend> makeNullBackend(const BackendOptions& options);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_NULL_NULL_BACKEND_H_
