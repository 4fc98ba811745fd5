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

/// One slot of the pool, aligned to a cache line: with a [`TokenRecord`]
/// (56 bytes) the whole slot is exactly one 64-byte line, so a claim or a
/// completion never touches two lines of the slot array, and neighbouring
/// slots in flight on different threads never share one.
#[repr(C, align(64))]
struct Slot<R> {
    /// Even: free. Odd: owned by the posted attempt whose wr_id carries it.
    seq: AtomicU32,
    /// Free-list link (slot index or `NIL`); meaningful while free.
    next: AtomicU32,
    /// The attempt's record; written by the claimer, read by the completer.
    record: UnsafeCell<R>,
}

// A record-carrying slot is one cache line (loom's cells are bigger).
#[cfg(not(railyard_loom))]
const _: () = assert!(core::mem::size_of::<Slot<TokenRecord>>() == 64);

/// A fixed-capacity, lock-free pool of posted-attempt tokens.
///
/// `R` is the plain-data record each token owns; it defaults to
/// [`TokenRecord`]. `R: Copy` keeps records free of owned heap data, so a
/// token that is never completed leaks nothing but its slot.
///
/// Needs the `alloc` feature: the slot array is allocated once, in
/// [`TokenPool::new`]. Each slot is cache-line aligned: 64 bytes for a
/// [`TokenRecord`] (or any record up to 56 bytes), more for a bigger `R`.
pub struct TokenPool<R: Copy = TokenRecord> {
    /// Free-list head: `(tag << 32) | index`.
    head: CachePadded<AtomicU64>,
    /// The depot of whole batches returned by [`TokenCache`]s:
    /// `(tag << 32) | index of the first slot of the top batch`.
    depot: CachePadded<AtomicU64>,
    /// Bumped by a claim that found the shared lists empty: every
    /// [`TokenCache`] that sees it change returns its tokens.
    flush_epoch: CachePadded<AtomicU32>,
    /// Per slot, meaningful while the slot heads a batch in the depot:
    /// `(batch length << 32) | index of the next batch's first slot`.
    batch_link: Box<[AtomicU64]>,
    slots: Box<[Slot<R>]>,
}

/// Returns a won slot to the pool's free list when dropped (after the
/// record was lent out, even if the borrower unwound).
struct PushOnDrop<'a, R: Copy> {
    pool: &'a TokenPool<R>,
    index: u32,
}

impl<R: Copy> Drop for PushOnDrop<'_, R> {
    #[inline(always)]
    fn drop(&mut self) {
        self.pool.push(self.index);
    }
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
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool};
    ///
    /// let pool: TokenPool = TokenPool::new(1024).unwrap();
    /// assert_eq!((pool.capacity(), pool.in_use()), (1024, 0));
    /// assert_eq!(TokenPool::<u64>::new(0).unwrap_err(), TokenError::InvalidCapacity);
    /// ```
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
        let batch_link: Vec<AtomicU64> = (0..capacity).map(|_| AtomicU64::new(0)).collect();
        Ok(Self {
            head: CachePadded(AtomicU64::new(pack_head(0, 0))),
            depot: CachePadded(AtomicU64::new(pack_head(0, NIL))),
            flush_epoch: CachePadded(AtomicU32::new(0)),
            batch_link: batch_link.into_boxed_slice(),
            slots: slots.into_boxed_slice(),
        })
    }
}

