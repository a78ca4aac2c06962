// Loops in programs: scan and whileLoop (docs/SEMANTICS.md, "Loops").
//
// A loop's body is recorded once, as a nested program (Program::bodies),
// whatever the number of steps: compile time and code size do not grow with
// `length`. The body records into a Builder of its own; a value of the
// enclosing recording (weights, step sizes) used there is captured as an
// extra input of the body. Ops whose operands all come from enclosing
// recordings record there, once, before the loop. Loops nest.
//
// Misuse records a sticky error in the enclosing builder naming the loop
// and the specs involved: a carry the body returns with another dtype or
// axes than its initial value (CarryMismatch), an xs value without `axis`
// or with it of another extent than `length` (UnknownAxis,
// AxisExtentMismatch), a y that already has `axis` (AxisNameCollision), a
// condition that is not a bool scalar (DTypeMismatch), a body that fails
// (its own error) or returns values of another recording (InvalidValue).
#ifndef ACCY_COMPILER_TENSOR_LOOPS_H_
#define ACCY_COMPILER_TENSOR_LOOPS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/tensor/builder.h"

namespace accy::tensor {

struct ScanOptions {
  std::string axis = "step";  // the axis xs are sliced along and ys gain
  int64_t length = 0;         // steps; 0 runs none (then no xs and no ys)
  // Gradient checkpointing: with k > 0 (and below `length`), reverse mode
  // keeps the carries of every k-th step only and recomputes the k steps
  // after each from it, so a gradient holds about length / k + k carries
  // instead of `length`, for about one more forward pass. The scan is
  // recorded as a scan of length / k chunks (axis `axis` + "_checkpoint")
  // whose body scans k steps, then a scan of the length % k steps left;
  // xs are split into chunks and the ys joined back, so the results and
  // their axes are those of the plain scan. The body is recorded once per
  // scan (twice when steps are left over). Negative: InvalidArgument.
  int64_t checkpoint_every = 0;
};

// What a scan's body returns for one step: the next carries (one per
// initial value, each with its dtype and axes) and the step's ys.
struct ScanStep {
  std::vector<Value> carry;
  std::vector<Value> ys;
};

// A scan's results: the carries after the last step, and each y stacked
// along `axis`, first. On a recording error every value is poisoned (the
// error is the builder's status); `ys` has as many as the body returned,
// none when the body itself failed.
struct ScanResult {
  std::vector<Value> carry;
  std::vector<Value> ys;
};

using ScanBody =
    std::function<absl::StatusOr<ScanStep>(Builder&, std::span<const Value> carry, std::span<const Value> x)>;
using LoopCondition = std::function<absl::StatusOr<Value>(Builder&, std::span<const Value> carry)>;
using LoopBody = std::function<absl::StatusOr<std::vector<Value>>(Builder&, std::span<const Value> carry)>;

// carry = init; for t in [0, length): (carry, y[t]) = body(carry, xs[t]).
// Every xs value has `axis` of extent `length`; the body sees it without
// that axis.
ScanResult scan(Builder& b, const ScanOptions& options, absl::Span<const Value> init, absl::Span<const Value> xs,
                const ScanBody& body);

// carry = init; while (condition(carry)) carry = body(carry). Returns the
// final carries (poisoned on a recording error). Gradients through it fail
// with NotDifferentiable.
std::vector<Value> whileLoop(Builder& b, absl::Span<const Value> init, const LoopCondition& condition,
                             const LoopBody& body);

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_LOOPS_H_
