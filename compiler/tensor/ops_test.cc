// Every op against hand-computed results, including the axis-order rule,
// scalar broadcasting and odd extents.
#include <array>
#include <cstring>
#include <limits>
#include <cmath>
#include <vector>

#include "accy/accy.h"
#include "base/errors.h"
#include "compiler/tensor/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::tensor {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::Pointwise;
using ::testing::DoubleNear;

Spec f32(std::vector<Axis> axes) { return spec(DType::f32, std::move(axes)); }

// Records `fn` over `specs`, evaluates on `inputs` (floats, one vector per
// input) and returns output 0 as doubles, with its spec in `out_spec`.
template <typename F>
std::vector<double> run(std::vector<Spec> specs, const std::vector<std::vector<float>>& inputs,
                        F fn, Spec* out_spec = nullptr) {
  auto program = define("t", specs, fn);
  EXPECT_TRUE(program.ok()) << program.status();
  if (!program.ok()) return {};
  std::vector<std::span<const std::byte>> views;
  for (const auto& v : inputs) views.push_back(accy::bytes(v));
  auto out = testing::evalDoubles(*program, views);
  EXPECT_TRUE(out.ok()) << out.status();
  if (out_spec) *out_spec = program->outputSpecs()[0];
  return out.ok() ? (*out)[0] : std::vector<double>{};
}

using Args = std::span<const Value>;

TEST(Ops, BinaryElementwiseSameAxes) {
  const std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
  auto specs = std::vector<Spec>{f32({{"i", 3}}), f32({{"i", 3}})};
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0] + x[1]; }), ElementsAre(5, 7, 9));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0] - x[1]; }), ElementsAre(-3, -3, -3));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0] * x[1]; }), ElementsAre(4, 10, 18));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0] / x[1]; }),
              Pointwise(DoubleNear(1e-6), std::vector<double>{0.25, 0.4, 0.5}));
  EXPECT_THAT(run(specs, {a, {0, 5, 1}}, [](Builder&, Args x) { return x[0].max(x[1]); }), ElementsAre(1, 5, 3));
  EXPECT_THAT(run(specs, {a, {0, 5, 1}}, [](Builder&, Args x) { return tensor::min(x[0], x[1]); }), ElementsAre(0, 2, 1));
  EXPECT_THAT(run(specs, {a, {2, 0, 0.5}}, [](Builder&, Args x) { return x[0].pow(x[1]); }),
              Pointwise(DoubleNear(1e-6), std::vector<double>{1, 1, std::sqrt(3.0)}));
}

TEST(Ops, AxisOrderIsLeftThenRightsNewAxes) {
  // a[i=2, j=3] + b[k=2, j=3] -> (i, j, k): left's axes, then k.
  std::vector<float> a = {0, 1, 2, 10, 11, 12};
  std::vector<float> b = {100, 200, 300, 400, 500, 600};
  Spec out;
  auto got = run({f32({{"i", 2}, {"j", 3}}), f32({{"k", 2}, {"j", 3}})}, {a, b},
                 [](Builder&, Args x) { return x[0] + x[1]; }, &out);
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"i", 2}, {"j", 3}, {"k", 2}}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(a[i * 3 + j] + b[k * 3 + j]);
  EXPECT_THAT(got, ElementsAreArray(want));
  // Swapping operands swaps the order: (k, j, i).
  run({f32({{"i", 2}, {"j", 3}}), f32({{"k", 2}, {"j", 3}})}, {a, b},
      [](Builder&, Args x) { return x[1] + x[0]; }, &out);
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"k", 2}, {"j", 3}, {"i", 2}}));
}

TEST(Ops, ScalarBroadcastsAndLiteralsAdoptDType) {
  Spec out;
  auto got = run({f32({}), f32({{"point", 3}})}, {{2}, {1, 2, 3}},
                 [](Builder&, Args x) { return x[0] * x[1] + 1; }, &out);
  EXPECT_THAT(got, ElementsAre(3, 5, 7));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"point", 3}}));
  auto program = define("lit", std::vector<Spec>{spec(DType::f64, {{"i", 2}})},
                        [](Builder&, Args x) { return 2.0 * x[0] - 0.5; });
  ASSERT_TRUE(program.ok());
  EXPECT_EQ(program->outputSpecs()[0].dtype, DType::f64);
  auto ints = define("ilit", std::vector<Spec>{spec(DType::i32, {{"i", 2}})},
                     [](Builder&, Args x) { return x[0] / 2; });
  ASSERT_TRUE(ints.ok()) << ints.status();
  std::vector<int32_t> in = {7, -7};
  auto r = testing::evalDoubles(*ints, {accy::bytes(in)});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT((*r)[0], ElementsAre(3, -3));  // truncating integer division
}

