// The buffer contract every backend's launch enforces before running
// anything: the executable's input and output counts, exact byte sizes,
// alignment to the element size, and outputs sharing no bytes with an
// input or another output. Failures are InvalidBuffer naming the buffer.
#ifndef ACCY_BACKENDS_BUFFER_CHECKS_H_
#define ACCY_BACKENDS_BUFFER_CHECKS_H_

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "compiler/executable/executable.h"

namespace accy::backends {

absl::Status checkLaunchBuffers(const executable::Executable& exe,
                                absl::Span<const std::span<const std::byte>> inputs,
                                absl::Span<const std::span<std::byte>> outputs);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_BUFFER_CHECKS_H_
