# A real Horovod job in which the rank named by argv[1] segfaults in native code through ctypes after
# a first allreduce (tests/test_horovod.cpp); the others go on with their allreduces.
import ctypes
import sys

import torch
import horovod.torch as hvd

hvd.init()
hvd.allreduce(torch.ones(4), name="warmup")
print("ready", flush=True)


def poison_batch():
    return ctypes.string_at(0)


if hvd.rank() == int(sys.argv[1]):
    poison_batch()
while True:
    hvd.allreduce(torch.ones(4), name="grad")
