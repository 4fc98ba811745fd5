//! [`Lookup`]: a fixed-capacity map from a verbs object's identity (its
//! address, or its number on a device) to the integrator's slot for it,
//! read lock-free on the hot path.
//!
//! An integrator that sits *under* a transport it did not write (the verbs
//! preload) cannot hang its own state off the transport's `ibv_qp` or
//! `ibv_cq`: every `ibv_post_send` and every polled completion must find
//! "its" QP slot from what libibverbs hands over — the `ibv_qp *`, or the
//! completion's `qp_num`. Creating and destroying QPs is rare and may take
//! a lock; finding one is per work request and must not.
//!
//! | operation | who | cost |
//! |---|---|---|
//! | [`Lookup::get`] | any thread, concurrently | lock-free: a linear probe, two acquire loads per step and one re-check |
//! | [`Lookup::insert`] / [`Lookup::remove`] | one writer at a time (the caller serialises writers, e.g. under the lock its create / destroy path already takes) | a probe and two release stores |
//!
//! Open addressing with linear probing over `2^k` slots; a key is any
//! `u64` except `0` (empty) and `u64::MAX` (a removed entry: probes go on
//! past it, inserts reuse it). Construction allocates; nothing after it
//! does.
//!
//! ## Why a reader re-checks the key
//!
//! A slot can be removed and reused for another key while a reader is in
//! it. The writer stores the value before the key (both release), and the
//! reader loads key, value, key again (acquire): if the key it matched is
//! still there after it read the value, the value belongs to that key —
//! it may be an older or newer mapping *of the same key*, never another
//! key's. The loom models in `loom-tests/tests/lookup.rs` check it, with
//! two broken twins: one publishes the key before the value, one skips
//! the re-check.
//!
//! ```
//! use railyard_core::lookup::{Lookup, LookupError};
//!
//! let qps = Lookup::new(8).unwrap();
//! qps.insert(0x7f00_dead_b000, 3).unwrap(); // e.g. an `ibv_qp *` -> QP slot 3
//! assert_eq!(qps.get(0x7f00_dead_b000), Some(3));
//! assert_eq!(qps.get(0x7f00_dead_c000), None);
//! assert_eq!(qps.remove(0x7f00_dead_b000), Some(3));
//! assert_eq!(qps.get(0x7f00_dead_b000), None);
//! assert_eq!(qps.insert(0, 1), Err(LookupError::ReservedKey(0)));
//! ```

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use crate::sync::{store_u32, store_u64, AtomicU32, AtomicU64, AtomicUsize, Ordering};

const EMPTY: u64 = 0;
const REMOVED: u64 = u64::MAX;

/// Why a [`Lookup`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// A capacity of 0, or above 2^30.
    BadCapacity(usize),
    /// `0` and `u64::MAX` are reserved (empty and removed slots).
    ReservedKey(u64),
    /// Every slot holds a live key.
    Full,
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::BadCapacity(c) => write!(f, "lookup capacity {c}: allowed 1..=2^30"),
            LookupError::ReservedKey(k) => write!(f, "lookup key {k:#x} is reserved"),
            LookupError::Full => f.write_str("lookup map is full"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for LookupError {}

/// A fixed-capacity `u64 → u32` map: lock-free [`get`](Self::get), one
/// writer at a time (see the [module docs](self)).
pub struct Lookup {
    keys: Box<[AtomicU64]>,
    values: Box<[AtomicU32]>,
    mask: usize,
    /// Live keys (writer only; read for diagnostics).
    live: AtomicUsize,
}

impl fmt::Debug for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lookup")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish()
    }
}

#[inline(always)]
fn home(key: u64, mask: usize) -> usize {
    // Fibonacci hashing: addresses and QP numbers are far from uniform in
    // their low bits (allocation alignment, sequential numbers).
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask
}

