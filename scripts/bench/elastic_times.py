#!/usr/bin/python3
"""One elastic run for scripts/bench_elastic.sh: a launcher (hvrun or the real horovodrun) runs Horovod's
own pytorch_synthetic_benchmark_elastic.py on lab hosts 1 and 2; once rank 0 has printed 3 steps, host 3
is added to the discovery output; once the world has grown and made 3 more steps, host 2's worker is
killed with SIGKILL. Prints one line, JOIN_S<TAB>LOSS_S, where
  join_s: from host 3's appearance in the discovery output to rank 0's first step in the world of 3
          (after Horovod's "reinitialization complete ... size: 2 -> 3"),
  loss_s: from the SIGKILL to rank 0's first step in the world of 2 ("size: 3 -> 2").
Then stops the launcher (SIGINT, SIGKILL 30 s later) and kills whatever carries the run's marker.

  elastic_times.py LAUNCHER_ARGV_JSON HOSTS_FILE HOST1 HOST2 HOST3 MARKER TIMEOUT_S LOG_FILE
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from lab_procs import kill_marked, marked, stop_group

REINIT = re.compile(r"reinitialization complete, updated rank: \d+ -> \d+ size: (\d+) -> (\d+)")
STEP = "<stdout>:Iter #"


class Reader:
    """The launcher's merged stdout and stderr, each line with the time it arrived."""

    def __init__(self, proc, log):
        self.lines = []
        self.cond = threading.Condition()
        self.log = log
        self.done = False
        threading.Thread(target=self.pump, args=(proc.stdout,), daemon=True).start()

    def pump(self, stream):
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            now = time.monotonic()
            self.log.write(f"{now:.3f} {line}\n")
            with self.cond:
                self.lines.append((now, line))
                self.cond.notify_all()
        with self.cond:
            self.done = True
            self.cond.notify_all()

    def wait_for(self, what, predicate, deadline):
        """The first index from which predicate(lines) holds; raises at the deadline or the launcher's end."""
        with self.cond:
            while True:
                found = predicate(self.lines)
                if found is not None:
                    return found
                if self.done:
                    raise RuntimeError(f"the launcher ended before {what}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no {what} within the time limit")
                self.cond.wait(min(left, 0.5))


def steps_after(n, start_index=0, after_time=0.0):
    """Predicate: the index of the n-th step line at or after start_index and after after_time."""
    def pred(lines):
        count = 0
        for i in range(start_index, len(lines)):
            t, line = lines[i]
            if t >= after_time and STEP in line:
                count += 1
                if count == n:
                    return i
        return None
    return pred


def reinit_to(before, after, start_index=0):
    def pred(lines):
        for i in range(start_index, len(lines)):
            m = REINIT.search(lines[i][1])
            if m and int(m.group(1)) == before and int(m.group(2)) == after:
                return i
        return None
    return pred


def main():
    argv = json.loads(sys.argv[1])
    hosts_file, h1, h2, h3, marker = sys.argv[2:7]
    timeout = float(sys.argv[7])
    log = open(sys.argv[8], "w", buffering=1)

    def set_hosts(names):
        tmp = hosts_file + ".new"
        with open(tmp, "w") as f:
            f.write("".join(f"{h}:1\n" for h in names))
        os.rename(tmp, hosts_file)

    set_hosts([h1, h2])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    reader = Reader(proc, log)
    deadline = time.monotonic() + timeout
    try:
        reader.wait_for("3 steps on 2 ranks", steps_after(3), deadline)
        t_add = time.monotonic()
        set_hosts([h1, h2, h3])
        grown = reader.wait_for("the world of 3", reinit_to(2, 3), deadline)
        first3 = reader.wait_for("a step in the world of 3", steps_after(1, grown), deadline)
        join_s = reader.lines[first3][0] - t_add
        reader.wait_for("3 steps in the world of 3", steps_after(4, grown), deadline)
        victims = marked(marker, f"HOROVOD_HOSTNAME={h2}")
        if not victims:
            raise RuntimeError(f"no worker of {h2} found by its marker")
        t_kill = time.monotonic()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        shrunk = reader.wait_for("the world of 2", reinit_to(3, 2, grown), deadline)
        first2 = reader.wait_for("a step in the world of 2", steps_after(1, shrunk), deadline)
        loss_s = reader.lines[first2][0] - t_kill
        print(f"{join_s:.3f}\t{loss_s:.3f}", flush=True)
    finally:
        stop_group(proc)
        kill_marked(marker)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        print(f"elastic_times.py: {e}", file=sys.stderr)
        sys.exit(1)
