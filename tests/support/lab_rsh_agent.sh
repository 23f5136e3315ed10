#!/bin/sh
# A --rsh-agent for the lab (tests only): `lab_rsh_agent.sh HOST CMD...` runs CMD on lab host HOST
# (named LAB_PREFIX-hI) by entering its namespaces directly with `scripts/lab.sh exec I`, no sshd.
# It keeps the wrapper contract: stdin and stdout pass through untouched (exec, no pipes of its own),
# stderr is CMD's, and its exit status is CMD's (lab.sh's own errors exit 125).
# HVRUN_TEST_RSH_LOG, when set, names a file that gets one line per call with the arguments.
set -eu
[ $# -ge 2 ] || { echo "usage: lab_rsh_agent.sh HOST CMD..." >&2; exit 125; }
host=$1
shift
case $host in
  "$LAB_PREFIX"-h[0-9]*) index=${host#"$LAB_PREFIX"-h} ;;
  *) echo "lab_rsh_agent.sh: '$host' is not a host of lab '$LAB_PREFIX'" >&2; exit 125 ;;
esac
if [ -n "${HVRUN_TEST_RSH_LOG:-}" ]; then printf '%s\n' "$host $*" >>"$HVRUN_TEST_RSH_LOG"; fi
exec "$(dirname "$0")/../../scripts/lab.sh" exec "$index" "$@"
