#!/usr/bin/env bash
# hvrun at scale (issue 14, point 3): launch, probe and teardown on a network-namespace lab
# (scripts/lab.sh, traps in place: docker0 172.17.0.1 everywhere, wlp5s0 reaching nobody, eth9
# dropping packets) of each size in BENCH_SCALE_HOSTS, every host with its own sshd, and on a lab of
# BENCH_SCALE_SIM hosts without sshd whose agents hvrun starts with --rsh-agent
# (scripts/bench/ns_rsh_agent.sh: ip netns exec into the host, no sshd). Root only. scripts/bench.sh
# runs it after its own part; it also runs alone.
#
#   scripts/bench_scale.sh                                        # default: 8 32 64 over SSH, no simulation
#   BENCH_SCALE_HOSTS="8 32 64 256" BENCH_SCALE_SIM=1000 scripts/bench_scale.sh   # the full run (~25 min)
#
# Each size: `lab.sh up N`, then BENCH_SCALE_REPS rounds of, interleaved,
#   ssh  hvrun --verbose -p PORT -i KEY -H h0,h1,...,hN-1 true          (1 slot per host; h0 is local)
#   rsh  hvrun --verbose --rsh-agent ns_rsh_agent.sh -H h0,...,hN-1 true  (same hosts, no SSH)
# (the simulated size: rsh only, with BENCH_SCALE_SIM_ARGS; and one run more with hvrun's defaults,
# reported apart), then one run of each whose ranks print their agent's VmHWM and
# RssAnon (/proc/$PPID/status: a rank's parent is its agent), then `lab.sh down`. Every run starts on
# lab host 0 under scripts/bench/run_timed: wall time fork to exit; hvrun's CPU with its children
# (wait4: its local agent and ranks, `ssh -G` once per distinct ssh config, and with --rsh-agent every agent, all of which
# are its descendants) and without (its own utime+stime); peak RSS (wait4's: the largest of hvrun and
# its children). From hvrun's --verbose timings: connect, agents up, probe, probes sent, teardown.
# The 1-minute load average is taken before and after each size's runs: the figures of a shared
# machine mean little without it.
#
# Environment
#   BUILD_DIR          build directory with cmd/hvrun and cmd/hvrun-agent (default build/)
#   BENCH_SCALE_HOSTS  lab sizes with sshd, 2..256 (default "8 32 64")
#   BENCH_SCALE_SIM    simulated hosts over --rsh-agent, 2..1000; 0: none (default 0)
#   BENCH_SCALE_REPS   rounds per size (default 3); figures are medians
#   BENCH_SCALE_SIM_REPS  rounds of the simulated size (default BENCH_SCALE_REPS; no warm-up run there)
#   BENCH_SCALE_SIM_ARGS  hvrun options for the simulated size (default "--start-timeout 300
#                      --heartbeat-timeout 120": with the defaults, 30 and 20 s, a 1000-host start on 2
#                      cores fails, see docs/BENCHMARKS.md)
#   BENCH_SCALE_SIM_FABRIC  1 (default): the simulated size also gets --network-interface <the fabric's
#                      subnet>, so only the fabric is probed: with every trap NIC probed too, 1000 hosts'
#                      20,000 probes, their ARP and neighbour discovery flooded to the 1000 ports of one
#                      bridge in one kernel, on 2 cores, time out (see docs/BENCHMARKS.md). 0: every NIC.
#   BENCH_SCALE_OUT    markdown file whose "## Scale" section is replaced (default docs/BENCHMARKS.md;
#                      empty: print the table only)
#   BENCH_TIMEOUT      seconds one run may take before it counts as failed (default 300)
#   LAB_PREFIX         (default hvscale), LAB_PORT (default 2222)
# Exit status: 0 when every run ran, 1 when some failed (their stderr is kept in $BENCH_FAIL_DIR,
# default /tmp/hvrun-bench-scale-failed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
[[ $build == /* ]] || build=$PWD/$build
sizes=${BENCH_SCALE_HOSTS-8 32 64}
sim=${BENCH_SCALE_SIM:-0}
read -r -a sim_args <<<"${BENCH_SCALE_SIM_ARGS---start-timeout 300 --heartbeat-timeout 120}"
reps=${BENCH_SCALE_REPS:-3}
sim_reps=${BENCH_SCALE_SIM_REPS:-$reps}
sim_fabric=${BENCH_SCALE_SIM_FABRIC:-1}
out_md=${BENCH_SCALE_OUT-$root/docs/BENCHMARKS.md}
run_timeout=${BENCH_TIMEOUT:-300}
fail_dir=${BENCH_FAIL_DIR:-/tmp/hvrun-bench-scale-failed}
export LAB_PREFIX=${LAB_PREFIX:-hvscale}
unset LAB_DIR LAB_SSHD
lab=$root/scripts/lab.sh
rsh=$root/scripts/bench/ns_rsh_agent.sh
section="## Scale: 8 to 256 lab hosts, 1,000 simulated (issue 14, point 3)"

say() { printf 'bench_scale: %s\n' "$*" >&2; }
die() { printf 'bench_scale: error: %s\n' "$*" >&2; exit 1; }
calc() { awk "BEGIN { $1 }"; }

[[ $(id -u) -eq 0 ]] || die "must run as root (the lab uses network namespaces)"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "BENCH_SCALE_REPS '$reps' must be a positive number"
[[ $sim_reps =~ ^[1-9][0-9]*$ ]] || die "BENCH_SCALE_SIM_REPS '$sim_reps' must be a positive number"
[[ $sim_fabric == [01] ]] || die "BENCH_SCALE_SIM_FABRIC must be 0 or 1"
for n in $sizes; do
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2 || n > 256)); then die "BENCH_SCALE_HOSTS: '$n' is not a host count from 2 to 256"; fi
done
if ! [[ $sim =~ ^[0-9]+$ ]] || ((sim == 1 || sim > 1000)); then die "BENCH_SCALE_SIM '$sim' must be 0 or 2..1000"; fi
# shellcheck source=lib/packages.sh
source "$root/scripts/lib/packages.sh"
# shellcheck source=lib/bench_doc.sh
source "$root/scripts/lib/bench_doc.sh"
ensure_packages bench_scale.sh g++ openssh-server openssh-client iproute2 iptables procps util-linux coreutils
hvrun=$build/cmd/hvrun
[[ -x $hvrun && -x $build/cmd/hvrun-agent ]] || die "hvrun is not built in $build (scripts/setup.sh)"

work=$(mktemp -d /tmp/hvrun-bench-scale.XXXXXX)
home=$work/home
# shellcheck source=lib/lab_bench.sh
source "$root/scripts/lib/lab_bench.sh"
lab_bench_setup "$work" "$lab" bench_scale
# hvrun holds about 4 descriptors per host (its channel, the command's stderr, a wake-up pipe).
ulimit -Sn "$(ulimit -Hn)"

metrics=$work/metrics.tsv # KEY<TAB>VALUE
: >"$metrics"
failures=0
put() { printf '%s\t%s\n' "$1" "$2" >>"$metrics"; }
load1() { cut -d' ' -f1 /proc/loadavg; }

# One hvrun run on lab host 0: TAG KEY N WAY CMD...; records KEY.{wall,cpu,self,rss,connect,...}.
run_hvrun() {
  local tag=$1 key=$2 n=$3 way=$4 f=$work/$1 list i line v name
  shift 4
  list=${H[0]}
  for ((i = 1; i < n; i++)); do list+=",${H[i]}"; done
  # --disable-cache: every launch probes, so that the per-host cost measured includes the probe round.
  local args=(--verbose --disable-cache -H "$list")
  [[ $key == sim.* && $key != *.defaults ]] && args+=("${sim_args[@]}")
  [[ $key == sim.* ]] && ((sim_fabric)) && args+=(--network-interface "$LAB_FABRIC_SUBNET")
  if [[ $way == ssh ]]; then args+=(-p "$LAB_PORT" -i "$LAB_KEY"); else args+=(--rsh-agent "$rsh"); fi
  "$lab" exec 0 env "${lab_bench_unset_lists[@]}" HOME="$home" LAB_DIR="$LAB_DIR" "$timer" "$run_timeout" "$f.res" "$hvrun" "${args[@]}" "$@" \
    </dev/null >"$f.out" 2>"$f.err" || true
  local wall user sys rss rc suser ssys threads
  { read -r wall user sys rss rc && read -r suser ssys && read -r threads; } <"$f.res" 2>/dev/null || rc=125
  if ((rc != 0)); then
    failures=$((failures + 1))
    put "$key.failed" "$rc"
    mkdir -p "$fail_dir"
    cp "$f.err" "$fail_dir/$tag.err" 2>/dev/null || true
    say "FAILED ($rc): $tag: $(grep -v '^$' "$f.err" | tail -n 2 | cut -c1-300 | tr '\n' ' ')"
    return 1
  fi
  put "$key.wall" "$wall"
  put "$key.cpu" "$(calc "print $user + $sys")"
  put "$key.self" "$(calc "print $suser + $ssys")"
  put "$key.rss" "$rss"
  put "$key.threads" "$threads"
  line=$(grep -m1 'timings:' "$f.err" || true)
  for name in connect "agents up" probe teardown total; do
    v=$(sed -nE "s/.*[:,] $name ([0-9]+) ms.*/\1/p" <<<"$line")
    [[ -n $v ]] && put "$key.${name// /_}" "$v"
  done
  v=$(sed -nE 's/.*probes sent ([0-9]+).*/\1/p' <<<"$line")
  [[ -n $v ]] && put "$key.probes" "$v"
  return 0
}

# The agents' memory: each rank prints its agent's VmHWM and RssAnon (kB).
# shellcheck disable=SC2016 # expanded by the rank's shell
mem_cmd=(sh -c 'exec awk "/^(VmHWM|RssAnon)/ { v = v \" \" \$2 } END { print \"agentmem\" v }" /proc/$PPID/status')
run_mem() { # KEY N WAY
  local key=$1 tag=mem-$1
  if run_hvrun "$tag" "$key.memrun" "$2" "$3" "${mem_cmd[@]}"; then
    awk '/agentmem/ { n++; s += $2; sa += $3; if ($2 > m) m = $2; v[n] = $2 }
      END { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
            printf "%d %d %d %d %d\n", n, (n ? v[int((n + 1) / 2)] : 0), m, s, sa }' "$work/$tag.out" | {
      read -r cnt med max sum sum_anon
      put "$key.agents" "$cnt"
      put "$key.agent_med" "$med"
      put "$key.agent_max" "$max"
      put "$key.agent_sum" "$sum"
      put "$key.agent_sum_anon" "$sum_anon"
    }
  fi
}

