#!/usr/bin/env bash
# lab.sh — a multi-host test lab for hvrun on one machine (root only).
#
# Each simulated host is a Linux network namespace ${LAB_PREFIX}-hI with its own UTS namespace
# (hostname ${LAB_PREFIX}-hI), its own /etc/hosts (/etc/netns/<ns>/hosts, which `ip netns exec`
# bind-mounts), and its own sshd on LAB_PORT. The hosts' NICs are veth pairs whose other ends live
# in a dedicated switch namespace ${LAB_PREFIX}-sw; nothing is attached to the root namespace's
# network, and neither root's ~/.ssh, /etc/hosts nor the root namespace's iptables are touched.
#
# Commands
#   up N            create N hosts (2..256), start and verify their sshd (LAB_SSHD=0: 2..1000 hosts,
#                   no sshd). Fails with a clear message if a lab with this prefix already exists
#                   (LAB_RECREATE=1: tear it down first). If up fails half way, or is interrupted
#                   (Ctrl-C, SIGTERM), it tears down what it made. It raises, never lowers, the kernel
#                   limits a lab of N hosts needs (see "Scale" below).
#   down            remove every trace: sshd (by pidfile), any process left in the lab's namespaces,
#                   the namespaces (and with them their iptables rules), /etc/netns entries, LAB_DIR.
#                   Succeeds when nothing exists and after a half-finished up.
#   env             print shell-sourceable `export LAB_...=` lines (eval "$(scripts/lab.sh env)").
#   exec I CMD...   run CMD on host I (its netns, hostname and /etc/hosts); exit code and stdio pass
#                   through (lab.sh's own errors, e.g. a bad index, exit 125).
#   cut I / uncut I drop (iptables DROP, INPUT and OUTPUT, IPv4 and IPv6) all traffic of host I on
#                   every NIC but lo — a pulled cable — / undo it.
#   oneway I J      host I drops every connection host J opens to it (matched by J's NIC MAC
#                   addresses, so every NIC and both IP families) except TCP to or from LAB_PORT;
#                   replies to connections host I opens pass (conntrack), as behind a host firewall
#                   that blocks J inbound: I -> J works, J -> I times out.
#   oneway-clear I  remove host I's oneway rules.
#   nat I J         host I sees every IPv4 connection host J opens to it come from 100.64.H.L (J as a
#                   16-bit number: carrier-grade NAT space, no lab host's address), as behind a NAT
#                   between them (iptables SNAT in I's nat INPUT chain, matched by J's NIC MACs);
#                   replies go back through conntrack, and connections I opens are untouched.
#   nat-clear I     remove host I's nat rules.
#   ssh-stop I / ssh-start I   stop / start host I's sshd (existing sessions are left alone).
#   hide-libs I FILE...  restart host I's sshd in a mount namespace of its own where each FILE (links
#                   resolved) reads as empty (/dev/null bound over it): a host without those shared
#                   libraries. Until ssh-stop I / ssh-start I or down; the host's own mounts are untouched.
#   slow-shell I S  every ssh session on host I sleeps S seconds in bash before its command (BASH_ENV,
#                   set by host I's sshd, which is restarted): a host whose login shell alone is slow.
#                   S = 0 undoes it. Until down.
#   serial-shell S  every ssh session on every host holds one lab-wide lock for S seconds in bash before
#                   its command (flock on LAB_DIR/serial-shell.lock): a login shell whose start-up takes a
#                   lock in a shared home (pyenv init, conda), so N hosts' shells run one after another.
#                   S = 0 undoes it. Until down.
#   bind I SRC DST [SRC DST]...  restart host I's sshd in a mount namespace of its own where each DST
#                   (a file or directory that exists) shows SRC's content: a host with another copy of a
#                   script, an empty directory where the others have one, another package's metadata.
#                   Until ssh-stop I / ssh-start I or down; the host's own mounts are untouched.
#   rekey I         new host key for host I and restart its sshd (LAB_KNOWN_HOSTS keeps the old key,
#                   so a strict client using it sees "host key changed").
#   known-hosts     print known_hosts lines for the hosts' current keys (LAB_KNOWN_HOSTS is the
#                   file written by up).
#   status          one line per host: name, fabric NIC and address, sshd pid, CUT.
#
# Environment (set the same values for every command of one lab)
#   LAB_PREFIX      name prefix of namespaces and hosts (default hvlab); labs with different
#                   prefixes coexist (they reuse the same subnets, but in separate namespaces).
#   LAB_DIR         state directory (default /tmp/${LAB_PREFIX}); removed by down.
#   LAB_PORT        sshd port on every host (default 2222).
#   LAB_IPV6        1 (default): ULA fd77::(10+I)/64 on the fabric NIC, link-local everywhere,
#                   sshd on both families; 0: IPv6 disabled inside the lab.
#   LAB_FABRIC_NAMES  fabric NIC names, cycled over hosts
#                   (default "eth1 enp6s0 enp5s0 ib0 ens3f0 eno1 enp129s0f1 eth0").
#   LAB_SSHD_WAIT   seconds to wait for every sshd to listen (default 10).
#   LAB_LINK_WAIT   seconds to wait for every link of every host and of the switch to be running
#                   (operstate UP: a veth reports carrier a moment after it is set up; default 10).
#   LAB_RECREATE    1: `up` tears an existing lab down first instead of failing.
#   LAB_SKIP_BASHRC 1 (default): sshd sets SHLVL=1 in sessions, so bash does not source ~/.bashrc
#                   for ssh commands — as on a stock Debian account, whose ~/.bashrc returns at once
#                   when not interactive. The hosts share root's home; a heavy ~/.bashrc (here
#                   `pyenv init`, ~100 processes and a lock in ~/.pyenv/shims) would cost every
#                   session about a second, and a session killed inside it can leave a stale lock.
#                   0: ~/.bashrc runs for every ssh command.
#   LAB_JOBS        hosts set up in parallel by up (default 4); also bounds the parallel ssh-keygen
#                   runs (4 x LAB_JOBS) and the parallel ssh checks of up's verification (4 x LAB_JOBS).
#   LAB_SSHD        1 (default): an sshd per host. 0: none (no keys, no sshd; up to 1000 hosts): hosts
#                   are reached by entering their namespaces (`exec`, or `nsenter --net=/run/netns/NS`
#                   as an `hvrun --rsh-agent`); ssh-stop/ssh-start/rekey/hide-libs/bind/slow-shell refuse such a lab.
#   LAB_CONTAINER_VETHS  N (default 0, at most 500): each host also gets N container veths
#                   vethc0..vethcN-1 enslaved to docker0 (with only an IPv6 link-local address, as
#                   Docker leaves them; peers up in the switch ns), like a Docker or Kubernetes host.
#   LAB_TRACE       1: trace every command with a timestamp (set -x).
#
# Addressing plan (host I, I = 0..N-1; A = 10+I)
#   fabric  <name from LAB_FABRIC_NAMES>  10.77.0.A/24 (+ fd77::A/64)  bridge br-fab in the switch ns;
#           works, carries SSH; every host name resolves to it.
#   docker0 172.17.0.1/16 on every host (same address), a bridge with one port (vethdk0, whose
#           peer sits unattached in the switch ns) so it is UP with carrier, like Docker with a container.
#   wlp5s0  192.168.77.A/24, up, peer in the switch ns attached to nothing: reaches nobody.
#   eth9    10.88.0.A/24 on bridge br-drop; every host drops INPUT on eth9, so connects time out.
#   MACs    02:4c:KK:00:HH:LL (KK 01 fabric, 02 wlp5s0, 03 eth9, 04 vethdk0; HHLL = I in hex),
#           docker0 02:42:00:00:HH:LL.
#   Above 245 hosts A no longer fits one byte: host I gets 10.77.H.L with H.L = A as a 16-bit number
#   (A = 256 is 10.77.1.0), and the IPv4 subnets widen to /16 (10.77.0.0/16, 10.88.0.0/16,
#   192.168.0.0/16 with wlp5s0 at 192.168.(77+H).L); up to 245 hosts every address is as above.
#
# Scale (labs of hundreds of hosts; scripts/bench_scale.sh runs 256 with sshd and 1000 without)
#   - neighbour tables: one ARP and one NDP table serve every namespace; up raises gc_thresh1/2/3 to
#     room for every host learning every other host on every segment (N x N x 8 + 1024 entries,
#     x2 and x4 for thresh2/3). Nothing lowers them again (bench scripts restore theirs).
#   - kernel.pid_max: raised to at least N x 64 (sshd, sessions, agents, their threads and ranks).
#   - file descriptors: up raises its soft RLIMIT_NOFILE to the hard limit before starting sshd, so
#     every session (and the agent and ranks it runs) may hold one connection per host.
#   - the switch's bridges: Linux takes at most 1023 ports per bridge, hence the 1000-host bound.
#   - up forks per host, in parallel (LAB_JOBS); a 256-host lab comes up in about a minute, a
#     1000-host one (LAB_SSHD=0) in about three on 2 cores; down in under a minute (namespaces
#     deleted in one `ip -batch`).
set -euo pipefail
if [[ ${LAB_TRACE:-0} == 1 ]]; then
  PS4='+ ${EPOCHREALTIME} '
  set -x
