#!/usr/bin/env bash
# The main job: the tone example in process (reference evaluator and the
# x86-64 JIT), then its gradient descent through a real accyd on a
# temporary socket, which is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //examples/tone:tone_demo //examples/tone:remote_demo //server:accyd
./bazel-bin/examples/tone/tone_demo
dir=$(mktemp -d /tmp/accy-demo-XXXXXX)
./bazel-bin/server/accyd --listen="unix:$dir/accyd.sock" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/accyd.sock" ] && break; sleep 0.05; done
./bazel-bin/examples/tone/remote_demo "unix:$dir/accyd.sock"
