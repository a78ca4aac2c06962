#!/usr/bin/env bash
# Pipes Accy's raw random bits (tools/random_bits.cc: randomBits of a key
# folded with a chunk counter, x86-64, two threads) into dieharder as raw
# input (-g 200). With no arguments the whole battery (-a, hours); with test
# numbers, those tests (dieharder -l lists them; TEST:NTUP runs one ntuple,
# e.g. 203:21 for rgb_lagged_sum at lag 21). Prints the CPU model and
# dieharder's table; results are recorded in docs/RANDOM_QUALITY.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //tools:random_bits
bits=bazel-out/k8-opt/bin/tools/random_bits
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "seed: 2026 (random_bits' default)"
if [ "$#" -eq 0 ]; then
  "$bits" | dieharder -g 200 -a
else
  for t in "$@"; do
    if [[ "$t" == *:* ]]; then
      "$bits" | dieharder -g 200 -d "${t%%:*}" -n "${t##*:}"
    else
      "$bits" | dieharder -g 200 -d "$t"
    fi
  done
fi
