#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test with ctest. Lab tests need root and network
# namespaces; without them they say why they skip. Extra arguments go to ctest (e.g. -L lab).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure "$@"
