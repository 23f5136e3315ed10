# A torch DDP program as torchrun users write it (env:// rendezvous, Gloo), for hvrun --max-restarts
# (tests/test_restarts_lab.cpp). Usage: ddp_restart.py VICTIM FAIL_UNTIL STEPS
# In every attempt below FAIL_UNTIL (TORCHELASTIC_RESTART_COUNT), rank VICTIM SIGKILLs itself at step 3,
# mid-run, while the other ranks wait in their allreduce. Rank 0 prints "DDP step N restart=R" each
# step; every rank ends with "DDP done rank=R size=S restart=C max=M port=P same=1" once the parameters
# agree on every rank.
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

victim, fail_until, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
assert "TORCHELASTIC_USE_AGENT_STORE" not in os.environ

dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)  # DDP's first broadcast must make the parameters equal
model = torch.nn.Linear(4, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for step in range(steps):
    x = torch.full((8, 4), float(rank + 1))
    loss = ddp(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 0:
        print(f"DDP step {step} restart={restart}", flush=True)
    if step == 3 and rank == victim and restart < fail_until:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.1)

total = torch.tensor([float(sum(p.sum() for p in model.parameters()))])
every = [torch.zeros(1) for _ in range(size)]
dist.all_gather(every, total)
same = int(all(abs(t.item() - every[0].item()) < 1e-6 for t in every))
print(f"DDP done rank={rank} size={size} restart={restart} max={os.environ['TORCHELASTIC_MAX_RESTARTS']} "
      f"port={os.environ['MASTER_PORT']} same={same}", flush=True)
dist.destroy_process_group()
