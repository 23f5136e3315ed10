# What a benchmark on scripts/lab.sh's labs does around its runs: the lab torn down and the kernel limits
# restored however it ends, and scripts/bench/run_timed built. Sourced by bench_scale.sh, bench_ab.sh,
# bench_elastic.sh and bench_horovod_start.sh.
#   lab_bench_setup WORK LAB NAME   # NAME: the caller's, for messages; sets $timer, traps EXIT/INT/TERM
#   lab_bench_horovod_lab N         # after lab_bench_setup: the lab of the Horovod benchmarks (below)
#   "$lab" exec I env "${lab_bench_unset_lists[@]}" CMD...   # a launcher without the lab's per-host lists

# lab.sh raises the kernel's shared neighbour tables and pid_max and never lowers them: restored on exit.
lab_bench_keys=() lab_bench_old=()

lab_bench_cleanup() {
  local rc=$? i
  "$lab_bench_lab" down >/dev/null 2>&1 ||
    printf '%s: warning: %s down failed; run LAB_PREFIX=%s %s down\n' "$lab_bench_name" "$lab_bench_lab" "$LAB_PREFIX" "$lab_bench_lab" >&2
  for i in "${!lab_bench_keys[@]}"; do sysctl -qw "${lab_bench_keys[i]}=${lab_bench_old[i]}" || true; done
  rm -rf "$lab_bench_work"
  exit "$rc"
}

lab_bench_setup() {
  lab_bench_work=$1 lab_bench_lab=$2 lab_bench_name=$3
  local key old
  trap lab_bench_cleanup EXIT
  trap 'exit 130' INT # Ctrl-C: the EXIT trap tears the lab down
  trap 'exit 143' TERM
  timer=$lab_bench_work/run_timed
  g++ -std=c++20 -O2 "$root/scripts/bench/run_timed.cpp" -o "$timer" ||
    { printf '%s: error: cannot compile run_timed\n' "$lab_bench_name" >&2; exit 1; }
  for key in net.ipv4.neigh.default.gc_thresh{1,2,3} net.ipv6.neigh.default.gc_thresh{1,2,3} kernel.pid_max; do
    old=$(sysctl -n "$key" 2>/dev/null) || continue
    lab_bench_keys+=("$key") lab_bench_old+=("$old")
  done
}

# env options that keep the lab's per-host lists (LAB_HOSTS, LAB_FABRIC_ADDRS, ...; 77 KB at 1,000 hosts,
# which lab.sh exec exports) out of a launcher's environment: hvrun sends its environment to every host,
# so an environment that grows with the lab made the launcher's cost per host grow with it (n² bytes
# sent), where a user's environment is the same whatever the host count.
lab_bench_unset_lists=(-u LAB_HOSTS -u LAB_NAMESPACES -u LAB_FABRIC_IFACES -u LAB_FABRIC_ADDRS -u LAB_FABRIC6_ADDRS
  -u LAB_DEAD_ADDRS -u LAB_DROP_ADDRS)

# lab.sh up N as the Horovod benchmarks (bench_elastic.sh, bench_horovod_start.sh) need it: sshds, and every
# host's fabric NIC named eth1, since horovodrun takes one --network-interface for all hosts. Then its
# variables (LAB_HOSTS, LAB_KEY, LAB_PORT, ...), H (the host names) and home (an empty HOME for the
# launchers, in the work folder).
lab_bench_horovod_lab() {
  printf '%s: lab: %s hosts, load %s\n' "$lab_bench_name" "$1" "$(cut -d' ' -f1 /proc/loadavg)" >&2
  LAB_SSHD=1 LAB_RECREATE=1 LAB_FABRIC_NAMES=eth1 "$lab_bench_lab" up "$1" >"$lab_bench_work/up.log" 2>&1 || {
    cat "$lab_bench_work/up.log" >&2
    printf '%s: error: lab up failed\n' "$lab_bench_name" >&2
    exit 1
  }
  eval "$("$lab_bench_lab" env)"
  read -r -a H <<<"$LAB_HOSTS"
  home=$lab_bench_work/home
  mkdir -p "$home/.ssh"
  chmod 700 "$home" "$home/.ssh"
}
