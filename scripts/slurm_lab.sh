#!/usr/bin/env bash
# slurm_lab.sh — a real Slurm cluster (Debian's slurmctld, slurmd and munge, 22.05) on a lab made by
# scripts/lab.sh, for hvrun's tests (root only). Lab host 0 is the login node and runs slurmctld;
# hosts 1..N-1 are the compute nodes, each with its own slurmd inside its network namespace. One munged
# serves them all (its socket is a file, which every namespace sees).
#
# Commands
#   up      the lab (same LAB_PREFIX) must be up: installs the packages when missing, writes the
#           configuration, starts munged, slurmctld and one slurmd per compute node, and waits until
#           every node is idle. If up fails half way it stops what it started.
#   down    stops everything up started (by pid file, checked against the command line), then any
#           process still in a job step of this cluster (slurmstepd and its children), and removes
#           SLURM_LAB_DIR. Succeeds when nothing is there.
#   env     prints `export SLURM_CONF=...` and the cluster's facts (nodes, partition).
#   run I CMD...   runs CMD on lab host I with SLURM_CONF set (e.g. `run 0 salloc -N 3 CMD`).
#
# Environment: LAB_PREFIX (as for lab.sh; the node names are the lab's host names), SLURM_LAB_DIR
# (default /tmp/${LAB_PREFIX}-slurm), SLURM_LAB_WAIT (seconds for the nodes to come up, default 30).
#
# Facts this set-up depends on (found making it work):
#   - slurmd always loads its cgroup plugin, and `ip netns exec` mounts a fresh /sys in its private
#     mount namespace, which hides /sys/fs/cgroup: the host's cgroup mounts are mirrored there before
#     slurmd starts.
#   - `slurmd -N NAME` names the node; spool directory, pid and log files carry %n so the slurmds on
#     one machine keep apart.
#   - node lines give the machine's real sockets, cores and threads (`slurmd -C`), else slurmd refuses
#     to register; MailProg=/bin/true (Debian's default mailer is absent); ProctrackType=proctrack/linuxproc
#     and TaskPlugin=task/none (no cgroup confinement needed); KillWait=1 so scancel ends jobs at once.
set -euo pipefail

LAB_PREFIX=${LAB_PREFIX:-hvlab}
LAB_DIR=${LAB_DIR:-/tmp/${LAB_PREFIX}}
SLURM_LAB_DIR=${SLURM_LAB_DIR:-/tmp/${LAB_PREFIX}-slurm}
SLURM_LAB_WAIT=${SLURM_LAB_WAIT:-30}
SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LAB_SH=$SCRIPT_DIR/lab.sh
# Ports inside the lab's own namespaces, so they meet nothing else on this machine.
readonly CTLD_PORT=6917 SLURMD_PORT=6918

log() { printf 'slurm_lab: %s\n' "$*" >&2; }
die() { printf 'slurm_lab: error: %s\n' "$*" >&2; exit 1; }

D=$SLURM_LAB_DIR
CONF=$D/slurm.conf

