#include "compiler/transforms/grad.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "compiler/tensor/builder.h"
#include "compiler/tensor/loops.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/transforms/replay.h"

namespace accy::transforms {

using tensor::Axis;
using tensor::Builder;
using tensor::DType;
using tensor::Node;
using tensor::OpCode;
using tensor::Value;

namespace {

bool hasAxis(const std::vector<Axis>& axes, const std::string& name) {
  return std::any_of(axes.begin(), axes.end(), [&](const Axis& a) { return a.name == name; });
}

std::vector<std::string> names(const std::vector<Axis>& axes) {
  std::vector<std::string> out;
  for (const Axis& a : axes) out.push_back(a.name);
  return out;
}

// Gives `g` exactly the axes of `target`, in order: sums the axes `target`
// lacks, broadcasts the ones `g` lacks, and transposes.
Value fitTo(Value g, const std::vector<Axis>& target) {
  std::vector<std::string> extra;
  for (const Axis& a : g.axes()) {
    if (!hasAxis(target, a.name)) extra.push_back(a.name);
  }
  if (!extra.empty()) {
    // Sum with the kept axes already in the target's order: the transpose
    // is a view the reduction reads through, so the sum writes the target's
    // layout directly instead of a result copied transposed afterwards.
    std::vector<std::string> order;
    for (const Axis& a : target) {
      if (hasAxis(g.axes(), a.name)) order.push_back(a.name);
    }
    order.insert(order.end(), extra.begin(), extra.end());
    if (order != names(g.axes())) g = g.transpose(order);
    g = g.sum(extra);
  }
  for (const Axis& a : target) {
    if (!hasAxis(g.axes(), a.name)) g = g.broadcast(a.name, a.extent);
  }
  if (names(g.axes()) != names(target)) g = g.transpose(names(target));
  return g;
}

Value zerosLike(Builder& b, const tensor::Spec& spec) {
  Value z = b.constant(0, spec.dtype);
  for (const Axis& a : spec.axes) z = z.broadcast(a.name, a.extent);
  return z;
}

// A name not used by any axis of the program.
std::string freshName(const tensor::Program& p, int k) {
  for (int n = 0;; ++n) {
    std::string name = strCat("grad_", k, "_", n);
    bool used = false;
    for (const Node& node : p.nodes) used = used || hasAxis(node.axes, name);
    if (!used) return name;
  }
}

class Reverse {
 public:
  Reverse(Builder& b, const tensor::Program& p, std::vector<Value> v)
      : b_(b), p_(p), v_(std::move(v)), adj_(p.nodes.size()) {}

  void seed(int32_t id, Value g) { adj_[id] = g; }
  std::optional<Value> adjoint(int32_t id) const { return adj_[id]; }

  void run() {
    for (size_t i = p_.nodes.size(); i-- > 0;) {
      if (p_.nodes[i].op == OpCode::kScan) {
        // Its results' adjoints were gathered at their loop_result nodes.
        if (pending_.count(static_cast<int32_t>(i)) > 0) scanRule(static_cast<int32_t>(i));
        continue;
      }
      if (adj_[i].has_value() && tensor::isFloating(p_.nodes[i].dtype)) rule(static_cast<int32_t>(i), *adj_[i]);
    }
  }

 private:
  void add(int32_t id, Value contribution) {
    const Node& n = p_.nodes[id];
    if (!tensor::isFloating(n.dtype)) return;
    contribution = fitTo(contribution, n.axes);
    adj_[id] = adj_[id].has_value() ? *adj_[id] + contribution : contribution;
  }

  // g * x, or x itself when g is 1 everywhere (a loss's seed spread over a
  // sum: the adjoint of `(y * t).sum()` for y is t, not a copy of t times
  // 1) and x already has every axis g has.
  Value times(const Value& g, const Value& x) {
    const std::vector<Node>& nodes = b_.nodes();
    int32_t id = g.id();
    while (id >= 0 && static_cast<size_t>(id) < nodes.size() && nodes[id].op == OpCode::kBroadcast) {
      id = nodes[id].operands[0];
    }
    const bool ones = id >= 0 && static_cast<size_t>(id) < nodes.size() && nodes[id].op == OpCode::kConstant &&
                      nodes[id].scalar == 1 && g.dtype() == x.dtype();
    if (!ones) return g * x;
    for (const Axis& a : g.axes()) {
      if (!hasAxis(x.axes(), a.name)) return g * x;
    }
    return x;
  }

