// The original's first two tests, on the x86-64 JIT.
#include <cmath>

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gtest/gtest.h"

namespace tensor = accy::tensor;

namespace {

TEST(Tone, MeasureOneFrequencyGuess) {
  if (!accy::target::kNativeCpuArtifactsSupported) GTEST_SKIP() << "no native CPU artifacts here";
  const tensor::Spec one_guess[] = {
      tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  auto program = tensor::define("mismatch", one_guess, tone::mismatch);
  ASSERT_TRUE(program.ok()) << program.status();
  const tone::Samples data = tone::samples();
  const float frequency[1] = {2.5f};
  float value[1];
  ASSERT_TRUE(tensor::runCpu(*program,
                             {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                             {accy::writableBytes(value)})
                  .ok());
  double expected = 0;
  for (int i = 0; i < tone::kPoints; ++i) {
    const double gap = std::sin(2.5 * double(data.time[i])) - data.sample[i];
    expected += gap * gap;
  }
  EXPECT_NEAR(expected, value[0], 0.0001);
}

TEST(Tone, CompareEightFrequencyGuesses) {
  if (!accy::target::kNativeCpuArtifactsSupported) GTEST_SKIP() << "no native CPU artifacts here";
  constexpr int kGuesses = 8;
  const tensor::Spec eight_guesses[] = {
      tensor::spec(tensor::DType::f32, {{"guess", kGuesses}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  auto program = tensor::define("mismatch", eight_guesses, tone::mismatch);
  ASSERT_TRUE(program.ok()) << program.status();
  const tone::Samples data = tone::samples();
  const float frequency[kGuesses] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  float value[kGuesses];
  auto st = tensor::runCpu(*program, {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                           {accy::writableBytes(value)});
  ASSERT_TRUE(st.ok()) << st;
  for (int g = 0; g < kGuesses; ++g) {
    double expected = 0;
    for (int i = 0; i < tone::kPoints; ++i) {
      const double gap = std::sin(double(frequency[g]) * data.time[i]) - data.sample[i];
      expected += gap * gap;
    }
    EXPECT_NEAR(expected, value[g], 0.0001) << "guess " << frequency[g];
  }
}

TEST(Tone, FifteenSamplesAgainstSixteenTimesFails) {
  const tensor::Spec bad[] = {
      tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {{"point", 16}}),
      tensor::spec(tensor::DType::f32, {{"point", 15}}),
  };
  auto program = tensor::define("mismatch", bad, tone::mismatch);
  EXPECT_EQ(accy::errorKind(program.status()), accy::ErrorKind::kAxisExtentMismatch);
}

}  // namespace
