#!/bin/sh
# An `hvrun --rsh-agent` for scripts/bench_scale.sh: `ns_rsh_agent.sh HOST CMD...` runs CMD on the lab host
# HOST (a scripts/lab.sh namespace, LAB_PREFIX-hI) as `lab.sh exec` does (`ip netns exec`: its network
# namespace, its own /sys and /etc/hosts; nsenter: its UTS namespace, so its hostname), no sshd, but
# without lab.sh's bash, which reads the lab's state for every call: at 1000 hosts that alone cost more
# CPU than hvrun. Its own /sys matters: hvrun-agent reads each NIC's speed there, and a NIC of unknown
# speed ranks below the trap NICs of known speed, which made every launch wait for their timeouts.
# Contract as hvrun's --rsh-agent wants it: stdin and stdout pass through (exec), exit status is CMD's.
# Needs LAB_PREFIX and LAB_DIR (from `lab.sh env`) and root.
set -eu
[ $# -ge 2 ] || { echo "usage: ns_rsh_agent.sh HOST CMD..." >&2; exit 125; }
host=$1
shift
case $host in
  "$LAB_PREFIX"-h[0-9]*) index=${host#"$LAB_PREFIX"-h} ;;
  *) echo "ns_rsh_agent.sh: '$host' is not a host of lab '$LAB_PREFIX'" >&2; exit 125 ;;
esac
exec ip netns exec "$host" nsenter --uts="$LAB_DIR/uts/h$index" -- "$@"
