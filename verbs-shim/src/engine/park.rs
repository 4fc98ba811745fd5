//! A worker's parking lot: slices the composed hot path refused for a
//! reason only an event can change (issue #18 item 3, "no spinning on
//! avoided work").
//!
//! Before the lot, a refused slice went straight back to its queue and the
//! worker popped it again on its next round: a quarantined route was asked
//! tens of thousands of times during one cooldown, each time refused the
//! same way. Now a refusal *parks* the slice under a [`Block`]: the thing
//! that refused it (a route or device CC domain, a peer's credit, a QP, the
//! token pool) and the event that can change the answer. Until that event,
//! the block also holds back every other slice it would refuse (a slice is
//! matched against the blocks before it is offered to the hot path), so a
//! blocked route costs one refusal per state change, not one per round.
//!
//! | refusal | block key | woken by |
//! |---|---|---|
//! | `Deferred` (`BYTE_WINDOW`) | the deferring domain (route or device) | a release anywhere (a completion polled or an unposted tail) or a CC epoch: [`Stamp`] |
//! | `Avoided` (`PATH_QUARANTINED`) | the avoided domain | the cooldown deadline (`now_ns`, read from the domain's snapshot), else the next CC epoch |
//! | `Backpressure` (receiver credit) | the peer | [`Fabric::credit_changed`](super::fabric::Fabric::credit_changed) for that peer, or its `retry_after_us` |
//! | no token | every slice | a release or a CC epoch |
//! | QP full / endpoint saturated | that QP / endpoint | a release or a CC epoch |
//!
//! The lot is strictly worker-local (one per worker thread, never shared),
//! with its capacity fixed when the worker starts: parking never allocates.
//! When it is full, a refused slice goes back to its queue as before (and
//! the round stops), so a full lot degrades to the old behaviour, never
//! loses a slice. A parked slice holds nothing: every hold of its refused
//! post was given back, so a task deadline or a cancel settles it in the
//! slice table as it would a queued one; its parked reference is then
//! stale, and the hot path refuses it as such when it is woken (dropped,
//! nothing to release). Parked slices keep their queue time: they are
//! offered again before anything new from the queue.

use railyard_core::completion::{Path, Refusal};
use railyard_core::slice::SliceRef;
use std::collections::VecDeque;

/// Distinct blocks a lot tracks at once (a worker posts to few routes).
pub(crate) const MAX_BLOCKS: usize = 16;

/// Slices one lot holds at most.
pub(crate) const MAX_PARKED: usize = 8192;

/// A snapshot of "anything released since": the sum of every worker's
/// polled completions and unposted releases plus the CC epochs run. It
/// moves whenever a token, a QP slot or window bytes may have come back
/// (and at every CC epoch, when windows change). Pollers count a batch
/// after releasing it, so a stamp read after a refusal either includes a
/// release (and the refusal saw it) or a later read differs.
pub(crate) type Stamp = u64;

/// What a block holds back: the slices it would refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// One CC route domain.
    Route(u32),
    /// One local device (its CC device domain).
    Device(u16),
    /// One peer's receiver credit.
    Peer(u32),
    /// One QP of one endpoint (packed endpoint word, QP index).
    Qp(u64, u32),
    /// Every QP of one endpoint.
    Endpoint(u64),
    /// Every slice (the token pool is empty).
    Tokens,
}

/// The attributes of a slice a block is matched on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SliceKey {
    pub(crate) route: u32,
    pub(crate) device: u16,
    pub(crate) peer: u32,
    pub(crate) ep: u64,
    pub(crate) qp: u32,
}

impl Key {
    fn holds(self, s: &SliceKey) -> bool {
        match self {
            Key::Route(r) => s.route == r,
            Key::Device(d) => s.device == d,
            Key::Peer(p) => s.peer == p,
            Key::Qp(e, q) => s.ep == e && s.qp == q,
            Key::Endpoint(e) => s.ep == e,
            Key::Tokens => true,
        }
    }
}

