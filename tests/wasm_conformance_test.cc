// The device suite (tests/device_suite.h) on WebAssembly: every program compiled to a wasm
// module (checked by wabt's wasm-validate), run in node (V8, SIMD128)
// through web/accy_wasm.js, against the reference evaluator with the
// tolerances of docs/CONFORMANCE.md: every op x dtype (f32, f64, i32, i64,
// bool) x extents, integer pow's edge cases, bool buffers, products,
// reductions, random programs in f32 and f64, batched and differentiated
// random programs, and the three tone tests. One node process serves the
// whole suite; the tone tests run again in headless Chromium (one page),
// through web/accy.js. Without node (or Chromium, for the page) the test is
// skipped, saying so.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>
#include <string>

#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/wasm/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"
#include "tests/device_suite.h"
#include "tests/gpu_conformance.h"
#include "tests/op_cases.h"
#include "tests/random_programs.h"
#include "tools/webgpu/page_backend.h"
#include "web/page_runner.h"

namespace accy::testing {
namespace {

webgpu::PageBackend& node() {
  static std::unique_ptr<webgpu::PageBackend> b = webgpu::nodeBackend(testDir());
  return *b;
}

bool haveWasmValidate() { return std::system("wasm-validate --version > /dev/null 2>&1") == 0; }

// wasm-validate (with SIMD and threads enabled, as engines have them) on
// the module of `exe`.
absl::Status validate(const executable::Executable& exe) {
  const std::string path = testDir() + "/module.wasm";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(exe.code.data()), static_cast<std::streamsize>(exe.code.size()));
  const std::string log = testDir() + "/validate.log";
  if (std::system(strCat("wasm-validate --enable-threads ", path, " > ", log, " 2>&1").c_str()) != 0) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return makeError(ErrorKind::kCompileFailed, strCat("wasm-validate refused the module: ", text));
  }
  return absl::OkStatus();
}

GpuUnderTest wasmUnderTest(int threads = 1) {
  GpuUnderTest g;
  g.backend = &node();
  g.target = "wasm";
  g.int64 = true;
  g.float64 = true;
  g.note = "WebAssembly SIMD128 in node";
  g.gpu_forms = false;
  auto compile = [](int n) {
    return [n](const tensor::Program& program) -> absl::StatusOr<executable::Executable> {
      absl::StatusOr<executable::Executable> exe = wasm::compileProgram(program, wasm::TargetInfo{.threads = n});
      if (!exe.ok()) return exe;
      if (absl::Status st = validate(*exe); !st.ok()) return st;
      return exe;
    };
  };
  g.compile_for_gpu = compile(threads);
  // Programs with loops run whole in node, as a plan (web/accy_plan.js).
  g.load_with_loops = [compile, threads](const tensor::Program& program) {
    return node().loadWithLoops(program, compile(threads));
  };
  // The sums at 1 and 2 threads (the CPU walker's cascade and tile.cc's
  // f64 combine, as on x86-64); the rows and the compensated sums at 2
  // (64 MB a launch through node's pipe: 5 s each).
  g.sum_compiles = {{"1 thread", compile(1), true}, {"2 threads", compile(2), false}};
  return g;
}

bool skipWithoutNode() {
  if (webgpu::nodePath().empty()) return true;
  return false;
}

std::string withoutNodeOrWabt() {
  if (skipWithoutNode()) return "node not found (/usr/bin/node or ACCY_NODE): nothing to run wasm in";
  if (!haveWasmValidate()) return "wasm-validate (wabt) not found: the modules cannot be checked";
  return "";
}

// The device suite (tests/device_suite.h) in one node process, every module
// checked by wasm-validate first; every dtype runs.
const bool registered = registerDeviceSuite({
    .name = "wasm",
    .unavailable = withoutNodeOrWabt,
    .device = [] { return wasmUnderTest(); },
    .refuses = {},
    .leaves_out = {},
});

