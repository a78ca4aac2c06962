#!/usr/bin/env bash
# The WGSL benchmarks in headless Chromium (WebGPU on SwiftShader here):
# Accy's chain and sum kernels against hand-written WGSL, as ratios
# (docs/PERFORMANCE.md). Usage: bench/webgpu/run.sh (from the source tree).
set -euo pipefail
cd "$(dirname "$0")/../.."
bazel build -c opt //bench/webgpu:make_bench_artifacts >/dev/null 2>&1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp bench/webgpu/bench.html bench/webgpu/bench.js web/accy.js web/accy_wasm.js web/accy_plan.js "$work/"
bazel-bin/bench/webgpu/make_bench_artifacts "$work" >/dev/null
echo "CPU: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1), $(nproc) cores; $(chromium --version 2>/dev/null | head -1)"
python3 tools/webgpu/run_page.py "$work/bench.html" "window.benchDone" --timeout=900 | python3 bench/webgpu/table.py
