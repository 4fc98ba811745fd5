//! Selective signaling: which work requests of a doorbell chain ask for a
//! completion ([`SignalPolicy`]), and the per-QP, in-posting-order record
//! of posted work requests ([`PostOrder`]) that lets one completion retire
//! the unsignaled requests posted before it
//! ([`HotPath::complete_covered`](super::HotPath::complete_covered)).
//!
//! ## The rule
//!
//! On a reliable-connected QP the send queue completes in posting order.
//! A completion (CQE) for work request `W` therefore means every request
//! posted on that QP before `W` has completed too. An unsignaled request
//! that completes *successfully* produces no CQE; one that completes in
//! error always does (InfiniBand spec; rdma-core's rxe posts a CQE for any
//! WQE whose status is not success, `rxe_comp.c`, `do_complete`: `post =
//! ... || (wqe->wr.send_flags & IB_SEND_SIGNALED) || wqe->status !=
//! IB_WC_SUCCESS`, which includes every flushed WQE).
//!
//! So a CQE for `W` *covers* the requests recorded before `W` on the same
//! QP that are still in the record, and they are completed first, in
//! posting order, then `W` with its own status:
//!
//! | CQE for `W` | each covered request completes as |
//! |---|---|
//! | success | success (proven: RC completed it before `W`) |
//! | any error (including a flush) | `WR_FLUSH_ERR`: a derived flush, retryable, never a root failure |
//!
//! The second row is deliberately conservative: with a provider that
//! reports errors for every WQE (rxe) a covered request before an error
//! CQE did succeed, but a provider that flushed it *silently* would make a
//! "success" a lie (data never moved). RDMA WRITE and READ of the same
//! bytes are idempotent, so a needless retry is only work; a false success
//! is corruption.
//!
//! Every posted request is recorded (signaled or not), each record entry
//! is popped exactly once — by the CQE of the request itself or of a later
//! one — and a token completes at most once anyway (its `wr_id` carries the
//! token's generation), so whatever order success, error, flush or a
//! duplicate CQE arrive in, every token is released exactly once.
//!
//! ## What bounds an unsignaled request's latency
//!
//! [`SignalPolicy`] signals every `k`-th request of a doorbell chain **and
//! always the chain's last one**. An unsignaled request therefore never
//! waits for a later post (a QP that goes idle after a chain still gets the
//! CQE that covers all of it): its completion is seen when its own chain's
//! last request completes, at most `k - 1` requests later on the wire. The
//! per-QP counter of perftest's `--cq-mod` would cost a cross-chain state
//! and an idle-QP flush; with chains of up to 32 requests (Mooncake's
//! batches of 128 over 2 QPs fill them) the chain rule gives the same CQE
//! rate.
//!
//! ## Concurrency
//!
//! A [`PostOrder`] is single-producer single-consumer: the one thread that
//! posts on the QP records (before `ibv_post_send`, so a CQE polled before
//! the post returns already finds it) and the one thread that polls its
//! CQ pops. The loom model `order_cover_spsc` checks it (its broken twin
//! releases a slot to the poster before reading it).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use crate::sync::{AtomicU64, Ordering};
use crate::token::WrId;

/// Largest signal interval [`SignalPolicy`] accepts (a chain's last request
/// is always signaled, so a larger interval would change nothing for
/// chains of up to this many requests).
pub const MAX_SIGNAL_INTERVAL: u32 = 1024;

/// Which requests of a doorbell chain are signaled: every `interval`-th
/// and always the last (see the module docs for the latency bound).
///
/// ```
/// use railyard_core::completion::SignalPolicy;
/// let p = SignalPolicy::new(4).unwrap();
/// let marks: Vec<bool> = (0..6).map(|i| p.signaled(i, 6)).collect();
/// assert_eq!(marks, [false, false, false, true, false, true]);
/// assert!(SignalPolicy::EVERY.signaled(0, 6));
/// assert!(SignalPolicy::new(0).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignalPolicy {
    interval: u32,
}

/// A signal interval outside `1..=MAX_SIGNAL_INTERVAL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadSignalInterval(pub u32);

impl fmt::Display for BadSignalInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "signal interval {}: allowed 1..={MAX_SIGNAL_INTERVAL}",
            self.0
        )
    }
}

impl SignalPolicy {
    /// Every request signaled (interval 1).
    pub const EVERY: SignalPolicy = SignalPolicy { interval: 1 };

