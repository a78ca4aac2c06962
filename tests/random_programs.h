// Random programs over random named axes, for conformance and round-trip
// tests: every op of the recording API appears, with inputs drawn from
// ranges where each op is well conditioned (so a backend's error can be
// bounded by a stated tolerance).
#ifndef ACCY_TESTS_RANDOM_PROGRAMS_H_
#define ACCY_TESTS_RANDOM_PROGRAMS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/tensor/program.h"

namespace accy::testing {

struct RandomCase {
  tensor::Program program;
  std::vector<std::vector<std::byte>> inputs;  // one per program input
};

struct RandomOptions {
  tensor::DType dtype = tensor::DType::f32;  // floating dtype of the values
  int min_ops = 3;
  int max_ops = 10;
  int64_t max_extent = 19;  // axis extents are drawn from [1, max_extent]
  // The chance, in percent, that an op is a loop: a scan (over xs sliced
  // along an axis of another value, or over none, with a captured value
  // and ys) or, where `while_loops`, a while loop (a counter and a
  // data-dependent condition); their bodies are random ops too and may
  // hold loops themselves, two deep at most. 0: no loops.
  int loop_percent = 0;
  bool while_loops = true;  // false for programs to differentiate
};

// Deterministic for a given seed.
RandomCase randomProgram(uint32_t seed, const RandomOptions& options);

}  // namespace accy::testing

#endif  // ACCY_TESTS_RANDOM_PROGRAMS_H_
