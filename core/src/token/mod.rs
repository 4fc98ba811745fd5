//! The posted-attempt token pool (RFC 3136).
//!
//! Today's engines put a reusable `Slice*` in `wr_id`, so the poller cannot
//! tell whether a completion belongs to the slice's current attempt or to a
//! stale one. Here `wr_id` names one *posted attempt*: a slot in a fixed pool
//! plus that slot's sequence number. The slot holds a plain-data
//! [`TokenRecord`] naming everything the attempt owns, and
//! [`TokenPool::complete`] hands that record back **exactly once**.
//!
//! ## Layout of a [`WrId`]
//!
//! ```text
//!  63                              32 31                               0
//! +----------------------------------+----------------------------------+
//! |  slot sequence (odd while live)  |            slot index            |
//! +----------------------------------+----------------------------------+
//! ```
//!
//! Each slot has a 32-bit sequence: even while free, odd while a posted
//! attempt owns it. A claim moves it from `2k` to `2k+1`; the completion
//! moves it to `2k+2`. A reused slot therefore yields a different `wr_id`,
//! and every other `wr_id` gets a typed error:
//!
//! | `complete(wr_id)` sees | result |
//! |---|---|
//! | index ≥ capacity | [`TokenError::OutOfRange`] |
//! | even sequence (never a live id) | [`TokenError::Forged`] |
//! | slot sequence = id + 1 | [`TokenError::Duplicate`] (already completed) |
//! | slot sequence > id + 1 | [`TokenError::Stale`] (slot reused since) |
//! | slot sequence < id | [`TokenError::Forged`] (never issued) |
//!
//! Sequences wrap after 2³¹ reuses of one slot; comparisons use wrapping
//! distance, so the table holds as long as a stale id is not 2³¹ reuses old.
//!
//! ## Concurrency
//!
//! Lock-free MPMC. Free slots form a Treiber stack whose head packs a 32-bit
//! ABA tag beside the index; the tag advances on every pop and push, so a
//! thread that read an old head cannot install a stale `next`. Ownership of
//! the record moves by the slot sequence: the claimer writes the record and
//! publishes the odd sequence with `Release`; exactly one completer wins the
//! `AcqRel` CAS from that odd value and only then reads the record. The
//! stack is LIFO, so the hottest (cache-resident) slot is reused first.
//!
//! Exhaustion returns [`TokenError::Exhausted`] at once: it never blocks or
//! spins, so callers treat it as backpressure. Claim and complete never
//! allocate (`tests/no_alloc.rs` proves it with a counting allocator).
//!
//! ## Cost
//!
//! A claim+complete round trip against two baselines with the same API and
//! the same per-slot sequence check, in the same run: a free list on
//! crossbeam's `ArrayQueue`, and a `Mutex<Vec<u32>>` free list
//! (`cargo bench -p railyard-benches --bench token`; instructions:
//! `ci/icount.sh`):
//!
//! | round trip | railyard | `ArrayQueue` | `Mutex<Vec>` |
//! |---|---|---|---|
//! | 1 thread (criterion, idle 2-core VM) | 15.0 ns (0.90×) | 16.7 ns | 25.0 ns |
//! | instructions (callgrind) | 66 (0.57×) | 115 | 91 |
//!
//! With the real 56-byte [`TokenRecord`] instead of a `u64` the round trip
//! is 100 instructions (`railyard_full_record`).
//!
//! A lost CAS on the head backs off exponentially (at most 2^6 spin
//! hints), as crossbeam's `Backoff` does, so two cores do not spend the
//! round trip stealing one cache line from each other. The measured
//! sessions (two threads, the per-worker [`TokenCache`], the compact
//! record) are in `docs/benchmarks.md`.
//!
//! ```
//! use railyard_core::token::{TokenError, TokenPool, TokenRecord};
//!
//! let pool: TokenPool = TokenPool::new(2).unwrap();
//! let rec = TokenRecord { bytes: 65536, ..TokenRecord::default() };
//! let wr_id = pool.claim(rec).unwrap();
//! assert_eq!(pool.complete(wr_id), Ok(rec));
//! // The same completion twice is a typed error, never a second release.
//! assert_eq!(pool.complete(wr_id), Err(TokenError::Duplicate));
//! ```

use core::fmt;

use crate::endpoint::EndpointHandle;
use crate::slice::SliceRef;

/// The 64-bit work-request id handed to `ibv_post_send`: it names one
/// posted attempt (slot index and per-slot sequence), never a pointer.
pub type WrId = u64;

