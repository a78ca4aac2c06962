#!/usr/bin/env bash
# Builds and runs every test with Bazel, then prints the count of test cases
# (GoogleTest cases from each target's test.xml; a target without a report
# counts as one failure), plus one case for a short fuzz run of the wire
# decoder and compiler when clang with libFuzzer is installed, as a final
# line "N passed, N failed".
# Extra arguments go to `bazel test` (e.g. --config=asan).
set -uo pipefail
cd "$(dirname "$0")/.."

bazel test //... "$@"
status=$?

passed=0
failed=0
testlogs=$(bazel info bazel-testlogs "$@" 2>/dev/null)
for target in $(bazel query 'tests(//...)' 2>/dev/null); do
  path=${target#//}
  path=${path/://}
  xml="$testlogs/$path/test.xml"
  if [ ! -f "$xml" ]; then
    echo "no test report for $target"
    failed=$((failed + 1))
    continue
  fi
  # The first <testsuites ...> element carries the totals.
  header=$(grep -m1 -o '<testsuites[^>]*>' "$xml" || true)
  if [ -z "$header" ]; then
    header=$(grep -m1 -o '<testsuite [^>]*>' "$xml" || true)
  fi
  tests=$(sed -n 's/.* tests="\([0-9]*\)".*/\1/p' <<<"$header")
  failures=$(sed -n 's/.* failures="\([0-9]*\)".*/\1/p' <<<"$header")
  errors=$(sed -n 's/.* errors="\([0-9]*\)".*/\1/p' <<<"$header")
  tests=${tests:-0}
  bad=$(( ${failures:-0} + ${errors:-0} ))
  if [ "$tests" -eq 0 ]; then
    # A target whose test.xml Bazel wrote itself (not GoogleTest): one case.
    if grep -q '<failure' "$xml"; then bad=1; else bad=0; fi
    tests=1
  fi
  passed=$((passed + tests - bad))
  failed=$((failed + bad))
done
if [ $status -ne 0 ] && [ $failed -eq 0 ]; then
  failed=1  # a build failure that left no report behind
fi

# The daemon's disk cache needs a stamped build: build one, keep a copy (a
# later unstamped build replaces bazel-bin's), and run the restart test
# against it: one case, passed or failed.
stamped_dir=$(mktemp -d)
if bazel build --stamp --workspace_status_command=tools/build_record_status.sh //server:accyd >/dev/null 2>&1 &&
   cp bazel-bin/server/accyd "$stamped_dir/accyd" &&
   bazel build "$@" //server:accyd //tests:accyd_e2e_test >/dev/null 2>&1; then
  if ACCYD_STAMPED_BINARY="$stamped_dir/accyd" TEST_SRCDIR="$PWD/bazel-bin/tests/accyd_e2e_test.runfiles" \
     ./bazel-bin/tests/accyd_e2e_test --gtest_filter='*RestartWithAWarmDiskCache*' >"$stamped_dir/log" 2>&1 &&
     grep -q '^\[       OK \]' "$stamped_dir/log"; then
    echo "stamped accyd: restart with a warm disk cache and a corrupted entry: ok"
    passed=$((passed + 1))
  else
    echo "stamped accyd: restart test FAILED:"
    tail -n 40 "$stamped_dir/log"
    failed=$((failed + 1))
  fi
else
  echo "stamped accyd: build FAILED"
  failed=$((failed + 1))
fi
rm -rf "$stamped_dir"

# A short run of the wire fuzzer (decode, compile, run; tools/fuzz/) when
# clang++ with libFuzzer is installed: one case, passed or failed. The seed
# is fixed so a failure reproduces; docs/FUZZING.md has the long runs.
# The fuzzer's build directory belongs to this checkout: its generated
# Makefile names the checkout's path.
export FUZZ_BUILD_DIR="${TMPDIR:-/tmp}/accy-fuzz-$(pwd | sha256sum | cut -c1-12)"
if tools/fuzz/build_fuzzer.sh --check; then
  fuzz_log=$(mktemp)
  if tools/fuzz/run_fuzzer.sh 20000 -seed=1 >"$fuzz_log" 2>&1; then
    echo "fuzz: 20000 runs of wire_fuzz, no crash, leak or timeout"
    passed=$((passed + 1))
  else
    echo "fuzz: wire_fuzz FAILED; the end of its log:"
    tail -n 60 "$fuzz_log"
    failed=$((failed + 1))
  fi
  rm -f "$fuzz_log"
else
  echo "fuzz: skipped (clang++ with libFuzzer is not installed; tools/setup.sh installs it)"
fi
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
