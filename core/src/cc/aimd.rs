//! Pure AIMD policy: pressure from drain time, hysteresis, window updates.
//! Plain numbers in, plain numbers out; the controller feeds it samples
//! taken from its atomics once per control epoch.

use super::config::Params;

/// Whether one epoch was pressured: drain time (`in_flight` bytes at the
/// drain rate observed this epoch) above `target_drain_ns`. A backlog that
/// drained nothing at all is pressured; an empty domain never is.
#[inline]
pub const fn epoch_pressured(
    in_flight: u64,
    drained_bytes: u64,
    epoch_ns: u64,
    target_drain_ns: u64,
) -> bool {
    if in_flight == 0 {
        return false;
    }
    if drained_bytes == 0 {
        return true;
    }
    // drain_time = in_flight * epoch_ns / drained  >  target   (no division, no overflow)
    (in_flight as u128) * (epoch_ns as u128) > (target_drain_ns as u128) * (drained_bytes as u128)
}

/// One epoch's sample for a domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sample {
    /// The epoch was pressured (see [`epoch_pressured`]).
    pub pressured: bool,
    /// Receiver pressure (RNR) was reported on this route this epoch.
    pub receiver_pressure: bool,
    /// Growth is allowed (false while SUSPECT / QUARANTINED / PROBING).
    pub may_grow: bool,
}

/// The policy's verdict for one epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The new window.
    pub window: u64,
    /// Sustained pressure: `Some(true)` enter / stay congested,
    /// `Some(false)` sustained calm, `None` still inside the hysteresis band.
    pub sustained: Option<bool>,
}

/// Per-domain AIMD hysteresis state (owned by the monitor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Aimd {
    high_streak: u32,
    low_streak: u32,
}

impl Aimd {
    /// Consecutive pressured epochs so far.
    pub const fn high_streak(&self) -> u32 {
        self.high_streak
    }

    /// Consecutive calm epochs so far.
    pub const fn low_streak(&self) -> u32 {
        self.low_streak
    }

    /// Multiplicative decrease, floored at the minimum window.
    #[inline]
    pub const fn decrease(p: &Params, window: u64) -> u64 {
        let w = (window as u128 * p.decrease_percent as u128 / 100) as u64;
        if w < p.min_window {
            p.min_window
        } else {
            w
        }
    }

    /// Additive increase, capped at the maximum window.
    #[inline]
    pub const fn increase(p: &Params, window: u64) -> u64 {
        let w = window.saturating_add(p.additive_increase);
        if w > p.max_window {
            p.max_window
        } else {
            w
        }
    }

    /// Advances one epoch. Receiver pressure backs off immediately (it is
    /// route-local and already a sustained condition: the receiver exhausted
    /// its RNR retries); drain-time pressure needs `high_pressure_epochs` in a
    /// row, growth needs `low_pressure_epochs` calm epochs in a row.
    pub fn epoch(&mut self, p: &Params, window: u64, s: Sample) -> Verdict {
        if s.pressured || s.receiver_pressure {
            self.low_streak = 0;
            self.high_streak = self.high_streak.saturating_add(1);
            let sustained = s.receiver_pressure || self.high_streak >= p.high_pressure_epochs;
            if sustained {
                return Verdict {
                    window: Self::decrease(p, window),
                    sustained: Some(true),
                };
            }
            return Verdict {
                window,
                sustained: None,
            };
        }
        self.high_streak = 0;
        self.low_streak = self.low_streak.saturating_add(1);
        if self.low_streak >= p.low_pressure_epochs {
            let window = if s.may_grow {
                Self::increase(p, window)
            } else {
                window
            };
            return Verdict {
                window,
                sustained: Some(false),
            };
        }
        Verdict {
            window,
            sustained: None,
        }
    }
}
