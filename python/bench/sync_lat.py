"""One transfer at a time through a TransferEngine's ``transfer_sync_write``
/ ``transfer_sync_read``, each call timed: railyard's or Mooncake's engine
(only the import differs). The latency arm of scripts/bench-lat.sh.

    python sync_lat.py railyard|mooncake target --host IP [--device rxe0] [--buffer N]
        registers N bytes, prints "listening on IP:PORT" and serves until
        SIGTERM or stdin closes.
    python sync_lat.py railyard|mooncake initiator --host IP --segment IP:PORT
        --op write|read --size BYTES --iters N [--warmup 50] [--device rxe0]
        prints one JSON line: {"iters", "min", "mean", "p50", "p99", "p99_9",
        "max"} in µs (nearest rank, as railyard bench's HDR histogram).
"""

import argparse
import ctypes
import json
import math
import signal
import sys
import time


def engine(kind, host, device):
    if kind == "railyard":
        from railyard import TransferEngine
    else:
        from mooncake.engine import TransferEngine
    e = TransferEngine()
    rc = e.initialize(host, "P2PHANDSHAKE", "rdma", device)
    if rc != 0:
        sys.exit(f"sync_lat: initialize({host}, {device}) returned {rc}")
    return e


def nearest_rank(sorted_us, q):
    """The nearest-rank q-quantile (0 < q <= 1) of an ascending list."""
    k = max(1, math.ceil(q * len(sorted_us)))
    return sorted_us[k - 1]


def target(a):
    e = engine(a.kind, a.host, a.device)
    keep = ctypes.create_string_buffer(a.buffer)
    if e.register_memory(ctypes.addressof(keep), a.buffer) != 0:
        sys.exit("sync_lat: target register_memory failed")
    print(f"listening on {a.host}:{e.get_rpc_port()}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        sys.stdin.read()  # bench_peers's Proc gives /dev/null: EOF at once
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        pass
    e.unregister_memory(ctypes.addressof(keep))


def initiator(a):
    e = engine(a.kind, a.host, a.device)
    keep = ctypes.create_string_buffer(a.size)
    local = ctypes.addressof(keep)
    if e.register_memory(local, a.size) != 0:
        sys.exit("sync_lat: initiator register_memory failed")
    remote = e.get_first_buffer_address(a.segment)
    if not remote:
        sys.exit(f"sync_lat: no buffer at {a.segment}")
    call = e.transfer_sync_write if a.op == "write" else e.transfer_sync_read
    for _ in range(a.warmup):
        if call(a.segment, local, remote, a.size) != 0:
            sys.exit("sync_lat: a warm-up transfer failed")
    ns = []
    clock = time.perf_counter_ns
    for _ in range(a.iters):
        t0 = clock()
        rc = call(a.segment, local, remote, a.size)
        ns.append(clock() - t0)
        if rc != 0:
            sys.exit(f"sync_lat: transfer {len(ns)} returned {rc}")
    us = sorted(x / 1e3 for x in ns)
    print(json.dumps({"iters": len(us), "min": us[0], "mean": sum(us) / len(us),
                      "p50": nearest_rank(us, 0.5), "p99": nearest_rank(us, 0.99),
                      "p99_9": nearest_rank(us, 0.999), "max": us[-1]}), flush=True)
    e.unregister_memory(local)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["railyard", "mooncake"])
    p.add_argument("role", choices=["target", "initiator"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--device", default="rxe0")
    p.add_argument("--buffer", type=int, default=16 << 20)
    p.add_argument("--segment")
    p.add_argument("--op", choices=["write", "read"], default="write")
    p.add_argument("--size", type=int, default=8)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=50)
    a = p.parse_args()
    (target if a.role == "target" else initiator)(a)


if __name__ == "__main__":
    main()
