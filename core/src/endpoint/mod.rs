//! Endpoint generations and the unified retire API (RFC 3136).
//!
//! Engines today compare raw endpoint pointers and delete endpoints from
//! five places (CQ errors, `IBV_EVENT_QP_FATAL`, context fatal / GID change,
//! passive-handshake stale endpoints, endpoint-store eviction). Here an
//! endpoint is a slot in an [`EndpointTable`] named by an
//! [`EndpointHandle`] `(slot, generation)`, and every one of those paths
//! calls the one [`EndpointTable::retire`].
//!
//! ## The slot word
//!
//! ```text
//!  63             32 31   29  28   27                          0
//! +-----------------+-------+-----+------------------------------+
//! |   generation    | phase |flush|     outstanding posts        |
//! +-----------------+-------+-----+------------------------------+
//! ```
//!
//! Admission ([`EndpointTable::admit_post`]) is one CAS that checks the
//! generation and the `Active` phase and counts the post, so a post either
//! is counted before a retire or is refused after it: a retired endpoint is
//! non-postable at once. A completion decrements through the handle in its
//! token record ([`EndpointTable::release_post`]), never through a pointer,
//! and can neither underflow nor touch a newer generation.
//!
//! Per-QP depth counters carry the generation too (`[generation | depth]`),
//! so a late completion for a reclaimed endpoint cannot decrement the depth
//! of the endpoint that replaced it.
//!
//! ## Retire and reclaim
//!
//! ```text
//!            open                retire(reason)          outstanding == 0
//!   Free(g) ------> Active(g) ------------------> Retired(g) -------------> Free(g+1)
//!                                                   |   timeout: ForceFlush (shim moves QPs to ERR)
//!                                                   +-- 2 x timeout: Abandoned, reclaimed anyway
//! ```
//!
//! [`EndpointTable::poll_reclaim`] (monitor thread) reclaims drained
//! endpoints. An endpoint that has not drained after `drain_timeout_ns`
//! yields [`ReclaimEvent::ForceFlush`] once, telling the shim to move its
//! QPs to ERR so the NIC flushes the posted work; one that still has not
//! drained after twice the timeout is reclaimed anyway
//! ([`ReclaimEvent::Abandoned`]) and its late completions get
//! [`EndpointError::StaleGeneration`]. Reuse of the slot bumps the
//! generation.
//!
//! The endpoint's resource (the shim's QPs, say) is held in a
//! crossbeam-epoch `Atomic`: a poster pins a guard, admits, reads the
//! resource and posts; reclaim unlinks the resource and defers its drop
//! until every such guard is gone, so no reader can see freed memory even
//! when an abandoned endpoint is reclaimed under a slow poster.

// Without `alloc` there is no table, only the pure transitions.
#![cfg_attr(not(feature = "alloc"), allow(dead_code))]

use core::fmt;

/// A generation-checked reference to an endpoint: never a pointer.
///
/// A slot is reused only with a new generation, so a handle held by an old
/// completion can never act on the endpoint that replaced it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EndpointHandle {
    /// Slot in the endpoint table.
    pub slot: u32,
    /// Generation of the slot when the handle was issued.
    pub generation: u32,
}

/// Why an endpoint was retired: every deletion path the RFC lists, through
/// one API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RetireReason {
    /// A work completion with an error status made the QP unusable.
    CqError = 1,
    /// `IBV_EVENT_QP_FATAL` (or another QP-scope async error).
    QpFatal = 2,
    /// `IBV_EVENT_DEVICE_FATAL` on the local context.
    ContextFatal = 3,
    /// `IBV_EVENT_GID_CHANGE`: the endpoint's addressing is stale.
    GidChange = 4,
    /// A passive handshake replaced this endpoint for the same peer.
    PassiveHandshakeStale = 5,
    /// The endpoint store evicted it (SIEVE/FIFO capacity).
    StoreEviction = 6,
    /// Orderly shutdown by the owner.
    Shutdown = 7,
}

impl RetireReason {
    /// Every reason, in discriminant order.
    pub const ALL: [RetireReason; 7] = [
        RetireReason::CqError,
        RetireReason::QpFatal,
        RetireReason::ContextFatal,
        RetireReason::GidChange,
        RetireReason::PassiveHandshakeStale,
        RetireReason::StoreEviction,
        RetireReason::Shutdown,
    ];

    fn from_u8(v: u8) -> Option<RetireReason> {
        Some(match v {
            1 => RetireReason::CqError,
            2 => RetireReason::QpFatal,
            3 => RetireReason::ContextFatal,
            4 => RetireReason::GidChange,
            5 => RetireReason::PassiveHandshakeStale,
            6 => RetireReason::StoreEviction,
            7 => RetireReason::Shutdown,
            _ => return None,
        })
    }
}

