"""The target side of test_two_node.py, run on the second Soft-RoCE guest
(``scripts/rxe-vm --two --peer-cmd 'python two_node_peer.py'``).

Starts a railyard TransferEngine on this guest's address, registers a
buffer, and answers on a small TCP control socket (port 18700): first the
engine's session name and buffer address (JSON), then, per request, the
SHA-256 of a range of its buffer, so the initiator can check what it wrote
landed. Prints "two_node_peer: OK" when the initiator says done.
"""

import ctypes
import hashlib
import json
import os
import socket
import sys

from railyard import TransferEngine

SIZE = 8 << 20
ip = os.environ.get("RXE_VM_SELF_IP", "127.0.0.1")
te = TransferEngine()
assert te.initialize(ip, "P2PHANDSHAKE", "rdma", os.environ.get("RAILYARD_RDMA_DEVICE", "rxe0")) == 0, te.last_error()
keep = ctypes.create_string_buffer(SIZE)
addr = ctypes.addressof(keep)
assert te.register_memory(addr, SIZE) == 0, te.last_error()

srv = socket.create_server((ip, 18700))
srv.settimeout(300)
conn, _ = srv.accept()
f = conn.makefile("rw")
f.write(json.dumps({"session": te.get_session_id(), "addr": addr, "len": SIZE}) + "\n")
f.flush()
for line in f:
    req = json.loads(line)
    if req["op"] == "sha":
        data = ctypes.string_at(addr + req["off"], req["len"])
        f.write(json.dumps({"sha": hashlib.sha256(data).hexdigest()}) + "\n")
        f.flush()
    elif req["op"] == "fill":
        ctypes.memmove(addr + req["off"], bytes.fromhex(req["hex"]), len(req["hex"]) // 2)
        f.write("{}\n")
        f.flush()
    elif req["op"] == "done":
        break
assert te.unregister_memory(addr) == 0, te.last_error()
te.close()
print("two_node_peer: OK", flush=True)
sys.exit(0)
