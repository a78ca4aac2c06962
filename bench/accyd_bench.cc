// accyd benchmarks, side by side in one run (docs/PERFORMANCE.md):
//   - tone invoke round trip over the Unix socket (gRPC) and through the
//     invoke channel (shared memory, futex doorbells) vs in process (p50, p99);
//   - a 64 MiB invoke through shared memory vs through inline bytes, with
//     the kernel run in process as the floor (also alternated call by call
//     with the channel invoke);
//   - a compile served from the cache vs a fresh compile;
//   - the N-body example (1,024 bodies, 20 leapfrog steps in one scan, f32)
//     in one invoke on accyd's cpu and vulkan (lavapipe) devices, beside the
//     same program in process.
// The daemon is started by this process: pass --accyd=PATH (tools/bench.sh
// does) and it listens on a temporary socket.
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "accy/accy.h"
#include "bench/bench_util.h"
#include "client/remote_session.h"
#include "examples/nbody/nbody.h"
#include "examples/tone/tone.h"

namespace tensor = accy::tensor;
using accy::bench::check;
using accy::bench::ok;

namespace {

std::string g_accyd;
std::string g_target;
pid_t g_pid = -1;

// Starts accyd with its cpu and vulkan devices, or its cpu device alone
// where this machine has no Vulkan device (the daemon refuses to start
// with a device it cannot open; the vulkan rows then fail, saying so).
void startDaemon() {
  for (const char* devices : {"--devices=cpu,vulkan", "--devices=cpu"}) {
    char dir[] = "/tmp/accyd-bench-XXXXXX";
    const std::string socket = std::string(mkdtemp(dir)) + "/accyd.sock";
    g_target = "unix:" + socket;
    g_pid = fork();
    if (g_pid == 0) {
      std::string listen = "--listen=" + g_target;
      execl(g_accyd.c_str(), g_accyd.c_str(), listen.c_str(), "--threads=1", devices, static_cast<char*>(nullptr));
      _exit(127);
    }
    struct stat st;
    for (int i = 0; i < 200 && stat((socket + ".fd").c_str(), &st) != 0; ++i) {
      int status = 0;
      if (waitpid(g_pid, &status, WNOHANG) == g_pid) break;  // refused to start
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (stat((socket + ".fd").c_str(), &st) == 0) return;
  }
}

// A session with the daemon; null, with the benchmark ended, when the
// connection fails.
// `channel`: invokes through the invoke channel (shared memory, futex
// doorbells) rather than gRPC.
std::unique_ptr<accy::client::RemoteSession> remote(benchmark::State& state, bool channel) {
  accy::client::RemoteOptions o;
  o.cpu_in_process = false;
  o.invoke_channel = channel;
  auto s = accy::client::RemoteSession::connect(g_target, o);
  if (!ok(state, s, "connect to accyd")) return nullptr;
  return std::move(*s);
}

tensor::Program toneProgram(double scale = 1.0) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  return *tensor::define("mismatch", specs, [scale](tensor::Builder& b, std::span<const tensor::Value> a) {
    auto v = tone::mismatch(b, a);
    return scale == 1.0 ? *v : *v * scale;
  });
}

void percentiles(benchmark::State& state, std::vector<double>& micros) {
  std::sort(micros.begin(), micros.end());
  if (micros.empty()) return;
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p99_us"] = micros[micros.size() * 99 / 100];
  state.counters["invokes_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                       benchmark::Counter::kIsRate);
}

// Times each call (which returns a status; the first failure ends the
// benchmark with it).
template <typename F>
void timed(benchmark::State& state, F&& call) {
  std::vector<double> micros;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const absl::Status st = call();
    micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!ok(state, st, "invoke")) return;
  }
  percentiles(state, micros);
}