/// Why an endpoint operation was refused. A refusal changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointError {
    /// The handle's generation is not the slot's: the endpoint it named was
    /// reclaimed. A late completion gets this and releases only its token.
    StaleGeneration,
    /// The endpoint is retired: no new posts.
    Retired,
    /// The endpoint is already retired (a second retire is harmless).
    AlreadyRetired,
    /// The slot index is beyond the table.
    OutOfRange,
    /// The QP index is beyond the endpoint's QPs.
    BadQp,
    /// The QP already has `max_wr_per_qp` posts outstanding: backpressure.
    QpFull,
    /// The endpoint's outstanding-post counter is at its limit.
    Saturated,
    /// A release with nothing outstanding: refused, counters stay >= 0.
    Underflow,
    /// Every slot holds a live or draining endpoint.
    TableFull,
    /// The configuration is invalid (zero sizes, or a field out of range).
    InvalidConfig,
    /// The epoch guard was pinned from another table's collector, so it
    /// cannot protect this table's resources.
    ForeignGuard,
}

impl fmt::Display for EndpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EndpointError::StaleGeneration => "endpoint handle names a reclaimed generation",
            EndpointError::Retired => "endpoint is retired and accepts no new posts",
            EndpointError::AlreadyRetired => "endpoint was already retired",
            EndpointError::OutOfRange => "endpoint slot beyond the table",
            EndpointError::BadQp => "QP index beyond the endpoint's QPs",
            EndpointError::QpFull => "QP send queue is full",
            EndpointError::Saturated => "endpoint outstanding-post counter is at its limit",
            EndpointError::Underflow => "release with no outstanding post (refused)",
            EndpointError::TableFull => "endpoint table is full",
            EndpointError::InvalidConfig => "invalid endpoint table configuration",
            EndpointError::ForeignGuard => "epoch guard belongs to another endpoint table",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EndpointError {}

/// Lifecycle phase of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No endpoint; reusable.
    Free,
    /// Being opened or reclaimed by the control path.
    Busy,
    /// Postable.
    Active,
    /// Retired: non-postable, draining its posted work.
    Retired,
}

/// A snapshot of one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointState {
    /// Lifecycle phase.
    pub phase: Phase,
    /// Posts admitted and not yet released.
    pub outstanding: u32,
    /// Why it was retired, if it was.
    pub reason: Option<RetireReason>,
    /// Whether the shim was told to force-flush it.
    pub flush_requested: bool,
}

/// What [`EndpointTable::poll_reclaim`] did, for the shim to act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReclaimEvent {
    /// The endpoint drained and was reclaimed; its resource is dropped once
    /// no reader can see it.
    Reclaimed {
        /// The reclaimed endpoint.
        handle: EndpointHandle,
        /// Why it had been retired.
        reason: Option<RetireReason>,
    },
    /// The endpoint has not drained within the timeout: move its QPs to the
    /// ERR state so the NIC flushes the posted work (reported once).
    ForceFlush {
        /// The endpoint to flush.
        handle: EndpointHandle,
        /// Posts still outstanding.
        outstanding: u32,
    },
    /// Still not drained after twice the timeout: reclaimed anyway. Its late
    /// completions get [`EndpointError::StaleGeneration`].
    Abandoned {
        /// The endpoint reclaimed without draining.
        handle: EndpointHandle,
        /// Posts that never completed.
        outstanding: u32,
    },
}

/// Sizes and the drain timeout of an [`EndpointTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointConfig {
    /// Number of endpoint slots.
    pub capacity: u32,
    /// RC QPs per endpoint (`MC_NUM_QP_PER_EP`).
    pub qps_per_endpoint: u16,
    /// Send-queue depth per QP (`MC_MAX_WR`).
    pub max_wr_per_qp: u32,
    /// How long a retired endpoint may drain before a forced flush.
    pub drain_timeout_ns: u64,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            capacity: 256,
            qps_per_endpoint: 2,
            max_wr_per_qp: 256,
            drain_timeout_ns: 5 * crate::time::NS_PER_SEC,
        }
    }
}

const OUT_BITS: u32 = 28;
const OUT_MASK: u64 = (1 << OUT_BITS) - 1;
const FLUSH_BIT: u64 = 1 << OUT_BITS;
const PHASE_SHIFT: u32 = 29;
const PHASE_MASK: u64 = 0b111 << PHASE_SHIFT;

/// The slot word, kept free of atomics so transitions are plain functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word(u64);

impl Word {
    const fn new(generation: u32, phase: Phase, flush: bool, outstanding: u32) -> Word {
        let p = match phase {
            Phase::Free => 0u64,
            Phase::Busy => 1,
            Phase::Active => 2,
            Phase::Retired => 3,
        };
        Word(
            ((generation as u64) << 32)
                | (p << PHASE_SHIFT)
                | if flush { FLUSH_BIT } else { 0 }
                | (outstanding as u64 & OUT_MASK),
        )
    }
    const fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
    const fn phase(self) -> Phase {
        match (self.0 & PHASE_MASK) >> PHASE_SHIFT {
            0 => Phase::Free,
            1 => Phase::Busy,
            2 => Phase::Active,
            _ => Phase::Retired,
        }
    }
    const fn flush(self) -> bool {
        self.0 & FLUSH_BIT != 0
    }
    const fn outstanding(self) -> u32 {
        (self.0 & OUT_MASK) as u32
    }
    const fn with(self, phase: Phase, flush: bool, outstanding: u32) -> Word {
        Word::new(self.generation(), phase, flush, outstanding)
    }
}

