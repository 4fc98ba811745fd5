//! Receiver-advertised credits (RFC 2849): default-off, isolated, proven.
//!
//! A receiver reserves bounded capacity for each `(sender peer, QoS class)`
//! and advertises it as **absolute cumulative grant totals** within a session
//! epoch. A sender may hand work to the transport only after it has reserved
//! the work's full charge vector against those grants:
//!
//! ```text
//! available(resource) = grant_total(resource) - consumed_total(resource)
//! ```
//!
//! The layer is **off by default**. When it is off, nothing in this module
//! runs: the dispatch path holds an `Option<&SenderLedger>` that is `None`, or
//! asks [`state::CreditLink::gate`], which returns [`state::Gate::Bypass`]
//! from one enum match (measured in `benches/benches/credit.rs`, see below).
//! The RFC maintainers' concern was a data path that depends on a fragile
//! control path; hence every piece here is a clean type whose invariants are
//! tested deterministically, by property tests over a lossy fake channel, by
//! loom models and by fuzzing — and the sender-local admission (`cc`) stays
//! the primary mechanism.
//!
//! | piece | type | role |
//! |---|---|---|
//! | sender ledger | [`SenderLedger`] + [`SenderControl`] | lock-free all-or-nothing reserve; serial update application |
//! | receiver allocator | [`ReceiverAllocator`] | carves grants from global capacity; fencing before reuse |
//! | control budget | [`ControlBudget`] | bounded control messages that never use data credit |
//! | state machine | [`CreditLink`] | Disabled/Legacy/Negotiating/Active/Stale/Fencing/Failed |
//! | backpressure | [`BackpressureInfo`] | typed pressure source, peer, class, exhausted resources |
//! | metrics | [`CreditMetrics`] | bounded: per resource, never per request or tenant |
//! | wire | [`crate::wire::credit`] | versioned little-endian codec, heapless, checked before use |
//!
//! # Roles and concurrency
//!
//! The hot path ([`SenderLedger::try_reserve`], [`Reservation::commit`],
//! [`SenderLedger::release`] / [`SenderLedger::release_record`]) takes
//! `&SenderLedger` from any number of worker threads and is lock-free: each
//! entry's available credit for *all four resources* lives in **one packed
//! `AtomicU64`**, so a multi-resource reserve is a single compare-and-swap
//! (and so is a checked release against the packed *outstanding* word). See
//! [`ledger`] for the layout and what "never partially visible" means.
//!
//! The control path ([`SenderControl`]) is a separate, uniquely owned handle
//! (`&mut self`): updates are applied serially by one control thread, as the
//! RFC's concurrency rules require, without any lock.
//!
//! # Exactly once, fenced, never empty
//!
//! * **A committed charge is released exactly once.** [`CommittedCharge`]
//!   is not `Copy` and [`SenderLedger::release`] consumes it;
//!   [`SenderLedger::release_record`] clears the record's
//!   `TokenRecord::HOLDS_CREDIT` bit (a second call is
//!   [`ReleaseError::NotHeld`]); and whatever is rebuilt from parts can take
//!   at most what is committed and unreleased in its epoch
//!   ([`ReleaseError::NotOutstanding`]). A refused release changes nothing.
//! * **Every superseded receiver session stays fenced.** [`SessionId`]s are
//!   ordered (a receiver's next incarnation has a larger one) and
//!   [`SenderControl::bind`] only moves forward in `(session, epoch)`
//!   order, so a negotiation, grant or update replayed from *any* earlier
//!   incarnation never yields usable credit (RFC 2849 acceptance 4) — with
//!   O(1) memory per peer: the bound pair itself.
//! * **An empty charge is refused** ([`KeyError::EmptyCharge`]): a charge
//!   of nothing can never pass the gate without reserving anything.
//! * **Ending an epoch names it** on the receiver:
//!   [`ReceiverAllocator::close`] and [`ReceiverAllocator::fence_complete`]
//!   refuse a stale epoch, so a late close or drain confirmation never acts
//!   on a newer session.
//! * **Session, epoch and sequence 0 are reserved** ([`ZeroField`]): the
//!   first epoch is 1, the first sequence is 1, and the wire decoder, the
//!   ledger and the allocator all refuse zeros (`docs/wire.md`).
//!
//! # Cost
//!
//! | path | cost |
//! |---|---|
//! | one dispatch: `try_reserve` + `commit` + `release` of a direct-WRITE charge (three resources), one thread, refill every 1024 ops | 251 instructions |
//! | disabled: `CreditLink::gate()` → `Bypass`, no ledger, against no credit code at all | +0.2 ns (1.18 vs 0.99 ns) |
//!
//! Instructions: `cargo build --release -p railyard-benches --example
//! credit_icount`, then `valgrind --tool=callgrind` of
//! `target/release/examples/credit_icount N` at N = 0 and 10⁶, difference /
//! 10⁶. Time: `cargo bench -p railyard-benches --bench credit --
//! --warm-up-time 1 --measurement-time 3` (also the lock-free ledger
//! against a `Mutex` ledger with the same semantics, in the same run).
//!
//! A dispatch is four locked RMWs (reserve CAS, two commit CASes, release
//! CAS — most of the cycles in `perf`) against six for the mutex (three
//! lock/unlock pairs); entries are cache-line aligned, so different peers
//! share nothing, while the mutex serializes the whole ledger (the RFC's
//! "one ledger critical section"). Field checks are branch-free SWAR on
//! the packed word. The measured sessions (the exactly-once change, the
//! lock-free vs `Mutex` times and why the 2-thread ratio does not
//! reproduce on a shared host): `docs/benchmarks.md`.

