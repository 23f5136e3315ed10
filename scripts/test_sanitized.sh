#!/usr/bin/env bash
# scripts/test.sh under AddressSanitizer and UndefinedBehaviorSanitizer: sets up, builds into
# build-asan/ with -DHVRUN_SANITIZE=ON and runs every test (ctest). Extra arguments go to ctest
# (e.g. -LE lab); the cases that run no hvrun code are left out. A caller's BUILD_DIR wins; a caller's
# CMAKE_ARGS are added after -DHVRUN_SANITIZE=ON.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$root/build-asan}
export CMAKE_ARGS="-DHVRUN_SANITIZE=ON ${CMAKE_ARGS:-}"
# The reference runs of other launchers (the real horovodrun: the elastic reference and the Horovod anchor)
# run no hvrun code, and the [timing] lab cases measure what a slow host costs, over paths other cases run:
# scripts/test.sh runs them (docs/BENCHMARKS.md, "CI time").
exec "$root/scripts/test.sh" -E "Horovod elastic reference|Horovod anchor" -LE timing "$@"
