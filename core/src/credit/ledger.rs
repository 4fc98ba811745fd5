//! The sender's credit ledger: lock-free, all-or-nothing multi-resource
//! reserve against receiver grants.
//!
//! # One packed word per entry
//!
//! Each entry (one `(peer, qos class)` pair) keeps the *available* credit of
//! all its modeled resources in **one `AtomicU64`**:
//!
//! ```text
//!  63      56 55  54 ............................................ 0
//! +----------+---+---------------------------------------------------+
//! | gen (8)  |open| DATA_BYTES | REQUEST_SLOTS | STAGING | CONSUMER   |
//! +----------+---+---------------------------------------------------+
//!                  field widths come from LedgerConfig::window (55 bits total)
//! ```
//!
//! [`SenderLedger::try_reserve`] loads the word, checks every charged field
//! and the `open` bit, and subtracts the whole packed charge with **one
//! compare-and-swap**. So a reservation is all-or-nothing and *never
//! partially visible*: there is no instant at which another reserver, a
//! snapshot ([`SenderLedger::available`]), a usage report or an update sees
//! DATA_BYTES taken but REQUEST_SLOTS not. (The alternative — one atomic per
//! resource, reserved in a fixed order with rollback — is safe against
//! overdraw but lets a concurrent reserver fail spuriously on a resource that
//! is only transiently taken, and lets reports read torn vectors; the loom
//! model `reserve_is_never_partially_visible` shows that twin failing.)
//!
//! The price is bounded windows: each field holds at most its configured
//! window (default: 4 GiB of bytes, 2047 request slots, 63 staging and 63
//! consumer slots per entry). The window bounds what the sender *tracks*
//! as granted-but-not-yet-completed; a receiver that grants beyond it is not
//! refused — the excess is *banked* by [`SenderControl`] and made available
//! as completions free room (see `flush`).
//!
//! Commits and completions use two more packed words:
//!
//! * `outstanding` — a **level**: what is committed and not yet released
//!   in the current generation. [`Reservation::commit`] adds to it,
//!   [`SenderLedger::release`] takes from it with the same checked,
//!   all-or-nothing CAS a reservation uses. So a release of more than is
//!   outstanding — a second release of the same charge, or a forged or
//!   oversized one — is refused with [`ReleaseError::NotOutstanding`] and
//!   changes nothing: the ledger never reports more released than consumed,
//!   so the receiver's `released <= consumed` check can never trip on our
//!   own double release.
//! * `committed` — a **flow**: commits since the control thread last
//!   drained them into its cumulative `consumed` totals.
//!
//! The control thread derives the cumulative `released` totals as
//! `consumed - outstanding`. A commit adds to `outstanding` *before*
//! `committed`, and the control thread drains `committed` *before* it
//! reads `outstanding`; so a commit caught half-way is counted as
//! outstanding but not yet consumed, which can only make the derived
//! `released` smaller than the truth, never larger (the derived total is
//! also kept monotonic). The loom model `commit_is_never_reported_released`
//! shows the wrong order failing. The control thread never lets
//! `applied grant - released total` exceed the window, so no field can
//! overflow; every CAS still checks and *refuses* (counted) rather than wrap.
//!
//! # Exactly-once release
//!
//! Three layers, from the strongest:
//!
//! 1. [`CommittedCharge`] is neither `Clone` nor `Copy`, and
//!    [`SenderLedger::release`] takes it by value: a second release of the
//!    same value does not compile.
//! 2. [`SenderLedger::release_record`] takes `&mut TokenRecord` and clears
//!    [`TokenRecord::HOLDS_CREDIT`] when it releases (as the CC and rail
//!    `release_record` clear theirs), so a second release of the record is
//!    [`ReleaseError::NotHeld`].
//! 3. Whatever a caller rebuilds from parts ([`CommittedCharge::from_record`]
//!    on a copied record, [`CommittedCharge::new_unchecked`], the C ABI)
//!    can take at most what is outstanding in the charge's epoch
//!    ([`ReleaseError::NotOutstanding`]). The ledger cannot tell two charges
//!    of the same shape apart, so this layer bounds the damage (the totals
//!    stay honest) rather than naming the culprit.
//!
//! The `gen` tag (low 8 bits of the entry's 16-bit generation) fences
//! epochs: a new session or epoch bumps the generation and swaps all three
//! words, so a reservation, commit, rollback or completion from the old
//! epoch can never add to or take from the new one. Completions carry the
//! full 16-bit generation in their [`TokenRecord`].
//!
//! # Roles
//!
//! [`SenderLedger`] (`&self`, shared by workers) has the hot path.
//! [`SenderControl`] (`&mut self`, one control thread) applies updates,
//! builds usage reports, returns unused credit and fences epochs. It is the
//! only writer of tags and grants, so updates are applied serially, as the
//! RFC requires, without a lock.
#[cfg(feature = "alloc")]
use alloc::boxed::Box;
#[cfg(feature = "alloc")]
use alloc::vec::Vec;
use core::fmt;

use super::{
    BackpressureInfo, Charge, CreditKey, CreditUpdate, CreditUsage, KeyError, Resource,
    ResourceSet, SessionId, Totals, ZeroField, RESOURCES,
};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::token::{OptId, TokenRecord};

const TAG_SHIFT: u32 = 56;
const TAG_MASK: u64 = 0xFF << TAG_SHIFT;
const OPEN: u64 = 1 << 55;
/// Bits available for resource fields in a packed word.
pub const FIELD_BITS: u32 = 55;

#[inline]
const fn tag(generation: u16) -> u64 {
    ((generation & 0xFF) as u64) << TAG_SHIFT
}

/// Sender ledger configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerConfig {
    /// Peer links (receivers) this sender can hold credit from.
    pub max_peers: u32,
    /// QoS classes per peer.
    pub max_classes: u32,
    /// Per-entry tracking window per resource; 0 = resource not modeled.
    /// The bit widths must sum to at most [`FIELD_BITS`].
    pub window: [u64; RESOURCES],
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            max_peers: 64,
            max_classes: 4,
            window: [u32::MAX as u64, 2047, 63, 63],
        }
    }
}

/// A configuration that cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// `max_peers * max_classes` is zero or exceeds 8192 (the entry index
    /// must fit the 13 bits of a token record's `credit_key`).
    TooManyEntries,
    /// The windows need more than [`FIELD_BITS`] bits.
    WindowTooWide,
    /// No resource is modeled.
    NoResources,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::TooManyEntries => f.write_str("max_peers * max_classes must be 1..=8192"),
            ConfigError::WindowTooWide => f.write_str("resource windows exceed 55 packed bits"),
            ConfigError::NoResources => f.write_str("no resource has a nonzero window"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}

/// Maximum entries (`max_peers * max_classes`) a ledger may have.
pub const MAX_ENTRIES: u32 = 1 << 13;

/// Bit layout of the packed resource fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    shift: [u32; RESOURCES],
    mask: [u64; RESOURCES],
    window: [u64; RESOURCES],
    present: ResourceSet,
    /// The most significant bit of every present field (for SWAR checks).
    tops: u64,
    /// All field bits.
    fields: u64,
}

impl Layout {
    pub(crate) fn new(window: [u64; RESOURCES]) -> Result<Layout, ConfigError> {
        let mut l = Layout {
            shift: [0; RESOURCES],
            mask: [0; RESOURCES],
            window,
            present: ResourceSet::EMPTY,
            tops: 0,
            fields: 0,
        };
        let mut at = 0u32;
        for r in Resource::ALL {
            let w = window[r.index()];
            if w == 0 {
                continue;
            }
            let bits = 64 - w.leading_zeros();
            if at + bits > FIELD_BITS {
                return Err(ConfigError::WindowTooWide);
            }
            l.shift[r.index()] = at;
            l.mask[r.index()] = (1u64 << bits) - 1;
            l.present = l.present.with(r);
            l.tops |= 1 << (at + bits - 1);
            l.fields |= ((1u64 << bits) - 1) << at;
            at += bits;
        }
        if l.present.is_empty() {
            return Err(ConfigError::NoResources);
        }
        Ok(l)
    }

    #[inline(always)]
    fn get(&self, word: u64, i: usize) -> u64 {
        (word >> self.shift[i]) & self.mask[i]
    }

    /// Packs a charge; rejects unmodeled resources, oversized amounts and
    /// the empty charge (which would pass the gate reserving nothing).
    /// Branch-free on the valid path: an unmodeled resource has window 0,
    /// so one `v > window` test per field covers both refusals, and the
    /// packed bits are used only when every field fits.
    #[inline]
    fn pack(&self, c: &Charge) -> Result<u64, KeyError> {
        let mut d = 0u64;
        let mut bad = false;
        for i in 0..RESOURCES {
            let v = c.0[i];
            bad |= v > self.window[i];
            d |= v.wrapping_shl(self.shift[i]);
        }
        if bad {
            return Err(self.pack_error(c));
        }
        if d == 0 {
            return Err(KeyError::EmptyCharge);
        }
        Ok(d)
    }

    /// Which refusal `pack` hit (the first offending resource in order).
    #[cold]
    fn pack_error(&self, c: &Charge) -> KeyError {
        for r in Resource::ALL {
            let v = c.0[r.index()];
            if v == 0 {
                continue;
            }
            if self.mask[r.index()] == 0 {
                return KeyError::UnknownResource(r);
            }
            if v > self.window[r.index()] {
                return KeyError::ChargeTooLarge(r);
            }
        }
        KeyError::EmptyCharge // unreachable: `pack` saw some v > window
    }

    /// Resources whose field in `word` is smaller than in `delta`.
    #[inline(always)]
    fn short(&self, word: u64, delta: u64) -> ResourceSet {
        let mut s = ResourceSet::EMPTY;
        for r in Resource::ALL {
            let i = r.index();
            if self.get(word, i) < self.get(delta, i) {
                s = s.with(r);
            }
        }
        s
    }

