//! Slice attempt identity (RFC 3136).
//!
//! A slice is the user-visible fragment of a transfer. It is no longer the
//! `wr_id` and no longer holds endpoint or QP-depth pointers: it is one
//! atomic word per slot in a [`SliceTable`], packing
//!
//! ```text
//!  63            32 31        16 15      8 7       0
//! +----------------+------------+---------+---------+
//! |   attempt id   |  retries   | status  | (spare) |
//! +----------------+------------+---------+---------+
//! ```
//!
//! Every transition is one CAS on that word, so:
//!
//! - the attempt id only grows (a retry or a local-NIC handoff starts a new
//!   attempt *before* the slice is re-enqueued, and reopening a recycled
//!   slot also advances it, so a [`SliceRef`] from a previous life of the
//!   slot can never match);
//! - a completion may settle the slice, bump its retry count or retry it
//!   **only** if its [`SliceRef::attempt`] is the current one; a stale
//!   completion gets [`SliceError::StaleAttempt`] and is a resource-release
//!   event only;
//! - a slice reaches exactly one terminal [`SliceState`]: no interleaving
//!   can make it both succeed and fail.
//!
//! ```
//! use railyard_core::slice::{Outcome, SliceError, SliceState, SliceTable};
//!
//! let table = SliceTable::new(4).unwrap();
//! let first = table.open(0).unwrap();
//! // The first attempt times out; the retry path starts attempt 2.
//! let second = table.retry(first, 3).unwrap().attempt().unwrap();
//! // The old attempt's completion arrives late: it may only release.
//! assert_eq!(table.settle(first, Outcome::Success), Err(SliceError::StaleAttempt));
//! assert_eq!(table.settle(second, Outcome::Success), Ok(SliceState::Succeeded));
//! ```

// Without `alloc` there is no table, only the pure transitions.
#![cfg_attr(not(feature = "alloc"), allow(dead_code))]

use core::fmt;

/// Names one attempt of one slice: the slice's slot in its table and the
/// attempt id that was current when the work was posted.
///
/// A completion carrying a `SliceRef` may mutate the slice only while
/// `attempt` is still the slice's current attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SliceRef {
    /// Slot of the slice in its [`SliceTable`].
    pub index: u32,
    /// Attempt id at post time.
    pub attempt: u32,
}

/// Where a slice stands. Exactly one of the terminal states is ever reached
/// per opening of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SliceState {
    /// Slot never opened.
    Idle = 0,
    /// Open: its current attempt is queued, posted or being retried.
    Pending = 1,
    /// Terminal: the current attempt completed successfully.
    Succeeded = 2,
    /// Terminal: failed (retries exhausted, or a non-retryable error).
    Failed = 3,
    /// Terminal: canceled by the caller.
    Canceled = 4,
    /// Terminal: the caller's deadline passed.
    TimedOut = 5,
}

impl SliceState {
    /// Whether this state is terminal.
    ///
    /// ```
    /// use railyard_core::slice::SliceState;
    /// assert!(SliceState::TimedOut.is_terminal());
    /// assert!(!SliceState::Pending.is_terminal());
    /// ```
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            SliceState::Succeeded
                | SliceState::Failed
                | SliceState::Canceled
                | SliceState::TimedOut
        )
    }

    const fn from_bits(b: u8) -> SliceState {
        match b {
            1 => SliceState::Pending,
            2 => SliceState::Succeeded,
            3 => SliceState::Failed,
            4 => SliceState::Canceled,
            5 => SliceState::TimedOut,
            _ => SliceState::Idle,
        }
    }
}

/// How the current attempt ended, as reported by its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The work completed successfully.
    Success,
    /// The work failed and will not be retried.
    Failure,
    /// The caller canceled the slice.
    Canceled,
    /// The caller's deadline passed.
    TimedOut,
}

impl Outcome {
    const fn state(self) -> SliceState {
        match self {
            Outcome::Success => SliceState::Succeeded,
            Outcome::Failure => SliceState::Failed,
            Outcome::Canceled => SliceState::Canceled,
            Outcome::TimedOut => SliceState::TimedOut,
        }
    }
}

/// What a retry request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retry {
    /// A new attempt is current; post it with this reference.
    NewAttempt(SliceRef),
    /// The retry budget was spent: the slice is now terminally `Failed`.
    Exhausted,
}

