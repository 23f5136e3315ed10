#!/usr/bin/env bash
# bench_allreduce.sh — allreduce speed of hvrun against raw Gloo and Open MPI (issue 5, "Main job and
# speed"), on two hosts of the network-namespace lab (scripts/lab.sh), over each host's fabric NIC.
#
# Contenders, each a 64 MiB float sum allreduce between the two hosts, one rank per host, out of place
# and in place (nccl-tests' two columns):
#   hvrun     hvrun (from host 0, over the lab's ssh) + hvrun-allreduce-bench; hvrun picks each host's
#             NIC itself.
#   raw Gloo  scripts/bench/raw_gloo_allreduce.cpp: the same gloo::allreduce call as hvrun's Gloo
#             backend, the TCP device bound to each host's fabric NIC, rendezvous through a FileStore
#             directory; one process started per host with `lab.sh exec I`.
#   Open MPI  scripts/bench/mpi_allreduce.c: MPI_Allreduce under Open MPI's mpirun (from host 0, over
#             the lab's ssh), TCP BTL and out-of-band channel restricted to the fabric subnet.
# They run interleaved (hvrun, raw Gloo, Open MPI, hvrun, ...) for ROUNDS rounds, so a slow spell of the
# machine hits all three alike. Every run checks every element of its result.
#
# Prints one markdown table (median, min and max busbw per contender, ratios, machine, date, the
# issue's targets) and writes it as the section "## Allreduce: hvrun vs raw Gloo vs Open MPI" of
# docs/BENCHMARKS.md (replacing an older one). A missed target prints "TARGET MISSED" but does not
# fail the script; a run that fails or computes a wrong result does (exit 1).
#
# Needs root (network namespaces); otherwise it exits 77 (skipped). Installs what is missing with
# apt-get (Open MPI, Gloo, a compiler, the lab's packages) and builds hvrun with scripts/setup.sh when
# BUILD_DIR lacks it. The peers are built into a temporary directory each time.
#
#   scripts/bench_allreduce.sh
#   ROUNDS=7 ITERS=30 BUILD_DIR=build-bench scripts/bench_allreduce.sh
#
# Environment
#   BUILD_DIR   hvrun's build directory (default build/)
#   ROUNDS      interleaved rounds (default 5, at least 3)
#   ITERS       timed allreduce calls per run (default 20); WARMUP untimed ones before (default 5)
#   BYTES       message size in bytes (default 67108864 = 64 MiB; the targets are stated for 64 MiB)
#   RUN_TIMEOUT seconds one run may take before it counts as failed (default 300)
#   SETTLE      seconds of pause before each run, so one run's teardown does not slow the next (default 1)
#   BENCH_DOC   markdown file to update (default docs/BENCHMARKS.md; empty: update none)
#   LAB_PREFIX  the lab's name prefix (default hvbench); LAB_PORT (default 2222)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
rounds=${ROUNDS:-5}
iters=${ITERS:-20}
warmup=${WARMUP:-5}
bytes=${BYTES:-67108864}
run_timeout=${RUN_TIMEOUT:-300}
settle=${SETTLE:-1}
doc=${BENCH_DOC-$root/docs/BENCHMARKS.md}
export LAB_PREFIX=${LAB_PREFIX:-hvbench}
export LAB_PORT=${LAB_PORT:-2222}
unset LAB_DIR # lab.sh derives it from LAB_PREFIX; one exported by another lab must not leak in
lab=$root/scripts/lab.sh
readonly section_title="## Allreduce: hvrun vs raw Gloo vs Open MPI"

say() { printf 'bench_allreduce: %s\n' "$*" >&2; }
die() { printf 'bench_allreduce: error: %s\n' "$*" >&2; exit 1; }

if ((EUID != 0)); then
  echo "bench_allreduce: skipped: needs root (network-namespace lab)" >&2
  exit 77
fi

at_least() { [[ $1 =~ ^[0-9]{1,12}$ ]] && (($1 >= $2)); } # value minimum
at_least "$rounds" 3 || die "ROUNDS must be a number, at least 3 (got '$rounds')"
at_least "$iters" 1 || die "ITERS must be a positive number (got '$iters')"
at_least "$warmup" 0 || die "WARMUP must be a number (got '$warmup')"
at_least "$bytes" 4 || die "BYTES must be a number of bytes, at least 4 (got '$bytes')"
at_least "$run_timeout" 1 || die "RUN_TIMEOUT must be a positive number of seconds (got '$run_timeout')"
at_least "$settle" 0 || die "SETTLE must be a number of seconds (got '$settle')"