void BM_ToneInvoke_InProcess(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(toneProgram(), {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  const tone::Samples data = tone::samples();
  const float f[1] = {2.5f};
  float v[1] = {NAN};
  timed(state, [&] {
    return exe->launch({accy::bytes(f), accy::bytes(data.time), accy::bytes(data.sample)}, {accy::writableBytes(v)});
  });
  check(state, std::fabs(v[0] - tone::referenceMismatch(2.5)) <= 1e-4, "wrong mismatch " + std::to_string(v[0]));
}

// The tone invoke through the daemon: gRPC over the Unix socket, or the
// invoke channel (the samples copied into its data area each time).
void toneInvokeRemote(benchmark::State& state, bool channel) {
  auto s = remote(state, channel);
  if (!s) return;
  auto h = s->compile(accy::wire::encode(toneProgram()));
  if (!ok(state, h, "compile")) return;
  const tone::Samples data = tone::samples();
  const float f[1] = {2.5f};
  float v[1] = {NAN};
  timed(state, [&] {
    return s->invoke(*h, {accy::bytes(f), accy::bytes(data.time), accy::bytes(data.sample)}, {accy::writableBytes(v)});
  });
  check(state, std::fabs(v[0] - tone::referenceMismatch(2.5)) <= 1e-4, "wrong mismatch " + std::to_string(v[0]));
  check(state, (s->channelInvokes() > 0) == channel, "the invoke channel is " + s->invokeChannel());
}

void BM_ToneInvoke_AccydUnixSocket(benchmark::State& state) { toneInvokeRemote(state, false); }
void BM_ToneInvoke_AccydChannel(benchmark::State& state) { toneInvokeRemote(state, true); }

constexpr int64_t kBig = int64_t{16} << 20;  // 16 Mi f32 = 64 MiB

tensor::Program doubleProgram() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kBig}})};
  return *tensor::define("twice", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; });
}

// Every element of `y` is twice 1.
bool checkDoubled(benchmark::State& state, const float* y) {
  for (int64_t i = 0; i < kBig; ++i) {
    if (y[i] != 2.0f) return check(state, false, "wrong y[" + std::to_string(i) + "] = " + std::to_string(y[i]));
  }
  return true;
}