impl Retry {
    /// The new attempt, if one was started.
    ///
    /// ```
    /// use railyard_core::slice::{SliceError, SliceTable};
    ///
    /// let table = SliceTable::new(1).unwrap();
    /// let first = table.open(0).unwrap();
    /// let next = table.retry(first, 1).unwrap().attempt().unwrap(); // re-enqueue with `next`
    /// assert!(table.retry(next, 1).unwrap().attempt().is_none()); // budget spent
    /// assert_eq!(table.retry(next, 1), Err(SliceError::AlreadyTerminal));
    /// ```
    pub const fn attempt(self) -> Option<SliceRef> {
        match self {
            Retry::NewAttempt(r) => Some(r),
            Retry::Exhausted => None,
        }
    }
}

/// Why a slice operation was refused. A refusal changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SliceError {
    /// The reference's attempt is not the current one: a stale completion.
    /// It may release what its token owns, and nothing else.
    StaleAttempt,
    /// The current attempt already reached a terminal state.
    AlreadyTerminal,
    /// The slot is open (pending); it cannot be reopened until terminal.
    Busy,
    /// The slot was never opened.
    NotOpen,
    /// The index is beyond the table's capacity.
    OutOfRange,
    /// A table needs at least one slot and at most `u32::MAX` slots.
    InvalidCapacity,
}

impl fmt::Display for SliceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SliceError::StaleAttempt => "completion belongs to a stale attempt of this slice",
            SliceError::AlreadyTerminal => "slice already reached a terminal state",
            SliceError::Busy => "slice slot is still pending and cannot be reopened",
            SliceError::NotOpen => "slice slot was never opened",
            SliceError::OutOfRange => "slice index beyond the table's capacity",
            SliceError::InvalidCapacity => "slice table capacity must be between 1 and u32::MAX",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SliceError {}

/// A snapshot of one slice slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceStatus {
    /// Current attempt id.
    pub attempt: u32,
    /// Retries taken by this opening of the slot.
    pub retries: u16,
    /// Current state.
    pub state: SliceState,
}

/// Packs and unpacks the slot word. Kept free of atomics so the policy can
/// be tested with plain numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word(u64);

impl Word {
    const fn new(attempt: u32, retries: u16, state: SliceState) -> Word {
        Word(((attempt as u64) << 32) | ((retries as u64) << 16) | ((state as u64) << 8))
    }
    const fn attempt(self) -> u32 {
        (self.0 >> 32) as u32
    }
    const fn retries(self) -> u16 {
        (self.0 >> 16) as u16
    }
    const fn state(self) -> SliceState {
        SliceState::from_bits((self.0 >> 8) as u8)
    }
    const fn status(self) -> SliceStatus {
        SliceStatus {
            attempt: self.attempt(),
            retries: self.retries(),
            state: self.state(),
        }
    }
}

/// Next attempt id; skips 0 so that a default `SliceRef` never matches.
const fn next_attempt(a: u32) -> u32 {
    match a.wrapping_add(1) {
        0 => 1,
        n => n,
    }
}

/// Pure transition: the word after settling `r` with `outcome`, or why not.
fn settle_word(w: Word, r: SliceRef, outcome: Outcome) -> Result<Word, SliceError> {
    check_current(w, r)?;
    Ok(Word::new(w.attempt(), w.retries(), outcome.state()))
}

/// Pure transition: the word after retrying `r` within `max_retries`.
fn retry_word(w: Word, r: SliceRef, max_retries: u16) -> Result<Word, SliceError> {
    check_current(w, r)?;
    if w.retries() >= max_retries {
        Ok(Word::new(w.attempt(), w.retries(), SliceState::Failed))
    } else {
        Ok(Word::new(
            next_attempt(w.attempt()),
            w.retries() + 1,
            SliceState::Pending,
        ))
    }
}

/// Pure transition: the word after a handoff (new attempt, same retry count).
fn handoff_word(w: Word, r: SliceRef) -> Result<Word, SliceError> {
    check_current(w, r)?;
    Ok(Word::new(
        next_attempt(w.attempt()),
        w.retries(),
        SliceState::Pending,
    ))
}

fn check_current(w: Word, r: SliceRef) -> Result<(), SliceError> {
    if w.state() == SliceState::Idle {
        return Err(SliceError::NotOpen);
    }
    if w.attempt() != r.attempt {
        return Err(SliceError::StaleAttempt);
    }
    if w.state().is_terminal() {
        return Err(SliceError::AlreadyTerminal);
    }
    Ok(())
}

#[cfg(feature = "alloc")]
mod table {
    use super::*;
    use crate::sync::{AtomicU64, Ordering};
    use alloc::{boxed::Box, vec::Vec};

