#!/usr/bin/env bash
# Lays the example pages out in OUT, ready to serve: the tone page
# (index.html) and the digits page (digits.html), their scripts, the
# runtimes they import (web/accy.js imports accy_wasm.js, which starts
# accy_wasm_worker.js for threads, and accy_plan.js for programs with loops)
# and the artifacts make_artifacts writes.
#
#   examples/web/layout.sh ROOT MAKE_ARTIFACTS OUT
#
# ROOT: the source tree (or a test's runfiles); MAKE_ARTIFACTS: the built
# //examples/web:make_artifacts. Used by `make web` and by the page's test.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: examples/web/layout.sh ROOT MAKE_ARTIFACTS OUT" >&2
  exit 2
fi
root=$1 make_artifacts=$2 out=$3
mkdir -p "$out"
cp "$root/examples/web/index.html" "$root/examples/web/tone.js" "$root/examples/web/digits.html" \
  "$root/examples/web/digits.js" "$root/web/accy.js" "$root/web/accy_wasm.js" "$root/web/accy_wasm_worker.js" \
  "$root/web/accy_plan.js" "$out/"
"$make_artifacts" "$out"
