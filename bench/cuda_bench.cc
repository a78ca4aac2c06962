// CUDA benchmarks for a lent GPU machine (bench/gpu/run.sh), side by side in
// one run, each timed with CUDA events around kernels on device-resident
// buffers (no host copies in the timed region):
//   - a device-to-device copy (cuMemcpyDtoDAsync): the bandwidth reference;
//   - `y = 2x + b` and `sum` (plain and compensated) over 2^26 f32,
//     compiled by Accy to PTX;
//   - `dot` 4096^3 in f32 (exact: FMA on CUDA cores, tiled through shared
//     memory) and in tf32 (tensor cores), against cuBLAS's SGEMM in its
//     default math mode (the f32 baseline), pedantic, and with TF32
//     tensor-op math.
// Accy's programs are compiled and loaded by the CUDA backend and launched
// through it (CudaProgram::enqueueOnDevice). Every CUresult and cuBLAS
// status is checked: a failure ends that benchmark with the call named,
// and the binary exits 1. Every output is checked once against a
// double-precision computation on the host. cuBLAS is linked by this
// benchmark only. Without a GPU every benchmark ends with the reason.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>

#include <cmath>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_program.h"
#include "bench/bench_util.h"
#include "compiler/codegen/arithmetic_mode.h"

namespace tensor = accy::tensor;
namespace cuda = accy::cuda;
using accy::bench::check;
using accy::bench::ok;

