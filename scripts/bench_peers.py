#!/usr/bin/env python3
"""bench_peers: the in-guest runner and the report of scripts/bench-peers.sh.

railyard `bench` (controller compiled out; compiled in with CC off, observe,
enforce) beside Mooncake TE's `transfer_engine_bench` and perftest's
`ib_write_bw` / `ib_read_bw` at the same QP count, on the same Soft-RoCE
device, alternating arms, N rounds. A benchmark, not a test.

  bench_peers.py plan   [options]            the arm plan, no RDMA needed
  bench_peers.py run    [options] --raw F    run the plan (in the guest),
                                             one JSON record per arm to F
  bench_peers.py agent  --listen IP:PORT     the target side for --two: starts
                                             and stops the target processes
                                             the runner asks for
  bench_peers.py report --raw F --json OUT   the table (stdout) and OUT
                        [--identity F]
  bench_peers.py identity --out F NAME=PATH...  source commit and each
                                             binary's sha256 / build-id
  bench_peers.py selftest                    the report's arithmetic on
                                             synthetic records

CPU cost: user + system seconds of both processes (initiator and target),
each over its whole life (wait4's rusage: every thread of the process),
divided by the GiB the initiator moved. Setup (device open, memory
registration, connection) is included, the same way for every engine.

Only the standard library: the guest runs the host's python3.
"""

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

RY_PORT = 18515  # railyard bench's control port
PT_PORT = 18516  # perftest's TCP exchange port
AGENT_PORT = 18600

RY_ARMS = ["railyard-nocc", "railyard-off", "railyard-observe", "railyard-enforce"]
POINT_ARMS = RY_ARMS + ["mooncake"]
ARM_LABEL = {
    "railyard-nocc": "railyard, CC compiled out",
    "railyard-off": "railyard, CC off",
    "railyard-observe": "railyard, CC observe",
    "railyard-enforce": "railyard, CC enforce",
    "mooncake": "Mooncake TE transfer_engine_bench",
    "perftest": "perftest ib_{op}_bw",
}
# Goals (issue #18).
GOAL_VS_MC = 1.5
GOAL_ENF_OFF = 0.97
GOAL_VS_PT = 1.0


def fmt_size(n):
    return f"{n >> 10}K" if n % 1024 == 0 and n < (1 << 20) else str(n)


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.strip().upper())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {s!r}")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def env_pairs(s):
    out = {}
    for kv in (x for x in s.split(",") if x):
        k, eq, v = kv.partition("=")
        if not eq or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", k):
            raise argparse.ArgumentTypeError(f"not NAME=VALUE: {kv!r}")
        out[k] = v
    return out


def variants(s):
    """'MODE~NAME:K=V,...;...' -> {arm name: env}."""
    out = {}
    for spec in (x.strip() for x in s.split(";") if x.strip()):
        head, colon, kvs = spec.partition(":")
        mode, tilde, name = head.partition("~")
        if not tilde or mode not in ("nocc", "off", "observe", "enforce") or not re.fullmatch(r"[a-z0-9_.-]+", name):
            raise argparse.ArgumentTypeError(f"not MODE~NAME:K=V,... (MODE nocc/off/observe/enforce): {spec!r}")
        out[f"railyard-{mode}~{name}"] = env_pairs(kvs) if colon else {}
    return out


def base_arm(arm):
    """railyard-off~nap -> railyard-off."""
    return arm.split("~", 1)[0]


def csv(conv):
    return lambda s: [conv(x) for x in s.split(",") if x]


# --------------------------------------------------------------------------
# The plan


def add_plan_args(p):
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--secs", type=int, default=6, help="seconds per arm")
    p.add_argument("--ops", type=csv(str), default=["write", "read"])
    p.add_argument("--sizes", type=csv(parse_size), default=[65536, 4096])
    p.add_argument("--threads", type=csv(int), default=[1, 4, 8])
    p.add_argument("--qps", type=int, default=2, help="QPs per endpoint (railyard's default, MC_NUM_QP_PER_EP)")
    p.add_argument("--batch", type=int, default=128, help="transfers per batch (Mooncake's bench default)")
    p.add_argument("--depth", type=int, default=1, help="railyard batches in flight per thread (Mooncake's bench: 1)")
    p.add_argument("--buffer", type=parse_size, default=64 << 20)
    p.add_argument("--no-perftest", action="store_true")
    p.add_argument("--verify-iters", type=int, default=256,
                   help="after the rounds, every railyard arm runs each op/size once more with --verify "
                        "for this many transfers (payload correctness, RFC 4162's benchmark protocol); 0: skip")
    p.add_argument("--no-mooncake", action="store_true")
    p.add_argument("--variants", type=variants, default={},
                   help="extra railyard arms, 'MODE~NAME:K=V,K=V;...' (MODE off/observe/enforce/nocc): arm "
                        "railyard-MODE~NAME runs with those variables, beside the plain arms, e.g. "
                        "'off~nap:MC_RDMA_INFLIGHT_NAP_US=50'")
    p.add_argument("--arms", type=csv(str), default=None,
                   help="only these arms (of " + ",".join(POINT_ARMS + ["perftest"]) + "), e.g. railyard-off,perftest")


