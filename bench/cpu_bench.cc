// CPU benchmarks, each measured side by side with its references in one
// run (one binary over 900 lines: every CPU row of docs/PERFORMANCE.md with
// its references, so that one command measures them all alike; see
// docs/PERFORMANCE.md for the figures and the command; the
// references are built at -O3 -march=native in bench/references.cc, and
// tools/bench.sh picks OpenBLAS's kernel for the CPU):
//   - fused y = sin(a*x + b) * c over 2^24 f32: Accy (1 thread, all threads)
//     vs an Eigen array expression vs a plain std::sin loop;
//   - the same over 2^20 phases up to 10^6 (the exact reduction), 1 thread;
//   - sum over 2^24 f32: Accy vs AVX-512 and AVX2 intrinsics loops, one
//     and two threads, as rows of their own and alternated launch by launch;
//   - y = a*x + b over 2^24 f32: Accy vs Eigen and AVX-512 and AVX2
//     intrinsics loops with plain or non-temporal stores, one and two
//     threads, as rows of their own and alternated launch by launch;
//   - 1024^3 f32 matrix product: Accy vs Eigen vs OpenBLAS (one thread);
//   - products of several shapes (256^3, 4096x4096x64, 64x4096x4096, a
//     batch of 64 of 128^3, 1024^3; m x n x k) on one and two threads: Accy
//     vs OpenBLAS with the same thread count;
//   - a training step of a two-layer perceptron (valueAndGrad, one and two
//     threads) against PyTorch on the CPU (bench/torch_perceptron.py);
//   - indexing and windows: an embedding gather and its scatterAdd gradient,
//     2x2 max pooling and a 3x3 convolution against PyTorch
//     (bench/torch_indexing.py) and a copy of the bytes;
//   - a 4,096-op fused chain: the fuser's default kernel-size limit vs one
//     kernel vs no fusion (run time, code bytes, kernels);
//   - the tone program: compile latency and launch latency, and the launch
//     of its value-and-gradient program against the plain one.
// Every compile and launch is checked (a failure ends that benchmark with
// the error, and the binary exits 1), and every Accy output is checked once
// against a double-precision computation. Outputs written through pointers
// are kept alive with ClobberMemory, never DoNotOptimize(lvalue): GCC 12 can
// keep such an lvalue in a register across the "+m,r" constraint and lose
// the kernel's store (the checks caught a stale tone output that way).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "accy/accy.h"
#include "base/stop.h"
#include "backends/cpu/cpu_program.h"
#include "backends/cpu/thread_pool.h"
#include "backends/staged_program.h"
#include "bench/bench_util.h"
#include "tests/program_shapes.h"
#include "bench/references.h"
#include "compiler/codegen/x86_64/compile.h"
#include "examples/digits/digits.h"
#include "examples/nbody/nbody.h"
#include "examples/sampler/sampler.h"
#include "examples/tone/tone.h"

namespace tensor = accy::tensor;
using accy::bench::check;
using accy::bench::ok;
namespace ref = accy::bench::ref;

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

// --- products of several shapes, batches, two threads -------------------
//
// C[b] = A[b] (m x k) * B[b] (k x n) for `batch` products, f32: Accy (one
// program, the batch an axis of both operands) against OpenBLAS (one sgemm
// per product), with the same thread count. Shapes are m x n x k.

struct ProductShape {
  int64_t batch, m, n, k;
};

const ProductShape kProducts[] = {{1, 256, 256, 256},  {1, 4096, 4096, 64}, {1, 64, 4096, 4096},
                                  {64, 128, 128, 128}, {1, 1024, 1024, 1024}};

struct ProductData {
  std::vector<float> a, b;
};

const ProductData& productData(int index) {
  static std::vector<std::unique_ptr<ProductData>> cache(std::size(kProducts));
  if (!cache[index]) {
    const ProductShape& p = kProducts[index];
    cache[index] = std::make_unique<ProductData>(ProductData{randomFloats(p.batch * p.m * p.k, -1, 1, 20 + index),
                                                             randomFloats(p.batch * p.k * p.n, -1, 1, 40 + index)});
  }
  return *cache[index];
}

// 16 entries of each output against double-precision dot products.
bool checkProduct(benchmark::State& state, int index, const std::vector<float>& c) {
  const ProductShape& p = kProducts[index];
  const ProductData& d = productData(index);
  for (int64_t s = 0; s < 16; ++s) {
    const int64_t b = s % p.batch, i = (s * 397) % p.m, j = (s * 631 + 17) % p.n;
    double want = 0, magnitude = 0;
    for (int64_t q = 0; q < p.k; ++q) {
      const double t = double(d.a[(b * p.m + i) * p.k + q]) * d.b[(b * p.k + q) * p.n + j];
      want += t;
      magnitude += std::fabs(t);
    }
    const float got = c[(b * p.m + i) * p.n + j];
    if (!(std::fabs(got - want) <= magnitude * 1e-5 + 1e-6)) {
      return check(state, false, "wrong product entry " + std::to_string(got) + ", expected " + std::to_string(want));
    }
  }
  return true;
}

void setProductCounters(benchmark::State& state, int index) {
  const ProductShape& p = kProducts[index];
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * p.batch * p.m * p.n * p.k * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(p.batch) + " x " + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
                 std::to_string(p.k));
}

void BM_Product_Accy(benchmark::State& state) {
  const int index = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const ProductShape& p = kProducts[index];
  std::vector<tensor::Spec> specs;
  if (p.batch > 1) {
    specs = {tensor::spec(tensor::DType::f32, {{"b", p.batch}, {"i", p.m}, {"k", p.k}}),
             tensor::spec(tensor::DType::f32, {{"b", p.batch}, {"k", p.k}, {"j", p.n}})};
  } else {
    specs = {tensor::spec(tensor::DType::f32, {{"i", p.m}, {"k", p.k}}),
             tensor::spec(tensor::DType::f32, {{"k", p.k}, {"j", p.n}})};
  }
  auto program = tensor::define("product", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].dot(v[1], "k");
  });
  if (!ok(state, program, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  const ProductData& d = productData(index);
  std::vector<float> c(p.batch * p.m * p.n);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(d.a), accy::bytes(d.b)}, {accy::writableBytes(c)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  if (!checkProduct(state, index, c)) return;
  setProductCounters(state, index);
}

void BM_Product_OpenBLAS(benchmark::State& state) {
  const int index = static_cast<int>(state.range(0));
  const ProductShape& p = kProducts[index];
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  const ProductData& d = productData(index);
  std::vector<float> c(p.batch * p.m * p.n);
  for (auto _ : state) {
    for (int64_t b = 0; b < p.batch; ++b) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(p.m), static_cast<int>(p.n),
                  static_cast<int>(p.k), 1.0f, d.a.data() + b * p.m * p.k, static_cast<int>(p.k),
                  d.b.data() + b * p.k * p.n, static_cast<int>(p.n), 0.0f, c.data() + b * p.m * p.n,
                  static_cast<int>(p.n));
    }
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  if (!checkProduct(state, index, c)) return;
  setProductCounters(state, index);
}

void productArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int index = 0; index < static_cast<int>(std::size(kProducts)); ++index) b->Args({index, threads});
  }
  b->ArgNames({"shape", "threads"});
}

// --- a product with an elementwise epilogue -------------------------------
//
// y = tanh(x (m x k) * w (k x n) + b[n]), f32: Accy (one program; the
// epilogue runs on each output tile while it is in registers) against
// OpenBLAS's sgemm followed by a separate pass with Eigen's vectorized tanh
// (on two threads, the pass is split into two halves on two threads).
// Shapes m x n x k: a hidden layer of the perceptron below and 1024^3.

struct EpilogueShape {
  int64_t m, n, k;
};
const EpilogueShape kEpilogues[] = {{256, 512, 512}, {1024, 1024, 1024}};

struct EpilogueData {
  std::vector<float> x, w, b;
};

const EpilogueData& epilogueData(int index) {
  static std::vector<std::unique_ptr<EpilogueData>> cache(std::size(kEpilogues));
  if (!cache[index]) {
    const EpilogueShape& p = kEpilogues[index];
    cache[index] = std::make_unique<EpilogueData>(EpilogueData{randomFloats(p.m * p.k, -1, 1, 70 + index),
                                                               randomFloats(p.k * p.n, -0.1f, 0.1f, 80 + index),
                                                               randomFloats(p.n, -0.5f, 0.5f, 90 + index)});
  }
  return *cache[index];
}

// 16 entries against double precision.
bool checkEpilogue(benchmark::State& state, int index, const std::vector<float>& y) {
  const EpilogueShape& p = kEpilogues[index];
  const EpilogueData& d = epilogueData(index);
  for (int64_t s = 0; s < 16; ++s) {
    const int64_t i = (s * 397) % p.m, j = (s * 631 + 17) % p.n;
    double sum = d.b[j];
    for (int64_t q = 0; q < p.k; ++q) sum += double(d.x[i * p.k + q]) * d.w[q * p.n + j];
    const double want = std::tanh(sum);
    if (!(std::fabs(y[i * p.n + j] - want) <= 1e-5)) {
      return check(state, false, "wrong entry " + std::to_string(y[i * p.n + j]) + ", expected " + std::to_string(want));
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * p.m * p.n * p.k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k));
  return true;
}

void BM_ProductTanh_Accy(benchmark::State& state) {
  const int index = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const EpilogueShape& p = kEpilogues[index];
  const std::vector<tensor::Spec> specs = {tensor::spec(tensor::DType::f32, {{"i", p.m}, {"k", p.k}}),
                                           tensor::spec(tensor::DType::f32, {{"k", p.k}, {"j", p.n}}),
                                           tensor::spec(tensor::DType::f32, {{"j", p.n}})};
  auto program = tensor::define("layer", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return (v[0].dot(v[1], "k") + v[2]).tanh();
  });
  if (!ok(state, program, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  const EpilogueData& d = epilogueData(index);
  std::vector<float> y(p.m * p.n);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(d.x), accy::bytes(d.w), accy::bytes(d.b)}, {accy::writableBytes(y)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  checkEpilogue(state, index, y);
}

void BM_ProductTanh_OpenBLASThenEigen(benchmark::State& state) {
  const int index = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const EpilogueShape& p = kEpilogues[index];
  openblas_set_num_threads(threads);
  const EpilogueData& d = epilogueData(index);
  std::vector<float> y(p.m * p.n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(p.m), static_cast<int>(p.n),
                static_cast<int>(p.k), 1.0f, d.x.data(), static_cast<int>(p.k), d.w.data(), static_cast<int>(p.n),
                0.0f, y.data(), static_cast<int>(p.n));
    if (threads == 1) {
      ref::biasTanhEigen(y.data(), d.b.data(), 0, p.m, p.n);
    } else {
      std::thread other([&] { ref::biasTanhEigen(y.data(), d.b.data(), p.m / 2, p.m, p.n); });
      ref::biasTanhEigen(y.data(), d.b.data(), 0, p.m / 2, p.n);
      other.join();
    }
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  checkEpilogue(state, index, y);
}

void epilogueArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int index = 0; index < static_cast<int>(std::size(kEpilogues)); ++index) b->Args({index, threads});
  }
  b->ArgNames({"shape", "threads"});
}

// --- a training step: a two-layer perceptron ----------------------------
//
// Batch 256, 512 inputs, 512 hidden units (tanh), 10 classes, softmax
// cross-entropy averaged over the batch; valueAndGrad for W1, b1 and W2.
// Accy compiles the whole step (forward and backward) into one program;
// PyTorch 1.13 on the CPU (Debian's python3-torch) runs the same step in
// bench/torch_perceptron.py, started from here in the same run with the
// same thread count (its median step time is reported as this row's time).

constexpr int64_t kBatch = 256, kInputs = 512, kHidden = 512, kClasses = 10;

struct PerceptronData {
  std::vector<float> x, y, w1, b1, w2;
};