// Loops over the four resources index several parallel arrays at once.
#[allow(clippy::needless_range_loop)]
#[cfg(feature = "alloc")]
pub mod allocator;
pub mod backpressure;
pub mod budget;
#[allow(clippy::needless_range_loop)]
#[cfg(feature = "alloc")]
pub mod ledger;
pub mod state;

#[cfg(feature = "alloc")]
pub use allocator::{
    AllocError, AllocatorConfig, AllocatorMetrics, ReceiverAllocator, ReturnPath, UsageOutcome,
};
pub use backpressure::{BackpressureInfo, PressureSource};
pub use budget::{BudgetError, ControlBudget, ControlKind, ControlPermit};
#[cfg(feature = "alloc")]
pub use ledger::{
    CommitError, CommittedCharge, ConfigError, CreditMetrics, EntryId, EntryMetrics, LedgerConfig,
    RecordError, ReleaseError, ReleaseOutcome, Reservation, ReserveError, SenderControl,
    SenderLedger, UpdateError, UpdateOutcome,
};
pub use state::{Capability, CreditLink, CreditMode, Gate, LinkEvent, LinkState, TransitionError};

use core::fmt;

/// Number of modeled receiver resources.
pub const RESOURCES: usize = 4;

/// A receiver resource that credit covers. The discriminants are the wire
/// codes (`u16`, RFC 2849 `CreditResource`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u16)]
pub enum Resource {
    /// Bytes that may safely be in flight to the receiver.
    DataBytes = 1,
    /// Logical request / completion slots.
    RequestSlots = 2,
    /// Remote staging chunks.
    StagingSlots = 3,
    /// Consumer readiness / commit capacity.
    ConsumerSlots = 4,
}

impl Resource {
    /// All resources, in index order.
    pub const ALL: [Resource; RESOURCES] = [
        Resource::DataBytes,
        Resource::RequestSlots,
        Resource::StagingSlots,
        Resource::ConsumerSlots,
    ];

    /// Dense index `0..RESOURCES`.
    ///
    /// ```
    /// use railyard_core::credit::Resource;
    /// assert_eq!(Resource::DataBytes.index(), 0);
    /// assert_eq!(Resource::ConsumerSlots.index(), 3);
    /// ```
    #[inline]
    pub const fn index(self) -> usize {
        self as usize - 1
    }

