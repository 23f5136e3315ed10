#!/usr/bin/env bash
# What the agents' observation of the ranks costs (issue 40: at most 1 % of a rank's CPU, no step time):
# the same torch DDP job (tests/faults/ddp_steps.py: each step some CPU work, then a 4 MiB allreduce over
# Gloo) on this machine, with the observation (default) and without (--no-straggler-watch), interleaved
# in one run (A B, then B A, ...), so both see the same machine and load.
#
#   scripts/bench_observe.sh [HVRUN]        # default: build/cmd/hvrun
#   BENCH_OBS_RANKS=2 BENCH_OBS_STEPS=300 BENCH_OBS_WORK=100000 BENCH_OBS_REPS=5
#
# Per run: wall time; rank 0's mean step time (its own clock); the CPU of the whole run (hvrun, its local
# agent and the ranks: wait4 through scripts/bench/run_timed) and the ranks' own CPU (wait4 at their exit,
# from --events); the rest is hvrun's and its agent's. Prints a markdown table of medians with the
# observation's cost as a share of the ranks' CPU, and the 1-minute load average before each round (a
# figure taken above load 2 is not a measurement). BENCH_OBS_SETTLE (default 1.5): before each run the
# 1-minute load average must fall below it (at most 5 minutes; the runs raise it themselves: two ranks
# keep both cores busy). Needs Debian's python3-torch. Not part of ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hvrun=${1:-$root/build/cmd/hvrun}
ranks=${BENCH_OBS_RANKS:-2}
steps=${BENCH_OBS_STEPS:-300}
work=${BENCH_OBS_WORK:-100000}
reps=${BENCH_OBS_REPS:-5}
settle=${BENCH_OBS_SETTLE:-1.5}
python=/usr/bin/python3
[[ -x $hvrun ]] || { echo "bench_observe: no hvrun at $hvrun" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || { echo "bench_observe: $python has no torch (apt install python3-torch)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/hvrun-bench-observe.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
timer=$tmp/run_timed
g++ -std=c++20 -O2 "$root/scripts/bench/run_timed.cpp" -o "$timer"

# One run: VARIANT (on, off) ROUND -> a line "variant wall_s step_ms total_cpu_s ranks_cpu_s load".
one() {
  local variant=$1 round=$2 flags=() load
  [[ $variant == off ]] && flags=(--no-straggler-watch)
  for ((waited = 0; waited < 300; waited += 5)); do
    awk -v l="$(cut -d' ' -f1 /proc/loadavg)" -v s="$settle" 'BEGIN{exit !(l < s)}' && break
    sleep 5
  done
  load=$(cut -d' ' -f1 /proc/loadavg)
  local events=$tmp/events.$variant.$round out=$tmp/out.$variant.$round
  "$timer" 600 "$tmp/t.$variant.$round" "$hvrun" -np "$ranks" -H "localhost:$ranks" -x OMP_NUM_THREADS=1 \
    --events "$events" "${flags[@]}" "$python" "$root/tests/faults/ddp_steps.py" "$steps" "$work" >"$out" 2>&1 ||
    { echo "bench_observe: a $variant run failed:" >&2; tail -n 20 "$out" >&2; exit 1; }
  read -r wall_ms user_ms sys_ms _ <"$tmp/t.$variant.$round"
  local step_ms ranks_cpu
  step_ms=$(sed -n 's/.*DDP done rank=0 steps=[0-9]* step_ms=\([0-9.]*\).*/\1/p' "$out")
  ranks_cpu=$("$python" -c 'import json,sys
print(sum(json.loads(l)["cpu_s"] for l in open(sys.argv[1]) if json.loads(l)["event"] == "rank_exit"))' "$events")
  echo "$variant $(awk -v w="$wall_ms" 'BEGIN{printf "%.3f", w/1000}') $step_ms $(awk -v u="$user_ms" -v s="$sys_ms" 'BEGIN{printf "%.3f", (u+s)/1000}') $ranks_cpu $load"
}

results=$tmp/results
: >"$results"
one on 0 >/dev/null; one off 0 >/dev/null  # warm-up: page cache, torch's import
for ((i = 1; i <= reps; i++)); do
  if ((i % 2)); then order=(on off); else order=(off on); fi
  for v in "${order[@]}"; do
    line=$(one "$v" "$i")
    echo "bench_observe: round $i: $line" >&2
    echo "$line" >>"$results"
  done
done

"$python" - "$results" "$ranks" "$steps" "$work" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ranks, steps, work = sys.argv[2], sys.argv[3], sys.argv[4]
def med(v, k): return statistics.median(float(r[k]) for r in rows if r[0] == v)
print(f"torch DDP, {ranks} ranks on this host, {steps} steps of {work} iterations and a 4 MiB allreduce; "
      f"medians of {sum(r[0] == 'on' for r in rows)} interleaved runs each; load before each round: "
      f"{min(float(r[5]) for r in rows):.2f} to {max(float(r[5]) for r in rows):.2f}")
print()
print("| | observed (default) | --no-straggler-watch | ratio |")
print("|---|---|---|---|")
for name, k in (("wall (s)", 1), ("rank 0's step (ms)", 2), ("CPU of the whole run (s)", 3), ("the ranks' CPU (s)", 4)):
    a, b = med("on", k), med("off", k)
    print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.3f} |")
rest_on = med("on", 3) - med("on", 4)
rest_off = med("off", 3) - med("off", 4)
ranks_cpu = med("on", 4)
print(f"| hvrun and its agent (s) | {rest_on:.3f} | {rest_off:.3f} | |")
print()
print(f"observation's cost: {rest_on - rest_off:.3f} s of CPU in the agent over the run, "
      f"{100 * (rest_on - rest_off) / ranks_cpu:.2f} % of the ranks' CPU")
PY