TEST(Ops, Unary) {
  const std::vector<float> x = {0.5f, -1.25f, 2.0f};
  auto specs = std::vector<Spec>{f32({{"i", 3}})};
  auto check = [&](auto fn, double (*ref)(double)) {
    auto got = run(specs, {x}, fn);
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], ref(x[i]), 1e-6) << i;
  };
  check([](Builder&, Args a) { return -a[0]; }, [](double v) { return -v; });
  check([](Builder&, Args a) { return a[0].abs(); }, [](double v) { return std::fabs(v); });
  check([](Builder&, Args a) { return tensor::sin(a[0]); }, [](double v) { return std::sin(v); });
  check([](Builder&, Args a) { return a[0].cos(); }, [](double v) { return std::cos(v); });
  check([](Builder&, Args a) { return a[0].exp(); }, [](double v) { return std::exp(v); });
  check([](Builder&, Args a) { return a[0].abs().log(); }, [](double v) { return std::log(std::fabs(v)); });
  check([](Builder&, Args a) { return a[0].abs().sqrt(); }, [](double v) { return std::sqrt(std::fabs(v)); });
  check([](Builder&, Args a) { return a[0].tanh(); }, [](double v) { return std::tanh(v); });
  check([](Builder&, Args a) { return a[0].sigmoid(); }, [](double v) { return 1 / (1 + std::exp(-v)); });
}

TEST(Ops, ComparisonsGiveBoolAndWhereSelects) {
  auto specs = std::vector<Spec>{f32({{"i", 3}}), f32({{"i", 3}})};
  const std::vector<float> a = {1, 2, 3}, b = {2, 2, 2};
  Spec out;
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0].lt(x[1]); }, &out), ElementsAre(1, 0, 0));
  EXPECT_EQ(out.dtype, DType::bool_);
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0].le(x[1]); }), ElementsAre(1, 1, 0));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0].gt(x[1]); }), ElementsAre(0, 0, 1));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0].ge(x[1]); }), ElementsAre(0, 1, 1));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return x[0].eq(x[1]); }), ElementsAre(0, 1, 0));
  EXPECT_THAT(run(specs, {a, b}, [](Builder&, Args x) { return tensor::ne(x[0], x[1]); }), ElementsAre(1, 0, 1));
  EXPECT_THAT(run(specs, {a, b},
                  [](Builder&, Args x) { return where(x[0].gt(x[1]), x[0], x[1] * 10); }),
              ElementsAre(20, 20, 3));
}

TEST(Ops, Cast) {
  auto program = define("c", std::vector<Spec>{f32({{"i", 4}})},
                        [](Builder&, Args x) -> std::vector<Value> {
                          return {x[0].cast(DType::i32), x[0].cast(DType::bool_),
                                  x[0].cast(DType::f64)};
                        });
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<float> in = {2.75f, -2.75f, 0.0f, 3e10f};
  auto r = testing::evalDoubles(*program, {accy::bytes(in)});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT((*r)[0], ElementsAre(2, -2, 0, 2147483647));  // truncates, saturates
  EXPECT_THAT((*r)[1], ElementsAre(1, 1, 0, 1));
  EXPECT_THAT((*r)[2], ElementsAre(2.75, -2.75, 0, double(3e10f)));
}

// Casts to i64 saturate at both ends and send NaN to 0 (docs/SEMANTICS.md),
// in the stored bytes too: the evaluator holds i64 in doubles, where
// INT64_MAX reads as 2^63.
TEST(Ops, CastToI64SaturatesInTheStoredBytes) {
  auto program = define("c", std::vector<Spec>{f32({{"i", 5}})}, [](Builder&, Args x) { return x[0].cast(DType::i64); });
  ASSERT_TRUE(program.ok()) << program.status();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> in = {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e30f, -7.5f};
  auto r = evaluate(*program, {accy::bytes(in)});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int64_t> out(5);
  std::memcpy(out.data(), (*r)[0].data(), 40);
  EXPECT_THAT(out, ElementsAre(std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 0,
                               std::numeric_limits<int64_t>::max(), -7));
}

TEST(Ops, ReductionsOverOneAndSeveralAxes) {
  // x[a=2, b=3] = 1..6
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto specs = std::vector<Spec>{f32({{"a", 2}, {"b", 3}})};
  Spec out;
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].sum("b"); }, &out), ElementsAre(6, 15));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"a", 2}}));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return sum(v[0], "a"); }), ElementsAre(5, 7, 9));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].max("b"); }), ElementsAre(3, 6));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return tensor::min(v[0], "a"); }), ElementsAre(1, 2, 3));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].mean("b"); }), ElementsAre(2, 5));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].prod("a"); }), ElementsAre(4, 10, 18));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return mean(v[0], {"a", "b"}); }, &out), ElementsAre(3.5));
  EXPECT_TRUE(out.axes.empty());
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].sum(std::vector<std::string>{"b", "a"}); }),
              ElementsAre(21));
}

