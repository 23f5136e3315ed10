#!/usr/bin/python3
"""The rank program of scripts/bench_horovod_start.sh: what a Horovod program does before its first step
(import torch and horovod.torch, hvd.init(), one allreduce), each moment printed as wall-clock time on one
line, HVSTART rank=R size=S start=T imported=T init=T allreduce=T. The lab's hosts share this machine's
clock, so the driver subtracts its own launch time."""
import time

START = time.time()
import torch  # noqa: E402
import horovod.torch as hvd  # noqa: E402

IMPORTED = time.time()
hvd.init()
INIT = time.time()
hvd.allreduce(torch.ones(1024), name="hvstart")
DONE = time.time()
print(f"HVSTART rank={hvd.rank()} size={hvd.size()} start={START:.6f} imported={IMPORTED:.6f} "
      f"init={INIT:.6f} allreduce={DONE:.6f}", flush=True)
