#include "compiler/tensor/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

#include "base/strings.h"
#include "base/errors.h"
#include "compiler/tensor/scalar_ops.h"
#include "base/status_macros.h"

namespace accy::tensor {
namespace {

// Visits every multi-index of `axes` in row-major order.
template <typename F>
void forEachIndex(const std::vector<Axis>& axes, F&& visit) {
  int64_t count = 1;
  for (const Axis& a : axes) count *= a.extent;
  std::vector<int64_t> idx(axes.size(), 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    visit(idx, flat);
    for (size_t d = axes.size(); d-- > 0;) {
      if (++idx[d] < axes[d].extent) break;
      idx[d] = 0;
    }
  }
}

std::optional<size_t> position(const std::vector<Axis>& axes, std::string_view name) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name == name) return i;
  }
  return std::nullopt;
}

// Flat row-major offset into `axes` of the element whose index along each
// axis is `index_of(axis position, axis)`.
template <typename F>
int64_t offset(const std::vector<Axis>& axes, F&& index_of) {
  int64_t flat = 0;
  for (size_t j = 0; j < axes.size(); ++j) flat = flat * axes[j].extent + index_of(j, axes[j]);
  return flat;
}

// Offset into `operand_axes` of the element that the result element at
// `idx` (over `result_axes`) reads, matching axes by name. Operand axes that
// the result lacks read index 0 (there are none for elementwise ops).
int64_t byName(const std::vector<Axis>& operand_axes, const std::vector<Axis>& result_axes,
               const std::vector<int64_t>& idx) {
  return offset(operand_axes, [&](size_t, const Axis& a) -> int64_t {
    auto p = position(result_axes, a.name);
    return p ? idx[*p] : 0;
  });
}

class Evaluator {
 public:
  explicit Evaluator(const Program& program) : program_(program) {}

