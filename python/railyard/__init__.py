"""railyard from Python: the hot path of an RDMA transfer engine.

Two ways in:

* :class:`TransferEngine`: a drop-in for Mooncake's
  ``mooncake.engine.TransferEngine`` (same methods, arguments and return
  codes: ``0`` / negative), so a connector switches by changing one import::

      from railyard import TransferEngine   # was: from mooncake.engine import TransferEngine

* :class:`Engine`: railyard's own API, with typed exceptions
  (:class:`RailyardError` and subclasses, carrying the engine's error
  ``kind``), buffer-protocol memory (``register(bytearray | memoryview |
  numpy array)``, no copy), the RFC 4162 anomaly queries
  (:meth:`Engine.task_anomaly`, :meth:`Engine.task_anomaly_detail`), the
  stats snapshot and the ``MC_*`` configuration (:class:`Config`).

Every call that waits releases the GIL.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, Optional, Tuple, Union

from . import _errors, _native
from ._errors import (
    BusyError,
    ConfigError,
    DeviceError,
    InternalError,
    InvalidArgument,
    PeerError,
    RailyardError,
    ResourceExhausted,
    TransferError,
)
from ._mooncake import TransferEngine
from ._native import P2PHANDSHAKE, Config, TaskStatus

__all__ = [
    "Engine",
    "TransferEngine",
    "Config",
    "TaskStatus",
    "P2PHANDSHAKE",
]
__all__ += _errors.__all__


def _invalid(kind: str, message: str) -> InvalidArgument:
    e = InvalidArgument(message)
    e.kind = kind
    e.code = _native.ERR_INVALID_ARGUMENT
    return e


class Engine(_native._Engine):
    """railyard's transfer engine.

    ``Engine(config=None, *, listen="127.0.0.1:0", device=None)`` opens the
    device(s) of ``config`` (default: ``Config()``, i.e. the ``MC_*``
    environment; ``device`` overrides ``MC_RDMA_DEVICE``) and starts the
    workers and the handshake listener at ``listen``.

    Memory: :meth:`register` takes any writable, C-contiguous buffer
    (``bytearray``, ``memoryview``, numpy array) without copying and keeps
    it exported (alive, not resizable) until :meth:`deregister`;
    :meth:`alloc` gives engine-owned memory. Peers see regions registered
    before they connect (or after :meth:`reconnect`).

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        config: Optional[Config] = None,
        *,
        listen: str = "127.0.0.1:0",
        device: Optional[str] = None,
    ) -> None:
        # The native __new__ did the work; this only holds the buffers.
        self._held: Dict[int, Tuple[Any, memoryview]] = {}
        self._by_id: Dict[int, int] = {}

    def register(self, buffer: Any) -> int:
        """Registers a writable, C-contiguous buffer for RDMA, without
        copying; returns its address (what transfers name as ``local``).
        The buffer stays exported until :meth:`deregister`: it cannot be
        resized or freed meanwhile."""
        if isinstance(buffer, int):
            raise TypeError("register() takes a buffer; use register_address(addr, length) for raw memory")
        mv = memoryview(buffer)
        if mv.readonly:
            raise _invalid("ReadOnlyBuffer", "register(): the buffer is read-only (RDMA may write to it)")
        if not mv.c_contiguous:
            raise _invalid("NotContiguous", "register(): the buffer is not C-contiguous")
        if mv.nbytes == 0:
            raise _invalid("ZeroLength", "register(): the buffer is empty")
        flat = mv.cast("B") if (mv.format != "B" or mv.ndim != 1) else mv
        held = (ctypes.c_char * flat.nbytes).from_buffer(flat)
        addr = ctypes.addressof(held)
        self.register_address(addr, flat.nbytes)
        self._held[addr] = (held, flat)
        self._by_id[id(buffer)] = addr
        return addr

    def deregister(self, buffer_or_addr: Union[int, Any]) -> None:
        """Deregisters a buffer (the object given to :meth:`register`, or
        its address, or an :meth:`alloc` address). Raises
        :class:`BusyError` (kind ``MemoryBusy``) while transfers may still
        touch it; then nothing changes and the buffer stays exported."""
        if isinstance(buffer_or_addr, int):
            addr = buffer_or_addr
        else:
            found = self._by_id.get(id(buffer_or_addr))
            if found is None:
                raise _invalid("NoSuchRegion", "deregister(): this buffer is not registered with this engine")
            addr = found
        self._deregister_address(addr)
        for k in [k for k, v in self._by_id.items() if v == addr]:
            del self._by_id[k]
        self._release(self._held.pop(addr, None))

    @staticmethod
    def _release(held: Optional[Tuple[Any, memoryview]]) -> None:
        # Drop the ctypes view first (it holds an export of `flat`), then
        # end `flat`'s export of the caller's buffer: resizable again.
        if held is None:
            return
        flat = held[1]
        del held
        try:
            flat.release()
        except BufferError:
            pass  # someone else still holds a view; released with it

    def write_sync(self, segment: int, local: int, remote: int, length: int) -> None:
        """WRITE ``length`` bytes from ``local`` to the peer's ``remote``;
        waits (GIL released). Raises :class:`TransferError` unless it
        completed."""
        self.transfer("write", local, length, segment, remote)

    def read_sync(self, segment: int, local: int, remote: int, length: int) -> None:
        """READ ``length`` bytes of the peer's ``remote`` into ``local``;
        waits (GIL released)."""
        self.transfer("read", local, length, segment, remote)

    def close(self) -> None:
        """Shuts the engine down (every registration released), then lets
        go of the registered buffers."""
        super().close()
        held = getattr(self, "_held", None)
        while held:
            self._release(held.popitem()[1])
        if held is not None:
            self._by_id.clear()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Before the instance dict (holding the buffers) is cleared, so no
        # buffer is released while the NIC may still touch it.
        try:
            self.close()
        except Exception:
            pass
