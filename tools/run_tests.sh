#!/usr/bin/env bash
# Builds and runs every test with Bazel, then checks outside it (the
# stamped daemon's disk cache and saved programs, a short fuzz run), and counts test cases with
# tools/test_tally.py: each failed case or target by name, each skipped case
# with its reason, and a last line alone "N passed, N failed, N skipped".
# Extra arguments go to `bazel test` (e.g. --config=asan).
set -uo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
extra="$work/extra"   # "passed WHAT" | "failed WHAT" | "skipped WHAT: WHY", one a line
: >"$extra"

# Bazel's summary names every target with its status; the tally reads it.
# --keep_going: a target that fails to build is counted (FAILED TO BUILD)
# while every other test still runs.
bazel test --keep_going //... "$@" 2>&1 | tee "$work/summary"
status=${PIPESTATUS[0]}
targets=$(bazel query 'tests(//...)' 2>/dev/null)
testlogs=$(bazel info bazel-testlogs "$@" 2>/dev/null)
case $status in
  0 | 3) ;;  # 3: built, some tests failed (the tally names them)
  *) echo "failed bazel test: exit status $status (a build or command error; see above)" >>"$extra" ;;
esac
if [ -z "$targets" ]; then
  echo "failed bazel query 'tests(//...)' found no test targets" >>"$extra"
fi

# The layering rules of docs/LAYERS.md (bazel query), one line each.
tools/layers_check.sh >>"$extra" 2>&1 || echo "failed layers: tools/layers_check.sh exited $?" >>"$extra"

# The daemon's disk cache and saved programs need a stamped build: build
# one, keep copies (a later unstamped build replaces bazel-bin's), and run
# the daemon's restart test and the saved-program cases against them.
stamped_dir="$work/stamped"
mkdir -p "$stamped_dir"
if bazel build --stamp --workspace_status_command=tools/build_record_status.sh //server:accyd //tests:saved_program_test \
     //tools:accy //tests:random_wire >"$stamped_dir/build.log" 2>&1 &&
   cp bazel-bin/server/accyd "$stamped_dir/accyd" &&
   cp bazel-bin/tests/saved_program_test "$stamped_dir/saved_program_test" &&
   cp bazel-bin/tools/accy "$stamped_dir/accy" && cp bazel-bin/tests/random_wire "$stamped_dir/random_wire" &&
   bazel build "$@" //server:accyd //tests:accyd_e2e_test >>"$stamped_dir/build.log" 2>&1; then
  # The restart cases with the stamped daemon (its disk cache on), each
  # counted by name.
  ACCYD_STAMPED_BINARY="$stamped_dir/accyd" TEST_SRCDIR="$PWD/bazel-bin/tests/accyd_e2e_test.runfiles" \
    ./bazel-bin/tests/accyd_e2e_test --gtest_filter='*RestartWithAWarmDiskCache*:*TheDaemonKilledAndRestarted*' \
    >"$stamped_dir/log" 2>&1
  for name in RestartWithAWarmDiskCacheAndACorruptedEntry TheDaemonKilledAndRestartedClientsReconnect; do
    if grep -q "^\[       OK \] Accyd.$name " "$stamped_dir/log"; then
      echo "passed stamped accyd: $name" >>"$extra"
    else
      echo "stamped accyd: the end of the restart tests' log:"
      tail -n 40 "$stamped_dir/log"
      echo "failed stamped accyd: $name" >>"$extra"
    fi
  done
  grep '^restart:' "$stamped_dir/log" || true
  # Saved programs round-trip only in a stamped build: its cases, each
  # counted by name.
  "$stamped_dir/saved_program_test" --gtest_filter='StampedSavedPrograms.*' >"$stamped_dir/saved.log" 2>&1
  ran=0
  while read -r line; do
    case $line in
      "[       OK ] "*) echo "passed stamped saved programs: $(echo "$line" | awk '{print $4}')" >>"$extra"; ran=$((ran + 1)) ;;
      "[  FAILED  ] "*" ms)") echo "failed stamped saved programs: $(echo "$line" | awk '{print $4}')" >>"$extra"; ran=$((ran + 1)) ;;
    esac
  done <"$stamped_dir/saved.log"
  if [ "$ran" -eq 0 ]; then
    tail -n 40 "$stamped_dir/saved.log"
    echo "failed stamped saved programs: no case ran" >>"$extra"
  fi
  # accy compile --emit=artifact and accy run of the saved programs.
  if ACCY="$stamped_dir/accy" RANDOM_WIRE="$stamped_dir/random_wire" TEST_TMPDIR="$stamped_dir" \
     tools/saved_artifact_test.sh >"$stamped_dir/artifacts.log" 2>&1; then
    echo "passed stamped saved artifacts: accy compile --emit=artifact and accy run (x86_64, spirv, reference)" >>"$extra"
  else
    tail -n 40 "$stamped_dir/artifacts.log"
    echo "failed stamped saved artifacts: accy compile --emit=artifact and accy run" >>"$extra"
  fi
