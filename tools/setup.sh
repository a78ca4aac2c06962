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
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    as_root=(sudo)
  else
    echo "setup: missing packages and not root (no sudo): ${missing[*]}" >&2
    exit 1
  fi
fi
"${as_root[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
