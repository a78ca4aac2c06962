#!/usr/bin/env bash
# web/accy_wasm.js in node on the tone program's artifacts
# (tools/wasm/runtime_test.mjs): runs, in place, and refusals of bad inputs
# and damaged artifacts by name; web/accy_plan.js on the plan of a program
# with nested loops. Skipped, saying so, without node.
set -uo pipefail
R="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-accy}"
NODE="${ACCY_NODE:-node}"
if ! command -v "$NODE" >/dev/null 2>&1; then
  echo "SKIPPED: node not found: nothing to run wasm in"
  exit 0
fi
work="${TEST_TMPDIR:-$(mktemp -d)}/runtime"
mkdir -p "$work"
cp "$R/web/accy_wasm.js" "$R/web/accy_wasm_worker.js" "$R/web/accy_plan.js" "$R/tools/wasm/runtime_test.mjs" "$work/"
"$R/tools/accy" compile "$R/examples/tone/mismatch8.wire" --target=wasm --emit=artifact -o "$work/plain.json" >/dev/null || exit 1
"$R/tools/accy" compile "$R/examples/tone/mismatch8.wire" --target=wasm --threads=2 --emit=artifact -o "$work/threads.json" >/dev/null || exit 1
"$R/tools/accy" compile "$R/tools/fuzz/corpus/loops.wire" --target=wasm --emit=artifact -o "$work/plan.json" >/dev/null || exit 1
"$NODE" "$work/runtime_test.mjs" "$work/plain.json" "$work/threads.json" "$work/plan.json"
