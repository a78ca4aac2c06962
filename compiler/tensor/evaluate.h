// The reference evaluator: the oracle every backend is tested against.
//
// It walks the program node by node with plain nested loops over named axes,
// computing every floating value in double precision and rounding only where
// a value is stored in an output (and at explicit casts to f32). Integer and
// bool values are kept exact with the semantics documented in
// docs/SEMANTICS.md. It is slow on purpose; it is not a backend.
#ifndef ACCY_COMPILER_TENSOR_EVALUATE_H_
#define ACCY_COMPILER_TENSOR_EVALUATE_H_

#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/tensor/program.h"

namespace accy::tensor {

// Runs `program` on `inputs` (one byte span per input, exactly the input's
// byte size, row-major, any alignment). Returns one byte vector per output.
// Wrong input counts or sizes fail with InvalidBuffer; a program that does
// not validate fails with InvalidProgram.
absl::StatusOr<std::vector<std::vector<std::byte>>> evaluate(
    const Program& program, absl::Span<const std::span<const std::byte>> inputs);

// Every node's value in double precision (row-major over its axes), for
// tests that inspect intermediates. Same checks as `evaluate`.
absl::StatusOr<std::vector<std::vector<double>>> evaluateNodes(
    const Program& program, absl::Span<const std::span<const std::byte>> inputs);

// The double value of one element of `dtype` stored at `p`, and back
// (rounding to nearest for f32, saturating truncation for integers).
double loadElement(DType dtype, const std::byte* p);
void storeElement(DType dtype, double value, std::byte* p);

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_EVALUATE_H_
