// Reverse-mode differentiation of recorded programs.
#ifndef ACCY_COMPILER_TRANSFORMS_GRAD_H_
#define ACCY_COMPILER_TRANSFORMS_GRAD_H_

#include <vector>

#include "absl/status/statusor.h"
#include "compiler/tensor/program.h"

namespace accy::transforms {

// A program computing, on the same inputs, the value of `program` (when
// `with_value`) followed by the gradient of its output with respect to
// each input listed in `wrt`, each with that input's dtype and axes.
//
// The program must have exactly one output, a floating scalar
// (NonScalarOutput otherwise). `wrt` entries must name inputs
// (InvalidArgument) of floating dtype (UnsupportedDType). Integer and bool
// values carry no gradient; comparisons and `where` conditions are
// constants; the choices at kinks and ties are in docs/TRANSFORMS.md.
absl::StatusOr<tensor::Program> gradient(const tensor::Program& program, const std::vector<int>& wrt,
                                         bool with_value);

}  // namespace accy::transforms

#endif  // ACCY_COMPILER_TRANSFORMS_GRAD_H_
