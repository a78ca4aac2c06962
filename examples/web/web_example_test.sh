#!/usr/bin/env bash
# The tone page in headless Chromium, three ways: on WebGPU (the default),
# on WebAssembly through the page's switch (?target=wasm), and in a browser
# without WebGPU, where it falls back to WebAssembly by itself. Each time,
# after 100 steps the guesses that started at 2.5 and 3.5 are at 3 (within
# 1e-4), every guess's mismatch is finite, and a screenshot is written (the
# test's undeclared outputs, or $WEB_SCREENSHOT_DIR). Then the digits page
# trains 4 epochs on WebGPU and on WebAssembly: each run's held-out accuracy
# passes 90%, its loss falls, the two targets' accuracies agree epoch by
# epoch (within 2 of the 359 images) and a screenshot is written. Skipped,
# saying so, without Chromium.
set -u
R="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-accy}"
. "$R/tools/webgpu/skip_without_chromium.sh"
work="${TEST_TMPDIR:-$(mktemp -d)}/page"
mkdir -p "$work"
# Laid out as `make web` lays it out.
bash "$R/examples/web/layout.sh" "$R" "$R/examples/web/make_artifacts" "$work" || { echo "FAIL: layout"; exit 1; }
shots="${WEB_SCREENSHOT_DIR:-${TEST_UNDECLARED_OUTPUTS_DIR:-$work}}"
failures=0
# name, page, expected target, extra run_page options
while read -r name page want extra; do
  shot="$shots/web_tone_$name.png"
  result=$(python3 "$R/tools/webgpu/run_page.py" "$work/$page" "window.toneDone" --timeout=600 \
    --screenshot="$shot" $extra) || { echo "FAIL: $name: the page did not finish: $result"; failures=$((failures + 1)); continue; }
  echo "$name: $result"
  python3 - "$result" "$shot" "$want" <<'PY' || failures=$((failures + 1))
import json, math, os, sys
r = json.loads(sys.argv[1])
g, m = r["guesses"], r["mismatch"]
ok = r["target"] == sys.argv[3]
ok = ok and abs(g[2] - 3) < 1e-4 and abs(g[3] - 3) < 1e-4 and all(math.isfinite(v) for v in m)
ok = ok and os.path.getsize(sys.argv[2]) > 10000 and open(sys.argv[2], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
print("PASS" if ok else "FAIL", r["target"], "(" + r["note"] + ")", "guesses", [round(v, 5) for v in g],
      "screenshot", sys.argv[2])
sys.exit(0 if ok else 1)
PY
done <<'CASES'
webgpu index.html wgsl
wasm index.html?target=wasm wasm
fallback index.html wasm --webgpu=off
CASES
# The digits page: each epoch one run of the epoch plan (a scan).
for target in wgsl wasm; do
  shot="$shots/web_digits_$target.png"
  result=$(python3 "$R/tools/webgpu/run_page.py" "$work/digits.html?epochs=4&target=$target" "window.digitsDone" \
    --timeout=600 --screenshot="$shot") || { echo "FAIL: digits on $target: the page did not finish: $result"; failures=$((failures + 1)); continue; }
  echo "digits $target: $result"
  echo "$result" > "$work/digits_$target.json"
  python3 - "$result" "$shot" "$target" <<'PY' || failures=$((failures + 1))
import json, os, sys
r = json.loads(sys.argv[1])
acc, losses = r["accuracies"], r["losses"]
ok = r["target"] == sys.argv[3] and len(acc) == 4 and acc[-1] >= 0.90 and r["lastLoss"] < losses[0] / 4
ok = ok and os.path.getsize(sys.argv[2]) > 10000 and open(sys.argv[2], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
print("PASS" if ok else "FAIL", "digits on", r["target"], "held-out accuracy by epoch", [round(a, 4) for a in acc],
      "loss", round(losses[0], 3), "->", round(r["lastLoss"], 3), "%.0f ms an epoch" % r["msPerEpoch"], "screenshot", sys.argv[2])
sys.exit(0 if ok else 1)
PY
done
if [ -f "$work/digits_wgsl.json" ] && [ -f "$work/digits_wasm.json" ]; then
  python3 - "$work/digits_wgsl.json" "$work/digits_wasm.json" <<'PY' || failures=$((failures + 1))
import json, sys
a, b = (json.load(open(p))["accuracies"] for p in sys.argv[1:3])
ok = all(abs(x - y) <= 2 / 359 + 1e-9 for x, y in zip(a, b))
print("PASS" if ok else "FAIL", "digits: WebGPU and WebAssembly agree epoch by epoch:", a, b)
sys.exit(0 if ok else 1)
PY
fi
[ "$failures" -eq 0 ]
