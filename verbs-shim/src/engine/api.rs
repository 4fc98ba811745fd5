//! The engine's public vocabulary: errors, ids, [`Transfer`], task state
//! and status, and the stats snapshot ([`EngineStats`]). Plain data: no
//! engine state lives here.

use super::cc_gate::GateStats;
use super::config::{ConfigError, MAX_RAILS};
use crate::handshake::HandshakeError;
use crate::handshake::Refusal;
use crate::VerbsError;
use railyard_core::endpoint::{EndpointError, EndpointHandle};
use railyard_core::evidence::{AnomalyState, Detail as AnomalyDetail};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most memory regions one engine registers.
pub const MAX_MEMORY_REGIONS: usize = 256;
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
    /// The receiver-credit negotiation refused the peer (RFC 2849: a
    /// required side never treats an unsupported peer as unlimited); the
    /// connection was dropped before any QP was connected.
    CreditRefused {
        /// Our `MC_RECEIVER_CREDIT` policy.
        ours: &'static str,
        /// What the peer's descriptor offered (`off` = no capability).
        theirs: &'static str,
        /// Why.
        why: &'static str,
    },
    /// The segment has no active receiver-credit session (credit off,
    /// unsupported or legacy peer, or not a segment).
    CreditNotActive(u32),
    /// `consume` was refused by the receiver allocator; nothing changed.
    CreditConsume {
        /// The segment.
        segment: u32,
        /// Slots asked for.
        slots: u64,
        /// Why.
        why: &'static str,
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
            Self::CreditRefused { ours, theirs, why } => write!(
                f,
                "receiver credit refused the peer: MC_RECEIVER_CREDIT is {ours} here, the peer's is {theirs}: {why}"
            ),
            Self::CreditNotActive(s) => {
                write!(f, "segment {s} has no active receiver-credit session")
            }
            Self::CreditConsume {
                segment,
                slots,
                why,
            } => write!(
                f,
                "consume({segment}, {slots}) refused: {why}; nothing changed"
            ),
            Self::Unsupported(what) => write!(f, "not supported yet: {what}"),
            Self::Core(what) => write!(f, "cannot build {what}"),
        }
    }
}

/// The underlying error, for reporters that walk the chain. `Config`,
/// `Verbs` and `Handshake` display exactly their inner error, so they are
/// transparent: their source is the inner error's source (a handshake's
/// `io::Error`, a decode error), not the inner error again. `Endpoint` and
/// `Io` add context to the inner error, which is their source.
impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(e) => e.source(),
            Self::Verbs(e) => e.source(),
            Self::Handshake(e) => e.source(),
            Self::Endpoint(e) => Some(e),
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

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
    /// ([`Engine::segment_regions`](super::Engine::segment_regions)); Mooncake's `target_offset`.
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct EngineStats {
    /// Tokens (posted attempts) not yet completed. A free token in a
    /// worker's cache is not in use.
    pub tokens_in_use: u64,
    /// Free tokens held in the workers' token caches (not in use, not on
    /// the pool's own lists; a gauge, at most 32 per worker; 0 after
    /// shutdown). `tokens_in_use + tokens_cached + free in the pool` is the
    /// pool's capacity (`max_inflight`, bounded by the CQ size).
    pub tokens_cached: u64,
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
    /// Slices parked after a refusal (deferred, avoided, backpressure),
    /// each held until the event that can change the answer instead of
    /// being re-tried every round.
    pub parks: u64,
    /// Slices parked right now (a gauge; 0 when idle).
    pub parked: u64,
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
    /// requests in flight ([`Engine::deregister_memory`](super::Engine::deregister_memory) is refused while
    /// a region has any). Zero when the engine is idle.
    pub mem_pins: u64,
}

/// How the handshake listener ended each connection
/// ([`EngineStats::handshakes`]). Every connection lands in exactly one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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

/// The caller-visible anomaly of a task from its evidence's detail, the
/// task's succeeded-slice count and whether the controller is on.
/// Successes are counted into the evidence only once the task has an
/// anomaly (the lock-free fast path), so a task with no unresolved evidence
/// and at least one success is NORMAL; with the controller off, UNKNOWN.
pub(crate) fn project_anomaly(
    mut d: AnomalyDetail,
    succeeded: u32,
    enabled: bool,
) -> AnomalyDetail {
    if d.state == AnomalyState::Unknown && d.winner.map_or(true, |w| w.resolved) && succeeded > 0 {
        d.state = AnomalyState::Normal;
    }
    if !enabled {
        d.state = AnomalyState::Unknown;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_expose_their_source() {
        use std::error::Error;
        let io = EngineError::Io(std::io::Error::other("bind"));
        assert_eq!(io.source().map(|e| e.to_string()), Some("bind".into()));
        let ep = EngineError::Endpoint(EndpointError::TableFull);
        assert!(ep.source().is_some_and(|e| e.is::<EndpointError>()));
        // Transparent: the handshake's own source (the io::Error), once.
        let hs = EngineError::Handshake(HandshakeError::Io {
            during: "connecting",
            source: std::io::Error::other("refused"),
        });
        assert_eq!(
            hs.to_string(),
            "handshake I/O error while connecting: refused"
        );
        assert!(hs.source().is_some_and(|e| e.is::<std::io::Error>()));
        assert!(EngineError::ZeroLength.source().is_none());
        assert!(EngineError::Verbs(VerbsError::NoDevice).source().is_none());
    }
    use railyard_core::slice::SliceRef;

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
}
