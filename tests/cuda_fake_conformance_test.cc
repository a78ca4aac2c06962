// CUDA conformance without a GPU: the device suite (tests/device_suite.h)
// compiled to PTX (exact mode) and run through the
// real CUDA backend (CudaProgram: module load, device buffers, parameter
// order, grid and block, copies, streams) on the fake driver
// (backends/cuda/testdata/fake_cuda.cc), whose cuLaunchKernel runs every
// kernel on the PTX interpreter compiler/codegen/ptx/ptxsim.py
// (ACCY_FAKE_CUDA_PTXSIM). The fake device reports what an H100/H200 does:
// sm_90, 1024 threads per block, warps of 32.
//
// The interpreter runs every thread in Python, so a few parts of the suite
// are smaller (GpuSuiteSize): tree reductions over rows of up to 20000
// elements (split in 2 parts a row, where 70000 is split in 8), 100 of the
// 200 random programs and 20 of the 60 transformed ones, the op cases at
// p = 1, 17 and 100 where the other devices take 300 (every op at 300 took
// 265 s here, a sixth of make test), the scatterAdd ones at p = 40 (their
// GPU form is quadratic in p: 35 s a dtype at 300). The rest runs whole
// (integer pow, bool buffers, tiled products, the three tone tests),
// and tf32 products on the interpreter's mma.sync, as
// tests/cuda_conformance_test.cc does on a real GPU.
#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <random>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_program.h"
#include "backends/staged_program.h"
#include "compiler/tensor/evaluate.h"
#include "compiler/tensor/loops.h"
#include "compiler/codegen/ptx/compile.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"
#include "tests/device_suite.h"
#include "tests/gpu_conformance.h"
#include "tests/op_cases.h"

namespace accy::testing {
namespace {

using tensor::DType;
using tensor::Spec;

std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/" + (workspace != nullptr ? workspace : "accy") + "/" + path;
}

std::string fakeDriver() { return runfile("backends/cuda/testdata/libfake_cuda.so"); }

backends::Backend& cuda() {
  static std::unique_ptr<backends::Backend> b = [] {
    // Read by the fake driver at each launch.
    setenv("ACCY_FAKE_CUDA_PTXSIM", runfile("compiler/codegen/ptx/ptxsim.py").c_str(), 1);
    return backends::makeCudaBackendFrom(backends::BackendOptions{}, fakeDriver());
  }();
  return *b;
}

GpuUnderTest gpu() {
  GpuUnderTest g;
  g.backend = &cuda();
  g.target = "ptx";
  g.compile_for_gpu = [](const tensor::Program& program) {
    return ptx::compileProgram(program, backends::cudaTargetInfo(cuda()));
  };
  g.int64 = true;
  g.note = backends::cudaDeviceName(cuda());
  g.size.tree_extents = {256, 1000, 4099, 20000};
  g.size.random_programs = 100;
  g.size.transformed_programs = 20;
  g.size.scatter_max_extent = 40;
  g.size.op_max_extent = 100;
  return g;
}

// The fake driver's count of launches (accy_fake_cuda_live).
int fakeLaunches() {
  void* handle = dlopen(fakeDriver().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto live = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "accy_fake_cuda_live"));
  return live != nullptr ? live("launches") : -1;
}

class CudaFakeConformance : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda().info().available) << cuda().info().unavailable_reason; }
};

TEST_F(CudaFakeConformance, TheFakeDeviceHasAnH100sLimits) {
  const ptx::TargetInfo t = backends::cudaTargetInfo(cuda());
  EXPECT_EQ(t.sm, 90);
  EXPECT_EQ(t.max_threads_per_block, 1024u);
  EXPECT_EQ(t.warp_size, 32u);
  EXPECT_EQ(t.max_grid_x, 2147483647u);
  EXPECT_EQ(t.ptx_version, 78);
  EXPECT_EQ(t.mode, ptx::ArithmeticMode::kExact);
  EXPECT_EQ(backends::cudaDeviceName(cuda()), "Accy Fake GPU 1 (device 1, sm_90, 132 SMs, 80 GiB, driver 12.8)");
}

// Each kernel of a multi-kernel program reaches the interpreter through
// cuLaunchKernel, and the results come back through the device buffers.
TEST_F(CudaFakeConformance, KernelsRunOnTheInterpreter) {
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"i", 300}, {"j", 7}})};
  auto program = tensor::define("two", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
    return {a[0] * 3 + 1, (a[0] * a[0]).sum("i")};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  auto exe = gpu().compile_for_gpu(*program);
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::mt19937 rng(3);
  const int before = fakeLaunches();
  EXPECT_TRUE(runAndCompare(gpu(), *program, {randomBytes(specs[0], rng, -2, 2)}));
  EXPECT_EQ(fakeLaunches() - before, static_cast<int>(exe->launch_plan.steps.size()));
}

