//! A use count and a close bit in one atomic word: what keeps registered
//! memory alive while the NIC may touch it.
//!
//! An engine pins a memory region for every transfer slice that may still
//! be posted and for every posted work request that uses it, and unpins
//! when that use ends. Deregistration *closes* the region: the close
//! succeeds only if nothing is pinned, and once closed no pin succeeds, so
//! the region can be freed the moment [`Pins::try_close`] returns `Ok`.
//! Deregistering memory that is in use is a typed refusal
//! ([`PinError::Busy`]), never a free of memory a transfer may touch.
//!
//! | call | word before | result |
//! |---|---|---|
//! | [`try_pin(n)`](Pins::try_pin) | open, `k` pins | open, `k + n` pins |
//! | [`try_pin(n)`](Pins::try_pin) | closed | [`PinError::Closed`], unchanged |
//! | [`unpin(n)`](Pins::unpin) | `k >= n` pins | `k - n` pins |
//! | [`unpin(n)`](Pins::unpin) | `k < n` pins | [`PinError::Underflow`], unchanged |
//! | [`try_close`](Pins::try_close) | open, 0 pins | closed |
//! | [`try_close`](Pins::try_close) | open, `k > 0` pins | [`PinError::Busy`]`(k)`, unchanged |
//! | [`try_close`](Pins::try_close) | closed | [`PinError::Closed`] |
//! | [`reopen`](Pins::reopen) | closed (always 0 pins) | open, 0 pins |
//! | [`reopen`](Pins::reopen) | open | [`PinError::NotClosed`] |
//!
//! Every transition is one read-modify-write of the same word, so pins and
//! closes are totally ordered: a pin that succeeded before a close makes
//! the close fail, and a pin after a close fails. There is no transient
//! state (a refused pin changes nothing), and no lock. `loom-tests/tests/pin.rs`
//! checks it, with a broken twin that closes by check-then-store.
//!
//! ```
//! use railyard_core::pin::{PinError, Pins};
//!
//! let p = Pins::new();
//! p.try_pin(2).unwrap();                          // two slices in flight
//! assert_eq!(p.try_close(), Err(PinError::Busy(2))); // deregistration refused
//! p.unpin(2).unwrap();
//! p.try_close().unwrap();                         // now it may be freed
//! assert_eq!(p.try_pin(1), Err(PinError::Closed));
//! ```

use core::fmt;

use crate::sync::{AtomicU64, Ordering};

/// The close bit; the low 63 bits count pins.
const CLOSED: u64 = 1 << 63;

/// Why a pin operation was refused. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PinError {
    /// The word is closed: no new pins (or already closed).
    Closed,
    /// `try_close` while this many pins are held.
    Busy(u64),
    /// `unpin` of more than is pinned.
    Underflow,
    /// The count would overflow 63 bits.
    Overflow,
    /// `reopen` of a word that is open.
    NotClosed,
}

impl fmt::Display for PinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("closed"),
            Self::Busy(n) => write!(f, "{n} uses in flight"),
            Self::Underflow => f.write_str("unpin of more than is pinned"),
            Self::Overflow => f.write_str("pin count overflow"),
            Self::NotClosed => f.write_str("reopen of an open pin word"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for PinError {}

/// A pin count with a close bit (see the [module docs](self)).
pub struct Pins(AtomicU64);

impl fmt::Debug for Pins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0.load(Ordering::Acquire);
        f.debug_struct("Pins")
            .field("pins", &(v & !CLOSED))
            .field("closed", &(v & CLOSED != 0))
            .finish()
    }
}

impl Default for Pins {
    fn default() -> Self {
        Self::new()
    }
}

impl Pins {
    /// Open, nothing pinned.
    ///
    /// ```
    /// use railyard_core::pin::Pins;
    /// let p = Pins::new();
    /// assert_eq!((p.pins(), p.is_closed()), (0, false));
    /// ```
    pub fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Closed, nothing pinned (an empty slot).
    ///
    /// ```
    /// use railyard_core::pin::{PinError, Pins};
    /// let p = Pins::new_closed(); // e.g. a slot not registered yet
    /// assert_eq!(p.try_pin(1), Err(PinError::Closed));
    /// p.reopen().unwrap();
    /// assert!(p.try_pin(1).is_ok());
    /// ```
    pub fn new_closed() -> Self {
        Self(AtomicU64::new(CLOSED))
    }