  // The rule for each op: adds the adjoint of every operand given the
  // adjoint `g` of node `id` (whose forward value is v_[id]).
  void rule(int32_t id, Value g) {
    const Node& n = p_.nodes[id];
    const Value z = v_[id];
    auto x = [&](size_t k) { return v_[n.operands[k]]; };
    auto op = [&](size_t k) { return n.operands[k]; };
    switch (n.op) {
#define ACCY_CASES_Leaf 1
#define ACCY_CASES_Compare 1
#include "compiler/tensor/op_cases.inc"
      // Integers and bits: no operand receives a gradient (a float
      // bitcast to an integer neither).
      case OpCode::kBitAnd:
      case OpCode::kBitOr:
      case OpCode::kBitXor:
      case OpCode::kBitNot:
      case OpCode::kShiftLeft:
      case OpCode::kShiftRight:
      case OpCode::kBitcast:
      case OpCode::kThreefryWord0:
      case OpCode::kThreefryWord1:
        return;
      case OpCode::kScan:
      case OpCode::kWhileLoop:
        return;  // their results' adjoints are met at loop_result
      case OpCode::kLoopResult: {
        const Node& loop = p_.nodes[op(0)];
        if (loop.op == OpCode::kWhileLoop) {
          b_.poison(makeError(ErrorKind::kNotDifferentiable,
                              strCat("grad of ", p_.name, ": the output depends on the while_loop %", op(0),
                                     " (result ", n.ints[0], "), whose trip count depends on the data; "
                                     "write it as a scan of a fixed length to differentiate it")));
        } else {
          pending_[op(0)][n.ints[0]] = g;
        }
        return;
      }
      case OpCode::kNeg:
        return add(op(0), -g);
      case OpCode::kAbs:  // sign(x) * g, with sign(0) = 0
        return add(op(0), tensor::where(x(0).gt(0.0), g, tensor::where(x(0).lt(0.0), -g, g * 0.0)));
      case OpCode::kSin:
        return add(op(0), g * x(0).cos());
      case OpCode::kCos:
        return add(op(0), -(g * x(0).sin()));
      case OpCode::kExp:
        return add(op(0), g * z);
      case OpCode::kLog:
        return add(op(0), g / x(0));
      case OpCode::kSqrt:
        return add(op(0), g * 0.5 / z);
      case OpCode::kTanh:
        return add(op(0), g * (1.0 - z * z));
      case OpCode::kSigmoid:
        return add(op(0), g * z * (1.0 - z));
      case OpCode::kErf:  // 2 / sqrt(pi) * exp(-x^2)
        return add(op(0), g * (x(0) * x(0)).neg().exp() * 1.1283791670955126);
      case OpCode::kFloor:  // piecewise constant: 0, also at the steps (as JAX)
      case OpCode::kCeil:
      case OpCode::kRound:
        return add(op(0), g * 0.0);
      case OpCode::kLog1p:
        return add(op(0), g / (x(0) + 1.0));
      case OpCode::kExpm1:  // exp(x) = expm1(x) + 1
        return add(op(0), g * (z + 1.0));
      case OpCode::kAdd:
        add(op(0), g);
        return add(op(1), g);
      case OpCode::kSub:
        add(op(0), g);
        return add(op(1), -g);
      case OpCode::kMul:
        add(op(0), times(g, x(1)));
        return add(op(1), times(g, x(0)));
      case OpCode::kDiv:
        add(op(0), g / x(1));
        return add(op(1), -(g * z / x(1)));
      case OpCode::kMax: {  // ties go to the left operand
        Value left = x(0).ge(x(1));
        add(op(0), tensor::where(left, g, g * 0.0));
        return add(op(1), tensor::where(left, g * 0.0, g));
      }
      case OpCode::kMin: {
        Value left = x(0).le(x(1));
        add(op(0), tensor::where(left, g, g * 0.0));
        return add(op(1), tensor::where(left, g * 0.0, g));
      }
      case OpCode::kPow:  // d/dy uses log(x), taken as 0 where x <= 0
        add(op(0), g * x(1) * x(0).pow(x(1) - 1.0));
        return add(op(1), tensor::where(x(0).gt(0.0), g * z * x(0).log(), g * 0.0));
      case OpCode::kWhere:
        add(op(1), tensor::where(x(0), g, g * 0.0));
        return add(op(2), tensor::where(x(0), g * 0.0, g));
      case OpCode::kCast:
        if (tensor::isFloating(p_.nodes[op(0)].dtype)) add(op(0), g.cast(p_.nodes[op(0)].dtype));
        return;
      case OpCode::kReduceSum:
        return add(op(0), g);  // fitTo broadcasts over the reduced axes
      case OpCode::kReduceMean: {
        int64_t count = 1;
        for (const Axis& a : p_.nodes[op(0)].axes) {
          if (std::find(n.names.begin(), n.names.end(), a.name) != n.names.end()) count *= a.extent;
        }
        return add(op(0), g / static_cast<double>(count));
      }
      case OpCode::kReduceProd:  // g * prod / x: undefined where x == 0
        return add(op(0), fitTo(g * z, p_.nodes[op(0)].axes) / x(0));
      case OpCode::kReduceMax:
      case OpCode::kReduceMin: {  // every element equal to the extreme gets g
        const auto& axes = p_.nodes[op(0)].axes;
        Value hit = x(0).eq(fitTo(z, axes));
        return add(op(0), tensor::where(hit, fitTo(g, axes), fitTo(g, axes) * 0.0));
      }
      case OpCode::kDot: {
        // Each operand's adjoint is itself a product: g contracted with the
        // other operand over the axes only that other operand and g share
        // (its free axes). A product, not g * x summed: the compiler runs
        // it as one (the weights' gradient of a convolution, a layer's
        // gradient), laid out with the other operand's free axes last.
        for (size_t k = 0; k < 2; ++k) {
          const std::vector<Axis>& mine = p_.nodes[op(k)].axes;
          std::vector<std::string> other_free;
          for (const Axis& a : p_.nodes[op(1 - k)].axes) {
            if (!hasAxis(mine, a.name)) other_free.push_back(a.name);
          }
          if (other_free.empty()) {
            add(op(k), g * x(1 - k));
          } else if (!windowedAdjoint(op(k), x(1 - k), g, other_free)) {
            add(op(k), tensor::dot(x(1 - k), g, other_free));
          }
        }
        return;
      }
      case OpCode::kTranspose:
      case OpCode::kBroadcast:
        return add(op(0), g);  // fitTo transposes or sums the new axis
      case OpCode::kRename:
        return add(op(0), g.rename(n.names[1], n.names[0]));
      case OpCode::kSplit:
        return add(op(0), g.merge({n.names[1], n.names[2]}, n.names[0]));
      case OpCode::kMerge: {
        // Split the merged axis back, innermost part last.
        const auto& axes = p_.nodes[op(0)].axes;
        Value r = g;
        std::string rest = n.names.back();
        for (size_t part = 0; part + 2 < n.names.size(); ++part) {
          int64_t inner = 1;
          for (size_t q = part + 1; q + 1 < n.names.size(); ++q) {
            for (const Axis& a : axes) {
              if (a.name == n.names[q]) inner *= a.extent;
            }
          }
          const std::string next = part + 3 == n.names.size() ? n.names[part + 1] : freshName(p_, part);
          r = r.split(rest, n.names[part], next, inner);
          rest = next;
        }
        return add(op(0), r);
      }
      case OpCode::kSlice: {
        // Scatter back: g_x[i] = sum_j g[j] * (i == start + step * j).
        const std::string& axis = n.names[0];
        const auto& axes = p_.nodes[op(0)].axes;
        int64_t extent = 0;
        for (const Axis& a : axes) {
          if (a.name == axis) extent = a.extent;
        }
        int64_t taken = 0;
        for (const Axis& a : n.axes) {
          if (a.name == axis) taken = a.extent;
        }
        const std::string j = freshName(p_, 0);
        // Positions in i32 where they fit (every target has it; WGSL has
        // no i64), else i64.
        const DType at = extent < (int64_t{1} << 31) ? DType::i32 : DType::i64;
        Value i_index = b_.iota(axis, extent, at);
        Value j_index = b_.iota(j, taken, at) * static_cast<double>(n.ints[2]) + static_cast<double>(n.ints[0]);
        Value hit = i_index.eq(j_index).cast(n.dtype);
        return add(op(0), g.rename(axis, j).dot(hit, j));
      }
      case OpCode::kTake: {  // the gradient goes where take read: the clamped index
        const Value idx = x(1);
        const double last = static_cast<double>(tensor::axisExtent(p_.nodes[op(0)].axes, n.names[0]) - 1);
        const Value clamped = idx.max(0.0).min(last);
        return add(op(0), tensor::scatterAdd(zerosLike(b_, p_.nodes[op(0)].spec()), n.names[0], clamped, g));
      }
      case OpCode::kScatterAdd: {  // dropped updates get no gradient
        add(op(0), g);
        const Value idx = x(1);
        const double extent = static_cast<double>(tensor::axisExtent(p_.nodes[op(0)].axes, n.names[0]));
        const Value kept = idx.ge(0.0).min(idx.lt(extent));
        const Value taken = tensor::take(g, n.names[0], idx);
        return add(op(2), kept.where(taken, taken * 0.0));
      }
      case OpCode::kPad: {
        const int64_t extent = tensor::axisExtent(p_.nodes[op(0)].axes, n.names[0]);
        return add(op(0), g.slice(n.names[0], n.ints[0], n.ints[0] + extent));
      }
      case OpCode::kWindow:
        return add(op(0), windowTranspose(n, g));
      case OpCode::kConcat: {
        int64_t offset = 0;
        for (size_t k = 0; k < n.operands.size(); ++k) {
          int64_t extent = 0;
          for (const Axis& a : p_.nodes[op(k)].axes) {
            if (a.name == n.names[0]) extent = a.extent;
          }
          add(op(k), g.slice(n.names[0], offset, offset + extent));
          offset += extent;
        }
        return;
      }
    }
  }

