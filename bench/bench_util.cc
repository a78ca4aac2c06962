#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>
#include <string>
#include <utility>
#include <vector>

namespace accy::bench {

bool ok(benchmark::State& state, const absl::Status& status, const char* what) {
  if (status.ok()) return true;
  const std::string message = std::string(what) + (*what ? ": " : "") + status.ToString();
  state.SkipWithError(message.c_str());
  return false;
}

bool check(benchmark::State& state, bool condition, const std::string& message) {
  if (!condition) state.SkipWithError(message.c_str());
  return condition;
}

bool runAlternating(benchmark::State& state, const std::vector<std::function<bool()>>& fns,
                    std::chrono::microseconds idle) {
  // Each once, untimed: first touches and lazily built inputs.
  for (const std::function<bool()>& f : fns) {
    if (!f()) return false;
  }
  std::vector<std::vector<double>> ns(fns.size());
  size_t turn = 0;
  for (auto _ : state) {
    double accy = 0;
    for (size_t j = 0; j < fns.size(); ++j) {
      const size_t k = (turn + j) % fns.size();
      const auto start = std::chrono::steady_clock::now();
      if (!fns[k]()) return false;
      const double took = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      ns[k].push_back(took);
      if (k == 0) accy = took;
      if (idle.count() > 0) std::this_thread::sleep_for(idle);
    }
    state.SetIterationTime(accy * 1e-9);
    turn = (turn + 1) % fns.size();
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  const double accy = median(ns[0]);
  double ref = 0;
  for (size_t k = 1; k < fns.size(); ++k) {
    const double m = median(ns[k]);
    if (k == 1 || m < ref) ref = m;
  }
  state.counters["accy_ns"] = accy;
  state.counters["ref_ns"] = ref;
  state.counters["ratio"] = accy > 0 ? ref / accy : 0;
  return true;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string name = "unknown CPU", family, model, flags;
  auto value = [](const std::string& line) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return std::string();
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) name = value(line);
    else if (line.rfind("cpu family", 0) == 0) family = value(line);
    else if (line.rfind("model", 0) == 0 && model.empty()) model = value(line);
    else if (line.rfind("flags", 0) == 0) flags = " " + value(line) + " ";
    else if (line.empty() && !flags.empty()) break;  // the first processor is enough
  }
  std::string isa = flags.find(" avx512f ") != std::string::npos ? "AVX-512"
                    : flags.find(" avx2 ") != std::string::npos ? "AVX2"
                                                                : "SSE";
  if (flags.find(" avx512_bf16 ") != std::string::npos) isa += " (BF16)";
  if (flags.find(" amx_tile ") != std::string::npos) isa += ", AMX";
  return name + " (family " + family + ", model " + model + ", " + isa + ")";
}

namespace {

// The console report, counting the runs that ended with an error.
class CountingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred && r.error_message.rfind(ACCY_BENCH_NOT_APPLICABLE, 0) != 0) {
        if (!failed_.insert(r.benchmark_name()).second) continue;  // one line per benchmark, not per repetition
        std::fprintf(stderr, "benchmark %s FAILED: %s\n", r.benchmark_name().c_str(), r.error_message.c_str());
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  int errors() const { return static_cast<int>(failed_.size()); }

 private:
  std::set<std::string> failed_;
};

}  // namespace

int runBenchmarks(int argc, char** argv, const std::vector<std::pair<std::string, std::string>>& context) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  std::vector<std::pair<std::string, std::string>> all = {{"cpu_model", cpuModel()}};
  all.insert(all.end(), context.begin(), context.end());
  for (const auto& [key, value] : all) {
    std::printf("%s: %s\n", key.c_str(), value.c_str());
    benchmark::AddCustomContext(key, value);
  }
  std::fflush(stdout);
  CountingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (reporter.errors() > 0) {
    std::fprintf(stderr, "%d benchmark(s) ended with an error\n", reporter.errors());
    return 1;
  }
  return 0;
}

}  // namespace accy::bench