/// Pure transition for an admission.
fn admit_word(w: Word, h: EndpointHandle) -> Result<Word, EndpointError> {
    if w.generation() != h.generation {
        return Err(EndpointError::StaleGeneration);
    }
    match w.phase() {
        Phase::Active => {}
        Phase::Retired => return Err(EndpointError::Retired),
        Phase::Free | Phase::Busy => return Err(EndpointError::StaleGeneration),
    }
    if u64::from(w.outstanding()) >= OUT_MASK {
        return Err(EndpointError::Saturated);
    }
    Ok(w.with(w.phase(), w.flush(), w.outstanding() + 1))
}

/// Pure transition for a release (completion, or unposted work).
fn release_word(w: Word, h: EndpointHandle) -> Result<Word, EndpointError> {
    #[cfg(not(railyard_broken = "endpoint_release_ignores_generation"))]
    if w.generation() != h.generation {
        return Err(EndpointError::StaleGeneration);
    }
    #[cfg(railyard_broken = "endpoint_release_ignores_generation")]
    let _ = h;
    match w.phase() {
        Phase::Active | Phase::Retired => {}
        Phase::Free | Phase::Busy => return Err(EndpointError::StaleGeneration),
    }
    if w.outstanding() == 0 {
        return Err(EndpointError::Underflow);
    }
    Ok(w.with(w.phase(), w.flush(), w.outstanding() - 1))
}

/// Pure transition for a retire.
fn retire_word(w: Word, h: EndpointHandle) -> Result<Word, EndpointError> {
    if w.generation() != h.generation {
        return Err(EndpointError::StaleGeneration);
    }
    match w.phase() {
        Phase::Active => Ok(w.with(Phase::Retired, false, w.outstanding())),
        Phase::Retired => Err(EndpointError::AlreadyRetired),
        Phase::Free | Phase::Busy => Err(EndpointError::StaleGeneration),
    }
}

/// Whether a retired word may be reclaimed now (drained).
fn drained(w: Word) -> bool {
    #[cfg(railyard_broken = "endpoint_reclaim_ignores_outstanding")]
    {
        let _ = w.outstanding();
        w.phase() == Phase::Retired
    }
    #[cfg(not(railyard_broken = "endpoint_reclaim_ignores_outstanding"))]
    {
        w.phase() == Phase::Retired && w.outstanding() == 0
    }
}

#[cfg(feature = "alloc")]
mod table;
#[cfg(feature = "alloc")]
pub use table::{EndpointGuard, EndpointLocal, EndpointTable};

#[cfg(test)]
mod tests {
    use super::*;

    const H: EndpointHandle = EndpointHandle {
        slot: 0,
        generation: 4,
    };

    #[test]
    fn word_fields_round_trip() {
        let w = Word::new(9, Phase::Retired, true, 123);
        assert_eq!(
            (w.generation(), w.phase(), w.flush(), w.outstanding()),
            (9, Phase::Retired, true, 123)
        );
    }

    #[test]
    fn admit_requires_active_and_generation() {
        let active = Word::new(4, Phase::Active, false, 0);
        assert_eq!(admit_word(active, H).unwrap().outstanding(), 1);
        let retired = active.with(Phase::Retired, false, 0);
        assert_eq!(admit_word(retired, H), Err(EndpointError::Retired));
        let other = Word::new(5, Phase::Active, false, 0);
        assert_eq!(admit_word(other, H), Err(EndpointError::StaleGeneration));
        let full = Word::new(4, Phase::Active, false, OUT_MASK as u32);
        assert_eq!(admit_word(full, H), Err(EndpointError::Saturated));
    }

    #[test]
    fn release_never_underflows_or_crosses_generations() {
        let w = Word::new(4, Phase::Retired, false, 1);
        let w = release_word(w, H).unwrap();
        assert_eq!(w.outstanding(), 0);
        assert_eq!(release_word(w, H), Err(EndpointError::Underflow));
        let newer = Word::new(5, Phase::Active, false, 3);
        assert_eq!(release_word(newer, H), Err(EndpointError::StaleGeneration));
    }

    #[test]
    fn retire_is_idempotent_and_typed() {
        let w = Word::new(4, Phase::Active, false, 2);
        let r = retire_word(w, H).unwrap();
        assert_eq!((r.phase(), r.outstanding()), (Phase::Retired, 2));
        assert_eq!(retire_word(r, H), Err(EndpointError::AlreadyRetired));
        assert!(!drained(r));
        assert!(drained(r.with(Phase::Retired, false, 0)));
    }

    #[test]
    fn reasons_round_trip() {
        for r in RetireReason::ALL {
            assert_eq!(RetireReason::from_u8(r as u8), Some(r));
        }
        assert_eq!(RetireReason::from_u8(0), None);
    }
}
