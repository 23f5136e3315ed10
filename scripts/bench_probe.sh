#!/usr/bin/env bash
# The probe phase before and after the bounded probe set (issue 14, point 1): on the trap lab
# (scripts/lab.sh: docker0 172.17.0.1 everywhere, wlp5s0 reaching nobody, eth9 dropping packets) of
# each size in BENCH_PROBE_HOSTS, `hvrun --verbose -H h0..hN-1 true` run from lab host 0 with
# `--probe-peers 0` (all pairs: what every launch did before) and with the default bounded set, the runs
# interleaved. Figures are medians of hvrun's own --verbose timings ("probe N ms, probes sent M") and of
# the wall time (fork to exit). Root only. Prints a markdown table.
#
#   scripts/bench_probe.sh
#   BENCH_PROBE_HOSTS="8 32 64" BENCH_REPS=1 scripts/bench_probe.sh
#
# The kernel's neighbour tables (one for all namespaces) are raised for the run as scripts/bench.sh does,
# and restored on exit.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
sizes=${BENCH_PROBE_HOSTS:-8 32 64}
reps=${BENCH_REPS:-3}
export LAB_PREFIX=${LAB_PREFIX:-hvprobe}
lab=$root/scripts/lab.sh
home=$(mktemp -d /tmp/hvrun-bench-probe.XXXXXX)
[[ -x $build/cmd/hvrun ]] || { echo "bench_probe: no $build/cmd/hvrun; build first (scripts/setup.sh)" >&2; exit 1; }

neigh_keys=() neigh_old=()
for fam in ipv4 ipv6; do
  for t in 1:4096 2:16384 3:32768; do
    key=net.$fam.neigh.default.gc_thresh${t%%:*}
    old=$(sysctl -n "$key" 2>/dev/null) || continue
    if ((old < ${t#*:})); then
      neigh_keys+=("$key") neigh_old+=("$old")
      sysctl -qw "$key=${t#*:}"
    fi
  done
done
cleanup() {
  "$lab" down >/dev/null 2>&1 || true
  rm -rf "$home"
  local i
  for i in "${!neigh_keys[@]}"; do sysctl -qw "${neigh_keys[i]}=${neigh_old[i]}" || true; done
}
trap cleanup EXIT
mkdir -p "$home/.ssh"

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One run: appends "probe_ms probes wall_ms" to $home/MODE.N, or counts a failure.
run_once() { # N MODE LIST ARGS...
  local n=$1 mode=$2 list=$3 t0 t1 line probe sent
  shift 3
  t0=${EPOCHREALTIME/[.,]/}
  if "$lab" exec 0 env HOME="$home" "$build/cmd/hvrun" --verbose --disable-cache -p "$LAB_PORT" -i "$LAB_KEY" "$@" -H "$list" true \
    >/dev/null 2>"$home/err"; then
    t1=${EPOCHREALTIME/[.,]/}
    line=$(grep -m1 'timings:' "$home/err")
    probe=$(sed -E 's/.* probe ([0-9]+) ms.*/\1/' <<<"$line")
    sent=$(sed -E 's/.*probes sent ([0-9]+).*/\1/' <<<"$line")
    echo "$probe $sent $(((t1 - t0) / 1000))" >>"$home/$mode.$n"
  else
    echo "fail" >>"$home/$mode.$n"
    echo "bench_probe: $n hosts, $mode failed: $(tail -c 400 "$home/err")" >&2
  fi
}

echo "| hosts | probing | probes sent | probe phase median (ms) | launch wall median (ms) | failed |"
echo "|---|---|---|---|---|---|"
for n in $sizes; do
  LAB_RECREATE=1 "$lab" up "$n" >/dev/null
  rm -f "$home/.ssh/known_hosts" # a new lab has new host keys
  eval "$("$lab" env)"
  list=localhost
  for ((i = 1; i < n; i++)); do list+=",${LAB_PREFIX}-h$i"; done
  for ((r = 0; r < reps; r++)); do
    run_once "$n" all "$list" --probe-peers 0
    run_once "$n" bounded "$list"
  done
  for mode in all bounded; do
    f=$home/$mode.$n
    ok=$(grep -v fail "$f" || true)
    failed=$(grep -c fail "$f" || true)
    label="all pairs (before, --probe-peers 0)"
    [[ $mode == all ]] || label="bounded (default --probe-peers 4)"
    echo "| $n | $label | $(awk '{print $2}' <<<"$ok" | median) | $(awk '{print $1}' <<<"$ok" | median) |" \
      "$(awk '{print $3}' <<<"$ok" | median) | $failed of $reps |"
  done
  "$lab" down >/dev/null
done
