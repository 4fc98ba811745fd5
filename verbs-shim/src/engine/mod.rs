//! The transfer engine: Mooncake-like batches of READ/WRITE transfers over
//! RC QPs, with every work request owned through `railyard-core`'s
//! completion-ownership protocol (RFC 3136).
//!
//! ```text
//!  submit(batch, transfers)          worker (posts shard s)                 poller (CQ of shard s)
//!  ───────────────────────           ───────────────────────                ───────────────────────
//!  validate ranges, cut slices  ──►  Owner::post(slice, path)               poll CQ → wr_id, status
//!  (64 KiB, tail rule), open           endpoint, rail, CC, token → wr_id    Owner::complete(wr_id, status)
//!  slice attempts, queue them        ibv_post_send(chain)                     classified once, holds released
//!                                    bad_wr tail → Owner::unposted          settle task / re-queue retry
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
//! * **Addresses** are Mooncake-style absolute virtual addresses: a
//!   transfer's `local` lies in memory registered with this engine, and
//!   `remote` in one region the peer exported at handshake time
//!   ([`Engine::segment_regions`]).
//! * **Slicing** follows [`config::slice_count`]: full `slice_size` slices
//!   and one tail slice carrying the remainder.
//! * **Ownership**: a slice's `wr_id` is a token from the core pool; the
//!   endpoint generation and QP depth are admitted by `Owner::post`; a
//!   completion resolves through `Owner::complete(wr_id, ..)` only, never a
//!   pointer; the unposted tail of a `bad_wr` chain is released with
//!   `Owner::unposted` (and only it).
//! * **Workers** ([`WorkerModel`]): shared (default; worker `i` posts and
//!   polls shard `i`) or dedicated poller (`MC_RDMA_DEDICATED_POLLER=1`).
//!   Plus: a monitor (reclaim, forced flush, task timeouts), an async-event
//!   thread and the handshake listener.
//! * **Teardown** of an endpoint goes through `EndpointTable::retire` only
//!   (CQ error, async event, shutdown). Its QPs are moved to ERR when the
//!   drain times out and destroyed only when crossbeam-epoch drops the
//!   endpoint's resource.
//! * **The composed hot path** (`railyard_core::completion::Owner`, the
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
//!   ([`PeerDescriptor`], wire version 2), and `open_segment` connects
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
//!   `Shared::expire_tasks`).
//! * **Async events** are read per device and land at their classified
//!   scope (`worker::event_targets`): QP → its endpoint and route; CQ →
//!   only the endpoints with a QP on that CQ, with fatal feedback to their
//!   routes; port / device → that device's endpoints and device domain.
//!
//! * **Reconnect** (`reconnect.rs`): the retired endpoints of a segment
//!   this engine opened are replaced (automatically once after a CQ error
//!   or a QP-scope event, or by [`Engine::reconnect_segment`]): the
//!   handshake runs again for every rail, each rail's route moves to a new
//!   generation, and waiting retries move to the new endpoints. A retry
//!   whose rail is gone while another rail of the segment is live moves
//!   there (rail failover, `Shared::re_rail`).
//!
//! Not done yet: receiver credits (#4). Rails start with equal nominal
//! rates ([`EngineConfig::rail_nominal_bps`], default [`NOMINAL_RAIL_BPS`];
//! the port's link rate is not queried) and the completion EWMA learns the
//! rest. The peer ledger (RFC 4534 V0–V3)
//! needs `railyard-core`'s `peer-feedback` feature, which `railyard-verbs`
//! does not enable by default (`EngineConfig::rail.peer_accounting` is
//! refused without it). Automatic reconnect is one attempt per
//! retirement, without backoff.

mod cc_gate;
mod config;
mod events;
mod fault;
mod memory;
mod rail_diag;
mod reconnect;
mod worker;

pub use cc_gate::{CcGate, GateStats};
pub use config::{slice_count, ConfigError, EngineConfig, WorkerModel, MAX_RAILS};
pub use events::{event_action, EventAction};
#[cfg(feature = "fault-injection")]
pub use fault::TraceEvent;
pub use rail_diag::{RailTraces, RAIL_TRACE_CAPACITY};
pub use railyard_core::cc::{CcConfig, CcStats, DomainSnapshot, Health, Mode as CcMode};
pub use railyard_core::evidence::{Detail as AnomalyDetail, TaskState as AnomalyState};
use railyard_core::evidence::{Observation, Observed, TaskEvidence};
use railyard_core::rail::{DeviceSpec, Selector};
pub use railyard_core::rail::{NicView, PeerView, RailConfig, RailCounters, Variant};
pub use railyard_core::token::TokenRecord;
pub use reconnect::SegmentInfo;

use crate::handshake::{Handshake, HandshakeError, Refusal};
use crate::wire::{EndpointDescriptor, PeerDescriptor, QpEndpoint, SegmentDescriptor};
use crate::{
    Access, CompletionQueue, Context, MemoryRegion, Mtu, ProtectionDomain, QpCaps, QpConfig,
    QueuePair, RemoteQp, VerbsError,
};
use crossbeam_queue::ArrayQueue;
use railyard_core::endpoint::{
    EndpointConfig, EndpointError, EndpointHandle, EndpointTable, RetireReason,
};
use railyard_core::slice::{Outcome, SliceError, SliceRef, SliceState, SliceTable};
use railyard_core::token::{TokenError, TokenPool};
use std::collections::HashMap;
use std::fmt;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most memory regions one engine registers.
pub const MAX_MEMORY_REGIONS: usize = 256;
/// Nominal link rate every rail starts with in the selector (bytes/s,
/// 100 Gb/s); completions then teach it each rail's real rate (EWMA).
pub const NOMINAL_RAIL_BPS: u64 = 12_500_000_000;
/// Slices of one transfer go to the same QP in runs of this many, so a
/// worker can post them as one chain (one doorbell).
pub const SLICES_PER_QP_RUN: u64 = 8;

/// Why an engine call failed. Nothing is leaked on any of these paths.
#[derive(Debug)]
pub enum EngineError {
    /// Bad configuration (names the variable).
    Config(ConfigError),
    /// A verbs call failed (device, PD, CQ, QP, MR).
    Verbs(VerbsError),
    /// The out-of-band handshake failed; the connection was dropped.
    Handshake(HandshakeError),
    /// The peer's descriptor does not fit ours.
    PeerMismatch {
        /// What differs.
        what: &'static str,
        /// Our value.
        ours: u64,
        /// Theirs.
        theirs: u64,
    },
    /// The endpoint table refused (full, ...).
    Endpoint(EndpointError),
    /// Setting up the listener socket or spawning a thread failed.
    Io(std::io::Error),
    /// No batch with this id (never allocated, or freed).
    NoSuchBatch(BatchId),
    /// No task with this index in the batch.
    NoSuchTask {
        /// The batch.
        batch: BatchId,
        /// The index asked for.
        task: usize,
    },
    /// No segment with this id.
    NoSuchSegment(SegmentId),
    /// The segment's endpoint was retired (error or shutdown).
    SegmentClosed(SegmentId),
    /// Submitting would exceed the batch's capacity.
    BatchFull {
        /// The batch's capacity.
        capacity: usize,
    },
    /// `free_batch` on a batch with unfinished tasks.
    BatchBusy(BatchId),
    /// Every task slot is in use (`max_tasks`).
    OutOfTasks,
    /// Not enough free slices (`max_slices`) for this submit.
    OutOfSlices {
        /// Slices the submit needs.
        needed: u64,
    },
    /// A zero-length transfer.
    ZeroLength,
    /// `local..local+len` is not inside one memory region of this engine.
    LocalRange {
        /// Address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// `remote..remote+len` is not inside one region the peer exported.
    RemoteRange {
        /// Address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// [`MAX_MEMORY_REGIONS`] regions are registered.
    TooManyRegions,
    /// `register_memory` of a range that overlaps a registered region.
    RegionOverlap {
        /// Start of the refused range.
        addr: u64,
        /// Its length.
        len: u64,
        /// Start of the registered region it overlaps.
        other: u64,
    },
    /// `deregister_memory` of an address that is not the start of a
    /// registered region.
    NoSuchRegion {
        /// The address given.
        addr: u64,
    },
    /// `deregister_memory` while transfers may still touch the region
    /// (slices queued or posted on it); nothing changed.
    MemoryBusy {
        /// The region's start.
        addr: u64,
        /// Slices queued plus work requests in flight on it.
        pins: u64,
    },
    /// Not implemented yet; the message says what it waits for.
    Unsupported(&'static str),
    /// A core table could not be built.
    Core(&'static str),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
            Self::Verbs(e) => write!(f, "{e}"),
            Self::Handshake(e) => write!(f, "{e}"),
            Self::PeerMismatch { what, ours, theirs } => {
                write!(
                    f,
                    "peer descriptor mismatch: {what} is {ours} here, {theirs} there"
                )
            }
            Self::Endpoint(e) => write!(f, "endpoint: {e}"),
            Self::Io(e) => write!(f, "engine socket or thread setup: {e}"),
            Self::NoSuchBatch(b) => write!(f, "no batch {}", b.0),
            Self::NoSuchTask { batch, task } => write!(f, "no task {task} in batch {}", batch.0),
            Self::NoSuchSegment(s) => write!(f, "no segment {}", s.0),
            Self::SegmentClosed(s) => write!(f, "segment {} is closed (endpoint retired)", s.0),
            Self::BatchFull { capacity } => write!(f, "batch full ({capacity} tasks)"),
            Self::BatchBusy(b) => write!(f, "batch {} still has unfinished tasks", b.0),
            Self::OutOfTasks => f.write_str("out of task slots (max_tasks)"),
            Self::OutOfSlices { needed } => {
                write!(f, "out of slice slots: need {needed} (max_slices)")
            }
            Self::ZeroLength => f.write_str("zero-length transfer"),
            Self::LocalRange { addr, len } => write!(
                f,
                "local range {addr:#x}+{len} is not inside one registered memory region"
            ),
            Self::RemoteRange { addr, len } => write!(
                f,
                "remote range {addr:#x}+{len} is not inside one region the peer exported"
            ),
            Self::TooManyRegions => write!(f, "at most {MAX_MEMORY_REGIONS} memory regions"),
            Self::RegionOverlap { addr, len, other } => write!(
                f,
                "memory {addr:#x}+{len} overlaps the region registered at {other:#x}"
            ),
            Self::NoSuchRegion { addr } => {
                write!(f, "no memory region registered at {addr:#x}")
            }
            Self::MemoryBusy { addr, pins } => write!(
                f,
                "memory region {addr:#x} is in use by transfers ({pins} slices queued or in flight); not deregistered"
            ),
            Self::Unsupported(what) => write!(f, "not supported yet: {what}"),
            Self::Core(what) => write!(f, "cannot build {what}"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<VerbsError> for EngineError {
    fn from(e: VerbsError) -> Self {
        Self::Verbs(e)
    }
}
impl From<HandshakeError> for EngineError {
    fn from(e: HandshakeError) -> Self {
        Self::Handshake(e)
    }
}
impl From<ConfigError> for EngineError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

/// A batch of transfers (Mooncake's `BatchID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchId(pub u64);

/// A connection to a peer engine: its endpoint and its exported regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentId(pub u32);

/// RDMA operation of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// remote → local.
    Read,
    /// local → remote.
    Write,
}

/// One transfer request (Mooncake's `TransferRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// READ or WRITE.
    pub op: Op,
    /// Local address, inside memory registered with this engine.
    pub local: u64,
    /// Bytes (> 0).
    pub len: u64,
    /// The peer.
    pub segment: SegmentId,
    /// Remote address, inside one region the peer exported
    /// ([`Engine::segment_regions`]); Mooncake's `target_offset`.
    pub remote_offset: u64,
}

/// Mooncake's task states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Submitted, nothing posted yet.
    Waiting,
    /// At least one slice posted, not all settled.
    Pending,
    /// Every slice succeeded.
    Completed,
    /// Every slice settled and at least one failed.
    Failed,
    /// Settled, none failed, at least one timed out.
    Timeout,
    /// Settled, none failed or timed out, at least one canceled.
    Canceled,
}

impl TaskState {
    /// Whether the task is finished.
    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskState::Waiting | TaskState::Pending)
    }
}

/// A task's state and progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// Bytes of slices that succeeded.
    pub transferred_bytes: u64,
    /// Bytes requested.
    pub total_bytes: u64,
}

