// Vulkan benchmarks, side by side in one run: a copy kernel (y = x + 0)
// through the same launch path as the reference, elementwise and sum
// against it, the GPU forms (workgroup trees, tiled products) against the
// device's own choice, and `dot` in GFLOP/s. A launch here includes copying
// every buffer to and from the device's memory, so on lavapipe (no GPU)
// these measure that host-staged path, not device bandwidth. Every compile
// and launch is checked (a failure ends the benchmark, and the binary exits
// 1), and every output is checked once against the reference evaluator.
// The CUDA benchmark (bench/cuda_bench.cc) times device-resident buffers.
// Run: tools/bench.sh, or bazel run -c opt //bench:gpu_bench.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "backends/compile_program.h"
#include "backends/staged_program.h"
#include "backends/vulkan/vulkan_backend.h"
#include "bench/bench_util.h"
#include "compiler/codegen/spirv/compile.h"

namespace tensor = accy::tensor;
using accy::bench::check;
using accy::bench::ok;

namespace {

accy::backends::Backend& device() {
  static std::unique_ptr<accy::backends::Backend> b = accy::backends::makeVulkanBackend({});
  return *b;
}

constexpr int64_t kN = int64_t{1} << 22;  // 16 MiB of f32

// `adjust` changes the device's SPIR-V target (to measure a schedule
// choice against the default in the same run).
template <typename F>
void run(benchmark::State& state, std::vector<tensor::Spec> specs, F fn, int64_t bytes_moved, double flops,
         void (*adjust)(accy::spirv::TargetInfo&) = nullptr, int64_t index_bound = 0) {
  if (!check(state, device().info().available, "no Vulkan device: " + device().info().unavailable_reason)) return;
  auto p = tensor::define("bench", specs, fn);
  if (!ok(state, p, "define")) return;
  accy::spirv::TargetInfo target = accy::backends::vulkanTargetInfo(device());
  if (adjust) adjust(target);
  auto exe = accy::spirv::compileProgram(*p, target);
  if (!ok(state, exe, "compile")) return;
  auto loaded = device().load(*exe);
  if (!ok(state, loaded, "load")) return;
  // Inputs in [-1, 1), small enough that a 512-long dot stays exact to
  // f32's tolerance; i32 inputs (indices) uniform in [0, index_bound).
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int32_t> idx(0, static_cast<int32_t>(std::max<int64_t>(index_bound, 1) - 1));
  std::vector<std::vector<float>> in;
  for (const auto& s : specs) {
    in.emplace_back(s.elementCount());
    for (float& x : in.back()) {
      if (s.dtype == tensor::DType::i32) {
        const int32_t i = idx(rng);
        std::memcpy(&x, &i, 4);
      } else {
        x = u(rng);
      }
    }
  }
  std::vector<std::vector<float>> out;
  for (const auto& s : p->outputSpecs()) out.emplace_back(s.elementCount(), NAN);
  std::vector<std::span<const std::byte>> iv;
  std::vector<std::span<std::byte>> ov;
  for (auto& v : in) iv.push_back(accy::bytes(v));
  for (auto& v : out) ov.push_back(accy::writableBytes(v));
  for (auto _ : state) {
    if (!ok(state, (*loaded)->launch(iv, ov), "launch")) return;
  }
  // Once per benchmark, against the reference evaluator (f32 tolerance,
  // scaled by the number of terms a sum adds). The library calls this
  // function several times while it sizes the iteration count, and the
  // evaluator takes seconds on a 512^3 product: checked on every call, a
  // fast device spent its whole time limit there. (Each benchmark passes
  // its own lambda, so each has its own instance of this function.)
  static bool checked = false;
  if (!checked) {
    checked = true;
    auto expected = tensor::evaluate(*p, iv);
    if (!ok(state, expected, "evaluate")) return;
    for (size_t k = 0; k < out.size(); ++k) {
      for (size_t e = 0; e < out[k].size(); ++e) {
        const double x = tensor::loadElement(tensor::DType::f32, &(*expected)[k][e * 4]);
        if (!(std::fabs(out[k][e] - x) <= 1e-4 * (1 + std::fabs(x)) + 1e-6 * std::sqrt(double(kN)))) {
          check(state, false, "wrong output " + std::to_string(k) + " element " + std::to_string(e) + ": " +
                                  std::to_string(out[k][e]) + ", evaluator " + std::to_string(x));
          return;
        }
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved);
  if (flops > 0) {
    state.counters["GFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  }
}

void BM_Gpu_Copy(benchmark::State& state) {
  run(state, {tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] + 0.0; }, kN * 8, 0);
}

void BM_Gpu_Elementwise(benchmark::State& state) {
  run(state, {tensor::spec(tensor::DType::f32, {{"i", kN}}), tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2.0 + a[1]; }, kN * 12, 2.0 * kN);
}

void BM_Gpu_Sum(benchmark::State& state) {
  run(state, {tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("i"); }, kN * 4, double(kN));
}

// The cooperative forms forced on (what a GPU gets), against the device's
// own choice above (on lavapipe, a CPU device: no cooperation).
void BM_Gpu_SumTree(benchmark::State& state) {
  run(
      state, {tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("i"); }, kN * 4, double(kN),
      [](accy::spirv::TargetInfo& t) { t.cooperative_workgroups = true; });
}

void BM_Gpu_SumTreeWithoutSubgroups(benchmark::State& state) {
  run(
      state, {tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("i"); }, kN * 4, double(kN),
      [](accy::spirv::TargetInfo& t) {
        t.cooperative_workgroups = true;
        t.subgroup_size = 0;
      });
}

void BM_Gpu_Dot512(benchmark::State& state) {
  constexpr int64_t m = 512;
  run(state, {tensor::spec(tensor::DType::f32, {{"i", m}, {"k", m}}), tensor::spec(tensor::DType::f32, {{"k", m}, {"j", m}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].dot(a[1], "k"); }, m * m * 12, 2.0 * m * m * m);
}

void BM_Gpu_Dot512Untiled(benchmark::State& state) {
  constexpr int64_t m = 512;
  run(
      state, {tensor::spec(tensor::DType::f32, {{"i", m}, {"k", m}}), tensor::spec(tensor::DType::f32, {{"k", m}, {"j", m}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].dot(a[1], "k"); }, m * m * 12, 2.0 * m * m * m,
      [](accy::spirv::TargetInfo& t) { t.tile_products = false; });
}

void BM_Gpu_Dot512TiledOneOutputPerInvocation(benchmark::State& state) {
  constexpr int64_t m = 512;
  run(
      state, {tensor::spec(tensor::DType::f32, {{"i", m}, {"k", m}}), tensor::spec(tensor::DType::f32, {{"k", m}, {"j", m}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].dot(a[1], "k"); }, m * m * 12, 2.0 * m * m * m,
      [](accy::spirv::TargetInfo& t) {
        t.cooperative_workgroups = true;
        t.register_blocking = false;
      });
}

// An embedding gradient: 4096 token gradients of 64 features added into a
// 4096-row table of zeros at their tokens' rows (duplicates in token
// order). The device's form (ranges of rows: 256 ranges x 64 columns, each
// invocation walking the 4096 tokens) against the reduction form (each of
// the 2^18 elements a sum over every token). Bytes: the updates and tokens
// read, the table written.
constexpr int64_t kEmbVocab = 4096, kEmbFeatures = 64, kEmbTokens = 4096;

template <bool kRanges>
void embeddingGradient(benchmark::State& state) {
  run(
      state,
      {tensor::spec(tensor::DType::f32, {{"token", kEmbTokens}, {"feature", kEmbFeatures}}),
       tensor::spec(tensor::DType::i32, {{"token", kEmbTokens}})},
      [](tensor::Builder& b, std::span<const tensor::Value> a) {
        const tensor::Value zeros =
            b.constant(0, tensor::DType::f32).broadcast("vocab", kEmbVocab).broadcast("feature", kEmbFeatures);
        return scatterAdd(zeros, "vocab", a[1], a[0]);
      },
      kEmbTokens * (kEmbFeatures + 1) * 4 + kEmbVocab * kEmbFeatures * 4, 0,
      kRanges ? nullptr : +[](accy::spirv::TargetInfo& t) { t.scatter_ranges = false; }, kEmbVocab);
}

void BM_Gpu_EmbeddingGradient(benchmark::State& state) { embeddingGradient<true>(state); }
void BM_Gpu_EmbeddingGradientAsReductions(benchmark::State& state) { embeddingGradient<false>(state); }

}  // namespace

// A scan on the device: the damped oscillator over 8 f32 lanes, 1,000
// steps. OneCommandBuffer: every step recorded in one command buffer
// (LoadedProgram::launchRepeated); StepByStep: the same body launched once
// a step from the host (a submit and a fence wait each), what every loop
// did before. Reported per step.
class WithoutRepeat final : public accy::backends::LoadedProgram {
 public:
  explicit WithoutRepeat(std::shared_ptr<const accy::backends::LoadedProgram> p) : p_(std::move(p)) {}
  absl::Status launch(absl::Span<const std::span<const std::byte>> in,
                      absl::Span<const std::span<std::byte>> out) const override {
    return p_->launch(in, out);
  }
  absl::Status launchTrusted(absl::Span<const std::span<const std::byte>> in,
                             absl::Span<const std::span<std::byte>> out) const override {
    return p_->launchTrusted(in, out);
  }
  const accy::executable::Executable& executable() const override { return p_->executable(); }

 private:
  std::shared_ptr<const accy::backends::LoadedProgram> p_;
};

constexpr int64_t kOscSteps = 1000;

void runOscillator(benchmark::State& state, bool one_command_buffer) {
  if (!check(state, device().info().available, "no Vulkan device: " + device().info().unavailable_reason)) return;
  const tensor::Spec lanes = tensor::spec(tensor::DType::f32, {{"lane", 8}});
  auto p = tensor::define("oscillator", {lanes, lanes}, [](tensor::Builder& b, auto a) {
    return tensor::scan(b, {.length = kOscSteps}, {a[0], a[1]}, {},
                        [](tensor::Builder&, std::span<const tensor::Value> c,
                           std::span<const tensor::Value>) -> absl::StatusOr<tensor::ScanStep> {
                          const tensor::Value v = c[1] - (c[0] * 4.0f + c[1] * 0.1f) * 0.001f;
                          return tensor::ScanStep{{c[0] + v * 0.001f, v}, {}};
                        })
        .carry;
  });
  if (!ok(state, p, "define")) return;
  auto plan = accy::backends::compileProgram(
      *p, "spirv", [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const accy::backends::LoadedProgram>> {
        auto exe = accy::backends::compileOn(device(), stage, "spirv");
        if (!exe.ok()) return exe.status();
        auto loaded = device().load(std::move(*exe));
        if (!loaded.ok() || one_command_buffer) return loaded;
        return std::make_shared<WithoutRepeat>(*loaded);
      });
  if (!ok(state, plan, "compile")) return;
  std::vector<float> x0(8), v0(8, 0.0f), x(8), v(8);
  for (int l = 0; l < 8; ++l) x0[l] = 0.1f * (l + 1);
  const std::vector<std::span<const std::byte>> in = {accy::bytes(x0), accy::bytes(v0)};
  const std::vector<std::span<std::byte>> out = {accy::writableBytes(x), accy::writableBytes(v)};
  for (auto _ : state) {
    if (!ok(state, (*plan)->launch(in, out), "launch")) return;
  }
  auto expected = tensor::evaluate(*p, in);
  if (!ok(state, expected, "evaluate")) return;
  for (int l = 0; l < 8; ++l) {
    const double want = tensor::loadElement(tensor::DType::f32, &(*expected)[0][l * 4]);
    if (!check(state, std::fabs(x[l] - want) <= 1e-4 * (1 + std::fabs(want)), "wrong oscillator lane")) return;
  }
  state.counters["us_per_step"] = benchmark::Counter(static_cast<double>(kOscSteps) * 1e-6,
                                                     benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
}

void BM_Gpu_LoopOscillator_OneCommandBuffer(benchmark::State& state) { runOscillator(state, true); }
void BM_Gpu_LoopOscillator_StepByStep(benchmark::State& state) { runOscillator(state, false); }

BENCHMARK(BM_Gpu_LoopOscillator_OneCommandBuffer)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_LoopOscillator_StepByStep)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Copy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Elementwise)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Sum)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_SumTree)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_SumTreeWithoutSubgroups)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Dot512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Dot512Untiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Dot512TiledOneOutputPerInvocation)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_EmbeddingGradient)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_EmbeddingGradientAsReductions)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  const std::string name =
      device().info().available ? accy::backends::vulkanDeviceName(device()) : device().info().unavailable_reason;
  return accy::bench::runBenchmarks(argc, argv, {{"vulkan_device", name}});
}