namespace {

constexpr int64_t kN = int64_t{1} << 26;  // 256 MiB of f32
constexpr int64_t kM = 4096;              // dot is kM^3

struct Gpu {
  std::unique_ptr<accy::backends::Backend> backend;
  std::shared_ptr<const cuda::CudaDevice> device;
  std::string error;  // why there is no usable device
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;
  cublasHandle_t blas = nullptr;
};

std::string cuError(const char* call, CUresult r) { return std::string(call) + " failed with CUresult " + std::to_string(r); }

Gpu& gpu() {
  static Gpu g = [] {
    Gpu g;
    g.backend = accy::backends::makeCudaBackend({});
    g.device = accy::backends::cudaDevice(*g.backend);
    if (g.device == nullptr) {
      g.error = "no CUDA device: " + g.backend->info().unavailable_reason;
      return g;
    }
    const cuda::CudaFunctions& cu = g.device->cu();
    CUresult r;
    if ((r = cu.cuCtxSetCurrent(g.device->context())) != CUDA_SUCCESS) g.error = cuError("cuCtxSetCurrent", r);
    else if ((r = cu.cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) g.error = cuError("cuStreamCreate", r);
    else if ((r = cu.cuEventCreate(&g.start, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) g.error = cuError("cuEventCreate", r);
    else if ((r = cu.cuEventCreate(&g.stop, CU_EVENT_DEFAULT)) != CUDA_SUCCESS) g.error = cuError("cuEventCreate", r);
    else if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS) g.error = "cublasCreate failed";
    else if (cublasSetStream(g.blas, reinterpret_cast<cudaStream_t>(g.stream)) != CUBLAS_STATUS_SUCCESS) {
      g.error = "cublasSetStream failed";
    }
    return g;
  }();
  return g;
}

bool ready(benchmark::State& state) { return check(state, gpu().error.empty(), gpu().error); }

// Ends the benchmark naming `call` when `r` is not CUDA_SUCCESS.
bool cuOk(benchmark::State& state, CUresult r, const char* call) { return check(state, r == CUDA_SUCCESS, cuError(call, r)); }
bool blasOk(benchmark::State& state, cublasStatus_t s, const char* call) {
  return check(state, s == CUBLAS_STATUS_SUCCESS, std::string(call) + " failed with cublasStatus " + std::to_string(s));
}

// A deterministic input pattern in [-1, 1), not constant, so a wrong index
// shows in the check.
float pattern(int64_t i, int64_t salt) { return static_cast<float>(((i * 7919 + salt * 104729) % 2000) - 1000) / 1000.0f; }

// Device memory freed when it goes.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  ~DeviceBuffer() {
    if (ptr != 0) gpu().device->cu().cuMemFree(ptr);
  }
};

// Allocates `bytes` on the device and fills them with `host`, or zeros.
bool upload(benchmark::State& state, DeviceBuffer& b, int64_t bytes, const std::vector<float>* host) {
  const cuda::CudaFunctions& cu = gpu().device->cu();
  if (!cuOk(state, cu.cuMemAlloc(&b.ptr, static_cast<size_t>(std::max<int64_t>(bytes, 4))), "cuMemAlloc")) return false;
  const std::vector<float> zeros(host == nullptr ? static_cast<size_t>(bytes + 3) / 4 : 0, 0.0f);
  if (host == nullptr) host = &zeros;
  if (bytes == 0) return true;
  return cuOk(state, cu.cuMemcpyHtoDAsync(b.ptr, host->data(), static_cast<size_t>(bytes), gpu().stream), "cuMemcpyHtoDAsync") &&
         cuOk(state, cu.cuStreamSynchronize(gpu().stream), "cuStreamSynchronize");
}

bool download(benchmark::State& state, const DeviceBuffer& b, std::vector<float>& host) {
  const cuda::CudaFunctions& cu = gpu().device->cu();
  return cuOk(state, cu.cuMemcpyDtoHAsync(host.data(), b.ptr, host.size() * 4, gpu().stream), "cuMemcpyDtoHAsync") &&
         cuOk(state, cu.cuStreamSynchronize(gpu().stream), "cuStreamSynchronize");
}

// Times `body` (which enqueues work on the stream and returns whether it
// could) with events; manual time. One untimed warm-up run first.
template <typename F>
bool timed(benchmark::State& state, F body) {
  const cuda::CudaFunctions& cu = gpu().device->cu();
  if (!body() || !cuOk(state, cu.cuStreamSynchronize(gpu().stream), "cuStreamSynchronize")) return false;
  for (auto _ : state) {
    if (!cuOk(state, cu.cuEventRecord(gpu().start, gpu().stream), "cuEventRecord")) return false;
    if (!body()) return false;
    if (!cuOk(state, cu.cuEventRecord(gpu().stop, gpu().stream), "cuEventRecord")) return false;
    if (!cuOk(state, cu.cuEventSynchronize(gpu().stop), "cuEventSynchronize")) return false;
    float ms = 0;
    if (!cuOk(state, cu.cuEventElapsedTime(&ms, gpu().start, gpu().stop), "cuEventElapsedTime")) return false;
    state.SetIterationTime(ms / 1e3);
  }
  return true;
}

// Compiles `fn` through the CUDA backend in `mode`, loads it, puts its
// inputs (`inputs`, in order) and every other buffer of its plan on the
// device, times one launch of all its kernels, copies output 0 back into
// `*result`.
template <typename F>
bool runAccy(benchmark::State& state, const std::vector<tensor::Spec>& specs, F fn,
             const std::vector<std::vector<float>>& inputs, std::vector<float>* result,
             accy::codegen::ArithmeticMode mode = accy::codegen::ArithmeticMode::kExact) {
  if (!ready(state)) return false;
  auto p = tensor::define("bench", specs, fn);
  if (!ok(state, p, "define")) return false;
  auto exe = gpu().backend->compile(*p, "ptx", accy::backends::CompileOptions{mode});
  if (!ok(state, exe, "compile")) return false;
  auto loaded = gpu().backend->load(*exe);
  if (!ok(state, loaded, "load")) return false;
  const auto* program = dynamic_cast<const cuda::CudaProgram*>(loaded->get());
  if (!check(state, program != nullptr, "the CUDA backend loaded something other than a CudaProgram")) return false;
  const auto& plans = exe->artifact_plan.buffers;
  std::vector<DeviceBuffer> buffers(plans.size());
  std::vector<CUdeviceptr> addresses;
  int output_buffer = -1;
  for (size_t b = 0; b < plans.size(); ++b) {
    const bool input = plans[b].role == accy::choir::BufferRole::kInput;
    if (!upload(state, buffers[b], plans[b].bytes, input ? &inputs.at(plans[b].io_index) : nullptr)) return false;
    if (plans[b].role == accy::choir::BufferRole::kOutput && plans[b].io_index == 0) output_buffer = static_cast<int>(b);
    addresses.push_back(buffers[b].ptr);
  }
  if (!check(state, output_buffer >= 0, "the plan has no output 0")) return false;
  if (!timed(state, [&] { return ok(state, program->enqueueOnDevice(addresses, gpu().stream), "launch"); })) return false;
  result->assign(p->outputSpecs()[0].elementCount(), NAN);
  return download(state, buffers[output_buffer], *result);
}

void BM_Cuda_Copy(benchmark::State& state) {
  if (!ready(state)) return;
  const cuda::CudaFunctions& cu = gpu().device->cu();
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = pattern(i, 1);
  DeviceBuffer a, b;
  if (!upload(state, a, kN * 4, &x) || !upload(state, b, kN * 4, nullptr)) return;
  if (!timed(state, [&] { return cuOk(state, cu.cuMemcpyDtoDAsync(b.ptr, a.ptr, kN * 4, gpu().stream), "cuMemcpyDtoDAsync"); })) return;
  std::vector<float> y(kN);
  if (!download(state, b, y)) return;
  if (!check(state, y == x, "the copy differs from its source")) return;
  state.SetBytesProcessed(state.iterations() * kN * 8);  // read + write
}

void BM_Cuda_Elementwise(benchmark::State& state) {
  std::vector<float> x(kN), b(kN), y;
  for (int64_t i = 0; i < kN; ++i) x[i] = pattern(i, 2), b[i] = pattern(i, 3);
  if (!runAccy(
          state, {tensor::spec(tensor::DType::f32, {{"i", kN}}), tensor::spec(tensor::DType::f32, {{"i", kN}})},
          [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2.0 + a[1]; }, {x, b}, &y)) {
    return;
  }
  for (int64_t i = 0; i < kN; ++i) {
    if (y[i] != 2.0f * x[i] + b[i]) {
      check(state, false, "wrong y[" + std::to_string(i) + "] = " + std::to_string(y[i]));
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * kN * 12);
}

// `sum` over 2^26 f32, plain or compensated (tensor::SumOptions).
void sumRow(benchmark::State& state, bool compensated) {
  std::vector<float> x(kN), s;
  double exact = 0, magnitude = 0;
  for (int64_t i = 0; i < kN; ++i) {
    x[i] = pattern(i, 4);
    exact += x[i];
    magnitude += std::fabs(x[i]);
  }
  if (!runAccy(
          state, {tensor::spec(tensor::DType::f32, {{"i", kN}})},
          [compensated](tensor::Builder&, std::span<const tensor::Value> a) {
            return a[0].sum("i", tensor::SumOptions{.compensated = compensated});
          },
          {x}, &s)) {
    return;
  }
  if (!check(state, std::fabs(s[0] - exact) <= magnitude * 1e-6 + 1e-3,
             "wrong sum " + std::to_string(s[0]) + ", expected " + std::to_string(exact))) {
    return;
  }
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

void BM_Cuda_Sum(benchmark::State& state) { sumRow(state, false); }
void BM_Cuda_Sum_Compensated(benchmark::State& state) { sumRow(state, true); }

std::vector<tensor::Spec> dotSpecs() {
  return {tensor::spec(tensor::DType::f32, {{"i", kM}, {"k", kM}}), tensor::spec(tensor::DType::f32, {{"k", kM}, {"j", kM}})};
}

const std::vector<float>& dotA() {
  static const std::vector<float> a = [] {
    std::vector<float> v(kM * kM);
    for (int64_t i = 0; i < kM * kM; ++i) v[i] = pattern(i, 5);
    return v;
  }();
  return a;
}
const std::vector<float>& dotB() {
  static const std::vector<float> b = [] {
    std::vector<float> v(kM * kM);
    for (int64_t i = 0; i < kM * kM; ++i) v[i] = pattern(i, 6);
    return v;
  }();
  return b;
}

// 64 entries of the row-major c = a b against double-precision dot
// products, within `relative` of the sum of magnitudes (2^-9 and more for
// tf32's 10-bit operands, f32 accumulation otherwise).
bool checkDot(benchmark::State& state, const std::vector<float>& c, double relative) {
  for (int64_t s = 0; s < 64; ++s) {
    const int64_t i = (s * 397) % kM, j = (s * 631 + 17) % kM;
    double want = 0, magnitude = 0;
    for (int64_t p = 0; p < kM; ++p) {
      want += double(dotA()[i * kM + p]) * dotB()[p * kM + j];
      magnitude += std::fabs(double(dotA()[i * kM + p]) * dotB()[p * kM + j]);
    }
    if (!(std::fabs(c[i * kM + j] - want) <= magnitude * relative)) {
      return check(state, false, "wrong c[" + std::to_string(i) + "][" + std::to_string(j) + "] = " +
                                     std::to_string(c[i * kM + j]) + ", expected " + std::to_string(want));
    }
  }
  return true;
}

void setFlops(benchmark::State& state) {
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * kM * kM * kM * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}

void accyDot(benchmark::State& state, accy::codegen::ArithmeticMode mode, double relative) {
  std::vector<float> c;
  if (!runAccy(
          state, dotSpecs(), [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].dot(a[1], "k"); },
          {dotA(), dotB()}, &c, mode)) {
    return;
  }
  if (!checkDot(state, c, relative)) return;
  setFlops(state);
}

void BM_Cuda_Dot_F32(benchmark::State& state) { accyDot(state, accy::codegen::ArithmeticMode::kExact, 1e-5); }
void BM_Cuda_Dot_Tf32(benchmark::State& state) { accyDot(state, accy::codegen::ArithmeticMode::kTf32, 4e-3); }

// Row-major C = A B as column-major C^T = B^T A^T.
void cublasDot(benchmark::State& state, cublasMath_t math, double relative) {
  if (!ready(state)) return;
  DeviceBuffer a, b, c;
  if (!upload(state, a, kM * kM * 4, &dotA()) || !upload(state, b, kM * kM * 4, &dotB()) ||
      !upload(state, c, kM * kM * 4, nullptr)) {
    return;
  }
  if (!blasOk(state, cublasSetMathMode(gpu().blas, math), "cublasSetMathMode")) return;
  const float one = 1, zero = 0;
  if (!timed(state, [&] {
        return blasOk(state,
                      cublasSgemm(gpu().blas, CUBLAS_OP_N, CUBLAS_OP_N, kM, kM, kM, &one,
                                  reinterpret_cast<const float*>(b.ptr), kM, reinterpret_cast<const float*>(a.ptr), kM,
                                  &zero, reinterpret_cast<float*>(c.ptr), kM),
                      "cublasSgemm");
      })) {
    return;
  }
  std::vector<float> out(kM * kM);
  if (!download(state, c, out) || !checkDot(state, out, relative)) return;
  setFlops(state);
}

// The f32 baseline: cuBLAS as an application gets it by default.
void BM_Cublas_Sgemm_F32(benchmark::State& state) { cublasDot(state, CUBLAS_DEFAULT_MATH, 1e-5); }
void BM_Cublas_Sgemm_F32Pedantic(benchmark::State& state) { cublasDot(state, CUBLAS_PEDANTIC_MATH, 1e-5); }
void BM_Cublas_Sgemm_Tf32(benchmark::State& state) { cublasDot(state, CUBLAS_TF32_TENSOR_OP_MATH, 4e-3); }

}  // namespace

BENCHMARK(BM_Cuda_Copy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Elementwise)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Sum)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Sum_Compensated)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Dot_F32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cublas_Sgemm_F32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cublas_Sgemm_F32Pedantic)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cuda_Dot_Tf32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cublas_Sgemm_Tf32)->UseManualTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  const std::string device = gpu().error.empty() ? accy::backends::cudaDeviceName(*gpu().backend) : gpu().error;
  return accy::bench::runBenchmarks(argc, argv, {{"cuda_device", device}});
}
