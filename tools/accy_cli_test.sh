#!/usr/bin/env bash
# End-to-end tests of the accy tool on the checked-in tone programs:
# inspect, compile (choir, asm, artifact), run with .npy files, and the
# exit status 2 with a clear message for every bad invocation or file.
set -uo pipefail

# Runfiles: Bazel starts tests in the workspace's runfiles directory.
ACCY="${ACCY:-$PWD/tools/accy}"
WIRE="$PWD/examples/tone/mismatch.wire"
WIRE8="$PWD/examples/tone/mismatch8.wire"
VERSION_FILE="$PWD/VERSION"
PY=/usr/bin/python3
WORK="${TEST_TMPDIR:-$(mktemp -d)}/cli"
rm -rf "$WORK" && mkdir -p "$WORK"

. "$PWD/tools/test_lib.sh"

# write_npy PATH DESCR SHAPE VALUES...: a NumPy v1.0 file; SHAPE is a Python
# tuple literal such as "()" or "(16,)". Uses only the struct module.
write_npy() {
  "$PY" - "$@" <<'EOF'
import struct, sys
path, descr, shape = sys.argv[1], sys.argv[2], sys.argv[3]
values = sys.argv[4:]
fmt = {"<f4": "<f", "<f8": "<d", "<i4": "<i", "<i8": "<q", "|b1": "<?"}[descr]
conv = float if descr[1] == "f" else int
data = b"".join(struct.pack(fmt, conv(v)) for v in values)
header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
pad = (64 - (10 + len(header) + 1) % 64) % 64
header = header + " " * pad + "\n"
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data)
EOF
}

# read_npy_f32 PATH: prints the float32 values of a v1.0 .npy file, one a line.
read_npy_f32() {
  "$PY" - "$1" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:6] == b"\x93NUMPY", "bad magic"
n = struct.unpack("<H", b[8:10])[0]
header = b[10:10 + n].decode("latin1")
assert "'descr': '<f4'" in header, header
data = b[10 + n:]
for (v,) in struct.iter_unpack("<f", data):
    print("%.6f" % v)
EOF
}

# near A B TOL: true when |A - B| <= TOL.
near() {
  "$PY" -c "import sys; sys.exit(0 if abs(float('$1') - float('$2')) <= float('$3') else 1)"
}

# --- help and usage -------------------------------------------------------
expect 0 "usage: accy" -- "$ACCY" --help
expect 0 "usage: accy" -- "$ACCY" help
expect 2 "usage: accy" -- "$ACCY"
expect 2 "unknown command 'frobnicate'" -- "$ACCY" frobnicate "$WIRE"
expect 2 "unknown option '--bogus'" -- "$ACCY" inspect "$WIRE" --bogus
expect 2 "no FILE given" -- "$ACCY" inspect
expect 2 "one FILE expected" -- "$ACCY" inspect "$WIRE" "$WIRE"
expect 2 "--dot takes no value" -- "$ACCY" inspect "$WIRE" --dot=yes

# --- inspect ----------------------------------------------------------------
expect 0 "sum" -- "$ACCY" inspect "$WIRE"
expect 0 "program mismatch" -- "$ACCY" inspect "$WIRE"
expect 0 "digraph" -- "$ACCY" inspect "$WIRE" --dot
expect 0 "guess=8" -- "$ACCY" inspect "$WIRE8"

