# Issue 40's lab cases: torch DDP's collective over Gloo as a training step does it, the program knowing
# nothing of hvrun. Each of STEPS steps computes WORK iterations of pure Python on every rank (the same
# work everywhere; 400000 is ~50 ms on a free core), then all-reduces 4 MiB of "gradients". Each rank ends
# with "DDP done rank=R step_ms=M": its mean step time (scripts/bench_observe.sh reads it).
#   python3 ddp_steps.py STEPS WORK
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
steps, work = int(sys.argv[1]), int(sys.argv[2])
grads = torch.ones(1 << 20)
began = time.monotonic()
for step in range(steps):
    s = 0
    for i in range(work):
        s += i * i
    dist.all_reduce(grads)
print("DDP done rank=%d step_ms=%.2f" % (rank, (time.monotonic() - began) * 1000 / max(steps, 1)), flush=True)