  // The adjoint a dot gives its operand `id` when that operand is a chain
  // of windows (stride 1, distinct axes) whose window axes the dot
  // contracts (a convolution's input): not the windowed adjoint (the
  // input's size times the taps, then summed back by window transposes),
  // but the transposed convolution written as a convolution. g padded by
  // (size - 1) * dilation on both sides of each window's axis and windowed
  // the same way reads, at position j of the windows' operand and window
  // row r, g[j - (size - 1 - r) * dilation]: the tap size - 1 - r that read
  // j. The other operand reversed along the window axes puts that tap's
  // weights at row r. One product, over the other operand's free axes and
  // the window axes, which compiles as the forward convolution does (pad,
  // windows, a dot). False when `id` is no such chain.
  bool windowedAdjoint(int32_t id, const Value& other, const Value& g, const std::vector<std::string>& other_free) {
    struct Tap {
      std::string axis, wax;
      int64_t size, dilation;
    };
    std::vector<Tap> taps;
    int32_t base = id;
    while (p_.nodes[base].op == OpCode::kWindow) {
      const Node& w = p_.nodes[base];
      const std::string& axis = w.names[0];
      const std::string& wax = w.names[1];
      if (w.ints[1] != 1 || !hasAxis(other.axes(), wax) || hasAxis(g.axes(), wax)) break;
      for (const Tap& t : taps) {
        if (t.axis == axis) return false;
      }
      taps.push_back({axis, wax, w.ints[0], w.ints[2]});
      base = w.operands[0];
    }
    if (taps.empty() || !tensor::isFloating(p_.nodes[base].dtype)) return false;
    // g laid out as the forward input is: the axes it shares with the other
    // operand (a convolution's output channels) before the windows' axes,
    // so the product steps through them as the forward one steps through
    // the input channels.
    std::vector<std::string> order, shared, spatial;
    for (const Axis& a : g.axes()) {
      bool is_tap = false;
      for (const Tap& t : taps) is_tap = is_tap || t.axis == a.name;
      const bool is_shared = std::find(other_free.begin(), other_free.end(), a.name) != other_free.end();
      (is_tap ? spatial : is_shared ? shared : order).push_back(a.name);
    }
    order.insert(order.end(), shared.begin(), shared.end());
    order.insert(order.end(), spatial.begin(), spatial.end());
    Value windows = g.transpose(order);
    Value reversed = other;
    std::vector<std::string> contracted = other_free;
    for (const Tap& t : taps) {
      const int64_t reach = (t.size - 1) * t.dilation;
      windows = windows.pad(t.axis, reach, reach).window(t.axis, t.wax, t.size, 1, t.dilation);
      std::vector<Value> rows;
      for (int64_t r = t.size; r-- > 0;) rows.push_back(reversed.slice(t.wax, r, r + 1));
      reversed = tensor::concat(t.wax, rows);
      contracted.push_back(t.wax);
    }
    add(base, tensor::dot(windows, reversed, contracted));
    return true;
  }