validate() {
  [[ $LAB_PREFIX =~ ^[a-z][a-z0-9-]{0,30}$ ]] || die "LAB_PREFIX '$LAB_PREFIX' must match ^[a-z][a-z0-9-]{0,30}$"
  [[ $SLURM_LAB_DIR == /* && $SLURM_LAB_DIR != / && $SLURM_LAB_DIR != *..* ]] ||
    die "SLURM_LAB_DIR '$SLURM_LAB_DIR' must be an absolute path other than /"
  [[ $SLURM_LAB_WAIT =~ ^[0-9]+$ ]] || die "SLURM_LAB_WAIT must be a number of seconds"
}

lab_var() { # NAME: a value from `lab.sh env`
  LAB_PREFIX=$LAB_PREFIX LAB_DIR=$LAB_DIR "$LAB_SH" env | sed -n "s/^export $1='\\(.*\\)'\$/\\1/p"
}

in_host() { # I CMD...
  LAB_PREFIX=$LAB_PREFIX LAB_DIR=$LAB_DIR "$LAB_SH" exec "$@"
}

# The pid in FILE if that process still runs a command line holding NEEDLE (so a recycled pid is never hit).
pid_from() { # FILE NEEDLE
  local pid cmd
  [[ -f $1 ]] || return 1
  pid=$(<"$1")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$2"* ]] || return 1
  printf '%s' "$pid"
}

terminate() { # pid...: TERM, then KILL after 3 s
  local p i
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for ((i = 0; i < 150; i++)); do
      [[ -d /proc/$p ]] && [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]] || break
      sleep 0.02
    done
    [[ -d /proc/$p ]] && kill -KILL "$p" 2>/dev/null || true
  done
}

write_config() { # nodes... (lab host names) with their addresses in ADDRS
  local hw ctld_addr=$1
  shift
  # The machine's real layout, as slurmd will report it (slurmd -C prints "NodeName=x CPUs=... UpTime=").
  hw=$(slurmd -C | head -1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//')
  [[ $hw == CPUs=* ]] || die "slurmd -C printed no hardware line: $hw"
  {
    echo "# written by scripts/slurm_lab.sh for lab '$LAB_PREFIX'"
    echo "ClusterName=${LAB_PREFIX//-/_}"
    echo "SlurmctldHost=${LAB_PREFIX}-h0($ctld_addr)"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "SlurmdPort=$SLURMD_PORT"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$D/munge/munge.sock"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$D/ctld"
    echo "SlurmdSpoolDir=$D/spool/%n"
    echo "SlurmctldPidFile=$D/slurmctld.pid"
    echo "SlurmdPidFile=$D/slurmd-%n.pid"
    echo "SlurmctldLogFile=$D/slurmctld.log"
    echo "SlurmdLogFile=$D/slurmd-%n.log"
    echo "MailProg=/bin/true"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "MpiDefault=none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "ReturnToService=2"
    echo "KillWait=1"
    echo "MinJobAge=10"
    echo "InactiveLimit=0"
    local i=1 n
    for n in "$@"; do
      echo "NodeName=$n NodeAddr=${ADDRS[i]} $hw RealMemory=500 State=UNKNOWN"
      i=$((i + 1))
    done
    echo "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$CONF"
}

start_munged() {
  mkdir -p "$D/munge"
  chmod 0700 "$D/munge"
  dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$D/munge/munge.key"
  # --force: munged distrusts a socket directory under /tmp; this one is root's own, mode 0700.
  munged --force --socket="$D/munge/munge.sock" --key-file="$D/munge/munge.key" \
    --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/seed"
}

# Mounts the host's cgroup file systems (read from this, the root, mount namespace) inside host I's,
# then execs slurmd there. slurmd daemonizes; its pid file names it.
start_slurmd() { # I NAME
  local mounts
  mounts=$(awk '$2 ~ "^/sys/fs/cgroup/" && ($3 == "cgroup" || $3 == "cgroup2") {print $3, $2, $4}' /proc/self/mounts)
  in_host "$1" sh -c '
    set -e
    mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
    printf "%s\n" "$1" | while read -r type dir opts; do
      [ -n "$type" ] || continue
      mkdir -p "$dir"
      mount -t "$type" -o "$opts" "$type" "$dir"
    done
    exec slurmd -f "$2" -N "$3"' slurmd-setup "$mounts" "$CONF" "$2"
}

wait_idle() { # nodes...
  local deadline=$((SECONDS + SLURM_LAB_WAIT)) states
  while :; do
    states=$(in_host 0 env SLURM_CONF="$CONF" sinfo -h -N -o '%N %T' 2>/dev/null || true)
    local n ok=1
    for n in "$@"; do
      [[ $states == *"$n idle"* ]] || ok=0
    done
    ((ok)) && return 0
    ((SECONDS < deadline)) || die "nodes not idle after ${SLURM_LAB_WAIT} s: $(tr '\n' ';' <<<"$states") (logs in $D)"
    sleep 0.2
  done
}

cmd_up() {
  ((EUID == 0)) || die "must run as root (namespaces, slurmd)"
  # shellcheck source=lib/packages.sh
  source "$SCRIPT_DIR/lib/packages.sh"
  ensure_packages slurm_lab.sh slurmctld slurmd slurm-client munge
  local hosts
  read -r -a hosts <<<"$(lab_var LAB_HOSTS)"
  read -r -a ADDRS <<<"$(lab_var LAB_FABRIC_ADDRS)"
  ((${#hosts[@]} >= 2)) || die "no lab '$LAB_PREFIX' with 2 or more hosts; run: LAB_PREFIX=$LAB_PREFIX scripts/lab.sh up N"
  [[ ! -e $D ]] || die "$D exists; run: LAB_PREFIX=$LAB_PREFIX scripts/slurm_lab.sh down"
  mkdir -p "$D/ctld" "$D/spool"
  trap 'log "up failed; stopping what it started"; do_down' ERR
  local nodes=("${hosts[@]:1}") t0=$SECONDS i
  write_config "${ADDRS[0]}" "${nodes[@]}"
  start_munged
  in_host 0 slurmctld -f "$CONF"
  for ((i = 1; i < ${#hosts[@]}; i++)); do
    mkdir -p "$D/spool/${hosts[i]}"
    start_slurmd "$i" "${hosts[i]}"
  done
  wait_idle "${nodes[@]}"
  trap - ERR
  log "up: slurmctld on ${hosts[0]}, slurmd on ${nodes[*]}, idle after $((SECONDS - t0)) s"
}

do_down() {
  unset SLURM_CONF  # this script and its children are not the processes it looks for
  [[ -d $D ]] || return 0
  local f pid
  # slurmd first (no new steps), then whatever job steps left (slurmstepd and everything under it), then
  # the controller and munged.
  for f in "$D"/slurmd-*.pid; do
    [[ -e $f ]] || continue
    if pid=$(pid_from "$f" "$CONF"); then terminate "$pid"; fi
  done
  local leftovers=()
  for pid in $(ps -eo pid=,args= | awk -v d="$D" 'index($0, "slurmstepd") && index($0, d) {print $1}'); do
    leftovers+=("$pid")
  done
  # Processes started with this cluster's SLURM_CONF (salloc, sbatch, what tests ran under them).
  for f in $(grep -lzx "SLURM_CONF=$CONF" /proc/[0-9]*/environ 2>/dev/null || true); do
    pid=${f#/proc/}
    pid=${pid%/environ}
    [[ $pid != "$$" ]] && leftovers+=("$pid")
  done
  ((${#leftovers[@]} == 0)) || terminate "${leftovers[@]}"
  if pid=$(pid_from "$D/slurmctld.pid" "$CONF"); then terminate "$pid"; fi
  if pid=$(pid_from "$D/munge/munged.pid" "$D/munge"); then terminate "$pid"; fi
  rm -rf "$D"
}

cmd_env() {
  echo "export SLURM_CONF='$CONF'"
  echo "export SLURM_LAB_DIR='$D'"
  echo "export SLURM_LAB_PARTITION='lab'"
}

main() {
  validate
  local cmd=${1:-}
  shift || true
  case $cmd in
    up) cmd_up ;;
    down) do_down ;;
    env) cmd_env ;;
    run)
      (($# >= 2)) || die "usage: slurm_lab.sh run I CMD..."
      local i=$1
      shift
      SLURM_CONF=$CONF in_host "$i" "$@"
      ;;
    *) sed -n '/^# Commands/,/^# Environment/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}

main "$@"