/// Counters and leak checks. The gauges (`tokens_in_use`,
/// `endpoint_outstanding`, `qp_depth`, `cq_outstanding`) are all zero when
/// the engine is idle; anything else is a leak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Tokens (posted attempts) not yet completed.
    pub tokens_in_use: u64,
    /// Posts admitted on endpoints and not released.
    pub endpoint_outstanding: u64,
    /// Sum of per-QP depths.
    pub qp_depth: u64,
    /// Signaled WRs posted and not yet polled, over all CQs.
    pub cq_outstanding: u64,
    /// Slices open and not settled.
    pub slices_pending: u64,
    /// Live endpoints (active or draining).
    pub endpoints_live: u64,
    /// Work requests posted.
    pub posts: u64,
    /// `ibv_post_send` calls (doorbells).
    pub doorbells: u64,
    /// Completions polled.
    pub completions: u64,
    /// Completions whose slice attempt was stale (release only).
    pub stale_completions: u64,
    /// Completions the token pool refused (duplicate/forged/stale ids).
    pub bad_completions: u64,
    /// Gate `Defer` decisions.
    pub deferrals: u64,
    /// Gate `Avoid` decisions.
    pub avoids: u64,
    /// Posts refused for backpressure (no token, QP full).
    pub backpressure: u64,
    /// WRs of a `bad_wr` tail released unposted.
    pub unposted: u64,
    /// Slices re-queued for a retry.
    pub retries: u64,
    /// Async events read.
    pub async_events: u64,
    /// Endpoints retired (all reasons).
    pub retired: u64,
    /// Endpoints reclaimed after draining.
    pub reclaimed: u64,
    /// Forced flushes (drain timeout).
    pub force_flushes: u64,
    /// The post gate's counters (CC permits admitted / released, in-flight
    /// bytes over every domain, refusals). With a controller in observe or
    /// enforce mode, `gate.in_flight_bytes` is zero when the engine is idle.
    pub gate: GateStats,
    /// Devices (rails) the engine drives.
    pub rails: u16,
    /// Work requests posted per local device (rail), `[..rails]`.
    pub rail_slices_posted: [u64; MAX_RAILS],
    /// Rail charges outstanding per device: bytes of posted attempts whose
    /// `HOLDS_RAIL_CHARGE` was not yet released (the selector's NIC
    /// in-flight). Zero when the engine is idle; anything else is a leak.
    pub rail_charged_bytes: [u64; MAX_RAILS],
    /// Rail releases the selector refused (NIC underflow, peer ledger
    /// errors); must stay zero.
    pub rail_accounting_errors: u64,
    /// Slices moved to another rail of their segment: their rail's device
    /// or route was quarantined (`Avoid`), or its endpoint was retired.
    pub rail_moves: u64,
    /// Posts the composed hot path refused as invalid input (an engine
    /// bug; the slice failed instead of posting without its holds): 0.
    pub invalid_posts: u64,
    /// How the handshake listener ended each connection it accepted.
    pub handshakes: HandshakeStats,
    /// Memory regions registered now.
    pub mem_regions: u64,
    /// Memory pins held over every region: slices queued plus work
    /// requests in flight ([`Engine::deregister_memory`] is refused while
    /// a region has any). Zero when the engine is idle.
    pub mem_pins: u64,
}

/// How the handshake listener ended each connection
/// ([`EngineStats::handshakes`]). Every connection lands in exactly one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandshakeStats {
    /// Became a segment.
    pub accepted: u64,
    /// Refused at once: `max_handshakes` were in progress (or no thread
    /// could be started for it).
    pub busy: u64,
    /// Bytes that are not a descriptor (oversized, truncated, bad magic or
    /// version, out-of-range fields) or a wrong barrier byte.
    pub malformed: u64,
    /// Silent or too slow past `handshake_timeout`.
    pub timed_out: u64,
    /// Closed or reset by the peer mid-handshake.
    pub closed: u64,
    /// A replayed descriptor (the QPs of a connection already made).
    pub replayed: u64,
    /// Failed after a valid descriptor arrived: a mismatched peer
    /// (`MC_NUM_QP_PER_EP`), QP setup, or the endpoint table full.
    pub failed: u64,
}

/// The listener's counters, one per [`HandshakeStats`] field.
#[derive(Default)]
pub(crate) struct HandshakeCounters([AtomicU64; 7]);

impl HandshakeCounters {
    const ACCEPTED: usize = 0;
    const BUSY: usize = 1;
    const MALFORMED: usize = 2;
    const TIMED_OUT: usize = 3;
    const CLOSED: usize = 4;
    const REPLAYED: usize = 5;
    const FAILED: usize = 6;

    fn bump(&self, which: usize) {
        self.0[which].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection the listener refused before its descriptor.
    pub(crate) fn refused(&self, r: &Refusal) {
        self.bump(match r {
            Refusal::Busy { .. } | Refusal::Spawn(_) => Self::BUSY,
            Refusal::Handshake(e) => Self::of(e),
        });
    }

    /// Counts how a passive handshake with a received descriptor ended.
    pub(crate) fn finished(&self, r: &Result<(), EngineError>) {
        self.bump(match r {
            Ok(()) => Self::ACCEPTED,
            Err(EngineError::Handshake(e)) => Self::of(e),
            Err(_) => Self::FAILED,
        });
    }

    fn of(e: &HandshakeError) -> usize {
        match e {
            HandshakeError::Timeout { .. } => Self::TIMED_OUT,
            HandshakeError::ConnectionClosed { .. } => Self::CLOSED,
            HandshakeError::Decode(_) | HandshakeError::BarrierMismatch(_) => Self::MALFORMED,
            HandshakeError::Replayed => Self::REPLAYED,
            HandshakeError::Io { .. } | HandshakeError::Encode(_) => Self::FAILED,
        }
    }

    pub(crate) fn snapshot(&self) -> HandshakeStats {
        let l = |i: usize| self.0[i].load(Ordering::Relaxed);
        HandshakeStats {
            accepted: l(Self::ACCEPTED),
            busy: l(Self::BUSY),
            malformed: l(Self::MALFORMED),
            timed_out: l(Self::TIMED_OUT),
            closed: l(Self::CLOSED),
            replayed: l(Self::REPLAYED),
            failed: l(Self::FAILED),
        }
    }
}

/// The engine's per-endpoint resource, held in the core `EndpointTable`
/// and dropped (QPs destroyed) only when crossbeam-epoch reclaims it.
pub(crate) struct EpResource {
    pub(crate) qps: Vec<QueuePair>,
    pub(crate) remote: Vec<SegmentDescriptor>,
}

/// A CC route domain's key: (local device, peer NIC GID, peer NIC LID).
type RouteKey = (u16, [u8; 16], u16);

/// One rail of a segment: local device `dev` ↔ the peer's NIC `dev`.
pub(crate) struct RailEntry {
    dev: u16,
    handle: EndpointHandle,
    /// The peer's regions with the rkeys of its NIC `dev`.
    remote: Vec<SegmentDescriptor>,
    /// Shard of each QP.
    shards: Vec<u16>,
    /// QP numbers (scripted async events name one; the async-event path
    /// itself looks QPs up in `qpn_map`).
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    qpns: Vec<u32>,
    /// The peer's first QP number on this rail (a reconnect names the
    /// connection it replaces by it: [`PeerDescriptor::replaces`]).
    peer_qpn: u32,
    /// That QP's initial PSN and the peer NIC's GID: with `peer_qpn`, what
    /// a replayed descriptor repeats (`Shared::is_replay`).
    peer_psn: u32,
    peer_gid: [u8; 16],
    /// CC route domain (local device × the peer's NIC).
    route: u32,
}

/// Whether `peer`'s rail-0 QP (GID, QP number, initial PSN) is among
/// `known`, the peer sides of connections already made.
fn repeats(known: impl IntoIterator<Item = ([u8; 16], u32, u32)>, peer: &PeerDescriptor) -> bool {
    let Some((nic, qp)) = peer.nics.first().and_then(|n| Some((n, n.qps.first()?))) else {
        return false;
    };
    known.into_iter().any(|k| k == (nic.gid, qp.qpn, qp.psn))
}

/// Which side of the handshake [`Shared::establish`] runs.
pub(crate) enum Side {
    /// We connected: send our descriptor first.
    Initiator,
    /// The peer connected and its descriptor is already received.
    Target(PeerDescriptor),
}

struct SegmentEntry {
    /// Rail `i` connects local device `i` to peer NIC `i`; there are
    /// `min(local devices, peer NICs)` of them.
    rails: Vec<RailEntry>,
    /// The peer's handshake address, for segments this engine opened
    /// (those it can reconnect).
    peer: Option<SocketAddr>,
    /// A reconnect is in progress (retries wait for it).
    reconnecting: bool,
    /// Reconnects that replaced the endpoints.
    reconnects: u32,
    /// Closed by its owner ([`Engine::close_segment`]) and not reconnected
    /// since: retries failing on it are teardown, not a path failure.
    closed: bool,
}

/// A memory region registered on every device: `regs[d]` is the
/// registration on device `d` (its lkey/rkey). `regs[0]` owns an
/// engine-allocated buffer, so the registrations are dropped last-first.
pub(crate) struct MemEntry {
    pub(crate) regs: Vec<Arc<MemoryRegion>>,
}

impl Drop for MemEntry {
    fn drop(&mut self) {
        // Deregister the extra devices before the owner frees the buffer.
        while let Some(r) = self.regs.pop() {
            drop(r);
        }
    }
}

/// One opened device: its context, PD and QP parameters. Its shards
/// (CQ + submission queue each) are `dev * shards_per_dev ..`.
pub(crate) struct Dev {
    pub(crate) ctx: Context,
    pd: ProtectionDomain,
    qp_cfg: QpConfig,
}

/// The engine's composed hot path: its tables, its rail selector and its
/// CC layer.
pub(crate) type HotPath<'a> = railyard_core::completion::Owner<
    'a,
    EpResource,
    railyard_core::completion::Layers<(), &'a Selector, &'a CcGate>,
>;

/// An endpoint handle packed into one word (generation high, slot low), as
/// [`SliceMeta::ep`] holds it.
pub(crate) fn ep_word(h: EndpointHandle) -> u64 {
    (u64::from(h.generation) << 32) | u64::from(h.slot)
}

/// The handle [`ep_word`] packed.
pub(crate) fn ep_from_word(v: u64) -> EndpointHandle {
    EndpointHandle {
        slot: v as u32,
        generation: (v >> 32) as u32,
    }
}

/// Per-slice data written by `submit` before the slice is queued (the
/// queue's push/pop orders it) and read by workers.
#[derive(Default)]
pub(crate) struct SliceMeta {
    pub(crate) task: AtomicU32,
    pub(crate) mem: AtomicU32,
    pub(crate) region: AtomicU32,
    pub(crate) op: AtomicU32,
    pub(crate) len: AtomicU32,
    pub(crate) qp: AtomicU32,
    pub(crate) shard: AtomicU32,
    /// Local device (rail) of the slice's endpoint.
    pub(crate) dev: AtomicU32,
    /// The attempt that holds a token (claimed for `ibv_post_send`; 0 =
    /// none, or its chain was refused): a deadline on it is a software
    /// completion timeout.
    pub(crate) posted: AtomicU32,
    /// The attempt's endpoint, packed by [`ep_word`].
    pub(crate) ep: AtomicU64,
    pub(crate) segment: AtomicU32,
    pub(crate) route: AtomicU32,
    pub(crate) local_off: AtomicU64,
    pub(crate) remote_off: AtomicU64,
}

#[derive(Default)]
pub(crate) struct TaskCell {
    total: AtomicU32,
    ok: AtomicU32,
    failed: AtomicU32,
    timed_out: AtomicU32,
    canceled: AtomicU32,
    started: AtomicBool,
    bytes_done: AtomicU64,
    bytes_total: AtomicU64,
    deadline_ns: AtomicU64,
    /// Anomaly evidence (RFC 4162). Locked only when there is something to
    /// record or resolve: a task without anomalies never takes the lock on
    /// the completion path (`anomalies` == 0).
    evidence: Mutex<TaskEvidence>,
    /// Observations recorded since submit.
    anomalies: AtomicU32,
}

impl TaskCell {
    fn settled(&self) -> u32 {
        self.ok.load(Ordering::Acquire)
            + self.failed.load(Ordering::Acquire)
            + self.timed_out.load(Ordering::Acquire)
            + self.canceled.load(Ordering::Acquire)
    }