  // The transpose of window(axis, window_axis, size, stride, dilation):
  // operand element j receives every g[i, k] with i * stride + k * dilation
  // == j. With g spread out `stride` apart along the axis (zeros between),
  // window row k lands at offset k * dilation: a pad, and the rows add up.
  Value windowTranspose(const Node& n, Value g) {
    const std::string& axis = n.names[0];
    const std::string& wax = n.names[1];
    const int64_t size = n.ints[0], stride = n.ints[1], dilation = n.ints[2];
    const int64_t extent = tensor::axisExtent(p_.nodes[n.operands[0]].axes, axis);
    const int64_t count = tensor::axisExtent(n.axes, axis);
    if (stride == size && dilation == 1) {
      // Windows that tile the axis (pooling): element j is row j / size,
      // tap j % size of exactly one window, so the transpose is the merge
      // of the two axes (then zeros past the last whole window).
      std::vector<std::string> order;
      for (const Axis& a : n.axes) {
        if (a.name != wax) order.push_back(a.name);
        if (a.name == axis) order.push_back(wax);
      }
      if (order != names(g.axes())) g = g.transpose(order);
      Value merged = g.merge({axis, wax}, axis);
      return count * size == extent ? merged : merged.pad(axis, 0, extent - count * size);
    }
    int64_t spread = count;
    if (stride > 1) {
      const std::string r = freshName(p_, 1);
      tensor::Spec zeros = g.spec();
      zeros.axes.push_back(Axis{r, stride - 1});
      g = tensor::concat(r, {g.broadcast(r, 1), zerosLike(b_, zeros)}).merge({axis, r}, axis);
      spread = (count - 1) * stride + 1;
      g = g.slice(axis, 0, spread);
    }
    Value total;
    for (int64_t k = 0; k < size; ++k) {
      const int64_t before = k * dilation;
      Value row = g.slice(wax, k, k + 1).sum(wax).pad(axis, before, extent - before - spread);
      total = k == 0 ? row : total + row;
    }
    return total;
  }

