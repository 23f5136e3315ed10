#!/usr/bin/env bash
# The agent binary (issue 10, point 2): its size, what it needs to run, and what copying it to a host costs.
# hvrun copies its own hvrun-agent over SFTP to a host that has none (README: "The agent"); this
# measures `hvrun -H h1 true` from lab host 0 when host 1 must get that copy (its cache entry removed
# before each run) and when the cached copy is used. The agent beside hvrun is made non-executable in a
# copy of the build, so no host uses it in place (as in test_remote_launch). Root only.
# Prints a markdown table; run it on two builds (BUILD_DIR) to compare them.
#
#   scripts/bench_agent_copy.sh
#   BUILD_DIR=/path/to/other/build BENCH_REPS=9 scripts/bench_agent_copy.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build}
reps=${BENCH_REPS:-7}
export LAB_PREFIX=${LAB_PREFIX:-hvcopy}
lab=$root/scripts/lab.sh
[[ -x $build/cmd/hvrun && -f $build/cmd/hvrun-agent ]] ||
  { echo "bench_agent_copy: no $build/cmd/hvrun or hvrun-agent; build first (scripts/setup.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/hvrun-bench-copy.XXXXXX)
entry=""
cleanup() {
  "$lab" down >/dev/null 2>&1 || true
  [[ -z $entry ]] || rm -rf -- "$entry"
  rm -rf -- "$work"
}
trap cleanup EXIT
mkdir -p "$work/home/.ssh" "$work/bin"
cp "$build/cmd/hvrun" "$build/cmd/hvrun-agent" "$work/bin/"
chmod 0600 "$work/bin/hvrun-agent"
digest=$(sha256sum "$work/bin/hvrun-agent" | cut -c1-64)
# The lab's hosts share root's home: this binary's cache entry there, removed before each first copy.
entry=/root/.cache/hvrun/agent-$digest

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

LAB_RECREATE=1 "$lab" up 2 >/dev/null
eval "$("$lab" env)"
h1=${LAB_PREFIX}-h1
launch() { # -> wall ms of one `hvrun -H h1 true`; checks that the copy was (or was not) made
  local want=$1 t0 t1
  t0=${EPOCHREALTIME/[.,]/}
  "$lab" exec 0 env HOME="$work/home" "$work/bin/hvrun" --verbose -p "$LAB_PORT" -i "$LAB_KEY" -H "$h1" true \
    >/dev/null 2>"$work/err" || { echo "bench_agent_copy: run failed: $(head -c 400 "$work/err")" >&2; return 1; }
  t1=${EPOCHREALTIME/[.,]/}
  grep -q "$want" "$work/err" || { echo "bench_agent_copy: expected '$want' in: $(head -c 400 "$work/err")" >&2; return 1; }
  echo $(((t1 - t0) / 1000))
}
first=() cached=()
for ((r = 0; r < reps; r++)); do
  rm -rf -- "$entry"
  first+=("$(launch "copied to ~/.cache/hvrun/agent-$digest")")
  cached+=("$(launch "cached copy ~/.cache/hvrun/agent-$digest")")
done

agent=$build/cmd/hvrun-agent
needed=$(readelf --dynamic --wide "$agent" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | paste -sd' ')
glibc=$(readelf --version-info --wide "$agent" | grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -V | tail -n1)
echo "| agent size | shared libraries it needs | needs glibc | first launch on a host (SFTP copy), median | launch with the cached copy, median | runs |"
echo "|---|---|---|---|---|---|"
printf '| %s bytes (%.2f MiB) | %s | %s | %s ms | %s ms | %s |\n' "$(stat -c %s "$agent")" \
  "$(awk -v b="$(stat -c %s "$agent")" 'BEGIN { print b / 1048576 }')" "$needed" "$glibc" \
  "$(printf '%s\n' "${first[@]}" | median)" "$(printf '%s\n' "${cached[@]}" | median)" "$reps + $reps"
