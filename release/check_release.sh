#!/usr/bin/env bash
# The release check (make release-check; tools/run_tests.sh runs it in make
# test): make release into a temporary directory, check the SHA-256 sums,
# extract both archives into a temporary directory outside the workspace,
# and build and run examples/consumer against each: with Bazel over the
# extracted source archive (a repository rule pointing at it) and with CMake
# over the extracted binary archive (find_package(Accy)); also the binary
# archive's accy and accyd. Prints "passed release: WHAT" or "failed release:
# WHAT" per check (what tools/test_tally.py counts) and exits 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
version=$(tr -d ' \n' <VERSION)
tmp=$(mktemp -d /tmp/accy-release-check-XXXXXX)
keep=${ACCY_KEEP_RELEASE_CHECK:-}
cleanup() {
  if [ -d "$tmp/accy-$version/examples/consumer" ]; then
    (cd "$tmp/accy-$version/examples/consumer" && bazel shutdown >/dev/null 2>&1)
    # Bazel's output base of the consumer lives under the user's cache.
    base=$(cat "$tmp/output_base" 2>/dev/null)
    [ -n "$base" ] && [ -z "$keep" ] && chmod -R u+w "$base" 2>/dev/null && rm -rf "$base"
  fi
  [ -z "$keep" ] && rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
pass() { echo "passed release: $*"; }
fail() {
  echo "failed release: $*"
  failures=$((failures + 1))
}
# Runs a step, its output kept in $tmp/NAME.log and shown when it fails.
step() {
  local name=$1 what=$2
  shift 2
  if "$@" >"$tmp/$name.log" 2>&1; then
    pass "$what"
  else
    echo "--- the end of $name.log:"
    tail -n 30 "$tmp/$name.log"
    fail "$what"
    return 1
  fi
}

step make "make release VERSION=$version builds both archives" bash release/make_release.sh "$version" "$tmp/dist" || exit 1
step sums "SHA256SUMS matches both archives" bash -c "cd '$tmp/dist' && sha256sum -c SHA256SUMS"
tar -C "$tmp" -xzf "$tmp/dist/accy-$version.tar.gz" && tar -C "$tmp" -xzf "$tmp/dist/accy-$version-linux-x86_64.tar.gz" ||
  { fail "extracting the archives"; exit 1; }
src="$tmp/accy-$version"
bin="$tmp/accy-$version-linux-x86_64"

# Nothing of the tests ships in the source archive.
if find "$src" -name '*_test.*' -o -path "$src/tests" | grep -q .; then
  fail "the source archive holds tests: $(find "$src" -name '*_test.*' | head -3)"
else
  pass "the source archive holds no tests"
fi
step version "the binary archive's accy and accyd report $version" \
  bash -c "'$bin/bin/accy' --version | grep -qF '$version' && '$bin/bin/accyd' --version | grep -qF '$version'"

# CMake over the binary archive.
step cmake "examples/consumer builds with CMake (find_package(Accy)) against the binary archive" \
  bash -c "cmake -S '$src/examples/consumer' -B '$tmp/cmake' -DCMAKE_PREFIX_PATH='$bin' && cmake --build '$tmp/cmake' -j2" &&
  step cmake_run "the CMake consumer runs: the three tone tests and a saved-program round trip" "$tmp/cmake/consumer"
[ -f "$tmp/cmake_run.log" ] && grep -E '^(ok|FAIL)' "$tmp/cmake_run.log" | sed 's/^/  cmake consumer: /'
step pkgconfig "pkg-config finds accy $version in the binary archive" \
  bash -c "PKG_CONFIG_PATH='$bin/lib/pkgconfig' pkg-config --modversion accy | grep -qx '${version#v}' &&
           PKG_CONFIG_PATH='$bin/lib/pkgconfig' g++ \$(PKG_CONFIG_PATH='$bin/lib/pkgconfig' pkg-config --cflags accy) \
             '$src/examples/consumer/main.cc' -o '$tmp/pc_consumer' \$(PKG_CONFIG_PATH='$bin/lib/pkgconfig' pkg-config --libs accy) &&
           '$tmp/pc_consumer'"

# Bazel over the source archive.
(cd "$src/examples/consumer" && bazel info output_base >"$tmp/output_base" 2>/dev/null)
step bazel "examples/consumer builds with Bazel against the source archive (@accy)" \
  bash -c "cd '$src/examples/consumer' && bazel build //:consumer" &&
  step bazel_run "the Bazel consumer runs: the three tone tests and a saved-program round trip" \
    "$src/examples/consumer/bazel-bin/consumer"
[ -f "$tmp/bazel_run.log" ] && grep -E '^(ok|FAIL)' "$tmp/bazel_run.log" | sed 's/^/  bazel consumer: /'
[ "$failures" -eq 0 ]