/// Everything one posted attempt owns, in plain data: no pointers.
///
/// Every resource taken on the way down (credit, rail charge, outstanding
/// post, CC permit, the token itself) is named here, and completion releases
/// exactly those, once.
///
/// ## Layout: 56 bytes, one cache line per pool slot
///
/// The record is copied into its pool slot on claim and out again on
/// completion, so its size is paid on every posted attempt. It is 56 bytes
/// (it was 64: two `Option<u32>` took 8 bytes each, 3 of them padding), so
/// a slot (record + 4-byte sequence + 4-byte free-list link) is exactly one
/// 64-byte cache line, and slots are cache-line aligned: a claim or a
/// completion touches one line of the slot array, never two.
///
/// Nothing here is narrowed or lossy. Nine fields are exact 32-bit ids or
/// sizes (slice index and attempt, endpoint slot and generation, bytes,
/// route, route generation, peer, credit key: 36 bytes) and the post time is
/// a full `u64` of the caller's clock (a 32-bit offset would alias after
/// 4.3 s and feed the rail selector a wrong bandwidth sample for a stalled
/// work request). A 32-byte record would have to truncate attempt or
/// generation fences, which exist precisely to never alias. The two optional
/// ids are [`OptId`]s: 5 bytes each, with an explicit presence flag (peer 0
/// and credit key 0 are real values, and so is `u32::MAX`).
///
/// ```
/// use railyard_core::token::{OptId, TokenRecord};
/// assert!(core::mem::size_of::<TokenRecord>() <= 56);
/// let mut rec = TokenRecord { bytes: 4096, peer: OptId::some(0), ..TokenRecord::default() };
/// assert_eq!(rec.peer.get(), Some(0)); // peer 0 is a real peer
/// rec.peer = None.into();
/// assert_eq!(rec.peer, None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TokenRecord {
    /// Post time, from the caller's clock.
    pub post_ns: u64,
    /// The slice and the attempt that was current at post time.
    pub slice: SliceRef,
    /// The endpoint (slot + generation) the work was posted on.
    pub endpoint: EndpointHandle,
    /// Bytes in this work request.
    pub bytes: u32,
    /// Route domain index (local context × remote NIC path), for `cc`.
    pub route: u32,
    /// Route generation at admission, for generation fencing in `cc`.
    pub route_generation: u32,
    /// QP index within the endpoint.
    pub qp: u16,
    /// Local device (device domain / rail) index.
    pub device: u16,
    /// Remote peer (segment id), if known. `None` is distinct from peer 0.
    pub peer: OptId,
    /// Credit ledger entry charged for this attempt, if receiver credit is on.
    pub credit_key: OptId,
    /// Which resources this attempt holds; see the `HOLDS_*` constants.
    pub holds: u8,
}

// One record per pool slot, the slot on one cache line (see pool.rs).
const _: () = assert!(core::mem::size_of::<TokenRecord>() <= 56);

/// An optional 32-bit id in 5 bytes, for [`TokenRecord`]: an explicit
/// presence flag beside the value, so every `u32` (0 and `u32::MAX`
/// included) stays a real id. `Option<u32>` takes 8 bytes.
///
/// Convert with `From`/`Into` both ways, read with [`OptId::get`]; it
/// compares equal to the `Option<u32>` it holds.
///
/// ```
/// use railyard_core::token::OptId;
/// let p = OptId::some(7);
/// assert_eq!(p.get(), Some(7));
/// assert_eq!(p, Some(7));
/// assert_eq!(OptId::from(None), OptId::NONE);
/// assert_eq!(Option::<u32>::from(OptId::some(u32::MAX)), Some(u32::MAX));
/// assert_eq!(core::mem::size_of::<OptId>(), 5);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
#[repr(C, packed)]
pub struct OptId {
    /// The id; 0 while unknown, so each `Option<u32>` has one
    /// representation and `==` means the same `Option`.
    value: u32,
    /// 1 if `value` is meaningful, else 0 (a `u8`, not a `bool`: no niche,
    /// so a `Result<TokenRecord, _>` does not test this byte).
    known: u8,
}

impl OptId {
    /// No id.
    pub const NONE: OptId = OptId { value: 0, known: 0 };

    /// The id `value`.
    ///
    /// ```
    /// use railyard_core::token::OptId;
    /// assert_eq!(OptId::some(0).get(), Some(0)); // 0 is a real id
    /// ```
    #[inline(always)]
    pub const fn some(value: u32) -> Self {
        OptId { value, known: 1 }
    }

