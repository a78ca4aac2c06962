// The N-body example at 64 bodies and 50 steps: compiled for x86-64 against
// the evaluator, the energy kept to 1e-6, the momentum to rounding.
#include <cmath>
#include <cstring>

#include "examples/nbody/nbody.h"
#include "gtest/gtest.h"

namespace {

namespace tensor = accy::tensor;

TEST(NBody, CompiledMatchesTheEvaluatorAndKeepsEnergyAndMomentum) {
  nbody::Options o;
  o.bodies = 64;
  o.steps = 50;
  auto p = nbody::program(o);
  ASSERT_TRUE(p.ok()) << p.status();
  const nbody::Start s = nbody::start(o.bodies);
  const std::vector<std::span<const std::byte>> in = {accy::bytes(s.pos), accy::bytes(s.vel), accy::bytes(s.mass)};
  auto want = tensor::evaluate(*p, in);
  ASSERT_TRUE(want.ok()) << want.status();
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = 2});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<double> pos(s.pos.size()), vel(s.vel.size()), e0(1), e1(1), momentum(3);
  ASSERT_TRUE(exe->launch(in, {accy::writableBytes(pos), accy::writableBytes(vel), accy::writableBytes(e0),
                               accy::writableBytes(e1), accy::writableBytes(momentum)})
                  .ok());
  auto at = [&](size_t k, size_t i) {
    double v;
    std::memcpy(&v, (*want)[k].data() + i * 8, 8);
    return v;
  };
  for (size_t i = 0; i < pos.size(); ++i) {
    ASSERT_NEAR(pos[i], at(0, i), 1e-9 * (1 + std::abs(at(0, i)))) << i;
    ASSERT_NEAR(vel[i], at(1, i), 1e-9 * (1 + std::abs(at(1, i)))) << i;
  }
  EXPECT_NEAR(e0[0], at(2, 0), 1e-12 * std::abs(at(2, 0)));
  EXPECT_NEAR(e1[0], at(3, 0), 1e-12 * std::abs(at(3, 0)));
  EXPECT_LT(std::abs(e1[0] - e0[0]) / std::abs(e0[0]), 1e-6) << "energy " << e0[0] << " -> " << e1[0];
  EXPECT_LT(e0[0], 0) << "a bound cluster";
  for (double m : momentum) EXPECT_LT(std::abs(m), 1e-14);
}

// The whole run's length, 1,000 steps, at 256 bodies: the f64 energy drift
// stays below 1e-6 (the full 1,024 bodies run in `make bench` and the
// example's binary).
TEST(NBody, AThousandStepsKeepTheEnergyToOnePartInAMillion) {
  nbody::Options o;
  o.bodies = 256;
  ASSERT_EQ(o.steps, 1000);
  auto p = nbody::program(o);
  ASSERT_TRUE(p.ok()) << p.status();
  const nbody::Start s = nbody::start(o.bodies);
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = 2});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<double> pos(s.pos.size()), vel(s.vel.size()), e0(1), e1(1), momentum(3);
  ASSERT_TRUE(exe->launch({accy::bytes(s.pos), accy::bytes(s.vel), accy::bytes(s.mass)},
                          {accy::writableBytes(pos), accy::writableBytes(vel), accy::writableBytes(e0),
                           accy::writableBytes(e1), accy::writableBytes(momentum)})
                  .ok());
  EXPECT_LT(std::abs(e1[0] - e0[0]) / std::abs(e0[0]), 1e-6) << "energy " << e0[0] << " -> " << e1[0];
  double moved = 0;  // the bodies did move: the run is not a no-op
  for (size_t i = 0; i < pos.size(); ++i) moved = std::max(moved, std::abs(pos[i] - s.pos[i]));
  EXPECT_GT(moved, 0.01);
  for (double m : momentum) EXPECT_LT(std::abs(m), 1e-14);
}

// f32: the same program runs, with a drift an f32 run allows.
TEST(NBody, RunsInF32) {
  nbody::Options o;
  o.bodies = 64;
  o.steps = 50;
  o.dtype = tensor::DType::f32;
  auto p = nbody::program(o);
  ASSERT_TRUE(p.ok()) << p.status();
  const nbody::Start s = nbody::start(o.bodies);
  const std::vector<float> pos0(s.pos.begin(), s.pos.end()), vel0(s.vel.begin(), s.vel.end()),
      mass(s.mass.begin(), s.mass.end());
  auto exe = tensor::CpuExecutable::compile(*p, {.threads = 1});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<float> pos(pos0.size()), vel(vel0.size()), e0(1), e1(1), momentum(3);
  ASSERT_TRUE(exe->launch({accy::bytes(pos0), accy::bytes(vel0), accy::bytes(mass)},
                          {accy::writableBytes(pos), accy::writableBytes(vel), accy::writableBytes(e0),
                           accy::writableBytes(e1), accy::writableBytes(momentum)})
                  .ok());
  EXPECT_LT(std::abs(e1[0] - e0[0]) / std::abs(e0[0]), 1e-4) << "energy " << e0[0] << " -> " << e1[0];
}

}  // namespace