    fn status(&self) -> TaskStatus {
        let total = self.total.load(Ordering::Acquire);
        let state = if self.settled() >= total {
            if self.failed.load(Ordering::Acquire) > 0 {
                TaskState::Failed
            } else if self.timed_out.load(Ordering::Acquire) > 0 {
                TaskState::Timeout
            } else if self.canceled.load(Ordering::Acquire) > 0 {
                TaskState::Canceled
            } else {
                TaskState::Completed
            }
        } else if self.started.load(Ordering::Acquire) {
            TaskState::Pending
        } else {
            TaskState::Waiting
        };
        TaskStatus {
            state,
            transferred_bytes: self.bytes_done.load(Ordering::Acquire),
            total_bytes: self.bytes_total.load(Ordering::Acquire),
        }
    }
}

struct TaskEntry {
    task: u32,
    slices: Vec<u32>,
}

struct Batch {
    capacity: usize,
    tasks: Vec<TaskEntry>,
}

/// Per-worker counters, each on its own cache line.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) posts: AtomicU64,
    pub(crate) doorbells: AtomicU64,
    pub(crate) completions: AtomicU64,
    pub(crate) stale: AtomicU64,
    pub(crate) bad: AtomicU64,
    pub(crate) deferrals: AtomicU64,
    pub(crate) avoids: AtomicU64,
    pub(crate) backpressure: AtomicU64,
    pub(crate) unposted: AtomicU64,
    pub(crate) retries: AtomicU64,
    /// Slices moved to another rail (`Shared::re_rail`).
    pub(crate) rail_moves: AtomicU64,
    /// Posts the hot path refused as invalid (an engine bug: must stay 0).
    pub(crate) invalid: AtomicU64,
    /// Poll rounds (the control epoch's poller heartbeat).
    pub(crate) polls: AtomicU64,
}

/// State shared by the engine handle and its threads.
pub(crate) struct Shared {
    pub(crate) cfg: EngineConfig,
    /// The devices, in rail order.
    pub(crate) devs: Vec<Dev>,
    /// Shards (CQs, submission queues) per device.
    pub(crate) spd: usize,
    /// Rail selection over `devs` (RFC 4534).
    pub(crate) rails: Selector,
    /// Aggregate-decision traces for TTL calibration (only when tracing).
    rail_trace: rail_diag::RailTrace,
    epoch: Instant,
    /// Shard `s`'s CQ (device `s / spd`).
    pub(crate) cqs: Vec<CompletionQueue>,
    pub(crate) tokens: TokenPool,
    pub(crate) slices: SliceTable,
    pub(crate) endpoints: EndpointTable<EpResource>,
    /// The congestion controller: the CC layer of the composed hot path,
    /// and its control-plane duties.
    pub(crate) gate: CcGate,
    /// Why the configured controller stayed off, if it did.
    cc_error: Option<railyard_core::cc::ConfigError>,
    /// CC route index per (local device, peer NIC GID, LID); at most
    /// `max_endpoints` per device.
    routes: Mutex<HashMap<RouteKey, u32>>,
    /// Registered memory: the region table and its pins (`memory.rs`).
    pub(crate) mem: memory::MemTable,
    pub(crate) meta: Box<[SliceMeta]>,
    pub(crate) tasks: Box<[TaskCell]>,
    /// One submission queue per shard.
    pub(crate) queues: Vec<ArrayQueue<SliceRef>>,
    free_slices: ArrayQueue<u32>,
    free_tasks: ArrayQueue<u32>,
    segments: RwLock<Vec<SegmentEntry>>,
    /// (device, QP number) → endpoint (QP numbers are per device).
    pub(crate) qpn_map: RwLock<HashMap<(u16, u32), EndpointHandle>>,
    batches: RwLock<HashMap<u64, Batch>>,
    next_batch: AtomicU64,
    next_shard: AtomicUsize,
    next_run: AtomicU64,
    pub(crate) counters: Vec<WorkerCounters>,
    pub(crate) async_events: AtomicU64,
    pub(crate) retired: AtomicU64,
    pub(crate) reclaimed: AtomicU64,
    pub(crate) force_flushes: AtomicU64,
    /// The handshake listener's outcomes.
    pub(crate) handshakes: HandshakeCounters,
    /// Worker threads, for unparking idle ones.
    pub(crate) threads: OnceLock<Vec<std::thread::Thread>>,
    /// Workers, monitor and event thread stop.
    pub(crate) stop: AtomicBool,
    /// Posting stops (shutdown drain): queued slices are canceled.
    pub(crate) draining: AtomicBool,
    /// Fault-injection state (empty without the `fault-injection` feature).
    pub(crate) fault: fault::FaultState,
    /// This `Shared` itself, for the automatic reconnect thread.
    me: OnceLock<std::sync::Weak<Shared>>,
    /// Automatic reconnect threads (joined at shutdown).
    reconnect_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Serializes reconnects.
    reconnect_lock: Mutex<()>,
}

impl Shared {
    /// Nanoseconds since the engine started (the `now_ns` core expects).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The post shard of worker `w`, if it posts (see `worker::roles`).
    pub(crate) fn post_shard(&self, w: usize) -> Option<usize> {
        match self.cfg.worker_model {
            WorkerModel::Shared => Some(w),
            WorkerModel::DedicatedPoller => {
                let per = usize::from(self.cfg.workers);
                let (d, l) = (w / per, w % per);
                (l > 0).then(|| d * self.spd + l - 1)
            }
        }
    }