TEST(Ops, DotContractsTheNamedAxis) {
  // m[i=2, k=3] . w[k=3, j=2]
  std::vector<float> m = {1, 2, 3, 4, 5, 6};
  std::vector<float> w = {1, 0, 0, 1, 1, 1};
  Spec out;
  auto got = run({f32({{"i", 2}, {"k", 3}}), f32({{"k", 3}, {"j", 2}})}, {m, w},
                 [](Builder&, Args v) { return dot(v[0], v[1], "k"); }, &out);
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"i", 2}, {"j", 2}}));
  EXPECT_THAT(got, ElementsAre(4, 5, 10, 11));
}

TEST(Ops, LayoutOps) {
  std::vector<float> x = {0, 1, 2, 3, 4, 5};  // x[a=2, b=3]
  auto specs = std::vector<Spec>{f32({{"a", 2}, {"b", 3}})};
  Spec out;
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].transpose({"b", "a"}); }, &out),
              ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"b", 3}, {"a", 2}}));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].rename("a", "row"); }, &out),
              ElementsAreArray(x.begin(), x.end()));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"row", 2}, {"b", 3}}));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].broadcast("c", 2); }, &out),
              ElementsAre(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"a", 2}, {"b", 3}, {"c", 2}}));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].merge({"a", "b"}, "ab"); }, &out),
              ElementsAreArray(x.begin(), x.end()));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"ab", 6}}));
  // Merging in the other order walks b first.
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].merge({"b", "a"}, "ba"); }),
              ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].slice("b", 0, 3, 2); }, &out),
              ElementsAre(0, 2, 3, 5));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"a", 2}, {"b", 2}}));
  EXPECT_THAT(run(specs, {x}, [](Builder&, Args v) { return v[0].slice("a", 1, 2); }), ElementsAre(3, 4, 5));
  // split b=6 of a flat value into (hi=2, lo=3), then merge back.
  auto split_specs = std::vector<Spec>{f32({{"n", 6}})};
  EXPECT_THAT(run(split_specs, {x}, [](Builder&, Args v) { return v[0].split("n", "hi", "lo", 3).transpose({"lo", "hi"}); }, &out),
              ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"lo", 3}, {"hi", 2}}));
}

TEST(Ops, ConcatAndIota) {
  Spec out;
  auto got = run({f32({{"a", 2}, {"b", 1}}), f32({{"b", 2}, {"a", 2}})}, {{1, 2}, {3, 4, 5, 6}},
                 [](Builder&, Args v) { return concat("b", {v[0], v[1]}); }, &out);
  EXPECT_EQ(out.axes, (std::vector<Axis>{{"a", 2}, {"b", 3}}));
  EXPECT_THAT(got, ElementsAre(1, 3, 5, 2, 4, 6));
  got = run({f32({{"i", 3}})}, {{10, 20, 30}},
            [](Builder& b, Args v) { return v[0] + iota(b, "i", 3, DType::f32); });
  EXPECT_THAT(got, ElementsAre(10, 21, 32));
  got = run({f32({{"i", 2}})}, {{1, 2}}, [](Builder&, Args v) { return v[0].concat("i", {v[0] * 10}); });
  EXPECT_THAT(got, ElementsAre(1, 2, 10, 20));
}

TEST(Ops, OddExtents) {
  for (int64_t n : {1, 3, 17}) {
    std::vector<float> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = 0.5f * i - 1;
      y[i] = 2.0f - i;
    }
    auto got = run({f32({{"p", n}}), f32({{"q", 3}, {"p", n}})}, {x, [&] {
                     std::vector<float> q(3 * n);
                     for (int64_t i = 0; i < 3 * n; ++i) q[i] = float(i % 7);
                     return q;
                   }()},
                   [](Builder&, Args v) { return (v[0] * v[1]).sum("p"); });
    ASSERT_EQ(got.size(), 3u);
    for (int q = 0; q < 3; ++q) {
      double want = 0;
      for (int64_t i = 0; i < n; ++i) want += double(x[i]) * double((q * n + i) % 7);
      EXPECT_NEAR(got[q], want, 1e-9) << "n=" << n << " q=" << q;
    }
  }
}

TEST(Ops, MultipleOutputs) {
  auto program = define("two", std::vector<Spec>{f32({{"i", 2}})},
                        [](Builder&, Args v) -> absl::StatusOr<std::vector<Value>> {
                          return std::vector<Value>{v[0].sum("i"), v[0] * 2};
                        });
  ASSERT_TRUE(program.ok());
  std::vector<float> x = {1, 2};
  auto r = testing::evalDoubles(*program, {accy::bytes(x)});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT((*r)[0], ElementsAre(3));
  EXPECT_THAT((*r)[1], ElementsAre(2, 4));
}

