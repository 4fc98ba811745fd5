//! Time is passed in, never read.
//!
//! Every policy in core takes `now_ns: u64`: monotonic nanoseconds from a
//! clock the caller owns (the verbs shim uses `CLOCK_MONOTONIC`; the
//! simulator uses its own event clock). Core never calls the OS, so the same
//! inputs always give the same decisions.

/// Monotonic time in nanoseconds, supplied by the caller.
pub type Nanos = u64;

/// Nanoseconds per microsecond.
pub const NS_PER_US: u64 = 1_000;
/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// Time elapsed from `then` to `now`; zero if the clock appears to run
/// backwards (a caller bug we tolerate rather than wrap).
///
/// ```
/// use railyard_core::time::elapsed;
/// assert_eq!(elapsed(1_500, 1_000), 500);
/// assert_eq!(elapsed(1_000, 1_500), 0); // a clock read out of order is no time, never a wrap
/// ```
#[inline]
pub const fn elapsed(now: Nanos, then: Nanos) -> Nanos {
    now.saturating_sub(then)
}

/// Whether a deadline of `timeout` after `since` has passed at `now`.
///
/// ```
/// use railyard_core::time::{expired, NS_PER_MS};
/// assert!(!expired(5 * NS_PER_MS, 0, 10 * NS_PER_MS));
/// assert!(expired(10 * NS_PER_MS, 0, 10 * NS_PER_MS)); // at the deadline
/// ```
#[inline]
pub const fn expired(now: Nanos, since: Nanos, timeout: Nanos) -> bool {
    elapsed(now, since) >= timeout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_saturates_on_backwards_clock() {
        assert_eq!(elapsed(10, 25), 0);
        assert_eq!(elapsed(25, 10), 15);
    }

    #[test]
    fn expiry_is_inclusive() {
        assert!(!expired(109, 100, 10));
        assert!(expired(110, 100, 10));
    }
}
