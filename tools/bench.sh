#!/usr/bin/env bash
# Builds and runs the benchmarks (CPU, then accyd). OpenBLAS is slowed by
# half by two variables set in this environment (OPENBLAS_CORETYPE,
# OPENBLAS_L2_SIZE), so they are unset for the benchmark process only.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //bench:cpu_bench //bench:accyd_bench //bench:gpu_bench //server:accyd
reps=(--benchmark_repetitions="${REPETITIONS:-5}" --benchmark_report_aggregates_only=true)
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./bazel-bin/bench/cpu_bench "${reps[@]}" "$@"
./bazel-bin/bench/accyd_bench --accyd=bazel-bin/server/accyd "${reps[@]}" "$@"
./bazel-bin/bench/gpu_bench "${reps[@]}" "$@"
