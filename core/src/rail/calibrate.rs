//! TTL calibration (RFC 4534): nearest-rank P99 of the maximum candidate
//! sample age over V1 non-cold decisions, rounded up to whole
//! milliseconds, at least 1 ms. Cold decisions are counted apart.
//!
//! Run a scenario with [`Variant::V1`](super::Variant::V1), peer accounting
//! on and [`RailConfig::trace`](super::RailConfig::trace) on (V1 scores
//! with NIC feedback, so the ages measured do not depend on the TTL being
//! calibrated), feed every [`Pick::trace`](super::Pick) to
//! [`TtlCalibrator::observe`], then use [`TtlCalibrator::ttl_ns`] as
//! [`RailConfig::peer_ttl_ns`](super::RailConfig::peer_ttl_ns).

use crate::time::{Nanos, NS_PER_MS};
use core::fmt;

/// Collects per-decision maximum sample ages in fixed storage (`N` ages).
///
/// ```
/// use railyard_core::rail::TtlCalibrator;
///
/// let mut cal = TtlCalibrator::<128>::new();
/// for age_us in 1..=100u64 {
///     cal.observe(Some(Some(age_us * 30_000))); // 30 µs .. 3 ms
/// }
/// cal.observe(Some(None)); // a cold decision: kept apart
/// assert_eq!(cal.cold(), 1);
/// // P99 (nearest rank: 99th of 100) = 2.97 ms, rounded up to 3 ms.
/// assert_eq!(cal.ttl_ns(), Ok(3_000_000));
/// ```
#[derive(Clone, Debug)]
pub struct TtlCalibrator<const N: usize> {
    ages: [Nanos; N],
    len: usize,
    cold: u64,
    dropped: u64,
}

impl<const N: usize> Default for TtlCalibrator<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Why no TTL could be calibrated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CalibrationError {
    /// No non-cold decision was observed.
    NoSamples {
        /// Cold decisions seen (kept apart, never used).
        cold: u64,
    },
}

impl fmt::Display for CalibrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CalibrationError::NoSamples { cold } => {
                write!(f, "no non-cold decisions to calibrate from ({cold} cold)")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for CalibrationError {}

impl<const N: usize> TtlCalibrator<N> {
    /// An empty calibrator.
    ///
    /// ```
    /// use railyard_core::rail::{CalibrationError, TtlCalibrator};
    /// let mut cal = TtlCalibrator::<64>::new();
    /// assert_eq!(cal.ttl_ns(), Err(CalibrationError::NoSamples { cold: 0 }));
    /// ```
    pub const fn new() -> Self {
        TtlCalibrator {
            ages: [0; N],
            len: 0,
            cold: 0,
            dropped: 0,
        }
    }

    /// Records one decision's trace: `Some(Some(age))` is a non-cold
    /// decision whose oldest candidate sample was `age` old; `Some(None)` a
    /// cold one (some candidate had no sample); `None` (no trace) is
    /// ignored. Beyond `N` ages, further ones are counted as dropped.
    ///
    /// ```
    /// use railyard_core::rail::TtlCalibrator;
    /// let mut cal = TtlCalibrator::<2>::new();
    /// cal.observe(Some(Some(400_000)));
    /// cal.observe(None); // no trace: ignored
    /// cal.observe(Some(None)); // cold
    /// cal.observe(Some(Some(1)));
    /// cal.observe(Some(Some(2))); // beyond N = 2: dropped, counted
    /// assert_eq!((cal.samples(), cal.cold(), cal.dropped()), (2, 1, 1));
    /// ```
    pub fn observe(&mut self, trace: Option<Option<Nanos>>) {
        match trace {
            Some(Some(age)) if self.len < N => {
                self.ages[self.len] = age;
                self.len += 1;
            }
            Some(Some(_)) => self.dropped += 1,
            Some(None) => self.cold += 1,
            None => {}
        }
    }

    /// Non-cold decisions recorded.
    ///
    /// ```
    /// use railyard_core::rail::TtlCalibrator;
    /// let mut cal = TtlCalibrator::<8>::new();
    /// cal.observe(Some(Some(5)));
    /// assert_eq!(cal.samples(), 1);
    /// ```
    pub fn samples(&self) -> usize {
        self.len
    }

