#include "tests/random_programs.h"

#include <algorithm>
#include <random>
#include <string>

#include "accy/accy.h"

namespace accy::testing {
namespace {

using tensor::Axis;
using tensor::Builder;
using tensor::DType;
using tensor::Value;

class Gen {
 public:
  Gen(uint32_t seed, const RandomOptions& o) : rng_(seed), o_(o) {
    for (const char* n : {"a", "b", "c", "d", "e"}) pool_.push_back(Axis{n, pick(1, o.max_extent)});
  }

  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }

  std::vector<Axis> randomAxes() {
    std::vector<Axis> axes;
    for (const Axis& a : pool_) {
      if (pick(0, 2) == 0) axes.push_back(a);
    }
    std::shuffle(axes.begin(), axes.end(), rng_);
    return axes;
  }

  bool has(const Value& v, const std::string& name) {
    for (const Axis& a : v.axes()) {
      if (a.name == name) return true;
    }
    return false;
  }

  // Bounded: every value stays within about [-4, 4].
  Value step(Builder& b, std::vector<Value>& vals) {
    const Value x = vals[pick(0, vals.size() - 1)];
    const Value y = vals[pick(0, vals.size() - 1)];
    switch (pick(0, 16)) {
      case 0:
        return x + y;
      case 1:
        return (x - y) * 0.5;
      case 2:
        return x * y.tanh();
      case 3:
        return x / (y.abs() + 1);
      case 4:
        return tensor::max(x, y);
      case 5:
        return tensor::min(x, y).neg();
      case 6:
        switch (pick(0, 6)) {
          case 0:
            return x.sin();
          case 1:
            return x.cos();
          case 2:
            return x.tanh().exp();
          case 3:
            return (x.abs() + 0.5).log();
          case 4:
            return x.abs().sqrt();
          case 5:
            return x.sigmoid();
          default:
            return (x.abs() + 0.5).pow(y.tanh());
        }
      case 7:
        return tensor::where(x.lt(y), x, y * 0.25);
      case 8:
        return tensor::where(x.ge(0.0), y, x.abs());
      case 9: {  // reductions, scaled back to a bounded range
        std::vector<Axis> axes = x.axes();
        if (axes.empty()) return x.cos();
        std::vector<std::string> names;
        int64_t count = 1;
        for (const Axis& a : axes) {
          if (pick(0, 1)) {
            names.push_back(a.name);
            count *= a.extent;
          }
        }
        if (names.empty()) {
          names.push_back(axes[0].name);
          count = axes[0].extent;
        }
        switch (pick(0, 4)) {
          case 0:
            return x.sum(names) / static_cast<double>(count);
          case 1:
            return x.max(names);
          case 2:
            return x.min(names);
          case 3:
            return x.mean(names);
          default:
            return (x.tanh() * 0.002 + 1).prod(names).log();
        }
      }
      case 10: {  // dot over a shared axis
        for (const Axis& a : x.axes()) {
          if (has(y, a.name)) return x.dot(y, a.name) / static_cast<double>(a.extent);
        }
        return x * y;
      }
      case 11: {  // transpose
        std::vector<std::string> order;
        for (const Axis& a : x.axes()) order.push_back(a.name);
        std::shuffle(order.begin(), order.end(), rng_);
        return x.transpose(order);
      }
      case 12: {  // broadcast to a missing pool axis
        for (const Axis& a : pool_) {
          if (!has(x, a.name)) return x.broadcast(a.name, a.extent);
        }
        return x;
      }
      case 13: {  // slice then rename the axis to a fresh name
        std::vector<Axis> axes = x.axes();
        if (axes.empty()) return x;
        const Axis a = axes[pick(0, axes.size() - 1)];
        const int64_t start = pick(0, a.extent - 1), stop = pick(start + 1, a.extent), st = pick(1, 3);
        return x.slice(a.name, start, stop, st).rename(a.name, "s" + std::to_string(fresh_++));
      }
      case 14: {  // merge two axes and split them back
        std::vector<Axis> axes = x.axes();
        if (axes.size() < 2) return x;
        return x.merge({axes[0].name, axes[1].name}, "m").split("m", axes[0].name, axes[1].name,
                                                              axes[1].extent);
      }
      case 15: {  // concat with itself along an axis, then slice back half
        std::vector<Axis> axes = x.axes();
        if (axes.empty()) return x;
        const Axis a = axes[pick(0, axes.size() - 1)];
        return tensor::concat(a.name, {x, x * 0.5}).slice(a.name, a.extent / 2, a.extent / 2 + a.extent);
      }
      default: {  // iota along an axis, as a small float
        std::vector<Axis> axes = x.axes();
        if (axes.empty()) return x;
        const Axis a = axes[pick(0, axes.size() - 1)];
        Value i = b.iota(a.name, a.extent, DType::i32).cast(x.dtype());
        return x + i / static_cast<double>(a.extent);
      }
    }
  }

  RandomCase make() {
    const int n_inputs = static_cast<int>(pick(1, 3));
    std::vector<tensor::Spec> specs;
    for (int i = 0; i < n_inputs; ++i) specs.push_back(tensor::spec(o_.dtype, randomAxes()));
    const int n_ops = static_cast<int>(pick(o_.min_ops, o_.max_ops));
    auto program = tensor::define("random", specs, [&](Builder& b, std::span<const Value> args) {
      std::vector<Value> vals(args.begin(), args.end());
      for (int s = 0; s < n_ops; ++s) vals.push_back(step(b, vals));
      std::vector<Value> outs = {vals.back()};
      if (pick(0, 3) == 0) outs.push_back(vals[vals.size() / 2]);
      return outs;
    });
    RandomCase c;
    c.program = *program;
    for (const tensor::Spec& s : specs) {
      std::vector<std::byte> bytes(s.byteSize());
      const int64_t n = s.elementCount();
      for (int64_t e = 0; e < n; ++e) {
        tensor::storeElement(s.dtype, uniform(-2, 2), &bytes[e * tensor::dtypeSize(s.dtype)]);
      }
      c.inputs.push_back(std::move(bytes));
    }
    return c;
  }

 private:
  std::mt19937 rng_;
  RandomOptions o_;
  std::vector<Axis> pool_;
  int fresh_ = 0;
};

}  // namespace

RandomCase randomProgram(uint32_t seed, const RandomOptions& options) { return Gen(seed, options).make(); }

}  // namespace accy::testing
