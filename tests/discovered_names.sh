#!/usr/bin/env bash
# The cases ctest runs one by one (catch_discover_tests: [integration], [lab], [gpu]) are selected by
# their names on hvrun_tests' command line: a name that begins with '-' is taken for an option ("Unrecognised
# token"), and CMake cuts a name at ';'. Either fails only when that case runs, perhaps only in CI's lab
# stage; this names them at once.
#   tests/discovered_names.sh HVRUN_TESTS
set -euo pipefail
tests=${1:?usage: discovered_names.sh HVRUN_TESTS}
# Catch2 2.x exits with the number of names it lists.
names=$("$tests" --list-test-names-only "[integration],[lab],[gpu]" || true)
[[ -n $names ]] || { echo "discovered_names: $tests listed no case" >&2; exit 1; }
bad=$(grep -E '^-|;' <<<"$names" || true)
if [[ -n $bad ]]; then
  printf 'discovered_names: these case names cannot be run one by one by ctest (a leading "-" or a ";"); rename them:\n%s\n' "$bad" >&2
  exit 1
fi
printf 'discovered_names: %d names, none begins with "-" or holds ";"\n' "$(grep -c . <<<"$names")"
