// Hamiltonian Monte Carlo for Bayesian logistic regression, as one Accy
// program: every chain's warm-up and draws in one scan, the chains by vmap
// over keys split from one seed, each draw's leapfrog trajectory in a scan
// of its own, the log density's gradient by valueAndGrad, the momentum,
// the step-size jitter and the accept step from the random-number API.
//
//   model:   y_i ~ Bernoulli(sigmoid(x_i . beta)), beta_j ~ Normal(0, prior_sd)
//   inputs:  x [obs, coef] (f64; a column of ones for the intercept),
//            y [obs] (f64, 0 or 1)
//   outputs: draws [chain, draw, coef], accepted [chain, draw] (1 or 0)
//
// The data: scikit-learn's breast-cancer table (569 x 30, each feature
// standardised, an intercept added: 31 coefficients). docs/EXAMPLES.md
// ("sampler") says how the settings were chosen and how the posterior is
// checked (split R-hat, effective sample size, a reference computed by
// importance sampling from the Laplace approximation).
#ifndef ACCY_EXAMPLES_SAMPLER_SAMPLER_H_
#define ACCY_EXAMPLES_SAMPLER_SAMPLER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "accy/accy.h"
#include "examples/data/datasets.h"

namespace sampler {

namespace tensor = accy::tensor;

struct Options {
  int64_t chains = 4;
  int64_t warmup = 200;    // draws made and dropped first
  int64_t draws = 1000;    // draws kept, each chain
  int64_t leapfrog = 20;   // steps of a trajectory
  double step = 0.05;      // the leapfrog's step, jittered uniformly by +-10% each draw
  double prior_sd = 1.0;   // beta_j ~ Normal(0, prior_sd)
  uint64_t seed = 2026;
};

// The log density (up to a constant) of beta [coef] given x [obs, coef] and
// y [obs]: sum_i y_i z_i - softplus(z_i) - |beta|^2 / (2 prior_sd^2), with
// z = x beta and softplus(z) = max(z, 0) + log1p(exp(-|z|)) (no overflow).
inline absl::StatusOr<tensor::Function> logDensity(int64_t obs, int64_t coefs, double prior_sd) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f64, {{"coef", coefs}}),
                                tensor::spec(tensor::DType::f64, {{"obs", obs}, {"coef", coefs}}),
                                tensor::spec(tensor::DType::f64, {{"obs", obs}})};
  const double precision = 1 / (prior_sd * prior_sd);
  return tensor::Function::define("log_density", specs, [=](tensor::Builder&, std::span<const tensor::Value> a) {
    const tensor::Value &beta = a[0], &x = a[1], &y = a[2];
    const tensor::Value z = x.dot(beta, "coef");  // [obs]
    const tensor::Value softplus = z.max(0.0) + (-z.abs()).exp().log1p();
    return (y * z - softplus).sum("obs") - (beta * beta).sum("coef") * (0.5 * precision);
  });
}

