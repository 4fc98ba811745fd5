//! The discrete-event core: a binary-heap event queue ordered by
//! `(time, sequence)`.
//!
//! Two events at the same nanosecond fire in the order they were scheduled
//! (the sequence number breaks the tie), so a run is a pure function of its
//! configuration and seed: no hash-map iteration order, no wall clock, no
//! threads.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<E> {
    at: u64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap, we pop the earliest.
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// A deterministic event queue with a simulated clock in nanoseconds.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    now: u64,
    seq: u64,
    popped: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            now: 0,
            seq: 0,
            popped: 0,
        }
    }

    /// Current simulated time (ns).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Schedules `ev` at absolute time `at`; a time in the past is clamped
    /// to now (events never run backwards).
    pub fn at(&mut self, at: u64, ev: E) {
        let at = at.max(self.now);
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Schedules `ev` after `delay` ns.
    pub fn after(&mut self, delay: u64, ev: E) {
        self.at(self.now.saturating_add(delay), ev);
    }

    /// Pops the next event, advancing the clock, if it is not after `until`.
    pub fn pop_until(&mut self, until: u64) -> Option<E> {
        if self.heap.peek()?.at > until {
            return None;
        }
        let e = self.heap.pop()?;
        self.now = e.at;
        self.popped += 1;
        Some(e.ev)
    }

    /// Events processed so far.
    pub fn processed(&self) -> u64 {
        self.popped
    }

    /// Events still queued.
    pub fn pending(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::EventQueue;

    #[test]
    fn earliest_first_and_ties_in_schedule_order() {
        let mut q = EventQueue::new();
        q.at(10, "b");
        q.at(5, "a");
        q.at(10, "c");
        q.at(7, "x");
        let mut out = vec![];
        while let Some(e) = q.pop_until(u64::MAX) {
            out.push((q.now(), e));
        }
        assert_eq!(out, vec![(5, "a"), (7, "x"), (10, "b"), (10, "c")]);
        assert_eq!(q.processed(), 4);
    }

    #[test]
    fn pop_until_stops_and_past_is_clamped() {
        let mut q = EventQueue::new();
        q.at(100, 1);
        assert_eq!(q.pop_until(50), None);
        assert_eq!(q.pop_until(100), Some(1));
        q.at(3, 2); // in the past: runs now
        assert_eq!(q.pop_until(100), Some(2));
        assert_eq!(q.now(), 100);
    }
}
