// scan and whileLoop: recording (bodies, captures, nesting), their errors,
// the evaluator's meaning checked against loops written in C++, the text
// and DOT forms, validation of damaged programs, and what the transforms
// and the compilers say of them today.
#include <cmath>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "backends/staged_program.h"
#include "compiler/tensor/testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::tensor {
namespace {

using ::testing::HasSubstr;
using Args = std::span<const Value>;
using testing::evalDoubles;

Spec f32(std::vector<Axis> axes) { return spec(DType::f32, std::move(axes)); }
Spec f64(std::vector<Axis> axes) { return spec(DType::f64, std::move(axes)); }

template <typename T>
std::span<const std::byte> in(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

// carry[n] += x[t, n]; y[t, n] = 2 * carry (after the step); the xs axis
// in the middle of the value's axes.
TEST(Scan, RunningSumMatchesALoopInCpp) {
  auto p = define("running", {f32({{"n", 3}}), f32({{"m", 2}, {"step", 5}, {"n", 3}})}, [](Builder& b, Args a) {
    ScanResult r = scan(b, {.axis = "step", .length = 5}, {a[0]}, {a[1]},
                        [](Builder&, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<ScanStep> {
                          Value next = c[0] + x[0].sum("m");
                          return ScanStep{{next}, {next * 2.0f}};
                        });
    return std::vector<Value>{r.carry[0], r.ys[0]};
  });
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->bodies.size(), 1u);
  EXPECT_EQ(p->outputSpecs()[1], f32({{"step", 5}, {"n", 3}}));
  std::vector<float> init = {1, -2, 0.5f};
  std::vector<float> xs(2 * 5 * 3);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.7f * i);
  auto out = evalDoubles(*p, {in(init), in(xs)});
  ASSERT_TRUE(out.ok()) << out.status();
  // The evaluator computes f32 in double, rounding where a value is stored
  // (docs/SEMANTICS.md): so does this loop.
  std::vector<double> c(init.begin(), init.end());
  for (int t = 0; t < 5; ++t) {
    for (int n = 0; n < 3; ++n) {
      const double s = double(xs[(0 * 5 + t) * 3 + n]) + xs[(1 * 5 + t) * 3 + n];
      c[n] = c[n] + s;
      EXPECT_EQ((*out)[1][t * 3 + n], double(float(c[n] * 2))) << t << " " << n;
    }
  }
  for (int n = 0; n < 3; ++n) EXPECT_EQ((*out)[0][n], double(float(c[n])));
}

// A body reads the enclosing recording's values: captured as its inputs,
// once each; ops on enclosing values alone record outside the loop.
TEST(Scan, CapturesValuesOfTheEnclosingRecording) {
  auto p = define("damped", {f64({}), f64({}), f64({})}, [](Builder& b, Args a) {
    const Value k = a[1], dt = a[2];
    ScanResult r = scan(b, {.length = 1000}, {a[0], b.constant(0, DType::f64)}, {},
                        [&](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                          const Value v = c[1] - (k * c[0] + c[1] * 0.1) * dt;
                          const Value kdt = k * dt;  // enclosing values only: recorded before the loop
                          (void)kdt;
                          return ScanStep{{c[0] + v * dt, v}, {}};
                        });
    return r.carry[0];
  });
  ASSERT_TRUE(p.ok()) << p.status();
  const Program& body = p->bodies[0];
  EXPECT_EQ(body.inputs.size(), 4u);  // two carries, k, dt
  for (const Node& n : body.nodes) EXPECT_NE(n.op, OpCode::kLoopResult);
  int outer_muls = 0;
  for (const Node& n : p->nodes) outer_muls += n.op == OpCode::kMul ? 1 : 0;
  EXPECT_EQ(outer_muls, 1);  // k * dt
  std::vector<double> x0 = {1.0}, k = {4.0}, dt = {0.01};
  auto out = evalDoubles(*p, {in(x0), in(k), in(dt)});
  ASSERT_TRUE(out.ok()) << out.status();
  double x = 1, v = 0;
  for (int t = 0; t < 1000; ++t) {
    v = v - (4.0 * x + v * 0.1) * 0.01;
    x = x + v * 0.01;
  }
  EXPECT_EQ((*out)[0][0], x);
}

// Loops nest; an inner body reads a value two recordings out (captured
// through the middle body) and calls a Function.
TEST(Scan, NestsAndCapturesThroughEachBody) {
  auto square = Function::define("square", {f32({})}, [](Builder&, Args a) { return a[0] * a[0]; });
  ASSERT_TRUE(square.ok());
  auto p = define("nested", {f32({}), f32({})}, [&](Builder& b, Args a) {
    const Value w = a[1];
    ScanResult outer = scan(b, {.axis = "i", .length = 3}, {a[0]}, {},
                            [&](Builder& ob, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
      ScanResult inner = scan(ob, {.axis = "j", .length = 4}, {c[0]}, {},
                              [&](Builder& ib, std::span<const Value> d, std::span<const Value>) -> absl::StatusOr<ScanStep> {
        const Value s = square->call(ib, std::vector<Value>{d[0]})[0];
        return ScanStep{{d[0] + w * 0.5f - s * 0.01f}, {}};
      });
      return ScanStep{{inner.carry[0]}, {inner.carry[0]}};
    });
    return std::vector<Value>{outer.carry[0], outer.ys[0]};
  });
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->bodies.size(), 1u);
  ASSERT_EQ(p->bodies[0].bodies.size(), 1u);
  EXPECT_EQ(p->bodies[0].inputs.size(), 2u);  // the carry, w
  EXPECT_EQ(p->bodies[0].bodies[0].inputs.size(), 2u);
  std::vector<float> c0 = {0.25f}, w = {0.75f};
  auto out = evalDoubles(*p, {in(c0), in(w)});
  ASSERT_TRUE(out.ok()) << out.status();
  double c = 0.25;
  const double hundredth = 0.01f;  // the f32 constant
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) c = c + 0.75 * 0.5 - (c * c) * hundredth;
    EXPECT_EQ((*out)[1][i], double(float(c)));
  }
  EXPECT_EQ((*out)[0][0], double(float(c)));
}

