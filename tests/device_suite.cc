#include "tests/device_suite.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>

#include "base/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::testing {
namespace {

struct CheckEntry {
  Check check;
  const char* name;
  void (*run)(const GpuUnderTest&);
};

constexpr CheckEntry kChecks[] = {
    {Check::kEveryOp, "EveryOp", checkEveryOp},
    {Check::kIntegerPowEdgeCases, "IntegerPowEdgeCases", checkIntegerPowEdgeCases},
    {Check::kBoolBuffersMixedWithNumbers, "BoolBuffersMixedWithNumbers", checkBoolBuffersMixedWithNumbers},
    {Check::kTiledProducts, "TiledProducts", checkTiledProducts},
    {Check::kTreeReductions, "TreeReductions", checkTreeReductions},
    {Check::kReductionsAsTheDeviceChooses, "ReductionsAsTheDeviceChooses", checkReductionsAsTheDeviceChooses},
    {Check::kRandomPrograms, "RandomPrograms", checkRandomPrograms},
    {Check::kTransformedPrograms, "TransformedPrograms", checkTransformedPrograms},
    {Check::kTheThreeToneTests, "TheThreeToneTests", checkTheThreeToneTests},
    {Check::kAccurateSums, "AccurateSums", checkAccurateSums},
    {Check::kLoops, "Loops", checkLoops},
};

bool refuses(const DeviceSuite& s, tensor::DType d) {
  for (const Refusal& r : s.refuses) {
    if (r.dtype == d) return true;
  }
  return false;
}

// One check on one device.
class CheckTest : public ::testing::Test {
 public:
  CheckTest(std::shared_ptr<const DeviceSuite> suite, CheckEntry check, std::string left_out)
      : suite_(std::move(suite)), check_(check), left_out_(std::move(left_out)) {}

  void TestBody() override {
    if (!left_out_.empty()) GTEST_SKIP() << suite_->name << " leaves this check out: " << left_out_;
    if (const std::string why = suite_->unavailable ? suite_->unavailable() : ""; !why.empty()) {
      GTEST_SKIP() << suite_->name << " is not available here: " << why;
    }
    GpuUnderTest g = suite_->device();
    if (refuses(*suite_, tensor::DType::f64)) g.float64 = false;
    if (refuses(*suite_, tensor::DType::i64)) g.int64 = false;
    programsLeftOutForDTypes() = 0;
    check_.run(g);
    const int left_out = programsLeftOutForDTypes();
    if (left_out > 0) {
      std::string whys;
      for (const Refusal& r : suite_->refuses) whys += std::string(whys.empty() ? "" : "; ") + r.why;
      std::printf("%s: %d programs left out for their dtypes (%s)\n", suite_->name.c_str(), left_out,
                  whys.empty() ? "the device lacks them" : whys.c_str());
    }
    if (g.float64 && g.int64) {
      EXPECT_EQ(left_out, 0) << suite_->name << " runs every dtype, yet programs were left out";
    }
  }

 private:
  std::shared_ptr<const DeviceSuite> suite_;
  CheckEntry check_;
  std::string left_out_;
};

// A program of `d` that a device refusing `d` cannot compile.
absl::StatusOr<tensor::Program> programOf(tensor::DType d) {
  if (d == tensor::DType::f64) return programWithFloat64();
  const tensor::Spec specs[] = {tensor::spec(d, {{"i", 8}})};
  return tensor::define("refused", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] + 1; });
}

// Compiling a program of a refused dtype fails by name.
class RefusalTest : public ::testing::Test {
 public:
  RefusalTest(std::shared_ptr<const DeviceSuite> suite, Refusal refusal)
      : suite_(std::move(suite)), refusal_(std::move(refusal)) {}

  void TestBody() override {
    if (const std::string why = suite_->unavailable ? suite_->unavailable() : ""; !why.empty()) {
      GTEST_SKIP() << suite_->name << " is not available here: " << why;
    }
    const absl::StatusOr<tensor::Program> p = programOf(refusal_.dtype);
    ASSERT_TRUE(p.ok()) << p.status();
    const absl::StatusOr<executable::Executable> exe = suite_->device().compile_for_gpu(*p);
    ASSERT_FALSE(exe.ok()) << suite_->name << " compiled a program of " << tensor::dtypeName(refusal_.dtype)
                           << ", which it refuses by design (" << refusal_.why << ")";
    EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented) << exe.status();
    EXPECT_THAT(std::string(exe.status().message()),
                ::testing::HasSubstr(std::string(tensor::dtypeName(refusal_.dtype)) + " values need"));
  }

 private:
  std::shared_ptr<const DeviceSuite> suite_;
  Refusal refusal_;
};

}  // namespace

std::vector<std::pair<Check, std::string>> slowSumsLeftOut(const std::string& why) {
  if (std::getenv("ACCY_SLOW_SUMS") != nullptr) return {};
  return {{Check::kAccurateSums, why + "; `make gpu-sums` runs it (docs/MATH_ACCURACY.md, \"Sums\")"}};
}

bool registerDeviceSuite(DeviceSuite suite) {
  const std::string test_suite = "DeviceSuite/" + suite.name;
  auto shared = std::make_shared<const DeviceSuite>(std::move(suite));
  for (const CheckEntry& c : kChecks) {
    std::string left_out;
    for (const auto& [check, why] : shared->leaves_out) {
      if (check == c.check) left_out = why;
    }
    ::testing::RegisterTest(test_suite.c_str(), c.name, nullptr, nullptr, __FILE__, __LINE__,
                            [shared, c, left_out]() -> ::testing::Test* { return new CheckTest(shared, c, left_out); });
  }
  for (const Refusal& r : shared->refuses) {
    std::string name = std::string("Refuses") + std::string(tensor::dtypeName(r.dtype));
    name[7] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[7])));
    ::testing::RegisterTest(test_suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [shared, r]() -> ::testing::Test* { return new RefusalTest(shared, r); });
  }
  return true;
}

}  // namespace accy::testing
