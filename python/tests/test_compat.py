"""Compatibility: the same script (compat_script.py) against railyard's
TransferEngine and Mooncake's own wheel (mooncake-transfer-engine-non-cuda,
``mooncake.engine``), switching only the import, in the same guest. Each
engine talks to its own kind; every step's return code / boolean must be
identical.

Needs the Mooncake wheel in the same environment; without it the test
skips, unless RAILYARD_REQUIRE_MOONCAKE=1 (CI), which makes it fail.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.usefixtures("rdma")

SCRIPT = pathlib.Path(__file__).with_name("compat_script.py")


def run(kind):
    env = dict(os.environ)
    env.setdefault("MC_GID_INDEX", "1")  # rxe: the IPv4-mapped RoCE v2 GID
    p = subprocess.run(
        [sys.executable, str(SCRIPT), kind], capture_output=True, text=True, timeout=600, env=env
    )
    steps = [json.loads(l) for l in p.stdout.splitlines() if l.startswith('{"step"')]
    return p.returncode, steps, p.stderr[-4000:]


def test_same_script_same_results_railyard_and_mooncake():
    if importlib.util.find_spec("mooncake") is None:
        if os.environ.get("RAILYARD_REQUIRE_MOONCAKE") == "1":
            pytest.fail("RAILYARD_REQUIRE_MOONCAKE=1 but mooncake (mooncake-transfer-engine-non-cuda) is not installed")
        pytest.skip("SKIP: mooncake-transfer-engine-non-cuda is not installed")
    rc_r, ours, err_r = run("railyard")
    rc_m, theirs, err_m = run("mooncake")
    assert rc_r == 0, err_r
    assert rc_m == 0, err_m
    assert len(ours) >= 35, ours
    sys.stderr.write(f"COMPAT {len(ours)} steps compared, railyard vs mooncake\n")
    for o, t in zip(ours, theirs):
        assert o == t, f"railyard {o} != mooncake {t}"
    assert len(ours) == len(theirs)
    # The script checks real transfers, not only return codes.
    results = dict((s["step"], s["result"]) for s in ours)
    assert results["read back"] is True and results["async read"] is True
    assert results["register overlapping"] == -7 and results["unregister a again"] == -3
