#!/usr/bin/env bash
# Bazel workspace status command for stamped builds (--stamp
# --workspace_status_command=tools/build_record_status.sh): prints the build
# record that accyd's disk cache is keyed by. Every key is STABLE_ so a
# change rebuilds what embeds it.
set -u
cd "$(dirname "$0")/.."
tree=$(git rev-parse 'HEAD^{tree}' 2>/dev/null || echo none)
# Uncommitted changes count as source too.
dirty=$( (git diff HEAD 2>/dev/null; git ls-files --others --exclude-standard 2>/dev/null | xargs -r cat 2>/dev/null) | sha256sum | cut -c1-16)
echo "STABLE_ACCY_SOURCE_HASH ${tree}-${dirty}"
echo "STABLE_ACCY_COMPILER $(gcc --version | head -n1 | tr ' ' '_')"
echo "STABLE_ACCY_FLAGS $(grep -E '^build (--copt|--cxxopt)' .bazelrc | sha256sum | cut -c1-16)"
deps=""
for p in libabsl-dev libasmjit-dev libprotobuf-dev libgrpc++-dev libvulkan-dev; do
  deps="${deps}${p}=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo missing),"
done
echo "STABLE_ACCY_DEPS ${deps%,}"
