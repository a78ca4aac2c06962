// Programs with loops that the daemon tests share.
#ifndef ACCY_TESTS_LOOP_PROGRAMS_H_
#define ACCY_TESTS_LOOP_PROGRAMS_H_

#include <span>
#include <vector>

#include "accy/accy.h"

namespace accy::testing {

// A while_loop over one f32 scalar that never ends: its condition, x == x
// or x != x, holds for every x (NaN included); its body adds one.
inline absl::StatusOr<tensor::Program> endlessLoop() {
  using Args = std::span<const tensor::Value>;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {})};
  return tensor::define("endless", specs, [](tensor::Builder& b, Args a) {
    return tensor::whileLoop(
        b, {a[0]},
        [](tensor::Builder&, Args c) -> absl::StatusOr<tensor::Value> { return c[0].eq(c[0]).bitOr(c[0].ne(c[0])); },
        [](tensor::Builder&, Args c) -> absl::StatusOr<std::vector<tensor::Value>> {
          return std::vector<tensor::Value>{c[0] + 1.0f};
        })[0];
  });
}

}  // namespace accy::testing

#endif  // ACCY_TESTS_LOOP_PROGRAMS_H_
