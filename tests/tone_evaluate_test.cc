// The tone program on the reference evaluator: guess 2.5 gives about 8.656,
// guess 3 gives zero, and eight guesses match f64 loops.
#include <cmath>
#include <cstring>

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gtest/gtest.h"

namespace tensor = accy::tensor;

namespace {

float evalMismatch(float guess) {
  const tensor::Spec one_guess[] = {
      tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  auto program = tensor::define("mismatch", one_guess, tone::mismatch);
  EXPECT_TRUE(program.ok()) << program.status();
  const tone::Samples data = tone::samples();
  const float frequency[1] = {guess};
  auto out = tensor::evaluate(
      *program, {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)});
  EXPECT_TRUE(out.ok()) << out.status();
  float value = NAN;
  std::memcpy(&value, (*out)[0].data(), sizeof value);
  return value;
}

TEST(ToneEvaluate, GuessTwoAndAHalf) { EXPECT_NEAR(evalMismatch(2.5f), 8.656, 5e-4); }

TEST(ToneEvaluate, GuessTwoAndAHalfMatchesF64Loop) {
  const tone::Samples data = tone::samples();
  double expected = 0;
  for (int i = 0; i < tone::kPoints; ++i) {
    const double gap = std::sin(2.5 * double(data.time[i])) - data.sample[i];
    expected += gap * gap;
  }
  EXPECT_NEAR(evalMismatch(2.5f), expected, 1e-4);
}

TEST(ToneEvaluate, GuessThreeIsZero) { EXPECT_NEAR(evalMismatch(3.0f), 0.0, 1e-4); }

TEST(ToneEvaluate, EightGuesses) {
  const tensor::Spec eight[] = {
      tensor::spec(tensor::DType::f32, {{"guess", 8}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  auto program = tensor::define("mismatch", eight, tone::mismatch);
  ASSERT_TRUE(program.ok()) << program.status();
  const tone::Samples data = tone::samples();
  const float frequency[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  auto out = tensor::evaluate(
      *program, {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].size(), 8 * sizeof(float));
  float value[8];
  std::memcpy(value, (*out)[0].data(), sizeof value);
  for (int g = 0; g < 8; ++g) {
    double expected = 0;
    for (int i = 0; i < tone::kPoints; ++i) {
      const double gap = std::sin(double(frequency[g]) * data.time[i]) - data.sample[i];
      expected += gap * gap;
    }
    EXPECT_NEAR(value[g], expected, 1e-4) << "guess " << frequency[g];
  }
}

}  // namespace
