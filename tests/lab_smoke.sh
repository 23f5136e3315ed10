#!/usr/bin/env bash
# shellcheck disable=SC2153 # LAB_* variables come from eval "$(scripts/lab.sh env)"
# Smoke test of scripts/lab.sh: brings up a 3-host lab, checks SSH, host names and every trap,
# cut/uncut, oneway, ssh-stop/start, rekey, then tears down and checks nothing is left.
# Needs root and network namespaces; exits 77 (skipped) otherwise. Prefix: LAB_SMOKE_PREFIX
# (default hvsmoke), so it does not disturb a developer's lab with the default prefix.
set -euo pipefail

skip() {
  echo "skipped: needs root and ip netns ($*)"
  exit 77
}
((EUID == 0)) || skip "not running as root"
for c in ip iptables-restore sshd ssh ssh-keygen unshare nsenter timeout; do
  command -v "$c" >/dev/null 2>&1 || [[ -x /usr/sbin/$c ]] ||
    skip "missing $c; packages: iproute2 iptables openssh-server openssh-client util-linux coreutils"
done
probe_ns=hvsmoke-probe-$$
ip netns add "$probe_ns" 2>/dev/null || skip "cannot create a network namespace"
ip netns del "$probe_ns"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
LAB=$PWD/scripts/lab.sh
export LAB_PREFIX=${LAB_SMOKE_PREFIX:-hvsmoke}
unset LAB_DIR
export LAB_RECREATE=1 # a lab left by an earlier, killed run is torn down first

fails=0
pass() { echo "ok: $*"; }
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
expect_eq() { # description expected actual
  if [[ $3 == "$2" ]]; then pass "$1"; else fail "$1 (expected '$2', got '$3')"; fi
}
# Exit status of a TCP connect from host $1 to $2:$3 within 2 s (0 ok, 124 timeout, 1 refused/unreachable).
connect_rc() {
  local rc=0
  "$LAB" exec "$1" timeout 2 bash -c "</dev/tcp/$2/$3" 2>/dev/null || rc=$?
  echo "$rc"
}
on() { # host, ssh args...: ssh from host $1 with the lab's client config
  local h=$1
  shift
  "$LAB" exec "$h" ssh -F "$LAB_SSH_CONFIG" "$@" </dev/null
}

trap '"$LAB" down' EXIT
"$LAB" up 3
eval "$("$LAB" env)"
read -r -a H <<<"$LAB_HOSTS"
read -r -a FABRIC <<<"$LAB_FABRIC_ADDRS"
read -r -a DROP <<<"$LAB_DROP_ADDRS"
read -r -a DEAD <<<"$LAB_DEAD_ADDRS"

# When up says ready, every link of every host and of the switch runs (a veth reports carrier a
# moment after it is set up; a fresh machine showed NO-CARRIER for a second or two), and the
# kernel's shared neighbour tables are sized for the lab.
not_running=""
for ns in "$LAB_SWITCH_NS" $LAB_NAMESPACES; do
  down=$(ip -n "$ns" -br link show | awk '{ split($1, n, "@"); if (n[1] != "lo" && $2 != "UP") printf "%s ", n[1] }')
  [[ -z $down ]] || not_running+="$ns: $down"
done
expect_eq "every link runs right after up" "" "$not_running"
if (($(sysctl -n net.ipv4.neigh.default.gc_thresh3) >= 3 * 3 * 8 + 1024)); then
  pass "neighbour table gc_thresh3 sized for the lab"
else fail "neighbour table gc_thresh3 too small: $(sysctl -n net.ipv4.neigh.default.gc_thresh3)"; fi

# SSH from host 0 lands on the right host.
expect_eq "ssh host0 -> ${H[1]} prints its hostname" "${H[1]}" "$(on 0 "${H[1]}" hostname 2>&1)"
expect_eq "ssh host0 -> ${H[2]} prints its hostname" "${H[2]}" "$(on 0 "${H[2]}" hostname 2>&1)"

