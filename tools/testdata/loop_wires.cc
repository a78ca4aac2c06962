// Writes programs with loops as wire files, for tools/accy_cli_test.sh
// (every target runs them through `accy run` and is compared with the
// reference evaluator):
//
//   loop_wires OUTPUT_DIRECTORY
//
// rnn.wire:    inputs i32[t=64] tokens, f32[vocab=16, hidden=8] table,
//              f32[w=3] filter, f32[hidden=8, in=8] weights;
//              outputs f32[hidden=8] (the last state), f32[t=62, hidden=8]
//              (every state). An embedding take, a windowed product over
//              t, then a 62-step scan h = tanh(W h + x_t).
// nested.wire: inputs f32[n=4] x, f32[] c; output f32[n=4]. A whileLoop of
//              three trips whose body runs a 5-step scan x = x / 2 + c
//              (c captured from the outer program, the trip count from
//              the loop's own carry).
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "tools/files.h"

namespace tensor = accy::tensor;
using Args = std::span<const tensor::Value>;

namespace {

absl::StatusOr<tensor::Program> rnn() {
  const std::vector<tensor::Spec> specs = {
      tensor::spec(tensor::DType::i32, {{"t", 64}}),
      tensor::spec(tensor::DType::f32, {{"vocab", 16}, {"hidden", 8}}),
      tensor::spec(tensor::DType::f32, {{"w", 3}}),
      tensor::spec(tensor::DType::f32, {{"hidden", 8}, {"in", 8}}),
  };
  return tensor::define("rnn", specs, [](tensor::Builder& b, Args a) -> std::vector<tensor::Value> {
    const tensor::Value embedded = tensor::take(a[1], "vocab", a[0]);                  // [t=64, hidden]
    const tensor::Value smoothed = embedded.window("t", "w", 3).dot(a[2], "w");        // [t=62, hidden]
    const tensor::Value h0 = b.constant(0.0, tensor::DType::f32).broadcast("hidden", 8);
    const tensor::Value weights = a[3];
    tensor::ScanResult r = tensor::scan(
        b, {.axis = "t", .length = 62}, {h0}, {smoothed},
        [weights](tensor::Builder&, std::span<const tensor::Value> carry,
                  std::span<const tensor::Value> x) -> absl::StatusOr<tensor::ScanStep> {
          const tensor::Value h = (weights.dot(carry[0].rename("hidden", "in"), "in") + x[0]).tanh();
          return tensor::ScanStep{{h}, {h}};
        });
    return {r.carry[0], r.ys[0]};
  });
}

absl::StatusOr<tensor::Program> nested() {
  const std::vector<tensor::Spec> specs = {
      tensor::spec(tensor::DType::f32, {{"n", 4}}),
      tensor::spec(tensor::DType::f32, {}),
  };
  return tensor::define("nested", specs, [](tensor::Builder& b, Args a) -> std::vector<tensor::Value> {
    const tensor::Value c = a[1];
    std::vector<tensor::Value> out = tensor::whileLoop(
        b, {b.constant(0.0, tensor::DType::f32), a[0]},
        [](tensor::Builder&, Args carry) -> absl::StatusOr<tensor::Value> { return carry[0].lt(3.0); },
        [c](tensor::Builder& inner, Args carry) -> absl::StatusOr<std::vector<tensor::Value>> {
          tensor::ScanResult r = tensor::scan(
              inner, {.axis = "k", .length = 5}, {carry[1]}, {},
              [c](tensor::Builder&, std::span<const tensor::Value> x,
                  std::span<const tensor::Value>) -> absl::StatusOr<tensor::ScanStep> {
                return tensor::ScanStep{{x[0] * 0.5 + c}, {}};
              });
          return std::vector<tensor::Value>{carry[0] + 1.0, r.carry[0]};
        });
    return {out[1]};
  });
}

bool write(const std::string& path, const absl::StatusOr<tensor::Program>& program) {
  if (!program.ok()) {
    std::fprintf(stderr, "recording %s failed: %s\n", path.c_str(), program.status().ToString().c_str());
    return false;
  }
  if (const absl::Status st = accy::files::writeFile(path, accy::wire::encode(*program)); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  return write(dir + "/rnn.wire", rnn()) && write(dir + "/nested.wire", nested()) ? 0 : 1;
}
