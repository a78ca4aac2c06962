// Vulkan conformance on a real device (Mesa's lavapipe in CI): every op and
// random programs compiled to SPIR-V (exact mode) and run, against the
// reference evaluator; the original's three tone tests. Skipped, with the
// reason, where no Vulkan device is available.
#include <cmath>
#include <random>

#include "accy/accy.h"
#include "backends/vulkan/vulkan_backend.h"
#include "examples/tone/tone.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"
#include "tests/op_cases.h"
#include "tests/random_programs.h"

namespace accy::testing {
namespace {

using tensor::DType;
using tensor::Spec;

backends::Backend& vulkan() {
  static std::unique_ptr<backends::Backend> b = backends::makeVulkanBackend(backends::BackendOptions{});
  return *b;
}

#define SKIP_WITHOUT_VULKAN()                                                                     \
  if (!vulkan().info().available) GTEST_SKIP() << "no Vulkan device: " << vulkan().info().unavailable_reason

// Known gaps of the SPIR-V backend, each refused with Unimplemented: the
// explicit skip list of this backend.
bool expectedGap(const absl::Status& st) {
  return errorKind(st) == ErrorKind::kUnimplemented &&
         (st.message().find("bool buffers") != std::string::npos ||
          st.message().find("integer pow") != std::string::npos);
}

::testing::AssertionResult runAndCompare(const tensor::Program& program,
                                         const std::vector<std::vector<std::byte>>& inputs) {
  auto exe = vulkan().compile(program, "spirv");
  if (!exe.ok()) {
    if (expectedGap(exe.status())) return ::testing::AssertionSuccess() << "skipped: " << exe.status();
    return ::testing::AssertionFailure() << exe.status();
  }
  auto loaded = vulkan().load(*exe);
  if (!loaded.ok()) return ::testing::AssertionFailure() << loaded.status();
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::span<std::byte>> out_views;
  for (const Spec& s : program.outputSpecs()) outs.emplace_back(s.byteSize());
  for (auto& o : outs) out_views.emplace_back(o.data(), o.size());
  auto in = views(inputs);
  if (auto st = (*loaded)->launch(in, out_views); !st.ok()) return ::testing::AssertionFailure() << st;
  auto expected = tensor::evaluate(program, in);
  for (size_t k = 0; k < outs.size(); ++k) {
    auto r = matches(program.outputSpecs()[k].dtype, outs[k], (*expected)[k]);
    if (!r) return r << " in output " << k << "\n" << tensor::toText(program);
  }
  return ::testing::AssertionSuccess();
}

TEST(VulkanConformance, EveryOp) {
  SKIP_WITHOUT_VULKAN();
  std::mt19937 rng(7);
  for (const OpCase& c : opCases()) {
    for (DType dtype : {DType::f32, DType::f64, DType::i32}) {
      if (c.floats_only && !tensor::isFloating(dtype)) continue;
      for (int64_t p : {1, 17, 300}) {
        const std::vector<Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", 5}}), tensor::spec(dtype, {{"p", p}, {"q", 5}})};
        auto program = tensor::define(c.name, specs, c.fn);
        if (!program.ok()) continue;  // the CPU conformance test checks these errors
        std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, c.lo, c.hi),
                                                      randomBytes(specs[1], rng, c.lo, c.hi)};
        EXPECT_TRUE(runAndCompare(*program, inputs)) << c.name << " " << tensor::dtypeName(dtype) << " p=" << p;
      }
    }
  }
}

TEST(VulkanConformance, RandomPrograms) {
  SKIP_WITHOUT_VULKAN();
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    RandomOptions o;
    o.dtype = seed % 4 == 0 ? DType::f64 : DType::f32;
    RandomCase c = randomProgram(seed, o);
    ASSERT_TRUE(runAndCompare(c.program, c.inputs)) << "seed " << seed;
  }
}

TEST(VulkanConformance, TheThreeToneTests) {
  SKIP_WITHOUT_VULKAN();
  const tone::Samples data = tone::samples();
  auto mismatch = [&](double f) {
    double e = 0;
    for (int i = 0; i < tone::kPoints; ++i) {
      const double gap = std::sin(f * data.time[i]) - data.sample[i];
      e += gap * gap;
    }
    return e;
  };
  auto run = [&](const tensor::Program& p) {
    auto exe = vulkan().compile(p, "spirv");
    EXPECT_TRUE(exe.ok()) << exe.status();
    auto loaded = vulkan().load(*exe);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded;
  };
  const Spec one[] = {tensor::spec(DType::f32, {}), tensor::spec(DType::f32, {{"point", 16}}),
                      tensor::spec(DType::f32, {{"point", 16}})};
  // measure one frequency guess
  auto p1 = tensor::define("mismatch", one, tone::mismatch);
  float f1[1] = {2.5f}, v1[1];
  auto l1 = run(*p1);
  ASSERT_TRUE((*l1)->launch({bytes(f1), bytes(data.time), bytes(data.sample)}, {writableBytes(v1)}).ok());
  EXPECT_NEAR(mismatch(2.5), v1[0], 1e-4);
  // compare eight frequency guesses
  const Spec eight[] = {tensor::spec(DType::f32, {{"guess", 8}}), tensor::spec(DType::f32, {{"point", 16}}),
                        tensor::spec(DType::f32, {{"point", 16}})};
  auto p8 = tensor::define("mismatch", eight, tone::mismatch);
  float f8[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, v8[8];
  auto l8 = run(*p8);
  ASSERT_TRUE((*l8)->launch({bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(mismatch(f8[g]), v8[g], 1e-4);
  // refine eight frequency guesses
  auto f = tensor::Function::define("mismatch", one, tone::mismatch);
  auto each = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  auto lr = run(each->program());
  float value[8], slope[8];
  for (int step = 0; step < 100; ++step) {
    ASSERT_TRUE((*lr)->launch({bytes(f8), bytes(data.time), bytes(data.sample)},
                              {writableBytes(value), writableBytes(slope)})
                    .ok());
    for (int g = 0; g < 8; ++g) f8[g] -= 0.005f * slope[g];
  }
  EXPECT_NEAR(3.0f, f8[2], 1e-6);
  EXPECT_NEAR(3.0f, f8[3], 1e-6);
}

}  // namespace
}  // namespace accy::testing