else
  tail -n 40 "$stamped_dir/build.log"
  echo "failed stamped accyd: the stamped build failed" >>"$extra"
fi

# A short run of the wire fuzzer (decode, compile, run; tools/fuzz/) when
# clang++ with libFuzzer is installed. The seed is fixed so a failure
# reproduces; docs/FUZZING.md has the long runs. The fuzzer's build
# directory belongs to this checkout: its generated Makefile names the
# checkout's path.
export FUZZ_BUILD_DIR="${TMPDIR:-/tmp}/accy-fuzz-$(pwd | sha256sum | cut -c1-12)"
if tools/fuzz/build_fuzzer.sh --check; then
  if tools/fuzz/run_fuzzer.sh 20000 -seed=1 >"$work/fuzz" 2>&1; then
    echo "passed fuzz: 20000 runs of wire_fuzz, no crash, leak or timeout" >>"$extra"
  else
    echo "fuzz: the end of wire_fuzz's log:"
    tail -n 60 "$work/fuzz"
    # The failed line names what went wrong and carries the reproducer
    # (at most 4 KiB: -max_len), so the count alone is enough to reproduce it:
    # base64 -d >crash; $FUZZ_BUILD_DIR/wire_fuzz crash.
    why=$(grep -m1 -E '^(==[0-9]+==ERROR|ERROR: libFuzzer|wire_fuzz: |SUMMARY: )' "$work/fuzz" | cut -c1-300)
    crash=$(grep -m1 -oE "Test unit written to [^ ]+" "$work/fuzz" | sed 's/^Test unit written to //')
    reproducer=""
    [ -n "$crash" ] && [ -f "$crash" ] && reproducer=", reproducer (base64) $(base64 -w0 "$crash")"
    echo "failed fuzz: wire_fuzz (20000 runs, -seed=1): ${why:-no error line in its log}$reproducer" >>"$extra"
  fi
else
  echo "skipped fuzz: wire_fuzz: clang++ with libFuzzer is not installed (tools/setup.sh installs it)" >>"$extra"
fi

# The release check (release/check_release.sh): both archives built,
# extracted outside the workspace, the consumer built against each (Bazel,
# CMake, pkg-config) and run. Each of its checks is counted by name. The
# sanitizer runs (extra arguments) check the library, not its packaging.
if [ $# -eq 0 ]; then
  release/check_release.sh >"$work/release" 2>&1
  grep -E '^(passed|failed) release: ' "$work/release" >>"$extra"
  if ! grep -qE '^passed release: ' "$work/release" || grep -qE '^failed release: ' "$work/release"; then
    echo "release check: its log:"
    tail -n 60 "$work/release"
    grep -qE '^(passed|failed) release: ' "$work/release" || echo "failed release: the check reported nothing" >>"$extra"
  fi
else
  echo "skipped release: the release check runs in the plain make test (this run has: $*)" >>"$extra"
fi

echo
echo "Test count (tools/test_tally.py): failures and skips with their reasons"
# shellcheck disable=SC2086
/usr/bin/python3 tools/test_tally.py --testlogs "$testlogs" --summary "$work/summary" --extra "$extra" $targets
