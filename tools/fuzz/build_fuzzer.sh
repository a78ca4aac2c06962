#!/usr/bin/env bash
# Builds the wire fuzzers outside Bazel with clang, libFuzzer, ASan and UBSan:
#
#   tools/fuzz/build_fuzzer.sh [BUILD_DIR [TARGET]]   (default: ${TMPDIR:-/tmp}/accy-fuzz, the wire fuzzers)
#   tools/fuzz/build_fuzzer.sh --check                exit 0 when clang with libFuzzer works here
#
# BUILD_DIR/wire_fuzz         decode, encode round trip, compile, run once
# BUILD_DIR/wire_decode_fuzz  decode and round trip only (-DACCY_FUZZ_DECODE_ONLY)
# BUILD_DIR/service_fuzz      accyd's service in process (tools/fuzz/service_fuzz.cc;
#                             TARGET service_fuzz: also gRPC and the server's sources)
#
# The project's sources are compiled directly, without Bazel building them:
# the .cc files of //compiler/wire (decode) and //backends/cpu (compile and
# run) and of their project dependencies, as `bazel query` lists them (so the
# list follows the BUILD files; a fixed list when Bazel cannot answer), plus
# the .pb.cc files the system protoc generates for them. Debian's libraries
# (protobuf, Abseil, asmjit) are linked as shared libraries; they are not
# instrumented. The build is incremental (a generated Makefile with header
# dependencies) and never writes inside the repository.
#
# Environment: CXX (default clang++-14, else clang++), JOBS (default 2).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)

find_cxx() {
  if [ -n "${CXX:-}" ]; then
    echo "$CXX"
  elif command -v clang++-14 >/dev/null 2>&1; then
    echo clang++-14
  elif command -v clang++ >/dev/null 2>&1; then
    echo clang++
  fi
}

# True when $1 compiles and links a trivial libFuzzer target with ASan.
fuzzer_works() {
  local cxx=$1 tmp
  tmp=$(mktemp -d)
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$tmp/t.cc"
  if "$cxx" -fsanitize=fuzzer,address "$tmp/t.cc" -o "$tmp/t" >/dev/null 2>&1; then
    rm -rf "$tmp"
    return 0
  fi
  rm -rf "$tmp"
  return 1
}

cxx=$(find_cxx)
if [ "${1:-}" = "--check" ]; then
  [ -n "$cxx" ] && fuzzer_works "$cxx"
  exit
fi
if [ -z "$cxx" ]; then
  echo "build_fuzzer: no clang++ found (install clang and libclang-rt-14-dev)" >&2
  exit 1
fi
if ! fuzzer_works "$cxx"; then
  echo "build_fuzzer: $cxx cannot link -fsanitize=fuzzer,address (is libclang-rt-14-dev installed?)" >&2
  exit 1
fi
for tool in protoc make; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build_fuzzer: $tool is missing" >&2
    exit 1
  fi
done

