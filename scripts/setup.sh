#!/usr/bin/env bash
# Installs every Debian package that hvrun's build, tests and lab need, then configures and builds
# into build/. Idempotent. As root it installs with apt-get; otherwise, when something is missing, it
# prints the exact apt-get line and stops.
#   BUILD_DIR=build  CMAKE_ARGS="-DHVRUN_WITH_NCCL=OFF"  scripts/setup.sh [TARGET...]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

packages=(
  # build
  cmake ninja-build g++ pkg-config
  # the test program's objects, compiled once for the plain and the sanitized builds (tests/CMakeLists.txt)
  ccache
  # libraries (all from Debian; nothing vendored)
  libssh-dev libboost-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 libgloo-dev libssl-dev libyaml-cpp-dev
  # tests and the network-namespace lab
  openssh-server openssh-client iproute2 iptables procps util-linux
  # the man page check (tests/hvrun_docs.sh renders hvrun.1 with groff -ww)
  groff-base
  # the --check-only HTML page, opened headless and screenshotted (pixels read by python3)
  chromium python3
  # --mpi: Open MPI's mpirun, and mpicc for the lab test's MPI program
  openmpi-bin libopenmpi-dev
  # the Slurm lab test (tests/test_slurm_lab.cpp, scripts/slurm_lab.sh). Installing starts nothing that
  # the tests meet: slurmctld's and slurmd's init scripts exit 0 and their systemd units do not start
  # without /etc/slurm/slurm.conf, which the packages do not ship (the lab writes its own elsewhere).
  # munge's postinst may start the system munged (where policy-rc.d allows it); the lab runs its own
  # munged on its own socket and key, so that one is left alone (it may be serving a real cluster).
  slurmctld slurmd slurm-client munge
)

# shellcheck source=lib/packages.sh
source "$root/scripts/lib/packages.sh"
ensure_packages setup.sh "${packages[@]}"

# shellcheck disable=SC2086  # CMAKE_ARGS is a list of words on purpose
cmake -S "$root" -B "$build_dir" -G Ninja ${CMAKE_ARGS:-}
# Arguments name the targets to build (demo.sh builds only what it runs); none: all of them.
targets=()
(($# == 0)) || targets=(--target "$@")
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
