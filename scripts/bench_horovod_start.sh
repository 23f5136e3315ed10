#!/usr/bin/env bash
# A Horovod job's start, three ways side by side on one lab (scripts/lab.sh up 4, every host's fabric NIC
# named eth1, since horovodrun takes one --network-interface for all hosts), interleaved in one run:
# hvrun, the real horovodrun, and the ranks started by hand beside Horovod's own rendezvous server (no
# launcher: the floor). The program (scripts/bench/horovod_start_rank.py) imports torch and
# horovod.torch, calls hvd.init() and makes one allreduce, on lab hosts 1-3 with SLOTS ranks each; the
# launchers run on host 0 (scripts/bench/horovod_start.py says what each figure is).
# Root only; needs the real Horovod (scripts/horovod.sh). Not part of ctest.
#
#   scripts/bench_horovod_start.sh                 # BENCH_HVSTART_REPS rounds (default 5), 2 slots per host
#   BENCH_HVSTART_DOC=docs/BENCHMARKS.md scripts/bench_horovod_start.sh   # also write that section (quiet machine only)
#   BENCH_HVSTART_LOGS=/tmp/logs                   # keep each run's output there
#
# Exit status: 0 when every run gave its figures, 1 otherwise (each failure's reason is printed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${BENCH_HVSTART_REPS:-5}
slots=${BENCH_HVSTART_SLOTS:-2}
run_timeout=${BENCH_TIMEOUT:-180}
export LAB_PREFIX=${LAB_PREFIX:-hvbs} LAB_PORT=${LAB_PORT:-2222}
lab=$root/scripts/lab.sh
python=/usr/bin/python3
site=${HOROVOD_SITE:-/opt/horovod/site}
hvrun=${HVRUN:-$root/build/cmd/hvrun}

say() { printf 'bench_horovod_start: %s\n' "$*" >&2; }
die() { printf 'bench_horovod_start: error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (the lab uses network namespaces)"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "BENCH_HVSTART_REPS '$reps' must be a positive number"
[[ $slots =~ ^[1-9][0-9]*$ ]] || die "BENCH_HVSTART_SLOTS '$slots' must be a positive number"
[[ -x $hvrun && -x $(dirname "$hvrun")/hvrun-agent ]] || die "no hvrun and hvrun-agent at $hvrun (build first, or set HVRUN)"
[[ -f $site/horovod/__init__.py ]] || die "no Horovod under $site: run scripts/horovod.sh"

# shellcheck source=lib/bench_doc.sh
source "$root/scripts/lib/bench_doc.sh"
note_load
work=$(mktemp -d /tmp/hvrun-bench-hvstart.XXXXXX)
# shellcheck source=lib/lab_bench.sh
source "$root/scripts/lib/lab_bench.sh"
lab_bench_setup "$work" "$lab" bench_horovod_start

lab_bench_horovod_lab 4

"$python" - "$work/config.json" <<PY
import json, sys
json.dump({"lab": "$lab", "hosts": "$LAB_HOSTS".split(), "port": "$LAB_PORT", "key": "$LAB_KEY", "home": "$home",
           "hvrun": "$hvrun", "python": "$python", "site": "$site",
           "rank_program": "$root/scripts/bench/horovod_start_rank.py", "slots": $slots, "reps": $reps,
           "timeout": $run_timeout, "iface": "eth1", "rendezvous_addr": "10.77.0.10", "work": "$work"},
          open(sys.argv[1], "w"))
PY

load_before=$(cut -d' ' -f1 /proc/loadavg)
status=0
"$python" "$root/scripts/bench/horovod_start.py" "$work/config.json" >"$work/table.md" || status=1
load_after=$(cut -d' ' -f1 /proc/loadavg)
if [[ -n ${BENCH_HVSTART_LOGS:-} ]]; then  # each run's output, kept (the work folder goes at the exit)
  mkdir -p "$BENCH_HVSTART_LOGS" && cp "$work"/*.log "$BENCH_HVSTART_LOGS/" 2>/dev/null || true
fi

heading="## Horovod start: hvrun, horovodrun and the ranks started by hand (issue 24)"
section=$work/section.md
{
  echo "$heading"
  echo
  echo "\`scripts/bench_horovod_start.sh\`: scripts/bench/horovod_start_rank.py (import torch and horovod.torch,"
  echo "hvd.init(), one allreduce) as $((slots * 3)) ranks on lab hosts 1-3 ($slots each), started from host 0 by hvrun, by the"
  echo "real horovodrun (--gloo --network-interface eth1), and by hand (every rank at once in its namespace,"
  echo "Horovod's own RendezvousServer already up); $reps rounds interleaved; seconds from the start, median (min-max);"
  echo "$(nproc) cores, $(uname -r); load average $load_before before, $load_after after."
  echo
  cat "$work/table.md"
} >"$section"
cat "$section"
if [[ -n ${BENCH_HVSTART_DOC:-} ]] && ((status == 0)); then
  write_section "$BENCH_HVSTART_DOC" "$heading" "$section" && say "written to $BENCH_HVSTART_DOC"
fi
exit "$status"