    /// Whether any field of `word` is smaller than in `delta`: branch-free
    /// (SWAR) — a field underflows iff a borrow leaves its top bit. A borrow
    /// crossing into a higher field only happens if a lower field already
    /// underflowed, so "any" is exact.
    #[inline(always)]
    fn any_short(&self, word: u64, delta: u64) -> bool {
        let a = word & self.fields;
        let d = a.wrapping_sub(delta);
        let borrow = (!a & delta) | ((!a | delta) & d);
        borrow & self.tops != 0
    }

    /// Whether adding `delta` to `word` would overflow any field (SWAR: a
    /// carry out of some field's top bit).
    #[inline(always)]
    fn overflows(&self, word: u64, delta: u64) -> bool {
        let a = word & self.fields;
        let s = a.wrapping_add(delta);
        let carry = (a & delta) | ((a | delta) & !s);
        carry & self.tops != 0
    }

    fn unpack(&self, word: u64) -> [u64; RESOURCES] {
        let mut v = [0; RESOURCES];
        for (i, x) in v.iter_mut().enumerate() {
            *x = self.get(word, i);
        }
        v
    }
}

/// Dense id of one ledger entry (`peer * max_classes + class`): what the
/// hot path takes, resolved once by [`SenderLedger::entry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntryId(u32);

impl EntryId {
    /// The dense index.
    ///
    /// ```
    /// use railyard_core::credit::{LedgerConfig, SenderLedger};
    /// let (ledger, _ctl) = SenderLedger::new(LedgerConfig { max_peers: 8, max_classes: 4, ..LedgerConfig::default() }).unwrap();
    /// assert_eq!(ledger.entry(2, 1).unwrap().index(), 2 * 4 + 1);
    /// ```
    pub const fn index(self) -> u32 {
        self.0
    }
}

#[cfg_attr(not(railyard_loom), repr(align(64)))]
struct Entry {
    /// Available credit (tagged, with the `OPEN` bit).
    avail: AtomicU64,
    /// Commits since the last drain (a flow; tagged).
    committed: AtomicU64,
    /// Committed and not yet released in this generation (a level; tagged).
    outstanding: AtomicU64,
    generation: AtomicU32,
    stalls: AtomicU64,
    stall_ns: AtomicU64,
    fenced: AtomicU64,
    refused: AtomicU64,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            avail: AtomicU64::new(tag(0)),
            committed: AtomicU64::new(tag(0)),
            outstanding: AtomicU64::new(tag(0)),
            generation: AtomicU32::new(0),
            stalls: AtomicU64::new(0),
            stall_ns: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }
}

/// Why a reservation failed. Nothing was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReserveError {
    /// The charge or entry id is invalid for this ledger.
    Key(KeyError),
    /// The entry is not open for dispatch (unbound, fencing, stale or
    /// quarantined); ask the [`CreditLink`](super::CreditLink) why.
    Closed,
    /// Not enough credit for these resources (the whole charge was refused).
    Insufficient(ResourceSet),
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReserveError::Key(k) => write!(f, "invalid credit charge: {k}"),
            ReserveError::Closed => f.write_str("credit entry is not open for dispatch"),
            ReserveError::Insufficient(s) => {
                write!(f, "insufficient credit (resources {:#06b})", s.bits())
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ReserveError {}

/// Why a commit failed. The credit is not lost: on `Overflow` it was rolled
/// back; on `EpochChanged` it belonged to an invalidated epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitError {
    /// A new session/epoch was bound between reserve and commit: do not
    /// dispatch; the old epoch's credit is void.
    EpochChanged,
    /// The pending-commit word would overflow (an accounting bug elsewhere,
    /// e.g. a double release); the reservation was rolled back.
    Overflow,
}

impl fmt::Display for CommitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommitError::EpochChanged => f.write_str("credit epoch changed before handoff"),
            CommitError::Overflow => f.write_str("commit refused: pending counter would overflow"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CommitError {}

/// What a completion's release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Counted for the next usage report to the receiver.
    Released,
    /// The charge belongs to an older epoch: counted as fenced work, and it
    /// does not touch the current epoch.
    Fenced,
}

/// Why a release was refused. A refusal changes nothing: no counter of the
/// ledger moves (except the `refused_ops` metric) and
/// [`SenderLedger::release_record`] leaves the record as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseError {
    /// The record holds no credit charge (never did, or it was already
    /// released: a second release of the same record).
    NotHeld,
    /// The charge or its entry is invalid for this ledger (including an
    /// empty charge).
    Key(KeyError),
    /// More than is outstanding (committed and not yet released) in the
    /// charge's epoch for these resources: a second release of the same
    /// charge, or a forged or oversized one.
    NotOutstanding(ResourceSet),
}

impl fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReleaseError::NotHeld => f.write_str("token record holds no credit charge"),
            ReleaseError::Key(k) => write!(f, "invalid credit release: {k}"),
            ReleaseError::NotOutstanding(s) => write!(
                f,
                "release exceeds the outstanding (committed, unreleased) credit (resources {:#06b})",
                s.bits()
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ReleaseError {}

impl From<KeyError> for ReleaseError {
    fn from(k: KeyError) -> Self {
        ReleaseError::Key(k)
    }
}

/// Why a charge cannot be recorded into / read from a [`TokenRecord`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// The record does not hold a credit charge.
    NoCredit,
    /// Slot charges other than 0 or 1, or bytes beyond `u32`.
    NotRecordable,
    /// `record.bytes` differs from the charge's DATA_BYTES.
    BytesMismatch,
    /// The record already holds a credit charge (one at a time).
    AlreadyHeld,
    /// The record's entry index is out of range for this ledger.
    Key(KeyError),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::NoCredit => f.write_str("token record holds no credit"),
            RecordError::NotRecordable => f.write_str("charge cannot be encoded in a token record"),
            RecordError::BytesMismatch => f.write_str("record bytes differ from the charged bytes"),
            RecordError::AlreadyHeld => f.write_str("token record already holds a credit charge"),
            RecordError::Key(k) => write!(f, "record credit key invalid: {k}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RecordError {}

/// A committed charge, released exactly once by its completion: it is
/// neither `Clone` nor `Copy`, and [`SenderLedger::release`] consumes it.
///
/// Recordable into a [`TokenRecord`] as `credit_key` (entry index: 13 bits,
/// slot mask: 3 bits, generation: 16 bits) plus `bytes` (= DATA_BYTES), so
/// the completion path can release from the record alone
/// ([`SenderLedger::release_record`], which clears the record's hold bit).
///
/// ```
/// use railyard_core::credit::{CommittedCharge, Charge};
/// use railyard_core::token::TokenRecord;
/// let c = CommittedCharge::new_unchecked(5, 7, Charge::direct_write(4096));
/// let mut rec = TokenRecord { bytes: 4096, ..Default::default() };
/// c.record_into(&mut rec).unwrap();
/// assert!(rec.holds & TokenRecord::HOLDS_CREDIT != 0);
/// let back = CommittedCharge::from_record(&rec).unwrap();
/// assert_eq!(back, CommittedCharge::new_unchecked(5, 7, Charge::direct_write(4096)));
/// // A record holds one credit charge at a time.
/// let (err, _again) = back.record_into(&mut rec).unwrap_err();
/// assert_eq!(err, railyard_core::credit::RecordError::AlreadyHeld);
/// ```
#[derive(Debug, PartialEq, Eq)]
pub struct CommittedCharge {
    entry: u32,
    generation: u16,
    charge: Charge,
}

impl CommittedCharge {
    /// Builds a committed charge from parts (for records, the C ABI and
    /// tests). A forged one is harmless: release checks the entry, the
    /// generation, and takes at most what is outstanding.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// // A forged charge for more than is outstanding is refused; nothing changes.
    /// let forged = CommittedCharge::new_unchecked(e.index(), 1, Charge::direct_write(4096));
    /// assert!(matches!(ledger.release(forged), Err(ReleaseError::NotOutstanding(_))));
    /// ```
    pub const fn new_unchecked(entry: u32, generation: u16, charge: Charge) -> Self {
        CommittedCharge {
            entry,
            generation,
            charge,
        }
    }

    /// The entry charged.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// assert_eq!(c.entry(), e);
    /// ledger.release(c).unwrap();
    /// ```
    pub const fn entry(&self) -> EntryId {
        EntryId(self.entry)
    }

    /// The entry generation at reserve time.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// let g = c.generation();
    /// ctl.bind(&ledger, 0, SessionId::new(2, 1), 1).unwrap(); // the receiver restarted
    /// // The old generation's charge is fenced, never credited to the new session.
    /// assert_eq!(ledger.release(c), Ok(ReleaseOutcome::Fenced));
    /// # let _ = g;
    /// ```
    pub const fn generation(&self) -> u16 {
        self.generation
    }

    /// The charge vector.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// assert_eq!(c.charge(), Charge::direct_write(4096));
    /// ledger.release(c).unwrap();
    /// ```
    pub const fn charge(&self) -> Charge {
        self.charge
    }

    /// The compact `credit_key` for a [`TokenRecord`].
    ///
    /// ```
    /// use railyard_core::credit::{Charge, CommittedCharge, RecordError};
    /// let k = CommittedCharge::new_unchecked(5, 2, Charge::direct_write(4096)).credit_key().unwrap();
    /// assert_eq!(k & 0x1FFF, 5); // the entry, in the low bits
    /// // Two request slots cannot be named in a record.
    /// let big = CommittedCharge::new_unchecked(5, 2, Charge([4096, 2, 0, 1]));
    /// assert_eq!(big.credit_key(), Err(RecordError::NotRecordable));
    /// ```
    #[inline]
    pub fn credit_key(&self) -> Result<u32, RecordError> {
        let c = &self.charge.0;
        if self.entry >= MAX_ENTRIES || c[0] > u32::MAX as u64 || c[1..].iter().any(|&s| s > 1) {
            return Err(RecordError::NotRecordable);
        }
        let mask = (c[1] | (c[2] << 1) | (c[3] << 2)) as u32;
        Ok(self.entry | (mask << 13) | ((self.generation as u32) << 16))
    }

    /// Moves the charge into `rec`: sets `credit_key` and `HOLDS_CREDIT`;
    /// from now on the record is the only holder, released with
    /// [`SenderLedger::release_record`]. `rec.bytes` must equal the charged
    /// DATA_BYTES, slot charges must be 0 or 1, and `rec` must not hold a
    /// credit charge already; otherwise `rec` is untouched and the charge
    /// comes back with the error (still held: release or record it).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    /// use railyard_core::token::TokenRecord;
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// let mut wrong = TokenRecord { bytes: 1, ..TokenRecord::default() };
    /// let (err, c) = c.record_into(&mut wrong).unwrap_err(); // handed back, still held
    /// assert_eq!(err, RecordError::BytesMismatch);
    /// let mut rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
    /// c.record_into(&mut rec).unwrap();
    /// assert_eq!(ledger.release_record(&mut rec), Ok(ReleaseOutcome::Released));
    /// ```
    #[inline]
    pub fn record_into(self, rec: &mut TokenRecord) -> Result<(), (RecordError, CommittedCharge)> {
        let key = match self.credit_key() {
            Ok(k) => k,
            Err(e) => return Err((e, self)),
        };
        if rec.holds & TokenRecord::HOLDS_CREDIT != 0 {
            return Err((RecordError::AlreadyHeld, self));
        }
        if rec.bytes as u64 != self.charge.0[0] {
            return Err((RecordError::BytesMismatch, self));
        }
        rec.credit_key = OptId::some(key);
        rec.holds |= TokenRecord::HOLDS_CREDIT;
        Ok(())
    }

    /// Reconstructs the charge from a record written by [`record_into`](Self::record_into).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    /// use railyard_core::token::TokenRecord;
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// let mut rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
    /// let want = (c.entry(), c.generation(), c.charge());
    /// c.record_into(&mut rec).unwrap();
    /// let back = CommittedCharge::from_record(&rec).unwrap();
    /// assert_eq!((back.entry(), back.generation(), back.charge()), want);
    /// assert_eq!(CommittedCharge::from_record(&TokenRecord::default()).unwrap_err(), RecordError::NoCredit);
    /// # ledger.release(back).unwrap();
    /// ```
    pub fn from_record(rec: &TokenRecord) -> Result<CommittedCharge, RecordError> {
        let key = match rec.credit_key.get() {
            Some(k) if rec.holds & TokenRecord::HOLDS_CREDIT != 0 => k,
            _ => return Err(RecordError::NoCredit),
        };
        let mask = (key >> 13) & 0b111;
        Ok(CommittedCharge {
            entry: key & (MAX_ENTRIES - 1),
            generation: (key >> 16) as u16,
            charge: Charge([
                rec.bytes as u64,
                (mask & 1) as u64,
                ((mask >> 1) & 1) as u64,
                ((mask >> 2) & 1) as u64,
            ]),
        })
    }
}

/// The worker-shared half of the sender ledger: reserve, commit, release.
pub struct SenderLedger {
    entries: Box<[Entry]>,
    layout: Layout,
    max_peers: u32,
    max_classes: u32,
}

impl fmt::Debug for SenderLedger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SenderLedger")
            .field("entries", &self.entries.len())
            .field("layout", &self.layout)
            .finish()
    }
}

