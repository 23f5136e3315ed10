# Sourced by the benchmark scripts: writes one section of a markdown file (docs/BENCHMARKS.md).
#
# write_section FILE HEADING SECTION_FILE
#   Replaces the section of FILE that starts with the line HEADING (up to the next "## " heading) by the
#   contents of SECTION_FILE, or appends it when FILE has no such section; creates FILE (with a
#   "# Benchmarks" title) when it does not exist. Runs of blank lines are squeezed to one.
write_section() {
  local file=$1 heading=$2 section_file=$3 tmp
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
