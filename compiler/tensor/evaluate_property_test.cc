// Property test: random programs over random named axes, evaluated by the
// reference evaluator and, independently, by loops written here over a
// name->index map representation.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "compiler/tensor/testing.h"
#include "gtest/gtest.h"

namespace accy::tensor {
namespace {

using Index = std::map<std::string, int64_t>;

// A dense tensor addressed by axis name.
struct Dense {
  std::vector<Axis> axes;
  std::vector<double> data;

  int64_t flat(const Index& idx) const {
    int64_t f = 0;
    for (const Axis& a : axes) f = f * a.extent + idx.at(a.name);
    return f;
  }
  double at(const Index& idx) const { return data[flat(idx)]; }
};

// Every index over `axes`, as name->index maps, row-major.
std::vector<Index> allIndices(const std::vector<Axis>& axes) {
  std::vector<Index> out{Index{}};
  for (const Axis& a : axes) {
    std::vector<Index> next;
    for (const Index& base : out) {
      for (int64_t i = 0; i < a.extent; ++i) {
        Index idx = base;
        idx[a.name] = i;
        next.push_back(idx);
      }
    }
    out = std::move(next);
  }
  return out;
}

bool has(const std::vector<Axis>& axes, const std::string& n) {
  for (const Axis& a : axes) if (a.name == n) return true;
  return false;
}

Dense elementwise(const Dense& x, const Dense& y, double (*f)(double, double)) {
  Dense out{x.axes, {}};
  for (const Axis& a : y.axes) if (!has(x.axes, a.name)) out.axes.push_back(a);
  for (const Index& idx : allIndices(out.axes)) out.data.push_back(f(x.at(idx), y.at(idx)));
  return out;
}

struct Case {
  std::vector<Spec> specs;
  std::vector<std::vector<double>> inputs;
  Dense expected;
  std::function<Value(Builder&, std::span<const Value>)> record;
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {
    const char* names[] = {"a", "b", "c", "d", "e", "f"};
    for (const char* n : names) pool_.push_back(Axis{n, pick(1, 5)});
  }

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  std::vector<Axis> randomAxes() {
    std::vector<Axis> axes;
    for (const Axis& a : pool_) if (pick(0, 2) == 0) axes.push_back(a);
    std::shuffle(axes.begin(), axes.end(), rng_);
    return axes;
  }