# --- compile ----------------------------------------------------------------
expect 0 "reduce" -- "$ACCY" compile "$WIRE" --target=x86_64 --emit=choir
expect 0 "ret" -- "$ACCY" compile "$WIRE" --target=x86_64 --emit=asm
expect 0 "" -- "$ACCY" compile "$WIRE" --emit asm -o "$WORK/tone.s"
checks=$((checks + 1))
grep -qx "ret" "$WORK/tone.s" 2>/dev/null || fail "-o tone.s has no line 'ret'"
# --emit=artifact writes a saved program, which needs a stamped build:
# tools/saved_artifact_test.sh checks both kinds of build.
expect 2 "target msl does not write --emit=asm (it writes msl, artifact)" -- "$ACCY" compile "$WIRE" --target=msl --emit=asm
expect 2 "target cuda is not available in this build (available: x86_64, spirv, ptx, wgsl, msl, wasm, reference)" -- "$ACCY" compile "$WIRE" --target cuda --emit=asm
# Every target compiles through its registry entry (reference as x86_64):
# --emit, --mode and the device flags are checked against it, refused with
# the entry's one message.
expect 2 "target reference does not write --emit=asm (it writes artifact)" -- "$ACCY" compile "$WIRE" --target=reference --emit=asm -o "$WORK/x"
expect 1 "target reference has no tf32 mode" -- "$ACCY" compile "$WIRE" --target=reference --mode=tf32 --emit=artifact -o "$WORK/x"
# WGSL: the modules as text, and the JSON artifact a page runs (docs/WEB.md).
expect 0 "@compute @workgroup_size(" -- "$ACCY" compile "$WIRE" --target=wgsl --emit=wgsl
expect 0 "(wgsl, webgpu, " -- "$ACCY" compile "$WIRE" --target=wgsl --emit=artifact -o "$WORK/tone.json"
expect 0 "accy-wgsl-1" -- cat "$WORK/tone.json"
expect 2 "target wgsl does not write --emit=asm (it writes wgsl, artifact)" -- "$ACCY" compile "$WIRE" --target=wgsl --emit=asm
expect 0 "kernel void accy_kernel(" -- "$ACCY" compile "$WIRE" --target=msl --emit=msl
expect 0 "(msl, metal, " -- "$ACCY" compile "$WIRE" --target=msl --emit=artifact -o "$WORK/tone_msl.json"
expect 0 "accy-msl-1" -- cat "$WORK/tone_msl.json"
expect 0 "(msl, metal-fast, " -- "$ACCY" compile "$WIRE" --target=msl --mode=fast --emit=artifact -o "$WORK/fast_msl.json"
expect 0 '"math_mode": "fast"' -- cat "$WORK/fast_msl.json"
expect 2 "target x86_64 does not write --emit=llvm (it writes choir, asm, artifact)" -- "$ACCY" compile "$WIRE" --emit=llvm
expect 2 "--emit=choir|asm|artifact is required" -- "$ACCY" compile "$WIRE"
expect 2 "--emit=spirv|artifact is required (or --dump-after=PASS)" -- "$ACCY" compile "$WIRE" --target=spirv
expect 2 "--emit=artifact needs -o" -- "$ACCY" compile "$WIRE" --emit=artifact
expect 2 "--emit needs a value" -- "$ACCY" compile "$WIRE" --emit
expect 2 "--threads" -- "$ACCY" compile "$WIRE" --emit=asm --threads=many

# --- bad program files ------------------------------------------------------
expect 2 "missing.wire: cannot open: No such file or directory" -- "$ACCY" inspect "$WORK/missing.wire"
expect 2 "not a regular file" -- "$ACCY" inspect "$WORK"
printf 'ACC' >"$WORK/short.wire"
expect 2 "wire: need at least 8 bytes of header" -- "$ACCY" inspect "$WORK/short.wire"
printf 'NOPE\001\000\000\000' >"$WORK/magic.wire"
expect 2 "missing the magic" -- "$ACCY" compile "$WORK/magic.wire" --emit=asm
printf 'ACCY\007\000\000\000' >"$WORK/version.wire"
expect 2 "version 7.0" -- "$ACCY" run "$WORK/version.wire"
head -c 60 "$WIRE" >"$WORK/truncated.wire"
expect 2 "truncated.wire: InvalidProgram: wire: the program message does not parse" -- "$ACCY" inspect "$WORK/truncated.wire"

# --- run --------------------------------------------------------------------
write_npy "$WORK/freq.npy" "<f4" "()" 2.5
times=()
samples=()
for i in $(seq 0 15); do
  t=$("$PY" -c "print($i * 0.25)")
  times+=("$t")
  samples+=("$("$PY" -c "import math, struct; t = struct.unpack('<f', struct.pack('<f', $t))[0]; print(repr(math.sin(struct.unpack('<f', struct.pack('<f', 3.0 * t))[0])))")")
done
write_npy "$WORK/time.npy" "<f4" "(16,)" "${times[@]}"
write_npy "$WORK/sample.npy" "<f4" "(16,)" "${samples[@]}"

expect 0 "output 0: f32[] -> $WORK/m.npy" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" \
  --input 1="$WORK/time.npy" --input=2="$WORK/sample.npy" --output 0="$WORK/m.npy" --threads 1
