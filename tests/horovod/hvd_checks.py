"""A real Horovod PyTorch program, for tests/test_horovod.cpp: run unchanged under hvrun (and under
horovodrun as the anchor). Each rank prints what it saw, one `HVD key=value ...` line per check; the
test compares those lines across ranks and with the rank plan, so nothing here decides success alone.

    hvd_checks.py            size/rank/local/cross, allreduce, allgather, broadcast, DistributedOptimizer
    hvd_checks.py fail R     as above up to the first allreduce, then rank R exits 7 while the others
                             start a collective that can never complete and sleep (the launcher must
                             stop them)
"""
import hashlib
import os
import sys
import time

started = time.monotonic()
import torch  # noqa: E402  (the import is timed apart from hvd.init)
import horovod.torch as hvd  # noqa: E402

imported = time.monotonic()
hvd.init()
initialised = time.monotonic()
rank, size = hvd.rank(), hvd.size()
torch.manual_seed(1234 + rank)  # every rank starts from different parameters on purpose


def say(what, **values):
    print("HVD " + what + " rank=%d " % rank + " ".join("%s=%s" % kv for kv in values.items()), flush=True)


say("topology", size=size, local_rank=hvd.local_rank(), local_size=hvd.local_size(),
    cross_rank=hvd.cross_rank(), cross_size=hvd.cross_size(),
    rendezvous=os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR", ""),
    import_ms=int((imported - started) * 1000), init_ms=int((initialised - imported) * 1000))

total = hvd.allreduce(torch.tensor([float(rank + 1)] * 4), op=hvd.Sum, name="sum")
average = hvd.allreduce(torch.tensor([float(rank)]), op=hvd.Average, name="avg")
say("allreduce", sum=",".join("%g" % v for v in total.tolist()), average="%g" % average.item())

if len(sys.argv) == 3 and sys.argv[1] == "fail":
    if rank == int(sys.argv[2]):
        print("rank %d fails on purpose" % rank, file=sys.stderr, flush=True)
        sys.exit(7)
    # The others wait in a collective that can never complete, and then sleep: nothing makes these
    # processes end; only the launcher can. Horovod's background thread may already have noticed the
    # missing rank and shut down, and then the call raises: that must not end this rank either (its
    # exit could reach hvrun before rank 3's, from a nearer host, and be reported as the failure).
    try:
        hvd.allreduce_async(torch.tensor([1.0]), name="never")
    except Exception:  # horovod.common.exceptions.HorovodInternalError
        pass
    time.sleep(600)
    sys.exit(0)

gathered = hvd.allgather(torch.tensor([rank, rank * rank], dtype=torch.int64).view(1, 2), name="gather")
say("allgather", rows=";".join("%d,%d" % tuple(r) for r in gathered.tolist()))

root = size - 1
mine = torch.arange(3, dtype=torch.float32) + 10 * rank
say("broadcast", root=root, values=",".join("%g" % v for v in hvd.broadcast(mine, root, name="bcast").tolist()))

# A few steps of data-parallel training: different data on every rank, one model at the end.
model = torch.nn.Linear(4, 1)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
for step in range(3):
    x = torch.randn(8, 4)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
say("trained", steps=3, params=digest[:16])
hvd.shutdown()
