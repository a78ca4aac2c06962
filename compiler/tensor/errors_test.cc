// Each stable error kind, asserted with accy::errorKind, and sticky errors.
#include <string>
#include <vector>

#include "accy/accy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::tensor {
namespace {

using ::testing::HasSubstr;
using Args = std::span<const Value>;

Spec f32(std::vector<Axis> axes) { return spec(DType::f32, std::move(axes)); }

template <typename F>
absl::Status recordError(std::vector<Spec> specs, F fn) {
  return define("t", specs, fn).status();
}

TEST(Errors, OriginalCaseFifteenSamplesAgainstSixteenTimes) {
  auto st = recordError({f32({}), f32({{"point", 16}}), f32({{"point", 15}})},
                        [](Builder&, Args a) {
                          Value d = a[0].mul(a[1]).sin().sub(a[2]);
                          return d.mul(d).sum("point");
                        });
  EXPECT_EQ(errorKind(st), ErrorKind::kAxisExtentMismatch);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("sub"));
  EXPECT_THAT(st.message(), HasSubstr("'point'"));
  EXPECT_THAT(st.message(), HasSubstr("16"));
  EXPECT_THAT(st.message(), HasSubstr("15"));
}

TEST(Errors, UnknownAxis) {
  auto st = recordError({f32({{"point", 4}})}, [](Builder&, Args a) { return a[0].sum("guess"); });
  EXPECT_EQ(errorKind(st), ErrorKind::kUnknownAxis);
  EXPECT_THAT(st.message(), HasSubstr("sum: axis 'guess'"));
  EXPECT_THAT(st.message(), HasSubstr("(point=4)"));
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}}), f32({{"b", 2}})},
                                  [](Builder&, Args a) { return dot(a[0], a[1], "a"); })),
            ErrorKind::kUnknownAxis);
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}})},
                                  [](Builder&, Args a) { return a[0].transpose({"z"}); })),
            ErrorKind::kUnknownAxis);
}

TEST(Errors, DTypeMismatch) {
  auto st = recordError({f32({}), spec(DType::f64, {})}, [](Builder&, Args a) { return a[0] + a[1]; });
  EXPECT_EQ(errorKind(st), ErrorKind::kDTypeMismatch);
  EXPECT_THAT(st.message(), HasSubstr("add: operands have dtypes f32 and f64"));
  EXPECT_EQ(errorKind(recordError({f32({}), f32({})},
                                  [](Builder&, Args a) { return where(a[0], a[0], a[1]); })),
            ErrorKind::kDTypeMismatch);
}

TEST(Errors, AxisNameCollision) {
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}, {"a", 3}})}, [](Builder&, Args a) { return a[0]; })),
            ErrorKind::kAxisNameCollision);
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}, {"b", 3}})},
                                  [](Builder&, Args a) { return a[0].rename("a", "b"); })),
            ErrorKind::kAxisNameCollision);
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}})},
                                  [](Builder&, Args a) { return a[0].broadcast("a", 2); })),
            ErrorKind::kAxisNameCollision);
}

TEST(Errors, InvalidAxisName) {
  for (const char* bad : {"Point", "", "1x", "a-b", "point axis"}) {
    auto st = recordError({f32({{bad, 2}})}, [](Builder&, Args a) { return a[0]; });
    EXPECT_EQ(errorKind(st), ErrorKind::kInvalidAxisName) << bad;
  }
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}})},
                                  [](Builder&, Args a) { return a[0].rename("a", "B"); })),
            ErrorKind::kInvalidAxisName);
}

TEST(Errors, InvalidExtentSliceAndUnsupportedDType) {
  EXPECT_EQ(errorKind(recordError({f32({{"a", 0}})}, [](Builder&, Args a) { return a[0]; })),
            ErrorKind::kInvalidExtent);
  EXPECT_EQ(errorKind(recordError({f32({{"a", int64_t{1} << 40}})}, [](Builder&, Args a) { return a[0]; })),
            ErrorKind::kInvalidExtent);
  EXPECT_EQ(errorKind(recordError({f32({{"a", 6}})},
                                  [](Builder&, Args a) { return a[0].split("a", "x", "y", 4); })),
            ErrorKind::kInvalidExtent);
  EXPECT_EQ(errorKind(recordError({f32({{"a", 6}})},
                                  [](Builder&, Args a) { return a[0].slice("a", 4, 2); })),
            ErrorKind::kInvalidSlice);
  EXPECT_EQ(errorKind(recordError({spec(DType::i32, {{"a", 6}})},
                                  [](Builder&, Args a) { return a[0].sin(); })),
            ErrorKind::kUnsupportedDType);
  EXPECT_EQ(errorKind(recordError({spec(DType::bool_, {{"a", 6}})},
                                  [](Builder&, Args a) { return a[0] + a[0]; })),
            ErrorKind::kUnsupportedDType);
}