  // Builds a random program as a list of steps; each step records one op
  // and computes the same op on Dense values.
  Case make() {
    Case c;
    const int n_inputs = static_cast<int>(pick(1, 3));
    std::vector<Dense> dense;
    for (int i = 0; i < n_inputs; ++i) {
      Dense d{randomAxes(), {}};
      const int64_t n = Spec{DType::f64, d.axes}.elementCount();
      for (int64_t e = 0; e < n; ++e) d.data.push_back(std::uniform_real_distribution<double>(-2, 2)(rng_));
      c.specs.push_back(spec(DType::f64, d.axes));
      c.inputs.push_back(d.data);
      dense.push_back(d);
    }
    using Step = std::function<Value(std::vector<Value>&)>;
    std::vector<Step> steps;
    const int n_ops = static_cast<int>(pick(3, 9));
    for (int s = 0; s < n_ops; ++s) {
      const size_t i = pick(0, dense.size() - 1), j = pick(0, dense.size() - 1);
      const Dense x = dense[i], y = dense[j];
      switch (pick(0, 7)) {
        case 0: {  // add / mul / max
          const int which = static_cast<int>(pick(0, 2));
          static double (*fs[])(double, double) = {[](double a, double b) { return a + b; },
                                                    [](double a, double b) { return a * b; },
                                                    [](double a, double b) { return std::max(a, b); }};
          dense.push_back(elementwise(x, y, fs[which]));
          steps.push_back([=](std::vector<Value>& v) {
            return which == 0 ? v[i] + v[j] : which == 1 ? v[i] * v[j] : v[i].max(v[j]);
          });
          break;
        }
        case 1: {  // sin(x) - tanh(y)
          dense.push_back(elementwise(x, y, [](double a, double b) { return std::sin(a) - std::tanh(b); }));
          steps.push_back([=](std::vector<Value>& v) { return v[i].sin() - v[j].tanh(); });
          break;
        }
        case 2: {  // sum or max over a random subset of x's axes
          if (x.axes.empty()) continue;
          std::vector<std::string> names;
          for (const Axis& a : x.axes) if (pick(0, 1)) names.push_back(a.name);
          if (names.empty()) names.push_back(x.axes[0].name);
          const bool use_max = pick(0, 1);
          Dense out;
          for (const Axis& a : x.axes)
            if (std::find(names.begin(), names.end(), a.name) == names.end()) out.axes.push_back(a);
          out.data.assign(Spec{DType::f64, out.axes}.elementCount(), use_max ? -INFINITY : 0.0);
          for (const Index& idx : allIndices(x.axes)) {
            double& slot = out.data[out.flat(idx)];
            slot = use_max ? std::max(slot, x.at(idx)) : slot + x.at(idx);
          }
          dense.push_back(out);
          steps.push_back([=](std::vector<Value>& v) { return use_max ? v[i].max(names) : v[i].sum(names); });
          break;
        }
        case 3: {  // dot over an axis both share
          std::vector<std::string> shared;
          for (const Axis& a : x.axes) if (has(y.axes, a.name)) shared.push_back(a.name);
          if (shared.empty()) continue;
          const std::string k = shared[pick(0, shared.size() - 1)];
          Dense prod = elementwise(x, y, [](double a, double b) { return a * b; });
          Dense out;
          for (const Axis& a : prod.axes) if (a.name != k) out.axes.push_back(a);
          out.data.assign(Spec{DType::f64, out.axes}.elementCount(), 0.0);
          for (const Index& idx : allIndices(prod.axes)) out.data[out.flat(idx)] += prod.at(idx);
          dense.push_back(out);
          steps.push_back([=](std::vector<Value>& v) { return dot(v[i], v[j], k); });
          break;
        }
        case 4: {  // transpose to a random order
          std::vector<Axis> order = x.axes;
          std::shuffle(order.begin(), order.end(), rng_);
          std::vector<std::string> names;
          for (const Axis& a : order) names.push_back(a.name);
          Dense out{order, {}};
          for (const Index& idx : allIndices(order)) out.data.push_back(x.at(idx));
          dense.push_back(out);
          steps.push_back([=](std::vector<Value>& v) { return v[i].transpose(names); });
          break;
        }
        case 5: {  // slice a random axis
          if (x.axes.empty()) continue;
          const Axis ax = x.axes[pick(0, x.axes.size() - 1)];
          const int64_t start = pick(0, ax.extent - 1), stop = pick(start + 1, ax.extent), step = pick(1, 2);
          // The sliced axis gets a fresh name so that every name keeps one
          // extent across the program.
          const std::string fresh = "s" + std::to_string(fresh_++);
          Dense out{x.axes, {}};
          for (Axis& a : out.axes) {
            if (a.name == ax.name) a = Axis{fresh, (stop - start + step - 1) / step};
          }
          for (Index idx : allIndices(out.axes)) {
            idx[ax.name] = start + idx[fresh] * step;
            out.data.push_back(x.at(idx));
          }
          dense.push_back(out);
          steps.push_back([=](std::vector<Value>& v) {
            return v[i].slice(ax.name, start, stop, step).rename(ax.name, fresh);
          });
          break;
        }
        case 6: {  // broadcast to a pool axis it lacks, or concat with itself
          std::vector<Axis> missing;
          for (const Axis& a : pool_) if (!has(x.axes, a.name)) missing.push_back(a);
          if (missing.empty()) continue;
          const Axis nw = missing[pick(0, missing.size() - 1)];
          Dense out{x.axes, {}};
          out.axes.push_back(nw);
          for (const Index& idx : allIndices(out.axes)) out.data.push_back(x.at(idx));
          dense.push_back(out);
          steps.push_back([=](std::vector<Value>& v) { return v[i].broadcast(nw.name, nw.extent); });
          break;
        }
        case 7: {  // merge two axes then split them back under other names
          if (x.axes.size() < 2) continue;
          const Axis p = x.axes[0], q = x.axes[1];
          // merge(p, q) -> "m", then split m into (p, q) again: identity.
          dense.push_back(x);
          steps.push_back([=](std::vector<Value>& v) {
            return v[i].merge({p.name, q.name}, "m").split("m", p.name, q.name, q.extent);
          });
          break;
        }
      }
    }
    c.expected = dense.back();
    c.record = [steps, n_inputs](Builder&, std::span<const Value> args) {
      std::vector<Value> v(args.begin(), args.end());
      (void)n_inputs;
      for (const Step& s : steps) v.push_back(s(v));
      return v.back();
    };
    return c;
  }

 private:
  std::mt19937 rng_;
  std::vector<Axis> pool_;
  int fresh_ = 0;
};

TEST(EvaluateProperty, RandomProgramsMatchDirectLoops) {
  int checked = 0;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    Generator gen(seed);
    Case c = gen.make();
    auto program = define("random", c.specs, c.record);
    ASSERT_TRUE(program.ok()) << "seed " << seed << ": " << program.status();
    ASSERT_EQ(program->outputSpecs()[0].axes, c.expected.axes) << "seed " << seed;
    std::vector<std::span<const std::byte>> views;
    for (const auto& in : c.inputs) views.push_back(accy::bytes(in));
    auto out = testing::evalDoubles(*program, views);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].size(), c.expected.data.size());
    for (size_t e = 0; e < c.expected.data.size(); ++e) {
      ASSERT_NEAR((*out)[0][e], c.expected.data[e], 1e-12 * (1 + std::fabs(c.expected.data[e])))
          << "seed " << seed << " element " << e << "\n" << toText(*program);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 400);
}

}  // namespace
}  // namespace accy::tensor
