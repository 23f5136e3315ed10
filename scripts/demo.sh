#!/usr/bin/env bash
# The main job: set up, then hvrun launches hvrun-allreduce-bench on 4 local ranks (a real allreduce,
# every result checked). As root it also makes a 3-host network-namespace lab with the traps real
# clusters have (docker0 with 172.17.0.1 everywhere, NIC names differing per host, a NIC that reaches
# nobody, a NIC that drops packets), shows `hvrun --check-only` on it, runs the benchmark across the
# hosts, and removes the lab again.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Only what the demo runs: hvrun, its agent and the allreduce benchmark (the tests build in test.sh).
"$root/scripts/setup.sh" hvrun hvrun-agent hvrun-allreduce-bench
build=${BUILD_DIR:-$root/build}
hvrun="$build/cmd/hvrun"
bench="$build/collectives/hvrun-allreduce-bench"

echo
echo "== hvrun -np 4 -H localhost:4 hvrun-allreduce-bench (Gloo over loopback)"
"$hvrun" -np 4 -H localhost:4 "$bench" -b 8 -e 16M -f 8 -n 5 -w 2

if [[ $(id -u) -ne 0 ]]; then
  echo
  echo "demo.sh: the multi-host part needs root (network namespaces); run as root to see it."
  exit 0
fi

export LAB_PREFIX=hvdemo LAB_DIR=/tmp/hvdemo
lab="$root/scripts/lab.sh"
home=$(mktemp -d)
cleanup() {
  "$lab" down >/dev/null 2>&1 || true
  rm -rf "$home"
}
trap cleanup EXIT
echo
echo "== a 3-host lab with the traps (scripts/lab.sh up 3)"
LAB_RECREATE=1 "$lab" up 3 >/dev/null
eval "$("$lab" env)"
mkdir -p "$home/.ssh"
hosts=${LAB_HOSTS// /,}
on_host0() { "$lab" exec 0 env HOME="$home" "$@"; }

echo
echo "== hvrun --check-only -H $hosts -p $LAB_PORT -i <lab key>   (from ${LAB_HOSTS%% *})"
on_host0 "$hvrun" --check-only -H "$hosts" -p "$LAB_PORT" -i "$LAB_KEY"

echo
echo "== hvrun -H $hosts hvrun-allreduce-bench across the hosts, each on its own fabric NIC"
on_host0 "$hvrun" -H "$hosts" -p "$LAB_PORT" -i "$LAB_KEY" "$bench" -b 1K -e 16M -f 16 -n 5 -w 2
