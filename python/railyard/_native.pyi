"""Type stubs of railyard's native module (``railyard._native``)."""

from typing import Dict, List, Mapping, Optional, Tuple, TypedDict, Union

P2PHANDSHAKE: str
MAX_MEMORY_REGIONS: int
ERR_INVALID_ARGUMENT: int
ERR_TOO_MANY_REQUESTS: int
ERR_ADDRESS_NOT_REGISTERED: int
ERR_BATCH_BUSY: int
ERR_DEVICE_NOT_FOUND: int
ERR_ADDRESS_OVERLAPPED: int
ERR_SOCKET: int
ERR_REJECT_HANDSHAKE: int
ERR_ENDPOINT: int
ERR_CONTEXT: int
ERR_MEMORY: int
ERR_NOT_IMPLEMENTED: int

class _TransferEngine:
    """The native base of ``railyard.TransferEngine`` (``railyard/_mooncake.py``):
    ``mooncake.engine.TransferEngine``'s methods, arguments and return codes
    (0 / negative; batch id 0 = failure); its transfer methods are Python
    over :meth:`_transfer`."""

    def __init__(self) -> None: ...
    def initialize(
        self, local_hostname: str, metadata_server: str, protocol: str, device_name: str
    ) -> int:
        """``metadata_server="P2PHANDSHAKE"``, ``protocol="rdma"``; 0 or -1."""
    def get_rpc_port(self) -> int: ...
    def get_local_hostname(self) -> str: ...
    def get_session_id(self) -> str:
        """``"<local_hostname>:<rpc_port>"``: this engine's name for peers."""
    def last_error(self) -> str: ...
    def register_memory(self, buffer_addr: int, capacity: int, location: str = "*") -> int: ...
    def unregister_memory(self, buffer_addr: int) -> int: ...
    def batch_register_memory(
        self, buffer_addresses: List[int], capacities: List[int], location: str = "*"
    ) -> int: ...
    def batch_unregister_memory(self, buffer_addresses: List[int]) -> int: ...
    def allocate_managed_buffer(self, length: int) -> int: ...
    def free_managed_buffer(self, buffer_addr: int, length: int) -> int: ...
    def write_bytes_to_buffer(self, dest_address: int, src: Union[bytes, str], length: int) -> int: ...
    def read_bytes_from_buffer(self, source_address: int, length: int) -> bytes: ...
    def _transfer(
        self,
        method: str,
        target_hostname: str,
        op: str,
        buffers: List[int],
        peer_buffer_addresses: List[int],
        lengths: List[int],
        sync: bool,
        transport_hint: str = "",
    ) -> int:
        """``op`` ``"write"`` or ``"read"``, one batch: ``sync`` → 0 or -1,
        else the batch id (0 = failure); failures logged under ``method``."""
    def transfer_check_status(self, batch_id: int) -> int: ...
    def get_batch_transfer_status(self, batch_ids: List[int]) -> int: ...
    def get_first_buffer_address(self, segment_name: str) -> int: ...
    def close(self) -> None: ...

