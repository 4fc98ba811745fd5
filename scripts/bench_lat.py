#!/usr/bin/env python3
"""bench_lat: the in-guest runner and the report of scripts/bench-lat.sh
(issue #34 item 1): one transfer in flight, each one timed, for

  perftest          ib_write_lat / ib_read_lat (-n ITERS, -F)
  railyard-off      `railyard bench --lat` (the submitter sleeps in
                    wait_batch), MC_ADAPTIVE_CC_MODE=off
  railyard-enforce  ... MC_ADAPTIVE_CC_MODE=enforce
  railyard-off-poll ... CC off, --wait poll (busy-polls; only with --arms)
  railyard-py       railyard's Python TransferEngine.transfer_sync_{write,read}
  mooncake-py       Mooncake's (PyPI wheel) TransferEngine.transfer_sync_{write,read}

per op (write, read) x size, alternating arms inside each round (the order
rotates per round). A benchmark, not a test.

  bench_lat.py run    [options] --raw F   in the guest; one JSON record per arm
  bench_lat.py agent  --listen IP:PORT    the target side for --two
  bench_lat.py report --raw F [--json OUT]
  bench_lat.py selftest

What the figures mean. railyard and the Python engines time submit until
the initiator sees the completion: for a READ the data's round trip, for a
WRITE the request and the responder's ACK, also a round trip. ib_read_lat
times the same READ round trip. ib_write_lat is a ping-pong (each side
WRITEs, the other polls memory for it) and reports half the ping-pong, a
one-way figure: the report shows it as measured and uses 2x it as the
round-trip reference for the WRITE ratios (say so wherever it is quoted).
CPU: user + system seconds of initiator and target over their whole lives
(wait4), per timed transfer (setup and warm-up included, the same way for
every arm).

Only the standard library: the guest runs the host's python3.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_peers as bp  # noqa: E402  (Proc, targets, the --two agent)

ARMS = ["perftest", "railyard-off", "railyard-enforce", "railyard-py", "mooncake-py"]
EXTRA_ARMS = ["railyard-off-poll"]
LABEL = {
    "perftest": "perftest ib_{op}_lat",
    "railyard-off": "railyard bench --lat, CC off",
    "railyard-enforce": "railyard bench --lat, CC enforce",
    "railyard-off-poll": "railyard bench --lat --wait poll, CC off",
    "railyard-py": "railyard Python transfer_sync_{op}",
    "mooncake-py": "Mooncake Python transfer_sync_{op}",
}
PY_PORT_HINT = 18700


def fmt_size(n):
    return bp.fmt_size(n)


def plan(a):
    arms = [x for x in a.arms.split(",") if x]
    for x in arms:
        if x not in ARMS + EXTRA_ARMS:
            raise SystemExit(f"bench_lat: unknown arm {x!r} (known: {', '.join(ARMS + EXTRA_ARMS)})")
    ops = a.ops.split(",")
    sizes = [bp.parse_size(s) for s in a.sizes.split(",")]
    rounds = []
    k = 0
    for r in range(1, a.rounds + 1):
        rnd = []
        for op in ops:
            for size in sizes:
                rot = k % len(arms)
                k += 1
                for arm in arms[rot:] + arms[:rot]:
                    rnd.append({"round": r, "op": op, "size": size, "arm": arm})
        rounds.append(rnd)
    return rounds


def arm_cmds(a, x, tip):
    op, size, dev, gid, n = x["op"], x["size"], a.device, str(a.gid_index), str(a.iters)
    if x["arm"] == "perftest":
        args = [f"ib_{op}_lat", "-d", dev, "-x", gid, "-s", str(size), "-n", n, "-p", str(bp.PT_PORT), "-F"]
        target = {"argv": args, "env": {}, "ready": {"kind": "listen", "port": bp.PT_PORT}}
        return target, args + [tip], {}, parse_perftest(size), False
    if x["arm"].startswith("railyard-") and not x["arm"].endswith("-py"):
        mode = x["arm"].split("-")[1]
        wait = "poll" if x["arm"].endswith("-poll") else "block"
        env = {"MC_ADAPTIVE_CC_MODE": mode}
        target = {"argv": [a.railyard, "bench", "-d", dev, "-x", gid, "--listen", tip, "-p", str(bp.RY_PORT),
                           "--quiet"], "env": env, "ready": {"kind": "listen", "port": bp.RY_PORT}}
        init = [a.railyard, "bench", "-d", dev, "-x", gid, "--lat", "--wait", wait, "-s", str(size), "-n", n, "--op", op,
                "--buffer_size", str(max(size, 1 << 20)), "--json", "--quiet", f"{tip}:{bp.RY_PORT}"]
        return target, init, env, parse_railyard, False
    kind = "railyard" if x["arm"] == "railyard-py" else "mooncake"
    env = {"MC_GID_INDEX": gid, "GLOG_logtostderr": "1"}
    script = os.path.join(a.checkout, "python", "bench", "sync_lat.py")
    buf = max(size, 1 << 20)
    target = {"argv": [a.python, script, kind, "target", "--host", tip, "--device", dev, "--buffer", str(buf)],
              "env": env, "ready": {"kind": "mooncake", "pinned_kib": buf >> 10}}
    init = [a.python, script, kind, "initiator", "--host", a.self_ip, "--device", dev, "--segment", "{SEGMENT}",
            "--op", op, "--size", str(size), "--iters", n]
    return target, init, env, parse_py, True


def parse_perftest(size):
    def parse(text):
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 9 and f[0] == str(size):
                try:
                    v = [float(x) for x in f[1:9]]
                except ValueError:
                    continue
                iters, tmin, tmax, typ, avg, _sd, p99, p999 = v
                return {"iters": int(iters), "min": tmin, "max": tmax, "p50": typ, "mean": avg,
                        "p99": p99, "p99_9": p999}
        return None
    return parse


def parse_railyard(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if not doc.get("results") or not doc.get("latency_mode"):
                return None
            r = doc["results"][0]
            lat = r["batch_latency_us"]
            return {"iters": r["iterations"], "min": lat["min"], "max": lat["max"], "p50": lat["p50"],
                    "mean": lat["mean"], "p99": lat["p99"], "p99_9": lat["p99_9"], "wait": doc.get("wait"),
                    "cc_mode": doc.get("cc_mode")}
    return None


def parse_py(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def run_arm(a, targets, x, tip):
    spec, init, env, parse, sigterm = arm_cmds(a, x, tip)
    name = f"r{x['round']}-{x['op']}-{fmt_size(x['size'])}-{x['arm']}"
    logs = os.path.join(a.logs, name)
    spec["log"] = logs + "-target.log"
    rec = dict(x)
    res, p, t, n, error = bp.attempt(targets, spec, init, env, logs, sigterm, a.timeout, parse,
                                     settle=0.2 if x["arm"] == "perftest" else 0.0)
    if error:
        rec["error"] = error
        return rec
    rec.update(res)
    cpu = p.cpu[0] + p.cpu[1] + t["cpu_user_s"] + t["cpu_sys_s"]
    rec["cpu_initiator_s"] = p.cpu[0] + p.cpu[1]
    rec["cpu_target_s"] = t["cpu_user_s"] + t["cpu_sys_s"]
    rec["cpu_us_per_transfer"] = cpu * 1e6 / res["iters"] if res["iters"] else None
    rec["attempts"] = n
    return rec


def cmd_run(a):
    def label(x):
        return f"{x['op']:<5} {fmt_size(x['size']):>5} {x['arm']:<17}"

    def result(rec):
        return (f"p50 {rec['p50']:9.2f} us  p99 {rec['p99']:9.2f} us  "
                f"CPU {rec['cpu_us_per_transfer']:8.1f} us/transfer")

    return bp.run_rounds(a, plan(a), run_arm, label, result, "bench-lat")


med = bp.med


def analyse(records):
    """Rows per (op, size, arm): medians over rounds of P50, P99, P99.9,
    CPU µs/transfer, and the median of per-round ratios of P50 and P99
    against perftest's round-trip reference (2x ib_write_lat for WRITE)."""
    ok = [r for r in records if "arm" in r and "error" not in r]
    by = {}
    for r in ok:
        by.setdefault((r["op"], r["size"], r["round"]), {})[r["arm"]] = r
    rows = []
    keys = sorted({(r["op"], r["size"], r["arm"]) for r in ok},
                  key=lambda k: (k[0] != "write", k[1], (ARMS + EXTRA_ARMS).index(k[2])))
    for op, size, arm in keys:
        mine = [r for r in ok if (r["op"], r["size"], r["arm"]) == (op, size, arm)]
        row = {"op": op, "size": size, "arm": arm, "rounds": len(mine)}
        for f in ("p50", "p99", "p99_9", "max", "cpu_us_per_transfer"):
            row[f] = med([r.get(f) for r in mine])
        ratios = {"p50": [], "p99": []}
        for r in mine:
            pt = by.get((op, size, r["round"]), {}).get("perftest")
            if not pt:
                continue
            k = 2.0 if op == "write" else 1.0
            for f in ratios:
                if pt.get(f):
                    ratios[f].append(r[f] / (k * pt[f]))
        row["p50_vs_perftest_rt"] = med(ratios["p50"])
        row["p99_vs_perftest_rt"] = med(ratios["p99"])
        rows.append(row)
    return rows


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def table(rows, mode):
    out = [f"bench-lat: {mode}; medians over rounds; µs",
           "ratios: per-round arm / perftest round-trip reference (READ: ib_read_lat; "
           "WRITE: 2 x ib_write_lat, which reports half a ping-pong), median over rounds",
           f"{'op':<6}{'size':>6}  {'arm':<36}{'P50':>9}{'P99':>9}{'P99.9':>9}{'max':>9}"
           f"{'CPU us/xfer':>12}{'P50/pt':>8}{'P99/pt':>8}{'rounds':>7}"]
    for r in rows:
        label = LABEL[r["arm"]].format(op=r["op"])
        out.append(f"{r['op']:<6}{fmt_size(r['size']):>6}  {label:<36}{fmt(r['p50'], '.1f'):>9}"
                   f"{fmt(r['p99'], '.1f'):>9}{fmt(r['p99_9'], '.1f'):>9}{fmt(r['max'], '.1f'):>9}"
                   f"{fmt(r['cpu_us_per_transfer'], '.1f'):>12}{fmt(r['p50_vs_perftest_rt'], '.2f'):>8}"
                   f"{fmt(r['p99_vs_perftest_rt'], '.2f'):>8}{r['rounds']:>7}")
    return "\n".join(out) + "\n"


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cmd_report(a):
    records = load(a.raw)
    cfg = next((r["config"] for r in records if "config" in r), {})
    mode = "two guests (rxe0 across the qemu socket link)" if cfg.get("agent") else "one guest (rxe0 loopback)"
    rows = analyse(records)
    text = table(rows, mode)
    failed = [r for r in records if "error" in r]
    if failed:
        text += f"{len(failed)} arm(s) failed: " + ", ".join(
            f"r{r['round']} {r['op']} {fmt_size(r['size'])} {r['arm']}" for r in failed) + "\n"
    sys.stdout.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"mode": mode, "config": cfg, "rows": rows, "raw": records}, f, indent=1)
    return 0 if rows else 1


