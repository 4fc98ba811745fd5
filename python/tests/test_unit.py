"""Tests that need no RDMA device: configuration errors, bad arguments,
Mooncake's return codes before/without an engine, wrong types, and what
the installed package ships (stubs, py.typed)."""

import os
import pathlib

import pytest

import railyard
from railyard import _native


def test_config_reads_mc_variables_and_round_trips():
    c = railyard.Config({"MC_SLICE_SIZE": "131072", "MC_NUM_QP_PER_EP": "4", "MC_ADAPTIVE_CC_MODE": "enforce",
                         "MC_SIGNAL_INTERVAL": "16"})
    assert c.slice_size == 131072
    assert c.qps_per_endpoint == 4
    assert c.cc_mode == "enforce"
    env = c.as_env()
    assert env["MC_SLICE_SIZE"] == "131072"
    assert env["MC_SIGNAL_INTERVAL"] == "16"
    assert railyard.Config(env, use_env=False) == c
    assert railyard.Config(use_env=False) != c


def test_config_from_environment(monkeypatch):
    monkeypatch.setenv("MC_MAX_WR", "512")
    monkeypatch.setenv("MC_RDMA_DEVICE", "rxe0,rxe1")
    c = railyard.Config()
    assert c.max_wr == 512
    assert c.devices == ["rxe0", "rxe1"]
    assert railyard.Config({"MC_MAX_WR": "64"}).max_wr == 64, "overrides win over the environment"
    assert railyard.Config(use_env=False).max_wr == 256


@pytest.mark.parametrize(
    "var,value",
    [
        ("MC_SLICE_SIZE", "abc"),
        ("MC_SLICE_SIZE", "0"),
        ("MC_NUM_QP_PER_EP", "65"),
        ("MC_RDMA_DEDICATED_POLLER", "maybe"),
        ("MC_GID_INDEX", "256"),
        ("MC_RDMA_DEVICE", "rxe0,,rxe1"),
        ("MC_ADAPTIVE_CC_MODE", "fast"),
    ],
)
def test_bad_config_is_a_config_error_naming_the_variable(var, value):
    with pytest.raises(railyard.ConfigError) as e:
        railyard.Config({var: value}, use_env=False)
    assert e.value.var == var
    assert e.value.kind == "Config"
    assert e.value.code == _native.ERR_INVALID_ARGUMENT
    assert var in str(e.value)
    assert isinstance(e.value, ValueError)


def test_non_mc_override_is_refused():
    with pytest.raises(railyard.InvalidArgument):
        railyard.Config({"SLICE_SIZE": "1"})


def test_bad_environment_fails_engine_creation(monkeypatch):
    monkeypatch.setenv("MC_SLICE_SIZE", "-1")
    with pytest.raises(railyard.ConfigError) as e:
        railyard.Engine()
    assert e.value.var == "MC_SLICE_SIZE"
    te = railyard.TransferEngine()
    assert te.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == -1
    assert "MC_SLICE_SIZE" in te.last_error()


def test_bad_listen_address_is_invalid_argument():
    with pytest.raises(railyard.InvalidArgument):
        railyard.Engine(listen="not an address")


@pytest.mark.parametrize(
    "server,protocol,what",
    [
        ("etcd://127.0.0.1:2379", "rdma", "metadata server"),
        ("redis://x", "rdma", "metadata server"),
        ("http://x/metadata", "rdma", "metadata server"),
        ("P2PHANDSHAKE", "tcp", "protocol"),
        ("P2PHANDSHAKE", "nvlink", "protocol"),
    ],
)
def test_unsupported_metadata_or_protocol_returns_minus_one(server, protocol, what, caplog):
    te = railyard.TransferEngine()
    assert te.initialize("127.0.0.1", server, protocol, "") == -1
    assert what in te.last_error()
    assert any(what in r.getMessage() for r in caplog.records if r.name == "railyard"), "logged"
    assert te.get_rpc_port() == -1