TEST(Ops, IntegerSemantics) {
  auto program = define("ints", std::vector<Spec>{spec(DType::i32, {{"i", 4}}), spec(DType::i32, {{"i", 4}})},
                        [](Builder&, Args v) -> std::vector<Value> {
                          return {v[0] / v[1], v[0] * v[1], v[0].pow(v[1]), v[0].sum("i")};
                        });
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<int32_t> a = {7, -7, 5, 2147483647}, b = {2, 0, 3, 2};
  auto r = testing::evalDoubles(*program, {accy::bytes(a), accy::bytes(b)});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT((*r)[0], ElementsAre(3, 0, 1, 1073741823));  // x/0 is 0
  EXPECT_THAT((*r)[1], ElementsAre(14, 0, 15, -2));       // wraps
  EXPECT_THAT((*r)[2], ElementsAre(49, 1, 125, 1));        // (2^31-1)^2 wraps to 1
  EXPECT_THAT((*r)[3], ElementsAre(-2147483644.0));        // 7-7+5+(2^31-1) wraps
}

// The op table's DTypes column is what shape inference enforces: every
// elementwise, reduction and dot op over operands of every dtype is accepted
// exactly when the column says so, and refused with UnsupportedDType
// otherwise.
TEST(OpTable, DTypesColumnIsWhatShapeInferenceChecks) {
  const DType dtypes[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_, DType::u32};
  int checked = 0;
  for (int k = 0; k < kOpCount; ++k) {
    const OpCode op = static_cast<OpCode>(k);
    const OpCategory cat = opCategory(op);
    int arity = 0;
    std::vector<std::string> names;
    switch (cat) {
      case OpCategory::Unary:
        arity = 1;
        break;
      case OpCategory::Binary:
      case OpCategory::Compare:
        arity = 2;
        break;
      case OpCategory::Reduce:
        arity = 1;
        names = {"i"};
        break;
      case OpCategory::Dot:
        arity = 2;
        names = {"i"};
        break;
      case OpCategory::Index:  // x, i32 indices [j], updates [j]: the column speaks of x
        arity = op == OpCode::kScatterAdd ? 3 : 2;
        names = {"i"};
        break;
      case OpCategory::Leaf:
      case OpCategory::Select:
      case OpCategory::Cast:
      case OpCategory::Layout:
      case OpCategory::Random:
      case OpCategory::Loop:
        continue;  // their dtype rules are not one column (see SEMANTICS.md)
    }
    for (DType d : dtypes) {
      std::vector<Node> prior;
      for (int a = 0; a < arity; ++a) {
        Node in;
        in.op = OpCode::kInput;
        in.dtype = d;
        in.axes = {Axis{"i", 3}};
        in.ints = {a};
        if (cat == OpCategory::Index && a > 0) {
          in.dtype = a == 1 ? DType::i32 : d;
          in.axes = {Axis{"j", 2}};
        }
        prior.push_back(in);
      }
      Node node;
      node.op = op;
      node.names = names;
      for (int a = 0; a < arity; ++a) node.operands.push_back(a);
      const absl::StatusOr<Spec> got = inferNode(prior, node);
      EXPECT_EQ(got.ok(), opTakes(op, d)) << opName(op) << " on " << dtypeName(d) << ": " << got.status();
      if (!got.ok()) {
        EXPECT_EQ(errorKind(got.status()), ErrorKind::kUnsupportedDType) << got.status();
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 6 * 30);
}

// Derived columns: every op with an elementary function takes floating
// operands and costs something; layout ops are free.
TEST(OpTable, DerivedColumns) {
  for (int k = 0; k < kOpCount; ++k) {
    const OpCode op = static_cast<OpCode>(k);
    if (opIsElementary(op)) {
      EXPECT_TRUE(opTakes(op, DType::f32) && opTakes(op, DType::f64)) << opName(op);
      EXPECT_NE(opCost(op), OpCost::Free) << opName(op);
    }
    if (opCategory(op) == OpCategory::Layout) {
      EXPECT_EQ(opCost(op), OpCost::Free) << opName(op);
      EXPECT_EQ(opGradient(op), OpGradient::Layout) << opName(op);
    }
    if (opCategory(op) == OpCategory::Compare) {
      EXPECT_EQ(opGradient(op), OpGradient::None) << opName(op);
    }
  }
  EXPECT_TRUE(opIsElementary(OpCode::kSin));
  EXPECT_TRUE(opIsElementary(OpCode::kPow));
  EXPECT_FALSE(opIsElementary(OpCode::kSqrt));
  EXPECT_EQ(opName(OpCode::kReduceMax), "reduce_max");
  EXPECT_EQ(opDTypes(OpCode::kMax), OpDTypes::Any);
  EXPECT_EQ(opDTypes(OpCode::kSin), OpDTypes::Floating);
  EXPECT_EQ(opDTypes(OpCode::kAdd), OpDTypes::Numeric);
}

// Indexing by data and windows (docs/SEMANTICS.md, "Indexing by data").
TEST(Indexing, TakeClampsMatchesSharedAxesAndPlacesNewAxes) {
  const std::vector<double> table = {0, 1, 10, 11, 20, 21};  // vocab=3, feature=2
  std::vector<int64_t> tokens = {2, -1, 7, INT64_MIN, INT64_MAX, 1};  // batch=2, pos=3
  auto program = define("t", {spec(DType::f64, {{"vocab", 3}, {"feature", 2}}),
                             spec(DType::i64, {{"batch", 2}, {"pos", 3}})},
                        [](Builder&, Args a) { return take(a[0], "vocab", a[1]); });
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->outputSpecs()[0].axes, (std::vector<Axis>{{"batch", 2}, {"pos", 3}, {"feature", 2}}));
  auto out = testing::evalDoubles(*program, {accy::bytes(table), accy::bytes(tokens)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0], ElementsAre(20, 21, 0, 1, 20, 21, 0, 1, 20, 21, 10, 11));
  // A shared axis is matched element by element: a label pick.
  std::vector<float> logits = {1, 2, 3, 4, 5, 6};  // batch=2, class=3
  std::vector<int32_t> labels = {2, 0};
  auto p2 = define("pick", {f32({{"batch", 2}, {"class", 3}}), spec(DType::i32, {{"batch", 2}})},
                   [](Builder&, Args a) { return take(a[0], "class", a[1]); });
  ASSERT_TRUE(p2.ok());
  auto o2 = testing::evalDoubles(*p2, {accy::bytes(logits), accy::bytes(labels)});
  ASSERT_TRUE(o2.ok());
  EXPECT_EQ(p2->outputSpecs()[0].axes, (std::vector<Axis>{{"batch", 2}}));
  EXPECT_THAT((*o2)[0], ElementsAre(3, 4));
}

TEST(Indexing, ScatterAddDropsOutOfRangeAndSumsDuplicatesInOrder) {
  std::vector<double> x = {1, 2, 3, 4};  // vocab=4
  std::vector<int32_t> idx = {1, -1, 1, 4, 3, 1};
  std::vector<double> upd = {1e17, 5, 1, 9, 0.5, -1e17};
  auto program = define("s", {spec(DType::f64, {{"vocab", 4}}), spec(DType::i32, {{"pos", 6}}),
                              spec(DType::f64, {{"pos", 6}})},
                        [](Builder&, Args a) { return scatterAdd(a[0], "vocab", a[1], a[2]); });
  ASSERT_TRUE(program.ok()) << program.status();
  auto out = testing::evalDoubles(*program, {accy::bytes(x), accy::bytes(idx), accy::bytes(upd)});
  ASSERT_TRUE(out.ok()) << out.status();
  // vocab 1: ((0 + 1e17) + 1) - 1e17 = 0 in f64 (the 1 is lost: the order
  // is the indices' order), then 2 + 0.
  EXPECT_THAT((*out)[0], ElementsAre(1, 2, 3, 4.5));
}

TEST(Indexing, ArgmaxFirstIndexAndNaNs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {1, 3, 3, 0,  nan, 2, nan, 9,  nan, nan, nan, nan};  // row=3, col=4
  auto program = define("a", {f32({{"row", 3}, {"col", 4}})}, [](Builder&, Args a) -> std::vector<Value> {
    return {a[0].argmax("col"), a[0].argmin("col")};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ(program->outputSpecs()[0], spec(DType::i32, {{"row", 3}}));
  auto out = testing::evalDoubles(*program, {accy::bytes(x)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT((*out)[0], ElementsAre(1, 0, 0));  // first maximum; the first NaN
  EXPECT_THAT((*out)[1], ElementsAre(3, 1, 0));  // NaNs skipped; all NaN: 0
}

TEST(Indexing, PadWindowAndDotOverSeveralAxes) {
  std::vector<float> x = {1, 2, 3, 4, 5};
  Spec s;
  EXPECT_THAT(run({f32({{"h", 5}})}, {x}, [](Builder&, Args a) { return a[0].pad("h", 2, 1, -1); }, &s),
              ElementsAre(-1, -1, 1, 2, 3, 4, 5, -1));
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"h", 8}}));
  // Stride 2, dilation 2, size 2 over 5: h = (5 - 2 - 1) / 2 + 1 = 2; [i, k] = x[2i + 2k].
  EXPECT_THAT(run({f32({{"h", 5}})}, {x}, [](Builder&, Args a) { return a[0].window("h", "kh", 2, 2, 2); }, &s),
              ElementsAre(1, 3, 3, 5));
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"h", 2}, {"kh", 2}}));
  // A 3-tap box filter over a padded row: window then sum.
  EXPECT_THAT(run({f32({{"h", 5}})}, {x},
                  [](Builder&, Args a) { return a[0].pad("h", 1, 1).window("h", "kh", 3).sum("kh"); }),
              ElementsAre(3, 6, 9, 12, 9));
  // dot over two axes: sum over (c, k) of a * b.
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 2, 0, 1, 3};
  EXPECT_THAT(run({f32({{"c", 2}, {"k", 3}}), f32({{"k", 3}, {"c", 2}})}, {a, b},
                  [](Builder&, Args v) { return dot(v[0], v[1], {"c", "k"}); }, &s),
              ElementsAre(1 * 1 + 2 * 2 + 3 * 1 + 4 * 0 + 5 * 0 + 6 * 3));
  EXPECT_TRUE(s.axes.empty());
}

