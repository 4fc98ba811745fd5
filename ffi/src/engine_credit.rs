//! Receiver-advertised credits of the verbs engine (RFC 2849) in the C
//! ABI: the configuration inside `ry_engine_config`, consumer-slot return
//! and the metrics.
//!
//! | C | Rust |
//! |---|---|
//! | `ry_engine_config.credit` (`ry_engine_credit_config`) | `EngineConfig::credit` (`MC_RECEIVER_CREDIT*`) |
//! | `ry_engine_consume` | `Engine::consume` |
//! | `ry_engine_credit_stats_get` | `Engine::credit_stats` (aggregates) |
//! | `ry_engine_credit_peer_get` | `Engine::credit_stats().peers` (one segment) |
//! | `ry_engine_task_backpressure` (`ry_engine_backpressure`) | `Engine::task_backpressure` |
//!
//! The types exist in every build (layout checks); the functions only in
//! a library built with the `engine` feature.

/// `ry_engine_credit_config.policy`: off (default).
pub const RY_ENGINE_CREDIT_OFF: u32 = 0;
/// `ry_engine_credit_config.policy`: optional (legacy with peers without
/// credit, counted).
pub const RY_ENGINE_CREDIT_OPTIONAL: u32 = 1;
/// `ry_engine_credit_config.policy`: required (peers without credit are
/// refused).
pub const RY_ENGINE_CREDIT_REQUIRED: u32 = 2;

/// Receiver-credit configuration (`MC_RECEIVER_CREDIT*`), part of
/// `ry_engine_config`. Validated by `ry_engine_create`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_credit_config {
    /// DATA_BYTES capacity this engine grants as a receiver (1..=2^32-1).
    pub bytes: u64,
    /// `RY_ENGINE_CREDIT_OFF`, `_OPTIONAL` or `_REQUIRED`.
    pub policy: u32,
    /// REQUEST_SLOTS capacity (1..=2047).
    pub requests: u32,
    /// CONSUMER_SLOTS capacity (1..=2047).
    pub consumers: u32,
    /// Most credit peers (1..=1024).
    pub peers: u32,
    /// Freshness TTL, ms (0 = no expiry; else longer than the refresh).
    pub ttl_ms: u32,
    /// Refresh / heartbeat period, ms (1..=60000).
    pub refresh_ms: u32,
}

/// Aggregate receiver-credit metrics of one engine
/// (`ry_engine_credit_stats_get`). Arrays are indexed by resource code - 1
/// (0 DATA_BYTES, 1 REQUEST_SLOTS, 2 STAGING_SLOTS, 3 CONSUMER_SLOTS).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_credit_stats {
    /// Sender side: cumulative grants in current epochs.
    pub granted: [u64; 4],
    /// Sender side: committed (consumed) totals in current epochs.
    pub consumed: [u64; 4],
    /// Sender side: available now.
    pub available: [u64; 4],
    /// Sender side: in-flight amounts fenced by epoch resets.
    pub fenced_inflight: [u64; 4],
    /// Receiver side: free capacity.
    pub receiver_free: [u64; 4],
    /// Receiver side: granted and not yet returned, over all peers.
    pub receiver_outstanding: [u64; 4],
    /// Receiver side: old-epoch grants waiting for their endpoints.
    pub receiver_fencing: [u64; 4],
    /// Receiver side: capacity.
    pub capacity: [u64; 4],
    /// Sender: updates applied.
    pub updates_applied: u64,
    /// Sender: duplicate / old updates ignored.
    pub duplicate_updates: u64,
    /// Sender: wrong session / epoch updates ignored.
    pub stale_updates: u64,
    /// Sender: sequence gaps.
    pub sequence_gaps: u64,
    /// Sender: new sessions / epochs bound over an old one.
    pub epoch_resets: u64,
    /// Sender + receiver: protocol violations.
    pub violations: u64,
    /// Sender + receiver: updates and usage reports rejected for a
    /// decreasing cumulative total (nothing changed; no quarantine).
    pub protocol_errors: u64,
    /// Connections that fell back to legacy dispatch (optional mode).
    pub legacy_fallbacks: u64,
    /// Connections refused by the negotiation.
    pub refused: u64,
    /// Control frames sent.
    pub frames_sent: u64,
    /// Control frames received.
    pub frames_received: u64,
    /// Malformed or unexpected frames (fail closed).
    pub malformed: u64,
    /// Control channels lost.
    pub channels_lost: u64,
    /// Old-epoch fences completed.
    pub fences_completed: u64,
    /// Consumer slots returned by `ry_engine_consume`.
    pub consumed_slots: u64,
    /// Receiver: stale / duplicate usage reports ignored.
    pub stale_usage: u64,
    /// Receiver: epoch resets (a peer's new epoch over an old one).
    pub receiver_epoch_resets: u64,
    /// The configured policy (`RY_ENGINE_CREDIT_*`).
    pub policy: u32,
    /// Credit peers known (entries `ry_engine_credit_peer_get` answers).
    pub peers: u32,
}

