#!/usr/bin/env bash
# Builds and runs every test with Bazel, then prints the count of test cases
# (GoogleTest cases from each target's test.xml; a target without a report
# counts as one failure) as a final line "N passed, N failed".
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
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