void BM_Invoke64MiB_InProcessKernel(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(doubleProgram(), {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  std::vector<float> x(kBig, 1.0f), y(kBig);
  if (!ok(state, exe->launch({accy::bytes(x)}, {accy::writableBytes(y)}), "launch")) return;  // warm-up, untimed
  for (auto _ : state) {
    if (!ok(state, exe->launch({accy::bytes(x)}, {accy::writableBytes(y)}), "launch")) return;
  }
  if (!checkDoubled(state, y.data())) return;
  state.SetBytesProcessed(state.iterations() * kBig * 8);
}

// The same kernel in process on buffers in a memfd mapped shared (shmem
// pages, as the daemon's regions are): tells what the pages cost apart from
// the daemon.
void BM_Invoke64MiB_InProcessKernelOnShmem(benchmark::State& state) {
  auto exe = tensor::CpuExecutable::compile(doubleProgram(), {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  const size_t bytes = kBig * 4;
  auto map = [&]() -> float* {
    const int fd = memfd_create("bench", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return nullptr;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return m == MAP_FAILED ? nullptr : static_cast<float*>(m);
  };
  float* x = map();
  float* y = map();
  if (!check(state, x != nullptr && y != nullptr, "memfd")) return;
  std::fill_n(x, kBig, 1.0f);
  const std::span<const float> xs(x, kBig);
  const std::span<float> ys(y, kBig);
  if (!ok(state, exe->launch({accy::bytes(xs)}, {accy::writableBytes(ys)}), "launch")) return;  // warm-up, untimed
  for (auto _ : state) {
    if (!ok(state, exe->launch({accy::bytes(xs)}, {accy::writableBytes(ys)}), "launch")) return;
  }
  checkDoubled(state, y);
  state.SetBytesProcessed(state.iterations() * kBig * 8);
  munmap(x, bytes);
  munmap(y, bytes);
}

// `alternate`: the invoke alternated call by call with the in-process
// kernel (runAlternating), the kernel on the client's own buffers as in
// BM_Invoke64MiB_InProcessKernel, the ratio taken within the row.
void invoke64MiBShared(benchmark::State& state, bool channel, bool alternate = false) {
  auto s = remote(state, channel);
  if (!s) return;
  auto h = s->compile(accy::wire::encode(doubleProgram()));
  if (!ok(state, h, "compile")) return;
  auto in = s->allocateShared(kBig * 4);
  if (!ok(state, in, "allocateShared")) return;
  auto out = s->allocateShared(kBig * 4);
  if (!ok(state, out, "allocateShared")) return;
  std::fill_n(reinterpret_cast<float*>((*in)->bytes().data()), kBig, 1.0f);
  auto invoke = [&] {
    return ok(state, s->invoke(*h, {std::span<const std::byte>((*in)->bytes())}, {(*out)->bytes()}), "invoke");
  };
  if (alternate) {
    auto exe = tensor::CpuExecutable::compile(doubleProgram(), {.threads = 1});
    if (!ok(state, exe, "compile")) return;
    std::vector<float> x(kBig, 1.0f), y(kBig);
    auto kernel = [&] { return ok(state, exe->launch({accy::bytes(x)}, {accy::writableBytes(y)}), "launch"); };
    // No idle between the calls: the daemon's worker spins for at most 50 us
    // (--channel-spin-us) into the kernel's 3 ms, while an invoke that found
    // the worker asleep would pay its wake-up, on this virtual machine from
    // a tenth of a millisecond to well over one (docs/ACCYD.md).
    if (!accy::bench::runAlternating(state, {invoke, kernel}) || !checkDoubled(state, y.data())) return;
  } else {
    // One untimed invoke first: the daemon's first touch of the two 64 MiB
    // regions (page faults) is not the steady state the row is about.
    if (!invoke()) return;
    for (auto _ : state) {
      if (!invoke()) return;
    }
  }
  if (!checkDoubled(state, reinterpret_cast<const float*>((*out)->bytes().data()))) return;
  state.SetBytesProcessed(state.iterations() * kBig * 8);
  state.SetLabel((*in)->pages());
  check(state, (s->channelInvokes() > 0) == channel, "the invoke channel is " + s->invokeChannel());
}

void BM_Invoke64MiB_AccydSharedMemory(benchmark::State& state) { invoke64MiBShared(state, false); }
void BM_Invoke64MiB_AccydChannel(benchmark::State& state) { invoke64MiBShared(state, true); }
void BM_Invoke64MiB_ChannelAlternating(benchmark::State& state) { invoke64MiBShared(state, true, true); }

void BM_Invoke64MiB_AccydInlineBytes(benchmark::State& state) {
  auto s = remote(state, false);
  if (!s) return;
  auto h = s->compile(accy::wire::encode(doubleProgram()));
  if (!ok(state, h, "compile")) return;
  std::vector<float> x(kBig, 1.0f), y(kBig);
  if (!ok(state, s->invoke(*h, {accy::bytes(x)}, {accy::writableBytes(y)}), "invoke")) return;  // warm-up, untimed
  for (auto _ : state) {
    if (!ok(state, s->invoke(*h, {accy::bytes(x)}, {accy::writableBytes(y)}), "invoke")) return;
  }
  if (!checkDoubled(state, y.data())) return;
  state.SetBytesProcessed(state.iterations() * kBig * 8);
}

void BM_Compile_AccydCacheHit(benchmark::State& state) {
  auto s = remote(state, false);
  if (!s) return;
  const std::string bytes = accy::wire::encode(toneProgram());
  auto first = s->compile(bytes);
  if (!ok(state, first, "compile")) return;
  for (auto _ : state) {
    auto h = s->compile(bytes);
    if (!ok(state, h, "compile")) return;
    if (!ok(state, s->release(*h), "release")) return;
  }
}

void BM_Compile_AccydFresh(benchmark::State& state) {
  auto s = remote(state, false);
  if (!s) return;
  double scale = 1.0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string bytes = accy::wire::encode(toneProgram(scale += 1.0));  // a new cache key each time
    state.ResumeTiming();
    auto h = s->compile(bytes);
    if (!ok(state, h, "compile")) return;
    if (!ok(state, s->release(*h), "release")) return;
  }
}

// The N-body example as the examples run it: the whole simulation one
// program, one launch or one invoke.
nbody::Options nbodyOptions() {
  nbody::Options o;
  o.bodies = 1024;
  o.steps = 20;
  o.dtype = tensor::DType::f32;
  return o;
}

void nbodyCounters(benchmark::State& state, const nbody::Buffers<float>& b) {
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * nbodyOptions().steps), benchmark::Counter::kIsRate);
  state.counters["energy_drift"] = b.drift();
}

void BM_NBody_InProcess(benchmark::State& state) {
  auto sim = nbody::program(nbodyOptions());
  if (!ok(state, sim, "record")) return;
  auto exe = tensor::CpuExecutable::compile(*sim, {.threads = 1});
  if (!ok(state, exe, "compile")) return;
  nbody::Buffers<float> b(nbody::start(nbodyOptions().bodies));
  for (auto _ : state) {
    if (!ok(state, exe->launch(b.inputs(), b.outputs()), "launch")) return;
  }
  nbodyCounters(state, b);
}

// `target`: "x86_64" (accyd's cpu device, one thread) or "spirv" (its
// vulkan device).
void nbodyAccyd(benchmark::State& state, const char* target, bool channel = false) {
  auto s = remote(state, channel);
  if (!s) return;
  auto sim = nbody::program(nbodyOptions());
  if (!ok(state, sim, "record")) return;
  auto h = s->compile(accy::wire::encode(*sim), target);
  if (!ok(state, h, target)) return;
  nbody::Buffers<float> b(nbody::start(nbodyOptions().bodies));
  if (!ok(state, s->invoke(*h, b.inputs(), b.outputs()), "invoke")) return;  // warm-up, untimed
  for (auto _ : state) {
    if (!ok(state, s->invoke(*h, b.inputs(), b.outputs()), "invoke")) return;
  }
  nbodyCounters(state, b);
}

void BM_NBody_AccydCpu(benchmark::State& state) { nbodyAccyd(state, "x86_64"); }
void BM_NBody_AccydVulkan(benchmark::State& state) { nbodyAccyd(state, "spirv"); }
void BM_NBody_AccydCpuChannel(benchmark::State& state) { nbodyAccyd(state, "x86_64", true); }

}  // namespace

BENCHMARK(BM_NBody_InProcess)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NBody_AccydCpu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NBody_AccydCpuChannel)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NBody_AccydVulkan)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ToneInvoke_InProcess)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ToneInvoke_AccydUnixSocket)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ToneInvoke_AccydChannel)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Invoke64MiB_InProcessKernel)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Invoke64MiB_InProcessKernelOnShmem)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Invoke64MiB_AccydSharedMemory)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Invoke64MiB_AccydChannel)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Invoke64MiB_ChannelAlternating)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_Invoke64MiB_AccydInlineBytes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Compile_AccydCacheHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Compile_AccydFresh)->Unit(benchmark::kMicrosecond);

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--accyd=", 8) == 0) {
      g_accyd = argv[i] + 8;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (g_accyd.empty()) {
    std::fprintf(stderr, "accyd_bench: pass --accyd=PATH to the daemon binary\n");
    return 2;
  }
  startDaemon();
  const int status = accy::bench::runBenchmarks(static_cast<int>(args.size()), args.data(), {{"accyd", g_accyd}});
  kill(g_pid, SIGTERM);
  waitpid(g_pid, nullptr, 0);
  return status;
}