    /// The wire code.
    ///
    /// ```
    /// use railyard_core::credit::Resource;
    /// assert_eq!(Resource::StagingSlots.code(), 3); // RFC 2849 CreditResource
    /// ```
    #[inline]
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// The resource for a wire code, or `None` if unknown.
    ///
    /// ```
    /// use railyard_core::credit::Resource;
    /// assert!(Resource::ALL.iter().all(|&r| Resource::from_code(r.code()) == Some(r)));
    /// assert_eq!(Resource::from_code(0), None);
    /// ```
    #[inline]
    pub const fn from_code(code: u16) -> Option<Resource> {
        match code {
            1 => Some(Resource::DataBytes),
            2 => Some(Resource::RequestSlots),
            3 => Some(Resource::StagingSlots),
            4 => Some(Resource::ConsumerSlots),
            _ => None,
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::DataBytes => "DATA_BYTES",
            Resource::RequestSlots => "REQUEST_SLOTS",
            Resource::StagingSlots => "STAGING_SLOTS",
            Resource::ConsumerSlots => "CONSUMER_SLOTS",
        })
    }
}

/// A set of resources (a bitmask over [`Resource::index`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceSet(u8);

impl ResourceSet {
    /// No resource.
    pub const EMPTY: ResourceSet = ResourceSet(0);
    /// All four resources.
    pub const ALL: ResourceSet = ResourceSet(0b1111);

    /// Adds `r`.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, ResourceSet};
    /// let s = ResourceSet::EMPTY.with(Resource::DataBytes).with(Resource::DataBytes);
    /// assert_eq!(s.len(), 1);
    /// ```
    #[inline]
    #[must_use]
    pub const fn with(self, r: Resource) -> ResourceSet {
        ResourceSet(self.0 | (1 << r.index()))
    }

    /// Whether `r` is in the set.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, ResourceSet};
    /// let s = ResourceSet::EMPTY.with(Resource::RequestSlots);
    /// assert!(s.contains(Resource::RequestSlots) && !s.contains(Resource::DataBytes));
    /// ```
    #[inline]
    pub const fn contains(self, r: Resource) -> bool {
        self.0 & (1 << r.index()) != 0
    }