// Evaluates a program of no inputs (recorded by `fn`) and returns output 0
// as doubles.
template <typename F>
std::vector<double> constants(F fn, Spec* out_spec = nullptr) {
  return run({}, {}, [&](Builder& b, Args) { return fn(b); }, out_spec);
}

Value u32s(Builder& b, std::string_view axis, const std::vector<double>& values) {
  std::vector<Value> parts;
  for (double v : values) parts.push_back(b.constant(v, DType::u32).broadcast(axis, 1));
  Value out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out = concat(axis, {out, parts[i]});
  return out;
}

TEST(Bits, UnsignedArithmeticWrapsComparesAndDividesUnsigned) {
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {0, 5, 4294967295.0}) - 6.0; }),
              ElementsAre(4294967290.0, 4294967295.0, 4294967289.0));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {4294967295.0, 7, 9}) / u32s(b, "i", {2, 0, 4294967295.0}); }),
              ElementsAre(2147483647.0, 0, 0));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {4294967295.0, 1}).gt(2.0); }), ElementsAre(1, 0));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {4294967295.0, 1}).max("i"); }), ElementsAre(4294967295.0));
  EXPECT_THAT(constants([](Builder& b) { return -u32s(b, "i", {1, 0}); }), ElementsAre(4294967295.0, 0));
}

