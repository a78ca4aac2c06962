// The device suite (tests/device_suite.h) on WebGPU: every kernel compiled to WGSL and run
// in headless Chromium (Tint validates each module, SwiftShader's Vulkan
// runs it) through the page runtime web/accy.js, against the reference
// evaluator with the tolerances of docs/CONFORMANCE.md.
//
// One page load serves the whole suite (web/page_runner.h: the
// page stays open and takes each launch, the artifact and its inputs, as
// one line of JSON). Without Chromium the suite is skipped, saying so.
#include <cstdio>
#include <cstdlib>
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
#include "tests/device_suite.h"
#include "tests/gpu_conformance.h"
#include "tools/webgpu/page_backend.h"
#include "web/page_runner.h"

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
  // Programs with loops run whole in the page, as a plan (web/accy_plan.js:
  // every step of a scan in one command buffer).
  g.load_with_loops = [compile = g.compile_for_gpu](const tensor::Program& program) {
    return browser().loadWithLoops(program, compile);
  };
  return g;
}

std::string withoutChromium() {
  return webgpu::chromiumPath().empty()
             ? std::string("Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM): no browser to run WGSL in")
             : std::string();
}

// The device suite (tests/device_suite.h) in one Chromium page; tree
// reductions use subgroup shuffles where the adapter has them.
const bool registered = registerDeviceSuite({
    .name = "wgsl",
    .unavailable = withoutChromium,
    .device = gpu,
    .refuses = {{tensor::DType::f64, "WGSL has no 64-bit floats"}, {tensor::DType::i64, "WGSL has no 64-bit integers"}},
    .leaves_out = slowSumsLeftOut("its twelve launches of 2^24 values, 64 MB each as base64 JSON into the page, take 7 "
                                  "minutes"),
});

// The plain modules (the fallback for adapters without subgroups), in the
// same page, even where the device has subgroups.
TEST(WgslConformance, TreeReductionsWithoutSubgroups) {
  if (const std::string why = withoutChromium(); !why.empty()) GTEST_SKIP() << why;
  const int with = browser().runsWithSubgroups();
  const std::unique_ptr<webgpu::PageBackend> plain = browser().withOptions("{\"subgroups\": false}");
  GpuUnderTest fallback = gpu();
  fallback.backend = plain.get();
  fallback.note = "the same without subgroup operations (the fallback)";
  checkTreeReductions(fallback);
  EXPECT_EQ(browser().runsWithSubgroups(), with) << "the fallback ran subgroup operations";
  std::printf("%d WGSL programs ran in one Chromium page (every module validated by Tint); %d used subgroups\n",
              browser().runs(), browser().runsWithSubgroups());
}

}  // namespace
}  // namespace accy::testing
