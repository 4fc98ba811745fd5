"""Shared fixtures of railyard's Python tests.

Real-verbs tests need an RDMA device (Soft-RoCE ``rxe0`` in the qemu guest
of ``ci/python.sh``). Without one they skip with a message, unless
``RAILYARD_REQUIRE_RDMA=1`` (CI inside the guest), which makes a missing
device a failure.
"""

import os
import random
import sys

import pytest

import railyard

REQUIRE = os.environ.get("RAILYARD_REQUIRE_RDMA") == "1"
DEVICE = os.environ.get("RAILYARD_RDMA_DEVICE", "rxe0")


def _probe():
    try:
        e = railyard.Engine(device=os.environ.get("RAILYARD_RDMA_DEVICE"))
    except railyard.DeviceError as err:
        return f"no RDMA device ({err})"
    e.close()
    return None


_WHY_NOT = _probe()


@pytest.fixture(scope="session")
def rdma():
    """Skips (or, with RAILYARD_REQUIRE_RDMA=1, fails) without a device."""
    if _WHY_NOT is not None:
        if REQUIRE:
            pytest.fail(f"RAILYARD_REQUIRE_RDMA=1 but {_WHY_NOT}")
        pytest.skip(f"SKIP: {_WHY_NOT}: run inside the Soft-RoCE guest (ci/python.sh)")
    sys.stderr.write("RAN real-verbs test\n")


@pytest.fixture
def rng():
    return random.Random(4162)


def random_bytes(rng, n):
    return rng.getrandbits(8 * n).to_bytes(n, "little") if n else b""


def assert_idle(engine, who="engine"):
    """Every leak gauge back to zero (tokens, posts, QP depth, CQ, slices,
    memory pins, CC in-flight bytes and permits)."""
    assert engine.wait_idle(60), f"{who} never went idle: {engine.stats()}"
    s = engine.stats()
    for k in (
        "tokens_in_use",
        "endpoint_outstanding",
        "qp_depth",
        "cq_outstanding",
        "slices_pending",
        "mem_pins",
        "bad_completions",
        "gate_in_flight_bytes",
        "rail_accounting_errors",
    ):
        assert s[k] == 0, f"{who}: {k}={s[k]}: {s}"
    assert s["gate_admitted"] == s["gate_released"], f"{who}: CC permits {s}"
    # Cached free tokens are not a leak, but they are bounded (32 per worker,
    # at most 64 workers per device).
    assert 0 <= s["tokens_cached"] <= 32 * 64 * 8, f"{who}: tokens_cached {s}"
    assert all(v == 0 for v in s["rail_charged_bytes"]), f"{who}: rail charges {s}"
    return s
