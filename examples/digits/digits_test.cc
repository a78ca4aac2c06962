// The digits example: an epoch of a few steps compiled for x86-64 against
// the evaluator (the weights after it and every step's loss); a few epochs
// of training reaching 90% on the held-out images; a damaged data file
// refused by name.
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "examples/digits/digits.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

namespace tensor = accy::tensor;

TEST(Digits, AnEpochMatchesTheEvaluator) {
  absl::StatusOr<digits::Split> data = digits::load();
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->train + data->test, 1797);
  digits::Options o;
  o.steps = 3;
  o.batch = 8;
  auto p = digits::epoch(o, data->train);
  ASSERT_TRUE(p.ok()) << p.status();
  digits::Weights w = digits::initial(o), out = w;
  std::vector<float> losses(o.steps);
  const uint32_t key[] = {2026, 0};
  const digits::EpochBuffers buffers = digits::epochBuffers(*data, w, key, out, losses);
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = 2});
  ASSERT_TRUE(exe.ok()) << exe.status();
  ASSERT_TRUE(exe->launch(buffers.inputs, buffers.outputs).ok());
  auto want = tensor::evaluate(*p, buffers.inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  const std::vector<float>* got[] = {&out.w1, &out.b1, &out.w2, &out.b2, &losses};
  for (size_t k = 0; k < 5; ++k) {
    for (size_t i = 0; i < got[k]->size(); ++i) {
      const double v = tensor::loadElement(tensor::DType::f32, (*want)[k].data() + 4 * i);
      ASSERT_NEAR((*got[k])[i], v, 1e-4 * (1 + std::abs(v))) << "output " << k << " element " << i;
    }
  }
  EXPECT_NE(out.w1, w.w1) << "the weights did not move";
}

TEST(Digits, AFewEpochsPassNinetyPercentHeldOut) {
  absl::StatusOr<digits::Split> data = digits::load();
  ASSERT_TRUE(data.ok()) << data.status();
  digits::Options o;
  o.steps = (data->train + o.batch - 1) / o.batch;
  auto train = digits::epoch(o, data->train);
  ASSERT_TRUE(train.ok()) << train.status();
  auto test = digits::predict(o, data->test);
  ASSERT_TRUE(test.ok()) << test.status();
  auto train_exe = tensor::CpuExecutable::compile(*train, {.threads = 2});
  ASSERT_TRUE(train_exe.ok()) << train_exe.status();
  auto test_exe = tensor::CpuExecutable::compile(*test, {.threads = 2});
  ASSERT_TRUE(test_exe.ok()) << test_exe.status();
  digits::Weights w = digits::initial(o), next = w;
  std::vector<float> losses(o.steps);
  std::vector<int32_t> predicted(data->test);
  std::vector<double> accuracy, mean_loss;
  for (int e = 0; e < 4; ++e) {
    const uint32_t key[] = {2026, static_cast<uint32_t>(e)};
    const digits::EpochBuffers buffers = digits::epochBuffers(*data, w, key, next, losses);
    ASSERT_TRUE(train_exe->launch(buffers.inputs, buffers.outputs).ok());
    std::swap(w, next);
    std::vector<std::span<const std::byte>> tin = {accy::bytes(data->test_x)};
    for (auto b : w.inputs()) tin.push_back(b);
    ASSERT_TRUE(test_exe->launch(tin, {accy::writableBytes(predicted)}).ok());
    accuracy.push_back(digits::heldOutAccuracy(*data, predicted));
    double l = 0;
    for (float v : losses) l += v / static_cast<double>(losses.size());
    mean_loss.push_back(l);
    std::printf("epoch %d: mean loss %.4f, held-out accuracy %.4f\n", e + 1, l, accuracy.back());
  }
  EXPECT_GT(accuracy.back(), 0.90);
  EXPECT_GT(accuracy.back(), accuracy.front() - 0.02) << "the accuracy did not climb";
  EXPECT_LT(mean_loss.back(), mean_loss.front()) << "the loss did not fall";
}

TEST(Digits, ADamagedFileIsRefusedByName) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/digits_bad";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "/digits.csv.gz") << "not gzip, and not numbers\n";  // zlib reads plain text through
  ASSERT_EQ(setenv("ACCY_DATASETS", dir.c_str(), 1), 0);
  absl::StatusOr<datasets::Table> t = datasets::readDigits();
  unsetenv("ACCY_DATASETS");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("digits.csv.gz:1: field 1 is not a number"));
}

}  // namespace
