#!/usr/bin/env bash
# make release VERSION=vYY.MM.N [DIST=DIR]: a stamped build, then in DIR
# (default dist/):
#   accy-VERSION.tar.gz               the sources the library compiles (no
#                                     tests), the Bazel workspace, the
#                                     release's build record and
#                                     examples/consumer;
#   accy-VERSION-linux-x86_64.tar.gz  bin/accy, bin/accyd, lib/libaccy.a (the
#                                     C++ library, asmjit inside),
#                                     lib/libaccy_c.so, include/, a
#                                     pkg-config file, a CMake package
#                                     (find_package(Accy)), LICENSE, deploy/;
#   SHA256SUMS                        of both.
# The version is the file VERSION's; asking for another, or one without a
# CHANGELOG entry, fails naming both. docs/RELEASE.md.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() {
  echo "make release: $*" >&2
  exit 1
}
version=${1:-}
out=${2:-dist}
[ -n "$version" ] || fail "give the version: make release VERSION=vYY.MM.N"
[[ $version =~ ^v[0-9]{2}\.[0-9]{2}\.[0-9]+$ ]] || fail "VERSION=$version is not vYY.MM.N"
written=$(tr -d ' \n' <VERSION)
[ "$version" = "$written" ] || fail "VERSION=$version, but the file VERSION says $written (the version is written there, in one place)"
grep -qE "^## $version( |$)" CHANGELOG.md || fail "CHANGELOG.md has no entry for $version ('## $version')"
number=${version#v}

# The project's libraries in the C++ library, and a stamped build of
# everything shipped.
libs=$(bazel query 'kind(cc_library, deps(//:accy))' 2>/dev/null | grep '^//')
# shellcheck disable=SC2086
bazel build --stamp --workspace_status_command=tools/build_record_status.sh \
  //tools:accy //server:accyd //client:libaccy_c.so $libs
bin=$(bazel info bazel-bin 2>/dev/null)
out_dir=$(bazel info output_path 2>/dev/null)
record=$(grep '^STABLE_ACCY_' "$out_dir/../stable-status.txt" 2>/dev/null || grep '^STABLE_ACCY_' bazel-out/stable-status.txt)
[ -n "$record" ] || fail "the stamped build left no build record"

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- the source archive ----------------------------------------------------
src="$work/accy-$version"
mkdir -p "$src"
{
  # Every source file and BUILD file the library's build reads, in this
  # repository; then the workspace, the offline rules, the consumer.
  bazel query 'kind("source file", deps(//:accy)) union buildfiles(deps(//:accy))' 2>/dev/null | grep '^//' |
    sed -e 's#^//##' -e 's#:#/#' -e 's#^/##'
  printf '%s\n' WORKSPACE .bazelrc .bazelignore VERSION LICENSE README.md CHANGELOG.md release/release_status.sh
  git ls-files third_party examples/consumer docs/RELEASE.md
} | sort -u | while read -r f; do
  [ -f "$f" ] || continue
  mkdir -p "$src/$(dirname "$f")"
  cp -p "$f" "$src/$f"
done
printf '%s\n' "$record" >"$src/RELEASE_RECORD"
tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$out/accy-$version.tar.gz" "accy-$version"

# --- the binary archive ----------------------------------------------------
dst="$work/accy-$version-linux-x86_64"
mkdir -p "$dst/bin" "$dst/lib/pkgconfig" "$dst/lib/cmake/Accy" "$dst/include"
cp "$bin/tools/accy" "$bin/server/accyd" "$dst/bin/"
cp "$bin/client/libaccy_c.so" "$dst/lib/"
# One static library of every project library (and asmjit, when the build
# links the copy in /opt/accy), merged with an ar script.
{
  echo "CREATE $dst/lib/libaccy.a"
  for l in $libs; do
    pkg=${l#//}
    pkg=${pkg%%:*}
    name=${l##*:}
    [ -f "$bin/$pkg/lib$name.a" ] && echo "ADDLIB $bin/$pkg/lib$name.a"
  done
  [ -f /opt/accy/asmjit/lib/libasmjit.a ] && echo "ADDLIB /opt/accy/asmjit/lib/libasmjit.a"
  echo "SAVE"
  echo "END"
} >"$work/ar.mri"
ar -M <"$work/ar.mri"
# The public headers and every project header they include.
g++ -std=c++20 -MM -I. -I"$bin" accy/accy.h accy/accy_c.h | tr ' \\' '\n\n' | sed "s#^$bin/##" |
  grep -vE '^$|^/|:$' | sort -u |
  while read -r h; do
    mkdir -p "$dst/include/$(dirname "$h")"
    if [ -f "$h" ]; then cp "$h" "$dst/include/$h"; else cp "$bin/$h" "$dst/include/$h"; fi
  done
# What a consumer links besides libaccy.a: the Debian libraries, from the
# linkopts of every rule the library depends on (asmjit is inside libaccy.a
# when the build links the copy in /opt/accy).
syslibs=$(bazel query --output=build 'deps(//:accy)' 2>/dev/null |
  sed -n '/linkopts = \[/,/\]/p' | grep -o '"-[lL][^"]*"' | tr -d '"' | awk '!seen[$0]++' | tr '\n' ' ')
if [ -f /opt/accy/asmjit/lib/libasmjit.a ]; then
  syslibs=$(echo "$syslibs" | tr ' ' '\n' | grep -vE '^(-L/opt/accy/asmjit/lib|-lasmjit)$' | tr '\n' ' ')
fi
syslibs=$(echo $syslibs -ldl)
cat >"$dst/lib/pkgconfig/accy.pc" <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: accy
Description: Accy, a compiler and runtime for array programs with named axes
Version: $number
Cflags: -std=c++20 -I\${includedir}
Libs: -L\${libdir} -laccy $syslibs
PC
cmake_libs=$(echo "$syslibs" | tr ' ' ';')
cat >"$dst/lib/cmake/Accy/AccyConfig.cmake" <<CM
# find_package(Accy): Accy::accy (the C++ library, accy/accy.h) and
# Accy::accy_c (the C ABI, accy/accy_c.h) from this release. The Debian
# packages of tools/setup.sh provide what they link (Abseil, OpenSSL) and
# asmjit's headers.
get_filename_component(_accy_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET Accy::accy)
  add_library(Accy::accy STATIC IMPORTED)
  set_target_properties(Accy::accy PROPERTIES
    IMPORTED_LOCATION "\${_accy_prefix}/lib/libaccy.a"
    INTERFACE_INCLUDE_DIRECTORIES "\${_accy_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_LINK_LIBRARIES "$cmake_libs")
  add_library(Accy::accy_c SHARED IMPORTED)
  set_target_properties(Accy::accy_c PROPERTIES
    IMPORTED_LOCATION "\${_accy_prefix}/lib/libaccy_c.so"
    INTERFACE_INCLUDE_DIRECTORIES "\${_accy_prefix}/include")
endif()
set(Accy_VERSION $number)
unset(_accy_prefix)
CM
cat >"$dst/lib/cmake/Accy/AccyConfigVersion.cmake" <<CM
# Releases of the same year and month are compatible with each other.
set(PACKAGE_VERSION $number)
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(PACKAGE_FIND_VERSION_MAJOR EQUAL $(echo "$number" | cut -d. -f1) AND
       (PACKAGE_FIND_VERSION_MINOR STREQUAL "" OR PACKAGE_FIND_VERSION_MINOR EQUAL $(echo "$number" | cut -d. -f2 | sed 's/^0//')))
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
CM
cp LICENSE "$dst/"
git ls-files deploy | while read -r f; do
  mkdir -p "$dst/$(dirname "$f")"
  cp "$f" "$dst/$f"
done
printf '%s\n' "$record" >"$dst/RELEASE_RECORD"
tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$out/accy-$version-linux-x86_64.tar.gz" "accy-$version-linux-x86_64"

(cd "$out" && sha256sum "accy-$version.tar.gz" "accy-$version-linux-x86_64.tar.gz" >SHA256SUMS)
echo "make release: $out/accy-$version.tar.gz ($(du -h "$out/accy-$version.tar.gz" | cut -f1))," \
  "$out/accy-$version-linux-x86_64.tar.gz ($(du -h "$out/accy-$version-linux-x86_64.tar.gz" | cut -f1)), $out/SHA256SUMS"