// A scan whose body is one program runs on the device without a host wait
// per step: every step's kernels queued on one stream (the carries' buffers
// swapped, xs and ys addressed a slice a step in place), one wait at the end.
TEST_F(CudaFakeConformance, AScanQueuesEveryStepOnOneStream) {
  constexpr int64_t kSteps = 9;
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"i", 40}}),
                                   tensor::spec(DType::f32, {{"step", kSteps}, {"i", 40}}),
                                   tensor::spec(DType::f32, {{"i", 40}})};
  auto program = tensor::define("drift", specs, [](tensor::Builder& b, Args a) -> std::vector<tensor::Value> {
    const tensor::Value w = a[2];
    tensor::ScanResult r = tensor::scan(
        b, {.length = kSteps}, {a[0]}, {a[1]},
        [&](tensor::Builder&, std::span<const tensor::Value> c,
            std::span<const tensor::Value> x) -> absl::StatusOr<tensor::ScanStep> {
          const tensor::Value next = c[0] * 0.5f + x[0] * w;
          return tensor::ScanStep{{next}, {next.sum("i")}};
        });
    return {r.carry[0], r.ys[0]};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<std::shared_ptr<const backends::LoadedProgram>> loaded;
  auto plan = backends::StagedProgram::build(
      *program, [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> {
        auto exe = gpu().compile_for_gpu(stage);
        if (!exe.ok()) return exe.status();
        auto one = cuda().load(std::move(*exe));
        if (one.ok()) loaded.push_back(*one);
        return one;
      });
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(loaded.size(), 1u) << "the body, and no other stage";
  const auto* body = dynamic_cast<const cuda::CudaProgram*>(loaded[0].get());
  ASSERT_NE(body, nullptr);
  std::mt19937 rng(5);
  std::vector<std::vector<std::byte>> in;
  for (const Spec& s : specs) in.push_back(randomBytes(s, rng, -1, 1));
  std::vector<std::span<const std::byte>> ins(in.begin(), in.end());
  auto want = tensor::evaluate(*program, ins);
  ASSERT_TRUE(want.ok()) << want.status();
  std::vector<std::vector<std::byte>> got;
  for (const Spec& s : program->outputSpecs()) got.emplace_back(s.byteSize());
  std::vector<std::span<std::byte>> outs(got.begin(), got.end());
  const int launches = fakeLaunches();
  const int64_t waits = body->hostWaits();
  ASSERT_TRUE((*plan)->launch(ins, outs).ok());
  EXPECT_EQ(body->hostWaits() - waits, 1) << "one wait for the whole loop";
  EXPECT_EQ(fakeLaunches() - launches, static_cast<int>(kSteps * body->executable().launch_plan.steps.size()));
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), (*want)[k].size());
    for (size_t e = 0; e < got[k].size() / 4; ++e) {
      float g, w;
      std::memcpy(&g, got[k].data() + 4 * e, 4);
      std::memcpy(&w, (*want)[k].data() + 4 * e, 4);
      EXPECT_NEAR(g, w, 1e-4f * (1 + std::abs(w))) << "output " << k << " element " << e;
    }
  }
}

