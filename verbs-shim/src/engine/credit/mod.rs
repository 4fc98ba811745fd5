//! Receiver-advertised credits in the engine (RFC 2849 PR 2–3): the
//! bootstrap negotiation, the receiver's allocator, the sender's ledger and
//! the control channel between them. The configuration
//! ([`CreditConfig`], `MC_RECEIVER_CREDIT*`) is the engine configuration's
//! (`config.rs`).
//!
//! **Off by default** (`MC_RECEIVER_CREDIT=off`): nothing here runs, the
//! descriptor carries no capability (byte-identical to an engine without
//! this module) and the hot path's credit layer is `None`.
//!
//! # Negotiation ([`negotiate`])
//!
//! The handshake descriptor carries the credit capability
//! ([`CreditCapability`]: schema versions and the required bit) when the
//! policy is not off. Both sides compute the same outcome from the two
//! descriptors, before any QP is connected:
//!
//! | ours \ theirs | no capability | optional | required |
//! |---|---|---|---|
//! | off | [`Negotiated::Unsupported`] | Unsupported | **refused** |
//! | optional | [`Negotiated::OptionalLegacy`] (metric) | `Active(v)` | `Active(v)` |
//! | required | **refused** | `Active(v)` | `Active(v)` |
//!
//! A refusal is [`EngineError::CreditRefused`] naming both policies; no
//! version in common is refused in required mode and legacy in optional
//! mode. `OptionalLegacy` keeps today's bounded local dispatch (the local
//! queue, `max_inflight`, QP depth, CC) and counts a legacy fallback; it is
//! never an unlimited grant in required mode.
//!
//! # Control transport: typed frames over the handshake's TCP connection
//!
//! The RFC's preferred first production transport is a typed control RPC
//! ("Typed ControlService RPC": explicit schema, identity and error
//! reporting, easy to fault-inject), not the notification QP (its WR/CQ
//! budget would have to be carved out of the data QPs' and proven first).
//! The engine already has a TCP connection per segment: the handshake's.
//! After the barrier of an `Active` segment it is kept open and becomes the
//! credit control channel, carrying `railyard_core::wire::credit` frames
//! (`CreditUpdate` receiver → sender, `CreditUsage` sender → receiver;
//! both directions on one connection, since either side may WRITE):
//!
//! * **own budget, no data credit**: control frames never take receiver
//!   credit, tokens, QP slots or CQ entries, so a data window at zero never
//!   blocks the update that reopens it (RFC 2849 acceptance 5);
//! * **peer identity is the connection**: a frame applies to the segment
//!   whose handshake opened the socket, never to a peer named in payload;
//!   the receiver session is bound on the first update of a channel and any
//!   other session on it fails closed;
//! * **bounded and non-blocking**: one `railyard-credit` thread polls every
//!   channel's non-blocking socket; because grants and usage are absolute
//!   cumulative totals, the outbox of a channel holds at most the *latest*
//!   update and the *latest* usage report (coalescing loses nothing), and
//!   the inbound buffer at most one frame ([`wire::MAX_MESSAGE_LEN`]);
//! * **freshness**: the receiver refreshes every `refresh` (a new top-up
//!   grant or a heartbeat under a new sequence) with a `ttl` freshness
//!   hint; a sender whose peer went silent for `ttl` marks it Stale — new
//!   credit-gated WRITEs wait, in-flight work finishes;
//! * **fail closed**: a malformed frame, an unexpected message type, a
//!   decreasing / overflowing total or a wrong-session frame is counted;
//!   framing errors and a lost connection end the channel: the sender side
//!   goes Stale (new WRITEs wait, READs and in-flight work go on), the
//!   receiver side closes the peer's epoch: its outstanding grants move to
//!   fencing and become free only once the connection's endpoints stopped
//!   accepting posts and then had the engine's drain bound (twice the drain
//!   timeout) to finish or flush. A lost control channel therefore never
//!   takes the data path down, and credit the receiver can no longer
//!   account for is never reused while the old QPs may still write.
//!
//! # Receiver
//!
//! One [`ReceiverAllocator`] per engine over the configured capacities
//! (`MC_RECEIVER_CREDIT_BYTES` / `_REQUESTS` / `_CONSUMERS`). Each sender
//! connection is a peer; a reconnect that replaces a connection keeps the
//! peer's index and opens its next epoch (the old epoch's grants are fenced
//! and freed only after the old endpoints drained). Per-peer target: an
//! equal share of the capacity among the open peers (at least one slice's
//! bytes and one slot); every refresh tops each peer up to its target from
//! what is free, so `free + Σ outstanding + Σ fencing == capacity` holds
//! throughout. DATA_BYTES and REQUEST_SLOTS come back with the sender's
//! usage reports (its completions); CONSUMER_SLOTS only through
//! [`Engine::consume`](super::Engine::consume): for a one-sided WRITE only
//! the application knows when the data was used.
//!
//! # Sender
//!
//! A direct WRITE to an `Active` segment reserves its slice's full charge
//! vector (`Charge::direct_write`: bytes + one request slot + one consumer
//! slot) atomically in the composed hot path, right before the token
//! claim. A READ is never gated. Work without credit stays queued with its
//! original deadline, its task shows the typed [`BackpressureInfo`]
//! ([`Engine::task_backpressure`](super::Engine::task_backpressure)).
//! Completions release the reservation in core; the control thread reports
//! the cumulative usage, and only a receiver update makes new credit.
//!
//! Not done here: STAGING_SLOTS (no staged path in this engine), QoS
//! classes other than 0, and a dedicated control QP.

