//! The lock-free pool itself (needs `alloc`: slots are allocated once).
#![allow(unsafe_code)]

use core::fmt;

use super::{TokenError, TokenRecord, WrId};
use crate::sync::{store_u32, AtomicU32, AtomicU64, Ordering, UnsafeCell};
use alloc::{boxed::Box, vec::Vec};

/// Index value meaning "no slot" in the free list.
const NIL: u32 = u32::MAX;

#[inline(always)]
fn pack_head(tag: u32, index: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(index)
}

#[inline(always)]
fn head_index(head: u64) -> u32 {
    head as u32
}

#[inline(always)]
fn head_tag(head: u64) -> u32 {
    (head >> 32) as u32
}

/// Next tag for the free-list head. The broken variant drops the ABA tag so
/// the loom model can show it is needed.
#[inline(always)]
fn next_tag(tag: u32) -> u32 {
    #[cfg(railyard_broken = "token_aba")]
    {
        tag
    }
    #[cfg(not(railyard_broken = "token_aba"))]
    {
        tag.wrapping_add(1)
    }
}

/// Ordering that publishes a claimed record to its completer. The broken
/// variant publishes with `Relaxed`, which loom must catch as a race on the
/// record.
#[cfg(not(railyard_broken = "token_publish"))]
const PUBLISH: Ordering = Ordering::Release;
#[cfg(railyard_broken = "token_publish")]
const PUBLISH: Ordering = Ordering::Relaxed;
#[cfg(not(railyard_broken = "token_publish"))]
const TAKE: Ordering = Ordering::AcqRel;
#[cfg(railyard_broken = "token_publish")]
const TAKE: Ordering = Ordering::Relaxed;

#[inline(always)]
fn make_wr_id(seq: u32, index: u32) -> WrId {
    (u64::from(seq) << 32) | u64::from(index)
}

/// One slot of the pool.
struct Slot<R> {
    /// Even: free. Odd: owned by the posted attempt whose wr_id carries it.
    seq: AtomicU32,
    /// Free-list link (slot index or `NIL`); meaningful while free.
    next: AtomicU32,
    /// The attempt's record; written by the claimer, read by the completer.
    record: UnsafeCell<R>,
}

/// A fixed-capacity, lock-free pool of posted-attempt tokens.
///
/// `R` is the plain-data record each token owns; it defaults to
/// [`TokenRecord`]. `R: Copy` keeps records free of owned heap data, so a
/// token that is never completed leaks nothing but its slot.
///
/// Needs the `alloc` feature: the slot array is allocated once, in
/// [`TokenPool::new`].
pub struct TokenPool<R: Copy = TokenRecord> {
    /// Free-list head: `(tag << 32) | index`.
    head: CachePadded<AtomicU64>,
    slots: Box<[Slot<R>]>,
}

