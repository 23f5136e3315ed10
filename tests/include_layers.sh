#!/usr/bin/env bash
# The include rules of docs/DESIGN.md section 1.1, checked on every source file (ctest: include_layers):
#   agent/        includes agent/ and hvrun/ (the generated version header, the public error header) only
#   launcher/     never includes collectives/ (it starts agents and ranks as programs, links no rank code)
#   collectives/  never includes launcher/
#   collectives/include/hvrun/ (installed): only hvrun/ headers and the standard library, nothing private
# Prints each include that breaks a rule with its file and line; exit 1 if any does.
#   tests/include_layers.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: include_layers.sh SOURCE_DIR}
cd "$src"
bad=0
# rule FOLDER PATTERN WHY: every quoted include in FOLDER's sources matching PATTERN breaks the rule.
rule() {
  local hits
  hits=$(grep -rnE --include='*.hpp' --include='*.cpp' --include='*.h' --include='*.c' "^#include \"($2)" "$1" || true)
  if [[ -n $hits ]]; then
    printf '%s\n' "$hits" | sed "s|\$|   <- $3|"
    bad=1
  fi
}
rule agent '[^ah]|a[^g]|h[^v]' "agent/ includes only agent/ and hvrun/"
rule launcher 'collectives/' "launcher/ never includes collectives/"
rule collectives 'launcher/|cmd/|tests/' "collectives/ never includes launcher/"
rule collectives/include/hvrun '[^h]|h[^v]|hv[^r]' "a public header includes only hvrun/ headers"
if ((bad)); then
  echo "include_layers: includes that break docs/DESIGN.md section 1.1 (above)"
  exit 1
fi
echo "include_layers: agent/, launcher/, collectives/ and the public headers keep their include rules"
