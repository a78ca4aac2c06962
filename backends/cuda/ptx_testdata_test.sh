#!/bin/bash
# The hand-written PTX test kernels assemble with the CUDA toolkit's ptxas
# for sm_90 (the H100/H200); skips where no ptxas is installed.
set -euo pipefail
ptxas=""
for candidate in "$(command -v ptxas || true)" /usr/local/cuda/bin/ptxas; do
  if [[ -n "$candidate" && -x "$candidate" ]]; then ptxas="$candidate"; break; fi
done
if [[ -z "$ptxas" ]]; then
  echo "SKIPPED: no ptxas here (install the CUDA toolkit to check the test kernels)"
  exit 0
fi
dir="${TEST_SRCDIR:-.}/accy/backends/cuda/testdata"
out="${TEST_TMPDIR:-/tmp}"
for name in axpb two_kernels; do
  "$ptxas" -arch=sm_90 "$dir/$name.ptx" -o "$out/$name.cubin"
  echo "ok: $name.ptx assembles for sm_90"
done
# A PTX error names the bad symbol in ptxas's log, as the backend's load
# error does on a GPU.
sed 's/0f40000000/accy_fake_jit_error/' "$dir/axpb.ptx" > "$out/bad.ptx"
if "$ptxas" -arch=sm_90 "$out/bad.ptx" -o "$out/bad.cubin" 2> "$out/bad.log"; then
  echo "FAIL: bad.ptx assembled"; exit 1
fi
grep -q "accy_fake_jit_error" "$out/bad.log" || { echo "FAIL: ptxas's log does not name the symbol:"; cat "$out/bad.log"; exit 1; }
echo "ok: a bad symbol is named in ptxas's log"
