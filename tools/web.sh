#!/usr/bin/env bash
# make web: builds the example pages' artifacts (tone and digits), lays them out with the
# runtimes beside them (examples/web/layout.sh) and serves them on 127.0.0.1
# with the cross-origin isolation headers threads need, printing the
# address. PORT (default 8000) picks the port, WEB_DIR the folder (default a
# new one under /tmp). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${PORT:-8000}"
out="${WEB_DIR:-$(mktemp -d /tmp/accy-web-XXXXXX)}"
bazel build //examples/web:make_artifacts
bash examples/web/layout.sh . bazel-bin/examples/web/make_artifacts "$out" >/dev/null
exec /usr/bin/python3 - "$out" "$port" <<'PY'
import functools, http.server, sys
sys.path.insert(0, "tools/webgpu")
from run_page import IsolatedHandler  # the headers the tests serve pages with

directory, port = sys.argv[1], int(sys.argv[2])
try:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(IsolatedHandler, directory=directory))
except OSError as e:
    sys.exit(f"make web: cannot listen on 127.0.0.1:{port} ({e.strerror}); choose another with PORT=N")
print(f"The tone page: http://127.0.0.1:{server.server_address[1]}/index.html", flush=True)
print(f"The digits page: http://127.0.0.1:{server.server_address[1]}/digits.html", flush=True)
print(f"(files in {directory}; a browser with WebGPU runs it on the GPU, others on WebAssembly; Ctrl-C stops)", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
PY
