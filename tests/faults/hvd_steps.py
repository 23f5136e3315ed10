# Issue 40's Horovod cases: Horovod's allreduce as a training step does it, the program knowing nothing of
# hvrun. Each step, rank SLOW (-1: none) computes 0.2 s of pure Python more than the others, then every
# rank all-reduces 4 MiB of "gradients"; the others wait in Horovod's synchronize, which polls (the main
# thread stays on a CPU: only where it runs tells waiting from computing). Runs until rank 0 has run
# SECONDS (all ranks agree each step through a one-element allreduce) and ends with
# "hvd done rank=R steps=N".
#   python3 hvd_steps.py SECONDS SLOW
import sys
import time

import horovod.torch as hvd
import torch

hvd.init()
rank = hvd.rank()
seconds, slow = float(sys.argv[1]), int(sys.argv[2])
grads = torch.ones(1 << 20)
began = time.monotonic()
steps = 0
while True:
    if rank == slow:
        spin_until = time.monotonic() + 0.2
        while time.monotonic() < spin_until:
            pass
    hvd.allreduce(grads, name="grads")
    steps += 1
    go_on = torch.tensor([1.0 if time.monotonic() - began < seconds else 0.0])
    if hvd.allreduce(go_on, name="go_on", op=hvd.Min).item() == 0:
        break
print("hvd done rank=%d steps=%d" % (rank, steps), flush=True)
