// What every benchmark binary shares: status checks that end a benchmark
// with the error, the CPU model in the report's context, and a main that
// exits non-zero when any benchmark ended with an error.
#ifndef ACCY_BENCH_BENCH_UTIL_H_
#define ACCY_BENCH_BENCH_UTIL_H_

#include <benchmark/benchmark.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace accy::bench {

// False, with the benchmark ended by `status` (named by `what`), when it is
// not OK.
bool ok(benchmark::State& state, const absl::Status& status, const char* what = "");
template <typename T>
bool ok(benchmark::State& state, const absl::StatusOr<T>& value, const char* what = "") {
  return ok(state, value.status(), what);
}

// Ends the benchmark with `message` when `condition` is false.
bool check(benchmark::State& state, bool condition, const std::string& message);

// The start of a SkipWithError message for a benchmark that does not apply
// to this machine (a reference needing an ISA it lacks): reported, and not
// counted as an error.
#define ACCY_BENCH_NOT_APPLICABLE "not applicable here: "

// "model name" of /proc/cpuinfo, e.g. "AMD EPYC 9B45"; "unknown CPU" if
// none.
std::string cpuModel();

// Parses the benchmark flags (after the caller took its own), prints the
// CPU model and `context` lines, adds them to the report's context, runs
// every benchmark asked for, and returns 0, or 1 when any ended with an
// error (its message is in the report).
int runBenchmarks(int argc, char** argv, const std::vector<std::pair<std::string, std::string>>& context = {});

}  // namespace accy::bench

#endif  // ACCY_BENCH_BENCH_UTIL_H_