/// The event that lifts a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The release [`Stamp`] moves away from this value.
    Release(Stamp),
    /// `now_ns` reaches this deadline.
    At(u64),
    /// The peer's credit sequence moves from `seq`, or `now_ns` reaches `at`.
    Credit { bucket: usize, seq: u64, at: u64 },
}

impl Wake {
    /// Whether only time (or an explicit unpark) can lift it: a worker may
    /// sleep until [`Lot::next_deadline`] instead of polling.
    fn timed(self) -> bool {
        !matches!(self, Wake::Release(_))
    }

    fn deadline(self) -> Option<u64> {
        match self {
            Wake::Release(_) => None,
            Wake::At(t) | Wake::Credit { at: t, .. } => Some(t),
        }
    }
}

/// One refusal, held until its event: the refusal itself is kept, so the
/// slices it holds back get the same typed observation as the one refused.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Block {
    pub(crate) key: Key,
    pub(crate) wake: Wake,
    pub(crate) refusal: Refusal,
}

impl Block {
    /// The block's refusal as it applies to a slice on `path` (a device
    /// domain holds back slices of several routes: each one's evidence
    /// names its own path).
    pub(crate) fn refusal_on(&self, path: Path) -> Refusal {
        match self.refusal {
            Refusal::Deferred { deferral, .. } => Refusal::Deferred { path, deferral },
            Refusal::Avoided { avoidance, .. } => Refusal::Avoided { path, avoidance },
            r => r,
        }
    }

    /// Whether a slice it holds back should first look for another rail
    /// (an avoided path; a full window or credit waits on its own rail).
    pub(crate) fn avoided(&self) -> bool {
        matches!(self.refusal, Refusal::Avoided { .. })
    }
}

#[derive(Clone, Copy, Debug)]
struct Parked {
    r: SliceRef,
    block: u8,
}

/// The current state of the wake sources, read once per round.
pub(crate) struct Now<F: Fn(usize) -> u64> {
    pub(crate) now: u64,
    pub(crate) stamp: Stamp,
    /// The credit sequence of a bucket.
    pub(crate) credit: F,
}

/// A worker's parking lot (see the module docs).
pub(crate) struct Lot {
    blocks: [Option<Block>; MAX_BLOCKS],
    /// Parked slices per block (a block is freed when it holds none).
    held: [u32; MAX_BLOCKS],
    parked: VecDeque<Parked>,
    cap: usize,
}

impl Lot {
    /// A lot for at most `cap` slices (clamped to [`MAX_PARKED`]); the only
    /// allocation it ever makes.
    pub(crate) fn new(cap: usize) -> Self {
        let cap = cap.clamp(1, MAX_PARKED);
        Self {
            blocks: [None; MAX_BLOCKS],
            held: [0; MAX_BLOCKS],
            parked: VecDeque::with_capacity(cap),
            cap,
        }
    }

    /// Slices parked.
    pub(crate) fn len(&self) -> usize {
        self.parked.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }

    /// The live block that would refuse slice `s`, if any.
    pub(crate) fn blocking(&self, s: &SliceKey) -> Option<u8> {
        self.blocks
            .iter()
            .position(|b| b.is_some_and(|b| b.key.holds(s)))
            .map(|i| i as u8)
    }

    /// The block `id` (live).
    pub(crate) fn block(&self, id: u8) -> Option<&Block> {
        self.blocks.get(usize::from(id)).and_then(Option::as_ref)
    }

    /// Opens a block for a fresh refusal (replacing a live one with the
    /// same key: the newer refusal is the current state). `None` if every
    /// block slot is taken or the lot is full: the caller falls back to
    /// re-queueing.
    pub(crate) fn open(&mut self, b: Block) -> Option<u8> {
        if self.parked.len() >= self.cap {
            return None;
        }
        if let Some(i) = self
            .blocks
            .iter()
            .position(|x| x.is_some_and(|x| x.key == b.key))
        {
            self.blocks[i] = Some(b);
            return Some(i as u8);
        }
        // A lifted block's slot is free only once its slices were taken.
        let i = (0..MAX_BLOCKS).find(|&i| self.blocks[i].is_none() && self.held[i] == 0)?;
        self.blocks[i] = Some(b);
        Some(i as u8)
    }

