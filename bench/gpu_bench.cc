// GPU benchmarks through the backend registry (Vulkan now; CUDA when it
// lands), side by side in one run: elementwise bandwidth and a reduction
// against the device's copy bandwidth (a copy kernel through the same path),
// and `dot` in GFLOP/s. On a machine without a GPU they run on lavapipe,
// for the record. Run: bazel run //bench:gpu_bench (or tools/bench.sh).
#include <benchmark/benchmark.h>

#include <vector>

#include "accy/accy.h"
#include "backends/vulkan/vulkan_backend.h"
#include "compiler/codegen/spirv/compile.h"

namespace tensor = accy::tensor;

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
         void (*adjust)(accy::spirv::TargetInfo&) = nullptr) {
  if (!device().info().available) {
    state.SkipWithError(("no Vulkan device: " + device().info().unavailable_reason).c_str());
    return;
  }
  auto p = tensor::define("bench", specs, fn);
  accy::spirv::TargetInfo target = accy::backends::vulkanTargetInfo(device());
  if (adjust) adjust(target);
  auto exe = accy::spirv::compileProgram(*p, target);
  if (!exe.ok()) {
    state.SkipWithError(exe.status().ToString().c_str());
    return;
  }
  auto loaded = device().load(*exe);
  if (!loaded.ok()) {
    state.SkipWithError(loaded.status().ToString().c_str());
    return;
  }
  std::vector<std::vector<float>> in;
  for (const auto& s : specs) in.emplace_back(s.elementCount(), 0.5f);
  std::vector<std::vector<float>> out;
  for (const auto& s : p->outputSpecs()) out.emplace_back(s.elementCount());
  std::vector<std::span<const std::byte>> iv;
  std::vector<std::span<std::byte>> ov;
  for (auto& v : in) iv.push_back(accy::bytes(v));
  for (auto& v : out) ov.push_back(accy::writableBytes(v));
  for (auto _ : state) {
    if (auto st = (*loaded)->launch(iv, ov); !st.ok()) state.SkipWithError(st.ToString().c_str());
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

}  // namespace

BENCHMARK(BM_Gpu_Copy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Elementwise)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Sum)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_SumTree)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_SumTreeWithoutSubgroups)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Dot512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Dot512Untiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gpu_Dot512TiledOneOutputPerInvocation)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
