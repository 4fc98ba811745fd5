//! The transfer engine: Mooncake-like batches of READ/WRITE transfers over
//! RC QPs, with every work request owned through `railyard-core`'s
//! completion-ownership protocol (RFC 3136).
//!
//! ```text
//!  submit(batch, transfers)          worker (posts shard s)                 poller (CQ of shard s)
//!  ───────────────────────           ───────────────────────                ───────────────────────
//!  validate ranges, cut slices  ──►  HotPath::post(slice, path)               poll CQ → wr_id, status
//!  (64 KiB, tail rule), open           endpoint, rail, CC, token → wr_id    HotPath::complete(wr_id, status)
//!  slice attempts, queue them        ibv_post_send(chain)                     classified once, holds released
//!                                    bad_wr tail → HotPath::unposted          settle task / re-queue retry
//! ```
//!
//! * **API**: [`Engine::new`], [`Engine::alloc_memory`] /
//!   [`Engine::register_memory`], [`Engine::open_segment`],
//!   [`Engine::allocate_batch`], [`Engine::submit`],
//!   [`Engine::task_status`], [`Engine::cancel_batch`],
//!   [`Engine::deregister_memory`] (refused while transfers may touch the
//!   region: `memory.rs`),
//!   [`Engine::free_batch`], [`Engine::task_anomaly`] /
//!   [`Engine::task_anomaly_detail`] (RFC 4162 task evidence).
//! * **Where things are**, from the bottom up (a file imports only files
//!   listed before it):
//!   - the vocabulary: `types.rs` (ids, [`Transfer`], task state and
//!     status, the shared limits), `error.rs` ([`EngineError`],
//!     [`ConfigError`]), `stats.rs` ([`EngineStats`]), `config.rs`
//!     ([`EngineConfig`] and its `MC_*` variables, receiver credit's
//!     [`CreditConfig`] included), `topology.rs` (shard/worker index
//!     arithmetic), and the self-contained pieces `cc_gate.rs`, `park.rs`,
//!     `chains.rs`, `signal.rs`, `waiters.rs`, `rail_diag.rs`,
//!     `fault.rs` (fault-injection state);
//!   - the parts of the shared state, each owning its state with one impl:
//!     `memory.rs` (registered regions and their pins), `registry.rs`
//!     (segments, QP numbers, route domains), `tables.rs` (slices, tasks,
//!     batches, task accounting), `telemetry.rs` (counters),
//!     `lifecycle.rs` (run state), `credit/` (receiver credit: negotiation;
//!     `plane.rs` allocator, ledger, control channels), `fabric.rs`
//!     (devices, shards, QPs, worker wake-ups), `hotpath.rs` (the composed
//!     hot path with the posts' memory pins);
//!   - `shared.rs` (`Shared`: the parts together, and
//!     what needs several of them: building the engine, settling and
//!     re-queueing a slice);
//!   - the paths, functions of the shared state: `observe.rs` (stats,
//!     logging targets, the health watch, [`Engine::snapshot`]),
//!     `submit.rs` (validate → reserve → describe → enqueue), `connect/`
//!     (handshake sides; `reconnect.rs`: retire, reconnect, retries;
//!     `evict.rs`: the endpoint store's eviction of the least recently
//!     used idle segment), `reclaim.rs` (reclaim passes, forced flush),
//!     `completion.rs` (where a completion lands), `worker.rs` (post and
//!     poll), `control.rs` (monitor, async events, credit, listener);
//!   - this file, the façade: [`Engine`] and the public re-exports, and
//!     above it only `inject.rs` (the fault-injection hooks).
//! * **Addresses** are Mooncake-style absolute virtual addresses: a
//!   transfer's `local` lies in memory registered with this engine, and
//!   `remote` in one region the peer exported at handshake time
//!   ([`Engine::segment_regions`]).
//! * **Slicing** follows [`config::slice_count`]: full `slice_size` slices
//!   and one tail slice carrying the remainder.
//! * **Ownership**: a slice's `wr_id` is a token from the core pool; the
//!   endpoint generation and QP depth are admitted by `HotPath::post`; a
//!   completion resolves through `HotPath::complete(wr_id, ..)` only, never a
//!   pointer; the unposted tail of a `bad_wr` chain is released with
//!   `HotPath::unposted` (and only it).
//! * **Token caches**: each worker thread claims and returns tokens through
//!   its own `TokenCache` (`HotPath::post_via` / `complete_via` /
//!   `unposted_via`): a dedicated poller's completions refill its cache,
//!   which returns whole batches that the posters' caches refill from. At
//!   most 32 free tokens per worker are cached, only when the pool
//!   (`max_inflight`) has at least 64 per worker; a claim that starves
//!   while other caches hold free tokens parks its slice and makes every
//!   cache return its tokens (at its next call, or its idle round; a
//!   sleeping worker's cache is empty), and the return moves the release
//!   stamp that wakes the slice. `EngineStats::tokens_in_use` counts live
//!   attempts only; `tokens_cached` is the cached free tokens (0 after
//!   shutdown: every cache is flushed when its worker exits).
//! * **Workers** ([`WorkerModel`]): shared (default; worker `i` posts and
//!   polls shard `i`) or dedicated poller (`MC_RDMA_DEDICATED_POLLER=1`).
//!   Plus: a monitor (reclaim, forced flush, task timeouts), an async-event
//!   thread and the handshake listener.
//! * **Teardown** of an endpoint goes through `EndpointTable::retire` only
//!   (CQ error, async event, shutdown). Its QPs are moved to ERR when the
//!   drain times out and destroyed only when crossbeam-epoch drops the
//!   endpoint's resource.
//! * **The composed hot path** (`railyard_core::completion::HotPath`, the
//!   same composition the simulator and the C ABI use): every post and
//!   every completion go through it; its layers are the rail selector and
//!   [`CcGate`] (the RFC 4162 controller, `MC_ADAPTIVE_CC_*`, off by
//!   default), admitted right before `ibv_post_send`. A completion is
//!   classified once, in core, and core's one WC mapping decides settle /
//!   retry. The monitor runs the control epoch every tick. Route domains:
//!   one per (local device, remote NIC), see [`CcGate`].
//!
//! * **Rails** (several devices, RFC 4534): `MC_RDMA_DEVICE=rxe0,rxe1`
//!   (or [`EngineConfig::devices`]) opens every device with its own
//!   context, PD, CQs and worker shards (`MC_WORKERS_PER_CTX` workers per
//!   device). Memory is registered on every device (per-device lkey/rkey);
//!   the handshake descriptor carries one NIC entry per device
//!   ([`PeerDescriptor`](railyard_core::wire::handshake::PeerDescriptor), wire version 2), and `open_segment` connects
//!   local device `i` to the peer's NIC `i` for `i < min(ours, theirs)`,
//!   one endpoint per rail. `submit` plans each transfer's runs of
//!   [`SLICES_PER_QP_RUN`] slices over the segment's active rails with
//!   `core::rail::Selector::plan` (`plan_rails`: inverse scores; a
//!   device or route the controller quarantined is avoided); a worker
//!   charges the slice's actual bytes to its device right after the gate
//!   admits it and records the charge in the `TokenRecord`
//!   (`HOLDS_RAIL_CHARGE`, plus `HOLDS_RAIL_PEER_CHARGE` with the peer
//!   ledger on); it is released exactly once with the permit, wherever the
//!   token ends (completion of any status, flush, `bad_wr` tail, refused
//!   post; canceled or timed-out attempts release when their completion
//!   arrives). [`EngineStats`] has slices posted and charged bytes per rail.
//!   With one device everything behaves as before (one rail, no planning).
//!   Read-only selector diagnostics (`rail_diag.rs`, for RFC 4534's
//!   evaluation): [`Engine::rail_counters`], [`Engine::rail_nic_view`],
//!   [`Engine::rail_peer_view`], [`Engine::task_rail_slices`] and, with
//!   `rail.trace`, [`Engine::take_rail_traces`] (one sample-age trace per
//!   planned transfer, for the TTL calibration). `MC_RAIL_*` set the
//!   selector from the environment (see [`EngineConfig`]).
//! * **Deadlines** (`TIMEOUT`) are RFC 4162 software route timeouts: fed
//!   to the controller and recorded as task evidence (see
//!   `control::expire_tasks`).
//! * **Async events** are read per device and land at their classified
//!   scope: core's [`event_action`] says what happens to endpoints and
//!   `Controller::apply_event` applies the controller side; the engine
//!   narrows them (`control::event_targets`): QP → its endpoint and route;
//!   CQ → only the endpoints with a QP on that CQ, with fatal feedback to
//!   their routes; port / device → that device's endpoints and device
//!   domain (one port per device).
//!
//! * **Reconnect** (`connect/reconnect.rs`): the retired endpoints of a segment
//!   this engine opened are replaced (automatically once after a CQ error
//!   or a QP-scope event, or by [`Engine::reconnect_segment`]): the
//!   handshake runs again for every rail, each rail's route moves to a new
//!   generation, and waiting retries move to the new endpoints. A retry
//!   whose rail is gone while another rail of the segment is live moves
//!   there (rail failover, `connect::re_rail`).
//!
//! * **Receiver credit** (RFC 2849, `credit/`, off by default,
//!   `MC_RECEIVER_CREDIT=off|optional|required`): negotiated in the
//!   handshake descriptor; an `Active` segment keeps its handshake TCP
//!   connection as the typed credit control channel; direct WRITEs reserve
//!   bytes + request slot + consumer slot in the composed hot path (READs
//!   never); the receiving application returns consumer slots with
//!   [`Engine::consume`]; [`Engine::credit_stats`],
//!   [`Engine::task_backpressure`], [`Engine::segment_credit`].
//!
//! Rails start with equal nominal
//! rates ([`EngineConfig::rail_nominal_bps`], default [`NOMINAL_RAIL_BPS`];
//! the port's link rate is not queried) and the completion EWMA learns the
//! rest. The peer ledger (RFC 4534 V0–V3)
//! needs `railyard-core`'s `peer-feedback` feature, which `railyard-verbs`
//! does not enable by default (`EngineConfig::rail.peer_accounting` is
//! refused without it). Automatic reconnect is one attempt per
//! retirement, without backoff.

