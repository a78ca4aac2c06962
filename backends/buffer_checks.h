// The buffer contract every backend's launch enforces before running
// anything: the executable's input and output counts, exact byte sizes,
// alignment to the element size, and outputs sharing no bytes with an
// input or another output. Failures are InvalidBuffer naming the buffer.
#ifndef ACCY_BACKENDS_BUFFER_CHECKS_H_
#define ACCY_BACKENDS_BUFFER_CHECKS_H_

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "compiler/executable/executable.h"

namespace accy::backends {

absl::Status checkLaunchBuffers(const executable::Executable& exe,
                                absl::Span<const std::span<const std::byte>> inputs,
                                absl::Span<const std::span<std::byte>> outputs);

// For a backend that runs a scan whose body is `exe` on the device
// (LoadedProgram::launchRepeated): the artifact-plan buffer of each of
// exe's inputs and outputs. Nullopt when `exe` has no kernels, an input or
// output has no buffer, a carry's input and output buffers differ in size,
// the counts differ, or a whole xs value (inputs[carries + j]) or y
// (outputs[carries + y]) is not `steps` slices of its buffer; the caller
// then runs the steps itself.
struct RepeatBuffers {
  std::vector<int> in, out;
};
std::optional<RepeatBuffers> repeatBuffers(const executable::Executable& exe, int64_t steps, size_t carries,
                                           size_t xs, absl::Span<const std::span<const std::byte>> inputs,
                                           absl::Span<const std::span<std::byte>> outputs);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_BUFFER_CHECKS_H_