TEST(Scan, ZeroAndOneStep) {
  for (int64_t length : {0, 1}) {
    auto p = define("short", {f32({{"n", 2}})}, [&](Builder& b, Args a) {
      return scan(b, {.length = length}, {a[0]}, {},
                  [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                    return ScanStep{{c[0] * 3.0f + 1.0f}, {}};
                  })
          .carry[0];
    });
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<float> x = {1, 2};
    auto out = evalDoubles(*p, {in(x)});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0], (length == 0 ? std::vector<double>{1, 2} : std::vector<double>{4, 7}));
  }
  // A loop of length 0 has no ys and no xs (no axis has extent 0).
  auto st = define("empty", {f32({})}, [](Builder& b, Args a) {
              return scan(b, {.length = 0}, {a[0]}, {},
                          [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                            return ScanStep{{c[0]}, {c[0]}};
                          })
                  .carry[0];
            }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidExtent) << st;
}

TEST(Scan, ACarryKeepsItsDTypeAndAxes) {
  auto st = define("t", {f32({{"n", 3}})}, [](Builder& b, Args a) {
              return scan(b, {.length = 4}, {a[0]}, {},
                          [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                            return ScanStep{{c[0].cast(DType::f64)}, {}};
                          })
                  .carry[0];
            }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kCarryMismatch) << st;
  EXPECT_THAT(st.message(), HasSubstr("carry 0"));
  EXPECT_THAT(st.message(), HasSubstr("f32[n=3]"));
  EXPECT_THAT(st.message(), HasSubstr("f64[n=3]"));
  st = define("t", {f32({{"n", 3}})}, [](Builder& b, Args a) {
         return scan(b, {.length = 4}, {a[0]}, {},
                     [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                       return ScanStep{{c[0].sum("n")}, {}};
                     })
             .carry[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kCarryMismatch) << st;
  EXPECT_THAT(st.message(), HasSubstr("f32[]"));
  st = define("t", {f32({})}, [](Builder& b, Args a) {
         return scan(b, {.length = 4}, {a[0]}, {},
                     [](Builder&, std::span<const Value>, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                       return ScanStep{{}, {}};
                     })
             .carry[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kCarryMismatch) << st;
}

TEST(Scan, XsAndYsNameTheirAxes) {
  auto body = [](Builder&, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<ScanStep> {
    return ScanStep{{c[0] + x[0]}, {}};
  };
  auto st = define("t", {f32({}), f32({{"time", 4}})}, [&](Builder& b, Args a) {
              return scan(b, {.axis = "step", .length = 4}, {a[0]}, {a[1]}, body).carry[0];
            }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kUnknownAxis) << st;
  EXPECT_THAT(st.message(), HasSubstr("'step'"));
  st = define("t", {f32({}), f32({{"step", 5}})}, [&](Builder& b, Args a) {
         return scan(b, {.axis = "step", .length = 4}, {a[0]}, {a[1]}, body).carry[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kAxisExtentMismatch) << st;
  EXPECT_THAT(st.message(), HasSubstr("length 4"));
  st = define("t", {f32({{"step", 2}})}, [&](Builder& b, Args a) {
         return scan(b, {.axis = "step", .length = 4}, {b.constant(0, DType::f32)}, {},
                     [&](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                       return ScanStep{{c[0]}, {a[0]}};  // an enclosing value with the loop's axis
                     })
             .ys[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kAxisNameCollision) << st;
  st = define("t", {f32({})}, [&](Builder& b, Args a) {
         return scan(b, {.length = -1}, {a[0]}, {}, body).carry[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidArgument) << st;
}

// A body's own error is the enclosing recording's, and sticks.
TEST(Scan, BodyErrorsPoisonTheRecording) {
  auto st = define("t", {f32({{"n", 3}})}, [](Builder& b, Args a) {
              ScanResult r = scan(b, {.length = 2}, {a[0]}, {},
                                  [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                                    return ScanStep{{c[0].sum("guess").broadcast("n", 3)}, {}};
                                  });
              EXPECT_FALSE(r.carry[0].valid());
              return r.carry[0] + 1.0f;
            }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kUnknownAxis) << st;
  st = define("t", {f32({})}, [](Builder& b, Args a) {
         return scan(b, {.length = 2}, {a[0]}, {},
                     [](Builder&, std::span<const Value>, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                       return absl::InvalidArgumentError("the user's own");
                     })
             .carry[0];
       }).status();
  EXPECT_THAT(st.message(), HasSubstr("the user's own"));
  // A default-constructed value returned from a body.
  st = define("t", {f32({})}, [&](Builder& b, Args a) {
         return scan(b, {.length = 2}, {a[0]}, {},
                     [&](Builder&, std::span<const Value>, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                       return ScanStep{{Value()}, {}};
                     })
             .carry[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidValue) << st;
}

TEST(WhileLoop, RunsUntilTheConditionFails) {
  // Doubling x until it passes a limit (captured by the condition) while
  // counting steps by an increment (captured by the body).
  auto p = define("doubling", {f32({}), f32({}), spec(DType::i32, {})}, [](Builder& b, Args a) {
    const Value limit = a[1], one = a[2];
    return whileLoop(
        b, {a[0], b.constant(0, DType::i32)},
        [&](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0].lt(limit); },
        [&](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
          return std::vector<Value>{c[0] * 2.0f, c[1] + one};
        });
  });
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->bodies.size(), 2u);
  // Both bodies take the carries, then every capture of either.
  EXPECT_EQ(p->bodies[0].inputs.size(), 4u);
  EXPECT_EQ(p->bodies[1].inputs.size(), 4u);
  for (float x0 : {0.75f, 100.0f, 300.0f}) {
    std::vector<float> x = {x0}, limit = {100};
    std::vector<int32_t> one = {1};
    auto out = evalDoubles(*p, {in(x), in(limit), in(one)});
    ASSERT_TRUE(out.ok()) << out.status();
    float v = x0;
    int steps = 0;
    while (v < 100) {
      v *= 2;
      ++steps;
    }
    EXPECT_EQ((*out)[0][0], double(v));
    EXPECT_EQ((*out)[1][0], double(steps));
  }
}

TEST(WhileLoop, ConditionAndCarryErrors) {
  auto st = define("t", {f32({})}, [](Builder& b, Args a) {
              return whileLoop(
                  b, {a[0]}, [](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0]; },
                  [](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
                    return std::vector<Value>{c[0]};
                  })[0];
            }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kDTypeMismatch) << st;
  EXPECT_THAT(st.message(), HasSubstr("bool scalar"));
  st = define("t", {f32({})}, [](Builder& b, Args a) {
         return whileLoop(
             b, {a[0]}, [](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0].gt(1.0f); },
             [](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
               return std::vector<Value>{c[0].broadcast("n", 2)};
             })[0];
       }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kCarryMismatch) << st;
  EXPECT_THAT(st.message(), HasSubstr("f32[n=2]"));
}

Program counter() {
  return *define("count", {f32({{"n", 2}})}, [](Builder& b, Args a) {
    ScanResult r = scan(b, {.axis = "t", .length = 7}, {a[0]}, {},
                        [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                          return ScanStep{{c[0] + 1.0f}, {c[0].sum("n")}};
                        });
    return std::vector<Value>{r.carry[0], r.ys[0]};
  });
}

TEST(Loops, TextAndDotShowTheBodies) {
  const Program p = counter();
  const std::string text = toText(p);
  EXPECT_THAT(text, HasSubstr("= scan %0 {axis=t, length=7, carries=1, xs=0, body=0} : loop"));
  EXPECT_THAT(text, HasSubstr("    body #0(%0: f32[n=2]) {"));
  EXPECT_THAT(text, HasSubstr("loop_result %1 {result=1} : f32[t=7]"));
  const std::string dot = toDot(p);
  EXPECT_THAT(dot, HasSubstr("subgraph \"cluster_b0_\""));
  EXPECT_THAT(dot, HasSubstr("b0_n"));
}

TEST(Loops, ValidationRefusesDamagedLoops) {
  const Program good = counter();
  ASSERT_TRUE(validateProgram(good).ok());
  auto refused = [](const Program& p, std::string_view what) {
    const absl::Status st = validateProgram(p);
    EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << what << ": " << st;
    EXPECT_FALSE(evaluate(p, {}).ok()) << what;
  };
  Program p = good;
  p.nodes[1].ints[0] = 5;
  refused(p, "a body that does not exist");
  p = good;
  p.outputs[0] = 1;
  refused(p, "an output naming the loop itself");
  p = good;
  p.nodes[2].op = OpCode::kNeg;
  p.nodes[2].ints.clear();
  refused(p, "an op reading the loop directly");
  p = good;
  p.bodies[0].nodes[0].dtype = DType::f64;
  refused(p, "a body whose carry input has another dtype");
  p = good;
  p.nodes[1].ints[3] = 8;
  refused(p, "ys recorded with another length");
  // Nested deeper than the language allows.
  p = good;
  for (int64_t d = 0; d < kMaxLoopDepth; ++d) {
    Program outer = good;
    outer.bodies[0].bodies.push_back(p.bodies[0]);
    p = outer;
  }
  refused(p, "bodies nested past kMaxLoopDepth");
}

TEST(Loops, RecordingRefusesNestingPastTheLimit) {
  std::function<Value(Builder&, Value, int)> nest = [&](Builder& b, Value x, int depth) -> Value {
    if (depth == 0) return x + 1.0f;
    return scan(b, {.length = 1}, {x}, {},
                [&](Builder& ib, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                  return ScanStep{{nest(ib, c[0], depth - 1)}, {}};
                })
        .carry[0];
  };
  auto ok = define("t", {f32({})}, [&](Builder& b, Args a) { return nest(b, a[0], kMaxLoopDepth); });
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto st = define("t", {f32({})}, [&](Builder& b, Args a) { return nest(b, a[0], kMaxLoopDepth + 1); }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kProgramTooLarge) << st;
}

// whileLoop is not differentiable (for good); vmap of a loop that does not
// see the batch leaves it be.
TEST(Loops, WhatTransformsAndCompilersSayToday) {
  auto w = Function::define("w", {f32({})}, [](Builder& b, Args a) {
    return whileLoop(
        b, {a[0]}, [](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0].lt(10.0f); },
        [](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
          return std::vector<Value>{c[0] * 1.5f};
        })[0];
  });
  ASSERT_TRUE(w.ok()) << w.status();
  auto g = w->grad({.wrt = {0}});
  EXPECT_EQ(errorKind(g.status()), ErrorKind::kNotDifferentiable) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr("while_loop %"));
  auto s = Function::fromProgram(counter());
  ASSERT_TRUE(s.ok());
  auto u = s->vmap({.axis_size = 3, .in_axes = {unmapped}, .axis_name = "batch"});
  ASSERT_TRUE(u.ok()) << u.status();  // the loop does not see the batch
  std::vector<float> x = {1, 2};
  auto direct = evalDoubles(counter(), {in(x)});
  auto batched = evalDoubles(u->program(), {in(x)});
  ASSERT_TRUE(direct.ok() && batched.ok());
  for (int k = 0; k < 3; ++k) EXPECT_EQ((*batched)[0][k * 2 + 1], (*direct)[0][1]);
}

// vmap of a scan whose xs, one initial carry and a capture are batched
// (the other carry is not): each batch entry as the loop run on its own.
TEST(Loops, VmapOfScanRunsEachEntry) {
  auto f = Function::define("f", {f32({{"n", 2}}), f32({}), f32({{"step", 4}, {"n", 2}}), f32({})},
                            [](Builder& b, Args a) {
    const Value w = a[3];
    ScanResult r = scan(b, {.length = 4}, {a[0], a[1]}, {a[2]},
                        [&](Builder&, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<ScanStep> {
                          const Value next = c[0] * w + x[0];
                          return ScanStep{{next, c[1] + 1.0f}, {next.sum("n") * c[1]}};
                        });
    return std::vector<Value>{r.carry[0], r.carry[1], r.ys[0]};
  });
  ASSERT_TRUE(f.ok()) << f.status();
  auto v = f->vmap({.axis_size = 3,
                    .in_axes = {mappedAxis(1), unmapped, mappedAxis(2), mappedAxis(0)},
                    .axis_name = "batch"});
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<float> c0(2 * 3), xs(4 * 2 * 3), w = {0.5f, -1.0f, 2.0f}, one = {1.5f};
  for (size_t i = 0; i < c0.size(); ++i) c0[i] = 0.25f * i - 0.5f;
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::cos(1.3f * i);
  auto batched = evalDoubles(v->program(), {in(c0), in(one), in(xs), in(w)});
  ASSERT_TRUE(batched.ok()) << batched.status();
  for (int e = 0; e < 3; ++e) {
    std::vector<float> c0e = {c0[0 * 3 + e], c0[1 * 3 + e]}, we = {w[e]}, xse(8);
    for (int t = 0; t < 4; ++t) {
      for (int n = 0; n < 2; ++n) xse[t * 2 + n] = xs[(t * 2 + n) * 3 + e];
    }
    auto alone = evalDoubles(f->program(), {in(c0e), in(one), in(xse), in(we)});
    ASSERT_TRUE(alone.ok()) << alone.status();
    for (int n = 0; n < 2; ++n) EXPECT_EQ((*batched)[0][e * 2 + n], (*alone)[0][n]) << e;
    EXPECT_EQ((*batched)[1][e], (*alone)[1][0]) << e;
    for (int t = 0; t < 4; ++t) EXPECT_EQ((*batched)[2][e * 4 + t], (*alone)[2][t]) << e;
  }
}

// vmap of a whileLoop runs until every entry's condition fails; an entry
// that is done keeps its carry.
TEST(Loops, VmapOfWhileLoopStopsEachEntryAtItsOwnStep) {
  auto f = Function::define("f", {f32({}), f32({})}, [](Builder& b, Args a) {
    const Value limit = a[1];
    return whileLoop(
        b, {a[0], b.constant(0, DType::i32)},
        [&](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0].lt(limit); },
        [&](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
          return std::vector<Value>{c[0] * 2.0f, c[1] + 1.0};
        });
  });
  ASSERT_TRUE(f.ok()) << f.status();
  auto v = f->vmap({.axis_size = 4, .in_axes = {mappedAxis(0), unmapped}, .axis_name = "lane"});
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<float> x = {0.5f, 3.0f, 100.0f, 0.01f}, limit = {10.0f};
  auto out = evalDoubles(v->program(), {in(x), in(limit)});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int e = 0; e < 4; ++e) {
    float value = x[e];
    int steps = 0;
    while (value < 10.0f) {
      value *= 2;
      ++steps;
    }
    EXPECT_EQ((*out)[0][e], double(value)) << e;
    EXPECT_EQ((*out)[1][e], double(steps)) << e;
  }
}

// A forced, damped oscillator over 20 steps: the loss reads every step's
// position (ys) and the final velocity; its gradient with respect to the
// initial position (a carry), the stiffness (a capture) and the forcing
// (xs) against central differences of the evaluator's values.
Function oscillator() {
  return *Function::define("oscillator", {f64({}), f64({}), f64({{"step", 20}})}, [](Builder& b, Args a) {
    const Value k = a[1];
    ScanResult r = scan(b, {.length = 20}, {a[0], b.constant(0.5, DType::f64), b.constant(0, DType::i32)}, {a[2]},
                        [&](Builder&, std::span<const Value> c, std::span<const Value> f) -> absl::StatusOr<ScanStep> {
                          const Value v = c[1] + (f[0] - k * c[0].sin() - 0.1 * c[1]) * 0.1;
                          const Value x = c[0] + v * 0.1;
                          return ScanStep{{x, v, c[2] + 1.0}, {x * x}};
                        });
    return r.ys[0].sum("step") + r.carry[1] * 3.0;
  });
}

double evalScalar(const Program& p, const std::vector<std::vector<double>>& args) {
  std::vector<std::span<const std::byte>> in;
  for (const auto& a : args) in.push_back(std::as_bytes(std::span<const double>(a)));
  return (*evalDoubles(p, in))[0][0];
}

TEST(Loops, GradThroughScanMatchesFiniteDifferences) {
  const Function f = oscillator();
  auto g = f.valueAndGrad({.wrt = {0, 1, 2}});
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<std::vector<double>> args = {{0.3}, {2.0}, std::vector<double>(20)};
  for (int t = 0; t < 20; ++t) args[2][t] = 0.2 * std::cos(0.5 * t);
  std::vector<std::span<const std::byte>> in;
  for (const auto& a : args) in.push_back(std::as_bytes(std::span<const double>(a)));
  auto out = evalDoubles(g->program(), in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0][0], evalScalar(f.program(), args));
  const double h = 1e-6;
  auto central = [&](size_t input, size_t element) {
    auto plus = args, minus = args;
    plus[input][element] += h;
    minus[input][element] -= h;
    return (evalScalar(f.program(), plus) - evalScalar(f.program(), minus)) / (2 * h);
  };
  EXPECT_NEAR((*out)[1][0], central(0, 0), 1e-6 * (1 + std::abs(central(0, 0))));
  EXPECT_NEAR((*out)[2][0], central(1, 0), 1e-6 * (1 + std::abs(central(1, 0))));
  for (size_t t = 0; t < 20; ++t) {
    EXPECT_NEAR((*out)[3][t], central(2, t), 1e-6 * (1 + std::abs(central(2, t)))) << t;
  }
}

// The second derivative through a scan: grad of grad, against central
// differences of the first derivative.
TEST(Loops, GradOfGradThroughScan) {
  auto f = Function::define("f", {f64({})}, [](Builder& b, Args a) {
    const Value w = a[0];
    return scan(b, {.length = 5}, {b.constant(0.2, DType::f64)}, {},
                [&](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                  return ScanStep{{c[0] * w + c[0].sin()}, {}};
                })
        .carry[0];
  });
  ASSERT_TRUE(f.ok()) << f.status();
  auto d1 = f->grad({.wrt = {0}});
  ASSERT_TRUE(d1.ok()) << d1.status();
  auto d2 = d1->grad({.wrt = {0}});
  ASSERT_TRUE(d2.ok()) << d2.status();
  const double w = 0.7, h = 1e-5;
  const double second = evalScalar(d2->program(), {{w}});
  const double central = (evalScalar(d1->program(), {{w + h}}) - evalScalar(d1->program(), {{w - h}})) / (2 * h);
  EXPECT_NEAR(second, central, 1e-6 * (1 + std::abs(central)));
}

// vmap of the gradient through a scan: each entry's gradient alone.
TEST(Loops, VmapOfGradThroughScan) {
  auto g = oscillator().grad({.wrt = {1}});
  ASSERT_TRUE(g.ok()) << g.status();
  auto v = g->vmap({.axis_size = 3, .in_axes = {mappedAxis(0), unmapped, unmapped}, .axis_name = "b"});
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<double> x0 = {0.1, 0.3, -0.4}, k = {2.0}, forcing(20, 0.05);
  auto batched = evalDoubles(v->program(), {in(x0), in(k), in(forcing)});
  ASSERT_TRUE(batched.ok()) << batched.status();
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ((*batched)[0][e], evalScalar(g->program(), {{x0[e]}, k, forcing})) << e;
  }
}

// Loops compiled for x86-64 (stages: backends/staged_program.h) against
// the evaluator, on f64 programs (the evaluator's arithmetic exactly, but
// for the order of sums) and f32 ones (within a few ulps per step).
// Compiled with scans in one kernel where they fit (in_kernel), in chunks
// of a few steps per launch of that kernel (as accyd runs them, here with a
// tiny budget so that every scan of more than a step is chunked, with a
// last short chunk), or every scan step by step: all match the evaluator,
// and each other bit for bit (the same body code runs each step).
void expectCpuMatchesEvaluator(const Program& p, const std::vector<std::vector<double>>& args, double tolerance,
                               const std::string& what) {
  std::vector<std::vector<std::byte>> first;
  for (int mode = 0; mode < 3; ++mode) {
    const bool in_kernel = mode < 2;
    SCOPED_TRACE(mode == 0 ? "scans in one kernel" : mode == 1 ? "scans in chunks of steps" : "scans step by step");
  auto cpu = CpuExecutable::compile(p, {.threads = 2, .scans_in_kernel = in_kernel, .scan_kernel_work = mode == 1 ? 64 : 0});
  ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
  ASSERT_NE(cpu->stages(), nullptr) << what;
  std::vector<std::vector<std::byte>> in_bytes;
  for (size_t i = 0; i < args.size(); ++i) {
    const Spec s = p.inputSpecs()[i];
    std::vector<std::byte> b(s.byteSize());
    for (size_t e = 0; e < args[i].size(); ++e) storeElement(s.dtype, args[i][e], &b[e * dtypeSize(s.dtype)]);
    in_bytes.push_back(std::move(b));
  }
  std::vector<std::span<const std::byte>> ins(in_bytes.begin(), in_bytes.end());
  auto want = evaluate(p, ins);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status();
  std::vector<std::vector<std::byte>> got;
  for (const Spec& s : p.outputSpecs()) got.emplace_back(s.byteSize());
  std::vector<std::span<std::byte>> outs(got.begin(), got.end());
  for (int run = 0; run < 2; ++run) {  // a second launch reuses nothing stale
    ASSERT_TRUE(cpu->launch(ins, outs).ok()) << what;
    for (size_t k = 0; k < got.size(); ++k) {
      const DType d = p.outputSpecs()[k].dtype;
      const auto g = testing::asDoubles(got[k], d), w = testing::asDoubles((*want)[k], d);
      ASSERT_EQ(g.size(), w.size());
      for (size_t e = 0; e < g.size(); ++e) {
        EXPECT_NEAR(g[e], w[e], tolerance * (1 + std::abs(w[e]))) << what << ": output " << k << " element " << e;
      }
    }
  }
  if (first.empty()) {
    first = got;
  } else {
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], first[k]) << what << ": output " << k << " differs";
  }
  }
}

TEST(Loops, CompiledForX86MatchTheEvaluator) {
  // xs sliced along an axis in the middle, ys, two carries.
  auto running = define("running", {f32({{"n", 3}}), f32({{"m", 2}, {"step", 5}, {"n", 3}})}, [](Builder& b, Args a) {
    ScanResult r = scan(b, {.axis = "step", .length = 5}, {a[0], b.constant(1, DType::f32)}, {a[1]},
                        [](Builder&, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<ScanStep> {
                          Value next = c[0] * 0.5f + x[0].sum("m");
                          return ScanStep{{next, c[1] * 1.5f}, {next * c[1], next.sum("n")}};
                        });
    return std::vector<Value>{r.carry[0], r.carry[1], r.ys[0], r.ys[1]};
  });
  ASSERT_TRUE(running.ok()) << running.status();
  std::vector<double> xs(30);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.9 * i);
  expectCpuMatchesEvaluator(*running, {{1, -2, 0.5}, xs}, 1e-5, "running");
  {
    // The chunked mode chunks it: 5 steps in launches of fewer, the last
    // one shorter, the xs gathered per chunk along their middle axis.
    const int64_t step = backends::stepWork(running->bodies[0]);
    auto chunked = CpuExecutable::compile(*running, {.threads = 2, .scan_kernel_work = 2 * step});
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    EXPECT_EQ(chunked->stages()->chunkedScans(), 1);
    // Two steps a launch (2, 2 and 1) against the evaluator.
    std::vector<std::vector<std::byte>> in_bytes;
    const std::vector<std::vector<double>> args = {{1, -2, 0.5}, xs};
    for (size_t i = 0; i < args.size(); ++i) {
      const Spec sp = running->inputSpecs()[i];
      std::vector<std::byte> bytes(sp.byteSize());
      for (size_t e = 0; e < args[i].size(); ++e) storeElement(sp.dtype, args[i][e], &bytes[e * dtypeSize(sp.dtype)]);
      in_bytes.push_back(std::move(bytes));
    }
    std::vector<std::span<const std::byte>> ins(in_bytes.begin(), in_bytes.end());
    auto want = evaluate(*running, ins);
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<std::vector<std::byte>> got;
    for (const Spec& sp : running->outputSpecs()) got.emplace_back(sp.byteSize());
    std::vector<std::span<std::byte>> outs(got.begin(), got.end());
    ASSERT_TRUE(chunked->launch(ins, outs).ok());
    for (size_t k = 0; k < got.size(); ++k) {
      const auto g = testing::asDoubles(got[k], DType::f32), w = testing::asDoubles((*want)[k], DType::f32);
      for (size_t e = 0; e < g.size(); ++e) EXPECT_NEAR(g[e], w[e], 1e-5 * (1 + std::abs(w[e]))) << k << " " << e;
    }
  }
  // Every step length's parity (the carries alternate between two buffers),
  // zero steps included.
  for (int64_t length : {0, 1, 2, 3, 8}) {
    auto p = define("count", {f64({{"n", 2}})}, [&](Builder& b, Args a) {
      return scan(b, {.length = length}, {a[0], b.constant(0, DType::i32)}, {},
                  [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                    return ScanStep{{c[0] * 1.25 + 0.5, c[1] + 1.0}, {}};
                  })
          .carry;
    });
    ASSERT_TRUE(p.ok()) << p.status();
    expectCpuMatchesEvaluator(*p, {{0.25, -3}}, 0, "length " + std::to_string(length));
  }
  // The oscillator (captures, an integer carry) and its gradient (a
  // backward scan reading stacked carries reversed).
  const Function osc = oscillator();
  std::vector<double> forcing(20);
  for (int t = 0; t < 20; ++t) forcing[t] = 0.2 * std::cos(0.5 * t);
  expectCpuMatchesEvaluator(osc.program(), {{0.3}, {2.0}, forcing}, 1e-12, "oscillator");
  auto g = osc.valueAndGrad({.wrt = {0, 1, 2}});
  ASSERT_TRUE(g.ok()) << g.status();
  expectCpuMatchesEvaluator(g->program(), {{0.3}, {2.0}, forcing}, 1e-12, "oscillator's gradient");
  // A while loop with 0, 1 and several trips, and a batched one (lanes
  // finishing at different trips).
  auto doubling = define("doubling", {f64({})}, [](Builder& b, Args a) {
    return whileLoop(
        b, {a[0], b.constant(0, DType::i32)},
        [](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0].lt(100.0); },
        [](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
          return std::vector<Value>{c[0] * 2.0, c[1] + 1.0};
        });
  });
  ASSERT_TRUE(doubling.ok());
  for (double x0 : {500.0, 60.0, 0.75}) expectCpuMatchesEvaluator(*doubling, {{x0}}, 0, "doubling " + std::to_string(x0));
  auto lanes = Function::fromProgram(*doubling)->vmap({.axis_size = 4, .in_axes = {mappedAxis(0)}, .axis_name = "lane"});
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  expectCpuMatchesEvaluator(lanes->program(), {{0.5, 3.0, 100.0, 0.01}}, 0, "doubling by lane");
  // A scan with a while loop in its body, capturing from both levels.
  auto nested = define("nested", {f32({{"n", 3}}), f32({{"step", 4}, {"n", 3}})}, [](Builder& b, Args a) {
    const Value w = a[0];
    ScanResult r = scan(b, {.length = 4}, {a[0]}, {a[1]},
                        [&](Builder& sb, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<ScanStep> {
                          std::vector<Value> inner = whileLoop(
                              sb, {c[0]},
                              [](Builder&, std::span<const Value> d) -> absl::StatusOr<Value> {
                                return d[0].sum("n").lt(50.0f);
                              },
                              [&](Builder&, std::span<const Value> d) -> absl::StatusOr<std::vector<Value>> {
                                return std::vector<Value>{d[0] * 2.0f + w.abs() + x[0]};
                              });
                          return ScanStep{{inner[0] * 0.25f}, {inner[0].sum("n")}};
                        });
    return std::vector<Value>{r.carry[0], r.ys[0]};
  });
  ASSERT_TRUE(nested.ok()) << nested.status();
  expectCpuMatchesEvaluator(*nested, {{1, 2, 3}, std::vector<double>(12, 0.5)}, 1e-5, "nested");
}

// A scan whose body is loop-free and small runs as one kernel (no loop
// left to step); one of no steps, one whose body holds a loop and one
// whose body splits across threads run step by step, and so does every
// scan when asked.
TEST(Loops, SmallScansRunAsOneKernel) {
  auto decay = [](int64_t lanes, int64_t length) {
    return *define("decay", {f32({{"lane", lanes}})}, [&](Builder& b, Args a) {
      ScanResult r = scan(b, {.length = length}, {a[0]}, {},
                          [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                            return ScanStep{{c[0] * 0.999f + 0.001f}, {c[0].sum("lane")}};
                          });
      return std::vector<Value>{r.carry[0], r.ys[0]};
    });
  };
  auto stepped = [](const Program& p, int threads, bool in_kernel) -> int64_t {
    auto cpu = CpuExecutable::compile(p, {.threads = threads, .scans_in_kernel = in_kernel});
    EXPECT_TRUE(cpu.ok()) << cpu.status();
    return cpu.ok() ? cpu->stages()->steppedLoops() : -1;
  };
  EXPECT_EQ(stepped(decay(8, 1000), 1, true), 0);
  EXPECT_EQ(stepped(decay(8, 1000), 2, true), 0);
  EXPECT_EQ(stepped(decay(8, 1000), 1, false), 1);
  EXPECT_EQ(stepped(decay(8, 1), 1, true), 0);
  // A body of 2^20 lanes splits across two threads: a step at a time.
  EXPECT_EQ(stepped(decay(1 << 20, 3), 2, true), 1);
  EXPECT_EQ(stepped(decay(1 << 20, 3), 1, true), 0);
  // More work than one kernel may hold without a stop check.
  EXPECT_EQ(stepped(decay(1 << 20, 1000), 1, true), 1);
  // The results, each way, against the evaluator and each other.
  std::vector<double> start(8);
  for (int l = 0; l < 8; ++l) start[l] = 0.25 * l - 1;
  for (int64_t length : {1, 2, 5, 1000}) {
    expectCpuMatchesEvaluator(decay(8, length), {start}, 1e-5, "decay " + std::to_string(length));
  }
  std::vector<double> wide(100);
  for (int l = 0; l < 100; ++l) wide[l] = std::cos(0.3 * l);
  expectCpuMatchesEvaluator(decay(100, 7), {wide}, 1e-5, "decay of 100 lanes");
}

// Checkpointing: the same values and gradients as the plain scan, chunks
// dividing the length or not, and a gradient that keeps far fewer carries.
TEST(Loops, CheckpointedScanMatchesThePlainOneAndKeepsLess) {
  auto forced = [](int64_t lanes, int64_t length, int64_t every) {
    return *Function::define("forced", {f64({{"lane", lanes}}), f64({}), f64({{"step", length}, {"lane", lanes}})},
                             [&](Builder& b, Args a) {
                               const Value k = a[1];
                               ScanResult r = scan(
                                   b, {.length = length, .checkpoint_every = every}, {a[0], a[0] * 0.0}, {a[2]},
                                   [&](Builder&, std::span<const Value> c,
                                       std::span<const Value> f) -> absl::StatusOr<ScanStep> {
                                     const Value v = c[1] + (f[0] - k * c[0].sin() - 0.1 * c[1]) * 0.05;
                                     const Value x = c[0] + v * 0.05;
                                     return ScanStep{{x, v}, {(x * x).sum("lane")}};
                                   });
                               return r.ys[0].sum("step") + (r.carry[0] * r.carry[1]).sum("lane");
                             });
  };
  std::vector<std::vector<double>> args = {std::vector<double>(3), {1.5}, std::vector<double>(60)};
  for (int l = 0; l < 3; ++l) args[0][l] = 0.2 + 0.1 * l;
  for (int t = 0; t < 60; ++t) args[2][t] = 0.3 * std::cos(0.37 * t);
  std::vector<std::span<const std::byte>> in;
  for (const auto& a : args) in.push_back(std::as_bytes(std::span<const double>(a)));
  const Function plain = forced(3, 20, 0);
  auto plain_grad = plain.valueAndGrad({.wrt = {0, 1, 2}});
  ASSERT_TRUE(plain_grad.ok()) << plain_grad.status();
  auto want = evalDoubles(plain_grad->program(), in);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int64_t every : {1, 4, 6, 7, 19}) {
    SCOPED_TRACE("checkpoint every " + std::to_string(every));
    const Function f = forced(3, 20, every);
    auto g = f.valueAndGrad({.wrt = {0, 1, 2}});
    ASSERT_TRUE(g.ok()) << g.status();
    auto got = evalDoubles(g->program(), in);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t k = 0; k < want->size(); ++k) {
      ASSERT_EQ((*got)[k].size(), (*want)[k].size());
      for (size_t e = 0; e < (*want)[k].size(); ++e) {
        EXPECT_NEAR((*got)[k][e], (*want)[k][e], 1e-12 * (1 + std::abs((*want)[k][e]))) << "output " << k;
      }
    }
    if (every == 6) {
      expectCpuMatchesEvaluator(g->program(), args, 1e-10, "checkpointed gradient");
    }
  }
  // Memory: 1,000 lanes over 400 steps. Reverse mode keeps what the
  // forward scans return (loop results: the stacked carries): 400 carries
  // plainly, at most 20 at a time checkpointed every 20 steps.
  auto largest_kept = [&](int64_t every) -> int64_t {
    auto g = forced(1000, 400, every).valueAndGrad({.wrt = {0}});
    EXPECT_TRUE(g.ok()) << g.status();
    if (!g.ok()) return -1;
    int64_t most = 0;
    std::function<void(const Program&)> visit = [&](const Program& p) {
      for (const Node& n : p.nodes) {
        if (n.op == OpCode::kLoopResult) most = std::max(most, n.spec().byteSize());
      }
      for (const Program& body : p.bodies) visit(body);
    };
    visit(g->program());
    return most;
  };
  EXPECT_EQ(largest_kept(0), 400 * 1000 * 8);
  EXPECT_EQ(largest_kept(20), 20 * 1000 * 8);
  // Misuse.
  auto st = define("bad", {f64({})}, [](Builder& b, Args a) {
              return scan(b, {.length = 4, .checkpoint_every = -1}, {a[0]}, {},
                          [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                            return ScanStep{{c[0]}, {}};
                          })
                  .carry[0];
            }).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidArgument) << st;
}

