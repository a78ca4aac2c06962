// CPU benchmarks, each measured side by side with its reference in one run
// (see docs/PERFORMANCE.md for the figures and the command):
//   - fused y = sin(a*x + b) * c over 2^24 f32: Accy (1 thread, all threads)
//     vs an Eigen array expression vs a plain std::sin loop;
//   - sum over 2^24 f32: Accy vs an AVX-512 intrinsics loop, one thread;
//   - 1024^3 f32 matrix product: Accy vs Eigen vs OpenBLAS (one thread);
//   - the tone program: compile latency and launch latency, and the launch
//     of its value-and-gradient program against the plain one.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <immintrin.h>

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <vector>

#include "accy/accy.h"
#include "examples/tone/tone.h"

namespace tensor = accy::tensor;

namespace {

constexpr int64_t kN = int64_t{1} << 24;

std::vector<float> randomFloats(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

const std::vector<float>& inputX() {
  static const std::vector<float> x = randomFloats(kN, -10, 10, 1);
  return x;
}

// --- y = sin(a*x + b) * c -------------------------------------------------

tensor::Program sinAffine() {
  const tensor::Spec specs[] = {
      tensor::spec(tensor::DType::f32, {{"i", kN}}), tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {}), tensor::spec(tensor::DType::f32, {})};
  return *tensor::define("sin_affine", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return (v[1] * v[0] + v[2]).sin() * v[3];
  });
}

void runSinAccy(benchmark::State& state, int threads) {
  auto exe = tensor::CpuExecutable::compile(sinAffine(), {.threads = threads});
  if (!exe.ok()) {
    state.SkipWithError(exe.status().ToString().c_str());
    return;
  }
  const float a = 2, b = 1, c = 3;
  std::vector<float> y(kN);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(inputX()), accy::bytes(std::span(&a, 1)), accy::bytes(std::span(&b, 1)),
                           accy::bytes(std::span(&c, 1))},
                          {accy::writableBytes(y)});
    benchmark::DoNotOptimize(y.data());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_SinAffine_Accy_1Thread(benchmark::State& state) { runSinAccy(state, 1); }
void BM_SinAffine_Accy_AllThreads(benchmark::State& state) { runSinAccy(state, 0); }

void BM_SinAffine_Eigen(benchmark::State& state) {
  Eigen::Map<const Eigen::ArrayXf> x(inputX().data(), kN);
  Eigen::ArrayXf y(kN);
  const float a = 2, b = 1, c = 3;
  for (auto _ : state) {
    y = (a * x + b).sin() * c;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_SinAffine_PlainLoop(benchmark::State& state) {
  const std::vector<float>& x = inputX();
  std::vector<float> y(kN);
  const float a = 2, b = 1, c = 3;
  for (auto _ : state) {
    for (int64_t i = 0; i < kN; ++i) y[i] = std::sin(a * x[i] + b) * c;
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

// --- sum -------------------------------------------------------------------

void BM_Sum_Accy_1Thread(benchmark::State& state) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}})};
  auto program = tensor::define("sum", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].sum("i");
  });
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 1});
  float out = 0;
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(inputX())}, {accy::writableBytes(std::span(&out, 1))});
    benchmark::DoNotOptimize(out);
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

__attribute__((target("avx512f"))) float sumAvx512(const float* x, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_add_ps(acc0, _mm512_loadu_ps(x + i));
    acc1 = _mm512_add_ps(acc1, _mm512_loadu_ps(x + i + 16));
    acc2 = _mm512_add_ps(acc2, _mm512_loadu_ps(x + i + 32));
    acc3 = _mm512_add_ps(acc3, _mm512_loadu_ps(x + i + 48));
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

void BM_Sum_Avx512Intrinsics_1Thread(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(sumAvx512(inputX().data(), kN));
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

// --- dot: 1024 x 1024 x 1024 --------------------------------------------

constexpr int64_t kM = 1024;

const std::vector<float>& matA() {
  static const std::vector<float> a = randomFloats(kM * kM, -1, 1, 2);
  return a;
}
const std::vector<float>& matB() {
  static const std::vector<float> b = randomFloats(kM * kM, -1, 1, 3);
  return b;
}

void BM_Matmul1024_Accy_1Thread(benchmark::State& state) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kM}, {"k", kM}}),
                                tensor::spec(tensor::DType::f32, {{"k", kM}, {"j", kM}})};
  auto program = tensor::define("matmul", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].dot(v[1], "k");
  });
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 1});
  std::vector<float> c(kM * kM);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(matA()), accy::bytes(matB())}, {accy::writableBytes(c)});
    benchmark::DoNotOptimize(c.data());
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kM * kM * kM * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_Matmul1024_Eigen_1Thread(benchmark::State& state) {
  Eigen::setNbThreads(1);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> a(matA().data(), kM, kM), b(matB().data(), kM, kM);
  Mat c(kM, kM);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kM * kM * kM * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_Matmul1024_OpenBLAS_1Thread(benchmark::State& state) {
  openblas_set_num_threads(1);
  std::vector<float> c(kM * kM);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kM, kM, kM, 1.0f, matA().data(), kM,
                matB().data(), kM, 0.0f, c.data(), kM);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kM * kM * kM * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// --- tone: compile and launch latency ------------------------------------

tensor::Program toneProgram() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  return *tensor::define("mismatch", specs, tone::mismatch);
}

void BM_Tone_Compile(benchmark::State& state) {
  const tensor::Program p = toneProgram();
  for (auto _ : state) {
    auto exe = tensor::CpuExecutable::compile(p);
    benchmark::DoNotOptimize(exe);
  }
}

void BM_Tone_Launch(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(toneProgram());
  const tone::Samples data = tone::samples();
  const float frequency[1] = {2.5f};
  float value[1];
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                          {accy::writableBytes(value)});
    benchmark::DoNotOptimize(value[0]);
  }
}

void BM_ToneValueAndGrad_Launch(benchmark::State& state) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  auto f = tensor::Function::define("mismatch", specs, tone::mismatch);
  auto exe = f->valueAndGrad({.wrt = {0}})->compileCpu();
  const tone::Samples data = tone::samples();
  const float frequency[1] = {2.5f};
  float value[1], slope[1];
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                          {accy::writableBytes(value), accy::writableBytes(slope)});
    benchmark::DoNotOptimize(slope[0]);
  }
}

}  // namespace

BENCHMARK(BM_SinAffine_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_Accy_AllThreads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_PlainLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Avx512Intrinsics_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul1024_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul1024_Eigen_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul1024_OpenBLAS_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Tone_Compile)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Tone_Launch)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_ToneValueAndGrad_Launch)->Unit(benchmark::kNanosecond);

BENCHMARK_MAIN();
