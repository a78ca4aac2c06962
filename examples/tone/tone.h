// The tone example: recovering the frequency of a sampled sine.
//
// Sixteen samples of sin(3 * time), a quarter time unit apart. A candidate
// frequency predicts sin(frequency * time) at each sample time; the mismatch
// is the sum over `point` of the squared gaps. Guess 2.5 gives about 8.656,
// guess 3 gives zero.
#ifndef ACCY_EXAMPLES_TONE_TONE_H_
#define ACCY_EXAMPLES_TONE_TONE_H_

#include <array>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "accy/accy.h"

namespace tone {

inline constexpr int kPoints = 16;

// args: frequency (scalar or with extra axes), time[point], sample[point].
inline absl::StatusOr<accy::tensor::Value> mismatch(accy::tensor::Builder&,
                                                    std::span<const accy::tensor::Value> args) {
  const accy::tensor::Value& frequency = args[0];
  const accy::tensor::Value& time = args[1];
  const accy::tensor::Value& sample = args[2];
  const accy::tensor::Value predicted = frequency.mul(time).sin();
  const accy::tensor::Value difference = predicted.sub(sample);
  return difference.mul(difference).sum("point");
}

// The input specs of `mismatch`: the frequency with the given axes (a
// scalar when none, e.g. {{"guess", 8}} for eight guesses at once), then
// time and sample over `point`.
inline std::vector<accy::tensor::Spec> specs(std::vector<accy::tensor::Axis> frequency_axes = {}) {
  return {accy::tensor::spec(accy::tensor::DType::f32, std::move(frequency_axes)),
          accy::tensor::spec(accy::tensor::DType::f32, {{"point", kPoints}}),
          accy::tensor::spec(accy::tensor::DType::f32, {{"point", kPoints}})};
}

struct Samples {
  std::array<float, kPoints> time;
  std::array<float, kPoints> sample;
};

inline Samples samples() {
  Samples s{};
  for (int i = 0; i < kPoints; ++i) {
    s.time[i] = 0.25f * static_cast<float>(i);
    s.sample[i] = std::sin(3.0f * s.time[i]);
  }
  return s;
}

// The mismatch of `frequency` against samples() computed in double: the
// value tests and benchmarks check a compiled mismatch against.
inline double referenceMismatch(double frequency) {
  const Samples data = samples();
  double e = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double gap = std::sin(frequency * data.time[i]) - data.sample[i];
    e += gap * gap;
  }
  return e;
}

}  // namespace tone

#endif  // ACCY_EXAMPLES_TONE_TONE_H_