const PerceptronData& perceptronData() {
  static const PerceptronData d = [] {
    PerceptronData p;
    p.x = randomFloats(kBatch * kInputs, -1, 1, 61);
    p.y.assign(kBatch * kClasses, 0.0f);
    std::mt19937 rng(62);
    for (int64_t b = 0; b < kBatch; ++b) p.y[b * kClasses + rng() % kClasses] = 1;
    p.w1 = randomFloats(kInputs * kHidden, -0.05f, 0.05f, 63);
    p.b1 = randomFloats(kHidden, -0.05f, 0.05f, 64);
    p.w2 = randomFloats(kHidden * kClasses, -0.05f, 0.05f, 65);
    return p;
  }();
  return d;
}

// Whether every element of the f32 outputs `got` (one pointer per output,
// in order) is within rel * |want| + abs of the reference evaluator's
// result for `program` on `in`; a failed check names the first that is not.
bool matchesEvaluator(benchmark::State& state, const tensor::Program& program,
                      const std::vector<std::span<const std::byte>>& in, const std::vector<const float*>& got,
                      double rel, double abs) {
  auto want = tensor::evaluate(program, in);
  if (!ok(state, want, "evaluate")) return false;
  for (size_t o = 0; o < got.size(); ++o) {
    const auto& ref = (*want)[o];
    for (size_t e = 0; e < ref.size() / 4; ++e) {
      float r;
      std::memcpy(&r, ref.data() + 4 * e, 4);
      if (!(std::fabs(got[o][e] - r) <= rel * std::fabs(r) + abs)) {
        return check(state, false, "output " + std::to_string(o) + " element " + std::to_string(e) + ": " +
                                       std::to_string(got[o][e]) + ", evaluator " + std::to_string(r));
      }
    }
  }
  return true;
}

absl::StatusOr<tensor::Function> perceptronStep() {
  const std::vector<tensor::Spec> specs = {tensor::spec(tensor::DType::f32, {{"b", kBatch}, {"i", kInputs}}),
                                           tensor::spec(tensor::DType::f32, {{"b", kBatch}, {"c", kClasses}}),
                                           tensor::spec(tensor::DType::f32, {{"i", kInputs}, {"h", kHidden}}),
                                           tensor::spec(tensor::DType::f32, {{"h", kHidden}}),
                                           tensor::spec(tensor::DType::f32, {{"h", kHidden}, {"c", kClasses}})};
  auto loss = tensor::Function::define("perceptron", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    const tensor::Value h = (v[0].dot(v[2], "i") + v[3]).tanh();
    const tensor::Value logits = h.dot(v[4], "h");
    const tensor::Value top = logits.max("c");
    const tensor::Value lse = (logits - top).exp().sum("c").log() + top;
    return (lse - (v[1] * logits).sum("c")).mean("b");
  });
  if (!loss.ok()) return loss.status();
  return loss->valueAndGrad({.wrt = {2, 3, 4}});
}

void runPerceptronAccy(benchmark::State& state, int threads) {
  auto step = perceptronStep();
  if (!ok(state, step, "valueAndGrad")) return;
  auto exe = tensor::CpuExecutable::compile(step->program(), {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  const PerceptronData& d = perceptronData();
  float loss = 0;
  std::vector<float> g1(kInputs * kHidden), gb(kHidden), g2(kHidden * kClasses);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(d.x), accy::bytes(d.y), accy::bytes(d.w1), accy::bytes(d.b1), accy::bytes(d.w2)},
                          {accy::writableBytes(std::span(&loss, 1)), accy::writableBytes(g1), accy::writableBytes(gb),
                           accy::writableBytes(g2)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  // Once: every output against the reference evaluator.
  const std::vector<std::span<const std::byte>> in = {accy::bytes(d.x), accy::bytes(d.y), accy::bytes(d.w1),
                                                      accy::bytes(d.b1), accy::bytes(d.w2)};
  matchesEvaluator(state, step->program(), in, {&loss, g1.data(), gb.data(), g2.data()}, 1e-4, 1e-6);
}

// Runs a reference's command (plus --threads) and reports the median it
// prints ("median_ms M", "threads N") as this row's time. `missing`: why
// the reference is not applicable here when its output holds `missing_marker`.
//
// glibc's malloc is told to keep what it frees (no mmap per large block, no
// trimming): NumPy and PyTorch allocate every result afresh, and on a VM
// whose page faults are dear each new 8 MB block costs more than the
// arithmetic in it (PyTorch's N-body step: 105 ms a step with glibc's
// defaults, 6.6 ms with these; docs/PERFORMANCE.md, "N-body"). Accy's
// executables allocate their temporaries once, at compile time.
constexpr char kReferenceMalloc[] =
    "env MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=268435456 ";
void runReferenceCommand(benchmark::State& state, const std::string& command_and_args, int threads,
                         const std::string& missing_marker, const std::string& missing) {
  const std::string command =
      kReferenceMalloc + command_and_args + " --threads=" + std::to_string(threads) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  if (pipe != nullptr) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  }
  const int rc = pipe != nullptr ? pclose(pipe) : -1;
  const size_t at = out.find("median_ms ");
  if (rc != 0 || at == std::string::npos) {
    const bool absent = out.find(missing_marker) != std::string::npos;
    state.SkipWithError(
        (absent ? std::string(ACCY_BENCH_NOT_APPLICABLE) + missing : "reference run failed: " + out).c_str());
    return;
  }
  const double seconds = std::atof(out.c_str() + at + 10) / 1e3;
  const size_t t = out.find("threads ");
  if (t == std::string::npos || std::atoi(out.c_str() + t + 8) != threads) {
    state.SkipWithError(("the reference ran with another thread count: " + out).c_str());
    return;
  }
  for (auto _ : state) state.SetIterationTime(seconds);
  // A sampler's smallest effective sample size, where the reference gives it.
  if (const size_t e = out.find("min_ess "); e != std::string::npos) {
    state.counters["min_ess"] = std::atof(out.c_str() + e + 8);
    state.counters["ess_per_s"] = state.counters["min_ess"] / seconds;
  }
  for (const char* label : {"torch ", "halide ", "numpy "}) {
    const size_t v = out.find(label);
    if (v != std::string::npos) state.SetLabel(out.substr(v, out.find('\n', v) - v));
  }
}

// Runs a PyTorch script of bench/ (`script_and_args`) with Debian's python3,
// where python3-torch installs (not a python3 found first on PATH).
void runTorchScript(benchmark::State& state, const std::string& script_and_args, int threads) {
  runReferenceCommand(state, "/usr/bin/python3 " + script_and_args, threads, "No module named 'torch'",
                      "PyTorch is not installed (python3-torch)");
}

void runPerceptronTorch(benchmark::State& state, int threads) {
  const char* script = std::getenv("ACCY_TORCH_SCRIPT");
  runTorchScript(state, std::string(script != nullptr ? script : "bench/torch_perceptron.py") + " --reps=50", threads);
}

void BM_PerceptronStep_Accy_1Thread(benchmark::State& state) { runPerceptronAccy(state, 1); }
void BM_PerceptronStep_Accy_2Threads(benchmark::State& state) { runPerceptronAccy(state, 2); }
void BM_PerceptronStep_PyTorch_1Thread(benchmark::State& state) { runPerceptronTorch(state, 1); }
void BM_PerceptronStep_PyTorch_2Threads(benchmark::State& state) { runPerceptronTorch(state, 2); }

// --- a 4,096-op fused chain ----------------------------------------------
//
// shapes::chain(4096) (v*1.0001, v+0.5, tanh in turn over 1024 x 8, then a
// sum) compiled three ways: with the fuser's default limits (kernels of at
// most FuseLimits::max_nodes ops), as one kernel (no node limit), and
// unfused (every op its own loop). Compile time is not measured here
// (bench/compile_bench.cc does); each is compiled once, then launched.

void runChain(benchmark::State& state, bool fuse, int64_t max_nodes) {
  auto program = accy::shapes::chain(4096);
  if (!ok(state, program, "define")) return;
  accy::x64::CompileOptions o;
  o.threads = 1;
  o.fuse = fuse;
  o.fuse_limits.max_nodes = max_nodes;
  auto exe = accy::x64::compileProgram(*program, o);
  if (!ok(state, exe, "compile")) return;
  state.counters["code_bytes"] = static_cast<double>(exe->code.size());
  state.counters["kernels"] = static_cast<double>(exe->launch_plan.steps.size());
  auto loaded = accy::cpu::LoadedExecutable::load(*std::move(exe), 1);
  if (!ok(state, loaded, "load")) return;
  const std::vector<float> x = randomFloats(1024 * 8, -2, 2, 7);
  float out = 0;
  std::span<const std::byte> in[] = {accy::bytes(x)};
  std::span<std::byte> outs[] = {accy::writableBytes(std::span(&out, 1))};
  for (auto _ : state) {
    auto st = loaded->launch(in, outs);
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  double want = 0;
  for (float xi : x) {
    double v = xi;
    for (int i = 0; i < 4096; ++i) v = i % 3 == 0 ? v * 1.0001 : i % 3 == 1 ? v + 0.5 : std::tanh(v);
    want += v;
  }
  if (!check(state, std::fabs(out - want) <= 1e-4 * std::fabs(want) + 1e-3,
             "wrong chain sum " + std::to_string(out) + ", expected " + std::to_string(want))) {
    return;
  }
  state.SetItemsProcessed(state.iterations() * 4096 * 1024 * 8);  // element ops
}

void BM_Chain4096_Accy_Fused(benchmark::State& state) { runChain(state, true, accy::choir::FuseLimits{}.max_nodes); }
void BM_Chain4096_Accy_OneKernel(benchmark::State& state) { runChain(state, true, int64_t{1} << 40); }
void BM_Chain4096_Accy_Unfused(benchmark::State& state) { runChain(state, false, 0); }

// --- y = sin(a*x + b) * c -------------------------------------------------

// y = sin(a*x + b) * c over n f32.
tensor::Program sinAffine(int64_t n = kN) {
  const tensor::Spec specs[] = {
      tensor::spec(tensor::DType::f32, {{"i", n}}), tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {}), tensor::spec(tensor::DType::f32, {})};
  return *tensor::define("sin_affine", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return (v[1] * v[0] + v[2]).sin() * v[3];
  });
}

// Every 4099th element of y = sin(2x + 1) * 3 within f32's documented
// accuracy of the double-precision value.
bool checkSinAffine(benchmark::State& state, const std::vector<float>& y) {
  for (int64_t i = 0; i < kN; i += 4099) {
    const double want = std::sin(2.0 * inputX()[i] + 1.0) * 3.0;
    if (!(std::fabs(y[i] - want) <= 1e-5 * 3 + 1e-6 * std::fabs(want))) {
      return check(state, false, "wrong output at " + std::to_string(i) + ": " + std::to_string(y[i]) + ", expected " +
                                     std::to_string(want));
    }
  }
  return true;
}

// One launch of the sin chain (a = 2, b = 1, c = 3) into `y`.
absl::Status launchSin(const tensor::CpuExecutable& exe, std::vector<float>& y) {
  const float a = 2, b = 1, c = 3;
  return exe.launch({accy::bytes(inputX()), accy::bytes(std::span(&a, 1)), accy::bytes(std::span(&b, 1)),
                     accy::bytes(std::span(&c, 1))},
                    {accy::writableBytes(y)});
}

