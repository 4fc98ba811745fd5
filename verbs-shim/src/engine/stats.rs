//! The stats snapshot ([`EngineStats`]) and the handshake listener's
//! counters ([`HandshakeStats`]). Plain data.

use super::cc_gate::GateStats;
use super::error::EngineError;
use super::types::MAX_RAILS;
use crate::handshake::HandshakeError;
use crate::handshake::Refusal;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Segments the endpoint store evicted (idle, least recently used) to
    /// open another connection when every endpoint slot was taken.
    pub evictions: u64,
    /// Descriptor fetches (connect and descriptor exchange of an open or a
    /// reconnect) retried once after a transport failure (RFC 4162: a
    /// read-only metadata RPC is retried at most once).
    pub fetch_retries: u64,
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
