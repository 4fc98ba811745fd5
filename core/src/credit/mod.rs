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
//! [`SenderLedger::release`]) takes `&SenderLedger` from any number of worker
//! threads and is lock-free: each entry's available credit for *all four
//! resources* lives in **one packed `AtomicU64`**, so a multi-resource
//! reserve is a single compare-and-swap. See [`ledger`] for the layout and
//! what "never partially visible" means.
//!
//! The control path ([`SenderControl`]) is a separate, uniquely owned handle
//! (`&mut self`): updates are applied serially by one control thread, as the
//! RFC's concurrency rules require, without any lock.
//!
//! # Measured cost
//!
//! `cargo bench -p railyard-benches --bench credit -- --warm-up-time 1 --measurement-time 3`;
//! one op = `try_reserve` + `commit` + `release` of a 2-resource charge,
//! per op per thread, both ledgers in the same run. Host: 2 vCPUs (AMD
//! EPYC) shared with ~4 other build/bench jobs (load average 3–5). Two
//! consecutive runs:
//!
//! | case | lock-free | `Mutex<ledger>` | ratio |
//! |---|---|---|---|
//! | 1 thread | 23.4 / 24.5 ns | 32.6 / 33.4 ns | 1.39× / 1.37× |
//! | 2 threads, different peers | 24.0 / 63.7 ns | 181.4 / 71.2 ns | 7.5× / 1.12× |
//! | 2 threads, same entry | 106.2 / 63.6 ns | 288.0 / 71.5 ns | 2.7× / 1.12× |
//!
//! Run 1 caught a quiet moment in which the two threads really ran in
//! parallel; in run 2 they mostly time-shared one core and the ratio
//! collapses to the cost of the atomics alone. So the ≥ 3× goal under
//! 2-thread contention is met only when the threads actually run
//! concurrently (7.5× on different peers, 2.7× on one entry), and is
//! **not reliably reproducible** on this shared host. Each op is three
//! locked RMWs (reserve CAS, commit CAS, release CAS — most of the cycles
//! in `perf`) against six for the mutex (three lock/unlock pairs); entries
//! are cache-line aligned, so different peers share nothing, while the
//! mutex serializes the whole ledger (the RFC's "one ledger critical
//! section"). Field checks are branch-free SWAR on the packed word.
//!
//! Disabled path (`CreditLink::gate()` → `Bypass`, no ledger) vs no credit
//! code at all: 1.18 vs 0.99 ns and 1.24 vs 1.05 ns — about 0.2 ns, one
//! load and one predictable branch per dispatch.

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
    RecordError, ReleaseOutcome, Reservation, ReserveError, SenderControl, SenderLedger,
    UpdateError, UpdateOutcome,
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
    #[inline]
    pub const fn index(self) -> usize {
        self as usize - 1
    }

    /// The wire code.
    #[inline]
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// The resource for a wire code, or `None` if unknown.
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
    #[inline]
    #[must_use]
    pub const fn with(self, r: Resource) -> ResourceSet {
        ResourceSet(self.0 | (1 << r.index()))
    }

    /// Whether `r` is in the set.
    #[inline]
    pub const fn contains(self, r: Resource) -> bool {
        self.0 & (1 << r.index()) != 0
    }

    /// Whether the set is empty.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of resources in the set.
    #[inline]
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The raw bitmask.
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Iterates the members in index order.
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
    #[inline]
    pub const fn direct_write(bytes: u32) -> Charge {
        Charge([bytes as u64, 1, 0, 1])
    }

    /// A remote staged WRITE: the direct charge plus one STAGING_SLOT.
    #[inline]
    pub const fn staged_write(bytes: u32) -> Charge {
        Charge([bytes as u64, 1, 1, 1])
    }

    /// The amount for `r`.
    #[inline]
    pub const fn get(&self, r: Resource) -> u64 {
        self.0[r.index()]
    }

    /// Returns the charge with `r` set to `v`.
    #[inline]
    #[must_use]
    pub const fn with(mut self, r: Resource, v: u64) -> Charge {
        self.0[r.index()] = v;
        self
    }

    /// Resources with a nonzero amount.
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
    pub fn from_charge(c: &Charge) -> Totals {
        Totals {
            present: c.resources(),
            values: c.0,
        }
    }

    /// Totals with all four resources present.
    pub const fn all(values: [u64; RESOURCES]) -> Totals {
        Totals {
            present: ResourceSet::ALL,
            values,
        }
    }

    /// Sets `r` to `v` (and marks it present).
    #[must_use]
    pub const fn with(mut self, r: Resource, v: u64) -> Totals {
        self.present = self.present.with(r);
        self.values[r.index()] = v;
        self
    }

    /// The value for `r`, if present.
    pub const fn get(&self, r: Resource) -> Option<u64> {
        if self.present.contains(r) {
            Some(self.values[r.index()])
        } else {
            None
        }
    }
}

/// A receiver session identity (128-bit, unique per receiver incarnation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub u128);

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
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::UnknownPeer(p) => write!(f, "unknown peer index {p}"),
            KeyError::UnknownClass(c) => write!(f, "unknown qos class {c}"),
            KeyError::UnknownResource(r) => write!(f, "resource {r} is not modeled"),
            KeyError::ChargeTooLarge(r) => write!(f, "charge for {r} exceeds its window"),
            KeyError::ForeignEntry => f.write_str("entry id belongs to another ledger"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for KeyError {}