mod cc_gate;
mod chains;
mod completion;
mod config;
mod connect;
mod control;
mod credit;
mod error;
mod fabric;
mod fault;
mod hotpath;
#[cfg(feature = "fault-injection")]
mod inject;
mod lifecycle;
mod memory;
mod observe;
mod park;
mod rail_diag;
mod reclaim;
mod registry;
mod shared;
mod signal;
mod stats;
mod submit;
mod tables;
mod telemetry;
mod topology;
mod types;
mod waiters;
mod waiters_sync;
mod worker;

pub use cc_gate::{CcGate, GateStats};
pub use config::{
    slice_count, CreditConfig, CreditPolicy, EngineConfig, WorkerModel, CREDIT_VERSIONS,
    DEFAULT_SIGNAL_INTERVAL, NOMINAL_RAIL_BPS,
};
pub use credit::{negotiate, CreditFaults, CreditStats, LinkPhase, Negotiated, PeerCredit};
pub use error::{ConfigError, EngineError};
#[cfg(feature = "fault-injection")]
pub use fault::TraceEvent;
pub use observe::{EngineSnapshot, RouteState};
pub use rail_diag::{RailTraces, RAIL_TRACE_CAPACITY};
// The endpoint side of async events is core's (one mapping for every integrator).
pub use railyard_core::cc::{
    CcConfig, CcStats, DomainSnapshot, DrainSignal, Health, Mode as CcMode, SoftwareProvider,
};
pub use railyard_core::classify::{event_action, EventAction};
pub use railyard_core::credit::{BackpressureInfo, PressureSource, Resource};
pub use railyard_core::evidence::{AnomalyState, Detail as AnomalyDetail};
pub use railyard_core::rail::{NicView, PeerView, RailConfig, RailCounters, Variant};
pub use railyard_core::token::TokenRecord;
pub use registry::SegmentInfo;
pub use stats::{EngineStats, HandshakeStats};
pub use types::{
    BatchId, Op, SegmentId, TaskState, TaskStatus, Transfer, MAX_MEMORY_REGIONS, MAX_RAILS,
    SLICES_PER_QP_RUN,
};

use crate::wire::SegmentDescriptor;
use crate::{Access, MemoryRegion};
use fabric::Fabric;
use memory::MemEntry;
use railyard_core::endpoint::RetireReason;
use shared::Shared;
use std::fmt;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tables::TaskCell;

/// A transfer engine on one or more RDMA devices (rails). Dropping it shuts
/// it down cleanly (see [`Engine::shutdown`]).
pub struct Engine {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    listen: SocketAddr,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("devices", &self.devices())
            .field("listen", &self.listen)
            .field("model", &self.shared.cfg.worker_model)
            .finish()
    }
}