  absl::Status run(absl::Span<const std::span<const std::byte>> inputs) {
    ACCY_RETURN_IF_ERROR(validateProgram(program_));
    if (inputs.size() != program_.inputs.size()) {
      return makeError(ErrorKind::kInvalidBuffer,
                       strCat("evaluate ", program_.name, ": expected ",
                                    program_.inputs.size(), " input buffers, got ", inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Spec s = program_.nodes[program_.inputs[i]].spec();
      if (static_cast<int64_t>(inputs[i].size()) != s.byteSize()) {
        return makeError(ErrorKind::kInvalidBuffer,
                         strCat("evaluate ", program_.name, ": input ", i, " (",
                                      specText(s), ") needs ", s.byteSize(), " bytes, got ",
                                      inputs[i].size()));
      }
    }
    std::vector<std::vector<double>> values;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Node& node = program_.nodes[program_.inputs[i]];
      const int64_t size = dtypeSize(node.dtype);
      std::vector<double> v(node.spec().elementCount());
      for (size_t e = 0; e < v.size(); ++e) v[e] = loadElement(node.dtype, &inputs[i][e * size]);
      values.push_back(std::move(v));
    }
    runValues(std::move(values));
    return absl::OkStatus();
  }

  // Evaluates a validated program on inputs held as doubles (a loop body's).
  void runValues(std::vector<std::vector<double>> inputs) {
    inputs_ = std::move(inputs);
    values_.resize(program_.nodes.size());
    for (size_t i = 0; i < program_.nodes.size(); ++i) {
      values_[i] = compute(program_.nodes[i]);
    }
  }

  // The program's outputs, after runValues.
  std::vector<std::vector<double>> outputs() {
    std::vector<std::vector<double>> out;
    for (int32_t id : program_.outputs) out.push_back(values_[id]);
    return out;
  }

  std::vector<std::vector<double>>& values() { return values_; }

 private:
  const std::vector<double>& in(const Node& node, size_t k) { return values_[node.operands[k]]; }
  const Node& operandNode(const Node& node, size_t k) { return program_.nodes[node.operands[k]]; }

  std::vector<double> compute(const Node& node) {
    std::vector<double> out(node.spec().elementCount());
    switch (opCategory(node.op)) {
      case OpCategory::Leaf:
        leaf(node, out);
        break;
      case OpCategory::Loop:
        loop(node, out);
        break;
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Compare:
      case OpCategory::Select:
      case OpCategory::Cast:
      case OpCategory::Random:
        elementwise(node, out);
        break;
      case OpCategory::Reduce:
        reduce(node, out);
        break;
      case OpCategory::Dot:
        dot(node, out);
        break;
      case OpCategory::Layout:
        layout(node, out);
        break;
      case OpCategory::Index:
        index(node, out);
        break;
    }
    return out;
  }

  void leaf(const Node& node, std::vector<double>& out) {
    if (node.op == OpCode::kInput) {
      out = inputs_[node.ints[0]];
    } else if (node.op == OpCode::kConstant) {
      out[0] = convertValue(node.scalar, DType::f64, node.dtype);
    } else {  // iota
      for (size_t e = 0; e < out.size(); ++e) out[e] = static_cast<double>(e);
    }
  }

  void elementwise(const Node& node, std::vector<double>& out) {
    forEachIndex(node.axes, [&](const std::vector<int64_t>& idx, int64_t flat) {
      auto arg = [&](size_t k) { return in(node, k)[byName(operandNode(node, k).axes, node.axes, idx)]; };
      const DType t = operandNode(node, 0).dtype;
      switch (opCategory(node.op)) {
        case OpCategory::Unary:
          out[flat] = applyUnary(node.op, t, arg(0));
          break;
        case OpCategory::Binary:
        case OpCategory::Compare:
          out[flat] = applyBinary(node.op, t, arg(0), arg(1));
          break;
        case OpCategory::Select:
          out[flat] = arg(0) != 0 ? arg(1) : arg(2);
          break;
        case OpCategory::Cast:
          out[flat] = node.op == OpCode::kBitcast ? bitcastValue(arg(0), t, node.dtype)
                                                  : convertValue(arg(0), t, node.dtype);
          break;
        case OpCategory::Random: {
          auto word = [&](size_t k) { return static_cast<uint32_t>(toInt64(arg(k))); };
          const auto [x0, x1] = threefry2x32(word(0), word(1), word(2), word(3));
          out[flat] = node.op == OpCode::kThreefryWord0 ? x0 : x1;
          break;
        }
        case OpCategory::Leaf:
        case OpCategory::Reduce:
        case OpCategory::Dot:
        case OpCategory::Layout:
        case OpCategory::Index:
        case OpCategory::Loop:
          break;
      }
    });
  }

  // scan and while_loop run their bodies step by step, each step's carries
  // (and a scan's slices of xs) the next step's inputs; loop_result reads
  // one of the loop's results.
  void loop(const Node& node, std::vector<double>& out) {
    const size_t id = static_cast<size_t>(&node - program_.nodes.data());
    if (node.op == OpCode::kLoopResult) {
      out = loop_results_[node.operands[0]][node.ints[0]];
      return;
    }
    const bool scan = node.op == OpCode::kScan;
    const size_t carries = static_cast<size_t>(scan ? node.ints[1] : node.ints[2]);
    const size_t xs = scan ? static_cast<size_t>(node.ints[2]) : 0;
    std::vector<std::vector<double>> carry;
    for (size_t i = 0; i < carries; ++i) carry.push_back(in(node, i));
    std::vector<std::vector<double>> results;
    if (scan) {
      const Program& body = program_.bodies[node.ints[0]];
      const int64_t length = node.ints[3];
      std::vector<std::vector<double>> ys;
      for (size_t j = carries; j < body.outputs.size(); ++j) {
        ys.emplace_back(length * body.nodes[body.outputs[j]].spec().elementCount());
      }
      for (int64_t t = 0; t < length; ++t) {
        std::vector<std::vector<double>> args = carry;
        for (size_t j = 0; j < xs; ++j) args.push_back(sliceAlong(operandNode(node, carries + j), in(node, carries + j), node.names[0], t));
        for (size_t k = carries + xs; k < node.operands.size(); ++k) args.push_back(in(node, k));
        Evaluator step(body);
        step.runValues(std::move(args));
        std::vector<std::vector<double>> outs = step.outputs();
        for (size_t i = 0; i < carries; ++i) carry[i] = std::move(outs[i]);
        for (size_t j = 0; j < ys.size(); ++j) {
          const std::vector<double>& y = outs[carries + j];
          std::copy(y.begin(), y.end(), ys[j].begin() + t * static_cast<int64_t>(y.size()));
        }
      }
      results = std::move(carry);
      for (auto& y : ys) results.push_back(std::move(y));
    } else {
      const Program& cond = program_.bodies[node.ints[0]];
      const Program& body = program_.bodies[node.ints[1]];
      auto args = [&] {
        std::vector<std::vector<double>> a = carry;
        for (size_t k = carries; k < node.operands.size(); ++k) a.push_back(in(node, k));
        return a;
      };
      while (true) {
        Evaluator test(cond);
        test.runValues(args());
        if (test.outputs()[0][0] == 0) break;
        Evaluator step(body);
        step.runValues(args());
        carry = step.outputs();
      }
      results = std::move(carry);
    }
    loop_results_[id] = std::move(results);
    out.assign(1, 0);
  }

  // Step `t` of `v` (over `x`'s axes) along `axis`: the elements whose index
  // along it is t, in row-major order of the other axes.
  static std::vector<double> sliceAlong(const Node& x, const std::vector<double>& v, std::string_view axis, int64_t t) {
    const size_t at = *position(x.axes, axis);
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < x.axes.size(); ++d) {
      if (d < at) outer *= x.axes[d].extent;
      if (d > at) inner *= x.axes[d].extent;
    }
    const int64_t extent = x.axes[at].extent;
    std::vector<double> out(outer * inner);
    for (int64_t o = 0; o < outer; ++o) {
      std::copy_n(v.begin() + (o * extent + t) * inner, inner, out.begin() + o * inner);
    }
    return out;
  }