/// `ry_engine_credit_peer.negotiated`: no negotiation seen.
pub const RY_ENGINE_CREDIT_NEGOTIATED_NONE: u32 = 0;
/// Unsupported (credit off here, or a peer without it).
pub const RY_ENGINE_CREDIT_NEGOTIATED_UNSUPPORTED: u32 = 1;
/// Optional here, the peer without credit: legacy dispatch.
pub const RY_ENGINE_CREDIT_NEGOTIATED_LEGACY: u32 = 2;
/// Active (`version` says which).
pub const RY_ENGINE_CREDIT_NEGOTIATED_ACTIVE: u32 = 3;

/// One segment's receiver-credit state (`ry_engine_credit_peer_get`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_credit_peer {
    /// Sender side: granted per resource (current epoch).
    pub granted: [u64; 4],
    /// Sender side: committed per resource.
    pub consumed: [u64; 4],
    /// Sender side: released by completions per resource.
    pub released: [u64; 4],
    /// Sender side: available per resource.
    pub available: [u64; 4],
    /// Receiver side: held by this peer per resource.
    pub receiver_outstanding: [u64; 4],
    /// Sender side: credit backpressure refusals.
    pub stalls: u64,
    /// Sender side: credit-stalled time, ns.
    pub stall_ns: u64,
    /// Sender side: age of the last applied update, ms (`UINT64_MAX`:
    /// none yet).
    pub update_age_ms: u64,
    /// Receiver side: the peer's epoch (0: not a credit peer).
    pub receiver_epoch: u64,
    /// Receiver side: consumer slots `ry_engine_consume` may return now.
    pub receiver_consumable: u64,
    /// `RY_ENGINE_CREDIT_NEGOTIATED_*`.
    pub negotiated: u32,
    /// The negotiated schema version (with ACTIVE), else 0.
    pub version: u32,
    /// Sender-side phase: 0 ungated, 1 negotiating, 2 active, 3 stale,
    /// 4 quarantined.
    pub phase: u32,
    /// The segment.
    pub segment: u32,
}

/// `ry_engine_backpressure.source`: the receiver has not granted enough
/// credit (RFC 2849 `RECEIVER_CREDIT`).
pub const RY_PRESSURE_RECEIVER_CREDIT: u32 = 1;
/// The sender's local queue / dispatch window is full (`LOCAL_QUEUE`).
pub const RY_PRESSURE_LOCAL_QUEUE: u32 = 2;
/// Staging capacity is exhausted (`STAGING`).
pub const RY_PRESSURE_STAGING: u32 = 3;
/// The transport (QP depth, congestion control) pushes back (`TRANSPORT`).
pub const RY_PRESSURE_TRANSPORT: u32 = 4;

/// The typed backpressure a task met (RFC 2849's `BackpressureInfo`;
/// `ry_engine_task_backpressure`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_backpressure {
    /// Suggested retry delay, µs.
    pub retry_after_us: u64,
    /// `RY_PRESSURE_*`.
    pub source: u32,
    /// The peer (credit peer index) the pressure concerns.
    pub peer: u32,
    /// The QoS class.
    pub qos_class: u32,
    /// Exhausted credit resources (`1 << RY_RESOURCE_*` bits; 0 when not
    /// resource-specific, e.g. a stale or fencing link).
    pub exhausted: u32,
    /// Whether the caller may fall back (another node, a legacy path,
    /// recompute).
    pub fallback_allowed: bool,
}

#[cfg(feature = "engine")]
pub use imp::*;

#[cfg(feature = "engine")]
mod imp {
    use super::*;
    use crate::engine::{config_error, ry_engine, with_engine};
    use crate::error::{guard, ret, Error, Result, RyStatus};
    use railyard_verbs::engine::{
        BatchId, CreditConfig, CreditPolicy, LinkPhase, Negotiated, PressureSource, SegmentId,
    };
    use std::time::Duration;