/// Keeps the contended free-list head on its own cache line.
#[repr(align(128))]
struct CachePadded<T>(T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

// SAFETY: The only non-Sync field is each slot's `UnsafeCell<R>`. A record
// is written only by the thread that popped the slot from the free list
// (exclusive by the tagged CAS) before it publishes the odd sequence with
// Release, and read only by the single thread whose AcqRel CAS moved that
// odd sequence on, before it pushes the slot back. So no two threads touch
// one record at once, and records cross threads by value, which needs
// `R: Send`.
unsafe impl<R: Copy + Send> Sync for TokenPool<R> {}
// SAFETY: The pool owns its records; sending the pool sends them, which is
// sound for `R: Send`.
unsafe impl<R: Copy + Send> Send for TokenPool<R> {}

impl<R: Copy> fmt::Debug for TokenPool<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenPool")
            .field("capacity", &self.capacity())
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl<R: Copy + Default> TokenPool<R> {
    /// Creates a pool with `capacity` slots, all free. This is the only
    /// allocation the pool ever makes.
    pub fn new(capacity: usize) -> Result<Self, TokenError> {
        if capacity == 0 || capacity >= NIL as usize {
            return Err(TokenError::InvalidCapacity);
        }
        let slots: Vec<Slot<R>> = (0..capacity)
            .map(|i| {
                let next = if i + 1 == capacity { NIL } else { i as u32 + 1 };
                Slot {
                    seq: AtomicU32::new(0),
                    next: AtomicU32::new(next),
                    record: UnsafeCell::new(R::default()),
                }
            })
            .collect();
        Ok(Self {
            head: CachePadded(AtomicU64::new(pack_head(0, 0))),
            slots: slots.into_boxed_slice(),
        })
    }
}

impl<R: Copy> TokenPool<R> {
    /// Number of slots, fixed at construction.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Claims a slot for one posted attempt and stores `record` in it.
    ///
    /// Returns the `wr_id` to post with. Never blocks, spins or allocates:
    /// with every slot owned it returns [`TokenError::Exhausted`] at once.
    #[inline]
    pub fn claim(&self, record: R) -> Result<WrId, TokenError> {
        let index = self.pop()?;
        let slot = &self.slots[index as usize];
        // We popped the slot, so nobody else can claim it until we complete
        // it; the last writer of `seq` happened-before our pop (its push was
        // Release, our pop Acquire).
        let seq = slot.seq.load(Ordering::Relaxed).wrapping_add(1);
        debug_assert!(seq & 1 == 1, "a free slot has an even sequence");
        slot.record.with_mut(|p| {
            // SAFETY: the slot is off the free list and its sequence is
            // even, so no completer can win it and no claimer can pop it:
            // this thread has exclusive access to the record.
            unsafe { p.write(record) }
        });
        store_u32(&slot.seq, seq, PUBLISH);
        Ok(make_wr_id(seq, index))
    }

    /// Completes the attempt named by `wr_id` and returns its record,
    /// exactly once.
    ///
    /// Use it for a completion polled from the CQ and equally for work that
    /// was claimed but never posted (the unposted tail of a `bad_wr` chain):
    /// either way the caller then releases exactly what the record names.
    /// Any `wr_id` that is not currently live gets a typed error and changes
    /// nothing; see the module docs for the table.
    #[inline]
    pub fn complete(&self, wr_id: WrId) -> Result<R, TokenError> {
        let index = wr_id as u32;
        let seq = (wr_id >> 32) as u32;
        let slot = self
            .slots
            .get(index as usize)
            .ok_or(TokenError::OutOfRange)?;
        if seq & 1 == 0 {
            return Err(TokenError::Forged);
        }
        match slot
            .seq
            .compare_exchange(seq, seq.wrapping_add(1), TAKE, Ordering::Relaxed)
        {
            Ok(_) => {
                let record = slot.record.with(|p| {
                    // SAFETY: our CAS moved the sequence off the odd value
                    // this wr_id carries, so we are the one completer; the
                    // slot is not on the free list yet, so no claimer
                    // writes it; the claimer's write happened-before its
                    // Release store that our AcqRel CAS read.
                    unsafe { p.read() }
                });
                self.push(index);
                Ok(record)
            }
            Err(current) => Err(classify_miss(current, seq)),
        }
    }

    /// Number of slots currently owned by posted attempts.
    ///
    /// A scan (O(capacity)), meant for diagnostics and leak checks, not for
    /// the hot path. Exact when no claim or completion runs concurrently.
    pub fn in_use(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.seq.load(Ordering::Acquire) & 1 == 1)
            .count()
    }

    /// Whether `wr_id` currently names a live attempt (diagnostics only: the
    /// answer can be stale by the time the caller reads it).
    pub fn is_live(&self, wr_id: WrId) -> bool {
        self.slots.get(wr_id as u32 as usize).is_some_and(|s| {
            (wr_id >> 32) as u32 & 1 == 1 && s.seq.load(Ordering::Acquire) == (wr_id >> 32) as u32
        })
    }

    #[inline(always)]
    fn pop(&self) -> Result<u32, TokenError> {
        let mut head = self.head.load(Ordering::Acquire);
        let mut backoff = Backoff::new();
        loop {
            let index = head_index(head);
            if index == NIL {
                return Err(TokenError::Exhausted);
            }
            // May be stale if another thread pops this slot meanwhile; then
            // the head's tag has moved and our CAS fails.
            let next = self.slots[index as usize].next.load(Ordering::Relaxed);
            let new = pack_head(next_tag(head_tag(head)), next);
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Ok(index),
                Err(actual) => {
                    backoff.spin();
                    head = actual;
                }
            }
        }
    }

    #[inline(always)]
    fn push(&self, index: u32) {
        let slot = &self.slots[index as usize];
        let mut head = self.head.load(Ordering::Relaxed);
        let mut backoff = Backoff::new();
        loop {
            slot.next.store(head_index(head), Ordering::Relaxed);
            let new = pack_head(next_tag(head_tag(head)), index);
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => {
                    backoff.spin();
                    head = actual;
                }
            }
        }
    }
}

/// Bounded exponential backoff after a lost CAS on the free-list head: two
/// cores hammering one cache line otherwise spend most of their time
/// stealing it from each other. Never blocks; at most 2^6 spin hints.
struct Backoff(u32);

impl Backoff {
    #[inline(always)]
    fn new() -> Self {
        Backoff(0)
    }

    #[inline(always)]
    fn spin(&mut self) {
        for _ in 0..(1u32 << self.0) {
            crate::sync::spin_hint();
        }
        if self.0 < 6 {
            self.0 += 1;
        }
    }
}

