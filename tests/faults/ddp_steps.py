# Issue 40's lab cases: torch DDP's collective over Gloo as a training step does it, the program knowing
# nothing of hvrun. Each step computes WORK iterations of pure Python on every rank (the same work
# everywhere; 400000 is ~50 ms on a free core), then all-reduces 4 MiB of "gradients". It runs STEPS
# steps, or with SECONDS until rank 0 has run that long (all ranks agree each step through a one-element
# allreduce), so that a case gets its observation windows however fast the machine is. Each rank ends
# with "DDP done rank=R steps=N step_ms=M": its mean step time (scripts/bench_observe.sh reads it).
#   python3 ddp_steps.py STEPS WORK [SECONDS]
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
steps, work = int(sys.argv[1]), int(sys.argv[2])
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else None
grads = torch.ones(1 << 20)
stop = torch.zeros(1)
began = time.monotonic()
done = 0
while True:
    if seconds is None:
        if done >= steps:
            break
    else:
        stop[0] = 1.0 if rank == 0 and time.monotonic() - began >= seconds else 0.0
        dist.all_reduce(stop)
        if stop[0] > 0:
            break
    s = 0
    for i in range(work):
        s += i * i
    dist.all_reduce(grads)
    done += 1
print("DDP done rank=%d steps=%d step_ms=%.2f" % (rank, done, (time.monotonic() - began) * 1000 / max(done, 1)),
      flush=True)
