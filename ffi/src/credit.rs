//! Receiver-advertised credits (RFC 2849): the sender ledger (bind, apply
//! updates, reserve+commit, release, usage reports, return of unused
//! credit) and the receiver's capacity allocator (open, grant, usage,
//! consumption, fencing).
//!
//! Resources are indexed `RY_RESOURCE_DATA_BYTES`..`RY_RESOURCE_CONSUMER_SLOTS`
//! (0..3); amounts travel as [`ry_charge`], message totals as [`ry_totals`]
//! (a `present` bitmask plus values).
//!
//! **Reserve and commit are one call** at the C boundary
//! (`ry_credit_reserve_commit`, made at handoff to the transport): a
//! core `Reservation` borrows the ledger and cannot cross the ABI. A
//! caller that would roll back simply does not call it yet. After the
//! commit only the completion's release remains, exactly as in the core.
//!
//! The types and `ry_credit_ledger_config_default` are always built (the
//! hot path takes credit updates and writes usage reports); the sender
//! ledger and receiver allocator objects are part of the per-layer ABI
//! (cargo feature `layers`, `RY_LAYERS` in C).

use railyard_core::credit::{
    Charge, CreditMetrics, CreditUpdate, CreditUsage, LedgerConfig, ReleaseOutcome, ReturnPath,
    SessionId, Totals, UpdateOutcome, RESOURCES,
};

use crate::error::{ret, Error, Result, RyStatus};
use crate::mirror::{mirror, mirror_struct};

/// Number of credit resources.
pub const RY_RESOURCES: u32 = 4;
/// Resource index: bytes that may be in flight to the receiver.
pub const RY_RESOURCE_DATA_BYTES: u32 = 0;
/// Resource index: logical request / completion slots.
pub const RY_RESOURCE_REQUEST_SLOTS: u32 = 1;
/// Resource index: remote staging chunks.
pub const RY_RESOURCE_STAGING_SLOTS: u32 = 2;
/// Resource index: consumer readiness / commit capacity.
pub const RY_RESOURCE_CONSUMER_SLOTS: u32 = 3;
/// `ry_totals.present` / resource-set bit of resource index `i` is `1 << i`.
pub const RY_RESOURCE_SET_ALL: u8 = 0b1111;

const _: () = assert!(RY_RESOURCES as usize == RESOURCES);

/// One amount per resource, indexed by `RY_RESOURCE_*`. Zero = not charged.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_charge {
    /// Amounts by resource index.
    pub v: [u64; 4],
}

impl From<ry_charge> for Charge {
    fn from(c: ry_charge) -> Self {
        Charge(c.v)
    }
}

impl From<Charge> for ry_charge {
    fn from(c: Charge) -> Self {
        ry_charge { v: c.0 }
    }
}

impl From<[u64; RESOURCES]> for ry_charge {
    fn from(v: [u64; RESOURCES]) -> Self {
        ry_charge { v }
    }
}

/// Cumulative totals carried by a message: `present` bit `1 << i` marks
/// resource `i` present; absent resources' values are ignored (written 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_totals {
    /// Values by resource index.
    pub v: [u64; 4],
    /// Bitmask of present resources (`1 << RY_RESOURCE_*`).
    pub present: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

impl ry_totals {
    pub(crate) fn to_core(self) -> Result<Totals> {
        if self.present & !RY_RESOURCE_SET_ALL != 0 {
            return Err(Error::invalid(format_args!(
                "totals.present {:#x} has bits beyond the four resources",
                self.present
            )));
        }
        let mut t = Totals::default();
        for r in railyard_core::credit::Resource::ALL {
            if self.present & (1 << r.index()) != 0 {
                t = t.with(r, self.v[r.index()]);
            }
        }
        Ok(t)
    }

    pub(crate) fn from_core(t: &Totals) -> Self {
        let mut v = [0u64; 4];
        for r in t.present.iter() {
            v[r.index()] = t.values[r.index()];
        }
        ry_totals {
            v,
            present: t.present.bits(),
            reserved: [0; 7],
        }
    }
}

/// A receiver session identity (128 bits, one per receiver incarnation),
/// **ordered** by `(hi, lo)`: a receiver's next incarnation must use a
/// larger id (put a restart counter or the start time in `hi`, a random
/// nonce in `lo`); senders refuse to bind to one that orders before the
/// bound session, so every earlier incarnation stays fenced. All-zero is
/// reserved ("no session").
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_session_id {
    /// Low 64 bits.
    pub lo: u64,
    /// High 64 bits.
    pub hi: u64,
}

impl From<ry_session_id> for SessionId {
    fn from(s: ry_session_id) -> Self {
        SessionId((u128::from(s.hi) << 64) | u128::from(s.lo))
    }
}