def plan(a):
    """The arms in run order: a list of rounds, each a list of arm dicts."""
    rounds = []
    if a.arms is not None:
        bad = [x for x in a.arms if x not in POINT_ARMS + ["perftest"] + list(a.variants)]
        if bad:
            raise SystemExit(f"bench-peers: unknown arm(s) {','.join(bad)}; known: {','.join(POINT_ARMS + ['perftest'])}")
    keep = (lambda x: True) if a.arms is None else (lambda x: x in a.arms)
    point_arms = [x for x in POINT_ARMS + list(a.variants) if not (a.no_mooncake and x == "mooncake") and keep(x)]
    with_perftest = not a.no_perftest and keep("perftest")
    for r in range(a.rounds):
        arms = []
        point = 0
        for op in a.ops:
            for size in a.sizes:
                pt = {"round": r + 1, "arm": "perftest", "op": op, "size": size, "threads": None}
                # perftest before the thread sweep in odd rounds, after it in even ones.
                if with_perftest and r % 2 == 0:
                    arms.append(pt)
                for t in a.threads if point_arms else []:
                    k = (r + point) % len(point_arms)  # rotate the order per round and point
                    point += 1
                    for arm in point_arms[k:] + point_arms[:k]:
                        arms.append({"round": r + 1, "arm": arm, "op": op, "size": size, "threads": t})
                if with_perftest and r % 2 == 1:
                    arms.append(pt)
        rounds.append(arms)
    # Payload correctness: each railyard arm once per op/size with --verify
    # (one thread), after the timed rounds so it never shares their clock.
    ry = [x for x in point_arms if x.startswith("railyard")]
    if getattr(a, "verify_iters", 0) > 0 and ry:
        rounds.append([{"round": "verify", "arm": arm, "op": op, "size": size, "threads": 1, "verify": True}
                       for op in a.ops for size in a.sizes for arm in ry])
    return rounds


def cmd_plan(a):
    rounds = plan(a)
    n = sum(len(r) for r in rounds)
    per_arm = a.secs + 9  # measured: start-up, connection and teardown under TCG add ~6-9 s
    nv = sum(1 for r in rounds for x in r if x.get("verify"))
    if nv:
        print(f"bench-peers plan: + {nv} payload checks (railyard --verify, {a.verify_iters} transfers each)")
    print(f"bench-peers plan: {a.rounds} round(s) x {len(rounds[0])} arms = {n - nv} arms, {a.secs} s each "
          f"(~{n * per_arm // 60} min with start-up); QPs/endpoint {a.qps}, batch {a.batch}, "
          f"railyard depth {a.depth}, buffer {a.buffer >> 20} MiB")
    for rnd in rounds:
        for x in rnd:
            thr = "-" if x["threads"] is None else x["threads"]
            print(f"  round {x['round']}  {x['op']:<5} {fmt_size(x['size']):>4}  threads {thr:<2}  {x['arm']}")
    return 0


# --------------------------------------------------------------------------
# Processes: spawn, readiness, rusage