# ---- 1. packages and hvrun ----------------------------------------------------------------------

packages=(
  openmpi-bin libopenmpi-dev # the Open MPI contender (mpicc, mpirun)
  libgloo-dev g++            # the raw Gloo contender
  # the lab (scripts/lab.sh) and the tools used here
  openssh-server openssh-client iproute2 iptables procps util-linux coreutils
)
# shellcheck source=lib/packages.sh
source "$root/scripts/lib/packages.sh"
# shellcheck source=lib/bench_doc.sh
source "$root/scripts/lib/bench_doc.sh"
ensure_packages bench_allreduce.sh "${packages[@]}"

ensure_built bench_allreduce.sh "$build_dir" cmd/hvrun cmd/hvrun-agent collectives/hvrun-allreduce-bench
hvrun=$build_dir/cmd/hvrun
bench=$build_dir/collectives/hvrun-allreduce-bench
# Absolute paths: the commands run from inside the lab hosts.
hvrun=$(realpath "$hvrun")
bench=$(realpath "$bench")

# ---- 2. the peers -------------------------------------------------------------------------------

# Work directory under /tmp: the lab hosts share the file system, so both see the peers' binaries and
# the raw Gloo rendezvous directory.
work=$(mktemp -d /tmp/hvbench-allreduce.XXXXXX)
lab_owned=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ((lab_owned)); then "$lab" down >/dev/null 2>&1 || say "warning: 'LAB_PREFIX=$LAB_PREFIX scripts/lab.sh down' failed"; fi
  rm -rf -- "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building the peers in $work"
g++ -O2 -std=c++17 -Wall -Wextra -o "$work/raw_gloo_allreduce" "$root/scripts/bench/raw_gloo_allreduce.cpp" \
  -lgloo -lpthread
mpicc -O2 -std=c11 -Wall -Wextra -o "$work/mpi_allreduce" "$root/scripts/bench/mpi_allreduce.c"

# hvrun records the lab's host keys in ~/.ssh/known_hosts: give it a home of its own, not root's.
mkdir -m 700 "$work/home" "$work/home/.ssh"

# ---- 3. the lab ---------------------------------------------------------------------------------

if ip netns list 2>/dev/null | grep -Eq "^${LAB_PREFIX}-(h[0-9]+|sw)( |$)" || [[ -e /tmp/$LAB_PREFIX ]]; then
  die "a lab with prefix '$LAB_PREFIX' exists already (another run?); remove it with 'LAB_PREFIX=$LAB_PREFIX scripts/lab.sh down' or choose another LAB_PREFIX"
fi
lab_owned=1 # from here on, the lab is ours to tear down
"$lab" up 2
eval "$("$lab" env)"
read -r -a hosts <<<"$LAB_HOSTS"
read -r -a ifaces <<<"$LAB_FABRIC_IFACES"
ssh_args="-p $LAB_PORT -i $LAB_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no"
ssh_args+=" -o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR"

# ---- 4. the runs --------------------------------------------------------------------------------

# "OUT IN": the out-of-place and in-place busbw of one run's output, after checking it: the row of BYTES
# bytes (hvrun-allreduce-bench's format, hvrun prefixes each line with "[R]<stdout>:"), zero wrong
# elements in both columns. Prints nothing when not found.
parse_busbw() { # file
  awk -v bytes="$bytes" '
    { sub(/^\[[0-9]+\]<std(out|err)>:/, "") }
    $1 == bytes && $3 == "float" && $4 == "sum" && NF == 12 { out = $7; in_ = $11; wrong = $8 + $12; found = 1 }
    END { if (found && wrong == 0 && out ~ /^[0-9.]+$/ && in_ ~ /^[0-9.]+$/) print out, in_ }' "$1"
}

run_hvrun() { # log
  timeout "$run_timeout" "$lab" exec 0 env HOME="$work/home" \
    "$hvrun" -p "$LAB_PORT" -i "$LAB_KEY" -H "${hosts[0]},${hosts[1]}" \
    "$bench" -b "$bytes" -e "$bytes" -n "$iters" -w "$warmup" -d float -o sum >"$1" 2>&1
}

