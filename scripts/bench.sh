#!/usr/bin/env bash
# Launch, probe and memory benchmarks of hvrun against Open MPI's mpirun and the bare parallel-ssh
# floor, on a network-namespace lab (scripts/lab.sh) with its traps in place (docker0 172.17.0.1 on
# every host, wlp5s0 reaching nobody, eth9 dropping packets). Root only.
#
# Prints one markdown table and writes it, with the machine and the date, to docs/BENCHMARKS.md as the
# section "## Launch, probe, memory" (replaced if there, else appended; other sections are kept).
#
#   scripts/bench.sh                                  # 2 4 8 16 32 hosts, 5 repetitions, then scale 8 32 64
#   BENCH_HOSTS="2 4 8" BENCH_REPS=3 scripts/bench.sh # a quicker one
#   BENCH_SCALE_HOSTS="8 32 64 256" BENCH_SCALE_SIM=1000 scripts/bench.sh   # with the issue's full scale run
#   BENCH_ONLY=scale BENCH_SCALE_HOSTS="8 32 64 256" BENCH_SCALE_SIM=1000 scripts/bench.sh   # only that
#
# What it measures, all from lab host 0 (itself one of the hosts, as a user's own machine would be):
# - launch: `true` and `hostname` on N hosts x 2 slots for each N in BENCH_HOSTS, and on the largest N
#   x 1 slot: hvrun (automatic NIC probing), mpirun (told the fabric subnet with btl/oob_tcp_if_include,
#   ssh options through plm_rsh_args) and ssh_floor (scripts/bench/ssh_floor.cpp: one libssh session per
#   remote host in parallel threads, running `true`). Repetitions are interleaved: each repetition runs
#   every case once, hvrun, mpirun, floor in turn. Figures are medians of the wall time of the whole
#   process (fork to exit, measured inside host 0's namespace by scripts/bench/run_timed.cpp). Failed
#   runs are counted and shown, not hidden; their logs are kept in BENCH_FAIL_DIR.
# - the kernel's neighbour tables (ARP and NDP) are one for all namespaces, with room for 1024 entries by
#   default (gc_thresh3): far less than a 32-host lab needs (each host holds entries for its peers on
#   every NIC, as it would in its own kernel on a real cluster). The script raises gc_thresh1/2/3 for
#   the run and restores them on exit; as a diagnostic it also runs the largest case once more per
#   repetition with the original values, from empty neighbour caches.
# - probe: hvrun --verbose's "probe" phase at 8 hosts with every NIC (eth9 drops, wlp5s0 reaches nobody),
#   without the dropping NIC (^eth9), without both silent NICs (^eth9,wlp5s0), with only the fabric subnet,
#   and under --check-only (which waits for every probe).
# - rendezvous: collectives/hvrun-store-bench (set/get rates of one client, 64-rank rendezvous).
# - memory: peak RSS of hvrun (wait4's maxrss) and VmHWM of the agents (each rank reads /proc/$PPID/status:
#   a rank's parent is its host's agent) at 8 and 32 hosts.
# - CPU: user+sys of hvrun per launch at 8 hosts, as wait4 counts it (with its local agent and
#   the 2 local ranks), and of hvrun alone (31 remote hosts h1..h31 when the lab has 32, else 8; no local agent); and for every
#   launch case the CPU of the remote side (all lab sshd listeners' cutime+cstime growth).
# - scale: then scripts/bench_scale.sh on labs of its own (section "## Scale" of the same file): launch,
#   probe and teardown of `true` on every host, 1 slot each, over SSH and over --rsh-agent, at each lab
#   size in BENCH_SCALE_HOSTS, and on BENCH_SCALE_SIM hosts without sshd (agents started by entering the
#   namespaces): wall time, hvrun's own CPU and with its children, peak RSS, the agents' VmHWM, probes
#   sent, the phases. THE DEFAULT RUN IS SMALLER than issue 14's: BENCH_SCALE_HOSTS="8 32 64" and no
#   simulation (a few minutes); the full one is BENCH_SCALE_HOSTS="8 32 64 256" BENCH_SCALE_SIM=1000
#   (about 25 minutes on 2 cores, 3 GB of memory for the 1000 namespaces). Not part of ctest.
#
# Environment
#   BUILD_DIR      build directory with cmd/hvrun (default: build/; built by scripts/setup.sh if missing)
#   BENCH_HOSTS    host counts (default "2 4 8 16 32"; each 2..64; issue 14's targets: "8 32 64")
#   BENCH_REPS     repetitions of every case (default 5)
#   BENCH_OUT      the markdown file (default docs/BENCHMARKS.md)
#   BENCH_TIMEOUT  seconds one run may take before it counts as failed (default 180)
#   BENCH_FAIL_DIR where the stderr and stdout of failed runs are kept (default /tmp/hvrun-bench-failed)
#   LAB_PREFIX     lab name (default hvbench, apart from the tests' hvtest); LAB_PORT (default 2222)
#   BENCH_SCALE_HOSTS  scale part's lab sizes over SSH, 2..256 (default "8 32 64"; empty: none)
#   BENCH_SCALE_SIM    scale part's simulated hosts over --rsh-agent, 2..1000 (default 0: none)
#   BENCH_SCALE_REPS   its rounds (default 3); more knobs in scripts/bench_scale.sh's header
#   BENCH_ONLY     "scale": run only the scale part
# Exit status: 0 when every run ran (targets missed or not), 1 when some run failed or could not start.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
[[ $build == /* ]] || build=$PWD/$build
hosts_list=${BENCH_HOSTS:-2 4 8 16 32}
reps=${BENCH_REPS:-5}
out_md=${BENCH_OUT:-$root/docs/BENCHMARKS.md}
run_timeout=${BENCH_TIMEOUT:-180}
fail_dir=${BENCH_FAIL_DIR:-/tmp/hvrun-bench-failed}
export LAB_PREFIX=${LAB_PREFIX:-hvbench} # not hvtest: the lab tests use that one
lab=$root/scripts/lab.sh
section="## Launch, probe, memory"

say() { printf 'bench: %s\n' "$*" >&2; }
calc() { awk "BEGIN { $1 }"; } # runs an awk program that prints a result
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

# ---- arguments and prerequisites ----------------------------------------------------------------

[[ $(id -u) -eq 0 ]] || die "must run as root (the lab uses network namespaces)"
export BENCH_SCALE_OUT=${BENCH_SCALE_OUT-$out_md} BENCH_SCALE_HOSTS=${BENCH_SCALE_HOSTS-8 32 64}
if [[ ${BENCH_ONLY:-} == scale ]]; then LAB_PREFIX=hvscale exec "$root/scripts/bench_scale.sh"; fi
[[ -z ${BENCH_ONLY:-} ]] || die "BENCH_ONLY '$BENCH_ONLY': only 'scale' is known"
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPS '$reps' must be a positive number"
[[ $run_timeout =~ ^[1-9][0-9]*$ ]] || die "BENCH_TIMEOUT '$run_timeout' must be a positive number of seconds"
read -r -a counts <<<"$hosts_list"
((${#counts[@]} > 0)) || die "BENCH_HOSTS is empty"
nmax=0
for n in "${counts[@]}"; do
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2 || n > 64)); then die "BENCH_HOSTS: '$n' is not a host count from 2 to 64"; fi
  if ((n > nmax)); then nmax=$n; fi
done
((reps >= 5)) || say "note: BENCH_REPS=$reps; the figures are medians of fewer than 5 runs"

bench_packages=(
  openmpi-bin libopenmpi-dev # the mpirun contender
  g++ libssh-dev libssl-dev  # ssh_floor, run_timed, rss_floor
  # the lab (scripts/lab.sh) and the tools used here
  openssh-server openssh-client iproute2 iptables procps util-linux coreutils
)
# shellcheck source=lib/packages.sh
source "$root/scripts/lib/packages.sh"
# shellcheck source=lib/bench_doc.sh
source "$root/scripts/lib/bench_doc.sh"
# shellcheck source=lib/lab_bench.sh
source "$root/scripts/lib/lab_bench.sh" # lab_bench_unset_lists only
ensure_packages bench.sh "${bench_packages[@]}"
ensure_built bench.sh "$build" cmd/hvrun cmd/hvrun-agent collectives/hvrun-store-bench
hvrun=$build/cmd/hvrun
store_bench=$build/collectives/hvrun-store-bench

work=$(mktemp -d /tmp/hvrun-bench.XXXXXX)
home=$work/home # HOME on host 0: a fresh ~/.ssh (hvrun records the lab's host keys there)
mkdir -p "$home/.ssh" "$work/runs"
chmod 700 "$home" "$home/.ssh"
lab_up=0
neigh_touched=0
cleanup() {
  local rc=$?
  if ((neigh_touched)); then neigh_set old; fi
  if ((lab_up)); then "$lab" down >/dev/null 2>&1 || say "warning: '$lab down' failed; run LAB_PREFIX=$LAB_PREFIX $lab down"; fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

floor=$work/ssh_floor
timer=$work/run_timed
g++ -std=c++20 -O2 -pthread "$root/scripts/bench/ssh_floor.cpp" -o "$floor" -lssh || die "cannot compile ssh_floor"
g++ -std=c++20 -O2 "$root/scripts/bench/run_timed.cpp" -o "$timer" || die "cannot compile run_timed"
rss_floor=$work/rss_floor
g++ -std=c++20 -O2 "$root/scripts/bench/rss_floor.cpp" -o "$rss_floor" -lcrypto || die "cannot compile rss_floor"

# ---- the kernel's neighbour tables -------------------------------------------------------------

neigh_keys=() neigh_old=() neigh_new=()
for fam in ipv4 ipv6; do
  for t in 1:4096 2:16384 3:32768; do
    key=net.$fam.neigh.default.gc_thresh${t%%:*}
    old=$(sysctl -n "$key" 2>/dev/null) || continue
    neigh_keys+=("$key") neigh_old+=("$old") neigh_new+=("$((old > ${t#*:} ? old : ${t#*:}))")
  done
done
neigh_set() { # old|new
  local i v
  for i in "${!neigh_keys[@]}"; do
    if [[ $1 == old ]]; then v=${neigh_old[i]}; else v=${neigh_new[i]}; fi
    sysctl -qw "${neigh_keys[i]}=$v" || say "warning: cannot set ${neigh_keys[i]}=$v"
  done
}
neigh_changed=0
for i in "${!neigh_keys[@]}"; do
  if ((neigh_new[i] != neigh_old[i])); then neigh_changed=1; fi
done
neigh_thresh3_old=$(sysctl -n net.ipv4.neigh.default.gc_thresh3 2>/dev/null || echo '?')
if ((neigh_changed)); then
  say "raising the kernel's neighbour tables for the run (restored on exit)"
  neigh_touched=1
  neigh_set new
fi

# ---- the lab ------------------------------------------------------------------------------------

settle 300
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
say "lab: $nmax hosts (LAB_PREFIX=$LAB_PREFIX)"
lab_up=1
LAB_RECREATE=1 "$lab" up "$nmax" >"$work/lab-up.log" 2>&1 || { cat "$work/lab-up.log" >&2; die "lab up $nmax failed"; }
eval "$("$lab" env)"
read -r -a H <<<"$LAB_HOSTS"
sshd_pids=()
for ((i = 0; i < nmax; i++)); do sshd_pids+=("$(<"$LAB_DIR/h$i/sshd.pid")"); done
sshd_list=$(IFS=,; echo "${sshd_pids[*]}")
# Open MPI's ssh: the lab's port and key, no prompts, no known_hosts (it has no option of its own).
mpi_ssh_args="-p $LAB_PORT -i $LAB_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
clk_tck=$(getconf CLK_TCK)

neigh_flush() { # empties the neighbour caches (ARP and NDP) of every lab host
  local i
  for ((i = 0; i < nmax; i++)); do ip -n "${H[i]}" neigh flush all >/dev/null 2>&1 || true; done
}
spec() { # N SLOTS [FIRST]: -H list of N hosts from host FIRST (default 0), SLOTS each
  local n=$1 s=$2 first=${3:-0} i out=""
  for ((i = first; i < first + n; i++)); do out+="${out:+,}${H[i]}:$s"; done
  printf '%s' "$out"
}
remote_hosts() { # N: hosts 1..N-1 (host 0 runs the launcher)
  local i
  for ((i = 1; i < $1; i++)); do printf '%s ' "${H[i]}"; done
}

# ---- running and recording ----------------------------------------------------------------------

metrics=$work/metrics.tsv # KEY<TAB>VALUE, one line per run
: >"$metrics"
failures=0
put() { printf '%s\t%s\n' "$1" "$2" >>"$metrics"; }

# CPU time (ms) of everything the lab's sshd listeners have reaped: per-connection sshd, the shell,
# and what it ran (agents, orteds, ranks). Their cutime+cstime only grow once a session has ended.
remote_cpu_ms() {
  local files=() p
  for p in "${sshd_pids[@]}"; do files+=("/proc/$p/stat"); done
  awk -v tck="$clk_tck" '{ sub(/^.*\) /, ""); s += $14 + $15 } END { printf "%.0f", s * 1000 / tck }' "${files[@]}"
}
# Waits (at most 5 s, outside any timing) until no lab sshd has a session left.
sessions_gone() {
  local deadline=$((EPOCHSECONDS + 5))
  while pgrep -P "$sshd_list" >/dev/null && ((EPOCHSECONDS < deadline)); do sleep 0.05; done
}

# Runs CMD on host 0 as tag TAG (run_timed: wall, CPU, peak RSS); leaves $f.out and $f.err and sets
# WALL_MS, CPU_MS (with its children), SELF_MS (its own), RSS_KB and RCPU_MS (CPU of the remote sessions). Returns 1 (and counts a failure)
# when CMD did not exit 0.
run_on_host0() { # TAG CMD...
  local tag=$1 f=$work/runs/$1 wall user sys rss rc r0 suser ssys
  shift
  sessions_gone
  r0=$(remote_cpu_ms)
  "$lab" exec 0 env "${lab_bench_unset_lists[@]}" HOME="$home" "$timer" "$run_timeout" "$f.res" "$@" </dev/null >"$f.out" 2>"$f.err" || true
  sessions_gone
  RCPU_MS=$(($(remote_cpu_ms) - r0))
  { read -r wall user sys rss rc && read -r suser ssys; } <"$f.res" 2>/dev/null || { wall=0 user=0 sys=0 rss=0 rc=125; }
  SELF_MS=$(calc "printf \"%.0f\", ${suser:-0} + ${ssys:-0}")
  RUN_RC=$rc
  WALL_MS=$wall
  CPU_MS=$(calc "printf \"%.0f\", $user + $sys")
  RSS_KB=$rss
  if ((rc != 0)); then
    failures=$((failures + 1))
    say "$(printf 'FAILED (%s): %s: %s' "$rc" "$tag" "$*" | cut -c1-300)"
    grep -v '^$' "$f.err" | tail -n 4 | cut -c1-300 | sed 's/^/bench:   /' >&2
    mkdir -p "$fail_dir"
    { echo "# $(date -u +%FT%TZ) exit $rc: $*"; cat "$f.err"; } >"$fail_dir/$tag.err"
    cp "$f.out" "$fail_dir/$tag.out" 2>/dev/null || true
    return 1
  fi
  return 0
}

# hvrun's --verbose "timings:" line of the last run of TAG, recorded under KEY.<phase>.
put_timings() { # TAG KEY
  local line name value
  line=$(grep -m1 'timings:' "$work/runs/$1.err" || true)
  [[ -n $line ]] || return 0
  line=${line#*timings: }
  local IFS=','
  for part in $line; do
    part=${part# }
    name=${part% *}
    value=${part##* }
    [[ $value == ms ]] || continue
    name=${part% ms}
    value=${name##* }
    name=${name% *}
    name=${name// /_}
    if [[ $value =~ ^[0-9]+$ ]]; then put "$2.$name" "$value"; fi
  done
  return 0
}

launch_hvrun() { # KEY TAG N SLOTS CMD... -> wall, cpu, rss and phases under KEY
  local key=$1 tag=$2 n=$3 s=$4
  shift 4
  if ! run_on_host0 "$tag" "$hvrun" --verbose -p "$LAB_PORT" -i "$LAB_KEY" -H "$(spec "$n" "$s")" "$@"; then
    put "$key.failed" "$RUN_RC"
    if ((RUN_RC < 128)); then # it ended by itself: its peak RSS and CPU still tell something
      put "$key.failed_rss" "$RSS_KB"
      put "$key.failed_cpu" "$CPU_MS"
    fi
    return 1
  fi
  put "$key.wall" "$WALL_MS"
  put "$key.cpu" "$CPU_MS"
  put "$key.rcpu" "$RCPU_MS"
  put "$key.rss" "$RSS_KB"
  put_timings "$tag" "$key"
}

launch_mpirun() { # KEY TAG N SLOTS CMD...
  local key=$1 tag=$2 n=$3 s=$4
  shift 4
  if run_on_host0 "$tag" mpirun --allow-run-as-root -np $((n * s)) -H "$(spec "$n" "$s")" --bind-to none \
    --mca plm_rsh_agent ssh --mca plm_rsh_args "$mpi_ssh_args" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include "$LAB_FABRIC_SUBNET" --mca oob_tcp_if_include "$LAB_FABRIC_SUBNET" "$@"; then
    put "$key.wall" "$WALL_MS"
    put "$key.cpu" "$CPU_MS"
    put "$key.rcpu" "$RCPU_MS"
    put "$key.rss" "$RSS_KB"
  else
    put "$key.failed" "$RUN_RC"
  fi
}

launch_floor() { # KEY TAG N
  local key=$1 tag=$2 n=$3 line kv
  # shellcheck disable=SC2046 # one argument per host
  if run_on_host0 "$tag" "$floor" -p "$LAB_PORT" -i "$LAB_KEY" $(remote_hosts "$n"); then
    put "$key.wall" "$WALL_MS"
    put "$key.cpu" "$CPU_MS"
    put "$key.rcpu" "$RCPU_MS"
    line=$(tail -n 1 "$work/runs/$tag.out")
    for kv in $line; do
      case $kv in slowest_connect_ms=* | slowest_auth_ms=* | slowest_exec_ms=*) put "$key.${kv%%=*}" "${kv#*=}" ;; esac
    done
  else
    put "$key.failed" "$RUN_RC"
  fi
}

progress() { say "$(printf '[%d/%d] %-44s %s' "$1" "$reps" "$2" "$3")"; }

# ---- cases --------------------------------------------------------------------------------------

cases=() # "N SLOTS CMD"
for n in "${counts[@]}"; do cases+=("$n 2 true" "$n 2 hostname"); done
# 1 slot per host: the largest size, and 32 hosts when measured (issue 14's targets are at 32 and 64).
for n in "${counts[@]}"; do
  if ((n == nmax || n == 32)); then cases+=("$n 1 true" "$n 1 hostname"); fi
done

probe_n=8
((nmax >= 8)) || probe_n=$nmax
mem_sizes=()
for n in 8 32 64; do ((n <= nmax)) && mem_sizes+=("$n"); done
((${#mem_sizes[@]})) || mem_sizes=("$nmax")
alone_n=0 # hvrun alone: 31 remote hosts h1..h31 (issue 14's target; needs 32 lab hosts), else 8
if ((nmax >= 32)); then alone_n=31; elif ((nmax >= 9)); then alone_n=8; fi
# Ranks print their agent's VmHWM (kB) and their host.
# shellcheck disable=SC2016 # expanded by the rank's shell
mem_cmd=(sh -c 'echo "vmhwm $(hostname) $(awk "/^(VmHWM|RssAnon)/ {printf \"%s \", \$2}" /proc/$PPID/status)"')

say "warm-up (page cache, known_hosts, hvrun's probe cache for each size)"
launch_mpirun warm.mpirun warm-mpirun "$nmax" 1 true || true
launch_floor warm.floor warm-floor "$nmax" || true
# hvrun's first launch on a host set probes and keeps the outcome (docs/DESIGN.md section 5.5), as a
# user's first launch of the hour does; the rounds then measure the launches after it, and beside each
# one a launch that probes (--disable-cache, "hvrun probing" in the table).
for n in "${counts[@]}"; do launch_hvrun "warm.hvrun.$n" "warm-hvrun-$n" "$n" 1 true || true; done

for ((rep = 1; rep <= reps; rep++)); do
  for c in "${cases[@]}"; do
    read -r n s cmd <<<"$c"
    k="launch.${n}x$s.$cmd"
    launch_hvrun "$k.hvrun" "hvrun-${n}x$s-$cmd-$rep" "$n" "$s" "$cmd" || true
    a=$WALL_MS
    launch_mpirun "$k.mpirun" "mpirun-${n}x$s-$cmd-$rep" "$n" "$s" "$cmd" || true
    b=$WALL_MS
    launch_floor "$k.floor" "floor-${n}x$s-$cmd-$rep" "$n" || true
    f=$WALL_MS
    launch_hvrun "$k.probing" "probing-${n}x$s-$cmd-$rep" "$n" "$s" --disable-cache "$cmd" || true
    progress "$rep" "launch ${n}x$s $cmd" "hvrun $a ms, mpirun $b ms, floor $f ms, hvrun probing $WALL_MS ms"
  done
  # Diagnostic: the largest case with the kernel's original neighbour-table size, each run starting
  # from empty neighbour caches (as after a reboot; warm entries made under the raised limit would
  # hide the overflow).
  if ((neigh_changed)); then
    neigh_set old
    k="diag.${nmax}x1.true"
    neigh_flush
    launch_hvrun "$k.hvrun" "diag-hvrun-${nmax}x1-$rep" "$nmax" 1 true || true
    a=$WALL_MS
    neigh_flush
    launch_mpirun "$k.mpirun" "diag-mpirun-${nmax}x1-$rep" "$nmax" 1 true || true
    b=$WALL_MS
    neigh_flush
    launch_floor "$k.floor" "diag-floor-${nmax}x1-$rep" "$nmax" || true
    neigh_set new
    progress "$rep" "launch ${nmax}x1 true, gc_thresh3=$neigh_thresh3_old" "hvrun $a ms, mpirun $b ms, floor $WALL_MS ms"
  fi
done

probe_variants=(default noeth9 nosilent fabric check)
probe_args() { # VARIANT -> hvrun options
  case $1 in
    default) echo "" ;;
    noeth9) echo "--network-interface ^eth9" ;;
    nosilent) echo "--network-interface ^eth9,wlp5s0" ;;
    fabric) echo "--network-interface $LAB_FABRIC_SUBNET" ;;
    check) echo "--check-only" ;;
  esac
}
for ((rep = 1; rep <= reps; rep++)); do
  for v in "${probe_variants[@]}"; do
    # shellcheck disable=SC2046 # the options are words
    if [[ $v == check ]]; then
      launch_hvrun "probe.$v" "probe-$v-$rep" "$probe_n" 2 --check-only || true
    else
      launch_hvrun "probe.$v" "probe-$v-$rep" "$probe_n" 2 --disable-cache $(probe_args "$v") true || true
    fi
    progress "$rep" "probe $v ($probe_n hosts)" "$(grep -m1 -o 'probe [0-9]* ms' "$work/runs/probe-$v-$rep.err" || echo '?')"
  done
done

for ((rep = 1; rep <= reps; rep++)); do
  for n in "${mem_sizes[@]}"; do
    tag="mem-$n-$rep"
    if launch_hvrun "mem.$n" "$tag" "$n" 2 "${mem_cmd[@]}"; then
      # [RANK]<stdout>:vmhwm HOST KB; rank 0's host is host 0 (its local agent also serves the store).
      # VmHWM then RssAnon (kB): the largest remote agent's, and host 0's.
      awk -v h0="${H[0]}" '/vmhwm/ { if ($2 == h0) { if ($3 > l) { l = $3; la = $4 } } else if ($3 > r) { r = $3; ra = $4 } }
        END { print r + 0, ra + 0, l + 0, la + 0 }' "$work/runs/$tag.out" | {
        read -r remote remote_anon local local_anon
        put "mem.$n.agent_remote" "$remote"
        put "mem.$n.agent_remote_anon" "$remote_anon"
        put "mem.$n.agent_local" "$local"
        put "mem.$n.agent_local_anon" "$local_anon"
      }
    fi
    progress "$rep" "memory $n hosts" "hvrun $RSS_KB kB"
  done
  if ((alone_n)); then
    tag="alone-$alone_n-$rep"
    if run_on_host0 "$tag" "$hvrun" --disable-cache -p "$LAB_PORT" -i "$LAB_KEY" -H "$(spec "$alone_n" 2 1)" true; then
      put "alone.cpu" "$CPU_MS"
      put "alone.self" "$SELF_MS"
      put "alone.rss" "$RSS_KB"
      put "alone.wall" "$WALL_MS"
    fi
    progress "$rep" "hvrun alone, $alone_n remote hosts" "cpu $CPU_MS ms"
  fi
done

# The agent's memory floor: libstdc++, libc and OpenSSL 3 after one getrandom and one HMAC-SHA256.
for ((rep = 1; rep <= reps; rep++)); do
  for kv in $("$rss_floor"); do put "rss_floor.${kv%%=*}" "${kv#*=}"; done
done

load_end=$(cut -d' ' -f1-3 /proc/loadavg)
say "store benchmark"
store_ok=1
"$store_bench" --ranks 64 --rounds 5 --ops 20000 >"$work/store.out" 2>&1 || { store_ok=0; failures=$((failures + 1)); cat "$work/store.out" >&2; }

# ---- the table ----------------------------------------------------------------------------------

med() { # KEY -> median of its values, or empty (plain awk: Debian's default is mawk)
  awk -F'\t' -v k="$1" '$1 == k { print $2 }' "$metrics" | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) exit
    if (NR % 2) printf "%.1f", v[(NR + 1) / 2]; else printf "%.1f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
count() { awk -F'\t' -v k="$1" '$1 == k { n++ } END { print n + 0 }' "$metrics"; }
sec() { [[ -n $1 ]] && calc "printf \"%.2f s\", $1 / 1000" || printf 'FAILED'; }
# A median wall time, with the failed runs of KEY (exit codes) when there were any.
secf() { # MEDIAN_MS KEY
  local failed codes
  failed=$(count "$2.failed")
  if ((failed == 0)); then sec "$1"; return; fi
  codes=$(awk -F'\t' -v k="$2.failed" '$1 == k { print $2 }' "$metrics" | sort -n | uniq -c | awk '{ printf "%s%s×%s", (NR > 1 ? ", " : ""), $1, $2 }')
  printf '%s (%d of %d runs failed: exit %s)' "$(sec "$1")" "$failed" "$((failed + $(count "$2.wall")))" "$codes"
}
msf() { [[ -n $1 ]] && calc "printf \"%.0f ms\", $1" || printf '—'; }
mib() { [[ -n $1 && $1 != 0.0 ]] && calc "printf \"%.1f MiB\", $1 / 1024" || printf '—'; }
le() { calc "r = (($1) <= ($2)); print r"; } # A <= B ? 1 : 0
verdict() { if [[ $1 == 1 ]]; then printf 'met'; else printf '**MISSED**'; fi; }

rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | $5 | $6 | $7 | $8 | $9 |"); }

for c in "${cases[@]}"; do
  read -r n s cmd <<<"$c"
  k="launch.${n}x$s.$cmd"
  A=$(med "$k.hvrun.wall") B=$(med "$k.mpirun.wall") F=$(med "$k.floor.wall")
  ratio="—" diff="—" target="" ver=""
  [[ -n $A && -n $B ]] && ratio=$(calc "printf \"%.2f×\", $A / $B")
  [[ -n $A && -n $F ]] && diff=$(calc "printf \"%+.0f ms\", $A - $F")
  limit=""
  # Issue 14's targets (the older ones were 0.8× at 8 hosts and 0.6× at 32).
  if ((n == 8 && s == 2)); then limit=0.6; elif (((n == 32 || n == 64) && s == 1)); then limit=0.55; fi
  if [[ -n $limit ]]; then
    target="≤ ${limit}× mpirun"
    if (($(count "$k.hvrun.failed") > 0)); then
      ver="**MISSED** (hvrun failed $(count "$k.hvrun.failed") of $reps runs)"
    elif [[ -n $A && -n $B ]]; then
      ver=$(verdict "$(le "$A / $B" "$limit")")
    else
      ver="n/a"
    fi
  fi
  row "launch" "\`$cmd\`, $n hosts × $s slot$( ((s > 1)) && echo s)" "$(secf "$A" "$k.hvrun")" "$(secf "$B" "$k.mpirun")" \
    "$(secf "$F" "$k.floor")" "$ratio" "$diff" "${target:-—}" "${ver:-—}"
done

# Issue 24: hvrun within 1.25x of the SSH floor at 8 x 2, 32 x 1 and 64 x 1, from the probe cache (the
# launches after a host set's first), and beside it the launch that probes (--disable-cache).
for c in "${cases[@]}"; do
  read -r n s cmd <<<"$c"
  if ! { ((n == 8 && s == 2)) || (((n == 32 || n == 64) && s == 1)); }; then continue; fi
  k="launch.${n}x$s.$cmd"
  A=$(med "$k.hvrun.wall") C=$(med "$k.probing.wall") F=$(med "$k.floor.wall")
  ratio="—" diff="—" ver="n/a"
  if [[ -n $A && -n $C && -n $F ]]; then
    ratio=$(calc "printf \"%.2f× floor (probing %.2f×)\", $A / $F, $C / $F")
    diff=$(calc "printf \"%+.0f ms (probing %+.0f ms)\", $A - $F, $C - $F")
    ver=$(verdict "$(le "$A / $F" 1.25)")
    (($(count "$k.hvrun.failed") > 0)) && ver="**MISSED** (hvrun failed $(count "$k.hvrun.failed") of $reps runs)"
  fi
  row "launch vs floor" "\`$cmd\`, $n hosts × $s slot$( ((s > 1)) && echo s): hvrun (probing: --disable-cache)" \
    "$(secf "$A" "$k.hvrun") (probing $(secf "$C" "$k.probing"))" "—" "$(secf "$F" "$k.floor")" "$ratio" "$diff" \
    "≤ 1.25× floor" "$ver"
done

if ((neigh_changed)); then
  k="diag.${nmax}x1.true"
  A=$(med "$k.hvrun.wall") B=$(med "$k.mpirun.wall") F=$(med "$k.floor.wall")
  ratio="—" diff="—"
  [[ -n $A && -n $B ]] && ratio=$(calc "printf \"%.2f×\", $A / $B")
  [[ -n $A && -n $F ]] && diff=$(calc "printf \"%+.0f ms\", $A - $F")
  row "launch" "\`true\`, $nmax hosts × 1 slot, diagnostic: the kernel's original neighbour tables (gc_thresh3 $neigh_thresh3_old for all namespaces together), emptied before each run" \
    "$(secf "$A" "$k.hvrun")" "$(secf "$B" "$k.mpirun")" "$(secf "$F" "$k.floor")" "$ratio" "$diff" "—" "—"
fi

# hvrun's own cost per added host above the floor (`true`, 2 slots), between consecutive host counts.
mapfile -t sorted < <(printf '%s\n' "${counts[@]}" | sort -n | uniq)
seg_text="" seg_vals=()
for ((i = 1; i < ${#sorted[@]}; i++)); do
  p=${sorted[i - 1]} q=${sorted[i]}
  a1=$(med "launch.${p}x2.true.hvrun.wall") f1=$(med "launch.${p}x2.true.floor.wall")
  a2=$(med "launch.${q}x2.true.hvrun.wall") f2=$(med "launch.${q}x2.true.floor.wall")
  [[ -n $a1 && -n $f1 && -n $a2 && -n $f2 ]] || continue
  v=$(calc "printf \"%.1f\", (($a2 - $f2) - ($a1 - $f1)) / ($q - $p)")
  seg_vals+=("$v")
  seg_text+="${seg_text:+ · }$p→$q: $v"
done
if ((${#seg_vals[@]} >= 2)); then
  last=${seg_vals[-1]}
  earlier=$(printf '%s\n' "${seg_vals[@]:0:${#seg_vals[@]}-1}" | awk '{ s += $1 } END { printf "%.1f", s / NR }')
  seg_ver=$(verdict "$(le "$last" "$earlier + 5")")
else
  seg_ver="n/a"
fi
row "launch" "hvrun − floor per added host, \`true\` × 2 slots (ms/host)" "${seg_text:-—}" "—" "—" "—" "—" \
  "flat or falling: last step ≤ mean of earlier + 5" "$seg_ver"

# Where hvrun's time goes, per host count (`true`, 2 slots; --verbose timings, medians).
for c in "${cases[@]}"; do
  read -r n s cmd <<<"$c"
  [[ $cmd == hostname ]] || continue
  k="launch.${n}x$s.hostname"
  con=$(med "$k.hvrun.connect") up=$(med "$k.hvrun.agents_up") pr=$(med "$k.hvrun.probe")
  fo=$(med "$k.hvrun.launch_to_first_output") rr=$(med "$k.hvrun.ranks_ran") td=$(med "$k.hvrun.teardown")
  tot=$(med "$k.hvrun.total") A=$(med "$k.hvrun.wall")
  [[ -n $con && -n $up && -n $tot && -n $A ]] || continue
  phases="ssh + agent exec $(msf "$con") · hellos +$(msf "$(calc "print $up - $con")") · probe $(msf "$pr")"
  phases+=" · first output $(msf "$fo") · ranks ran $(msf "$rr") · teardown $(msf "$td")"
  phases+=" · outside the job $(msf "$(calc "print $A - $tot")")"
  fc=$(med "$k.floor.slowest_connect_ms") fa=$(med "$k.floor.slowest_auth_ms") fe=$(med "$k.floor.slowest_exec_ms")
  row "phases" "$n hosts × $s slot$( ((s > 1)) && echo s), \`hostname\` (floor: \`true\`; slowest session)" "$phases" "—" \
    "connect+kex $(msf "$fc") · auth $(msf "$fa") · exec \`true\` $(msf "$fe")" "—" "—" "—" "—"
done

# Probing.
probe_timeout_ms=1000
d=$(med probe.default.probe) e9=$(med probe.noeth9.probe) ns=$(med probe.nosilent.probe)
fb=$(med probe.fabric.probe) ck=$(med probe.check.probe)
row "probe" "$probe_n hosts, every NIC (eth9 drops, wlp5s0 reaches nobody, docker0)" "$(msf "$d")" "—" "—" "—" "—" \
  "≤ no-silent-NIC + 1 probe timeout (${probe_timeout_ms} ms)" \
  "$([[ -n $d && -n $ns ]] && verdict "$(le "$d" "$ns + $probe_timeout_ms")" || echo n/a)"
row "probe" "$probe_n hosts, \`--network-interface ^eth9\` (no dropping NIC)" "$(msf "$e9")" "—" "—" "—" "—" "—" "—"
row "probe" "$probe_n hosts, \`^eth9,wlp5s0\` (no silent NIC; docker0 left)" "$(msf "$ns")" "—" "—" "—" "—" \
  "nothing measurable: ≤ fabric-only + 50 ms" \
  "$([[ -n $ns && -n $fb ]] && verdict "$(le "$ns" "$fb + 50")" || echo n/a)"
row "probe" "$probe_n hosts, \`--network-interface $LAB_FABRIC_SUBNET\` (fabric only)" "$(msf "$fb")" "—" "—" "—" "—" "—" "—"
row "probe" "$probe_n hosts, \`--check-only\` (waits for every probe)" "$(msf "$ck")" "—" "—" "—" "—" \
  "waits for all: ≥ 1 probe timeout" "$([[ -n $ck ]] && verdict "$(le "$probe_timeout_ms" "$ck")" || echo n/a)"

# Rendezvous store.
if ((store_ok)); then
  set_rate=$(awk '$1 == "set" { print $2 }' "$work/store.out")
  get_rate=$(awk '$1 == "get" { print $2 }' "$work/store.out")
  rdv=$(grep -A1 '^rendezvous of' "$work/store.out" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  row "rendezvous" "store on loopback, one client: set / get" "$set_rate / $get_rate ops/s" "—" "—" "—" "—" "—" "—"
  row "rendezvous" "64 ranks (threads) rendezvous through the store, median of 5" "${rdv:-?} ms" "—" "—" "—" "—" "—" "—"
else
  row "rendezvous" "hvrun-store-bench" "FAILED" "—" "—" "—" "—" "—" "—"
fi

# Memory.
for n in "${mem_sizes[@]}"; do
  R=$(med "mem.$n.rss") MR=$(med "launch.${n}x2.true.mpirun.rss")
  tgt="—" ver="—"
  if ((n == 32 || n == 64)); then tgt="≤ 32 MiB"; [[ -n $R ]] && ver=$(verdict "$(le "$R" 32768)"); fi
  FR=$(med "launch.${n}x2.true.hvrun.failed_rss")
  extra=""
  [[ -n $FR ]] && extra=" · $(mib "$FR") in the \`true\` launches that failed"
  if [[ -z $R && -n $FR && ($n == 32 || $n == 64) ]]; then ver=$(verdict "$(le "$FR" 32768)"); fi
  row "memory" "peak RSS of the launcher, $n hosts × 2 slots" \
    "$(mib "$R")$extra" "$(mib "$MR") (mpirun or its ssh)" "—" "—" "—" "$tgt" "$ver"
  AR=$(med "mem.$n.agent_remote") AL=$(med "mem.$n.agent_local")
  ARA=$(med "mem.$n.agent_remote_anon") ALA=$(med "mem.$n.agent_local_anon")
  row "memory" "peak RSS (VmHWM) of one agent, $n hosts: largest remote / host 0's (serves the store); in brackets its anonymous (non-file) part" \
    "$(mib "$AR") ($(mib "$ARA")) / $(mib "$AL") ($(mib "$ALA"))" "—" \
    "$(mib "$(med rss_floor.vmhwm_kb)") ($(mib "$(med rss_floor.rss_anon_kb)")): C++ + one OpenSSL HMAC" "—" "—" "≤ 8 MiB" \
    "$([[ -n $AR && -n $AL ]] && verdict "$(le "$(calc "print ($AR > $AL) ? $AR : $AL")" 8192)" || echo n/a)"
done

# CPU.
cn=8
((nmax >= 8)) || cn=$nmax
k="launch.${cn}x2.true"
HC=$(med "$k.hvrun.cpu") MC=$(med "$k.mpirun.cpu") FC=$(med "$k.floor.cpu")
row "CPU" "user+sys per launch, \`true\`, $cn hosts × 2 slots (with the local agent and 2 local ranks; mpirun with its ssh clients)" \
  "$(calc "printf \"%.3f s\", ${HC:-0} / 1000")" "$(calc "printf \"%.3f s\", ${MC:-0} / 1000")" \
  "$(calc "printf \"%.3f s\", ${FC:-0} / 1000")" "—" "—" "≤ 0.15 s" "$([[ -n $HC ]] && verdict "$(le "$HC" 150)" || echo n/a)"
# All CPU a launch costs: the launcher's (with its children on host 0) + the remote sessions' (every
# per-connection sshd, shell, agent or orted, and ranks on hosts 1..N-1).
cpu_pair() { # KEY
  local l r
  l=$(med "$1.cpu") r=$(med "$1.rcpu")
  if [[ -n $l && -n $r ]]; then calc "printf \"%.2f + %.2f = %.2f s\", $l / 1000, $r / 1000, ($l + $r) / 1000"; else printf '—'; fi
}
for n in "${sorted[@]}"; do
  k="launch.${n}x2.true"
  if [[ -z $(med "$k.hvrun.cpu") && -n $(med "$k.hvrun.failed_cpu") ]]; then
    row "CPU" "launcher CPU, \`true\`, $n hosts × 2 slots, in the hvrun runs that failed after probing" \
      "$(calc "printf \"%.2f s\", $(med "$k.hvrun.failed_cpu") / 1000")" "—" "—" "—" "—" "—" "—"
  fi
  row "CPU" "all CPU per launch, \`true\`, $n hosts × 2 slots: launcher (host 0) + remote sessions (sshd, shell, agent/orted, ranks)" \
    "$(cpu_pair "$k.hvrun")" "$(cpu_pair "$k.mpirun")" "$(cpu_pair "$k.floor")" "—" "—" "—" "—"
done
if ((alone_n)); then
  AC=$(med alone.cpu)
  AS=$(med alone.self)
  row "CPU" "user+sys of hvrun alone, $alone_n remote hosts × 2 slots (h1..h$alone_n, no local agent), with its children (\`ssh -G\`, once per distinct ssh config) · its own" \
    "$(calc "printf \"%.3f s\", ${AC:-0} / 1000") · $(calc "printf \"%.3f s\", ${AS:-0} / 1000")" "—" "—" "—" "—" "≤ 0.15 s" \
    "$([[ -n $AC ]] && verdict "$(le "$AC" 150)" || echo n/a) · $([[ -n $AS ]] && verdict "$(le "$AS" 150)" || echo n/a)"
fi

# ---- output -------------------------------------------------------------------------------------

cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
hvrun_version=$("$hvrun" --version 2>/dev/null | head -n1 || true)
mpi_version=$(mpirun --allow-run-as-root --version 2>/dev/null | head -n1 || true)
ssh_version=$(ssh -V 2>&1 | head -n1)
libssh_version=$(dpkg-query -W -f='${Version}' libssh-4 2>/dev/null || echo '?')
table_file=$work/table.md
{
  echo "| part | case | hvrun | mpirun | ssh floor | hvrun / mpirun | hvrun − floor | target | verdict |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$table_file"

echo
cat "$table_file"
echo

{
  echo "$section"
  echo
  echo "Written by \`scripts/bench.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'). Machine: $(nproc) CPUs ($cpu_model),"
  echo "kernel $(uname -r); load average $load_start before the lab and the runs (nothing else ran: the script"
  echo "writes here only below $BENCH_MAX_LOAD), $load_end at the end of the runs (their own, with every host's sshd on these"
  echo "cores). $hvrun_version; $mpi_version; $ssh_version;"
  echo "libssh $libssh_version. Lab: $nmax hosts (network namespaces on this machine; every sshd, agent and rank"
  echo "shares its cores), with its traps in place. BENCH_HOSTS=\"$hosts_list\", $reps repetitions, interleaved"
  echo "(every case once per repetition: hvrun, mpirun, floor, hvrun probing); figures are medians, wall times of the whole"
  echo "process from lab host 0, which is itself the first host of every list."
  echo
  cat "$table_file"
  echo
  echo "- **hvrun**: \`hvrun --verbose -p PORT -i KEY -H h0:S,h1:S,... CMD\`, automatic NIC selection. The NICs come"
  echo "  from hvrun's probe cache (docs/DESIGN.md section 5.5): a warm-up launch per host count probed them first, as"
  echo "  a user's first launch of the hour on those hosts does. **hvrun probing** is the same launch with"
  echo "  \`--disable-cache\`, run in every repetition beside it (the rows \"launch vs floor\"); the probe part, the"
  echo "  CPU of hvrun alone and scripts/bench_scale.sh always probe."
  echo "- **mpirun**: Open MPI, \`mpirun --allow-run-as-root -np N -H ... --bind-to none --mca plm_rsh_agent ssh"
  echo "  --mca plm_rsh_args '-p PORT -i KEY -o IdentitiesOnly=yes -o BatchMode=yes ...' --mca pml ob1 --mca btl tcp,self\`,"
  echo "  told the fabric subnet (\`btl_tcp_if_include\`, \`oob_tcp_if_include\` = $LAB_FABRIC_SUBNET); defaults otherwise (tree spawn)."
  echo "- **ssh floor**: \`scripts/bench/ssh_floor.cpp\`, one libssh session per remote host (N−1 of them) in"
  echo "  parallel threads running \`true\`: connect, key exchange, one public-key signature, exec, EOF."
  echo "- **phases**: hvrun's \`--verbose\` timings. \"ssh + agent exec\" is its \"connect\" (until every host's"
  echo "  SSH session is up and its agent has sent its first bytes), \"hellos\" is \"agents up\" minus that,"
  echo "  \"outside the job\" is the wall time minus hvrun's own total (process start, option parsing, exit)."
  echo "  The floor's figures are its slowest session's."
  echo "- **CPU**: user+sys from wait4 (as /usr/bin/time), which counts the process and the children it waited for."
  echo "  \"All CPU\" adds the remote side: the growth of cutime+cstime of every lab host's sshd listener over the"
  echo "  run (per-connection sshd, the login shell, and what it ran: agents or orteds and their ranks), read"
  echo "  after every session ended. On 2 shared cores, all CPU / 2 is a lower bound on the wall time."
  echo "- **memory**: the launcher's peak RSS from wait4 (the largest of its process tree); an agent's"
  echo "  VmHWM read by its ranks from /proc/\$PPID/status while they run. The agent's floor is"
  echo "  \`scripts/bench/rss_floor.cpp\`: a C++ program that takes random bytes (getrandom) and makes one HMAC-SHA256 with"
  echo "  OpenSSL 3 (what every agent must do to answer probes) and reads its own VmHWM; the file-backed part of"
  echo "  an RSS is shared-library pages, shared with every other process that maps them."
} >"$work/section.md"

write_section "$out_md" "$section" "$work/section.md"
say "wrote $out_md"

if [[ -n ${BENCH_SCALE_HOSTS// /} || ${BENCH_SCALE_SIM:-0} != 0 ]]; then
  "$lab" down >/dev/null 2>&1 || say "warning: '$lab down' failed"
  lab_up=0
  say "scale part: scripts/bench_scale.sh (BENCH_SCALE_HOSTS=\"$BENCH_SCALE_HOSTS\" BENCH_SCALE_SIM=${BENCH_SCALE_SIM:-0})"
  if ! LAB_PREFIX=hvscale "$root/scripts/bench_scale.sh"; then failures=$((failures + 1)); fi
fi

if ((failures)); then
  say "$failures run(s) failed; their figures are missing or rest on fewer runs; logs in $fail_dir"
  exit 1
fi