impl<R: Copy> TokenPool<R> {
    /// Number of slots, fixed at construction.
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(3).unwrap();
    /// let _a = pool.claim(1).unwrap();
    /// assert_eq!(pool.capacity(), 3); // whatever is in use
    /// ```
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Claims a slot for one posted attempt and stores `record` in it.
    ///
    /// Returns the `wr_id` to post with. Never blocks, spins or allocates:
    /// with every slot owned it returns [`TokenError::Exhausted`] at once.
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool, TokenRecord};
    ///
    /// let pool: TokenPool = TokenPool::new(1).unwrap();
    /// let rec = TokenRecord { bytes: 65536, route: 3, ..TokenRecord::default() };
    /// let wr_id = pool.claim(rec).unwrap(); // post with wr.wr_id = wr_id
    /// assert!(pool.is_live(wr_id));
    /// // Every slot owned: backpressure at once, never a wait.
    /// assert_eq!(pool.claim(rec), Err(TokenError::Exhausted));
    /// assert_eq!(pool.complete(wr_id), Ok(rec));
    /// ```
    #[inline(always)]
    pub fn claim(&self, record: R) -> Result<WrId, TokenError> {
        // Inlined into the caller, so a record the caller holds in
        // registers is stored once, straight into its slot, and never first
        // materialised on the stack to be copied in.
        let index = self.pop_slot()?;
        Ok(self.publish(index, record))
    }

    /// [`Self::pop`]; the compiler decides whether to inline it.
    #[inline]
    fn pop_slot(&self) -> Result<u32, TokenError> {
        self.pop()
    }

    /// Writes `record` into the free slot `index` (which the caller owns:
    /// it took it off a free list) and publishes the odd sequence.
    #[inline(always)]
    fn publish(&self, index: u32, record: R) -> WrId {
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
        make_wr_id(seq, index)
    }

    /// Completes the attempt named by `wr_id` and returns its record,
    /// exactly once.
    ///
    /// Use it for a completion polled from the CQ and equally for work that
    /// was claimed but never posted (the unposted tail of a `bad_wr` chain):
    /// either way the caller then releases exactly what the record names.
    /// Any `wr_id` that is not currently live gets a typed error and changes
    /// nothing; see the module docs for the table.
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool};
    ///
    /// let pool = TokenPool::<u64>::new(4).unwrap();
    /// let wr_id = pool.claim(42).unwrap();
    /// // The completion returns what the claim stored, exactly once.
    /// assert_eq!(pool.complete(wr_id), Ok(42));
    /// assert_eq!(pool.complete(wr_id), Err(TokenError::Duplicate));
    /// // A wr_id the pool never issued changes nothing.
    /// assert_eq!(pool.complete(wr_id + 2), Err(TokenError::Forged));
    /// assert_eq!(pool.complete(u64::from(u32::MAX)), Err(TokenError::OutOfRange));
    /// assert_eq!(pool.in_use(), 0);
    /// ```
    #[inline]
    pub fn complete(&self, wr_id: WrId) -> Result<R, TokenError> {
        let (index, record) = self.take(wr_id)?;
        self.push(index);
        Ok(record)
    }

    /// [`complete`](Self::complete), lending the record to `f` in its slot
    /// before the slot is freed: `f` reads (and may change) the record
    /// where the claim wrote it, so nothing is copied out that `f` does not
    /// use. Returns what `f` returns. The same exactly-once completion and
    /// typed errors (`f` is not called on an error); the slot is freed
    /// after `f` returns, or if `f` unwinds.
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool, TokenRecord};
    ///
    /// let pool: TokenPool = TokenPool::new(2).unwrap();
    /// let wr_id = pool.claim(TokenRecord { bytes: 4096, ..TokenRecord::default() }).unwrap();
    /// assert_eq!(pool.complete_with(wr_id, |rec| rec.bytes), Ok(4096));
    /// assert_eq!(pool.in_use(), 0);
    /// assert_eq!(pool.complete_with(wr_id, |rec| rec.bytes), Err(TokenError::Duplicate));
    /// ```
    #[inline(always)]
    pub fn complete_with<T>(
        &self,
        wr_id: WrId,
        f: impl FnOnce(&mut R) -> T,
    ) -> Result<T, TokenError> {
        let (index, slot) = self.take_slot(wr_id)?;
        let _free = PushOnDrop { pool: self, index };
        Ok(Self::lend(slot, f))
    }

    /// The exactly-once step of a completion: wins the slot's odd sequence
    /// and reads the record. The slot is then owned by the caller, who must
    /// return it to a free list (the pool's, or a cache's).
    #[inline(always)]
    fn take(&self, wr_id: WrId) -> Result<(u32, R), TokenError> {
        let (index, slot) = self.take_slot(wr_id)?;
        let record = slot.record.with(|p| {
            // SAFETY: `take_slot`'s CAS moved the sequence off the odd value
            // this wr_id carries, so we are the one completer; the slot is
            // not on the free list yet, so no claimer writes it; the
            // claimer's write happened-before its Release store that our
            // AcqRel CAS read.
            unsafe { p.read() }
        });
        Ok((index, record))
    }

    /// Wins the slot's odd sequence (the exactly-once step) without reading
    /// the record: the slot, record included, is the caller's until it
    /// returns the slot to a free list.
    #[inline(always)]
    fn take_slot(&self, wr_id: WrId) -> Result<(u32, &Slot<R>), TokenError> {
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
            Ok(_) => Ok((index, slot)),
            Err(current) => Err(classify_miss(current, seq)),
        }
    }

    /// Runs `f` on the record of a slot won by [`take_slot`](Self::take_slot)
    /// and not yet returned to a free list.
    #[inline(always)]
    fn lend<T>(slot: &Slot<R>, f: impl FnOnce(&mut R) -> T) -> T {
        slot.record.with_mut(|p| {
            // SAFETY: the caller won this slot's sequence (`take_slot`) and
            // has not returned the slot to a free list, so it is the one
            // completer and no claimer can pop (and write) the slot: this
            // thread has exclusive access to the record until it frees the
            // slot, which it does only after `f` returns (or unwinds). The
            // claimer's write happened-before its Release store that the
            // winning AcqRel CAS read.
            f(unsafe { &mut *p })
        })
    }

    /// Number of slots currently owned by posted attempts.
    ///
    /// A scan (O(capacity)), meant for diagnostics and leak checks, not for
    /// the hot path. Exact when no claim or completion runs concurrently.
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(8).unwrap();
    /// let ids: Vec<u64> = (0..3).map(|i| pool.claim(i).unwrap()).collect();
    /// assert_eq!(pool.in_use(), 3);
    /// for id in ids {
    ///     pool.complete(id).unwrap();
    /// }
    /// assert_eq!(pool.in_use(), 0); // the leak check
    /// ```
    pub fn in_use(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.seq.load(Ordering::Acquire) & 1 == 1)
            .count()
    }

    /// Free slots on the pool's own lists (its single free list and the
    /// depot of cache batches): `capacity − in_use − free tokens held in
    /// caches`. A walk (O(capacity)) for diagnostics and leak checks
    /// (`free_in_pool() == capacity()` once every cache is flushed or
    /// dropped and nothing is live); exact when nothing runs concurrently,
    /// and bounded by the capacity (never loops) when something does.
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(8).unwrap();
    /// let mut cache = pool.cache::<4>();
    /// let w = cache.claim(1).unwrap(); // the refill moves a batch into the cache
    /// cache.complete(w).unwrap();
    /// assert_eq!(pool.free_in_pool() + cache.cached(), 8);
    /// cache.flush();
    /// assert_eq!(pool.free_in_pool(), 8);
    /// ```
    pub fn free_in_pool(&self) -> usize {
        let cap = self.capacity();
        let mut n = 0;
        let mut at = head_index(self.head.load(Ordering::Acquire));
        while n < cap {
            let Some(s) = self.slots.get(at as usize) else {
                break;
            };
            n += 1;
            at = s.next.load(Ordering::Acquire);
        }
        let mut batch = head_index(self.depot.load(Ordering::Acquire));
        let mut batches = 0;
        while n < cap && batches < cap {
            let Some(link) = self.batch_link.get(batch as usize) else {
                break;
            };
            let meta = link.load(Ordering::Acquire);
            n += ((meta >> 32) as usize).max(1);
            batches += 1;
            batch = meta as u32;
        }
        n.min(cap)
    }

    /// Whether `wr_id` currently names a live attempt (diagnostics only: the
    /// answer can be stale by the time the caller reads it).
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(2).unwrap();
    /// let w = pool.claim(0).unwrap();
    /// assert!(pool.is_live(w));
    /// pool.complete(w).unwrap();
    /// assert!(!pool.is_live(w)); // a stale id stays dead, even once the slot is reused
    /// let _again = pool.claim(0).unwrap();
    /// assert!(!pool.is_live(w));
    /// ```
    pub fn is_live(&self, wr_id: WrId) -> bool {
        self.slots.get(wr_id as u32 as usize).is_some_and(|s| {
            (wr_id >> 32) as u32 & 1 == 1 && s.seq.load(Ordering::Acquire) == (wr_id >> 32) as u32
        })
    }

    /// A free slot from the single list, else from the depot (taking one
    /// slot of its top batch and returning the rest as a batch). Exhausted
    /// only if both were empty at one instant: the single list's head (its
    /// tag moves on every push and pop) is read on both sides of the depot.
    #[inline(always)]
    fn pop(&self) -> Result<u32, TokenError> {
        let mut seen = match self.pop_single() {
            Ok(i) => return Ok(i),
            Err(head) => head,
        };
        loop {
            if let Some((first, len)) = self.pop_batch() {
                if len > 1 {
                    let (rest, followed) = self.skip(first, 1);
                    if followed == 1 && rest != NIL {
                        self.push_batch(rest, len - 1);
                    }
                }
                return Ok(first);
            }
            match self.pop_single() {
                Ok(i) => return Ok(i),
                Err(head) if head == seen => {
                    self.flush_epoch.fetch_add(1, Ordering::Relaxed);
                    return Err(TokenError::Exhausted);
                }
                Err(head) => seen = head,
            }
        }
    }

    /// Pops one slot off the single free list; on an empty list returns the
    /// (empty) head it saw.
    #[inline(always)]
    fn pop_single(&self) -> Result<u32, u64> {
        let mut head = self.head.load(Ordering::Acquire);
        let mut backoff = Backoff::new();
        loop {
            let index = head_index(head);
            if index == NIL {
                return Err(head);
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

impl<R: Copy> TokenPool<R> {
    /// Ordering that publishes a batch's links with the depot push. The
    /// broken twin (loom only) pushes with `Relaxed`, so a refilling cache
    /// can read stale links.
    #[cfg(not(all(railyard_loom, railyard_broken = "token_cache_relaxed_batch")))]
    const BATCH_PUBLISH: Ordering = Ordering::Release;
    #[cfg(all(railyard_loom, railyard_broken = "token_cache_relaxed_batch"))]
    const BATCH_PUBLISH: Ordering = Ordering::Relaxed;

    /// Pops the top batch of the depot: `(first slot, length)`.
    #[inline]
    fn pop_batch(&self) -> Option<(u32, u32)> {
        let mut head = self.depot.load(Ordering::Acquire);
        let mut backoff = Backoff::new();
        loop {
            let index = head_index(head);
            let link = self.batch_link.get(index as usize)?;
            // May be stale if another thread pops this batch meanwhile; then
            // the depot's tag has moved and our CAS fails.
            let meta = link.load(Ordering::Relaxed);
            let new = pack_head(next_tag(head_tag(head)), meta as u32);
            match self
                .depot
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Some((index, ((meta >> 32) as u32).max(1))),
                Err(actual) => {
                    backoff.spin();
                    head = actual;
                }
            }
        }
    }

    /// Pushes the chain starting at `first` (linked through the slots'
    /// `next`, `len` slots, all owned by the caller) as one batch.
    #[inline]
    fn push_batch(&self, first: u32, len: u32) {
        let Some(link) = self.batch_link.get(first as usize) else {
            return;
        };
        let mut head = self.depot.load(Ordering::Relaxed);
        let mut backoff = Backoff::new();
        loop {
            link.store(
                (u64::from(len) << 32) | u64::from(head_index(head)),
                Ordering::Relaxed,
            );
            let new = pack_head(next_tag(head_tag(head)), first);
            match self.depot.compare_exchange_weak(
                head,
                new,
                Self::BATCH_PUBLISH,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => {
                    backoff.spin();
                    head = actual;
                }
            }
        }
    }

    /// Follows `n` links from `from` in an owned chain: the slot reached and
    /// how many links were followed (fewer if the chain ended).
    #[inline]
    fn skip(&self, from: u32, n: u32) -> (u32, u32) {
        let mut at = from;
        for k in 0..n {
            match self.slots.get(at as usize) {
                Some(s) => at = s.next.load(Ordering::Relaxed),
                None => return (NIL, k),
            }
        }
        (at, n)
    }

    /// Links the owned slots `chain` in order (the last one ends the chain).
    #[inline]
    fn link(&self, chain: &[u32]) {
        for w in chain.windows(2) {
            self.slots[w[0] as usize]
                .next
                .store(w[1], Ordering::Relaxed);
        }
        if let Some(&last) = chain.last() {
            self.slots[last as usize].next.store(NIL, Ordering::Relaxed);
        }
    }

    /// A per-worker cache of free tokens over this pool; see [`TokenCache`].
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(64).unwrap();
    /// let mut worker = pool.cache::<8>();
    /// let w = worker.claim(5).unwrap();
    /// assert_eq!(pool.complete(w), Ok(5)); // a cache's token completes anywhere
    /// drop(worker);
    /// assert_eq!(pool.free_in_pool(), 64);
    /// ```
    pub fn cache<const N: usize>(&self) -> TokenCache<'_, R, N> {
        TokenCache::new(self)
    }
}

/// A per-worker cache of free tokens: claims and completions through it
/// touch no shared cache line until it runs dry or full, and then move
/// tokens to and from the pool in batches of `N / 2` with one CAS.
///
/// The `wr_id` layout, the exactly-once completion (the slot's sequence
/// CAS) and every typed error are the pool's own: a cache only changes
/// where *free* slots wait. A token may be claimed through one cache (or the
/// pool) and completed through another (the dedicated-poller model: one
/// poller completes what several posters claimed): the slot then joins the
/// completer's cache, which returns whole batches to the pool's depot when it
/// fills, where the posters' caches refill from.
///
/// ## Exhaustion stays visible
///
/// A cache holds at most `N` free tokens. A claim through a cache returns
/// [`TokenError::Exhausted`] only when the cache, the pool's depot and its
/// single free list are all empty; at that instant the tokens hidden from it
/// are at most `N` per *other* live cache, so a thread always sees at least
/// `capacity − in_flight − N × (caches − 1)` tokens. Every `Exhausted`
/// (through a cache or the pool) also asks each cache to return all its
/// free tokens at its next call (`claim`, `complete` or [`flush`]), and a
/// cache returns them when dropped. A thread that stops calling `claim` and
/// `complete` for a while (an idle worker) calls [`idle`] from its idle
/// loop, so a request is answered and a sleeping cache holds nothing; work
/// refused with `Exhausted` is then retried when a completion or such an
/// answer returns tokens (see [`idle`]).
///
/// The composed hot path claims and completes through a cache with
/// [`HotPath::post_via`](crate::completion::HotPath::post_via) and
/// [`HotPath::complete_via`](crate::completion::HotPath::complete_via).
///
/// [`flush`]: TokenCache::flush
/// [`idle`]: TokenCache::idle
///
/// ```
/// use railyard_core::token::{TokenError, TokenPool, TokenRecord};
///
/// let pool: TokenPool = TokenPool::new(64).unwrap();
/// let mut poster = pool.cache::<16>();
/// let mut poller = pool.cache::<16>();
/// let rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
/// let wr_id = poster.claim(rec).unwrap();
/// // ... ibv_post_send; the poller thread polls the completion:
/// assert_eq!(poller.complete(wr_id), Ok(rec));
/// assert_eq!(poller.complete(wr_id), Err(TokenError::Duplicate));
/// drop((poster, poller)); // caches return their tokens
/// assert_eq!(pool.in_use(), 0);
/// ```
///
/// `N` must be even and at least 2 (checked at compile time):
///
/// ```compile_fail
/// let pool = railyard_core::token::TokenPool::<u64>::new(8).unwrap();
/// let _odd = pool.cache::<3>();
/// ```
pub type TokenCache<'p, R = TokenRecord, const N: usize = 64> =
    TokenCacheOver<&'p TokenPool<R>, R, N>;

/// A [`TokenCache`] over any pointer `P` to its pool: `&TokenPool` (the
/// [`TokenCache`] alias, what a worker thread borrows), or an owning
/// pointer such as `Arc<TokenPool>` (or a type that derefs to a pool inside
/// a bigger shared object), for a cache that must keep its pool alive
/// without a borrow, like one behind a C handle. The same type and code
/// either way; only how the pool is reached differs.
///
/// ```
/// extern crate alloc;
/// use alloc::sync::Arc;
/// use railyard_core::token::{TokenCacheOver, TokenPool};
///
/// let pool: Arc<TokenPool<u64>> = Arc::new(TokenPool::new(8).unwrap());
/// let mut cache: TokenCacheOver<_, u64, 4> = TokenCacheOver::new(Arc::clone(&pool));
/// let w = cache.claim(7).unwrap();
/// assert_eq!(cache.complete(w), Ok(7));
/// assert_eq!(pool.in_use(), 0);
/// assert!(cache.cached() >= 1); // the freed slot (and what the refill took)
/// drop(cache); // returns its tokens
/// assert_eq!(pool.free_in_pool(), 8);
/// ```
pub struct TokenCacheOver<P, R: Copy = TokenRecord, const N: usize = 64>
where
    P: core::ops::Deref<Target = TokenPool<R>>,
{
    pool: P,
    free: heapless::Vec<u32, N>,
    /// The pool's flush epoch this cache has answered.
    seen_flush: u32,
}

impl<P: core::ops::Deref<Target = TokenPool<R>>, R: Copy, const N: usize> fmt::Debug
    for TokenCacheOver<P, R, N>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("cached", &self.free.len())
            .finish()
    }
}