TEST(Bits, OperationsOnEveryIntegerDTypeAndBool) {
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {0xF0F0, 0xFFFFFFFF}).bitAnd(0x0FF0); }),
              ElementsAre(0x00F0, 0x0FF0));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {0xF000, 1}).bitOr(0x000F).bitXor(0x00FF); }),
              ElementsAre(0xF0F0, 0x00F0));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {0, 0xFFFF0000}).bitNot(); }),
              ElementsAre(4294967295.0, 0xFFFF));
  EXPECT_THAT(constants([](Builder& b) { return b.constant(-6, DType::i32).bitNot().broadcast("i", 1); }),
              ElementsAre(5));
  EXPECT_THAT(constants([](Builder& b) {
                return b.constant(1, DType::bool_).broadcast("i", 2).bitXor(b.iota("i", 2, DType::i32).gt(0.0)).bitNot();
              }),
              ElementsAre(0, 1));
}

// Counts below 0 or at least the width give 0, or the sign for a signed
// shiftRight; shiftRight is logical on u32 and arithmetic on i32 and i64.
TEST(Bits, ShiftsDefineEveryCount) {
  EXPECT_THAT(constants([](Builder& b) {
                return u32s(b, "i", {0x80000001u, 0x80000001u, 0x80000001u, 0x80000001u})
                    .shiftRight(u32s(b, "i", {1, 31, 32, 4294967295.0}));
              }),
              ElementsAre(0x40000000, 1, 0, 0));
  EXPECT_THAT(constants([](Builder& b) {
                return u32s(b, "i", {3, 3, 3}).shiftLeft(u32s(b, "i", {30, 31, 33}));
              }),
              ElementsAre(0xC0000000u, 0x80000000u, 0));
  EXPECT_THAT(constants([](Builder& b) {
                const Value x = b.constant(-8, DType::i32).broadcast("i", 4);
                return x.shiftRight(b.iota("i", 4, DType::i32) * 20 - 10);  // -10, 10, 30, 50
              }),
              ElementsAre(-1, -1, -1, -1));
  EXPECT_THAT(constants([](Builder& b) {
                const Value x = b.constant(-8, DType::i64).broadcast("i", 4);
                return x.shiftRight(b.iota("i", 4, DType::i64) * 20 + 1);  // 1, 21, 41, 61
              }),
              ElementsAre(-4, -1, -1, -1));
  EXPECT_THAT(constants([](Builder& b) {
                return b.constant(5, DType::i32).broadcast("i", 3).shiftLeft(b.iota("i", 3, DType::i32) * 31 - 1);  // -1, 30, 61
              }),
              ElementsAre(0, 1073741824, 0));
}