    /// Parks `r` under block `id`. False (nothing changed) if the lot is
    /// full or `id` is not live.
    pub(crate) fn park(&mut self, r: SliceRef, id: u8) -> bool {
        let i = usize::from(id);
        if self.parked.len() >= self.cap || self.block(id).is_none() {
            return false;
        }
        self.parked.push_back(Parked { r, block: id });
        self.held[i] += 1;
        true
    }

    /// Lifts every block whose event happened; returns how many were lifted.
    pub(crate) fn lift<F: Fn(usize) -> u64>(&mut self, n: &Now<F>) -> usize {
        let mut lifted = 0;
        for b in self.blocks.iter_mut() {
            let Some(x) = b else { continue };
            let up = match x.wake {
                Wake::Release(s) => n.stamp != s,
                Wake::At(t) => n.now >= t,
                Wake::Credit { bucket, seq, at } => n.now >= at || (n.credit)(bucket) != seq,
            };
            if up {
                *b = None;
                lifted += 1;
            }
        }
        lifted
    }

    /// Takes the parked slices whose block was lifted, oldest first, into
    /// `out` (at most its free capacity; the rest stay for the next round).
    /// The slices still blocked keep their order.
    pub(crate) fn take_ready<const N: usize>(&mut self, out: &mut heapless::Vec<SliceRef, N>) {
        let n = self.parked.len();
        for _ in 0..n {
            let Some(p) = self.parked.pop_front() else {
                break;
            };
            let i = usize::from(p.block);
            if self.blocks[i].is_none() && !out.is_full() {
                let _ = out.push(p.r);
                self.held[i] -= 1;
            } else {
                self.parked.push_back(p);
            }
        }
    }

    /// Drops the parked slices `current` says are no longer current (their
    /// task timed out, was canceled or failed meanwhile: settled elsewhere,
    /// nothing held); returns how many were dropped. Order is kept.
    pub(crate) fn retain_current(&mut self, mut current: impl FnMut(SliceRef) -> bool) -> usize {
        let n = self.parked.len();
        for _ in 0..n {
            let Some(p) = self.parked.pop_front() else {
                break;
            };
            if current(p.r) {
                self.parked.push_back(p);
            } else {
                self.held[usize::from(p.block)] -= 1;
            }
        }
        n - self.parked.len()
    }