impl From<SessionId> for ry_session_id {
    fn from(s: SessionId) -> Self {
        ry_session_id {
            lo: s.0 as u64,
            hi: (s.0 >> 64) as u64,
        }
    }
}

/// A receiver's credit update: absolute cumulative grants within `epoch`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_update {
    /// Receiver session the grants belong to.
    pub receiver_session: ry_session_id,
    /// Epoch within the session.
    pub epoch: u64,
    /// Per-(session, epoch, class) sequence; newer wins.
    pub sequence: u64,
    /// Cumulative grant totals.
    pub grants: ry_totals,
    /// QoS class.
    pub qos_class: u32,
    /// Freshness hint (ms after receipt); 0 = no expiry.
    pub freshness_ttl_ms: u32,
}

impl ry_credit_update {
    pub(crate) fn to_core(self) -> Result<CreditUpdate> {
        Ok(CreditUpdate {
            receiver_session: self.receiver_session.into(),
            epoch: self.epoch,
            sequence: self.sequence,
            qos_class: self.qos_class,
            freshness_ttl_ms: self.freshness_ttl_ms,
            grants: self.grants.to_core()?,
        })
    }

    pub(crate) fn from_core(u: &CreditUpdate) -> Self {
        ry_credit_update {
            receiver_session: u.receiver_session.into(),
            epoch: u.epoch,
            sequence: u.sequence,
            grants: ry_totals::from_core(&u.grants),
            qos_class: u.qos_class,
            freshness_ttl_ms: u.freshness_ttl_ms,
        }
    }
}

/// A sender's usage report: cumulative totals within `epoch`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_usage {
    /// Receiver session the usage belongs to.
    pub receiver_session: ry_session_id,
    /// Epoch.
    pub epoch: u64,
    /// Sender's report sequence.
    pub sequence: u64,
    /// Committed (handed to the transport) cumulative totals.
    pub consumed: ry_totals,
    /// Cumulative totals released by sender-side completions.
    pub released: ry_totals,
    /// Cumulative totals of unused credit returned explicitly.
    pub returned: ry_totals,
    /// Credit-stalled demand (a hint, not cumulative).
    pub pending_demand: ry_totals,
    /// QoS class.
    pub qos_class: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

impl ry_credit_usage {
    pub(crate) fn to_core(self) -> Result<CreditUsage> {
        Ok(CreditUsage {
            receiver_session: self.receiver_session.into(),
            epoch: self.epoch,
            sequence: self.sequence,
            qos_class: self.qos_class,
            consumed: self.consumed.to_core()?,
            released: self.released.to_core()?,
            returned: self.returned.to_core()?,
            pending_demand: self.pending_demand.to_core()?,
        })
    }

    pub(crate) fn from_core(u: &CreditUsage) -> Self {
        ry_credit_usage {
            receiver_session: u.receiver_session.into(),
            epoch: u.epoch,
            sequence: u.sequence,
            consumed: ry_totals::from_core(&u.consumed),
            released: ry_totals::from_core(&u.released),
            returned: ry_totals::from_core(&u.returned),
            pending_demand: ry_totals::from_core(&u.pending_demand),
            qos_class: u.qos_class,
            reserved: 0,
        }
    }
}

// ---------------------------------------------------------------- sender

/// Sender ledger configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_ledger_config {
    /// Per-entry tracking window per resource; 0 = resource not modeled.
    /// The bit widths must sum to at most 55.
    pub window: ry_charge,
    /// Receivers this sender can hold credit from.
    pub max_peers: u32,
    /// QoS classes per peer (`max_peers * max_classes` <= 8192).
    pub max_classes: u32,
}

/// Writes the default ledger configuration (64 peers, 4 classes).
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: pure; any thread, concurrently.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_credit_ledger_config_default(
    out: *mut ry_credit_ledger_config,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            Ok(ry_credit_ledger_config::from(LedgerConfig::default()))
        })
    }
}

impl From<LedgerConfig> for ry_credit_ledger_config {
    fn from(d: LedgerConfig) -> Self {
        ry_credit_ledger_config {
            window: ry_charge { v: d.window },
            max_peers: d.max_peers,
            max_classes: d.max_classes,
        }
    }
}

impl From<ry_credit_ledger_config> for LedgerConfig {
    fn from(c: ry_credit_ledger_config) -> Self {
        LedgerConfig {
            max_peers: c.max_peers,
            max_classes: c.max_classes,
            window: c.window.v,
        }
    }
}

/// A sender credit ledger handle. Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_sender {
    /// Opaque handle bits.
    pub bits: u64,
}

