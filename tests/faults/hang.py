# Ranks that hang (tests/test_faults.cpp): the rank named by argv[1] waits for a shard that never
# comes, the others wait for it in a polling loop; nothing is printed after "ready".
import os
import sys
import time


def wait_for_shard():
    while True:
        time.sleep(0.2)


def allreduce_wait():
    while True:
        time.sleep(0.2)


print("ready", flush=True)
if os.environ["HVRUN_RANK"] == sys.argv[1]:
    wait_for_shard()
allreduce_wait()
