#!/usr/bin/env python3
"""bench-chains (run inside a Soft-RoCE guest by scripts/bench-chains.sh):
two `railyard` binaries (a baseline, e.g. main's, and a candidate) side by
side with ib_write_bw / ib_read_bw -q <QPs>, in one guest run, arms
alternating (the order rotates per round and point). A benchmark, not a test.

Railyard arms use Mooncake's bench shape (batches of 128, one in flight per
thread, 64 MiB per side), CC off, in each worker model of --models:
`shared` (the default, MC_WORKERS_PER_CTX=2), `w1` (MC_WORKERS_PER_CTX=1),
`dedicated` (MC_RDMA_DEDICATED_POLLER=1). One row per (op, size, threads,
model, binary): median MiB/s and Mops over rounds, posts per doorbell, and
the medians of per-round ratios candidate/baseline and vs perftest."""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_arm  # noqa: E402

RY_PORT = 18525
PT_PORT = 18526
MODELS = {
    "shared": {"MC_WORKERS_PER_CTX": "2", "MC_RDMA_DEDICATED_POLLER": "0"},
    "w1": {"MC_WORKERS_PER_CTX": "1", "MC_RDMA_DEDICATED_POLLER": "0"},
    "dedicated": {"MC_WORKERS_PER_CTX": "2", "MC_RDMA_DEDICATED_POLLER": "1"},
}


def arm(a, op, size, threads, binary, model, logs):
    """One arm: (result dict, posts per doorbell) or (None, None)."""
    if binary == "perftest":
        return bench_arm.perftest(op, size, a.secs, a.device, a.qps, PT_PORT, logs), None
    exe = a.base if binary == "base" else a.new
    env = {"MC_ADAPTIVE_CC_MODE": "off", **MODELS[model]}
    res, doc = bench_arm.railyard(exe, env, op, size, a.secs, threads, a.device, a.qps, RY_PORT, logs)
    if not res:
        return None, None
    return res, (doc["posts"] / doc["doorbells"] if doc.get("doorbells") else None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True, help="baseline railyard binary")
    p.add_argument("--new", required=True, help="candidate railyard binary")
    p.add_argument("--device", default="rxe0")
    p.add_argument("--ops", default="write,read")
    p.add_argument("--sizes", default="4096,65536")
    p.add_argument("--threads", default="1,8")
    p.add_argument("--models", default="shared,dedicated")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--secs", type=int, default=3)
    p.add_argument("--qps", type=int, default=2)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    ops, models = a.ops.split(","), a.models.split(",")
    sizes = [int(x) for x in a.sizes.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    raw = open(os.path.join(a.out, "raw.jsonl"), "w")
    recs = {}
    for r in range(1, a.rounds + 1):
        for op in ops:
            for size in sizes:
                arms = [("perftest", 0, "-")] + [(b, t, m) for t in threads for m in models
                                                 for b in ("base", "new")]
                s = (r + sizes.index(size)) % len(arms)
                for b, t, m in arms[s:] + arms[:s]:
                    logs = os.path.join(a.out, "logs", f"r{r}-{op}-{size}-t{t}-{m}-{b}")
                    res, ppd = arm(a, op, size, t, b, m, logs)
                    rec = {"round": r, "op": op, "size": size, "threads": t, "model": m, "bin": b,
                           "mib_per_s": res and res["mib_per_s"], "mops": res and res["mops"],
                           "posts_per_doorbell": ppd}
                    print(json.dumps(rec), flush=True)
                    raw.write(json.dumps(rec) + "\n")
                    recs[(r, op, size, t, m, b)] = rec
    raw.close()

    def med(v):
        v = [x for x in v if x is not None]
        return statistics.median(v) if v else None

    def f(x, spec):
        return format(x, spec) if x is not None else "n/a"

    def val(r, op, size, t, m, b, k="mops"):
        x = recs.get((r, op, size, t, m, b))
        return x and x[k]

    def ratio(x, y):
        return x / y if x and y else None

    rounds = range(1, a.rounds + 1)
    print(f"\nbench-chains: {a.qps} QPs, {a.secs} s per arm, {a.rounds} round(s); medians over rounds, "
          "ratios = median of per-round ratios")
    print(f"{'op':5} {'size':>6} {'thr':>3} {'model':>9} {'bin':>8} {'MiB/s':>8} {'Mops':>7} "
          f"{'post/db':>7} {'new/base':>8} {'vs pt':>6}")
    for op in ops:
        for size in sizes:
            pt = [val(r, op, size, 0, "-", "perftest") for r in rounds]
            print(f"{op:5} {size:>6} {'-':>3} {'-':>9} {'perftest':>8} "
                  f"{f(med(val(r, op, size, 0, '-', 'perftest', 'mib_per_s') for r in rounds), '8.1f')} "
                  f"{f(med(pt), '7.4f')}")
            for t in threads:
                for m in models:
                    for b in ("base", "new"):
                        mops = [val(r, op, size, t, m, b) for r in rounds]
                        nb = med(ratio(val(r, op, size, t, m, "new"), val(r, op, size, t, m, "base"))
                                 for r in rounds) if b == "new" else None
                        vpt = med(ratio(x, y) for x, y in zip(mops, pt))
                        print(f"{op:5} {size:>6} {t:>3} {m:>9} {b:>8} "
                              f"{f(med(val(r, op, size, t, m, b, 'mib_per_s') for r in rounds), '8.1f')} "
                              f"{f(med(mops), '7.4f')} "
                              f"{f(med(val(r, op, size, t, m, b, 'posts_per_doorbell') for r in rounds), '7.1f')} "
                              f"{f(nb, '8.2f')} {f(vpt, '6.2f')}")


if __name__ == "__main__":
    main()
