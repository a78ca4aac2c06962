// What every benchmark binary shares: status checks that end a benchmark
// with the error, the CPU model in the report's context, and a main that
// exits non-zero when any benchmark ended with an error.
#ifndef ACCY_BENCH_BENCH_UTIL_H_
#define ACCY_BENCH_BENCH_UTIL_H_

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

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

// Runs every function of `fns` once untimed, then once per iteration of
// `state`, each timed alone, in turn: fns[0] is Accy's, the others references over the same
// data, and iteration i starts with fns[i % size]. On a shared machine whose
// bandwidth drifts from one second to the next, a row and its reference
// measured a second apart can differ by a third; measured alternately they
// see the same drift. The iteration's manual time is fns[0]'s (register the
// benchmark with UseManualTime); counters `accy_ns` and `ref_ns` are the
// medians of this repetition (ref_ns the fastest reference's) and `ratio`
// is ref_ns / accy_ns, above 1 when Accy is faster. A function returns
// false after ending the benchmark with its error; so does this.
//
// `idle`, when not zero, is slept (untimed) after every call. Rows whose
// functions run on thread pools need it longer than the pools spin: a
// worker that spins on after its call takes a core from the next call, and
// with several references sharing a pool the calls that follow another
// pool's (Accy's every time) would pay for it more often than the others.
bool runAlternating(benchmark::State& state, const std::vector<std::function<bool()>>& fns,
                    std::chrono::microseconds idle = std::chrono::microseconds(0));

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
