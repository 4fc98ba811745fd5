#!/usr/bin/env python3
"""bench-signal (run inside a Soft-RoCE guest by scripts/bench-signal.sh):
4 KiB message rate of `railyard bench` with every work request signaled
(MC_SIGNAL_INTERVAL=1) against selective signaling (MC_SIGNAL_INTERVAL=K),
beside ib_write_bw / ib_read_bw at the same QP count, in one guest run,
arms alternating (the order rotates per round). A benchmark, not a test.

Railyard arms use Mooncake's bench shape (batches of 128, one in flight per
thread, 64 MiB per side), CC off (MC_ADAPTIVE_CC_MODE=off). Prints one row
per (op, threads, arm) with the median Mops over rounds and the median of
per-round ratios against k=1 and against perftest; writes the raw records
as JSON lines."""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_arm  # noqa: E402

RY_PORT = 18515
PT_PORT = 18516


def arm(a, op, threads, name, k, logs):
    """One arm: (Mops, the engine's counts) or (None, {})."""
    if name == "perftest":
        res = bench_arm.perftest(op, a.size, a.secs, a.device, a.qps, PT_PORT, logs)
        return (res["mops"], {}) if res else (None, {})
    env = {"MC_ADAPTIVE_CC_MODE": "off", "MC_SIGNAL_INTERVAL": str(k)}
    res, doc = bench_arm.railyard(a.railyard, env, op, a.size, a.secs, threads, a.device, a.qps,
                                  RY_PORT, logs)
    if not res:
        return None, {}
    # The engine's own counts: completions (CQEs polled) below posts
    # shows the interval took effect.
    return res["mops"], {x: doc.get(x) for x in ("posts", "doorbells", "completions")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--railyard", required=True)
    p.add_argument("--device", default="rxe0")
    p.add_argument("--ks", default="1,16")
    p.add_argument("--ops", default="write,read")
    p.add_argument("--threads", default="1,8")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--secs", type=int, default=3)
    p.add_argument("--qps", type=int, default=2)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    ks = [int(x) for x in a.ks.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    raw = open(os.path.join(a.out, "raw.jsonl"), "w")
    recs = []
    for r in range(a.rounds):
        for op in a.ops.split(","):
            arms = [("perftest", 0, 0)] + [(f"k{k}", t, k) for t in threads for k in ks]
            s = r % len(arms)
            for name, t, k in arms[s:] + arms[:s]:
                logs = os.path.join(a.out, "logs", f"r{r + 1}-{op}-t{t}-{name}")
                mops, extra = arm(a, op, t, name, k, logs)
                rec = {"round": r + 1, "op": op, "threads": t, "arm": name, "k": k, "mops": mops, **extra}
                print(json.dumps(rec), flush=True)
                raw.write(json.dumps(rec) + "\n")
                recs.append(rec)
    raw.close()

    def get(r, op, t, name):
        for x in recs:
            if (x["round"], x["op"], x["threads"], x["arm"]) == (r, op, t, name):
                return x["mops"]
        return None

    def med(v):
        v = [x for x in v if x is not None]
        return statistics.median(v) if v else None

    def fmt(x, spec):
        return format(x, spec) if x is not None else "n/a"

    rounds = range(1, a.rounds + 1)
    print(f"\nbench-signal: {a.size} B, {a.qps} QPs, {a.secs} s per arm, {a.rounds} round(s); "
          "median Mops and median of per-round ratios")
    print(f"{'op':6} {'threads':>7} {'arm':>9} {'Mops':>8} {'vs k1':>7} {'vs perftest':>11}")
    for op in a.ops.split(","):
        pt = med(get(r, op, 0, "perftest") for r in rounds)
        print(f"{op:6} {'-':>7} {'perftest':>9} {fmt(pt, '8.4f')} {'':>7} {'':>11}")
        for t in threads:
            for k in ks:
                name = f"k{k}"
                m = med(get(r, op, t, name) for r in rounds)
                vs1 = med((get(r, op, t, name) / get(r, op, t, "k1"))
                          if get(r, op, t, name) and get(r, op, t, "k1") else None for r in rounds)
                vspt = med((get(r, op, t, name) / get(r, op, 0, "perftest"))
                           if get(r, op, t, name) and get(r, op, 0, "perftest") else None for r in rounds)
                print(f"{op:6} {t:>7} {name:>9} {fmt(m, '8.4f')} {fmt(vs1, '7.2f')} {fmt(vspt, '11.2f')}")


if __name__ == "__main__":
    main()
