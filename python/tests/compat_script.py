"""One script for both engines: ``python compat_script.py railyard`` or
``python compat_script.py mooncake``. Only the import differs.

Two engines of the chosen kind in this process talk to each other (the two
kinds do not interoperate on the wire). Every step prints one JSON line
``{"step": ..., "result": ...}`` holding only what must be identical for
both: return codes, booleans, and whether read-back data matched.
``test_compat.py`` runs it for both and compares the lines.
"""

import ctypes
import json
import os
import random
import sys

kind = sys.argv[1]
if kind == "railyard":
    from railyard import TransferEngine
elif kind == "mooncake":
    from mooncake.engine import TransferEngine
else:
    raise SystemExit(f"usage: {sys.argv[0]} railyard|mooncake")

DEVICE = os.environ.get("COMPAT_DEVICE", "rxe0")
HOST = os.environ.get("COMPAT_HOST", "127.0.0.1")
LEN = 1 << 20
rng = random.Random(16)


def out(step, result):
    print(json.dumps({"step": step, "result": result}), flush=True)


def buf(n):
    b = ctypes.create_string_buffer(n)
    return b, ctypes.addressof(b)


def put(addr, data):
    ctypes.memmove(addr, data, len(data))


def get(addr, n):
    return ctypes.string_at(addr, n)


a, b = TransferEngine(), TransferEngine()
out("initialize a", a.initialize(HOST, "P2PHANDSHAKE", "rdma", DEVICE))
out("initialize b", b.initialize(HOST, "P2PHANDSHAKE", "rdma", DEVICE))
out("rpc ports", a.get_rpc_port() > 0 and b.get_rpc_port() > 0 and a.get_rpc_port() != b.get_rpc_port())
peer = f"{HOST}:{b.get_rpc_port()}"

# Memory, registered before the first transfer connects the engines.
a_keep, a_addr = buf(4 * LEN)
b_keep, b_addr = buf(4 * LEN)
out("register a", a.register_memory(a_addr, 4 * LEN))
out("register b", b.register_memory(b_addr, 4 * LEN))
out("register overlapping", a.register_memory(a_addr + 4096, 4096))
out("register zero length", a.register_memory(a_addr + 8 * LEN, 0))
extra = [buf(64 << 10) for _ in range(3)]
out("batch_register", b.batch_register_memory([x[1] for x in extra], [64 << 10] * 3))
out("first buffer address is b's", a.get_first_buffer_address(peer) in [b_addr] + [x[1] for x in extra])

# Sync write then read back.
data = bytes(rng.getrandbits(8) for _ in range(LEN))
put(a_addr, data)
out("transfer_sync_write", a.transfer_sync_write(peer, a_addr, b_addr, LEN))
out("written", get(b_addr, LEN) == data)
put(b_addr + LEN, bytes(reversed(data)))
out("transfer_sync_read", a.transfer_sync_read(peer, a_addr + LEN, b_addr + LEN, LEN))
out("read back", get(a_addr + LEN, LEN) == bytes(reversed(data)))

# Batch sync: 16 x 4 KiB + unaligned tails.
n = 16
lens = [4096 + 13 * i for i in range(n)]
srcs = [a_addr + 2 * LEN + i * 8192 for i in range(n)]
dsts = [b_addr + 2 * LEN + i * 8192 for i in range(n)]
blobs = [bytes(rng.getrandbits(8) for _ in range(k)) for k in lens]
for s, d in zip(srcs, blobs):
    put(s, d)
out("batch_transfer_sync_write", a.batch_transfer_sync_write(peer, srcs, dsts, lens))
out("batch written", all(get(d, k) == x for d, k, x in zip(dsts, lens, blobs)))
for s, k in zip(srcs, lens):
    put(s, b"\0" * k)
out("batch_transfer_sync_read", a.batch_transfer_sync_read(peer, srcs, dsts, lens))
out("batch read back", all(get(s, k) == x for s, k, x in zip(srcs, lens, blobs)))
out("batch mismatched lengths", a.batch_transfer_sync_write(peer, srcs, dsts[:-1], lens))

# Async: two batches, one status call.
put(a_addr, data[::-1])
w = a.batch_transfer_async_write(peer, [a_addr], [b_addr + 3 * LEN], [LEN])
r = a.batch_transfer_async_read(peer, [a_addr + 3 * LEN], [b_addr], [LEN])
out("async ids", w != 0 and r != 0 and w != r)
out("get_batch_transfer_status", a.get_batch_transfer_status([w, r]))
out("async written", get(b_addr + 3 * LEN, LEN) == data[::-1])
out("async read", get(a_addr + 3 * LEN, LEN) == data)

# Many small writes.
ok = 0
for i in range(200):
    ok += a.transfer_sync_write(peer, a_addr + i * 64, b_addr + i * 64, 64) == 0
out("200 small writes", ok)
out("small writes landed", get(b_addr, 200 * 64) == get(a_addr, 200 * 64))

# Bytes helpers on registered memory.
out("write_bytes_to_buffer", a.write_bytes_to_buffer(a_addr, b"railyard", 8))
out("read_bytes_from_buffer", a.read_bytes_from_buffer(a_addr, 8) == b"railyard")

# A local buffer that is not registered: the transfer fails.
stray_keep, stray = buf(4096)
out("unregistered local buffer", a.transfer_sync_write(peer, stray, b_addr, 4096))

# Managed buffers (above 256 MiB both engines register exactly the size).
big = 260 << 20
m = a.allocate_managed_buffer(big)
out("allocate_managed_buffer", m != 0)
if m:
    out("managed write_bytes", a.write_bytes_to_buffer(m, b"x" * 4096, 4096))
    out("managed as source", a.transfer_sync_write(peer, m, b_addr, 4096))
    out("managed landed", get(b_addr, 4096) == b"x" * 4096)
    out("free_managed_buffer", a.free_managed_buffer(m, big))

# Deregistration.
out("unregister unknown", a.unregister_memory(a_addr + 8))
out("batch_unregister", b.batch_unregister_memory([x[1] for x in extra]))
out("unregister a", a.unregister_memory(a_addr))
out("unregister a again", a.unregister_memory(a_addr))
out("unregister b", b.unregister_memory(b_addr))
