# Sourced by the benchmark scripts: writes one section of a markdown file (docs/BENCHMARKS.md), and only
# when the machine was quiet for the whole run.
#
# note_load
#   Records the 1-minute load average now. A script calls it before any work of its own (its lab, its
#   runs): a benchmark of 32 lab hosts raises the load itself (to 20 on 2 cores), so only what was there
#   before it started tells of other work (a build, tests, a helper) sharing the machine.
# settle SECONDS
#   Waits, at most SECONDS, for the 1-minute load average to fall to BENCH_MAX_LOAD: a benchmark started
#   right after another (bench.sh runs bench_scale.sh) finds the load its predecessor left, which decays
#   in about two minutes when nothing else runs. Then note_load.
# quiet_enough FILE
#   True when every load noted is at most BENCH_MAX_LOAD (default 2); else says on stderr that FILE is
#   not written and why: figures taken beside other work are not measurements.
#
# write_section FILE HEADING SECTION_FILE
#   Replaces the section of FILE that starts with the line HEADING (up to the next "## " heading) by the
#   contents of SECTION_FILE, or appends it when FILE has no such section; creates FILE (with a
#   "# Benchmarks" title) when it does not exist. Runs of blank lines are squeezed to one.
BENCH_MAX_LOAD=${BENCH_MAX_LOAD:-2}
BENCH_LOADS=()

note_load() { BENCH_LOADS+=("$(cut -d' ' -f1 /proc/loadavg)"); }

settle() {
  local waited=0
  while ((waited < $1)) && awk -v a="$(cut -d' ' -f1 /proc/loadavg)" -v m="$BENCH_MAX_LOAD" 'BEGIN { exit !(a > m) }'; do
    sleep 5
    waited=$((waited + 5))
  done
  note_load
}

quiet_enough() {
  local l worst=0
  for l in "${BENCH_LOADS[@]}"; do
    awk -v a="$l" -v b="$worst" 'BEGIN { exit !(a > b) }' && worst=$l
  done
  if awk -v a="$worst" -v m="$BENCH_MAX_LOAD" 'BEGIN { exit !(a > m) }'; then
    echo "$(basename "$0"): NOT WRITTEN to $1: the load average reached $worst during the run, above" \
      "$BENCH_MAX_LOAD (other work shared the machine: these are not measurements); run the benchmark alone" >&2
    return 1
  fi
}

write_section() {
  local file=$1 heading=$2 section_file=$3 tmp
  quiet_enough "$file" || return 1
  mkdir -p "$(dirname "$file")"
  if [[ ! -f $file ]]; then
    { echo "# Benchmarks"; echo; cat "$section_file"; } >"$file"
    return
  fi
  tmp=$(mktemp)
  awk -v sec="$heading" -v file="$section_file" '
    function emit() { while ((getline line < file) > 0) print line; print ""; done = 1 }
    $0 == sec { skip = 1; emit(); next }
    skip && /^## / { skip = 0 }
    !skip { print }
    END { if (!done) { print ""; emit() } }' "$file" | cat -s >"$tmp"
  cp "$tmp" "$file"
  rm -f "$tmp"
}
