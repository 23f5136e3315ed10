#!/usr/bin/python3
"""The runs of scripts/bench_horovod_start.sh: one real Horovod program (horovod_start_rank.py: import,
hvd.init(), one allreduce) on lab hosts 1..3 with SLOTS ranks each, started three ways, interleaved:
  hvrun       hvrun -H h1:S,h2:S,h3:S from lab host 0 (--verbose: its own phase timings);
  horovodrun  the real horovodrun --gloo --network-interface IFACE from lab host 0 (a uniform lab);
  hand        no launcher: Horovod's own RendezvousServer on lab host 0, started before the clock starts,
              and every rank started at once in its host's namespace (lab.sh exec) with the environment
              horovodrun would give it: the floor a launcher adds to.
Prints a markdown table: per way, medians (min-max) over the runs of the time from the start to
  last rank started: the last rank's Python began its main (its interpreter is up);
  imported: a rank's import of torch and horovod.torch (median over its ranks);
  init done: the last rank's hvd.init() returned (Gloo's rendezvous, every rank connected);
  allreduce: the last rank's first allreduce returned;
  end: the launcher exited (hand: the last rank exited).
and for hvrun the medians of its own --verbose timings (connect, agents up, probe).

  horovod_start.py CONFIG_JSON    (written by bench_horovod_start.sh; keys below, in main())
Exit status 0 when every run gave its figures; each failure is said on stderr with its log's last lines.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from lab_procs import kill_marked, stop_group

LINE = re.compile(r"HVSTART rank=(\d+) size=(\d+) start=([\d.]+) imported=([\d.]+) init=([\d.]+) allreduce=([\d.]+)")
TIMINGS = re.compile(r"timings: connect (\d+|local) ?(?:ms)?, agents up (\d+) ms, probe (\d+) ms")

SERVER = """
import sys
from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.http.http_server import RendezvousServer
plan = get_host_assignments(parse_hosts(sys.argv[1]), int(sys.argv[2]))
server = RendezvousServer(0)
port = server.start()
server.init(plan)
print(port, flush=True)
sys.stdin.read()
server.stop()
"""


class Run:
    def __init__(self, cfg, way, rep):
        self.cfg, self.way, self.rep = cfg, way, rep
        self.marker = f"HVRUN_BENCH_HVSTART={way}-{rep}-{os.getpid()}"
        self.log_path = os.path.join(cfg["work"], f"{way}-{rep}.log")

    def hosts_arg(self):
        return ",".join(f"{h}:{self.cfg['slots']}" for h in self.cfg["hosts"][1:])

    def np(self):
        return self.cfg["slots"] * (len(self.cfg["hosts"]) - 1)

    def launcher_argv(self):
        c = self.cfg
        lab0 = [c["lab"], "exec", "0", "env", f"HOME={c['home']}"]
        if self.way == "hvrun":
            return lab0 + [c["hvrun"], "--verbose", "-p", c["port"], "-i", c["key"], "-np", str(self.np()), "-H",
                           self.hosts_arg(), "-x", f"PYTHONPATH={c['site']}", "-x", "OMP_NUM_THREADS=1", "-x",
                           self.marker, c["python"], c["rank_program"]]
        # horovodrun has no -x: its ranks get its whole environment.
        return lab0 + [f"PYTHONPATH={c['site']}", "OMP_NUM_THREADS=1", "PYTHONUNBUFFERED=1", self.marker, c["python"],
                       os.path.join(c["site"], "..", "bin", "horovodrun"), "--gloo", "--network-interface",
                       c["iface"], "-p", c["port"], "-i", c["key"], "-np", str(self.np()), "-H", self.hosts_arg(),
                       c["python"], c["rank_program"]]

    def go(self):
        """Returns (figures, None) or (None, why)."""
        with open(self.log_path, "w") as log:
            try:
                if self.way == "hand":
                    return self.by_hand(log)
                return self.launched(log)
            finally:
                kill_marked(self.marker)

    def launched(self, log):
        t0 = time.time()
        proc = subprocess.Popen(self.launcher_argv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.cfg["timeout"])
        except subprocess.TimeoutExpired:
            stop_group(proc)
            out = proc.stdout.read() if proc.stdout else b""
            log.write(out.decode("utf-8", "replace"))
            return None, f"not done within {self.cfg['timeout']} s"
        end = time.time()
        text = out.decode("utf-8", "replace")
        log.write(text)
        if proc.returncode != 0:
            return None, f"{self.way} exited with code {proc.returncode}"
        figures = self.figures(text, t0, end)
        if figures and self.way == "hvrun":
            m = TIMINGS.search(text)
            if not m:
                return None, "no 'timings:' line from hvrun --verbose"
            figures["connect"] = 0.0 if m.group(1) == "local" else int(m.group(1)) / 1000
            figures["agents up"] = int(m.group(2)) / 1000
            figures["probe"] = int(m.group(3)) / 1000
        return (figures, None) if figures else (None, "not every rank printed its HVSTART line")

    def by_hand(self, log):
        c = self.cfg
        server = subprocess.Popen([c["lab"], "exec", "0", "env", f"PYTHONPATH={c['site']}", self.marker, c["python"],
                                   "-c", SERVER, self.hosts_arg(), str(self.np())],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        try:
            port = server.stdout.readline().decode().strip()
            if not port.isdigit():
                return None, "Horovod's RendezvousServer did not start"
            t0 = time.time()
            ranks = []
            hosts = c["hosts"][1:]
            for h, host in enumerate(hosts):
                for lr in range(c["slots"]):
                    env = {
                        "HOROVOD_GLOO_RENDEZVOUS_ADDR": c["rendezvous_addr"], "HOROVOD_GLOO_RENDEZVOUS_PORT": port,
                        "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo",
                        "HOROVOD_GLOO_IFACE": c["iface"], "HOROVOD_HOSTNAME": host,
                        "HOROVOD_RANK": str(h * c["slots"] + lr), "HOROVOD_SIZE": str(self.np()),
                        "HOROVOD_LOCAL_RANK": str(lr), "HOROVOD_LOCAL_SIZE": str(c["slots"]),
                        "HOROVOD_CROSS_RANK": str(h), "HOROVOD_CROSS_SIZE": str(len(hosts)),
                        "PYTHONPATH": c["site"], "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                    }
                    argv = [c["lab"], "exec", str(h + 1), "env"] + [f"{k}={v}" for k, v in env.items()] + [
                        self.marker, c["python"], c["rank_program"]]
                    ranks.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                  start_new_session=True))
            texts, failed = [], None
            deadline = t0 + c["timeout"]
            for r in ranks:
                try:
                    out, _ = r.communicate(timeout=max(1.0, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    stop_group(r, signal.SIGKILL)
                    out, failed = b"", f"a rank was not done within {c['timeout']} s"
                texts.append(out.decode("utf-8", "replace"))
                if r.returncode != 0 and not failed:
                    failed = f"a rank exited with code {r.returncode}"
            end = time.time()
            text = "".join(texts)
            log.write(text)
            if failed:
                return None, failed
            figures = self.figures(text, t0, end)
            return (figures, None) if figures else (None, "not every rank printed its HVSTART line")
        finally:
            try:
                server.stdin.close()
                server.wait(10)
            except subprocess.TimeoutExpired:
                stop_group(server, signal.SIGKILL)

    def figures(self, text, t0, end):
        rows = [tuple(float(x) for x in m.groups()[2:]) for m in LINE.finditer(text)]
        if len(rows) != self.np():
            return None
        return {
            "last rank started": max(r[0] for r in rows) - t0,
            "imported": statistics.median(r[1] - r[0] for r in rows),
            "init done": max(r[2] for r in rows) - t0,
            "allreduce": max(r[3] for r in rows) - t0,
            "end": end - t0,
        }


def cell(values):
    if not values:
        return "—"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    # CONFIG_JSON: lab (lab.sh), hosts (lab host names, 0 the launcher's), port, key, home, hvrun, python,
    # site (Horovod's), rank_program, slots, reps, timeout (s per run), iface (the fabric NIC, the same name
    # on every host), rendezvous_addr (host 0's fabric address), work (a folder for the logs).
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    ways = ["hvrun", "horovodrun", "hand"]
    results = {w: [] for w in ways}
    failures = 0
    for rep in range(1, cfg["reps"] + 1):
        order = ways[rep % 3:] + ways[:rep % 3]  # each way first in turn
        for way in order:
            figures, why = Run(cfg, way, rep).go()
            if figures:
                results[way].append(figures)
                print(f"bench_horovod_start: [{rep}/{cfg['reps']}] {way}: ranks started {figures['last rank started']:.2f} s, "
                      f"init done {figures['init done']:.2f} s, end {figures['end']:.2f} s", file=sys.stderr)
            else:
                failures += 1
                log_path = Run(cfg, way, rep).log_path
                print(f"bench_horovod_start: FAILED: {way} round {rep}: {why}; last lines of {log_path}:",
                      file=sys.stderr)
                with open(log_path, errors="replace") as log:
                    for line in log.read().splitlines()[-8:]:
                        print("  " + line, file=sys.stderr)
    cols = ["last rank started", "imported", "init done", "allreduce", "end"]
    print("| way | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for way in ways:
        print(f"| {way} | " + " | ".join(cell([r[c] for r in results[way]]) for c in cols) + " |")
    hv = results["hvrun"]
    if hv:
        print()
        print("hvrun's own --verbose timings, medians: " + ", ".join(
            f"{c} {statistics.median(r[c] for r in hv):.3f} s" for c in ["connect", "agents up", "probe"]) + ".")
    if results["hvrun"] and results["horovodrun"] and results["hand"]:
        e = {w: statistics.median(r["init done"] for r in results[w]) for w in ways}
        print()
        print(f"Up to every rank's hvd.init(): hvrun {e['hvrun']:.2f} s, horovodrun {e['horovodrun']:.2f} s "
              f"(hvrun / horovodrun {e['hvrun'] / e['horovodrun']:.2f}x), by hand {e['hand']:.2f} s "
              f"(hvrun − hand {e['hvrun'] - e['hand']:+.2f} s).")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