/// Names why `wr_id_seq` did not match the slot's `current` sequence.
#[inline]
fn classify_miss(current: u32, wr_id_seq: u32) -> TokenError {
    // Wrapping distance from the id's sequence to the slot's: 1 means the id
    // was completed and the slot is still free; more means the slot moved on.
    let ahead = current.wrapping_sub(wr_id_seq) as i32;
    match ahead {
        1 => TokenError::Duplicate,
        d if d > 1 => TokenError::Stale,
        _ => TokenError::Forged,
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;

    fn rec(bytes: u32) -> TokenRecord {
        TokenRecord {
            bytes,
            ..TokenRecord::default()
        }
    }

    #[test]
    fn claim_complete_returns_record_once() {
        let pool: TokenPool = TokenPool::new(4).unwrap();
        let a = pool.claim(rec(1)).unwrap();
        let b = pool.claim(rec(2)).unwrap();
        assert_ne!(a, b);
        assert_eq!(pool.in_use(), 2);
        assert_eq!(pool.complete(b), Ok(rec(2)));
        assert_eq!(pool.complete(b), Err(TokenError::Duplicate));
        assert_eq!(pool.complete(a), Ok(rec(1)));
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn reused_slot_yields_new_wr_id_and_old_id_is_stale() {
        let pool: TokenPool = TokenPool::new(1).unwrap();
        let old = pool.claim(rec(1)).unwrap();
        pool.complete(old).unwrap();
        let new = pool.claim(rec(2)).unwrap();
        assert_eq!(old as u32, new as u32, "same slot");
        assert_ne!(old, new, "different wr_id");
        assert_eq!(pool.complete(old), Err(TokenError::Stale));
        assert!(pool.is_live(new));
        assert_eq!(
            pool.complete(new),
            Ok(rec(2)),
            "stale id left new attempt intact"
        );
    }

    #[test]
    fn exhaustion_is_typed_and_recovers() {
        let pool: TokenPool = TokenPool::new(2).unwrap();
        let a = pool.claim(rec(1)).unwrap();
        let _b = pool.claim(rec(2)).unwrap();
        assert_eq!(pool.claim(rec(3)), Err(TokenError::Exhausted));
        pool.complete(a).unwrap();
        assert!(pool.claim(rec(3)).is_ok());
    }

    #[test]
    fn forged_and_out_of_range_ids_are_refused() {
        let pool: TokenPool = TokenPool::new(2).unwrap();
        let a = pool.claim(rec(1)).unwrap();
        assert_eq!(pool.complete(5), Err(TokenError::OutOfRange));
        assert_eq!(pool.complete(u64::MAX), Err(TokenError::OutOfRange));
        // Even sequence: never a live id.
        assert_eq!(pool.complete(a + (1 << 32)), Err(TokenError::Forged));
        // Sequence from the future.
        assert_eq!(pool.complete(a + (2 << 32)), Err(TokenError::Forged));
        // Slot 1 was never claimed.
        assert_eq!(pool.complete(make_wr_id(1, 1)), Err(TokenError::Forged));
        assert_eq!(pool.complete(a), Ok(rec(1)), "refusals changed nothing");
    }

    #[test]
    fn invalid_capacity_is_typed() {
        assert_eq!(
            TokenPool::<TokenRecord>::new(0).unwrap_err(),
            TokenError::InvalidCapacity
        );
    }

    #[test]
    fn sequence_wraps_without_confusion() {
        let pool: TokenPool = TokenPool::new(1).unwrap();
        pool.slots[0].seq.store(u32::MAX - 1, Ordering::Relaxed);
        let a = pool.claim(rec(1)).unwrap();
        assert_eq!((a >> 32) as u32, u32::MAX);
        pool.complete(a).unwrap();
        let b = pool.claim(rec(2)).unwrap();
        assert_eq!((b >> 32) as u32, 1, "wrapped past zero to the next odd");
        assert_eq!(pool.complete(a), Err(TokenError::Stale));
        assert_eq!(pool.complete(b), Ok(rec(2)));
    }

    #[test]
    fn lifo_reuses_hottest_slot() {
        let pool: TokenPool = TokenPool::new(8).unwrap();
        let a = pool.claim(rec(1)).unwrap();
        pool.complete(a).unwrap();
        let b = pool.claim(rec(1)).unwrap();
        assert_eq!(a as u32, b as u32);
    }

    #[test]
    fn every_error_has_a_message() {
        for e in [
            TokenError::Exhausted,
            TokenError::OutOfRange,
            TokenError::Duplicate,
            TokenError::Stale,
            TokenError::Forged,
            TokenError::InvalidCapacity,
        ] {
            let mut s = heapless::String::<128>::new();
            core::fmt::write(&mut s, format_args!("{e}")).unwrap();
            assert!(!s.is_empty());
        }
    }
}
