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

  // `v` with exactly the axes of `like`, in its order: axes `v` lacks are
  // broadcast, axes `like` lacks averaged away.
  Value conform(const Value& v, const Value& like) {
    Value out = v;
    std::vector<std::string> extra;
    for (const Axis& a : v.axes()) {
      if (!has(like, a.name)) extra.push_back(a.name);
    }
    if (!extra.empty()) out = out.mean(extra);
    for (const Axis& a : like.axes()) {
      if (!has(out, a.name)) out = out.broadcast(a.name, a.extent);
    }
    std::vector<std::string> order;
    for (const Axis& a : like.axes()) order.push_back(a.name);
    return order.size() > 1 ? out.transpose(order) : out;
  }

  // A few random ops on `vals` in the builder `b` (a loop's body), their
  // last result conformed to `like` and kept within [-4, 4] (tanh * 4).
  Value bodyOps(Builder& b, std::vector<Value> vals, const Value& like) {
    const int n = static_cast<int>(pick(1, 3));
    for (int s = 0; s < n; ++s) vals.push_back(step(b, vals));
    return conform(vals.back(), like).tanh() * 4.0;
  }

  // A loop op (see RandomOptions::loop_percent), reading x, y and `vals`
  // (captured, where the loop is inside another's body they are the
  // body's values).
  Value loop(Builder& b, std::vector<Value>& vals, const Value& x, const Value& y) {
    ++depth_;
    const Value capture = vals[pick(0, vals.size() - 1)];
    Value result = x;
    if (!o_.while_loops || pick(0, 2) > 0) {
      // A scan: xs sliced along one of y's axes that x lacks, else none
      // (a fixed length, zero included).
      std::vector<Axis> along;
      for (const Axis& a : y.axes()) {
        if (!has(x, a.name)) along.push_back(a);
      }
      const bool with_xs = !along.empty() && pick(0, 3) > 0;
      const Axis axis = with_xs ? along[pick(0, along.size() - 1)] : Axis{"t" + std::to_string(fresh_++), pick(0, 4)};
      std::vector<Value> xs;
      if (with_xs) xs.push_back(y);
      tensor::ScanResult r = tensor::scan(
          b, {.axis = axis.name, .length = axis.extent}, {x}, xs,
          [&](Builder& body, std::span<const Value> c, std::span<const Value> xt) -> absl::StatusOr<tensor::ScanStep> {
            std::vector<Value> in = {c[0], capture};
            if (!xt.empty()) in.push_back(xt[0]);
            const Value next = (c[0] * 0.5 + bodyOps(body, in, c[0]) * 0.5);
            // A loop of length 0 has no ys (no axis has extent 0).
            return tensor::ScanStep{{next}, axis.extent > 0 ? std::vector<Value>{next.sin()} : std::vector<Value>{}};
          });
      // The carry, or the ys averaged over the loop's axis (when it ran).
      result = axis.extent > 0 && pick(0, 1) ? r.ys[0].mean(axis.name) : r.carry[0];
    } else {
      // A while loop: a counter up to a random bound, also ended early
      // once the value's largest magnitude passes a threshold.
      const int64_t bound = pick(0, 4);
      const double threshold = uniform(0.5, 4);
      std::vector<Value> r = tensor::whileLoop(
          b, {x, b.constant(0, DType::i32)},
          [&](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> {
            std::vector<std::string> names;
            for (const Axis& a : c[0].axes()) names.push_back(a.name);
            const Value size = names.empty() ? c[0].abs() : c[0].abs().max(names);
            return tensor::where(c[1].lt(static_cast<double>(bound)), size, size * 0.0 + 100.0).lt(threshold);
          },
          [&](Builder& body, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
            const Value next = c[0] * 0.75 + bodyOps(body, {c[0], capture}, c[0]) * 0.25 + 0.5;
            return std::vector<Value>{next, c[1] + 1};
          });
      result = r[0];
    }
    --depth_;
    return result;
  }

  // Bounded: every value stays within about [-4, 4].
  Value step(Builder& b, std::vector<Value>& vals) {
    const Value x = vals[pick(0, vals.size() - 1)];
    const Value y = vals[pick(0, vals.size() - 1)];
    if (o_.loop_percent > 0 && depth_ < 2 && pick(0, 99) < o_.loop_percent) return loop(b, vals, x, y);
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
  int depth_ = 0;  // loops around the op being made
};

}  // namespace

RandomCase randomProgram(uint32_t seed, const RandomOptions& options) { return Gen(seed, options).make(); }

}  // namespace accy::testing
