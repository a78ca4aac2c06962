// The N-body example: at 64 bodies and 50 steps compiled for x86-64 against
// the evaluator; over the run's 1,000 steps at 256 bodies, the energy kept to
// 1e-6 and the momentum to rounding; in f32.
#include <cmath>

#include "examples/nbody/nbody.h"
#include "gtest/gtest.h"

namespace {

namespace tensor = accy::tensor;

// Runs the example's program for `o` on x86-64 with `threads`, from the
// example's start.
template <typename T>
nbody::Buffers<T> run(const nbody::Options& o, int threads) {
  nbody::Buffers<T> b(nbody::start(o.bodies));
  auto p = nbody::program(o);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return b;
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = threads});
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return b;
  const absl::Status st = exe->launch(b.inputs(), b.outputs());
  EXPECT_TRUE(st.ok()) << st;
  return b;
}

TEST(NBody, CompiledMatchesTheEvaluatorAndKeepsEnergyAndMomentum) {
  nbody::Options o;
  o.bodies = 64;
  o.steps = 50;
  auto p = nbody::program(o);
  ASSERT_TRUE(p.ok()) << p.status();
  nbody::Buffers<double> b = run<double>(o, 2);
  auto want = tensor::evaluate(*p, b.inputs());
  ASSERT_TRUE(want.ok()) << want.status();
  auto at = [&](size_t k, size_t i) { return tensor::loadElement(tensor::DType::f64, (*want)[k].data() + i * 8); };
  for (size_t i = 0; i < b.pos.size(); ++i) {
    ASSERT_NEAR(b.pos_out[i], at(0, i), 1e-9 * (1 + std::abs(at(0, i)))) << i;
    ASSERT_NEAR(b.vel_out[i], at(1, i), 1e-9 * (1 + std::abs(at(1, i)))) << i;
  }
  EXPECT_NEAR(b.e0[0], at(2, 0), 1e-12 * std::abs(at(2, 0)));
  EXPECT_NEAR(b.e1[0], at(3, 0), 1e-12 * std::abs(at(3, 0)));
  EXPECT_LT(b.drift(), 1e-6) << "energy " << b.e0[0] << " -> " << b.e1[0];
  EXPECT_LT(b.e0[0], 0) << "a bound cluster";
  for (double m : b.momentum) EXPECT_LT(std::abs(m), 1e-14);
}

// The whole run's length, 1,000 steps, at 256 bodies: the f64 energy drift
// stays below 1e-6 (the full 1,024 bodies run in `make bench` and the
// example's binary).
TEST(NBody, AThousandStepsKeepTheEnergyToOnePartInAMillion) {
  nbody::Options o;
  o.bodies = 256;
  ASSERT_EQ(o.steps, 1000);
  nbody::Buffers<double> b = run<double>(o, 2);
  EXPECT_LT(b.drift(), 1e-6) << "energy " << b.e0[0] << " -> " << b.e1[0];
  double moved = 0;  // the bodies did move: the run is not a no-op
  for (size_t i = 0; i < b.pos.size(); ++i) moved = std::max(moved, std::abs(b.pos_out[i] - b.pos[i]));
  EXPECT_GT(moved, 0.01);
  for (double m : b.momentum) EXPECT_LT(std::abs(m), 1e-14);
}

// f32: the same program runs, with a drift an f32 run allows.
TEST(NBody, RunsInF32) {
  nbody::Options o;
  o.bodies = 64;
  o.steps = 50;
  o.dtype = tensor::DType::f32;
  nbody::Buffers<float> b = run<float>(o, 1);
  EXPECT_LT(b.drift(), 1e-4) << "energy " << b.e0[0] << " -> " << b.e1[0];
  EXPECT_LT(b.e0[0], 0);
}

}  // namespace
