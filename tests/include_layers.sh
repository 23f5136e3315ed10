#!/usr/bin/env bash
# The include rules of docs/DESIGN.md section 1.1, checked on every source file (ctest: include_layers).
# Each folder may include only what its layer allows (quoted includes; <...> are system headers):
#   common/       common/, hvrun/ (the generated version header, the public error header): the layer
#                 every side shares depends on nothing of hvrun's
#   agent/        agent/, common/, hvrun/ — never launcher/ or collectives/
#   launcher/     rooms in this order, each including only itself, the rooms before it, common/ and
#                 hvrun/ (never the agent proper, never collectives/):
#                   base ssh output nic cli ranks start check elastic job
#   collectives/  collectives/, common/, hvrun/; the store benchmark (store_bench_main.cpp, a program,
#                 not the library) also agent/store_server.hpp, the server it measures against
#   collectives/include/hvrun/ (installed): only hvrun/ headers and the standard library
#   cmd/          launcher/, agent/, common/, hvrun/
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
allow common 'common/|hvrun/' "common/ includes only itself and hvrun/"
allow agent 'agent/|common/|hvrun/' "agent/ includes only agent/, common/ and hvrun/"
# The launcher's rooms, lowest first. A source file directly in launcher/ belongs to no room: none may be.
rooms=(base ssh output nic cli ranks start check elastic job)
stray=$(find launcher -maxdepth 1 -name '*.[ch]pp' | sort)
if [[ -n $stray ]]; then
  printf '%s   <- every launcher source lives in one of the rooms: %s\n' $stray "${rooms[*]}"
  bad=1
fi
for dir in launcher/*/; do
  dir=${dir%/}
  found=0
  for r in "${rooms[@]}"; do [[ launcher/$r == "$dir" ]] && found=1; done
  if ((!found)); then
    echo "$dir   <- not a room of the launcher's (tests/include_layers.sh: rooms); add it to the order or move its files"
    bad=1
  fi
done
below="" named=""
for r in "${rooms[@]}"; do
  below+="launcher/$r/|" named+="${named:+, }$r"
  allow "launcher/$r" "${below}common/|hvrun/" \
    "launcher/$r/ includes only the launcher's rooms up to it ($named), the common layer and hvrun/"
done
allow collectives 'collectives/|common/|hvrun/' "collectives/ includes collectives/, common/ and hvrun/ only" \
  'collectives/store_bench_main.cpp:|collectives/include/'
allow collectives/store_bench_main.cpp 'collectives/|common/|agent/store_server\.hpp"|hvrun/' \
  "the store benchmark includes the library, common/ and the store server only"
allow collectives/include/hvrun 'hvrun/' "a public header includes only hvrun/ headers"
allow cmd 'launcher/|agent/|common/|hvrun/' "cmd/ includes launcher/, agent/, common/ and hvrun/ only"
if ((bad)); then
  echo "include_layers: includes that break docs/DESIGN.md section 1.1 (above)"
  exit 1
fi
echo "include_layers: common/, agent/, launcher/'s rooms (${rooms[*]}), collectives/, cmd/ and the public headers keep their include rules"