# exec: hostname, /etc/hosts, stdin and exit code pass through.
expect_eq "exec 2 hostname" "${H[2]}" "$("$LAB" exec 2 hostname)"
expect_eq "host 2 resolves ${H[0]} to its fabric address" "${FABRIC[0]}" \
  "$("$LAB" exec 2 getent hosts "${H[0]}" | awk '{print $1}')"
expect_eq "exec passes stdin" "hello" "$(echo hello | "$LAB" exec 1 cat)"
rc=0
"$LAB" exec 1 sh -c 'exit 7' || rc=$?
expect_eq "exec propagates the exit code" 7 "$rc"

# Traps.
expect_eq "host1 eth9 (${DROP[1]}) times out from host 0" 124 "$(connect_rc 0 "${DROP[1]}" "$LAB_PORT")"
rc=$(connect_rc 0 "${DEAD[1]}" "$LAB_PORT")
if [[ $rc != 0 ]]; then pass "host1 wlp5s0 (${DEAD[1]}) unreachable from host 0 (rc $rc)"; else
  fail "host1 wlp5s0 (${DEAD[1]}) reachable from host 0"; fi
expect_eq "docker0 $LAB_DOCKER_ADDR on host 0 is host 0 itself" "${H[0]}" "$(on 0 "$LAB_DOCKER_ADDR" hostname 2>&1)"
if "$LAB" exec 1 ip route get "$LAB_DOCKER_ADDR" | grep -q '^local '; then
  pass "docker0 $LAB_DOCKER_ADDR is a local address on host 1"
else fail "docker0 $LAB_DOCKER_ADDR is not local on host 1"; fi

# cut / uncut.
expect_eq "host 1 reachable before cut" 0 "$(connect_rc 0 "${FABRIC[1]}" "$LAB_PORT")"
"$LAB" cut 1
expect_eq "cut 1: host 1 unreachable from host 0" 124 "$(connect_rc 0 "${FABRIC[1]}" "$LAB_PORT")"
expect_eq "cut 1: host 1 cannot reach host 2" 124 "$(connect_rc 1 "${FABRIC[2]}" "$LAB_PORT")"
"$LAB" uncut 1
expect_eq "uncut 1: host 1 reachable again" 0 "$(connect_rc 0 "${FABRIC[1]}" "$LAB_PORT")"
expect_eq "uncut 1: ssh to host 1 works" "${H[1]}" "$(on 0 "${H[1]}" hostname 2>&1)"

# oneway 1 0: host 1 refuses connections from host 0 except SSH, its own to host 0 work (needs TCP
# listeners: python3).
if command -v python3 >/dev/null 2>&1; then
  listen_py='import socket,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5999)); s.listen(16); time.sleep(30)'
  "$LAB" exec 1 python3 -c "$listen_py" &
  listener=$!
  "$LAB" exec 0 python3 -c "$listen_py" &
  listener0=$!
  for _ in $(seq 50); do [[ $(connect_rc 2 "${FABRIC[1]}" 5999) == 0 ]] && break; sleep 0.1; done
  for _ in $(seq 50); do [[ $(connect_rc 2 "${FABRIC[0]}" 5999) == 0 ]] && break; sleep 0.1; done
  "$LAB" oneway 1 0
  expect_eq "oneway 1 0: host 0 -> host 1 port 5999 times out" 124 "$(connect_rc 0 "${FABRIC[1]}" 5999)"
  expect_eq "oneway 1 0: host 2 -> host 1 port 5999 works" 0 "$(connect_rc 2 "${FABRIC[1]}" 5999)"
  expect_eq "oneway 1 0: host 1 -> host 0 port 5999 works (replies pass)" 0 "$(connect_rc 1 "${FABRIC[0]}" 5999)"
  if on 0 -s "${H[1]}" sftp >/dev/null 2>&1; then pass "oneway 1 0: ssh host 0 -> host 1 still works"; else
    fail "oneway 1 0: ssh host 0 -> host 1 blocked"; fi
  "$LAB" oneway-clear 1
  expect_eq "oneway-clear 1: host 0 -> host 1 port 5999 works" 0 "$(connect_rc 0 "${FABRIC[1]}" 5999)"
  kill "$listener" "$listener0" 2>/dev/null || true
  wait "$listener" "$listener0" 2>/dev/null || true