// Compile time and code size do not depend on the trip count: 10 and
// 10^6 steps compile to the same stages and the same bytes of code.
TEST(Loops, CodeSizeDoesNotGrowWithLength) {
  auto make = [](int64_t length) {
    return *define("decay", {f32({{"lane", 8}})}, [&](Builder& b, Args a) {
      return scan(b, {.length = length}, {a[0]}, {},
                  [](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                    return ScanStep{{c[0] * 0.999f + 0.001f}, {}};
                  })
          .carry[0];
    });
  };
  auto short_loop = CpuExecutable::compile(make(10), {.threads = 1});
  auto long_loop = CpuExecutable::compile(make(1000000), {.threads = 1});
  ASSERT_TRUE(short_loop.ok() && long_loop.ok());
  EXPECT_EQ(short_loop->stages()->loadedStages(), long_loop->stages()->loadedStages());
  EXPECT_EQ(short_loop->stages()->codeBytes(), long_loop->stages()->codeBytes());
  EXPECT_GT(short_loop->stages()->codeBytes(), 0);
}

// Bad buffers are refused by name before anything runs.
TEST(Loops, CompiledLoopsCheckTheirBuffers) {
  auto cpu = CpuExecutable::compile(counter(), {.threads = 1});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::vector<float> x(2), carry(2), ys(7), short_ys(6);
  auto st = cpu->launch({accy::bytes(x)}, {accy::writableBytes(carry), accy::writableBytes(short_ys)});
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidBuffer) << st;
  st = cpu->launch({accy::bytes(x)}, {accy::writableBytes(carry)});
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidBuffer) << st;
  st = cpu->launch({accy::bytes(x)}, {accy::writableBytes(carry), std::span<std::byte>(accy::writableBytes(carry))});
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidBuffer) << st;
  EXPECT_EQ(errorKind(cpu->save().status()), ErrorKind::kUnimplemented);
}

}  // namespace
}  // namespace accy::tensor
