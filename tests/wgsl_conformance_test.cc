// The GPU conformance suite on WebGPU: every kernel compiled to WGSL and run
// in headless Chromium (Tint validates each module, SwiftShader's Vulkan
// runs it) through the page runtime web/accy.js, against the reference
// evaluator with the tolerances of docs/CONFORMANCE.md.
//
// One page load serves the whole suite (tools/webgpu/page_runner.h: the
// page stays open and takes each launch, the artifact and its inputs, as
// one line of JSON). Without Chromium the suite is skipped, saying so.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/targets.h"
#include "compiler/codegen/wgsl/artifact.h"
#include "compiler/codegen/wgsl/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/gpu_conformance.h"
#include "tools/webgpu/page_backend.h"
#include "tools/webgpu/page_runner.h"

namespace accy::testing {
namespace {

// WebGPU in the browser as a backend of the suite: one page for the whole
// test.
webgpu::PageBackend& browser() {
  static webgpu::PageBackend b("wgsl", "browser", [] { return webgpu::PageRunner::open(testDir()); });
  return b;
}

GpuUnderTest gpu() {
  GpuUnderTest g;
  g.backend = &browser();
  g.target = "wgsl";
  g.float64 = false;
  g.int64 = false;
  g.note = "WebGPU on SwiftShader (headless Chromium), workgroup-memory trees";
  g.compile_for_gpu = [](const tensor::Program& program) { return wgsl::compileProgram(program, wgsl::TargetInfo{}); };
  return g;
}

TEST(WgslConformance, TheGpuSuiteRunsInChromium) {
  if (webgpu::chromiumPath().empty()) {
    GTEST_SKIP() << "Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM): no browser to run WGSL in";
  }
  const GpuUnderTest g = gpu();
  programsLeftOutForDTypes() = 0;
  checkWholeSuite(g);
  std::printf("%d WGSL programs ran in one Chromium page (every module validated by Tint)\n", browser().runs());
  std::printf("%d programs left out: they hold f64 or i64 values, which WGSL does not have\n",
              programsLeftOutForDTypes());
  EXPECT_GT(browser().runs(), 500);
  // Tree reductions ran with subgroup shuffles where the adapter has them;
  // and again with the plain modules, the fallback.
  std::printf("%d runs used subgroup operations\n", browser().runsWithSubgroups());
  const int with = browser().runsWithSubgroups();
  // The same page, loading the plain modules even where the device has
  // subgroups.
  const std::unique_ptr<webgpu::PageBackend> plain = browser().withOptions("{\"subgroups\": false}");
  GpuUnderTest fallback = gpu();
  fallback.backend = plain.get();
  fallback.note = "the same without subgroup operations (the fallback)";
  checkTreeReductions(fallback);
  EXPECT_EQ(browser().runsWithSubgroups(), with) << "the fallback ran subgroup operations";
}

// WGSL has no f64 and no i64: refused by name, with the op.
TEST(WgslConformance, SixtyFourBitValuesAreRefusedByName) {
  const absl::StatusOr<tensor::Program> p = programWithFloat64();
  ASSERT_TRUE(p.ok());
  absl::StatusOr<executable::Executable> exe = wgsl::compileProgram(*p, wgsl::TargetInfo{});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("f64 values need a target with 64-bit floats"));
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("(op mul in kernel"));
  const tensor::Spec longs[] = {tensor::spec(tensor::DType::i64, {{"i", 8}})};
  auto q = tensor::define("longs", longs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] + 1; });
  ASSERT_TRUE(q.ok());
  exe = wgsl::compileProgram(*q, wgsl::TargetInfo{});
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("i64 values need"));
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("buffer 0"));
}

}  // namespace
}  // namespace accy::testing