class Proc:
    """A child process in its own process group, reaped with wait4."""

    def __init__(self, argv, env, log):
        self.log = log
        e = dict(os.environ)
        e.update(env)
        with open(log, "wb") as f:
            self.p = subprocess.Popen(argv, env=e, stdout=f, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        self.rc = None
        self.cpu = None  # (user, sys)

    def signal(self, sig):
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass

    def poll(self):
        if self.rc is None:
            pid, status, ru = os.wait4(self.p.pid, os.WNOHANG)
            if pid:
                self._done(status, ru)
        return self.rc

    def _done(self, status, ru):
        self.rc = os.waitstatus_to_exitcode(status)
        self.p.returncode = self.rc  # Popen must not reap it again
        self.cpu = (ru.ru_utime, ru.ru_stime)

    def wait(self, timeout):
        """Waits up to timeout s; then SIGTERM, 5 s, SIGKILL. Returns rc."""
        deadline = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.rc is None:
            self.signal(signal.SIGTERM)
            deadline = time.monotonic() + 5
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.rc is None:
            self.signal(signal.SIGKILL)
            pid, status, ru = os.wait4(self.p.pid, 0)
            self._done(status, ru)
        return self.rc

    def text(self):
        with open(self.log, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def tail(self, n=12):
        return "\n".join(self.text().splitlines()[-n:])


def listening(port):
    """Whether some socket on this host listens on TCP `port`."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def vm_pin_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmPin:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def start_target(spec):
    """Starts a target and waits until it can take its initiator.

    spec: argv, env, log, ready = {"kind": "none"} | {"kind": "listen", "port"}
    | {"kind": "mooncake", "pinned_kib"} (its "listening on HOST:PORT" line, and
    its buffer registered: VmPin counts the pages ibv_reg_mr pinned).
    Returns (proc, info); info["segment"] for Mooncake, info["error"] on failure.
    """
    p = Proc(spec["argv"], spec.get("env", {}), spec["log"])
    ready = spec.get("ready", {"kind": "none"})
    deadline = time.monotonic() + ready.get("timeout", 60)
    info = {}
    while time.monotonic() < deadline:
        if p.poll() is not None:
            info["error"] = f"target exited ({p.rc}) before it was ready:\n{p.tail()}"
            return p, info
        kind = ready["kind"]
        if kind == "none":
            return p, info
        if kind == "listen" and listening(ready["port"]):
            return p, info
        if kind == "mooncake":
            m = re.search(r"listening on (\S+?:\d+)", p.text())
            if m and vm_pin_kib(p.p.pid) >= ready["pinned_kib"]:
                time.sleep(0.3)
                info["segment"] = m.group(1)
                return p, info
        time.sleep(0.1)
    info["error"] = f"target not ready within {ready.get('timeout', 60)} s:\n{p.tail()}"
    return p, info


def stop_target(p, sigterm, grace):
    """Lets the target exit (or SIGTERMs it first); returns its rusage."""
    if sigterm:
        p.signal(signal.SIGTERM)
    rc = p.wait(grace)
    return {"rc": rc, "cpu_user_s": p.cpu[0], "cpu_sys_s": p.cpu[1], "tail": p.tail()}


class LocalTargets:
    def start(self, spec):
        self.p, info = start_target(spec)
        return info

    def stop(self, sigterm, grace):
        return stop_target(self.p, sigterm, grace)


class RemoteTargets:
    """The agent on the other guest (--two), one JSON line each way."""

    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.s = socket.create_connection((host, int(port)), timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self.s.settimeout(None)
        self.f = self.s.makefile("rw")

    def call(self, msg):
        self.f.write(json.dumps(msg) + "\n")
        self.f.flush()
        line = self.f.readline()
        if not line:
            raise RuntimeError("the agent closed the connection")
        return json.loads(line)

    def start(self, spec):
        return self.call({"op": "start", "spec": spec})

    def stop(self, sigterm, grace):
        return self.call({"op": "stop", "sigterm": sigterm, "grace": grace})

    def close(self):
        try:
            self.call({"op": "quit"})
        except (OSError, RuntimeError, ValueError):
            pass


def cmd_agent(a):
    host, port = a.listen.rsplit(":", 1)
    srv = socket.create_server((host, int(port)), reuse_port=False)
    print(f"bench-peers agent: listening on {a.listen}", flush=True)
    conn, peer = srv.accept()
    f = conn.makefile("rw")
    t = LocalTargets()
    for line in f:
        msg = json.loads(line)
        if msg["op"] == "start":
            out = t.start(msg["spec"])
        elif msg["op"] == "stop":
            out = t.stop(msg["sigterm"], msg["grace"])
        else:
            break
        f.write(json.dumps(out) + "\n")
        f.flush()
    f.write("{}\n")
    f.flush()
    return 0


# --------------------------------------------------------------------------
# One arm


def arm_cmds(a, x, tip):
    """(target spec, initiator argv, initiator env, parse) for arm x; tip is
    the target's address."""
    op, size, thr = x["op"], x["size"], x["threads"]
    dev, gid, secs, qps = a.device, str(a.gid_index), str(a.secs), str(a.qps)
    name = f"r{x['round']}-{op}-{fmt_size(size)}-t{thr or 0}-{x['arm']}"
    logs = os.path.join(a.logs, name)
    if x["arm"].startswith("railyard"):
        base = base_arm(x["arm"])
        mode = "off" if base == "railyard-nocc" else base.split("-", 1)[1]
        binary = a.railyard_nocc if base == "railyard-nocc" else a.railyard
        env = {**a.ry_env, **a.variants.get(x["arm"], {}), "MC_ADAPTIVE_CC_MODE": mode}
        target = {"argv": [binary, "bench", "-d", dev, "-x", gid, "--listen", tip, "-p", str(RY_PORT), "--quiet"],
                  "env": env, "ready": {"kind": "none"}}
        stop = ["-n", str(a.verify_iters), "--verify"] if x.get("verify") else ["-D", secs]
        init = [binary, "bench", "-d", dev, "-x", gid, "-q", qps, "-s", str(size), "--op", op] + stop + [
                "--threads", str(thr), "--batch_size", str(a.batch), "--depth", str(a.depth),
                "--buffer_size", str(a.buffer), "--json", "--quiet"] + a.ry_args.split() + [f"{tip}:{RY_PORT}"]
        return target, init, env, parse_railyard, logs, False
    if x["arm"] == "mooncake":
        env = {"MC_GID_INDEX": gid, "MC_NUM_QP_PER_EP": qps, "GLOG_logtostderr": "1"}
        common = [a.mooncake, "--metadata_server=P2PHANDSHAKE", "--protocol=rdma", f"--device_name={dev}",
                  f"--buffer_size={a.buffer}"]
        target = {"argv": common + ["--mode=target", f"--local_server_name={tip}:12345"], "env": env,
                  "ready": {"kind": "mooncake", "pinned_kib": a.buffer >> 10}}
        init = common + ["--mode=initiator", f"--local_server_name={a.self_ip}:12346", "--segment_id={SEGMENT}",
                         f"--operation={op}", f"--block_size={size}", f"--batch_size={a.batch}",
                         f"--threads={thr}", f"--duration={secs}", "--report_unit=MiB"]
        return target, init, env, parse_mooncake(a.batch, size), logs, True
    tool = f"ib_{op}_bw"
    args = [tool, "-d", dev, "-x", gid, "-q", qps, "-s", str(size), "-D", secs, "-p", str(PT_PORT), "-F"]
    target = {"argv": args, "env": {}, "ready": {"kind": "listen", "port": PT_PORT}}
    return target, args + [tip], {}, parse_perftest(size, a.secs), logs, False


def parse_railyard(text):
    doc = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                pass
    if not doc or not doc.get("results"):
        return None
    r = doc["results"][0]
    lat = r.get("batch_latency_us") or {}
    return {"bytes_moved": r["iterations"] * r["bytes"], "seconds": r["seconds"],
            "mib_per_s": r["bw_average_mib_per_s"], "mops": r["msg_rate_mops"],
            "own_cpu_s_per_gib": r["cpu_s_per_gib"], "deferrals": r.get("deferrals", 0),
            "cc_mode": doc.get("cc_mode"), "cc_compiled_in": doc.get("cc_compiled_in"),
            "qps_per_endpoint": doc.get("qps_per_endpoint"),
            "batch_lat_p50_us": lat.get("p50"), "batch_lat_p99_us": lat.get("p99"),
            "peak_inflight_bytes": r.get("peak_inflight_bytes"), "verified": doc.get("verified", False)}


def parse_mooncake(batch, size):
    def parse(text):
        m = re.search(r"Test completed: duration ([\d.]+), batch count (\d+)", text)
        if not m:
            return None
        secs, batches = float(m.group(1)), int(m.group(2))
        moved = batches * batch * size
        return {"bytes_moved": moved, "seconds": secs, "mib_per_s": moved / secs / (1 << 20),
                "mops": batches * batch / secs / 1e6}
    return parse


def parse_perftest(size, secs):
    def parse(text):
        for line in text.splitlines():
            f = line.split()
            if len(f) >= 5 and f[0] == str(size):
                try:
                    bw, rate = float(f[3]), float(f[4])
                except ValueError:
                    continue
                if bw <= 0:
                    continue
                # perftest's MB is 2^20 bytes; in -D mode it reports no byte
                # count, so bytes moved = average x duration.
                return {"bytes_moved": int(bw * (1 << 20) * secs), "seconds": float(secs),
                        "mib_per_s": bw, "mops": rate}
        return None
    return parse


def railyard_build_mismatch(arm, res):
    """Why a railyard arm's --json contradicts the arm (the compiled-out arm
    must say cc_compiled_in false, the others true, and each its CC mode), or
    None when it matches or is no railyard result."""
    if not res or not arm.startswith("railyard"):
        return None
    arm = base_arm(arm)
    nocc = arm == "railyard-nocc"
    mode = "off" if nocc else arm.split("-", 1)[1]
    if res.get("cc_compiled_in") is not (not nocc) or res.get("cc_mode") != mode:
        return (f"{arm}: railyard bench reported cc_compiled_in={res.get('cc_compiled_in')}, "
                f"cc_mode={res.get('cc_mode')}; expected {not nocc}, {mode}")
    return None


def attempt(targets, spec, init, env, logs, sigterm, timeout, parse, settle=0.0, check=None):
    """Up to 3 attempts of one arm: start the target (spec), run the
    initiator (init, `{SEGMENT}` replaced by what the target announced),
    stop the target, parse the initiator's output. Returns (result,
    initiator Proc, target stop info, attempt, error): result None and an
    error when every attempt failed, or at once when `check(result)` names
    what is wrong (the wrong binary or mode: a retry would not help)."""
    error = None
    for n in (1, 2, 3):
        info = targets.start(spec)
        if "error" in info:
            error = info["error"]
            targets.stop(True, 5)
            continue
        argv = [s.replace("{SEGMENT}", info.get("segment", "")) for s in init]
        if settle:
            time.sleep(settle)
        p = Proc(argv, env, logs + "-initiator.log")
        p.wait(timeout)
        t = targets.stop(sigterm, 15)
        res = parse(p.text()) if p.rc == 0 else None
        wrong = check(res) if check else None
        if wrong:
            return None, p, t, n, wrong
        if res:
            return res, p, t, n, None
        error = f"initiator exit {p.rc}:\n{p.tail()}\n--- target (exit {t['rc']}):\n{t['tail']}"
        # perftest sometimes cannot calibrate its clock under TCG: retry.
        time.sleep(1)
    return None, None, None, 3, error


def run_arm(a, targets, x, tip):
    spec, init, env, parse, logs, sigterm = arm_cmds(a, x, tip)
    spec["log"] = logs + "-target.log"
    rec = dict(x)
    res, p, t, n, error = attempt(targets, spec, init, env, logs, sigterm, a.secs + 120, parse,
                                  settle=0.2 if x["arm"] == "perftest" else 0.0,
                                  check=lambda r: railyard_build_mismatch(x["arm"], r))
    if error:
        rec["error"] = error
        return rec
    rec.update(res)
    cpu = p.cpu[0] + p.cpu[1] + t["cpu_user_s"] + t["cpu_sys_s"]
    rec["cpu_initiator_s"] = p.cpu[0] + p.cpu[1]
    rec["cpu_target_s"] = t["cpu_user_s"] + t["cpu_sys_s"]
    rec["cpu_s_per_gib"] = cpu / (res["bytes_moved"] / (1 << 30)) if res["bytes_moved"] else None
    gib = res["bytes_moved"] / (1 << 30)
    rec["cpu_initiator_s_per_gib"] = rec["cpu_initiator_s"] / gib if gib else None
    rec["cpu_target_s_per_gib"] = rec["cpu_target_s"] / gib if gib else None
    transfers = res["bytes_moved"] // x["size"] if x["size"] else 0
    rec["cpu_us_per_transfer"] = cpu * 1e6 / transfers if transfers else None
    rec["attempts"] = n
    return rec


def run_rounds(a, rounds, run_arm, label, result, name):
    """Runs every arm of `rounds` (run_arm(a, targets, x, target_ip) ->
    record), one JSON record per arm to a.raw after the run's config, and
    a progress line per arm (`label(x)` names it, `result(rec)` says what
    it measured); targets local, or on the --two agent. Exit code 0 unless
    every arm failed."""
    os.makedirs(a.logs, exist_ok=True)
    targets = RemoteTargets(a.agent) if a.agent else LocalTargets()
    total = sum(len(r) for r in rounds)
    done = failed = 0
    t0 = time.monotonic()
    with open(a.raw, "a") as out:
        out.write(json.dumps({"config": {k: v for k, v in vars(a).items() if k != "func"},
                              "uname": os.uname().release}) + "\n")
        for rnd in rounds:
            for x in rnd:
                done += 1
                rec = run_arm(a, targets, x, a.target_ip)
                out.write(json.dumps(rec) + "\n")
                out.flush()
                head = f"[{done}/{total} {time.monotonic() - t0:5.0f}s] round {x['round']} {label(x)}"
                if "error" in rec:
                    failed += 1
                    print(f"{head} FAILED: {rec['error']}", flush=True)
                else:
                    print(f"{head} {result(rec)}", flush=True)
        out.write(json.dumps({"summary": {"arms": total, "failed": failed,
                                          "elapsed_s": round(time.monotonic() - t0, 1)}}) + "\n")
    if isinstance(targets, RemoteTargets):
        targets.close()
    print(f"{name}: {total - failed}/{total} arms produced a result", flush=True)
    return 0 if failed < total else 1


def cmd_run(a):
    def label(x):
        thr = "-" if x["threads"] is None else x["threads"]
        return f"{x['op']:<5} {fmt_size(x['size']):>4} thr {thr:<2} {x['arm']:<17}"

    def result(rec):
        return (f"{rec['mib_per_s']:9.2f} MiB/s {rec['mops']:8.4f} Mops "
                f"{rec['cpu_s_per_gib']:7.2f} CPU s/GiB")

    return run_rounds(a, plan(a), run_arm, label, result, "bench-peers")


# --------------------------------------------------------------------------
# The report


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def analyse(records):
    """Medians per (op, size, threads, arm) and medians of per-round ratios."""
    records = [r for r in records if not r.get("verify")]
    ok = [r for r in records if "error" not in r and "mib_per_s" in r]
    by = {}
    for r in ok:
        by[(r["round"], r["op"], r["size"], r["threads"], r["arm"])] = r
    # Rounds whose arm ran and failed (an error record), as opposed to rounds
    # that never reached it (an interrupted or timed-out run).
    errs = {}
    for r in records:
        if "error" in r:
            k = (r["op"], r["size"], r["threads"], r["arm"])
            errs[k] = errs.get(k, 0) + 1
    rounds = sorted({r["round"] for r in records})
    points = []
    for r in records:
        if r["arm"] != "perftest":
            k = (r["op"], r["size"], r["threads"])
            if k not in points:
                points.append(k)
    pt_keys = []
    for r in records:
        k = (r["op"], r["size"])
        if r["arm"] == "perftest" and k not in pt_keys:
            pt_keys.append(k)
    rows = []

    def row(op, size, thr, arm):
        recs = [by.get((n, op, size, thr, arm)) for n in rounds]
        got = [x for x in recs if x]

        def ratio(other_arm, other_thr=thr):
            per = []
            for n in rounds:
                mine, theirs = by.get((n, op, size, thr, arm)), by.get((n, op, size, other_thr, other_arm))
                if mine and theirs and theirs["mib_per_s"] > 0:
                    per.append(mine["mib_per_s"] / theirs["mib_per_s"])
            return {"median": med(per), "per_round": per}

        failed = errs.get((op, size, thr, arm), 0)
        out = {"op": op, "size": size, "threads": thr, "arm": arm, "rounds": len(got),
               "failed_rounds": failed, "not_run_rounds": len(rounds) - len(got) - failed,
               "mib_per_s": med([x["mib_per_s"] for x in got]),
               "mops": med([x["mops"] for x in got]),
               "cpu_s_per_gib": med([x.get("cpu_s_per_gib") for x in got]),
               "cpu_initiator_s_per_gib": med([x.get("cpu_initiator_s_per_gib") for x in got]),
               "cpu_target_s_per_gib": med([x.get("cpu_target_s_per_gib") for x in got]),
               "cpu_us_per_transfer": med([x.get("cpu_us_per_transfer") for x in got]),
               "mib_per_s_per_round": [x["mib_per_s"] if x else None for x in recs]}
        if arm.startswith("railyard"):
            out["batch_lat_p50_us"] = med([x.get("batch_lat_p50_us") for x in got])
            out["batch_lat_p99_us"] = med([x.get("batch_lat_p99_us") for x in got])
            out["peak_inflight_bytes"] = max((x.get("peak_inflight_bytes") or 0 for x in got), default=None)
            out["own_client_cpu_s_per_gib"] = med([x.get("own_cpu_s_per_gib") for x in got])
            out["deferrals"] = med([x.get("deferrals") for x in got])
            out["cc_compiled_in"] = [x.get("cc_compiled_in") for x in got]
        if arm != "perftest":
            if arm != "mooncake":
                out["vs_mooncake"] = ratio("mooncake")
            if (op, size) in pt_keys:
                out["vs_perftest"] = ratio("perftest", None)
            if arm in ("railyard-nocc", "railyard-observe", "railyard-enforce") or "~" in arm:
                out["vs_off"] = ratio("railyard-off")
        return out

    arms = list(POINT_ARMS) + sorted({r["arm"] for r in records if "~" in r["arm"]})
    for op, size, thr in points:
        for arm in arms:
            if any(r["arm"] == arm and (r["op"], r["size"], r["threads"]) == (op, size, thr) for r in records):
                rows.append(row(op, size, thr, arm))
        if (op, size) in pt_keys and thr == max(t for o, s, t in points if (o, s) == (op, size)):
            rows.append(row(op, size, None, "perftest"))
    return rows


def goals(rows):
    """Shortfalls against issue #18's goals: a list of strings."""
    short = []
    checked = 0
    # A goal whose comparison arm was left out of the plan (--arms) is not
    # checked, rather than counted short.
    arms = {r["arm"] for r in rows}
    for r in rows:
        where = f"{r['op']} {fmt_size(r['size'])} threads {r['threads']}"
        if r["arm"] in ("railyard-off", "railyard-enforce") and "mooncake" in arms:
            v = r.get("vs_mooncake", {}).get("median")
            checked += 1
            if v is None or v < GOAL_VS_MC:
                short.append(f"{r['arm']} / Mooncake = {fmt_ratio(v, 3)} < {GOAL_VS_MC} ({where})")
        if r["arm"] == "railyard-enforce" and "railyard-off" in arms:
            v = r.get("vs_off", {}).get("median")
            checked += 1
            if v is None or v < GOAL_ENF_OFF:
                short.append(f"enforce / off = {fmt_ratio(v, 3)} < {GOAL_ENF_OFF} ({where})")
        if r["arm"] == "railyard-off" and "vs_perftest" in r:
            v = r["vs_perftest"]["median"]
            checked += 1
            if v is None or v < GOAL_VS_PT:
                short.append(f"railyard-off / perftest = {fmt_ratio(v, 3)} < {GOAL_VS_PT} ({where})")
    return checked, short


def protocol_table(rows, records):
    """RFC 4162's benchmark protocol beside the throughput table: per
    railyard row the batch latency tails and the peak bytes in flight, then
    the payload checks (the --verify pass)."""
    lines = [f"{'op':<5} {'size':>4} {'thr':>3}  {'arm':<21} {'batch P50 us':>12} {'batch P99 us':>12} "
             f"{'peak in-flight KiB':>18}"]
    lines.append("-" * len(lines[0]))
    for r in rows:
        if not r["arm"].startswith("railyard"):
            continue
        peak = r.get("peak_inflight_bytes")
        lines.append(f"{r['op']:<5} {fmt_size(r['size']):>4} {r['threads']!s:>3}  {r['arm']:<21} "
                     f"{fmt_num(r.get('batch_lat_p50_us'), '12.0f')} {fmt_num(r.get('batch_lat_p99_us'), '12.0f')} "
                     f"{fmt_num(None if peak is None else peak / 1024, '18.0f')}")
    lines.append("Batch latency: submit to completion of one batch (medians over rounds); peak in-flight: the most "
                 "bytes submitted and not completed at once in any round. Mooncake's and perftest's tools report "
                 "neither.")
    checks = [r for r in records if r.get("verify")]
    if checks:
        good = [r for r in checks if "error" not in r and r.get("verified")]
        lines.append(f"payload verified (railyard bench --verify after the rounds, every block read back and "
                     f"compared): {len(good)}/{len(checks)} arm x op x size checks passed")
        for r in checks:
            if r not in good:
                why = (r.get("error") or "not verified").splitlines()[0]
                lines.append(f"  FAILED check: {r['arm']} {r['op']} {fmt_size(r['size'])}: {why}")
        lines.append("Mooncake's transfer_engine_bench and perftest do not check payload.")
    else:
        lines.append("payload: not checked in this run (--verify-iters 0)")
    return "\n".join(lines)


def identity_lines(ident):
    """The source and binary identities the run used."""
    if not ident:
        return ["identity: not recorded"]
    out = [f"source: {ident.get('source', '?')}"]
    for name, b in sorted(ident.get("binaries", {}).items()):
        if b is None:
            out.append(f"  {name}: missing")
            continue
        out.append(f"  {name}: sha256 {b['sha256'][:16]} build-id {b.get('build_id') or '-'} ({b['path']})")
    return out


def file_identity(path):
    """sha256 and GNU build-id of one binary (None if it is missing)."""
    import hashlib
    if not path or not os.path.isfile(path):
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    bid = None
    try:
        out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, timeout=30).stdout
        m = re.search(r"Build ID:\s*([0-9a-f]+)", out)
        bid = m.group(1) if m else None
    except (OSError, subprocess.SubprocessError):
        pass
    return {"path": path, "sha256": h.hexdigest(), "build_id": bid}


def cmd_identity(a):
    """Writes the source and binary identities to a.out (host side)."""
    src = "unknown"
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        src = head + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    bins = {}
    for kv in a.bins:
        name, _, path = kv.partition("=")
        bins[name] = file_identity(path)
    with open(a.out, "w") as f:
        json.dump({"source": src, "binaries": bins}, f, indent=1)
    for line in identity_lines({"source": src, "binaries": bins}):
        print(line)
    return 0


def fmt_ratio(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def fmt_num(v, spec):
    return "-" if v is None else format(v, spec)


def table(rows, cfg):
    lines = []
    hdr = (f"{'op':<5} {'size':>4} {'thr':>3}  {'arm':<21} {'MiB/s':>9} {'Mops':>8} {'CPU s/GiB':>9}"
           f" {'init+tgt':>11} {'CPU us/xfer':>11}"
           f"  {'xMooncake':>9} {'xperftest':>9} {'x CC off':>8}  rounds")
    lines.append(hdr)
    lines.append("-" * len(hdr))
    last = None
    for r in rows:
        key = (r["op"], r["size"])
        if last is not None and key != last:
            lines.append("")
        last = key
        thr = "-" if r["threads"] is None else str(r["threads"])
        mops = fmt_num(r["mops"], "8.4f") if r["size"] < 65536 else f"{'':8}"
        ok = (f"{r['rounds']}" + (f" ({r['failed_rounds']} failed)" if r["failed_rounds"] else "")
              + (f" ({r['not_run_rounds']} not run)" if r.get("not_run_rounds") else ""))
        split = (f"{fmt_num(r.get('cpu_initiator_s_per_gib'), '.1f')}+{fmt_num(r.get('cpu_target_s_per_gib'), '.1f')}")
        lines.append(
            f"{r['op']:<5} {fmt_size(r['size']):>4} {thr:>3}  {r['arm']:<21} {fmt_num(r['mib_per_s'], '9.2f')} "
            f"{mops} {fmt_num(r['cpu_s_per_gib'], '9.2f')} {split:>11} {fmt_num(r.get('cpu_us_per_transfer'), '11.1f')}  "
            f"{fmt_ratio(r.get('vs_mooncake', {}).get('median')):>9} "
            f"{fmt_ratio(r.get('vs_perftest', {}).get('median')):>9} "
            f"{fmt_ratio(r.get('vs_off', {}).get('median')):>8}  {ok}")
    lines.append("")
    lines.append("MiB/s, Mops and CPU s/GiB: medians over rounds; x columns: medians of per-round ratios "
                 "(x CC off: railyard-nocc, -observe, -enforce and variants ~NAME against railyard-off of the same round).")
    lines.append("perftest has no submitter threads: each op/size runs once per round (its row shows thr -) "
                 f"with -q {cfg.get('qps')} like railyard, and every thread count is compared with it.")
    lines.append("CPU s/GiB: user+sys of initiator and target over each process's whole life (wait4), "
                 "per GiB moved (init+tgt: the two sides apart); CPU us/xfer: the same CPU per transfer; "
                 "Mops shown for blocks < 64 KiB.")
    return "\n".join(lines)


def cmd_report(a):
    cfg, records, summary = {}, [], {}
    with open(a.raw) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            d = json.loads(line)
            if "config" in d:
                cfg = d["config"]
            elif "summary" in d:
                summary = d["summary"]
            else:
                records.append(d)
    if not records:
        print("bench-peers: no results", file=sys.stderr)
        return 1
    rows = analyse(records)
    checked, short = goals(rows)
    mode = "two guests (rxe0 across the qemu socket link)" if cfg.get("agent") else "one guest (rxe0 loopback)"
    print(f"=== bench-peers: {mode}; {cfg.get('rounds')} round(s), {cfg.get('secs')} s per arm, "
          f"QPs/endpoint {cfg.get('qps')}, batch {cfg.get('batch')}, railyard depth {cfg.get('depth')}, "
          f"buffer {int(cfg.get('buffer', 0)) >> 20} MiB" + (f", railyard args '{cfg['ry_args']}'" if cfg.get("ry_args") else ""))
    if summary:
        print(f"{summary['arms'] - summary['failed']}/{summary['arms']} arms produced a result, "
              f"in {summary['elapsed_s']:.0f} s")
    if a.host_note:
        print(f"host: {a.host_note}")
    print(table(rows, cfg))
    print()
    print(protocol_table(rows, records))
    print()
    ident = None
    if getattr(a, "identity", None) and os.path.isfile(a.identity):
        with open(a.identity) as f:
            ident = json.load(f)
    for line in identity_lines(ident):
        print(line)
    print()
    print(f"goals (railyard-off and -enforce >= {GOAL_VS_MC}x Mooncake; enforce >= {GOAL_ENF_OFF}x off; "
          f"railyard-off >= {GOAL_VS_PT}x perftest): {checked - len(short)}/{checked} met")
    for s in short:
        print(f"  short: {s}")
    failed = [r for r in records if "error" in r]
    for r in failed:
        first = r["error"].splitlines()[0] if r["error"] else ""
        print(f"  failed arm: round {r['round']} {r['op']} {fmt_size(r['size'])} threads {r['threads']} "
              f"{r['arm']}: {first}")
    doc = {"config": cfg, "summary": summary, "host": a.host_note, "rows": rows, "identity": ident,
           "payload_checks": [r for r in records if r.get("verify")],
           "goals": {"checked": checked, "short": short},
           "failed_arms": failed, "records": records}
    if a.json:
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"bench-peers: JSON in {a.json}")
    return 0


def cmd_selftest(_a):
    """The report's arithmetic on synthetic records (fails loudly)."""
    recs = []
    # Round n: Mooncake 100, railyard-off 150+n, enforce 140, nocc 151, observe 149,
    # perftest 120 (n = 1..3): medians of ratios are known.
    for n in (1, 2, 3):
        for arm, mib in (("mooncake", 100.0), ("railyard-off", 150.0 + n), ("railyard-enforce", 140.0),
                         ("railyard-nocc", 151.0), ("railyard-observe", 149.0)):
            recs.append({"round": n, "op": "write", "size": 65536, "threads": 1, "arm": arm, "mib_per_s": mib,
                         "mops": mib * (1 << 20) / 65536 / 1e6, "cpu_s_per_gib": 10.0 * n, "bytes_moved": 1})
        recs.append({"round": n, "op": "write", "size": 65536, "threads": None, "arm": "perftest",
                     "mib_per_s": 120.0, "mops": 0.0, "cpu_s_per_gib": 5.0, "bytes_moved": 1})
    recs.append({"round": 3, "op": "write", "size": 65536, "threads": 1, "arm": "mooncake", "error": "boom"})
    recs = [r for r in recs if not (r["round"] == 3 and r["arm"] == "mooncake" and "error" not in r)]
    rows = {r["arm"]: r for r in analyse(recs)}
    off = rows["railyard-off"]
    assert abs(off["mib_per_s"] - 152.0) < 1e-9, off
    assert [round(v, 9) for v in off["vs_mooncake"]["per_round"]] == [1.51, 1.52], off  # round 3: no Mooncake
    assert abs(off["vs_mooncake"]["median"] - 1.515) < 1e-9, off
    assert abs(off["vs_perftest"]["median"] - 152.0 / 120.0) < 1e-9, off
    enf = rows["railyard-enforce"]
    assert abs(enf["vs_off"]["median"] - 140.0 / 152.0) < 1e-9, enf
    assert rows["mooncake"]["failed_rounds"] == 1 and rows["mooncake"]["not_run_rounds"] == 0, rows["mooncake"]
    # An interrupted run: round 2 never reached perftest; that is "not run", not "failed".
    cut = [r for r in recs if not (r["round"] == 2 and r["arm"] == "perftest")]
    pt_row = [r for r in analyse(cut) if r["arm"] == "perftest"][0]
    assert pt_row["not_run_rounds"] == 1 and pt_row["failed_rounds"] == 0, pt_row
    assert "vs_off" not in off and "vs_mooncake" not in rows["mooncake"]
    assert rows["perftest"]["threads"] is None and rows["railyard-off"]["cpu_s_per_gib"] == 20.0
    checked, short = goals(list(rows.values()))
    # off vs MC 1.515 ok; enforce vs MC 1.4 short; enforce/off 0.92 short; off vs perftest ok.
    assert checked == 4 and len(short) == 2, short
    assert parse_mooncake(128, 65536)("I0 Test completed: duration 2.00, batch count 10, throughput 1")[
        "mib_per_s"] == 10 * 128 * 65536 / 2 / (1 << 20)
    pt = parse_perftest(4096, 2)(" 4096       1000           0.00               95.50              0.024448\n")
    assert pt["mib_per_s"] == 95.5 and pt["mops"] == 0.024448, pt
    ry = parse_railyard('{"cc_mode":"off","cc_compiled_in":false,"results":[{"bytes":4096,"iterations":10,'
                        '"seconds":1.0,"bw_average_mib_per_s":1.5,"msg_rate_mops":0.1,"cpu_s_per_gib":3.0}]}')
    assert ry["bytes_moved"] == 40960 and ry["cc_compiled_in"] is False, ry
    assert railyard_build_mismatch("railyard-nocc", ry) is None, ry
    assert railyard_build_mismatch("railyard-off", ry)  # compiled out, so not the off arm
    assert railyard_build_mismatch("railyard-enforce", dict(ry, cc_compiled_in=True))  # mode off
    assert railyard_build_mismatch("railyard-enforce", dict(ry, cc_compiled_in=True, cc_mode="enforce")) is None
    assert railyard_build_mismatch("mooncake", {}) is None
    # Variant arms: compared with railyard-off of the same round, not goals.
    var = recs + [{"round": n, "op": "write", "size": 65536, "threads": 1, "arm": "railyard-off~nap",
                   "mib_per_s": 2 * (150.0 + n), "mops": 0.0, "cpu_s_per_gib": 1.0, "bytes_moved": 1}
                  for n in (1, 2, 3)]
    vrows = {r["arm"]: r for r in analyse(var)}
    assert vrows["railyard-off~nap"]["vs_off"]["per_round"] == [2.0, 2.0, 2.0], vrows["railyard-off~nap"]
    assert goals(list(vrows.values()))[0] == 4
    # Without Mooncake in the plan its goals are not checked (nor counted short).
    no_mc = [r for r in vrows.values() if r["arm"] != "mooncake"]
    n_mc, short_mc = goals(no_mc)
    assert n_mc == 2 and len(short_mc) == 1 and short_mc[0].startswith("enforce / off"), short_mc
    assert variants("off~nap:MC_RDMA_INFLIGHT_NAP_US=50,MC_WORKERS_PER_CTX=1;enforce~x") == {
        "railyard-off~nap": {"MC_RDMA_INFLIGHT_NAP_US": "50", "MC_WORKERS_PER_CTX": "1"}, "railyard-enforce~x": {}}
    for bad in ("nap:X=1", "fast~nap:X=1", "off~Nap:X=1", "off~nap:x=1", "off~nap:X"):
        try:
            variants(bad)
        except argparse.ArgumentTypeError:
            continue
        raise AssertionError(f"variants({bad!r}) accepted")
    assert railyard_build_mismatch("railyard-off~nap", dict(ry, cc_compiled_in=True)) is None
    assert listening(0) in (True, False)
    # The protocol record: latency tails and peak in-flight from the JSON,
    # payload checks kept out of the throughput medians.
    ry2 = parse_railyard('{"cc_mode":"off","verified":true,"results":[{"bytes":4096,"iterations":10,'
                         '"seconds":1.0,"bw_average_mib_per_s":1.5,"msg_rate_mops":0.1,"cpu_s_per_gib":3.0,'
                         '"batch_latency_us":{"p50":7.0,"p99":9.0,"p99_9":9.5,"max":10.0},'
                         '"peak_inflight_bytes":524288}]}')
    assert (ry2["batch_lat_p50_us"], ry2["batch_lat_p99_us"], ry2["peak_inflight_bytes"], ry2["verified"]) == (
        7.0, 9.0, 524288, True), ry2
    lat = [dict(r, batch_lat_p50_us=10.0 * r["round"], batch_lat_p99_us=100.0, peak_inflight_bytes=1024 * r["round"])
           for r in recs if r["arm"] == "railyard-off"]
    checks = [{"round": "verify", "verify": True, "arm": "railyard-off", "op": "write", "size": 65536,
               "threads": 1, "mib_per_s": 1e6, "mops": 1.0, "verified": True, "bytes_moved": 1},
              {"round": "verify", "verify": True, "arm": "railyard-enforce", "op": "write", "size": 65536,
               "threads": 1, "error": "verify failed at 0"}]
    lrows = {r["arm"]: r for r in analyse(lat + checks)}
    assert lrows["railyard-off"]["mib_per_s"] == 152.0, "a payload check leaked into the medians"
    assert (lrows["railyard-off"]["batch_lat_p50_us"], lrows["railyard-off"]["peak_inflight_bytes"]) == (20.0, 3072)
    pt_text = protocol_table(list(lrows.values()), lat + checks)
    assert "1/2 arm x op x size checks passed" in pt_text and "FAILED check: railyard-enforce" in pt_text, pt_text
    assert "payload: not checked" in protocol_table(list(lrows.values()), lat)
    cpu = [dict(r, cpu_initiator_s_per_gib=1.0 * r["round"], cpu_target_s_per_gib=2.0, cpu_us_per_transfer=5.0)
           for r in recs if r["arm"] == "railyard-off"]
    crow = analyse(cpu)[0]
    assert (crow["cpu_initiator_s_per_gib"], crow["cpu_target_s_per_gib"], crow["cpu_us_per_transfer"]) == (
        2.0, 2.0, 5.0), crow
    assert "2.0+2.0" in table([crow], {}) and "5.0" in table([crow], {})
    assert identity_lines(None) == ["identity: not recorded"]
    me = file_identity(sys.executable)
    assert me and len(me["sha256"]) == 64 and file_identity("/nonexistent") is None, me
    print("bench_peers selftest: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    add_plan_args(p)
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("run")
    add_plan_args(p)
    p.add_argument("--raw", required=True, help="JSON lines out (appended)")
    p.add_argument("--logs", required=True, help="directory for each process's log")
    p.add_argument("--railyard", required=True)
    p.add_argument("--railyard-nocc", required=True)
    p.add_argument("--mooncake", required=True, help="transfer_engine_bench (the wheel's binary)")
    p.add_argument("--device", default="rxe0")
    p.add_argument("--gid-index", type=int, default=1)
    p.add_argument("--ry-args", default="", help="extra railyard initiator arguments")
    p.add_argument("--ry-env", type=env_pairs, default={},
                   help="K=V[,K=V...] added to both railyard processes' environment (e.g. MC_WORKERS_PER_CTX=1)")
    p.add_argument("--agent", help="HOST:PORT of the target-side agent (--two)")
    p.add_argument("--target-ip", default="127.0.0.1")
    p.add_argument("--self-ip", default="127.0.0.1")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("agent")
    p.add_argument("--listen", required=True)
    p.set_defaults(func=cmd_agent)
    p = sub.add_parser("report")
    p.add_argument("--raw", required=True)
    p.add_argument("--json")
    p.add_argument("--host-note", default="")
    p.add_argument("--identity", help="the JSON `identity` wrote (source and binary identities)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("identity")
    p.add_argument("--out", required=True)
    p.add_argument("bins", nargs="*", help="NAME=PATH of each binary the run uses")
    p.set_defaults(func=cmd_identity)
    p = sub.add_parser("selftest")
    p.set_defaults(func=cmd_selftest)
    a = ap.parse_args()
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
