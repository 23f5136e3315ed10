#!/usr/bin/env bash
# The main job: sets up, then launches 4 local ranks with hvrun, each printing its rank contract.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
hvrun="${BUILD_DIR:-$root/build}/cmd/hvrun"
echo "== hvrun -np 4 -H localhost:4: each rank prints its place in the job"
"$hvrun" -np 4 -H localhost:4 sh -c \
  'echo "rank $HVRUN_RANK/$HVRUN_SIZE local $HVRUN_LOCAL_RANK on $HVRUN_HOSTNAME via $HVRUN_IFACE, master $MASTER_ADDR:$MASTER_PORT"'