impl<P: core::ops::Deref<Target = TokenPool<R>>, R: Copy, const N: usize> TokenCacheOver<P, R, N> {
    /// Tokens moved per batch.
    const BATCH: usize = {
        assert!(
            N >= 2 && N % 2 == 0,
            "a TokenCache holds an even N >= 2 tokens"
        );
        assert!(N / 2 <= u32::MAX as usize);
        N / 2
    };

    /// An empty cache over `pool` (same as [`TokenPool::cache`]).
    ///
    /// ```
    /// use railyard_core::token::{TokenCache, TokenPool};
    ///
    /// let pool = TokenPool::<u64>::new(16).unwrap();
    /// let cache: TokenCache<'_, u64, 4> = TokenCache::new(&pool);
    /// assert_eq!(cache.cached(), 0); // empty until the first claim refills it
    /// ```
    pub fn new(pool: P) -> Self {
        let _ = Self::BATCH;
        let seen_flush = pool.flush_epoch.load(Ordering::Relaxed);
        Self {
            pool,
            free: heapless::Vec::new(),
            seen_flush,
        }
    }

    /// Free tokens held by this cache right now.
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(16).unwrap();
    /// let mut cache = pool.cache::<4>();
    /// let w = cache.claim(0).unwrap(); // refilled with a batch of 2, one claimed
    /// assert_eq!(cache.cached(), 1);
    /// cache.complete(w).unwrap(); // the freed slot stays here
    /// assert_eq!(cache.cached(), 2);
    /// ```
    pub fn cached(&self) -> usize {
        self.free.len()
    }