fi

LAB_PREFIX=${LAB_PREFIX:-hvlab}
LAB_DIR=${LAB_DIR:-/tmp/${LAB_PREFIX}}
LAB_PORT=${LAB_PORT:-2222}
LAB_IPV6=${LAB_IPV6:-1}
LAB_FABRIC_NAMES=${LAB_FABRIC_NAMES:-eth1 enp6s0 enp5s0 ib0 ens3f0 eno1 enp129s0f1 eth0}
LAB_SSHD_WAIT=${LAB_SSHD_WAIT:-10}
LAB_LINK_WAIT=${LAB_LINK_WAIT:-10}
LAB_RECREATE=${LAB_RECREATE:-0}
LAB_SKIP_BASHRC=${LAB_SKIP_BASHRC:-1}
LAB_JOBS=${LAB_JOBS:-4}
LAB_CONTAINER_VETHS=${LAB_CONTAINER_VETHS:-0}
LAB_SSHD=${LAB_SSHD:-1}

readonly MAX_HOSTS=256 MAX_HOSTS_NO_SSHD=1000
readonly SSHD_BIN=/usr/sbin/sshd
readonly MARKER=.hvrun-lab
readonly DOCKER_IF=docker0 DOCKER_PORT_IF=vethdk0 DOCKER_ADDR=172.17.0.1
readonly DEAD_IF=wlp5s0 DROP_IF=eth9
readonly FABRIC_NET=10.77.0 DROP_NET=10.88.0 DEAD_NET=192.168.77 FABRIC6_NET=fd77:
LAB_SCRIPT_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
readonly LAB_SCRIPT_PATH

SW_NS=${LAB_PREFIX}-sw

log() { printf 'lab: %s\n' "$*" >&2; }
warn() { printf 'lab: warning: %s\n' "$*" >&2; }
DIE_CODE=1 # exec uses 125, so its own failures are told apart from CMD's exit codes
die() { printf 'lab: error: %s\n' "$*" >&2; exit "$DIE_CODE"; }

usage() { # exit-code
  sed -n '/^# Commands/,/^set -euo/p' "$LAB_SCRIPT_PATH" | sed '$d; s/^# \{0,1\}//'
  exit "$1"
}

uint_in() { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= $2 && $1 <= $3)); } # value min max

now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
elapsed() { local d=$(($(now_ms) - $1)); printf '%d.%03d s' $((d / 1000)) $((d % 1000)); }

validate_config() {
  [[ $LAB_PREFIX =~ ^[a-z][a-z0-9-]{0,30}$ ]] ||
    die "LAB_PREFIX '$LAB_PREFIX' must match ^[a-z][a-z0-9-]{0,30}$ (it names namespaces and hosts)"
  [[ $LAB_DIR == /* && $LAB_DIR != / && $LAB_DIR != *..* ]] ||
    die "LAB_DIR '$LAB_DIR' must be an absolute path other than /"
  if ! uint_in "$LAB_PORT" 1 65535 || ((LAB_PORT == 22)); then
    die "LAB_PORT '$LAB_PORT' must be a port number other than 22"
  fi
  [[ $LAB_IPV6 == [01] ]] || die "LAB_IPV6 must be 0 or 1"
  [[ $LAB_SKIP_BASHRC == [01] ]] || die "LAB_SKIP_BASHRC must be 0 or 1"
  [[ $LAB_SSHD == [01] ]] || die "LAB_SSHD must be 0 or 1"
  [[ $LAB_SSHD_WAIT =~ ^[0-9]+$ ]] || die "LAB_SSHD_WAIT must be a number of seconds"
  [[ $LAB_LINK_WAIT =~ ^[0-9]+$ ]] || die "LAB_LINK_WAIT must be a number of seconds"
  uint_in "$LAB_JOBS" 1 64 || die "LAB_JOBS must be 1..64"
  uint_in "$LAB_CONTAINER_VETHS" 0 500 || die "LAB_CONTAINER_VETHS must be 0..500"
  # LAB_DIR exported by `env` of another lab must not make this command act on that lab.
  local line
  if [[ -r $LAB_DIR/lab.env ]]; then
    IFS= read -r line <"$LAB_DIR/lab.env" || true
    [[ $line == "export LAB_PREFIX='$LAB_PREFIX'" ]] ||
      die "LAB_DIR=$LAB_DIR belongs to another lab (${line#export }), not LAB_PREFIX=$LAB_PREFIX; unset LAB_DIR or set it to match"
  fi
}

require_root() {
  ((EUID == 0)) || die "must run as root (network namespaces, iptables, sshd)"
  local c
  for c in ip iptables-restore unshare nsenter ssh ssh-keygen ss "$SSHD_BIN"; do
    command -v "$c" >/dev/null 2>&1 ||
      die "missing command '$c' (Debian packages: iproute2 iptables util-linux openssh-client openssh-server)"
  done
  if ((LAB_IPV6)); then
    command -v ip6tables-restore >/dev/null 2>&1 || die "missing ip6tables-restore (package iptables); or set LAB_IPV6=0"
  fi
}

# ---- naming and addressing (tables filled without forking: this runs for up to 1000 hosts) -----

HOST=() FIF=() FADDR=() F6ADDR=() DADDR=() WADDR=() HDIR=() UTS=()
V4_LEN=24 # prefix length of the lab's IPv4 subnets: 24 up to 245 hosts, else 16 (see Addressing plan)

nic_mac() { printf -v "$1" '02:4c:%02x:00:%02x:%02x' "$2" $(($3 >> 8)) $(($3 & 255)); } # var kind index

# The IPv4 subnets as "a.b.c.0/len": /24 as always for labs of at most 245 hosts, /16 above.
v4_subnet() { # NET (three octets)
  if ((V4_LEN == 24)); then printf '%s.0/24' "$1"; else printf '%s.0.0/16' "${1%.*}"; fi
}

init_tables() { # N
  local n=$1 i a names dead_a dead_b
  read -r -a names <<<"$LAB_FABRIC_NAMES"
  ((${#names[@]} > 0)) || die "LAB_FABRIC_NAMES is empty"
  V4_LEN=24
  ((n + 10 <= 255)) || V4_LEN=16
  dead_a=${DEAD_NET%.*} dead_b=${DEAD_NET##*.}
  for ((i = 0; i < n; i++)); do
    a=$((10 + i))                          # the host's number in every subnet, 16 bits above 245 hosts
    HOST[i]=$LAB_PREFIX-h$i                # host name = namespace name
    FIF[i]=${names[i % ${#names[@]}]}      # fabric NIC name
    FADDR[i]=${FABRIC_NET%.*}.$((${FABRIC_NET##*.} + (a >> 8))).$((a & 255))
    F6ADDR[i]=$FABRIC6_NET:$a
    DADDR[i]=${DROP_NET%.*}.$((${DROP_NET##*.} + (a >> 8))).$((a & 255))
    WADDR[i]=$dead_a.$((dead_b + (a >> 8))).$((a & 255))
    HDIR[i]=$LAB_DIR/h$i
    UTS[i]=$LAB_DIR/uts/h$i
  done
}

validate_fabric_names() {
  local names n
  read -r -a names <<<"$LAB_FABRIC_NAMES"
  ((${#names[@]} > 0)) || die "LAB_FABRIC_NAMES is empty"
  for n in "${names[@]}"; do
    [[ $n =~ ^[a-zA-Z][a-zA-Z0-9_.-]{0,14}$ ]] || die "bad fabric NIC name '$n' (at most 15 characters)"
    case $n in lo | "$DOCKER_IF" | "$DOCKER_PORT_IF" | "$DEAD_IF" | "$DROP_IF")
      die "fabric NIC name '$n' clashes with a trap NIC" ;;
    esac
  done
}

# Namespaces of this lab that exist now (also after a half-finished up).
lab_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${LAB_PREFIX}-(h[0-9]+|sw)\$" || true
}

lab_etc_netns() {
  local d
  for d in /etc/netns/"${LAB_PREFIX}"-*; do
    [[ -d $d && ${d##*/} =~ ^${LAB_PREFIX}-(h[0-9]+|sw)$ ]] && printf '%s\n' "$d"
  done
  return 0
}