use super::config::{CreditConfig, CreditPolicy, CREDIT_VERSIONS, MAX_SLOTS};
use super::error::EngineError;
use railyard_core::credit::{
    AllocatorConfig, AllocatorMetrics, BackpressureInfo, Charge, CreditMetrics, EntryId,
    EntryMetrics, LedgerConfig, ReceiverAllocator, Resource, SenderControl, SenderLedger,
    SessionId, UsageOutcome, RESOURCES,
};
use railyard_core::endpoint::EndpointHandle;
use railyard_core::wire::credit::{self as wire, CreditUpdateV1, CreditUsageV1, Message};
use railyard_core::wire::handshake::CreditCapability;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The negotiated credit mode of one segment (RFC 2849 "Capability
/// negotiation"; `Required` refusals are [`EngineError::CreditRefused`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Negotiated {
    /// No credit: this side is off, or the peer offers nothing (and this
    /// side is off).
    Unsupported,
    /// Optional here, the peer offers no compatible capability: legacy
    /// bounded local dispatch (counted as a legacy fallback).
    OptionalLegacy,
    /// Credit active at this schema version: WRITEs are gated.
    Active(u16),
}

/// The outcome of the bootstrap negotiation between our `policy` and the
/// peer's capability (see the module table). Both sides compute it from
/// the same two descriptors.
///
/// ```
/// use railyard_verbs::engine::{negotiate, CreditPolicy, EngineError, Negotiated};
/// use railyard_verbs::wire::CreditCapability;
/// let req = CreditCapability { min_version: 1, max_version: 1, required: true };
/// assert_eq!(negotiate(CreditPolicy::Off, None).unwrap(), Negotiated::Unsupported);
/// assert_eq!(negotiate(CreditPolicy::Optional, None).unwrap(), Negotiated::OptionalLegacy);
/// assert_eq!(negotiate(CreditPolicy::Optional, Some(req)).unwrap(), Negotiated::Active(1));
/// assert!(matches!(negotiate(CreditPolicy::Required, None), Err(EngineError::CreditRefused { .. })));
/// assert!(matches!(negotiate(CreditPolicy::Off, Some(req)), Err(EngineError::CreditRefused { .. })));
/// ```
pub fn negotiate(
    policy: CreditPolicy,
    peer: Option<CreditCapability>,
) -> Result<Negotiated, EngineError> {
    let refuse = |theirs: &'static str, why: &'static str| {
        Err(EngineError::CreditRefused {
            ours: policy.name(),
            theirs,
            why,
        })
    };
    let theirs = match peer {
        None => "off",
        Some(c) if c.required => "required",
        Some(_) => "optional",
    };
    match (policy, peer) {
        (CreditPolicy::Off, Some(c)) if c.required => refuse(
            theirs,
            "the peer requires receiver credit and MC_RECEIVER_CREDIT is off here",
        ),
        (CreditPolicy::Off, _) => Ok(Negotiated::Unsupported),
        (_, Some(c)) => {
            match wire::negotiate_version((c.min_version, c.max_version), CREDIT_VERSIONS) {
                Some(v) => Ok(Negotiated::Active(v)),
                None if policy == CreditPolicy::Required || c.required => {
                    refuse(theirs, "no credit schema version in common")
                }
                None => Ok(Negotiated::OptionalLegacy),
            }
        }
        (CreditPolicy::Optional, None) => Ok(Negotiated::OptionalLegacy),
        (CreditPolicy::Required, None) => refuse(
            theirs,
            "the peer offers no receiver-credit capability (credit off or an older build)",
        ),
    }
}