// Launches back to back; `between`, when given, runs untimed before each.
void runSinAccy(benchmark::State& state, int threads, const std::function<void()>& between = nullptr) {
  auto exe = tensor::CpuExecutable::compile(sinAffine(), {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  std::vector<float> y(kN);
  for (auto _ : state) {
    if (between) {
      state.PauseTiming();
      between();
      state.ResumeTiming();
    }
    auto st = launchSin(*exe, y);
    benchmark::DoNotOptimize(y.data());
    if (!ok(state, st, "launch")) return;
  }
  if (!checkSinAffine(state, y)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

// The same on one thread alternated launch by launch with Eigen
// (runAlternating), the ratio taken within the row.
void BM_SinAffine_Alternating_1Thread(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(sinAffine(), {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  const float a = 2, b = 1, c = 3;
  std::vector<float> y(kN), z(kN);
  auto accy = [&] {
    auto st = launchSin(*exe, y);
    benchmark::DoNotOptimize(y.data());
    return ok(state, st, "launch");
  };
  auto eigen = [&] {
    ref::sinAffineEigen(inputX().data(), z.data(), kN, a, b, c);
    benchmark::DoNotOptimize(z.data());
    return true;
  };
  if (!accy::bench::runAlternating(state, {accy, eigen})) return;
  if (!checkSinAffine(state, y) || !checkSinAffine(state, z)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

// Loops: a damped oscillator over 8 lanes, kLoopSteps steps of one scan
// (issue #36's recurrence), against the same loop written in C++ and
// against launching the scan's body as a program of its own once per step
// (a plain launch's overhead). Reported in ns per step.
constexpr int64_t kLoopSteps = 1000000;
constexpr float kOscK = 4, kOscC = 0.1f, kOscDt = 0.001f;

tensor::Spec laneSpec() { return tensor::spec(tensor::DType::f32, {{"lane", 8}}); }

absl::StatusOr<tensor::ScanStep> oscillatorStep(std::span<const tensor::Value> c) {
  const tensor::Value v = c[1] - (c[0] * kOscK + c[1] * kOscC) * kOscDt;
  return tensor::ScanStep{{c[0] + v * kOscDt, v}, {}};
}

std::vector<float> oscillatorStart(int which) {
  std::vector<float> out(8);
  for (int l = 0; l < 8; ++l) out[l] = which == 0 ? 0.1f * (l + 1) : 0.0f;
  return out;
}

void perStep(benchmark::State& state) {
  state.counters["ns_per_step"] =
      benchmark::Counter(static_cast<double>(kLoopSteps) * 1e-9, benchmark::Counter::kIsIterationInvariantRate |
                                                                     benchmark::Counter::kInvert);
}

bool checkOscillator(benchmark::State& state, const std::vector<float>& x) {
  std::vector<float> rx = oscillatorStart(0), rv = oscillatorStart(1);
  ref::oscillatorLoop(rx.data(), rv.data(), 8, kLoopSteps, kOscK, kOscC, kOscDt);
  for (int l = 0; l < 8; ++l) {
    if (std::abs(x[l] - rx[l]) > 1e-3f * (1 + std::abs(rx[l]))) {
      state.SkipWithError(("oscillator lane " + std::to_string(l) + ": " + std::to_string(x[l]) + " against " +
                           std::to_string(rx[l]))
                              .c_str());
      return false;
    }
  }
  return true;
}

// `form`: 0 one kernel, 1 step by step, 2 chunks of one kernel (accyd's
// budget, 2^22 units of work a launch), 3 step by step under a stop check
// (as accyd runs a stepped scan: the check asked each step).
void runOscillatorScan(benchmark::State& state, int form) {
  const bool in_kernel = form == 0 || form == 2;
  auto program = tensor::define("oscillator", {laneSpec(), laneSpec()}, [](tensor::Builder& b, auto a) {
    return tensor::scan(b, {.length = kLoopSteps}, {a[0], a[1]}, {},
                        [](tensor::Builder&, std::span<const tensor::Value> c, std::span<const tensor::Value>) {
                          return oscillatorStep(c);
                        })
        .carry;
  });
  if (!ok(state, program, "define")) return;
  auto exe = tensor::CpuExecutable::compile(
      *program, {.threads = 1, .scans_in_kernel = in_kernel, .scan_kernel_work = form == 2 ? int64_t{1} << 22 : 0});
  if (!ok(state, exe, "compile")) return;
  if (!check(state, exe->stages()->steppedLoops() == (in_kernel ? 0 : 1), "the scan's form")) return;
  if (!check(state, exe->stages()->chunkedScans() == (form == 2 ? 1 : 0), "the scan's chunks")) return;
  const std::vector<float> x0 = oscillatorStart(0), v0 = oscillatorStart(1);
  std::vector<float> x(8), v(8);
  const accy::StopCheck never = [] { return absl::OkStatus(); };
  accy::ScopedStopCheck scoped(form == 3 ? &never : nullptr);
  for (auto _ : state) {
    if (!ok(state, exe->launch({accy::bytes(x0), accy::bytes(v0)}, {accy::writableBytes(x), accy::writableBytes(v)}),
            "launch")) {
      return;
    }
    benchmark::DoNotOptimize(x.data());
  }
  if (!checkOscillator(state, x)) return;
  perStep(state);
}

// The scan as one kernel, its step loop inside and the carries in registers.
void BM_Loop_Oscillator_Accy_1Thread(benchmark::State& state) { runOscillatorScan(state, 0); }
// The scan step by step: each step a launch of its body's compiled stage.
void BM_Loop_Oscillator_AccyStepByStep_1Thread(benchmark::State& state) { runOscillatorScan(state, 1); }
// As accyd runs them: the one kernel in chunks of steps (a stop check
// between them), and step by step with a stop check asked each step.
void BM_Loop_Oscillator_AccyChunks_1Thread(benchmark::State& state) { runOscillatorScan(state, 2); }
void BM_Loop_Oscillator_AccyStepByStepStopCheck_1Thread(benchmark::State& state) { runOscillatorScan(state, 3); }

void BM_Loop_Oscillator_BodyLaunchedPerStep_1Thread(benchmark::State& state) {
  auto program = tensor::define("oscillator_step", {laneSpec(), laneSpec()}, [](tensor::Builder&, auto a) {
    return oscillatorStep(a)->carry;
  });
  if (!ok(state, program, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  std::vector<float> x[2] = {oscillatorStart(0), std::vector<float>(8)}, v[2] = {oscillatorStart(1), std::vector<float>(8)};
  for (auto _ : state) {
    x[0] = oscillatorStart(0), v[0] = oscillatorStart(1);
    for (int64_t t = 0; t < kLoopSteps; ++t) {
      const int from = t % 2, to = 1 - from;
      if (!ok(state, exe->launch({accy::bytes(x[from]), accy::bytes(v[from])},
                                 {accy::writableBytes(x[to]), accy::writableBytes(v[to])}),
              "launch")) {
        return;
      }
    }
    benchmark::DoNotOptimize(x[0].data());
  }
  if (!checkOscillator(state, x[kLoopSteps % 2])) return;
  perStep(state);
}

void BM_Loop_Oscillator_CppLoop(benchmark::State& state) {
  std::vector<float> x, v;
  for (auto _ : state) {
    x = oscillatorStart(0), v = oscillatorStart(1);
    ref::oscillatorLoop(x.data(), v.data(), 8, kLoopSteps, kOscK, kOscC, kOscDt);
    benchmark::DoNotOptimize(x.data());
  }
  if (!checkOscillator(state, x)) return;
  perStep(state);
}

void BM_SinAffine_Accy_1Thread(benchmark::State& state) { runSinAccy(state, 1); }
void BM_SinAffine_Accy_AllThreads(benchmark::State& state) { runSinAccy(state, 0); }

void BM_SinAffine_Eigen(benchmark::State& state) {
  std::vector<float> y(kN);
  for (auto _ : state) {
    ref::sinAffineEigen(inputX().data(), y.data(), kN, 2, 1, 3);
    benchmark::DoNotOptimize(y.data());
  }
  if (!checkSinAffine(state, y)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_SinAffine_PlainLoop(benchmark::State& state) {
  std::vector<float> y(kN);
  for (auto _ : state) {
    ref::sinAffineLoop(inputX().data(), y.data(), kN, 2, 1, 3);
    benchmark::DoNotOptimize(y.data());
  }
  if (!checkSinAffine(state, y)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

// --- the core's clock after a burst of launches (issue: back-to-back) ---
//
// A launch ran slower right after another of its kind than alternated with
// Eigen's (docs/PERFORMANCE.md, "Back to back"). This VM exposes no
// hardware counters, so the clock is read from a chain of 2^26 dependent
// additions (one a cycle): its rate in GHz, measured right after a burst
// of 8 sin-chain launches (one thread), after 8 of Eigen's, and after 50 ms
// asleep. A clock that drops after a burst is the machine's, not the
// kernel's.
double clockGhz() {
  constexpr int64_t kAdds = int64_t{1} << 26;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t n = kAdds, acc = 0;
  asm volatile(
      "1:\n\t"
      "addq $1, %0\n\t"
      "decq %1\n\t"
      "jnz 1b"
      : "+r"(acc), "+r"(n));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  benchmark::DoNotOptimize(acc);
  return double(kAdds) / s / 1e9;
}

template <typename Burst>
void clockAfter(benchmark::State& state, Burst burst) {
  double sum = 0, low = 1e9;
  for (auto _ : state) {
    state.PauseTiming();
    if (!burst()) return;
    state.ResumeTiming();
    const double ghz = clockGhz();
    sum += ghz;
    low = std::min(low, ghz);
  }
  state.counters["GHz"] = sum / double(state.iterations());
  state.counters["GHz_min"] = low;
}

void BM_Clock_AfterSinBursts(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(sinAffine(), {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  std::vector<float> y(kN);
  clockAfter(state, [&] {
    for (int i = 0; i < 8; ++i) {
      auto st = launchSin(*exe, y);
      if (!ok(state, st, "launch")) return false;
    }
    benchmark::DoNotOptimize(y.data());
    return true;
  });
}

void BM_Clock_AfterEigenBursts(benchmark::State& state) {
  std::vector<float> y(kN);
  clockAfter(state, [&] {
    for (int i = 0; i < 8; ++i) ref::sinAffineEigen(inputX().data(), y.data(), kN, 2, 1, 3);
    benchmark::DoNotOptimize(y.data());
    return true;
  });
}

// The sin chain back to back, but with the caches emptied of its output
// between launches (untimed: 256 MiB written and read elsewhere): the
// previous launch's dirty lines of `y` are then written back outside the
// timed launch, as they are when another program runs in between.
void BM_SinAffine_Accy_1Thread_CachesEmptied(benchmark::State& state) {
  std::vector<char> scratch(size_t{256} << 20);
  char fill = 0;
  runSinAccy(state, 1, [&] {
    std::memset(scratch.data(), ++fill & 0x7f, scratch.size());
    benchmark::DoNotOptimize(scratch.data());
  });
}

void BM_Clock_AfterSleep(benchmark::State& state) {
  clockAfter(state, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return true;
  });
}

// --- sin of large phases: 2^20 f32 ---------------------------------------
//
// The same program with a = 10^5, b = 0, c = 1: phases up to 10^6 in
// magnitude, all but 0.8% of them beyond the fast range (|x| > 8192), where
// each lane takes the exact reduction (docs/MATH_ACCURACY.md).

constexpr int64_t kLargeN = int64_t{1} << 20;
constexpr float kPhaseScale = 1e5f;

// Every 97th element within 4 ulp-ish of sin of the f32 phase, in double.
bool checkSinLargePhase(benchmark::State& state, const std::vector<float>& y) {
  for (int64_t i = 0; i < kLargeN; i += 97) {
    const double want = std::sin(double(kPhaseScale * inputX()[i]));
    if (!(std::fabs(y[i] - want) <= 5e-7 + 4e-7 * std::fabs(want))) {
      return check(state, false, "wrong output at " + std::to_string(i) + ": " + std::to_string(y[i]) + ", expected " +
                                     std::to_string(want));
    }
  }
  return true;
}

void BM_SinLargePhase_Accy_1Thread(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(sinAffine(kLargeN), {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  const float a = kPhaseScale, b = 0, c = 1;
  const std::span<const float> x(inputX().data(), kLargeN);
  std::vector<float> y(kLargeN);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(x), accy::bytes(std::span(&a, 1)), accy::bytes(std::span(&b, 1)),
                           accy::bytes(std::span(&c, 1))},
                          {accy::writableBytes(y)});
    benchmark::DoNotOptimize(y.data());
    if (!ok(state, st, "launch")) return;
  }
  if (!checkSinLargePhase(state, y)) return;
  state.SetItemsProcessed(state.iterations() * kLargeN);
}

template <void (*SinAffine)(const float*, float*, int64_t, float, float, float)>
void runSinLargePhaseReference(benchmark::State& state) {
  std::vector<float> y(kLargeN);
  for (auto _ : state) {
    SinAffine(inputX().data(), y.data(), kLargeN, kPhaseScale, 0, 1);
    benchmark::DoNotOptimize(y.data());
  }
  if (!checkSinLargePhase(state, y)) return;
  state.SetItemsProcessed(state.iterations() * kLargeN);
}

void BM_SinLargePhase_Eigen(benchmark::State& state) { runSinLargePhaseReference<ref::sinAffineEigen>(state); }
void BM_SinLargePhase_PlainLoop(benchmark::State& state) { runSinLargePhaseReference<ref::sinAffineLoop>(state); }

// --- sum -------------------------------------------------------------------

// The sum of x in double, and whether `s` is within f32 summation's error
// of it (n ulp of the sum of magnitudes, loosely).
bool checkSum(benchmark::State& state, float s) {
  double exact = 0, magnitude = 0;
  for (float v : inputX()) {
    exact += v;
    magnitude += std::fabs(v);
  }
  return check(state, std::fabs(s - exact) <= magnitude * 1e-5,
               "wrong sum " + std::to_string(s) + ", expected " + std::to_string(exact));
}

// The sum of a 2^24 f32 vector, compiled for `threads`; compensated
// (tensor::SumOptions) when asked.
absl::StatusOr<tensor::CpuExecutable> compileSum(int threads, bool compensated = false) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}})};
  auto program = tensor::define("sum", specs, [&](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].sum("i", tensor::SumOptions{.compensated = compensated});
  });
  if (!program.ok()) return program.status();
  return tensor::CpuExecutable::compile(*program, {.threads = threads});
}

void runSumAccy(benchmark::State& state, int threads, bool compensated = false) {
  auto exe = compileSum(threads, compensated);
  if (!ok(state, exe, "compile")) return;
  float out = 0;
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(inputX())}, {accy::writableBytes(std::span(&out, 1))});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  if (!checkSum(state, out)) return;
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

void BM_Sum_Accy_1Thread(benchmark::State& state) { runSumAccy(state, 1); }
// The cost of SumOptions::compensated (docs/PERFORMANCE.md, "Compensated sums").
void BM_Sum_Compensated_1Thread(benchmark::State& state) { runSumAccy(state, 1, true); }
void BM_Sum_Compensated_2Threads(benchmark::State& state) { runSumAccy(state, 2, true); }

void BM_Sum_Avx512Intrinsics_1Thread(benchmark::State& state) {
  if (!ref::hasAvx512()) {
    state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX-512 on this CPU");
    return;
  }
  float s = 0;
  for (auto _ : state) {
    s = ref::sumAvx512(inputX().data(), kN);
    benchmark::ClobberMemory();
  }
  if (!checkSum(state, s)) return;
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

void BM_Sum_Avx2Intrinsics_1Thread(benchmark::State& state) {
  if (!ref::hasAvx2()) {
    state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX2 on this CPU");
    return;
  }
  float s = 0;
  for (auto _ : state) {
    s = ref::sumAvx2(inputX().data(), kN);
    benchmark::ClobberMemory();
  }
  if (!checkSum(state, s)) return;
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

// Two threads: each sums half.
template <float (*Sum)(const float*, int64_t)>
void runSumTwoThreads(benchmark::State& state) {
  ref::TwoThreads pool;
  float part[2] = {0, 0};
  const std::function<void(int)> half = [&](int t) { part[t] = Sum(inputX().data() + t * (kN / 2), kN / 2); };
  for (auto _ : state) {
    pool.run(half);
    benchmark::ClobberMemory();
  }
  if (!checkSum(state, part[0] + part[1])) return;
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

void BM_Sum_Accy_2Threads(benchmark::State& state) { runSumAccy(state, 2); }

void BM_Sum_Avx512Intrinsics_2Threads(benchmark::State& state) {
  if (!ref::hasAvx512()) return state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX-512 on this CPU");
  runSumTwoThreads<ref::sumAvx512>(state);
}

void BM_Sum_Avx2Intrinsics_2Threads(benchmark::State& state) {
  if (!ref::hasAvx2()) return state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX2 on this CPU");
  runSumTwoThreads<ref::sumAvx2>(state);
}

// Between the calls of an alternating row, longer than Accy's pool and the
// references' TwoThreads spin (200 us each) before they sleep: each call
// starts with every other worker asleep and wakes its own (runAlternating).
constexpr std::chrono::microseconds kPoolIdle(500);
static_assert(kPoolIdle.count() > 2 * accy::cpu::ThreadPool::kSpinMicros && kPoolIdle.count() > 2 * ref::TwoThreads::kSpinMicros);

// The same sums alternated launch by launch (runAlternating): Accy, then the
// AVX-512 loop where the CPU has it, then the AVX2 loop, each over the same
// input, the ratio taken within the row.
void runSumAlternating(benchmark::State& state, int threads) {
  auto exe = compileSum(threads);
  if (!ok(state, exe, "compile")) return;
  std::unique_ptr<ref::TwoThreads> pool = threads == 2 ? std::make_unique<ref::TwoThreads>() : nullptr;
  float accy = 0, loop = 0;
  std::vector<std::function<bool()>> fns = {[&] {
    const absl::Status st = exe->launch({accy::bytes(inputX())}, {accy::writableBytes(std::span(&accy, 1))});
    benchmark::ClobberMemory();
    return ok(state, st, "launch");
  }};
  auto reference = [&](float (*sum)(const float*, int64_t)) {
    return [&, sum] {
      if (pool == nullptr) {
        loop = sum(inputX().data(), kN);
      } else {
        float part[2] = {0, 0};
        pool->run([&](int t) { part[t] = sum(inputX().data() + t * (kN / 2), kN / 2); });
        loop = part[0] + part[1];
      }
      benchmark::ClobberMemory();
      return true;
    };
  };
  if (ref::hasAvx512()) fns.push_back(reference(ref::sumAvx512));
  if (ref::hasAvx2()) fns.push_back(reference(ref::sumAvx2));
  if (!check(state, fns.size() > 1, ACCY_BENCH_NOT_APPLICABLE "no AVX2 on this CPU")) return;
  if (!accy::bench::runAlternating(state, fns, kPoolIdle)) return;
  if (!checkSum(state, accy) || !checkSum(state, loop)) return;
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

void BM_Sum_Alternating_1Thread(benchmark::State& state) { runSumAlternating(state, 1); }
void BM_Sum_Alternating_2Threads(benchmark::State& state) { runSumAlternating(state, 2); }

// --- y = a*x + b: 64 MiB in, 64 MiB out ------------------------------------

// The output, 64-byte aligned (non-temporal stores need it), for every row.
std::span<float> affineOut() {
  static float* y = static_cast<float*>(std::aligned_alloc(64, kN * sizeof(float)));
  return {y, static_cast<size_t>(kN)};
}

// Every 4099th element of y = 2x + 1, and the last, exactly (one fma or a
// product and a sum; both round 2x exactly).
bool checkAffine(benchmark::State& state) {
  const std::span<float> y = affineOut();
  auto at = [&](int64_t i) {
    const float want = 2.0f * inputX()[i] + 1.0f;
    return check(state, y[i] == want,
                 "wrong output at " + std::to_string(i) + ": " + std::to_string(y[i]) + ", expected " + std::to_string(want));
  };
  for (int64_t i = 0; i < kN; i += 4099) {
    if (!at(i)) return false;
  }
  return at(kN - 1);
}

// y = a*x + b over 2^24 f32, compiled for `threads`.
absl::StatusOr<tensor::CpuExecutable> compileAffine(int threads) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}}), tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {})};
  auto program = tensor::define("affine", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[1] * v[0] + v[2];
  });
  if (!program.ok()) return program.status();
  return tensor::CpuExecutable::compile(*program, {.threads = threads});
}

// One launch of `exe` with a = 2, b = 1 into affineOut().
absl::Status launchAffine(const tensor::CpuExecutable& exe) {
  const float a = 2, b = 1;
  absl::Status st = exe.launch({accy::bytes(inputX()), accy::bytes(std::span(&a, 1)), accy::bytes(std::span(&b, 1))},
                               {accy::writableBytes(affineOut())});
  benchmark::ClobberMemory();
  return st;
}

void runAffineAccy(benchmark::State& state, int threads) {
  auto exe = compileAffine(threads);
  if (!ok(state, exe, "compile")) return;
  std::ranges::fill(affineOut(), 0.0f);
  for (auto _ : state) {
    if (!ok(state, launchAffine(*exe), "launch")) return;
  }
  if (!checkAffine(state)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_Affine_Accy_1Thread(benchmark::State& state) { runAffineAccy(state, 1); }
void BM_Affine_Accy_2Threads(benchmark::State& state) { runAffineAccy(state, 2); }

using AffineLoop = void (*)(const float*, float*, int64_t, float, float, bool);

// One run of an intrinsics loop into affineOut(), on the calling thread or,
// with `pool`, each of its two threads a half.
void runAffineLoop(AffineLoop affine, ref::TwoThreads* pool, bool stream) {
  float* y = affineOut().data();
  const int64_t part = pool != nullptr ? kN / 2 : kN;
  const std::function<void(int)> run = [&](int t) { affine(inputX().data() + t * part, y + t * part, part, 2, 1, stream); };
  if (pool != nullptr) {
    pool->run(run);
  } else {
    run(0);
  }
  benchmark::ClobberMemory();
}

// `threads` 1 or 2 (each thread a half).
template <AffineLoop Affine>
void runAffineReference(benchmark::State& state, int threads, bool stream) {
  std::ranges::fill(affineOut(), 0.0f);
  std::unique_ptr<ref::TwoThreads> pool = threads == 2 ? std::make_unique<ref::TwoThreads>() : nullptr;
  for (auto _ : state) runAffineLoop(Affine, pool.get(), stream);
  if (!checkAffine(state)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_Affine_Avx512Intrinsics(benchmark::State& state) {
  if (!ref::hasAvx512()) return state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX-512 on this CPU");
  runAffineReference<ref::affineAvx512>(state, static_cast<int>(state.range(0)), state.range(1) != 0);
}

void BM_Affine_Avx2Intrinsics(benchmark::State& state) {
  if (!ref::hasAvx2()) return state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX2 on this CPU");
  runAffineReference<ref::affineAvx2>(state, static_cast<int>(state.range(0)), state.range(1) != 0);
}

void BM_Affine_Eigen_1Thread(benchmark::State& state) {
  std::ranges::fill(affineOut(), 0.0f);
  for (auto _ : state) {
    ref::affineEigen(inputX().data(), affineOut().data(), kN, 2, 1);
    benchmark::ClobberMemory();
  }
  if (!checkAffine(state)) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

// The same alternated launch by launch (runAlternating): Accy, then the
// AVX-512 loops (plain and non-temporal stores) where the CPU has AVX-512,
// the AVX2 loops, and on one thread Eigen, the ratio taken within the row.
void runAffineAlternating(benchmark::State& state, int threads) {
  auto exe = compileAffine(threads);
  if (!ok(state, exe, "compile")) return;
  std::unique_ptr<ref::TwoThreads> pool = threads == 2 ? std::make_unique<ref::TwoThreads>() : nullptr;
  std::vector<std::function<bool()>> fns = {[&] { return ok(state, launchAffine(*exe), "launch"); }};
  auto loop = [&](AffineLoop affine, bool stream) {
    return [&pool, affine, stream] {
      runAffineLoop(affine, pool.get(), stream);
      return true;
    };
  };
  for (bool stream : {false, true}) {
    if (ref::hasAvx512()) fns.push_back(loop(ref::affineAvx512, stream));
    if (ref::hasAvx2()) fns.push_back(loop(ref::affineAvx2, stream));
  }
  if (threads == 1) {
    fns.push_back([] {
      ref::affineEigen(inputX().data(), affineOut().data(), kN, 2, 1);
      benchmark::ClobberMemory();
      return true;
    });
  }
  std::ranges::fill(affineOut(), 0.0f);
  if (!accy::bench::runAlternating(state, fns, kPoolIdle)) return;
  // The last to run wrote the output; every one of them runs once more here
  // and is checked, Accy last.
  for (size_t k = fns.size(); k-- > 0;) {
    std::ranges::fill(affineOut(), 0.0f);
    if (!fns[k]() || !checkAffine(state)) return;
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_Affine_Alternating_1Thread(benchmark::State& state) { runAffineAlternating(state, 1); }
void BM_Affine_Alternating_2Threads(benchmark::State& state) { runAffineAlternating(state, 2); }

void affineArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int stream : {0, 1}) b->Args({threads, stream});
  }
  b->ArgNames({"threads", "stream"});
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

// 64 entries of c = a * b against double-precision dot products.
bool checkMatmul(benchmark::State& state, const std::vector<float>& c) {
  for (int64_t s = 0; s < 64; ++s) {
    const int64_t i = (s * 397) % kM, j = (s * 631 + 17) % kM;
    double want = 0, magnitude = 0;
    for (int64_t p = 0; p < kM; ++p) {
      want += double(matA()[i * kM + p]) * matB()[p * kM + j];
      magnitude += std::fabs(double(matA()[i * kM + p]) * matB()[p * kM + j]);
    }
    if (!(std::fabs(c[i * kM + j] - want) <= magnitude * 1e-5)) {
      return check(state, false, "wrong c[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
                                     std::to_string(c[i * kM + j]) + ", expected " + std::to_string(want));
    }
  }
  return true;
}

void setFlops(benchmark::State& state) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kM * kM * kM * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

void BM_Matmul1024_Accy_1Thread(benchmark::State& state) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kM}, {"k", kM}}),
                                tensor::spec(tensor::DType::f32, {{"k", kM}, {"j", kM}})};
  auto program = tensor::define("matmul", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].dot(v[1], "k");
  });
  if (!ok(state, program, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  std::vector<float> c(kM * kM);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(matA()), accy::bytes(matB())}, {accy::writableBytes(c)});
    benchmark::DoNotOptimize(c.data());
    if (!ok(state, st, "launch")) return;
  }
  if (!checkMatmul(state, c)) return;
  setFlops(state);
}

void BM_Matmul1024_Eigen_1Thread(benchmark::State& state) {
  std::vector<float> c(kM * kM);
  for (auto _ : state) {
    ref::matmulEigen(matA().data(), matB().data(), c.data(), kM, kM, kM);
    benchmark::DoNotOptimize(c.data());
  }
  if (!checkMatmul(state, c)) return;
  setFlops(state);
}

void BM_Matmul1024_OpenBLAS_1Thread(benchmark::State& state) {
  openblas_set_num_threads(1);
  std::vector<float> c(kM * kM);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kM, kM, kM, 1.0f, matA().data(), kM,
                matB().data(), kM, 0.0f, c.data(), kM);
    benchmark::DoNotOptimize(c.data());
  }
  if (!checkMatmul(state, c)) return;
  setFlops(state);
}

