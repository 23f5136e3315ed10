"""What the lab benchmarks' Python drivers (elastic_times.py, horovod_start.py) share: finding and ending
the processes of one run by a marker in their environment (the lab's hosts are namespaces of this machine's
pid namespace, so every rank is visible here), and stopping a process group they started."""
import os
import signal
import subprocess
import time


def marked(marker, extra=None):
    """Pids whose environment holds `marker` (and `extra`, when given) as a whole NAME=VALUE entry."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in env and (extra is None or extra.encode() in env):
            pids.append(int(name))
    return pids


def kill_marked(marker):
    """SIGKILL to every process carrying `marker`, again while any is left (at most 10 s)."""
    for _ in range(20):
        left = marked(marker)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)


def stop_group(proc, first=signal.SIGINT):
    """Stops the process group of `proc` (started with start_new_session): `first`, SIGKILL 30 s later."""
    try:
        os.killpg(proc.pid, first)
        proc.wait(30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