TEST(Bits, BitcastAndUnsignedCasts) {
  EXPECT_THAT(constants([](Builder& b) { return b.constant(1.0, DType::f32).bitcast(DType::u32).broadcast("i", 1); }),
              ElementsAre(0x3f800000));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {0xBF800000u}).bitcast(DType::f32); }), ElementsAre(-1.0));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {0xFFFFFFFFu}).bitcast(DType::i32); }), ElementsAre(-1));
  EXPECT_THAT(constants([](Builder& b) { return b.constant(-3, DType::i32).cast(DType::u32).broadcast("i", 1); }),
              ElementsAre(4294967293.0));
  EXPECT_THAT(constants([](Builder& b) {
                return concat("i", {b.constant(-2.5, DType::f64).broadcast("i", 1), b.constant(1e10, DType::f64).broadcast("i", 1),
                                    b.constant(NAN, DType::f64).broadcast("i", 1), b.constant(7.9, DType::f64).broadcast("i", 1)})
                    .cast(DType::u32);
              }),
              ElementsAre(0, 4294967295.0, 0, 7));
  EXPECT_THAT(constants([](Builder& b) { return u32s(b, "i", {4294967295.0}).cast(DType::f32); }),
              ElementsAre(4294967296.0));
}

TEST(Bits, MisuseIsRefusedWithStableKinds) {
  const std::vector<Spec> specs = {f32({{"i", 2}}), spec(DType::i32, {{"i", 2}}), spec(DType::i64, {{"i", 2}})};
  auto kind = [&](auto fn) { return errorKind(define("t", specs, fn).status()); };
  EXPECT_EQ(kind([](Builder&, Args a) { return a[0].bitAnd(a[0]); }), ErrorKind::kUnsupportedDType);
  EXPECT_EQ(kind([](Builder&, Args a) { return a[0].shiftLeft(1.0); }), ErrorKind::kUnsupportedDType);
  EXPECT_EQ(kind([](Builder&, Args a) { return a[1].shiftLeft(a[2]); }), ErrorKind::kDTypeMismatch);
  EXPECT_EQ(kind([](Builder&, Args a) { return a[0].bitcast(DType::f64); }), ErrorKind::kUnsupportedDType);
  EXPECT_EQ(kind([](Builder&, Args a) { return a[1].gt(0.0).bitcast(DType::u32); }), ErrorKind::kUnsupportedDType);
  auto st = define("t", specs, [](Builder&, Args a) { return a[2].bitcast(DType::i32); }).status();
  EXPECT_THAT(st.message(), ::testing::HasSubstr("bitcast: i64 to i32 changes the width"));
}

// Random123's known-answer vectors for threefry2x32 with 20 rounds
// (counter words, key words, result words).
TEST(Random, ThreefryMatchesRandom123KnownAnswers) {
  auto rows = [](Builder& b, std::vector<std::array<double, 2>> v) {
    std::vector<double> flat;
    for (const auto& r : v) flat.insert(flat.end(), r.begin(), r.end());
    return u32s(b, "flat", flat).split("flat", "kat", "word", 2);
  };
  const std::vector<double> got = constants([&](Builder& b) {
    const Value counters = rows(b, {{0, 0}, {0xffffffff, 0xffffffff}, {0x243f6a88, 0x85a308d3}});
    const Value keys = rows(b, {{0, 0}, {0xffffffff, 0xffffffff}, {0x13198a2e, 0x03707344}});
    return threefry2x32(keys, counters);
  });
  EXPECT_THAT(got, ElementsAre(0x6b200159, 0x99ba4efe, 0x1cb996fc, 0xbb002be7, 0xc4923a9c, 0x483df7a0));
}

TEST(Random, KeysSplitsAndFoldsHaveThePinnedLayout) {
  Spec s;
  EXPECT_THAT(constants([](Builder& b) { return randomKey(b, (uint64_t{7} << 32) | 42); }, &s), ElementsAre(7, 42));
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"word", 2}}));
  // randomSplit's keys are the key's bits over [axis, word]: block j of
  // the stream encrypts counter (0, j).
  const std::vector<double> split = constants([](Builder& b) { return randomSplit(randomKey(b, 42), "chain", 3); }, &s);
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"chain", 3}, {"word", 2}}));
  for (int j = 0; j < 3; ++j) {
    const std::vector<double> block = constants([&](Builder& b) {
      return threefry2x32(randomKey(b, 42), u32s(b, "word", {0, static_cast<double>(j)}));
    });
    EXPECT_THAT(std::vector<double>(split.begin() + 2 * j, split.begin() + 2 * j + 2), ElementsAreArray(block)) << j;
  }
  // A key with a stream axis: its entries come first, then the new axis.
  constants([](Builder& b) { return randomSplit(randomSplit(randomKey(b, 1), "a", 2), "c", 3); }, &s);
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"c", 3}, {"a", 2}, {"word", 2}}));
  const std::vector<double> folded = constants([](Builder& b) { return randomFoldIn(randomKey(b, 42), b.constant(5, DType::u32)); });
  const std::vector<double> direct = constants([](Builder& b) { return threefry2x32(randomKey(b, 42), u32s(b, "word", {0, 5})); });
  EXPECT_EQ(folded, direct);
}