    /// The pool this cache is over.
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(4).unwrap();
    /// let cache = pool.cache::<2>();
    /// assert!(core::ptr::eq(cache.pool(), &pool));
    /// ```
    #[inline]
    pub fn pool(&self) -> &TokenPool<R> {
        &self.pool
    }

    /// Whether a claim found the pool's shared lists empty (and so asked
    /// every cache for its tokens) since this cache last answered. One
    /// relaxed load; [`claim`](Self::claim), [`complete`](Self::complete)
    /// and [`idle`](Self::idle) answer it.
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool};
    ///
    /// let pool = TokenPool::<u64>::new(4).unwrap();
    /// let mut hoarder = pool.cache::<4>();
    /// let w = hoarder.claim(0).unwrap(); // takes a batch of 2
    /// hoarder.complete(w).unwrap(); // now holds both
    /// let _a = pool.claim(0).unwrap();
    /// let _b = pool.claim(0).unwrap();
    /// // The pool's lists are empty: this claim asks every cache for its tokens.
    /// assert_eq!(pool.claim(0), Err(TokenError::Exhausted));
    /// assert!(hoarder.flush_requested());
    /// assert_eq!(hoarder.idle(false), 2); // answered: both back in the pool
    /// assert!(!hoarder.flush_requested());
    /// assert!(pool.claim(0).is_ok());
    /// ```
    #[inline]
    pub fn flush_requested(&self) -> bool {
        self.pool.flush_epoch.load(Ordering::Relaxed) != self.seen_flush
    }

    /// For a worker's idle loop: answers a pending flush request (returns
    /// every cached token if a claim anywhere found the pool empty since
    /// this cache last looked) and, with `parking` (the thread is about to
    /// sleep or block), returns every cached token whatever was asked.
    /// Returns how many tokens went back to the pool; when that is not 0,
    /// wake whatever waits for a token (work refused with
    /// [`TokenError::Exhausted`]).
    ///
    /// Why both: a claim that starves bumps the request *after* it saw the
    /// lists empty, so a thread that checked the request just before and
    /// then parks would keep its tokens for as long as it sleeps. A parked
    /// cache therefore holds nothing, and a spinning one answers within one
    /// round (the loom model `token_cache_starved_claim_is_woken` checks it;
    /// its broken twin only answers requests when parking).
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(8).unwrap();
    /// let mut cache = pool.cache::<4>();
    /// let w = cache.claim(0).unwrap();
    /// cache.complete(w).unwrap();
    /// assert_eq!(cache.idle(false), 0); // nobody asked: keeps its tokens
    /// assert_eq!(cache.idle(true), 2); // about to park: gives them all back
    /// assert_eq!((cache.cached(), pool.free_in_pool()), (0, 8));
    /// ```
    pub fn idle(&mut self, parking: bool) -> usize {
        let held = self.free.len();
        #[cfg(not(all(railyard_loom, railyard_broken = "token_cache_park_keeps")))]
        if parking {
            self.seen_flush = self.pool.flush_epoch.load(Ordering::Relaxed);
            self.flush();
            return held;
        }
        let _ = parking;
        if self.answer_flush() {
            held
        } else {
            0
        }
    }

    /// [`TokenPool::claim`] through the cache: the same `wr_id` and errors.
    ///
    /// Always inlined, like [`TokenPool::claim`]: the record goes straight
    /// into its slot (refill and flush stay out of line).
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool};
    ///
    /// let pool = TokenPool::<u64>::new(2).unwrap();
    /// let mut cache = pool.cache::<2>();
    /// let a = cache.claim(10).unwrap();
    /// let b = cache.claim(11).unwrap();
    /// assert_eq!(cache.claim(12), Err(TokenError::Exhausted));
    /// assert_eq!((pool.complete(a), pool.complete(b)), (Ok(10), Ok(11)));
    /// ```
    #[inline(always)]
    pub fn claim(&mut self, record: R) -> Result<WrId, TokenError> {
        self.answer_flush();
        let index = match self.free.pop() {
            Some(i) => i,
            None => self.refill()?,
        };
        Ok(self.pool.publish(index, record))
    }

    /// [`TokenPool::complete`] through the cache: the same exactly-once
    /// record and errors; the freed slot stays in this cache.
    ///
    /// Always inlined: the record is handed back in registers, not copied
    /// out of a call.
    ///
    /// ```
    /// use railyard_core::token::{TokenError, TokenPool};
    ///
    /// let pool = TokenPool::<u64>::new(8).unwrap();
    /// let w = pool.claim(3).unwrap(); // claimed through the pool, or another cache
    /// let mut poller = pool.cache::<4>();
    /// assert_eq!(poller.complete(w), Ok(3));
    /// assert_eq!(poller.complete(w), Err(TokenError::Duplicate));
    /// assert_eq!(poller.cached(), 1);
    /// ```
    #[inline(always)]
    pub fn complete(&mut self, wr_id: WrId) -> Result<R, TokenError> {
        let (index, record) = self.pool.take(wr_id)?;
        self.give_back(index);
        Ok(record)
    }

    /// [`TokenPool::complete_with`] through the cache: the record is lent to
    /// `f` in its slot, then the slot stays in this cache (the same
    /// exactly-once completion and errors).
    #[inline(always)]
    pub fn complete_with<T>(
        &mut self,
        wr_id: WrId,
        f: impl FnOnce(&mut R) -> T,
    ) -> Result<T, TokenError> {
        let (index, slot) = self.pool.take_slot(wr_id)?;
        // If `f` unwinds, the slot goes back to the pool.
        let unwinding = PushOnDrop {
            pool: &self.pool,
            index,
        };
        let out = TokenPool::lend(slot, f);
        core::mem::forget(unwinding);
        self.give_back(index);
        Ok(out)
    }

    /// Keeps a completed slot in this cache (or returns it to the pool, if
    /// the pool asked caches for their tokens).
    #[inline(always)]
    fn give_back(&mut self, index: u32) {
        if self.answer_flush() {
            self.pool.push(index);
            return;
        }
        if self.free.is_full() {
            self.flush_oldest(Self::BATCH);
        }
        // Cannot fail: not full after the flush.
        let _ = self.free.push(index);
    }

    /// Returns every cached token to the pool.
    ///
    /// ```
    /// use railyard_core::token::TokenPool;
    ///
    /// let pool = TokenPool::<u64>::new(8).unwrap();
    /// let mut cache = pool.cache::<4>();
    /// let w = cache.claim(0).unwrap();
    /// cache.complete(w).unwrap();
    /// cache.flush();
    /// assert_eq!((cache.cached(), pool.free_in_pool()), (0, 8));
    /// ```
    pub fn flush(&mut self) {
        while self.free.len() >= Self::BATCH {
            self.flush_oldest(Self::BATCH);
        }
        while let Some(i) = self.free.pop() {
            self.pool.push(i);
        }
    }

    /// If the pool asked caches to return their tokens since we last
    /// looked, does so (and says so).
    #[inline(always)]
    fn answer_flush(&mut self) -> bool {
        let e = self.pool.flush_epoch.load(Ordering::Relaxed);
        if e == self.seen_flush {
            return false;
        }
        self.seen_flush = e;
        self.flush();
        true
    }

    /// Returns the `n` oldest (coldest) cached tokens as one batch.
    #[inline(never)]
    fn flush_oldest(&mut self, n: usize) {
        let n = n.min(self.free.len());
        if n == 0 {
            return;
        }
        let batch = &self.free[..n];
        self.pool.link(batch);
        self.pool.push_batch(batch[0], n as u32);
        let len = self.free.len();
        self.free.copy_within(n..len, 0);
        self.free.truncate(len - n);
    }

    /// An empty cache takes a batch from the depot (keeping all of it), or
    /// else up to a batch of single free slots; returns one of them.
    #[inline(never)]
    fn refill(&mut self) -> Result<u32, TokenError> {
        if let Some((first, len)) = self.pool.pop_batch() {
            let keep = (len as usize).min(Self::BATCH * 2);
            let mut at = first;
            let mut taken = 0;
            while taken < keep {
                let Some(slot) = self.pool.slots.get(at as usize) else {
                    break;
                };
                let next = slot.next.load(Ordering::Relaxed);
                let _ = self.free.push(at);
                taken += 1;
                at = next;
            }
            if taken < len as usize && at != NIL {
                self.pool.push_batch(at, len - taken as u32);
            }
            if let Some(i) = self.free.pop() {
                return Ok(i);
            }
        }
        let first = self.pool.pop()?;
        while self.free.len() + 1 < Self::BATCH {
            match self.pool.pop_single() {
                Ok(i) => {
                    let _ = self.free.push(i);
                }
                Err(_) => break,
            }
        }
        Ok(first)
    }
}

