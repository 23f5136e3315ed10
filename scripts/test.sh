#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test with ctest. Lab tests need root and network
# namespaces; without them they say why they skip. Extra arguments go to ctest (e.g. -L lab). When a
# test fails, the failed ones run once more at the end, their output last; the exit status is ctest's.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
# The real Horovod that tests/test_horovod.cpp runs; without its tarball those tests skip, saying why.
"$root/scripts/horovod.sh" || echo "test.sh: Horovod is not installed (see above): the Horovod tests will skip"
build_dir=${BUILD_DIR:-$root/build}
# Tests that need no lab run side by side, one per core (ctest's own variable; a caller's wins); the lab
# cases are RUN_SERIAL and run alone. Each case finds what it left by a marker of its own, never by name.
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$(nproc)}
rc=0
ctest --test-dir "$build_dir" --output-on-failure "$@" || rc=$?
if ((rc != 0)); then
  # A CI log is often read from its tail only: the failed tests run once more, so that their own
  # output, not just their names, ends it. The run has failed whatever they do now.
  echo "test.sh: ctest failed (exit $rc); the failed tests once more, their output at the end of this log:"
  ctest --test-dir "$build_dir" --rerun-failed --output-on-failure || true
  exit "$rc"
fi
