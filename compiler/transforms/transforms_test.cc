// Gradients against central finite differences (f64), vmap against
// per-slice runs, compositions, and error kinds.
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "accy/accy.h"
#include "compiler/tensor/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::tensor {
namespace {

using Args = std::span<const Value>;
using Fn = std::function<Value(Builder&, Args)>;

std::vector<double> randomValues(int64_t n, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// Evaluates a program on f64 input vectors, returning every output.
std::vector<std::vector<double>> run(const Program& p, const std::vector<std::vector<double>>& in) {
  std::vector<std::span<const std::byte>> views;
  for (const auto& v : in) views.push_back(accy::bytes(v));
  auto out = testing::evalDoubles(p, views);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<std::vector<double>>{};
}

struct GradCase {
  const char* name;
  Fn fn;  // over two inputs x[a=3, b=4] and y[b=4]
  double lo = -2, hi = 2;
};

// Every differentiable op, each inside a sum so the output is a scalar.
std::vector<GradCase> gradCases() {
  auto total = [](Value v) {
    std::vector<std::string> names;
    for (const Axis& a : v.axes()) names.push_back(a.name);
    return names.empty() ? v : v.sum(names);
  };
  return {
      {"add", [=](Builder&, Args a) { return total((a[0] + a[1]) * a[0]); }},
      {"sub", [=](Builder&, Args a) { return total((a[0] - a[1]) * a[0]); }},
      {"mul", [=](Builder&, Args a) { return total(a[0] * a[1]); }},
      {"div", [=](Builder&, Args a) { return total(a[0] / (a[1] * a[1] + 1)); }},
      {"max", [=](Builder&, Args a) { return total(a[0].max(a[1]) * a[0]); }},
      {"min", [=](Builder&, Args a) { return total(a[0].min(a[1]) * a[0]); }},
      {"pow", [=](Builder&, Args a) { return total(a[0].abs().pow(a[1])); }},
      {"neg", [=](Builder&, Args a) { return total(-(a[0] * a[1])); }},
      {"abs", [=](Builder&, Args a) { return total(a[0].abs() * a[1]); }},
      {"sin", [=](Builder&, Args a) { return total(a[0].sin() * a[1]); }},
      {"cos", [=](Builder&, Args a) { return total(a[0].cos() * a[1]); }},
      {"exp", [=](Builder&, Args a) { return total(a[0].exp() * a[1]); }},
      {"log", [=](Builder&, Args a) { return total((a[0] * a[0] + 1).log() * a[1]); }},
      {"sqrt", [=](Builder&, Args a) { return total((a[0] * a[0] + 1).sqrt() * a[1]); }},
      {"tanh", [=](Builder&, Args a) { return total(a[0].tanh() * a[1]); }},
      {"sigmoid", [=](Builder&, Args a) { return total(a[0].sigmoid() * a[1]); }},
      {"where", [=](Builder&, Args a) { return total(where(a[0].gt(a[1]), a[0] * a[0], a[1] * 3)); }},
      // f64 -> f64: finite differences through an f32 round trip would
      // measure f32 quantization, not the rule.
      {"cast", [=](Builder&, Args a) { return total(a[0].cast(DType::f64) * a[1]); }},
      {"sum", [=](Builder&, Args a) { return (a[0].sum("a") * a[1]).sum("b"); }},
      {"mean", [=](Builder&, Args a) { return (a[0].mean("b") * a[0].mean("b")).sum("a"); }},
      {"prod", [=](Builder&, Args a) { return a[0].prod({"a", "b"}); }, 0.5, 1.5},
      {"reduce_max", [=](Builder&, Args a) { return (a[0] * a[1]).max("b").sum("a"); }},
      {"reduce_min", [=](Builder&, Args a) { return (a[0] * a[1]).min({"a", "b"}); }},
      {"dot", [=](Builder&, Args a) { return total(a[0].dot(a[1], "b").sin()); }},
      {"transpose", [=](Builder&, Args a) { return total(a[0].transpose({"b", "a"}) * a[1]); }},
      {"rename", [=](Builder&, Args a) { return total(a[0].rename("a", "z").sin() * a[1]); }},
      {"broadcast", [=](Builder&, Args a) { return total(a[1].broadcast("z", 3).sin() * a[0].sum("a")); }},
      {"split", [=](Builder&, Args a) { return total(a[0].split("b", "hi", "lo", 2).sin() * a[0].sum({"a", "b"})); }},
      {"merge", [=](Builder&, Args a) { return total(a[0].merge({"b", "a"}, "m").sin() * a[1].sum("b")); }},
      {"slice", [=](Builder&, Args a) { return total(a[0].slice("b", 1, 4, 2).sin() * a[1].sum("b")); }},
      {"concat", [=](Builder&, Args a) { return total(concat("b", {a[0], a[0] * a[0]}).sin()); }},
      // Indices -1, 1, 3, 5, 7: clamped to 0, 1, 3, 3, 3 (duplicates).
      {"take", [=](Builder& b, Args a) {
         return total(take(a[0], "b", b.iota("j", 5) * 2 - 1).sin() * a[1].sum("b"));
       }},
      {"take_shared_axis", [=](Builder& b, Args a) {  // one index per row of a
         return total(take(a[0] * a[0], "b", b.iota("a", 3) + 1).sin() * a[1].sum("b"));
       }},
      {"take_batched_indices", [=](Builder&, Args a) {
         return total(take(a[1], "b", a[0].argmax("b")).sin() * a[0].sum("b"));
       }},
      // Indices -1 (dropped), 1, 3, 3 (a duplicate).
      {"scatter_add", [=](Builder& b, Args a) {
         Value idx = (b.iota("j", 4) * 2 - 1).min(3);
         Value upd = a[0].rename("b", "j") * a[1].rename("b", "j");
         return total(scatterAdd(a[0] * a[0], "b", idx, upd).sin());
       }},
      {"pad", [=](Builder&, Args a) { return total(a[0].pad("b", 2, 1, 0.5).sin() * a[0].sum("b")); }},
      {"window", [=](Builder&, Args a) { return total(a[0].window("b", "k", 2).sin() * a[1].slice("b", 0, 3)); }},
      {"window_strided", [=](Builder&, Args a) { return total(a[0].window("b", "k", 2, 2).sin() * a[0].sum("b")); }},
      {"window_dilated", [=](Builder&, Args a) { return total(a[0].window("b", "k", 2, 1, 2).sin() * a[0].sum("b")); }},
      {"dot_two_axes", [=](Builder&, Args a) { return total(a[0].dot(a[0] * a[1], {"a", "b"}).sin()); }},
      // Dots over window axes (convolutions): the input's adjoint is taken
      // tap by tap (windowedAdjoint), one window and two (one dilated).
      {"conv_1d", [=](Builder&, Args a) {
         Value w = a[0].slice("b", 0, 3).rename("b", "k").rename("a", "o");
         return total(dot(a[0].pad("b", 1, 1).window("b", "k", 3), w, "k").sin());
       }},
      {"conv_2d_dilated", [=](Builder& b, Args a) {
         Value w = a[1].slice("b", 0, 3).rename("b", "ka") * a[1].slice("b", 1, 3).rename("b", "kb");
         w = w * (b.iota("o", 2, DType::f64) + 1);
         Value x = a[0].pad("a", 1, 1).pad("b", 2, 1).window("a", "ka", 3).window("b", "kb", 2, 1, 2);
         return total(dot(x, w, {"ka", "kb"}).sin());
       }},
  };
}

TEST(Grad, EveryDifferentiableOpAgainstFiniteDifferences) {
  std::mt19937 rng(11);
  const std::vector<Spec> specs = {spec(DType::f64, {{"a", 3}, {"b", 4}}), spec(DType::f64, {{"b", 4}})};
  for (const GradCase& c : gradCases()) {
    auto f = Function::define(c.name, specs, c.fn);
    ASSERT_TRUE(f.ok()) << c.name << ": " << f.status();
    auto g = f->valueAndGrad({.wrt = {0, 1}});
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status();
    std::vector<std::vector<double>> in = {randomValues(12, rng, c.lo, c.hi), randomValues(4, rng, c.lo, c.hi)};
    auto out = run(g->program(), in);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_NEAR(out[0][0], run(f->program(), in)[0][0], 1e-12) << c.name;
    // Central differences, h = 1e-6: truncation O(h^2) and rounding O(eps/h)
    // keep the error near 1e-9 for these well-scaled functions.
    for (int k = 0; k < 2; ++k) {
      for (size_t e = 0; e < in[k].size(); ++e) {
        auto plus = in, minus = in;
        plus[k][e] += 1e-6;
        minus[k][e] -= 1e-6;
        const double fd = (run(f->program(), plus)[0][0] - run(f->program(), minus)[0][0]) / 2e-6;
        EXPECT_NEAR(out[1 + k][e], fd, 1e-5 * (1 + std::fabs(fd))) << c.name << " input " << k << " element " << e;
      }
    }
  }
}

TEST(Grad, IntegerInputsAndConditionsCarryNoGradient) {
  const std::vector<Spec> specs = {spec(DType::f64, {{"a", 3}}), spec(DType::i32, {{"a", 3}})};
  auto f = Function::define("mixed", specs, [](Builder&, Args a) {
    return (a[0] * a[1].cast(DType::f64) + where(a[1].gt(1.0), a[0], a[0] * 0.0)).sum("a");
  });
  ASSERT_TRUE(f.ok()) << f.status();
  auto g = f->grad({.wrt = {0}});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<double> x = {1, 2, 3};
  std::vector<int32_t> k = {0, 1, 2};
  auto out = testing::evalDoubles(g->program(), {accy::bytes(x), accy::bytes(k)});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT((*out)[0], ::testing::ElementsAre(0, 1, 3));
  EXPECT_EQ(errorKind(f->grad({.wrt = {1}}).status()), ErrorKind::kUnsupportedDType);
}

// Random values are constants to gradients: d/dx sum(x * u + noise) is u,
// the same u the forward program draws. vmap over keys: a batch of keys
// gives each slice the samples its own key gives.
TEST(Random, GradientsTreatSamplesAsConstantsAndVmapMapsKeys) {
  const std::vector<Spec> specs = {spec(DType::f64, {{"n", 5}}), spec(DType::u32, {{"word", 2}})};
  auto f = Function::define("noisy", specs, [](Builder&, Args a) {
    return (a[0] * tensor::uniform(a[1], {{"n", 5}}, DType::f64) + tensor::normal(a[1], {{"n", 5}}, DType::f64)).sum("n");
  });
  ASSERT_TRUE(f.ok()) << f.status();
  auto g = f->grad({.wrt = {0}});
  ASSERT_TRUE(g.ok()) << g.status();
  auto u = Function::define("u", {specs[1]}, [](Builder&, Args a) { return tensor::uniform(a[0], {{"n", 5}}, DType::f64); });
  ASSERT_TRUE(u.ok()) << u.status();
  const std::vector<double> x = {1, 2, 3, 4, 5};
  const std::vector<uint32_t> key = {7, 9};
  auto grad = testing::evalDoubles(g->program(), {accy::bytes(x), accy::bytes(key)});
  auto want = testing::evalDoubles(u->program(), {accy::bytes(key)});
  ASSERT_TRUE(grad.ok() && want.ok());
  EXPECT_EQ((*grad)[0], (*want)[0]);
  EXPECT_EQ(errorKind(f->grad({.wrt = {1}}).status()), ErrorKind::kUnsupportedDType);
  auto batched = u->vmap({.axis_size = 3, .in_axes = {mappedAxis(0)}, .axis_name = "chain"});
  ASSERT_TRUE(batched.ok()) << batched.status();
  const std::vector<uint32_t> keys = {7, 9, 1, 2, 3, 4};
  auto all = testing::evalDoubles(batched->program(), {accy::bytes(keys)});
  ASSERT_TRUE(all.ok()) << all.status();
  for (int c = 0; c < 3; ++c) {
    const std::vector<uint32_t> one = {keys[2 * c], keys[2 * c + 1]};
    auto slice = testing::evalDoubles(u->program(), {accy::bytes(one)});
    ASSERT_TRUE(slice.ok());
    EXPECT_EQ(std::vector<double>((*all)[0].begin() + 5 * c, (*all)[0].begin() + 5 * c + 5), (*slice)[0]) << c;
  }
}

TEST(Grad, Errors) {
  const std::vector<Spec> specs = {spec(DType::f32, {{"a", 3}})};
  auto vector_out = Function::define("v", specs, [](Builder&, Args a) { return a[0] * 2; });
  EXPECT_EQ(errorKind(vector_out->grad({.wrt = {0}}).status()), ErrorKind::kNonScalarOutput);
  auto two_out = Function::define("two", specs, [](Builder&, Args a) {
    return std::vector<Value>{a[0].sum("a"), a[0].max("a")};
  });
  EXPECT_EQ(errorKind(two_out->grad({.wrt = {0}}).status()), ErrorKind::kNonScalarOutput);
  auto ok = Function::define("s", specs, [](Builder&, Args a) { return a[0].sum("a"); });
  auto st = ok->grad({.wrt = {3}}).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("wrt 3 is not an input"));
}

TEST(Grad, SecondDerivativeOfScalarFunction) {
  // f(x) = sin(x) * x^2: f'' = -sin(x) x^2 + 4x cos(x) + 2 sin(x).
  auto f = Function::define("f", std::vector<Spec>{spec(DType::f64, {})},
                            [](Builder&, Args a) { return a[0].sin() * a[0] * a[0]; });
  auto g = f->grad({.wrt = {0}});
  ASSERT_TRUE(g.ok());
  auto gg = g->grad({.wrt = {0}});
  ASSERT_TRUE(gg.ok()) << gg.status();
  for (double x : {-1.3, 0.2, 2.0}) {
    const double want = -std::sin(x) * x * x + 4 * x * std::cos(x) + 2 * std::sin(x);
    EXPECT_NEAR(run(gg->program(), {{x}})[0][0], want, 1e-12) << x;
  }
}

// vmap against one unbatched run per slice.
TEST(Vmap, EveryOpAgainstPerSliceRuns) {
  std::mt19937 rng(5);
  constexpr int64_t kBatch = 3;
  const std::vector<Spec> specs = {spec(DType::f64, {{"a", 3}, {"b", 4}}), spec(DType::f64, {{"b", 4}})};
  for (const GradCase& c : gradCases()) {
    auto f = Function::define(c.name, specs, [&](Builder& b, Args a) -> std::vector<Value> {
      return {c.fn(b, a), a[0] * 2};  // a scalar output and one with axes
    });
    ASSERT_TRUE(f.ok()) << f.status();
    for (int position : {0, 1, 2}) {
      auto v = f->vmap({.axis_size = kBatch, .in_axes = {mappedAxis(position), unmapped}, .axis_name = "n"});
      ASSERT_TRUE(v.ok()) << c.name << ": " << v.status();
      // x batched at `position`: build it from per-slice data.
      std::vector<std::vector<double>> slices;
      for (int64_t n = 0; n < kBatch; ++n) slices.push_back(randomValues(12, rng, c.lo, c.hi));
      std::vector<Axis> axes = specs[0].axes;
      axes.insert(axes.begin() + position, Axis{"n", kBatch});
      std::vector<double> batched(kBatch * 12);
      // Scatter: element (n, a, b) of the batched input in its axis order.
      for (int64_t n = 0; n < kBatch; ++n) {
        for (int64_t ai = 0; ai < 3; ++ai) {
          for (int64_t bi = 0; bi < 4; ++bi) {
            int64_t flat = 0;
            for (const Axis& ax : axes) {
              const int64_t i = ax.name == "n" ? n : ax.name == "a" ? ai : bi;
              flat = flat * ax.extent + i;
            }
            batched[flat] = slices[n][ai * 4 + bi];
          }
        }
      }
      const std::vector<double> y = randomValues(4, rng, c.lo, c.hi);
      auto out = run(v->program(), {batched, y});
      ASSERT_EQ(out.size(), 2u);
      for (int64_t n = 0; n < kBatch; ++n) {
        auto slice = run(f->program(), {slices[n], y});
        EXPECT_NEAR(out[0][n], slice[0][0], 1e-12) << c.name << " position " << position;
        for (int64_t e = 0; e < 12; ++e) EXPECT_NEAR(out[1][n * 12 + e], slice[1][e], 1e-12);
      }
    }
  }
}

TEST(Vmap, Errors) {
  const std::vector<Spec> specs = {spec(DType::f32, {{"a", 3}}), spec(DType::f32, {})};
  auto f = Function::define("f", specs, [](Builder&, Args a) { return (a[0] * a[1]).sum("a"); });
  EXPECT_EQ(errorKind(f->vmap({.axis_size = 2, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "a"}).status()),
            ErrorKind::kAxisNameCollision);
  EXPECT_EQ(errorKind(f->vmap({.axis_size = 2, .in_axes = {mappedAxis(2), unmapped}, .axis_name = "n"}).status()),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(errorKind(f->vmap({.axis_size = 2, .in_axes = {mappedAxis(0)}, .axis_name = "n"}).status()),
            ErrorKind::kArityMismatch);
  EXPECT_EQ(errorKind(f->vmap({.axis_size = 0, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "n"}).status()),
            ErrorKind::kInvalidExtent);
  EXPECT_EQ(errorKind(f->vmap({.axis_size = 2, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "N"}).status()),
            ErrorKind::kInvalidAxisName);
  // axis_size mismatch at launch: the batched input has the wrong size.
  auto v = f->vmap({.axis_size = 4, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "n"});
  ASSERT_TRUE(v.ok());
  auto cpu = v->compileCpu();
  ASSERT_TRUE(cpu.ok());
  std::vector<float> three_batches(9), scalar(1), out(4);
  EXPECT_EQ(errorKind(cpu->launch({accy::bytes(three_batches), accy::bytes(scalar)}, {accy::writableBytes(out)})),
            ErrorKind::kInvalidBuffer);
}

TEST(Compose, VmapOfGradGradOfVmapVmapOfVmap) {
  const std::vector<Spec> specs = {spec(DType::f64, {}), spec(DType::f64, {{"p", 5}})};
  auto f = Function::define("f", specs, [](Builder&, Args a) { return (a[0] * a[1]).sin().sum("p"); });
  ASSERT_TRUE(f.ok());
  const std::vector<double> x = {0.1, 0.2, 0.3, 0.4, 0.5};
  auto dfdw = [&](double w) {  // analytic: sum cos(w x) x
    double s = 0;
    for (double xi : x) s += std::cos(w * xi) * xi;
    return s;
  };
  // vmap of grad.
  auto vg = f->grad({.wrt = {0}})->vmap({.axis_size = 3, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "n"});
  ASSERT_TRUE(vg.ok()) << vg.status();
  auto out = run(vg->program(), {{1, 2, 3}, x});
  for (int n = 0; n < 3; ++n) EXPECT_NEAR(out[0][n], dfdw(n + 1), 1e-12);
  // grad of (sum over n of vmap): d/dw_n = dfdw(w_n).
  auto vf = f->vmap({.axis_size = 3, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "n"});
  ASSERT_TRUE(vf.ok());
  const std::vector<Spec> batched = vf->program().inputSpecs();
  auto total = Function::define("total", batched, [&](Builder& b, Args a) { return vf->call(b, a)[0].sum("n"); });
  ASSERT_TRUE(total.ok()) << total.status();
  auto gv = total->grad({.wrt = {0}});
  ASSERT_TRUE(gv.ok()) << gv.status();
  out = run(gv->program(), {{1, 2, 3}, x});
  for (int n = 0; n < 3; ++n) EXPECT_NEAR(out[0][n], dfdw(n + 1), 1e-12);
  // vmap of vmap: a grid of w over (m, n).
  auto vv = vf->vmap({.axis_size = 2, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "m"});
  ASSERT_TRUE(vv.ok()) << vv.status();
  EXPECT_EQ(vv->program().outputSpecs()[0].axes, (std::vector<Axis>{{"m", 2}, {"n", 3}}));
  out = run(vv->program(), {{1, 2, 3, 4, 5, 6}, x});
  for (int k = 0; k < 6; ++k) {
    double want = 0;
    for (double xi : x) want += std::sin((k + 1) * xi);
    EXPECT_NEAR(out[0][k], want, 1e-12);
  }
  // And the composed transforms compile and run on the CPU like any program.
  auto cpu = vg->compileCpu();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::vector<double> w = {1, 2, 3}, res(3);
  ASSERT_TRUE(cpu->launch({accy::bytes(w), accy::bytes(x)}, {accy::writableBytes(res)}).ok());
  for (int n = 0; n < 3; ++n) EXPECT_NEAR(res[n], dfdw(n + 1), 1e-10);
}

// For each indexing and window op: vmap of grad and grad of vmap against
// the gradient of each slice.
TEST(Compose, VmapOfGradAndGradOfVmapOfIndexingOps) {
  std::mt19937 rng(17);
  constexpr int64_t kBatch = 3;
  const std::vector<Spec> specs = {spec(DType::f64, {{"a", 3}, {"b", 4}}), spec(DType::f64, {{"b", 4}})};
  int checked = 0;
  for (const GradCase& c : gradCases()) {
    const std::string name = c.name;
    if (name.find("take") != 0 && name != "scatter_add" && name != "pad" && name.find("window") != 0 &&
        name != "dot_two_axes") {
      continue;
    }
    ++checked;
    auto f = Function::define(c.name, specs, c.fn);
    ASSERT_TRUE(f.ok()) << name;
    auto g = f->grad({.wrt = {0, 1}});
    ASSERT_TRUE(g.ok()) << name << ": " << g.status();
    std::vector<std::vector<double>> slices;
    std::vector<double> batched;
    for (int64_t n = 0; n < kBatch; ++n) {
      slices.push_back(randomValues(12, rng, c.lo, c.hi));
      batched.insert(batched.end(), slices.back().begin(), slices.back().end());
    }
    const std::vector<double> y = randomValues(4, rng, c.lo, c.hi);
    auto batch = [&](const Function& fn) {
      return fn.vmap({.axis_size = kBatch, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "n"});
    };
    // vmap of grad: [n, a, b] and [n, b].
    auto vg = batch(*g);
    ASSERT_TRUE(vg.ok()) << name << ": " << vg.status();
    auto out = run(vg->program(), {batched, y});
    ASSERT_EQ(out.size(), 2u) << name;
    // grad of vmap: d/dx of the sum over n.
    auto vf = batch(*f);
    ASSERT_TRUE(vf.ok()) << name << ": " << vf.status();
    auto total = Function::define("total", vf->program().inputSpecs(),
                                  [&](Builder& b, Args a) { return vf->call(b, a)[0].sum("n"); });
    ASSERT_TRUE(total.ok()) << name << ": " << total.status();
    auto gv = total->grad({.wrt = {0}});
    ASSERT_TRUE(gv.ok()) << name << ": " << gv.status();
    auto gout = run(gv->program(), {batched, y});
    for (int64_t n = 0; n < kBatch; ++n) {
      auto slice = run(g->program(), {slices[n], y});
      for (int64_t e = 0; e < 12; ++e) {
        EXPECT_NEAR(out[0][n * 12 + e], slice[0][e], 1e-12) << name << " vmap of grad, n " << n;
        EXPECT_NEAR(gout[0][n * 12 + e], slice[0][e], 1e-12) << name << " grad of vmap, n " << n;
      }
      for (int64_t e = 0; e < 4; ++e) EXPECT_NEAR(out[1][n * 4 + e], slice[1][e], 1e-12) << name;
    }
  }
  EXPECT_EQ(checked, 9);
}

TEST(Simplify, TransformedProgramsHaveNoDeadOrDuplicateNodes) {
  const std::vector<Spec> specs = {spec(DType::f32, {}), spec(DType::f32, {{"point", 16}}),
                                   spec(DType::f32, {{"point", 16}})};
  auto f = Function::define("mismatch", specs, [](Builder&, Args a) {
    Value d = a[0].mul(a[1]).sin().sub(a[2]);
    return d.mul(d).sum("point");
  });
  auto g = f->valueAndGrad({.wrt = {0}});
  ASSERT_TRUE(g.ok());
  const Program& p = g->program();
  // Every node is used, and no two nodes are the same computation.
  std::vector<int> uses(p.nodes.size(), 0);
  for (const Node& n : p.nodes) {
    for (int32_t o : n.operands) ++uses[o];
  }
  for (int32_t o : p.outputs) ++uses[o];
  std::set<std::string> keys;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].op != OpCode::kInput) {
      EXPECT_GT(uses[i], 0) << "dead node %" << i << "\n" << toText(p);
    }
    Node key = p.nodes[i];
    if (key.op == OpCode::kInput) continue;
    std::string k = std::string(opName(key.op)) + specText(key.spec());
    for (int32_t o : key.operands) k += "," + std::to_string(o);
    for (auto& n : key.names) k += "," + n;
    for (auto v : key.ints) k += "," + std::to_string(v);
    k += "," + std::to_string(key.scalar);
    EXPECT_TRUE(keys.insert(k).second) << "duplicate " << k << "\n" << toText(p);
  }
}

}  // namespace
}  // namespace accy::tensor