/// The sender-side state of one segment's credit link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LinkPhase {
    /// Not credit-gated (credit off, unsupported or legacy).
    #[default]
    Ungated,
    /// Gated, waiting for the receiver's first update: WRITEs wait.
    Negotiating,
    /// Fresh credit: WRITEs reserve and go.
    Active,
    /// No update within the TTL, or the control channel was lost: new
    /// WRITEs wait, in-flight work finishes.
    Stale,
    /// The receiver violated the protocol: no new WRITEs until a new
    /// session/epoch binds.
    Quarantined,
}

/// Per-segment credit metrics (bounded: one entry per credit peer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerCredit {
    /// The segment.
    pub segment: u32,
    /// What the negotiation gave.
    pub negotiated: Option<Negotiated>,
    /// Sender side: the link's phase.
    pub phase: LinkPhase,
    /// Sender side: granted / consumed / released / available per resource
    /// (index = `Resource::index`), in the current epoch.
    pub sender: EntryMetrics,
    /// Sender side: credit backpressure refusals of WRITEs to this peer.
    pub stalls: u64,
    /// Sender side: time WRITEs to this peer spent credit-stalled, ns
    /// (spans of back-to-back refusals).
    pub stall_ns: u64,
    /// Sender side: age of the last applied update, ms (`None`: none yet).
    pub update_age_ms: Option<u64>,
    /// Receiver side: what this peer holds of our capacity (granted and
    /// not yet returned), per resource.
    pub receiver_outstanding: [u64; RESOURCES],
    /// Receiver side: the peer's epoch.
    pub receiver_epoch: u64,
    /// Receiver side: consumer slots the application may return now
    /// (written by the sender, per its usage reports, and not consumed).
    pub receiver_consumable: u64,
}

/// The engine's receiver-credit metrics ([`Engine::credit_stats`](super::Engine::credit_stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreditStats {
    /// The configured policy.
    pub policy: CreditPolicy,
    /// This engine's receiver session id (0 with credit off).
    pub session: u128,
    /// Sender-side aggregate (core's bounded metrics).
    pub sender: CreditMetrics,
    /// Receiver-side aggregate (free / outstanding / fencing per resource,
    /// stale / duplicate usage, epoch resets, violations).
    pub receiver: AllocatorMetrics,
    /// Receiver capacity per resource.
    pub capacity: [u64; RESOURCES],
    /// Connections that fell back to legacy dispatch (optional mode).
    pub legacy_fallbacks: u64,
    /// Connections refused by the negotiation.
    pub refused: u64,
    /// Control frames sent / received.
    pub frames_sent: u64,
    /// Control frames received.
    pub frames_received: u64,
    /// Frames that failed to decode or were unexpected (fail closed).
    pub malformed: u64,
    /// Control channels lost (EOF, socket error, framing error).
    pub channels_lost: u64,
    /// Old-epoch grants freed after their endpoints drained.
    pub fences_completed: u64,
    /// Consumer slots returned through `consume`.
    pub consumed_slots: u64,
    /// Per credit peer.
    pub peers: Vec<PeerCredit>,
}