    impl From<&CreditConfig> for ry_engine_credit_config {
        fn from(c: &CreditConfig) -> Self {
            ry_engine_credit_config {
                bytes: c.bytes,
                policy: match c.policy {
                    CreditPolicy::Off => RY_ENGINE_CREDIT_OFF,
                    CreditPolicy::Optional => RY_ENGINE_CREDIT_OPTIONAL,
                    CreditPolicy::Required => RY_ENGINE_CREDIT_REQUIRED,
                },
                requests: c.requests as u32,
                consumers: c.consumers as u32,
                peers: c.peers,
                ttl_ms: c.ttl.as_millis().min(u32::MAX as u128) as u32,
                refresh_ms: c.refresh.as_millis().min(u32::MAX as u128) as u32,
            }
        }
    }

    impl ry_engine_credit_config {
        /// The Rust configuration (ranges are checked by the engine's
        /// `validate`; an all-zero struct is the default, credit off).
        pub(crate) fn to_core(self) -> Result<CreditConfig> {
            if self == Self::default() {
                return Ok(CreditConfig::default());
            }
            let policy = match self.policy {
                RY_ENGINE_CREDIT_OFF => CreditPolicy::Off,
                RY_ENGINE_CREDIT_OPTIONAL => CreditPolicy::Optional,
                RY_ENGINE_CREDIT_REQUIRED => CreditPolicy::Required,
                v => {
                    return Err(config_error(
                        "credit.policy",
                        v,
                        "RY_ENGINE_CREDIT_OFF, _OPTIONAL or _REQUIRED",
                    ))
                }
            };
            Ok(CreditConfig {
                policy,
                bytes: self.bytes,
                requests: u64::from(self.requests),
                consumers: u64::from(self.consumers),
                peers: self.peers,
                ttl: Duration::from_millis(u64::from(self.ttl_ms)),
                refresh: Duration::from_millis(u64::from(self.refresh_ms)),
            })
        }
    }

    /// Returns `n` consumer slots of the sender on `segment` (the
    /// receiving application used what it wrote; one slot per work
    /// request). `RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE` for a segment
    /// without an active credit session, `RY_STATUS_ENGINE_CREDIT_CONSUME`
    /// (nothing changed) for more slots than were reported written.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: any thread, concurrently.
    #[no_mangle]
    pub extern "C" fn ry_engine_consume(engine: ry_engine, segment: u32, n: u64) -> RyStatus {
        guard(|| with_engine(engine, |e| Ok(e.consume(SegmentId(segment), n)?)))
    }

    /// The last backpressure a post of task `task` of `batch` met (any
    /// source: receiver credit, the CC window, a full QP, no free token):
    /// `*present_out` is false (and `*out` untouched) if it never stalled.
    /// `RY_STATUS_ENGINE_NO_SUCH_BATCH` / `_NO_SUCH_TASK` as for
    /// `ry_engine_task_status`. Valid until the batch is freed.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    ///
    /// `out` and `present_out` must be valid for writes (or null: refused).
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_task_backpressure(
        engine: ry_engine,
        batch: u64,
        task: usize,
        out: *mut ry_engine_backpressure,
        present_out: *mut bool,
    ) -> RyStatus {
        // SAFETY: caller contract: `present_out` is valid for writes. Checked first.
        unsafe {
            ret(present_out, "present_out", || {
                if out.is_null() {
                    return Err(Error::null("out"));
                }
                let bp = with_engine(engine, |e| Ok(e.task_backpressure(BatchId(batch), task)?))?;
                let Some(b) = bp else {
                    return Ok(false);
                };
                let v = ry_engine_backpressure {
                    retry_after_us: b.retry_after_us,
                    source: match b.source {
                        PressureSource::ReceiverCredit => RY_PRESSURE_RECEIVER_CREDIT,
                        PressureSource::LocalQueue => RY_PRESSURE_LOCAL_QUEUE,
                        PressureSource::Staging => RY_PRESSURE_STAGING,
                        PressureSource::Transport => RY_PRESSURE_TRANSPORT,
                    },
                    peer: b.peer,
                    qos_class: b.qos_class,
                    exhausted: u32::from(b.exhausted.bits()),
                    fallback_allowed: b.fallback_allowed,
                };
                // SAFETY: checked non-null above; caller contract: valid for writes.
                out.write(v);
                Ok(true)
            })
        }
    }

