"""One run across two Soft-RoCE guests (``scripts/rxe-vm --two``): this
side (node 0) writes and reads the buffer of a railyard TransferEngine on
node 1 (``two_node_peer.py``) over real RC QPs between the guests, in sync,
batch and async modes, and checks the bytes on both ends.

Runs only with RAILYARD_TWO_NODE=1 (ci/python.sh sets it for the
two-guest run, where the harness sets RXE_VM_PEER_IP); otherwise it skips.
"""

import ctypes
import hashlib
import json
import os
import socket
import time

import pytest

import railyard
from conftest import DEVICE, random_bytes

TWO_NODE = os.environ.get("RAILYARD_TWO_NODE") == "1"
PEER = os.environ.get("RXE_VM_PEER_IP")
SELF = os.environ.get("RXE_VM_SELF_IP", "127.0.0.1")
MiB = 1 << 20


@pytest.fixture
def control():
    if not TWO_NODE:
        pytest.skip("SKIP: needs two guests (RAILYARD_TWO_NODE=1 under scripts/rxe-vm --two; ci/python.sh)")
    if not PEER:
        pytest.fail("RAILYARD_TWO_NODE=1 but RXE_VM_PEER_IP is not set (not under scripts/rxe-vm --two)")
    t0 = time.time()
    while True:
        try:
            s = socket.create_connection((PEER, 18700), timeout=300)
            break
        except OSError:
            assert time.time() - t0 < 120, "peer control socket never came up"
            time.sleep(0.5)
    f = s.makefile("rw")
    hello = json.loads(f.readline())

    def ask(**req):
        f.write(json.dumps(req) + "\n")
        f.flush()
        return json.loads(f.readline())

    yield hello, ask
    f.write(json.dumps({"op": "done"}) + "\n")
    f.flush()
    s.close()


def test_across_two_guests(control, rng):
    hello, ask = control
    peer, raddr, rlen = hello["session"], hello["addr"], hello["len"]
    assert rlen >= 8 * MiB
    te = railyard.TransferEngine()
    assert te.initialize(SELF, "P2PHANDSHAKE", "rdma", DEVICE) == 0, te.last_error()
    keep = ctypes.create_string_buffer(8 * MiB)
    local = ctypes.addressof(keep)
    assert te.register_memory(local, 8 * MiB) == 0
    assert te.get_first_buffer_address(peer) == raddr

    def remote_sha(off, n):
        return ask(op="sha", off=off, len=n)["sha"]

    # sync write, checked on the peer
    data = random_bytes(rng, 2 * MiB + 77)
    ctypes.memmove(local, data, len(data))
    assert te.transfer_sync_write(peer, local, raddr, len(data)) == 0
    assert remote_sha(0, len(data)) == hashlib.sha256(data).hexdigest()
    # sync read of what the peer wrote itself
    blob = random_bytes(rng, 4096)
    ask(op="fill", off=3 * MiB, hex=blob.hex())
    assert te.transfer_sync_read(peer, local + 3 * MiB, raddr + 3 * MiB, 4096) == 0
    assert ctypes.string_at(local + 3 * MiB, 4096) == blob
    # batch sync: 128 x 16 KiB
    n, size = 128, 16 << 10
    data = random_bytes(rng, n * size)
    ctypes.memmove(local + 4 * MiB, data, len(data))
    offs = [i * size for i in range(n)]
    assert te.batch_transfer_sync_write(peer, [local + 4 * MiB + o for o in offs], [raddr + 4 * MiB + o for o in offs], [size] * n) == 0
    assert remote_sha(4 * MiB, n * size) == hashlib.sha256(data).hexdigest()
    # async read back of the same range, compared here
    ctypes.memset(local + 4 * MiB, 0, n * size)
    bid = te.batch_transfer_async_read(peer, [local + 4 * MiB + o for o in offs], [raddr + 4 * MiB + o for o in offs], [size] * n)
    assert bid != 0
    assert te.get_batch_transfer_status([bid]) == 0
    assert ctypes.string_at(local + 4 * MiB, n * size) == data
    assert te.unregister_memory(local) == 0
    te.close()