checks=$((checks + 1))
value=$(read_npy_f32 "$WORK/m.npy" 2>&1)
if ! near "$value" 8.656 0.001; then fail "mismatch for frequency 2.5 is '$value', expected about 8.656"; fi

# Eight guesses; the output goes to out0.npy in the current directory.
write_npy "$WORK/guesses.npy" "<f4" "(8,)" 2.5 2.75 3 3.25 1 2 4 5
(
  cd "$WORK" && "$ACCY" run "$WIRE8" --input 0=guesses.npy --input 1=time.npy --input 2=sample.npy
) >"$WORK/run8.txt" 2>&1
checks=$((checks + 1))
if ! grep -qF "output 0: f32[guess=8] -> out0.npy" "$WORK/run8.txt"; then
  fail "run of mismatch8.wire:"
  cat "$WORK/run8.txt"
fi
values=($(read_npy_f32 "$WORK/out0.npy" 2>&1))
checks=$((checks + 1))
if [ "${#values[@]}" -ne 8 ]; then
  fail "out0.npy holds ${#values[@]} values: ${values[*]}"
else
  near "${values[0]}" 8.656 0.001 || fail "guess 2.5 gives ${values[0]}, expected about 8.656"
  near "${values[2]}" 0 0.0001 || fail "guess 3 gives ${values[2]}, expected 0"
fi

# Every target that can run here runs from the same command (--target): the
# reference evaluator, Vulkan (lavapipe), WebGPU in headless Chromium, MSL
# through the shim (clang++ on the CPU), WebAssembly in node. A
# missing device is reported by the tool and skipped here, saying so.
for t in reference spirv wgsl msl wasm; do
  (
    cd "$WORK" && "$ACCY" run "$WIRE8" --target=$t --input 0=guesses.npy --input 1=time.npy --input 2=sample.npy \
      --output 0=out_$t.npy
  ) >"$WORK/run_$t.txt" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && grep -qE "is not available|no Chromium|clang\+\+ not found|no node" "$WORK/run_$t.txt"; then
    echo "skipped: accy run --target=$t: $(head -1 "$WORK/run_$t.txt")"
    continue
  fi
  checks=$((checks + 1))
  if [ $rc -ne 0 ]; then
    fail "accy run --target=$t exited $rc:"
    cat "$WORK/run_$t.txt"
    continue
  fi
  values=($(read_npy_f32 "$WORK/out_$t.npy" 2>&1))
  near "${values[0]}" 8.656 0.001 || fail "--target=$t: guess 2.5 gives ${values[0]}, expected about 8.656"
  near "${values[2]}" 0 0.0001 || fail "--target=$t: guess 3 gives ${values[2]}, expected 0"
done
expect 2 "--threads is for --target=x86_64" -- "$ACCY" run "$WIRE8" --target=spirv --threads=2 --input 0="$WORK/guesses.npy"
expect 1 "target wgsl has no tf32 mode" -- "$ACCY" run "$WIRE8" --target=wgsl --mode=tf32 --input 0="$WORK/guesses.npy"

# Programs with loops (tools/testdata/program_wires.cc): rnn (an embedding
# take, a windowed product, a 62-step scan with a captured weight matrix)
# and nested (a whileLoop whose body runs a scan that captures an outer
# value) run on every target through the one compile path and agree with
# the reference evaluator's outputs.
"$PWD/tools/program_wires" "$WORK" >"$WORK/program_wires.txt" 2>&1 || {
  fail "program_wires could not write the programs:"
  cat "$WORK/program_wires.txt"
}
tokens=""
for i in $(seq 0 63); do tokens="$tokens $(( (i * 7 + 3) % 16 ))"; done
table=""
for i in $(seq 0 127); do table="$table $("$PY" -c "import math; print(math.sin($i * 0.37))")"; done
weights=""
for i in $(seq 0 63); do weights="$weights $("$PY" -c "import math; print(0.4 * math.cos($i * 0.91))")"; done
write_npy "$WORK/tokens.npy" "<i4" "(64,)" $tokens
write_npy "$WORK/table.npy" "<f4" "(16, 8)" $table
write_npy "$WORK/filter.npy" "<f4" "(3,)" 0.25 0.5 0.25
write_npy "$WORK/weights.npy" "<f4" "(8, 8)" $weights
write_npy "$WORK/nx.npy" "<f4" "(4,)" 1 2 3 -4
write_npy "$WORK/nc.npy" "<f4" "()" 0.75
run_loops() {  # TARGET: runs both programs, outputs named *_TARGET.npy
  (
    cd "$WORK" && "$ACCY" run rnn.wire --target=$1 --input 0=tokens.npy --input 1=table.npy --input 2=filter.npy \
      --input 3=weights.npy --output 0=rnn_h_$1.npy --output 1=rnn_ys_$1.npy &&
      "$ACCY" run nested.wire --target=$1 --input 0=nx.npy --input 1=nc.npy --output 0=nested_$1.npy
  ) >"$WORK/loops_$1.txt" 2>&1
}
# max_diff A B: the largest |a - b| over two f32 .npy files of one size.
max_diff() {
  paste <(read_npy_f32 "$1") <(read_npy_f32 "$2") |
    "$PY" -c "import sys; print(max([abs(float(a) - float(b)) for a, b in (l.split() for l in sys.stdin)] or [1e9]))"
}
checks=$((checks + 1))
if ! run_loops reference; then
  fail "accy run --target=reference of the loop programs:"
  cat "$WORK/loops_reference.txt"
