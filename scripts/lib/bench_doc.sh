# Sourced by the benchmark scripts: writes one section of a markdown file (docs/BENCHMARKS.md), and only
# when the machine was quiet for the whole run.
#
# note_load
#   Records the 1-minute load average now; a script calls it at its start and between its phases.
# quiet_enough FILE
#   True when every load noted, and the one now, is at most BENCH_MAX_LOAD (default 2); else says on
#   stderr that FILE is not written and why. Figures taken while other work (a build, tests, a helper)
#   shared the machine are not measurements.
#
# write_section FILE HEADING SECTION_FILE
#   Replaces the section of FILE that starts with the line HEADING (up to the next "## " heading) by the
#   contents of SECTION_FILE, or appends it when FILE has no such section; creates FILE (with a
#   "# Benchmarks" title) when it does not exist. Runs of blank lines are squeezed to one.
BENCH_MAX_LOAD=${BENCH_MAX_LOAD:-2}
BENCH_LOADS=()

note_load() { BENCH_LOADS+=("$(cut -d' ' -f1 /proc/loadavg)"); }

quiet_enough() {
  local l worst=0
  note_load
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