bench_size() { # N MODE (ssh: lab with sshd, both ways; sim: lab without sshd, rsh only)
  local n=$1 mode=$2 t0 rep ways way k
  say "lab: $n hosts ($mode), load $(load1)"
  t0=${EPOCHREALTIME/[.,]/}
  if [[ $mode == ssh ]]; then
    LAB_SSHD=1 LAB_RECREATE=1 "$lab" up "$n" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "lab up $n failed"; }
    ways=(ssh rsh)
  else
    LAB_SSHD=0 LAB_RECREATE=1 "$lab" up "$n" >"$work/up.log" 2>&1 || { cat "$work/up.log" >&2; die "lab up $n failed"; }
    ways=(rsh)
  fi
  put "$mode.$n.up_ms" "$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))"
  eval "$("$lab" env)"
  read -r -a H <<<"$LAB_HOSTS"
  rm -rf "$home"
  mkdir -p "$home/.ssh"
  chmod 700 "$home" "$home/.ssh"
  put "$mode.$n.load_before" "$(load1)"
  local rounds=$reps
  if [[ $mode == ssh ]]; then
    for way in "${ways[@]}"; do # warm-up: page cache, known_hosts
      run_hvrun "warm-$mode-$n-$way" "$mode.$n.warm" "$n" "$way" true || true
    done
  else
    rounds=$sim_reps
  fi
  for ((rep = 1; rep <= rounds; rep++)); do
    for way in "${ways[@]}"; do
      k="$mode.$n.$way"
      run_hvrun "$k-$rep" "$k" "$n" "$way" true || true
      say "$(printf '[%d/%d] %4d hosts %s: %s' "$rep" "$rounds" "$n" "$way" "$(grep -m1 -o 'timings:.*' "$work/$k-$rep.err" | cut -c1-150 || echo failed)")"
    done
  done
  for way in "${ways[@]}"; do run_mem "$mode.$n.$way" "$n" "$way"; done
  if [[ $mode == sim ]] && ((${#sim_args[@]})); then
    k="$mode.$n.rsh.defaults"
    if run_hvrun "$k" "$k" "$n" rsh true; then
      put "$k.text" "ran with hvrun's defaults too: $(fmt '%.1f s' "$(one "$k.wall") / 1000")"
    else
      put "$k.text" "with hvrun's defaults (no BENCH_SCALE_SIM_ARGS) it failed: $(grep -v 'is up\|timings:\|^$' "$work/$k.err" | head -n 3 | cut -c1-200 | paste -sd'|' | sed 's/|/; /g')"
    fi
  fi
  put "$mode.$n.load_after" "$(load1)"
  t0=${EPOCHREALTIME/[.,]/}
  "$lab" down >"$work/down.log" 2>&1 || { cat "$work/down.log" >&2; die "lab down failed"; }
  put "$mode.$n.down_ms" "$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))"
}

med() { awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$metrics" | sort -g | awk '{ v[NR] = $1 } END {
  if (NR == 0) exit
  if (NR % 2) printf "%.1f", v[(NR + 1) / 2]; else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
one() { awk -F'\t' -v k="$1" '$1 == k { print $2; exit }' "$metrics"; }
count() { awk -F'\t' -v k="$1" '$1 == k { n++ } END { print n + 0 }' "$metrics"; }
fmt() { [[ -n $2 ]] && calc "printf \"$1\", $2" || printf '—'; } # FORMAT VALUE
mib() { [[ -n $1 ]] && calc "printf \"%.1f\", $1 / 1024" || printf '—'; }

settle 300
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for n in $sizes; do bench_size "$n" ssh; done
((sim == 0)) || bench_size "$sim" sim
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the table ----------------------------------------------------------------------------------

smallest=1000000
for n in $sizes; do ((n < smallest)) && smallest=$n; done
rows=()
per_host_wall=() per_host_self=() per_host_rss=() # "MODE.N.WAY value" for the verdicts
for spec in $(for n in $sizes; do echo "ssh:$n"; done; ((sim == 0)) || echo "sim:$sim"); do
  mode=${spec%%:*} n=${spec#*:}
  row_ways=(rsh)
  [[ $mode == ssh ]] && row_ways=(ssh rsh)
  for way in "${row_ways[@]}"; do
    k="$mode.$n.$way"
    ok=$(count "$k.wall") bad=$(count "$k.failed")
    W=$(med "$k.wall") S=$(med "$k.self") C=$(med "$k.cpu") R=$(med "$k.rss")
    wph="" sph=""
    [[ -n $W ]] && wph=$(calc "printf \"%.1f\", $W / $n")
    [[ -n $S ]] && sph=$(calc "printf \"%.2f\", $S / ($n - 1)")
    per_host_wall+=("$k $wph") per_host_self+=("$k $sph")
    # Memory per host beyond the smallest lab's (the same way): what each added host costs, without the
    # process's fixed part, which would make any larger lab look cheaper per host.
    R8=$(med "ssh.$smallest.$way.rss")
    [[ -n $R && -n $R8 && $n -gt $smallest ]] && per_host_rss+=("$k $(calc "printf \"%.1f\", ($R - $R8) / ($n - $smallest)")")
    label="$n"
    [[ $mode == sim ]] && label="$n simulated"
    how="SSH"
    [[ $way == rsh ]] && how="--rsh-agent (ip netns exec)"
    agents="$(mib "$(one "$k.agent_med")") / $(mib "$(one "$k.agent_max")") MiB; Σ $(mib "$(one "$k.agent_sum")") MiB (anon Σ $(mib "$(one "$k.agent_sum_anon")"))"
    [[ -n $(one "$k.agent_med") ]] || agents="—"
    rows+=("| $label | $how | $ok of $((ok + bad)) | $(fmt '%.2f s' "${W:+$W / 1000}") | ${wph:-—} | $(fmt '%.0f' "$S") | ${sph:-—} | $(fmt '%.0f' "$C") | $(mib "$R") | $(fmt '%.0f' "$(med "$k.threads")") | $agents | $(fmt '%.0f' "$(med "$k.probes")") | $(fmt '%.0f' "$(med "$k.probe")") | $(fmt '%.0f' "$(med "$k.connect")") | $(fmt '%.0f' "$(med "$k.teardown")") | $(one "$mode.$n.load_before") → $(one "$mode.$n.load_after") | $(fmt '%.0f s' "$(one "$mode.$n.up_ms") / 1000") / $(fmt '%.1f s' "$(one "$mode.$n.down_ms") / 1000") |")
  done
done

# Targets: the launcher's own CPU and its peak RSS per host at the largest sizes within 1.25x of those at
# 32 hosts, the same way (issue 24); wall per host within 2x (issue 14: there the agents of every host
# share these 2 cores, so it grows with the lab's load, not with the launcher's cost).
lookup() { # KEY LIST...: the value recorded for KEY
  local key=$1 e
  shift
  for e in "$@"; do [[ ${e%% *} == "$key" && -n ${e#* } && ${e#* } != "$key" ]] && { printf '%s' "${e#* }"; return 0; }; done
  return 0
}
verdicts=()
judge() { # WHAT KEY BASEKEY
  local w1 w0 s1 s0 r1 r0 text
  w1=$(lookup "$2" "${per_host_wall[@]}") w0=$(lookup "$3" "${per_host_wall[@]}")
  s1=$(lookup "$2" "${per_host_self[@]}") s0=$(lookup "$3" "${per_host_self[@]}")
  r1=$(lookup "$2" "${per_host_rss[@]}") r0=$(lookup "$3" "${per_host_rss[@]}")
  if [[ -z $w1 || -z $w0 ]]; then verdicts+=("- $1: not measured (a size missing or every run failed)"); return; fi
  if [[ -n $s1 && -n $s0 ]]; then
    text="hvrun's own CPU per remote host $s1 ms vs $s0 ms ($(calc "printf \"%.2f\", $s1 / $s0")×, target ≤ 1.25×): $(calc "print ($s1 <= 1.25 * $s0) ? \"met\" : \"**MISSED**\"")"
  fi
  if [[ -n $r1 && -n $r0 ]]; then
    text+="; peak RSS per added host $r1 KiB vs $r0 KiB ($(calc "printf \"%.2f\", $r1 / $r0")×, target ≤ 1.25×): $(calc "print ($r1 <= 1.25 * $r0) ? \"met\" : \"**MISSED**\"")"
  fi
  text+="; wall per host $w1 ms vs $w0 ms ($(calc "printf \"%.2f\", $w1 / $w0")×, target ≤ 2×): $(calc "print ($w1 <= 2 * $w0) ? \"met\" : \"**MISSED**\"")"
  verdicts+=("- $1: $text")
}
largest=0
for n in $sizes; do ((n > largest)) && largest=$n; done
if ((largest > 32)); then judge "$largest hosts over SSH against 32 over SSH" "ssh.$largest.ssh" "ssh.32.ssh"; fi
if ((sim)); then
  judge "$sim simulated hosts against 32 lab hosts, both over --rsh-agent" "sim.$sim.rsh" "ssh.32.rsh"
  t=$(one "sim.$sim.rsh.defaults.text")
  [[ -z $t ]] || verdicts+=("- $sim simulated hosts: $t")
fi

table=$work/table.md
{
  echo "| hosts | agents started by | runs ok | wall (median) | wall per host (ms) | hvrun's own CPU (ms) | own CPU per remote host (ms) | CPU with children (ms) | peak RSS (MiB) | threads (peak) | agents' VmHWM: median / max; sum | probes sent | probe (ms) | connect (ms) | teardown (ms) | load 1-min before → after | lab up / down |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  printf '%s\n' "${verdicts[@]}"
} >"$table"
echo
cat "$table"
echo

if [[ -n $out_md ]]; then
  sim_note="\`${sim_args[*]}\`"
  if ((sim_fabric)); then sim_note+=" and \`--network-interface\` the fabric's subnet"; fi
  {
    echo "$section"
    echo
    echo "Written by \`scripts/bench_scale.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'). Machine: $(nproc) CPUs"
    echo "($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), kernel $(uname -r), nothing else running (written only below load $BENCH_MAX_LOAD at the start);"
    echo "load average $load_start at the start, $load_end at the end. hvrun $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')."
    echo "Every host, sshd, agent and rank of a lab runs on these cores. BENCH_SCALE_HOSTS=\"$sizes\","
    echo "BENCH_SCALE_SIM=$sim, $reps rounds (SSH and --rsh-agent interleaved; the simulated size $sim_reps, with"
    echo "$sim_note); medians. \`true\` on every"
    echo "host, 1 slot each, from lab host 0 (itself the first host: its agent is local)."
    echo
    cat "$table"
    echo
    echo "- **own CPU**: hvrun's utime+stime alone; **with children**: wait4's, which adds its local agent and"
    echo "  rank, \`ssh -G\` once per distinct ssh config (OpenSSH's reading of ~/.ssh/config), and with --rsh-agent every"
    echo "  wrapper and remote agent (all are hvrun's descendants there). Per remote host: own CPU / (N − 1)."
    echo "- **peak RSS**: wait4's, the largest of hvrun and its children (hvrun itself at these sizes)."
    echo "- **threads**: the most threads hvrun's own process had at once (run_timed samples /proc/PID/status every 5 ms)."
    echo "- **agents' VmHWM**: read by each host's rank from /proc/\$PPID/status in one extra run per row"
    echo "  (anon: RssAnon, the agent's own pages; the rest is the static binary's shared text)."
    echo "- **probe**, **probes sent**, **connect**, **teardown**: hvrun's \`--verbose\` timings (connect: until"
    echo "  every agent has said something; teardown: from the ranks' end to hvrun's)."
    echo "- **--rsh-agent (ip netns exec)**: \`scripts/bench/ns_rsh_agent.sh\`, \`ip netns exec\` + \`nsenter --uts\` into the host, no sshd;"
    echo "  the simulated row is a lab of namespaces without sshd, one per host (see the cost model below)."
  } >"$work/section.md"
  write_section "$out_md" "$section" "$work/section.md"
  say "wrote $out_md"
fi
((failures == 0)) || { say "$failures run(s) failed; logs in $fail_dir"; exit 1; }