impl Engine {
    /// Opens the device and starts the workers, the monitor, the
    /// async-event thread and the handshake listener, with the congestion
    /// controller of `cfg.cc` ([`CcGate`], `max_endpoints` route domains
    /// per device). A `cfg.cc` that does not validate leaves the controller
    /// off ([`Engine::cc_config_error`] says why).
    ///
    /// ```
    /// use railyard_verbs::engine::{Engine, EngineConfig, EngineError};
    ///
    /// // A configuration that does not validate is refused before any device
    /// // is opened, naming the variable (or field).
    /// let bad = EngineConfig { slice_size: 0, ..EngineConfig::default() };
    /// match Engine::new(bad) {
    ///     Err(EngineError::Config(e)) => assert_eq!(e.var, "MC_SLICE_SIZE"),
    ///     other => panic!("expected a configuration error, got {other:?}"),
    /// }
    ///
    /// // Without an RDMA device (or access to one) the error is typed too.
    /// match Engine::new(EngineConfig::default()) {
    ///     Ok(engine) => println!("{} listening on {}", engine.device(), engine.listen_addr()),
    ///     Err(EngineError::Verbs(e)) => println!("no engine on this host: {e}"),
    ///     Err(e) => panic!("unexpected: {e}"),
    /// }
    /// ```
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        cfg.validate().inspect_err(|e| {
            tracing::warn!(target: "railyard::config", var = e.var, value = %e.value,
                expected = e.expected, "engine configuration refused");
        })?;
        let (devs, max_cqe) = Fabric::open_devices(&cfg)?;
        let shared = Shared::new(cfg, devs, max_cqe)?;
        let listener = TcpListener::bind(shared.cfg.listen).map_err(EngineError::Io)?;
        listener.set_nonblocking(true).map_err(EngineError::Io)?;
        let listen = listener.local_addr().map_err(EngineError::Io)?;
        let threads = control::spawn_all(&shared, listener).map_err(EngineError::Io)?;
        Ok(Self {
            shared,
            threads,
            listen,
        })
    }

    /// The configuration in use.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let cfg = engine.config();
    /// println!("{} B slices, {} QPs per endpoint, {} rail(s)", cfg.slice_size, cfg.qps_per_endpoint, cfg.rails());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn config(&self) -> &EngineConfig {
        &self.shared.cfg
    }

    /// Why the configured congestion controller stayed off (RFC 4162: an
    /// invalid configuration leaves it off rather than partially
    /// defaulted), or `None` if it runs as configured.
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{CcMode, Engine, EngineConfig};
    ///
    /// let mut cfg = EngineConfig::from_env()?;
    /// cfg.cc.mode = CcMode::Enforce;
    /// cfg.cc.min_window_bytes = cfg.cc.max_window_bytes + 1; // does not validate
    /// let engine = Engine::new(cfg)?; // starts, with the controller off
    /// assert!(engine.cc_config_error().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cc_config_error(&self) -> Option<railyard_core::cc::ConfigError> {
        self.shared.cc_error
    }

    /// Where peers reach this engine's handshake listener.
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// let mut cfg = EngineConfig::from_env()?;
    /// cfg.listen = "0.0.0.0:18515".parse()?;
    /// let engine = Engine::new(cfg)?;
    /// // Peers call `open_segment(("this-host", 18515))`.
    /// assert_eq!(engine.listen_addr().port(), 18515);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// The first device's name (rail 0).
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// let cfg = EngineConfig { device: Some("mlx5_0".into()), ..EngineConfig::from_env()? };
    /// let engine = Engine::new(cfg)?;
    /// assert_eq!(engine.device(), "mlx5_0");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn device(&self) -> &str {
        self.shared.fabric.devs[0].ctx.name()
    }

    /// Every device's name, in rail order.
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// let cfg = EngineConfig::from_lookup(|k| (k == "MC_RDMA_DEVICE").then(|| "mlx5_0,mlx5_1".into()))?;
    /// let engine = Engine::new(cfg)?;
    /// assert_eq!(engine.devices(), ["mlx5_0", "mlx5_1"]); // rail 0, rail 1
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn devices(&self) -> Vec<&str> {
        self.shared
            .fabric
            .devs
            .iter()
            .map(|d| d.ctx.name())
            .collect()
    }

    /// Number of rails of `seg` (local device `i` ↔ peer NIC `i`).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let seg = engine.open_segment("10.0.0.2:18515")?;
    /// // As many rails as both sides have devices, at most.
    /// assert!(engine.segment_rails(seg)? <= engine.devices().len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segment_rails(&self, seg: SegmentId) -> Result<usize, EngineError> {
        self.shared.registry.segment_rails(seg)
    }

    /// Registers the region `first` (already registered on device 0) on
    /// every other device and records it.
    ///
    /// # Safety
    ///
    /// `first`'s memory must stay valid until the returned entry's last
    /// registration is dropped (it is: `MemEntry` drops `first` last).
    #[allow(unsafe_code)]
    unsafe fn add_region(&self, first: MemoryRegion) -> Result<Arc<MemoryRegion>, EngineError> {
        let first = Arc::new(first);
        let mut entry = MemEntry {
            regs: vec![first.clone()],
        };
        for d in &self.shared.fabric.devs[1..] {
            // SAFETY: the caller's promise; the buffer belongs to `first`
            // (or to the caller) and outlives this registration, which
            // `MemEntry::drop` releases before `first`.
            let mr = unsafe {
                MemoryRegion::register(
                    &d.pd,
                    first.addr() as *mut u8,
                    first.len(),
                    Access::ALL_RDMA,
                )
            }?;
            entry.regs.push(Arc::new(mr));
        }
        // On an overlap or a full table the entry is dropped here, which
        // deregisters what was registered above.
        self.shared.mem.insert(entry)?;
        Ok(first)
    }

    /// Allocates and registers `len` zeroed, page-aligned bytes owned by the
    /// engine (Mooncake's `registerLocalMemory` for engine-owned buffers),
    /// on every device (each device has its own lkey/rkey). It stays
    /// registered until [`deregister_memory`](Self::deregister_memory)
    /// (refused while transfers may touch it) or the engine is dropped.
    /// Peers see it if it is registered before they connect. The returned
    /// region is the device-0 registration.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let mem = engine.alloc_memory(64 << 20)?; // 64 MiB, zeroed, on every device
    /// mem.write_at(0, b"payload")?;
    /// println!("local buffer {:#x}..+{}, rkey {:#x}", mem.addr(), mem.len(), mem.rkey());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(unsafe_code)]
    pub fn alloc_memory(&self, len: usize) -> Result<Arc<MemoryRegion>, EngineError> {
        let mr = MemoryRegion::alloc(&self.shared.fabric.devs[0].pd, len, Access::ALL_RDMA)?;
        // SAFETY: the buffer is owned by `mr`, dropped after the other
        // devices' registrations of it.
        unsafe { self.add_region(mr) }
    }

    /// Registers caller memory (a KV-cache pool, say). A range that
    /// overlaps a registered region is refused
    /// ([`EngineError::RegionOverlap`]).
    ///
    /// # Safety
    ///
    /// `addr..addr+len` must stay valid for reads and writes until
    /// [`deregister_memory(addr)`](Self::deregister_memory) returned `Ok`
    /// (and the returned `Arc` is dropped) or the engine is dropped, and
    /// must not be accessed through Rust references while transfers may
    /// touch it.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// // The caller's memory, declared before the engine: it outlives every
    /// // registration (dropping the engine releases them all).
    /// let mut pool = vec![0u8; 16 << 20].into_boxed_slice();
    /// let engine = Engine::new(EngineConfig::from_env()?)?;
    /// // SAFETY: `pool` outlives the engine and is not touched through
    /// // references while it is registered.
    /// let mr = unsafe { engine.register_memory(pool.as_mut_ptr(), pool.len())? };
    /// let addr = mr.addr(); // transfers name it as `local`
    /// drop(mr);
    /// // ... transfers ...
    /// engine.deregister_memory(addr)?; // refused (MemoryBusy) while transfers may touch it
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(unsafe_code)]
    pub unsafe fn register_memory(
        &self,
        addr: *mut u8,
        len: usize,
    ) -> Result<Arc<MemoryRegion>, EngineError> {
        // SAFETY: forwarded from the caller's promise; the engine holds the
        // region until it is dropped, after every QP is flushed.
        let mr = unsafe {
            MemoryRegion::register(&self.shared.fabric.devs[0].pd, addr, len, Access::ALL_RDMA)
        }?;
        // SAFETY: forwarded from the caller's promise, as above.
        unsafe { self.add_region(mr) }
    }

    /// Deregisters the memory region that starts at `addr` (what
    /// [`alloc_memory`](Self::alloc_memory) or
    /// [`register_memory`](Self::register_memory) returned; Mooncake's
    /// `unregisterLocalMemory`): every device's registration is released
    /// (`ibv_dereg_mr`) before this returns, and memory the engine
    /// allocated is freed with it unless the caller still holds the
    /// returned `Arc<MemoryRegion>` (then that one registration and its
    /// buffer live until the caller drops it).
    ///
    /// Refused, changing nothing, with [`EngineError::MemoryBusy`] while
    /// any transfer may still touch the region: a slice queued or posted
    /// on it, including the last attempt of a canceled or timed-out task
    /// that is still on the wire. No other address is accepted
    /// ([`EngineError::NoSuchRegion`]: not the start of a registered
    /// region). Peers that connected earlier keep the region in their
    /// segment descriptors; their transfers to it then fail at the NIC
    /// (remote access error), never touch the memory.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig, EngineError};
    /// let engine = Engine::new(EngineConfig::default())?;
    /// let mr = engine.alloc_memory(1 << 20)?;
    /// let addr = mr.addr();
    /// drop(mr); // the engine's registration is the last one
    /// engine.deregister_memory(addr)?;
    /// assert!(matches!(engine.deregister_memory(addr), Err(EngineError::NoSuchRegion { .. })));
    /// # Ok::<(), EngineError>(())
    /// ```
    pub fn deregister_memory(&self, addr: u64) -> Result<(), EngineError> {
        let sh = &*self.shared;
        sh.mem.deregister(addr, || sh.fault.deregistration())
    }

    /// Connects to the engine listening at `peer`: N RC QPs, the versioned
    /// descriptor handshake, INIT → RTR → RTS, a barrier. Returns the
    /// segment to address transfers to.
    ///
    /// The address is remembered: if the endpoint is later retired for a
    /// CQ error or a QP-scope event, the engine reconnects once on its own,
    /// and [`reconnect_segment`](Self::reconnect_segment) does it on demand.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let _mem = engine.alloc_memory(1 << 20)?; // registered first: the peer sees it
    /// let seg = engine.open_segment("10.0.0.2:18515")?; // the peer's listen_addr()
    /// let remote = engine.segment_regions(seg)?[0].addr;
    /// println!("peer region at {remote:#x}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_segment(&self, peer: impl ToSocketAddrs) -> Result<SegmentId, EngineError> {
        connect::open_segment(&self.shared, peer)
    }

    /// The regions the peer exported at handshake time (remote addresses of
    /// transfers must lie in one of them).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// for r in engine.segment_regions(seg)? {
    ///     println!("{:#x}..+{} (rkey {:#x})", r.addr, r.len, r.rkey);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segment_regions(&self, seg: SegmentId) -> Result<Vec<SegmentDescriptor>, EngineError> {
        self.shared.registry.segment_regions(seg)
    }

    /// Segments known to this engine, including ones peers opened to us
    /// (a connection is symmetric: either side may post on it).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// for seg in engine.segments() {
    ///     let info = engine.segment_info(seg)?;
    ///     println!("{seg:?}: peer {:?}, active {}", info.peer, info.active);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segments(&self) -> Vec<SegmentId> {
        self.shared.registry.segment_ids()
    }

    /// Retires a segment's endpoints, one per rail (the one retire API):
    /// no new posts; their posted work drains (or is flushed after the
    /// drain timeout).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// engine.close_segment(seg)?; // no new posts; posted work drains
    /// assert!(engine.wait_idle(std::time::Duration::from_secs(5)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn close_segment(&self, seg: SegmentId) -> Result<(), EngineError> {
        connect::close_segment(&self.shared, seg)
    }

    /// Creates an empty batch that will hold up to `capacity` tasks.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let batch = engine.allocate_batch(128)?; // up to 128 tasks, over any number of submits
    /// // ... submit, wait ...
    /// engine.free_batch(batch)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allocate_batch(&self, capacity: usize) -> Result<BatchId, EngineError> {
        Ok(self.shared.tables.allocate_batch(capacity))
    }

    /// Submits transfers into `batch`: validates all of them first (nothing
    /// is queued if any is invalid), cuts them into slices (see
    /// [`slice_count`]) and queues the slices to the workers. Task `i` of
    /// this call gets index `previous tasks + i` in the batch.
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig, Op, TaskState, Transfer};
    /// use std::time::Duration;
    ///
    /// let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let mem = engine.alloc_memory(1 << 20)?;
    /// let seg = engine.open_segment("10.0.0.2:18515")?;
    /// let remote = engine.segment_regions(seg)?[0].addr;
    /// mem.write_at(0, &[7; 4096])?;
    /// let batch = engine.allocate_batch(2)?;
    /// engine.submit(batch, &[
    ///     // Task 0: WRITE 4 KiB to the peer; task 1: READ the next 4 KiB back.
    ///     Transfer { op: Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote },
    ///     Transfer { op: Op::Read, local: mem.addr() + 4096, len: 4096, segment: seg, remote_offset: remote + 4096 },
    /// ])?;
    /// assert!(engine.wait_batch(batch, Duration::from_secs(30))?);
    /// assert!(engine.batch_status(batch)?.iter().all(|s| s.state == TaskState::Completed));
    /// engine.free_batch(batch)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn submit(&self, batch: BatchId, transfers: &[Transfer]) -> Result<(), EngineError> {
        submit::submit(&self.shared, batch, transfers)
    }

    /// The state and progress of task `task` of `batch`.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// let s = engine.task_status(batch, 0)?;
    /// println!("{:?}: {} of {} bytes", s.state, s.transferred_bytes, s.total_bytes);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_status(&self, batch: BatchId, task: usize) -> Result<TaskStatus, EngineError> {
        self.shared.tables.with_task(batch, task, TaskCell::status)
    }

    /// Whether every task of `batch` is terminal (completed, failed, timed
    /// out or canceled): the cheap check for a wait loop. It allocates
    /// nothing and stops at the first task still open; read
    /// [`batch_status`](Self::batch_status) once it says `true`. A batch
    /// with no tasks is done.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, BatchId};
    /// # fn wait(e: &Engine, b: BatchId) -> Result<(), railyard_verbs::engine::EngineError> {
    /// while !e.batch_done(b)? {
    ///     std::thread::yield_now();
    /// }
    /// let statuses = e.batch_status(b)?;
    /// # let _ = statuses; Ok(()) }
    /// ```
    pub fn batch_done(&self, batch: BatchId) -> Result<bool, EngineError> {
        self.shared.tables.batch_done(batch)
    }

    /// Blocks until every task of `batch` is terminal (`Ok(true)`, as
    /// [`batch_done`](Self::batch_done) would say) or `timeout` passes
    /// (`Ok(false)`): the waiter sleeps instead of spinning, and the thread
    /// that settles the last slice of the task it watches wakes it, and only
    /// the waiters watching that task, for up to 64 waiting threads per
    /// engine (more still work: those share one wake-up, sent whenever a
    /// watched task finishes). Without waiters the completion path only
    /// reads one counter per slice. `Duration::MAX` waits without a deadline (the
    /// engine's transfer timeout still ends every task). A batch freed
    /// during the wait, or never allocated, is `NoSuchBatch`.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, BatchId};
    /// # use std::time::Duration;
    /// # fn wait(e: &Engine, b: BatchId) -> Result<(), railyard_verbs::engine::EngineError> {
    /// if e.wait_batch(b, Duration::from_secs(60))? {
    ///     let statuses = e.batch_status(b)?;
    /// #   let _ = statuses;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn wait_batch(&self, batch: BatchId, timeout: Duration) -> Result<bool, EngineError> {
        self.shared.tables.wait_batch(batch, timeout)
    }

    /// All tasks of `batch`, in submission order.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// # use railyard_verbs::engine::TaskState;
    /// engine.wait_batch(batch, std::time::Duration::from_secs(30))?;
    /// for (i, s) in engine.batch_status(batch)?.iter().enumerate() {
    ///     if s.state != TaskState::Completed {
    ///         println!("task {i}: {:?} ({:?})", s.state, engine.task_anomaly(batch, i)?);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batch_status(&self, batch: BatchId) -> Result<Vec<TaskStatus>, EngineError> {
        self.shared.tables.batch_status(batch)
    }

    /// The minimal anomaly query (RFC 4162, caller observability) of task
    /// `task` of `batch`: NORMAL, CONGESTED, LONG_UNAVAILABLE or UNKNOWN.
    ///
    /// Evidence is recorded per slice attempt: a `Defer` (`BYTE_WINDOW` →
    /// CONGESTED) or `Avoid` (`PATH_QUARANTINED` → LONG_UNAVAILABLE) at the
    /// gate, an error completion (its `core::classify` class: route timeout
    /// and receiver pressure → CONGESTED; local configuration, remote
    /// metadata, flush, fatal → UNKNOWN), a retry posted on no live
    /// endpoint (`NO_USABLE_PATH` → LONG_UNAVAILABLE). A success resolves
    /// its slice's evidence and a new attempt clears the old one; the most
    /// severe unresolved evidence wins. A task whose slices all succeeded
    /// with nothing unresolved is NORMAL; with no evidence and no success
    /// yet, UNKNOWN. With the controller off (or a gate that keeps no
    /// controller) the minimal state is always UNKNOWN, as the RFC says.
    ///
    /// Read-only: it never mutates, posts, polls or probes. Valid during
    /// the `(batch, task)` lifetime, i.e. until [`free_batch`](Self::free_batch).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// use railyard_verbs::engine::{AnomalyState, TaskState};
    /// engine.wait_batch(batch, std::time::Duration::from_secs(30))?;
    /// if engine.task_status(batch, 0)?.state != TaskState::Completed {
    ///     match engine.task_anomaly(batch, 0)? {
    ///         AnomalyState::Congested => println!("congested: retry later, same path"),
    ///         AnomalyState::LongUnavailable => println!("path unavailable: try another rail or peer"),
    ///         AnomalyState::Unknown | AnomalyState::Normal => println!("no path evidence"),
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_anomaly(&self, batch: BatchId, task: usize) -> Result<AnomalyState, EngineError> {
        Ok(self.task_anomaly_detail(batch, task)?.state)
    }

    /// The detailed anomaly query: the minimal state plus the winning
    /// observation (reason, scope, path, time, resolved, slice attempt,
    /// route generation, window, in-flight bytes, cooldown; unobserved
    /// fields say so) and the dropped / stale evidence counts. With the
    /// controller off, `state` is UNKNOWN but the evidence is still shown.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// let d = engine.task_anomaly_detail(batch, 0)?;
    /// if let Some(o) = d.winner {
    ///     println!("{:?}: {:?} at {:?} (resolved: {})", d.state, o.reason, o.path, o.resolved);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_anomaly_detail(
        &self,
        batch: BatchId,
        task: usize,
    ) -> Result<AnomalyDetail, EngineError> {
        let enabled = self.shared.gate.enabled();
        self.shared
            .tables
            .with_task(batch, task, |t| t.anomaly(enabled))
    }

    /// Cancels every unsettled slice of `batch`: its tasks end `CANCELED`
    /// (unless a slice already failed or timed out). Work already posted
    /// still completes on the wire; its completion only releases resources.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// use std::time::Duration;
    /// if !engine.wait_batch(batch, Duration::from_secs(5))? {
    ///     engine.cancel_batch(batch)?; // unsettled slices end CANCELED
    ///     engine.wait_batch(batch, Duration::from_secs(5))?;
    /// }
    /// engine.free_batch(batch)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cancel_batch(&self, batch: BatchId) -> Result<(), EngineError> {
        submit::cancel_batch(&self.shared, batch)
    }

    /// Frees a batch whose tasks are all finished; its task and slice slots
    /// return to the pools. A batch with unfinished tasks is refused
    /// ([`EngineError::BatchBusy`]): cancel it first.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// use railyard_verbs::engine::EngineError;
    /// match engine.free_batch(batch) {
    ///     Ok(()) => {}
    ///     Err(EngineError::BatchBusy(_)) => {
    ///         // Still running: cancel, wait for the tasks to end, free.
    ///         engine.cancel_batch(batch)?;
    ///         engine.wait_batch(batch, std::time::Duration::MAX)?;
    ///         engine.free_batch(batch)?;
    ///     }
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn free_batch(&self, batch: BatchId) -> Result<(), EngineError> {
        self.shared.tables.free_batch(batch)
    }

    /// Counters and leak-check gauges.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let s = engine.stats();
    /// println!("{} posts in {} doorbells, {} completions", s.posts, s.doorbells, s.completions);
    /// // Idle: every gauge is back to zero (anything else is a leak).
    /// assert!(engine.wait_idle(std::time::Duration::from_secs(5)));
    /// assert_eq!((engine.stats().tokens_in_use, engine.stats().mem_pins), (0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> EngineStats {
        observe::stats(&self.shared)
    }

    /// What a host exports, in one call: [`stats`](Self::stats) plus the
    /// CC state (health, generation, window, in-flight bytes) of every
    /// route domain assigned so far ([`EngineSnapshot`]). Slow path (a
    /// lock on the route map, one controller snapshot per route); never
    /// touches verbs.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let snap = engine.snapshot();
    /// assert_eq!(snap.stats.tokens_in_use, 0);
    /// for r in &snap.routes {
    ///     println!("route {} dev {}: {:?} window {} in flight {}",
    ///         r.route, r.device, r.health, r.window_bytes, r.in_flight_bytes);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> EngineSnapshot {
        observe::snapshot(&self.shared)
    }

    /// Waits until no work request is in flight and no slice is queued
    /// (e.g. after every task finished, for the stale completions of
    /// timed-out or canceled attempts). Returns whether it got there.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// use std::time::Duration;
    /// engine.wait_batch(batch, Duration::from_secs(30))?;
    /// engine.free_batch(batch)?;
    /// // Late completions of canceled or timed-out attempts settle too.
    /// assert!(engine.wait_idle(Duration::from_secs(5)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            let s = self.stats();
            let queued = self.shared.fabric.queued();
            if s.tokens_in_use == 0 && s.cq_outstanding == 0 && queued == 0 && s.parked == 0 {
                return true;
            }
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Shuts down: stops posting, retires every endpoint (`Shutdown`),
    /// moves their QPs to ERR so in-flight work is flushed, waits (bounded
    /// by twice the drain timeout) for every token to come back, then stops
    /// and joins the threads. QPs are destroyed when the epoch reclaims
    /// their endpoints (or with the table, after the threads are gone).
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// let mut engine = Engine::new(EngineConfig::from_env()?)?;
    /// // ... transfers ...
    /// engine.shutdown(); // flushes in-flight work and joins the threads (dropping does the same)
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(&mut self) {
        let sh = &*self.shared;
        if self.threads.is_empty() {
            return;
        }
        sh.lifecycle.draining.store(true, Ordering::Release);
        // A reconnect in flight publishes its endpoint before we retire all.
        for t in sh.lifecycle.take_reconnects() {
            let _ = t.join();
        }
        connect::retire_all(sh, RetireReason::Shutdown);
        control::flush_all(sh);
        let t0 = Instant::now();
        while sh.tokens.in_use() > 0 && t0.elapsed() < sh.cfg.drain_timeout * 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        sh.lifecycle.stop.store(true, Ordering::Release);
        sh.fabric.wake_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Replaces the endpoints of `seg` (a segment this engine opened, one
    /// endpoint per rail) with new ones: the old endpoints are retired if
    /// still active (their posted work drains or is flushed; late
    /// completions settle accounting only), the handshake runs again
    /// (fresh rkeys and addresses), and each rail's route moves to a new
    /// generation. Slices waiting to retry on an old endpoint move to its
    /// rail's new one. Returns rail 0's new endpoint generation.
    ///
    /// Whether a route admits posts right away is the controller's call:
    /// a QUARANTINED route avoids them until its cooldown moves it to
    /// PROBING, and a successful probe makes it HEALTHY.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// let info = engine.segment_info(seg)?;
    /// if !info.active && !info.reconnecting {
    ///     let generation = engine.reconnect_segment(seg)?; // fresh QPs and descriptors
    ///     println!("reconnected: endpoint generation {generation}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reconnect_segment(&self, seg: SegmentId) -> Result<u32, EngineError> {
        connect::reconnect(&self.shared, seg.0 as usize)
    }

    /// The connection state of `seg`'s first rail (the only one with a
    /// single device).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// let info = engine.segment_info(seg)?;
    /// println!("route {}, active {}, {} reconnects", info.route, info.active, info.reconnects);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segment_info(&self, seg: SegmentId) -> Result<SegmentInfo, EngineError> {
        self.segment_rail_info(seg, 0)
    }

    /// The connection state of `seg`'s rail `rail` (local device `rail`).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// for rail in 0..engine.segment_rails(seg)? as u16 {
    ///     let info = engine.segment_rail_info(seg, rail)?;
    ///     println!("rail {rail}: device {}, route {}, active {}", info.device, info.route, info.active);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segment_rail_info(&self, seg: SegmentId, rail: u16) -> Result<SegmentInfo, EngineError> {
        let sh = &*self.shared;
        sh.registry.segment_info(seg, rail, |h| sh.is_active(h))
    }

    /// A snapshot of the CC route of `seg`'s first rail (health,
    /// generation, errors, window, in-flight bytes), or `None` without a
    /// controller. Slow path; never touches verbs.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// if let Some(r) = engine.route_snapshot(seg)? {
    ///     println!("{:?}, window {} B, {} B in flight", r.health, r.window, r.in_flight);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn route_snapshot(&self, seg: SegmentId) -> Result<Option<DomainSnapshot>, EngineError> {
        let route = self.segment_info(seg)?.route;
        Ok(self.shared.gate.route_snapshot(route))
    }

    /// A snapshot of the CC route of `seg`'s rail `rail`, or `None`
    /// without a controller.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// for rail in 0..engine.segment_rails(seg)? as u16 {
    ///     if let Some(r) = engine.rail_route_snapshot(seg, rail)? {
    ///         println!("rail {rail}: {:?} (generation {})", r.health, r.generation);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rail_route_snapshot(
        &self,
        seg: SegmentId,
        rail: u16,
    ) -> Result<Option<DomainSnapshot>, EngineError> {
        let route = self.segment_rail_info(seg, rail)?.route;
        Ok(self.shared.gate.route_snapshot(route))
    }

    /// A snapshot of local device 0's CC domain, or `None` without a
    /// controller.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// use railyard_verbs::engine::Health;
    /// if let Some(d) = engine.device_snapshot() {
    ///     assert_ne!(d.health, Health::Quarantined, "device 0 isolated");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn device_snapshot(&self) -> Option<DomainSnapshot> {
        self.device_snapshot_of(0)
    }

    /// A snapshot of local device `device`'s CC domain, or `None` without
    /// a controller (or no such device).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// for dev in 0..engine.devices().len() as u16 {
    ///     if let Some(d) = engine.device_snapshot_of(dev) {
    ///         println!("device {dev}: {:?}, {} B in flight", d.health, d.in_flight);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn device_snapshot_of(&self, device: u16) -> Option<DomainSnapshot> {
        self.shared.gate.device_snapshot(device)
    }

    /// What drain-time pressure does on local device `device` (rail) and
    /// its routes: [`DrainSignal::Advisory`] for a software provider (rxe,
    /// siw) by default, [`DrainSignal::Enforce`] otherwise (see
    /// `railyard_core::cc::DrainSignal`); `None` without a controller
    /// compiled in, or no such device.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// use railyard_verbs::engine::DrainSignal;
    /// if engine.drain_signal_of(0) == Some(DrainSignal::Advisory) {
    ///     println!("drain-time pressure on device 0 is reported, not acted on");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn drain_signal_of(&self, device: u16) -> Option<DrainSignal> {
        self.shared.gate.drain_signal(device)
    }

    /// The software RDMA provider local device `device` (rail) is, from its
    /// `ibv_device_attr.vendor_id` (`None`: hardware, or no such device).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// if let Some(p) = engine.software_provider_of(0) {
    ///     println!("device 0 is a software provider ({p:?}): absolute speeds mean little");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn software_provider_of(&self, device: u16) -> Option<SoftwareProvider> {
        let d = self.shared.fabric.devs.get(usize::from(device))?;
        SoftwareProvider::from_vendor_id(d.vendor_id)
    }

    /// The controller's counters (stale feedback, illegal transitions, ...),
    /// or `None` without a controller.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// if let Some(cc) = engine.cc_stats() {
    ///     assert_eq!(cc.illegal_transitions, 0);
    ///     println!("{} stale feedbacks settled for accounting only", cc.stale_feedback);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cc_stats(&self) -> Option<CcStats> {
        Some(self.shared.gate.cc_stats())
    }

    /// Receiver credit (RFC 2849): the receiving application used `n`
    /// consumer slots of what the sender on segment `seg` wrote (one slot
    /// per work request: slice) and returns them; the next refresh grants
    /// them to the sender again. For a one-sided WRITE only the
    /// application knows when the data was consumed. Refused (nothing
    /// changes) for a segment without an active credit session or for
    /// more slots than the sender was granted and has not returned.
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// let cfg = EngineConfig::from_lookup(|k| (k == "MC_RECEIVER_CREDIT").then(|| "required".into()))?;
    /// let engine = Engine::new(cfg)?; // the receiving side
    /// # let seg = railyard_verbs::engine::SegmentId(0);
    /// // The application read 8 slices the sender on `seg` wrote: grant them again.
    /// engine.consume(seg, 8)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn consume(&self, seg: SegmentId, n: u64) -> Result<(), EngineError> {
        match &self.shared.credit {
            Some(c) => c.consume(seg.0, n),
            None => Err(EngineError::CreditNotActive(seg.0)),
        }
    }

    /// The receiver-credit metrics (per peer and aggregate, sender and
    /// receiver side), or `None` with credit off.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// if let Some(c) = engine.credit_stats() {
    ///     println!("policy {:?}: {} frames sent, {} malformed", c.policy, c.frames_sent, c.malformed);
    ///     for p in &c.peers {
    ///         println!("segment {}: {:?}, {} credit stalls", p.segment, p.negotiated, p.stalls);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn credit_stats(&self) -> Option<CreditStats> {
        self.shared
            .credit
            .as_ref()
            .map(|c| c.stats(self.shared.now()))
    }

    /// What the receiver-credit negotiation gave for `seg` (`None` with
    /// credit off, or for a segment it never saw).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// use railyard_verbs::engine::Negotiated;
    /// match engine.segment_credit(seg) {
    ///     Some(Negotiated::Active(version)) => println!("credit-gated WRITEs (schema {version})"),
    ///     other => println!("no credit gating: {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segment_credit(&self, seg: SegmentId) -> Option<Negotiated> {
        self.credit_stats()?
            .peers
            .iter()
            .find(|p| p.segment == seg.0)
            .and_then(|p| p.negotiated)
    }

    /// The last backpressure a post of task `task` of `batch` met (RFC
    /// 2849's typed `BackpressureInfo`: source, peer, exhausted
    /// resources, retry hint, whether a fallback is allowed), or `None` if
    /// nothing ever pushed back. Every source the engine has: receiver
    /// credit (`RECEIVER_CREDIT`), the CC window or a quarantined path and
    /// a full QP (`TRANSPORT`), no free token (`LOCAL_QUEUE`); see
    /// [`Refusal::backpressure_info`](railyard_core::completion::Refusal::backpressure_info).
    /// Valid during the task's lifetime, like
    /// [`task_status`](Self::task_status).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// if let Some(bp) = engine.task_backpressure(batch, 0)? {
    ///     println!("credit stall ({:?}), retry after {} us", bp.source, bp.retry_after_us);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_backpressure(
        &self,
        batch: BatchId,
        task: usize,
    ) -> Result<Option<BackpressureInfo>, EngineError> {
        self.shared.tables.with_task(batch, task, |t| {
            *t.backpressure.lock().unwrap_or_else(|e| e.into_inner())
        })
    }

    /// The rail selector's counters: decisions, probes, V2/V3 fallbacks,
    /// missing / expired peer samples, ledger exhaustion and contention,
    /// and peer / NIC accounting errors (which must stay zero).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let c = engine.rail_counters();
    /// println!("{} decisions, {} probes", c.decisions, c.probes);
    /// assert_eq!((c.peer_accounting_errors, c.nic_accounting_errors), (0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rail_counters(&self) -> RailCounters {
        self.shared.rails.counters()
    }

    /// The NIC-scope state of local device `device` (in-flight bytes, the
    /// completion EWMA, the nominal rate), or `None` past the last rail.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// for dev in 0..engine.devices().len() {
    ///     if let Some(v) = engine.rail_nic_view(dev) {
    ///         println!("device {dev}: {} B in flight, {} B/s of {} nominal", v.inflight, v.bw, v.nominal);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rail_nic_view(&self, device: usize) -> Option<NicView> {
        self.shared.rails.nic_view(device)
    }

    /// The peer ledger's entry for `seg` on local device `device`: bytes in
    /// flight to that peer on that device, the peer's own completion EWMA
    /// and the time of its last sample (engine clock, see
    /// [`Engine::now_ns`]). `None` without the ledger (`peer-feedback`
    /// feature and `rail.peer_accounting`), past the last rail, or if the
    /// peer has no entry there.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// if let Some(p) = engine.rail_peer_view(0, seg) {
    ///     let age_ns = engine.now_ns().saturating_sub(p.sample_ns);
    ///     println!("{} B in flight to the peer, {} B/s, sample {age_ns} ns old", p.inflight, p.bw);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rail_peer_view(&self, device: usize, seg: SegmentId) -> Option<PeerView> {
        (device < self.shared.rails.len())
            .then(|| self.shared.rails.peer_view(device, seg.0))
            .flatten()
    }

    /// Live peer-ledger entries on local device `device` (0 without the
    /// ledger or past the last rail). Idle entries are kept up to the
    /// history target; only their in-flight bytes must return to zero.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// println!("{} peers tracked on device 0", engine.rail_peer_entries(0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rail_peer_entries(&self, device: usize) -> u32 {
        if device < self.shared.rails.len() {
            self.shared.rails.peer_entries(device)
        } else {
            0
        }
    }

    /// The engine's clock (nanoseconds since it started): the time base of
    /// [`PeerView::sample_ns`] and of the trace ages.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// let t0 = engine.now_ns();
    /// std::thread::sleep(std::time::Duration::from_millis(1));
    /// assert!(engine.now_ns() > t0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn now_ns(&self) -> railyard_core::time::Nanos {
        self.shared.now()
    }

    /// Takes the aggregate-decision traces recorded since the last call
    /// (empty unless `rail.trace` and the peer ledger are on). One entry
    /// per transfer whose slices were planned over two or more rails, as
    /// RFC 4534's TTL calibration wants: feed them to
    /// [`TtlCalibrator`](railyard_core::rail::TtlCalibrator) (a V1 run).
    ///
    /// ```no_run
    /// use railyard_verbs::engine::{Engine, EngineConfig};
    ///
    /// let mut cfg = EngineConfig::from_env()?;
    /// cfg.rail.trace = true; // with the peer ledger (`peer-feedback`, MC_RAIL_PEER_ACCOUNTING=1)
    /// let engine = Engine::new(cfg)?;
    /// // ... multi-rail transfers ...
    /// let t = engine.take_rail_traces();
    /// let cold = t.decisions.iter().filter(|d| d.is_none()).count();
    /// println!("{} decisions, {cold} without a peer sample", t.decisions.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn take_rail_traces(&self) -> RailTraces {
        self.shared.telemetry.rail_trace.take()
    }

    /// How many slices of task `task` of `batch` are on each local device
    /// (rail), `[..rails]`: the device of each slice's current (or last)
    /// attempt. Read it before [`Engine::free_batch`].
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// # let mem = engine.alloc_memory(1 << 20)?;
    /// # let remote = engine.segment_regions(seg)?[0].addr;
    /// # let batch = engine.allocate_batch(1)?;
    /// # let t = railyard_verbs::engine::Transfer {
    /// #     op: railyard_verbs::engine::Op::Write, local: mem.addr(), len: 4096, segment: seg, remote_offset: remote,
    /// # };
    /// # engine.submit(batch, &[t])?;
    /// engine.wait_batch(batch, std::time::Duration::from_secs(30))?;
    /// let per_rail = engine.task_rail_slices(batch, 0)?; // before free_batch
    /// println!("slices per rail: {:?}", &per_rail[..engine.devices().len()]);
    /// engine.free_batch(batch)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn task_rail_slices(
        &self,
        batch: BatchId,
        task: usize,
    ) -> Result<[u32; MAX_RAILS], EngineError> {
        self.shared.tables.task_devices(batch, task)
    }

    /// Installs receiver-credit control-frame faults (duplicate, reorder,
    /// delay, silence) on the updates this engine sends as a receiver.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// use railyard_verbs::engine::CreditFaults;
    /// engine.set_credit_faults(CreditFaults { duplicate: true, ..CreditFaults::default() });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "fault-injection")]
    pub fn set_credit_faults(&self, f: CreditFaults) {
        if let Some(c) = &self.shared.credit {
            c.set_faults(f);
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VerbsError;

    /// On a host without RDMA the engine refuses with a typed error
    /// instead of panicking; with a device it starts and stops cleanly.
    #[test]
    fn new_without_device_is_a_typed_error() {
        match Engine::new(EngineConfig::default()) {
            Ok(mut e) => {
                assert_eq!(e.stats().tokens_in_use, 0);
                e.shutdown();
            }
            Err(EngineError::Verbs(v)) => {
                assert!(
                    matches!(v, VerbsError::NoDevice | VerbsError::Os { .. }),
                    "{v}"
                );
                assert!(!EngineError::Verbs(v).to_string().is_empty());
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    #[test]
    fn invalid_config_is_refused_before_touching_the_device() {
        let cfg = EngineConfig {
            worker_model: WorkerModel::DedicatedPoller,
            workers: 1,
            ..EngineConfig::default()
        };
        match Engine::new(cfg) {
            Err(EngineError::Config(c)) => assert_eq!(c.var, "MC_WORKERS_PER_CTX"),
            other => panic!("expected a config error, got {other:?}"),
        }
    }
}
