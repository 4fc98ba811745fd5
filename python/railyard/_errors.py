"""The exceptions railyard raises.

Every one is a :class:`RailyardError` carrying

* ``kind``: the engine's error kind (the Rust ``EngineError`` variant, e.g.
  ``"MemoryBusy"``, ``"LocalRange"``, ``"Config"``; or ``"Failed"``,
  ``"Timeout"``, ``"Canceled"``, ``"WaitTimeout"`` for a transfer),
* ``code``: the Mooncake error code for it (``ERR_*``, negative),
* ``var``: for configuration errors, the ``MC_*`` variable at fault.

Wrong argument *types* raise ``TypeError`` (or ``OverflowError`` for a
negative address), as any Python function would.
"""

from __future__ import annotations

from typing import Optional


class RailyardError(Exception):
    """Base class of railyard's errors."""

    kind: str = "Unknown"
    code: int = -1
    var: Optional[str] = None


class ConfigError(RailyardError, ValueError):
    """A configuration value is invalid; ``var`` names the ``MC_*`` variable."""


class InvalidArgument(RailyardError, ValueError):
    """Bad input: unknown batch/task/segment/region, zero length, a range
    outside registered memory, overlapping registrations, ..."""


class DeviceError(RailyardError, OSError):
    """No RDMA device, no device of that name, or a verbs call failed."""


class PeerError(RailyardError, ConnectionError):
    """The handshake failed, the peer does not fit, or its segment is closed."""


class BusyError(RailyardError):
    """Still in use: memory that transfers may touch (``MemoryBusy``), or a
    batch with unfinished tasks (``BatchBusy``). Nothing changed; retry
    once they finished."""


class ResourceExhausted(RailyardError):
    """Out of task or slice slots, or of memory-region slots."""


class TransferError(RailyardError):
    """A transfer ended FAILED, TIMEOUT or CANCELED, or a wait timed out."""


class InternalError(RailyardError):
    """Socket/thread setup failed, or something railyard does not support."""


__all__ = [
    "RailyardError",
    "ConfigError",
    "InvalidArgument",
    "DeviceError",
    "PeerError",
    "BusyError",
    "ResourceExhausted",
    "TransferError",
    "InternalError",
]
