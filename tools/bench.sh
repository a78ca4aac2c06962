#!/usr/bin/env bash
# Builds (-c opt, as released: no assertions, no per-pass verifier) and runs
# the benchmarks (CPU, accyd, Vulkan) side by side with their references,
# then prints the tables of docs/PERFORMANCE.md (tools/bench_table.py): every
# ratio against the best reference of the same run, with the CPU model and
# OpenBLAS's kernel. Reports go to
# bench-results/ (JSON). Exits non-zero when a benchmark failed.
#
# OpenBLAS 0.3.21 (Debian 12) does not know recent CPUs and falls back to a
# slow kernel on them, and this environment may set OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE. So the kernel is chosen here for the CPU the benchmark
# runs on, for the benchmark process only: Intel with AVX-512 BF16
# (Cooper Lake, Sapphire Rapids and later) Cooperlake, other AVX-512 Intel
# SkylakeX, other AVX2 Intel Haswell; AMD and the rest OpenBLAS's own
# detection, with both variables unset. The benchmark prints the kernel
# that ran (openblas_get_corename()).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //bench:cpu_bench //bench:accyd_bench //bench:gpu_bench //server:accyd
# Halide's blur (the reference of the BM_Blur rows) where Halide 14 is
# installed (tools/setup.sh --bench); without it those rows say so.
if [ -f /usr/include/halide14/Halide.h ]; then bazel build -c opt //bench:halide_blur; fi

vendor=$(awk -F': ' '/^vendor_id/ {print $2; exit}' /proc/cpuinfo)
flags=$(awk -F': ' '/^flags/ {print $2; exit}' /proc/cpuinfo)
core=""
if [ "$vendor" = GenuineIntel ]; then
  case " $flags " in
    *" avx512_bf16 "*) core=Cooperlake ;;
    *" avx512f "*) core=SkylakeX ;;
    *" avx2 "*) core=Haswell ;;
  esac
fi
blas_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
[ -n "$core" ] && blas_env+=("OPENBLAS_CORETYPE=$core")

out=bench-results
mkdir -p "$out"
# Repetitions interleaved in random order: on a shared machine whose
# bandwidth drifts from minute to minute, each row and its references then
# see the same drift, and a ratio of medians compares like with like
# (run one after the other, a row and its reference a minute apart moved by
# up to a third, docs/PERFORMANCE.md).
reps=(--benchmark_repetitions="${REPETITIONS:-5}" --benchmark_enable_random_interleaving=true
  --benchmark_report_aggregates_only=true)
status=0
"${blas_env[@]}" ./bazel-bin/bench/cpu_bench "${reps[@]}" --benchmark_out="$out/cpu.json" \
  --benchmark_out_format=json "$@" || status=1
./bazel-bin/bench/accyd_bench --accyd=bazel-bin/server/accyd "${reps[@]}" --benchmark_out="$out/accyd.json" \
  --benchmark_out_format=json "$@" || status=1
./bazel-bin/bench/gpu_bench "${reps[@]}" --benchmark_out="$out/gpu.json" --benchmark_out_format=json "$@" || status=1
echo
/usr/bin/python3 tools/bench_table.py "$out/cpu.json" "$out/accyd.json" "$out/gpu.json" | tee "$out/tables.md"
# PyTorch's and NumPy's errors on the sums the tests hold Accy to
# (tests/sum_data.h; docs/MATH_ACCURACY.md, "Sums").
echo
/usr/bin/python3 bench/sum_accuracy.py | tee "$out/sum_accuracy.txt" || status=1
exit $status