/// `ry_credit_apply_update`'s outcome.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_update_outcome {
    /// Applied; the sequence followed the last one.
    Applied = 0,
    /// Applied after a sequence gap (counted; `missed` says how many).
    AppliedAfterGap = 1,
    /// Duplicate or older sequence: a no-op (counted). Replaying an update
    /// never mints credit.
    Duplicate = 2,
}

/// `*p` (an optional charge: NULL is none) as a core charge.
///
/// # Safety
/// `p` is NULL or valid for reads.
pub(crate) unsafe fn charge_or_zero(p: *const ry_charge) -> Charge {
    // SAFETY: the caller guarantees `p` is NULL or valid for reads.
    unsafe { crate::ptr::in_opt(p) }.map_or(Charge::ZERO, Charge::from)
}

/// The C outcome of an applied update and the sequence numbers it skipped.
pub(crate) fn update_outcome(o: UpdateOutcome) -> (ry_update_outcome, u64) {
    match o {
        UpdateOutcome::Applied => (ry_update_outcome::Applied, 0),
        UpdateOutcome::AppliedAfterGap { missed } => (ry_update_outcome::AppliedAfterGap, missed),
        UpdateOutcome::Duplicate => (ry_update_outcome::Duplicate, 0),
    }
}

/// A committed credit charge as plain data, released exactly once by its
/// completion (`ry_credit_release` clears `held`), or moved into a token
/// record with `ry_committed_charge_record_into`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_committed_charge {
    /// The charge vector.
    pub charge: ry_charge,
    /// Ledger entry (`peer * max_classes + class`).
    pub entry: u32,
    /// Entry generation at reserve time (epoch fencing).
    pub generation: u16,
    /// 1 while held; 0 once released or recorded.
    pub held: u8,
    /// Reserved, zero.
    pub reserved: u8,
}

/// `ry_credit_release`'s outcome.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_credit_release_outcome {
    /// Counted for the next usage report (never mints sender credit).
    Released = 0,
    /// From an older epoch: counted as fenced work; the current epoch is
    /// untouched.
    Fenced = 1,
}

mirror!(ry_credit_release_outcome <=> ReleaseOutcome: Released, Fenced);

/// Bounded sender credit metrics (per resource, never per request).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_metrics {
    /// Cumulative grant totals in current epochs.
    pub granted: ry_charge,
    /// Committed (consumed) totals in current epochs.
    pub consumed: ry_charge,
    /// Currently available.
    pub available: ry_charge,
    /// Returned unused credit (all epochs).
    pub returned: ry_charge,
    /// In-flight amounts fenced by epoch resets.
    pub fenced_inflight: ry_charge,
    /// Reservations refused for lack of credit.
    pub stalls: u64,
    /// Updates applied.
    pub updates_applied: u64,
    /// Duplicate / old updates ignored.
    pub duplicate_updates: u64,
    /// Session / epoch mismatched updates ignored.
    pub stale_updates: u64,
    /// Sequence gaps seen (applied anyway).
    pub sequence_gaps: u64,
    /// New sessions / epochs bound over an old one.
    pub epoch_resets: u64,
    /// Commits, rollbacks and completions from an old epoch.
    pub fenced_ops: u64,
    /// Counter updates refused to avoid overflow.
    pub refused_ops: u64,
    /// Protocol violations (peer quarantined).
    pub violations: u64,
    /// Updates rejected for a decreasing cumulative total (nothing changed;
    /// the peer was not quarantined).
    pub protocol_errors: u64,
}

mirror_struct!(ry_credit_metrics <= CreditMetrics {
    granted, consumed, available, returned, fenced_inflight, stalls, updates_applied,
    duplicate_updates, stale_updates, sequence_gaps, epoch_resets, fenced_ops, refused_ops,
    violations, protocol_errors; stall_ns, legacy_fallbacks
});

// -------------------------------------------------------------- receiver

/// How a resource's capacity returns to the receiver's free pool.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_return_path {
    /// The sender's completion (reported as `released` in usage).
    SenderCompletion = 0,
    /// The receiver's own consumer (`ry_credit_receiver_consumed`).
    ReceiverConsumption = 1,
}

mirror!(ry_return_path <=> ReturnPath: SenderCompletion, ReceiverConsumption);

/// Receiver allocator configuration.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_allocator_config {
    /// This receiver's session id (a new incarnation must use a new one).
    pub session: ry_session_id,
    /// Global capacity per resource; 0 = not modeled.
    pub capacity: ry_charge,
    /// Per-entry outstanding cap per resource; 0 = no cap beyond capacity.
    pub entry_cap: ry_charge,
    /// `ry_return_path` per resource.
    pub return_path: [u32; 4],
    /// Sender peers.
    pub max_peers: u32,
    /// QoS classes per peer.
    pub max_classes: u32,
}

/// A receiver allocator handle. Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_credit_receiver {
    /// Opaque handle bits.
    pub bits: u64,
}

