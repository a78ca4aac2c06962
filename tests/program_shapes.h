// Programs of a chosen size, for measuring how compile time grows
// (bench/compile_bench.cc) and for the tests that count compile work
// (tests/compile_scaling_test.cc). N is about the node count of the
// recorded program.
#ifndef ACCY_TESTS_PROGRAM_SHAPES_H_
#define ACCY_TESTS_PROGRAM_SHAPES_H_

#include "absl/status/statusor.h"
#include "accy/accy.h"

namespace accy::shapes {

// v*1.0001, v+0.5, tanh(v) in turn, n ops over a 1024 x 8 input, then a
// sum: one long fused chain.
absl::StatusOr<tensor::Program> chain(int n);
// n/3 independent reductions of the input (x*c_i summed over a), added.
absl::StatusOr<tensor::Program> reductions(int n);
// One value (tanh x) used by n/3 ops (v*c_i + c_i), summed: wide fan-out.
absl::StatusOr<tensor::Program> fanout(int n);
// A multi-layer perceptron (batch 16, width 32, tanh layers) and its loss;
// each layer records 5 nodes and its gradient about 12 more, so
// mlpLayers(n) layers give about n nodes after valueAndGrad.
int mlpLayers(int n);
tensor::Function mlpLoss(int layers);

}  // namespace accy::shapes

#endif  // ACCY_TESTS_PROGRAM_SHAPES_H_