    /// Whether the set is empty.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, ResourceSet};
    /// assert!(ResourceSet::EMPTY.is_empty());
    /// assert!(Charge::ZERO.resources().is_empty());
    /// ```
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of resources in the set.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, ResourceSet};
    /// assert_eq!(ResourceSet::ALL.len(), 4);
    /// assert_eq!(Charge::direct_write(4096).resources().len(), 3);
    /// ```
    #[inline]
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The raw bitmask.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, ResourceSet};
    /// assert_eq!(ResourceSet::EMPTY.with(Resource::RequestSlots).bits(), 0b0010);
    /// ```
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Iterates the members in index order.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource};
    /// let short: Vec<Resource> = Charge::staged_write(1).resources().iter().collect();
    /// assert_eq!(short, Resource::ALL); // in index order
    /// ```
    pub fn iter(self) -> impl Iterator<Item = Resource> {
        Resource::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

/// A charge vector (or any per-resource amount vector): one `u64` per
/// resource, indexed by [`Resource::index`]. Zero means "not charged".
///
/// ```
/// use railyard_core::credit::{Charge, Resource};
/// // A direct RDMA WRITE of 64 KiB: bytes + one request slot + one consumer slot.
/// let c = Charge::direct_write(64 << 10);
/// assert_eq!(c.get(Resource::DataBytes), 65536);
/// assert_eq!(c.get(Resource::StagingSlots), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Charge(pub [u64; RESOURCES]);

impl Charge {
    /// The empty charge.
    pub const ZERO: Charge = Charge([0; RESOURCES]);

    /// A direct RDMA WRITE: DATA_BYTES + REQUEST_SLOTS + CONSUMER_SLOTS.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource};
    /// let c = Charge::direct_write(4096);
    /// assert_eq!((c.get(Resource::DataBytes), c.get(Resource::RequestSlots), c.get(Resource::ConsumerSlots)), (4096, 1, 1));
    /// ```
    #[inline]
    pub const fn direct_write(bytes: u32) -> Charge {
        Charge([bytes as u64, 1, 0, 1])
    }

    /// A remote staged WRITE: the direct charge plus one STAGING_SLOT.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource};
    /// assert_eq!(Charge::staged_write(4096).get(Resource::StagingSlots), 1);
    /// ```
    #[inline]
    pub const fn staged_write(bytes: u32) -> Charge {
        Charge([bytes as u64, 1, 1, 1])
    }

    /// The amount for `r`.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource};
    /// assert_eq!(Charge::ZERO.get(Resource::DataBytes), 0);
    /// ```
    #[inline]
    pub const fn get(&self, r: Resource) -> u64 {
        self.0[r.index()]
    }

    /// Returns the charge with `r` set to `v`.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource};
    /// let c = Charge::ZERO.with(Resource::RequestSlots, 2);
    /// assert_eq!(c, Charge([0, 2, 0, 0]));
    /// ```
    #[inline]
    #[must_use]
    pub const fn with(mut self, r: Resource, v: u64) -> Charge {
        self.0[r.index()] = v;
        self
    }

    /// Resources with a nonzero amount.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource};
    /// let r = Charge::direct_write(1).resources();
    /// assert!(r.contains(Resource::ConsumerSlots) && !r.contains(Resource::StagingSlots));
    /// ```
    pub fn resources(&self) -> ResourceSet {
        let mut s = ResourceSet::EMPTY;
        for r in Resource::ALL {
            if self.get(r) != 0 {
                s = s.with(r);
            }
        }
        s
    }
}

/// Cumulative totals carried by a message: which resources are present, and
/// their values. Absent resources are unchanged by the message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Totals {
    /// Resources present in the message.
    pub present: ResourceSet,
    /// Values, indexed by [`Resource::index`]; zero where absent.
    pub values: [u64; RESOURCES],
}

impl Totals {
    /// Totals for every resource in `c` that is nonzero.
    ///
    /// ```
    /// use railyard_core::credit::{Charge, Resource, Totals};
    /// let t = Totals::from_charge(&Charge::direct_write(8));
    /// assert_eq!((t.get(Resource::DataBytes), t.get(Resource::StagingSlots)), (Some(8), None));
    /// ```
    pub fn from_charge(c: &Charge) -> Totals {
        Totals {
            present: c.resources(),
            values: c.0,
        }
    }

    /// Totals with all four resources present.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, Totals};
    /// let t = Totals::all([1 << 20, 64, 0, 64]);
    /// assert_eq!(t.get(Resource::StagingSlots), Some(0)); // present, zero
    /// ```
    pub const fn all(values: [u64; RESOURCES]) -> Totals {
        Totals {
            present: ResourceSet::ALL,
            values,
        }
    }

    /// Sets `r` to `v` (and marks it present).
    ///
    /// ```
    /// use railyard_core::credit::{Resource, Totals};
    /// let t = Totals::default().with(Resource::DataBytes, 4096);
    /// assert_eq!((t.present.len(), t.get(Resource::DataBytes)), (1, Some(4096)));
    /// ```
    #[must_use]
    pub const fn with(mut self, r: Resource, v: u64) -> Totals {
        self.present = self.present.with(r);
        self.values[r.index()] = v;
        self
    }

    /// The value for `r`, if present.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, Totals};
    /// assert_eq!(Totals::default().get(Resource::DataBytes), None); // absent: unchanged by the message
    /// ```
    pub const fn get(&self, r: Resource) -> Option<u64> {
        if self.present.contains(r) {
            Some(self.values[r.index()])
        } else {
            None
        }
    }
}