    /// Empties the lot (shutdown), handing every parked slice to `f`.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(SliceRef)) {
        while let Some(p) = self.parked.pop_front() {
            f(p.r);
        }
        self.blocks = [None; MAX_BLOCKS];
        self.held = [0; MAX_BLOCKS];
    }

    /// Whether slices of a lifted block are still parked: a round takes only
    /// as many ready slices as it can post ([`take_ready`](Self::take_ready)),
    /// so the next round must take the rest even if no block lifts then
    /// (else, with no further refusal, they would wait for their deadline).
    pub(crate) fn has_ready(&self) -> bool {
        self.blocks
            .iter()
            .zip(self.held.iter())
            .any(|(b, &h)| b.is_none() && h > 0)
    }

    /// Whether every live block that holds slices is lifted only by time
    /// (or an unpark): then the worker may sleep until
    /// [`next_deadline`](Self::next_deadline).
    pub(crate) fn only_timed(&self) -> bool {
        self.live().all(|b| b.wake.timed())
    }

    /// The earliest deadline of a live block holding slices.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.live().filter_map(|b| b.wake.deadline()).min()
    }

    fn live(&self) -> impl Iterator<Item = &Block> {
        self.blocks
            .iter()
            .zip(self.held.iter())
            .filter_map(|(b, &h)| b.as_ref().filter(|_| h > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_core::cc::{Avoidance, Deferral, DomainKind};
    use railyard_core::endpoint::EndpointHandle;

    fn path() -> Path {
        Path {
            device: 0,
            qp: 0,
            route: 3,
            endpoint: EndpointHandle::default(),
        }
    }

    fn deferred() -> Refusal {
        Refusal::Deferred {
            path: path(),
            deferral: Deferral::byte_window(DomainKind::Route, 1 << 20, 1 << 20),
        }
    }

    fn avoided() -> Refusal {
        Refusal::Avoided {
            path: path(),
            avoidance: Avoidance::quarantined(DomainKind::Route),
        }
    }

    fn blk(key: Key, wake: Wake, refusal: Refusal) -> Block {
        Block { key, wake, refusal }
    }

    fn sk(route: u32) -> SliceKey {
        SliceKey {
            route,
            device: 0,
            peer: 0,
            ep: 1,
            qp: 0,
        }
    }

    fn r(index: u32) -> SliceRef {
        SliceRef { index, attempt: 1 }
    }

    fn now(now: u64, stamp: u64) -> Now<impl Fn(usize) -> u64> {
        Now {
            now,
            stamp,
            credit: |_| 0,
        }
    }

    #[test]
    fn ready_slices_a_round_could_not_take_are_taken_next_round() {
        let mut lot = Lot::new(16);
        let b = lot
            .open(blk(Key::Tokens, Wake::Release(1), deferred()))
            .unwrap();
        for i in 0..3 {
            assert!(lot.park(r(i), b));
        }
        assert!(!lot.has_ready());
        assert_eq!(lot.lift(&now(5, 2)), 1);
        let mut out = heapless::Vec::<SliceRef, 2>::new();
        lot.take_ready(&mut out);
        assert_eq!(out.as_slice(), &[r(0), r(1)]);
        // Nothing lifts in the next round, but one ready slice is left.
        assert_eq!(lot.lift(&now(6, 2)), 0);
        assert!(lot.has_ready());
        out.clear();
        lot.take_ready(&mut out);
        assert_eq!(out.as_slice(), &[r(2)]);
        assert!(!lot.has_ready());
        assert!(lot.is_empty());
    }

    #[test]
    fn a_block_holds_its_route_until_its_event_and_keeps_the_order() {
        let mut lot = Lot::new(16);
        let b = lot
            .open(blk(Key::Route(3), Wake::Release(7), deferred()))
            .unwrap();
        assert!(lot.park(r(1), b));
        assert_eq!(lot.blocking(&sk(3)), Some(b), "same route: held back");
        assert_eq!(lot.blocking(&sk(4)), None, "another route posts");
        assert!(lot.park(r(2), b));
        assert!(!lot.only_timed(), "a release block needs polling");
        // No release yet: nothing lifts, nothing is ready.
        assert_eq!(lot.lift(&now(10, 7)), 0);
        let mut out = heapless::Vec::<SliceRef, 8>::new();
        lot.take_ready(&mut out);
        assert!(out.is_empty());
        assert_eq!(lot.len(), 2);
        // A release: both come back, oldest first, and the route is free.
        assert_eq!(lot.lift(&now(11, 8)), 1);
        lot.take_ready(&mut out);
        assert_eq!(out.as_slice(), &[r(1), r(2)]);
        assert!(lot.is_empty());
        assert_eq!(lot.blocking(&sk(3)), None);
    }

    #[test]
    fn an_avoided_route_wakes_at_its_cooldown_deadline_not_before() {
        let mut lot = Lot::new(16);
        let b = lot
            .open(blk(Key::Route(3), Wake::At(1_500), avoided()))
            .unwrap();
        assert!(lot.park(r(1), b));
        assert!(lot.only_timed());
        assert_eq!(lot.next_deadline(), Some(1_500));
        // Releases do not lift a quarantine.
        assert_eq!(lot.lift(&now(1_499, 99)), 0);
        assert_eq!(lot.lift(&now(1_500, 99)), 1);
        let mut out = heapless::Vec::<SliceRef, 8>::new();
        lot.take_ready(&mut out);
        assert_eq!(out.as_slice(), &[r(1)]);
        assert_eq!(lot.next_deadline(), None);
    }

    #[test]
    fn credit_blocks_wake_on_their_bucket_or_their_retry_time() {
        let mut lot = Lot::new(16);
        let b = lot
            .open(blk(
                Key::Peer(5),
                Wake::Credit {
                    bucket: 5,
                    seq: 2,
                    at: 900,
                },
                avoided(),
            ))
            .unwrap();
        assert!(lot.park(r(1), b));
        let other = Now {
            now: 10,
            stamp: 0,
            credit: |k| if k == 5 { 2 } else { 40 },
        };
        assert_eq!(lot.lift(&other), 0, "another bucket moved");
        let granted = Now {
            now: 10,
            stamp: 0,
            credit: |_| 3,
        };
        assert_eq!(lot.lift(&granted), 1);
        // And the retry time alone lifts it too.
        let b = lot
            .open(blk(
                Key::Peer(5),
                Wake::Credit {
                    bucket: 5,
                    seq: 3,
                    at: 900,
                },
                avoided(),
            ))
            .unwrap();
        let mut out = heapless::Vec::<SliceRef, 8>::new();
        lot.take_ready(&mut out);
        assert!(lot.park(r(2), b));
        assert_eq!(lot.lift(&now(900, 0)), 1);
    }

    #[test]
    fn a_full_lot_refuses_and_changes_nothing() {
        let mut lot = Lot::new(2);
        let b = lot
            .open(blk(Key::Tokens, Wake::Release(0), deferred()))
            .unwrap();
        assert!(lot.park(r(1), b));
        assert!(lot.park(r(2), b));
        assert!(!lot.park(r(3), b), "full");
        assert!(lot
            .open(blk(Key::Route(9), Wake::Release(0), deferred()))
            .is_none());
        assert_eq!(lot.len(), 2);
        // Only `MAX_BLOCKS` distinct keys; a key already open is reused.
        let mut lot = Lot::new(64);
        for k in 0..MAX_BLOCKS as u32 {
            let b = blk(Key::Route(k), Wake::Release(0), deferred());
            assert!(lot.open(b).is_some());
        }
        let extra = blk(Key::Route(99), Wake::Release(0), deferred());
        assert!(lot.open(extra).is_none());
        let again = blk(Key::Route(0), Wake::Release(5), deferred());
        assert_eq!(lot.open(again), Some(0));
        // Ready slices beyond the caller's room stay parked, in order.
        let mut lot = Lot::new(8);
        let b = lot
            .open(blk(Key::Tokens, Wake::Release(0), deferred()))
            .unwrap();
        for i in 0..3 {
            assert!(lot.park(r(i), b));
        }
        lot.lift(&now(0, 1));
        let mut out = heapless::Vec::<SliceRef, 2>::new();
        lot.take_ready(&mut out);
        assert_eq!(out.as_slice(), &[r(0), r(1)]);
        let mut out = heapless::Vec::<SliceRef, 2>::new();
        lot.take_ready(&mut out);
        assert_eq!(out.as_slice(), &[r(2)]);
        let mut n = 0;
        lot.drain(|_| n += 1);
        assert_eq!((n, lot.len()), (0, 0));
    }

    #[test]
    fn stale_slices_leave_the_lot_and_free_their_block() {
        let mut lot = Lot::new(8);
        let key = blk(Key::Route(3), Wake::At(1_000), avoided());
        let b = lot.open(key).unwrap();
        for i in 0..4 {
            assert!(lot.park(r(i), b));
        }
        // Slices 1 and 3 timed out meanwhile.
        assert_eq!(lot.retain_current(|s| s.index % 2 == 0), 2);
        assert_eq!(lot.len(), 2);
        assert_eq!(lot.next_deadline(), Some(1_000));
        assert_eq!(lot.retain_current(|_| false), 2);
        assert!(lot.is_empty());
        assert_eq!(lot.next_deadline(), None, "an empty block is not live");
        // Its slot is reusable once lifted.
        lot.lift(&now(1_000, 0));
        for k in 0..MAX_BLOCKS as u32 {
            let b = Block {
                key: Key::Route(100 + k),
                ..key
            };
            assert!(lot.open(b).is_some(), "slot {k}");
        }
    }
}