fi
for t in x86_64 spirv wgsl wasm msl ptx; do
  run_loops $t
  rc=$?
  if [ $rc -ne 0 ] && grep -qE "is not available|no Chromium|clang\+\+ not found|no node" "$WORK/loops_$t.txt"; then
    echo "skipped: accy run --target=$t of the loop programs: $(head -1 "$WORK/loops_$t.txt")"
    continue
  fi
  checks=$((checks + 1))
  if [ $rc -ne 0 ]; then
    fail "accy run --target=$t of the loop programs exited $rc:"
    cat "$WORK/loops_$t.txt"
    continue
  fi
  for o in rnn_h rnn_ys nested; do
    d=$(max_diff "$WORK/${o}_reference.npy" "$WORK/${o}_$t.npy")
    near "$d" 0 0.00001 || fail "--target=$t: $o differs from the reference evaluator's by $d"
  done
done
# accy compile writes every stage of a program with loops, in each form.
expect 0 "# stage 2 of 2: rnn_scan1" -- "$ACCY" compile "$WORK/rnn.wire" --target=x86_64 --emit=asm
expect 0 "# stage 3 of 4: while_loop body_scan0" -- "$ACCY" compile "$WORK/nested.wire" --target=x86_64 --emit=choir
expect 0 "// stage 2 of 2: scan body_stage0" -- "$ACCY" compile "$WORK/rnn.wire" --target=wgsl --emit=wgsl
expect 0 "// stage 2 of 2: scan body_stage0" -- "$ACCY" compile "$WORK/rnn.wire" --target=msl --emit=msl
expect 0 ".visible .entry" -- "$ACCY" compile "$WORK/rnn.wire" --target=ptx --emit=ptx
expect 0 ";; stage 2 of 2: rnn_scan1" -- "$ACCY" compile "$WORK/rnn.wire" --target=wasm --emit=wat
expect 0 "wrote $WORK/rnn.stage1.wasm: stage 2 of 2" -- "$ACCY" compile "$WORK/rnn.wire" --target=wasm --emit=wasm -o "$WORK/rnn.wasm"
expect 0 "wrote $WORK/rnn_spv.stage1.0.spv: kernel" -- "$ACCY" compile "$WORK/rnn.wire" --target=spirv --emit=spirv -o "$WORK/rnn_spv"
expect 0 "# stage 2 of 2: scan body_stage0" -- "$ACCY" compile "$WORK/rnn.wire" --target=spirv --dump-after=fuse
expect 0 "a plan of wgsl stages" -- "$ACCY" compile "$WORK/rnn.wire" --target=wgsl --emit=artifact -o "$WORK/rnn_plan.json"
expect 1 "rnn has loops, and a saved x86_64 program holds one module" -- "$ACCY" compile "$WORK/rnn.wire" --target=x86_64 --emit=artifact -o "$WORK/rnn.saved"

