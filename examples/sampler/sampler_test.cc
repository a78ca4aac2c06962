// The HMC example: at a small size compiled for x86-64 against the
// evaluator, draw for draw; the whole run (4 chains of 1,000 draws on all
// 569 rows) converging (split R-hat below 1.01 for every coefficient) to
// posterior means that agree with a reference computed another way
// (importance sampling from the Laplace approximation) within 4 standard
// errors; a missing data file named.
#include <cmath>
#include <cstdlib>

#include "examples/sampler/sampler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

namespace tensor = accy::tensor;

struct Draws {
  std::vector<double> draws, accepted;
};

Draws run(const tensor::Program& p, const sampler::Data& d, const sampler::Options& o, int threads) {
  Draws r{std::vector<double>(o.chains * o.draws * d.coefs), std::vector<double>(o.chains * o.draws)};
  auto exe = tensor::CpuExecutable::compile(p, {.threads = threads});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return r;
  const std::span<const std::byte> in[] = {accy::bytes(d.x), accy::bytes(d.y)};
  const std::span<std::byte> out[] = {accy::writableBytes(r.draws), accy::writableBytes(r.accepted)};
  const absl::Status st = exe->launch(in, out);
  EXPECT_TRUE(st.ok()) << st;
  return r;
}

TEST(Sampler, CompiledMatchesTheEvaluatorDrawForDraw) {
  absl::StatusOr<sampler::Data> d = sampler::breastCancer(40);
  ASSERT_TRUE(d.ok()) << d.status();
  sampler::Options o;
  o.chains = 2;
  o.warmup = 2;
  o.draws = 4;
  o.leapfrog = 3;
  auto p = sampler::program(o, d->obs, d->coefs);
  ASSERT_TRUE(p.ok()) << p.status();
  const Draws got = run(*p, *d, o, 2);
  const std::span<const std::byte> in[] = {accy::bytes(d->x), accy::bytes(d->y)};
  auto want = tensor::evaluate(*p, in);
  ASSERT_TRUE(want.ok()) << want.status();
  auto at = [&](size_t k, size_t i) { return tensor::loadElement(tensor::DType::f64, (*want)[k].data() + i * 8); };
  for (size_t i = 0; i < got.draws.size(); ++i) {
    ASSERT_NEAR(got.draws[i], at(0, i), 1e-9 * (1 + std::abs(at(0, i)))) << i;
  }
  double accepted = 0;
  for (size_t i = 0; i < got.accepted.size(); ++i) {
    ASSERT_EQ(got.accepted[i], at(1, i)) << i;
    accepted += got.accepted[i];
  }
  EXPECT_GT(accepted, 0) << "no draw accepted: the chains did not move";
  // The chains differ (their own keys through vmap).
  EXPECT_NE(got.draws[0], got.draws[o.draws * d->coefs]);
}

TEST(Sampler, FourChainsConvergeToTheReferencePosterior) {
  absl::StatusOr<sampler::Data> d = sampler::breastCancer();
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->obs, 569);
  ASSERT_EQ(d->coefs, 31);
  const sampler::Options o;
  ASSERT_EQ(o.chains, 4);
  ASSERT_EQ(o.draws, 1000);
  auto p = sampler::program(o, d->obs, d->coefs);
  ASSERT_TRUE(p.ok()) << p.status();
  const Draws r = run(*p, *d, o, 1);
  const sampler::Summary s = sampler::summarise(r.draws, r.accepted, o.chains, o.draws, d->coefs);
  EXPECT_GT(s.acceptance, 0.6);
  const sampler::Reference ref = sampler::laplaceImportance(*d, o.prior_sd, 20000);
  EXPECT_GT(ref.weight_ess, 500) << "the reference's importance weights degenerated";
  double worst_rhat = 0, worst_gap = 0, least_ess = INFINITY;
  for (int64_t j = 0; j < d->coefs; ++j) {
    EXPECT_LT(s.rhat[j], 1.01) << "coefficient " << j;
    const double gap = std::fabs(s.mean[j] - ref.mean[j]) / std::hypot(s.mcse[j], ref.se[j]);
    EXPECT_LT(gap, 4) << "coefficient " << j << ": " << s.mean[j] << " against " << ref.mean[j];
    worst_rhat = std::max(worst_rhat, s.rhat[j]);
    worst_gap = std::max(worst_gap, gap);
    least_ess = std::min(least_ess, s.ess[j]);
  }
  EXPECT_GT(least_ess, 400);
  std::printf("sampler: acceptance %.3f, split R-hat at most %.4f, ESS at least %.0f, means within %.2f standard errors "
              "of the reference\n",
              s.acceptance, worst_rhat, least_ess, worst_gap);
}

TEST(Sampler, AMissingDataFileIsNamed) {
  ASSERT_EQ(setenv("ACCY_DATASETS", "/nonexistent/accy-datasets", 1), 0);
  absl::StatusOr<sampler::Data> d = sampler::breastCancer();
  unsetenv("ACCY_DATASETS");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), ::testing::HasSubstr("/nonexistent/accy-datasets/breast_cancer.csv is missing"));
}

}  // namespace
