#!/usr/bin/env bash
# Launch time on Docker-like hosts (issue 10, point 7): the same launch on a lab of BENCH_VETH_HOSTS
# hosts with 0, 40 and 200 container veths per host (lab.sh LAB_CONTAINER_VETHS: bridge ports of docker0
# with only an IPv6 link-local address). hvrun skips such NICs before probing, so the veths should cost
# next to nothing. Root only. Prints a markdown table: veths per host, median launch wall time (fork to
# exit of `hvrun -H h0..hN-1 true`, run from lab host 0), its ratio to the run without veths, failures.
#
#   scripts/bench_veths.sh
#   BENCH_VETH_HOSTS=16 BENCH_VETHS="0 40 200" BENCH_REPS=5 scripts/bench_veths.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
hosts=${BENCH_VETH_HOSTS:-16}
veths_list=${BENCH_VETHS:-0 40 200}
reps=${BENCH_REPS:-5}
export LAB_PREFIX=${LAB_PREFIX:-hvveth}
lab=$root/scripts/lab.sh
home=$(mktemp -d /tmp/hvrun-bench-veths.XXXXXX)
trap '"$lab" down >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
mkdir -p "$home/.ssh"
[[ -x $build/cmd/hvrun ]] || { echo "bench_veths: no $build/cmd/hvrun; build first (scripts/setup.sh)" >&2; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "| hosts | container veths per host | launch median (ms) | vs. no veths | failed |"
echo "|---|---|---|---|---|"
base=""
for v in $veths_list; do
  LAB_CONTAINER_VETHS=$v LAB_RECREATE=1 "$lab" up "$hosts" >/dev/null
  rm -f "$home/.ssh/known_hosts" # a new lab has new host keys
  eval "$("$lab" env)"
  list=localhost
  for ((i = 1; i < hosts; i++)); do list+=",${LAB_PREFIX}-h$i"; done
  times=() failed=0
  for ((r = 0; r < reps; r++)); do
    t0=${EPOCHREALTIME/[.,]/}
    if "$lab" exec 0 env HOME="$home" "$build/cmd/hvrun" --disable-cache -p "$LAB_PORT" -i "$LAB_KEY" -H "$list" true \
      >/dev/null 2>"$home/err"; then
      t1=${EPOCHREALTIME/[.,]/}
      times+=($(((t1 - t0) / 1000)))
    else
      failed=$((failed + 1))
      echo "bench_veths: $v veths, run $r failed: $(head -c 300 "$home/err")" >&2
    fi
  done
  med=$( ((${#times[@]})) && printf '%s\n' "${times[@]}" | median || echo "-")
  [[ -n $base || $med == - ]] || base=$med
  ratio=-
  [[ $med == - || -z $base ]] || ratio=$(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
  echo "| $hosts | $v | $med | $ratio | $failed of $reps |"
done