# Examples' programs as wire files (tools/testdata/program_wires.cc): the
# N-body example (64 bodies, 200 leapfrog steps in f64, one scan), the
# digits example's first epoch and the sampler, run by `accy run`, give the
# outputs the example computes in process from the same inputs.
# npy_max_diff A B: the largest |a - b| / max(1, |b|) over two .npy files of
# one dtype (f32 or f64) and size.
npy_max_diff() {
  "$PY" - "$1" "$2" <<'EOF'
import struct, sys
def values(path):
    b = open(path, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    header = b[10:10 + n].decode("latin1")
    fmt = "<d" if "'<f8'" in header else "<f"
    return [v for (v,) in struct.iter_unpack(fmt, b[10 + n:])]
a, b = values(sys.argv[1]), values(sys.argv[2])
print(max([abs(x - y) / max(1.0, abs(y)) for x, y in zip(a, b)] or [0.0]) if len(a) == len(b) else 1e9)
EOF
}
# run_example NAME INPUTS OUTPUTS TOLERANCE TARGET...: `accy run` of the
# example NAME.wire with NAME_in<k>.npy on each target gives
# NAME_expected<k>.npy (within TOLERANCE, relative).
run_example() {
  local name=$1 inputs=$2 outputs=$3 tol=$4 t k d args
  shift 4
  for t in "$@"; do
    args=()
    for ((k = 0; k < inputs; k++)); do args+=(--input "$k=${name}_in$k.npy"); done
    for ((k = 0; k < outputs; k++)); do args+=(--output "$k=${name}_$t.$k.npy"); done
    (cd "$WORK" && "$ACCY" run "$name.wire" --target=$t "${args[@]}") >"$WORK/${name}_$t.txt" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && grep -qE "is not available" "$WORK/${name}_$t.txt"; then
      echo "skipped: accy run --target=$t of the $name example: $(head -1 "$WORK/${name}_$t.txt")"
      continue
    fi
    checks=$((checks + 1))
    if [ $rc -ne 0 ]; then
      fail "accy run --target=$t of the $name example exited $rc:"
      cat "$WORK/${name}_$t.txt"
      continue
    fi
    for ((k = 0; k < outputs; k++)); do
      d=$(npy_max_diff "$WORK/${name}_$t.$k.npy" "$WORK/${name}_expected$k.npy")
      near "$d" 0 "$tol" || fail "--target=$t: the $name example's output $k differs from the example's by $d"
    done
  done
}
if [ -f "$WORK/nbody_expected4.npy" ]; then
  run_example nbody 3 5 1e-9 x86_64 reference spirv
else
  checks=$((checks + 1))
  fail "program_wires wrote no N-body example (see its failure above)"
fi
# The digits example's first epoch (45 SGD steps on scikit-learn's digits;
# the weights after it and each step's loss), where the datasets are there.
if [ -f "$WORK/digits_expected4.npy" ]; then
  run_example digits 7 5 1e-5 x86_64 spirv
else
  echo "skipped: accy run of the digits example: $(grep -h 'no digits example' "$WORK/program_wires.txt" | head -1)"
fi
# The sampler example, shortened (2 chains of 20 + 50 draws; the draws and
# their acceptances): every accept decision must come out the same.
if [ -f "$WORK/hmc_expected1.npy" ]; then
  run_example hmc 2 2 1e-9 x86_64 spirv wasm
else
  echo "skipped: accy run of the sampler example: $(grep -h 'no sampler example' "$WORK/program_wires.txt" | head -1)"
fi

# The version: the file VERSION, in one place.
expect 0 "accy $(tr -d ' \n' <"$VERSION_FILE") (build " -- "$ACCY" --version

# --- bad runs and bad .npy files -----------------------------------------------
ok_inputs=(--input 1="$WORK/time.npy" --input 2="$WORK/sample.npy")
expect 2 "input 0 (f32[]) has no file" -- "$ACCY" run "$WIRE" "${ok_inputs[@]}"
expect 2 "--input 3: the program has 3 inputs" -- "$ACCY" run "$WIRE" --input 3="$WORK/freq.npy" "${ok_inputs[@]}"
expect 2 "--input 1 given more than once" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" "${ok_inputs[@]}" \
  --input 1="$WORK/time.npy"
expect 2 "is not N=FILE.npy" -- "$ACCY" run "$WIRE" --input "$WORK/freq.npy"
expect 2 "--output 1: the program has 1 output" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" \
  "${ok_inputs[@]}" --output 1="$WORK/x.npy"
expect 2 "nothere.npy: cannot open" -- "$ACCY" run "$WIRE" --input 0="$WORK/nothere.npy" "${ok_inputs[@]}"

head -c 100 "$WORK/time.npy" >"$WORK/trunc.npy"
expect 2 "trunc.npy: truncated" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" --input 1="$WORK/trunc.npy" \
  --input 2="$WORK/sample.npy"
printf 'hello, not numpy' >"$WORK/magic.npy"
expect 2 "magic.npy: not a .npy file" -- "$ACCY" run "$WIRE" --input 0="$WORK/magic.npy" "${ok_inputs[@]}"
write_npy "$WORK/shape.npy" "<f4" "(15,)" $(seq 1 15)
expect 2 "shape.npy: shape (15,) does not match input 1 f32[point=16]" -- "$ACCY" run "$WIRE" \
  --input 0="$WORK/freq.npy" --input 1="$WORK/shape.npy" --input 2="$WORK/sample.npy"
write_npy "$WORK/vector.npy" "<f4" "(1,)" 2.5
expect 2 "vector.npy: shape (1,) does not match input 0 f32[]" -- "$ACCY" run "$WIRE" \
  --input 0="$WORK/vector.npy" "${ok_inputs[@]}"
write_npy "$WORK/f64.npy" "<f8" "()" 2.5
expect 2 "f64.npy: holds '<f8' but input 0 is f32[]" -- "$ACCY" run "$WIRE" --input 0="$WORK/f64.npy" "${ok_inputs[@]}"
"$PY" - "$WORK/fortran.npy" <<'EOF'
import struct, sys
h = "{'descr': '<f4', 'fortran_order': True, 'shape': (16,), }"
h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
open(sys.argv[1], "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + b"\0" * 64)
EOF
expect 2 "fortran.npy: Fortran-order" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" \
  --input 1="$WORK/fortran.npy" --input 2="$WORK/sample.npy"
sed 's/<f4/>f4/' "$WORK/time.npy" >"$WORK/bigendian.npy"
expect 2 "bigendian.npy: unsupported dtype '>f4'" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" \
  --input 1="$WORK/bigendian.npy" --input 2="$WORK/sample.npy"
sed "s/'shape'/'shapes'/" "$WORK/time.npy" >"$WORK/dict.npy"
expect 2 "dict.npy: bad header dict" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" \
  --input 1="$WORK/dict.npy" --input 2="$WORK/sample.npy"
expect 2 "cannot create" -- "$ACCY" run "$WIRE" --input 0="$WORK/freq.npy" "${ok_inputs[@]}" \
  --output 0="$WORK/no/such/dir/out.npy"
# A .npy file where a wire file belongs, and the other way round.
expect 2 "freq.npy: InvalidProgram: wire: missing the magic" -- "$ACCY" run "$WORK/freq.npy"
expect 2 "mismatch.wire: not a .npy file" -- "$ACCY" run "$WIRE" --input 0="$WIRE" "${ok_inputs[@]}"

# SPIR-V for Vulkan: one module per kernel, each valid when spirv-val is here.
expect 0 "kernel k7_sum" -- "$ACCY" compile "$WIRE" --target=spirv --emit=spirv -o "$WORK/tone"
if command -v spirv-val >/dev/null; then
  expect 0 "" -- spirv-val --target-env vulkan1.1 "$WORK/tone.0.spv"
fi
expect 2 "target spirv does not write --emit=asm (it writes spirv, artifact)" -- "$ACCY" compile "$WIRE" --target=spirv --emit=asm
expect 2 "--emit=spirv needs -o OUT" -- "$ACCY" compile "$WIRE" --target=spirv --emit=spirv
expect 2 "--threads is for --target=x86_64 or wasm" -- "$ACCY" compile "$WIRE" --target=spirv --threads=2 --emit=spirv -o "$WORK/x"

# PTX for CUDA: the module text (assembled when ptxas is here), the mapped
# Choir module, and the usage errors.
expect 0 ".visible .entry k7_sum(" -- "$ACCY" compile "$WIRE" --target=ptx --emit=ptx
expect 0 ".target sm_80" -- "$ACCY" compile "$WIRE8" --target=ptx --arch=sm_80 --mode=fast --emit=ptx
expect 0 "[workgroup 256]" -- "$ACCY" compile "$WIRE" --target=ptx --emit=choir
expect 0 "" -- "$ACCY" compile "$WIRE" --target=ptx --arch sm_75 --emit=ptx -o "$WORK/tone.ptx"
checks=$((checks + 1))
grep -q "^.target sm_75$" "$WORK/tone.ptx" 2>/dev/null || fail "-o tone.ptx has no line '.target sm_75'"
PTXAS=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
if [ -x "$PTXAS" ]; then
  expect 0 "" -- "$PTXAS" -arch=sm_75 "$WORK/tone.ptx" -o "$WORK/tone.cubin"
fi
expect 2 "target ptx does not write --emit=asm (it writes ptx, choir)" -- "$ACCY" compile "$WIRE" --target=ptx --emit=asm
expect 2 "--threads is for --target=x86_64 or wasm" -- "$ACCY" compile "$WIRE" --target=ptx --threads=2 --emit=ptx
expect 2 "--arch 'gfx90' is not sm_NN" -- "$ACCY" compile "$WIRE" --target=ptx --arch=gfx90 --emit=ptx
expect 2 "sm_60 is not supported" -- "$ACCY" compile "$WIRE" --target=ptx --arch=sm_60 --emit=ptx
expect 2 "unknown arithmetic mode 'turbo'" -- "$ACCY" compile "$WIRE" --target=ptx --mode=turbo --emit=ptx
# --dump-after=PASS: the module after one pass of each target's pipeline
# (lowering leaves one kernel per op; vectorizing tags the reduction).
expect 0 "kernel k4_sin {" -- "$ACCY" compile "$WIRE" --dump-after=lower
expect 0 "[vectorized x" -- "$ACCY" compile "$WIRE" --dump-after=vectorize --threads=1
expect 0 "reduce add out0[i" -- "$ACCY" compile "$WIRE8" --dump-after=parallelize --threads=2
expect 0 "[workgroup 256]" -- "$ACCY" compile "$WIRE" --target=ptx --dump-after=gpu-map
expect 0 "kernel k" -- "$ACCY" compile "$WIRE" --target=ptx --mode=tf32 --dump-after=tf32
expect 0 "[workgroup" -- "$ACCY" compile "$WIRE" --target=spirv --dump-after=gpu-map
expect 0 "" -- "$ACCY" compile "$WIRE" --target=spirv --dump-after=fuse -o "$WORK/fused.choir"
checks=$((checks + 1))
grep -q "kernel" "$WORK/fused.choir" 2>/dev/null || fail "--dump-after=fuse -o wrote no module"
expect 1 "pass tf32 did not run (it runs for --target=ptx --mode=tf32)" -- "$ACCY" compile "$WIRE" --target=ptx --dump-after=tf32
expect 2 "no pass 'gpu-map' for target x86_64 (lower, fuse, narrow, loop-order" -- "$ACCY" compile "$WIRE" --dump-after=gpu-map
expect 2 "no pass 'vectorize' for target ptx (lower, fuse, tf32, gpu-map)" -- "$ACCY" compile "$WIRE" --target=ptx --dump-after=vectorize
expect 2 "give --emit or --dump-after, not both" -- "$ACCY" compile "$WIRE" --emit=choir --dump-after=lower
# Arithmetic modes: fast everywhere (x86-64 keeps its accurate code), tf32
# only for ptx: another target fails to compile, naming why.
expect 0 "ret" -- "$ACCY" compile "$WIRE" --target=x86_64 --mode=fast --emit=asm
expect 0 "kernel k7_sum" -- "$ACCY" compile "$WIRE" --target=spirv --mode=fast --emit=spirv -o "$WORK/tone-fast"
expect 1 "needs CUDA (target ptx); target x86_64 has no tf32 mode" -- "$ACCY" compile "$WIRE" --target=x86_64 --mode=tf32 --emit=asm
expect 1 "needs CUDA (target ptx); target spirv has no tf32 mode" -- "$ACCY" compile "$WIRE" --target=spirv --mode=tf32 --emit=spirv -o "$WORK/x"
expect 2 "unknown arithmetic mode 'turbo'" -- "$ACCY" compile "$WIRE" --target=spirv --mode=turbo --emit=spirv -o "$WORK/x"
expect 2 "--arch is for --target=ptx" -- "$ACCY" compile "$WIRE" --target=x86_64 --arch=sm_90 --emit=asm

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]