run_gloo() { # log round
  local store=$work/gloo-store.$2 pid rc=0 rc1=0
  mkdir "$store" # a fresh rendezvous directory per run: old keys would mislead
  timeout "$run_timeout" "$lab" exec 1 "$work/raw_gloo_allreduce" 1 2 "${ifaces[1]}" "$store" "$bytes" "$iters" "$warmup" \
    >"$1.rank1" 2>&1 &
  pid=$!
  timeout "$run_timeout" "$lab" exec 0 "$work/raw_gloo_allreduce" 0 2 "${ifaces[0]}" "$store" "$bytes" "$iters" "$warmup" \
    >"$1" 2>&1 || rc=$?
  wait "$pid" || rc1=$?
  cat "$1.rank1" >>"$1"
  ((rc == 0 && rc1 == 0))
}

run_mpi() { # log
  # One rank per host (-H h0,h1 gives each host one slot); no binding: both "hosts" share this
  # machine's cores, and Open MPI's default (bind to core) would pin both ranks to core 0. HOME: ssh
  # may look there; the lab's key and options come on the command line.
  timeout "$run_timeout" "$lab" exec 0 env HOME="$work/home" \
    mpirun --allow-run-as-root -np 2 -H "${hosts[0]},${hosts[1]}" --bind-to none \
    --mca plm_rsh_agent ssh --mca plm_rsh_args "$ssh_args" \
    --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include "$LAB_FABRIC_SUBNET" --mca oob_tcp_if_include "$LAB_FABRIC_SUBNET" \
    "$work/mpi_allreduce" "$bytes" "$iters" "$warmup" >"$1" 2>&1
}

settle 300
load_before=$(cut -d' ' -f1 /proc/loadavg) # other work on the machine skews every figure: say how much
contenders=(hvrun gloo mpi)
declare -A label=([hvrun]="hvrun + hvrun-allreduce-bench" [gloo]="raw Gloo" [mpi]="Open MPI MPI_Allreduce")
declare -A results_out=([hvrun]="" [gloo]="" [mpi]="") results_in=([hvrun]="" [gloo]="" [mpi]="")
mib=$(awk -v b="$bytes" 'BEGIN { printf "%g", b / 1048576 }')
say "$rounds rounds of ${mib} MiB float sum allreduce on ${hosts[0]} (${ifaces[0]}) and ${hosts[1]} (${ifaces[1]}), $iters iterations after $warmup warm-up"
for ((r = 1; r <= rounds; r++)); do
  for c in "${contenders[@]}"; do
    log=$work/$c.$r.log
    rc=0
    sleep "$settle"
    case $c in
      hvrun) run_hvrun "$log" || rc=$? ;;
      gloo) run_gloo "$log" "$r" || rc=$? ;;
      mpi) run_mpi "$log" || rc=$? ;;
    esac
    busbw=$(parse_busbw "$log")
    if ((rc != 0)) || [[ -z $busbw ]]; then
      why="exit $rc"
      ((rc == 124)) && why="timed out after RUN_TIMEOUT=${run_timeout}s"
      [[ -z $busbw ]] && why+=", no correct ${bytes}-byte row"
      say "round $r: ${label[$c]} failed ($why); its output:"
      sed 's/^/  | /' "$log" >&2
      exit 1
    fi
    # hvrun picks the NIC itself: check it took the fabric NIC (rank 0's Gloo device is printed).
    if [[ $c == hvrun ]] && ! grep -q "iface=${ifaces[0]}," "$log"; then
      say "round $r: hvrun's rank 0 did not use the fabric NIC ${ifaces[0]}:"
      sed 's/^/  | /' "$log" >&2
      exit 1
    fi
    read -r out in <<<"$busbw"
    results_out[$c]+="$out "
    results_in[$c]+="$in "
    printf 'bench_allreduce: round %d: %-30s busbw %s GB/s out of place, %s in place\n' "$r" "${label[$c]}" "$out" "$in" >&2
  done
done

# ---- 5. the table -------------------------------------------------------------------------------