    /// The composed hot path (`railyard_core::completion`) over this
    /// engine's tables and layers: the rail selector and the congestion
    /// controller (receiver credit is not wired into the engine yet). Every
    /// post and every completion goes through it; nothing else takes or
    /// releases a permit or a rail charge, or maps a WC status.
    #[inline(always)]
    pub(crate) fn owner(&self) -> HotPath<'_> {
        railyard_core::completion::Owner::new(&self.tokens, &self.slices, &self.endpoints)
            .with_layers(railyard_core::completion::Layers {
                credit: (),
                rail: &self.rails,
                cc: &self.gate,
            })
    }

    /// Accounts a slice that reached a terminal state through the caller
    /// (exactly once: only the winner of the slice CAS gets here).
    pub(crate) fn settled(&self, slice: u32, state: SliceState) {
        let m = &self.meta[slice as usize];
        // The slice's pin on its memory, before the task counters make the
        // batch freeable (then the slot and `m.mem` may be reused).
        if !matches!(state, SliceState::Idle | SliceState::Pending) {
            self.mem.unpin(m.mem.load(Ordering::Relaxed) as usize, 1);
        }
        let t = &self.tasks[m.task.load(Ordering::Relaxed) as usize];
        match state {
            SliceState::Succeeded => {
                t.bytes_done
                    .fetch_add(u64::from(m.len.load(Ordering::Relaxed)), Ordering::AcqRel);
                t.ok.fetch_add(1, Ordering::AcqRel);
            }
            SliceState::Failed => {
                t.failed.fetch_add(1, Ordering::AcqRel);
            }
            SliceState::TimedOut => {
                t.timed_out.fetch_add(1, Ordering::AcqRel);
            }
            SliceState::Canceled => {
                t.canceled.fetch_add(1, Ordering::AcqRel);
            }
            SliceState::Idle | SliceState::Pending => {}
        }
    }

    /// Settles the slice's current attempt (if it still is current).
    pub(crate) fn settle(&self, r: SliceRef, outcome: Outcome) {
        if let Ok(s) = self.slices.settle(r, outcome) {
            self.settled(r.index, s);
        }
    }

    fn task_of(&self, slice: u32) -> &TaskCell {
        let t = self.meta[slice as usize].task.load(Ordering::Relaxed);
        &self.tasks[t as usize]
    }

    /// Records anomaly evidence for slice attempt `r` in its task.
    pub(crate) fn note(&self, r: SliceRef, obs: Observation) {
        let t = self.task_of(r.index);
        let mut ev = t.evidence.lock().unwrap_or_else(|e| e.into_inner());
        ev.record(r, obs);
        t.anomalies.fetch_add(1, Ordering::Release);
    }

    /// As [`note`](Self::note), only if `r` is still the slice's pending
    /// attempt (a queued reference may be stale: canceled, timed out, or
    /// its slot reused by another task).
    pub(crate) fn note_if_current(&self, r: SliceRef, obs: impl FnOnce() -> Observation) {
        if matches!(self.slices.status(r.index), Ok(st) if st.attempt == r.attempt && st.state == SliceState::Pending)
        {
            self.note(r, obs());
        }
    }

    /// A success of slice attempt `r`: resolves its evidence (no lock when
    /// the task never saw an anomaly).
    pub(crate) fn resolve(&self, r: SliceRef, now: u64) {
        let t = self.task_of(r.index);
        if t.anomalies.load(Ordering::Acquire) != 0 {
            let mut ev = t.evidence.lock().unwrap_or_else(|e| e.into_inner());
            ev.resolve(r, now);
        }
    }

    /// A new attempt `r` of a slice starts: its old blocking evidence clears.
    pub(crate) fn begin_attempt(&self, r: SliceRef) {
        let t = self.task_of(r.index);
        if t.anomalies.load(Ordering::Acquire) != 0 {
            let mut ev = t.evidence.lock().unwrap_or_else(|e| e.into_inner());
            ev.begin_attempt(r);
        }
    }

    /// Every live rail endpoint with its device, route and QP shards.
    pub(crate) fn rail_endpoints(&self) -> Vec<(u16, EndpointHandle, u32, Vec<u16>)> {
        self.segments
            .read()
            .map(|s| {
                s.iter()
                    .flat_map(|e| &e.rails)
                    .map(|r| (r.dev, r.handle, r.route, r.shards.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The CC route index of the peer NIC `(gid, lid)` seen from local
    /// device `dev`, assigned on first use: `dev * max_endpoints + k`, the
    /// block layout of [`CcGate::with_devices`].
    fn route_for(&self, dev: u16, gid: [u8; 16], lid: u16) -> Result<u32, EngineError> {
        let mut m = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&r) = m.get(&(dev, gid, lid)) {
            return Ok(r);
        }
        let n = m.keys().filter(|k| k.0 == dev).count() as u32;
        if n >= self.cfg.max_endpoints {
            return Err(EngineError::Core(
                "a CC route domain: more distinct peer NICs than max_endpoints",
            ));
        }
        let r = u32::from(dev) * self.cfg.max_endpoints + n;
        m.insert((dev, gid, lid), r);
        Ok(r)
    }

    /// Moves slice attempt `r` (held by the caller: in no queue) to another
    /// rail of its segment, RFC 4162's "use the existing alternate rail":
    /// the best-scoring rail on another device whose endpoint is active and
    /// whose device and route the gate finds usable. Rewrites the slice's
    /// rail (device, endpoint, shard, route; the QP index is kept) and
    /// queues it there. False, changing nothing, if there is no such rail
    /// (always with one device).
    pub(crate) fn re_rail(&self, r: SliceRef) -> bool {
        if self.devs.len() < 2 {
            return false;
        }
        let m = &self.meta[r.index as usize];
        let cur = m.dev.load(Ordering::Relaxed) as u16;
        let seg = m.segment.load(Ordering::Relaxed);
        let qp = m.qp.load(Ordering::Relaxed) as usize;
        let bytes = m.len.load(Ordering::Relaxed);
        let choice = {
            let Ok(segs) = self.segments.read() else {
                return false;
            };
            let Some(e) = segs.get(seg as usize) else {
                return false;
            };
            e.rails
                .iter()
                .filter(|x| {
                    x.dev != cur
                        && matches!(self.endpoints.state(x.handle),
                            Ok(s) if s.phase == railyard_core::endpoint::Phase::Active)
                        && self.gate.usable(x.dev, x.route)
                })
                .filter_map(|x| {
                    let score = self
                        .rails
                        .score_of(usize::from(x.dev), Some(seg), bytes, false)?;
                    Some((score, x.dev, x.handle, x.shards.get(qp).copied(), x.route))
                })
                .reduce(|a, b| if b.0.better_than(a.0) { b } else { a })
        };
        let Some((_, dev, h, Some(shard), route)) = choice else {
            return false;
        };
        m.dev.store(u32::from(dev), Ordering::Relaxed);
        m.ep.store(ep_word(h), Ordering::Relaxed);
        m.shard.store(u32::from(shard), Ordering::Relaxed);
        m.route.store(route, Ordering::Relaxed);
        self.requeue(r);
        true
    }

    /// Queues slice attempt `r` to the shard of its QP. Each open slice is
    /// in at most one queue and every queue holds `max_slices`, so the push
    /// only fails if stale references of freed slices crowd the queue; then
    /// the slice fails rather than vanish.
    pub(crate) fn requeue(&self, r: SliceRef) {
        let shard = self.meta[r.index as usize].shard.load(Ordering::Relaxed) as usize;
        if self.queues[shard].push(r).is_err() {
            self.settle(r, Outcome::Failure);
            return;
        }
        self.wake_poster(shard);
    }

    fn wake(&self, worker: usize) {
        if let Some(t) = self.threads.get().and_then(|t| t.get(worker)) {
            // Cheap (one atomic swap) unless the worker is parked.
            t.unpark();
        }
    }

    /// Wakes the worker that posts `shard`, if it is parked idle.
    pub(crate) fn wake_poster(&self, shard: usize) {
        match self.cfg.worker_model {
            WorkerModel::Shared => self.wake(shard),
            WorkerModel::DedicatedPoller => {
                let per = usize::from(self.cfg.workers);
                self.wake(shard / self.spd * per + 1 + shard % self.spd)
            }
        }
    }

    /// Wakes the worker that polls `shard`'s CQ, if it is parked idle.
    pub(crate) fn wake_poller(&self, shard: usize) {
        match self.cfg.worker_model {
            WorkerModel::Shared => self.wake(shard),
            WorkerModel::DedicatedPoller => {
                self.wake(shard / self.spd * usize::from(self.cfg.workers))
            }
        }
    }

    /// Retires an endpoint (the one teardown API) and counts it. A QP that
    /// must be rebuilt (CQ error, QP-scope event) on a segment this engine
    /// opened starts one automatic reconnect (see `reconnect.rs`).
    pub(crate) fn retire(&self, h: EndpointHandle, reason: RetireReason) {
        if self.endpoints.retire(h, reason, self.now()).is_ok() {
            self.retired.fetch_add(1, Ordering::Relaxed);
            self.after_retire(h, reason);
        }
    }

    /// Retires every endpoint of this engine.
    pub(crate) fn retire_all(&self, reason: RetireReason) {
        for (_, h, _, _) in self.rail_endpoints() {
            self.retire(h, reason);
        }
    }

    /// Settles every pending slice of the tasks `pred` selects, calling
    /// `each` for every slice attempt this call settled.
    fn settle_where(
        &self,
        outcome: Outcome,
        mut pred: impl FnMut(u64, &TaskCell) -> bool,
        mut each: impl FnMut(SliceRef),
    ) {
        let Ok(batches) = self.batches.read() else {
            return;
        };
        for (&id, b) in batches.iter() {
            for te in &b.tasks {
                let t = &self.tasks[te.task as usize];
                if t.settled() >= t.total.load(Ordering::Acquire) || !pred(id, t) {
                    continue;
                }
                for &s in &te.slices {
                    if let Ok(st) = self.slices.status(s) {
                        if st.state == SliceState::Pending {
                            let r = SliceRef {
                                index: s,
                                attempt: st.attempt,
                            };
                            if let Ok(state) = self.slices.settle(r, outcome) {
                                self.settled(s, state);
                                each(r);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Times out tasks past their deadline (monitor thread), RFC 4162's
    /// non-WC signal table: a deadline on an attempt that was posted is a
    /// software completion timeout. One software route timeout per
    /// timed-out task and route goes to the controller, which counts it at
    /// its next control epoch as a route hard error, or suppresses it if
    /// the pollers stalled in that epoch ([`GateStats::route_timeouts`] /
    /// [`GateStats::suppressed_timeouts`]). The task evidence follows the
    /// monitor's poller status at expiry: pollers progressing →
    /// `ROUTE_TIMEOUT` (scope QP; task CONGESTED before quarantine);
    /// stalled → `POLLER_STALL` (task UNKNOWN: the network is not blamed
    /// for CPU scheduling). A slice that never got a token (still queued)
    /// is no route evidence: if the task has no evidence at all, it gets
    /// `POLLER_STALL` (UNKNOWN: the deadline passed in local scheduling),
    /// never NORMAL; otherwise what held it (a deferral, a quarantine) is
    /// already recorded and stands.
    pub(crate) fn expire_tasks(&self, now: u64, poller: railyard_core::cc::PollerStatus) {
        use railyard_core::classify::{classify_signal, Signal};
        let sig = classify_signal(match poller {
            railyard_core::cc::PollerStatus::Stalled => Signal::DeadlinePollerStalled,
            _ => Signal::DeadlinePollerProgressing,
        });
        let stall = classify_signal(Signal::DeadlinePollerStalled);
        let mut fed: Vec<(u32, u32)> = Vec::new();
        self.settle_where(
            Outcome::TimedOut,
            |_, t| now > t.deadline_ns.load(Ordering::Relaxed),
            |r| {
                let m = &self.meta[r.index as usize];
                if m.posted.load(Ordering::Acquire) != r.attempt {
                    if self.task_of(r.index).anomalies.load(Ordering::Acquire) == 0 {
                        let mut o = Observation::new(stall.reason, now);
                        o.scope = Observed::Value(stall.scope);
                        self.note(r, o);
                    }
                    return;
                }
                let rec = TokenRecord {
                    slice: r,
                    route: m.route.load(Ordering::Relaxed),
                    device: m.dev.load(Ordering::Relaxed) as u16,
                    peer: Some(m.segment.load(Ordering::Relaxed)),
                    bytes: m.len.load(Ordering::Relaxed),
                    ..TokenRecord::default()
                };
                let mut o = self.gate.observe(&rec, sig.reason, now);
                o.scope = Observed::Value(sig.scope);
                self.note(r, o);
                let key = (m.task.load(Ordering::Relaxed), rec.route);
                if !fed.contains(&key) {
                    fed.push(key);
                }
            },
        );
        for (_, route) in fed {
            self.gate
                .event_feedback(Some(route), railyard_core::classify::Effect::Timeout);
        }
    }

    /// The RC QPs of one endpoint on device `dev`, spread over its shards.
    fn new_qps(&self, dev: usize) -> Result<(Vec<QueuePair>, Vec<u16>), EngineError> {
        let n = self.cfg.qps_per_endpoint;
        let caps = QpCaps {
            max_send_wr: self.cfg.max_wr,
            max_recv_wr: 1,
            ..QpCaps::default()
        };
        let mut qps = Vec::with_capacity(usize::from(n));
        let mut shards = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let s = dev * self.spd + self.next_shard.fetch_add(1, Ordering::Relaxed) % self.spd;
            let cq = &self.cqs[s];
            qps.push(QueuePair::create_rc(&self.devs[dev].pd, cq, cq, caps)?);
            shards.push(s as u16);
        }
        Ok((qps, shards))
    }

    /// This engine's NIC entry for device `dev` and the QPs `qps` on it:
    /// GID, QPs with their initial PSNs (PSN base returned), and every
    /// region with the rkey of its registration on `dev`.
    fn local_descriptor(
        &self,
        dev: usize,
        qps: &[QueuePair],
    ) -> Result<(EndpointDescriptor, u32), EngineError> {
        let d = &self.devs[dev];
        let gid = d.ctx.gid(d.qp_cfg.port_num, d.qp_cfg.gid_index)?;
        let lid = d.ctx.port(d.qp_cfg.port_num)?.lid;
        let psn_base = (self.now() as u32 ^ qps.first().map(|q| q.qpn()).unwrap_or(0)) & 0xFF_FFFF;
        let segments = self.region_descriptors(dev);
        Ok((
            EndpointDescriptor {
                gid,
                lid,
                qps: qps
                    .iter()
                    .enumerate()
                    .map(|(i, q)| QpEndpoint {
                        qpn: q.qpn(),
                        psn: (psn_base + i as u32) & 0xFF_FFFF,
                    })
                    .collect(),
                segments,
            },
            psn_base,
        ))
    }

    /// The initiator's side of the handshake, then records the segment
    /// (`peer`: the address we dialed, which this engine can reconnect).
    pub(crate) fn connect(
        &self,
        hs: Handshake,
        peer: Option<SocketAddr>,
    ) -> Result<SegmentId, EngineError> {
        let (rails, _) = self.establish(hs, Side::Initiator, None)?;
        Ok(self.record_segment(rails, peer))
    }

    /// The target's side, for a descriptor the listener already received
    /// and decoded: refuses a replay ([`Shared::is_replay`]) before
    /// anything is built, then connects and records the segment, retiring
    /// the connection the peer says it replaces.
    pub(crate) fn accept_peer(
        &self,
        peer: PeerDescriptor,
        hs: Handshake,
    ) -> Result<(), EngineError> {
        if self.is_replay(&peer) {
            // Dropping `hs` closes the connection.
            return Err(EngineError::Handshake(HandshakeError::Replayed));
        }
        let (rails, replaces) = self.establish(hs, Side::Target(peer), None)?;
        if let Some(q) = replaces {
            self.retire_replaced(q, &rails);
        }
        self.record_segment(rails, None);
        Ok(())
    }

    fn record_segment(&self, rails: Vec<RailEntry>, peer: Option<SocketAddr>) -> SegmentId {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        segs.push(SegmentEntry {
            rails,
            peer,
            reconnecting: false,
            reconnects: 0,
            closed: false,
        });
        SegmentId(segs.len() as u32 - 1)
    }

    /// A replayed descriptor: its rail-0 QP (GID, QP number and initial
    /// PSN) is the peer side of a connection this engine already made. A
    /// real peer's new connection, a reconnect included, always brings new
    /// QPs (and a fresh random PSN, so even a QP number the kernel reused
    /// after a peer restart does not match), so only a copy of an old
    /// descriptor can. Checked against every segment ever recorded
    /// (closed ones too: the list is append-only).
    fn is_replay(&self, peer: &PeerDescriptor) -> bool {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        repeats(
            segs.iter()
                .filter_map(|e| e.rails.first())
                .map(|r| (r.peer_gid, r.peer_qpn, r.peer_psn)),
            peer,
        )
    }

    /// Both sides of the handshake: builds QPs on every device, exchanges
    /// descriptors (one NIC entry per device; the initiator sends first, the
    /// target has already received the initiator's: [`Side::Target`]),
    /// connects the rail-matched pairs, barriers, then opens one endpoint
    /// per rail in the table. The caller publishes the rails.
    ///
    /// **Rail rule**: local device `i` connects to the peer's NIC `i`, for
    /// `i < min(local devices, peer NICs)`. With different counts the extra
    /// devices of the larger side carry nothing to this peer (their QPs
    /// are destroyed unconnected); both sides compute the same pairs.
    /// A route domain is the same for the same (device, peer NIC), so a
    /// reconnect lands on the same routes.
    ///
    /// `replaces` (a reconnect): the peer's QP number of the connection
    /// this one replaces, sent to the peer ([`PeerDescriptor::replaces`]).
    /// Returns the rails and what the *peer* said it replaces.
    pub(crate) fn establish(
        &self,
        hs: Handshake,
        side: Side,
        replaces: Option<u32>,
    ) -> Result<(Vec<RailEntry>, Option<u32>), EngineError> {
        let mut built = Vec::with_capacity(self.devs.len());
        let mut local = PeerDescriptor {
            nics: Vec::new(),
            replaces,
        };
        for d in 0..self.devs.len() {
            let (qps, shards) = self.new_qps(d)?;
            let (nic, psn_base) = self.local_descriptor(d, &qps)?;
            local.nics.push(nic);
            built.push((qps, shards, psn_base));
        }
        let (peer, mut hs) = match side {
            Side::Initiator => hs.exchange_as_initiator(&local)?,
            Side::Target(peer) => (peer, hs.reply(&local)?),
        };
        let rails = built.len().min(peer.nics.len());
        built.truncate(rails);
        let mut connected = Vec::with_capacity(rails);
        for (d, ((mut qps, shards, psn_base), nic)) in built.into_iter().zip(&peer.nics).enumerate()
        {
            if nic.qps.len() != qps.len() {
                return Err(EngineError::PeerMismatch {
                    what: "QPs per endpoint (MC_NUM_QP_PER_EP)",
                    ours: qps.len() as u64,
                    theirs: nic.qps.len() as u64,
                });
            }
            let qp_cfg = &self.devs[d].qp_cfg;
            for (i, (qp, rq)) in qps.iter_mut().zip(&nic.qps).enumerate() {
                let remote = RemoteQp {
                    qp: *rq,
                    gid: nic.gid,
                    lid: nic.lid,
                };
                qp.connect(qp_cfg, (psn_base + i as u32) & 0xFF_FFFF, &remote)?;
            }
            connected.push((d as u16, qps, shards, nic));
        }
        hs.barrier()?;
        let mut entry: Vec<RailEntry> = Vec::with_capacity(rails);
        for (dev, qps, shards, nic) in connected {
            // Only a peer that completed the barrier gets a CC route
            // domain (a fixed-size table): one that drops out never holds one.
            let route = match self.route_for(dev, nic.gid, nic.lid) {
                Ok(r) => r,
                Err(e) => {
                    for r in &entry {
                        self.retire(r.handle, RetireReason::Shutdown);
                    }
                    return Err(e);
                }
            };
            let remote = nic.segments.clone();
            let qpns: Vec<u32> = qps.iter().map(|q| q.qpn()).collect();
            let handle = match self.endpoints.open(EpResource {
                qps,
                remote: remote.clone(),
            }) {
                Ok(h) => h,
                Err(e) => {
                    // Nothing was posted on the rails opened so far: retire
                    // them (the one teardown API) and give up the segment.
                    for r in &entry {
                        self.retire(r.handle, RetireReason::Shutdown);
                    }
                    return Err(EngineError::Endpoint(e));
                }
            };
            if let Ok(mut m) = self.qpn_map.write() {
                for &q in &qpns {
                    m.insert((dev, q), handle);
                }
            }
            entry.push(RailEntry {
                dev,
                handle,
                remote,
                shards,
                qpns,
                peer_qpn: nic.qps[0].qpn,
                peer_psn: nic.qps[0].psn,
                peer_gid: nic.gid,
                route,
            });
        }
        Ok((entry, peer.replaces))
    }

    /// The passive side of a reconnect: the peer replaced the connection
    /// whose rail-0 endpoint here has QP number `qpn`. Its segment is
    /// closed and its endpoints retired (RFC 3136 "passive-handshake
    /// stale"), so repeated reconnects do not pile up stale endpoints.
    /// Honoured only if that connection came from the same peer NIC (the
    /// same rail-0 route domain) as the new one; anything else is ignored.
    fn retire_replaced(&self, qpn: u32, new: &[RailEntry]) {
        let Some(h) = self
            .qpn_map
            .read()
            .ok()
            .and_then(|m| m.get(&(0, qpn)).copied())
        else {
            return;
        };
        let old: Vec<EndpointHandle> = {
            let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
            let Some(e) = segs.iter_mut().find(|e| {
                e.rails.first().is_some_and(|r| {
                    r.handle == h && new.first().is_some_and(|n| n.route == r.route)
                })
            }) else {
                return;
            };
            e.closed = true;
            e.rails.iter().map(|r| r.handle).collect()
        };
        for h in old {
            self.retire(h, RetireReason::PassiveHandshakeStale);
        }
    }

    /// Forgets the QP numbers of a reclaimed endpoint (also one a
    /// reconnect already replaced in its segment).
    pub(crate) fn forget_endpoint(&self, h: EndpointHandle) {
        if let Ok(mut m) = self.qpn_map.write() {
            m.retain(|_, v| *v != h);
        }
    }

    pub(crate) fn stats(&self) -> EngineStats {
        let mut s = EngineStats {
            tokens_in_use: self.tokens.in_use() as u64,
            endpoint_outstanding: self.endpoints.outstanding_total(),
            qp_depth: self.endpoints.qp_depth_total(),
            cq_outstanding: self.cqs.iter().map(|c| c.outstanding()).sum(),
            slices_pending: self.slices.pending() as u64,
            endpoints_live: self.endpoints.live() as u64,
            async_events: self.async_events.load(Ordering::Relaxed),
            retired: self.retired.load(Ordering::Relaxed),
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
            force_flushes: self.force_flushes.load(Ordering::Relaxed),
            handshakes: self.handshakes.snapshot(),
            gate: self.gate.stats(),
            rails: self.devs.len() as u16,
            mem_regions: self.mem.count(),
            mem_pins: self.mem.pins_total(),
            ..EngineStats::default()
        };
        for d in 0..self.devs.len().min(MAX_RAILS) {
            s.rail_charged_bytes[d] = self.rails.nic_inflight(d).unwrap_or(0);
        }
        let rc = self.rails.counters();
        s.rail_accounting_errors = rc.nic_accounting_errors + rc.peer_accounting_errors;
        for (w, c) in self.counters.iter().enumerate() {
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            if let Some(sh) = self.post_shard(w) {
                if let Some(p) = s.rail_slices_posted.get_mut(sh / self.spd) {
                    *p += l(&c.posts);
                }
            }
            s.posts += l(&c.posts);
            s.doorbells += l(&c.doorbells);
            s.completions += l(&c.completions);
            s.stale_completions += l(&c.stale);
            s.bad_completions += l(&c.bad);
            s.deferrals += l(&c.deferrals);
            s.avoids += l(&c.avoids);
            s.backpressure += l(&c.backpressure);
            s.unposted += l(&c.unposted);
            s.retries += l(&c.retries);
            s.rail_moves += l(&c.rail_moves);
            s.invalid_posts += l(&c.invalid);
        }
        s
    }
}

/// Rail selection (RFC 4534) for one transfer to `seg` cut into `runs`
/// runs of [`SLICES_PER_QP_RUN`] slices (`run_bytes` each): returns, for
/// each run, the index into `rails` (the segment's active rails as `(local
/// device, CC route)`).
///
/// [`Selector::plan`] splits the runs over the devices in proportion to
/// their inverse scores (NIC in-flight bytes over the completion EWMA, with
/// periodic probes). Runs planned for a device that is not one of `rails`,
/// or whose device or route the controller has quarantined
/// ([`CcGate::usable`]), go to the best-scoring usable rail. If no rail
/// is usable, the best-scoring rail is used anyway (the gate then says
/// `Avoid` and the task records `PATH_QUARANTINED`). Runs are interleaved
/// over the chosen devices. Nothing is charged here: each slice charges
/// its actual bytes to its device when it is posted. Also returns the
/// plan's trace (`PlanInfo::trace`; `None` without a plan).
pub(crate) fn plan_rails(
    sel: &Selector,
    gate: &impl railyard_core::completion::CcLayer,
    seg: SegmentId,
    rails: &[(u16, u32)],
    runs: u64,
    run_bytes: u64,
    now: u64,
) -> (Vec<u8>, Option<Option<u64>>) {
    let runs_u32 = u32::try_from(runs).unwrap_or(u32::MAX);
    if rails.len() <= 1 || runs_u32 == 0 {
        return (vec![0; runs as usize], None);
    }
    let run_bytes = u32::try_from(run_bytes).unwrap_or(u32::MAX);
    let mut counts = [0u32; MAX_RAILS];
    let ndev = sel.len().min(MAX_RAILS);
    let trace = sel
        .plan(Some(seg.0), runs_u32, run_bytes, now, &mut counts[..ndev])
        .ok()
        .and_then(|i| i.trace);
    // The rail (index into `rails`) that serves each device, if usable.
    let mut usable = [None::<u8>; MAX_RAILS];
    for (i, &(dev, route)) in rails.iter().enumerate() {
        if usize::from(dev) < ndev && gate.usable(dev, route) {
            usable[usize::from(dev)] = Some(i as u8);
        }
    }
    if usable.iter().all(Option::is_none) {
        for (i, &(dev, _)) in rails.iter().enumerate() {
            if usize::from(dev) < ndev {
                usable[usize::from(dev)] = Some(i as u8);
            }
        }
    }
    let score = |d: usize| sel.score_of(d, Some(seg.0), run_bytes, false);
    let Some(best) = (0..ndev).filter(|&d| usable[d].is_some()).reduce(|a, b| {
        if score(b)
            .zip(score(a))
            .is_some_and(|(sb, sa)| sb.better_than(sa))
        {
            b
        } else {
            a
        }
    }) else {
        return (vec![0; runs as usize], trace);
    };
    for d in 0..ndev {
        if usable[d].is_none() {
            counts[best] += std::mem::take(&mut counts[d]);
        }
    }
    let mut out = Vec::with_capacity(runs as usize);
    while out.len() < runs as usize {
        let before = out.len();
        for d in 0..ndev {
            if counts[d] > 0 && out.len() < runs as usize {
                counts[d] -= 1;
                out.push(usable[d].unwrap_or(0));
            }
        }
        if out.len() == before {
            // The plan gave fewer runs than asked (it never does): the
            // rest go to the best rail.
            out.resize(runs as usize, usable[best].unwrap_or(0));
        }
    }
    (out, trace)
}

/// The caller-visible anomaly of a task from its evidence's detail, the
/// task's succeeded-slice count and whether the controller is on.
/// Successes are counted into the evidence only once the task has an
/// anomaly (the lock-free fast path), so a task with no unresolved evidence
/// and at least one success is NORMAL; with the controller off, UNKNOWN.
fn project_anomaly(mut d: AnomalyDetail, succeeded: u32, enabled: bool) -> AnomalyDetail {
    if d.state == AnomalyState::Unknown && d.winner.map_or(true, |w| w.resolved) && succeeded > 0 {
        d.state = AnomalyState::Normal;
    }
    if !enabled {
        d.state = AnomalyState::Unknown;
    }
    d
}

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
    pub fn new(cfg: EngineConfig) -> Result<Self, EngineError> {
        cfg.validate()?;
        let (gate, cc_error) =
            CcGate::new_or_off_devices(&cfg.cc, cfg.rails() as u16, cfg.max_endpoints);
        let spd = match cfg.worker_model {
            WorkerModel::Shared => usize::from(cfg.workers),
            WorkerModel::DedicatedPoller => usize::from(cfg.workers) - 1,
        };
        let cap = |v: u32| u8::try_from(v.clamp(1, 16)).unwrap_or(16);
        let mut devs = Vec::new();
        let mut max_cqe = u32::MAX;
        for name in cfg.device_names() {
            let ctx = Context::open(name)?;
            let port = ctx.port(cfg.port)?;
            let caps = ctx.caps()?;
            let qp_cfg = QpConfig {
                port_num: cfg.port,
                gid_index: cfg.gid_index,
                mtu: port.active_mtu.unwrap_or(Mtu::M1024),
                max_rd_atomic: cap(caps.max_qp_init_rd_atom),
                max_dest_rd_atomic: cap(caps.max_qp_rd_atom),
                timeout: cfg.qp_timeout,
                retry_cnt: cfg.qp_retry_cnt,
                ..QpConfig::default()
            };
            qp_cfg.validate()?;
            if cfg.max_wr > caps.max_qp_wr {
                return Err(ConfigError {
                    var: "MC_MAX_WR",
                    value: cfg.max_wr.to_string(),
                    expected: "at most the device's max_qp_wr",
                }
                .into());
            }
            max_cqe = max_cqe.min(caps.max_cqe.max(1));
            let pd = ctx.alloc_pd()?;
            ctx.set_async_nonblocking()?;
            devs.push(Dev { ctx, pd, qp_cfg });
        }
        // Every CQ can hold every token, so no CQ can ever overflow.
        let inflight = cfg.max_inflight.min(max_cqe);
        let mut cqs = Vec::with_capacity(devs.len() * spd);
        for d in &devs {
            for _ in 0..spd {
                cqs.push(d.ctx.create_cq(inflight)?);
            }
        }
        let shards = cqs.len();
        // The port's link rate is not queried: every rail gets the same
        // nominal rate, and the selector's completion EWMA learns the rest.
        let specs = vec![DeviceSpec::new(cfg.rail_nominal_bps); devs.len()];
        let rails = Selector::new(&specs, cfg.rail).map_err(|e| ConfigError {
            var: "rail",
            value: e.to_string(),
            expected: "a valid railyard_core::rail::RailConfig",
        })?;
        let tokens = TokenPool::new(inflight as usize)
            .map_err(|_: TokenError| EngineError::Core("token pool"))?;
        let slices = SliceTable::new(cfg.max_slices as usize)
            .map_err(|_: SliceError| EngineError::Core("slice table"))?;
        let endpoints = EndpointTable::new(EndpointConfig {
            capacity: cfg.max_endpoints,
            qps_per_endpoint: cfg.qps_per_endpoint,
            max_wr_per_qp: cfg.max_wr,
            drain_timeout_ns: cfg.drain_timeout.as_nanos().clamp(1, u64::MAX as u128 / 4) as u64,
        })
        .map_err(EngineError::Endpoint)?;
        let free_slices = ArrayQueue::new(cfg.max_slices as usize);
        for i in 0..cfg.max_slices {
            let _ = free_slices.push(i);
        }
        let free_tasks = ArrayQueue::new(cfg.max_tasks as usize);
        for i in 0..cfg.max_tasks {
            let _ = free_tasks.push(i);
        }
        let listener = TcpListener::bind(cfg.listen).map_err(EngineError::Io)?;
        listener.set_nonblocking(true).map_err(EngineError::Io)?;
        let listen = listener.local_addr().map_err(EngineError::Io)?;
        let workers = usize::from(cfg.workers) * devs.len();
        let shared = Arc::new(Shared {
            devs,
            spd,
            rails,
            rail_trace: rail_diag::RailTrace::new(cfg.rail.trace && cfg.rail.peer_accounting),
            epoch: Instant::now(),
            cqs,
            tokens,
            slices,
            endpoints,
            gate,
            cc_error,
            routes: Mutex::new(HashMap::new()),
            mem: memory::MemTable::new(inflight as usize),
            meta: (0..cfg.max_slices).map(|_| SliceMeta::default()).collect(),
            tasks: (0..cfg.max_tasks).map(|_| TaskCell::default()).collect(),
            queues: (0..shards)
                .map(|_| ArrayQueue::new(cfg.max_slices as usize))
                .collect(),
            free_slices,
            free_tasks,
            segments: RwLock::new(Vec::new()),
            qpn_map: RwLock::new(HashMap::new()),
            batches: RwLock::new(HashMap::new()),
            next_batch: AtomicU64::new(1),
            next_shard: AtomicUsize::new(0),
            next_run: AtomicU64::new(0),
            counters: (0..workers).map(|_| WorkerCounters::default()).collect(),
            async_events: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            force_flushes: AtomicU64::new(0),
            handshakes: HandshakeCounters::default(),
            threads: OnceLock::new(),
            stop: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            fault: fault::FaultState::default(),
            me: OnceLock::new(),
            reconnect_threads: Mutex::new(Vec::new()),
            reconnect_lock: Mutex::new(()),
            cfg,
        });
        let _ = shared.me.set(Arc::downgrade(&shared));
        let threads = worker::spawn_all(&shared, listener).map_err(EngineError::Io)?;
        Ok(Self {
            shared,
            threads,
            listen,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &EngineConfig {
        &self.shared.cfg
    }

    /// Why the configured congestion controller stayed off (RFC 4162: an
    /// invalid configuration leaves it off rather than partially
    /// defaulted), or `None` if it runs as configured.
    pub fn cc_config_error(&self) -> Option<railyard_core::cc::ConfigError> {
        self.shared.cc_error
    }

    /// Where peers reach this engine's handshake listener.
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
    }

    /// The first device's name (rail 0).
    pub fn device(&self) -> &str {
        self.shared.devs[0].ctx.name()
    }

    /// Every device's name, in rail order.
    pub fn devices(&self) -> Vec<&str> {
        self.shared.devs.iter().map(|d| d.ctx.name()).collect()
    }

    /// Number of rails of `seg` (local device `i` ↔ peer NIC `i`).
    pub fn segment_rails(&self, seg: SegmentId) -> Result<usize, EngineError> {
        let segs = self
            .shared
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner());
        segs.get(seg.0 as usize)
            .map(|e| e.rails.len())
            .ok_or(EngineError::NoSuchSegment(seg))
    }

    /// Registers the region `first` (already registered on device 0) on
    /// every other device and records it.
    ///
    /// # Safety
    ///
    /// `first`'s memory must stay valid until the returned entry's last
    /// registration is dropped (it is: `MemEntry` drops `first` last).
    unsafe fn add_region(&self, first: MemoryRegion) -> Result<Arc<MemoryRegion>, EngineError> {
        let first = Arc::new(first);
        let mut entry = MemEntry {
            regs: vec![first.clone()],
        };
        for d in &self.shared.devs[1..] {
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
    pub fn alloc_memory(&self, len: usize) -> Result<Arc<MemoryRegion>, EngineError> {
        let mr = MemoryRegion::alloc(&self.shared.devs[0].pd, len, Access::ALL_RDMA)?;
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
    pub unsafe fn register_memory(
        &self,
        addr: *mut u8,
        len: usize,
    ) -> Result<Arc<MemoryRegion>, EngineError> {
        // SAFETY: forwarded from the caller's promise; the engine holds the
        // region until it is dropped, after every QP is flushed.
        let mr = unsafe {
            MemoryRegion::register(&self.shared.devs[0].pd, addr, len, Access::ALL_RDMA)
        }?;
        // SAFETY: forwarded from the caller's promise, as above.
        unsafe { self.add_region(mr) }
    }

    /// Connects to the engine listening at `peer`: N RC QPs, the versioned
    /// descriptor handshake, INIT → RTR → RTS, a barrier. Returns the
    /// segment to address transfers to.
    ///
    /// The address is remembered: if the endpoint is later retired for a
    /// CQ error or a QP-scope event, the engine reconnects once on its own,
    /// and [`reconnect_segment`](Self::reconnect_segment) does it on demand.
    pub fn open_segment(&self, peer: impl ToSocketAddrs) -> Result<SegmentId, EngineError> {
        let addrs: Vec<SocketAddr> = peer
            .to_socket_addrs()
            .map_err(|source| HandshakeError::Io {
                during: "resolving the peer",
                source,
            })?
            .collect();
        let hs = Handshake::connect(&addrs[..], self.shared.cfg.handshake_timeout)?;
        // The address that answered (the one to dial again on reconnect).
        let dialed = hs.stream().peer_addr().ok().or(addrs.first().copied());
        self.shared.connect(hs, dialed)
    }

    /// The regions the peer exported at handshake time (remote addresses of
    /// transfers must lie in one of them).
    pub fn segment_regions(&self, seg: SegmentId) -> Result<Vec<SegmentDescriptor>, EngineError> {
        let segs = self
            .shared
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner());
        segs.get(seg.0 as usize)
            .and_then(|e| e.rails.first())
            .map(|r| r.remote.clone())
            .ok_or(EngineError::NoSuchSegment(seg))
    }

    /// Segments known to this engine, including ones peers opened to us
    /// (a connection is symmetric: either side may post on it).
    pub fn segments(&self) -> Vec<SegmentId> {
        let segs = self
            .shared
            .segments
            .read()
            .unwrap_or_else(|e| e.into_inner());
        (0..segs.len() as u32).map(SegmentId).collect()
    }

    /// Retires a segment's endpoints, one per rail (the one retire API):
    /// no new posts; their posted work drains (or is flushed after the
    /// drain timeout).
    pub fn close_segment(&self, seg: SegmentId) -> Result<(), EngineError> {
        let hs: Vec<EndpointHandle> = {
            let mut segs = self
                .shared
                .segments
                .write()
                .unwrap_or_else(|e| e.into_inner());
            let e = segs
                .get_mut(seg.0 as usize)
                .ok_or(EngineError::NoSuchSegment(seg))?;
            e.closed = true;
            e.rails.iter().map(|r| r.handle).collect()
        };
        let mut first_err = None;
        for h in hs {
            match self
                .shared
                .endpoints
                .retire(h, RetireReason::Shutdown, self.shared.now())
            {
                Ok(_) => {
                    self.shared.retired.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        match first_err {
            Some(e) => Err(EngineError::Endpoint(e)),
            None => Ok(()),
        }
    }

    /// Creates an empty batch that will hold up to `capacity` tasks.
    pub fn allocate_batch(&self, capacity: usize) -> Result<BatchId, EngineError> {
        let id = self.shared.next_batch.fetch_add(1, Ordering::Relaxed);
        self.shared
            .batches
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Batch {
                    capacity,
                    tasks: Vec::with_capacity(capacity.min(1 << 16)),
                },
            );
        Ok(BatchId(id))
    }

    /// Submits transfers into `batch`: validates all of them first (nothing
    /// is queued if any is invalid), cuts them into slices (see
    /// [`slice_count`]) and queues the slices to the workers. Task `i` of
    /// this call gets index `previous tasks + i` in the batch.
    pub fn submit(&self, batch: BatchId, transfers: &[Transfer]) -> Result<(), EngineError> {
        let sh = &*self.shared;
        let ss = u64::from(sh.cfg.slice_size);
        struct RailChoice {
            dev: u16,
            handle: EndpointHandle,
            shards: Vec<u16>,
            route: u32,
        }
        struct Plan {
            mem: u32,
            local_off: u64,
            region: u32,
            remote_off: u64,
            /// The segment's active rails.
            rails: Vec<RailChoice>,
        }
        // 1. Validate every transfer, and pin its memory once per slice
        // (under the table lock: the region found is the one pinned). The
        // pins go back if anything below refuses.
        let mut plans = Vec::with_capacity(transfers.len());
        let mut pins = memory::SubmitPins::new(&sh.mem);
        {
            let segs = sh.segments.read().unwrap_or_else(|e| e.into_inner());
            let regions = sh.mem.lock();
            for t in transfers {
                if t.len == 0 {
                    return Err(EngineError::ZeroLength);
                }
                let memory::Located {
                    mem,
                    offset: local_off,
                } = memory::MemTable::locate(&regions, t.local, t.len).ok_or(
                    EngineError::LocalRange {
                        addr: t.local,
                        len: t.len,
                    },
                )?;
                let seg = segs
                    .get(t.segment.0 as usize)
                    .ok_or(EngineError::NoSuchSegment(t.segment))?;
                let rails: Vec<RailChoice> = seg
                    .rails
                    .iter()
                    .filter(|r| {
                        matches!(sh.endpoints.state(r.handle),
                            Ok(s) if s.phase == railyard_core::endpoint::Phase::Active)
                    })
                    .map(|r| RailChoice {
                        dev: r.dev,
                        handle: r.handle,
                        shards: r.shards.clone(),
                        route: r.route,
                    })
                    .collect();
                if rails.is_empty() {
                    return Err(EngineError::SegmentClosed(t.segment));
                }
                // Every rail lists the same regions (the handshake checks it).
                let (region, remote_off) = seg.rails[0]
                    .remote
                    .iter()
                    .enumerate()
                    .find_map(|(i, d)| {
                        let rend = t.remote_offset.checked_add(t.len)?;
                        (t.remote_offset >= d.addr && rend <= d.addr + d.len)
                            .then(|| (i as u32, t.remote_offset - d.addr))
                    })
                    .ok_or(EngineError::RemoteRange {
                        addr: t.remote_offset,
                        len: t.len,
                    })?;
                pins.pin(mem, slice_count(t.len, sh.cfg.slice_size), t.local, t.len)?;
                plans.push(Plan {
                    mem,
                    local_off,
                    region,
                    remote_off,
                    rails,
                });
            }
        }
        let needed: u64 = transfers
            .iter()
            .map(|t| slice_count(t.len, sh.cfg.slice_size))
            .sum();
        // 2. Reserve tasks and slices, all or nothing.
        let mut batches = sh.batches.write().unwrap_or_else(|e| e.into_inner());
        let b = batches
            .get_mut(&batch.0)
            .ok_or(EngineError::NoSuchBatch(batch))?;
        if b.tasks.len() + transfers.len() > b.capacity {
            return Err(EngineError::BatchFull {
                capacity: b.capacity,
            });
        }
        let mut task_ids = Vec::with_capacity(transfers.len());
        let mut slice_ids = Vec::with_capacity(needed as usize);
        let give_back = |task_ids: &[u32], slice_ids: &[u32]| {
            for &t in task_ids {
                let _ = sh.free_tasks.push(t);
            }
            for &s in slice_ids {
                let _ = sh.free_slices.push(s);
            }
        };
        for _ in transfers {
            match sh.free_tasks.pop() {
                Some(t) => task_ids.push(t),
                None => {
                    give_back(&task_ids, &slice_ids);
                    return Err(EngineError::OutOfTasks);
                }
            }
        }
        for _ in 0..needed {
            match sh.free_slices.pop() {
                Some(s) => slice_ids.push(s),
                None => {
                    give_back(&task_ids, &slice_ids);
                    return Err(EngineError::OutOfSlices { needed });
                }
            }
        }
        // 3. Describe and queue the slices.
        let now = sh.now();
        let deadline = now.saturating_add(sh.cfg.transfer_timeout.as_nanos() as u64);
        let nqp = u64::from(sh.cfg.qps_per_endpoint);
        let mut next = slice_ids.iter().copied();
        for ((t, p), &task) in transfers.iter().zip(&plans).zip(&task_ids) {
            let n = slice_count(t.len, sh.cfg.slice_size);
            let cell = &sh.tasks[task as usize];
            cell.total.store(n as u32, Ordering::Relaxed);
            for a in [&cell.ok, &cell.failed, &cell.timed_out, &cell.canceled] {
                a.store(0, Ordering::Relaxed);
            }
            cell.started.store(false, Ordering::Relaxed);
            cell.bytes_done.store(0, Ordering::Relaxed);
            cell.bytes_total.store(t.len, Ordering::Relaxed);
            cell.deadline_ns.store(deadline, Ordering::Relaxed);
            *cell.evidence.lock().unwrap_or_else(|e| e.into_inner()) = TaskEvidence::new();
            cell.anomalies.store(0, Ordering::Relaxed);
            let runs = n.div_ceil(SLICES_PER_QP_RUN);
            let run0 = sh.next_run.fetch_add(runs, Ordering::Relaxed);
            let keys: Vec<(u16, u32)> = p.rails.iter().map(|r| (r.dev, r.route)).collect();
            let run_bytes = t.len.min(ss * SLICES_PER_QP_RUN);
            let (run_rail, trace) =
                plan_rails(&sh.rails, &sh.gate, t.segment, &keys, runs, run_bytes, now);
            sh.rail_trace.record(trace);
            let mut entry = TaskEntry {
                task,
                slices: Vec::with_capacity(n as usize),
            };
            for i in 0..n {
                let s = next.next().unwrap_or(0);
                let off = i * ss;
                let len = (t.len - off).min(ss) as u32;
                let run = i / SLICES_PER_QP_RUN;
                let rail = &p.rails[usize::from(run_rail[run as usize])];
                let qp = ((run0 + run) % nqp) as u16;
                let shard = rail.shards[usize::from(qp)];
                let m = &sh.meta[s as usize];
                m.task.store(task, Ordering::Relaxed);
                m.mem.store(p.mem, Ordering::Relaxed);
                m.region.store(p.region, Ordering::Relaxed);
                m.op.store(matches!(t.op, Op::Read) as u32, Ordering::Relaxed);
                m.len.store(len, Ordering::Relaxed);
                m.qp.store(u32::from(qp), Ordering::Relaxed);
                m.shard.store(u32::from(shard), Ordering::Relaxed);
                m.dev.store(u32::from(rail.dev), Ordering::Relaxed);
                m.posted.store(0, Ordering::Relaxed);
                m.ep.store(ep_word(rail.handle), Ordering::Relaxed);
                m.segment.store(t.segment.0, Ordering::Relaxed);
                m.route.store(rail.route, Ordering::Relaxed);
                m.local_off.store(p.local_off + off, Ordering::Relaxed);
                m.remote_off.store(p.remote_off + off, Ordering::Relaxed);
                entry.slices.push(s);
            }
            b.tasks.push(entry);
        }
        // Open and queue only after every slice is described and the batch
        // holds them (so cancel/timeout scans see them). From here each
        // slice's memory pin is released when the slice settles.
        pins.commit();
        for te in &b.tasks[b.tasks.len() - transfers.len()..] {
            for &s in &te.slices {
                // A freed slot is never Pending, so open cannot refuse; if
                // it did, the slice would never settle: give its pin back.
                match sh.slices.open(s) {
                    Ok(r) => sh.requeue(r),
                    Err(_) => sh
                        .mem
                        .unpin(sh.meta[s as usize].mem.load(Ordering::Relaxed) as usize, 1),
                }
            }
        }
        Ok(())
    }

    /// Runs `f` on `batch` under the batch map's read lock.
    fn with_batch<T>(
        &self,
        batch: BatchId,
        f: impl FnOnce(&Batch) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let batches = self
            .shared
            .batches
            .read()
            .unwrap_or_else(|e| e.into_inner());
        f(batches
            .get(&batch.0)
            .ok_or(EngineError::NoSuchBatch(batch))?)
    }

    fn with_task<T>(
        &self,
        batch: BatchId,
        task: usize,
        f: impl FnOnce(&TaskCell) -> T,
    ) -> Result<T, EngineError> {
        self.with_batch(batch, |b| {
            let te = b
                .tasks
                .get(task)
                .ok_or(EngineError::NoSuchTask { batch, task })?;
            Ok(f(&self.shared.tasks[te.task as usize]))
        })
    }

    /// The state and progress of task `task` of `batch`.
    pub fn task_status(&self, batch: BatchId, task: usize) -> Result<TaskStatus, EngineError> {
        self.with_task(batch, task, TaskCell::status)
    }

    /// All tasks of `batch`, in submission order.
    pub fn batch_status(&self, batch: BatchId) -> Result<Vec<TaskStatus>, EngineError> {
        self.with_batch(batch, |b| {
            Ok(b.tasks
                .iter()
                .map(|te| self.shared.tasks[te.task as usize].status())
                .collect())
        })
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
    pub fn task_anomaly(&self, batch: BatchId, task: usize) -> Result<AnomalyState, EngineError> {
        Ok(self.task_anomaly_detail(batch, task)?.state)
    }

    /// The detailed anomaly query: the minimal state plus the winning
    /// observation (reason, scope, path, time, resolved, slice attempt,
    /// route generation, window, in-flight bytes, cooldown; unobserved
    /// fields say so) and the dropped / stale evidence counts. With the
    /// controller off, `state` is UNKNOWN but the evidence is still shown.
    pub fn task_anomaly_detail(
        &self,
        batch: BatchId,
        task: usize,
    ) -> Result<AnomalyDetail, EngineError> {
        let enabled = self.shared.gate.enabled();
        self.with_task(batch, task, |t| {
            let d = t
                .evidence
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .detail();
            project_anomaly(d, t.ok.load(Ordering::Acquire), enabled)
        })
    }

    /// Cancels every unsettled slice of `batch`: its tasks end `CANCELED`
    /// (unless a slice already failed or timed out). Work already posted
    /// still completes on the wire; its completion only releases resources.
    pub fn cancel_batch(&self, batch: BatchId) -> Result<(), EngineError> {
        self.with_batch(batch, |_| Ok(()))?;
        self.shared
            .settle_where(Outcome::Canceled, |id, _| id == batch.0, |_| {});
        Ok(())
    }

    /// Frees a batch whose tasks are all finished; its task and slice slots
    /// return to the pools. A batch with unfinished tasks is refused
    /// ([`EngineError::BatchBusy`]): cancel it first.
    pub fn free_batch(&self, batch: BatchId) -> Result<(), EngineError> {
        let sh = &*self.shared;
        let mut batches = sh.batches.write().unwrap_or_else(|e| e.into_inner());
        let b = batches
            .get(&batch.0)
            .ok_or(EngineError::NoSuchBatch(batch))?;
        if b.tasks
            .iter()
            .any(|te| !sh.tasks[te.task as usize].status().state.is_terminal())
        {
            return Err(EngineError::BatchBusy(batch));
        }
        if let Some(b) = batches.remove(&batch.0) {
            for te in b.tasks {
                for s in te.slices {
                    let _ = sh.free_slices.push(s);
                }
                let _ = sh.free_tasks.push(te.task);
            }
        }
        Ok(())
    }

    /// Counters and leak-check gauges.
    pub fn stats(&self) -> EngineStats {
        self.shared.stats()
    }

    /// Waits until no work request is in flight and no slice is queued
    /// (e.g. after every task finished, for the stale completions of
    /// timed-out or canceled attempts). Returns whether it got there.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        loop {
            let s = self.stats();
            let queued: usize = self.shared.queues.iter().map(|q| q.len()).sum();
            if s.tokens_in_use == 0 && s.cq_outstanding == 0 && queued == 0 {
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
    pub fn shutdown(&mut self) {
        let sh = &*self.shared;
        if self.threads.is_empty() {
            return;
        }
        sh.draining.store(true, Ordering::Release);
        // A reconnect in flight publishes its endpoint before we retire all.
        let reconnects: Vec<JoinHandle<()>> = sh
            .reconnect_threads
            .lock()
            .map(|mut v| v.drain(..).collect())
            .unwrap_or_default();
        for t in reconnects {
            let _ = t.join();
        }
        sh.retire_all(RetireReason::Shutdown);
        worker::flush_all(sh);
        let t0 = Instant::now();
        while sh.tokens.in_use() > 0 && t0.elapsed() < sh.cfg.drain_timeout * 2 {
            std::thread::sleep(Duration::from_millis(1));
        }
        sh.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
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
    fn a_replay_repeats_gid_qpn_and_psn_of_rail_0() {
        let nic = |gid: u8, qpn: u32, psn: u32| EndpointDescriptor {
            gid: [gid; 16],
            lid: 0,
            qps: vec![QpEndpoint { qpn, psn }, QpEndpoint { qpn: 99, psn: 1 }],
            segments: vec![],
        };
        let known = [([1u8; 16], 10, 500), ([2u8; 16], 11, 600)];
        let p = |n: EndpointDescriptor| PeerDescriptor::from(n);
        assert!(repeats(known, &p(nic(1, 10, 500))));
        assert!(repeats(known, &p(nic(2, 11, 600))));
        // A reused QP number after a peer restart has a fresh PSN.
        assert!(!repeats(known, &p(nic(1, 10, 501))));
        assert!(!repeats(known, &p(nic(1, 11, 500))));
        assert!(!repeats(known, &p(nic(3, 10, 500))));
        assert!(!repeats([], &p(nic(1, 10, 500))));
        // Only rail 0's first QP counts (a second NIC entry is not a replay).
        let two = PeerDescriptor {
            nics: vec![nic(3, 1, 1), nic(1, 10, 500)],
            replaces: None,
        };
        assert!(!repeats(known, &two));
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

    #[test]
    fn anomaly_projection_follows_the_rfc_table() {
        use railyard_core::evidence::{Observation, Reason, TaskEvidence};
        let s0 = SliceRef {
            index: 0,
            attempt: 1,
        };
        let mut ev = TaskEvidence::<8>::new();
        // No evidence, no success: UNKNOWN; no evidence, a success: NORMAL.
        assert_eq!(
            project_anomaly(ev.detail(), 0, true).state,
            AnomalyState::Unknown
        );
        assert_eq!(
            project_anomaly(ev.detail(), 1, true).state,
            AnomalyState::Normal
        );
        // Unresolved byte-window evidence wins over the success count.
        ev.record(s0, Observation::new(Reason::ByteWindow, 5));
        assert_eq!(
            project_anomaly(ev.detail(), 3, true).state,
            AnomalyState::Congested
        );
        // A new attempt clears it; a success elsewhere makes it NORMAL.
        ev.begin_attempt(SliceRef {
            index: 0,
            attempt: 2,
        });
        assert_eq!(
            project_anomaly(ev.detail(), 0, true).state,
            AnomalyState::Unknown
        );
        assert_eq!(
            project_anomaly(ev.detail(), 1, true).state,
            AnomalyState::Normal
        );
        // Quarantine evidence: LONG_UNAVAILABLE; with CC off: UNKNOWN, with
        // the evidence still shown.
        ev.record(
            SliceRef {
                index: 1,
                attempt: 1,
            },
            Observation::new(Reason::PathQuarantined, 9),
        );
        let d = project_anomaly(ev.detail(), 1, true);
        assert_eq!(d.state, AnomalyState::LongUnavailable);
        let off = project_anomaly(ev.detail(), 1, false);
        assert_eq!(off.state, AnomalyState::Unknown);
        assert_eq!(off.winner, d.winner);
    }

    /// A CC layer that marks some devices unusable (as a quarantine would).
    struct Unusable(&'static [u16]);
    impl railyard_core::completion::CcLayer for Unusable {
        fn usable(&self, device: u16, _route: u32) -> bool {
            !self.0.contains(&device)
        }
        fn acquire(
            &self,
            _rec: &mut TokenRecord,
            _now: u64,
        ) -> Result<(), railyard_core::completion::CcRefusal> {
            Ok(())
        }
        fn release(
            &self,
            _rec: &mut TokenRecord,
            _e: railyard_core::classify::Effect,
        ) -> Result<railyard_core::cc::Settlement, railyard_core::cc::ReleaseError> {
            Ok(railyard_core::cc::Settlement::Current)
        }
    }

    fn selector(n: usize) -> Selector {
        let cfg = RailConfig {
            probe_interval: 0,
            ..RailConfig::default()
        };
        Selector::new(&vec![DeviceSpec::new(NOMINAL_RAIL_BPS); n], cfg).unwrap()
    }

    #[test]
    fn rail_plan_splits_interleaves_and_avoids_unusable_rails() {
        let sel = selector(2);
        let rails = [(0u16, 0u32), (1, 64)];
        let seg = SegmentId(3);
        let run = 8 * 65536;
        // Idle, equal rails: an even split, interleaved.
        let p = plan_rails(&sel, &(), seg, &rails, 16, run, 0).0;
        assert_eq!(p.len(), 16);
        assert_eq!(p.iter().filter(|&&r| r == 1).count(), 8);
        assert_eq!(&p[..4], &[0, 1, 0, 1]);
        // Load on device 0 (charges of posted slices): most runs go to 1.
        let held: Vec<_> = (0..64)
            .map(|_| sel.charge(0, Some(3), 65536, 0).unwrap())
            .collect();
        let p = plan_rails(&sel, &(), seg, &rails, 16, run, 0).0;
        assert!(p.iter().filter(|&&r| r == 1).count() > 8, "{p:?}");
        for c in held {
            sel.release(c, railyard_core::rail::Outcome::Failed, 1)
                .unwrap();
        }
        // An unusable (quarantined) device gets nothing.
        let p = plan_rails(&sel, &Unusable(&[1]), seg, &rails, 16, run, 0).0;
        assert!(p.iter().all(|&r| r == 0), "{p:?}");
        let p = plan_rails(&sel, &Unusable(&[0]), seg, &rails, 16, run, 0).0;
        assert!(p.iter().all(|&r| r == 1), "{p:?}");
        // Every rail unusable: still planned (the gate then avoids).
        let p = plan_rails(&sel, &Unusable(&[0, 1]), seg, &rails, 4, run, 0).0;
        assert_eq!(p.len(), 4);
        // A segment with only device 1 (peer with one NIC... on our rail 1):
        // index 0 of its rails, always.
        let p = plan_rails(&sel, &(), seg, &[(1, 64)], 5, run, 0).0;
        assert_eq!(p, vec![0; 5]);
        // Nothing was charged by planning.
        assert_eq!(
            (sel.nic_inflight(0), sel.nic_inflight(1)),
            (Some(0), Some(0))
        );
    }

    #[cfg(feature = "adaptive-cc")]
    /// With the ledger and trace on, a multi-rail plan returns its sample-age
    /// trace (cold first); a one-rail segment is no decision and has none.
    #[cfg(feature = "peer-feedback")]
    #[test]
    fn rail_plan_returns_the_decision_trace() {
        use railyard_core::rail::Outcome as RailOutcome;
        let cfg = RailConfig {
            peer_accounting: true,
            trace: true,
            probe_interval: 0,
            ..RailConfig::default()
        };
        let sel = Selector::new(&[DeviceSpec::new(NOMINAL_RAIL_BPS); 2], cfg).unwrap();
        let rails = [(0u16, 0u32), (1, 64)];
        let (_, t) = plan_rails(&sel, &(), SegmentId(3), &rails, 4, 1 << 19, 10);
        assert_eq!(t, Some(None), "no samples yet: cold");
        for (d, done) in [(0u16, 1_000u64), (1, 4_000)] {
            let c = sel.charge(d, Some(3), 65536, 0).unwrap();
            sel.release(c, RailOutcome::Completed { post_ns: 0 }, done)
                .unwrap();
        }
        let (_, t) = plan_rails(&sel, &(), SegmentId(3), &rails, 4, 1 << 19, 5_000);
        assert_eq!(t, Some(Some(4_000)), "the oldest candidate sample");
        let (_, t) = plan_rails(&sel, &(), SegmentId(3), &rails[..1], 4, 1 << 19, 5_000);
        assert_eq!(t, None);
    }

    #[test]
    fn rail_plan_avoids_a_cc_quarantined_device() {
        let cfg = CcConfig {
            mode: CcMode::Enforce,
            ..CcConfig::default()
        };
        let gate = CcGate::with_devices(&cfg, 2, 4).unwrap();
        let sel = selector(2);
        let rails = [(0u16, gate.route_index(0, 0)), (1, gate.route_index(1, 0))];
        let p = plan_rails(&sel, &gate, SegmentId(0), &rails, 8, 1 << 19, 0).0;
        assert!(p.contains(&1));
        gate.device_feedback(1, railyard_core::classify::Effect::Quarantine);
        assert!(!gate.usable(1, rails[1].1));
        assert!(gate.usable(0, rails[0].1));
        let p = plan_rails(&sel, &gate, SegmentId(0), &rails, 8, 1 << 19, 0).0;
        assert!(p.iter().all(|&r| r == 0), "{p:?}");
    }

    #[test]
    fn task_state_rules() {
        let t = TaskCell::default();
        t.total.store(3, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Waiting);
        t.started.store(true, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Pending);
        t.ok.store(2, Ordering::Relaxed);
        t.canceled.store(1, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Canceled);
        t.canceled.store(0, Ordering::Relaxed);
        t.timed_out.store(1, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Timeout);
        t.ok.store(1, Ordering::Relaxed);
        t.failed.store(1, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Failed);
        t.failed.store(0, Ordering::Relaxed);
        t.timed_out.store(0, Ordering::Relaxed);
        t.ok.store(3, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Completed);
    }
}