// --- tone: compile and launch latency ------------------------------------

tensor::Program toneProgram() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  return *tensor::define("mismatch", specs, tone::mismatch);
}

bool checkTone(benchmark::State& state, float value) {
  return check(state, std::fabs(value - tone::referenceMismatch(2.5)) <= 1e-4,
               "wrong mismatch " + std::to_string(value) + ", expected " + std::to_string(tone::referenceMismatch(2.5)));
}

void BM_Tone_Compile(benchmark::State& state) {
  const tensor::Program p = toneProgram();
  for (auto _ : state) {
    auto exe = tensor::CpuExecutable::compile(p);
    benchmark::DoNotOptimize(exe);
    if (!ok(state, exe, "compile")) return;
  }
}

void BM_Tone_Launch(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(toneProgram());
  if (!ok(state, exe, "compile")) return;
  const tone::Samples data = tone::samples();
  const float frequency[1] = {2.5f};
  float value[1];
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                          {accy::writableBytes(value)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  checkTone(state, value[0]);
}

void BM_ToneValueAndGrad_Launch(benchmark::State& state) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  auto f = tensor::Function::define("mismatch", specs, tone::mismatch);
  if (!ok(state, f, "define")) return;
  auto vg = f->valueAndGrad({.wrt = {0}});
  if (!ok(state, vg, "valueAndGrad")) return;
  auto exe = vg->compileCpu();
  if (!ok(state, exe, "compile")) return;
  const tone::Samples data = tone::samples();
  const float frequency[1] = {2.5f};
  float value[1], slope[1];
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                          {accy::writableBytes(value), accy::writableBytes(slope)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  if (!checkTone(state, value[0])) return;
  // d/df of the mismatch, by central difference in double.
  const double h = 1e-5, want = (tone::referenceMismatch(2.5 + h) - tone::referenceMismatch(2.5 - h)) / (2 * h);
  check(state, std::fabs(slope[0] - want) <= 1e-3 * (1 + std::fabs(want)),
        "wrong slope " + std::to_string(slope[0]) + ", expected " + std::to_string(want));
}

}  // namespace