impl Lookup {
    /// A map of at least `capacity` slots (rounded up to a power of two).
    /// Keep it at least twice the live keys you expect: probes stay short.
    ///
    /// ```
    /// use railyard_core::lookup::{Lookup, LookupError};
    /// assert_eq!(Lookup::new(100).unwrap().capacity(), 128);
    /// assert_eq!(Lookup::new(0).unwrap_err(), LookupError::BadCapacity(0));
    /// ```
    pub fn new(capacity: usize) -> Result<Self, LookupError> {
        if capacity == 0 || capacity > 1 << 30 {
            return Err(LookupError::BadCapacity(capacity));
        }
        let n = capacity.next_power_of_two();
        let keys: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(EMPTY)).collect();
        let values: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        Ok(Self {
            keys: keys.into_boxed_slice(),
            values: values.into_boxed_slice(),
            mask: n - 1,
            live: AtomicUsize::new(0),
        })
    }

    /// Slots in the map.
    ///
    /// ```
    /// use railyard_core::lookup::Lookup;
    /// let m = Lookup::new(3).unwrap();
    /// assert_eq!(m.capacity(), 4);
    /// ```
    pub fn capacity(&self) -> usize {
        self.keys.len()
    }

    /// Live keys.
    ///
    /// ```
    /// use railyard_core::lookup::Lookup;
    /// let m = Lookup::new(8).unwrap();
    /// m.insert(11, 1).unwrap();
    /// m.insert(11, 2).unwrap(); // replaces: still one key
    /// assert_eq!(m.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Whether no key is live.
    ///
    /// ```
    /// use railyard_core::lookup::Lookup;
    /// let m = Lookup::new(8).unwrap();
    /// m.insert(5, 0).unwrap();
    /// m.remove(5);
    /// assert!(m.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, if present. Any thread, lock-free; reserved
    /// keys are simply absent.
    ///
    /// ```
    /// use railyard_core::lookup::Lookup;
    /// let qp_by_num = Lookup::new(64).unwrap();
    /// qp_by_num.insert(0x11, 7).unwrap(); // wc.qp_num -> QP slot
    /// assert_eq!(qp_by_num.get(0x11), Some(7));
    /// assert_eq!(qp_by_num.get(u64::MAX), None); // reserved keys are simply absent
    /// ```
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        if key == EMPTY || key == REMOVED {
            return None;
        }
        let mut i = home(key, self.mask);
        for _ in 0..self.keys.len() {
            let k = self.keys[i].load(Ordering::Acquire);
            if k == EMPTY {
                return None;
            }
            if k == key {
                let v = self.values[i].load(Ordering::Acquire);
                // BROKEN twin (loom only): no re-check, so a slot removed
                // and reused for another key while we read hands us that
                // key's value.
                #[cfg(railyard_broken = "lookup_no_recheck")]
                return Some(v);
                #[cfg(not(railyard_broken = "lookup_no_recheck"))]
                {
                    if self.keys[i].load(Ordering::Acquire) == key {
                        return Some(v);
                    }
                    // Removed (and perhaps reused) under us: `key` is no
                    // longer here; it can only have been re-inserted
                    // further along its probe, so go on.
                }
            }
            i = (i + 1) & self.mask;
        }
        None
    }

    /// Maps `key` to `value` (replacing its value if present). One writer
    /// at a time: the caller serialises writers.
    ///
    /// ```
    /// use railyard_core::lookup::{Lookup, LookupError};
    /// let m = Lookup::new(2).unwrap();
    /// m.insert(1, 10).unwrap();
    /// m.insert(2, 20).unwrap();
    /// assert!(matches!(m.insert(3, 30), Err(LookupError::Full))); // typed, nothing changed
    /// assert_eq!(m.insert(u64::MAX, 1), Err(LookupError::ReservedKey(u64::MAX)));
    /// assert_eq!((m.get(1), m.get(2), m.len()), (Some(10), Some(20), 2));
    /// ```
    pub fn insert(&self, key: u64, value: u32) -> Result<(), LookupError> {
        if key == EMPTY || key == REMOVED {
            return Err(LookupError::ReservedKey(key));
        }
        let mut i = home(key, self.mask);
        let mut free = None;
        for _ in 0..self.keys.len() {
            let k = self.keys[i].load(Ordering::Relaxed);
            if k == key {
                store_u32(&self.values[i], value, Ordering::Release);
                return Ok(());
            }
            if k == REMOVED && free.is_none() {
                free = Some(i);
            }
            if k == EMPTY {
                free.get_or_insert(i);
                break;
            }
            i = (i + 1) & self.mask;
        }
        let i = free.ok_or(LookupError::Full)?;
        // BROKEN twin (loom only): the key is published before its value,
        // so a reader can match the key and read the slot's old value.
        #[cfg(railyard_broken = "lookup_key_first")]
        {
            store_u64(&self.keys[i], key, Ordering::Release);
            store_u32(&self.values[i], value, Ordering::Release);
        }
        #[cfg(not(railyard_broken = "lookup_key_first"))]
        {
            store_u32(&self.values[i], value, Ordering::Release);
            store_u64(&self.keys[i], key, Ordering::Release);
        }
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes `key`, returning its value. One writer at a time.
    ///
    /// ```
    /// use railyard_core::lookup::Lookup;
    /// let m = Lookup::new(4).unwrap();
    /// m.insert(9, 1).unwrap();
    /// assert_eq!(m.remove(9), Some(1));
    /// assert_eq!(m.remove(9), None);
    /// m.insert(9, 2).unwrap(); // the removed slot is reused
    /// assert_eq!(m.get(9), Some(2));
    /// ```
    pub fn remove(&self, key: u64) -> Option<u32> {
        if key == EMPTY || key == REMOVED {
            return None;
        }
        let mut i = home(key, self.mask);
        for _ in 0..self.keys.len() {
            let k = self.keys[i].load(Ordering::Relaxed);
            if k == EMPTY {
                return None;
            }
            if k == key {
                let v = self.values[i].load(Ordering::Relaxed);
                store_u64(&self.keys[i], REMOVED, Ordering::Release);
                self.live.fetch_sub(1, Ordering::Relaxed);
                return Some(v);
            }
            i = (i + 1) & self.mask;
        }
        None
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;

    #[test]
    fn insert_get_replace_remove() {
        let m = Lookup::new(4).unwrap();
        assert_eq!(m.capacity(), 4);
        for k in 1..=4u64 {
            m.insert(k, k as u32 * 10).unwrap();
        }
        assert_eq!(m.insert(5, 50), Err(LookupError::Full));
        assert_eq!(m.len(), 4);
        m.insert(2, 21).unwrap();
        assert_eq!(m.get(2), Some(21));
        assert_eq!(m.remove(2), Some(21));
        assert_eq!(m.remove(2), None);
        assert_eq!(m.get(2), None);
        // A removed slot is reused, and every other key stays reachable.
        m.insert(5, 50).unwrap();
        for (k, v) in [(1, 10), (3, 30), (4, 40), (5, 50)] {
            assert_eq!(m.get(k), Some(v), "key {k}");
        }
        assert_eq!(m.get(6), None);
    }

    #[test]
    fn reserved_keys_and_capacities_are_typed_errors() {
        assert_eq!(Lookup::new(0).unwrap_err(), LookupError::BadCapacity(0));
        assert!(Lookup::new((1 << 30) + 1).is_err());
        let m = Lookup::new(3).unwrap();
        assert_eq!(m.capacity(), 4);
        assert_eq!(m.insert(0, 1), Err(LookupError::ReservedKey(0)));
        assert_eq!(
            m.insert(u64::MAX, 1),
            Err(LookupError::ReservedKey(u64::MAX))
        );
        assert_eq!(m.get(0), None);
        assert_eq!(m.get(u64::MAX), None);
        assert_eq!(m.remove(u64::MAX), None);
    }

    #[test]
    fn many_keys_through_churn_stay_exact() {
        // 64 slots, 24 live keys, 10 000 remove/insert rounds: every live
        // key is found with its value, removed ones are gone.
        let m = Lookup::new(64).unwrap();
        let mut live: Vec<(u64, u32)> = Vec::new();
        let mut x: u64 = 0x1234_5678;
        for round in 0..10_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 200) + 1;
            if let Some(p) = live.iter().position(|&(k, _)| k == key) {
                assert_eq!(m.remove(key), Some(live[p].1));
                live.swap_remove(p);
            } else if live.len() < 24 {
                m.insert(key, round).unwrap();
                live.push((key, round));
            }
            if round % 97 == 0 {
                for &(k, v) in &live {
                    assert_eq!(m.get(k), Some(v));
                }
                assert_eq!(m.len(), live.len());
            }
        }
        for k in 1..=200u64 {
            let want = live.iter().find(|&&(lk, _)| lk == k).map(|&(_, v)| v);
            assert_eq!(m.get(k), want, "key {k}");
        }
    }
}