// One chain from its key: a start drawn from the prior's scale, then
// warmup + draws HMC transitions. Outputs draws [draw, coef] and
// accepted [draw], the warm-up left out.
inline absl::StatusOr<tensor::Function> chain(const Options& o, int64_t obs, int64_t coefs) {
  absl::StatusOr<tensor::Function> density = logDensity(obs, coefs, o.prior_sd);
  if (!density.ok()) return density.status();
  absl::StatusOr<tensor::Function> value_and_grad = density->valueAndGrad({.wrt = {0}});
  if (!value_and_grad.ok()) return value_and_grad.status();
  const tensor::Function vg = *value_and_grad;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::u32, {{"word", 2}}),
                                tensor::spec(tensor::DType::f64, {{"obs", obs}, {"coef", coefs}}),
                                tensor::spec(tensor::DType::f64, {{"obs", obs}})};
  const int64_t total = o.warmup + o.draws;
  return tensor::Function::define("hmc_chain", specs, [&o, vg, coefs, total](tensor::Builder& b,
                                                                            std::span<const tensor::Value> a) {
    const tensor::Value key = a[0], x = a[1], y = a[2];
    using tensor::DType;
    // A key per use: the start, then each transition's momentum and
    // uniforms (jitter, accept) from the transition's index.
    const tensor::Value start_key = tensor::randomFoldIn(key, b.constant(4294967295.0, DType::u32));
    const tensor::Value beta0 = tensor::normal(start_key, {{"coef", coefs}}, DType::f64) * o.prior_sd;
    const std::vector<tensor::Value> at0 = vg.call(b, std::vector<tensor::Value>{beta0, x, y});
    const tensor::ScanResult draws = tensor::scan(
        b, {.axis = "draw", .length = total}, {beta0, at0[0], at0[1], b.constant(0, DType::u32)}, {},
        [&](tensor::Builder& b, std::span<const tensor::Value> c,
            std::span<const tensor::Value>) -> absl::StatusOr<tensor::ScanStep> {
          const tensor::Value &beta = c[0], &logp = c[1], &grad = c[2], &t = c[3];
          const tensor::Value kt = tensor::randomFoldIn(key, t);
          const tensor::Value p0 = tensor::normal(tensor::randomFoldIn(kt, b.constant(0, DType::u32)),
                                                  {{"coef", coefs}}, DType::f64);
          const tensor::Value u = tensor::uniform(tensor::randomFoldIn(kt, b.constant(1, DType::u32)), {{"u", 2}},
                                                  DType::f64);
          const tensor::Value eps = (u.slice("u", 0, 1).sum("u") * 0.2 + 0.9) * o.step;
          // Half a kick, then `leapfrog` drifts each followed by a whole
          // kick; the last kick's second half taken back.
          const tensor::ScanResult path = tensor::scan(
              b, {.axis = "leap", .length = o.leapfrog}, {beta, p0 + grad * eps * 0.5, grad, logp}, {},
              [&](tensor::Builder& b, std::span<const tensor::Value> s,
                  std::span<const tensor::Value>) -> absl::StatusOr<tensor::ScanStep> {
                const tensor::Value next = s[0] + s[1] * eps;
                const std::vector<tensor::Value> at = vg.call(b, std::vector<tensor::Value>{next, x, y});
                return tensor::ScanStep{{next, s[1] + at[1] * eps, at[1], at[0]}, {}};
              });
          const tensor::Value &beta1 = path.carry[0], &grad1 = path.carry[2], &logp1 = path.carry[3];
          const tensor::Value p1 = path.carry[1] - grad1 * eps * 0.5;
          // Metropolis: accept with probability min(1, exp(H0 - H1)); a
          // trajectory that diverged (NaN) is rejected.
          const tensor::Value h0 = (p0 * p0).sum("coef") * 0.5 - logp;
          const tensor::Value h1 = (p1 * p1).sum("coef") * 0.5 - logp1;
          const tensor::Value accept = u.slice("u", 1, 2).sum("u").log().lt(h0 - h1);
          return tensor::ScanStep{{accept.where(beta1, beta), accept.where(logp1, logp), accept.where(grad1, grad), t + 1},
                                  {accept.where(beta1, beta), accept.cast(DType::f64)}};
        });
    return std::vector<tensor::Value>{draws.ys[0].slice("draw", o.warmup, total),
                                      draws.ys[1].slice("draw", o.warmup, total)};
  });
}

inline std::vector<tensor::Spec> specs(int64_t obs, int64_t coefs) {
  return {tensor::spec(tensor::DType::f64, {{"obs", obs}, {"coef", coefs}}),
          tensor::spec(tensor::DType::f64, {{"obs", obs}})};
}

// The whole sampler: `chains` keys split from the seed, the chain vmapped
// over them.
inline absl::StatusOr<tensor::Program> program(const Options& o, int64_t obs, int64_t coefs) {
  absl::StatusOr<tensor::Function> one = chain(o, obs, coefs);
  if (!one.ok()) return one.status();
  absl::StatusOr<tensor::Function> all =
      one->vmap({.axis_size = o.chains, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped},
                 .axis_name = "chain"});
  if (!all.ok()) return all.status();
  return tensor::define("hmc", specs(obs, coefs), [&](tensor::Builder& b, std::span<const tensor::Value> a) {
    const tensor::Value keys = tensor::randomSplit(tensor::randomKey(b, o.seed), "chain", o.chains);
    return all->call(b, std::vector<tensor::Value>{keys, a[0], a[1]});
  });
}

// The model's data: x with an intercept column first, y as 0 or 1.
struct Data {
  int64_t obs = 0, coefs = 0;
  std::vector<double> x, y;
};

// scikit-learn's breast-cancer table, standardised, an intercept added;
// the first `rows` rows (all when 0).
inline absl::StatusOr<Data> breastCancer(int64_t rows = 0) {
  absl::StatusOr<datasets::Table> t = datasets::readLabelledCsv("breast_cancer.csv");
  if (!t.ok()) return t.status();
  datasets::standardise(*t);
  Data d;
  d.obs = rows > 0 ? std::min(rows, t->rows) : t->rows;
  d.coefs = t->features + 1;
  for (int64_t r = 0; r < d.obs; ++r) {
    d.x.push_back(1.0);
    for (int64_t f = 0; f < t->features; ++f) d.x.push_back(t->x[r * t->features + f]);
    d.y.push_back(t->label[r] != 0 ? 1.0 : 0.0);
  }
  return d;
}

