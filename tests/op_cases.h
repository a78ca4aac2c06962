// The op cases every backend's conformance test runs: one small program
// per op over inputs `p` and `q` axes, with an input range where the op is
// well conditioned.
#ifndef ACCY_TESTS_OP_CASES_H_
#define ACCY_TESTS_OP_CASES_H_

#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "accy/accy.h"
#include "gtest/gtest.h"

namespace accy::testing {

using Args = std::span<const tensor::Value>;

inline std::vector<std::byte> randomBytes(const tensor::Spec& s, std::mt19937& rng, double lo, double hi) {
  std::vector<std::byte> bytes(s.byteSize());
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t e = 0; e < s.elementCount(); ++e) {
    double v = dist(rng);
    if (!tensor::isFloating(s.dtype)) v = std::round(v);
    tensor::storeElement(s.dtype, v, &bytes[e * tensor::dtypeSize(s.dtype)]);
  }
  return bytes;
}

struct OpCase {
  const char* name;
  std::function<tensor::Value(tensor::Builder&, Args)> fn;
  double lo, hi;  // input range
  bool floats_only = true;
};

inline std::vector<OpCase> opCases() {
  using tensor::Builder;
  using tensor::DType;
  using tensor::Value;
  return {
      {"add", [](Builder&, Args a) { return a[0] + a[1]; }, -3, 3, false},
      {"sub", [](Builder&, Args a) { return a[0] - a[1]; }, -3, 3, false},
      {"mul", [](Builder&, Args a) { return a[0] * a[1]; }, -3, 3, false},
      {"div", [](Builder&, Args a) { return a[0] / a[1]; }, -9, 9, false},
      {"max", [](Builder&, Args a) { return a[0].max(a[1]); }, -3, 3, false},
      {"min", [](Builder&, Args a) { return a[0].min(a[1]); }, -3, 3, false},
      {"pow", [](Builder&, Args a) { return a[0].abs().pow(a[1]); }, -3, 3, false},
      {"neg", [](Builder&, Args a) { return -a[0]; }, -3, 3, false},
      {"abs", [](Builder&, Args a) { return a[0].abs(); }, -3, 3, false},
      {"sin", [](Builder&, Args a) { return a[0].sin(); }, -20, 20},
      {"cos", [](Builder&, Args a) { return a[0].cos(); }, -20, 20},
      // Phases past the fast reduction's range: the exact (Payne-Hanek) one.
      {"sin_large", [](Builder&, Args a) { return a[0].sin(); }, -3e7, 3e7},
      {"cos_huge", [](Builder&, Args a) { return a[0].cos(); }, -1e30, 1e30},
      {"exp", [](Builder&, Args a) { return a[0].exp(); }, -20, 20},
      {"log", [](Builder&, Args a) { return a[0].abs().log(); }, -20, 20},
      {"sqrt", [](Builder&, Args a) { return a[0].abs().sqrt(); }, -20, 20},
      {"tanh", [](Builder&, Args a) { return a[0].tanh(); }, -5, 5},
      {"sigmoid", [](Builder&, Args a) { return a[0].sigmoid(); }, -9, 9},
      {"erf", [](Builder&, Args a) { return a[0].erf(); }, -4.5, 4.5},
      {"floor", [](Builder&, Args a) { return a[0].floor(); }, -5, 5},
      {"ceil", [](Builder&, Args a) { return a[0].ceil(); }, -5, 5},
      // Multiples of 1/2 (floor is exact): every tie, which goes to even.
      {"round", [](Builder&, Args a) { return ((a[0] * 8).floor() * 0.5).round(); }, -5, 5},
      {"log1p", [](Builder&, Args a) { return a[0].log1p(); }, -0.9, 3},
      {"expm1", [](Builder&, Args a) { return a[0].expm1(); }, -5, 5},
      {"lt", [](Builder&, Args a) { return a[0].lt(a[1]); }, -2, 2, false},
      {"le", [](Builder&, Args a) { return a[0].le(a[1]); }, -2, 2, false},
      {"gt", [](Builder&, Args a) { return a[0].gt(a[1]); }, -2, 2, false},
      {"ge", [](Builder&, Args a) { return a[0].ge(a[1]); }, -2, 2, false},
      {"eq", [](Builder&, Args a) { return a[0].eq(a[1]); }, -2, 2, false},
      {"ne", [](Builder&, Args a) { return a[0].ne(a[1]); }, -2, 2, false},
      {"where", [](Builder&, Args a) { return where(a[0].gt(a[1]), a[0], a[1] * 2); }, -3, 3, false},
      // A condition per row (an i32 comparison), the same along the inner
      // loop: x86-64 computes it once per vector step and fills the lanes.
      {"where_rows", [](Builder& b, Args a) {
         return a[0].argmax("q").gt(b.constant(1, DType::i32)).where(a[0], a[1] * 2);
       }, -3, 3, false},
      {"cast_i32", [](Builder&, Args a) { return (a[0] * 7).cast(DType::i32); }, -3, 3},
      {"cast_bool", [](Builder&, Args a) { return a[0].cast(DType::bool_); }, -1, 1, false},
      {"cast_f64", [](Builder&, Args a) { return a[0].cast(DType::f64); }, -3, 3, false},
      {"cast_f32", [](Builder&, Args a) { return a[0].cast(DType::f32); }, -3, 3, false},
      {"sum", [](Builder&, Args a) { return a[0].sum("p"); }, -3, 3, false},
      {"reduce_max", [](Builder&, Args a) { return a[0].max({"p", "q"}); }, -3, 3, false},
      {"reduce_min", [](Builder&, Args a) { return a[0].min("q"); }, -3, 3, false},
      // Over the outer axis: the CPU accumulates in the output (identity store).
      {"reduce_min_outer", [](Builder&, Args a) { return a[0].min("p"); }, -3, 3, false},
      {"reduce_max_outer", [](Builder&, Args a) { return a[0].max("p"); }, -3, 3, false},
      {"mean", [](Builder&, Args a) { return a[0].mean("p"); }, -3, 3, false},
      {"sum_compensated", [](Builder&, Args a) { return a[0].sum("p", tensor::SumOptions{.compensated = true}); }, -3, 3},
      {"mean_compensated",
       [](Builder&, Args a) { return a[0].mean(std::vector<std::string>{"p", "q"}, tensor::SumOptions{.compensated = true}); },
       -3, 3},
      {"prod", [](Builder&, Args a) { return a[0].prod("q"); }, 0.5, 1.5},
      {"dot", [](Builder&, Args a) { return a[0].dot(a[1].rename("q", "r"), "p"); }, -3, 3, false},
      {"transpose", [](Builder&, Args a) { return (a[0] + 1).transpose({"q", "p"}); }, -3, 3, false},
      {"rename", [](Builder&, Args a) { return a[0].rename("p", "z"); }, -3, 3, false},
      {"broadcast", [](Builder&, Args a) { return a[0].broadcast("z", 5); }, -3, 3, false},
      {"split", [](Builder&, Args a) { return a[0].slice("p", 0, 2).split("p", "x", "y", 2); }, -3, 3, false},
      {"merge", [](Builder&, Args a) { return a[0].merge({"q", "p"}, "m"); }, -3, 3, false},
      {"slice", [](Builder&, Args a) { return a[0].slice("p", 1, a[0].axes()[0].extent, 2); }, -3, 3, false},
      {"concat", [](Builder&, Args a) { return tensor::concat("p", {a[0], a[1] * 3}); }, -3, 3, false},
      {"iota", [](Builder& b, Args a) { return a[0] + b.iota("p", a[0].axes()[0].extent, a[0].dtype()); }, -3, 3, false},
      // Indexing by data: indices from the second input, out of range on
      // both sides and duplicated; `q` shared (matched element by element),
      // `j` the indices' own axis.
      // Indices are i64 when the dtype under test is (devices with i64 run
      // it), else i32.
      {"take", [](Builder&, Args a) {
         const DType index = a[0].dtype() == DType::i64 ? DType::i64 : DType::i32;
         return take(a[0], "p", (a[1].cast(index) * 3 - 2).rename("p", "j"));
       }, -3, 3, false},
      // Whole rows at data-dependent positions (an embedding lookup): the
      // CPU computes each row's position once and reads the row in vectors.
      {"take_rows", [](Builder&, Args a) {
         return take(a[0], "p", (a[1].cast(DType::i32).sum("q") - 1).rename("p", "j"));
       }, -3, 3, false},
      // Indices at the extremes of their dtype (i64 as above): clamped to
      // the first and last element.
      {"take_extremes", [](Builder& b, Args a) {
         const bool wide = a[0].dtype() == DType::i64;
         const DType index = wide ? DType::i64 : DType::i32;
         // The largest double an i64 holds (2^63 - 1 rounds up to 2^63, past it).
         const double top = wide ? 9223372036854774784.0 : 2147483647.0;
         const double bottom = wide ? -9223372036854775808.0 : -2147483648.0;
         Value idx = a[1].gt(a[0]).where(b.constant(top, index), b.constant(bottom, index));
         return take(a[0], "q", idx.rename("q", "j"));
       }, -3, 3, false},
      {"scatter_add", [](Builder&, Args a) {
         Value idx = (a[1].cast(DType::i32) * 3 - 2).rename("p", "j");
         return scatterAdd(a[0], "p", idx, a[1].rename("p", "j") * 2);
       }, -3, 3, false},
      // Into zeros (a gradient's form, which the CPU accumulates in the
      // output itself, a dropped update adding +0 to a clamped row), with
      // -0 updates: a row that gets only -0 sums to +0.
      {"scatter_add_zeros", [](Builder& b, Args a) {
         Value zeros = b.constant(0, a[0].dtype());
         for (const tensor::Axis& ax : a[0].axes()) zeros = zeros.broadcast(ax.name, ax.extent);
         Value idx = (a[1].cast(DType::i32) * 3 - 2).rename("p", "j");
         Value updates = a[1].gt(b.constant(1, a[1].dtype())).where(b.constant(-0.0, a[1].dtype()), a[1] * 2);
         return scatterAdd(zeros, "p", idx, updates.rename("p", "j"));
       }, -3, 3, false},
      // Rows of 5 x 256 elements (x broadcast along w): few enough rows
      // per invocation that a GPU scatters by ranges of rows, a guarded
      // store per index (choir/lower.h, kScatterInvocations) when p > 13.
      // Indices past both ends, exactly the extent (in the last range's
      // rows when p is odd, yet dropped), and at i32's extremes where a[1]
      // is near its bounds (the range test must not wrap).
      {"scatter_add_ranges", [](Builder& b, Args a) {
         const Value spread = a[1].cast(DType::i32) * 9 + 1;
         const Value at_extent = b.constant(static_cast<double>(a[0].axes()[0].extent), DType::i32);
         Value idx = a[1].gt(b.constant(2.5, a[1].dtype()))
                         .where(b.constant(2147483647.0, DType::i32),
                                a[1].lt(b.constant(-2.5, a[1].dtype()))
                                    .where(b.constant(-2147483648.0, DType::i32),
                                           spread.eq(b.constant(-8, DType::i32)).where(at_extent, spread)))
                         .rename("p", "j");
         Value updates = a[1].rename("p", "j").broadcast("w", 256) * 2 + b.iota("w", 256, a[1].dtype());
         return scatterAdd(a[0].broadcast("w", 256), "p", idx, updates);
       }, -3, 3, false},
      {"argmax", [](Builder&, Args a) { return a[0].argmax("p"); }, -3, 3, false},
      {"argmin", [](Builder&, Args a) { return a[0].argmin("q"); }, -3, 3, false},
      {"pad", [](Builder&, Args a) { return a[0].pad("p", 2, 1, 0.5); }, -3, 3, false},
      {"window", [](Builder&, Args a) { return a[0].window("p", "k", 2, 2, 2); }, -3, 3, false},
      // A 3x3 box filter over the padded input, and 2x2 max pooling.
      {"conv", [](Builder&, Args a) {
         return a[0].pad("p", 1, 1).pad("q", 1, 1).window("p", "kp", 3).window("q", "kq", 3).sum({"kp", "kq"});
       }, -3, 3, false},
      // A convolution with channels: q in, o out (p - 2 of them, the
      // weights a window of a[1]), a 3-tap window along p.
      {"conv_channels", [](Builder&, Args a) {
         return dot(a[0].pad("p", 1, 1).window("p", "kp", 3), a[1].window("p", "kp", 3).rename("p", "o"), {"q", "kp"});
       }, -3, 3, false},
      // A separable blur: the row pass fused into the column pass's pad.
      {"blur", [](Builder&, Args a) {
         return a[0].pad("q", 1, 1).window("q", "kq", 3).sum("kq").pad("p", 1, 1).window("p", "kp", 3).sum("kp");
       }, -3, 3, false},
      {"max_pool", [](Builder&, Args a) { return a[0].window("p", "k", 2, 2).max("k"); }, -3, 3, false},
      {"dot_two_axes", [](Builder&, Args a) { return dot(a[0], a[1], {"p", "q"}); }, -3, 3, false},
      // Bits on every integer dtype and bool (floats are refused).
      {"bit_ops", [](Builder&, Args a) { return a[0].bitAnd(a[1]).bitOr(a[0].bitXor(a[1].bitNot())); }, -70000, 70000, false},
      // Counts negative, in range, and at or past the width (0 or the sign).
      {"shifts", [](Builder&, Args a) { return a[0].shiftLeft(a[1]).bitXor(a[0].shiftRight(a[1])); }, -40, 70, false},
      // Constants no integer holds mean what a cast makes of them (NaN is 0,
      // beyond the range saturates): as a shift count known when emitting,
      // as a constant take index, and as a value.
      // Constants at the edges of their dtypes' ranges (one outside, NaN or
      // infinite is refused: docs/SEMANTICS.md), as shift counts, an index
      // past the end (clamped) and operands that wrap.
      {"integer_constants", [](Builder& b, Args a) {
         const Value x = a[0].cast(DType::i32);
         const Value shifted = x.shiftLeft(b.constant(0, DType::i32)) + x.shiftRight(b.constant(31, DType::i32));
         const Value picked = take(a[0], "p", b.constant(2147483647.0, DType::i32)).cast(DType::i32);
         return shifted + picked +
                b.constant(-2147483648.0, DType::i32)
                    .bitAnd(b.constant(-9223372036854775808.0, DType::i64).cast(DType::i32) + 7) +
                b.constant(-0.75, DType::i32);
       }, -40, 70, false},
      // u32 from every dtype (wrapping from integers, saturating from
      // floats), then wrapping arithmetic, unsigned division, comparison,
      // max and a logical shift.
      {"u32_arith", [](Builder&, Args a) {
         const Value u = a[0].cast(DType::u32), v = a[1].cast(DType::u32);
         const Value w = u - v * 3.0;
         const Value r = (w * (u + 7.0) + w / (v + 1.0)).bitXor(w.shiftRight(v.bitAnd(7.0)));
         return w.gt(u).where(r, r.max(v) - 1.0);
       }, -100, 100, false},
      // Unsigned max and min reductions (identities 0 and 2^32 - 1), and
      // u32 to f32.
      {"u32_reduce", [](Builder&, Args a) {
         const Value u = a[0].cast(DType::u32), v = a[1].cast(DType::u32);
         return (u - v).max("q").cast(DType::f32) + (u + v).min("p").cast(DType::f32);
       }, -100, 100, false},
      // Float to u32: negative to 0, past 2^32 - 1 saturated, NaN to 0.
      {"cast_u32", [](Builder&, Args a) { return a[0].cast(DType::u32); }, -6e9, 6e9},
      // The bits of a 4-byte value as another dtype (f64 and i64 narrowed
      // first: the evaluator holds i64 exactly only up to 2^53).
      {"bitcast", [](Builder&, Args a) {
         if (tensor::isFloating(a[0].dtype())) {
           return a[0].cast(DType::f32).bitcast(DType::u32).bitXor(2147483648.0).bitcast(DType::f32);
         }
         return a[0].cast(DType::i32).bitcast(DType::u32).shiftRight(1.0).bitcast(DType::i32);
       }, -3, 3, false},
      // Random123's Threefry-2x32 vectors (the evaluator's words are
      // checked against the published ones in ops_test): every target
      // computes the same words.
      {"threefry", [](Builder& b, Args a) {
         auto rows = [&](std::vector<double> words) {
           Value out;
           for (size_t i = 0; i < words.size(); ++i) {
             const Value w = b.constant(words[i], DType::u32).broadcast("flat", 1);
             out = i == 0 ? w : tensor::concat("flat", {out, w});
           }
           return out.split("flat", "kat", "word", 2);
         };
         const Value counters = rows({0, 0, 0xffffffff, 0xffffffff, 0x243f6a88, 0x85a308d3});
         const Value keys = rows({0, 0, 0xffffffff, 0xffffffff, 0x13198a2e, 0x03707344});
         return tensor::threefry2x32(keys, counters + a[0].cast(DType::u32).sum({"p", "q"}) * 0.0);
       }, 0, 1e6},
      // Keys from the data (a stream per column, the work independent of
      // p), their raw bits exactly, and the samplers of the input's dtype.
      {"random_bits", [](Builder& b, Args a) {
         return tensor::randomBits(tensor::randomFoldIn(tensor::randomKey(b, 42), a[0].cast(DType::u32).sum("p")), {{"n", 3}});
       }, 0, 1e6},
      // uniform's samples compared exactly, so every target must draw the
      // same ones: f32 as its bits; f64 on [1, 2) (53 significant bits at
      // one exponent) as the two 26-bit halves of its fraction, each a whole
      // number an f64 holds exactly.
      {"uniform_bits", [](Builder& b, Args a) {
         const Value keys = tensor::randomFoldIn(tensor::randomKey(b, 9), a[0].cast(DType::u32).sum("p"));
         if (a[0].dtype() == DType::f32) return tensor::uniform(keys, {{"n", 3}}, DType::f32, -2, 3).bitcast(DType::u32);
         const Value fraction = (tensor::uniform(keys, {{"n", 3}}, DType::f64, 1, 2) - 1.0) * 67108864.0;
         const Value high = fraction.floor();
         return tensor::concat("n", {high, (fraction - high) * 67108864.0});
       }, 0, 1e6},
      {"random_samplers", [](Builder& b, Args a) {
         const Value keys = tensor::randomFoldIn(tensor::randomKey(b, 7), a[0].cast(DType::u32).sum("p"));
         const DType d = a[0].dtype();
         return tensor::uniform(keys, {{"n", 3}}, d, -2, 3) + tensor::normal(keys, {{"n", 3}}, d) +
                tensor::bernoulli(keys, 0.3, {{"n", 3}}).cast(d);
       }, 0, 1e6},
  };
}