def cmd_selftest(_a):
    recs = []
    for rnd in (1, 2, 3):
        recs.append({"round": rnd, "op": "read", "size": 8, "arm": "perftest", "p50": 10.0, "p99": 20.0,
                     "p99_9": 30.0, "max": 40.0, "cpu_us_per_transfer": 5.0})
        recs.append({"round": rnd, "op": "read", "size": 8, "arm": "railyard-off", "p50": 10.0 * rnd,
                     "p99": 40.0, "p99_9": 50.0, "max": 60.0, "cpu_us_per_transfer": 7.0})
        recs.append({"round": rnd, "op": "write", "size": 8, "arm": "perftest", "p50": 5.0, "p99": 10.0,
                     "p99_9": 11.0, "max": 12.0, "cpu_us_per_transfer": 5.0})
        recs.append({"round": rnd, "op": "write", "size": 8, "arm": "railyard-off", "p50": 15.0,
                     "p99": 20.0, "p99_9": 21.0, "max": 22.0, "cpu_us_per_transfer": 6.0})
    recs.append({"round": 3, "op": "write", "size": 8, "arm": "mooncake-py", "error": "boom"})
    rows = {(r["op"], r["arm"]): r for r in analyse(recs)}
    assert rows[("read", "railyard-off")]["p50"] == 20.0
    assert rows[("read", "railyard-off")]["p50_vs_perftest_rt"] == 2.0
    assert rows[("read", "railyard-off")]["p99_vs_perftest_rt"] == 2.0
    # WRITE: against twice ib_write_lat's half ping-pong.
    assert rows[("write", "railyard-off")]["p50_vs_perftest_rt"] == 1.5
    assert rows[("write", "perftest")]["p50_vs_perftest_rt"] == 0.5
    assert ("write", "mooncake-py") not in rows
    t = table(analyse(recs), "selftest")
    assert "2 x ib_write_lat" in t and "railyard bench --lat, CC off" in t
    pt = parse_perftest(8)(" 8       1000          2.71           13.07        2.91                2.97             0.20            3.50                    13.07  \n")
    assert pt == {"iters": 1000, "min": 2.71, "max": 13.07, "p50": 2.91, "mean": 2.97, "p99": 3.50,
                  "p99_9": 13.07}, pt
    a = argparse.Namespace(arms="perftest,railyard-off", ops="write,read", sizes="8,64K", rounds=2)
    rounds = plan(a)
    assert len(rounds) == 2 and len(rounds[0]) == 8
    assert [x["arm"] for x in rounds[0][:4]] == ["perftest", "railyard-off", "railyard-off", "perftest"]
    print("bench_lat selftest: ok")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--raw", required=True)
    r.add_argument("--logs", required=True)
    r.add_argument("--railyard", required=True)
    r.add_argument("--python", required=True)
    r.add_argument("--checkout", required=True)
    r.add_argument("--arms", default=",".join(ARMS))
    r.add_argument("--ops", default="write,read")
    r.add_argument("--sizes", default="8,4K,64K")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--iters", type=int, default=2000)
    r.add_argument("--device", default="rxe0")
    r.add_argument("--gid-index", type=int, default=1)
    r.add_argument("--timeout", type=int, default=240)
    r.add_argument("--agent", help="HOST:PORT of the target-side agent (--two)")
    r.add_argument("--target-ip", default="127.0.0.1")
    r.add_argument("--self-ip", default="127.0.0.1")
    r.set_defaults(func=cmd_run)
    g = sub.add_parser("agent")
    g.add_argument("--listen", required=True)
    g.set_defaults(func=bp.cmd_agent)
    rep = sub.add_parser("report")
    rep.add_argument("--raw", required=True)
    rep.add_argument("--json")
    rep.set_defaults(func=cmd_report)
    s = sub.add_parser("selftest")
    s.set_defaults(func=cmd_selftest)
    a = p.parse_args()
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