// A key from around a loop's body, folded with the body's own counter, is
// captured into the body: step t's key is the key folded with t.
TEST(Random, AKeyFromAroundALoopFoldsWithTheBodysCounter) {
  Spec s;
  const std::vector<double> steps = constants(
      [](Builder& b) {
        const Value key = randomKey(b, 42);
        const ScanResult r = scan(b, {.axis = "step", .length = 3}, {b.constant(0, DType::u32)}, {},
                                  [&](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                                    return ScanStep{{c[0] + 1}, {randomFoldIn(key, c[0])}};
                                  });
        return r.ys[0];
      },
      &s);
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"step", 3}, {"word", 2}}));
  for (int t = 0; t < 3; ++t) {
    const std::vector<double> direct =
        constants([&](Builder& b) { return randomFoldIn(randomKey(b, 42), b.constant(t, DType::u32)); });
    EXPECT_THAT(std::vector<double>(steps.begin() + 2 * t, steps.begin() + 2 * t + 2), ElementsAreArray(direct)) << t;
  }
}

// Samples: uniform in [0, 1) from 24 (f32) or 53 (f64) bits, exactly; two
// keys give different streams; a key's stream axes come first.
TEST(Random, SamplersFromTheBits) {
  Spec s;
  const std::vector<double> bits = constants([](Builder& b) { return randomBits(randomKey(b, 3), {{"n", 5}}); });
  const std::vector<double> u = constants([](Builder& b) { return uniform(randomKey(b, 3), {{"n", 5}}); }, &s);
  ASSERT_EQ(u.size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(u[i], std::floor(bits[i] / 256) / 16777216.0) << i;
  const std::vector<double> u2 = constants([](Builder& b) { return uniform(randomKey(b, 4), {{"n", 5}}); });
  EXPECT_NE(u, u2);
  const std::vector<double> scaled =
      constants([](Builder& b) { return uniform(randomKey(b, 3), {{"n", 5}}, DType::f64, -2, 6); });
  for (double v : scaled) EXPECT_TRUE(v >= -2 && v < 6) << v;
  constants([](Builder& b) { return normal(randomSplit(randomKey(b, 3), "chain", 4), {{"x", 3}, {"y", 2}}); }, &s);
  EXPECT_EQ(s.axes, (std::vector<Axis>{{"chain", 4}, {"x", 3}, {"y", 2}}));
  EXPECT_EQ(s.dtype, DType::f32);
  const std::vector<double> c = constants([](Builder& b) { return bernoulli(randomKey(b, 3), 1.0, {{"n", 4}}); }, &s);
  EXPECT_THAT(c, ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(s.dtype, DType::bool_);
}

TEST(Random, MisuseIsRefusedWithStableKinds) {
  auto kind = [](auto fn) {
    return errorKind(define("t", std::vector<Spec>{}, [&](Builder& b, Args) { return fn(b); }).status());
  };
  EXPECT_EQ(kind([](Builder& b) { return uniform(randomKey(b, 1).cast(DType::i32), {{"n", 2}}); }), ErrorKind::kUnsupportedDType);
  EXPECT_EQ(kind([](Builder& b) { return uniform(randomKey(b, 1).rename("word", "w"), {{"n", 2}}); }), ErrorKind::kUnknownAxis);
  EXPECT_EQ(kind([](Builder& b) { return normal(concat("word", {randomKey(b, 1), randomKey(b, 2)}), {{"n", 2}}); }),
            ErrorKind::kAxisExtentMismatch);
  EXPECT_EQ(kind([](Builder& b) { return uniform(randomSplit(randomKey(b, 1), "n", 2), {{"n", 2}}); }),
            ErrorKind::kAxisNameCollision);
  EXPECT_EQ(kind([](Builder& b) { return uniform(randomKey(b, 1), {{"n", 2}, {"n", 3}}); }), ErrorKind::kAxisNameCollision);
  EXPECT_EQ(kind([](Builder& b) { return bernoulli(randomKey(b, 1), 1.5, {{"n", 2}}); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([](Builder& b) { return uniform(randomKey(b, 1), {{"n", 2}}, DType::i32); }), ErrorKind::kUnsupportedDType);
  EXPECT_EQ(kind([](Builder& b) { return threefry2x32(randomKey(b, 1), b.iota("word", 2, DType::i32)); }),
            ErrorKind::kUnsupportedDType);
  auto st = define("t", std::vector<Spec>{}, [](Builder& b, Args) {
              return uniform(randomSplit(randomKey(b, 1), "n", 2), {{"n", 2}});
            }).status();
  EXPECT_THAT(st.message(), ::testing::HasSubstr("uniform: sample axis 'n'"));
}

}  // namespace
}  // namespace accy::tensor