#[cfg(feature = "layers")]
pub use layer::*;

/// The sender ledger and receiver allocator objects (feature `layers`).
#[cfg(feature = "layers")]
mod layer {
    use std::sync::{Mutex, MutexGuard};

    use railyard_core::credit::{
        AllocatorConfig, CommittedCharge, ReceiverAllocator, ReserveError, SenderControl,
        SenderLedger, UsageOutcome,
    };
    use railyard_core::token::TokenRecord;

    use super::*;
    use crate::error::{guard, ret_opt};
    use crate::handle::{Pinned, Registry};
    use crate::mirror::CEnum;
    use crate::ptr::{in_ref, out_ref, put};
    use crate::token::ry_token_record;

    struct Sender {
        ledger: SenderLedger,
        control: Mutex<SenderControl>,
    }

    static SENDERS: Registry<Sender> = Registry::new(5, "credit sender");

    fn sender(h: ry_credit_sender) -> Result<Pinned<Sender>> {
        SENDERS.get(h.bits)
    }

    impl Sender {
        fn ctl(&self) -> MutexGuard<'_, SenderControl> {
            self.control.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    impl ry_committed_charge {
        fn from_core(c: &CommittedCharge) -> Self {
            ry_committed_charge {
                charge: c.charge().into(),
                entry: c.entry().index(),
                generation: c.generation(),
                held: 1,
                reserved: 0,
            }
        }

        fn core(&self) -> Result<CommittedCharge> {
            if self.held == 0 {
                return Err(Error::new(
                    RyStatus::CreditNotHeld,
                    "committed charge is not held (already released or recorded)",
                ));
            }
            Ok(CommittedCharge::new_unchecked(
                self.entry,
                self.generation,
                self.charge.into(),
            ))
        }
    }

    /// Creates a sender ledger (all memory allocated here).
    ///
    /// Ownership: `*out` is owned by the caller; free with
    /// `ry_credit_sender_destroy`. Thread-safety: the data-path calls
    /// (`ry_credit_reserve_commit`, `ry_credit_release*`, `ry_credit_available`)
    /// are lock-free from any thread; the control calls (bind, apply update,
    /// usage, return, stale, quarantine, metrics) are serialised by an
    /// internal mutex the data path never takes.
    ///
    /// # Safety
    /// `cfg` is valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_sender_create(
        cfg: *const ry_credit_ledger_config,
        out: *mut ry_credit_sender,
    ) -> RyStatus {
        // SAFETY: caller contract: `cfg` valid for reads, `out` for writes.
        unsafe {
            ret(out, "out", || {
                let (ledger, control) = SenderLedger::new((*in_ref(cfg, "cfg")?).into())?;
                let control = Mutex::new(control);
                let bits = SENDERS.insert(Sender { ledger, control })?;
                Ok(ry_credit_sender { bits })
            })
        }
    }

    /// Destroys a sender ledger. Thread-safety: any thread.
    ///
    /// Ownership: consumes the handle; every copy of it becomes invalid.
    #[no_mangle]
    pub extern "C" fn ry_credit_sender_destroy(sender: ry_credit_sender) -> RyStatus {
        guard(|| SENDERS.remove(sender.bits))
    }

    /// Binds `peer` to a receiver session and epoch (after negotiation, or on
    /// a new session/epoch). A previous binding is invalidated: old commits
    /// and completions can no longer touch the new epoch (they are fenced),
    /// and the entries stay closed until the first update of the new epoch.
    /// Binding only moves forward in `(session, epoch)` order: an older epoch
    /// (`RY_STATUS_CREDIT_EPOCH_MISMATCH`) or any earlier session, however many
    /// restarts ago (`RY_STATUS_CREDIT_SESSION_MISMATCH`), is refused
    /// (replay-safe); session or epoch 0 is `RY_STATUS_CREDIT_ZERO_ID`.
    ///
    /// Thread-safety: control path (internal mutex).
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    #[no_mangle]
    pub extern "C" fn ry_credit_bind(
        sender: ry_credit_sender,
        peer: u32,
        session: ry_session_id,
        epoch: u64,
    ) -> RyStatus {
        guard(|| {
            let s = self::sender(sender)?;
            let mut ctl = s.ctl();
            Ok(ctl.bind(&s.ledger, peer, session.into(), epoch)?)
        })
    }