impl<P: core::ops::Deref<Target = TokenPool<R>>, R: Copy, const N: usize> Drop
    for TokenCacheOver<P, R, N>
{
    fn drop(&mut self) {
        self.flush();
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
    use crate::token::OptId;
    use alloc::vec;

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
    fn cache_round_trip_has_the_pools_ids_and_errors() {
        let pool: TokenPool = TokenPool::new(4).unwrap();
        let mut c = pool.cache::<4>();
        let a = c.claim(rec(1)).unwrap();
        assert_eq!(c.complete(a), Ok(rec(1)));
        assert_eq!(c.complete(a), Err(TokenError::Duplicate));
        assert_eq!(pool.complete(a), Err(TokenError::Duplicate));
        assert_eq!(c.complete(5), Err(TokenError::OutOfRange));
        assert_eq!(c.complete(a + (1 << 32)), Err(TokenError::Forged));
        let b = c.claim(rec(2)).unwrap();
        assert_eq!(a as u32, b as u32, "the hottest slot is reused");
        assert_eq!(c.complete(a), Err(TokenError::Stale));
        // A cache-claimed token completes through the pool too, and back.
        assert_eq!(pool.complete(b), Ok(rec(2)));
        let d = pool.claim(rec(3)).unwrap();
        assert_eq!(c.complete(d), Ok(rec(3)));
    }

    #[test]
    fn completions_on_another_cache_come_back_in_batches() {
        // Dedicated-poller shape: the poster claims, the poller completes.
        let pool: TokenPool = TokenPool::new(16).unwrap();
        let mut poster = pool.cache::<4>();
        let mut poller = pool.cache::<4>();
        for round in 0..50u32 {
            let ids: Vec<_> = (0..6)
                .map(|i| poster.claim(rec(round * 10 + i)).unwrap())
                .collect();
            for (i, id) in ids.iter().enumerate() {
                assert_eq!(poller.complete(*id), Ok(rec(round * 10 + i as u32)));
            }
            assert!(poller.cached() <= 4, "bounded: {}", poller.cached());
            assert!(poster.cached() <= 4);
            assert_eq!(pool.in_use(), 0);
        }
        drop(poster);
        drop(poller);
        let all: Vec<_> = (0..16).map(|i| pool.claim(rec(i)).unwrap()).collect();
        let mut idx: Vec<u32> = all.iter().map(|&w| w as u32).collect();
        idx.sort_unstable();
        idx.dedup();
        assert_eq!(idx.len(), 16, "every slot exactly once");
        assert_eq!(pool.claim(rec(0)), Err(TokenError::Exhausted));
    }

    #[test]
    fn a_cache_never_hides_tokens_for_long() {
        let pool: TokenPool = TokenPool::new(8).unwrap();
        let mut a = pool.cache::<4>();
        let x = a.claim(rec(1)).unwrap();
        a.complete(x).unwrap();
        let z = a.claim(rec(1)).unwrap();
        let hidden = a.cached();
        assert!((1..=4).contains(&hidden), "{hidden}");
        let mut b = pool.cache::<4>();
        let mut got = vec![];
        while let Ok(w) = b.claim(rec(2)) {
            got.push(w);
        }
        assert_eq!(
            got.len(),
            8 - 1 - hidden,
            "everything not live or cached elsewhere"
        );
        // That Exhausted asked every cache to give its tokens back: `a`
        // does at its next call, and `b` then finds them.
        a.complete(z).unwrap();
        assert_eq!(a.cached(), 0);
        while let Ok(w) = b.claim(rec(2)) {
            got.push(w);
        }
        assert_eq!(got.len(), 8);
        for w in got {
            b.complete(w).unwrap();
        }
    }

    #[test]
    fn free_in_pool_counts_the_lists_not_the_caches() {
        let pool: TokenPool = TokenPool::new(8).unwrap();
        assert_eq!(pool.free_in_pool(), 8);
        let mut c = pool.cache::<4>();
        let ids: Vec<_> = (0..6).map(|i| pool.claim(rec(i)).unwrap()).collect();
        assert_eq!(pool.free_in_pool(), 2);
        for id in &ids[..5] {
            c.complete(*id).unwrap(); // 4 cached, then a batch of 2 to the depot
        }
        assert_eq!(pool.in_use(), 1);
        assert_eq!(pool.free_in_pool() + c.cached() + pool.in_use(), 8);
        assert!(c.cached() > 0);
        drop(c);
        assert_eq!(pool.free_in_pool(), 7);
        pool.complete(ids[5]).unwrap();
        assert_eq!(pool.free_in_pool(), 8);
    }

    #[test]
    fn the_plain_pool_claims_from_the_depot() {
        let pool: TokenPool = TokenPool::new(4).unwrap();
        let ids: Vec<_> = (0..4).map(|i| pool.claim(rec(i)).unwrap()).collect();
        let mut c = pool.cache::<4>();
        for id in &ids {
            c.complete(*id).unwrap();
        }
        // Full at 4: the next completion would flush; flush explicitly.
        c.flush();
        assert_eq!(c.cached(), 0);
        // All four are in the depot as batches, none on the single list.
        let again: Vec<_> = (0..4).map(|i| pool.claim(rec(i)).unwrap()).collect();
        assert_eq!(pool.claim(rec(9)), Err(TokenError::Exhausted));
        for id in again {
            pool.complete(id).unwrap();
        }
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn optional_ids_keep_every_value_through_the_pool() {
        // Peer 0, u32::MAX and "no peer" are three different records; the
        // compact layout must not fold any two of them.
        let pool: TokenPool = TokenPool::new(4).unwrap();
        let mut recs = [rec(1), rec(2), rec(3), rec(4)];
        recs[0].peer = OptId::some(0);
        recs[1].peer = OptId::some(u32::MAX);
        recs[1].credit_key = OptId::some(u32::MAX);
        recs[2].credit_key = OptId::some(0);
        assert_ne!(recs[0], recs[3]);
        assert_ne!(recs[2], recs[3]);
        let ids: Vec<_> = recs.iter().map(|r| pool.claim(*r).unwrap()).collect();
        for (id, want) in ids.iter().zip(recs.iter()) {
            let got = pool.complete(*id).unwrap();
            assert_eq!(got, *want);
            assert_eq!(got.peer.get(), want.peer.get());
            assert_eq!(got.credit_key.get(), want.credit_key.get());
        }
        assert_eq!(recs[1].peer, Some(u32::MAX));
        assert_eq!(recs[3].peer, None);
        assert_eq!(recs[2].credit_key, Some(0));
        assert_eq!(core::mem::size_of::<Slot<TokenRecord>>(), 64);
        assert_eq!(core::mem::align_of::<Slot<TokenRecord>>(), 64);
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