    /// From an `Option<u32>` (also `From`).
    ///
    /// ```
    /// use railyard_core::token::OptId;
    /// assert_eq!(OptId::new(Some(9)), OptId::some(9));
    /// assert_eq!(OptId::new(None), OptId::NONE);
    /// ```
    #[inline(always)]
    pub const fn new(id: Option<u32>) -> Self {
        match id {
            Some(v) => OptId::some(v),
            None => OptId::NONE,
        }
    }

    /// The id, if known.
    ///
    /// ```
    /// use railyard_core::token::OptId;
    /// assert_eq!(OptId::some(u32::MAX).get(), Some(u32::MAX));
    /// assert_eq!(OptId::NONE.get(), None);
    /// ```
    #[inline(always)]
    pub const fn get(self) -> Option<u32> {
        if self.known != 0 {
            Some(self.value)
        } else {
            None
        }
    }

    /// Whether an id is known.
    ///
    /// ```
    /// use railyard_core::token::OptId;
    /// assert!(OptId::some(0).is_some());
    /// assert!(!OptId::NONE.is_some());
    /// ```
    #[inline(always)]
    pub const fn is_some(self) -> bool {
        self.known != 0
    }

    /// Whether no id is known.
    ///
    /// ```
    /// use railyard_core::token::OptId;
    /// assert!(OptId::NONE.is_none());
    /// assert!(!OptId::some(1).is_none());
    /// ```
    #[inline(always)]
    pub const fn is_none(self) -> bool {
        self.known == 0
    }
}

impl From<Option<u32>> for OptId {
    #[inline(always)]
    fn from(id: Option<u32>) -> Self {
        OptId::new(id)
    }
}

impl From<OptId> for Option<u32> {
    #[inline(always)]
    fn from(id: OptId) -> Self {
        id.get()
    }
}

impl PartialEq<Option<u32>> for OptId {
    #[inline]
    fn eq(&self, other: &Option<u32>) -> bool {
        self.get() == *other
    }
}

impl fmt::Debug for OptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl TokenRecord {
    /// The attempt holds a congestion-control permit (device + route bytes).
    pub const HOLDS_PERMIT: u8 = 1 << 0;
    /// The attempt holds a rail-selector charge (NIC, and peer if known).
    pub const HOLDS_RAIL_CHARGE: u8 = 1 << 1;
    /// The attempt holds a committed receiver-credit charge.
    pub const HOLDS_CREDIT: u8 = 1 << 2;
    /// The attempt is counted in its endpoint's outstanding posts.
    pub const HOLDS_OUTSTANDING: u8 = 1 << 3;
    /// The rail charge includes the peer entry for `peer` (RFC 4534 ledger).
    pub const HOLDS_RAIL_PEER_CHARGE: u8 = 1 << 4;
}

/// Why a token operation was refused. Every refusal is a value, never a
/// panic and never undefined behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenError {
    /// Every slot is owned by a posted attempt: backpressure, try later.
    Exhausted,
    /// The `wr_id` names a slot index beyond the pool's capacity.
    OutOfRange,
    /// The `wr_id` was already completed and its slot not yet reused.
    Duplicate,
    /// The `wr_id` was completed and its slot has since been reused by a
    /// newer attempt; the newer attempt is untouched.
    Stale,
    /// The `wr_id` was never issued by this pool.
    Forged,
    /// A pool needs at least one slot and at most `u32::MAX - 1`.
    InvalidCapacity,
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TokenError::Exhausted => {
                "token pool exhausted: every slot is owned by a posted attempt"
            }
            TokenError::OutOfRange => "wr_id names a slot beyond the pool's capacity",
            TokenError::Duplicate => "wr_id already completed (duplicate completion)",
            TokenError::Stale => "wr_id is stale: its slot now belongs to a newer attempt",
            TokenError::Forged => "wr_id was never issued by this pool",
            TokenError::InvalidCapacity => "token pool capacity must be between 1 and u32::MAX - 1",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TokenError {}

#[cfg(feature = "alloc")]
mod cookie;
#[cfg(feature = "alloc")]
mod pool;
#[cfg(feature = "alloc")]
pub use cookie::TokenCookies;
#[cfg(feature = "alloc")]
pub use pool::{TokenCache, TokenCacheOver, TokenPool};
