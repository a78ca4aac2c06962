// CUDA conformance on an NVIDIA GPU: the device suite (tests/device_suite.h)
// compiled to PTX (exact mode) and run through the
// CUDA Driver API, plus `dot` in tf32 on tensor cores against a bound on
// tf32's rounding. Skipped, with the reason, where no CUDA device is
// available (every CI machine: there, ptx_test checks every module with
// ptxas instead); bench/gpu/run.sh runs it on a lent GPU machine.
#include <cmath>
#include <random>

#include "backends/cuda/cuda_backend.h"
#include "backends/compile_program.h"
#include "compiler/codegen/ptx/compile.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"
#include "tests/device_suite.h"
#include "tests/gpu_conformance.h"

namespace accy::testing {
namespace {

using tensor::DType;
using tensor::Spec;

backends::Backend& cuda() {
  static std::unique_ptr<backends::Backend> b = backends::makeCudaBackend(backends::BackendOptions{});
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
  return g;
}

#define SKIP_WITHOUT_CUDA() \
  if (!cuda().info().available) GTEST_SKIP() << "no CUDA device: " << cuda().info().unavailable_reason

TEST(CudaConformance, TheBackendSaysWhyItIsUnavailable) {
  if (cuda().info().available) GTEST_SKIP() << "a CUDA device is present: " << backends::cudaDeviceName(cuda());
  EXPECT_FALSE(cuda().info().unavailable_reason.empty());
  Spec s[] = {tensor::spec(DType::f32, {{"i", 4}})};
  auto p = tensor::define("p", s, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; });
  auto exe = backends::compileOn(cuda(), *p, "ptx");
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented);
}

// The device suite (tests/device_suite.h) on the CUDA device.
const bool registered = registerDeviceSuite({
    .name = "cuda",
    .unavailable = [] { return cuda().info().available ? std::string() : "no CUDA device: " + cuda().info().unavailable_reason; },
    .device = gpu,
    .refuses = {},
    .leaves_out = {},
});

// tf32 keeps 10 of f32's 23 mantissa bits in each operand (rounded to
// nearest) and accumulates in f32: each product is off by at most about
// 2^-10 of |a||b|, so the result is within 2^-9 * sum |a||b| (plus f32's own
// accumulation error) of the exact sum. The same shapes as the tiled tests,
// ragged edges included.
TEST(CudaConformance, Tf32Products) {
  SKIP_WITHOUT_CUDA();
  ptx::TargetInfo target = backends::cudaTargetInfo(cuda());
  if (target.sm < 80) GTEST_SKIP() << "tf32 needs sm_80 or newer; the device is sm_" << target.sm;
  target.mode = ptx::ArithmeticMode::kTf32;
  checkTf32Products(
      gpu(), [&](const tensor::Program& program) { return ptx::compileProgram(program, target); }, "mma.sync");
}

}  // namespace
}  // namespace accy::testing
