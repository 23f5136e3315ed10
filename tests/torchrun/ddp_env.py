# A torch DDP program as torchrun users write it (env:// rendezvous, Gloo), for hvrun's torchrun form
# (tests/test_torchrun_lab.cpp); runs as a script or as a module (-m ddp_env).
# Usage: ddp_env.py NNODES NPROC ROLE RUN_ID MAX_RESTARTS STEPS CHECKPOINT VICTIM [ARGS...]
# (RUN_ID "-": any; CHECKPOINT "-": none; VICTIM -1: none)
# Checks every variable of torchrun's rank environment against what the torchrun line asked for, then
# allreduces rank+1 and checks the sum. With a CHECKPOINT (a file every host sees): rank 0 saves the model
# and step after each step and every attempt resumes from it; rank VICTIM SIGKILLs itself at step 2 of
# the first attempt. Every rank ends with one line "TORCHRUN ok rank=R group=G/N restart=C sum=S
# step0=K same=1 args=A" (S: the allreduce, K: the step the attempt began at, A: the arguments after these);
# a failed check raises, naming the variable.
import os
import signal
import sys

import torch
import torch.distributed as dist

nnodes, nproc = int(sys.argv[1]), int(sys.argv[2])
role, run_id, max_restarts, steps = sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
checkpoint = "" if sys.argv[7] == "-" else sys.argv[7]
victim, extra = int(sys.argv[8]), sys.argv[9:]

env = os.environ
rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
restart = int(env["TORCHELASTIC_RESTART_COUNT"])
expected = {
    "WORLD_SIZE": str(nnodes * nproc),
    "LOCAL_WORLD_SIZE": str(nproc),
    "LOCAL_RANK": str(rank % nproc),
    "GROUP_RANK": str(rank // nproc),
    "GROUP_WORLD_SIZE": str(nnodes),
    "ROLE_RANK": str(rank),
    "ROLE_WORLD_SIZE": str(nnodes * nproc),
    "ROLE_NAME": role,
    "TORCHELASTIC_MAX_RESTARTS": max_restarts,
    "PYTHONUNBUFFERED": "1",
}
if run_id != "-":
    expected["TORCHELASTIC_RUN_ID"] = run_id
if nproc > 1:
    expected["OMP_NUM_THREADS"] = "1"
for name, value in expected.items():
    if env.get(name) != value:
        raise SystemExit(f"rank {rank}: {name}={env.get(name)!r}, expected {value!r}")
for name in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
    if not env.get(name):
        raise SystemExit(f"rank {rank}: {name} is not set")
if "TORCHELASTIC_USE_AGENT_STORE" in env:
    raise SystemExit(f"rank {rank}: TORCHELASTIC_USE_AGENT_STORE is set")

dist.init_process_group("gloo")
assert dist.get_rank() == rank and dist.get_world_size() == size
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
if total.item() != size * (size + 1) / 2:
    raise SystemExit(f"rank {rank}: allreduce gave {total.item()}")

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
first = 0
if checkpoint and os.path.exists(checkpoint):
    saved = torch.load(checkpoint)
    model.load_state_dict(saved["model"])
    first = saved["step"] + 1
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for step in range(first, steps):
    loss = ddp(torch.full((8, 4), float(rank + 1))).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if checkpoint and rank == 0:
        torch.save({"model": model.state_dict(), "step": step}, checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)
    dist.barrier()  # the checkpoint of this step is written before any rank goes on
    print(f"TORCHRUN step {step} rank={rank} restart={restart}", flush=True)
    if step == 2 and rank == victim and restart == 0:
        os.kill(os.getpid(), signal.SIGKILL)

low = torch.tensor([float(sum(p.sum() for p in model.parameters()))])
high = low.clone()
dist.all_reduce(low, op=dist.ReduceOp.MIN)
dist.all_reduce(high, op=dist.ReduceOp.MAX)
same = int(high.item() - low.item() < 1e-6)  # DDP kept the parameters equal on every rank
print(f"TORCHRUN ok rank={rank} group={env['GROUP_RANK']}/{env['GROUP_WORLD_SIZE']} restart={restart} "
      f"sum={total.item():g} step0={first} same={same} args={','.join(extra)}", flush=True)
dist.destroy_process_group()
