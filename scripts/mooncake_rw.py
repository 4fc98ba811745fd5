#!/usr/bin/env python3
"""Write, read back and compare through Mooncake's own Python TransferEngine
(the PyPI wheel, mooncake-transfer-engine-non-cuda), unmodified: the program
that railyard's verbs preload runs under in scripts/preload-check.sh,
scripts/bench-preload.sh and scripts/fault-preload.sh.

Two engines in this process (P2P handshake on one device) talk to each
other. Each round: fill BLOCKS x BLOCK bytes of engine A's buffer with a
fresh random pattern, batch-write them to B, clear them in A, batch-read
them back from B, and compare every block. The last line printed is one
JSON object:

  {"rounds": R, "blocks_verified": V, "mismatched": M, "failed": F,
   "stranded": S, "seconds": T}

failed: batches whose status was an error; stranded: batches that did not
finish within --batch-timeout (counted, never waited on again: a fault
run's driver must not hang). Exit code 0 only when every round verified.

  python3 mooncake_rw.py [--rounds N | --seconds S] [--blocks 64]
      [--block 65536] [--device rxe0] [--host 127.0.0.1]
      [--expect-failures] [--batch-timeout 20]
"""

import argparse
import ctypes
import json
import os
import random
import sys
import threading
import time

from mooncake.engine import TransferEngine


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seconds", type=float, default=0.0,
                   help="run for this long instead of --rounds")
    p.add_argument("--blocks", type=int, default=64)
    p.add_argument("--block", type=int, default=64 << 10)
    p.add_argument("--device", default=os.environ.get("MC_RDMA_DEVICE", "rxe0"))
    p.add_argument("--host", default=os.environ.get("RXE_VM_SELF_IP", "127.0.0.1"))
    p.add_argument("--expect-failures", action="store_true",
                   help="a fault run: count failed / stranded batches and go on")
    p.add_argument("--batch-timeout", type=float, default=20.0)
    a = p.parse_args()

    size = a.blocks * a.block
    eng_a, eng_b = TransferEngine(), TransferEngine()
    for e in (eng_a, eng_b):
        rc = e.initialize(a.host, "P2PHANDSHAKE", "rdma", a.device)
        if rc != 0:
            raise SystemExit(f"initialize failed: {rc}")
    peer = f"{a.host}:{eng_b.get_rpc_port()}"
    buf_a = ctypes.create_string_buffer(size)
    buf_b = ctypes.create_string_buffer(size)
    addr_a, addr_b = ctypes.addressof(buf_a), ctypes.addressof(buf_b)
    if eng_a.register_memory(addr_a, size) != 0 or eng_b.register_memory(addr_b, size) != 0:
        raise SystemExit("register_memory failed")

    srcs = [addr_a + i * a.block for i in range(a.blocks)]
    dsts = [addr_b + i * a.block for i in range(a.blocks)]
    lens = [a.block] * a.blocks
    rng = random.Random(29)
    stats = {"rounds": 0, "blocks_verified": 0, "mismatched": 0, "failed": 0, "stranded": 0}

    def batch(op):
        """One batch; True when it completed successfully. A batch that
        does not finish in time is stranded (its thread is left behind)."""
        res = {}

        def run():
            fn = eng_a.batch_transfer_sync_write if op == "w" else eng_a.batch_transfer_sync_read
            res["rc"] = fn(peer, srcs, dsts, lens)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(a.batch_timeout)
        if t.is_alive():
            stats["stranded"] += 1
            return False
        if res.get("rc", -1) != 0:
            stats["failed"] += 1
            return False
        return True

    t0 = time.monotonic()
    r = 0
    while (a.seconds > 0 and time.monotonic() - t0 < a.seconds) or (a.seconds <= 0 and r < a.rounds):
        r += 1
        pattern = rng.randbytes(size)
        ctypes.memmove(addr_a, pattern, size)
        ok = batch("w")
        ctypes.memset(addr_a, 0, size)
        ok = batch("r") and ok
        if ok:
            got = ctypes.string_at(addr_a, size)
            for i in range(a.blocks):
                lo = i * a.block
                if got[lo:lo + a.block] == pattern[lo:lo + a.block]:
                    stats["blocks_verified"] += 1
                else:
                    stats["mismatched"] += 1
        stats["rounds"] = r
        if not ok and not a.expect_failures:
            break
        if stats["stranded"] and a.expect_failures and stats["stranded"] >= 3:
            break  # the peer is gone for good: stop feeding it
    stats["seconds"] = round(time.monotonic() - t0, 2)
    print(json.dumps(stats), flush=True)
    clean = stats["mismatched"] == 0 and stats["failed"] == 0 and stats["stranded"] == 0
    if not a.expect_failures:
        eng_a.unregister_memory(addr_a)
        eng_b.unregister_memory(addr_b)
    # A stranded batch's thread still holds the engine: leave without
    # running Python's teardown of it.
    sys.stdout.flush()
    if stats["stranded"]:
        os._exit(0 if a.expect_failures else 1)
    sys.exit(0 if (clean and stats["blocks_verified"] > 0) or a.expect_failures else 1)


if __name__ == "__main__":
    main()
