#!/usr/bin/env bash
# Runs the PTX of the simulation cases (ptx_sim_cases) on ptxsim.py's
# interpreter and compares every output with the reference evaluator (no GPU
# needed). Fails when the cases could not be written or none ran.
set -euo pipefail
DIR="${TEST_TMPDIR:-$(mktemp -d)}/sim"
rm -rf "$DIR" && mkdir -p "$DIR"
ACCY_PTX_SIM_DIR="$DIR" compiler/codegen/ptx/ptx_sim_cases >"$DIR/dump.log" 2>&1 ||
  { cat "$DIR/dump.log"; exit 1; }
grep '^wrote [0-9]* cases' "$DIR/dump.log"
/usr/bin/python3 compiler/codegen/ptx/ptxsim.py "$DIR"
