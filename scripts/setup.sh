#!/usr/bin/env bash
# Installs every Debian package that hvrun's build, tests and lab need, then configures and builds
# into build/. Idempotent. As root it installs with apt-get; otherwise, when something is missing, it
# prints the exact apt-get line and stops.
#   BUILD_DIR=build  CMAKE_ARGS="-DHVRUN_WITH_NCCL=OFF"  scripts/setup.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

packages=(
  # build
  cmake ninja-build g++ pkg-config
  # libraries (all from Debian; nothing vendored)
  libssh-dev libboost-dev libcli11-dev libspdlog-dev nlohmann-json3-dev catch2 libgloo-dev libssl-dev
  # tests and the network-namespace lab
  openssh-server openssh-client iproute2 iptables procps util-linux
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing packages; install them as root with:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# shellcheck disable=SC2086  # CMAKE_ARGS is a list of words on purpose
cmake -S "$root" -B "$build_dir" -G Ninja ${CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$(nproc)"