TEST(Errors, ConcatMismatches) {
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}, {"b", 2}}), f32({{"a", 3}, {"b", 2}})},
                                  [](Builder&, Args a) { return concat("b", {a[0], a[1]}); })),
            ErrorKind::kAxisExtentMismatch);
  EXPECT_EQ(errorKind(recordError({f32({{"a", 2}}), f32({{"c", 2}})},
                                  [](Builder&, Args a) { return concat("a", {a[0], a[1]}); })),
            ErrorKind::kUnknownAxis);
}

TEST(Errors, StickyFirstErrorWins) {
  int ops_after = 0;
  auto st = recordError({f32({{"a", 2}}), f32({{"a", 3}})}, [&](Builder& b, Args a) {
    Value bad = a[0] + a[1];       // AxisExtentMismatch, recorded
    Value worse = bad.sum("zzz");  // poisoned: no new error
    ++ops_after;
    EXPECT_FALSE(worse.valid());
    EXPECT_FALSE(b.status().ok());
    return a[0].sum("nope");       // would be UnknownAxis, but the first error stays
  });
  EXPECT_EQ(ops_after, 1);
  EXPECT_EQ(errorKind(st), ErrorKind::kAxisExtentMismatch);
  EXPECT_THAT(st.message(), HasSubstr("add:"));
}

TEST(Errors, ForeignAndInvalidValues) {
  Value leaked;
  auto first = define("first", std::vector<Spec>{f32({})}, [&](Builder&, Args a) {
    leaked = a[0];
    return a[0] * 2;
  });
  ASSERT_TRUE(first.ok());
  auto st = recordError({f32({})}, [&](Builder&, Args a) { return a[0] + leaked; });
  EXPECT_EQ(errorKind(st), ErrorKind::kForeignValue);
  st = recordError({f32({})}, [&](Builder&, Args a) { return a[0] + Value(); });
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidValue);
  st = recordError({f32({})}, [&](Builder&, Args) { return Value(); });
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidValue);
}