    /// Applies a receiver update for `peer` (identity from the endpoint, never
    /// the payload): session and epoch must match, an older or equal sequence
    /// is a no-op, a gap is applied and counted, every cumulative total must be
    /// non-decreasing (else `RY_STATUS_CREDIT_DECREASING`: the update is
    /// rejected, nothing changes, `protocol_errors` counts it, the peer is
    /// not quarantined). `*outcome_out` and `*missed_out` are optional.
    ///
    /// Thread-safety: control path (internal mutex).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    ///
    /// # Safety
    /// `update` is valid for reads; the out-pointers are NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_apply_update(
        sender: ry_credit_sender,
        peer: u32,
        update: *const ry_credit_update,
        now_ns: u64,
        outcome_out: *mut ry_update_outcome,
        missed_out: *mut u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `update` valid for reads, the out-pointers
        // NULL or valid for writes.
        guard(|| unsafe {
            let s = self::sender(sender)?;
            let u = in_ref(update, "update")?.to_core()?;
            let (o, missed) = update_outcome(s.ctl().apply_update(&s.ledger, peer, &u, now_ns)?);
            put(outcome_out, o);
            put(missed_out, missed);
            Ok(())
        })
    }

    /// Reserves the whole `*charge` against `(peer, class)` — all resources or
    /// none, one CAS — and commits it: call it at handoff to the transport.
    /// On `RY_STATUS_CREDIT_INSUFFICIENT` nothing was taken and
    /// `*short_out` (optional) holds the bitmask of exhausted resources.
    ///
    /// Ownership: the caller owns `*out` and releases it exactly once.
    /// Thread-safety: lock-free; any number of threads.
    ///
    /// # Safety
    /// `charge` is valid for reads; `out` is valid for writes; `short_out` is
    /// NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_reserve_commit(
        sender: ry_credit_sender,
        peer: u32,
        class: u32,
        charge: *const ry_charge,
        out: *mut ry_committed_charge,
        short_out: *mut u8,
    ) -> RyStatus {
        // SAFETY: caller contract: `charge` valid for reads, `out` valid for
        // writes (checked non-NULL before reserving, so a commit is never
        // lost), `short_out` NULL or valid for writes.
        unsafe {
            ret(out, "out", || {
                let s = self::sender(sender)?;
                let c: Charge = (*in_ref(charge, "charge")?).into();
                let entry = s.ledger.entry(peer, class)?;
                let r = s.ledger.try_reserve(entry, &c).inspect_err(|e| {
                    if let ReserveError::Insufficient(set) = e {
                        put(short_out, set.bits());
                    }
                })?;
                Ok(ry_committed_charge::from_core(&r.commit()?))
            })
        }
    }

    /// Releases a committed charge on completion (clearing `held`): it is
    /// reported to the receiver in the next usage report; it never mints
    /// sender credit. `*outcome_out` (optional) says whether it was released
    /// or fenced (old epoch). A charge that is not `held` is
    /// `RY_STATUS_CREDIT_NOT_HELD`; one larger than what is outstanding in its
    /// epoch (a copy released twice, a forged one) is
    /// `RY_STATUS_CREDIT_OVER_RELEASE`. On any error nothing changes and
    /// `held` stays as it was.
    ///
    /// Thread-safety: lock-free; any thread.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    ///
    /// # Safety
    /// `charge` is valid for reads and writes; `outcome_out` is NULL or valid
    /// for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_release(
        sender: ry_credit_sender,
        charge: *mut ry_committed_charge,
        outcome_out: *mut ry_credit_release_outcome,
    ) -> RyStatus {
        // SAFETY: caller contract: `charge` valid for reads and writes,
        // `outcome_out` NULL or valid for writes.
        unsafe {
            ret_opt(outcome_out, || {
                let s = self::sender(sender)?;
                let c = out_ref(charge, "charge")?;
                let o = s.ledger.release(c.core()?)?;
                c.held = 0;
                Ok(o.into())
            })
        }
    }

    /// Moves a held committed charge into a token record (`credit_key`,
    /// `RY_HOLDS_CREDIT`) and clears `held`. `record->bytes` must equal the
    /// charge's DATA_BYTES, and slot charges must be 0 or 1
    /// (`RY_STATUS_CREDIT_NOT_RECORDABLE` otherwise; nothing moves).
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    /// Thread-safety: pure data transformation; do not share the same struct between threads without synchronisation.
    ///
    /// # Safety
    /// `charge` and `record` are valid for reads and writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_committed_charge_record_into(
        charge: *mut ry_committed_charge,
        record: *mut ry_token_record,
    ) -> RyStatus {
        // SAFETY: caller contract: `charge` and `record` valid for reads and
        // writes.
        guard(|| unsafe {
            let c = out_ref(charge, "charge")?;
            let r = out_ref(record, "record")?;
            if r.holds & TokenRecord::HOLDS_CREDIT != 0 {
                return Err(Error::new(
                    RyStatus::CreditNotRecordable,
                    "record already holds a credit charge",
                ));
            }
            let mut rec = TokenRecord::from(&*r);
            c.core()?
                .record_into(&mut rec)
                .map_err(|(e, _still_held_by_c)| e)?;
            *r = ry_token_record::from(&rec);
            c.held = 0;
            Ok(())
        })
    }

    /// Releases the credit charge recorded in `*record` (the completion path)
    /// and clears `RY_HOLDS_CREDIT`, so a second release of the same record is
    /// `RY_STATUS_CREDIT_NOT_HELD`; a copy of the record released after the
    /// original is `RY_STATUS_CREDIT_OVER_RELEASE`. On any error `*record` is
    /// left as it was. `*outcome_out` is optional.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    /// Thread-safety: lock-free; any thread, concurrently with any call on the same object.
    ///
    /// # Safety
    /// `record` is valid for reads and writes; `outcome_out` is NULL or valid
    /// for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_release_record(
        sender: ry_credit_sender,
        record: *mut ry_token_record,
        outcome_out: *mut ry_credit_release_outcome,
    ) -> RyStatus {
        // SAFETY: caller contract: `record` valid for reads and writes,
        // `outcome_out` NULL or valid for writes.
        unsafe {
            ret_opt(outcome_out, || {
                let s = self::sender(sender)?;
                let r = out_ref(record, "record")?;
                let mut rec = TokenRecord::from(&*r);
                let o = s.ledger.release_record(&mut rec)?;
                r.holds = rec.holds;
                Ok(o.into())
            })
        }
    }

    /// Writes `(peer, class)`'s available credit (one consistent snapshot,
    /// never torn) and whether the entry is open for dispatch.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: lock-free; any thread, concurrently with any call on the same object.
    ///
    /// # Safety
    /// `out` is valid for writes; `open_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_available(
        sender: ry_credit_sender,
        peer: u32,
        class: u32,
        out: *mut ry_charge,
        open_out: *mut bool,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` valid for writes, `open_out` NULL or
        // valid for writes.
        unsafe {
            ret(out, "out", || {
                let s = self::sender(sender)?;
                let (avail, open) = s.ledger.available(s.ledger.entry(peer, class)?)?;
                put(open_out, open);
                Ok(avail.into())
            })
        }
    }

    /// Builds the usage report for `(peer, class)` (cumulative consumed,
    /// released and returned totals of the bound epoch, plus `*pending_demand`,
    /// which may be NULL for none). Encode it with `ry_wire_encode`.
    ///
    /// Thread-safety: control path (internal mutex).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    ///
    /// # Safety
    /// `pending_demand` is NULL or valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_usage_report(
        sender: ry_credit_sender,
        peer: u32,
        class: u32,
        pending_demand: *const ry_charge,
        out: *mut ry_credit_usage,
    ) -> RyStatus {
        // SAFETY: caller contract: `pending_demand` NULL or valid for reads,
        // `out` valid for writes.
        unsafe {
            ret(out, "out", || {
                let s = self::sender(sender)?;
                let demand = charge_or_zero(pending_demand);
                let u = s.ctl().usage(&s.ledger, peer, class, demand)?;
                Ok(ry_credit_usage::from_core(&u))
            })
        }
    }

    /// Returns up to `*max` of `(peer, class)`'s unused credit to the receiver
    /// (reported in the next usage report), taken atomically from the
    /// available credit so it can never be both returned and used. Writes what
    /// was actually returned.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: control path; serialised per sender by an internal mutex the data path never takes.
    ///
    /// # Safety
    /// `max` is valid for reads; `returned_out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_return_unused(
        sender: ry_credit_sender,
        peer: u32,
        class: u32,
        max: *const ry_charge,
        returned_out: *mut ry_charge,
    ) -> RyStatus {
        // SAFETY: caller contract: `max` valid for reads, `returned_out` for
        // writes.
        unsafe {
            ret(returned_out, "returned_out", || {
                let s = self::sender(sender)?;
                let m: Charge = (*in_ref(max, "max")?).into();
                let r = s.ctl().return_unused(&s.ledger, peer, class, m)?;
                Ok(r.into())
            })
        }
    }

    /// Marks `peer` stale (control disconnect, freshness expiry): no new
    /// credit-gated dispatch; a newer update reopens it.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: control path; serialised per sender by an internal mutex the data path never takes.
    #[no_mangle]
    pub extern "C" fn ry_credit_mark_stale(sender: ry_credit_sender, peer: u32) -> RyStatus {
        guard(|| {
            let s = self::sender(sender)?;
            let mut ctl = s.ctl();
            Ok(ctl.mark_stale(&s.ledger, peer)?)
        })
    }

    /// Quarantines `peer` (a violation seen elsewhere) until it is re-bound.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: control path; serialised per sender by an internal mutex the data path never takes.
    #[no_mangle]
    pub extern "C" fn ry_credit_quarantine(sender: ry_credit_sender, peer: u32) -> RyStatus {
        guard(|| {
            let s = self::sender(sender)?;
            let mut ctl = s.ctl();
            Ok(ctl.quarantine(&s.ledger, peer)?)
        })
    }

    /// Writes the sender's aggregated metrics. Control path (internal mutex).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: control path; serialised per sender by an internal mutex the data path never takes.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_metrics_get(
        sender: ry_credit_sender,
        out: *mut ry_credit_metrics,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let s = self::sender(sender)?;
                let m = s.ctl().metrics(&s.ledger);
                Ok(m.into())
            })
        }
    }

    /// Writes a configuration with the default return paths (DATA_BYTES and
    /// REQUEST_SLOTS by sender completion, STAGING and CONSUMER slots by
    /// receiver consumption), no entry caps, and the given sizes.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: pure; any thread, concurrently.
    ///
    /// # Safety
    /// `capacity` is valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_allocator_config_init(
        session: ry_session_id,
        max_peers: u32,
        max_classes: u32,
        capacity: *const ry_charge,
        out: *mut ry_credit_allocator_config,
    ) -> RyStatus {
        // SAFETY: caller contract: `capacity` valid for reads, `out` for
        // writes.
        unsafe {
            ret(out, "out", || {
                let cap = *in_ref(capacity, "capacity")?;
                let d = AllocatorConfig::new(session.into(), max_peers, max_classes, cap.v);
                Ok(ry_credit_allocator_config {
                    session,
                    capacity: cap,
                    entry_cap: ry_charge { v: d.entry_cap },
                    return_path: d.return_path.map(|p| ry_return_path::from(p) as u32),
                    max_peers,
                    max_classes,
                })
            })
        }
    }

    static RECEIVERS: Registry<Mutex<ReceiverAllocator>> = Registry::new(6, "credit receiver");

    fn with_receiver<R>(
        h: ry_credit_receiver,
        f: impl FnOnce(&mut ReceiverAllocator) -> Result<R>,
    ) -> Result<R> {
        let r = RECEIVERS.get(h.bits)?;
        let mut g = r.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut g)
    }

    /// Creates a receiver allocator with all capacity free.
    ///
    /// Ownership: `*out` is owned by the caller; free with
    /// `ry_credit_receiver_destroy`. Thread-safety: control-path state; every
    /// call is serialised by an internal mutex.
    ///
    /// # Safety
    /// `cfg` is valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_create(
        cfg: *const ry_credit_allocator_config,
        out: *mut ry_credit_receiver,
    ) -> RyStatus {
        // SAFETY: caller contract: `cfg` valid for reads, `out` for writes.
        unsafe {
            ret(out, "out", || {
                let c = *in_ref(cfg, "cfg")?;
                let mut return_path = [ReturnPath::SenderCompletion; RESOURCES];
                for (o, &p) in return_path.iter_mut().zip(&c.return_path) {
                    *o = ry_return_path::to_core(p, "return_path")?;
                }
                let a = ReceiverAllocator::new(AllocatorConfig {
                    session: c.session.into(),
                    max_peers: c.max_peers,
                    max_classes: c.max_classes,
                    capacity: c.capacity.v,
                    entry_cap: c.entry_cap.v,
                    return_path,
                })?;
                let bits = RECEIVERS.insert(Mutex::new(a))?;
                Ok(ry_credit_receiver { bits })
            })
        }
    }

    /// Destroys a receiver allocator. Thread-safety: any thread.
    ///
    /// Ownership: consumes the handle; every copy of it becomes invalid.
    #[no_mangle]
    pub extern "C" fn ry_credit_receiver_destroy(receiver: ry_credit_receiver) -> RyStatus {
        guard(|| RECEIVERS.remove(receiver.bits))
    }

    /// Opens `peer` for grants in a new epoch (written to `*epoch_out`,
    /// optional). The previous epoch's outstanding grants move to the fencing
    /// bucket, reusable only after `ry_credit_receiver_fence_complete`.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `epoch_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_open(
        receiver: ry_credit_receiver,
        peer: u32,
        epoch_out: *mut u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `epoch_out` NULL or valid for writes.
        unsafe { ret_opt(epoch_out, || with_receiver(receiver, |a| Ok(a.open(peer)?))) }
    }

    /// Disconnect of `peer`'s epoch `epoch` (the one `ry_credit_receiver_open`
    /// returned): moves its outstanding grants into fencing and closes it. A
    /// close naming another epoch — a stale close arriving after a newer open —
    /// is `RY_STATUS_CREDIT_EPOCH_MISMATCH` and closes nothing; closing a
    /// closed epoch again is a no-op.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    #[no_mangle]
    pub extern "C" fn ry_credit_receiver_close(
        receiver: ry_credit_receiver,
        peer: u32,
        epoch: u64,
    ) -> RyStatus {
        guard(|| with_receiver(receiver, |a| Ok(a.close(peer, epoch)?)))
    }

    /// Every old epoch of `peer` up to `epoch` is drained or failed: the
    /// fenced capacity becomes free (written to `*freed_out`, optional). A
    /// confirmation older than the newest fenced epoch frees nothing
    /// (`RY_STATUS_CREDIT_EPOCH_MISMATCH`: a newer epoch's drain was not
    /// confirmed).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `freed_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_fence_complete(
        receiver: ry_credit_receiver,
        peer: u32,
        epoch: u64,
        freed_out: *mut ry_charge,
    ) -> RyStatus {
        // SAFETY: caller contract: `freed_out` NULL or valid for writes.
        unsafe {
            ret_opt(freed_out, || {
                with_receiver(receiver, |a| Ok(a.fence_complete(peer, epoch)?.into()))
            })
        }
    }

    /// Carves `*add` from free capacity for `(peer, class)`, all or nothing,
    /// and writes the update to send (cumulative totals, next sequence; the
    /// first of an epoch is 1). An all-zero `*add` is
    /// `RY_STATUS_CREDIT_EMPTY_CHARGE`.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `add` is valid for reads; `update_out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_grant(
        receiver: ry_credit_receiver,
        peer: u32,
        class: u32,
        add: *const ry_charge,
        update_out: *mut ry_credit_update,
    ) -> RyStatus {
        // SAFETY: caller contract: `add` valid for reads, `update_out` for
        // writes.
        unsafe {
            ret(update_out, "update_out", || {
                let add: Charge = (*in_ref(add, "add")?).into();
                let u = with_receiver(receiver, |a| Ok(a.grant(peer, class, &add)?))?;
                Ok(ry_credit_update::from_core(&u))
            })
        }
    }

    /// Applies a sender's usage report for `peer` (identity from the
    /// endpoint). Writes the capacity returned to the free pool to
    /// `*returned_out` (optional) and whether it was a duplicate (a no-op) to
    /// `*duplicate_out` (optional). Usage of an old session or epoch is
    /// `RY_STATUS_CREDIT_STALE`; totals that decrease or exceed the grant are a
    /// violation (peer quarantined).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `usage` is valid for reads; the out-pointers are NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_on_usage(
        receiver: ry_credit_receiver,
        peer: u32,
        usage: *const ry_credit_usage,
        returned_out: *mut ry_charge,
        duplicate_out: *mut bool,
    ) -> RyStatus {
        // SAFETY: caller contract: `usage` valid for reads, the out-pointers
        // NULL or valid for writes.
        guard(|| unsafe {
            let u = in_ref(usage, "usage")?.to_core()?;
            let (back, dup) = match with_receiver(receiver, |a| Ok(a.on_usage(peer, &u)?))? {
                UsageOutcome::Applied(c) => (c, false),
                UsageOutcome::Duplicate => (Charge::ZERO, true),
            };
            put(returned_out, back.into());
            put(duplicate_out, dup);
            Ok(())
        })
    }

    /// Receiver-local consumption of `(peer, class)`'s outstanding grants (for
    /// `RY_RETURN_PATH_RECEIVER_CONSUMPTION` resources); capacity returns to
    /// the free pool. More than outstanding is refused.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `amounts` is valid for reads.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_consumed(
        receiver: ry_credit_receiver,
        peer: u32,
        class: u32,
        amounts: *const ry_charge,
    ) -> RyStatus {
        // SAFETY: caller contract: `amounts` valid for reads.
        guard(|| unsafe {
            let c: Charge = (*in_ref(amounts, "amounts")?).into();
            with_receiver(receiver, |a| Ok(a.consumed(peer, class, &c)?))
        })
    }

    /// Writes the free capacity per resource.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_free(
        receiver: ry_credit_receiver,
        out: *mut ry_charge,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                with_receiver(receiver, |a| Ok(a.free().into()))
            })
        }
    }

    /// Writes `(peer, class)`'s outstanding grants per resource.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_outstanding(
        receiver: ry_credit_receiver,
        peer: u32,
        class: u32,
        out: *mut ry_charge,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                with_receiver(receiver, |a| Ok(a.outstanding(peer, class)?.into()))
            })
        }
    }

    /// Writes whether capacity is conserved: free + outstanding + fencing ==
    /// capacity for every resource (must always be true).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: serialised per receiver by an internal mutex.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_credit_receiver_conserved(
        receiver: ry_credit_receiver,
        out: *mut bool,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                with_receiver(receiver, |a| Ok(a.conserved()))
            })
        }
    }
}
