#!/usr/bin/env python3
"""bench_preload: the in-guest runner and the report of scripts/bench-preload.sh.

Mooncake TE's own transfer_engine_bench (the PyPI wheel, unmodified) as an
initiator, stock and under railyard's verbs preload with CC off and with CC
enforce, against one stock target on the same Soft-RoCE device; and
perftest's ib_write_bw / ib_read_bw with and without the preload. Arms
alternate inside every round (round r starts at arm r mod 3), so each
ratio compares runs minutes apart, not hours. A benchmark, not a test.

  bench_preload.py run    --raw F [options]   in the guest: one JSON record per run
  bench_preload.py report --raw F             the table and the goals
  bench_preload.py selftest                   the report's arithmetic

Goals (RFC 4162's gates, measured inside an engine we did not write):
preload-off >= 0.99x stock and preload-enforce >= 0.97x stock, per point,
median of the per-round ratios. CPU s/GiB: user + system seconds over the
process's whole life (every thread, set-up included; rxe does the NIC's
work in the posting process's system calls) per GiB moved: Mooncake's
initiator (the target is the same stock process for every arm), perftest's
client and server (both run the arm).
Only the standard library (the guest runs the host's python3).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ARMS = ["stock", "preload-off", "preload-enforce"]
GOALS = {"preload-off": 0.99, "preload-enforce": 0.97}


def arm_env(arm, preload):
    if arm == "stock":
        return {}
    return {"LD_PRELOAD": preload,
            "MC_ADAPTIVE_CC_MODE": arm.split("-", 1)[1]}


def timed(cmd, env, timeout):
    """Runs cmd; returns (exit code, output, wall seconds). Its CPU time is
    read by the caller as the growth of RUSAGE_CHILDREN (every waited-for
    child's threads)."""
    e = dict(os.environ)
    e.update(env)
    t = time.monotonic()
    p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return p.returncode, out, time.monotonic() - t


def child_cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(a):
    ip = os.environ.get("RXE_VM_SELF_IP", "10.77.1.1")
    common = ["--metadata_server=P2PHANDSHAKE", "--protocol=rdma", "--device_name=rxe0",
              f"--local_server_name={ip}", "--buffer_size=67108864"]
    env0 = {"MC_GID_INDEX": "1", "GLOG_logtostderr": "1", "MC_NUM_QP_PER_EP": str(a.qps)}
    os.environ.update(env0)
    raw = open(a.raw, "a")
    cases = [(op, int(t), int(s)) for op in a.ops for t in a.threads for s in a.sizes]
    for r in range(a.rounds):
        target = subprocess.Popen([a.bench, "--mode=target"] + common, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        seg = None
        t0 = time.monotonic()
        lines = []
        while time.monotonic() - t0 < 30 and seg is None:
            line = target.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on (\S+:\d+)", line)
            if m:
                seg = m.group(1)
        if seg is None:
            print("the target did not report its listener:", "".join(lines[-20:]), file=sys.stderr)
            target.kill()
            sys.exit(1)
        # Drain the target's output so it never blocks on a full pipe.
        import threading
        threading.Thread(target=lambda: [None for _ in target.stdout], daemon=True).start()
        time.sleep(1)
        for op, threads, size in cases:
            order = ARMS[r % 3:] + ARMS[:r % 3]
            for arm in order:
                cmd = [a.bench, "--mode=initiator"] + common + [
                    f"--segment_id={seg}", f"--operation={op}", f"--threads={threads}",
                    f"--batch_size={a.batch}", f"--block_size={size}", f"--duration={a.secs}"]
                c0 = child_cpu()
                rc, out, wall = timed(cmd, arm_env(arm, a.preload), a.secs + 90)
                cpu = child_cpu() - c0
                m = re.search(r"Test completed: duration ([\d.]+), batch count (\d+)", out)
                rec = {"round": r, "kind": "mooncake", "op": op, "threads": threads, "size": size,
                       "arm": arm, "rc": rc, "cpu_s": cpu, "wall_s": wall}
                if m and rc == 0:
                    secs, batches = float(m.group(1)), int(m.group(2))
                    moved = batches * a.batch * size
                    rec.update(bytes=moved, mib_per_s=moved / secs / (1 << 20))
                else:
                    rec["error"] = out[-2000:]
                raw.write(json.dumps(rec) + "\n")
                raw.flush()
                print(f"round {r} {op} {size} t{threads} {arm}: "
                      f"{rec.get('mib_per_s', 0):.1f} MiB/s cpu {cpu:.2f}s", flush=True)
        target.kill()
        target.wait()
        if not a.no_perftest:
            for op in a.ops:
                for size in a.sizes:
                    order = ["stock", "preload-off"] if r % 2 == 0 else ["preload-off", "stock"]
                    for arm in order:
                        env = arm_env(arm, a.preload)
                        tool = f"ib_{op}_bw"
                        args = ["-d", "rxe0", "-x", "1", "-q", str(a.qps), "-s", str(size),
                                "-D", str(a.secs), "-p", "18630", "-F"]
                        e = dict(os.environ)
                        e.update(env)
                        srv = subprocess.Popen([tool] + args, env=e, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
                        time.sleep(1.5)
                        c0 = child_cpu()
                        rc, out, wall = timed([tool] + args + [ip], env, a.secs + 60)
                        try:
                            srv.wait(timeout=30)
                        except subprocess.TimeoutExpired:
                            srv.kill()
                            srv.wait()
                            rc = rc or -1
                        cpu = child_cpu() - c0
                        rec = {"round": r, "kind": "perftest", "op": op, "threads": 0, "size": size,
                               "arm": arm, "rc": rc, "cpu_s": cpu}
                        for line in out.splitlines():
                            f = line.split()
                            if len(f) >= 5 and f[0] == str(size):
                                try:
                                    rec["mib_per_s"] = float(f[3])
                                    rec["bytes"] = int(float(f[3]) * (1 << 20) * a.secs)
                                except ValueError:
                                    pass
                        if "mib_per_s" not in rec:
                            rec["error"] = out[-2000:]
                        raw.write(json.dumps(rec) + "\n")
                        raw.flush()
                        print(f"round {r} perftest {op} {size} {arm}: {rec.get('mib_per_s', 0):.1f} MiB/s",
                              flush=True)


def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def report(recs):
    """The table (list of rows) and the goal lines."""
    points = sorted({(r["kind"], r["op"], r["size"], r["threads"]) for r in recs},
                    key=lambda p: (p[0], p[1], -p[2], p[3]))
    rows, goals = [], []
    for kind, op, size, thr in points:
        mine = [r for r in recs if (r["kind"], r["op"], r["size"], r["threads"]) == (kind, op, size, thr)]
        base = {r["round"]: r for r in mine if r["arm"] == "stock" and "mib_per_s" in r}
        for arm in ARMS:
            runs = [r for r in mine if r["arm"] == arm]
            ok = [r for r in runs if "mib_per_s" in r]
            if not runs:
                continue
            ratios = [r["mib_per_s"] / base[r["round"]]["mib_per_s"] for r in ok
                      if r["round"] in base and base[r["round"]]["mib_per_s"] > 0]
            gib = sum(r.get("bytes", 0) for r in ok) / (1 << 30)
            cpu = sum(r["cpu_s"] for r in ok) / gib if gib > 0 else None
            row = {"kind": kind, "op": op, "size": size, "threads": thr, "arm": arm,
                   "mib_per_s": statistics.median([r["mib_per_s"] for r in ok]) if ok else None,
                   "x_stock": statistics.median(ratios) if ratios and arm != "stock" else None,
                   "cpu_s_per_gib": cpu, "rounds": len(ok), "failed": len(runs) - len(ok)}
            rows.append(row)
            if kind == "mooncake" and arm in GOALS and row["x_stock"] is not None:
                met = row["x_stock"] >= GOALS[arm]
                goals.append((met, f"{arm} / stock = {row['x_stock']:.3f} "
                                   f"{'>=' if met else '<'} {GOALS[arm]} ({op} {size} threads {thr})"))
    return rows, goals


def show(rows, goals):
    print(f"{'':9}{'op':6}{'size':>7}{'thr':>4}  {'arm':17}{'MiB/s':>9}{'x stock':>9}{'CPU s/GiB':>11}{'rounds':>8}")
    for r in rows:
        size = f"{r['size'] >> 10}K" if r["size"] % 1024 == 0 else str(r["size"])
        thr = str(r["threads"]) if r["kind"] == "mooncake" else "-"
        mib = f"{r['mib_per_s']:.2f}" if r["mib_per_s"] is not None else "failed"
        x = f"{r['x_stock']:.3f}" if r["x_stock"] is not None else "-"
        cpu = f"{r['cpu_s_per_gib']:.2f}" if r["cpu_s_per_gib"] is not None else "-"
        print(f"{r['kind']:9}{r['op']:6}{size:>7}{thr:>4}  {r['arm']:17}{mib:>9}{x:>9}{cpu:>11}"
              f"{r['rounds']:>5}{'' if not r['failed'] else ' (' + str(r['failed']) + ' failed)'}")
    met = sum(1 for m, _ in goals if m)
    print(f"\ngoals (preload-off >= 0.99x stock, preload-enforce >= 0.97x stock; median of per-round "
          f"ratios): {met}/{len(goals)} met")
    for m, line in goals:
        if not m:
            print("  short:", line)


def selftest():
    recs = []
    for r in range(3):
        for arm, v in [("stock", 100.0), ("preload-off", 99.5 + r), ("preload-enforce", 90.0)]:
            recs.append({"round": r, "kind": "mooncake", "op": "write", "size": 65536, "threads": 1,
                         "arm": arm, "rc": 0, "cpu_s": 1.0, "bytes": 1 << 30, "mib_per_s": v})
    rows, goals = report(recs)
    off = next(x for x in rows if x["arm"] == "preload-off")
    assert abs(off["x_stock"] - 1.005) < 1e-9, off
    assert abs(off["cpu_s_per_gib"] - 1.0) < 1e-9, off
    enf = next(x for x in rows if x["arm"] == "preload-enforce")
    assert abs(enf["x_stock"] - 0.9) < 1e-9
    assert [m for m, _ in goals] == [True, False], goals
    print("bench_preload selftest: ok")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--raw", required=True)
    r.add_argument("--bench", required=True, help="the wheel's transfer_engine_bench")
    r.add_argument("--preload", required=True, help="librailyard_preload.so")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--secs", type=int, default=5)
    r.add_argument("--ops", type=lambda s: s.split(","), default=["write", "read"])
    r.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[65536, 4096])
    r.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    r.add_argument("--batch", type=int, default=128)
    r.add_argument("--qps", type=int, default=2)
    r.add_argument("--no-perftest", action="store_true")
    rep = sub.add_parser("report")
    rep.add_argument("--raw", required=True)
    rep.add_argument("--json")
    sub.add_parser("selftest")
    a = p.parse_args()
    if a.cmd == "run":
        run(a)
    elif a.cmd == "report":
        rows, goals = report(load(a.raw))
        show(rows, goals)
        if a.json:
            json.dump({"rows": rows, "goals": [{"met": m, "what": w} for m, w in goals]},
                      open(a.json, "w"), indent=1)
    else:
        selftest()


if __name__ == "__main__":
    main()
