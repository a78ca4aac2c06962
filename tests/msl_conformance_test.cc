// The GPU conformance suite on the MSL target: every kernel compiled to MSL,
// compiled by clang++ against the shim's <metal_stdlib> (warnings as errors)
// and run on CPU threads, each threadgroup's threads meeting at real
// barriers (tools/msl/shim.h), against the reference evaluator with the
// tolerances of docs/CONFORMANCE.md. A check of the emitter; no Metal
// device is involved. Without clang++ the suite is skipped, saying so.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/gpu/artifact_json.h"
#include "compiler/codegen/msl/artifact.h"
#include "compiler/codegen/msl/compile.h"
#include "compiler/codegen/targets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/gpu_conformance.h"
#include "tools/msl/shim.h"

namespace accy::testing {
namespace {

using ::testing::HasSubstr;

std::string workDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = strCat(tmp != nullptr ? tmp : "/tmp", "/msl_shim");
  std::filesystem::create_directories(dir);
  return dir;
}

mslshim::ShimBackend& shim() {
  static mslshim::ShimBackend b(workDir());
  return b;
}

GpuUnderTest gpu(bool simdgroups = true) {
  GpuUnderTest g;
  g.backend = &shim();
  g.target = "msl";
  g.float64 = false;
  g.int64 = true;
  g.note = simdgroups ? "MSL through the shim, SIMD-group trees" : "MSL through the shim, threadgroup-memory trees";
  g.compile_for_gpu = [simdgroups](const tensor::Program& program) {
    msl::TargetInfo t;
    t.simdgroups = simdgroups;
    return msl::compileProgram(program, t);
  };
  return g;
}

tensor::Program sumOf(int64_t n) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", n}})};
  return *tensor::define("sum", specs,
                         [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("i"); });
}

#define SKIP_WITHOUT_CLANG()                                                                              \
  if (mslshim::clangPath().empty()) {                                                                     \
    GTEST_SKIP() << "clang++ not found (/usr/bin/clang++ or ACCY_CLANG): nothing to compile the MSL with"; \
  }

TEST(MslConformance, TheGpuSuiteRunsThroughTheShim) {
  SKIP_WITHOUT_CLANG();
  const GpuUnderTest g = gpu();
  programsLeftOutForDTypes() = 0;
  checkEveryOp(g);
  checkIntegerPowEdgeCases(g);
  checkBoolBuffersMixedWithNumbers(g);
  checkTiledProducts(g);
  checkTreeReductions(g);
  checkRandomPrograms(g);
  checkTransformedPrograms(g);
  checkTheThreeToneTests(g);
  // Trees again, finishing in threadgroup memory only.
  checkTreeReductions(gpu(false));
  std::printf("%d MSL programs compiled by clang++ through the shim and run (%.1f s in clang++)\n", shim().loads(),
              shim().compileSeconds());
  std::printf("%d programs left out: they hold f64 values, which Metal does not have\n", programsLeftOutForDTypes());
  EXPECT_GT(shim().loads(), 500);
}

// Metal has no f64: refused by name, with the op.
TEST(MslConformance, Float64IsRefusedByName) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 8}})};
  auto p = tensor::define("widen", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0].cast(tensor::DType::f64) * 2).cast(tensor::DType::f32);
  });
  ASSERT_TRUE(p.ok());
  absl::StatusOr<executable::Executable> exe = msl::compileProgram(*p, msl::TargetInfo{});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(exe.status().message()), HasSubstr("f64 values need a target with 64-bit floats (Metal"));
  EXPECT_THAT(std::string(exe.status().message()), HasSubstr("(op mul in kernel"));
}

// The artifact: each kernel's source, what the host binds, the math mode.
TEST(MslConformance, TheArtifactDescribesEachKernel) {
  absl::StatusOr<executable::Executable> exe = codegen::compileFor("msl", sumOf(5000), {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  absl::StatusOr<std::string> json = msl::artifactJson(*exe);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"format\": \"accy-msl-1\""));
  EXPECT_THAT(*json, HasSubstr("\"function\": \"accy_kernel\", \"math_mode\": \"safe\""));
  EXPECT_THAT(*json, HasSubstr("\"threadgroup\": [{\"dtype\": \"f32\", \"elements\": 256}]"));
  EXPECT_THAT(*json, HasSubstr("\"simdgroups\": true"));
  EXPECT_THAT(*json, HasSubstr("simd_shuffle_down("));
  absl::StatusOr<executable::Executable> fast =
      codegen::compileFor("msl", sumOf(5000), {.mode = codegen::ArithmeticMode::kFast});
  ASSERT_TRUE(fast.ok());
  EXPECT_THAT(*msl::artifactJson(*fast), HasSubstr("\"math_mode\": \"fast\""));
  // Another target's executable is refused.
  absl::StatusOr<executable::Executable> spirv = codegen::compileFor("spirv", sumOf(10), {});
  ASSERT_TRUE(spirv.ok());
  EXPECT_EQ(errorKind(msl::artifactJson(*spirv).status()), ErrorKind::kInvalidArgument);
}

// A damaged executable never runs: a source without its description, a
// binding the executable lacks, source clang++ refuses (named, with the
// file kept for reading).
TEST(MslConformance, DamagedExecutablesAreRefusedByName) {
  SKIP_WITHOUT_CLANG();
  absl::StatusOr<executable::Executable> exe = codegen::compileFor("msl", sumOf(100), {});
  ASSERT_TRUE(exe.ok());
  executable::Executable headless = *exe;
  headless.code[0] = 'X';
  auto loaded = shim().load(headless);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("does not start with '// accy-msl '"));

  executable::Executable rebound = *exe;
  const std::string text(rebound.code.begin(), rebound.code.end());
  std::string changed = text;
  changed.replace(changed.find("bindings=0,1"), 12, "bindings=0,7");
  rebound.code.assign(changed.begin(), changed.end());
  loaded = shim().load(rebound);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("binds buffer 7, which the executable lacks"));

  executable::Executable broken = *exe;
  changed = text;
  changed.insert(changed.rfind('}'), "  undeclared_name = 1;\n");
  broken.code.assign(changed.begin(), changed.end());
  loaded = shim().load(broken);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(errorKind(loaded.status()), ErrorKind::kCompileFailed);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("clang++ refused the generated MSL"));
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("undeclared_name"));

  // And the good one still loads and runs; wrong buffers are refused.
  loaded = shim().load(*exe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> in(100, 1.0f), out(1, 0.0f), short_in(99, 1.0f);
  const std::span<const std::byte> ins[] = {std::as_bytes(std::span(in))};
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(out))};
  ASSERT_TRUE((*loaded)->launch(ins, outs).ok());
  EXPECT_EQ(out[0], 100.0f);
  const std::span<const std::byte> bad[] = {std::as_bytes(std::span(short_in))};
  EXPECT_EQ(errorKind((*loaded)->launch(bad, outs)), ErrorKind::kInvalidBuffer);
}

}  // namespace
}  // namespace accy::testing
