#!/usr/bin/env bash
# hvrun's man page and bash completion (written at build time by hvrun-docs, cmd/CMakeLists.txt) against
# hvrun itself: the man page names every long option `hvrun --help` lists and groff finds nothing to warn
# about in it; the completion completes options, file names after --hostfile, and leaves the command's
# own words alone.
#   hvrun_docs.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: hvrun_docs.sh BUILD_DIR}
man=$build/docs/hvrun.1 completion=$build/docs/hvrun.bash-completion
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# The long options of --help's option lines, which start at column 2 (a description's wrapped lines start
# further right, and the footer's example command is not an option line).
mapfile -t longs < <("$build/cmd/hvrun" --help | grep -E '^  -' | awk '{print $1}' | tr ',' '\n' | grep -E '^--.' | sort -u)
((${#longs[@]} > 30)) || fail "found only ${#longs[@]} long options in hvrun --help"
missing=()
for opt in "${longs[@]}"; do
  grep -qF -- "\\fB${opt//-/\\-}\\fR" "$man" || missing+=("$opt")
done
((${#missing[@]} == 0)) && ok "the man page names all ${#longs[@]} long options of hvrun --help" ||
  fail "the man page lacks ${missing[*]}"

if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww "$man" 2>&1 >/dev/null)
  [[ -z $warnings ]] && ok "groff -man -Tutf8 -ww: no warnings" || fail "groff warns: $warnings"
else
  echo "skipped: groff not installed (scripts/setup.sh installs groff-base); the man page is not rendered"
fi

# complete WORD... : COMPREPLY, one per line, for the cursor on the last word.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _hvrun; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$completion" "$@"
}
out=$(complete_words hvrun --network-i)
grep -qx -- --network-interface <<<"$out" && ok "--network-i completes to --network-interface" ||
  fail "--network-i completed to: $out"
out=$(complete_words hvrun -n)
grep -qx -- -np <<<"$out" && ok "-n offers -np" || fail "-n completed to: $out"
touch "$tmp/hosts.txt"
out=$(complete_words hvrun --hostfile "$tmp/hos")
grep -qx -- "$tmp/hosts.txt" <<<"$out" && ok "--hostfile completes file names" || fail "--hostfile completed to: $out"
out=$(complete_words hvrun -np 2 -H a:2 --ver)
grep -qx -- --verbose <<<"$out" && ok "options after option values still complete" || fail "-np 2 -H a:2 --ver: $out"
out=$(complete_words hvrun -np 2 -H a:2 python --ver)
grep -q -- --verbose <<<"$out" && fail "hvrun options offered inside the command: $out" ||
  ok "the command's own options are not hvrun's"

if ((fails)); then
  echo "hvrun_docs: $fails check(s) failed"
  exit 1
fi
echo "hvrun_docs: all checks passed"
