#!/bin/sh
# Runs the ctypes test of the C ABI with Debian's Python (the `python3` on
# PATH may be another interpreter), isolated from PYTHON* variables and user
# site packages: it needs only the standard library.
#   accy_c_test.sh SCRIPT LIBACCY_C_SO MISMATCH_WIRE MISMATCH8_WIRE
# Under --config=asan or tsan the library needs its sanitizer runtime loaded
# first, which an uninstrumented Python does not do: it is preloaded then
# (ASan's leak checking off, since the interpreter itself is not
# instrumented).
set -eu
script="$1"
shift
runtime=$(ldd "$1" 2>/dev/null | awk '/libasan|libtsan/ {print $3; exit}')
if [ -n "$runtime" ]; then
  export LD_PRELOAD="$runtime"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
exec /usr/bin/python3 -I -B "$script" "$@"
