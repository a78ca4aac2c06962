// Test helpers: evaluate a program on typed vectors and read outputs back
// as doubles.
#ifndef ACCY_COMPILER_TENSOR_TESTING_H_
#define ACCY_COMPILER_TENSOR_TESTING_H_

#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/tensor/evaluate.h"
#include "compiler/tensor/program.h"

namespace accy::tensor::testing {

// Output `k` of `outputs` (laid out as `spec`) as doubles.
inline std::vector<double> asDoubles(const std::vector<std::byte>& bytes, DType dtype) {
  std::vector<double> out(bytes.size() / dtypeSize(dtype));
  for (size_t i = 0; i < out.size(); ++i) out[i] = loadElement(dtype, &bytes[i * dtypeSize(dtype)]);
  return out;
}

// Evaluates and returns every output as doubles.
inline absl::StatusOr<std::vector<std::vector<double>>> evalDoubles(
    const Program& program, absl::Span<const std::span<const std::byte>> inputs) {
  auto outputs = evaluate(program, inputs);
  if (!outputs.ok()) return outputs.status();
  std::vector<std::vector<double>> result;
  for (size_t k = 0; k < outputs->size(); ++k) {
    result.push_back(asDoubles((*outputs)[k], program.nodes[program.outputs[k]].dtype));
  }
  return result;
}

}  // namespace accy::tensor::testing

#endif  // ACCY_COMPILER_TENSOR_TESTING_H_