    /// Writes the engine's aggregate receiver-credit metrics.
    /// `RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE` with credit off.
    ///
    /// Ownership: writes plain data to the caller's out-pointer; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    ///
    /// `out` must be valid for writes (or null: refused).
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_credit_stats_get(
        engine: ry_engine,
        out: *mut ry_engine_credit_stats,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes. Checked first.
        unsafe {
            ret(out, "out", || {
                let s = with_engine(engine, |e| {
                    e.credit_stats().ok_or_else(|| {
                        Error::from(railyard_verbs::engine::EngineError::CreditNotActive(
                            u32::MAX,
                        ))
                    })
                })?;
                Ok(ry_engine_credit_stats {
                    granted: s.sender.granted,
                    consumed: s.sender.consumed,
                    available: s.sender.available,
                    fenced_inflight: s.sender.fenced_inflight,
                    receiver_free: s.receiver.free,
                    receiver_outstanding: s.receiver.outstanding,
                    receiver_fencing: s.receiver.fencing,
                    capacity: s.capacity,
                    updates_applied: s.sender.updates_applied,
                    duplicate_updates: s.sender.duplicate_updates,
                    stale_updates: s.sender.stale_updates,
                    sequence_gaps: s.sender.sequence_gaps,
                    epoch_resets: s.sender.epoch_resets,
                    violations: s.sender.violations + s.receiver.violations,
                    protocol_errors: s.sender.protocol_errors + s.receiver.protocol_errors,
                    legacy_fallbacks: s.legacy_fallbacks,
                    refused: s.refused,
                    frames_sent: s.frames_sent,
                    frames_received: s.frames_received,
                    malformed: s.malformed,
                    channels_lost: s.channels_lost,
                    fences_completed: s.fences_completed,
                    consumed_slots: s.consumed_slots,
                    stale_usage: s.receiver.stale_usage + s.receiver.duplicate_usage,
                    receiver_epoch_resets: s.receiver.epoch_resets,
                    policy: ry_engine_credit_config::from(&CreditConfig {
                        policy: s.policy,
                        ..CreditConfig::default()
                    })
                    .policy,
                    peers: s.peers.len() as u32,
                })
            })
        }
    }

    /// Writes segment `segment`'s receiver-credit state.
    /// `RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE` with credit off or for a
    /// segment the negotiation never saw.
    ///
    /// Ownership: writes plain data to the caller's out-pointer; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    ///
    /// `out` must be valid for writes (or null: refused).
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_credit_peer_get(
        engine: ry_engine,
        segment: u32,
        out: *mut ry_engine_credit_peer,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes. Checked first.
        unsafe {
            ret(out, "out", || {
                let not = || {
                    Error::from(railyard_verbs::engine::EngineError::CreditNotActive(
                        segment,
                    ))
                };
                let p = with_engine(engine, |e| {
                    e.credit_stats()
                        .and_then(|s| s.peers.into_iter().find(|p| p.segment == segment))
                        .ok_or_else(not)
                })?;
                let (negotiated, version) = match p.negotiated {
                    None => (RY_ENGINE_CREDIT_NEGOTIATED_NONE, 0),
                    Some(Negotiated::Unsupported) => (RY_ENGINE_CREDIT_NEGOTIATED_UNSUPPORTED, 0),
                    Some(Negotiated::OptionalLegacy) => (RY_ENGINE_CREDIT_NEGOTIATED_LEGACY, 0),
                    Some(Negotiated::Active(v)) => {
                        (RY_ENGINE_CREDIT_NEGOTIATED_ACTIVE, u32::from(v))
                    }
                };
                Ok(ry_engine_credit_peer {
                    granted: p.sender.granted,
                    consumed: p.sender.consumed,
                    released: p.sender.released,
                    available: p.sender.available,
                    receiver_outstanding: p.receiver_outstanding,
                    stalls: p.stalls,
                    stall_ns: p.stall_ns,
                    update_age_ms: p.update_age_ms.unwrap_or(u64::MAX),
                    receiver_epoch: p.receiver_epoch,
                    receiver_consumable: p.receiver_consumable,
                    negotiated,
                    version,
                    phase: match p.phase {
                        LinkPhase::Ungated => 0,
                        LinkPhase::Negotiating => 1,
                        LinkPhase::Active => 2,
                        LinkPhase::Stale => 3,
                        LinkPhase::Quarantined => 4,
                    },
                    segment,
                })
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn config_round_trips_and_zero_is_off() {
            assert_eq!(
                ry_engine_credit_config::default().to_core().ok(),
                Some(CreditConfig::default())
            );
            let c = CreditConfig {
                policy: CreditPolicy::Required,
                bytes: 1 << 20,
                requests: 8,
                consumers: 16,
                peers: 4,
                ttl: Duration::from_millis(900),
                refresh: Duration::from_millis(30),
            };
            let r = ry_engine_credit_config::from(&c);
            assert_eq!(r.policy, RY_ENGINE_CREDIT_REQUIRED);
            assert_eq!(r.to_core().ok(), Some(c));
            let bad = ry_engine_credit_config { policy: 7, ..r };
            assert!(bad.to_core().is_err());
        }
    }
}