/// A successful reservation: the whole charge is held until it is
/// [committed](Reservation::commit) on handoff to the transport, or rolled
/// back (explicitly or on drop) — rollback exists only before handoff,
/// because `commit` consumes the reservation.
#[must_use = "dropping a reservation rolls it back"]
#[derive(Debug)]
pub struct Reservation<'a> {
    ledger: &'a SenderLedger,
    entry: u32,
    generation: u16,
    delta: u64,
    charge: Charge,
    armed: bool,
}

impl SenderLedger {
    /// Builds the two halves of a sender ledger. All memory is allocated
    /// here; no operation allocates afterwards.
    ///
    /// ```
    /// use railyard_core::credit::{ConfigError, LedgerConfig, SenderLedger};
    /// let (ledger, ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// assert!(!ctl.is_active(0)); // nothing granted yet: every entry closed
    /// # let _ = ledger;
    /// let none = LedgerConfig { max_peers: 0, ..LedgerConfig::default() };
    /// assert!(matches!(SenderLedger::new(none), Err(ConfigError::TooManyEntries)));
    /// ```
    pub fn new(cfg: LedgerConfig) -> Result<(SenderLedger, SenderControl), ConfigError> {
        let n = (cfg.max_peers as u64) * (cfg.max_classes as u64);
        if n == 0 || n > MAX_ENTRIES as u64 {
            return Err(ConfigError::TooManyEntries);
        }
        let layout = Layout::new(cfg.window)?;
        let entries: Vec<Entry> = (0..n).map(|_| Entry::new()).collect();
        let ledger = SenderLedger {
            entries: entries.into_boxed_slice(),
            layout,
            max_peers: cfg.max_peers,
            max_classes: cfg.max_classes,
        };
        let ctl = SenderControl {
            ledger_addr: ledger.entries.as_ptr() as usize,
            layout,
            max_classes: cfg.max_classes,
            peers: (0..cfg.max_peers)
                .map(|_| PeerCtl::default())
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            entries: (0..n)
                .map(|_| EntryCtl::default())
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            counters: Counters::default(),
        };
        Ok((ledger, ctl))
    }

    /// Resolves `(peer, class)` to an entry id; unknown peer or class is
    /// rejected here, before any state is touched.
    ///
    /// ```
    /// use railyard_core::credit::{KeyError, LedgerConfig, SenderLedger};
    /// let (ledger, _ctl) = SenderLedger::new(LedgerConfig { max_peers: 2, max_classes: 1, ..LedgerConfig::default() }).unwrap();
    /// assert!(ledger.entry(1, 0).is_ok());
    /// assert_eq!(ledger.entry(2, 0), Err(KeyError::UnknownPeer(2)));
    /// assert_eq!(ledger.entry(0, 1), Err(KeyError::UnknownClass(1)));
    /// ```
    #[inline]
    pub fn entry(&self, peer: u32, class: u32) -> Result<EntryId, KeyError> {
        if peer >= self.max_peers {
            return Err(KeyError::UnknownPeer(peer));
        }
        if class >= self.max_classes {
            return Err(KeyError::UnknownClass(class));
        }
        Ok(EntryId(peer * self.max_classes + class))
    }

    /// The `(peer, class)` an entry id names (the inverse of [`entry`](Self::entry)).
    ///
    /// ```
    /// use railyard_core::credit::{LedgerConfig, SenderLedger};
    /// let (ledger, _ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// assert_eq!(ledger.peer_class(ledger.entry(5, 3).unwrap()), (5, 3));
    /// ```
    #[inline]
    pub fn peer_class(&self, entry: EntryId) -> (u32, u32) {
        let c = self.max_classes.max(1);
        (entry.0 / c, entry.0 % c)
    }

    /// Typed receiver-credit backpressure for `entry` short of `exhausted`
    /// (empty: the entry is not open).
    #[inline]
    pub(crate) fn backpressure(&self, entry: EntryId, exhausted: ResourceSet) -> BackpressureInfo {
        let (peer, class) = self.peer_class(entry);
        BackpressureInfo::receiver_credit(peer, class, exhausted, 0, false)
    }

    #[inline]
    fn get(&self, entry: u32) -> Result<&Entry, KeyError> {
        self.entries
            .get(entry as usize)
            .ok_or(KeyError::ForeignEntry)
    }

