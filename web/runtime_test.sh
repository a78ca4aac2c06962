#!/usr/bin/env bash
# web/accy.js in headless Chromium (web/runtime_test.html): bad inputs and a
# bad artifact are refused naming what is wrong, the program still runs
# after them, bools round-trip, and a lost device is reported. Skipped,
# saying so, without Chromium.
set -u
R="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-accy}"
. "$R/tools/webgpu/skip_without_chromium.sh"
work="${TEST_TMPDIR:-$(mktemp -d)}/runtime"
mkdir -p "$work"
cp "$R/web/accy.js" "$R/web/accy_wasm.js" "$R/web/accy_plan.js" "$R/web/runtime_test.html" "$work/"
result=$(python3 "$R/tools/webgpu/run_page.py" "$work/runtime_test.html" "window.runtimeChecks" --timeout=300) || {
  echo "FAIL: the page did not finish: $result"
  exit 1
}
echo "page: $result"
python3 - "$result" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
checks = {
    "good": r["good"] == {"y": [0, 2, 4, 6, 8, 10, 12, 15], "z": [0, 1, 0, 0, 1, 1, 0, 1],
                          "types": ["Float32Array", "Uint8Array"]},
    "format": r["format"].startswith("AccyError: not an Accy WGSL artifact (format something-else"),
    "count": r["count"] == "AccyError: the program takes 2 inputs, not 1",
    "type": r["type"] == "AccyError: input 0 (f32[i=8]) must be a Float32Array, not Int32Array",
    "length": r["length"] == "AccyError: input 0 (f32[i=8]) has 7 elements, not 8",
    "boolType": r["boolType"] == "AccyError: input 1 (bool[i=8]) must be a Uint8Array, not Float32Array",
    "wgslError": r["wgslError"].startswith("AccyError: kernel k0: WGSL errors: line 1:"),
    "again": r["again"] == [0, 2, 4, 6, 8, 10, 12, 15],
    "lost": r["lost"].startswith("AccyError: the WebGPU device was lost (destroyed)"),
}
for name, ok in checks.items():
    print("PASS" if ok else "FAIL", name, "" if ok else r.get(name))
sys.exit(0 if all(checks.values()) else 1)
PY