  void reduce(const Node& node, std::vector<double>& out) {
    const Node& a = operandNode(node, 0);
    const std::vector<double>& x = in(node, 0);
    std::vector<bool> started(out.size(), false);
    std::vector<int64_t> count(out.size(), 0);
    const bool compensated = !node.ints.empty();  // sum or mean of floats (ops.inc)
    forEachIndex(a.axes, [&](const std::vector<int64_t>& idx, int64_t flat) {
      const int64_t r = byName(node.axes, a.axes, idx);
      const double v = x[flat];
      ++count[r];
      if (!started[r]) {
        out[r] = v;
        started[r] = true;
        return;
      }
      switch (node.op) {
        case OpCode::kReduceSum:
        case OpCode::kReduceMean:
          // Compensated: the sum in double, rounded once at the end.
          out[r] = compensated ? out[r] + v : applyBinary(OpCode::kAdd, node.dtype, out[r], v);
          break;
        case OpCode::kReduceProd:
          out[r] = applyBinary(OpCode::kMul, node.dtype, out[r], v);
          break;
        case OpCode::kReduceMax:
          out[r] = applyBinary(OpCode::kMax, node.dtype, out[r], v);
          break;
        case OpCode::kReduceMin:
          out[r] = applyBinary(OpCode::kMin, node.dtype, out[r], v);
          break;
#define ACCY_CASES_ALL
#define ACCY_CASES_Reduce 0
#include "compiler/tensor/op_cases.inc"
          break;
      }
    });
    if (compensated && node.op == OpCode::kReduceSum) {
      for (double& o : out) o = convertValue(o, DType::f64, node.dtype);
    }
    if (node.op == OpCode::kReduceMean) {
      for (size_t r = 0; r < out.size(); ++r) {
        out[r] = isFloating(node.dtype)
                     ? out[r] / static_cast<double>(count[r])
                     : applyBinary(OpCode::kDiv, node.dtype, out[r], static_cast<double>(count[r]));
      }
    }
  }

  void dot(const Node& node, std::vector<double>& out) {
    const Node& a = operandNode(node, 0);
    const Node& b = operandNode(node, 1);
    // The contracted axes, as the left operand orders them: the sum runs
    // over them row-major, as a reduction over the same axes would.
    std::vector<Axis> contracted;
    for (const Axis& ax : a.axes) {
      if (std::find(node.names.begin(), node.names.end(), ax.name) != node.names.end()) contracted.push_back(ax);
    }
    forEachIndex(node.axes, [&](const std::vector<int64_t>& idx, int64_t flat) {
      double acc = 0;
      forEachIndex(contracted, [&](const std::vector<int64_t>& k, int64_t) {
        auto index_of = [&](size_t, const Axis& ax) -> int64_t {
          if (auto p = position(contracted, ax.name)) return k[*p];
          return idx[*position(node.axes, ax.name)];
        };
        const double product = applyBinary(OpCode::kMul, node.dtype, in(node, 0)[offset(a.axes, index_of)],
                                           in(node, 1)[offset(b.axes, index_of)]);
        acc = applyBinary(OpCode::kAdd, node.dtype, acc, product);
      });
      out[flat] = acc;
    });
  }