    /// Fixed-capacity table of slices; every operation is one CAS loop on
    /// the slot's word. Needs the `alloc` feature (allocated once in
    /// [`SliceTable::new`]).
    pub struct SliceTable {
        slots: Box<[AtomicU64]>,
    }

    impl fmt::Debug for SliceTable {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("SliceTable")
                .field("capacity", &self.slots.len())
                .finish()
        }
    }

    impl SliceTable {
        /// Creates a table of `capacity` idle slices.
        ///
        /// ```
        /// use railyard_core::slice::{SliceError, SliceTable};
        ///
        /// let table = SliceTable::new(4096).unwrap();
        /// assert_eq!((table.capacity(), table.pending()), (4096, 0));
        /// assert_eq!(SliceTable::new(0).unwrap_err(), SliceError::InvalidCapacity);
        /// ```
        pub fn new(capacity: usize) -> Result<Self, SliceError> {
            if capacity == 0 || capacity > u32::MAX as usize {
                return Err(SliceError::InvalidCapacity);
            }
            let slots: Vec<AtomicU64> = (0..capacity).map(|_| AtomicU64::new(0)).collect();
            Ok(Self {
                slots: slots.into_boxed_slice(),
            })
        }

        /// Number of slots.
        ///
        /// ```
        /// use railyard_core::slice::{SliceError, SliceTable};
        ///
        /// let table = SliceTable::new(2).unwrap();
        /// assert_eq!(table.capacity(), 2);
        /// assert_eq!(table.open(2), Err(SliceError::OutOfRange));
        /// ```
        pub fn capacity(&self) -> usize {
            self.slots.len()
        }

        fn slot(&self, index: u32) -> Result<&AtomicU64, SliceError> {
            self.slots.get(index as usize).ok_or(SliceError::OutOfRange)
        }

        /// Applies a pure transition with one CAS loop.
        #[inline]
        fn update(
            &self,
            index: u32,
            f: impl Fn(Word) -> Result<Word, SliceError>,
        ) -> Result<(Word, Word), SliceError> {
            let slot = self.slot(index)?;
            let mut cur = slot.load(Ordering::Acquire);
            loop {
                let next = f(Word(cur))?;
                #[cfg(railyard_broken = "slice_check_then_act")]
                {
                    // Broken variant: a separate load and store, so two
                    // owners can both pass the check.
                    crate::sync::spin_hint();
                    slot.store(next.0, Ordering::Release);
                    return Ok((Word(cur), next));
                }
                #[cfg(not(railyard_broken = "slice_check_then_act"))]
                match slot.compare_exchange_weak(cur, next.0, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return Ok((Word(cur), next)),
                    Err(actual) => cur = actual,
                }
            }
        }

        /// Opens slot `index` for a new slice (first use, or reuse after a
        /// terminal state). The attempt id advances, so references from the
        /// slot's previous life stay stale.
        ///
        /// ```
        /// use railyard_core::slice::{Outcome, SliceError, SliceTable};
        ///
        /// let table = SliceTable::new(1).unwrap();
        /// let life1 = table.open(0).unwrap();
        /// assert_eq!(table.open(0), Err(SliceError::Busy)); // pending: not reopened
        /// table.settle(life1, Outcome::Success).unwrap();
        /// let life2 = table.open(0).unwrap(); // reuse after a terminal state
        /// assert!(life2.attempt > life1.attempt);
        /// // A late completion of the slot's previous life cannot touch the new slice.
        /// assert_eq!(table.settle(life1, Outcome::Failure), Err(SliceError::StaleAttempt));
        /// ```
        pub fn open(&self, index: u32) -> Result<SliceRef, SliceError> {
            let (_, w) = self.update(index, |w| {
                if w.state() == SliceState::Pending {
                    return Err(SliceError::Busy);
                }
                Ok(Word::new(next_attempt(w.attempt()), 0, SliceState::Pending))
            })?;
            Ok(SliceRef {
                index,
                attempt: w.attempt(),
            })
        }

        /// Settles the current attempt with `outcome` (terminal).
        ///
        /// Only the owning attempt may do this: any other gets
        /// [`SliceError::StaleAttempt`] (release its resources and stop), and
        /// a second settle gets [`SliceError::AlreadyTerminal`].
        ///
        /// ```
        /// use railyard_core::slice::{Outcome, SliceError, SliceState, SliceTable};
        ///
        /// let table = SliceTable::new(1).unwrap();
        /// let s = table.open(0).unwrap();
        /// assert_eq!(table.settle(s, Outcome::Success), Ok(SliceState::Succeeded));
        /// // Exactly one terminal state: a second settle (say, a racing cancel) is refused.
        /// assert_eq!(table.settle(s, Outcome::Canceled), Err(SliceError::AlreadyTerminal));
        /// assert_eq!(table.status(0).unwrap().state, SliceState::Succeeded);
        /// ```
        pub fn settle(&self, r: SliceRef, outcome: Outcome) -> Result<SliceState, SliceError> {
            self.update(r.index, |w| settle_word(w, r, outcome))
                .map(|(_, w)| w.state())
        }

        /// Retries the current attempt: starts a new attempt (one more
        /// retry counted) before the caller re-enqueues the slice, or, with
        /// the budget of `max_retries` spent, settles it `Failed`.
        ///
        /// ```
        /// use railyard_core::slice::{Retry, SliceState, SliceTable};
        ///
        /// let table = SliceTable::new(1).unwrap();
        /// let a1 = table.open(0).unwrap();
        /// let Retry::NewAttempt(a2) = table.retry(a1, 1).unwrap() else { unreachable!() };
        /// assert_eq!(table.status(0).unwrap().retries, 1);
        /// assert_eq!(table.retry(a2, 1), Ok(Retry::Exhausted)); // one retry allowed
        /// assert_eq!(table.status(0).unwrap().state, SliceState::Failed);
        /// ```
        pub fn retry(&self, r: SliceRef, max_retries: u16) -> Result<Retry, SliceError> {
            let (_, w) = self.update(r.index, |w| retry_word(w, r, max_retries))?;
            Ok(if w.state() == SliceState::Pending {
                Retry::NewAttempt(SliceRef {
                    index: r.index,
                    attempt: w.attempt(),
                })
            } else {
                Retry::Exhausted
            })
        }

        /// Moves the slice to a new attempt without spending a retry: a
        /// local-NIC handoff or a rebind after an endpoint generation
        /// change. Old completions still draining become stale.
        ///
        /// ```
        /// use railyard_core::slice::{SliceError, SliceTable};
        ///
        /// let table = SliceTable::new(1).unwrap();
        /// let old = table.open(0).unwrap();
        /// let new = table.handoff(old).unwrap(); // e.g. moved to another NIC
        /// assert_eq!(table.status(0).unwrap().retries, 0); // no retry spent
        /// assert!(table.is_current(new) && !table.is_current(old));
        /// assert_eq!(table.handoff(old), Err(SliceError::StaleAttempt));
        /// ```
        pub fn handoff(&self, r: SliceRef) -> Result<SliceRef, SliceError> {
            let (_, w) = self.update(r.index, |w| handoff_word(w, r))?;
            Ok(SliceRef {
                index: r.index,
                attempt: w.attempt(),
            })
        }

        /// Whether `r` is the slice's current, non-terminal attempt.
        ///
        /// ```
        /// use railyard_core::slice::{Outcome, SliceRef, SliceTable};
        ///
        /// let table = SliceTable::new(1).unwrap();
        /// let s = table.open(0).unwrap();
        /// assert!(table.is_current(s));
        /// table.settle(s, Outcome::Canceled).unwrap();
        /// assert!(!table.is_current(s)); // terminal
        /// assert!(!table.is_current(SliceRef { index: 9, attempt: 1 })); // out of range
        /// ```
        pub fn is_current(&self, r: SliceRef) -> bool {
            self.slot(r.index)
                .map(|s| check_current(Word(s.load(Ordering::Acquire)), r).is_ok())
                .unwrap_or(false)
        }

        /// Snapshot of slot `index`.
        ///
        /// ```
        /// use railyard_core::slice::{SliceState, SliceTable};
        ///
        /// let table = SliceTable::new(2).unwrap();
        /// assert_eq!(table.status(1).unwrap().state, SliceState::Idle);
        /// let s = table.open(1).unwrap();
        /// let st = table.status(1).unwrap();
        /// assert_eq!((st.attempt, st.retries, st.state), (s.attempt, 0, SliceState::Pending));
        /// ```
        pub fn status(&self, index: u32) -> Result<SliceStatus, SliceError> {
            Ok(Word(self.slot(index)?.load(Ordering::Acquire)).status())
        }

        /// Number of slots that are open and not yet terminal (a scan, for
        /// diagnostics and leak checks).
        ///
        /// ```
        /// use railyard_core::slice::{Outcome, SliceTable};
        ///
        /// let table = SliceTable::new(8).unwrap();
        /// let a = table.open(0).unwrap();
        /// let _b = table.open(5).unwrap();
        /// assert_eq!(table.pending(), 2);
        /// table.settle(a, Outcome::Success).unwrap();
        /// assert_eq!(table.pending(), 1);
        /// ```
        pub fn pending(&self) -> usize {
            self.slots
                .iter()
                .filter(|s| Word(s.load(Ordering::Acquire)).state() == SliceState::Pending)
                .count()
        }
    }
}

