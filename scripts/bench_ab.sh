#!/usr/bin/env bash
# A/B of two hvrun builds on one network-namespace lab (scripts/lab.sh, traps in place), interleaved in
# one run, so that a change's effect on the launch is measured on the same machine, lab and load:
#   for each size N in BENCH_AB_HOSTS: `lab.sh up N`, one warm-up run of each build, then BENCH_AB_REPS
#   rounds, each running A then B (then B then A in the next round, so neither always goes first):
#     hvrun --verbose --disable-cache -p PORT -i KEY -H h0:2,h1:2,...  true   (2 slots per host; h0 is local;
#     every launch probes: the two builds share one HOME, and a build before the probe cache always probed)
#   from lab host 0 under scripts/bench/run_timed. Root only. Not part of ctest.
#
#   scripts/bench_ab.sh A_DIR B_DIR      # each holds hvrun and hvrun-agent (a build's cmd/, or a copy)
#   BENCH_AB_HOSTS="8 32" BENCH_AB_REPS=5 scripts/bench_ab.sh /tmp/before build/cmd
#
# Prints a markdown table: per size and build the medians of wall time, hvrun's CPU with its children
# (its local agent and ranks, `ssh -G`), hvrun's own CPU, peak RSS, and hvrun's --verbose phases
# (connect, agents up, probe), with B/A ratios; the 1-minute load average before and after each size.
# Environment: BENCH_AB_HOSTS (default "8 32"), BENCH_AB_REPS (default 5), BENCH_AB_SLOTS (default 2),
# BENCH_TIMEOUT (seconds per run, default 180), LAB_PREFIX (default hvab), LAB_PORT (default 2222),
# BENCH_AB_SETTLE (default 1.5): before each round the 1-minute load average must fall below it (at most
# 5 minutes; a lab of 32 hosts raises it while its sshds start, and back-to-back runs raise it themselves),
# so that every figure is taken on a quiet machine; the highest load a round started at is printed.
# Exit status: 0 when every run ran, 1 when some failed (each failure's stderr tail is printed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
a_dir=$(cd "${1:?usage: bench_ab.sh A_DIR B_DIR}" && pwd)
b_dir=$(cd "${2:?usage: bench_ab.sh A_DIR B_DIR}" && pwd)
sizes=${BENCH_AB_HOSTS:-8 32}
reps=${BENCH_AB_REPS:-5}
slots=${BENCH_AB_SLOTS:-2}
settle_below=${BENCH_AB_SETTLE:-1.5}
run_timeout=${BENCH_TIMEOUT:-180}
export LAB_PREFIX=${LAB_PREFIX:-hvab} LAB_PORT=${LAB_PORT:-2222}
lab=$root/scripts/lab.sh

say() { printf 'bench_ab: %s\n' "$*" >&2; }
die() { printf 'bench_ab: error: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root (the lab uses network namespaces)"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "BENCH_AB_REPS '$reps' must be a positive number"
[[ $slots =~ ^[1-9][0-9]*$ ]] || die "BENCH_AB_SLOTS '$slots' must be a positive number"
for n in $sizes; do
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2 || n > 64)); then die "BENCH_AB_HOSTS: '$n' is not a host count from 2 to 64"; fi
done
for d in "$a_dir" "$b_dir"; do
  [[ -x $d/hvrun && -x $d/hvrun-agent ]] || die "$d must hold hvrun and hvrun-agent (a build's cmd/ folder)"
done

work=$(mktemp -d /tmp/hvrun-bench-ab.XXXXXX)
home=$work/home
# shellcheck source=lib/lab_bench.sh
source "$root/scripts/lib/lab_bench.sh"
lab_bench_setup "$work" "$lab" bench_ab

