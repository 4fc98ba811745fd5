//! The open doorbell chains of one post round: one per (endpoint, QP) key,
//! at most [`OPEN_CHAINS`] at once, fixed capacity, no allocation.
//!
//! A worker's queue interleaves slices of several QPs (a task's slices are
//! spread over the QPs of its endpoint, and a worker may post to several
//! endpoints). With a single chain flushed whenever the key changed, an
//! alternating queue (QP 0, QP 1, QP 0, ...) made every work request its own
//! `ibv_post_send`: one doorbell per request (on Soft-RoCE a syscall in
//! which the kernel runs the requester inline; on a NIC an MMIO write). With
//! one open chain per key, each QP's requests of a round go out in as few
//! doorbells as its chain capacity allows.
//!
//! Rules (what the worker relies on):
//! - a key has at most one open chain, and a key's items are flushed in the
//!   order they were pushed (per-QP posting order; keys are independent);
//! - a chain is flushed before a push would overflow it, and when a new key
//!   needs a slot and none is free (then an empty chain is re-keyed, else
//!   the fullest is flushed: the fewest doorbells);
//! - [`flush_all`](OpenChains::flush_all) flushes every open chain, in the
//!   order they were opened.

use heapless::Vec;

/// How many (endpoint, QP) chains a round keeps open: the QPs per endpoint
/// of a typical engine (2) times a few endpoints. Past it, the fullest chain
/// is flushed to make room.
pub(crate) const OPEN_CHAINS: usize = 4;

/// One chain's key: (endpoint word, QP index).
pub(crate) type ChainKey = (u64, u32);

/// Up to [`OPEN_CHAINS`] open chains of up to `CAP` items each.
pub(crate) struct OpenChains<T, const CAP: usize> {
    open: Vec<(ChainKey, Vec<T, CAP>), OPEN_CHAINS>,
}

impl<T, const CAP: usize> OpenChains<T, CAP> {
    /// No chain open.
    pub(crate) const fn new() -> Self {
        Self { open: Vec::new() }
    }

    /// The chain for `key`, with room for one more item: flushes (through
    /// `flush`, which must leave the chain empty) the key's chain if it is
    /// full, or the fullest chain if every slot is taken by another key.
    /// Returns the chain's index for [`push`](Self::push) and whether a
    /// flush ran.
    pub(crate) fn room(
        &mut self,
        key: ChainKey,
        mut flush: impl FnMut(&mut Vec<T, CAP>),
    ) -> (usize, bool) {
        if let Some(i) = self.open.iter().position(|(k, _)| *k == key) {
            let ch = &mut self.open[i].1;
            if ch.is_full() {
                flush(ch);
                ch.clear();
                return (i, true);
            }
            return (i, false);
        }
        if self.open.len() < OPEN_CHAINS {
            // `open` has room (checked above).
            let _ = self.open.push((key, Vec::new()));
            return (self.open.len() - 1, false);
        }
        // Every slot holds another key: re-key an empty chain, else flush
        // the fullest (ties: the first opened).
        let (i, flushed) = match self.open.iter().position(|(_, c)| c.is_empty()) {
            Some(i) => (i, false),
            None => {
                let i = (0..self.open.len())
                    .rev()
                    .max_by_key(|&i| self.open[i].1.len())
                    .unwrap_or(0);
                let ch = &mut self.open[i].1;
                flush(ch);
                ch.clear();
                (i, true)
            }
        };
        self.open[i].0 = key;
        (i, flushed)
    }

    /// Appends `item` to chain `i` (from [`room`](Self::room), which left
    /// room for it).
    pub(crate) fn push(&mut self, i: usize, item: T) {
        if let Some((_, ch)) = self.open.get_mut(i) {
            let _ = ch.push(item);
        }
    }

