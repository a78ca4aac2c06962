#!/usr/bin/env bash
# `accy compile --emit=artifact` writes a saved program (the executable, the
# compiler's build record, a SHA-256) and `accy run` runs one, under the
# saved-program rule: a build without a record refuses both with
# UnrecordedCompilerBuild (what `bazel test` builds); a stamped build
# (tools/run_tests.sh runs this again with its stamped accy) writes them for
# x86_64, spirv and reference, runs each to the same outputs as the program,
# and refuses damaged files and a --target other than the artifact's.
set -uo pipefail
ACCY="${ACCY:-$PWD/tools/accy}"
RANDOM_WIRE="${RANDOM_WIRE:-$PWD/tests/random_wire}"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/saved_artifacts"
rm -rf "$WORK" && mkdir -p "$WORK"
. "$(dirname "$0")/test_lib.sh"

dir="$WORK/p"
mkdir -p "$dir"
inputs=$("$RANDOM_WIRE" write 7 "$dir") || { echo "FAIL: random_wire write"; exit 1; }
if ! "$ACCY" --version | grep -q "build stamped"; then
  for t in x86_64 spirv reference; do
    expect 1 "UnrecordedCompilerBuild: saving a compiled program needs a record of how the compiler was built" -- \
      "$ACCY" compile "$dir/program.wire" --target=$t --emit=artifact -o "$WORK/$t.accy"
  done
  printf 'ACCYSAVED1\nnot really' >"$WORK/fake.accy"
  expect 1 "UnrecordedCompilerBuild" -- "$ACCY" run "$WORK/fake.accy"
  echo "unstamped build: $checks checks, $failures failed"
  [ "$failures" -eq 0 ]
  exit
fi

(cd "$dir" && "$ACCY" run program.wire $inputs --target=reference) >"$WORK/ref.txt" 2>&1 || fail "reference run: $(cat "$WORK/ref.txt")"
mkdir -p "$dir/ref" && mv "$dir"/out*.npy "$dir/ref/"
for t in x86_64 spirv reference; do
  expect 0 "a saved program" -- "$ACCY" compile "$dir/program.wire" --target=$t --emit=artifact -o "$dir/$t.accy"
  out=$(cd "$dir" && "$ACCY" run "$t.accy" $inputs 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && grep -qE "is not available|no device" <<<"$out"; then
    echo "skipped running the $t artifact: $(head -1 <<<"$out")"
    continue
  fi
  checks=$((checks + 1))
  [ $rc -eq 0 ] || { fail "accy run $t.accy exited $rc: $out"; continue; }
  for expected in "$dir"/ref/out*.npy; do
    checks=$((checks + 1))
    "$RANDOM_WIRE" compare "$dir/$(basename "$expected")" "$expected" ||
      fail "the $t artifact's $(basename "$expected") differs from the evaluator's"
  done
  rm -f "$dir"/out*.npy
  echo "the $t artifact ran and matched"
done
cp "$dir/x86_64.accy" "$WORK/damaged.accy"
printf '\x55' | dd of="$WORK/damaged.accy" bs=1 seek=200 conv=notrunc 2>/dev/null
expect 1 "damaged" -- "$ACCY" run "$WORK/damaged.accy" $inputs
expect 2 "was compiled for target x86_64, not spirv" -- "$ACCY" run "$dir/x86_64.accy" --target=spirv
echo "stamped build: $checks checks, $failures failed"
[ "$failures" -eq 0 ]
