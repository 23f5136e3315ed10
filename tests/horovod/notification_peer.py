# The far side of tests/test_horovod_pickle.cpp: Horovod 0.28.1's own WorkerNotificationService (the
# service every elastic worker runs), fed hvrun's sealed messages byte for byte.
#   notification_peer.py KEY_HEX MESSAGE_HEX...
# Prints "put BASE64" (the worker_addresses value a worker PUTs, made by Horovod's own codec), then
# "reply HEX" per message (empty when the service closed without answering), then "updated TS RES TYPE"
# for each HostsUpdatedRequest the service handed to its manager.
import socket
import sys

from horovod.runner.common.util import codec
from horovod.runner.elastic.worker import WorkerNotificationService


class Recorder:
    def __init__(self):
        self.calls = []

    def handle_hosts_updated(self, timestamp, res):
        self.calls.append((timestamp, res))


key = bytes.fromhex(sys.argv[1])
recorder = Recorder()
service = WorkerNotificationService(key, None, recorder)
try:
    print("put", codec.dumps_base64((service.addresses(), key)), flush=True)
    for message in sys.argv[2:]:
        with socket.create_connection(("127.0.0.1", service.get_port()), timeout=10) as s:
            s.sendall(bytes.fromhex(message))
            reply = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        print("reply", reply.hex(), flush=True)
    for timestamp, res in recorder.calls:
        print("updated", timestamp, int(res), type(res).__name__, flush=True)
finally:
    service.shutdown()