// ---- Checking the draws ----

// Each chain's draws halved (an odd last draw left out): the split chains
// R-hat and the effective sample size are computed over.
inline std::vector<std::vector<double>> splitChains(const std::vector<std::vector<double>>& chains) {
  std::vector<std::vector<double>> halves;
  for (const auto& c : chains) {
    const size_t h = c.size() / 2;
    halves.emplace_back(c.begin(), c.begin() + h);
    halves.emplace_back(c.begin() + h, c.begin() + 2 * h);
  }
  return halves;
}

// Split R-hat (Gelman et al., BDA3): each chain's draws halved, the
// between- and within-half variances compared. `draws` is [chain, draw]
// of one coefficient.
inline double splitRhat(const std::vector<std::vector<double>>& chains) {
  const std::vector<std::vector<double>> halves = splitChains(chains);
  const double n = static_cast<double>(halves[0].size()), m = static_cast<double>(halves.size());
  std::vector<double> means;
  double w = 0;
  for (const auto& c : halves) {
    double mean = 0, var = 0;
    for (double v : c) mean += v;
    mean /= n;
    for (double v : c) var += (v - mean) * (v - mean);
    w += var / (n - 1);
    means.push_back(mean);
  }
  w /= m;
  double grand = 0, bvar = 0;
  for (double mean : means) grand += mean;
  grand /= m;
  for (double mean : means) bvar += (mean - grand) * (mean - grand);
  const double b = n * bvar / (m - 1);
  return std::sqrt(((n - 1) / n * w + b / n) / w);
}

// Effective sample size over split chains, by Geyer's initial monotone
// sequence of summed autocorrelation pairs (as Stan computes it).
inline double effectiveSamples(const std::vector<std::vector<double>>& chains) {
  const std::vector<std::vector<double>> halves = splitChains(chains);
  const size_t n = halves[0].size();
  const double m = static_cast<double>(halves.size());
  std::vector<double> acov(n, 0.0), means;
  double w = 0;
  for (const auto& c : halves) {
    double mean = 0;
    for (double v : c) mean += v;
    mean /= static_cast<double>(n);
    means.push_back(mean);
    for (size_t lag = 0; lag < n; ++lag) {
      double s = 0;
      for (size_t i = 0; i + lag < n; ++i) s += (c[i] - mean) * (c[i + lag] - mean);
      acov[lag] += s / static_cast<double>(n) / m;
    }
    double var = 0;
    for (double v : c) var += (v - mean) * (v - mean);
    w += var / static_cast<double>(n - 1) / m;
  }
  double grand = 0, bvar = 0;
  for (double mean : means) grand += mean;
  grand /= m;
  for (double mean : means) bvar += (mean - grand) * (mean - grand);
  const double var_plus = static_cast<double>(n - 1) / static_cast<double>(n) * w + bvar / (m - 1);
  auto rho = [&](size_t lag) { return lag == 0 ? 1.0 : 1 - (w - acov[lag]) / var_plus; };
  double tau = 0, previous = INFINITY;
  for (size_t k = 0; k + 1 < n; k += 2) {
    double pair = rho(k) + rho(k + 1);
    if (pair < 0) break;
    pair = std::min(pair, previous);
    previous = pair;
    tau += pair;
  }
  tau = 2 * tau - 1;
  return m * static_cast<double>(n) / std::max(tau, 1.0 / std::log10(m * static_cast<double>(n)));
}

// The posterior means computed another way: importance sampling from the
// Laplace approximation (a Gaussian at the mode, found by Newton's method,
// with the inverse Hessian as covariance), `samples` draws, in plain C++
// double precision. Also each mean's standard error (from the normalised
// weights) and the effective sample size of the weights.
struct Reference {
  std::vector<double> mean, se;
  double weight_ess = 0;
};

