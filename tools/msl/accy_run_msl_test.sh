#!/usr/bin/env bash
# `accy run --target=msl` on programs no test has seen: random programs
# drawn from fresh seeds (printed, to reproduce a failure), each run through
# the MSL shim and through the reference evaluator, the outputs compared
# with the conformance tolerances; and a program with f64 refused by name.
set -uo pipefail

ACCY="${ACCY:-$PWD/tools/accy}"
RANDOM_WIRE="${RANDOM_WIRE:-$PWD/tests/random_wire}"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/msl_run"
rm -rf "$WORK" && mkdir -p "$WORK"

if ! command -v "${ACCY_CLANG:-clang++}" >/dev/null 2>&1; then
  echo "SKIPPED: clang++ not found: nothing to compile the MSL with"
  exit 0
fi

. "$PWD/tools/test_lib.sh"

# Seeds above the suites' (1 to 200): a different program on each run.
base=$(( (RANDOM << 15 | RANDOM) % 1000000000 + 100000 ))
for seed in $base $((base + 1)) $((base + 2)); do
  dir="$WORK/seed$seed"
  mkdir -p "$dir"
  if ! inputs=$("$RANDOM_WIRE" write "$seed" "$dir"); then
    fail "random_wire write $seed"
    continue
  fi
  (cd "$dir" && "$ACCY" run program.wire $inputs --target=reference) >"$dir/ref.txt" 2>&1 || fail "seed $seed: reference run: $(cat "$dir/ref.txt")"
  mkdir -p "$dir/ref" && mv "$dir"/out*.npy "$dir/ref/" 2>/dev/null
  (cd "$dir" && "$ACCY" run program.wire $inputs --target=msl) >"$dir/msl.txt" 2>&1 || fail "seed $seed: msl run: $(cat "$dir/msl.txt")"
  for expected in "$dir"/ref/out*.npy; do
    checks=$((checks + 1))
    got="$dir/$(basename "$expected")"
    if ! "$RANDOM_WIRE" compare "$got" "$expected"; then
      fail "seed $seed: $(basename "$expected") from --target=msl differs from the evaluator's"
    fi
  done
  echo "seed $seed: $(grep -c '^output' "$dir/msl.txt") outputs match the evaluator"
done

# Metal has no f64: the run fails (exit 1) naming the dtype.
dir="$WORK/f64"
mkdir -p "$dir"
inputs=$("$RANDOM_WIRE" write 7 "$dir" f64)
checks=$((checks + 1))
out=$(cd "$dir" && "$ACCY" run program.wire $inputs --target=msl 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! grep -qF "f64 values need a target with 64-bit floats (Metal has none)" <<<"$out"; then
  fail "an f64 program on --target=msl exited $rc: $out"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