    /// Cold decisions seen.
    ///
    /// ```
    /// use railyard_core::rail::{CalibrationError, TtlCalibrator};
    /// let mut cal = TtlCalibrator::<8>::new();
    /// cal.observe(Some(None));
    /// assert_eq!(cal.cold(), 1);
    /// assert_eq!(cal.ttl_ns(), Err(CalibrationError::NoSamples { cold: 1 })); // cold ones never count
    /// ```
    pub fn cold(&self) -> u64 {
        self.cold
    }

    /// Non-cold decisions not recorded because storage was full.
    ///
    /// ```
    /// use railyard_core::rail::TtlCalibrator;
    /// let mut cal = TtlCalibrator::<1>::new();
    /// cal.observe(Some(Some(5)));
    /// cal.observe(Some(Some(6)));
    /// assert_eq!(cal.dropped(), 1);
    /// ```
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Nearest-rank P99 of the recorded ages, rounded up to whole
    /// milliseconds, at least 1 ms. (Sorts the recorded ages in place.)
    ///
    /// ```
    /// use railyard_core::rail::TtlCalibrator;
    /// let mut cal = TtlCalibrator::<8>::new();
    /// cal.observe(Some(Some(10))); // 10 ns
    /// assert_eq!(cal.ttl_ns(), Ok(1_000_000)); // at least 1 ms
    /// ```
    pub fn ttl_ns(&mut self) -> Result<Nanos, CalibrationError> {
        let ages = &mut self.ages[..self.len];
        if ages.is_empty() {
            return Err(CalibrationError::NoSamples { cold: self.cold });
        }
        ages.sort_unstable();
        Ok(round_up_ms(ages[nearest_rank(ages.len(), 99) - 1]))
    }
}

/// Nearest-rank percentile index (1-based): `ceil(p / 100 × n)`, at least 1.
pub(crate) fn nearest_rank(n: usize, p: usize) -> usize {
    (n * p).div_ceil(100).max(1)
}

/// Rounds `ns` up to whole milliseconds, at least 1 ms.
pub(crate) fn round_up_ms(ns: Nanos) -> Nanos {
    ns.div_ceil(NS_PER_MS).max(1).saturating_mul(NS_PER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_definition() {
        assert_eq!(nearest_rank(1, 99), 1);
        assert_eq!(nearest_rank(100, 99), 99);
        assert_eq!(nearest_rank(101, 99), 100);
        assert_eq!(nearest_rank(200, 99), 198);
    }

    #[test]
    fn rounding_is_up_and_floored_at_one_ms() {
        assert_eq!(round_up_ms(0), NS_PER_MS);
        assert_eq!(round_up_ms(1), NS_PER_MS);
        assert_eq!(round_up_ms(NS_PER_MS), NS_PER_MS);
        assert_eq!(round_up_ms(NS_PER_MS + 1), 2 * NS_PER_MS);
    }

    #[test]
    fn cold_decisions_never_count() {
        let mut c = TtlCalibrator::<4>::new();
        c.observe(Some(None));
        c.observe(None);
        assert_eq!(c.ttl_ns(), Err(CalibrationError::NoSamples { cold: 1 }));
        c.observe(Some(Some(5 * NS_PER_MS)));
        for _ in 0..10 {
            c.observe(Some(None));
        }
        assert_eq!(c.ttl_ns(), Ok(5 * NS_PER_MS));
        assert_eq!(c.cold(), 11);
    }

    #[test]
    fn p99_ignores_the_top_percent_and_storage_is_bounded() {
        let mut c = TtlCalibrator::<200>::new();
        for i in 0..198 {
            c.observe(Some(Some(i * 1000)));
        }
        c.observe(Some(Some(999 * NS_PER_MS)));
        c.observe(Some(Some(998 * NS_PER_MS)));
        // rank 198 of 200 is the largest ordinary age, 197 µs → 1 ms.
        assert_eq!(c.ttl_ns(), Ok(NS_PER_MS));
        c.observe(Some(Some(1)));
        assert_eq!(c.dropped(), 1);
        assert_eq!(c.samples(), 200);
    }
}
