# The far side of tests/test_horovod_pickle.cpp: Horovod 0.28.1's own WorkerNotificationService (the
# service every elastic worker runs), fed hvrun's sealed messages byte for byte.
#   notification_peer.py KEY_HEX MESSAGE_HEX...
# Prints "put BASE64" (the worker_addresses value a worker PUTs, made by Horovod's own codec), then
# "reply HEX" per message (empty when the service closed without answering), then "updated TS RES TYPE"
# for each HostsUpdatedRequest the service handed to its manager.
#   notification_peer.py serve KEY_HEX COUNT
# Prints "put BASE64", then serves until COUNT updates came (or 30 s passed) and prints them as above.
import socket
import sys
import time

from horovod.runner.common.util import codec
from horovod.runner.elastic.worker import WorkerNotificationService


class Recorder:
    def __init__(self):
        self.calls = []

    def handle_hosts_updated(self, timestamp, res):
        self.calls.append((timestamp, res))


serve = sys.argv[1] == "serve"
args = sys.argv[2:] if serve else sys.argv[1:]
key = bytes.fromhex(args[0])
recorder = Recorder()
service = WorkerNotificationService(key, None, recorder)
try:
    print("put", codec.dumps_base64((service.addresses(), key)), flush=True)
    deadline = time.monotonic() + 30
    while serve and len(recorder.calls) < int(args[1]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for message in [] if serve else args[1:]:
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