def test_bad_local_hostname_returns_minus_one():
    te = railyard.TransferEngine()
    assert te.initialize("127.0.0.1:notaport", "P2PHANDSHAKE", "rdma", "") == -1
    assert te.initialize("", "P2PHANDSHAKE", "rdma", "") == -1


def test_uninitialized_transfer_engine_returns_mooncake_failure_values():
    te = railyard.TransferEngine()
    assert te.get_rpc_port() == -1
    assert te.get_local_hostname() == ""
    assert te.register_memory(4096, 4096) == -1
    assert te.unregister_memory(4096) == -1
    assert te.batch_register_memory([4096], [4096]) == -1
    assert te.allocate_managed_buffer(4096) == 0
    assert te.free_managed_buffer(4096, 4096) == -1
    assert te.transfer_sync_write("127.0.0.1:1", 4096, 4096, 8) == -1
    assert te.batch_transfer_sync_read("127.0.0.1:1", [4096], [4096], [8]) == -1
    assert te.batch_transfer_async_write("127.0.0.1:1", [4096], [4096], [8]) == 0
    assert te.get_batch_transfer_status([1]) == -1
    assert te.transfer_check_status(1) == -1
    assert te.get_first_buffer_address("127.0.0.1:1") == 0
    assert te.write_bytes_to_buffer(4096, b"x", 1) == -1
    with pytest.raises(railyard.InvalidArgument):
        te.read_bytes_from_buffer(4096, 1)
    te.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda te: te.initialize(1, "P2PHANDSHAKE", "rdma", ""),
        lambda te: te.initialize("127.0.0.1", None, "rdma", ""),
        lambda te: te.register_memory("0x1000", 4096),
        lambda te: te.register_memory(-1, 4096),
        lambda te: te.batch_register_memory([1.5], [4096]),
        lambda te: te.batch_transfer_sync_write("h:1", "not a list", [1], [1]),
        lambda te: te.batch_transfer_async_read("h:1", [1], [None], [1]),
        lambda te: te.get_batch_transfer_status(7),
        lambda te: te.write_bytes_to_buffer(4096, 12345, 1),
        lambda te: te.transfer_sync_write("h:1", 1, 1),
    ],
)
def test_wrong_types_raise_type_errors_not_crashes(call):
    with pytest.raises((TypeError, OverflowError)):
        call(railyard.TransferEngine())


def test_exception_hierarchy():
    assert issubclass(railyard.ConfigError, railyard.RailyardError)
    assert issubclass(railyard.InvalidArgument, ValueError)
    assert issubclass(railyard.DeviceError, OSError)
    assert issubclass(railyard.PeerError, ConnectionError)
    for cls in (railyard.BusyError, railyard.ResourceExhausted, railyard.TransferError, railyard.InternalError):
        assert issubclass(cls, railyard.RailyardError)


def test_mooncake_error_codes_are_mooncakes():
    assert (_native.ERR_INVALID_ARGUMENT, _native.ERR_ADDRESS_NOT_REGISTERED) == (-1, -3)
    assert (_native.ERR_BATCH_BUSY, _native.ERR_ADDRESS_OVERLAPPED) == (-4, -7)
    assert railyard.P2PHANDSHAKE == "P2PHANDSHAKE"


def test_the_package_ships_stubs_and_is_installed():
    pkg = pathlib.Path(railyard.__file__).parent
    assert (pkg / "py.typed").exists()
    assert (pkg / "_native.pyi").exists()
    # CI runs these tests from an installed wheel, not the build tree.
    if os.environ.get("RAILYARD_EXPECT_INSTALLED") == "1":
        assert "site-packages" in str(pkg), pkg


def test_public_items_have_docstrings():
    for name in railyard.__all__:
        obj = getattr(railyard, name)
        if isinstance(obj, str):
            continue
        assert obj.__doc__, name
    for m in ("initialize", "register_memory", "transfer_sync_write", "get_batch_transfer_status"):
        assert getattr(railyard.TransferEngine, m).__doc__, m
    for m in ("register", "deregister", "task_anomaly", "task_anomaly_detail", "stats", "submit"):
        assert getattr(railyard.Engine, m).__doc__, m
