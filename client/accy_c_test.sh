#!/bin/sh
# Runs the ctypes test of the C ABI with Debian's Python (the `python3` on
# PATH may be another interpreter), isolated from PYTHON* variables and user
# site packages: it needs only the standard library.
#   accy_c_test.sh SCRIPT LIBACCY_C_SO MISMATCH_WIRE MISMATCH8_WIRE
set -eu
script="$1"
shift
exec /usr/bin/python3 -I -B "$script" "$@"
