"""A Python loop of batch_transfer_sync_write, 128 x 64 KiB per batch,
through railyard's or Mooncake's TransferEngine (only the import differs):
two engines in this process on one device (loopback), 5 warm-up calls,
then ITERS timed calls.

    python batch_write.py railyard|mooncake [ITERS] [DEVICE]

Prints ``RESULT <kind> batches=N MiB/s=X us/call=Y``.
scripts/bench-python.sh runs it for both, beside the Rust engine directly
(verbs-shim/examples/batch_sync_loop.rs), in one Soft-RoCE guest.
"""

import ctypes
import sys
import time

kind = sys.argv[1]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 200
device = sys.argv[3] if len(sys.argv) > 3 else "rxe0"
if kind == "railyard":
    from railyard import TransferEngine
else:
    from mooncake.engine import TransferEngine

N, SIZE = 128, 64 << 10
a, b = TransferEngine(), TransferEngine()
assert a.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", device) == 0
assert b.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", device) == 0
src_keep = ctypes.create_string_buffer(N * SIZE)
dst_keep = ctypes.create_string_buffer(N * SIZE)
src, dst = ctypes.addressof(src_keep), ctypes.addressof(dst_keep)
assert a.register_memory(src, N * SIZE) == 0
assert b.register_memory(dst, N * SIZE) == 0
peer = f"127.0.0.1:{b.get_rpc_port()}"
srcs = [src + i * SIZE for i in range(N)]
dsts = [dst + i * SIZE for i in range(N)]
lens = [SIZE] * N
for _ in range(5):
    assert a.batch_transfer_sync_write(peer, srcs, dsts, lens) == 0
t0 = time.perf_counter()
for _ in range(iters):
    assert a.batch_transfer_sync_write(peer, srcs, dsts, lens) == 0
dt = time.perf_counter() - t0
mib = iters * N * SIZE / (1 << 20)
print(f"RESULT {kind} batches={iters} MiB/s={mib / dt:.1f} us/call={dt * 1e6 / iters:.1f}", flush=True)
a.unregister_memory(src)
b.unregister_memory(dst)
