# The worker side of an elastic job's registration (tests/test_horovod_rendezvous.cpp): Horovod 0.28.1's
# own WorkerNotificationManager, as hvd.elastic.run starts it in every worker, PUTs its notification
# service's addresses to the rendezvous at ADDR:PORT, then waits up to 30 s for a hosts update.
#   elastic_worker_peer.py ADDR PORT HOSTNAME LOCAL_RANK
# Prints "registered", then "updated TS RES TYPE" for each update its listener got.
import sys
import time

from horovod.runner.elastic.worker import WorkerNotificationManager


class Listener:
    def __init__(self):
        self.updates = []

    def on_hosts_updated(self, timestamp, res):
        self.updates.append((timestamp, res))


listener = Listener()
manager = WorkerNotificationManager()
manager.register_listener(listener)
manager.init(rendezvous_addr=sys.argv[1], rendezvous_port=int(sys.argv[2]), nic=None,
             hostname=sys.argv[3], local_rank=int(sys.argv[4]))
print("registered", flush=True)
deadline = time.monotonic() + 30
while not listener.updates and time.monotonic() < deadline:
    time.sleep(0.05)
for timestamp, res in listener.updates:
    print("updated", timestamp, int(res), type(res).__name__, flush=True)
