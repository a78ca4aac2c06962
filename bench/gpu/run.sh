#!/usr/bin/env bash
# The CUDA device script: everything a lent GPU machine should run, in one
# command, well under ten minutes.
#
#   bench/gpu/run.sh pack     here (the build machine): builds the CUDA tests
#                             and benchmark and the x86-64 suites with -c opt,
#                             and the wire fuzzer (tools/fuzz, clang, ASan),
#                             and gathers them, with the shared libraries they
#                             need (the C library too, used where the GPU
#                             machine's is older), into .gpu-bundle/bundle.tar.xz
#                             (git-ignored; xz keeps it under the 64 MiB that
#                             travels).
#   bench/gpu/run.sh device   on the GPU machine, from the repository root with
#                             .gpu-bundle/ beside it: the CUDA backend test, the
#                             GPU conformance suite on CUDA, and the benchmark
#                             (elementwise bandwidth against a device-to-device
#                             copy, a reduction, f32 and tf32 dot against
#                             cuBLAS). Beside them, on the machine's processor
#                             (AVX-512 where it has it, which the build machine
#                             may not): the CPU conformance suite, the math
#                             test, and the wire fuzzer (make test's 20,000
#                             runs with -seed=1, and seeds 2 to 8).
#                             Logs go to $OUT (or ./gpu-results).
#   bench/gpu/run.sh device PARTS   only PARTS, of "cuda vulkan cpu" (a rerun
#                             of one part costs less of a lease), or
#                             "cudabench" for the CUDA benchmark alone.
#   BASELINE=REV bench/gpu/run.sh pack   also bundles REV's CUDA benchmark;
#                             the device run then runs it and this build's
#                             again after this build's (BENCH_FILTER=REGEX
#                             on the device narrows those two).
#                             Fails when a test failed or skipped a case (on a
#                             GPU machine a skip means the GPU was not used).
#
# The GPU machine builds nothing: it has no Bazel and no network. libcuda.so.1
# and cuBLAS are the machine's own (the driver's and the CUDA toolkit's).
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=.gpu-bundle
targets=(//backends/cuda:cuda_backend_test //tests:cuda_conformance_test //bench:cuda_bench
  //tests:vulkan_conformance_test //bench:gpu_bench //tests:cpu_conformance_test //compiler/codegen/x86_64:math_test)

case "${1:-}" in
pack)
  bazel build -c opt "${targets[@]}"
  fuzz_dir="${FUZZ_BUILD_DIR:-${TMPDIR:-/tmp}/accy-fuzz-$(pwd | sha256sum | cut -c1-12)}"
  tools/fuzz/build_fuzzer.sh "$fuzz_dir"
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/libc" "$bundle/fuzz"
  bins=()
  for t in "${targets[@]}"; do bins+=("bazel-bin/$(echo "${t#//}" | tr : /)"); done
  bins+=("$fuzz_dir/wire_fuzz")
  for bin in "${bins[@]}"; do
    cp "$bin" "$bundle/bin/"
    # Every shared library outside the CUDA libraries (those come from the
    # GPU machine itself); the C library apart, used only where the
    # machine's own is older than the one these were built against.
    ldd "$bin" | awk '/=> \// {print $3} /ld-linux/ {print $1}' | while read -r lib; do
      case "$(basename "$lib")" in
        libcuda.so*|libcublas*|libcudart*) ;;
        libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) cp -Ln "$lib" "$bundle/libc/" ;;
        *) cp -Ln "$lib" "$bundle/lib/" ;;
      esac
    done
  done
  cp tools/fuzz/corpus/* "$bundle/fuzz/"
  # The Vulkan loader (the backend opens libvulkan.so.1); the driver is the
  # GPU machine's.
  # NVIDIA's Vulkan driver (libGLX_nvidia) needs GLVND's dispatch library,
  # which a CUDA-only machine may lack.
  for lib in libvulkan.so.1 libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libOpenGL.so.0 libGL.so.1; do
    [[ -e "/usr/lib/x86_64-linux-gnu/$lib" ]] && cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$bundle/lib/"
  done
  getconf GNU_LIBC_VERSION | awk '{print $2}' >"$bundle/libc/VERSION"
  # BASELINE=REV: that revision's CUDA benchmark too, run beside this
  # build's. It is built in a worktree kept for the next pack
  # (BASELINE_DIR, default /tmp/accy-baseline-REV; a first build there is a
  # fresh Bazel workspace: minutes).
  if [[ -n "${BASELINE:-}" ]]; then
    rev="$(git rev-parse --short "$BASELINE")"
    wt="${BASELINE_DIR:-${TMPDIR:-/tmp}/accy-baseline-$rev}"
    [[ -d "$wt" ]] || git worktree add -q --detach "$wt" "$BASELINE"
    [[ "$(git -C "$wt" rev-parse --short HEAD)" == "$rev" ]] || { echo "$wt is not at $rev" >&2; exit 2; }
    (cd "$wt" && bazel build -c opt //bench:cuda_bench)
    cp "$wt/bazel-bin/bench/cuda_bench" "$bundle/bin/cuda_bench.baseline"
    echo "$BASELINE ($rev)" >"$bundle/bin/BASELINE"
  fi
  # The backend test's data (hand-written PTX, the fake driver), where it
  # looks for it: $TEST_SRCDIR/accy/backends/cuda/testdata.
  data="$bundle/srcdir/accy/backends/cuda/testdata"
  mkdir -p "$data"
  cp backends/cuda/testdata/*.ptx bazel-bin/backends/cuda/testdata/*.so "$data/"
  tar -C "$bundle" -cf - bin lib libc fuzz srcdir | xz -6 -T0 >"$bundle/bundle.tar.xz"
  rm -rf "$bundle"/{bin,lib,libc,fuzz,srcdir}
  du -sh "$bundle"
  echo "ready: run 'bash bench/gpu/run.sh device' on the GPU machine with $bundle carried"
  ;;
device)
  parts=" ${2:-cuda vulkan cpu} "
  out="${OUT:-gpu-results}"
  mkdir -p "$out"
  root="$bundle"
  if [[ -f "$bundle/bundle.tar.xz" ]]; then
    root="$(mktemp -d)"
    xz -dc "$bundle/bundle.tar.xz" | tar -C "$root" -xf -
  fi
  [[ -d "$root/bin" ]] || { echo "no $bundle: run 'bench/gpu/run.sh pack' on the build machine first" >&2; exit 2; }
  cublas="$(find /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu / -name 'libcublas.so.1[0-9]' -print -quit 2>/dev/null || true)"
  libs="$root/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # The machine's C library when it is at least as new as the build
  # machine's; else the bundle's, through its own loader.
  host_libc="$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
  built_libc="$(cat "$root/libc/VERSION")"
  if [[ "$(printf '%s\n%s\n' "$built_libc" "$host_libc" | sort -V | head -1)" == "$built_libc" ]]; then
    printf '#!/bin/sh\nexport LD_LIBRARY_PATH="%s"\nexec "$@"\n' "$libs" >"$root/run"
  else
    printf '#!/bin/sh\nexec "%s" --library-path "%s" "$@"\n' "$root/libc/ld-linux-x86-64.so.2" "$root/libc:$libs" >"$root/run"
  fi
  chmod +x "$root/run"
  run="$root/run"
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
    echo "cuBLAS: ${cublas:-not found}"
    echo "C library: machine $host_libc, bundle built against $built_libc"
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) threads"
    echo "CPU AVX-512: $(grep -m1 -o -w 'avx512f' /proc/cpuinfo || echo no), AMX: $(grep -m1 -o -w 'amx_tile' /proc/cpuinfo || echo no)"
  } | tee "$out/machine.txt"
  status=0

  # The processor's checks, in the background while the GPU runs: the CPU
  # conformance suite and the math test on this machine's widest vectors,
  # and the wire fuzzer on eight seeds (seed 1 is make test's run).
  # Eight files at most come back: the GPU tests' logs, the machine, the
  # benchmarks' JSON, and logs.tar.gz with the rest.
  logs="$(mktemp -d)"
  fz="$logs/fuzz"
  mkdir -p "$fz"
  cpu_pids=()
  fuzz_pids=()
  if [[ "$parts" == *" cpu "* ]]; then
    timeout 400 "$run" "$root/bin/cpu_conformance_test" >"$logs/cpu_conformance_test.log" 2>&1 &
    cpu_pids+=($!)
    timeout 400 "$run" "$root/bin/math_test" >"$logs/math_test.log" 2>&1 &
    cpu_pids+=($!)
    for seed in 1 2 3 4 5 6 7 8; do
      mkdir -p "$fz/corpus$seed" "$fz/artifacts"
      cp "$root"/fuzz/* "$fz/corpus$seed/"
      ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        timeout 400 "$run" "$root/bin/wire_fuzz" -runs=20000 -seed=$seed -max_len=4096 -rss_limit_mb=2048 \
        -malloc_limit_mb=512 -timeout=25 -print_final_stats=1 -artifact_prefix="$fz/artifacts/seed$seed-" \
        "$fz/corpus$seed" >"$fz/seed$seed.log" 2>&1 &
      fuzz_pids+=($!)
    done
  fi

  # Cases that skip on a GPU by design are left out by name (they check the
  # no-GPU path, or the fake driver's limits); any other skip here means the
  # GPU was not used, and fails the run.
  if [[ "$parts" == *" cuda "* ]]; then
    TEST_SRCDIR="$root/srcdir" timeout 60 "$run" "$root/bin/cuda_backend_test" \
      --gtest_filter='-CudaBackendInfo.WithoutAGpuItIsUnavailableAndSaysWhy:Drivers/CudaBackendTest.RunsACompiledProgramLikeTheEvaluator/FakeDriver' \
      >"$out/cuda_backend_test.log" 2>&1 || status=1
    timeout 200 "$run" "$root/bin/cuda_conformance_test" --gtest_filter='-CudaConformance.TheBackendSaysWhyItIsUnavailable' \
      >"$out/cuda_conformance_test.log" 2>&1 || status=1
  fi
  if [[ "$parts" == *" cuda "* || "$parts" == *" cudabench "* ]]; then
    timeout 90 "$run" "$root/bin/cuda_bench" --benchmark_min_time=0.2 --benchmark_out="$out/cuda_bench.json" \
      --benchmark_out_format=json 2>&1 | tee "$logs/cuda_bench.log" || status=1
    # The baseline's benchmark (pack with BASELINE=REV), then this build's
    # again: before and after in one run, alternated.
    if [[ -x "$root/bin/cuda_bench.baseline" ]]; then
      echo "baseline: $(cat "$root/bin/BASELINE")"
      timeout 90 "$run" "$root/bin/cuda_bench.baseline" --benchmark_min_time=0.2 --benchmark_filter="${BENCH_FILTER:-.}" \
        --benchmark_out="$logs/cuda_bench_baseline.json" --benchmark_out_format=json 2>&1 | tee "$logs/cuda_bench_baseline.log" || status=1
      timeout 90 "$run" "$root/bin/cuda_bench" --benchmark_min_time=0.2 --benchmark_filter="${BENCH_FILTER:-.}" \
        --benchmark_out="$logs/cuda_bench_again.json" --benchmark_out_format=json 2>&1 | tee "$logs/cuda_bench_again.log" || status=1
    fi
  fi
  if [[ "$parts" == *" vulkan "* ]]; then
    # SPIR-V on the GPU's own Vulkan driver.
    for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
      /etc/vulkan/icd.d/nvidia_icd.json; do
      if [[ -f "$icd" ]]; then
        export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
        break
      fi
    done
    echo "Vulkan driver: ${VK_DRIVER_FILES:-found by the loader}" | tee -a "$out/machine.txt"
    VK_LOADER_DEBUG=error timeout 120 "$run" "$root/bin/vulkan_conformance_test" >"$out/vulkan_conformance_test.log" 2>&1 || status=1
    timeout 100 "$run" "$root/bin/gpu_bench" --benchmark_min_time=0.2 --benchmark_out="$out/gpu_bench.json" \
      --benchmark_out_format=json 2>&1 | tee "$logs/gpu_bench.log" || status=1
  fi

  for pid in "${cpu_pids[@]}"; do wait "$pid" || status=1; done
  for seed in "${!fuzz_pids[@]}"; do
    seed=$((seed + 1))
    if wait "${fuzz_pids[$((seed - 1))]}"; then
      echo "passed wire_fuzz -seed=$seed: $(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$fz/seed$seed.log")"
    else
      echo "FAILED wire_fuzz -seed=$seed; the end of its log:"
      tail -n 40 "$fz/seed$seed.log"
      status=1
    fi
  done
  rm -rf "$fz"/corpus*
  tar -C "$logs" -czf "$out/logs.tar.gz" .

  for log in "$out/cuda_backend_test.log" "$out/cuda_conformance_test.log" "$out/vulkan_conformance_test.log" \
    "$logs/cpu_conformance_test.log" "$logs/math_test.log"; do
    [[ -f "$log" ]] || continue
    echo "$(basename "$log"): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$log" | grep -v '^\[  FAILED  \] [A-Z]' | tr '\n' ' ')"
    grep '^\[  FAILED  \] [A-Z]' "$log" | sort -u || true
    case "$(basename "$log")" in
      cuda_* | vulkan_*)
        if grep -q '^\[  SKIPPED \]' "$log"; then
          echo "FAILED: cases skipped on the GPU machine ($(basename "$log")):"
          grep -B3 '^\[  SKIPPED \]' "$log" | grep -v '^\[       OK \]' || true
          status=1
        fi
        ;;
    esac
    if ! grep -q '^\[  PASSED  \] [1-9]' "$log"; then
      echo "FAILED: no case passed in $(basename "$log"); its end:"
      tail -n 30 "$log"
      status=1
    fi
  done
  echo "device run: exit $status"
  exit $status
  ;;
*)
  echo "usage: bench/gpu/run.sh pack|device" >&2
  exit 2
  ;;
esac