    /// Reserves the whole `charge` against `entry`, atomically: one CAS on
    /// the entry's packed word, so either every resource is taken or none.
    /// Lock-free; never allocates.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId(7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let grants = Totals::all([8192, 1, 0, 4]);
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1, grants, ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// let e = ledger.entry(0, 0).unwrap();
    /// let r = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap();
    /// // Only one request slot was granted: the second reserve takes nothing.
    /// assert!(ledger.try_reserve(e, &Charge::direct_write(4096)).is_err());
    /// let committed = r.commit().unwrap();
    /// assert_eq!(ledger.release(committed), Ok(ReleaseOutcome::Released));
    /// ```
    #[inline]
    pub fn try_reserve(
        &self,
        entry: EntryId,
        charge: &Charge,
    ) -> Result<Reservation<'_>, ReserveError> {
        let e = self.get(entry.0).map_err(ReserveError::Key)?;
        let delta = self.layout.pack(charge).map_err(ReserveError::Key)?;
        let mut generation = e.generation.load(Ordering::Acquire) as u16;
        let mut cur = e.avail.load(Ordering::Acquire);
        loop {
            if cur & TAG_MASK != tag(generation) {
                // An epoch change is in progress: re-read the generation.
                crate::sync::spin_hint();
                generation = e.generation.load(Ordering::Acquire) as u16;
                cur = e.avail.load(Ordering::Acquire);
                continue;
            }
            if cur & OPEN == 0 {
                return Err(ReserveError::Closed);
            }
            if self.layout.any_short(cur, delta) {
                e.stalls.fetch_add(1, Ordering::Relaxed);
                return Err(ReserveError::Insufficient(self.layout.short(cur, delta)));
            }
            #[cfg(railyard_broken = "credit_check_then_act")]
            {
                // BROKEN: check, then subtract without re-validating.
                e.avail.fetch_sub(delta, Ordering::AcqRel);
                break;
            }
            #[cfg(railyard_broken = "credit_partial_reserve")]
            {
                // BROKEN: take each resource with its own CAS; a concurrent
                // observer sees a partially taken charge.
                if self.broken_split_reserve(e, generation, delta).is_err() {
                    return Err(ReserveError::Insufficient(ResourceSet::ALL));
                }
                break;
            }
            #[allow(unreachable_code)]
            match e.avail.compare_exchange_weak(
                cur,
                cur - delta,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        Ok(Reservation {
            ledger: self,
            entry: entry.0,
            generation,
            delta,
            charge: *charge,
            armed: true,
        })
    }

    #[cfg(railyard_broken = "credit_partial_reserve")]
    fn broken_split_reserve(&self, e: &Entry, generation: u16, delta: u64) -> Result<(), ()> {
        let mut taken = 0u64;
        for i in 0..RESOURCES {
            let part = self.layout.get(delta, i) << self.layout.shift[i];
            if part == 0 {
                continue;
            }
            let mut cur = e.avail.load(Ordering::Acquire);
            loop {
                if cur & TAG_MASK != tag(generation)
                    || self.layout.get(cur, i) < self.layout.get(delta, i)
                {
                    e.avail.fetch_add(taken, Ordering::AcqRel);
                    return Err(());
                }
                match e
                    .avail
                    .compare_exchange(cur, cur - part, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => break,
                    Err(a) => cur = a,
                }
            }
            taken += part;
        }
        Ok(())
    }

    /// Releases a committed charge on completion, exactly once: it takes
    /// the charge from the entry's *outstanding* level (committed, not yet
    /// released) with one checked CAS, and consumes `c`. This only
    /// *reports* release to the receiver (through the next usage report);
    /// it never mints sender credit.
    ///
    /// * `Ok(Released)`: counted for the next usage report.
    /// * `Ok(Fenced)`: the charge belongs to an older epoch; counted as
    ///   fenced work, the current epoch is untouched.
    /// * `Err(NotOutstanding)`: more than is outstanding in the charge's
    ///   epoch (a second release, or a forged / oversized charge); refused,
    ///   nothing changed (counted in `refused_ops`).
    /// * `Err(Key)`: a foreign entry or an invalid (e.g. empty) charge.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    ///     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// let e = ledger.entry(0, 0).unwrap();
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// // A copy rebuilt from parts (say, a duplicated completion):
    /// let dup = CommittedCharge::new_unchecked(e.index(), c.generation(), c.charge());
    /// assert_eq!(ledger.release(c), Ok(ReleaseOutcome::Released));
    /// assert!(matches!(ledger.release(dup), Err(ReleaseError::NotOutstanding(_))));
    /// ```
    #[inline]
    pub fn release(&self, c: CommittedCharge) -> Result<ReleaseOutcome, ReleaseError> {
        let e = self.get(c.entry)?;
        let delta = self.layout.pack(&c.charge)?;
        #[cfg(not(railyard_broken = "credit_untagged_release"))]
        if e.generation.load(Ordering::Acquire) as u16 != c.generation {
            e.fenced.fetch_add(1, Ordering::Relaxed);
            return Ok(ReleaseOutcome::Fenced);
        }
        match self.sub_tagged(&e.outstanding, c.generation, delta) {
            Ok(()) => Ok(ReleaseOutcome::Released),
            Err(Cas::Fenced) => {
                e.fenced.fetch_add(1, Ordering::Relaxed);
                Ok(ReleaseOutcome::Fenced)
            }
            Err(Cas::Short(set)) => {
                e.refused.fetch_add(1, Ordering::Relaxed);
                Err(ReleaseError::NotOutstanding(set))
            }
            Err(Cas::Overflow) => unreachable_cas(e),
        }
    }

    /// [`release`](Self::release) from a token record alone (the completion
    /// path). Clears [`TokenRecord::HOLDS_CREDIT`] when the charge is
    /// released or fenced, so a second release of the same record is
    /// [`ReleaseError::NotHeld`] — as the CC and rail `release_record`
    /// clear their hold bits. On any refusal the record is left as it was.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// use railyard_core::token::TokenRecord;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    ///     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// let e = ledger.entry(0, 0).unwrap();
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// let mut rec = TokenRecord { bytes: 4096, ..Default::default() };
    /// c.record_into(&mut rec).unwrap();
    /// assert_eq!(ledger.release_record(&mut rec), Ok(ReleaseOutcome::Released));
    /// assert_eq!(rec.holds & TokenRecord::HOLDS_CREDIT, 0);
    /// assert_eq!(ledger.release_record(&mut rec), Err(ReleaseError::NotHeld));
    /// ```
    #[inline]
    pub fn release_record(&self, rec: &mut TokenRecord) -> Result<ReleaseOutcome, ReleaseError> {
        let c = CommittedCharge::from_record(rec).map_err(|_| ReleaseError::NotHeld)?;
        let outcome = self.release(c)?;
        rec.holds &= !TokenRecord::HOLDS_CREDIT;
        Ok(outcome)
    }

    /// Records how long a dispatch stayed credit-stalled (the caller times
    /// stalls with its own clock; see [`BackpressureInfo`]).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// ledger.record_stall(e, 250_000); // a dispatch waited 250 µs for credit
    /// assert_eq!(ctl.metrics(&ledger).stall_ns, 250_000);
    /// ```
    #[inline]
    pub fn record_stall(&self, entry: EntryId, stalled_ns: u64) {
        if let Ok(e) = self.get(entry.0) {
            e.stall_ns.fetch_add(stalled_ns, Ordering::Relaxed);
        }
    }

    /// A consistent snapshot of `entry`'s available credit (one atomic load:
    /// never a torn vector) and whether it is open.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let r = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap();
    /// assert_eq!(ledger.available(e), Ok((Charge([4096, 1, 0, 1]), true)));
    /// r.rollback();
    /// assert_eq!(ledger.available(e).unwrap().0, Charge([8192, 2, 0, 2]));
    /// ```
    pub fn available(&self, entry: EntryId) -> Result<(Charge, bool), KeyError> {
        let w = self.get(entry.0)?.avail.load(Ordering::Acquire);
        Ok((Charge(self.layout.unpack(w)), w & OPEN != 0))
    }

    /// The resources this ledger models.
    ///
    /// ```
    /// use railyard_core::credit::{LedgerConfig, Resource, SenderLedger};
    /// let cfg = LedgerConfig { window: [1 << 30, 1023, 0, 0], ..LedgerConfig::default() };
    /// let (ledger, _ctl) = SenderLedger::new(cfg).unwrap();
    /// let r = ledger.resources(); // a window of 0: not modeled
    /// assert!(r.contains(Resource::RequestSlots) && !r.contains(Resource::StagingSlots));
    /// ```
    pub fn resources(&self) -> ResourceSet {
        self.layout.present
    }

    fn rollback(&self, entry: u32, generation: u16, delta: u64) {
        let Ok(e) = self.get(entry) else { return };
        match self.add_tagged(&e.avail, generation, delta) {
            Ok(()) => {}
            Err(Cas::Fenced) => {
                e.fenced.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                e.refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Adds `delta` to `word` (one CAS loop) if the word still carries
    /// `generation`'s tag and no field would overflow.
    #[inline(always)]
    fn add_tagged(&self, word: &AtomicU64, generation: u16, delta: u64) -> Result<(), Cas> {
        let mut cur = word.load(Ordering::Acquire);
        loop {
            if cur & TAG_MASK != tag(generation) {
                return Err(Cas::Fenced);
            }
            if self.layout.overflows(cur, delta) {
                return Err(Cas::Overflow);
            }
            match word.compare_exchange_weak(cur, cur + delta, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(()),
                Err(a) => cur = a,
            }
        }
    }

    /// Takes `delta` from `word` (one CAS loop), all or nothing, if the
    /// word still carries `generation`'s tag and every field holds enough.
    #[inline(always)]
    fn sub_tagged(&self, word: &AtomicU64, generation: u16, delta: u64) -> Result<(), Cas> {
        let mut cur = word.load(Ordering::Acquire);
        loop {
            // BROKEN twin "credit_untagged_release": no epoch check at all.
            if cfg!(not(railyard_broken = "credit_untagged_release"))
                && cur & TAG_MASK != tag(generation)
            {
                return Err(Cas::Fenced);
            }
            // BROKEN twin "credit_double_release": no outstanding check, as
            // before the fix (a second release counted twice).
            if cfg!(not(railyard_broken = "credit_double_release"))
                && self.layout.any_short(cur, delta)
            {
                return Err(Cas::Short(self.layout.short(cur, delta)));
            }
            match word.compare_exchange_weak(
                cur,
                cur.wrapping_sub(delta),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(a) => cur = a,
            }
        }
    }
}

/// Why a tagged CAS did not apply.
#[derive(Clone, Copy, Debug)]
enum Cas {
    /// The word belongs to another generation (an epoch change).
    Fenced,
    /// Some fields hold less than the delta.
    Short(ResourceSet),
    /// Some field would overflow.
    Overflow,
}

/// `sub_tagged` never reports an overflow; count it as refused and treat it
/// as a refusal of nothing in particular, so no public path can panic.
#[cold]
fn unreachable_cas(e: &Entry) -> Result<ReleaseOutcome, ReleaseError> {
    e.refused.fetch_add(1, Ordering::Relaxed);
    Err(ReleaseError::NotOutstanding(ResourceSet::EMPTY))
}

impl Reservation<'_> {
    /// The entry reserved against.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let r = ledger.try_reserve(e, &Charge::direct_write(1)).unwrap();
    /// assert_eq!(r.entry(), e);
    /// ```
    pub fn entry(&self) -> EntryId {
        EntryId(self.entry)
    }

    /// The reserved charge.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let r = ledger.try_reserve(e, &Charge::direct_write(1)).unwrap();
    /// assert_eq!(r.charge(), Charge::direct_write(1));
    /// ```
    pub fn charge(&self) -> Charge {
        self.charge
    }

    /// Names the charge this reservation will commit in `rec` (`credit_key`,
    /// `HOLDS_CREDIT`), *before* the commit: the composed hot path claims
    /// the token with the record, then commits, so a refused claim only
    /// rolls the reservation back. The checks are those of
    /// [`CommittedCharge::record_into`]; on a refusal `rec` is untouched.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    /// use railyard_core::token::TokenRecord;
    /// let r = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap();
    /// let mut rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
    /// r.record_into(&mut rec).unwrap(); // named before the token is claimed
    /// let _committed = r.commit().unwrap(); // the record now holds it
    /// assert_eq!(ledger.release_record(&mut rec), Ok(ReleaseOutcome::Released));
    /// ```
    #[inline]
    pub fn record_into(&self, rec: &mut TokenRecord) -> Result<(), RecordError> {
        CommittedCharge::new_unchecked(self.entry, self.generation, self.charge)
            .record_into(rec)
            .map_err(|(e, _)| e)
    }

    /// Commits on handoff to the transport. After this there is no rollback:
    /// only a completion's [`SenderLedger::release`] (exactly once).
    ///
    /// Two CASes: the charge joins the entry's *outstanding* level first
    /// (what a release may take), then the *committed* flow the next usage
    /// report drains (see the module docs for why this order).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let r = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap();
    /// let c = r.commit().unwrap(); // handed to the transport: no rollback any more
    /// ctl.bind(&ledger, 0, SessionId::new(2, 1), 1).unwrap(); // new receiver session
    /// let late = ledger.try_reserve(e, &Charge::direct_write(1));
    /// assert!(late.is_err()); // fenced: closed until the new epoch's first update
    /// assert_eq!(ledger.release(c), Ok(ReleaseOutcome::Fenced));
    /// ```
    #[inline]
    pub fn commit(mut self) -> Result<CommittedCharge, CommitError> {
        let l = self.ledger;
        let e = &l.entries[self.entry as usize];
        // BROKEN twin "credit_commit_order": the flow before the level lets
        // a usage report count the commit as already released.
        let (first, second) = if cfg!(railyard_broken = "credit_commit_order") {
            (&e.committed, &e.outstanding)
        } else {
            (&e.outstanding, &e.committed)
        };
        if let Err(why) = l.add_tagged(first, self.generation, self.delta) {
            return Err(self.refuse(e, why));
        }
        if let Err(why) = l.add_tagged(second, self.generation, self.delta) {
            // Fenced between the two steps: the old epoch's level was
            // swapped away with this charge in it; the credit is void. An
            // overflow cannot happen while the window bound holds; undo the
            // first step so a refused commit changes nothing.
            let why = match why {
                Cas::Fenced => Cas::Fenced,
                _ => match l.sub_tagged(first, self.generation, self.delta) {
                    Ok(()) => why,
                    Err(_) => Cas::Fenced,
                },
            };
            return Err(self.refuse(e, why));
        }
        self.armed = false;
        Ok(CommittedCharge {
            entry: self.entry,
            generation: self.generation,
            charge: self.charge,
        })
    }

    /// A refused commit step: an epoch change voids the reservation (its
    /// credit belonged to the old epoch); anything else leaves it armed, so
    /// dropping it rolls it back.
    #[cold]
    fn refuse(&mut self, e: &Entry, why: Cas) -> CommitError {
        match why {
            Cas::Fenced => {
                self.armed = false;
                e.fenced.fetch_add(1, Ordering::Relaxed);
                CommitError::EpochChanged
            }
            Cas::Short(_) | Cas::Overflow => {
                e.refused.fetch_add(1, Ordering::Relaxed);
                CommitError::Overflow
            }
        }
    }

    /// Gives the reservation back (before handoff). Same as dropping it.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let r = ledger.try_reserve(e, &Charge::direct_write(8192)).unwrap();
    /// assert!(ledger.try_reserve(e, &Charge::direct_write(1)).is_err()); // all bytes taken
    /// r.rollback(); // the post was refused downstream
    /// assert!(ledger.try_reserve(e, &Charge::direct_write(1)).is_ok());
    /// ```
    pub fn rollback(self) {}
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.ledger
                .rollback(self.entry, self.generation, self.delta);
        }
    }
}

// ---------------------------------------------------------------------------
// Control half
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Unbound,
    /// Bound to a new session/epoch; closed until its first update.
    Fencing,
    Active,
    Stale,
    Quarantined,
}