impl CreditStats {
    /// Whether nothing is held: no credit outstanding towards any peer on
    /// the sender side (every reservation released) — the end-of-test check.
    pub fn sender_idle(&self) -> bool {
        self.peers
            .iter()
            .all(|p| (0..RESOURCES).all(|k| p.sender.consumed[k] == p.sender.released[k]))
    }
}

/// Control-frame faults for tests (`fault-injection` feature,
/// `Engine::set_credit_faults`, also behind that feature): applied
/// to the credit updates this engine sends as a receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditFaults {
    /// Send every update twice.
    pub duplicate: bool,
    /// Hold each update back and send it after the next one (reordered).
    pub reorder: bool,
    /// Delay every update by this long.
    pub delay: Duration,
    /// Stop sending updates and heartbeats altogether (the sender goes
    /// Stale after its TTL).
    pub silence: bool,
}

mod plane;
pub(crate) use plane::EngineCredit;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;

    #[test]
    fn default_is_off_and_offers_nothing() {
        let c = EngineConfig::from_lookup(|_| None).unwrap();
        assert_eq!(c.credit.policy, CreditPolicy::Off);
        assert_eq!(c.credit.capability(), None);
        assert!(EngineCredit::new(c.credit).unwrap().is_none());
    }

    #[test]
    fn negotiation_table() {
        use CreditPolicy::*;
        let cap = |required, min, max| {
            Some(CreditCapability {
                min_version: min,
                max_version: max,
                required,
            })
        };
        let opt = cap(false, 1, 1);
        let req = cap(true, 1, 1);
        let future = cap(false, 2, 3);
        let future_req = cap(true, 2, 3);
        let ok = |p, c| negotiate(p, c).unwrap();
        let refused = |p, c| matches!(negotiate(p, c), Err(EngineError::CreditRefused { .. }));
        assert_eq!(ok(Off, None), Negotiated::Unsupported);
        assert_eq!(ok(Off, opt), Negotiated::Unsupported);
        assert!(refused(Off, req));
        assert_eq!(ok(Optional, None), Negotiated::OptionalLegacy);
        assert_eq!(ok(Optional, opt), Negotiated::Active(1));
        assert_eq!(ok(Optional, req), Negotiated::Active(1));
        assert_eq!(ok(Optional, future), Negotiated::OptionalLegacy);
        assert!(refused(Optional, future_req));
        assert!(refused(Required, None));
        assert_eq!(ok(Required, opt), Negotiated::Active(1));
        assert_eq!(ok(Required, req), Negotiated::Active(1));
        assert!(refused(Required, future));
        // Both ends agree: the table is symmetric in outcome class.
        let e = negotiate(Required, None).unwrap_err().to_string();
        assert!(e.contains("required") && e.contains("off"), "{e}");
    }

    #[test]
    fn stalls_are_spans_of_back_to_back_refusals() {
        let cfg = CreditConfig {
            policy: CreditPolicy::Optional,
            ..CreditConfig::default()
        };
        let c = EngineCredit::new(cfg).unwrap().unwrap();
        let ms = 1_000_000;
        c.stalled(0, 10 * ms);
        c.stalled(0, 15 * ms);
        c.stalled(0, 20 * ms);
        // A long gap (> 2 refreshes) starts a new stall.
        c.stalled(0, 900 * ms);
        c.stalled(99, ms); // not a peer: ignored
        let p = &c.peers[0];
        assert_eq!(p.stalls.load(Ordering::Relaxed), 4);
        assert_eq!(p.stall_ns.load(Ordering::Relaxed), 10 * ms);
        let b = c.backpressure(BackpressureInfo::receiver_credit(
            0,
            0,
            railyard_core::credit::ResourceSet::EMPTY,
            0,
            true,
        ));
        assert_eq!(b.retry_after_us, 100_000);
        assert!(!b.fallback_allowed);
        assert!(c.demand(0, 4096).is_none(), "not gated before attach");
    }
}
