// CUDA benchmarks for a lent GPU machine (bench/gpu/run.sh), side by side in
// one run, each timed with CUDA events around kernels on device-resident
// buffers (no host copies in the timed region):
//   - a device-to-device copy (cuMemcpyDtoDAsync): the bandwidth reference;
//   - `y = 2x + b` and `sum` over 2^26 f32, compiled by Accy to PTX;
//   - `dot` 4096^3 in f32 (exact: FMA on CUDA cores, tiled through shared
//     memory) and in tf32 (tensor cores), against cuBLAS's SGEMM with and
//     without TF32 tensor-op math.
// cuBLAS is linked by this benchmark only. Without a GPU every benchmark
// reports the reason and skips.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>

#include <string>
#include <vector>

#include "accy/accy.h"
#include "backends/cuda/cuda_device.h"
#include "compiler/codegen/ptx/compile.h"

namespace tensor = accy::tensor;
namespace cuda = accy::cuda;

namespace {

constexpr int64_t kN = int64_t{1} << 26;  // 256 MiB of f32
constexpr int64_t kM = 4096;              // dot is kM^3

struct Gpu {
  std::shared_ptr<cuda::CudaDevice> device;
  std::string error;
  CUstream stream = nullptr;
  CUevent start = nullptr, stop = nullptr;
  cublasHandle_t blas = nullptr;
};

Gpu& gpu() {
  static Gpu g = [] {
    Gpu g;
    auto d = cuda::CudaDevice::open();
    if (!d.ok()) {
      g.error = std::string(d.status().message());
      return g;
    }
    g.device = *d;
    const cuda::CudaFunctions& cu = g.device->cu();
    cu.cuCtxSetCurrent(g.device->context());
    cu.cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING);
    cu.cuEventCreate(&g.start, CU_EVENT_DEFAULT);
    cu.cuEventCreate(&g.stop, CU_EVENT_DEFAULT);
    if (cublasCreate(&g.blas) != CUBLAS_STATUS_SUCCESS) g.error = "cublasCreate failed";
    cublasSetStream(g.blas, reinterpret_cast<cudaStream_t>(g.stream));
    return g;
  }();
  return g;
}

bool ready(benchmark::State& state) {
  if (gpu().device == nullptr || !gpu().error.empty()) {
    state.SkipWithError(("no CUDA device: " + gpu().error).c_str());
    return false;
  }
  return true;
}

CUdeviceptr allocate(int64_t bytes, float fill) {
  const cuda::CudaFunctions& cu = gpu().device->cu();
  CUdeviceptr p = 0;
  cu.cuMemAlloc(&p, static_cast<size_t>(bytes));
  std::vector<float> host(bytes / 4, fill);
  cu.cuMemcpyHtoDAsync(p, host.data(), static_cast<size_t>(bytes), gpu().stream);
  cu.cuStreamSynchronize(gpu().stream);
  return p;
}

// Times `body` (which enqueues work on the stream) with events; manual time.
template <typename F>
void timed(benchmark::State& state, F body) {
  const cuda::CudaFunctions& cu = gpu().device->cu();
  body();  // warm-up (JIT, caches)
  cu.cuStreamSynchronize(gpu().stream);
  for (auto _ : state) {
    cu.cuEventRecord(gpu().start, gpu().stream);
    body();
    cu.cuEventRecord(gpu().stop, gpu().stream);
    cu.cuEventSynchronize(gpu().stop);
    float ms = 0;
    cu.cuEventElapsedTime(&ms, gpu().start, gpu().stop);
    state.SetIterationTime(ms / 1e3);
  }
}

