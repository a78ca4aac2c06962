// Runs the HMC example on this CPU and prints what it computed:
//
//   bazel run -c opt //examples/sampler -- [--chains=4] [--draws=1000]
//       [--warmup=200] [--leapfrog=20] [--step=0.05] [--threads=N]
//       [--reference=20000]
//
// One program (every chain's every draw) compiled once and launched once on
// scikit-learn's breast-cancer data; prints the acceptance rate, the largest
// split R-hat, the smallest effective sample size, the effective samples
// per second, and how far each posterior mean lies from the reference
// (importance sampling from the Laplace approximation) in standard errors.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "examples/sampler/sampler.h"

namespace {

int fail(const absl::Status& st) {
  std::fprintf(stderr, "sampler: %s\n", std::string(st.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  sampler::Options o;
  int threads = 1;
  int64_t reference = 20000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return arg.compare(0, n, name) == 0 ? arg.c_str() + n : nullptr;
    };
    if (const char* v = value("--chains=")) {
      o.chains = std::atoll(v);
    } else if (const char* v = value("--draws=")) {
      o.draws = std::atoll(v);
    } else if (const char* v = value("--warmup=")) {
      o.warmup = std::atoll(v);
    } else if (const char* v = value("--leapfrog=")) {
      o.leapfrog = std::atoll(v);
    } else if (const char* v = value("--step=")) {
      o.step = std::atof(v);
    } else if (const char* v = value("--threads=")) {
      threads = std::atoi(v);
    } else if (const char* v = value("--reference=")) {
      reference = std::atoll(v);
    } else {
      std::fprintf(stderr,
                   "usage: sampler [--chains=N] [--draws=N] [--warmup=N] [--leapfrog=N] [--step=X] [--threads=N] "
                   "[--reference=N]\n");
      return 2;
    }
  }
  if (o.chains < 2 || o.draws < 4 || o.warmup < 0 || o.leapfrog < 1 || !(o.step > 0)) {
    std::fprintf(stderr, "sampler: needs 2 or more chains, 4 or more draws, 1 or more leapfrog steps, a positive step\n");
    return 2;
  }
  absl::StatusOr<sampler::Data> d = sampler::breastCancer();
  if (!d.ok()) return fail(d.status());
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<accy::tensor::Program> p = sampler::program(o, d->obs, d->coefs);
  if (!p.ok()) return fail(p.status());
  absl::StatusOr<accy::tensor::CpuExecutable> exe = accy::tensor::CpuExecutable::compile(*p, {.threads = threads});
  if (!exe.ok()) return fail(exe.status());
  std::vector<double> draws(o.chains * o.draws * d->coefs), accepted(o.chains * o.draws);
  const auto t1 = std::chrono::steady_clock::now();
  const std::span<const std::byte> in[] = {accy::bytes(d->x), accy::bytes(d->y)};
  const std::span<std::byte> out[] = {accy::writableBytes(draws), accy::writableBytes(accepted)};
  if (absl::Status st = exe->launch(in, out); !st.ok()) return fail(st);
  const auto t2 = std::chrono::steady_clock::now();
  const double run_s = std::chrono::duration<double>(t2 - t1).count();
  const sampler::Summary s = sampler::summarise(draws, accepted, o.chains, o.draws, d->coefs);
  std::printf("sampler: Bayesian logistic regression on breast_cancer.csv (%lld x %lld with the intercept), "
              "%lld chains x %lld draws (%lld warm-up), %lld leapfrog steps of %g\n",
              static_cast<long long>(d->obs), static_cast<long long>(d->coefs), static_cast<long long>(o.chains),
              static_cast<long long>(o.draws), static_cast<long long>(o.warmup), static_cast<long long>(o.leapfrog),
              o.step);
  const double max_rhat = *std::max_element(s.rhat.begin(), s.rhat.end());
  const double min_ess = *std::min_element(s.ess.begin(), s.ess.end());
  std::printf("acceptance %.3f; split R-hat at most %.4f; effective samples at least %.0f\n", s.acceptance, max_rhat,
              min_ess);
  std::printf("compile %.1f ms, run %.3f s: %.0f effective samples/s (the smallest ESS over the run time)\n",
              std::chrono::duration<double>(t1 - t0).count() * 1e3, run_s, min_ess / run_s);
  if (reference > 0) {
    const sampler::Reference r = sampler::laplaceImportance(*d, o.prior_sd, reference);
    double worst = 0;
    for (int64_t j = 0; j < d->coefs; ++j) {
      worst = std::max(worst, std::fabs(s.mean[j] - r.mean[j]) / std::hypot(s.mcse[j], r.se[j]));
    }
    std::printf("reference: %lld importance draws from the Laplace approximation (weights' ESS %.0f); the posterior "
                "means lie within %.2f standard errors of it\n",
                static_cast<long long>(reference), r.weight_ess, worst);
    std::printf("coef  mean      sd-err    reference\n");
    for (int64_t j = 0; j < std::min<int64_t>(d->coefs, 6); ++j) {
      std::printf("%4lld  %+.4f  %.4f    %+.4f\n", static_cast<long long>(j), s.mean[j], s.mcse[j], r.mean[j]);
    }
  }
  return 0;
}