#[cfg(feature = "alloc")]
pub use table::SliceTable;

#[cfg(all(test, feature = "alloc", not(railyard_loom)))]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips() {
        let w = Word::new(7, 3, SliceState::TimedOut);
        assert_eq!(
            w.status(),
            SliceStatus {
                attempt: 7,
                retries: 3,
                state: SliceState::TimedOut
            }
        );
    }

    #[test]
    fn stale_completion_cannot_settle_or_retry() {
        let t = SliceTable::new(1).unwrap();
        let a1 = t.open(0).unwrap();
        let a2 = t.retry(a1, 5).unwrap().attempt().unwrap();
        assert_eq!(
            t.settle(a1, Outcome::Failure),
            Err(SliceError::StaleAttempt)
        );
        assert_eq!(t.retry(a1, 5), Err(SliceError::StaleAttempt));
        assert_eq!(t.handoff(a1), Err(SliceError::StaleAttempt));
        let s = t.status(0).unwrap();
        assert_eq!(
            (s.attempt, s.retries, s.state),
            (a2.attempt, 1, SliceState::Pending)
        );
    }

    #[test]
    fn exactly_one_terminal_state() {
        let t = SliceTable::new(1).unwrap();
        let a = t.open(0).unwrap();
        assert_eq!(t.settle(a, Outcome::Success), Ok(SliceState::Succeeded));
        assert_eq!(
            t.settle(a, Outcome::Failure),
            Err(SliceError::AlreadyTerminal)
        );
        assert_eq!(t.retry(a, 9), Err(SliceError::AlreadyTerminal));
        assert_eq!(t.status(0).unwrap().state, SliceState::Succeeded);
    }

    #[test]
    fn retry_budget_ends_in_failed() {
        let t = SliceTable::new(1).unwrap();
        let mut a = t.open(0).unwrap();
        for _ in 0..2 {
            a = t.retry(a, 2).unwrap().attempt().unwrap();
        }
        assert_eq!(t.retry(a, 2), Ok(Retry::Exhausted));
        assert_eq!(t.status(0).unwrap().state, SliceState::Failed);
        assert_eq!(t.status(0).unwrap().retries, 2);
    }

    #[test]
    fn handoff_advances_attempt_not_retries() {
        let t = SliceTable::new(1).unwrap();
        let a = t.open(0).unwrap();
        let b = t.handoff(a).unwrap();
        assert_ne!(a.attempt, b.attempt);
        assert_eq!(t.status(0).unwrap().retries, 0);
        assert!(t.is_current(b) && !t.is_current(a));
    }

    #[test]
    fn reopen_only_after_terminal_and_old_refs_stay_stale() {
        let t = SliceTable::new(1).unwrap();
        let a = t.open(0).unwrap();
        assert_eq!(t.open(0), Err(SliceError::Busy));
        t.settle(a, Outcome::Canceled).unwrap();
        let b = t.open(0).unwrap();
        assert!(b.attempt > a.attempt);
        assert_eq!(t.settle(a, Outcome::Success), Err(SliceError::StaleAttempt));
        assert_eq!(t.pending(), 1);
    }

    #[test]
    fn bad_indices_and_unopened_slots_are_typed() {
        let t = SliceTable::new(2).unwrap();
        let r = SliceRef {
            index: 9,
            attempt: 1,
        };
        assert_eq!(t.settle(r, Outcome::Success), Err(SliceError::OutOfRange));
        let r = SliceRef {
            index: 1,
            attempt: 0,
        };
        assert_eq!(t.settle(r, Outcome::Success), Err(SliceError::NotOpen));
        assert_eq!(SliceTable::new(0).unwrap_err(), SliceError::InvalidCapacity);
    }

    #[test]
    fn attempt_id_skips_zero_on_wrap() {
        assert_eq!(next_attempt(u32::MAX), 1);
    }
}