// A program enqueued on buffers the caller keeps on the device (what the
// CUDA benchmark times): the same launch steps, results in the caller's
// device buffers; a wrong buffer count is InvalidBuffer before anything runs.
TEST_F(CudaFakeConformance, ProgramsRunOnBuffersTheCallerKeepsOnTheDevice) {
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"i", 100}})};
  auto program = tensor::define("affine", specs, [](tensor::Builder&, Args a) { return a[0] * 2 + 1; });
  ASSERT_TRUE(program.ok()) << program.status();
  auto exe = gpu().compile_for_gpu(*program);
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto loaded = cuda().load(*exe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const auto* prog = dynamic_cast<const cuda::CudaProgram*>(loaded->get());
  ASSERT_NE(prog, nullptr);
  const cuda::CudaFunctions& cu = prog->device().cu();
  ASSERT_EQ(cu.cuCtxSetCurrent(prog->device().context()), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  std::vector<float> x(100), y(100, NAN);
  for (int i = 0; i < 100; ++i) x[i] = 0.25f * i - 7;
  std::vector<CUdeviceptr> buffers;
  for (const auto& b : exe->artifact_plan.buffers) {
    CUdeviceptr p = 0;
    ASSERT_EQ(cu.cuMemAlloc(&p, static_cast<size_t>(std::max<int64_t>(b.bytes, 4))), CUDA_SUCCESS);
    buffers.push_back(p);
  }
  for (size_t b = 0; b < buffers.size(); ++b) {
    const auto& plan = exe->artifact_plan.buffers[b];
    if (plan.role == choir::BufferRole::kInput) {
      ASSERT_EQ(cu.cuMemcpyHtoDAsync(buffers[b], x.data(), 400, stream), CUDA_SUCCESS);
    }
  }
  ASSERT_TRUE(prog->enqueueOnDevice(buffers, stream).ok());
  for (size_t b = 0; b < buffers.size(); ++b) {
    if (exe->artifact_plan.buffers[b].role == choir::BufferRole::kOutput) {
      ASSERT_EQ(cu.cuMemcpyDtoHAsync(y.data(), buffers[b], 400, stream), CUDA_SUCCESS);
    }
  }
  ASSERT_EQ(cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(y[i], x[i] * 2 + 1) << i;
  const absl::Status wrong = prog->enqueueOnDevice(absl::MakeConstSpan(buffers).subspan(1), stream);
  EXPECT_EQ(errorKind(wrong), ErrorKind::kInvalidBuffer) << wrong;
  for (CUdeviceptr p : buffers) EXPECT_EQ(cu.cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(cu.cuStreamDestroy(stream), CUDA_SUCCESS);
}

// A kernel the interpreter cannot run is LaunchFailed at cuLaunchKernel,
// in the interpreter's words; the outputs are untouched and the next
// launch of a good program runs.
TEST_F(CudaFakeConformance, AKernelTheInterpreterRefusesIsLaunchFailed) {
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"i", 40}})};
  auto program = tensor::define("double", specs, [](tensor::Builder&, Args a) { return a[0] * 2; });
  ASSERT_TRUE(program.ok()) << program.status();
  auto exe = gpu().compile_for_gpu(*program);
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto good = cuda().load(*exe);
  ASSERT_TRUE(good.ok()) << good.status();
  std::string text(exe->code.begin(), exe->code.end());
  const size_t ret = text.rfind("ret;");
  ASSERT_NE(ret, std::string::npos);
  text.replace(ret, 4, "trap;");
  exe->code.assign(text.begin(), text.end());
  auto bad = cuda().load(*exe);
  ASSERT_TRUE(bad.ok()) << bad.status();

  std::vector<float> x(40, 1.5f), y(40, -1.0f);
  const absl::Status s = (*bad)->launch({bytes(x)}, {writableBytes(y)});
  EXPECT_EQ(errorKind(s), ErrorKind::kLaunchFailed) << s;
  const std::string message(s.message());
  EXPECT_NE(message.find("cuLaunchKernel failed with CUDA_ERROR_LAUNCH_FAILED"), std::string::npos) << message;
  EXPECT_NE(message.find("instruction not known to the simulator: trap"), std::string::npos) << message;
  EXPECT_EQ(y[0], -1.0f);
  ASSERT_TRUE((*good)->launch({bytes(x)}, {writableBytes(y)}).ok());
  EXPECT_EQ(y[39], 3.0f);
}

// The device suite (tests/device_suite.h) on the fake driver. The device is
// always there (the driver is built with the test), so it is never skipped
// as unavailable: a driver that fails to load fails every check.
const bool registered = registerDeviceSuite({
    .name = "cuda_fake",
    .unavailable = {},
    .device = gpu,
    .refuses = {},
    .leaves_out = {{Check::kReductionsAsTheDeviceChooses,
                    "its reductions of up to 2^22 elements, every thread in Python on the PTX interpreter, took "
                    "181 s alone on a 2-core AMD EPYC: a sixth of make test. TreeReductions runs the cooperative "
                    "forms here; the real CUDA device runs this check (cuda_conformance_test)"},
                   {Check::kAccurateSums,
                    "its sums of 2^24 values would run every thread in Python on the PTX interpreter (over an hour); "
                    "the PTX kernels share the emitter's cascade with SPIR-V, WGSL and MSL, which run this check, and "
                    "the real CUDA device runs it (cuda_conformance_test)"}},
});

// tf32 products on the interpreter's mma.sync (m16n8k8, operands rounded to
// tf32, f32 accumulation) against tf32's rounding bound, as
// cuda_conformance_test's Tf32Products on a GPU; ragged edges included.
TEST_F(CudaFakeConformance, Tf32Products) {
  ptx::TargetInfo target = backends::cudaTargetInfo(cuda());
  target.mode = ptx::ArithmeticMode::kTf32;
  checkTf32Products(
      gpu(), [&](const tensor::Program& program) { return ptx::compileProgram(program, target); }, "mma.sync");
}

}  // namespace
}  // namespace accy::testing