#[derive(Clone, Copy, Debug, Default)]
struct PeerCtl {
    /// The bound session: with `epoch`, the high-water mark `bind` never
    /// goes below (so every earlier incarnation stays fenced in O(1)).
    session: Option<SessionId>,
    epoch: u64,
    phase: Phase,
    generation: u16,
    last_update_ns: u64,
    ttl_ns: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct EntryCtl {
    /// Cumulative grant totals received in this epoch.
    grant: [u64; RESOURCES],
    /// Grant made available in the packed word (`<= grant`; excess banked).
    applied: [u64; RESOURCES],
    /// Drained committed + returned totals.
    cd: [u64; RESOURCES],
    /// Released + returned totals, derived as `cd - outstanding` (monotonic).
    rd: [u64; RESOURCES],
    /// Returned (unused) totals.
    returned: [u64; RESOURCES],
    /// Last applied update sequence; 0 = none (sequences start at 1).
    last_seq: u64,
    /// Last usage report sequence; the first report is 1.
    usage_seq: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    applied: u64,
    duplicate: u64,
    stale: u64,
    gaps: u64,
    epoch_resets: u64,
    fenced_inflight: [u64; RESOURCES],
    violations: u64,
    protocol_errors: u64,
    legacy_fallbacks: u64,
    returned: [u64; RESOURCES],
}

/// How an update was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Applied; the sequence followed the last one.
    Applied,
    /// Applied after a sequence gap of `missed` updates (counted).
    AppliedAfterGap {
        /// Sequences skipped.
        missed: u64,
    },
    /// Duplicate or older sequence: a no-op (counted).
    Duplicate,
}

/// Why an update (or control operation) was refused. Refusals never change
/// available credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateError {
    /// Bad peer, class or resource.
    Key(KeyError),
    /// The peer has no bound session (not negotiated).
    NotBound,
    /// Update for another receiver session than the bound one, or a
    /// `bind` to a session that orders before the bound one (an earlier
    /// incarnation): stale, counted.
    SessionMismatch,
    /// Update for another epoch: stale, counted. A newer epoch needs
    /// [`SenderControl::bind`] (fencing) first.
    EpochMismatch {
        /// The bound epoch.
        ours: u64,
        /// The update's epoch.
        theirs: u64,
    },
    /// The peer is quarantined after a violation.
    Quarantined,
    /// Rejected: a cumulative total decreased (RFC 2849 "Rules", 5). The
    /// update changed nothing and is counted as a protocol error
    /// ([`CreditMetrics::protocol_errors`]); the peer is not quarantined
    /// (quarantine is rule 4's answer to a credit violation) and its next
    /// honest update applies.
    Decreasing(Resource),
    /// Violation: checked arithmetic overflowed. The peer is quarantined.
    Overflow(Resource),
    /// The handle belongs to another ledger.
    ForeignLedger,
    /// A reserved zero session, epoch or sequence (malformed; refused
    /// before any state is touched).
    Zero(ZeroField),
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::Key(k) => write!(f, "credit update rejected: {k}"),
            UpdateError::NotBound => f.write_str("peer has no negotiated credit session"),
            UpdateError::SessionMismatch => {
                f.write_str("credit update for another receiver session")
            }
            UpdateError::EpochMismatch { ours, theirs } => {
                write!(f, "credit update for epoch {theirs}, bound epoch is {ours}")
            }
            UpdateError::Quarantined => f.write_str("peer is quarantined after a credit violation"),
            UpdateError::Decreasing(r) => write!(f, "protocol violation: cumulative {r} decreased"),
            UpdateError::Overflow(r) => write!(f, "protocol violation: {r} total overflows"),
            UpdateError::ForeignLedger => f.write_str("control handle used with another ledger"),
            UpdateError::Zero(z) => write!(f, "credit update rejected: {z}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for UpdateError {}

impl UpdateError {
    /// Whether this is a protocol violation (the peer was quarantined).
    ///
    /// ```
    /// use railyard_core::credit::{Resource, UpdateError};
    /// assert!(UpdateError::Overflow(Resource::DataBytes).is_violation()); // the peer is quarantined
    /// assert!(!UpdateError::Decreasing(Resource::DataBytes).is_violation()); // rejected, counted
    /// assert!(!UpdateError::SessionMismatch.is_violation()); // stale: ignored, counted
    /// ```
    pub const fn is_violation(&self) -> bool {
        matches!(self, UpdateError::Overflow(_))
    }

    /// Whether the update broke the protocol: a violation, or a decreasing
    /// total (rejected and counted, the peer not quarantined). An honest
    /// receiver never causes one; a stale or duplicate update is not one.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, UpdateError};
    /// assert!(UpdateError::Decreasing(Resource::DataBytes).is_protocol_error());
    /// assert!(UpdateError::Overflow(Resource::DataBytes).is_protocol_error());
    /// assert!(!UpdateError::SessionMismatch.is_protocol_error());
    /// ```
    pub const fn is_protocol_error(&self) -> bool {
        matches!(self, UpdateError::Decreasing(_) | UpdateError::Overflow(_))
    }
}

/// Bounded credit metrics: aggregated per resource, never labeled with
/// request or tenant ids. Per-entry views come from
/// [`SenderControl::entry_metrics`] (bounded by the table size).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditMetrics {
    /// Cumulative grant totals in current epochs.
    pub granted: [u64; RESOURCES],
    /// Committed (consumed) totals in current epochs.
    pub consumed: [u64; RESOURCES],
    /// Currently available.
    pub available: [u64; RESOURCES],
    /// Returned unused credit (all epochs).
    pub returned: [u64; RESOURCES],
    /// Reservations refused for lack of credit.
    pub stalls: u64,
    /// Total stall time reported by callers.
    pub stall_ns: u64,
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
    /// In-flight (committed, unreleased) amounts fenced by epoch resets.
    pub fenced_inflight: [u64; RESOURCES],
    /// Commits, rollbacks and completions from an old epoch.
    pub fenced_ops: u64,
    /// Counter updates refused to avoid overflow (should stay 0).
    pub refused_ops: u64,
    /// Protocol violations (peer quarantined).
    pub violations: u64,
    /// Updates rejected for a decreasing cumulative total (RFC 2849 rule
    /// 5): each changed nothing; the peer was not quarantined.
    pub protocol_errors: u64,
    /// Dispatches that fell back to legacy (reported by the caller).
    pub legacy_fallbacks: u64,
}

