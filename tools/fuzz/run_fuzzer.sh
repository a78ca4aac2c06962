#!/usr/bin/env bash
# Builds the wire fuzzer if needed and runs it on a copy of the seed corpus:
#
#   tools/fuzz/run_fuzzer.sh RUNS [LIBFUZZER_ARGS...]
#
# RUNS inputs are executed (-runs=RUNS) in one process on one core, with
# -max_len=4096 -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=25. Exit
# status: 0 when no crash, leak, timeout or out-of-memory occurred; otherwise
# libFuzzer's non-zero status, with the reproducer saved under
# $FUZZ_BUILD_DIR/artifacts/ (reproduce: $FUZZ_BUILD_DIR/wire_fuzz FILE).
#
# Environment:
#   FUZZ_BUILD_DIR  build directory (default ${TMPDIR:-/tmp}/accy-fuzz)
#   FUZZ_TARGET     wire_fuzz (default: decode, compile, run),
#                   wire_decode_fuzz (decode only) or service_fuzz (accyd's
#                   service in process, tools/fuzz/service_fuzz.cc)
#   FUZZ_CORPUS     directory to keep the grown corpus in (default: a fresh
#                   temporary copy of tools/fuzz/corpus, deleted afterwards)
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: $0 RUNS [LIBFUZZER_ARGS...]" >&2
  exit 2
fi
runs=$1
shift
build=${FUZZ_BUILD_DIR:-${TMPDIR:-/tmp}/accy-fuzz}
target=${FUZZ_TARGET:-wire_fuzz}
case "$target" in
  wire_fuzz | wire_decode_fuzz | service_fuzz) ;;
  *)
    echo "run_fuzzer: FUZZ_TARGET must be wire_fuzz, wire_decode_fuzz or service_fuzz, not '$target'" >&2
    exit 2
    ;;
esac

if ! "$repo/tools/fuzz/build_fuzzer.sh" "$build" "$([ "$target" = service_fuzz ] && echo service_fuzz || echo wire)"; then
  echo "run_fuzzer: the build failed" >&2
  exit 1
fi

cleanup=
if [ -n "${FUZZ_CORPUS:-}" ]; then
  corpus=$FUZZ_CORPUS
  mkdir -p "$corpus"
else
  corpus=$(mktemp -d "${TMPDIR:-/tmp}/accy-fuzz-corpus.XXXXXX")
  cleanup=$corpus
fi
# The wire corpus seeds the wire fuzzers; the service fuzzer starts from
# its own (short byte strings that open sessions and compile).
if [ "$target" = service_fuzz ]; then
  [ -d "$repo/tools/fuzz/service_corpus" ] && cp -n "$repo"/tools/fuzz/service_corpus/* "$corpus"/
else
  cp -n "$repo"/tools/fuzz/corpus/* "$corpus"/
fi
mkdir -p "$build/artifacts"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
"$build/$target" -runs="$runs" -max_len=4096 -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=25 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$@" "$corpus"
status=$?
[ -n "$cleanup" ] && rm -rf "$cleanup"
if [ $status -ne 0 ]; then
  echo "run_fuzzer: $target failed with status $status; reproducers in $build/artifacts/" >&2
fi
exit $status