// --- Indexing by data and windows (docs/SEMANTICS.md) -----------------------

// Records `fn` over `specs` and compiles it with `options` (or for `threads`).
template <typename F>
absl::StatusOr<tensor::CpuExecutable> compileFor(std::vector<tensor::Spec> specs, const tensor::CpuOptions& options,
                                                 F fn) {
  auto program = tensor::define("bench", specs, fn);
  if (!program.ok()) return program.status();
  return tensor::CpuExecutable::compile(*program, options);
}
template <typename F>
absl::StatusOr<tensor::CpuExecutable> compileFor(std::vector<tensor::Spec> specs, int threads, F fn) {
  return compileFor(std::move(specs), tensor::CpuOptions{.threads = threads}, fn);
}

std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (float& x : v) x = d(rng);
  return v;
}

// An embedding lookup: the rows of a f32[2^20, 64] table (256 MiB) at 2^20
// random tokens, against a copy of the same 256 MiB and PyTorch's
// index_select.
constexpr int64_t kVocab = int64_t{1} << 20, kFeatures = 64, kTokens = int64_t{1} << 20;

// A zeroed output of n floats, 64-byte aligned as the a*x + b rows' output
// is: an output that is not starts each 256-byte row mid-line, and every
// row then pays a scalar head and tail before its non-temporal stores
// (docs/PERFORMANCE.md, "Embedding gathers and scatters on the Intel Xeon"); a
// scatter split across threads would also share a line between them. Touched before the
// clock starts.
struct AlignedFloats {
  explicit AlignedFloats(int64_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * 4)), &std::free), size(n) {
    std::memset(data.get(), 0, static_cast<size_t>(n) * 4);
  }
  float* begin() const { return data.get(); }
  float& operator[](int64_t i) const { return data.get()[i]; }
  std::span<float> span() const { return {data.get(), static_cast<size_t>(size)}; }
  std::unique_ptr<float, decltype(&std::free)> data;
  int64_t size;
};

const std::vector<float>& embeddingTable() {
  static const std::vector<float> t = randomFloats(kVocab * kFeatures, 21);
  return t;
}

const std::vector<int32_t>& embeddingTokens() {
  static const std::vector<int32_t> t = [] {
    std::vector<int32_t> v(kTokens);
    std::mt19937 rng(22);
    for (int32_t& x : v) x = static_cast<int32_t>(rng() % kVocab);
    return v;
  }();
  return t;
}

void runEmbeddingAccy(benchmark::State& state, int threads) {
  auto exe = compileFor({tensor::spec(tensor::DType::f32, {{"vocab", kVocab}, {"feature", kFeatures}}),
                         tensor::spec(tensor::DType::i32, {{"token", kTokens}})},
                        threads, [](tensor::Builder&, std::span<const tensor::Value> a) {
                          return take(a[0], "vocab", a[1]);
                        });
  if (!ok(state, exe, "compile")) return;
  const std::vector<float>& table = embeddingTable();
  const std::vector<int32_t>& tokens = embeddingTokens();
  const AlignedFloats out(kTokens * kFeatures);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(table), accy::bytes(tokens)}, {accy::writableBytes(out.span())});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  const int64_t t = kTokens / 3;
  if (!check(state, std::memcmp(&out[t * kFeatures], &embeddingTable()[embeddingTokens()[t] * kFeatures],
                                kFeatures * 4) == 0,
             "wrong row")) {
    return;
  }
  state.SetBytesProcessed(state.iterations() * kTokens * kFeatures * 4);
}

// A take along the vector axis: out[t] = x[idx[t]] * 2 + 1, 2^22 random
// indices into a table of 2^16 f32 (in the second-level cache): the lanes
// gathered (vgatherdps) against the same loop in C++.
constexpr int64_t kTakeTable = int64_t{1} << 16, kTakeCount = int64_t{1} << 22;

const std::vector<int32_t>& takeIndices() {
  static const std::vector<int32_t> v = [] {
    std::vector<int32_t> idx(kTakeCount);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(kTakeTable - 1));
    for (int32_t& i : idx) i = d(rng);
    return idx;
  }();
  return v;
}

void BM_TakeElements_Accy_1Thread(benchmark::State& state) {
  auto exe = compileFor({tensor::spec(tensor::DType::f32, {{"v", kTakeTable}}),
                         tensor::spec(tensor::DType::i32, {{"t", kTakeCount}})},
                        1, [](tensor::Builder&, std::span<const tensor::Value> a) {
                          return take(a[0], "v", a[1]) * 2.0f + 1.0f;
                        });
  if (!ok(state, exe, "compile")) return;
  const std::vector<float> table = randomFloats(kTakeTable, 3);
  std::vector<float> out(kTakeCount);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(table), accy::bytes(takeIndices())}, {accy::writableBytes(out)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  const int64_t t = kTakeCount / 3;
  if (!check(state, out[t] == table[takeIndices()[t]] * 2.0f + 1.0f, "wrong element")) return;
  state.SetItemsProcessed(state.iterations() * kTakeCount);
}

// A column read feeding arithmetic: y[j, i] = exp(2 x[i, j]) over f64[256,
// 256] (in the second-level cache). The strided f64 loads gather
// (vgatherdpd), so the exponential runs in vector lanes.
constexpr int64_t kTransposeN = 256;
void BM_TransposeExpF64_Accy_1Thread(benchmark::State& state) {
  auto program = tensor::define("transpose_exp", {tensor::spec(tensor::DType::f64, {{"i", kTransposeN}, {"j", kTransposeN}})},
                                [](tensor::Builder&, std::span<const tensor::Value> a) {
                                  return (a[0].transpose({"j", "i"}) * 2.0).exp();
                                });
  if (!ok(state, program, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  std::vector<double> x(kTransposeN * kTransposeN), y(x.size()), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 977) * 1e-3;
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(x)}, {accy::writableBytes(y)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  ref::transposeExp(x.data(), want.data(), kTransposeN);
  for (size_t i = 0; i < y.size(); i += 97) {
    if (!check(state, std::fabs(y[i] - want[i]) <= 1e-14 * want[i], "wrong element")) return;
  }
  state.SetItemsProcessed(state.iterations() * kTransposeN * kTransposeN);
}
void BM_TransposeExpF64_CppLoop(benchmark::State& state) {
  std::vector<double> x(kTransposeN * kTransposeN), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 977) * 1e-3;
  for (auto _ : state) {
    ref::transposeExp(x.data(), y.data(), kTransposeN);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kTransposeN * kTransposeN);
}