    /// Signal every `interval`-th request of a chain and its last.
    ///
    /// ```
    /// use railyard_core::completion::{BadSignalInterval, SignalPolicy, MAX_SIGNAL_INTERVAL};
    /// assert_eq!(SignalPolicy::new(16).unwrap().interval(), 16);
    /// assert_eq!(SignalPolicy::new(0), Err(BadSignalInterval(0)));
    /// assert!(SignalPolicy::new(MAX_SIGNAL_INTERVAL + 1).is_err());
    /// ```
    pub const fn new(interval: u32) -> Result<Self, BadSignalInterval> {
        if interval == 0 || interval > MAX_SIGNAL_INTERVAL {
            return Err(BadSignalInterval(interval));
        }
        Ok(Self { interval })
    }

    /// The interval.
    ///
    /// ```
    /// use railyard_core::completion::SignalPolicy;
    /// assert_eq!(SignalPolicy::EVERY.interval(), 1);
    /// ```
    pub const fn interval(self) -> u32 {
        self.interval
    }

    /// Whether the `i`-th request (from 0) of a chain of `len` is signaled.
    ///
    /// ```
    /// use railyard_core::completion::SignalPolicy;
    /// let p = SignalPolicy::new(32).unwrap();
    /// // A chain of 3 is shorter than the interval: only its last is signaled.
    /// assert_eq!([0, 1, 2].map(|i| p.signaled(i, 3)), [false, false, true]);
    /// assert!(p.signaled(31, 100));
    /// ```
    #[inline(always)]
    pub const fn signaled(self, i: usize, len: usize) -> bool {
        i + 1 >= len || (i + 1) % self.interval as usize == 0
    }
}

/// A [`PostOrder`] refused: capacity 0 or above 2^31.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadOrderCapacity(pub usize);

impl fmt::Display for BadOrderCapacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "post order capacity {}: allowed 1..=2^31", self.0)
    }
}

/// One QP's posted work requests, in posting order, until a CQE covers
/// them: a fixed single-producer single-consumer ring (allocated once;
/// record and pop never allocate). Size it by the QP's send-queue depth:
/// a request stays recorded only while it occupies a send-queue slot.
///
/// ```
/// use railyard_core::completion::PostOrder;
/// let o = PostOrder::new(8).unwrap();
/// assert!(o.record(&[10, 11, 12]));
/// // A CQE for 12 covers 10 and 11 (in order), then pops 12 itself.
/// let mut c = o.covered_by(12);
/// assert!(c.found());
/// assert_eq!((c.next(), c.next(), c.next()), (Some(10), Some(11), None));
/// assert_eq!(o.len(), 0);
/// ```
pub struct PostOrder {
    slots: Box<[AtomicU64]>,
    mask: u64,
    /// Next index to write (producer only; published with Release).
    head: AtomicU64,
    /// Next index to pop (consumer only; published with Release).
    tail: AtomicU64,
}

impl fmt::Debug for PostOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostOrder")
            .field("capacity", &self.slots.len())
            .field("len", &self.len())
            .finish()
    }
}

impl PostOrder {
    /// A ring of at least `capacity` entries (rounded up to a power of two).
    ///
    /// ```
    /// use railyard_core::completion::{BadOrderCapacity, PostOrder};
    /// let o = PostOrder::new(100).unwrap(); // MC_MAX_WR
    /// assert_eq!(o.capacity(), 128);
    /// assert_eq!(PostOrder::new(0).unwrap_err(), BadOrderCapacity(0));
    /// ```
    pub fn new(capacity: usize) -> Result<Self, BadOrderCapacity> {
        if capacity == 0 || capacity > 1 << 31 {
            return Err(BadOrderCapacity(capacity));
        }
        let n = capacity.next_power_of_two();
        let slots: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        Ok(Self {
            slots: slots.into_boxed_slice(),
            mask: n as u64 - 1,
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
        })
    }