    /// Adds `n` pins if the word is open.
    ///
    /// ```
    /// use railyard_core::pin::{PinError, Pins};
    /// let p = Pins::new();
    /// p.try_pin(2).unwrap(); // a slice queued on the region, and its work request
    /// assert_eq!(p.try_close(), Err(PinError::Busy(2))); // deregistration must wait
    /// p.unpin(2).unwrap();
    /// p.try_close().unwrap();
    /// assert_eq!(p.try_pin(1), Err(PinError::Closed)); // no new use once closed
    /// ```
    #[inline]
    pub fn try_pin(&self, n: u64) -> Result<(), PinError> {
        let mut err = PinError::Closed;
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                if v & CLOSED != 0 {
                    err = PinError::Closed;
                    return None;
                }
                match v.checked_add(n) {
                    Some(w) if w & CLOSED == 0 => Some(w),
                    _ => {
                        err = PinError::Overflow;
                        None
                    }
                }
            })
            .map(drop)
            .map_err(|_| err)
    }

    /// Drops `n` pins.
    ///
    /// ```
    /// use railyard_core::pin::{PinError, Pins};
    /// let p = Pins::new();
    /// p.try_pin(1).unwrap();
    /// assert_eq!(p.unpin(2), Err(PinError::Underflow)); // refused, unchanged
    /// assert_eq!(p.pins(), 1);
    /// p.unpin(1).unwrap();
    /// ```
    #[inline]
    pub fn unpin(&self, n: u64) -> Result<(), PinError> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v & !CLOSED >= n).then(|| v - n)
            })
            .map(drop)
            .map_err(|_| PinError::Underflow)
    }

    /// Closes the word if nothing is pinned. After `Ok`, no pin succeeds
    /// until [`reopen`](Self::reopen), so whatever the pins protect may be
    /// freed.
    ///
    /// ```
    /// use railyard_core::pin::{PinError, Pins};
    /// let p = Pins::new();
    /// p.try_close().unwrap(); // idle: deregister now
    /// assert!(p.is_closed());
    /// assert_eq!(p.try_close(), Err(PinError::Closed));
    /// ```
    pub fn try_close(&self) -> Result<(), PinError> {
        #[cfg(not(railyard_broken = "pins_check_then_close"))]
        {
            match self
                .0
                .compare_exchange(0, CLOSED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => Ok(()),
                Err(v) if v & CLOSED != 0 => Err(PinError::Closed),
                Err(v) => Err(PinError::Busy(v)),
            }
        }
        // Broken twin (loom): check, then store; a pin can land between.
        #[cfg(railyard_broken = "pins_check_then_close")]
        {
            let v = self.0.load(Ordering::Acquire);
            if v & CLOSED != 0 {
                return Err(PinError::Closed);
            }
            if v != 0 {
                return Err(PinError::Busy(v));
            }
            crate::sync::store_u64(&self.0, CLOSED, Ordering::Release);
            Ok(())
        }
    }

    /// Opens a closed word (a slot reused for a new region).
    ///
    /// ```
    /// use railyard_core::pin::{PinError, Pins};
    /// let p = Pins::new();
    /// assert_eq!(p.reopen(), Err(PinError::NotClosed));
    /// p.try_close().unwrap();
    /// p.reopen().unwrap(); // the slot is registered again
    /// assert!(!p.is_closed() && p.try_pin(1).is_ok());
    /// ```
    pub fn reopen(&self) -> Result<(), PinError> {
        self.0
            .compare_exchange(CLOSED, 0, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
            .map_err(|_| PinError::NotClosed)
    }

    /// Pins held now.
    ///
    /// ```
    /// use railyard_core::pin::Pins;
    /// let p = Pins::new();
    /// p.try_pin(3).unwrap();
    /// assert_eq!(p.pins(), 3);
    /// ```
    pub fn pins(&self) -> u64 {
        self.0.load(Ordering::Acquire) & !CLOSED
    }

    /// Whether the word is closed.
    ///
    /// ```
    /// use railyard_core::pin::Pins;
    /// assert!(Pins::new_closed().is_closed());
    /// assert!(!Pins::default().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.0.load(Ordering::Acquire) & CLOSED != 0
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;

    #[test]
    fn table_rows() {
        let p = Pins::new();
        assert_eq!(p.try_pin(3), Ok(()));
        assert_eq!(p.pins(), 3);
        assert_eq!(p.try_close(), Err(PinError::Busy(3)));
        assert_eq!(p.unpin(4), Err(PinError::Underflow));
        assert_eq!(p.pins(), 3);
        assert_eq!(p.unpin(3), Ok(()));
        assert_eq!(p.reopen(), Err(PinError::NotClosed));
        assert_eq!(p.try_close(), Ok(()));
        assert!(p.is_closed());
        assert_eq!(p.try_close(), Err(PinError::Closed));
        assert_eq!(p.try_pin(1), Err(PinError::Closed));
        assert_eq!(p.unpin(1), Err(PinError::Underflow));
        assert_eq!(p.pins(), 0);
        assert_eq!(p.reopen(), Ok(()));
        assert_eq!(p.try_pin(1), Ok(()));
    }

    #[test]
    fn overflow_is_refused_and_changes_nothing() {
        let p = Pins::new();
        p.try_pin(CLOSED - 1).unwrap();
        assert_eq!(p.try_pin(1), Err(PinError::Overflow));
        assert_eq!(p.try_pin(u64::MAX), Err(PinError::Overflow));
        assert_eq!(p.pins(), CLOSED - 1);
        assert!(!p.is_closed());
    }

    #[test]
    fn new_closed_is_an_empty_slot() {
        let p = Pins::new_closed();
        assert_eq!(p.try_pin(1), Err(PinError::Closed));
        assert_eq!(p.reopen(), Ok(()));
        assert_eq!(p.try_close(), Ok(()));
    }
}
