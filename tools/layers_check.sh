#!/usr/bin/env bash
# The layering rules of docs/LAYERS.md as checks: each prints one line,
# "passed layers: RULE" or "failed layers: RULE: what breaks it", for
# tools/run_tests.sh to count. Run from the workspace root, outside Bazel
# (it queries the build graph).
set -uo pipefail
cd "$(dirname "$0")/.."

# check RULE QUERY [OPEN]: the query must find nothing. With OPEN (why the
# rule does not hold yet), a rule that does not hold is reported skipped,
# with that reason and what breaks it, not passed.
check() {
  local rule=$1 query=$2 open=${3:-} found
  if ! found=$(bazel query "$query" 2>/dev/null); then
    echo "failed layers: $rule: bazel query failed: $query"
    return
  fi
  if [ -z "$found" ]; then
    echo "passed layers: $rule"
  elif [ -n "$open" ]; then
    echo "skipped layers: $rule: not yet: $open (found: $(echo "$found" | head -3 | tr '\n' ' '))"
  else
    echo "failed layers: $rule: $(echo "$found" | head -3 | tr '\n' ' ')"
  fi
}

check "the backend interface sees no emitter nor the target registry" \
  'filter("//compiler/codegen(/|:targets)", deps(//backends:backend))'
check "compiler/ depends on no backend, runtime, client or server" \
  'deps(kind("cc_library", //compiler/...)) intersect (//backends/... + //runtime/... + //client/... + //server/...)'
check "runtime/ depends on neither client/ nor server/" \
  'deps(kind("cc_library", //runtime/...)) intersect (//client/... + //server/...)'
check "client/ does not depend on server/" 'deps(//client/...) intersect //server/...'
check "server/ does not depend on client/" 'deps(//server/...) intersect //client/...'
# Devices run; compilers compile: a device loads and launches executables
# and links no target registry (the compile path, backends:compile_program,
# composes compile and load).
for device in //backends/cpu //backends/vulkan //backends/cuda //backends/null; do
  check "$device does not depend on the target registry" "deps($device) intersect //compiler/codegen:targets"
done
check "//client:remote_session does not depend on the target registry" \
  "deps(//client:remote_session) intersect //compiler/codegen:targets" \
  "its in-process CPU session (RemoteOptions::cpu_in_process) compiles through runtime:session and the one compile path"
# bench/ and tools/ include no file of each other.
crossed=$( (grep -rln --include='*.cc' --include='*.h' 'include "tools/' bench/; \
            grep -rln --include='*.cc' --include='*.h' 'include "bench/' tools/) | head -3 | tr '\n' ' ')
if [ -n "$crossed" ]; then
  echo "failed layers: bench/ and tools/ include no file of each other: $crossed"
else
  echo "passed layers: bench/ and tools/ include no file of each other"
fi