    /// Entries the ring holds at most.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(4).unwrap();
    /// assert!(o.record(&[1, 2, 3, 4]));
    /// assert!(!o.record(&[5])); // full: post that chain fully signaled instead
    /// assert_eq!(o.capacity(), o.len());
    /// ```
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Entries recorded and not yet popped.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// o.record(&[1, 2, 3]);
    /// assert_eq!(o.len(), 3);
    /// o.covered_by(2).for_each(drop); // pops 1, then 2
    /// assert_eq!(o.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        let h = self.head.load(Ordering::Acquire);
        let t = self.tail.load(Ordering::Acquire);
        h.saturating_sub(t) as usize
    }

    /// Whether nothing is recorded.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// assert!(o.is_empty());
    /// o.record(&[7]);
    /// o.covered_by(7).for_each(drop);
    /// assert!(o.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Producer: records one chain, in posting order, all or nothing; false
    /// (nothing recorded) if it does not fit — post that chain fully
    /// signaled then: an unrecorded request's CQE completes it alone.
    /// Call it before the chain is posted.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(4).unwrap();
    /// assert!(o.record(&[1, 2, 3]));
    /// assert!(!o.record(&[4, 5])); // all or nothing
    /// assert_eq!(o.len(), 3);
    /// ```
    pub fn record(&self, wr_ids: &[WrId]) -> bool {
        let h = self.head.load(Ordering::Relaxed);
        let t = self.tail.load(Ordering::Acquire);
        let free = self.slots.len() as u64 - (h - t);
        if wr_ids.len() as u64 > free {
            return false;
        }
        for (i, &w) in wr_ids.iter().enumerate() {
            self.slots[((h + i as u64) & self.mask) as usize].store(w, Ordering::Relaxed);
        }
        self.head.store(h + wr_ids.len() as u64, Ordering::Release);
        true
    }

    /// Producer: forgets the `n` most recent entries (the `bad_wr` tail of
    /// the chain just recorded, which never reached the send queue). The
    /// consumer never pops past a posted request, so it cannot be inside
    /// them.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// o.record(&[1, 2, 3, 4]);
    /// // ibv_post_send returned bad_wr = the third: 3 and 4 never reached the queue.
    /// o.retract(2);
    /// assert_eq!(o.drain().collect::<Vec<_>>(), [1, 2]);
    /// ```
    pub fn retract(&self, n: usize) {
        let h = self.head.load(Ordering::Relaxed);
        let t = self.tail.load(Ordering::Acquire);
        self.head
            .store(h - (n as u64).min(h - t), Ordering::Release);
    }

    /// Consumer: the entries a CQE for `wr_id` covers — every entry before
    /// `wr_id`, yielded in posting order and popped as yielded; once they
    /// are all yielded `wr_id`'s own entry is popped too. If `wr_id` is not
    /// recorded (a chain that did not fit, or a duplicate CQE) nothing is
    /// yielded or popped ([`Covered::found`] is false).
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// o.record(&[1, 2, 3]);
    /// assert_eq!(o.covered_by(2).collect::<Vec<_>>(), [1]); // 2 itself popped at the end
    /// // A duplicate CQE (or an unrecorded request) covers nothing.
    /// let dup = o.covered_by(2);
    /// assert!(!dup.found());
    /// assert_eq!(o.len(), 1);
    /// ```
    pub fn covered_by(&self, wr_id: WrId) -> Covered<'_> {
        let t = self.tail.load(Ordering::Relaxed);
        let h = self.head.load(Ordering::Acquire);
        let mut at = t;
        while at < h {
            if self.slots[(at & self.mask) as usize].load(Ordering::Relaxed) == wr_id {
                return Covered {
                    order: self,
                    next: t,
                    end: at,
                    found: true,
                };
            }
            at += 1;
        }
        Covered {
            order: self,
            next: t,
            end: t,
            found: false,
        }
    }

    /// Consumer: pops every entry (the QP's send queue is gone: after its
    /// flush CQEs were drained, or when the endpoint that owned the QP is
    /// abandoned). Yields them in posting order; the caller releases each
    /// one as flushed.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// o.record(&[1, 2, 3]);
    /// // The QP was destroyed: release every recorded request as flushed.
    /// assert_eq!(o.drain().collect::<Vec<_>>(), [1, 2, 3]);
    /// assert!(o.is_empty());
    /// ```
    pub fn drain(&self) -> Covered<'_> {
        let t = self.tail.load(Ordering::Relaxed);
        let h = self.head.load(Ordering::Acquire);
        Covered {
            order: self,
            next: t,
            end: h,
            found: false,
        }
    }
}

/// The entries one CQE covers ([`PostOrder::covered_by`]), popped as they
/// are yielded. Dropping it early leaves the rest recorded (a later CQE
/// covers them).
#[derive(Debug)]
pub struct Covered<'o> {
    order: &'o PostOrder,
    next: u64,
    end: u64,
    found: bool,
}

