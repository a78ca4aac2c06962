#!/usr/bin/env bash
# The CUDA device script: everything a lent GPU machine should run, in one
# command, well under ten minutes.
#
#   bench/gpu/run.sh pack     here (the build machine): builds the CUDA tests
#                             and benchmark with -c opt and gathers them, with
#                             the shared libraries they need that a CUDA host
#                             may lack, into .gpu-bundle/ (git-ignored).
#   bench/gpu/run.sh device   on the GPU machine, from the repository root with
#                             .gpu-bundle/ beside it: the CUDA backend test, the
#                             GPU conformance suite on CUDA, and the benchmark
#                             (elementwise bandwidth against a device-to-device
#                             copy, a reduction, f32 and tf32 dot against
#                             cuBLAS). Logs go to $OUT (or ./gpu-results).
#                             Fails when a test failed or skipped a case (on a
#                             GPU machine a skip means the GPU was not used).
#
# The GPU machine builds nothing: it has no Bazel and no network. libcuda.so.1
# and cuBLAS are the machine's own (the driver's and the CUDA toolkit's).
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=.gpu-bundle
targets=(//backends/cuda:cuda_backend_test //tests:cuda_conformance_test //bench:cuda_bench)

case "${1:-}" in
pack)
  bazel build -c opt "${targets[@]}"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  for t in "${targets[@]}"; do
    bin="bazel-bin/$(echo "${t#//}" | tr : /)"
    cp "$bin" "$bundle/bin/"
    # Every shared library outside the C runtime and the CUDA libraries
    # (those come from the GPU machine itself).
    ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcublas*|libcudart*) ;;
        *) cp -Ln "$lib" "$bundle/lib/" ;;
      esac
    done
  done
  # The backend test's data (hand-written PTX, the fake driver), where it
  # looks for it: $TEST_SRCDIR/accy/backends/cuda/testdata.
  data="$bundle/srcdir/accy/backends/cuda/testdata"
  mkdir -p "$data"
  cp backends/cuda/testdata/*.ptx bazel-bin/backends/cuda/testdata/*.so "$data/"
  du -sh "$bundle"
  echo "ready: run 'bash bench/gpu/run.sh device' on the GPU machine with $bundle carried"
  ;;
device)
  out="${OUT:-gpu-results}"
  mkdir -p "$out"
  [[ -d "$bundle/bin" ]] || { echo "no $bundle: run 'bench/gpu/run.sh pack' on the build machine first" >&2; exit 2; }
  cublas="$(find /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu / -name 'libcublas.so.1[0-9]' -print -quit 2>/dev/null || true)"
  export LD_LIBRARY_PATH="$PWD/$bundle/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
    echo "cuBLAS: ${cublas:-not found}"
  } | tee "$out/machine.txt"
  status=0
  # Cases that skip on a GPU by design are left out by name (they check the
  # no-GPU path, or the fake driver's limits); any other skip here means the
  # GPU was not used, and fails the run.
  TEST_SRCDIR="$PWD/$bundle/srcdir" timeout 120 "$bundle/bin/cuda_backend_test" \
    --gtest_filter='-CudaBackendInfo.WithoutAGpuItIsUnavailableAndSaysWhy:Drivers/CudaBackendTest.RunsACompiledProgramLikeTheEvaluator/FakeDriver' \
    2>&1 | tee "$out/cuda_backend_test.log" || status=1
  timeout 300 "$bundle/bin/cuda_conformance_test" --gtest_filter='-CudaConformance.TheBackendSaysWhyItIsUnavailable' \
    2>&1 | tee "$out/cuda_conformance_test.log" || status=1
  for log in "$out/cuda_backend_test.log" "$out/cuda_conformance_test.log"; do
    if grep -q '^\[  SKIPPED \]' "$log"; then
      echo "FAILED: cases skipped on the GPU machine ($(basename "$log")):"
      grep -B3 '^\[  SKIPPED \]' "$log" | grep -v '^\[       OK \]' || true
      status=1
    fi
    if ! grep -q '^\[  PASSED  \] [1-9]' "$log"; then
      echo "FAILED: no case passed in $(basename "$log")"
      status=1
    fi
  done
  timeout 150 "$bundle/bin/cuda_bench" --benchmark_min_time=0.2 --benchmark_out="$out/cuda_bench.json" \
    --benchmark_out_format=json 2>&1 | tee "$out/cuda_bench.log" || status=1
  exit $status
  ;;
*)
  echo "usage: bench/gpu/run.sh pack|device" >&2
  exit 2
  ;;
esac
