// The original's third test: gradient descent on eight frequency guesses at
// once, through vmap of valueAndGrad, compiled once and launched 100 times.
#include <cmath>

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gtest/gtest.h"

namespace tensor = accy::tensor;

namespace {

TEST(Tone, RefineEightFrequencyGuesses) {
  if (!accy::target::kNativeCpuArtifactsSupported) GTEST_SKIP() << "no native CPU artifacts here";
  constexpr int kGuesses = 8;
  const tensor::Spec one_guess[] = {
      tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  auto f = tensor::Function::define("mismatch", one_guess, tone::mismatch);
  ASSERT_TRUE(f.ok()) << f.status();
  auto value_and_grad = f->valueAndGrad({.wrt = {0}});
  ASSERT_TRUE(value_and_grad.ok()) << value_and_grad.status();
  auto each = value_and_grad->vmap({.axis_size = kGuesses,
                                    .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped},
                                    .axis_name = "guess"});
  ASSERT_TRUE(each.ok()) << each.status();
  auto cpu = each->compileCpu();
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  const tone::Samples data = tone::samples();
  float frequency[kGuesses] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  float value[kGuesses];
  float slope[kGuesses];
  for (int step = 0; step < 100; ++step) {
    auto st = cpu->launch({accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                          {accy::writableBytes(value), accy::writableBytes(slope)});
    ASSERT_TRUE(st.ok()) << st;
    if (step == 0) {
      EXPECT_NEAR(slope[2], -31.29, 0.01);  // the slope at 2.5
    }
    for (int g = 0; g < kGuesses; ++g) frequency[g] -= 0.005f * slope[g];
  }
  EXPECT_NEAR(3.0f, frequency[2], 0.000001);
  EXPECT_NEAR(3.0f, frequency[3], 0.000001);
}

}  // namespace
