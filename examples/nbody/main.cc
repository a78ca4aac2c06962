// Runs the N-body example on this CPU and prints what it computed:
//
//   bazel run -c opt //examples/nbody -- [--bodies=1024] [--steps=1000]
//       [--dt=0.0005] [--softening=0.05] [--dtype=f64|f32] [--threads=N]
//
// One program (one scan of every step) compiled once and launched once;
// prints the relative energy drift, the final momentum, the compile and
// run times and the steps per second.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "examples/nbody/nbody.h"

namespace {

template <typename T>
int run(const nbody::Options& o, int threads) {
  nbody::Buffers<T> b(nbody::start(o.bodies));
  const auto t0 = std::chrono::steady_clock::now();
  auto p = nbody::program(o);
  if (!p.ok()) {
    std::fprintf(stderr, "nbody: %s\n", std::string(p.status().message()).c_str());
    return 1;
  }
  auto exe = accy::tensor::CpuExecutable::compile(*p, {.threads = threads});
  if (!exe.ok()) {
    std::fprintf(stderr, "nbody: %s\n", std::string(exe.status().message()).c_str());
    return 1;
  }
  const auto t1 = std::chrono::steady_clock::now();
  const absl::Status st = exe->launch(b.inputs(), b.outputs());
  const auto t2 = std::chrono::steady_clock::now();
  if (!st.ok()) {
    std::fprintf(stderr, "nbody: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  const double run_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("nbody: %lld bodies, %lld leapfrog steps of dt %g, softening %g, %s\n",
              static_cast<long long>(o.bodies), static_cast<long long>(o.steps), o.dt, o.softening,
              o.dtype == accy::tensor::DType::f64 ? "f64" : "f32");
  std::printf("energy %.12g -> %.12g: relative drift %.3g\n", double(b.e0[0]), double(b.e1[0]), b.drift());
  std::printf("momentum after: (%.3g, %.3g, %.3g)\n", double(b.momentum[0]), double(b.momentum[1]),
              double(b.momentum[2]));
  std::printf("compile %.1f ms, run %.3f s: %.1f steps/s\n", std::chrono::duration<double>(t1 - t0).count() * 1e3,
              run_s, static_cast<double>(o.steps) / run_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  nbody::Options o;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return arg.compare(0, n, name) == 0 ? arg.c_str() + n : nullptr;
    };
    if (const char* v = value("--bodies=")) {
      o.bodies = std::atoll(v);
    } else if (const char* v = value("--steps=")) {
      o.steps = std::atoll(v);
    } else if (const char* v = value("--dt=")) {
      o.dt = std::atof(v);
    } else if (const char* v = value("--softening=")) {
      o.softening = std::atof(v);
    } else if (const char* v = value("--threads=")) {
      threads = std::atoi(v);
    } else if (const char* v = value("--dtype=")) {
      if (std::string(v) != "f32" && std::string(v) != "f64") {
        std::fprintf(stderr, "nbody: --dtype is f32 or f64, got %s\n", v);
        return 2;
      }
      o.dtype = std::string(v) == "f32" ? accy::tensor::DType::f32 : accy::tensor::DType::f64;
    } else {
      std::fprintf(stderr, "usage: nbody [--bodies=N] [--steps=N] [--dt=X] [--softening=X] [--dtype=f64|f32] [--threads=N]\n");
      return 2;
    }
  }
  if (o.bodies < 2 || o.steps < 1 || !(o.dt > 0) || !(o.softening > 0)) {
    std::fprintf(stderr, "nbody: needs at least 2 bodies, 1 step, a positive dt and a positive softening\n");
    return 2;
  }
  return o.dtype == accy::tensor::DType::f64 ? run<double>(o, threads) : run<float>(o, threads);
}
