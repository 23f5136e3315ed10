#!/usr/bin/env bash
# Rendezvous store benchmark: set/get/add rates of one client on loopback, the time for 64 ranks
# (threads, each with its own connection) to rendezvous through the store, and the time for a Gloo
# full mesh of 16 ranks to connect through it. Extra arguments go to hvrun-store-bench
# (--ranks N, --ops N, --rounds N, --gloo-ranks N).
#   BUILD_DIR=build scripts/bench_store.sh --ranks 128
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
bench=$build_dir/collectives/hvrun-store-bench
if [[ ! -x $bench ]]; then
  echo "bench_store.sh: $bench is not built; run scripts/setup.sh (or ninja -C $build_dir hvrun-store-bench)" >&2
  exit 1
fi
exec "$bench" --ranks 64 --rounds 5 --gloo-ranks 16 "$@"