  Builder& b_;
  const tensor::Program& p_;
  std::vector<Value> v_;
  std::vector<std::optional<Value>> adj_;
  std::map<int32_t, std::map<int64_t, Value>> pending_;  // scan id -> result -> adjoint

  // `v` with its `axis` in reverse order (a view of take at L-1-t).
  Value reversed(const Value& v, const std::string& axis, int64_t length, const std::string& tmp) {
    const Value index = (b_.constant(static_cast<double>(length - 1), DType::i32) - tensor::iota(b_, tmp, length));
    return tensor::take(v, axis, index).rename(tmp, axis);
  }

  // Reverse mode through a scan whose body was made to return, after its
  // own results, the carries entering each step (keepCarries): a scan
  // backwards over the steps whose body is the vector-Jacobian product of
  // the forward body at that step's carries and xs. Its carries are the
  // adjoints of the forward carries and the captures' adjoints summed over
  // the steps; its ys the adjoints of the xs, step by step.
  void scanRule(int32_t id) {
    const Node& n = p_.nodes[id];
    const std::map<int64_t, Value>& g = pending_[id];
    const size_t nc = static_cast<size_t>(n.ints[1]), nx = static_cast<size_t>(n.ints[2]);
    const int64_t length = n.ints[3];
    const size_t nz = n.operands.size() - nc - nx;
    const tensor::Program& body = p_.bodies[n.ints[0]];
    auto specOf = [&](int32_t node) { return p_.nodes[node].spec(); };
    if (length == 0) {  // the carries pass through
      for (size_t i = 0; i < nc; ++i) {
        if (g.count(i) > 0) add(n.operands[i], g.at(i));
      }
      return;
    }
    const size_t ny = body.outputs.size() - 2 * nc;
    const std::string& axis = n.names[0];
    // Which body inputs get an adjoint, and which body outputs give one.
    std::vector<int> wrt;
    for (size_t i = 0; i < body.inputs.size(); ++i) {
      if (tensor::isFloating(body.nodes[body.inputs[i]].dtype)) wrt.push_back(static_cast<int>(i));
    }
    std::vector<size_t> cot;  // body outputs (carries, then ys) with a cotangent input
    for (size_t k = 0; k < nc + ny; ++k) {
      if (tensor::isFloating(body.nodes[body.outputs[k]].dtype)) cot.push_back(k);
    }
    if (wrt.empty() || cot.empty()) return;
    // The vector-Jacobian product of the body: sum of each output times its
    // cotangent, differentiated.
    std::vector<tensor::Spec> vjp_specs = body.inputSpecs();
    for (size_t k : cot) vjp_specs.push_back(body.nodes[body.outputs[k]].spec());
    // The sum in f32 unless some output is f64 (targets without f64 run
    // the f32 programs' gradients).
    DType total_dtype = DType::f32;
    for (size_t k : cot) {
      if (body.nodes[body.outputs[k]].dtype == DType::f64) total_dtype = DType::f64;
    }
    auto vjp = tensor::define(strCat("vjp_", body.name), vjp_specs, [&](Builder& vb, std::span<const Value> a) {
      const std::vector<Value> v = replayNodes(vb, body, a.subspan(0, body.inputs.size()));
      Value total = vb.constant(0, total_dtype);
      for (size_t c = 0; c < cot.size(); ++c) {
        Value term = v[body.outputs[cot[c]]] * a[body.inputs.size() + c];
        if (!term.axes().empty()) term = term.sum(names(term.axes()));
        total = total + (term.dtype() == total_dtype ? term : term.cast(total_dtype));
      }
      return total;
    });
    if (!vjp.ok()) {
      b_.poison(vjp.status());
      return;
    }
    auto vjp_grad = gradient(*vjp, wrt, false);
    if (!vjp_grad.ok()) {
      b_.poison(vjp_grad.status());
      return;
    }
    const tensor::Program& vg = *vjp_grad;
    // Forward values: each step's entering carries, stacked along the axis.
    std::vector<Value> entering;
    for (size_t i = 0; i < nc; ++i) {
      Node r;
      r.op = OpCode::kLoopResult;
      r.ints = {static_cast<int64_t>(nc + ny + i)};
      entering.push_back(b_.record(std::move(r), {v_[id]}));
    }
    auto resultSpec = [&](size_t k) {
      tensor::Spec s = body.nodes[body.outputs[k]].spec();
      if (k >= nc) s.axes.insert(s.axes.begin(), Axis{axis, length});
      return s;
    };
    auto adjointOf = [&](size_t k) { return g.count(k) > 0 ? g.at(k) : zerosLike(b_, resultSpec(k)); };
    const std::string tmp = freshName(p_, 1000 + id);
    // Backward scan: carries = adjoints of the floating carries, then of the
    // floating captures; xs = entering carries, xs, adjoints of floating ys,
    // each reversed.
    std::vector<size_t> float_carries, float_captures, float_xs;
    for (int w : wrt) {
      const size_t i = static_cast<size_t>(w);
      (i < nc ? float_carries : i < nc + nx ? float_xs : float_captures).push_back(i);
    }
    std::vector<Value> init, xs;
    for (size_t k : cot) {
      if (k < nc) init.push_back(adjointOf(k));
    }
    const size_t carry_cots = init.size();
    for (size_t i : float_captures) init.push_back(zerosLike(b_, specOf(n.operands[i])));
    for (size_t i = 0; i < nc; ++i) xs.push_back(reversed(entering[i], axis, length, tmp));
    for (size_t j = 0; j < nx; ++j) xs.push_back(reversed(v_[n.operands[nc + j]], axis, length, tmp));
    for (size_t k : cot) {
      if (k >= nc) xs.push_back(reversed(adjointOf(k), axis, length, tmp));
    }
    std::vector<Value> captures;
    for (size_t k = 0; k < nz; ++k) captures.push_back(v_[n.operands[nc + nx + k]]);
    tensor::ScanResult back = tensor::scan(
        b_, {.axis = axis, .length = length}, init, xs,
        [&](Builder& bb, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<tensor::ScanStep> {
          std::vector<Value> args(x.begin(), x.begin() + nc + nx);
          args.insert(args.end(), captures.begin(), captures.end());
          for (size_t k = 0; k < carry_cots; ++k) args.push_back(c[k]);
          for (size_t k = nc + nx; k < x.size(); ++k) args.push_back(x[k]);
          const std::vector<Value> d = replayNodes(bb, vg, args);
          auto dOf = [&](size_t input) {
            const size_t at = std::find(wrt.begin(), wrt.end(), static_cast<int>(input)) - wrt.begin();
            return d[vg.outputs[at]];
          };
          tensor::ScanStep step;
          // Every floating carry input has an adjoint; the carries of the
          // backward scan are those with a cotangent, which are the same
          // (a floating carry output is a floating carry input).
          for (size_t i : float_carries) step.carry.push_back(dOf(i));
          for (size_t k = 0; k < float_captures.size(); ++k) {
            step.carry.push_back(c[carry_cots + k] + dOf(float_captures[k]));
          }
          for (size_t i : float_xs) step.ys.push_back(dOf(i));
          return step;
        });
    if (!b_.status().ok()) return;
    for (size_t k = 0; k < float_carries.size(); ++k) add(n.operands[float_carries[k]], back.carry[k]);
    for (size_t k = 0; k < float_captures.size(); ++k) {
      add(n.operands[float_captures[k]], back.carry[carry_cots + k]);
    }
    for (size_t k = 0; k < float_xs.size(); ++k) {
      add(n.operands[float_xs[k]], reversed(back.ys[k], axis, length, tmp));
    }
  }
};

// `p` with each scan's body also returning the carries entering each step,
// after its own results (the backward pass reads them: carries kept per
// step). Scans of length 0 are left as they are.
absl::StatusOr<tensor::Program> keepCarries(const tensor::Program& p) {
  tensor::Program out = p;
  std::set<int64_t> seen;
  for (size_t i = 0; i < out.nodes.size(); ++i) {
    const Node& n = out.nodes[i];
    if (n.op != OpCode::kScan || n.ints[3] == 0) continue;
    if (!seen.insert(n.ints[0]).second) {
      return makeError(ErrorKind::kUnimplemented,
                       strCat("grad of ", p.name, ": the scan %", i, " shares its body with another loop"));
    }
    tensor::Program& body = out.bodies[n.ints[0]];
    for (int64_t k = 0; k < n.ints[1]; ++k) body.outputs.push_back(body.inputs[k]);
  }
  if (auto st = tensor::validateProgram(out); !st.ok()) {
    return makeError(ErrorKind::kUnimplemented,
                     strCat("grad of ", p.name, ": keeping each step's carries: ", st.message()));
  }
  return out;
}

}  // namespace

absl::StatusOr<tensor::Program> gradient(const tensor::Program& original, const std::vector<int>& wrt,
                                         bool with_value) {
  ACCY_RETURN_IF_ERROR(tensor::validateProgram(original));
  ACCY_ASSIGN_OR_RETURN(const tensor::Program p, keepCarries(original));
  if (p.outputs.size() != 1) {
    return makeError(ErrorKind::kNonScalarOutput,
                     strCat("grad of ", p.name, ": needs exactly one output, the program has ", p.outputs.size()));
  }
  const tensor::Spec out = p.nodes[p.outputs[0]].spec();
  if (!out.axes.empty() || !tensor::isFloating(out.dtype)) {
    return makeError(ErrorKind::kNonScalarOutput,
                     strCat("grad of ", p.name, ": the output must be a floating scalar, it is ",
                            tensor::specText(out)));
  }
  if (wrt.empty()) {
    return makeError(ErrorKind::kInvalidArgument, strCat("grad of ", p.name, ": wrt lists no inputs"));
  }
  const std::vector<tensor::Spec> specs = p.inputSpecs();
  for (int w : wrt) {
    if (w < 0 || static_cast<size_t>(w) >= specs.size()) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("grad of ", p.name, ": wrt ", w, " is not an input (the program has ",
                              specs.size(), ")"));
    }
    if (!tensor::isFloating(specs[w].dtype)) {
      return makeError(ErrorKind::kUnsupportedDType,
                       strCat("grad of ", p.name, ": input ", w, " is ", tensor::dtypeName(specs[w].dtype),
                              "; gradients need f32 or f64 inputs"));
    }
  }
  const std::string name = strCat(with_value ? "value_and_grad_" : "grad_", p.name);
  auto derived = tensor::define(name, specs, [&](Builder& b, std::span<const Value> args) {
    std::vector<Value> v = replayNodes(b, p, args);
    Reverse reverse(b, p, v);
    reverse.seed(p.outputs[0], b.constant(1, out.dtype));
    reverse.run();
    std::vector<Value> results;
    if (with_value) results.push_back(v[p.outputs[0]]);
    for (int w : wrt) {
      auto g = reverse.adjoint(p.inputs[w]);
      results.push_back(g.has_value() ? *g : zerosLike(b, specs[w]));
    }
    return results;
  });
  if (!derived.ok()) return derived.status();
  return simplify(*derived);
}

}  // namespace accy::transforms
