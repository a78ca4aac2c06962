#!/usr/bin/env bash
# Bazel workspace status command of builds from a source release
# (examples/consumer/.bazelrc): the release's build record (RELEASE_RECORD,
# written by `make release`), with the compiler and the flags of this build,
# so a program saved here restores here, and one saved by another build is
# refused naming what differs. Prints nothing outside a release (an
# unstamped build).
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
[ -f "$root/RELEASE_RECORD" ] || exit 0
grep -v -E '^STABLE_ACCY_(COMPILER|FLAGS) ' "$root/RELEASE_RECORD"
echo "STABLE_ACCY_COMPILER $(gcc --version | head -n1 | tr ' ' '_')"
echo "STABLE_ACCY_FLAGS source-release-$( (grep -E '^build (--copt|--cxxopt)' .bazelrc 2>/dev/null || true) | sha256sum | cut -c1-16)"
