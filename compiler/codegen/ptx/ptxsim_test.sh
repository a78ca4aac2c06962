#!/usr/bin/env bash
# Runs the PTX of ptx_test's simulation cases on ptxsim.py's interpreter and
# compares every output with the reference evaluator (no GPU needed).
set -euo pipefail
DIR="${TEST_TMPDIR:-$(mktemp -d)}/sim"
rm -rf "$DIR" && mkdir -p "$DIR"
ACCY_PTX_SIM_DIR="$DIR" compiler/codegen/ptx/ptx_test --gtest_filter='*DumpSimulationCases*' >"$DIR/dump.log" 2>&1 ||
  { cat "$DIR/dump.log"; exit 1; }
/usr/bin/python3 compiler/codegen/ptx/ptxsim.py "$DIR"
