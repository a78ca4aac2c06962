// Gravitational N-body, softened, as one Accy program: `steps` leapfrog
// (kick-drift-kick) steps in one scan, the energy and momentum before and
// after as outputs.
//
//   inputs:  pos [dim=3, body], vel [dim=3, body], mass [body]  (f64 or f32)
//   outputs: pos, vel after the steps; energy before, energy after
//            (scalars); momentum after [dim]
//
// Units with G = 1. The softened potential of a pair is
// -m_i m_j / sqrt(r^2 + eps^2), and the acceleration is its gradient, so the
// leapfrog conserves that energy up to its O(dt^2) oscillation.
#ifndef ACCY_EXAMPLES_NBODY_NBODY_H_
#define ACCY_EXAMPLES_NBODY_NBODY_H_

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "accy/accy.h"

namespace nbody {

namespace tensor = accy::tensor;

struct Options {
  int64_t bodies = 1024;
  int64_t steps = 1000;
  double dt = 5e-4;
  double softening = 0.05;
  tensor::DType dtype = tensor::DType::f64;
  // false: only pos and vel come out (no energy or momentum: the
  // benchmark's form, the same work as its references).
  bool diagnostics = true;
};

inline std::vector<tensor::Spec> specs(const Options& o) {
  return {tensor::spec(o.dtype, {{"dim", 3}, {"body", o.bodies}}), tensor::spec(o.dtype, {{"dim", 3}, {"body", o.bodies}}),
          tensor::spec(o.dtype, {{"body", o.bodies}})};
}

// The acceleration of every body [dim, body]: the sum over the others of
// m_j (x_j - x_i) / (r^2 + eps^2)^(3/2).
//
// Positions are laid out a coordinate at a time ([dim, body], "structure of
// arrays"): the pair loop then reads each coordinate of the other bodies
// contiguously and runs in vector lanes. With [body, dim] the same program
// reads them three apart, which today's x86-64 vectorizer leaves scalar
// (17x slower: docs/PERFORMANCE.md, "N-body").
inline tensor::Value acceleration(const tensor::Value& pos, const tensor::Value& mass, double eps2) {
  const tensor::Value other = pos.rename("body", "other");
  const tensor::Value diff = other - pos;  // [dim, other, body]: x_j - x_i
  const tensor::Value r2 = (diff * diff).sum("dim") + eps2;
  const tensor::Value w = mass.rename("body", "other") / (r2 * r2.sqrt());
  return (diff * w).sum("other").transpose({"dim", "body"});
}

// Kinetic plus softened potential energy (each pair once; the softened
// self-terms -m_i^2 / eps taken back out).
inline tensor::Value energy(const tensor::Value& pos, const tensor::Value& vel, const tensor::Value& mass, double eps2) {
  const tensor::Value kinetic = ((vel * vel).sum("dim") * mass).sum("body") * 0.5;
  const tensor::Value diff = pos.rename("body", "other") - pos;
  const tensor::Value r2 = (diff * diff).sum("dim") + eps2;
  const tensor::Value pair = (mass.rename("body", "other") * mass / r2.sqrt()).sum({"other", "body"});
  const tensor::Value self = (mass * mass).sum("body") / std::sqrt(eps2);
  return kinetic - (pair - self) * 0.5;
}

inline absl::StatusOr<tensor::Program> program(const Options& o) {
  const double eps2 = o.softening * o.softening, dt = o.dt;
  return tensor::define("nbody", specs(o), [&](tensor::Builder& b, std::span<const tensor::Value> a) {
    const tensor::Value mass = a[2];
    tensor::ScanResult r = tensor::scan(
        b, {.axis = "step", .length = o.steps}, {a[0], a[1], acceleration(a[0], mass, eps2)}, {},
        [&](tensor::Builder&, std::span<const tensor::Value> c,
            std::span<const tensor::Value>) -> absl::StatusOr<tensor::ScanStep> {
          const tensor::Value half = c[1] + c[2] * (0.5 * dt);
          const tensor::Value pos = c[0] + half * dt;
          const tensor::Value acc = acceleration(pos, mass, eps2);
          return tensor::ScanStep{{pos, half + acc * (0.5 * dt), acc}, {}};
        });
    const tensor::Value pos = r.carry[0], vel = r.carry[1];
    if (!o.diagnostics) return std::vector<tensor::Value>{pos, vel};
    const tensor::Value momentum = (vel * mass).sum("body");
    return std::vector<tensor::Value>{pos, vel, energy(a[0], a[1], mass, eps2), energy(pos, vel, mass, eps2), momentum};
  });
}

// A cold, clumpy start: positions uniform in the unit ball, small random
// velocities with the total momentum removed, equal masses summing to 1
// (a deterministic generator, so every run starts alike). pos and vel are
// [dim, body]: pos[d * bodies + i] is coordinate d of body i.
struct Start {
  std::vector<double> pos, vel, mass;
};

inline Start start(int64_t bodies, uint64_t seed = 2026) {
  Start s;
  uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto next = [&] {  // a 64-bit LCG's top 53 bits, in [0, 1)
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  s.pos.resize(3 * bodies);
  s.vel.resize(3 * bodies);
  double p[3] = {0, 0, 0};
  for (int64_t i = 0; i < bodies; ++i) {
    double x, y, z;
    do {
      x = 2 * next() - 1, y = 2 * next() - 1, z = 2 * next() - 1;
    } while (x * x + y * y + z * z > 1);
    const double v[3] = {0.2 * (next() - 0.5), 0.2 * (next() - 0.5), 0.2 * (next() - 0.5)};
    const double r[3] = {x, y, z};
    for (int d = 0; d < 3; ++d) {
      s.pos[d * bodies + i] = r[d];
      s.vel[d * bodies + i] = v[d];
      p[d] += v[d] / static_cast<double>(bodies);
    }
    s.mass.push_back(1.0 / static_cast<double>(bodies));
  }
  for (int64_t i = 0; i < bodies; ++i) {
    for (int d = 0; d < 3; ++d) s.vel[d * bodies + i] -= p[d];  // equal masses: subtract the mean velocity
  }
  return s;
}

// The program's buffers in T (double for f64, float for f32): the inputs
// converted from a Start, and room for the outputs, as launch and invoke
// take them.
template <typename T>
struct Buffers {
  explicit Buffers(const Start& s)
      : pos(s.pos.begin(), s.pos.end()),
        vel(s.vel.begin(), s.vel.end()),
        mass(s.mass.begin(), s.mass.end()),
        pos_out(s.pos.size()),
        vel_out(s.vel.size()) {}
  std::vector<std::span<const std::byte>> inputs() const { return {accy::bytes(pos), accy::bytes(vel), accy::bytes(mass)}; }
  // pos and vel after the steps, then (with diagnostics) the energy before
  // and after and the momentum.
  std::vector<std::span<std::byte>> outputs(bool diagnostics = true) {
    std::vector<std::span<std::byte>> out = {accy::writableBytes(pos_out), accy::writableBytes(vel_out)};
    if (diagnostics) {
      out.insert(out.end(), {accy::writableBytes(e0), accy::writableBytes(e1), accy::writableBytes(momentum)});
    }
    return out;
  }
  double drift() const { return std::abs(double(e1[0]) - double(e0[0])) / std::abs(double(e0[0])); }

  std::vector<T> pos, vel, mass;
  std::vector<T> pos_out, vel_out, e0 = std::vector<T>(1), e1 = std::vector<T>(1), momentum = std::vector<T>(3);
};

}  // namespace nbody

#endif  // ACCY_EXAMPLES_NBODY_NBODY_H_
