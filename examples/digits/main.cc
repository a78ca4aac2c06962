// Trains the digits network on this CPU and prints how it learns:
//
//   bazel run -c opt //examples/digits -- [--epochs=30] [--batch=32]
//       [--rate=0.1] [--threads=N]
//
// Each epoch is one launch of one program (a scan over its minibatches);
// after each, the held-out accuracy from the predict program.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "examples/digits/digits.h"

namespace {

int fail(const absl::Status& st) {
  std::fprintf(stderr, "digits: %s\n", std::string(st.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  digits::Options o;
  int epochs = 30, threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return arg.compare(0, n, name) == 0 ? arg.c_str() + n : nullptr;
    };
    if (const char* v = value("--epochs=")) {
      epochs = std::atoi(v);
    } else if (const char* v = value("--batch=")) {
      o.batch = std::atoll(v);
    } else if (const char* v = value("--rate=")) {
      o.rate = std::atof(v);
    } else if (const char* v = value("--threads=")) {
      threads = std::atoi(v);
    } else {
      std::fprintf(stderr, "usage: digits [--epochs=N] [--batch=N] [--rate=X] [--threads=N]\n");
      return 2;
    }
  }
  if (epochs < 1 || o.batch < 1 || !(o.rate > 0)) {
    std::fprintf(stderr, "digits: needs 1 or more epochs, a batch of 1 or more, a positive rate\n");
    return 2;
  }
  absl::StatusOr<digits::Split> data = digits::load();
  if (!data.ok()) return fail(data.status());
  o.steps = (data->train + o.batch - 1) / o.batch;
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<accy::tensor::Program> train = digits::epoch(o, data->train);
  if (!train.ok()) return fail(train.status());
  absl::StatusOr<accy::tensor::Program> test = digits::predict(o, data->test);
  if (!test.ok()) return fail(test.status());
  auto train_exe = accy::tensor::CpuExecutable::compile(*train, {.threads = threads});
  if (!train_exe.ok()) return fail(train_exe.status());
  auto test_exe = accy::tensor::CpuExecutable::compile(*test, {.threads = threads});
  if (!test_exe.ok()) return fail(test_exe.status());
  std::printf("digits: %lld training and %lld held-out images; %lld steps of %lld an epoch, rate %g; compiled in %.1f ms\n",
              static_cast<long long>(data->train), static_cast<long long>(data->test), static_cast<long long>(o.steps),
              static_cast<long long>(o.batch), o.rate,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3);
  digits::Weights w = digits::initial(o), next = w;
  std::vector<float> losses(o.steps);
  std::vector<int32_t> predicted(data->test);
  double train_s = 0;
  for (int e = 0; e < epochs; ++e) {
    const uint32_t key[] = {2026, static_cast<uint32_t>(e)};
    const digits::EpochBuffers buffers = digits::epochBuffers(*data, w, key, next, losses);
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status st = train_exe->launch(buffers.inputs, buffers.outputs); !st.ok()) return fail(st);
    train_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::swap(w, next);
    std::vector<std::span<const std::byte>> tin = {accy::bytes(data->test_x)};
    for (auto b : w.inputs()) tin.push_back(b);
    if (absl::Status st = test_exe->launch(tin, {accy::writableBytes(predicted)}); !st.ok()) return fail(st);
    double mean_loss = 0;
    for (float l : losses) mean_loss += l / static_cast<double>(losses.size());
    std::printf("epoch %2d: mean loss %.4f, held-out accuracy %.2f%%\n", e + 1, mean_loss,
                100.0 * digits::heldOutAccuracy(*data, predicted));
  }
  std::printf("training: %.1f ms an epoch (one launch each)\n", train_s / epochs * 1e3);
  return 0;
}
