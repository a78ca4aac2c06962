#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demo need.
# Idempotent: installs only what is missing. Needs root (or sudo) when
# something is missing.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms
  g++ libabsl-dev libasmjit-dev libgtest-dev libgmock-dev libbenchmark-dev libeigen3-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libvulkan-dev spirv-tools spirv-headers mesa-vulkan-drivers vulkan-tools wabt
  libssl-dev openssl libopenblas-dev graphviz
  clang libclang-rt-14-dev
  cmake xz-utils pkgconf prometheus-cpp-dev zlib1g-dev
  chromium nodejs
)
# chromium: headless, it runs the WGSL target (WebGPU on SwiftShader's
# Vulkan) for tests/wgsl_conformance_test.cc and tools/webgpu/run_page.py.
# nodejs: runs the wasm target (tests/wasm_conformance_test.cc, accy run
# --target=wasm); wabt checks its modules.
# `make bench` also measures PyTorch on the CPU (bench/torch_perceptron.py,
# bench/torch_indexing.py) and Halide 14 (bench/halide_blur.cc).
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-torch libhalide14-0-dev python3-numpy)
fi
# `make random-quality` runs dieharder on Accy's raw random bits.
if [ "${1:-}" = "--random-quality" ]; then
  packages+=(dieharder)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

as_root=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then
  as_root=(sudo)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ] && [ ${#as_root[@]} -eq 0 ]; then
    echo "setup: missing packages and not root (no sudo): ${missing[*]}" >&2
    exit 1
  fi
  "${as_root[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# scikit-learn's datasets (the digits and breast-cancer CSV files the
# examples read: examples/data/datasets.h), from Debian's python3-sklearn
# package, unpacked without installing it (or scipy and the Python stack
# it depends on) into /opt/accy/datasets.
datasets_dir=/opt/accy/datasets
sklearn_version=$(apt-cache policy python3-sklearn 2>/dev/null | sed -n 's/^ *Candidate: //p')
if [ -n "$sklearn_version" ] && [ "$(cat "$datasets_dir/VERSION" 2>/dev/null)" = "$sklearn_version" ]; then
  echo "setup: scikit-learn $sklearn_version datasets present"
else
  data_work=$(mktemp -d)
  (cd "$data_work" && apt-get download -q "python3-sklearn=$sklearn_version" >/dev/null 2>&1) ||
    { "${as_root[@]}" apt-get update -q >/dev/null && (cd "$data_work" && apt-get download -q "python3-sklearn=$sklearn_version"); }
  dpkg-deb -x "$data_work"/python3-sklearn_*.deb "$data_work/x"
  "${as_root[@]}" mkdir -p "$datasets_dir"
  "${as_root[@]}" cp "$data_work"/x/usr/lib/python3/dist-packages/sklearn/datasets/data/*.csv* "$datasets_dir/"
  echo "$sklearn_version" | "${as_root[@]}" tee "$datasets_dir/VERSION" >/dev/null
  rm -rf "$data_work"
  echo "setup: scikit-learn $sklearn_version datasets in $datasets_dir"
fi

# asmjit for release. Debian's libasmjit-dev is built without NDEBUG, so its
# register allocator checks its whole state after every instruction: most of
# the x86-64 emission time of a large kernel (docs/PERFORMANCE.md, "Compile
# time by stage"). The same Debian source package, built with
# CMAKE_BUILD_TYPE=Release, goes to /opt/accy/asmjit; the build links it
# ahead of the system library (third_party/system.BUILD), and falls back to
# Debian's when it is absent. Headers stay Debian's (the same version).
asmjit_dir=/opt/accy/asmjit
asmjit_version=$(dpkg-query -W -f='${Version}' libasmjit-dev)
if [ -f "$asmjit_dir/lib/libasmjit.a" ] && [ "$(cat "$asmjit_dir/VERSION" 2>/dev/null)" = "$asmjit_version" ]; then
  echo "setup: asmjit $asmjit_version (release) present"
  exit 0
fi
echo "setup: building asmjit $asmjit_version for release from Debian's source package"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
quiet() { "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "setup: failed: $*" >&2; exit 1; }; }
# The system's own Debian sources, as source-package entries.
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$work/sources.sources"
  apt_sources=(-o "Dir::Etc::SourceParts=$work" -o "Dir::Etc::SourceList=/dev/null")
else
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$work/sources.list"
  apt_sources=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null")
fi
apt_private=("${apt_sources[@]}" -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")
quiet apt-get "${apt_private[@]}" update -q
(cd "$work/src" && quiet apt-get "${apt_private[@]}" source --download-only "asmjit=$asmjit_version")
tar -xJf "$work"/src/asmjit_*.orig.tar.xz -C "$work/src"
src=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'asmjit*' | head -n1)
quiet cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DASMJIT_STATIC=ON \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DCMAKE_INSTALL_PREFIX="$work/install"
quiet cmake --build "$work/build" -j "$(nproc)"
quiet cmake --install "$work/build"
"${as_root[@]}" mkdir -p "$asmjit_dir/lib"
"${as_root[@]}" cp "$(find "$work/install" -name libasmjit.a | head -n1)" "$asmjit_dir/lib/libasmjit.a"
echo "$asmjit_version" | "${as_root[@]}" tee "$asmjit_dir/VERSION" >/dev/null
echo "setup: asmjit $asmjit_version (release) in $asmjit_dir"