  // take and scatter_add. For each element of take's result (row-major),
  // the x element it reads: the index read from `indices` clamped to
  // [0, extent) for take, or nullopt when out of range for scatter_add.
  template <typename F>
  void forEachTaken(const Node& node, bool clamp, F&& visit) {
    const Node& x = operandNode(node, 0);
    const Node& ind = operandNode(node, 1);
    const std::string& axis = node.names[0];
    const int64_t extent = x.axes[*position(x.axes, axis)].extent;
    std::vector<Axis> taken = x.axes;
    {
      std::vector<Axis> fresh;
      for (const Axis& a : ind.axes) {
        if (!position(x.axes, a.name)) fresh.push_back(a);
      }
      const size_t at = *position(x.axes, axis);
      taken.erase(taken.begin() + at);
      taken.insert(taken.begin() + at, fresh.begin(), fresh.end());
    }
    forEachIndex(taken, [&](const std::vector<int64_t>& idx, int64_t flat) {
      const double raw = in(node, 1)[byName(ind.axes, taken, idx)];
      double i = raw;
      if (raw < 0 || raw >= static_cast<double>(extent)) {
        if (!clamp) return;
        i = raw < 0 ? 0 : static_cast<double>(extent - 1);
      }
      const int64_t src = offset(x.axes, [&](size_t, const Axis& ax) -> int64_t {
        return ax.name == axis ? static_cast<int64_t>(i) : idx[*position(taken, ax.name)];
      });
      visit(taken, idx, flat, src);
    });
  }

  void index(const Node& node, std::vector<double>& out) {
    if (node.op == OpCode::kTake) {
      forEachTaken(node, true, [&](const std::vector<Axis>&, const std::vector<int64_t>&, int64_t flat,
                                   int64_t src) { out[flat] = in(node, 0)[src]; });
      return;
    }
    // scatter_add: x plus the sum of the updates that land on each element,
    // summed from 0 in the row-major order of the indices' own axes (the
    // order of take's result), or the one update when the indices have no
    // axes of their own (docs/SEMANTICS.md).
    const Node& x = operandNode(node, 0);
    const Node& u = operandNode(node, 2);
    bool own = false;
    for (const Axis& a : operandNode(node, 1).axes) own = own || !position(x.axes, a.name);
    std::vector<double> sums(out.size(), 0.0);
    forEachTaken(node, false, [&](const std::vector<Axis>& taken, const std::vector<int64_t>& idx, int64_t,
                                  int64_t dst) {
      const double v = in(node, 2)[byName(u.axes, taken, idx)];
      sums[dst] = own ? applyBinary(OpCode::kAdd, node.dtype, sums[dst], v) : v;
    });
    for (size_t e = 0; e < out.size(); ++e) out[e] = applyBinary(OpCode::kAdd, node.dtype, in(node, 0)[e], sums[e]);
  }

