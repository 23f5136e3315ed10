# A real Horovod job with one stuck rank (tests/test_horovod.cpp): the rank named by argv[1] waits for
# a shard that never comes; the others block in hvd.allreduce waiting for it.
import sys
import time

import torch
import horovod.torch as hvd

hvd.init()


def wait_for_shard():
    while True:
        time.sleep(0.2)


def train_step(grad):
    return hvd.allreduce(grad, name="grad")


print("ready", flush=True)
if hvd.rank() == int(sys.argv[1]):
    wait_for_shard()
print("stepping", flush=True)  # the test waits for three of these before its Ctrl-C
while True:
    train_step(torch.ones(4))