inline Reference laplaceImportance(const Data& d, double prior_sd, int64_t samples, uint64_t seed = 7) {
  const int64_t n = d.obs, k = d.coefs;
  const double precision = 1 / (prior_sd * prior_sd);
  auto logp = [&](const std::vector<double>& beta) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      double z = 0;
      for (int64_t j = 0; j < k; ++j) z += d.x[i * k + j] * beta[j];
      s += d.y[i] * z - (std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))));
    }
    for (double b : beta) s -= 0.5 * precision * b * b;
    return s;
  };
  // Newton's method for the mode; H = X^T W X + precision I.
  std::vector<double> beta(k, 0.0), h(k * k), l(k * k);
  auto cholesky = [&] {  // l = the lower factor of h
    std::fill(l.begin(), l.end(), 0.0);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        double s = h[i * k + j];
        for (int64_t q = 0; q < j; ++q) s -= l[i * k + q] * l[j * k + q];
        l[i * k + j] = i == j ? std::sqrt(s) : s / l[j * k + j];
      }
    }
  };
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<double> g(k, 0.0);
    std::fill(h.begin(), h.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      double z = 0;
      for (int64_t j = 0; j < k; ++j) z += d.x[i * k + j] * beta[j];
      const double s = 1 / (1 + std::exp(-z)), wgt = s * (1 - s);
      for (int64_t j = 0; j < k; ++j) {
        g[j] += d.x[i * k + j] * (d.y[i] - s);
        for (int64_t q = 0; q <= j; ++q) h[j * k + q] += wgt * d.x[i * k + j] * d.x[i * k + q];
      }
    }
    for (int64_t j = 0; j < k; ++j) {
      g[j] -= precision * beta[j];
      h[j * k + j] += precision;
    }
    cholesky();
    // Solve h step = g by the factor.
    std::vector<double> step(g);
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t q = 0; q < i; ++q) step[i] -= l[i * k + q] * step[q];
      step[i] /= l[i * k + i];
    }
    for (int64_t i = k - 1; i >= 0; --i) {
      for (int64_t q = i + 1; q < k; ++q) step[i] -= l[q * k + i] * step[q];
      step[i] /= l[i * k + i];
    }
    double size = 0;
    for (int64_t j = 0; j < k; ++j) {
      beta[j] += step[j];
      size = std::max(size, std::fabs(step[j]));
    }
    if (size < 1e-12) break;
  }
  // Proposals beta + L^-T z (covariance H^-1), weights p(beta) / q(beta).
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const double mode_logp = logp(beta);
  std::vector<std::vector<double>> xs;
  std::vector<double> logw;
  for (int64_t s = 0; s < samples; ++s) {
    std::vector<double> z(k), v(k);
    double q = 0;
    for (int64_t j = 0; j < k; ++j) {
      z[j] = normal(rng);
      q -= 0.5 * z[j] * z[j];
    }
    for (int64_t i = k - 1; i >= 0; --i) {  // v = L^-T z
      double t = z[i];
      for (int64_t r = i + 1; r < k; ++r) t -= l[r * k + i] * v[r];
      v[i] = t / l[i * k + i];
    }
    for (int64_t j = 0; j < k; ++j) v[j] += beta[j];
    logw.push_back(logp(v) - mode_logp - q);
    xs.push_back(std::move(v));
  }
  const double top = *std::max_element(logw.begin(), logw.end());
  std::vector<double> w(logw.size());
  double total = 0, squares = 0;
  for (size_t s = 0; s < w.size(); ++s) total += w[s] = std::exp(logw[s] - top);
  for (double& x : w) {
    x /= total;
    squares += x * x;
  }
  Reference r;
  r.weight_ess = 1 / squares;
  r.mean.assign(k, 0.0);
  r.se.assign(k, 0.0);
  for (size_t s = 0; s < w.size(); ++s) {
    for (int64_t j = 0; j < k; ++j) r.mean[j] += w[s] * xs[s][j];
  }
  for (size_t s = 0; s < w.size(); ++s) {
    for (int64_t j = 0; j < k; ++j) r.se[j] += w[s] * w[s] * std::pow(xs[s][j] - r.mean[j], 2);
  }
  for (double& se : r.se) se = std::sqrt(se);
  return r;
}

// What a run's draws say: per coefficient, the mean, split R-hat, the
// effective sample size and the Monte Carlo standard error of the mean.
struct Summary {
  std::vector<double> mean, rhat, ess, mcse;
  double acceptance = 0;
};

inline Summary summarise(std::span<const double> draws, std::span<const double> accepted, int64_t chains,
                         int64_t n, int64_t coefs) {
  Summary s;
  for (int64_t j = 0; j < coefs; ++j) {
    std::vector<std::vector<double>> per(chains);
    double mean = 0, var = 0;
    for (int64_t c = 0; c < chains; ++c) {
      for (int64_t t = 0; t < n; ++t) per[c].push_back(draws[(c * n + t) * coefs + j]);
      for (double v : per[c]) mean += v;
    }
    mean /= static_cast<double>(chains * n);
    for (const auto& c : per) {
      for (double v : c) var += (v - mean) * (v - mean);
    }
    var /= static_cast<double>(chains * n - 1);
    s.mean.push_back(mean);
    s.rhat.push_back(splitRhat(per));
    s.ess.push_back(effectiveSamples(per));
    s.mcse.push_back(std::sqrt(var / s.ess.back()));
  }
  for (double a : accepted) s.acceptance += a;
  s.acceptance /= static_cast<double>(accepted.size());
  return s;
}

}  // namespace sampler

#endif  // ACCY_EXAMPLES_SAMPLER_SAMPLER_H_
