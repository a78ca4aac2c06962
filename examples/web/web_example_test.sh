#!/usr/bin/env bash
# The tone page in headless Chromium: after 100 steps the guesses that
# started at 2.5 and 3.5 are at 3 (within 1e-4), every guess's mismatch is
# finite, and the screenshot is written (the test's undeclared outputs, or
# $WEB_SCREENSHOT). Skipped, saying so, without Chromium.
set -u
R="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-accy}"
. "$R/tools/webgpu/skip_without_chromium.sh"
work="${TEST_TMPDIR:-$(mktemp -d)}/page"
mkdir -p "$work"
cp "$R/examples/web/index.html" "$R/examples/web/tone.js" "$R/web/accy.js" "$work/"
"$R/examples/web/make_artifacts" "$work" || { echo "FAIL: make_artifacts"; exit 1; }
shot="${WEB_SCREENSHOT:-${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/web_tone.png}"
result=$(python3 "$R/tools/webgpu/run_page.py" "$work/index.html" "window.toneDone" --timeout=600 \
  --screenshot="$shot") || { echo "FAIL: the page did not finish: $result"; exit 1; }
echo "page: $result"
python3 - "$result" "$shot" <<'PY'
import json, math, os, sys
r = json.loads(sys.argv[1])
g, m = r["guesses"], r["mismatch"]
ok = abs(g[2] - 3) < 1e-4 and abs(g[3] - 3) < 1e-4 and all(math.isfinite(v) for v in m)
ok = ok and os.path.getsize(sys.argv[2]) > 10000 and open(sys.argv[2], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
print("PASS" if ok else "FAIL", "guesses", [round(v, 5) for v in g], "screenshot", sys.argv[2])
sys.exit(0 if ok else 1)
PY
