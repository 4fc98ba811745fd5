//! [`TokenCookies`]: one 64-bit value per posted attempt, kept beside the
//! token by an integrator that must hand something back with the
//! completion — the application's own `wr_id`, under the verbs preload,
//! whose wire `wr_id` is the token.
//!
//! The poster sets the cookie after it claimed the token and before the
//! work request reaches the NIC; the poller reads it when the completion
//! arrives, *before* it completes the token (after that the slot may
//! belong to another post). While the token is live its slot cannot be
//! reused, so that read is exact. A late completion (its token already
//! completed, the slot perhaps claimed again) must never be handed the
//! next attempt's cookie: a set invalidates the slot before it writes the
//! value, and a get re-reads the token after the value, as a seqlock does.
//! The loom model `loom-tests/tests/cookie.rs` checks it; its broken twin
//! writes the value without invalidating first.
//!
//! ```
//! use railyard_core::token::{TokenCookies, TokenPool, TokenRecord};
//!
//! let pool: TokenPool = TokenPool::new(4).unwrap();
//! let cookies = TokenCookies::new(pool.capacity());
//! let wr_id = pool.claim(TokenRecord::default()).unwrap();
//! cookies.set(wr_id, 0xabc); // the application's own wr_id
//! // ... the completion for `wr_id` arrives:
//! assert_eq!(cookies.get(wr_id), Some(0xabc));
//! pool.complete(wr_id).unwrap();
//! // A later claim of the same slot: the old id no longer reads its cookie.
//! let next = pool.claim(TokenRecord::default()).unwrap();
//! cookies.set(next, 0xdef);
//! assert_eq!(cookies.get(wr_id), None);
//! assert_eq!(cookies.get(next), Some(0xdef));
//! ```

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use super::WrId;
use crate::sync::{fence, store_u64, AtomicU64, Ordering};

/// Never a live `wr_id` (a live id's sequence is odd; this one's is 0).
const INVALID: u64 = 0;

/// One value per token slot (see the module docs of `token::cookie`).
pub struct TokenCookies {
    slots: Box<[(AtomicU64, AtomicU64)]>,
}

impl fmt::Debug for TokenCookies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCookies")
            .field("capacity", &self.slots.len())
            .finish()
    }
}

#[inline(always)]
fn index(wr_id: WrId) -> usize {
    wr_id as u32 as usize
}

impl TokenCookies {
    /// Room for a pool of `capacity` slots (use the pool's capacity).
    pub fn new(capacity: usize) -> Self {
        let slots: Vec<(AtomicU64, AtomicU64)> = (0..capacity)
            .map(|_| (AtomicU64::new(INVALID), AtomicU64::new(0)))
            .collect();
        Self {
            slots: slots.into_boxed_slice(),
        }
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Sets the cookie of the live token `wr_id` (its claimer, before the
    /// work request is posted). An id beyond the table is ignored.
    #[inline]
    pub fn set(&self, wr_id: WrId, value: u64) {
        let Some((tok, val)) = self.slots.get(index(wr_id)) else {
            return;
        };
        // BROKEN twin (loom only): the value is written while the slot
        // still names the previous token, so a late read of that token can
        // take this value.
        #[cfg(not(railyard_broken = "cookie_no_invalidate"))]
        {
            store_u64(tok, INVALID, Ordering::Relaxed);
            fence(Ordering::Release);
        }
        store_u64(val, value, Ordering::Relaxed);
        store_u64(tok, wr_id, Ordering::Release);
    }

    /// The cookie set for `wr_id`, if the slot still holds it (`None`: a
    /// token never set here, or whose slot was set again since).
    #[inline]
    pub fn get(&self, wr_id: WrId) -> Option<u64> {
        let (tok, val) = self.slots.get(index(wr_id))?;
        if wr_id == INVALID || tok.load(Ordering::Acquire) != wr_id {
            return None;
        }
        let v = val.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (tok.load(Ordering::Relaxed) == wr_id).then_some(v)
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_and_invalid_ids_read_nothing() {
        let c = TokenCookies::new(2);
        c.set(5, 1); // beyond the table: ignored
        assert_eq!(c.get(5), None);
        assert_eq!(c.get(INVALID), None);
        c.set((1 << 32) | 1, 7);
        assert_eq!(c.get((1 << 32) | 1), Some(7));
        assert_eq!(c.get((3 << 32) | 1), None, "another id of the same slot");
    }
}