/// A receiver session identity: 128 bits, one per receiver incarnation,
/// **ordered**.
///
/// A receiver's next incarnation must use a larger id than every earlier
/// one. That order is what lets a sender fence *every* superseded
/// incarnation with O(1) memory: [`SenderControl::bind`] only moves a peer
/// forward in `(session, epoch)` order, so a negotiation, grant or update
/// replayed from any earlier incarnation (not just the last one) is refused
/// and can never yield usable credit (RFC 2849 acceptance 4). The
/// recommended layout is [`SessionId::new`]`(incarnation, nonce)`: the high
/// 64 bits order incarnations (a persisted restart counter, or the start
/// time in ns), the low 64 bits are random so two receivers that pick the
/// same incarnation still differ. A receiver that cannot produce a larger
/// id (say, its clock went backwards across a restart) fails closed: its
/// senders refuse the binding until its id orders after the old one.
///
/// `SessionId(0)` ([`SessionId::NONE`]) is reserved for "no session": it is
/// refused on the wire and by `bind`.
///
/// ```
/// use railyard_core::credit::SessionId;
/// let first = SessionId::new(1, 0xdead_beef);
/// let after_restart = SessionId::new(2, 0x1234);
/// assert!(after_restart > first);
/// assert_eq!(after_restart.incarnation(), 2);
/// assert!(SessionId::NONE < first);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u128);

impl SessionId {
    /// "No session" (reserved; refused on the wire and by `bind`).
    pub const NONE: SessionId = SessionId(0);

    /// The id of incarnation `incarnation` (high 64 bits; orders ids) with
    /// a random `nonce` (low 64 bits; tells receivers apart).
    ///
    /// ```
    /// use railyard_core::credit::SessionId;
    /// let s = SessionId::new(7, 99);
    /// assert_eq!(s.0, (7u128 << 64) | 99);
    /// assert!(SessionId::new(8, 0) > SessionId::new(7, u64::MAX)); // incarnation orders first
    /// ```
    #[inline]
    pub const fn new(incarnation: u64, nonce: u64) -> SessionId {
        SessionId(((incarnation as u128) << 64) | nonce as u128)
    }

    /// The incarnation part (high 64 bits).
    ///
    /// ```
    /// use railyard_core::credit::SessionId;
    /// assert_eq!(SessionId::new(42, 1).incarnation(), 42);
    /// ```
    #[inline]
    pub const fn incarnation(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// Whether this is [`SessionId::NONE`].
    ///
    /// ```
    /// use railyard_core::credit::SessionId;
    /// assert!(SessionId::NONE.is_none() && !SessionId::new(0, 1).is_none());
    /// ```
    #[inline]
    pub const fn is_none(self) -> bool {
        self.0 == 0
    }
}

/// A protocol identifier that must not be zero (RFC 2849 as profiled by
/// railyard, `docs/wire.md`): zero is the value of a field nobody set, so
/// it is reserved and refused — by the decoder, by the sender ledger and by
/// the receiver allocator — rather than taken as a real session, epoch or
/// sequence.
///
/// * **session** 0 is [`SessionId::NONE`];
/// * **epoch** 0 means "never opened": the receiver's first epoch for a
///   peer is 1 ([`ReceiverAllocator::open`]);
/// * **sequence** 0 means "nothing sent yet": the first update (and the
///   first usage report) of an epoch has sequence 1, so "newer than the
///   last accepted" needs no special first case;
/// * **version** 0 means "no version": an accepted negotiation names a
///   version ≥ 1, a refused one names none (0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZeroField {
    /// `receiver_session` is 0.
    Session,
    /// `epoch` is 0.
    Epoch,
    /// `sequence` is 0.
    Sequence,
    /// An accepted negotiation with `version` 0.
    Version,
}

impl fmt::Display for ZeroField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ZeroField::Session => "receiver session 0 is reserved (no session)",
            ZeroField::Epoch => "epoch 0 is reserved (never opened); epochs start at 1",
            ZeroField::Sequence => "sequence 0 is reserved (nothing sent); sequences start at 1",
            ZeroField::Version => "an accepted negotiation must name a version >= 1",
        })
    }
}