stats() { # values... -> "median min max"
  printf '%s\n' "$@" | sort -g | awk '
    { v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# med/mn/mx[contender.mode], mode out (of place) or in (place)
declare -A med mn mx
for c in "${contenders[@]}"; do
  for mode in out in; do
    if [[ $mode == out ]]; then read -r -a vals <<<"${results_out[$c]}"; else read -r -a vals <<<"${results_in[$c]}"; fi
    read -r m lo hi < <(stats "${vals[@]}")
    med[$c.$mode]=$m mn[$c.$mode]=$lo mx[$c.$mode]=$hi
  done
done

cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
machine="$(nproc) CPUs ($cpu), Linux $(uname -r); load average (1 min) $load_before before the runs, $(cut -d' ' -f1 /proc/loadavg) after"
when=$(date -u '+%Y-%m-%d %H:%M UTC')
ompi_version=$(mpirun --version 2>/dev/null | awk 'NR == 1 { print $NF }')
gloo_version=$(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo "?")
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "?")

# Targets (issue 14), in place: hvrun at least 0.95x raw Gloo's median, and at least 3x Open MPI's.
r_gloo=$(ratio "${med[hvrun.in]}" "${med[gloo.in]}")
r_mpi=$(ratio "${med[hvrun.in]}" "${med[mpi.in]}")
target_gloo=$(awk -v h="${med[hvrun.in]}" -v g="${med[gloo.in]}" -v r="$r_gloo" 'BEGIN {
  if (h >= 0.95 * g) printf "met: hvrun / raw Gloo = %s", r
  else printf "TARGET MISSED: hvrun / raw Gloo = %s (needs 0.95)", r }')
target_mpi=$(awk -v h="${med[hvrun.in]}" -v m="${med[mpi.in]}" -v r="$r_mpi" 'BEGIN {
  if (h >= 3 * m) printf "met: hvrun / Open MPI = %s", r
  else printf "TARGET MISSED: hvrun / Open MPI = %s (needs 3.00)", r }')

report() {
  echo "$section_title"
  echo
  echo "${mib} MiB float sum allreduce, 2 ranks, one on each of 2 lab hosts (scripts/lab.sh: network namespaces on"
  echo "one machine; fabric NICs ${ifaces[0]} and ${ifaces[1]}, veth pairs on a bridge); $rounds rounds, the contenders interleaved."
  echo "Each run: $iters timed calls after $warmup warm-up; time = slowest rank's mean per call; busbw = algbw × 2(n−1)/n;"
  echo "every element of every result checked. Made by \`scripts/bench_allreduce.sh\`."
  echo
  echo "- Machine: $machine"
  echo "- Date: $when"
  echo "- Versions: hvrun $commit; Gloo $gloo_version (Debian libgloo-dev); Open MPI $ompi_version (Debian), TCP BTL, ob1, no binding"
  echo
  echo "busbw in GB/s, median (min–max) over the rounds; ratios of medians. Out of place: send and receive"
  echo "buffers differ; in place: one buffer (timed on zeros, checked on one call with the input), as nccl-tests."
  echo
  echo "| contender | out of place | in place | in place vs raw Gloo | in place vs Open MPI |"
  echo "|---|---:|---:|---:|---:|"
  for c in "${contenders[@]}"; do
    printf '| %s | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %s× | %s× |\n' "${label[$c]}" \
      "${med[$c.out]}" "${mn[$c.out]}" "${mx[$c.out]}" "${med[$c.in]}" "${mn[$c.in]}" "${mx[$c.in]}" \
      "$(ratio "${med[$c.in]}" "${med[gloo.in]}")" "$(ratio "${med[$c.in]}" "${med[mpi.in]}")"
  done
  echo
  echo "Per round, out of place / in place (GB/s):"
  for c in "${contenders[@]}"; do
    echo "- ${label[$c]}: ${results_out[$c]% } / ${results_in[$c]% }"
  done
  echo
  echo "Targets (issue 14, in place, at 64 MiB):"
  echo "- hvrun busbw ≥ 0.95× raw Gloo on the same NIC: $target_gloo"
  echo "- hvrun busbw ≥ 3× Open MPI over TCP on the same hosts and NIC: $target_mpi"
  if ((bytes != 67108864)); then echo "- (measured at $bytes bytes, not 64 MiB: the targets do not strictly apply)"; fi
}

echo
report
echo

if [[ -n $doc ]] && quiet_enough "$doc"; then
  mkdir -p "$(dirname "$doc")"
  if [[ ! -f $doc ]]; then
    printf '# Benchmarks\n\nFigures in this file come from the scripts in scripts/ (each section names its script).\n' >"$doc"
  fi
  report >"$work/section.md"
  # Drop an older section (its title line up to the next "## " heading), then append the new one.
  awk -v title="$section_title" '
    $0 == title { skip = 1; next }
    skip && /^## / { skip = 0 }
    !skip { print }' "$doc" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$work/doc.md"
  { cat "$work/doc.md"; echo; cat "$work/section.md"; } >"$doc"
  say "wrote the section \"${section_title#\#\# }\" of ${doc#"$root"/}"
fi
