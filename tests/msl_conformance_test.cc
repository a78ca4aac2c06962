// The device suite (tests/device_suite.h) on the MSL target: every kernel compiled to MSL,
// compiled by clang++ against the shim's <metal_stdlib> (warnings as errors)
// and run with each threadgroup's threads as fibers meeting at real
// barriers (tools/msl/shim.h), against the reference evaluator with the
// tolerances of docs/CONFORMANCE.md. A check of the emitter; no Metal
// device is involved. Without clang++ the suite is skipped, saying so.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/errors.h"
#include "base/strings.h"
#include "compiler/executable/artifact_json.h"
#include "compiler/codegen/msl/artifact.h"
#include "compiler/codegen/msl/compile.h"
#include "compiler/codegen/targets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/device_suite.h"
#include "tests/gpu_conformance.h"
#include "tests/op_cases.h"
#include "tools/msl/shim.h"

namespace accy::testing {
namespace {

using ::testing::HasSubstr;

mslshim::ShimBackend& shim() {
  static mslshim::ShimBackend b(testDir("msl_shim"));
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
  // A suite's programs compiled 64 to a clang++ run.
  g.prepare = [](std::span<const executable::Executable> exes) { ASSERT_TRUE(shim().preload(exes).ok()); };
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

// The device suite (tests/device_suite.h) through the shim, SIMD-group
// trees where the suite builds trees.
const bool registered = registerDeviceSuite({
    .name = "msl",
    .unavailable = [] {
      return mslshim::clangPath().empty() ? std::string("clang++ not found (/usr/bin/clang++ or ACCY_CLANG): nothing to "
                                                        "compile the MSL with")
                                          : std::string();
    },
    .device = [] { return gpu(); },
    .refuses = {{tensor::DType::f64, "Metal has no 64-bit floats"}},
    .leaves_out = slowSumsLeftOut("its twelve launches of 2^24 values, every thread a fiber in the shim, take 2 minutes"),
});

// Trees again, finishing in threadgroup memory only (the form for devices
// without SIMD-group operations), and one with SIMD-group shuffles: both
// meet at real barriers.
TEST(MslConformance, TreeReductionsWithAndWithoutSimdGroups) {
  SKIP_WITHOUT_CLANG();
  const mslshim::ShimStats before = mslshim::stats();
  checkTreeReductions(gpu(false));
  const mslshim::ShimStats trees = mslshim::stats();
  EXPECT_GT(trees.barriers, before.barriers);
  EXPECT_EQ(trees.shuffles, before.shuffles) << "threadgroup-memory trees shuffled";
  std::mt19937 rng(3);
  const tensor::Program sum = sumOf(5000);
  EXPECT_TRUE(runAndCompare(gpu(), sum, {randomBytes(sum.inputSpecs()[0], rng, -1, 1)}));
  const mslshim::ShimStats st = mslshim::stats();
  EXPECT_GT(st.shuffles, trees.shuffles) << "SIMD-group trees did not shuffle";
  std::printf("%d MSL programs compiled by clang++ through the shim (in %d runs of clang++, %.1f s) and run\n",
              shim().loads(), shim().compiles(), shim().compileSeconds());
  std::printf("%lld fibers ran as threadgroup threads; %lld barriers met, %lld SIMD-group shuffles\n",
              static_cast<long long>(st.threads), static_cast<long long>(st.barriers),
              static_cast<long long>(st.shuffles));
}

// The artifact: each kernel's source, what the host binds, the math mode.
TEST(MslConformance, TheArtifactDescribesEachKernel) {
  absl::StatusOr<executable::Executable> exe = codegen::compileFor("msl", sumOf(5000), {});
  ASSERT_TRUE(exe.ok()) << exe.status();
  absl::StatusOr<std::string> json = msl::artifactJson(*exe);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"format\": \"accy-msl-1\""));
  EXPECT_THAT(*json, HasSubstr("\"function\": \"accy_kernel\", \"math_mode\": \"safe\""));
  // Two threadgroup arrays: the subgroups' sums and their errors (a
  // floating sum is compensated).
  EXPECT_THAT(*json, HasSubstr("\"threadgroup\": [{\"dtype\": \"f32\", \"elements\": 256}, "
                               "{\"dtype\": \"f32\", \"elements\": 256}]"));
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

// A hand-written MSL executable of one kernel writing `n` floats.
executable::Executable handWritten(const std::string& body, int64_t groups, int64_t threads, bool simd) {
  const int64_t n = groups * threads;
  executable::Executable exe;
  exe.target = "msl";
  exe.isa = "metal";
  std::string source = strCat("// accy-msl bindings=0 threadgroup=f32:", threads, " simdgroups=", simd ? 1 : 0,
                              "\n#include <metal_stdlib>\nusing namespace metal;\n"
                              "kernel void accy_kernel(device float* buf0 [[buffer(0)]], uint lid "
                              "[[thread_position_in_threadgroup]], uint wid [[threadgroup_position_in_grid]], uint gid "
                              "[[thread_position_in_grid]]",
                              simd ? ", uint sg_size [[threads_per_simdgroup]], uint sg_count "
                                     "[[simdgroups_per_threadgroup]], uint sg_id [[simdgroup_index_in_threadgroup]], "
                                     "uint sg_lane [[thread_index_in_simdgroup]]"
                                   : "",
                              ") {\n  threadgroup float tg0[", threads, "];\n", body, "}\n");
  exe.code.assign(source.begin(), source.end());
  exe.launch_plan.steps.push_back(executable::LaunchStep{"hand", 0, groups, n, threads});
  const tensor::Spec out = tensor::spec(tensor::DType::f32, {{"i", n}});
  exe.outputs = {out};
  executable::BufferPlan b;
  b.role = choir::BufferRole::kOutput;
  b.io_index = 0;
  b.dtype = tensor::DType::f32;
  b.bytes = n * 4;
  b.alignment = 4;
  exe.artifact_plan.buffers = {b};
  return exe;
}

// Each thread reads what its neighbour wrote before the barrier, and what
// the thread one lane down the SIMD group holds: right only when the
// threadgroup's threads really run together and meet.
TEST(MslConformance, ThreadgroupThreadsMeetAtRealBarriers) {
  SKIP_WITHOUT_CLANG();
  const int64_t groups = 5, threads = 64;
  auto loaded = shim().load(handWritten(
      "  tg0[lid] = float(wid * 1000 + lid);\n"
      "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  const float next = tg0[(lid + 1) % 64];\n"
      "  const float down = simd_shuffle_down(float(sg_lane), ushort(1));\n"
      "  buf0[gid] = next + down * 100000.0f;\n",
      groups, threads, true));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> out(static_cast<size_t>(groups * threads), -1.0f);
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(out))};
  ASSERT_TRUE((*loaded)->launch({}, outs).ok());
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < threads; ++t) {
      const float lane = static_cast<float>(t % 32);
      const float down = t % 32 == 31 ? lane : lane + 1;  // the top lane keeps its own value
      EXPECT_EQ(out[static_cast<size_t>(g * threads + t)], static_cast<float>(g * 1000 + (t + 1) % 64) + down * 100000.0f)
          << "group " << g << " thread " << t;
    }
  }
}

// Threads that do not all reach a barrier fail the launch by name instead
// of hanging.
TEST(MslConformance, ADivergentBarrierFailsTheLaunchByName) {
  SKIP_WITHOUT_CLANG();
  auto loaded = shim().load(handWritten(
      "  if (lid < 5) threadgroup_barrier(mem_flags::mem_threadgroup);\n"
      "  buf0[gid] = tg0[0];\n",
      2, 32, false));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> out(64);
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(out))};
  const absl::Status st = (*loaded)->launch({}, outs);
  EXPECT_EQ(errorKind(st), ErrorKind::kLaunchFailed);
  EXPECT_THAT(std::string(st.message()), HasSubstr("did not all reach a barrier"));
}

}  // namespace
}  // namespace accy::testing