/// A per-entry view: granted / consumed / available by resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryMetrics {
    /// Cumulative grant totals.
    pub granted: [u64; RESOURCES],
    /// Committed totals.
    pub consumed: [u64; RESOURCES],
    /// Released by completions.
    pub released: [u64; RESOURCES],
    /// Available now.
    pub available: [u64; RESOURCES],
    /// Granted beyond the tracking window, not yet made available.
    pub banked: [u64; RESOURCES],
}

/// The control half of the sender ledger: one owner, `&mut self`.
#[derive(Debug)]
pub struct SenderControl {
    ledger_addr: usize,
    layout: Layout,
    max_classes: u32,
    peers: Box<[PeerCtl]>,
    entries: Box<[EntryCtl]>,
    counters: Counters,
}

impl SenderControl {
    fn check(&self, l: &SenderLedger) -> Result<(), UpdateError> {
        if l.entries.as_ptr() as usize == self.ledger_addr {
            Ok(())
        } else {
            Err(UpdateError::ForeignLedger)
        }
    }

    fn peer_mut(&mut self, peer: u32) -> Result<&mut PeerCtl, UpdateError> {
        self.peers
            .get_mut(peer as usize)
            .ok_or(UpdateError::Key(KeyError::UnknownPeer(peer)))
    }

    fn class_range(&self, peer: u32) -> core::ops::Range<usize> {
        let s = (peer * self.max_classes) as usize;
        s..s + self.max_classes as usize
    }

    /// Binds `peer` to a receiver session and epoch (after negotiation, or
    /// on a new session/epoch). If it was bound to another one, the old
    /// ledger state is invalidated: every entry gets a new generation, so
    /// old reservations, commits and completions can no longer touch it,
    /// and the old epoch's in-flight work is counted as fenced. The entries
    /// stay closed (Fencing) until the first update of the new epoch.
    ///
    /// **Binding only moves forward** in `(session, epoch)` order
    /// ([`SessionId`] is ordered: a receiver's next incarnation has a larger
    /// id). Re-binding the bound `(session, epoch)` is a no-op; anything
    /// that orders before it — an older epoch of the bound session
    /// ([`UpdateError::EpochMismatch`]) or **any** earlier session, however
    /// many restarts ago ([`UpdateError::SessionMismatch`]) — is refused and
    /// counted as stale, so a replayed negotiation can never re-admit fenced
    /// credit. The memory this needs is the bound `(session, epoch)` pair
    /// itself: 24 bytes per peer, whatever the number of restarts. Session
    /// 0 and epoch 0 are reserved ([`UpdateError::Zero`]).
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let incarnations = [SessionId::new(1, 9), SessionId::new(2, 4), SessionId::new(3, 1)];
    /// for s in incarnations {
    ///     ctl.bind(&ledger, 0, s, 1).unwrap();
    /// }
    /// // A negotiation replayed from the first incarnation is refused.
    /// assert_eq!(ctl.bind(&ledger, 0, incarnations[0], 5), Err(UpdateError::SessionMismatch));
    /// assert_eq!(ctl.binding(0), Some((incarnations[2], 1)));
    /// ```
    pub fn bind(
        &mut self,
        l: &SenderLedger,
        peer: u32,
        session: SessionId,
        epoch: u64,
    ) -> Result<(), UpdateError> {
        self.check(l)?;
        let p = *self.peer_mut(peer)?;
        ZeroField::check(session.0, epoch, 1).map_err(UpdateError::Zero)?;
        if let Some(cur) = p.session {
            match (session, epoch).cmp(&(cur, p.epoch)) {
                core::cmp::Ordering::Equal => return Ok(()),
                core::cmp::Ordering::Less => {
                    // Never go back: an earlier epoch or incarnation would
                    // re-admit fenced credit.
                    self.counters.stale += 1;
                    return Err(if session == cur {
                        UpdateError::EpochMismatch {
                            ours: p.epoch,
                            theirs: epoch,
                        }
                    } else {
                        UpdateError::SessionMismatch
                    });
                }
                core::cmp::Ordering::Greater => self.counters.epoch_resets += 1,
            }
        }
        let generation = p.generation.wrapping_add(1);
        for i in self.class_range(peer) {
            let e = &l.entries[i];
            e.generation.store(generation as u32, Ordering::Release);
            let t = tag(generation);
            e.committed.swap(t, Ordering::AcqRel);
            let o = e.outstanding.swap(t, Ordering::AcqRel);
            e.avail.swap(t, Ordering::AcqRel);
            // Committed and not released when fenced (may include a commit
            // racing this fence, which is then refused with EpochChanged).
            for k in 0..RESOURCES {
                self.counters.fenced_inflight[k] =
                    self.counters.fenced_inflight[k].saturating_add(self.layout.get(o, k));
            }
            self.entries[i] = EntryCtl::default();
        }
        self.peers[peer as usize] = PeerCtl {
            session: Some(session),
            epoch,
            phase: Phase::Fencing,
            generation,
            last_update_ns: 0,
            ttl_ns: 0,
        };
        Ok(())
    }

    /// Applies a receiver update for `peer` (identity from the endpoint
    /// context, never from the payload). Rules (RFC 2849):
    /// session and epoch must match; an older or equal sequence is a no-op;
    /// a gap is applied and counted; every cumulative total must be
    /// non-decreasing (else: the update is rejected and counted as a
    /// protocol error, nothing changes, the peer stays as it was); arithmetic
    /// is checked (an overflow is a violation: the peer is quarantined). A newer update reopens a stale peer. Session, epoch and
    /// sequence 0 are reserved and refused ([`UpdateError::Zero`]).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// // The same update again is a duplicate: a no-op.
    /// assert_eq!(ctl.apply_update(&ledger, 0, &u, 1), Ok(UpdateOutcome::Duplicate));
    /// // Grants are cumulative: sequence 3 after 1 is applied, the gap counted.
    /// let more = CreditUpdate { sequence: 3, grants: Totals::all([16384, 4, 0, 4]), ..u };
    /// assert_eq!(ctl.apply_update(&ledger, 0, &more, 2), Ok(UpdateOutcome::AppliedAfterGap { missed: 1 }));
    /// assert_eq!(ledger.available(e).unwrap().0.get(Resource::DataBytes), 16384);
    /// // A total that goes down is rejected (RFC 2849 rule 5): nothing
    /// // changes, a protocol error is counted, the peer stays active.
    /// let down = CreditUpdate { sequence: 4, grants: Totals::all([1, 4, 0, 4]), ..u };
    /// assert_eq!(ctl.apply_update(&ledger, 0, &down, 3), Err(UpdateError::Decreasing(Resource::DataBytes)));
    /// assert!(ctl.is_active(0));
    /// assert_eq!(ledger.available(e).unwrap().0.get(Resource::DataBytes), 16384);
    /// assert_eq!((ctl.metrics(&ledger).protocol_errors, ctl.metrics(&ledger).violations), (1, 0));
    /// // Its sequence was not consumed: the honest update 4 still applies.
    /// let next = CreditUpdate { sequence: 4, grants: Totals::all([20480, 4, 0, 4]), ..u };
    /// assert_eq!(ctl.apply_update(&ledger, 0, &next, 4), Ok(UpdateOutcome::Applied));
    /// ```
    pub fn apply_update(
        &mut self,
        l: &SenderLedger,
        peer: u32,
        u: &CreditUpdate,
        now_ns: u64,
    ) -> Result<UpdateOutcome, UpdateError> {
        self.check(l)?;
        ZeroField::check(u.receiver_session.0, u.epoch, u.sequence).map_err(UpdateError::Zero)?;
        let entry = l.entry(peer, u.qos_class).map_err(UpdateError::Key)?;
        for r in u.grants.present.iter() {
            if !self.layout.present.contains(r) {
                return Err(UpdateError::Key(KeyError::UnknownResource(r)));
            }
        }
        let p = *self.peer_mut(peer)?;
        match p.phase {
            Phase::Unbound => return Err(UpdateError::NotBound),
            Phase::Quarantined => return Err(UpdateError::Quarantined),
            _ => {}
        }
        if p.session != Some(u.receiver_session) {
            self.counters.stale += 1;
            return Err(UpdateError::SessionMismatch);
        }
        if p.epoch != u.epoch {
            self.counters.stale += 1;
            return Err(UpdateError::EpochMismatch {
                ours: p.epoch,
                theirs: u.epoch,
            });
        }
        let idx = entry.0 as usize;
        let ec = self.entries[idx];
        // `last_seq` 0 = nothing applied yet (sequences start at 1).
        let last = ec.last_seq;
        let outcome = if u.sequence <= last {
            self.counters.duplicate += 1;
            return Ok(UpdateOutcome::Duplicate);
        } else if u.sequence - last > 1 {
            UpdateOutcome::AppliedAfterGap {
                missed: u.sequence - last - 1,
            }
        } else {
            UpdateOutcome::Applied
        };
        for r in u.grants.present.iter() {
            if u.grants.values[r.index()] < ec.grant[r.index()] {
                // Rule 5: reject; nothing above changed any state.
                self.counters.protocol_errors = self.counters.protocol_errors.saturating_add(1);
                return Err(UpdateError::Decreasing(r));
            }
        }
        if let UpdateOutcome::AppliedAfterGap { .. } = outcome {
            self.counters.gaps += 1;
        }
        let ec = &mut self.entries[idx];
        ec.last_seq = u.sequence;
        for r in u.grants.present.iter() {
            ec.grant[r.index()] = u.grants.values[r.index()];
        }
        self.counters.applied += 1;
        if let Err(r) = self.flush(l, idx) {
            self.violation(l, peer);
            return Err(UpdateError::Overflow(r));
        }
        let pm = &mut self.peers[peer as usize];
        pm.last_update_ns = now_ns;
        pm.ttl_ns = u.freshness_ttl_ms as u64 * crate::time::NS_PER_MS;
        if pm.phase != Phase::Active {
            pm.phase = Phase::Active;
            self.set_open(l, peer, true);
        }
        Ok(outcome)
    }