lab_exists() {
  [[ -e $LAB_DIR ]] || [[ -n $(lab_namespaces) ]] || [[ -n $(lab_etc_netns) ]]
}

load_state() {
  [[ -f $LAB_DIR/ready && -f $LAB_DIR/lab.env ]] ||
    die "no lab with prefix '$LAB_PREFIX' (LAB_DIR=$LAB_DIR); run: scripts/lab.sh up N"
  # shellcheck source=/dev/null
  source "$LAB_DIR/lab.env"
  LAB_FABRIC_NAMES=$LAB_FABRIC_IFACES
  init_tables "$LAB_N"
}

check_index() {
  uint_in "$1" 0 $((LAB_N - 1)) || die "host index '$1' out of range 0..$((LAB_N - 1))"
}

# ---- processes --------------------------------------------------------------------------------

# True while PID exists and is not a zombie.
alive() {
  local stat
  [[ -r /proc/$1/stat ]] || return 1
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 1  # it may end between the test and the read
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

wait_gone() { # pid seconds
  local deadline=$(($(now_ms) + $2 * 1000))
  while alive "$1"; do
    (($(now_ms) < deadline)) || return 1
    sleep 0.02
  done
}

terminate() { # pid...: TERM, short grace, KILL
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    wait_gone "$p" 2 || { kill -KILL "$p" 2>/dev/null || true; wait_gone "$p" 2 || warn "pid $p survived SIGKILL"; }
  done
}

# Print the pid in host I's sshd pidfile if it is still our sshd (its argv names our config file).
sshd_pid() {
  local dir=$LAB_DIR/h$1 pid cmd
  [[ -f $dir/sshd.pid ]] || return 1
  pid=$(<"$dir/sshd.pid")
  [[ $pid =~ ^[0-9]+$ ]] && alive "$pid" || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$dir/sshd_config"* ]] || return 1
  printf '%s' "$pid"
}

stop_sshd() { # I
  local pid
  if pid=$(sshd_pid "$1"); then terminate "$pid"; fi
  rm -f "$LAB_DIR/h$1/sshd.pid"
}

in_host() { # I CMD...: run CMD on host I (netns + UTS ns; ip netns exec supplies /etc/hosts)
  local i=$1
  shift
  ip netns exec "${HOST[i]}" nsenter --uts="${UTS[i]}" -- "$@"
}

listening() { [[ -n $(ss -N "${HOST[$1]}" -Hltn "sport = :$LAB_PORT" 2>/dev/null) ]]; }

start_sshd() { # I [SRC DST]...: each DST (a real path, not a link) shows SRC's content for this sshd and its sessions
  local i=$1 d=${HDIR[$1]}
  shift
  local argv=("$SSHD_BIN" -f "$d/sshd_config" -E "$d/sshd.log")
  if (($#)); then
    # A mount namespace of its own (private: nothing propagates to the host's mounts) with each SRC
    # bound over its DST; it ends with the last process in it (sshd, its sessions), so down removes it.
    # shellcheck disable=SC2016 # expanded by the inner sh
    argv=(unshare --mount --propagation private -- sh -c \
      'n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind "$1" "$2" || exit 1; shift 2; n=$((n - 2)); done; exec "$@"' \
      sh "$#" "$@" "${argv[@]}")
  fi
  if ! in_host "$i" "${argv[@]}" </dev/null >>"$d/sshd.stderr" 2>&1; then
    die "sshd on host $i failed to start: $(tail -n 5 "$d/sshd.stderr" "$d/sshd.log" 2>/dev/null)"
  fi
}

# Poll (short interval, deadline LAB_SSHD_WAIT) until every listed host's sshd listens on LAB_PORT.
wait_listening() { # I...
  local deadline=$(($(now_ms) + LAB_SSHD_WAIT * 1000)) pending=("$@") still i
  while ((${#pending[@]})); do
    still=()
    for i in "${pending[@]}"; do listening "$i" || still+=("$i"); done
    pending=("${still[@]+"${still[@]}"}")
    ((${#pending[@]})) || break
    if (($(now_ms) >= deadline)); then
      for i in "${pending[@]}"; do
        warn "host $i: sshd not listening on port $LAB_PORT; log: $(tail -n 5 "${HDIR[i]}/sshd.log" 2>/dev/null)"
      done
      die "sshd did not come up on host(s) ${pending[*]} within ${LAB_SSHD_WAIT}s"
    fi
    sleep 0.05
  done
}

# Links of namespace NS that are not running yet, as "name(state)" words; lo counts as running
# (its operstate is UNKNOWN), every other link must be UP (carrier on).
links_not_running() { # ns
  ip -n "$1" -br link show 2>/dev/null |
    awk '{ split($1, n, "@"); if (n[1] != "lo" && $2 != "UP") printf "%s(%s) ", n[1], $2 }'
}

# A veth reports carrier a moment after it is set up, and a bridge is UP only once a port is: wait,
# bounded by LAB_LINK_WAIT, until every link of the switch and of every host runs, so that nothing
# started on the lab sees "no carrier". Names the links that never came up.
wait_links_running() { # N
  local n=$1 deadline=$(($(now_ms) + LAB_LINK_WAIT * 1000)) i ns down report
  local pending=("$SW_NS") still
  for ((i = 0; i < n; i++)); do pending+=("${HOST[i]}"); done
  while :; do
    still=()
    report=()
    for ns in "${pending[@]}"; do
      down=$(links_not_running "$ns")
      if [[ -n $down ]]; then
        still+=("$ns")
        report+=("$ns: ${down% }")
      fi
    done
    ((${#still[@]})) || return 0
    pending=("${still[@]}")
    if (($(now_ms) >= deadline)); then
      for ns in "${report[@]}"; do warn "link not running after ${LAB_LINK_WAIT}s: $ns"; done
      die "links of ${#still[@]} namespace(s) never came up (see above); check 'ip -n NS -br link' and dmesg"
    fi
    sleep 0.05
  done
}

# All network namespaces share the kernel's neighbour (ARP/NDP) tables, 1024 entries by default: a
# lab of a few dozen hosts with 4 NICs each overflows them ("neighbor table overflow" in dmesg) and
# probes then fail for the lab's reason. Raise (never lower) the thresholds for N hosts: each host
# may learn every other host's address on every shared segment, in both families.
size_neighbour_tables() { # N
  local n=$1 need fam k key cur want
  need=$((n * n * 8 + 1024))
  for fam in ipv4 ipv6; do
    for k in 1 2 3; do
      key=net.$fam.neigh.default.gc_thresh$k
      cur=$(sysctl -n "$key" 2>/dev/null) || continue
      want=$((need * (k == 1 ? 1 : k == 2 ? 2 : 4)))
      if ((cur < want)); then sysctl -qw "$key=$want" || warn "could not raise $key to $want"; fi
    done
  done
}

# Process and file limits of a lab of N hosts (up to 1000): each host runs its sshd, a session per
# client, an agent with a few threads and its ranks, so kernel.pid_max (which also bounds threads;
# 32768 on many machines) gets N x 64; up's own soft RLIMIT_NOFILE goes to the hard limit, inherited
# by every sshd and so by every session, agent and rank on the lab (one connection per host each).
size_process_limits() { # N
  local n=$1 cur want=$(($1 * 64)) hard
  cur=$(sysctl -n kernel.pid_max 2>/dev/null) || cur=0
  if ((cur < want)); then sysctl -qw "kernel.pid_max=$want" || warn "could not raise kernel.pid_max to $want"; fi
  hard=$(ulimit -Hn)
  ulimit -Sn "$hard" 2>/dev/null || warn "could not raise the open-files limit to $hard"
  if [[ $hard != unlimited ]] && ((hard < n * 4)); then
    warn "open-files hard limit $hard is low for $n hosts (hvrun holds about 4 per host): raise it (ulimit -Hn, /etc/security/limits.conf)"
  fi
}

# Runs at most LIMIT of the background jobs started between bounded_start calls: call before each `&`.
BOUNDED_RUNNING=0
bounded_start() { # LIMIT WHAT: waits for one job when LIMIT are running; dies naming WHAT if it failed
  if ((BOUNDED_RUNNING >= $1)); then
    wait -n || die "$2 failed"
    BOUNDED_RUNNING=$((BOUNDED_RUNNING - 1))
  fi
  BOUNDED_RUNNING=$((BOUNDED_RUNNING + 1))
}
bounded_wait() { # WHAT: waits for every job bounded_start counted
  for (( ; BOUNDED_RUNNING > 0; BOUNDED_RUNNING--)); do wait -n || die "$1 failed"; done
}

# ---- up ---------------------------------------------------------------------------------------

write_sshd_config() { # I
  local i=$1 d=${HDIR[$1]}
  {
    echo "# sshd of lab host ${HOST[i]} (written by scripts/lab.sh)"
    echo "Port $LAB_PORT"
    if ((LAB_IPV6)); then echo "AddressFamily any"; else echo "AddressFamily inet"; fi
    echo "HostKey $d/ssh_host_ed25519_key"
    echo "PidFile $d/sshd.pid"
    echo "AuthorizedKeysFile $LAB_DIR/authorized_keys"
    echo "AuthenticationMethods publickey"
    echo "PubkeyAuthentication yes"
    echo "PasswordAuthentication no"
    echo "KbdInteractiveAuthentication no"
    echo "HostbasedAuthentication no"
    echo "UsePAM no"
    echo "PermitRootLogin prohibit-password"
    echo "# LAB_DIR lives under /tmp (mode 1777), which StrictModes would reject"
    echo "StrictModes no"
    echo "MaxStartups 100"
    echo "MaxSessions 100"
    echo "LoginGraceTime 30"
    echo "UseDNS no"
    echo "PrintMotd no"
    echo "PrintLastLog no"
    echo "X11Forwarding no"
    echo "PermitUserEnvironment no"
    echo "LogLevel VERBOSE"
    echo "Subsystem sftp internal-sftp"
    local setenv=()
    if ((LAB_SKIP_BASHRC)); then
      echo "# LAB_SKIP_BASHRC=1: bash skips ~/.bashrc for ssh commands when SHLVL is already set"
      setenv+=(SHLVL=1)
    fi
    if [[ -f $d/slow_shell.sh ]]; then
      echo "# slow-shell: bash sources BASH_ENV before the command of every session"
      setenv+=("BASH_ENV=$d/slow_shell.sh")
    fi
    ((${#setenv[@]} == 0)) || echo "SetEnv ${setenv[*]}"
  } >"$d/sshd_config"
}

write_state() { # N
  local n=$1
  q() { printf "export %s='%s'\n" "$1" "$2"; }
  {
    q LAB_PREFIX "$LAB_PREFIX"
    q LAB_DIR "$LAB_DIR"
    q LAB_N "$n"
    q LAB_PORT "$LAB_PORT"
    q LAB_USER root
    q LAB_KEY "$LAB_DIR/id_ed25519"
    q LAB_PUBKEY "$LAB_DIR/id_ed25519.pub"
    q LAB_SSH_CONFIG "$LAB_DIR/ssh_config"
    q LAB_KNOWN_HOSTS "$LAB_DIR/known_hosts"
    q LAB_SSH_OPTS "-p $LAB_PORT -i $LAB_DIR/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR"
    q LAB_SCRIPT "$LAB_SCRIPT_PATH"
    q LAB_HOSTS "${HOST[*]}"
    q LAB_NAMESPACES "${HOST[*]}"
    q LAB_SWITCH_NS "$SW_NS"
    q LAB_IPV6 "$LAB_IPV6"
    q LAB_SKIP_BASHRC "$LAB_SKIP_BASHRC"
    q LAB_SSHD "$LAB_SSHD"
    q LAB_FABRIC_SUBNET "$(v4_subnet "$FABRIC_NET")"
    q LAB_FABRIC_IFACES "${FIF[*]}"
    q LAB_FABRIC_ADDRS "${FADDR[*]}"
    if ((LAB_IPV6)); then
      q LAB_FABRIC6_SUBNET "$FABRIC6_NET:/64"
      q LAB_FABRIC6_ADDRS "${F6ADDR[*]}"
    else
      q LAB_FABRIC6_SUBNET ""
      q LAB_FABRIC6_ADDRS ""
    fi
    q LAB_DOCKER_IFACE "$DOCKER_IF"
    q LAB_DOCKER_ADDR "$DOCKER_ADDR"
    q LAB_DOCKER_SUBNET 172.17.0.0/16
    q LAB_CONTAINER_VETHS "$LAB_CONTAINER_VETHS"
    q LAB_DEAD_IFACE "$DEAD_IF"
    q LAB_DEAD_SUBNET "$(v4_subnet "$DEAD_NET")"
    q LAB_DEAD_ADDRS "${WADDR[*]}"
    q LAB_DROP_IFACE "$DROP_IF"
    q LAB_DROP_SUBNET "$(v4_subnet "$DROP_NET")"
    q LAB_DROP_ADDRS "${DADDR[*]}"
  } >"$LAB_DIR/lab.env"
  unset -f q
}

write_ssh_client_config() {
  cat >"$LAB_DIR/ssh_config" <<EOF
# ssh client config for lab '$LAB_PREFIX' (use with ssh -F; root's ~/.ssh is not involved)
Host *
  Port $LAB_PORT
  User root
  IdentityFile $LAB_DIR/id_ed25519
  IdentitiesOnly yes
  BatchMode yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  GlobalKnownHostsFile /dev/null
  ConnectTimeout 5
  LogLevel ERROR
EOF
}

known_hosts_text() { # N: known_hosts lines for the current host keys
  local n=$1 i key
  for ((i = 0; i < n; i++)); do
    read -r key <"${HDIR[i]}/ssh_host_ed25519_key.pub"
    key=${key% *} # drop the comment
    printf '[%s]:%s,[%s]:%s %s\n' "${HOST[i]}" "$LAB_PORT" "${FADDR[i]}" "$LAB_PORT" "$key"
  done
}

hosts_file_text() { # N
  local n=$1 i
  echo "# hvrun test lab '$LAB_PREFIX': host names resolve to fabric addresses ($(v4_subnet "$FABRIC_NET"))"
  printf '127.0.0.1\tlocalhost\n'
  printf '::1\tlocalhost ip6-localhost ip6-loopback\n'
  printf 'ff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n'
  for ((i = 0; i < n; i++)); do printf '%s\t%s\n' "${FADDR[i]}" "${HOST[i]}"; done
}

# Base firewall of every host: empty chains for cut/oneway, and the eth9 trap (input dropped).
iptables_base() {
  cat <<EOF
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:LAB-CUT-IN - [0:0]
:LAB-CUT-OUT - [0:0]
:LAB-ONEWAY - [0:0]
-A INPUT -j LAB-CUT-IN
-A INPUT -j LAB-ONEWAY
-A INPUT -i $DROP_IF -j DROP
-A OUTPUT -j LAB-CUT-OUT
COMMIT
EOF
}

# Apply an iptables-restore fragment (--noflush) to host I, IPv4 and (if enabled) IPv6.
ipt_apply() { # I fragment
  ip netns exec "${HOST[$1]}" iptables-restore --noflush <<<"$2"
  if ((LAB_IPV6)); then ip netns exec "${HOST[$1]}" ip6tables-restore --noflush <<<"$2"; fi
}

host_ip_batch() { # I: ip -batch lines configuring host I's NICs
  local i=$1 f=${FIF[$1]} mac j
  echo "link set lo up"
  echo "addr add ${FADDR[i]}/$V4_LEN dev $f"
  if ((LAB_IPV6)); then echo "addr add ${F6ADDR[i]}/64 dev $f nodad"; fi
  echo "link set $f up"
  echo "addr add ${WADDR[i]}/$V4_LEN dev $DEAD_IF"
  echo "link set $DEAD_IF up"
  echo "addr add ${DADDR[i]}/$V4_LEN dev $DROP_IF"
  echo "link set $DROP_IF up"
  printf -v mac '02:42:00:00:%02x:%02x' $((i >> 8)) $((i & 255))
  echo "link add $DOCKER_IF address $mac type bridge"
  echo "link set $DOCKER_PORT_IF master $DOCKER_IF up"
  for ((j = 0; j < LAB_CONTAINER_VETHS; j++)); do echo "link set vethc$j master $DOCKER_IF up"; done
  echo "addr add $DOCKER_ADDR/16 dev $DOCKER_IF"
  echo "link set $DOCKER_IF up"
}

# Configure host I and start its sshd (runs as a background job of up).
setup_host() { # I
  local i=$1 ns=${HOST[$1]}
  host_ip_batch "$i" | ip -n "$ns" -batch -
  if ((LAB_IPV6)); then
    # shellcheck disable=SC2016 # $1 is expanded by the inner sh
    ip netns exec "$ns" sh -c 'iptables-restore <"$1" && ip6tables-restore <"$1"' sh "$LAB_DIR/iptables.rules"
  else
    ip netns exec "$ns" iptables-restore <"$LAB_DIR/iptables.rules"
  fi
  mkdir -p "/etc/netns/$ns"
  cp "$LAB_DIR/hosts" "/etc/netns/$ns/hosts"
  : >"${UTS[i]}"
  unshare --uts="${UTS[i]}" hostname "$ns"
  if ((LAB_SSHD)); then
    write_sshd_config "$i"
    start_sshd "$i"
  fi
}

UP_STARTED=0
UP_DONE=0
on_up_exit() {
  local rc=$?
  if ((UP_STARTED && !UP_DONE)); then
    wait || true # background host set-up jobs
    warn "up failed (exit $rc); tearing down what it made"
    do_down || true
  fi
}

cmd_up() {
  local n=${1:-} max=$MAX_HOSTS
  ((LAB_SSHD)) || max=$MAX_HOSTS_NO_SSHD
  uint_in "$n" 2 "$max" ||
    die "usage: lab.sh up N   (N from 2 to $MAX_HOSTS; with LAB_SSHD=0 to $MAX_HOSTS_NO_SSHD)"
  require_root
  validate_fabric_names
  if lab_exists; then
    if ((LAB_RECREATE)); then
      log "LAB_RECREATE=1: tearing down the existing lab '$LAB_PREFIX' first"
      do_down || die "could not tear down the existing lab"
    else
      die "a lab with prefix '$LAB_PREFIX' already exists (LAB_DIR=$LAB_DIR, namespaces: $(lab_namespaces | tr '\n' ' ')); run 'LAB_PREFIX=$LAB_PREFIX scripts/lab.sh down' first, or set LAB_RECREATE=1"
    fi
  fi
  [[ -e $LAB_DIR ]] && die "$LAB_DIR exists but is not a lab directory; choose another LAB_DIR"

  local t0 i j ns mac pids=()
  t0=$(now_ms)
  init_tables "$n"
  size_neighbour_tables "$n"
  size_process_limits "$n"
  UP_STARTED=1
  trap on_up_exit EXIT
  trap 'exit 130' INT TERM

  mkdir -m 700 "$LAB_DIR"
  : >"$LAB_DIR/$MARKER"
  mkdir "$LAB_DIR/uts" "${HDIR[@]}"
  # sshd's privilege-separation directory (normally made by systemd); left in place by down.
  [[ -d /run/sshd ]] || install -d -m 755 /run/sshd
  # Keys: the client identity and one host key per host, made in parallel (a bounded number at once).
  if ((LAB_SSHD)); then
    ssh-keygen -q -t ed25519 -N '' -C "hvrun-lab-$LAB_PREFIX" -f "$LAB_DIR/id_ed25519" &
    BOUNDED_RUNNING=1
    for ((i = 0; i < n; i++)); do
      bounded_start $((LAB_JOBS * 4)) ssh-keygen
      ssh-keygen -q -t ed25519 -N '' -C "${HOST[i]}" -f "${HDIR[i]}/ssh_host_ed25519_key" &
    done
  fi
  write_state "$n"
  write_ssh_client_config

  # Namespaces, in one ip process (one fork per namespace costs seconds at 1000 hosts).
  {
    echo "netns add $SW_NS"
    for ((i = 0; i < n; i++)); do echo "netns add ${HOST[i]}"; done
  } | ip -batch -
  if ((!LAB_IPV6)); then
    for ns in "$SW_NS" "${HOST[@]}"; do
      ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done
  fi

  # veth pairs, created directly inside their namespaces (never in the root namespace).
  for ((i = 0; i < n; i++)); do
    ns=${HOST[i]}
    nic_mac mac 1 "$i"
    echo "link add name ${FIF[i]} address $mac netns $ns type veth peer name h$i-fab netns $SW_NS"
    nic_mac mac 2 "$i"
    echo "link add name $DEAD_IF address $mac netns $ns type veth peer name h$i-wl netns $SW_NS"
    nic_mac mac 3 "$i"
    echo "link add name $DROP_IF address $mac netns $ns type veth peer name h$i-e9 netns $SW_NS"
    nic_mac mac 4 "$i"
    echo "link add name $DOCKER_PORT_IF address $mac netns $ns type veth peer name h$i-dk netns $SW_NS"
    for ((j = 0; j < LAB_CONTAINER_VETHS; j++)); do
      echo "link add name vethc$j netns $ns type veth peer name h$i-c$j netns $SW_NS"
    done
  done >"$LAB_DIR/veths.batch"
  ip -batch "$LAB_DIR/veths.batch"

  # Switch: br-fab (fabric), br-drop (eth9); wlp5s0 and docker peers stay unattached.
  {
    echo "link set lo up"
    echo "link add br-fab type bridge"
    echo "link add br-drop type bridge"
    echo "link set br-fab up"
    echo "link set br-drop up"
    for ((i = 0; i < n; i++)); do
      echo "link set h$i-fab master br-fab up"
      echo "link set h$i-e9 master br-drop up"
      echo "link set h$i-wl up"
      echo "link set h$i-dk up"
      for ((j = 0; j < LAB_CONTAINER_VETHS; j++)); do echo "link set h$i-c$j up"; done
    done
  } | ip -n "$SW_NS" -batch -

  # Hosts: addresses, docker0, firewall, /etc/hosts, hostname, sshd — a few hosts at a time.
  iptables_base >"$LAB_DIR/iptables.rules"
  hosts_file_text "$n" >"$LAB_DIR/hosts"
  mkdir -p /etc/netns
  if ((LAB_SSHD)); then
    bounded_wait ssh-keygen
    cp "$LAB_DIR/id_ed25519.pub" "$LAB_DIR/authorized_keys"
    known_hosts_text "$n" >"$LAB_DIR/known_hosts"
  fi
  for ((i = 0; i < n; i++)); do
    bounded_start "$LAB_JOBS" "setting up a host"
    setup_host "$i" &
  done
  bounded_wait "setting up a host"
  wait_links_running "$n"
  local t_links
  t_links=$(elapsed "$t0")
  if ((!LAB_SSHD)); then
    : >"$LAB_DIR/ready"
    UP_DONE=1
    log "up: $n hosts ${HOST[0]}..${HOST[n - 1]} ready in $t_links, no sshd (LAB_SSHD=0)"
    log "use: eval \"\$(LAB_PREFIX=$LAB_PREFIX $LAB_SCRIPT_PATH env)\""
    return 0
  fi
  local all=()
  for ((i = 0; i < n; i++)); do all+=("$i"); done
  wait_listening "${all[@]}"
  local t_sshd
  t_sshd=$(elapsed "$t0")

  # Verify from host 0: a shell command on host 1 prints host 1's name; every host accepts the
  # lab key (sftp subsystem: checks sshd and authentication without paying for a login shell).
  # A bounded number at once: hundreds of simultaneous handshakes on a small machine would outlast
  # the client's ConnectTimeout and fail the check for the machine's reason, not the lab's.
  local out bad=() first
  out=$(in_host 0 ssh -F "$LAB_DIR/ssh_config" "${HOST[1]}" hostname </dev/null 2>"$LAB_DIR/verify.err") || true
  for ((first = 0; first < n; first += LAB_JOBS * 4)); do
    pids=()
    for ((i = first; i < n && i < first + LAB_JOBS * 4; i++)); do
      in_host 0 ssh -F "$LAB_DIR/ssh_config" -s "${HOST[i]}" sftp </dev/null >/dev/null 2>"$LAB_DIR/verify.$i.err" &
      pids+=($!)
    done
    for ((i = first; i < n && i < first + LAB_JOBS * 4; i++)); do
      if ! wait "${pids[i - first]}"; then
        bad+=("$i")
        warn "ssh from host 0 to ${HOST[i]} failed: $(tr '\n' ' ' <"$LAB_DIR/verify.$i.err"); sshd log: $(tail -n 3 "${HDIR[i]}/sshd.log")"
      fi
    done
  done
  if [[ $out != "${HOST[1]}" ]]; then
    bad+=(1)
    warn "ssh from host 0 to ${HOST[1]} ran 'hostname' and got '$out' ($(tr '\n' ' ' <"$LAB_DIR/verify.err"))"
  fi
  rm -f "$LAB_DIR"/verify.*
  ((${#bad[@]} == 0)) || die "verification failed for host(s) ${bad[*]}"

  : >"$LAB_DIR/ready"
  UP_DONE=1
  log "up: $n hosts ${HOST[0]}..${HOST[n - 1]} ready in $(elapsed "$t0") (links running after $t_links, all sshd listening after $t_sshd)"
  log "use: eval \"\$(LAB_PREFIX=$LAB_PREFIX $LAB_SCRIPT_PATH env)\""
}

# ---- down -------------------------------------------------------------------------------------

# Pids of the processes in the lab's network namespaces, one pass over /proc (`ip netns pids` per
# namespace reads every process's namespace once per namespace: minutes at 1000 hosts).
lab_pids() {
  local ns inode
  local -A lab_inode=()
  for ns in $(lab_namespaces); do
    inode=$(stat -L -c %i "/run/netns/$ns" 2>/dev/null) && lab_inode[$inode]=1
  done
  ((${#lab_inode[@]})) || return 0
  # "/proc/PID/ns net:[INODE]" for every process
  find /proc -mindepth 3 -maxdepth 3 -path '/proc/[0-9]*/ns/net' -printf '%h %l\n' 2>/dev/null |
    while read -r d link; do
      inode=${link#net:[}
      inode=${inode%]}
      if [[ $inode =~ ^[0-9]+$ && -n ${lab_inode[$inode]:-} ]]; then d=${d#/proc/}; printf '%s\n' "${d%/ns}"; fi
    done
}

do_down() {
  local ns p d i f failed=0 pids=() namespaces
  # 1. sshd listeners, by pidfile (only if the pid is still our sshd).
  for d in "$LAB_DIR"/h*/; do
    [[ -f $d/sshd.pid ]] || continue
    i=${d%/}
    i=${i##*/h}
    if [[ $i =~ ^[0-9]+$ ]]; then stop_sshd "$i"; fi
  done
  # 2. Anything still running inside the lab's namespaces (ssh sessions, agents, ranks).
  for p in $(lab_pids); do
    [[ $p != "$$" && $p != "$BASHPID" ]] && pids+=("$p")
  done
  ((${#pids[@]} == 0)) || terminate "${pids[@]}"
  # 3. The namespaces; their interfaces, bridges and iptables rules go with them. One ip process for
  # all; a namespace it could not delete is tried again alone, and named.
  namespaces=$(lab_namespaces)
  if [[ -n $namespaces ]]; then
    # shellcheck disable=SC2086 # one name per word
    printf 'netns del %s\n' $namespaces | ip -force -batch - 2>/dev/null || true
    for ns in $(lab_namespaces); do
      ip netns del "$ns" 2>/dev/null || { warn "could not delete namespace $ns"; failed=1; }
    done
  fi
  # 4. /etc/netns entries.
  for d in $(lab_etc_netns); do rm -rf -- "$d"; done
  rmdir /etc/netns 2>/dev/null || true
  # 5. LAB_DIR (first unmount the persistent UTS namespace files, read from one copy of the mounts).
  if [[ -d $LAB_DIR ]]; then
    local m
    local -A mounted=()
    while read -r m; do mounted[$m]=1; done < <(awk '$3 == "nsfs" { print $2 }' /proc/self/mounts)
    for f in "$LAB_DIR"/uts/*; do
      [[ -e $f ]] || continue
      if [[ -n ${mounted[$f]:-} ]]; then umount "$f" 2>/dev/null || umount -l "$f" || failed=1; fi
    done
    if [[ -e $LAB_DIR/$MARKER ]]; then
      rm -rf --one-file-system -- "$LAB_DIR" || failed=1
    else
      warn "$LAB_DIR has no $MARKER marker; not removing it"
      failed=1
    fi
  fi
  if [[ -n $(lab_namespaces) ]]; then warn "namespaces left: $(lab_namespaces | tr '\n' ' ')"; failed=1; fi
  ((failed == 0))
}

cmd_down() {
  ((EUID == 0)) || die "must run as root"
  if ! lab_exists; then
    log "down: no lab with prefix '$LAB_PREFIX'; nothing to do"
    return 0
  fi
  local t0
  t0=$(now_ms)
  do_down || die "down: could not remove everything (see warnings above)"
  log "down: lab '$LAB_PREFIX' removed in $(elapsed "$t0")"
}

# ---- other commands ---------------------------------------------------------------------------

cmd_env() {
  load_state
  cat "$LAB_DIR/lab.env"
}

cmd_exec() {
  DIE_CODE=125
  (($# >= 2)) || die "usage: lab.sh exec I CMD..."
  load_state
  check_index "$1"
  local i=$1
  shift
  exec ip netns exec "${HOST[i]}" nsenter --uts="${UTS[i]}" -- "$@"
}

one_host() { # command-name args...: checks a single index argument
  local name=$1
  shift
  (($# == 1)) || die "usage: lab.sh $name I"
  load_state
  check_index "$1"
}

cmd_cut() {
  one_host cut "$@"
  ipt_apply "$1" $'*filter\n-F LAB-CUT-IN\n-F LAB-CUT-OUT\n-A LAB-CUT-IN ! -i lo -j DROP\n-A LAB-CUT-OUT ! -o lo -j DROP\nCOMMIT'
  log "cut: host $1 (${HOST[$1]}) drops all traffic on every NIC but lo"
}

cmd_uncut() {
  one_host uncut "$@"
  ipt_apply "$1" $'*filter\n-F LAB-CUT-IN\n-F LAB-CUT-OUT\nCOMMIT'
  log "uncut: host $1 (${HOST[$1]}) reconnected"
}

cmd_oneway() {
  (($# == 2)) || die "usage: lab.sh oneway I J"
  load_state
  check_index "$1"
  check_index "$2"
  [[ $1 != "$2" ]] || die "oneway: I and J must differ"
  local j=$2 kind mac rules='*filter'
  for kind in 1 2 3; do # J's fabric, wlp5s0 and eth9 NICs
    nic_mac mac "$kind" "$j"
    rules+=$'\n'"-A LAB-ONEWAY -m mac --mac-source $mac -p tcp --dport $LAB_PORT -j RETURN"
    rules+=$'\n'"-A LAB-ONEWAY -m mac --mac-source $mac -p tcp --sport $LAB_PORT -j RETURN"
    rules+=$'\n'"-A LAB-ONEWAY -m mac --mac-source $mac -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN"
    rules+=$'\n'"-A LAB-ONEWAY -m mac --mac-source $mac -j DROP"
  done
  rules+=$'\nCOMMIT'
  ipt_apply "$1" "$rules"
  log "oneway: host $1 drops connections from host $j except TCP port $LAB_PORT; its own connections to $j work"
}

cmd_oneway_clear() {
  one_host oneway-clear "$@"
  ipt_apply "$1" $'*filter\n-F LAB-ONEWAY\nCOMMIT'
  log "oneway-clear: host $1 accepts everything again"
}

cmd_nat() {
  (($# == 2)) || die "usage: lab.sh nat I J"
  load_state
  check_index "$1"
  check_index "$2"
  [[ $1 != "$2" ]] || die "nat: I and J must differ"
  local j=$2 kind mac seen rules='*nat'
  printf -v seen '100.64.%d.%d' $((j >> 8)) $((j & 255))
  for kind in 1 2 3; do # J's fabric, wlp5s0 and eth9 NICs
    nic_mac mac "$kind" "$j"
    rules+=$'\n'"-A INPUT -m mac --mac-source $mac -j SNAT --to-source $seen"
  done
  rules+=$'\nCOMMIT'
  ip netns exec "${HOST[$1]}" iptables-restore --noflush <<<"$rules"
  # Replies are routed before conntrack gives them J's real address back: I needs a route for the
  # translated addresses (any; the real one is looked up again after the rewrite).
  ip -n "${HOST[$1]}" route replace 100.64.0.0/10 dev "${FIF[$1]}"
  log "nat: host $1 sees connections from host $j come from $seen"
}

cmd_nat_clear() {
  one_host nat-clear "$@"
  ip netns exec "${HOST[$1]}" iptables-restore --noflush <<<$'*nat\n-F INPUT\nCOMMIT'
  ip -n "${HOST[$1]}" route del 100.64.0.0/10 2>/dev/null || true
  log "nat-clear: host $1 sees every host by its own addresses again"
}

need_sshd() { ((LAB_SSHD)) || die "lab '$LAB_PREFIX' has no sshd (it was made with LAB_SSHD=0)"; }

cmd_ssh_stop() {
  one_host ssh-stop "$@"
  need_sshd
  stop_sshd "$1"
  log "ssh-stop: sshd of host $1 stopped"
}

cmd_ssh_start() {
  one_host ssh-start "$@"
  need_sshd
  if sshd_pid "$1" >/dev/null; then
    log "ssh-start: sshd of host $1 already running"
    return 0
  fi
  start_sshd "$1"
  wait_listening "$1"
  log "ssh-start: sshd of host $1 listening"
}

cmd_hide_libs() {
  (($# >= 2)) || die "usage: lab.sh hide-libs I FILE..."
  load_state
  need_sshd
  check_index "$1"
  local i=$1 f real files=() pairs=()
  shift
  for f in "$@"; do
    real=$(readlink -e -- "$f") || die "hide-libs: $f does not exist"
    [[ -f $real ]] || die "hide-libs: $f ($real) is not a regular file"
    files+=("$real")
    pairs+=(/dev/null "$real")
  done
  stop_sshd "$i"
  start_sshd "$i" "${pairs[@]}"
  wait_listening "$i"
  log "hide-libs: sshd of host $i restarted; its sessions see ${files[*]} empty"
}

cmd_bind() {
  (($# >= 3 && $# % 2 == 1)) || die "usage: lab.sh bind I SRC DST [SRC DST]..."
  load_state
  need_sshd
  check_index "$1"
  local i=$1 src dst pairs=()
  shift
  while (($#)); do
    src=$(readlink -e -- "$1") || die "bind: $1 does not exist"
    dst=$(readlink -e -- "$2") || die "bind: $2 does not exist"
    [[ -d $src && -d $dst || -f $src && -f $dst ]] || die "bind: $1 and $2 must both be files or both directories"
    pairs+=("$src" "$dst")
    shift 2
  done
  stop_sshd "$i"
  start_sshd "$i" "${pairs[@]}"
  wait_listening "$i"
  log "bind: sshd of host $i restarted; its sessions see ${pairs[*]} (each SRC over its DST)"
}

cmd_slow_shell() {
  (($# == 2)) || die "usage: lab.sh slow-shell I SECONDS"
  load_state
  need_sshd
  check_index "$1"
  [[ $2 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "slow-shell: SECONDS must be a number, not '$2'"
  local i=$1 d=${HDIR[$1]}
  rm -rf "$d"/slept.*
  if [[ $2 =~ ^0+(\.0+)?$ ]]; then
    rm -f "$d/slow_shell.sh"
  else
    # Once per session: bash reads BASH_ENV in every non-interactive bash the session runs (with
    # LAB_SKIP_BASHRC=0 not in the login shell itself, which reads ~/.bashrc instead, but in each bash
    # script that ~/.bashrc runs, such as pyenv's); the first of them sleeps, the others find its mark.
    printf '%s\n' 'read -r _ _ _ _ _ hvlab_sid _ </proc/$$/stat' \
      "mkdir \"$d/slept.\$hvlab_sid\" 2>/dev/null && sleep $2" 'unset hvlab_sid' >"$d/slow_shell.sh"
  fi
  write_sshd_config "$i"
  stop_sshd "$i"
  start_sshd "$i"
  wait_listening "$i"
  log "slow-shell: every ssh session on host $i now waits $2 s in bash first"
}

cmd_serial_shell() {
  (($# == 1)) || die "usage: lab.sh serial-shell SECONDS"
  load_state
  need_sshd
  [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "serial-shell: SECONDS must be a number, not '$1'"
  local i d
  for ((i = 0; i < LAB_N; i++)); do
    d=${HDIR[$i]}
    rm -rf "$d"/slept.*
    if [[ $1 =~ ^0+(\.0+)?$ ]]; then
      rm -f "$d/slow_shell.sh"
    else
      # Once per session, as slow-shell's; the lock is the whole lab's, so sessions queue for it.
      printf '%s\n' 'read -r _ _ _ _ _ hvlab_sid _ </proc/$$/stat' \
        "mkdir \"$d/slept.\$hvlab_sid\" 2>/dev/null && flock \"$LAB_DIR/serial-shell.lock\" sleep $1" \
        'unset hvlab_sid' >"$d/slow_shell.sh"
    fi
    write_sshd_config "$i"
    stop_sshd "$i"
    start_sshd "$i"
  done
  for ((i = 0; i < LAB_N; i++)); do wait_listening "$i"; done
  log "serial-shell: every ssh session on every host now holds the lab's lock for $1 s in bash first"
}

cmd_rekey() {
  one_host rekey "$@"
  need_sshd
  local d=${HDIR[$1]} old new
  old=$(ssh-keygen -l -f "$d/ssh_host_ed25519_key.pub" | cut -d' ' -f2)
  stop_sshd "$1"
  rm -f "$d/ssh_host_ed25519_key" "$d/ssh_host_ed25519_key.pub"
  ssh-keygen -q -t ed25519 -N '' -C "${HOST[$1]}" -f "$d/ssh_host_ed25519_key"
  start_sshd "$1"
  wait_listening "$1"
  new=$(ssh-keygen -l -f "$d/ssh_host_ed25519_key.pub" | cut -d' ' -f2)
  log "rekey: host $1 key $old -> $new (LAB_KNOWN_HOSTS still holds the old key)"
}

cmd_known_hosts() {
  load_state
  need_sshd
  known_hosts_text "$LAB_N"
}

cmd_status() {
  load_state
  local i pid state cut
  for ((i = 0; i < LAB_N; i++)); do
    if pid=$(sshd_pid "$i"); then state="sshd:$pid"; else state="sshd:stopped"; fi
    cut=""
    if ip netns exec "${HOST[i]}" iptables -S LAB-CUT-IN 2>/dev/null | grep -q DROP; then cut=" CUT"; fi
    printf '%-3d %-14s %-12s %-14s %s%s\n' "$i" "${HOST[i]}" "${FIF[i]}" "${FADDR[i]}" "$state" "$cut"
  done
}

main() {
  local cmd=${1:-}
  [[ $cmd == exec ]] && DIE_CODE=125
  validate_config
  (($#)) && shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    env) cmd_env "$@" ;;
    exec) cmd_exec "$@" ;;
    cut) cmd_cut "$@" ;;
    uncut) cmd_uncut "$@" ;;
    oneway) cmd_oneway "$@" ;;
    oneway-clear) cmd_oneway_clear "$@" ;;
    nat) cmd_nat "$@" ;;
    nat-clear) cmd_nat_clear "$@" ;;
    ssh-stop) cmd_ssh_stop "$@" ;;
    ssh-start) cmd_ssh_start "$@" ;;
    rekey) cmd_rekey "$@" ;;
    slow-shell) cmd_slow_shell "$@" ;;
    serial-shell) cmd_serial_shell "$@" ;;
    hide-libs) cmd_hide_libs "$@" ;;
    bind) cmd_bind "$@" ;;
    status) cmd_status "$@" ;;
    known-hosts) cmd_known_hosts "$@" ;;
    -h | --help | help) usage 0 ;;
    "") usage 2 >&2 ;;
    *) die "unknown command '$cmd' (try: lab.sh help)" ;;
  esac
}

main "$@"