TEST(WasmConformance, RandomF64ProgramsMatch) {
  if (skipWithoutNode()) GTEST_SKIP() << "node not found (/usr/bin/node or ACCY_NODE): nothing to run wasm in";
  const GpuUnderTest g = wasmUnderTest();
  RandomOptions o;
  o.dtype = tensor::DType::f64;
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    RandomCase c = randomProgram(seed, o);
    ASSERT_TRUE(runAndCompare(g, c.program, c.inputs)) << "seed " << seed;
  }
}

// The text of a module, by wabt's wasm2wat.
std::string watOf(const executable::Executable& exe) {
  const std::string path = testDir() + "/text.wasm", text = testDir() + "/text.wat";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(exe.code.data()), static_cast<std::streamsize>(exe.code.size()));
  if (std::system(strCat("wasm2wat --enable-threads ", path, " -o ", text).c_str()) != 0) return "";
  std::ifstream in(text);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Vectorized loops run SIMD128 lanes: f32x4, f64x2 and i32x4 (with their
// reductions' four accumulators), each checked in the module's text and
// against the evaluator.
TEST(WasmConformance, VectorLoopsUseSimd128Lanes) {
  if (skipWithoutNode()) GTEST_SKIP() << "node not found (/usr/bin/node or ACCY_NODE): nothing to run wasm in";
  if (std::system("wasm2wat --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "wasm2wat (wabt) not found";
  const GpuUnderTest g = wasmUnderTest();
  std::mt19937 rng(21);
  struct Case {
    tensor::DType dtype;
    std::vector<std::string> ops;  // in the module's text
  };
  for (const Case& c : {Case{tensor::DType::f32, {"f32x4.mul", "f32x4.add", "v128.bitselect"}},
                        Case{tensor::DType::f64, {"f64x2.mul", "f64x2.add", "v128.bitselect"}},
                        Case{tensor::DType::i32, {"i32x4.mul", "i32x4.add", "i32x4.max_s", "i32x4.gt_s"}}}) {
    const std::vector<tensor::Spec> specs = {tensor::spec(c.dtype, {{"r", 3}, {"i", 103}}),
                                             tensor::spec(c.dtype, {{"i", 103}})};
    auto p = tensor::define("lanes", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
      const tensor::Value v = a[0] * a[1] + a[0];
      return {v.gt(a[1]).where(v, a[1]).max(a[0]), (a[0] * a[1]).sum("i")};
    });
    ASSERT_TRUE(p.ok()) << p.status();
    auto exe = g.compile_for_gpu(*p);
    ASSERT_TRUE(exe.ok()) << exe.status();
    const std::string wat = watOf(*exe);
    for (const std::string& op : c.ops) EXPECT_THAT(wat, ::testing::HasSubstr(op)) << tensor::dtypeName(c.dtype);
    EXPECT_TRUE(runAndCompare(g, *p, {randomBytes(specs[0], rng, -50, 50), randomBytes(specs[1], rng, -50, 50)}))
        << tensor::dtypeName(c.dtype);
  }
}

// Compiled with threads: kernels split their outermost parallel loop across
// node's worker threads over one shared memory (web/accy_wasm_worker.js).
TEST(WasmConformance, ThreadsSplitKernelsAcrossWorkers) {
  if (skipWithoutNode()) GTEST_SKIP() << "node not found (/usr/bin/node or ACCY_NODE): nothing to run wasm in";
  const GpuUnderTest g = wasmUnderTest(/*threads=*/3);
  const int before = node().runsOnWorkers();
  std::mt19937 rng(3);
  // Extents that split into parts with vector remainders at their edges.
  for (tensor::DType d : {tensor::DType::f32, tensor::DType::f64}) {
    for (int64_t n : {int64_t{1} << 18, (int64_t{1} << 18) + 5}) {
      auto big = tensor::define(
          "big", std::vector<tensor::Spec>{tensor::spec(d, {{"n", n}}), tensor::spec(d, {})},
          [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
            return {(a[0] * a[1]).sin().sum("n"), a[0].exp().max("n"), (a[0] + a[1]).cos()};
          });
      ASSERT_TRUE(big.ok()) << big.status();
      auto exe = g.compile_for_gpu(*big);
      ASSERT_TRUE(exe.ok()) << exe.status();
      EXPECT_EQ(wasm::threadsOf(*exe), 3);
      int parallel = 0;
      for (const executable::LaunchStep& s : exe->launch_plan.steps) parallel += s.parallel_extent > 1;
      EXPECT_GT(parallel, 0) << "no kernel has a parallel loop";
      EXPECT_TRUE(runAndCompare(
          g, *big, {randomBytes(big->inputSpecs()[0], rng, -1, 1), randomBytes(big->inputSpecs()[1], rng, -1, 1)}))
          << tensor::dtypeName(d) << " n=" << n;
    }
  }
  EXPECT_GE(node().runsOnWorkers() - before, 4) << "launches that ran no part on a worker";
  GpuUnderTest small = g;
  small.size.random_programs = 60;
  checkRandomPrograms(small);
  checkTheThreeToneTests(small);
  std::printf("%d launches ran parts on worker threads\n", node().runsOnWorkers() - before);
}

// The tone tests on wasm in a browser: web/accy.js's loadProgram takes the
// wasm artifacts (no WebGPU device needed) in web/runner.html.
TEST(WasmConformance, TheThreeToneTestsRunInChromium) {
  if (webgpu::chromiumPath().empty()) {
    GTEST_SKIP() << "Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM): no browser to run wasm in";
  }
  const std::string dir = testDir("page");
  webgpu::PageBackend browser("wasm", "browser", [dir] { return webgpu::PageRunner::open(dir); });
  GpuUnderTest g = wasmUnderTest();
  g.backend = &browser;
  g.note = "WebAssembly SIMD128 in headless Chromium";
  checkTheThreeToneTests(g);
  std::printf("%d wasm programs ran in one Chromium page\n", browser.runs());
  EXPECT_GT(browser.runs(), 0);
}

// Threads in a browser: a cross-origin isolated page (served over HTTP with
// COOP and COEP) runs programs compiled with threads on Web Workers over a
// shared memory.
TEST(WasmConformance, ThreadsRunOnWebWorkersInChromium) {
  if (webgpu::chromiumPath().empty()) {
    GTEST_SKIP() << "Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM): no browser to run wasm in";
  }
  const std::string dir = testDir("isolated_page");
  webgpu::PageBackend browser("wasm", "browser", [dir] { return webgpu::PageRunner::open(dir, /*isolated=*/true); });
  GpuUnderTest g = wasmUnderTest(/*threads=*/2);
  g.backend = &browser;
  std::mt19937 rng(5);
  for (int64_t n : {int64_t{1} << 18, (int64_t{1} << 18) + 5}) {
    auto big = tensor::define(
        "big", std::vector<tensor::Spec>{tensor::spec(tensor::DType::f32, {{"n", n}}), tensor::spec(tensor::DType::f32, {})},
        [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
          return {(a[0] * a[1]).sin().sum("n"), (a[0] + a[1]).cos()};
        });
    ASSERT_TRUE(big.ok()) << big.status();
    EXPECT_TRUE(runAndCompare(
        g, *big, {randomBytes(big->inputSpecs()[0], rng, -1, 1), randomBytes(big->inputSpecs()[1], rng, -1, 1)}))
        << "n=" << n;
  }
  checkTheThreeToneTests(g);
  std::printf("%d wasm programs ran in one isolated Chromium page, %d with parts on Web Workers\n", browser.runs(),
              browser.runsOnWorkers());
  EXPECT_GE(browser.runsOnWorkers(), 2) << "no part ran on a Web Worker";
}

}  // namespace
}  // namespace accy::testing