    /// Drains pending commits into the cumulative totals, derives the
    /// released totals, and makes banked grant available as far as the
    /// window allows.
    fn flush(&mut self, l: &SenderLedger, idx: usize) -> Result<(), Resource> {
        let e = &l.entries[idx];
        let ec = &mut self.entries[idx];
        let t = e.avail.load(Ordering::Acquire) & TAG_MASK;
        // The flow first, then the level (commit adds to them in the other
        // order): a commit caught half-way is outstanding but not yet
        // consumed, so `consumed - outstanding` never over-states released.
        let c = e.committed.swap(t, Ordering::AcqRel);
        let o = e.outstanding.load(Ordering::Acquire);
        let mut overflow = None;
        let mut target = [0u64; RESOURCES];
        for res in Resource::ALL {
            let k = res.index();
            // Saturate (never lose the drained amounts half-way); a
            // saturated total is reported as a violation below.
            let (cd, o2) = ec.cd[k].overflowing_add(self.layout.get(c, k));
            ec.cd[k] = if o2 { u64::MAX } else { cd };
            if o2 && overflow.is_none() {
                overflow = Some(res);
            }
            // Monotonic: a half-way commit may make this sample smaller.
            ec.rd[k] = ec.rd[k].max(ec.cd[k].saturating_sub(self.layout.get(o, k)));
            target[k] = ec.grant[k].min(ec.rd[k].saturating_add(self.layout.window[k]));
        }
        // Make banked grant available, never beyond a field's window: with
        // honest accounting `target - applied` always fits; the clamp keeps
        // any accounting error banked rather than spilling into a
        // neighbouring field.
        let mut cur = e.avail.load(Ordering::Acquire);
        loop {
            let mut delta = 0u64;
            let mut applied = ec.applied;
            for k in 0..RESOURCES {
                if self.layout.mask[k] == 0 || target[k] <= ec.applied[k] {
                    continue;
                }
                let room = self.layout.window[k].saturating_sub(self.layout.get(cur, k));
                let add = (target[k] - ec.applied[k]).min(room);
                delta |= add << self.layout.shift[k];
                applied[k] += add;
            }
            if delta == 0 {
                break;
            }
            match e.avail.compare_exchange_weak(
                cur,
                cur + delta,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    ec.applied = applied;
                    break;
                }
                Err(a) => cur = a,
            }
        }
        match overflow {
            Some(res) => Err(res),
            None => Ok(()),
        }
    }

    fn set_open(&mut self, l: &SenderLedger, peer: u32, open: bool) {
        for i in self.class_range(peer) {
            let e = &l.entries[i];
            if open {
                e.avail.fetch_or(OPEN, Ordering::AcqRel);
            } else {
                e.avail.fetch_and(!OPEN, Ordering::AcqRel);
            }
        }
    }

    fn violation(&mut self, l: &SenderLedger, peer: u32) {
        self.counters.violations += 1;
        self.peers[peer as usize].phase = Phase::Quarantined;
        self.set_open(l, peer, false);
    }

    /// Quarantines `peer` (a credit violation seen elsewhere): no new
    /// dispatch until it is re-bound to a new session/epoch.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// ctl.quarantine(&ledger, 0).unwrap();
    /// assert!(ledger.try_reserve(e, &Charge::direct_write(1)).is_err());
    /// // Only a new session or epoch re-admits it.
    /// let u2 = CreditUpdate { sequence: 2, ..u };
    /// assert_eq!(ctl.apply_update(&ledger, 0, &u2, 1), Err(UpdateError::Quarantined));
    /// ```
    pub fn quarantine(&mut self, l: &SenderLedger, peer: u32) -> Result<(), UpdateError> {
        self.check(l)?;
        self.peer_mut(peer)?;
        self.violation(l, peer);
        Ok(())
    }

    /// Marks `peer` stale (disconnect, freshness expiry): no new
    /// credit-gated dispatch; work already handed off continues. A newer
    /// update reopens it.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// ctl.mark_stale(&ledger, 0).unwrap(); // the control connection dropped
    /// assert!(ledger.try_reserve(e, &Charge::direct_write(1)).is_err());
    /// let u2 = CreditUpdate { sequence: 2, ..u };
    /// ctl.apply_update(&ledger, 0, &u2, 1).unwrap(); // a newer update reopens it
    /// assert!(ctl.is_active(0));
    /// ```
    pub fn mark_stale(&mut self, l: &SenderLedger, peer: u32) -> Result<(), UpdateError> {
        self.check(l)?;
        let p = self.peer_mut(peer)?;
        if p.phase == Phase::Active {
            p.phase = Phase::Stale;
            self.set_open(l, peer, false);
        }
        Ok(())
    }

    /// Marks stale every active peer whose last update is older than its
    /// freshness TTL at `now_ns`. Returns how many became stale.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1, freshness_ttl_ms: 10,
    ///     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// assert_eq!(ctl.expire(&ledger, 5_000_000), Ok(0)); // 5 ms: fresh
    /// assert_eq!(ctl.expire(&ledger, 11_000_000), Ok(1)); // 11 ms: stale
    /// assert!(!ctl.is_active(0));
    /// ```
    pub fn expire(&mut self, l: &SenderLedger, now_ns: u64) -> Result<u32, UpdateError> {
        self.check(l)?;
        let mut n = 0;
        for peer in 0..self.peers.len() as u32 {
            let p = self.peers[peer as usize];
            if p.phase == Phase::Active
                && p.ttl_ns != 0
                && crate::time::expired(now_ns, p.last_update_ns, p.ttl_ns)
            {
                self.mark_stale(l, peer)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Builds the usage report for `(peer, class)`: cumulative consumed,
    /// released and returned totals of the bound epoch, plus the caller's
    /// pending demand. Exact when no commit is in flight; a commit racing
    /// the report is counted in the next one (it can only make `consumed`
    /// and `released` lag, never over-state them). Its sequence starts at 1
    /// per epoch.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// ledger.release(c).unwrap();
    /// let report = ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
    /// assert_eq!(report.sequence, 1);
    /// assert_eq!(report.consumed.get(Resource::DataBytes), Some(4096));
    /// assert_eq!(report.released.get(Resource::DataBytes), Some(4096));
    /// ```
    pub fn usage(
        &mut self,
        l: &SenderLedger,
        peer: u32,
        class: u32,
        pending_demand: Charge,
    ) -> Result<CreditUsage, UpdateError> {
        self.check(l)?;
        let entry = l.entry(peer, class).map_err(UpdateError::Key)?;
        let p = self.peers[peer as usize];
        let session = p.session.ok_or(UpdateError::NotBound)?;
        let idx = entry.0 as usize;
        if let Err(r) = self.flush(l, idx) {
            self.violation(l, peer);
            return Err(UpdateError::Overflow(r));
        }
        let ec = &mut self.entries[idx];
        ec.usage_seq += 1;
        let mut consumed = Totals::default();
        let mut released = Totals::default();
        let mut returned = Totals::default();
        for r in self.layout.present.iter() {
            let k = r.index();
            consumed = consumed.with(r, ec.cd[k].saturating_sub(ec.returned[k]));
            released = released.with(r, ec.rd[k].saturating_sub(ec.returned[k]));
            returned = returned.with(r, ec.returned[k]);
        }
        Ok(CreditUsage {
            receiver_session: session,
            epoch: p.epoch,
            sequence: ec.usage_seq,
            qos_class: class,
            consumed,
            released,
            returned,
            pending_demand: Totals::from_charge(&pending_demand),
        })
    }

    /// Returns up to `max` of `(peer, class)`'s *unused* credit to the
    /// receiver (reported in the next usage report). Takes it atomically
    /// from the available word, so it can never be both returned and used.
    /// Returns what was actually returned.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let back = ctl.return_unused(&ledger, 0, 0, Charge([4096, 1, 0, 0])).unwrap();
    /// assert_eq!(back, Charge([4096, 1, 0, 0]));
    /// assert_eq!(ledger.available(e).unwrap().0, Charge([4096, 1, 0, 2])); // gone, never used
    /// ```
    pub fn return_unused(
        &mut self,
        l: &SenderLedger,
        peer: u32,
        class: u32,
        max: Charge,
    ) -> Result<Charge, UpdateError> {
        self.check(l)?;
        let entry = l.entry(peer, class).map_err(UpdateError::Key)?;
        let idx = entry.0 as usize;
        let e = &l.entries[idx];
        let mut cur = e.avail.load(Ordering::Acquire);
        let taken = loop {
            let mut take = [0u64; RESOURCES];
            let mut delta = 0u64;
            for r in self.layout.present.iter() {
                let k = r.index();
                take[k] = self.layout.get(cur, k).min(max.0[k]);
                delta |= take[k] << self.layout.shift[k];
            }
            match e
                .avail
                .compare_exchange(cur, cur - delta, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break take,
                Err(a) => cur = a,
            }
        };
        let ec = &mut self.entries[idx];
        for k in 0..RESOURCES {
            ec.returned[k] += taken[k];
            ec.cd[k] += taken[k];
            ec.rd[k] += taken[k];
            self.counters.returned[k] += taken[k];
        }
        Ok(Charge(taken))
    }

    /// Counts a dispatch that fell back to legacy (optional mode).
    ///
    /// ```
    /// use railyard_core::credit::{LedgerConfig, SenderLedger};
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// ctl.note_legacy_fallback(); // optional mode, a peer without credit
    /// assert_eq!(ctl.metrics(&ledger).legacy_fallbacks, 1);
    /// ```
    pub fn note_legacy_fallback(&mut self) {
        self.counters.legacy_fallbacks += 1;
    }

    /// Whether `peer`'s entries are open for dispatch.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// assert!(ctl.is_active(0) && !ctl.is_active(1) && !ctl.is_active(9_999));
    /// ```
    pub fn is_active(&self, peer: u32) -> bool {
        self.peers
            .get(peer as usize)
            .is_some_and(|p| p.phase == Phase::Active)
    }

    /// Resolves a full [`CreditKey`] to its entry: the peer index and class
    /// must be in range and `receiver_session` must be the session the peer
    /// is bound to (an old incarnation's key resolves to nothing).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let key = CreditKey { receiver_session: s, sender_peer: 0, qos_class: 0 };
    /// assert_eq!(ctl.entry_for(&ledger, &key), Ok(e));
    /// let old = CreditKey { receiver_session: SessionId::new(0, 9), ..key };
    /// assert_eq!(ctl.entry_for(&ledger, &old), Err(UpdateError::SessionMismatch));
    /// ```
    pub fn entry_for(&self, l: &SenderLedger, key: &CreditKey) -> Result<EntryId, UpdateError> {
        self.check(l)?;
        let e = l
            .entry(key.sender_peer, key.qos_class)
            .map_err(UpdateError::Key)?;
        match self.peers[key.sender_peer as usize].session {
            None => Err(UpdateError::NotBound),
            Some(s) if s != key.receiver_session => Err(UpdateError::SessionMismatch),
            Some(_) => Ok(e),
        }
    }

    /// The bound `(session, epoch)` of `peer`.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// assert_eq!(ctl.binding(0), Some((s, 1)));
    /// assert_eq!(ctl.binding(1), None);
    /// ```
    pub fn binding(&self, peer: u32) -> Option<(SessionId, u64)> {
        let p = self.peers.get(peer as usize)?;
        p.session.map(|s| (s, p.epoch))
    }

    /// Per-entry metrics (exact for drained amounts; pending commits and
    /// releases since the last drain are included from the atomic words).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// let m = ctl.entry_metrics(&ledger, 0, 0).unwrap();
    /// assert_eq!((m.granted[0], m.consumed[0], m.available[0]), (8192, 4096, 4096));
    /// ledger.release(c).unwrap();
    /// assert_eq!(ctl.entry_metrics(&ledger, 0, 0).unwrap().released[0], 4096);
    /// ```
    pub fn entry_metrics(
        &self,
        l: &SenderLedger,
        peer: u32,
        class: u32,
    ) -> Result<EntryMetrics, UpdateError> {
        self.check(l)?;
        let idx = l.entry(peer, class).map_err(UpdateError::Key)?.0 as usize;
        let e = &l.entries[idx];
        let ec = &self.entries[idx];
        let a = e.avail.load(Ordering::Acquire);
        let c = e.committed.load(Ordering::Acquire);
        let o = e.outstanding.load(Ordering::Acquire);
        let mut m = EntryMetrics::default();
        for k in 0..RESOURCES {
            m.granted[k] = ec.grant[k];
            m.consumed[k] = ec.cd[k]
                .saturating_sub(ec.returned[k])
                .saturating_add(self.layout.get(c, k));
            m.released[k] = m.consumed[k].saturating_sub(self.layout.get(o, k));
            m.available[k] = self.layout.get(a, k);
            m.banked[k] = ec.grant[k] - ec.applied[k];
        }
        Ok(m)
    }

    /// Aggregated bounded metrics.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// # let s = SessionId::new(1, 7);
    /// # ctl.bind(&ledger, 0, s, 1).unwrap();
    /// # let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    /// #     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// # ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// # let e = ledger.entry(0, 0).unwrap();
    ///
    /// let m = ctl.metrics(&ledger);
    /// assert_eq!((m.updates_applied, m.violations, m.granted[0]), (1, 0, 8192));
    /// ```
    pub fn metrics(&self, l: &SenderLedger) -> CreditMetrics {
        let c = &self.counters;
        let mut m = CreditMetrics {
            returned: c.returned,
            updates_applied: c.applied,
            duplicate_updates: c.duplicate,
            stale_updates: c.stale,
            sequence_gaps: c.gaps,
            epoch_resets: c.epoch_resets,
            fenced_inflight: c.fenced_inflight,
            violations: c.violations,
            protocol_errors: c.protocol_errors,
            legacy_fallbacks: c.legacy_fallbacks,
            ..Default::default()
        };
        if self.check(l).is_err() {
            return m;
        }
        for (idx, e) in l.entries.iter().enumerate() {
            let peer = idx as u32 / self.max_classes;
            let class = idx as u32 % self.max_classes;
            if let Ok(em) = self.entry_metrics(l, peer, class) {
                for k in 0..RESOURCES {
                    m.granted[k] = m.granted[k].saturating_add(em.granted[k]);
                    m.consumed[k] = m.consumed[k].saturating_add(em.consumed[k]);
                    m.available[k] = m.available[k].saturating_add(em.available[k]);
                }
            }
            // Saturating: `record_stall` takes any caller-timed duration.
            m.stalls = m.stalls.saturating_add(e.stalls.load(Ordering::Relaxed));
            m.stall_ns = m
                .stall_ns
                .saturating_add(e.stall_ns.load(Ordering::Relaxed));
            m.fenced_ops = m
                .fenced_ops
                .saturating_add(e.fenced.load(Ordering::Relaxed));
            m.refused_ops = m
                .refused_ops
                .saturating_add(e.refused.load(Ordering::Relaxed));
        }
        m
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn windows() -> impl Strategy<Value = [u64; RESOURCES]> {
        prop_oneof![
            Just(LedgerConfig::default().window),
            Just([7, 3, 0, 0]),
            Just([1 << 20, 15, 7, 7]),
            Just([0, 1, 0, (1 << 40) - 1]),
        ]
    }

    proptest! {
        /// The branch-free SWAR checks agree with per-field arithmetic.
        #[test]
        fn swar_checks_match_per_field_arithmetic(w in windows(), a in any::<[u64; 4]>(), b in any::<[u64; 4]>()) {
            let l = Layout::new(w).unwrap();
            let clamp = |v: [u64; 4]| {
                let mut word = 0u64;
                let mut f = [0u64; 4];
                for i in 0..RESOURCES {
                    f[i] = if l.mask[i] == 0 { 0 } else { v[i] % (l.mask[i] + 1) };
                    word |= f[i] << l.shift[i];
                }
                (word, f)
            };
            let (wa, fa) = clamp(a);
            let (wb, fb) = clamp(b);
            let short = (0..RESOURCES).any(|i| fa[i] < fb[i]);
            let over = (0..RESOURCES).any(|i| l.mask[i] != 0 && fa[i] + fb[i] > l.mask[i]);
            prop_assert_eq!(l.any_short(wa | OPEN | tag(3), wb), short);
            prop_assert_eq!(l.short(wa, wb).is_empty(), !short);
            prop_assert_eq!(l.overflows(wa | tag(9), wb), over);
            if !short {
                prop_assert_eq!(l.unpack(wa - wb), core::array::from_fn::<u64, 4, _>(|i| fa[i] - fb[i]));
            }
        }

        /// The branch-free `pack` agrees with the per-field rules: the first
        /// zero-window resource charged is unknown, the first amount above
        /// its window is too large, nothing charged is empty, and a valid
        /// charge packs to fields that unpack to itself.
        #[test]
        fn pack_matches_per_field_rules(w in windows(), v in any::<[u64; 4]>(), small in any::<[u8; 4]>(), pick in any::<u8>()) {
            let l = Layout::new(w).unwrap();
            // Mix huge, small and zero amounts.
            let c = Charge(core::array::from_fn(|i| match (pick >> (2 * i)) & 3 {
                0 => 0,
                1 => u64::from(small[i]),
                2 => w[i],
                _ => v[i],
            }));
            let mut want = Err(KeyError::EmptyCharge);
            for r in Resource::ALL {
                let x = c.0[r.index()];
                if x == 0 {
                    continue;
                }
                if w[r.index()] == 0 {
                    want = Err(KeyError::UnknownResource(r));
                    break;
                }
                if x > w[r.index()] {
                    want = Err(KeyError::ChargeTooLarge(r));
                    break;
                }
                want = Ok(());
            }
            match (l.pack(&c), want) {
                (Ok(d), Ok(())) => prop_assert_eq!(l.unpack(d), c.0),
                (got, want) => prop_assert_eq!(got.map(|_| ()), want),
            }
        }
    }
}