impl Covered<'_> {
    /// Whether the CQE's own request was recorded (and not yet popped: it
    /// is popped, and this turns false, when the iterator is exhausted).
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// o.record(&[1, 2]);
    /// let mut c = o.covered_by(2);
    /// assert!(c.found());
    /// assert_eq!(c.next(), Some(1));
    /// assert_eq!(c.next(), None); // exhausted: 2 popped
    /// assert!(!c.found());
    /// ```
    pub fn found(&self) -> bool {
        self.found
    }

    /// Entries not yet yielded.
    ///
    /// ```
    /// use railyard_core::completion::PostOrder;
    /// let o = PostOrder::new(8).unwrap();
    /// o.record(&[1, 2, 3]);
    /// let mut c = o.covered_by(3);
    /// assert_eq!(c.remaining(), 2);
    /// c.next();
    /// assert_eq!(c.remaining(), 1);
    /// ```
    pub fn remaining(&self) -> usize {
        (self.end - self.next) as usize
    }
}

impl Iterator for Covered<'_> {
    type Item = WrId;

    #[inline]
    fn next(&mut self) -> Option<WrId> {
        let o = self.order;
        if self.next < self.end {
            // BROKEN twin (loom only): the slot is released to the producer
            // before it is read, so a new record can overwrite it first.
            #[cfg(railyard_broken = "order_tail_before_read")]
            o.tail.store(self.next + 1, Ordering::Release);
            let w = o.slots[(self.next & o.mask) as usize].load(Ordering::Relaxed);
            self.next += 1;
            // Read before it is released to the producer.
            #[cfg(not(railyard_broken = "order_tail_before_read"))]
            o.tail.store(self.next, Ordering::Release);
            return Some(w);
        }
        if self.found {
            // Every covered entry was yielded: pop the CQE's own.
            self.found = false;
            self.next = self.end + 1;
            self.end = self.next;
            o.tail.store(self.next, Ordering::Release);
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining(), Some(self.remaining()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn policy_signals_every_kth_and_the_last() {
        let p = SignalPolicy::new(3).unwrap();
        let m: Vec<usize> = (0..8).filter(|&i| p.signaled(i, 8)).collect();
        assert_eq!(m, [2, 5, 7]);
        assert!(p.signaled(0, 1));
        assert!((0..5).all(|i| SignalPolicy::EVERY.signaled(i, 5)));
        assert_eq!(SignalPolicy::new(0), Err(BadSignalInterval(0)));
        assert_eq!(
            SignalPolicy::new(MAX_SIGNAL_INTERVAL + 1),
            Err(BadSignalInterval(MAX_SIGNAL_INTERVAL + 1))
        );
        assert_eq!(
            BadSignalInterval(0).to_string(),
            "signal interval 0: allowed 1..=1024"
        );
    }

    #[test]
    fn covered_in_posting_order_and_each_once() {
        let o = PostOrder::new(4).unwrap();
        assert!(o.record(&[1, 2, 3]));
        assert!(o.record(&[4]));
        assert!(!o.record(&[5]), "full: all or nothing");
        let c: Vec<_> = o.covered_by(2).collect();
        assert_eq!(c, [1]);
        assert_eq!(o.len(), 2);
        // A duplicate CQE for 2 finds nothing and pops nothing.
        let mut d = o.covered_by(2);
        assert_eq!((d.next(), d.found()), (None, false));
        assert_eq!(o.len(), 2);
        let c: Vec<_> = o.covered_by(4).collect();
        assert_eq!(c, [3]);
        assert!(o.is_empty());
        // Wraps around.
        assert!(o.record(&[5, 6, 7, 8]));
        assert_eq!(o.covered_by(8).collect::<Vec<_>>(), [5, 6, 7]);
    }

    #[test]
    fn early_drop_leaves_the_rest_for_a_later_cqe() {
        let o = PostOrder::new(8).unwrap();
        assert!(o.record(&[1, 2, 3, 4]));
        assert_eq!(o.covered_by(3).next(), Some(1));
        assert_eq!(o.len(), 3);
        assert_eq!(o.covered_by(4).collect::<Vec<_>>(), [2, 3]);
        assert!(o.is_empty());
    }

    #[test]
    fn retract_and_drain() {
        let o = PostOrder::new(8).unwrap();
        assert!(o.record(&[1, 2, 3, 4]));
        o.retract(2);
        assert_eq!(o.len(), 2);
        assert!(!o.covered_by(4).found());
        o.retract(9);
        assert!(o.is_empty());
        assert!(o.record(&[7, 8]));
        assert_eq!(o.drain().collect::<Vec<_>>(), [7, 8]);
        assert!(o.is_empty());
        assert_eq!(PostOrder::new(0).unwrap_err(), BadOrderCapacity(0));
        assert_eq!(PostOrder::new(5).unwrap().capacity(), 8);
    }
}