void BM_TakeElements_CppLoop(benchmark::State& state) {
  const std::vector<float> table = randomFloats(kTakeTable, 3);
  std::vector<float> out(kTakeCount);
  for (auto _ : state) {
    ref::gatherElements(table.data(), kTakeTable, takeIndices().data(), out.data(), kTakeCount);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kTakeCount);
}

void BM_Embedding_Accy_1Thread(benchmark::State& state) { runEmbeddingAccy(state, 1); }
void BM_Embedding_Accy_2Threads(benchmark::State& state) { runEmbeddingAccy(state, 2); }
void BM_Embedding_Memcpy_1Thread(benchmark::State& state) {
  const std::vector<float>& table = embeddingTable();
  const AlignedFloats out(kTokens * kFeatures);
  for (auto _ : state) {
    std::memcpy(out.begin(), table.data(), kTokens * kFeatures * 4);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kTokens * kFeatures * 4);
}
// The same gather as the best hand-written loop found (references.cc):
// what this machine allows for random rows, beside the copy.
void BM_Embedding_HandLoop_1Thread(benchmark::State& state) {
  if (!ref::hasAvx2()) {
    state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX2 on this CPU");
    return;
  }
  const std::vector<float>& table = embeddingTable();
  const std::vector<int32_t>& tokens = embeddingTokens();
  const AlignedFloats out(kTokens * kFeatures);
  for (auto _ : state) {
    ref::gatherRowsAvx2(table.data(), tokens.data(), out.begin(), kTokens, kFeatures);
    benchmark::ClobberMemory();
  }
  const int64_t t = kTokens / 3;
  if (!check(state, std::memcmp(&out[t * kFeatures], &table[tokens[t] * kFeatures], kFeatures * 4) == 0,
             "wrong row")) {
    return;
  }
  state.SetBytesProcessed(state.iterations() * kTokens * kFeatures * 4);
}
void BM_Embedding_PyTorch_1Thread(benchmark::State& state) {
  runTorchScript(state, "bench/torch_indexing.py --case=embedding", 1);
}
void BM_Embedding_PyTorch_2Threads(benchmark::State& state) {
  runTorchScript(state, "bench/torch_indexing.py --case=embedding", 2);
}

// --- N-body (examples/nbody): 1,024 bodies, f64, kNBodySteps leapfrog steps
//
// One program (a scan of every step), against the same steps in NumPy and
// PyTorch (bench/nbody_refs.py), vectorised over the pairs in the fastest
// form tried for each. Reported as time per run of kNBodySteps steps.

constexpr int64_t kNBodySteps = 20;