metrics=$work/metrics.tsv # KEY<TAB>VALUE
: >"$metrics"
failures=0
put() { printf '%s\t%s\n' "$1" "$2" >>"$metrics"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
# Waits (at most 300 s) until the 1-minute load average is below $settle_below; records the load the
# round starts at, so that the highest one can be printed with the size's rows.
settle() { # KEY
  local waited=0
  while awk "BEGIN { exit !($(load1) >= $settle_below) }" && ((waited < 300)); do
    sleep 5
    waited=$((waited + 5))
  done
  put "$1.load" "$(load1)"
}
maxof() { awk -F'\t' -v k="$1" '$1 == k && $2 > m { m = $2 } END { printf "%s", m }' "$metrics"; }

run_one() { # TAG KEY DIR N
  local tag=$1 key=$2 dir=$3 n=$4 f=$work/$1 list i line v name
  list=${H[0]}:$slots
  for ((i = 1; i < n; i++)); do list+=",${H[i]}:$slots"; done
  "$lab" exec 0 env HOME="$home" LAB_DIR="$LAB_DIR" "$timer" "$run_timeout" "$f.res" "$dir/hvrun" --verbose --disable-cache \
    -p "$LAB_PORT" -i "$LAB_KEY" -H "$list" true </dev/null >"$f.out" 2>"$f.err" || true
  local wall user sys rss rc suser ssys threads
  { read -r wall user sys rss rc && read -r suser ssys && read -r threads; } <"$f.res" 2>/dev/null || rc=125
  if ((rc != 0)); then
    failures=$((failures + 1))
    say "FAILED ($rc): $tag: $(grep -v '^$' "$f.err" | tail -n 2 | cut -c1-300 | tr '\n' ' ')"
    return 1
  fi
  put "$key.wall" "$wall"
  put "$key.cpu" "$(awk "BEGIN { print $user + $sys }")"
  put "$key.self" "$(awk "BEGIN { print $suser + $ssys }")"
  put "$key.rss" "$rss"
  line=$(grep -m1 'timings:' "$f.err" || true)
  for name in connect "agents up" probe; do
    v=$(sed -nE "s/.*[:,] $name ([0-9]+) ms.*/\1/p" <<<"$line")
    [[ -n $v ]] && put "$key.${name// /_}" "$v"
  done
  return 0
}

med() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$metrics" | sort -g | awk '{ v[NR] = $1 } END {
  if (NR == 0) exit
  if (NR % 2) printf "%.0f", v[(NR + 1) / 2]; else printf "%.0f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { [[ -n $1 && -n $2 && $1 != 0 ]] && awk "BEGIN { printf \"%.2f\", $2 / $1 }" || printf '—'; }

rows=()
for n in $sizes; do
  say "lab: $n hosts, load $(load1)"
  LAB_SSHD=1 LAB_RECREATE=1 "$lab" up "$n" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "lab up $n failed"; }
  eval "$("$lab" env)"
  read -r -a H <<<"$LAB_HOSTS"
  rm -rf "$home"
  mkdir -p "$home/.ssh"
  chmod 700 "$home" "$home/.ssh"
  load_before=$(load1)
  run_one "warm-a-$n" "warm.$n.a" "$a_dir" "$n" || true
  run_one "warm-b-$n" "warm.$n.b" "$b_dir" "$n" || true
  for ((rep = 1; rep <= reps; rep++)); do
    settle "$n"
    order=(a b)
    ((rep % 2)) || order=(b a)
    for which in "${order[@]}"; do
      dir=$a_dir
      [[ $which == b ]] && dir=$b_dir
      run_one "$n-$which-$rep" "$n.$which" "$dir" "$n" || true
      say "[$rep/$reps] $n hosts $which: $(grep -m1 -o 'timings:.*' "$work/$n-$which-$rep.err" | cut -c1-120 || echo failed)"
    done
  done
  load_after=$(load1)
  "$lab" down >"$work/down.log" 2>&1 || { cat "$work/down.log" >&2; die "lab down failed"; }
  for which in a b; do
    k=$n.$which
    say "$n hosts $which, every wall time (ms): $(awk -F'\t' -v k="$k.wall" '$1 == k { printf "%s ", $2 }' "$metrics")"
    rows+=("| $n x $slots | $which | $(med "$k.wall") | $(med "$k.cpu") | $(med "$k.self") | $(med "$k.rss") | $(med "$k.connect") | $(med "$k.agents_up") | $(med "$k.probe") | $load_before → $load_after (rounds began at ≤ $(maxof "$n.load")) |")
  done
  rows+=("| $n x $slots | B/A | $(ratio "$(med "$n.a.wall")" "$(med "$n.b.wall")") | $(ratio "$(med "$n.a.cpu")" "$(med "$n.b.cpu")") | $(ratio "$(med "$n.a.self")" "$(med "$n.b.self")") | $(ratio "$(med "$n.a.rss")" "$(med "$n.b.rss")") | | | | |")
done

echo "A: $a_dir"
echo "B: $b_dir"
echo "$reps rounds, interleaved (A then B, then B then A), medians; \`true\` on every host, from lab host 0; $(nproc) cores, $(uname -r)"
echo
echo "| hosts x slots | build | wall ms | CPU with children ms | own CPU ms | peak RSS kB | connect ms | agents up ms | probe ms | load (1 min) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
((failures == 0)) || { say "$failures runs failed"; exit 1; }
