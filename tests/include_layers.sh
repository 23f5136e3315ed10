#!/usr/bin/env bash
# The include rules of docs/DESIGN.md section 1.1, checked on every source file (ctest: include_layers).
# Each folder may include only what its layer allows (quoted includes; <...> are system headers):
#   agent/wire/   agent/wire/, hvrun/ (the generated version header, the public error header)
#   agent/        agent/ (itself and the wire layer), hvrun/ — never launcher/ or collectives/
#   launcher/     launcher/, agent/wire/, hvrun/, and agent/rank_process.hpp (its process-group helpers,
#                 until they move to the wire layer)
#   collectives/  collectives/, agent/wire/, hvrun/; the store benchmark (store_bench_main.cpp, a program,
#                 not the library) also agent/store_server.hpp, the server it measures against
#   collectives/include/hvrun/ (installed): only hvrun/ headers and the standard library
#   cmd/          launcher/, agent/, hvrun/
# Prints each include that breaks a rule with its file and line; exit 1 if any does.
#   tests/include_layers.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: include_layers.sh SOURCE_DIR}
cd "$src"
bad=0
# allow FOLDER ALLOWED WHY [SKIP]: every quoted include in FOLDER's sources (not below SKIP, a path
# prefix) that does not match the extended regex ALLOWED breaks the rule.
allow() {
  local folder=$1 allowed=$2 why=$3 skip=${4:-} hits
  hits=$(grep -rnHE --include='*.hpp' --include='*.cpp' --include='*.h' --include='*.c' '^#include "' "$folder" |
         { if [[ -n $skip ]]; then grep -vE "^($skip)" || true; else cat; fi; } |
         grep -vE "^[^:]+:[0-9]+:#include \"($allowed)" || true)
  if [[ -n $hits ]]; then
    printf '%s\n' "$hits" | sed "s|\$|   <- $why|"
    bad=1
  fi
}
allow agent/wire 'agent/wire/|hvrun/' "the wire layer includes only itself and hvrun/"
allow agent 'agent/|hvrun/' "agent/ includes only agent/ and hvrun/" agent/wire/
allow launcher 'launcher/|agent/wire/|agent/rank_process\.hpp"|hvrun/' \
  "launcher/ includes launcher/, the wire layer and hvrun/ only"
allow collectives 'collectives/|agent/wire/|hvrun/' "collectives/ includes collectives/, the wire layer and hvrun/ only" \
  'collectives/store_bench_main.cpp:|collectives/include/'
allow collectives/store_bench_main.cpp 'collectives/|agent/wire/|agent/store_server\.hpp"|hvrun/' \
  "the store benchmark includes the library, the wire layer and the store server only"
allow collectives/include/hvrun 'hvrun/' "a public header includes only hvrun/ headers"
allow cmd 'launcher/|agent/|hvrun/' "cmd/ includes launcher/, agent/ and hvrun/ only"
if ((bad)); then
  echo "include_layers: includes that break docs/DESIGN.md section 1.1 (above)"
  exit 1
fi
echo "include_layers: agent/wire/, agent/, launcher/, collectives/, cmd/ and the public headers keep their include rules"
