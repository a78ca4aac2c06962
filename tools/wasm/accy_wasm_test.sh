#!/usr/bin/env bash
# `accy run --target=wasm` on programs no test has seen (random programs
# from fresh seeds, printed to reproduce a failure; f32 and f64), run in node
# and through the reference evaluator, the outputs compared with the
# conformance tolerances, and once with --threads=2; and `accy compile
# --target=wasm` writing each form:
# the module (passing wasm-validate), its text (wasm2wat) and the artifact.
set -uo pipefail

ACCY="${ACCY:-$PWD/tools/accy}"
RANDOM_WIRE="${RANDOM_WIRE:-$PWD/tests/random_wire}"
WORK="${TEST_TMPDIR:-$(mktemp -d)}/wasm_run"
rm -rf "$WORK" && mkdir -p "$WORK"

if ! command -v "${ACCY_NODE:-node}" >/dev/null 2>&1; then
  echo "SKIPPED: node not found: nothing to run wasm in"
  exit 0
fi

. "$PWD/tools/test_lib.sh"

# Seeds above the suites' (1 to 200): a different program on each run.
base=$(( (RANDOM << 15 | RANDOM) % 1000000000 + 100000 ))
for run in "$base" "$((base + 1))" "$((base + 2))" "$((base + 3)) f64"; do
  read -r seed dtype <<<"$run"
  dir="$WORK/seed$seed"
  mkdir -p "$dir"
  if ! inputs=$("$RANDOM_WIRE" write "$seed" "$dir" ${dtype:-}); then
    fail "random_wire write $seed ${dtype:-}"
    continue
  fi
  (cd "$dir" && "$ACCY" run program.wire $inputs --target=reference) >"$dir/ref.txt" 2>&1 || fail "seed $seed: reference run: $(cat "$dir/ref.txt")"
  mkdir -p "$dir/ref" && mv "$dir"/out*.npy "$dir/ref/" 2>/dev/null
  (cd "$dir" && "$ACCY" run program.wire $inputs --target=wasm) >"$dir/wasm.txt" 2>&1 || fail "seed $seed: wasm run: $(cat "$dir/wasm.txt")"
  for expected in "$dir"/ref/out*.npy; do
    checks=$((checks + 1))
    got="$dir/$(basename "$expected")"
    if ! "$RANDOM_WIRE" compare "$got" "$expected"; then
      fail "seed $seed: $(basename "$expected") from --target=wasm differs from the evaluator's"
    fi
  done
  echo "seed $seed ${dtype:-f32}: $(grep -c '^output' "$dir/wasm.txt") outputs match the evaluator"
done

# --threads: the module compiled for two workers runs to the same outputs.
dir="$WORK/seed$base"
inputs=$("$RANDOM_WIRE" write "$base" "$dir")
mkdir -p "$dir/threads"
(cd "$dir/threads" && "$ACCY" run ../program.wire $inputs --target=wasm --threads=2) \
  >"$dir/threads.txt" 2>&1 || fail "seed $base: wasm run --threads=2: $(cat "$dir/threads.txt")"
for expected in "$dir"/ref/out*.npy; do
  checks=$((checks + 1))
  "$RANDOM_WIRE" compare "$dir/threads/$(basename "$expected")" "$expected" ||
    fail "seed $base: $(basename "$expected") from --target=wasm --threads=2 differs from the evaluator's"
done

# Each form accy compile writes.
checks=$((checks + 1))
if "$ACCY" compile "$dir/program.wire" --target=wasm --emit=wasm -o "$WORK/p.wasm"; then
  if command -v wasm-validate >/dev/null 2>&1; then
    wasm-validate "$WORK/p.wasm" || fail "the module of --emit=wasm does not validate"
  fi
else
  fail "accy compile --emit=wasm"
fi
checks=$((checks + 1))
if command -v wasm2wat >/dev/null 2>&1; then
  "$ACCY" compile "$dir/program.wire" --target=wasm --emit=wat -o "$WORK/p.wat" || fail "accy compile --emit=wat"
  grep -q '^(module' "$WORK/p.wat" || fail "--emit=wat wrote no module text"
  grep -q '(export "k0"' "$WORK/p.wat" || fail "--emit=wat: no kernel export k0"
fi
checks=$((checks + 1))
"$ACCY" compile "$dir/program.wire" --target=wasm --emit=artifact -o "$WORK/p.json" || fail "accy compile --emit=artifact"
grep -q '"format": "accy-wasm-1"' "$WORK/p.json" || fail "the artifact is not accy-wasm-1"
# A binary module is not written to the terminal.
checks=$((checks + 1))
out=$("$ACCY" compile "$dir/program.wire" --target=wasm --emit=wasm 2>&1)
rc=$?
if [ $rc -eq 0 ] || ! grep -qF "binary module: give -o OUT" <<<"$out"; then
  fail "--emit=wasm without -o exited $rc: $out"
fi

echo "$checks checks, $failures failures"
[ "$failures" -eq 0 ]