    /// Flushes every open chain (in the order they were opened) and closes
    /// them all.
    pub(crate) fn flush_all(&mut self, mut flush: impl FnMut(&mut Vec<T, CAP>)) {
        for (_, ch) in self.open.iter_mut() {
            if !ch.is_empty() {
                flush(ch);
                ch.clear();
            }
        }
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flush, as (key, items) in flush order.
    type Log = std::vec::Vec<(ChainKey, std::vec::Vec<u32>)>;

    /// Pushes `items` as (key, value) the way the worker does and returns
    /// the flushes.
    fn run<const CAP: usize>(items: &[(ChainKey, u32)]) -> Log {
        let mut log = Log::new();
        let mut ch: OpenChains<(ChainKey, u32), CAP> = OpenChains::new();
        let rec = |c: &mut Vec<(ChainKey, u32), CAP>, log: &mut Log| {
            let k = c[0].0;
            assert!(c.iter().all(|x| x.0 == k), "one key per chain: {c:?}");
            log.push((k, c.iter().map(|x| x.1).collect()));
        };
        for &(k, v) in items {
            let (i, _) = ch.room(k, |c| rec(c, &mut log));
            ch.push(i, (k, v));
        }
        ch.flush_all(|c| rec(c, &mut log));
        log
    }

    #[test]
    fn alternating_qps_batch_into_one_chain_each() {
        let items: std::vec::Vec<_> = (0..8).map(|v| ((7, v % 2), v)).collect();
        let log = run::<32>(&items);
        assert_eq!(
            log,
            vec![((7, 0), vec![0, 2, 4, 6]), ((7, 1), vec![1, 3, 5, 7])]
        );
    }

    #[test]
    fn a_full_chain_is_flushed_before_it_overflows_in_order() {
        let items: std::vec::Vec<_> = (0..7).map(|v| ((1, 0), v)).collect();
        let log = run::<3>(&items);
        assert_eq!(
            log,
            vec![
                ((1, 0), vec![0, 1, 2]),
                ((1, 0), vec![3, 4, 5]),
                ((1, 0), vec![6])
            ]
        );
    }

    #[test]
    fn more_keys_than_slots_flush_the_fullest_and_keep_per_key_order() {
        // Keys 0..=3 take the slots; key 0 is the fullest when key 4 comes.
        let mut items = vec![
            ((0, 0), 0),
            ((0, 0), 1),
            ((1, 0), 2),
            ((2, 0), 3),
            ((3, 0), 4),
        ];
        items.push(((4, 0), 5));
        items.push(((0, 0), 6));
        let log = run::<32>(&items);
        assert_eq!(log[0], ((0, 0), vec![0, 1]), "{log:?}");
        // Every item flushed exactly once, each key's items in push order.
        let mut all: std::vec::Vec<u32> = log.iter().flat_map(|(_, v)| v.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..7).collect::<std::vec::Vec<_>>());
        for k in 0..5u64 {
            let got: std::vec::Vec<u32> = log
                .iter()
                .filter(|(key, _)| key.0 == k)
                .flat_map(|(_, v)| v.clone())
                .collect();
            let want: std::vec::Vec<u32> = items
                .iter()
                .filter(|(key, _)| key.0 == k)
                .map(|x| x.1)
                .collect();
            assert_eq!(got, want, "key {k}: {log:?}");
        }
        assert_eq!(log.len(), 6, "one flush per chain: {log:?}");
    }

    #[test]
    fn an_empty_slot_is_rekeyed_without_a_flush() {
        let mut ch: OpenChains<u32, 4> = OpenChains::new();
        for k in 0..OPEN_CHAINS as u64 {
            let (i, f) = ch.room((k, 0), |_| panic!("no flush yet"));
            assert!(!f);
            if k != 2 {
                ch.push(i, k as u32);
            }
        }
        // Key 2's chain stayed empty (its post was refused): re-keyed.
        let (i, f) = ch.room((9, 0), |_| panic!("an empty slot was free"));
        assert!(!f);
        assert_eq!(i, 2);
        let mut n = 0;
        ch.flush_all(|c| n += c.len());
        assert_eq!(n, 3);
    }
}
