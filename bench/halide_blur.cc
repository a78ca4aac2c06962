// The reference for Accy's separable blur (cpu_bench, BM_Blur_*): the same
// 3x3 box blur of a 4096x4096 f32 image, zero outside it, written in Halide
// 14 (Debian's libhalide14-0-dev) and JIT-compiled for this machine with the
// schedules of Halide's own blur example, at their best:
//   tiled:  blur_y.tile(x, y, xi, yi, 256, 32).vectorize(xi, 8).parallel(y);
//           blur_x.compute_at(blur_y, x).vectorize(x, 8)   (Halide's README)
//   lines:  blur_y.split(y, y, yi, 32).parallel(y).vectorize(x, 16);
//           blur_x.store_at(blur_y, y).compute_at(blur_y, x).vectorize(x, 16)
//           (apps/blur: blur_x kept in a sliding window of rows)
// Prints, for the faster schedule, "median_ms M" over --reps runs after a
// warm-up, "threads N" and "halide 14 <schedule>"; checks a few outputs
// against a direct computation first. Built on demand (tags = manual):
// tools/bench.sh builds it when Halide is installed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "Halide.h"

namespace {

constexpr int kSide = 4096;

float direct(const Halide::Buffer<float>& in, int x, int y) {
  auto at = [&](int xx, int yy) { return xx < 0 || yy < 0 || xx >= kSide || yy >= kSide ? 0.0f : in(xx, yy); };
  float rows[3];
  for (int d = -1; d <= 1; ++d) rows[d + 1] = (at(x - 1, y + d) + at(x, y + d) + at(x + 1, y + d)) / 3;
  return (rows[0] + rows[1] + rows[2]) / 3;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) threads = std::atoi(a.c_str() + 10);
    if (a.rfind("--reps=", 0) == 0) reps = std::atoi(a.c_str() + 7);
  }
  // Halide's thread pool reads this when it starts (on the first run).
  setenv("HL_NUM_THREADS", std::to_string(threads).c_str(), 1);

  Halide::Buffer<float> input(kSide, kSide), output(kSide, kSide);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  input.for_each_value([&](float& v) { v = dist(rng); });

  double best_ms = 1e30;
  std::string best;
  for (const std::string schedule : {"tiled", "lines"}) {
    Halide::Var x("x"), y("y"), xi("xi"), yi("yi");
    Halide::Func in = Halide::BoundaryConditions::constant_exterior(input, 0.0f);
    Halide::Func blur_x("blur_x"), blur_y("blur_y");
    blur_x(x, y) = (in(x - 1, y) + in(x, y) + in(x + 1, y)) / 3;
    blur_y(x, y) = (blur_x(x, y - 1) + blur_x(x, y) + blur_x(x, y + 1)) / 3;
    if (schedule == "tiled") {
      blur_y.tile(x, y, xi, yi, 256, 32).vectorize(xi, 8).parallel(y);
      blur_x.compute_at(blur_y, x).vectorize(x, 8);
    } else {
      blur_y.split(y, y, yi, 32).parallel(y).vectorize(x, 16);
      blur_x.store_at(blur_y, y).compute_at(blur_y, x).vectorize(x, 16);
    }
    blur_y.compile_jit(Halide::get_jit_target_from_environment());
    blur_y.realize(output);
    for (const auto& [px, py] : {std::pair{0, 0}, std::pair{4095, 17}, std::pair{1234, 4095}, std::pair{77, 2048}}) {
      if (std::fabs(output(px, py) - direct(input, px, py)) > 1e-5f) {
        std::fprintf(stderr, "halide_blur: %s: wrong output at (%d, %d)\n", schedule.c_str(), px, py);
        return 1;
      }
    }
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      blur_y.realize(output);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    std::printf("schedule %s %.3f ms\n", schedule.c_str(), median);
    if (median < best_ms) {
      best_ms = median;
      best = schedule;
    }
  }
  std::printf("median_ms %.4f\nthreads %d\nhalide 14 %s\n", best_ms, threads, best.c_str());
  return 0;
}
