// A program of its own built against an Accy release (docs/RELEASE.md): the
// tone example's three tests (one guess through the reference evaluator and
// the x86-64 code, eight guesses at once, eight guesses refined by gradient
// descent through vmap(valueAndGrad)) and a saved-program round trip, which
// works because a release is stamped with its build record. Prints each
// check; exits 1 when one fails.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "accy/accy.h"

namespace tensor = accy::tensor;

namespace {

constexpr int kPoints = 16;
int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

absl::StatusOr<tensor::Value> mismatch(tensor::Builder&, std::span<const tensor::Value> a) {
  const tensor::Value difference = a[0].mul(a[1]).sin().sub(a[2]);
  return difference.mul(difference).sum("point");
}

std::vector<tensor::Spec> specs(std::vector<tensor::Axis> guess_axes) {
  return {tensor::spec(tensor::DType::f32, std::move(guess_axes)),
          tensor::spec(tensor::DType::f32, {{"point", kPoints}}),
          tensor::spec(tensor::DType::f32, {{"point", kPoints}})};
}

float time_[kPoints], sample_[kPoints];

double expected(double f) {
  double e = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double gap = std::sin(f * time_[i]) - sample_[i];
    e += gap * gap;
  }
  return e;
}

}  // namespace

int main() {
  for (int i = 0; i < kPoints; ++i) {
    time_[i] = 0.25f * static_cast<float>(i);
    sample_[i] = std::sin(3.0f * time_[i]);
  }
  std::printf("Accy %s\n", accy::kVersion);

  // 1. One guess: the reference evaluator and the x86-64 code.
  auto one = tensor::define("mismatch", specs({}), mismatch);
  check(one.ok(), "record the mismatch of one guess");
  if (!one.ok()) return 1;
  const float guess[1] = {2.5f};
  auto evaluated = tensor::evaluate(*one, {accy::bytes(guess), accy::bytes(time_), accy::bytes(sample_)});
  float value = NAN;
  if (evaluated.ok()) std::memcpy(&value, (*evaluated)[0].data(), sizeof value);
  check(std::fabs(value - expected(2.5)) < 1e-4, "the evaluator's mismatch at 2.5 is " + std::to_string(value));
  float jit[1] = {NAN};
  const absl::Status ran =
      tensor::runCpu(*one, {accy::bytes(guess), accy::bytes(time_), accy::bytes(sample_)}, {accy::writableBytes(jit)});
  check(ran.ok() && std::fabs(jit[0] - expected(2.5)) < 1e-4, "the x86-64 code's mismatch at 2.5 is " + std::to_string(jit[0]));

  // 2. Eight guesses at once.
  auto eight = tensor::define("mismatch", specs({{"guess", 8}}), mismatch);
  const float guesses[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  float values[8];
  const absl::Status ran8 = eight.ok() ? tensor::runCpu(*eight, {accy::bytes(guesses), accy::bytes(time_), accy::bytes(sample_)},
                                                        {accy::writableBytes(values)})
                                       : eight.status();
  bool close = ran8.ok();
  for (int g = 0; close && g < 8; ++g) close = std::fabs(values[g] - expected(guesses[g])) < 1e-4;
  check(close, "eight guesses at once match the double-precision mismatch");

  // 3. Refining eight guesses: vmap(valueAndGrad(mismatch)), 100 steps.
  auto f = tensor::Function::define("mismatch", specs({}), mismatch);
  auto vg = f.ok() ? f->valueAndGrad({.wrt = {0}}) : f.status();
  auto each = vg.ok() ? vg->vmap({.axis_size = 8,
                                  .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped},
                                  .axis_name = "guess"})
                      : vg.status();
  auto cpu = each.ok() ? each->compileCpu() : each.status();
  check(cpu.ok(), "compile vmap(valueAndGrad(mismatch)) for the CPU");
  if (!cpu.ok()) return 1;
  float frequency[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  float slope[8];
  bool launched = true;
  for (int step = 0; step < 100 && launched; ++step) {
    launched = cpu->launch({accy::bytes(frequency), accy::bytes(time_), accy::bytes(sample_)},
                           {accy::writableBytes(values), accy::writableBytes(slope)})
                   .ok();
    for (int g = 0; g < 8; ++g) frequency[g] -= 0.005f * slope[g];
  }
  check(launched && std::fabs(frequency[2] - 3) < 1e-4 && std::fabs(frequency[3] - 3) < 1e-4,
        "the guesses from 2.5 and 3.5 reach 3: " + std::to_string(frequency[2]) + " " + std::to_string(frequency[3]));

  // The compiled program saved and restored (a stamped build records how
  // the compiler was built; an unstamped one refuses by name).
  absl::StatusOr<std::string> saved = cpu->save();
  check(saved.ok(), "save the compiled program" + (saved.ok() ? " (" + std::to_string(saved->size()) + " bytes)"
                                                              : ": " + std::string(saved.status().message())));
  if (saved.ok()) {
    auto restored = tensor::CpuExecutable::restore(*saved);
    float again_values[8], again_slope[8];
    const bool same = restored.ok() &&
                      restored->launch({accy::bytes(frequency), accy::bytes(time_), accy::bytes(sample_)},
                                       {accy::writableBytes(again_values), accy::writableBytes(again_slope)})
                          .ok() &&
                      cpu->launch({accy::bytes(frequency), accy::bytes(time_), accy::bytes(sample_)},
                                  {accy::writableBytes(values), accy::writableBytes(slope)})
                          .ok() &&
                      std::memcmp(values, again_values, sizeof values) == 0 &&
                      std::memcmp(slope, again_slope, sizeof slope) == 0;
    check(same, "the restored program gives the same outputs");
  }
  std::printf("%s\n", failures == 0 ? "consumer: all checks passed" : "consumer: some checks FAILED");
  return failures == 0 ? 0 : 1;
}
