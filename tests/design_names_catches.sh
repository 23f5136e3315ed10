#!/usr/bin/env bash
# tests/design_names.sh catches a name the document puts in the wrong place (ctest: design_names_catches).
# A copy of docs/DESIGN.md gets one planted mistake per rule of where a name lives; the check must fail
# and name each one, while every name still exists (only the places are wrong).
#   tests/design_names_catches.sh SOURCE_DIR
# shellcheck disable=SC2016  # the backticks below are Markdown's, not command substitutions
set -euo pipefail
src=${1:?usage: design_names_catches.sh SOURCE_DIR}
check=$(cd "$(dirname "$0")" && pwd)/design_names.sh
cd "$src"
copy=$(mktemp)
trap 'rm -f "$copy"' EXIT
text=$(<docs/DESIGN.md)

# plant OLD NEW EXPECTED: OLD (which must be in the document) becomes NEW; EXPECTED is the line the
# check must print for it.
plants=0
expected=()
plant() {
  if [[ $text != *"$1"* ]]; then
    echo "design_names_catches: docs/DESIGN.md no longer holds: $1 (choose another plant here)"
    exit 1
  fi
  text=${text/"$1"/"$2"}
  expected+=("$3")
  plants=$((plants + 1))
}
# A class moved to another file, in each form the document writes.
plant '`AgentState` (`agent/agent_state.hpp`)' '`AgentState` (`agent/rank_table.hpp`)' \
      '§6.2: `AgentState` does not occur in the code of agent/rank_table.hpp (where the text puts it)'
plant '`launcher/elastic/worker_notifier.hpp` (`WorkerNotifier`)' '`launcher/elastic/discovery_script.hpp` (`WorkerNotifier`)' \
      '§3.7: `WorkerNotifier` does not occur in the code of launcher/elastic/discovery_script.hpp (the file it is listed under)'
plant '(`rank_environment`, `launcher/ranks/rank_env.cpp`)' '(`rank_environment`, `launcher/ranks/user_env.cpp`)' \
      '§7.2: `rank_environment` does not occur in the code of launcher/ranks/user_env.cpp (where the text puts it)'
# The layout of section 1.1: a name listed under a file that only uses it, a file or a stem in another
# folder's row, a name of another folder in a row.
plant '`ssh_run` (`run_command`)' '`ssh_run` (`run_command`, `SshError`)' \
      '§1.1: `SshError` is not declared in launcher/ssh/ssh_run.* (the file its row lists it under)'
plant '`job_secret.hpp` (`JobSecret`, `hex_encode`' '`job_secret.hpp` (`JobSecret`, `seconds_text`' \
      '§1.1: `seconds_text` is not declared in common/job_secret.hpp (the file its paragraph lists it under)'
plant '`network_stack.cpp`; links' '`frame_codec.cpp`; links' \
      '§1.1: `frame_codec.cpp` is no file of agent/ (the folder of its row)'
plant '`line_splitter` (`LineSplitter`)' '`io_thread` (`IoThread`)' \
      '§1.1: `io_thread` is no file of launcher/output/ (its room): there is no launcher/output/io_thread.*'
plant 'links: `StoreClient`, `Communicator`' 'links: `StoreClient`, `ProbeRound`, `Communicator`' \
      '§1.1: `ProbeRound` occurs nowhere in the code of collectives/ (the folder of its row)'
printf '%s\n' "$text" >"$copy"

status=0
out=$("$check" . "$copy" 2>&1) || status=$?
missing=0
for line in "${expected[@]}"; do
  if ! grep -qxF -- "$line" <<<"$out"; then echo "design_names_catches: not caught: $line"; missing=1; fi
done
if ((status == 0 || missing)) || ! grep -q 'every one is in the code$' <<<"$out" ||
   ! grep -q "^design_names: $plants of [0-9]* places in $copy are not where" <<<"$out"; then
  printf 'design_names_catches: design_names.sh (exit %d) on a copy with %d planted mistakes said:\n%s\n' \
    "$status" "$plants" "$out"
  exit 1
fi
echo "design_names_catches: each of $plants planted mistakes is caught"