impl ZeroField {
    /// The first of `session`, `epoch`, `sequence` that is zero, if any
    /// (checked in that order).
    ///
    /// ```
    /// use railyard_core::credit::ZeroField;
    /// assert_eq!(ZeroField::check(1, 1, 1), Ok(()));
    /// assert_eq!(ZeroField::check(1, 0, 0), Err(ZeroField::Epoch)); // the first zero, in order
    /// ```
    #[inline]
    pub const fn check(session: u128, epoch: u64, sequence: u64) -> Result<(), ZeroField> {
        if session == 0 {
            Err(ZeroField::Session)
        } else if epoch == 0 {
            Err(ZeroField::Epoch)
        } else if sequence == 0 {
            Err(ZeroField::Sequence)
        } else {
            Ok(())
        }
    }
}

/// Names one credit ledger entry (RFC 2849 `CreditKey`).
///
/// `sender_peer` is the dense index of the peer link on the side that holds
/// the table (on a sender: the receiver it talks to; on a receiver: the
/// sender), bounded by `max_peers`. Peer identity comes from the endpoint /
/// negotiation context, never from message payload. On a sender,
/// [`SenderControl::entry_for`] resolves a key to the dense [`EntryId`] the
/// hot path uses, and refuses keys of a session the peer is not bound to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CreditKey {
    /// The receiver incarnation the grant belongs to.
    pub receiver_session: SessionId,
    /// Dense peer index, `< max_peers`.
    pub sender_peer: u32,
    /// QoS class, `< max_classes`.
    pub qos_class: u32,
}

/// A receiver's credit update, as runtime data (decoded and checked by
/// [`crate::wire::credit`]). Grants are absolute cumulative totals within `epoch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditUpdate {
    /// Receiver session the grants belong to.
    pub receiver_session: SessionId,
    /// Epoch within the session.
    pub epoch: u64,
    /// Per-(session, epoch, class) sequence; newer wins.
    pub sequence: u64,
    /// QoS class the grants are for.
    pub qos_class: u32,
    /// Freshness hint (ms after local receipt). Zero means "no expiry".
    pub freshness_ttl_ms: u32,
    /// Cumulative grant totals.
    pub grants: Totals,
}

/// A sender's usage report: cumulative totals within `epoch`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditUsage {
    /// Receiver session the usage belongs to.
    pub receiver_session: SessionId,
    /// Epoch within the session.
    pub epoch: u64,
    /// Sender's report sequence.
    pub sequence: u64,
    /// QoS class.
    pub qos_class: u32,
    /// Committed (handed to the transport) cumulative totals.
    pub consumed: Totals,
    /// Cumulative totals released by sender-side completions.
    pub released: Totals,
    /// Cumulative totals of unused credit returned explicitly.
    pub returned: Totals,
    /// Credit-stalled demand (not cumulative; a hint for the allocator).
    pub pending_demand: Totals,
}

/// Why a charge or key was refused before touching any state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// Peer index `>= max_peers`.
    UnknownPeer(u32),
    /// QoS class `>= max_classes`.
    UnknownClass(u32),
    /// A resource this table does not model (its window / capacity is 0).
    UnknownResource(Resource),
    /// A single charge larger than the resource's whole window.
    ChargeTooLarge(Resource),
    /// An entry id from another table.
    ForeignEntry,
    /// A charge of nothing (every resource zero): refused, so an empty
    /// charge can never pass the credit gate without reserving anything.
    EmptyCharge,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::UnknownPeer(p) => write!(f, "unknown peer index {p}"),
            KeyError::UnknownClass(c) => write!(f, "unknown qos class {c}"),
            KeyError::UnknownResource(r) => write!(f, "resource {r} is not modeled"),
            KeyError::ChargeTooLarge(r) => write!(f, "charge for {r} exceeds its window"),
            KeyError::ForeignEntry => f.write_str("entry id belongs to another ledger"),
            KeyError::EmptyCharge => f.write_str("empty charge (every resource zero)"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for KeyError {}