// The op cases recording refuses by design, with the error it must give
// (docs/SEMANTICS.md): arithmetic on bools (the op's own, or the case's: `where`, `transpose` and `concat`
// scale or shift an operand), and slices that a 1-long axis cannot hold.
// nullopt: the case must record. Conformance tests assert both directions,
// so no case is dropped without its refusal being checked. (Cases marked
// floats_only are written for floating operands, their input ranges
// included, and callers do not run them on other dtypes.)
inline std::optional<ErrorKind> refusedByDesign(const OpCase& c, tensor::DType dtype, int64_t p) {
  static const std::string_view kArithmetic[] = {"add",   "sub",    "mul",         "div",    "pow",
                                                 "neg",   "abs",    "sum",         "mean",   "dot",
                                                 "where", "transpose", "concat",   "iota",   "scatter_add",  "scatter_add_zeros", "scatter_add_ranges", "where_rows",
                                                 "conv",  "conv_channels", "dot_two_axes", "blur"};
  const std::string_view name = c.name;
  if (p < 3 && name == "conv_channels") return ErrorKind::kWindowTooLarge;  // recorded before the dot
  if (dtype == tensor::DType::bool_) {
    for (std::string_view a : kArithmetic) {
      if (name == a) return ErrorKind::kUnsupportedDType;
    }
  }
  if (p < 2 && (name == "slice" || name == "split")) return ErrorKind::kInvalidSlice;
  if (p < 2 && (name == "window" || name == "max_pool")) return ErrorKind::kWindowTooLarge;
  // Bits need integers (and, or, xor and not take bool too).
  if (tensor::isFloating(dtype) && name == "bit_ops") return ErrorKind::kUnsupportedDType;
  if (!tensor::isInteger(dtype) && name == "shifts") return ErrorKind::kUnsupportedDType;
  return std::nullopt;
}

// Records case `c` for `dtype` and extent `p` (specs made by the caller);
// a gtest failure when recording refuses what it must record, or records
// (or refuses differently) what it must refuse. The program, or nullopt for
// a refusal that was checked.
inline std::optional<tensor::Program> recordCase(const OpCase& c, tensor::DType dtype, int64_t p,
                                                 const std::vector<tensor::Spec>& specs) {
  auto program = tensor::define(c.name, specs, c.fn);
  const std::optional<ErrorKind> refusal = refusedByDesign(c, dtype, p);
  if (refusal) {
    EXPECT_FALSE(program.ok()) << c.name << " " << tensor::dtypeName(dtype) << " p=" << p << " recorded; it must be refused";
    if (!program.ok()) {
      EXPECT_EQ(errorKind(program.status()), *refusal) << c.name << " " << tensor::dtypeName(dtype) << ": "
                                                        << program.status();
    }
    return std::nullopt;
  }
  EXPECT_TRUE(program.ok()) << c.name << " " << tensor::dtypeName(dtype) << " p=" << p << ": " << program.status();
  if (!program.ok()) return std::nullopt;
  return std::move(*program);
}

}  // namespace accy::testing

#endif  // ACCY_TESTS_OP_CASES_H_
