#!/usr/bin/env bash
# The test count of `make test` (tools/test_tally.py) on fixture reports in
# tools/testdata/tally: a crashed binary, a timeout, a skipped case, a failing
# case, an sh_test that failed, an sh_test that said it skipped, a binary that failed at exit after writing a
# clean report, a shard pair, a target that failed to build (its stale report
# ignored), a target with no report, and results of checks run outside Bazel.
set -uo pipefail
cd "${TEST_SRCDIR:-$PWD}/${TEST_WORKSPACE:-__main__}" 2>/dev/null || true
tally=tools/test_tally.py
data=tools/testdata/tally
fails=0
out=$(/usr/bin/python3 "$tally" --testlogs "$data/testlogs" --summary "$data/summary.txt" --extra "$data/extra.txt" \
  //t:crashed //t:failed_at_exit //t:gtest_mixed //t:sh_failed //t:sh_passed //t:sh_skipped //t:sharded //t:timed_out \
  //t:unbuilt //t:missing)
rc=$?

expect_line() {  # the output has this exact line
  if ! grep -qxF -- "$1" <<<"$out"; then
    echo "missing line: $1"
    fails=$((fails + 1))
  fi
}
expect_line 'FAILED //t:crashed: Terminated by signal SIGSEGV'
expect_line "FAILED //t:timed_out: timed out (Bazel's limit for the target's size; its report: exited with error code 142)"
expect_line 'FAILED //t:sh_failed: exited with error code 1'
expect_line 'FAILED //t:gtest_mixed Mixed.Fails: Expected equality of these values: 1 2'
expect_line 'skipped //t:gtest_mixed Mixed.NeedsADevice: no Vulkan device (vkEnumeratePhysicalDevices found none)'
expect_line 'FAILED //t:failed_at_exit: FAILED although its report shows no failed case (it failed on exit)'
expect_line 'FAILED //t:unbuilt: failed to build'
expect_line 'FAILED //t:missing: no test report (status unknown)'
expect_line 'skipped fuzz: clang++ with libFuzzer is not installed'
expect_line 'skipped //t:sh_skipped: Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM)'
expect_line 'FAILED fuzz: wire_fuzz crashed'
# 2 cases of gtest_mixed, sh_passed, 4 shard cases, 2 cases of
# failed_at_exit, one extra; sh_skipped said SKIPPED; the stale report of
# //t:unbuilt counts nothing.
expect_line '10 passed, 8 failed, 3 skipped'
if [ "$(tail -n 1 <<<"$out")" != '10 passed, 8 failed, 3 skipped' ]; then
  echo "the count is not the last line"
  fails=$((fails + 1))
fi
if [ $rc -ne 1 ]; then
  echo "exit status $rc with failures, expected 1"
  fails=$((fails + 1))
fi

# Only passing targets: exit 0.
out=$(/usr/bin/python3 "$tally" --testlogs "$data/testlogs" --summary "$data/summary.txt" //t:sh_passed //t:sharded)
rc=$?
expect_line '5 passed, 0 failed, 0 skipped'
[ $rc -eq 0 ] || { echo "exit status $rc when all passed"; fails=$((fails + 1)); }

# Nothing ran: a failure, not a green run.
out=$(/usr/bin/python3 "$tally" --testlogs "$data/testlogs")
rc=$?
expect_line 'FAILED: no test ran'
expect_line '0 passed, 1 failed, 0 skipped'
[ $rc -eq 1 ] || { echo "exit status $rc when nothing ran"; fails=$((fails + 1)); }

if [ $fails -ne 0 ]; then
  echo "$fails checks failed; the output was:"
  echo "$out"
  exit 1
fi
echo "all tally checks passed"
