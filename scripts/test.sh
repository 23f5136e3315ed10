#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test with ctest. Lab tests need root and network
# namespaces; without them they say why they skip. Extra arguments go to ctest (e.g. -L lab).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
# The real Horovod that tests/test_horovod.cpp runs; without its tarball those tests skip, saying why.
"$root/scripts/horovod.sh" || echo "test.sh: Horovod is not installed (see above): the Horovod tests will skip"
ctest --test-dir "${BUILD_DIR:-$root/build}" --output-on-failure "$@"
