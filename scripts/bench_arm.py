#!/usr/bin/env python3
"""One benchmark arm inside a Soft-RoCE guest, shared by bench_chains.py and
bench_signal.py: a target process and an initiator process on one device
(loopback), either perftest's ib_<op>_bw or `railyard bench` in Mooncake's
bench shape (batches of 128, one in flight per thread, 64 MiB per side).
A benchmark helper, not a test."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# listening() reads /proc, never a probe connection: perftest's server
# takes the first connection as its client.
from bench_peers import listening, parse_perftest, parse_railyard  # noqa: E402,F401


def run(argv, env, log, timeout):
    """Runs argv to completion with env added, output to log: (rc, output)."""
    with open(log, "w") as f:
        p = subprocess.run(argv, env={**os.environ, **env}, stdout=f, stderr=subprocess.STDOUT,
                           timeout=timeout, check=False)
    with open(log) as f:
        return p.returncode, f.read()


def wait_listen(port, limit=30):
    """Waits until something listens on the TCP port (at most limit seconds)."""
    t0 = time.monotonic()
    while not listening(port) and time.monotonic() - t0 < limit:
        time.sleep(0.05)


def _stop(srv):
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()


def perftest(op, size, secs, device, qps, port, logs):
    """ib_<op>_bw -q qps: the parsed result ({mib_per_s, mops}) or None."""
    args = [f"ib_{op}_bw", "-d", device, "-x", "1", "-q", str(qps), "-s", str(size),
            "-D", str(secs), "-p", str(port), "-F"]
    srv = subprocess.Popen(args, stdout=open(f"{logs}-target.log", "w"), stderr=subprocess.STDOUT)
    wait_listen(port)
    time.sleep(0.2)
    rc, text = run(args + ["127.0.0.1"], {}, f"{logs}-initiator.log", secs + 120)
    _stop(srv)
    return parse_perftest(size, secs)(text) if rc == 0 else None


def railyard(exe, env, op, size, secs, threads, device, qps, port, logs):
    """`railyard bench` target + initiator with env added (e.g. MC_ADAPTIVE_CC_MODE):
    (parsed result, the initiator's JSON results[0] with the engine's counts),
    or (None, None)."""
    srv = subprocess.Popen([exe, "bench", "-d", device, "-x", "1", "--listen", "127.0.0.1",
                            "-p", str(port), "--quiet"], env={**os.environ, **env},
                           stdout=open(f"{logs}-target.log", "w"), stderr=subprocess.STDOUT)
    wait_listen(port)
    init = [exe, "bench", "-d", device, "-x", "1", "-q", str(qps), "-s", str(size),
            "--op", op, "-D", str(secs), "--threads", str(threads), "--batch_size", "128",
            "--depth", "1", "--buffer_size", "64M", "--json", "--quiet", f"127.0.0.1:{port}"]
    rc, text = 1, ""
    for _ in range(50):  # listening() can see the socket a moment before accept
        rc, text = run(init, env, f"{logs}-initiator.log", secs + 120)
        if rc == 0 or "onnection refused" not in text:
            break
        time.sleep(0.1)
    _stop(srv)
    res = parse_railyard(text) if rc == 0 else None
    if not res:
        return None, None
    doc = json.loads([x for x in text.splitlines() if x.startswith("{")][-1])["results"][0]
    return res, doc