// Compiles `fn` to PTX for the device, loads it, allocates every buffer of
// its plan on the device, and times one launch of all its kernels.
template <typename F>
void runAccy(benchmark::State& state, std::vector<tensor::Spec> specs, F fn, int64_t bytes, double flops,
             accy::ptx::ArithmeticMode mode = accy::ptx::ArithmeticMode::kExact) {
  if (!ready(state)) return;
  const cuda::CudaFunctions& cu = gpu().device->cu();
  auto p = tensor::define("bench", specs, fn);
  accy::ptx::TargetInfo target;
  const cuda::DeviceLimits& l = gpu().device->limits();
  target.sm = l.sm;
  target.ptx_version = std::max(target.ptx_version, cuda::minPtxVersionForSm(l.sm));
  target.max_threads_per_block = l.max_threads_per_block;
  target.max_grid_x = l.max_grid_x;
  target.warp_size = l.warp_size;
  target.mode = mode;
  auto exe = accy::ptx::compileProgram(*p, target);
  if (!exe.ok()) {
    state.SkipWithError(std::string(exe.status().message()).c_str());
    return;
  }
  std::string text(exe->code.begin(), exe->code.end());
  CUmodule module = nullptr;
  if (cu.cuModuleLoadDataEx(&module, text.c_str(), 0, nullptr, nullptr) != CUDA_SUCCESS) {
    state.SkipWithError("cuModuleLoadDataEx refused the module");
    return;
  }
  std::vector<CUdeviceptr> buffers;
  for (const auto& b : exe->artifact_plan.buffers) buffers.push_back(allocate(std::max<int64_t>(b.bytes, 4), 0.5f));
  std::vector<void*> params;
  for (CUdeviceptr& b : buffers) params.push_back(&b);
  std::vector<CUfunction> functions;
  for (const auto& step : exe->launch_plan.steps) {
    CUfunction f = nullptr;
    cu.cuModuleGetFunction(&f, module, step.kernel.c_str());
    functions.push_back(f);
  }
  timed(state, [&] {
    for (size_t k = 0; k < functions.size(); ++k) {
      const auto& step = exe->launch_plan.steps[k];
      cu.cuLaunchKernel(functions[k], static_cast<unsigned>(step.parallel_extent), 1, 1,
                        static_cast<unsigned>(step.group_size), 1, 1, 0, gpu().stream, params.data(), nullptr);
    }
  });
  state.SetBytesProcessed(state.iterations() * bytes);
  if (flops > 0) state.counters["TFLOP/s"] = benchmark::Counter(flops * state.iterations() / 1e12, benchmark::Counter::kIsRate);
  for (CUdeviceptr b : buffers) cu.cuMemFree(b);
  cu.cuModuleUnload(module);
}

void BM_Cuda_Copy(benchmark::State& state) {
  if (!ready(state)) return;
  const cuda::CudaFunctions& cu = gpu().device->cu();
  CUdeviceptr a = allocate(kN * 4, 1), b = allocate(kN * 4, 0);
  timed(state, [&] { cu.cuMemcpyDtoDAsync(b, a, kN * 4, gpu().stream); });
  state.SetBytesProcessed(state.iterations() * kN * 8);  // read + write
  cu.cuMemFree(a);
  cu.cuMemFree(b);
}

void BM_Cuda_Elementwise(benchmark::State& state) {
  runAccy(
      state, {tensor::spec(tensor::DType::f32, {{"i", kN}}), tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2.0 + a[1]; }, kN * 12, 2.0 * kN);
}

void BM_Cuda_Sum(benchmark::State& state) {
  runAccy(
      state, {tensor::spec(tensor::DType::f32, {{"i", kN}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("i"); }, kN * 4, double(kN));
}

std::vector<tensor::Spec> dotSpecs() {
  return {tensor::spec(tensor::DType::f32, {{"i", kM}, {"k", kM}}), tensor::spec(tensor::DType::f32, {{"k", kM}, {"j", kM}})};
}

void BM_Cuda_Dot_F32(benchmark::State& state) {
  runAccy(
      state, dotSpecs(), [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].dot(a[1], "k"); },
      kM * kM * 12, 2.0 * kM * kM * kM);
}

void BM_Cuda_Dot_Tf32(benchmark::State& state) {
  runAccy(
      state, dotSpecs(), [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].dot(a[1], "k"); },
      kM * kM * 12, 2.0 * kM * kM * kM, accy::ptx::ArithmeticMode::kTf32);
}

// Row-major C = A B as column-major C^T = B^T A^T.
void cublasDot(benchmark::State& state, cublasMath_t math) {
  if (!ready(state)) return;
  CUdeviceptr a = allocate(kM * kM * 4, 0.5f), b = allocate(kM * kM * 4, 0.5f), c = allocate(kM * kM * 4, 0);
  cublasSetMathMode(gpu().blas, math);
  const float one = 1, zero = 0;
  timed(state, [&] {
    cublasSgemm(gpu().blas, CUBLAS_OP_N, CUBLAS_OP_N, kM, kM, kM, &one, reinterpret_cast<const float*>(b), kM,
                reinterpret_cast<const float*>(a), kM, &zero, reinterpret_cast<float*>(c), kM);
  });
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * kM * kM * kM * state.iterations() / 1e12, benchmark::Counter::kIsRate);
  for (CUdeviceptr p : {a, b, c}) gpu().device->cu().cuMemFree(p);
}

void BM_Cublas_Sgemm_F32(benchmark::State& state) { cublasDot(state, CUBLAS_PEDANTIC_MATH); }
void BM_Cublas_Sgemm_Tf32(benchmark::State& state) { cublasDot(state, CUBLAS_TF32_TENSOR_OP_MATH); }

}  // namespace

BENCHMARK(BM_Cuda_Copy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Elementwise)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Sum)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Cuda_Dot_F32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cublas_Sgemm_F32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cuda_Dot_Tf32)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Cublas_Sgemm_Tf32)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
