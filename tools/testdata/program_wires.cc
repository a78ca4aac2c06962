// Writes programs as wire files for tools/accy_cli_test.sh, which runs
// them with `accy run` on every target:
//
//   program_wires OUTPUT_DIRECTORY
//
// Programs with loops, compared with the reference evaluator's outputs:
// rnn.wire:    inputs i32[t=64] tokens, f32[vocab=16, hidden=8] table,
//              f32[w=3] filter, f32[hidden=8, in=8] weights;
//              outputs f32[hidden=8] (the last state), f32[t=62, hidden=8]
//              (every state). An embedding take, a windowed product over
//              t, then a 62-step scan h = tanh(W h + x_t).
// nested.wire: inputs f32[n=4] x, f32[] c; output f32[n=4]. A whileLoop of
//              three trips whose body runs a 5-step scan x = x / 2 + c
//              (c captured from the outer program, the trip count from
//              the loop's own carry).
//
// An example with its inputs and the outputs the example itself computes
// from them (compiled and launched in process, as its main does):
// nbody.wire: the N-body example (examples/nbody/nbody.h) for 64 bodies
//   and 200 leapfrog steps in f64, one scan of every step;
//   nbody_in<k>.npy its inputs (positions, velocities, masses from
//   nbody::start), nbody_expected<k>.npy its outputs (positions and
//   velocities after the steps, the energy before and after, the
//   momentum), from tensor::CpuExecutable as examples/nbody/main.cc runs it.
// digits.wire: the digits example's first training epoch
//   (examples/digits/digits.h: 45 SGD steps of a small convolutional
//   network over minibatches drawn with the random-number API, one scan),
//   on scikit-learn's digits as the example splits them, from its starting
//   weights and the key of epoch 0; digits_in<k>.npy, digits_expected<k>.npy
//   (the weights after the epoch and each step's loss) as for nbody. Left
//   out, saying so, when the datasets are not installed.
// hmc.wire: the sampler example (examples/sampler/sampler.h: Bayesian
//   logistic regression on scikit-learn's breast-cancer table, HMC chains
//   vmapped over keys split from the seed, each a scan of draws whose
//   trajectories are scans of leapfrog steps), shortened to 2 chains of 20
//   warm-up and 50 kept draws of 10 leapfrog steps; hmc_in<k>.npy,
//   hmc_expected<k>.npy (the draws and their acceptances) as for nbody.
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "examples/digits/digits.h"
#include "examples/nbody/nbody.h"
#include "examples/sampler/sampler.h"
#include "base/files.h"
#include "tools/npy.h"
#include "base/status_macros.h"
#include "base/strings.h"

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

// `program` (or the error that recording it met) as a wire file at `path`.
absl::Status writeWire(const std::string& path, const absl::StatusOr<tensor::Program>& program) {
  if (!program.ok()) return program.status();
  return accy::files::writeFile(path, accy::wire::encode(*program));
}

std::vector<int64_t> shapeOf(const tensor::Spec& spec) {
  std::vector<int64_t> shape;
  for (const tensor::Axis& a : spec.axes) shape.push_back(a.extent);
  return shape;
}

// `program`, its inputs and the outputs CpuExecutable gives for them, as
// DIR/NAME.wire, DIR/NAME_in<k>.npy and DIR/NAME_expected<k>.npy.
absl::Status writeExample(const std::string& dir, const std::string& name, const tensor::Program& program,
                          std::span<const std::span<const std::byte>> inputs) {
  ACCY_RETURN_IF_ERROR(writeWire(dir + "/" + name + ".wire", program));
  const std::vector<tensor::Spec> in_specs = program.inputSpecs(), out_specs = program.outputSpecs();
  for (size_t k = 0; k < inputs.size(); ++k) {
    absl::Status st = accy::npy::writeFile(accy::strCat(dir, "/", name, "_in", k, ".npy"), in_specs[k].dtype,
                                           shapeOf(in_specs[k]), inputs[k]);
    if (!st.ok()) return st;
  }
  absl::StatusOr<tensor::CpuExecutable> exe = tensor::CpuExecutable::compile(program);
  if (!exe.ok()) return exe.status();
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::span<std::byte>> views;
  for (const tensor::Spec& s : out_specs) outs.emplace_back(s.byteSize());
  for (auto& o : outs) views.emplace_back(o);
  if (absl::Status st = exe->launch(inputs, views); !st.ok()) return st;
  for (size_t k = 0; k < outs.size(); ++k) {
    absl::Status st = accy::npy::writeFile(accy::strCat(dir, "/", name, "_expected", k, ".npy"), out_specs[k].dtype,
                                           shapeOf(out_specs[k]), outs[k]);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  nbody::Options o;
  o.bodies = 64;
  o.steps = 200;
  const nbody::Buffers<double> b(nbody::start(o.bodies));
  const absl::StatusOr<tensor::Program> n = nbody::program(o);
  const std::vector<std::span<const std::byte>> inputs = b.inputs();
  for (const auto& [name, st] : {std::pair<const char*, absl::Status>{"rnn", writeWire(dir + "/rnn.wire", rnn())},
                                 {"nested", writeWire(dir + "/nested.wire", nested())},
                                 {"nbody", n.ok() ? writeExample(dir, "nbody", *n, inputs) : n.status()}}) {
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, std::string(st.message()).c_str());
      return 1;
    }
  }
  const absl::StatusOr<digits::Split> data = digits::load();
  if (!data.ok()) {
    std::printf("no digits example: %s\n", std::string(data.status().message()).c_str());
    return 0;
  }
  const digits::Options d;
  const digits::Weights w = digits::initial(d);
  digits::Weights next = w;
  std::vector<float> losses(d.steps);
  const uint32_t key[] = {2026, 0};
  const digits::EpochBuffers buffers = digits::epochBuffers(*data, w, key, next, losses);
  const absl::StatusOr<tensor::Program> e = digits::epoch(d, data->train);
  const absl::Status st = e.ok() ? writeExample(dir, "digits", *e, buffers.inputs) : e.status();
  if (!st.ok()) {
    std::fprintf(stderr, "digits: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  const absl::StatusOr<sampler::Data> cancer = sampler::breastCancer();
  if (!cancer.ok()) {
    std::printf("no sampler example: %s\n", std::string(cancer.status().message()).c_str());
    return 0;
  }
  sampler::Options h;
  h.chains = 2;
  h.warmup = 20;
  h.draws = 50;
  h.leapfrog = 10;
  const absl::StatusOr<tensor::Program> hmc = sampler::program(h, cancer->obs, cancer->coefs);
  const std::span<const std::byte> hmc_inputs[] = {accy::bytes(cancer->x), accy::bytes(cancer->y)};
  const absl::Status hst = hmc.ok() ? writeExample(dir, "hmc", *hmc, hmc_inputs) : hmc.status();
  if (!hst.ok()) {
    std::fprintf(stderr, "hmc: %s\n", std::string(hst.message()).c_str());
    return 1;
  }
  return 0;
}