else
  echo "note: python3 not found; oneway check skipped"
fi

# ssh-stop / ssh-start: a stopped sshd refuses at once.
"$LAB" ssh-stop 2
expect_eq "ssh-stop 2: port refused" 1 "$(connect_rc 0 "${FABRIC[2]}" "$LAB_PORT")"
"$LAB" ssh-start 2
expect_eq "ssh-start 2: port open" 0 "$(connect_rc 0 "${FABRIC[2]}" "$LAB_PORT")"

# rekey: the known_hosts written by up now holds a stale key; a strict client refuses.
strict=(-o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$LAB_KNOWN_HOSTS" -s "${H[2]}" sftp)
if on 0 "${strict[@]}" >/dev/null 2>&1; then pass "strict ssh with LAB_KNOWN_HOSTS works"; else
  fail "strict ssh with LAB_KNOWN_HOSTS fails before rekey"; fi
"$LAB" rekey 2
out=$(on 0 "${strict[@]}" 2>&1) && rc=0 || rc=$?
if ((rc == 255)) && [[ $out == *'REMOTE HOST IDENTIFICATION HAS CHANGED'* ]]; then
  pass "rekey 2: strict ssh refuses the changed host key"
else fail "rekey 2: changed host key not refused (rc $rc: $out)"; fi
"$LAB" known-hosts >"$LAB_DIR/known_hosts.new"
if on 0 -o StrictHostKeyChecking=yes -o "UserKnownHostsFile=$LAB_DIR/known_hosts.new" -s "${H[2]}" sftp >/dev/null 2>&1; then
  pass "known-hosts: strict ssh with the refreshed keys works"
else fail "known-hosts: strict ssh with the refreshed keys fails"; fi

# A second up without LAB_RECREATE refuses and leaves the lab alone.
if LAB_RECREATE=0 "$LAB" up 3 2>/dev/null; then fail "second up succeeded"; else
  expect_eq "second up refused, lab intact" "${H[1]}" "$("$LAB" exec 1 hostname)"; fi

# A process left in a host's namespaces (an agent, a rank) is ended by down, found by its namespace.
"$LAB" exec 1 sleep 300 </dev/null >/dev/null 2>&1 &
stray=$!
for _ in $(seq 50); do [[ $(tr '\0' ' ' <"/proc/$stray/cmdline" 2>/dev/null) == "sleep 300 " ]] && break; sleep 0.1; done

# Tear down and check nothing is left.
sshd_pids=()
lab_dir=$LAB_DIR
for pf in "$lab_dir"/h*/sshd.pid; do sshd_pids+=("$(<"$pf")"); done
"$LAB" down
trap - EXIT
left=$(ip netns list | awk '{print $1}' | grep -E "^${LAB_PREFIX}-" || true)
expect_eq "no namespaces with prefix $LAB_PREFIX left" "" "$left"
# A pid whose /proc entry is gone, or a zombie, has ended. The state is read once: a process that ends
# between a test for the file and the read is no survivor (it once failed this check that way). One that
# is still exiting gets up to 3 s.
lab_sshd_alive() {
  alive=()
  local p state
  for p in "${sshd_pids[@]}"; do
    state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
    if [[ -n $state && $state != Z ]]; then alive+=("$p"); fi
  done
  [[ ${#alive[@]} -gt 0 ]]
}
for _ in $(seq 30); do lab_sshd_alive || break; sleep 0.1; done
expect_eq "no lab sshd left (pids ${sshd_pids[*]})" "" "${alive[*]}"
expect_eq "no process names $lab_dir" "" "$(grep -lsF "$lab_dir/" /proc/[0-9]*/cmdline || true)"
expect_eq "LAB_DIR $lab_dir removed" "absent" "$([[ -e $lab_dir ]] && echo present || echo absent)"
expect_eq "no /etc/netns/$LAB_PREFIX-* left" "" "$(ls -d /etc/netns/"$LAB_PREFIX"-* 2>/dev/null || true)"
expect_eq "no mounts under $lab_dir" "" "$(grep -F " $lab_dir/" /proc/self/mounts || true)"
if "$LAB" down >/dev/null 2>&1; then pass "down again (nothing there) succeeds"; else fail "second down failed"; fi
if wait "$stray" 2>/dev/null; then fail "the sleep left on host 1 ended by itself, not by down"; else
  pass "down ended the process left in host 1's namespaces"; fi

# LAB_SSHD=0 (the 1000-host simulation's lab): no sshd, hosts entered with exec, sshd commands refused.
unset LAB_DIR
nossh=${LAB_PREFIX}-n
trap 'LAB_PREFIX=$nossh "$LAB" down' EXIT
LAB_PREFIX=$nossh LAB_SSHD=0 "$LAB" up 2
expect_eq "LAB_SSHD=0: exec 1 hostname" "$nossh-h1" "$(LAB_PREFIX=$nossh "$LAB" exec 1 hostname)"
expect_eq "LAB_SSHD=0: no sshd listening on host 1" "" "$(ss -N "$nossh-h1" -Hltn "sport = :$LAB_PORT")"
if LAB_PREFIX=$nossh "$LAB" ssh-start 1 2>/dev/null; then fail "LAB_SSHD=0: ssh-start accepted"; else
  pass "LAB_SSHD=0: ssh-start refused"; fi
LAB_PREFIX=$nossh "$LAB" down
trap - EXIT
expect_eq "LAB_SSHD=0: down leaves no namespace" "" "$(ip netns list | awk '{print $1}' | grep -E "^$nossh-" || true)"

# Ctrl-C during up (SIGINT to its process group, as a terminal sends it): up tears down what it made.
intp=${LAB_PREFIX}-i
trap 'LAB_PREFIX=$intp "$LAB" down' EXIT
set -m # the background up gets a process group of its own, and SIGINT is not ignored in it
LAB_PREFIX=$intp "$LAB" up 3 >"/tmp/$intp.up.log" 2>&1 &
up_pid=$!
set +m
for _ in $(seq 100); do ip netns list | awk '{print $1}' | grep -qE "^$intp-h2\$" && break; sleep 0.05; done
kill -INT -- "-$up_pid" 2>/dev/null || true
rc=0
wait "$up_pid" || rc=$?
if ((rc != 0)); then pass "up interrupted by SIGINT exits non-zero ($rc)"; else fail "up interrupted by SIGINT exited 0"; fi
expect_eq "interrupted up leaves no namespace" "" "$(ip netns list | awk '{print $1}' | grep -E "^$intp-" || true)"
expect_eq "interrupted up leaves no LAB_DIR" "absent" "$([[ -e /tmp/$intp ]] && echo present || echo absent)"
# When either check above fails (it depends on where the signal catches up), show what up said.
if ip netns list | awk '{print $1}' | grep -qE "^$intp-" || [[ -e /tmp/$intp ]]; then
  sed 's/^/  interrupted up said: /' "/tmp/$intp.up.log" >&2 || true
fi
LAB_PREFIX=$intp "$LAB" down >/dev/null 2>&1 || true
trap - EXIT

if ((fails)); then
  echo "lab_smoke: $fails check(s) failed"
  exit 1
fi
echo "lab_smoke: all checks passed"