void runNBodyAccy(benchmark::State& state, int threads) {
  nbody::Options o;
  o.steps = kNBodySteps;
  o.diagnostics = false;
  auto p = nbody::program(o);
  if (!ok(state, p, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  nbody::Buffers<double> b(nbody::start(o.bodies));
  for (auto _ : state) {
    if (!ok(state, exe->launch(b.inputs(), b.outputs(false)), "launch")) return;
    benchmark::DoNotOptimize(b.pos_out.data());
  }
  // Checked once against the program with its diagnostics: the energy kept.
  o.diagnostics = true;
  auto checked = nbody::program(o);
  if (!ok(state, checked, "define")) return;
  auto exe2 = tensor::CpuExecutable::compile(*checked, {.threads = threads});
  if (!ok(state, exe2, "compile")) return;
  if (!ok(state, exe2->launch(b.inputs(), b.outputs()), "launch")) return;
  if (!check(state, b.drift() < 1e-6, "energy drift over 1e-6")) return;
  state.SetItemsProcessed(state.iterations() * kNBodySteps);
}
void BM_NBody_Accy_1Thread(benchmark::State& state) { runNBodyAccy(state, 1); }
void BM_NBody_Accy_2Threads(benchmark::State& state) { runNBodyAccy(state, 2); }
void runNBodyReference(benchmark::State& state, const char* lib, int threads) {
  runReferenceCommand(state,
                      std::string("/usr/bin/python3 bench/nbody_refs.py --lib=") + lib +
                          " --steps=" + std::to_string(kNBodySteps),
                      threads, "No module named", std::string(lib) + " is not installed");
}
void BM_NBody_NumPy_1Thread(benchmark::State& state) { runNBodyReference(state, "numpy", 1); }
void BM_NBody_PyTorch_1Thread(benchmark::State& state) { runNBodyReference(state, "torch", 1); }
void BM_NBody_PyTorch_2Threads(benchmark::State& state) { runNBodyReference(state, "torch", 2); }

// --- HMC (examples/sampler): 4 chains x (200 + 1,000) draws x 20 leapfrog
//
// The whole sampler as one program, against the same sampler in PyTorch
// (bench/hmc_torch.py: eager, autograd, the chains batched). Reported as
// time per run, with the smallest effective sample size over the
// coefficients and effective samples per second (min_ess / time).

void BM_Sampler_Accy_1Thread(benchmark::State& state) {
  absl::StatusOr<sampler::Data> d = sampler::breastCancer();
  if (!d.ok()) {
    state.SkipWithError((std::string(ACCY_BENCH_NOT_APPLICABLE) + std::string(d.status().message())).c_str());
    return;
  }
  const sampler::Options o;
  auto p = sampler::program(o, d->obs, d->coefs);
  if (!ok(state, p, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  std::vector<double> draws(o.chains * o.draws * d->coefs), accepted(o.chains * o.draws);
  for (auto _ : state) {
    if (!ok(state, exe->launch({accy::bytes(d->x), accy::bytes(d->y)}, {accy::writableBytes(draws), accy::writableBytes(accepted)}),
            "launch")) {
      return;
    }
    benchmark::DoNotOptimize(draws.data());
  }
  const sampler::Summary s = sampler::summarise(draws, accepted, o.chains, o.draws, d->coefs);
  if (!check(state, *std::max_element(s.rhat.begin(), s.rhat.end()) < 1.01, "split R-hat over 1.01")) return;
  state.counters["min_ess"] = *std::min_element(s.ess.begin(), s.ess.end());
  state.counters["ess_per_s"] = benchmark::Counter(state.counters["min_ess"] * state.iterations(), benchmark::Counter::kIsRate);
}
void BM_Sampler_PyTorch_1Thread(benchmark::State& state) { runTorchScript(state, "bench/hmc_torch.py", 1); }

// --- random numbers: 2^24 f32 samples ------------------------------------
//
// uniform and normal from a key (Threefry-2x32, docs/SEMANTICS.md), against
// NumPy's PCG64 Generator and PyTorch (bench/random_refs.py), one thread;
// and the noise fused into its consumer (x + 0.1 * normal) beside x + 0.1 * y
// read from memory.

constexpr int64_t kSamples = int64_t{1} << 24;

void runRandomAccy(benchmark::State& state, bool normal, int threads) {
  auto exe = compileFor({tensor::spec(tensor::DType::u32, {{"word", 2}})}, threads,
                        [&](tensor::Builder&, std::span<const tensor::Value> a) {
                          return normal ? tensor::normal(a[0], {{"n", kSamples}}) : tensor::uniform(a[0], {{"n", kSamples}});
                        });
  if (!ok(state, exe, "compile")) return;
  const std::vector<uint32_t> key = {0, 42};
  std::vector<float> out(kSamples, 0.0f);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(key)}, {accy::writableBytes(out)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  double sum = 0, squares = 0;
  for (float v : out) sum += v, squares += double{v} * v;
  const double mean = sum / kSamples, var = squares / kSamples - mean * mean;
  if (!check(state, normal ? std::abs(mean) < 1e-3 && std::abs(var - 1) < 2e-3 : std::abs(mean - 0.5) < 1e-3,
             "moments off")) {
    return;
  }
  state.SetItemsProcessed(state.iterations() * kSamples);
}
void BM_Uniform_Accy_1Thread(benchmark::State& state) { runRandomAccy(state, false, 1); }
void BM_Normal_Accy_1Thread(benchmark::State& state) { runRandomAccy(state, true, 1); }
void runRandomReference(benchmark::State& state, const char* lib, const char* which) {
  runReferenceCommand(state, std::string("/usr/bin/python3 bench/random_refs.py --lib=") + lib + " --case=" + which, 1,
                      "No module named", std::string(lib) + " is not installed");
}
void BM_Uniform_NumPy_1Thread(benchmark::State& state) { runRandomReference(state, "numpy", "uniform"); }
void BM_Uniform_PyTorch_1Thread(benchmark::State& state) { runRandomReference(state, "torch", "uniform"); }
void BM_Normal_NumPy_1Thread(benchmark::State& state) { runRandomReference(state, "numpy", "normal"); }
void BM_Normal_PyTorch_1Thread(benchmark::State& state) { runRandomReference(state, "torch", "normal"); }

// x + 0.1 * noise: drawn in the consumer's loop, or read from memory.
void runNoisy(benchmark::State& state, bool drawn) {
  std::vector<tensor::Spec> specs = {tensor::spec(tensor::DType::f32, {{"n", kSamples}}),
                                     drawn ? tensor::spec(tensor::DType::u32, {{"word", 2}})
                                           : tensor::spec(tensor::DType::f32, {{"n", kSamples}})};
  auto exe = compileFor(specs, 1, [&](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0] + (drawn ? tensor::normal(a[1], {{"n", kSamples}}) : a[1]) * 0.1;
  });
  if (!ok(state, exe, "compile")) return;
  const std::vector<float> x(kSamples, 1.0f), y(kSamples, 0.5f);
  const std::vector<uint32_t> key = {0, 42};
  std::vector<float> out(kSamples, 0.0f);
  for (auto _ : state) {
    auto st = drawn ? exe->launch({accy::bytes(x), accy::bytes(key)}, {accy::writableBytes(out)})
                    : exe->launch({accy::bytes(x), accy::bytes(y)}, {accy::writableBytes(out)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  state.SetItemsProcessed(state.iterations() * kSamples);
}
void BM_NoisyAdd_Drawn_Accy_1Thread(benchmark::State& state) { runNoisy(state, true); }
void BM_NoisyAdd_FromMemory_Accy_1Thread(benchmark::State& state) { runNoisy(state, false); }

// The gradient's check, one row bit for bit (its updates summed in token
// order), and its bytes.
void finishEmbeddingGrad(benchmark::State& state, const AlignedFloats& out) {
  const std::vector<float>& grads = embeddingTable();
  const std::vector<int32_t>& tokens = embeddingTokens();
  const int32_t row = tokens[kTokens / 3];
  float want = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    if (tokens[t] == row) want += grads[t * kFeatures + 5];
  }
  if (!check(state, out[row * kFeatures + 5] == want, "wrong row sum")) return;
  state.SetBytesProcessed(state.iterations() * kTokens * kFeatures * 4);
}

// The gather's gradient: 2^20 rows of 64 added into a zeroed table at the
// tokens (scatterAdd; duplicates add up in token order).
void runEmbeddingGradAccy(benchmark::State& state, int threads,
                          tensor::ScatterSplit split = tensor::ScatterSplit::kColumns) {
  auto exe = compileFor({tensor::spec(tensor::DType::f32, {{"token", kTokens}, {"feature", kFeatures}}),
                         tensor::spec(tensor::DType::i32, {{"token", kTokens}})},
                        tensor::CpuOptions{.threads = threads, .scatter_split = split},
                        [](tensor::Builder& b, std::span<const tensor::Value> a) {
                          tensor::Value zeros =
                              b.constant(0, tensor::DType::f32).broadcast("vocab", kVocab).broadcast("feature", kFeatures);
                          return scatterAdd(zeros, "vocab", a[1], a[0]);
                        });
  if (!ok(state, exe, "compile")) return;
  const std::vector<float>& grads = embeddingTable();  // any 2^20 x 64 values
  const std::vector<int32_t>& tokens = embeddingTokens();
  const AlignedFloats out(kVocab * kFeatures);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(grads), accy::bytes(tokens)}, {accy::writableBytes(out.span())});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  finishEmbeddingGrad(state, out);
}

void BM_EmbeddingGrad_Accy_1Thread(benchmark::State& state) { runEmbeddingGradAccy(state, 1); }
void BM_EmbeddingGrad_Accy_2Threads(benchmark::State& state) { runEmbeddingGradAccy(state, 2); }
// The other split (CpuOptions::scatter_split): each thread the rows of its
// half of the table.
void BM_EmbeddingGrad_AccyRanges_2Threads(benchmark::State& state) {
  runEmbeddingGradAccy(state, 2, tensor::ScatterSplit::kRanges);
}

// The same gradient by hand (references.cc, scatterRowsAvx2), on 1 thread
// and on 2 split both ways that keep the token order per element: each
// thread its half of every row (Accy's split), or each thread the rows of
// its half of the table. Which split scales is a property of the machine
// (its caches' and prefetchers' handling of two cores writing neighbouring
// lines of one row), measured here before the compiler takes either.
void runEmbeddingGradHand(benchmark::State& state, int parts, ref::ScatterSplit split) {
  if (!ref::hasAvx2()) {
    state.SkipWithError(ACCY_BENCH_NOT_APPLICABLE "no AVX2 on this CPU");
    return;
  }
  const std::vector<float>& grads = embeddingTable();
  const std::vector<int32_t>& tokens = embeddingTokens();
  const AlignedFloats out(kVocab * kFeatures);
  ref::TwoThreads pool;
  for (auto _ : state) {
    state.PauseTiming();
    std::memset(out.begin(), 0, static_cast<size_t>(kVocab * kFeatures) * 4);
    state.ResumeTiming();
    auto part = [&](int p) {
      ref::scatterRowsAvx2(out.begin(), tokens.data(), grads.data(), kTokens, kFeatures, kVocab, p, parts, split);
    };
    if (parts == 1) {
      part(0);
    } else {
      pool.run(part);
    }
    benchmark::ClobberMemory();
  }
  finishEmbeddingGrad(state, out);
}
void BM_EmbeddingGrad_HandLoop_1Thread(benchmark::State& state) {
  runEmbeddingGradHand(state, 1, ref::ScatterSplit::kColumns);
}
void BM_EmbeddingGrad_HandColumns_2Threads(benchmark::State& state) {
  runEmbeddingGradHand(state, 2, ref::ScatterSplit::kColumns);
}
void BM_EmbeddingGrad_HandRanges_2Threads(benchmark::State& state) {
  runEmbeddingGradHand(state, 2, ref::ScatterSplit::kRanges);
}
void BM_EmbeddingGrad_PyTorch_1Thread(benchmark::State& state) {
  runTorchScript(state, "bench/torch_indexing.py --case=embedding_grad", 1);
}
void BM_EmbeddingGrad_PyTorch_2Threads(benchmark::State& state) {
  runTorchScript(state, "bench/torch_indexing.py --case=embedding_grad", 2);
}

// The layers of a small ResNet's first stage: f32[batch 32, c 64, h 56, w 56].
const std::vector<float>& featureMap() {
  static const std::vector<float> x = randomFloats(size_t{32} * 64 * 56 * 56, 23);
  return x;
}

tensor::Spec featureSpec() {
  return tensor::spec(tensor::DType::f32, {{"b", 32}, {"c", 64}, {"h", 56}, {"w", 56}});
}

// 2x2 max pooling, stride 2.
void runPoolAccy(benchmark::State& state, int threads) {
  auto exe = compileFor({featureSpec()}, threads, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0].window("h", "ph", 2, 2).window("w", "pw", 2, 2).max({"ph", "pw"});
  });
  if (!ok(state, exe, "compile")) return;
  std::vector<float> out(size_t{32} * 64 * 28 * 28);
  const std::vector<float>& input = featureMap();  // made before the clock starts
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(input)}, {accy::writableBytes(out)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  const float* x = input.data();
  if (!check(state, out[0] == std::max({x[0], x[1], x[56], x[57]}), "wrong maximum")) return;
}

void BM_MaxPool_Accy_1Thread(benchmark::State& state) { runPoolAccy(state, 1); }
void BM_MaxPool_Accy_2Threads(benchmark::State& state) { runPoolAccy(state, 2); }
void BM_MaxPool_PyTorch_1Thread(benchmark::State& state) { runTorchScript(state, "bench/torch_indexing.py --case=pool", 1); }
void BM_MaxPool_PyTorch_2Threads(benchmark::State& state) { runTorchScript(state, "bench/torch_indexing.py --case=pool", 2); }

// A 3x3 convolution, padding 1, 64 -> 64 channels: pad, two windows and a
// dot over (c, kh, kw), Accy choosing its schedule itself.
void runConvAccy(benchmark::State& state, int threads) {
  auto exe = compileFor({featureSpec(), tensor::spec(tensor::DType::f32, {{"o", 64}, {"c", 64}, {"kh", 3}, {"kw", 3}})},
                        threads, [](tensor::Builder&, std::span<const tensor::Value> a) {
                          tensor::Value x = a[0].pad("h", 1, 1).pad("w", 1, 1).window("h", "kh", 3).window("w", "kw", 3);
                          return dot(x, a[1], {"c", "kh", "kw"});
                        });
  if (!ok(state, exe, "compile")) return;
  static const std::vector<float> k = randomFloats(size_t{64} * 64 * 9, 24);
  std::vector<float> out(size_t{32} * 56 * 56 * 64);
  const std::vector<float>& input = featureMap();  // made before the clock starts
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(input), accy::bytes(k)}, {accy::writableBytes(out)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  // Outputs at a corner, an edge and the interior against a direct sum in
  // f64 (out is [b, h, w, o], the input [b, c, h, w], k [o, c, kh, kw]).
  for (const auto& [b, y, x, o] : {std::array<int64_t, 4>{0, 0, 0, 0}, std::array<int64_t, 4>{3, 0, 17, 5},
                                   std::array<int64_t, 4>{31, 30, 41, 63}, std::array<int64_t, 4>{7, 55, 55, 1}}) {
    double sum = 0;
    for (int64_t c = 0; c < 64; ++c) {
      for (int64_t dy = 0; dy < 3; ++dy) {
        for (int64_t dx = 0; dx < 3; ++dx) {
          const int64_t yy = y + dy - 1, xx = x + dx - 1;
          if (yy < 0 || yy >= 56 || xx < 0 || xx >= 56) continue;
          sum += double(input[((b * 64 + c) * 56 + yy) * 56 + xx]) * k[((o * 64 + c) * 3 + dy) * 3 + dx];
        }
      }
    }
    const float got = out[((b * 56 + y) * 56 + x) * 64 + o];
    if (!check(state, std::fabs(got - sum) <= 1e-3 * (1 + std::fabs(sum)), "wrong convolution output")) return;
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 32 * 64 * 56 * 56 * 64 * 9 * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// A separable 3x3 box blur of a 4096x4096 f32 image, zero outside it (pad
// and window, as a user writes it), Accy choosing its schedule itself,
// against Halide 14 with the schedules of its own blur example
// (bench/halide_blur.cc).
void runBlurAccy(benchmark::State& state, int threads) {
  constexpr int64_t kSide = 4096;
  auto exe = compileFor({tensor::spec(tensor::DType::f32, {{"y", kSide}, {"x", kSide}})}, threads,
                        [](tensor::Builder&, std::span<const tensor::Value> a) {
                          tensor::Value h = a[0].pad("x", 1, 1).window("x", "kx", 3).sum("kx") / 3.0f;
                          return h.pad("y", 1, 1).window("y", "ky", 3).sum("ky") / 3.0f;
                        });
  if (!ok(state, exe, "compile")) return;
  static const std::vector<float> image = randomFloats(size_t{kSide} * kSide, 25);
  std::vector<float> out(size_t{kSide} * kSide);
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(image)}, {accy::writableBytes(out)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  auto at = [&](int64_t y, int64_t x) {
    return y < 0 || x < 0 || y >= kSide || x >= kSide ? 0.0f : image[y * kSide + x];
  };
  for (const auto& [y, x] : {std::pair<int64_t, int64_t>{0, 0}, {17, 4095}, {4095, 1234}, {2048, 77}}) {
    float rows[3];
    for (int64_t d = -1; d <= 1; ++d) rows[d + 1] = (at(y + d, x - 1) + at(y + d, x) + at(y + d, x + 1)) / 3;
    const float want = (rows[0] + rows[1] + rows[2]) / 3;
    if (!check(state, std::fabs(out[y * kSide + x] - want) <= 1e-5f, "wrong blur output")) return;
  }
}

// Halide's blur binary: beside this one (both built in the same output tree
// by tools/bench.sh), else under bazel-bin, which a later build in another
// configuration (a fastbuild `bazel test`) may have pointed elsewhere.
std::string halideBlurPath() {
  std::error_code ec;
  const std::filesystem::path beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "halide_blur";
  if (!ec && std::filesystem::exists(beside, ec)) return beside.string();
  return "bazel-bin/bench/halide_blur";
}

void runBlurHalide(benchmark::State& state, int threads) {
  runReferenceCommand(state, halideBlurPath(), threads, "not found",
                      "Halide's blur is not built (libhalide14-0-dev: tools/setup.sh --bench)");
}

void BM_Blur_Accy_1Thread(benchmark::State& state) { runBlurAccy(state, 1); }
void BM_Blur_Accy_2Threads(benchmark::State& state) { runBlurAccy(state, 2); }
void BM_Blur_Halide_1Thread(benchmark::State& state) { runBlurHalide(state, 1); }
void BM_Blur_Halide_2Threads(benchmark::State& state) { runBlurHalide(state, 2); }

// One training step of the digits-sized convolutional network of issue
// "Real programs" (bench/torch_digits.py is the same in PyTorch): batch 256
// of 8x8 images, a 3x3 convolution to 16 channels with bias, ReLU, 2x2 max
// pooling, a dense layer to 10 classes with bias, softmax cross-entropy
// through take; the loss and the gradients of the four weights.
absl::StatusOr<tensor::Function> digitsStep() {
  using tensor::DType;
  const std::vector<tensor::Spec> specs = {
      tensor::spec(DType::f32, {{"b", 256}, {"c", 1}, {"h", 8}, {"w", 8}}), tensor::spec(DType::i32, {{"b", 256}}),
      tensor::spec(DType::f32, {{"o", 16}, {"c", 1}, {"kh", 3}, {"kw", 3}}), tensor::spec(DType::f32, {{"o", 16}}),
      tensor::spec(DType::f32, {{"h", 4}, {"w", 4}, {"o", 16}, {"k", 10}}), tensor::spec(DType::f32, {{"k", 10}})};
  auto loss = tensor::Function::define("digits", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    const tensor::Value x = v[0].pad("h", 1, 1).pad("w", 1, 1).window("h", "kh", 3).window("w", "kw", 3);
    const tensor::Value h = (dot(x, v[2], {"c", "kh", "kw"}) + v[3]).max(0.0);
    const tensor::Value pooled = h.window("h", "ph", 2, 2).window("w", "pw", 2, 2).max({"ph", "pw"});
    const tensor::Value logits = dot(pooled, v[4], {"h", "w", "o"}) + v[5];
    const tensor::Value top = logits.max("k");
    const tensor::Value lse = (logits - top).exp().sum("k").log() + top;
    return (lse - take(logits, "k", v[1])).mean("b");
  });
  if (!loss.ok()) return loss.status();
  return loss->valueAndGrad({.wrt = {2, 3, 4, 5}});
}

void runDigitsAccy(benchmark::State& state, int threads) {
  auto step = digitsStep();
  if (!ok(state, step, "valueAndGrad")) return;
  auto exe = tensor::CpuExecutable::compile(step->program(), {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  std::vector<float> x = randomFloats(256 * 64, 31), w1 = randomFloats(16 * 9, 32), b1(16, 0.0f),
                     w2 = randomFloats(256 * 10, 33), b2(10, 0.0f);
  for (float& v : x) v = (v + 1) * 8;  // pixel values 0..16, as the digits data
  for (float& v : w1) v *= 0.3f;
  for (float& v : w2) v *= 0.1f;
  std::vector<int32_t> labels(256);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>((i * 7) % 10);
  float loss = 0;
  std::vector<float> g1(w1.size()), gb1(16), g2(w2.size()), gb2(10);
  const std::vector<std::span<const std::byte>> in = {accy::bytes(x),  accy::bytes(labels), accy::bytes(w1),
                                                      accy::bytes(b1), accy::bytes(w2),     accy::bytes(b2)};
  for (auto _ : state) {
    auto st = exe->launch(in, {accy::writableBytes(std::span(&loss, 1)), accy::writableBytes(g1),
                               accy::writableBytes(gb1), accy::writableBytes(g2), accy::writableBytes(gb2)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  // Once: every output against the reference evaluator.
  matchesEvaluator(state, step->program(), in, {&loss, g1.data(), gb1.data(), g2.data(), gb2.data()}, 1e-3, 1e-5);
}

// One epoch of examples/digits (45 SGD steps of 32 images drawn from the
// 1,437 training images, one program), against the same epoch in PyTorch
// (bench/torch_digits_epoch.py).
void runDigitsEpochAccy(benchmark::State& state, int threads) {
  absl::StatusOr<digits::Split> data = digits::load();
  if (!data.ok()) {
    state.SkipWithError((std::string(ACCY_BENCH_NOT_APPLICABLE) + std::string(data.status().message())).c_str());
    return;
  }
  digits::Options o;
  auto p = digits::epoch(o, data->train);
  if (!ok(state, p, "define")) return;
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  digits::Weights w = digits::initial(o), next = w;
  std::vector<float> losses(o.steps);
  uint32_t e = 0;
  for (auto _ : state) {
    const uint32_t key[] = {2026, e++};
    const digits::EpochBuffers buffers = digits::epochBuffers(*data, w, key, next, losses);
    if (!ok(state, exe->launch(buffers.inputs, buffers.outputs), "launch")) return;
    std::swap(w, next);
  }
  if (!check(state, std::isfinite(losses.back()) && losses.back() < 2.3, "the loss did not fall")) return;
}
void BM_DigitsEpoch_Accy_1Thread(benchmark::State& state) { runDigitsEpochAccy(state, 1); }
void BM_DigitsEpoch_Accy_2Threads(benchmark::State& state) { runDigitsEpochAccy(state, 2); }
void BM_DigitsEpoch_PyTorch_1Thread(benchmark::State& state) { runTorchScript(state, "bench/torch_digits_epoch.py", 1); }
void BM_DigitsEpoch_PyTorch_2Threads(benchmark::State& state) { runTorchScript(state, "bench/torch_digits_epoch.py", 2); }

void BM_DigitsStep_Accy_1Thread(benchmark::State& state) { runDigitsAccy(state, 1); }
void BM_DigitsStep_Accy_2Threads(benchmark::State& state) { runDigitsAccy(state, 2); }
void BM_DigitsStep_PyTorch_1Thread(benchmark::State& state) { runTorchScript(state, "bench/torch_digits.py", 1); }
void BM_DigitsStep_PyTorch_2Threads(benchmark::State& state) { runTorchScript(state, "bench/torch_digits.py", 2); }

// The convolution's backward pass: the gradients of the input and of the
// weights given the output's (the program grad() derives from
// sum(conv(x, k) * dy)).
void runConvGradAccy(benchmark::State& state, int threads) {
  const std::vector<tensor::Spec> specs = {featureSpec(),
                                           tensor::spec(tensor::DType::f32, {{"o", 64}, {"c", 64}, {"kh", 3}, {"kw", 3}}),
                                           tensor::spec(tensor::DType::f32, {{"b", 32}, {"h", 56}, {"w", 56}, {"o", 64}})};
  auto f = tensor::Function::define("conv", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    tensor::Value x = a[0].pad("h", 1, 1).pad("w", 1, 1).window("h", "kh", 3).window("w", "kw", 3);
    return (dot(x, a[1], {"c", "kh", "kw"}) * a[2]).sum({"b", "h", "w", "o"});
  });
  if (!ok(state, f, "define")) return;
  auto g = f->grad({.wrt = {0, 1}});
  if (!ok(state, g, "grad")) return;
  auto exe = tensor::CpuExecutable::compile(g->program(), {.threads = threads});
  if (!ok(state, exe, "compile")) return;
  const std::vector<float>& input = featureMap();
  static const std::vector<float> k = randomFloats(size_t{64} * 64 * 9, 24);
  static const std::vector<float> dy = randomFloats(size_t{32} * 56 * 56 * 64, 26);
  std::vector<float> dx(input.size()), dk(k.size());
  // One launch before the clock starts, as the reference's script warms up
  // (its first launch touches the 27 MiB of scratch for the first time).
  if (!ok(state,
          exe->launch({accy::bytes(input), accy::bytes(k), accy::bytes(dy)}, {accy::writableBytes(dx), accy::writableBytes(dk)}),
          "launch")) {
    return;
  }
  for (auto _ : state) {
    auto st = exe->launch({accy::bytes(input), accy::bytes(k), accy::bytes(dy)},
                          {accy::writableBytes(dx), accy::writableBytes(dk)});
    benchmark::ClobberMemory();
    if (!ok(state, st, "launch")) return;
  }
  // A few elements of each against direct sums in f64.
  auto x_at = [&](int64_t b, int64_t c, int64_t y, int64_t x) {
    return y < 0 || x < 0 || y >= 56 || x >= 56 ? 0.0 : double(input[((b * 64 + c) * 56 + y) * 56 + x]);
  };
  auto dy_at = [&](int64_t b, int64_t y, int64_t x, int64_t o) {
    return y < 0 || x < 0 || y >= 56 || x >= 56 ? 0.0 : double(dy[((b * 56 + y) * 56 + x) * 64 + o]);
  };
  for (const auto& [b, c, y, x] : {std::array<int64_t, 4>{0, 0, 0, 0}, std::array<int64_t, 4>{5, 9, 31, 55}}) {
    double want = 0;
    for (int64_t o = 0; o < 64; ++o) {
      for (int64_t kh = 0; kh < 3; ++kh) {
        for (int64_t kw = 0; kw < 3; ++kw) want += dy_at(b, y - kh + 1, x - kw + 1, o) * k[((o * 64 + c) * 3 + kh) * 3 + kw];
      }
    }
    const float got = dx[((b * 64 + c) * 56 + y) * 56 + x];
    if (!check(state, std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want)), "wrong input gradient")) return;
  }
  for (const auto& [o, c, kh, kw] : {std::array<int64_t, 4>{0, 0, 0, 0}, std::array<int64_t, 4>{63, 17, 2, 1}}) {
    double want = 0;
    for (int64_t b = 0; b < 32; ++b) {
      for (int64_t y = 0; y < 56; ++y) {
        for (int64_t x = 0; x < 56; ++x) want += dy_at(b, y, x, o) * x_at(b, c, y + kh - 1, x + kw - 1);
      }
    }
    const float got = dk[((o * 64 + c) * 3 + kh) * 3 + kw];
    if (!check(state, std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want)), "wrong weight gradient")) return;
  }
}

void BM_Conv3x3Grad_Accy_1Thread(benchmark::State& state) { runConvGradAccy(state, 1); }
void BM_Conv3x3Grad_Accy_2Threads(benchmark::State& state) { runConvGradAccy(state, 2); }
void BM_Conv3x3Grad_PyTorch_1Thread(benchmark::State& state) {
  runTorchScript(state, "bench/torch_indexing.py --case=conv_grad --reps=5", 1);
}
void BM_Conv3x3Grad_PyTorch_2Threads(benchmark::State& state) {
  runTorchScript(state, "bench/torch_indexing.py --case=conv_grad --reps=5", 2);
}

void BM_Conv3x3_Accy_1Thread(benchmark::State& state) { runConvAccy(state, 1); }
void BM_Conv3x3_Accy_2Threads(benchmark::State& state) { runConvAccy(state, 2); }
void BM_Conv3x3_PyTorch_1Thread(benchmark::State& state) { runTorchScript(state, "bench/torch_indexing.py --case=conv", 1); }
void BM_Conv3x3_PyTorch_2Threads(benchmark::State& state) { runTorchScript(state, "bench/torch_indexing.py --case=conv", 2); }

BENCHMARK(BM_SinAffine_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NBody_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NBody_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NBody_NumPy_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_NBody_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_NBody_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Sampler_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_Sampler_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Loop_Oscillator_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop_Oscillator_AccyStepByStep_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop_Oscillator_AccyChunks_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop_Oscillator_AccyStepByStepStopCheck_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop_Oscillator_BodyLaunchedPerStep_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Loop_Oscillator_CppLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_Accy_AllThreads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_Alternating_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_SinAffine_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_PlainLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinAffine_Accy_1Thread_CachesEmptied)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Clock_AfterSinBursts)->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_Clock_AfterEigenBursts)->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_Clock_AfterSleep)->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_SinLargePhase_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinLargePhase_Eigen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SinLargePhase_PlainLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Avx512Intrinsics_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Avx2Intrinsics_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Compensated_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Compensated_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Avx512Intrinsics_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Avx2Intrinsics_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sum_Alternating_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Sum_Alternating_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Affine_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Affine_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Affine_Avx512Intrinsics)->Apply(affineArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Affine_Avx2Intrinsics)->Apply(affineArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Affine_Eigen_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Affine_Alternating_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Affine_Alternating_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Matmul1024_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul1024_Eigen_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul1024_OpenBLAS_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Product_Accy)->Apply(productArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Product_OpenBLAS)->Apply(productArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ProductTanh_Accy)->Apply(epilogueArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ProductTanh_OpenBLASThenEigen)->Apply(epilogueArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PerceptronStep_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PerceptronStep_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PerceptronStep_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_PerceptronStep_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Chain4096_Accy_Fused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Chain4096_Accy_OneKernel)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Chain4096_Accy_Unfused)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Embedding_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Embedding_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Embedding_Memcpy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TakeElements_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TakeElements_CppLoop)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TransposeExpF64_Accy_1Thread)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_TransposeExpF64_CppLoop)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Embedding_HandLoop_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Embedding_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Embedding_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Uniform_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Uniform_NumPy_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Uniform_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Normal_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Normal_NumPy_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Normal_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_NoisyAdd_Drawn_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NoisyAdd_FromMemory_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_AccyRanges_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_HandLoop_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_HandColumns_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_HandRanges_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_EmbeddingGrad_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_EmbeddingGrad_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_MaxPool_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MaxPool_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MaxPool_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_MaxPool_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Conv3x3_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Conv3x3_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Conv3x3Grad_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3Grad_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Conv3x3Grad_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Conv3x3Grad_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_DigitsStep_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DigitsStep_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DigitsStep_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_DigitsStep_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_DigitsEpoch_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DigitsEpoch_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DigitsEpoch_PyTorch_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_DigitsEpoch_PyTorch_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Blur_Accy_1Thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Blur_Accy_2Threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Blur_Halide_1Thread)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Blur_Halide_2Threads)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
BENCHMARK(BM_Tone_Compile)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Tone_Launch)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_ToneValueAndGrad_Launch)->Unit(benchmark::kNanosecond);

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  return accy::bench::runBenchmarks(argc, argv,
                                    {{"openblas_kernel", openblas_get_corename()}, {"openblas_config", openblas_get_config()}});
}