out=${1:-${TMPDIR:-/tmp}/accy-fuzz}
mkdir -p "$out"
out=$(cd "$out" && pwd)
case "$out/" in
  "$repo"/*)
    echo "build_fuzzer: $out is inside the repository; pick a directory outside it" >&2
    exit 1
    ;;
esac

# Abseil's libraries: the same list Bazel links (third_party/system.BUILD).
absl_libs=$(grep -o '"-labsl_[a-z0-9_]*"' "$repo/third_party/system.BUILD" | tr -d '"' | sort -u | tr '\n' ' ')

# --- the source lists ---------------------------------------------------------
decode_roots="//compiler/wire:wire"
all_roots="//compiler/wire:wire + //backends/cpu:cpu_runtime"
service_roots="//server:server_lib + //backends/cpu + //client:remote_session + //compiler/tensor"
service_srcs=""
service_protos=""
service_generated=""

# bazel_cc KIND ROOTS: repository-relative paths of the .cc files of kind
# KIND ("source file" or "generated file") in the project deps of ROOTS.
bazel_cc() {
  local labels
  labels=$(cd "$repo" && bazel query "kind('$1', deps($2))" --output=label 2>/dev/null) || return 1
  sed -n 's|^//\([^:]*\):\(.*\.cc\)$|\1/\2|p' <<<"$labels" | sed 's|^/||' | sort
}

from_bazel() {
  command -v bazel >/dev/null 2>&1 || return 1
  decode_srcs=$(bazel_cc "source file" "$decode_roots") || return 1
  all_srcs=$(bazel_cc "source file" "$all_roots") || return 1
  generated=$(bazel_cc "generated file" "$all_roots") || return 1
  [ -n "$decode_srcs" ] && [ -n "$all_srcs" ] || return 1
  compile_srcs=$(comm -13 <(echo "$decode_srcs") <(echo "$all_srcs"))
  # Generated sources must be protoc's: proto/X.pb.cc from proto/X.proto.
  protos=""
  local g
  for g in $generated; do
    case "$g" in
      proto/*.grpc.pb.cc)
        echo "build_fuzzer: $g needs grpc_cpp_plugin, which this script does not run" >&2
        exit 1
        ;;
      proto/*.pb.cc) protos="$protos ${g#proto/}" ;;
      *)
        echo "build_fuzzer: cannot build the generated source $g outside Bazel" >&2
        exit 1
        ;;
    esac
  done
  protos=$(sed 's/\.pb\.cc/.proto/g' <<<"$protos")
}

# The service fuzzer's further sources and its protos (gRPC's included).
service_from_bazel() {
  local all g
  all=$(bazel_cc "source file" "$service_roots") || return 1
  service_srcs=$(comm -13 <(echo "$decode_srcs"$'\n'"$compile_srcs" | sort) <(echo "$all"))
  for g in $(bazel_cc "generated file" "$service_roots"); do
    case "$g" in
      proto/*.grpc.pb.cc) ;;
      proto/*.pb.cc) service_protos="$service_protos ${g#proto/}" ;;
      compiler/executable/build_record_data.cc) service_generated="$service_generated $g" ;;
      *)
        echo "build_fuzzer: cannot build the generated source $g outside Bazel" >&2
        return 1
        ;;
    esac
  done
  service_protos=$(sed 's/\.pb\.cc/.proto/g' <<<"$service_protos")
  service_grpc=""
  for g in $service_protos; do
    grep -q '^service ' "$repo/proto/$g" && service_grpc="$service_grpc $g"
  done
  return 0
}

if ! from_bazel; then
  echo "build_fuzzer: bazel query failed; using the fixed source list (it may be stale)" >&2
  decode_srcs=$(cd "$repo" && ls base/*.cc compiler/tensor/*.cc compiler/wire/wire.cc | grep -v '_test\.cc$')
  compile_srcs=$(cd "$repo" && ls compiler/choir/*.cc compiler/choir/passes/*.cc compiler/codegen/x86_64/*.cc \
    compiler/executable/executable.cc backends/buffer_checks.cc backends/cpu/cpu_program.cc \
    backends/cpu/thread_pool.cc | grep -v '_test\.cc$')
  protos=accy/wire/v1/program.proto
fi
targets=${2:-wire}
if [ "$targets" = service_fuzz ]; then
  if ! command -v grpc_cpp_plugin >/dev/null 2>&1 || ! service_from_bazel; then
    echo "build_fuzzer: service_fuzz needs bazel query and grpc_cpp_plugin (protobuf-compiler-grpc)" >&2
    exit 1
  fi
fi
{
  echo "# Generated by tools/fuzz/build_fuzzer.sh; edits are overwritten."
  echo "DECODE_SRCS :=" $decode_srcs
  echo "COMPILE_SRCS :=" $compile_srcs
  echo "PROTOS :=" $protos
  echo "SERVICE_SRCS :=" $service_srcs
  echo "SERVICE_PROTOS :=" $service_protos
  echo "SERVICE_GRPC_PROTOS :=" ${service_grpc:-}
  echo "SERVICE_GENERATED :=" $service_generated
} >"$out/sources.mk"

# Per-file options of the BUILD files' copts that change the code (the ISA
# of the per-ISA host math, -ffp-contract=off), as target-specific flags of
# those objects: "$(OUT)/obj/PATH.o: FILE_FLAGS := ..." lines.
file_flags() {
  (cd "$repo" && bazel query "kind(cc_library, deps($all_roots + $service_roots))" --output=build 2>/dev/null) |
    python3 -c '
import re, sys
for rule in re.findall(r"cc_library\((.*?)\n\)", sys.stdin.read(), re.S):
    copts = re.search(r"copts = \[(.*?)\]", rule)
    srcs = re.search(r"srcs = \[(.*?)\]", rule)
    if not copts or not srcs:
        continue
    flags = [f for f in re.findall(r"\"([^\"]*)\"", copts.group(1)) if f.startswith(("-m", "-ffp-contract"))]
    for label in re.findall(r"\"//([^\"]*\.cc)\"", srcs.group(1)) if flags else []:
        pkg, name = label.split(":")
        print("$(OUT)/obj/%s.o: FILE_FLAGS := %s" % ((pkg + "/" + name[:-3]).lstrip("/"), " ".join(flags)))
'
}
if command -v bazel >/dev/null 2>&1 && flags=$(file_flags) && [ -n "$flags" ]; then
  echo "$flags" >"$out/flags.mk"
else
  # Without bazel: the per-ISA files of compiler/codegen/x86_64/BUILD.bazel.
  x64='$(OUT)/obj/compiler/codegen/x86_64'
  {
    echo "$x64/trig_large_sse41.o: FILE_FLAGS := -ffp-contract=off -msse4.1"
    echo "$x64/trig_large_fma.o: FILE_FLAGS := -ffp-contract=off -mavx2 -mfma"
    echo "$x64/trig_large_avx512.o: FILE_FLAGS := -ffp-contract=off -mavx2 -mfma -mavx512f -mavx512vl -mavx512dq -mavx512bw"
  } >"$out/flags.mk"
fi

# --- the Makefile ---------------------------------------------------------------
cat >"$out/Makefile.new" <<EOF
# Generated by tools/fuzz/build_fuzzer.sh; edits are overwritten. The source
# lists are in sources.mk, which objects do not depend on (a new source
# builds only itself); every object depends on this file (new flags rebuild
# everything).
REPO := $repo
OUT := $out
CXX := $cxx
GEN := \$(OUT)/gen
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
CXXFLAGS := -std=c++20 -O1 -g -fno-omit-frame-pointer \$(SAN) -fsanitize=fuzzer-no-link \\
  -DACCY_FUZZ_LIBFUZZER -I\$(REPO) -I\$(GEN) -isystem /usr/local/cuda/include -Wall -Wextra -Wno-unused-parameter -MMD -MP
LIBS := -lprotobuf $absl_libs -lasmjit -lpthread
GRPC_LIBS := -lgrpc++ -lgrpc -lgpr -lssl -lcrypto -ldl
GRPC_PLUGIN := $(command -v grpc_cpp_plugin || echo grpc_cpp_plugin)

include \$(OUT)/sources.mk
include \$(OUT)/flags.mk

obj = \$(patsubst %.cc,\$(OUT)/obj/%.o,\$(1))
PB_CCS := \$(patsubst %.proto,\$(GEN)/%.pb.cc,\$(PROTOS))
PB_OBJS := \$(patsubst \$(GEN)/%.pb.cc,\$(OUT)/obj/gen/%.pb.o,\$(PB_CCS))
DECODE_OBJS := \$(call obj,\$(DECODE_SRCS)) \$(PB_OBJS)
COMPILE_OBJS := \$(call obj,\$(COMPILE_SRCS))

all: \$(OUT)/wire_fuzz \$(OUT)/wire_decode_fuzz

SERVICE_PB_CCS := \$(patsubst %.proto,\$(GEN)/%.pb.cc,\$(filter-out \$(PROTOS),\$(SERVICE_PROTOS)))
SERVICE_GRPC_CCS := \$(patsubst %.proto,\$(GEN)/%.grpc.pb.cc,\$(SERVICE_GRPC_PROTOS))
SERVICE_OBJS := \$(call obj,\$(SERVICE_SRCS)) \$(patsubst \$(GEN)/%.cc,\$(OUT)/obj/gen/%.o,\$(SERVICE_PB_CCS) \$(SERVICE_GRPC_CCS)) \
  \$(patsubst %.cc,\$(OUT)/obj/gen/%.o,\$(SERVICE_GENERATED))

# The build record of an unstamped build (as tools/gen_build_record.sh
# writes it without Bazel's status).
\$(GEN)/compiler/executable/build_record_data.cc: \$(REPO)/tools/gen_build_record.sh \$(OUT)/Makefile
	@mkdir -p \$(dir \$@)
	bash \$< /dev/null \$@

\$(OUT)/obj/gen/%.o: \$(GEN)/%.cc \$(OUT)/Makefile
	@mkdir -p \$(dir \$@)
	\$(CXX) \$(CXXFLAGS) -c \$< -o \$@

\$(GEN)/%.grpc.pb.cc: \$(REPO)/proto/%.proto \$(OUT)/Makefile
	@mkdir -p \$(GEN)
	protoc --proto_path=\$(REPO)/proto --grpc_out=\$(GEN) --plugin=protoc-gen-grpc=\$(GRPC_PLUGIN) \$<

\$(OUT)/obj/gen/%.grpc.pb.o: \$(GEN)/%.grpc.pb.cc \$(OUT)/Makefile | \$(SERVICE_PB_CCS)
	@mkdir -p \$(dir \$@)
	\$(CXX) \$(CXXFLAGS) -c \$< -o \$@

\$(OUT)/service_fuzz: \$(OUT)/obj/tools/fuzz/service_fuzz.o \$(DECODE_OBJS) \$(COMPILE_OBJS) \$(SERVICE_OBJS)
	\$(CXX) \$(SAN) -fsanitize=fuzzer \$^ \$(LIBS) \$(GRPC_LIBS) -o \$@

\$(GEN)/%.pb.cc: \$(REPO)/proto/%.proto \$(OUT)/Makefile
	@mkdir -p \$(GEN)
	protoc --proto_path=\$(REPO)/proto --cpp_out=\$(GEN) \$<

\$(OUT)/obj/gen/%.pb.o: \$(GEN)/%.pb.cc \$(OUT)/Makefile
	@mkdir -p \$(dir \$@)
	\$(CXX) \$(CXXFLAGS) -c \$< -o \$@

# Every project object may include a generated header.
\$(OUT)/obj/%.o: \$(REPO)/%.cc \$(OUT)/Makefile | \$(PB_CCS) \$(SERVICE_PB_CCS) \$(SERVICE_GRPC_CCS)
	@mkdir -p \$(dir \$@)
	\$(CXX) \$(CXXFLAGS) \$(FILE_FLAGS) -c \$< -o \$@

\$(OUT)/obj/wire_decode_fuzz.o: \$(REPO)/tools/fuzz/wire_fuzz.cc \$(OUT)/Makefile | \$(PB_CCS)
	@mkdir -p \$(dir \$@)
	\$(CXX) \$(CXXFLAGS) -DACCY_FUZZ_DECODE_ONLY -c \$< -o \$@

\$(OUT)/wire_fuzz: \$(OUT)/obj/tools/fuzz/wire_fuzz.o \$(DECODE_OBJS) \$(COMPILE_OBJS)
	\$(CXX) \$(SAN) -fsanitize=fuzzer \$^ \$(LIBS) -o \$@

\$(OUT)/wire_decode_fuzz: \$(OUT)/obj/wire_decode_fuzz.o \$(DECODE_OBJS)
	\$(CXX) \$(SAN) -fsanitize=fuzzer \$^ \$(LIBS) -o \$@

-include \$(shell find \$(OUT)/obj -name '*.d' 2>/dev/null)
EOF

# accy/version.inc, as the //:version_inc genrule writes it (from VERSION).
mkdir -p "$out/gen/accy"
version_line="\"$(tr -d ' \n' <"$repo/VERSION")\""
if [ "$(cat "$out/gen/accy/version.inc" 2>/dev/null)" != "$version_line" ]; then
  echo "$version_line" >"$out/gen/accy/version.inc"
fi

# Replace the Makefile only when it changed: every object depends on it, so
# new flags rebuild everything and an unchanged one rebuilds nothing.
if cmp -s "$out/Makefile.new" "$out/Makefile"; then
  rm "$out/Makefile.new"
else
  mv "$out/Makefile.new" "$out/Makefile"
fi
if [ "$targets" = service_fuzz ]; then
  make -s -C "$out" -j"${JOBS:-2}" "$out/service_fuzz"
  echo "build_fuzzer: built $out/service_fuzz"
else
  make -s -C "$out" -j"${JOBS:-2}" all
  echo "build_fuzzer: built $out/wire_fuzz and $out/wire_decode_fuzz"
fi
