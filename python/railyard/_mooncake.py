"""``railyard.TransferEngine``: Mooncake's ``mooncake.engine.TransferEngine``
(same methods, arguments and return codes) over railyard's engine.

The native base (``railyard._native._TransferEngine``) holds the engine and
every method but the transfers; each Mooncake-named transfer method here is
one call of its ``_transfer(method, target_hostname, op, buffers,
peer_buffer_addresses, lengths, sync, transport_hint)``, which waits with
the GIL released when ``sync``.
"""

from __future__ import annotations

from typing import List

from . import _native


class TransferEngine(_native._TransferEngine):
    """A Mooncake-compatible transfer engine (drop-in for
    ``mooncake.engine.TransferEngine``): its methods, arguments and return
    codes (0 / negative; batch id 0 = failure)::

        from railyard import TransferEngine      # was: from mooncake.engine import TransferEngine
        te = TransferEngine()
        assert te.initialize("10.0.0.1", "P2PHANDSHAKE", "rdma", "mlx5_0") == 0
        peer = f"10.0.0.2:{peer_rpc_port}"
        ret = te.transfer_sync_write(peer, local_addr, remote_addr, 65536)
    """

    __slots__ = ()

    def transfer_sync_write(
        self, target_hostname: str, buffer: int, peer_buffer_address: int, length: int, transport_hint: str = ""
    ) -> int:
        """WRITE ``length`` bytes from local ``buffer`` to the peer's
        ``peer_buffer_address``; waits. 0, or -1."""
        return self._transfer(
            "transfer_sync_write", target_hostname, "write", [buffer], [peer_buffer_address], [length], True, transport_hint
        )

    def transfer_sync_read(
        self, target_hostname: str, buffer: int, peer_buffer_address: int, length: int, transport_hint: str = ""
    ) -> int:
        """READ ``length`` bytes of the peer's ``peer_buffer_address`` into
        local ``buffer``; waits. 0, or -1."""
        return self._transfer(
            "transfer_sync_read", target_hostname, "read", [buffer], [peer_buffer_address], [length], True, transport_hint
        )

    def batch_transfer_sync_write(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """WRITEs as one batch; waits for all. 0, or -1."""
        return self._transfer(
            "batch_transfer_sync_write", target_hostname, "write", buffers, peer_buffer_addresses, lengths, True, transport_hint
        )

    def batch_transfer_sync_read(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """READs as one batch; waits for all. 0, or -1."""
        return self._transfer(
            "batch_transfer_sync_read", target_hostname, "read", buffers, peer_buffer_addresses, lengths, True, transport_hint
        )

    def batch_transfer_async_write(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """Submits WRITEs as one batch; returns its id (non-zero), or 0.
        Wait with ``get_batch_transfer_status``."""
        return self._transfer(
            "batch_transfer_async_write", target_hostname, "write", buffers, peer_buffer_addresses, lengths, False, transport_hint
        )

    def batch_transfer_async_read(
        self,
        target_hostname: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        transport_hint: str = "",
    ) -> int:
        """Submits READs as one batch; returns its id (non-zero), or 0."""
        return self._transfer(
            "batch_transfer_async_read", target_hostname, "read", buffers, peer_buffer_addresses, lengths, False, transport_hint
        )

    def transfer_submit_write(
        self, target_hostname: str, buffer: int, peer_buffer_address: int, length: int, transport_hint: str = ""
    ) -> int:
        """Submits one WRITE; returns its batch id, or 0. Poll with
        ``transfer_check_status``."""
        return self._transfer(
            "transfer_submit_write", target_hostname, "write", [buffer], [peer_buffer_address], [length], False, transport_hint
        )
