#include "backends/buffer_checks.h"

#include <cstdint>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::backends {
namespace {

absl::Status invalidBuffer(const std::string& what) { return makeError(ErrorKind::kInvalidBuffer, what); }

bool overlaps(const std::byte* a, size_t an, const std::byte* b, size_t bn) { return a < b + bn && b < a + an; }

absl::Status checkOne(const char* what, size_t i, const tensor::Spec& spec, const std::byte* p, size_t size) {
  if (static_cast<int64_t>(size) != spec.byteSize()) {
    return invalidBuffer(strCat(what, " ", i, " (", tensor::specText(spec), ") needs ", spec.byteSize(),
                                " bytes, got ", size));
  }
  const int64_t align = tensor::dtypeSize(spec.dtype);
  if (reinterpret_cast<uintptr_t>(p) % align != 0) {
    return invalidBuffer(strCat(what, " ", i, " is not aligned to ", align, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status checkLaunchBuffers(const executable::Executable& exe,
                                absl::Span<const std::span<const std::byte>> inputs,
                                absl::Span<const std::span<std::byte>> outputs) {
  if (inputs.size() != exe.inputs.size()) {
    return invalidBuffer(strCat("expected ", exe.inputs.size(), " input buffers, got ", inputs.size()));
  }
  if (outputs.size() != exe.outputs.size()) {
    return invalidBuffer(strCat("expected ", exe.outputs.size(), " output buffers, got ", outputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    ACCY_RETURN_IF_ERROR(checkOne("input", i, exe.inputs[i], inputs[i].data(), inputs[i].size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    ACCY_RETURN_IF_ERROR(checkOne("output", i, exe.outputs[i], outputs[i].data(), outputs[i].size()));
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (overlaps(outputs[i].data(), outputs[i].size(), inputs[j].data(), inputs[j].size())) {
        return invalidBuffer(strCat("output ", i, " shares bytes with input ", j));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (overlaps(outputs[i].data(), outputs[i].size(), outputs[j].data(), outputs[j].size())) {
        return invalidBuffer(strCat("output ", i, " shares bytes with output ", j));
      }
    }
  }
  return absl::OkStatus();
}

std::optional<RepeatBuffers> repeatBuffers(const executable::Executable& exe, int64_t steps, size_t carries,
                                           size_t xs, absl::Span<const std::span<const std::byte>> inputs,
                                           absl::Span<const std::span<std::byte>> outputs) {
  const std::vector<executable::BufferPlan>& plans = exe.artifact_plan.buffers;
  RepeatBuffers r;
  r.in.assign(exe.inputs.size(), -1);
  r.out.assign(exe.outputs.size(), -1);
  for (size_t b = 0; b < plans.size(); ++b) {
    const size_t io = static_cast<size_t>(plans[b].io_index);
    if (plans[b].role == choir::BufferRole::kInput && io < r.in.size()) r.in[io] = static_cast<int>(b);
    if (plans[b].role == choir::BufferRole::kOutput && io < r.out.size()) r.out[io] = static_cast<int>(b);
  }
  if (exe.launch_plan.steps.empty() || steps < 1 || inputs.size() != r.in.size() || outputs.size() != r.out.size() ||
      carries + xs > r.in.size() || carries > r.out.size()) {
    return std::nullopt;
  }
  for (int b : r.in) {
    if (b < 0) return std::nullopt;
  }
  for (int b : r.out) {
    if (b < 0) return std::nullopt;
  }
  for (size_t c = 0; c < carries; ++c) {
    if (plans[r.in[c]].bytes != plans[r.out[c]].bytes) return std::nullopt;
  }
  for (size_t j = 0; j < xs; ++j) {
    if (static_cast<int64_t>(inputs[carries + j].size()) != steps * plans[r.in[carries + j]].bytes) return std::nullopt;
  }
  for (size_t y = carries; y < outputs.size(); ++y) {
    if (static_cast<int64_t>(outputs[y].size()) != steps * plans[r.out[y]].bytes) return std::nullopt;
  }
  return r;
}

}  // namespace accy::backends