class Config:
    """The engine configuration, named by its ``MC_*`` variables."""

    def __init__(self, overrides: Optional[Mapping[str, str]] = None, *, use_env: bool = True) -> None: ...
    def as_env(self) -> Dict[str, str]: ...
    @property
    def slice_size(self) -> int: ...
    @property
    def qps_per_endpoint(self) -> int: ...
    @property
    def max_wr(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def dedicated_poller(self) -> bool: ...
    @property
    def gid_index(self) -> int: ...
    @property
    def devices(self) -> List[str]: ...
    @property
    def cc_mode(self) -> str: ...

class TaskStatus:
    """``state``: WAITING, PENDING, COMPLETED, FAILED, TIMEOUT or CANCELED."""

    @property
    def state(self) -> str: ...
    @property
    def transferred_bytes(self) -> int: ...
    @property
    def total_bytes(self) -> int: ...

Transfer = Tuple[str, int, int, int, int]
"""``(op, local, length, segment, remote)``, ``op`` ``"read"`` or ``"write"``."""

# ``_Engine.stats()``: one key per field of the engine's Rust ``EngineStats``
# (nested structs flattened as ``outer_inner``; the per-rail lists hold
# ``rails`` entries). railyard-ffi's tests fail when a field is missing here.
class EngineStats(TypedDict):
    tokens_in_use: int
    tokens_cached: int
    endpoint_outstanding: int
    qp_depth: int
    cq_outstanding: int
    slices_pending: int
    endpoints_live: int
    posts: int
    doorbells: int
    completions: int
    stale_completions: int
    bad_completions: int
    deferrals: int
    avoids: int
    backpressure: int
    parks: int
    parked: int
    unposted: int
    retries: int
    async_events: int
    retired: int
    reclaimed: int
    evictions: int
    fetch_retries: int
    force_flushes: int
    gate_enabled: bool
    gate_admitted: int
    gate_released: int
    gate_in_flight_bytes: int
    gate_acquire_errors: int
    gate_release_errors: int
    gate_epochs: int
    gate_stalled_epochs: int
    gate_route_timeouts: int
    gate_suppressed_timeouts: int
    gate_advisory_pressure_epochs: int
    rails: int
    rail_slices_posted: List[int]
    rail_charged_bytes: List[int]
    rail_accounting_errors: int
    rail_moves: int
    invalid_posts: int
    handshakes_accepted: int
    handshakes_busy: int
    handshakes_malformed: int
    handshakes_timed_out: int
    handshakes_closed: int
    handshakes_replayed: int
    handshakes_failed: int
    mem_regions: int
    mem_pins: int

class _Engine:
    def __init__(
        self, config: Optional[Config] = None, *, listen: str = "127.0.0.1:0", device: Optional[str] = None
    ) -> None: ...
    @property
    def listen_addr(self) -> str: ...
    @property
    def devices(self) -> List[str]: ...
    @property
    def config(self) -> Config: ...
    @property
    def closed(self) -> bool: ...
    def register_address(self, addr: int, length: int) -> None: ...
    def alloc(self, length: int) -> int: ...
    def _deregister_address(self, addr: int) -> None: ...
    def read(self, addr: int, length: int) -> bytes: ...
    def write(self, addr: int, data: bytes) -> None: ...
    def connect(self, peer: str) -> int: ...
    def segment_regions(self, segment: int) -> List[Tuple[int, int]]: ...
    def reconnect(self, segment: int) -> int: ...
    def allocate_batch(self, capacity: int) -> int: ...
    def submit(self, batch: int, transfers: List[Transfer]) -> None: ...
    def task_status(self, batch: int, task: int) -> TaskStatus: ...
    def batch_status(self, batch: int) -> List[TaskStatus]: ...
    def wait(self, batch: int, timeout: Optional[float] = None) -> List[TaskStatus]: ...
    def transfer(self, op: str, local: int, length: int, segment: int, remote: int) -> None: ...
    def cancel_batch(self, batch: int) -> None: ...
    def free_batch(self, batch: int) -> None: ...
    def task_anomaly(self, batch: int, task: int) -> str:
        """NORMAL, CONGESTED, LONG_UNAVAILABLE or UNKNOWN (RFC 4162)."""
    def task_anomaly_detail(self, batch: int, task: int) -> Dict[str, object]: ...
    def consume(self, segment: int, slots: int) -> None:
        """Receiver credit: the application consumed ``slots`` of what ``segment`` wrote."""
        ...
    def credit_stats(self) -> Optional[Dict[str, object]]:
        """Receiver-credit metrics (``policy``, ``sender``, ``receiver``, ``peers``, ...); ``None`` with credit off."""
        ...
    def task_backpressure(self, batch: int, task: int) -> Optional[Dict[str, object]]:
        """``{"source", "peer", "qos_class", "exhausted", "retry_after_us", "fallback_allowed"}`` or ``None``."""
        ...
    def stats(self) -> EngineStats: ...
    def snapshot(self) -> Dict[str, object]:
        """``{"stats": stats(), "routes": [{"route", "device", "health", "generation", "errors", "window_bytes", "in_flight_bytes"}, ...]}``."""
        ...
    def wait_idle(self, timeout: float = 30.0) -> bool: ...
    def close(self) -> None: ...