TEST(Errors, UserErrorPropagates) {
  auto st = recordError({f32({})}, [](Builder&, Args) -> absl::StatusOr<Value> {
    return absl::FailedPreconditionError("mine");
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(errorKind(st), ErrorKind::kNone);
}

TEST(Errors, KindNamesRoundTrip) {
  EXPECT_EQ(errorKind(absl::OkStatus()), ErrorKind::kNone);
  EXPECT_EQ(errorKind(absl::InternalError("x")), ErrorKind::kNone);
  for (ErrorKind k : {ErrorKind::kAxisExtentMismatch, ErrorKind::kInvalidBuffer,
                      ErrorKind::kUnrecordedCompilerBuild, ErrorKind::kUnimplemented}) {
    absl::Status st = makeError(k, "detail");
    EXPECT_EQ(errorKind(st), k);
    EXPECT_THAT(st.message(), HasSubstr(std::string(errorKindName(k)) + ": detail"));
  }
}

TEST(Errors, EvaluatorRejectsBadBuffers) {
  auto p = define("t", std::vector<Spec>{f32({{"a", 4}})}, [](Builder&, Args a) { return a[0] * 2; });
  ASSERT_TRUE(p.ok());
  std::vector<float> three(3), four(4);
  auto st = evaluate(*p, {accy::bytes(three)}).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidBuffer);
  EXPECT_THAT(st.message(), HasSubstr("needs 16 bytes, got 12"));
  EXPECT_EQ(errorKind(evaluate(*p, {}).status()), ErrorKind::kInvalidBuffer);
  EXPECT_EQ(errorKind(evaluate(*p, {accy::bytes(four), accy::bytes(four)}).status()),
            ErrorKind::kInvalidBuffer);
  Program broken = *p;
  broken.nodes[1].operands = {7};
  EXPECT_EQ(errorKind(evaluate(broken, {accy::bytes(four)}).status()), ErrorKind::kInvalidProgram);
}

// Compensated sums are for floats: on integers a sticky UnsupportedDType
// naming the op and the dtype; on f64 and f32 sums and means they record.
TEST(Errors, CompensatedSumsAreForFloats) {
  const tensor::SumOptions compensated{.compensated = true};
  for (DType d : {DType::i32, DType::i64, DType::u32}) {
    const absl::Status st = recordError({spec(d, {{"n", 4}})}, [&](Builder&, Args a) { return a[0].sum("n", compensated); });
    EXPECT_EQ(errorKind(st), ErrorKind::kUnsupportedDType) << st;
    EXPECT_THAT(st.message(), HasSubstr("sum")) << st;
    EXPECT_THAT(st.message(), HasSubstr(std::string(tensor::dtypeName(d)))) << st;
  }
  for (DType d : {DType::f32, DType::f64}) {
    auto p = tensor::define("ok", std::vector<Spec>{spec(d, {{"n", 4}, {"m", 2}})}, [&](Builder&, Args a) {
      return std::vector<tensor::Value>{a[0].sum("n", compensated), a[0].mean(std::vector<std::string>{"n", "m"}, compensated)};
    });
    EXPECT_TRUE(p.ok()) << p.status();
  }
}

// Indexing and windows: every misuse has its kind and names the op and axes.
TEST(Errors, IndexingAndWindows) {
  const Spec x = f32({{"vocab", 5}, {"feature", 3}});
  auto check = [&](std::vector<Spec> specs, auto fn, ErrorKind kind, std::vector<std::string> words) {
    const absl::Status st = recordError(specs, fn);
    EXPECT_EQ(errorKind(st), kind) << st;
    for (const std::string& w : words) EXPECT_THAT(st.message(), HasSubstr(w)) << st;
  };
  const Spec tokens = spec(DType::i32, {{"pos", 4}});
  check({x, tokens}, [](Builder&, Args a) { return take(a[0], "word", a[1]); }, ErrorKind::kUnknownAxis,
        {"take", "'word'", "(vocab=5, feature=3)"});
  check({x, f32({{"pos", 4}})}, [](Builder&, Args a) { return take(a[0], "vocab", a[1]); },
        ErrorKind::kUnsupportedDType, {"take", "i32 or i64", "f32"});
  check({x, spec(DType::i32, {{"vocab", 5}})}, [](Builder&, Args a) { return take(a[0], "vocab", a[1]); },
        ErrorKind::kAxisNameCollision, {"take", "'vocab'"});
  check({x, spec(DType::i32, {{"feature", 2}})}, [](Builder&, Args a) { return take(a[0], "vocab", a[1]); },
        ErrorKind::kAxisExtentMismatch, {"take", "'feature'"});
  check({x, tokens, f32({{"pos", 4}})},  // updates lack `feature`
        [](Builder&, Args a) { return scatterAdd(a[0], "vocab", a[1], a[2]); }, ErrorKind::kAxisExtentMismatch,
        {"scatter_add", "updates", "(pos=4, feature=3)"});
  check({x, f32({{"pos", 4}}), f32({{"pos", 4}, {"feature", 3}})},
        [](Builder&, Args a) { return scatterAdd(a[0], "vocab", a[1], a[2]); }, ErrorKind::kUnsupportedDType,
        {"scatter_add", "indices"});
  check({x}, [](Builder&, Args a) { return a[0].window("vocab", "k", 4, 1, 2); }, ErrorKind::kWindowTooLarge,
        {"window", "'vocab'", "5"});
  check({x}, [](Builder&, Args a) { return a[0].window("vocab", "feature", 2); }, ErrorKind::kAxisNameCollision,
        {"window", "'feature'"});
  check({x}, [](Builder&, Args a) { return a[0].window("vocab", "k", 2, 0); }, ErrorKind::kInvalidArgument,
        {"window", "stride 0"});
  check({x}, [](Builder&, Args a) { return a[0].pad("vocab", -1, 0); }, ErrorKind::kInvalidArgument,
        {"pad", "'vocab'", "-1"});
  check({x}, [](Builder&, Args a) { return a[0].pad("h", 1, 1); }, ErrorKind::kUnknownAxis, {"pad", "'h'"});
  check({x}, [](Builder&, Args a) { return a[0].argmax("h"); }, ErrorKind::kUnknownAxis, {"argmax", "'h'"});
  check({x, x}, [](Builder&, Args a) { return dot(a[0], a[1], {"vocab", "h"}); }, ErrorKind::kUnknownAxis,
        {"dot", "'h'"});
  check({x, x}, [](Builder&, Args a) { return dot(a[0], a[1], {"vocab", "vocab"}); },
        ErrorKind::kAxisNameCollision, {"dot", "'vocab'"});
  // Sticky: the first misuse is the one reported.
  check({x, tokens}, [](Builder&, Args a) { return take(a[0].pad("vocab", -2, 0), "vocab", a[1]).sum("pos"); },
        ErrorKind::kInvalidArgument, {"pad"});
}

}  // namespace
}  // namespace accy::tensor