  void layout(const Node& node, std::vector<double>& out) {
    const Node& a = operandNode(node, 0);
    if (node.op == OpCode::kConcat) {
      const std::string& name = node.names[0];
      int64_t start = 0;
      for (size_t p = 0; p < node.operands.size(); ++p) {
        const Node& piece = operandNode(node, p);
        forEachIndex(piece.axes, [&](const std::vector<int64_t>& idx, int64_t flat) {
          const int64_t r = offset(node.axes, [&](size_t, const Axis& ax) -> int64_t {
            const int64_t i = idx[*position(piece.axes, ax.name)];
            return ax.name == name ? start + i : i;
          });
          out[r] = in(node, p)[flat];
        });
        start += piece.axes[*position(piece.axes, name)].extent;
      }
      return;
    }
    // Every other layout op reads one operand element per result element;
    // `source(idx, axis)` is the operand index along `axis` for result `idx`.
    auto at = [&](const std::vector<int64_t>& idx, std::string_view name) {
      return idx[*position(node.axes, name)];
    };
    if (node.op == OpCode::kPad) {
      const size_t p = *position(node.axes, node.names[0]);
      const int64_t before = node.ints[0];
      const int64_t extent = a.axes[p].extent;
      const double value = convertValue(node.scalar, DType::f64, node.dtype);
      forEachIndex(node.axes, [&](const std::vector<int64_t>& idx, int64_t flat) {
        const int64_t i = idx[p] - before;
        if (i < 0 || i >= extent) {
          out[flat] = value;
          return;
        }
        std::vector<int64_t> inner = idx;
        inner[p] = i;
        out[flat] = in(node, 0)[offset(a.axes, [&](size_t j, const Axis&) { return inner[j]; })];
      });
      return;
    }
    forEachIndex(node.axes, [&](const std::vector<int64_t>& idx, int64_t flat) {
      const int64_t src = offset(a.axes, [&](size_t, const Axis& ax) -> int64_t {
        switch (node.op) {
          case OpCode::kRename:
            return at(idx, ax.name == node.names[0] ? node.names[1] : ax.name);
          case OpCode::kSplit:
            if (ax.name == node.names[0]) {
              return at(idx, node.names[1]) * node.ints[0] + at(idx, node.names[2]);
            }
            return at(idx, ax.name);
          case OpCode::kMerge: {
            const size_t parts = node.names.size() - 1;
            int64_t inner = 1;  // product of the extents of later listed axes
            for (size_t p = parts; p-- > 0;) {
              const int64_t e = a.axes[*position(a.axes, node.names[p])].extent;
              if (node.names[p] == ax.name) return (at(idx, node.names.back()) / inner) % e;
              inner *= e;
            }
            return at(idx, ax.name);
          }
          case OpCode::kSlice:
            if (ax.name == node.names[0]) return node.ints[0] + at(idx, ax.name) * node.ints[2];
            return at(idx, ax.name);
          case OpCode::kWindow:
            if (ax.name == node.names[0]) {
              return at(idx, ax.name) * node.ints[1] + at(idx, node.names[1]) * node.ints[2];
            }
            return at(idx, ax.name);
          case OpCode::kPad:  // handled below
            return at(idx, ax.name);
          case OpCode::kTranspose: case OpCode::kBroadcast: case OpCode::kConcat:
#define ACCY_CASES_ALL
#define ACCY_CASES_Layout 0
#include "compiler/tensor/op_cases.inc"
            return at(idx, ax.name);
        }
        return at(idx, ax.name);  // not reached: the switch covers every op
      });
      out[flat] = in(node, 0)[src];
    });
  }

  const Program& program_;
  std::vector<std::vector<double>> inputs_;
  std::vector<std::vector<double>> values_;
  std::map<size_t, std::vector<std::vector<double>>> loop_results_;  // by loop node
};

}  // namespace

double loadElement(DType dtype, const std::byte* p) {
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::bool_:
      return std::to_integer<uint8_t>(*p) != 0 ? 1.0 : 0.0;
    case DType::u32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0;
}

void storeElement(DType dtype, double value, std::byte* p) {
  // i64 values are held in doubles: 2^63 is what INT64_MAX (and its
  // neighbours) round to, and what a saturating cast gives, so it stores
  // as INT64_MAX (toInt64 saturates) rather than wrapping to INT64_MIN.
  const double v = dtype == DType::i64 ? value : convertValue(value, isFloating(dtype) ? DType::f64 : dtype, dtype);
  switch (dtype) {
    case DType::f32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::f64:
      std::memcpy(p, &v, 8);
      return;
    case DType::i32: {
      const int32_t i = static_cast<int32_t>(v);
      std::memcpy(p, &i, 4);
      return;
    }
    case DType::i64: {
      const int64_t i = toInt64(v);
      std::memcpy(p, &i, 8);
      return;
    }
    case DType::bool_:
      *p = std::byte{static_cast<uint8_t>(v != 0 ? 1 : 0)};
      return;
    case DType::u32: {
      const uint32_t u = static_cast<uint32_t>(v);
      std::memcpy(p, &u, 4);
      return;
    }
  }
}

absl::StatusOr<std::vector<std::vector<double>>> evaluateNodes(
    const Program& program, absl::Span<const std::span<const std::byte>> inputs) {
  Evaluator evaluator(program);
  ACCY_RETURN_IF_ERROR(evaluator.run(inputs));
  return std::move(evaluator.values());
}

absl::StatusOr<std::vector<std::vector<std::byte>>> evaluate(
    const Program& program, absl::Span<const std::span<const std::byte>> inputs) {
  ACCY_ASSIGN_OR_RETURN(auto values, evaluateNodes(program, inputs));
  std::vector<std::vector<std::byte>> outputs;
  for (int32_t id : program.outputs) {
    const Node& node = program.nodes[id];
    std::vector<std::byte> bytes(node.spec().byteSize());
    const int64_t size = dtypeSize(node.dtype);
    for (size_t e = 0; e < values[id].size(); ++e) {
      storeElement(node.dtype, values[id][e], &bytes[e * size]);
    }
    outputs.push_back(std::move(bytes));
  }
  return outputs;
}

}  // namespace accy::tensor
