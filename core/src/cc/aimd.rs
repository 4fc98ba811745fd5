//! Pure AIMD policy: pressure from drain time, hysteresis, window updates.
//! Plain numbers in, plain numbers out; the controller feeds it samples
//! taken from its atomics once per control epoch.
//!
//! ## What counts as pressure
//!
//! Drain time is in-flight bytes at the rate the domain drained them this
//! epoch ([`drain_time_ns`]). With [`TargetMode::Fixed`] an epoch is
//! pressured when drain time exceeds the configured target (RFC 4162 read
//! literally). With [`TargetMode::Adaptive`] (the default) the threshold is
//! [`pressure_threshold_ns`]: `max(target, 1.125 × base / β)`, β being the
//! fraction of the window a decrease keeps (`decrease_percent`) and `base`
//! the domain's **base drain time** ([`BaseDrain`]): the windowed minimum of
//! its drain time over spans in which it held no more than one decrease
//! above the minimum window (`min_window / β`), i.e. what the path does with
//! the least backlog the controller leaves on it (base RTT in delay-based
//! datacenter CC). A span must drain [`BASE_SPAN_WINDOWS`] minimum windows
//! (so one completion more or less does not move it), must start at that
//! level (a backlog draining from above it drains at full rate and says
//! nothing about the floor), and is given up after [`BASE_SPAN_MAX_EPOCHS`]
//! (a stuck backlog is not the path's base).
//!
//! Why `1.125 / β` (2.25× at the default 50%): below the path's
//! bandwidth-delay product (BDP) drain time stays at the base; above it, it
//! grows with the window. A window that rises until drain time is
//! `1.125 × base / β` and is then cut to `β` of itself lands at 1.125 BDP, so
//! the AIMD saw-tooth never starves the path (the 12.5% margin covers the
//! minimum's downward bias and slice granularity), yet a standing queue of
//! more than about `(1.125/β − 1)` BDPs is still pressure. The configured
//! target is the threshold's floor, so the adaptive rule is never stricter
//! than the RFC's, and until a base is measured it *is* the RFC's: a path is
//! first backed off by the absolute target, and only the drain time it still
//! shows near the minimum window (where backing off further cannot help)
//! raises its threshold. A fabric whose senders drain the minimum window in
//! less than `β / 1.125` of the target (the 16-sender incast of `railyard sim
//! cc`: 80 µs against 200 µs) keeps exactly the RFC behaviour.
//!
//! What a drain-time rule cannot do: a sender alone cannot tell its own
//! NIC's queue from a shared switch queue (in a FIFO both grow with its
//! window), so a path whose *throughput* keeps rising with far more bytes in
//! flight than its base drain time suggests (Soft-RoCE under an emulated
//! CPU, where batching amortises per-request cost) would still be held near
//! `2.25 × base` worth of bytes (measured: 256–400 KiB, enforce at
//! 0.44–0.75× off for 64 KiB WRITE on rxe under qemu TCG). Rate
//! elasticity, a smoothed-rate excuse, coalesced wake-ups and spinning were
//! tried and rejected: each either lets a real incast through or does not
//! close the gap. The remedy is not in this rule but in what it is applied
//! to: on a software provider the send queue is host CPU, so its drain
//! time is [`DrainSignal::Advisory`](super::DrainSignal::Advisory) by
//! default — computed and reported, never enforced (see the
//! [`cc`](super) module docs). Hardware fabrics keep this rule.

use super::config::{Params, TargetMode};
use crate::time::{elapsed, Nanos};

/// Drain time of one epoch, ns: `in_flight` bytes at the rate observed
/// (`drained` bytes in `epoch_ns`). `None` for an empty domain or an epoch
/// of zero length (no sample); `u64::MAX` for a backlog that drained nothing.
///
/// ```
/// use railyard_core::cc::aimd::drain_time_ns;
/// // 1 MiB in flight, 4 MiB drained in a 1 ms epoch: 250 µs to drain.
/// assert_eq!(drain_time_ns(1 << 20, 4 << 20, 1_000_000), Some(250_000));
/// assert_eq!(drain_time_ns(1 << 20, 0, 1_000_000), Some(u64::MAX)); // drained nothing
/// assert_eq!(drain_time_ns(0, 4 << 20, 1_000_000), None); // empty: no sample
/// ```
#[inline]
pub const fn drain_time_ns(in_flight: u64, drained: u64, epoch_ns: u64) -> Option<u64> {
    if in_flight == 0 || epoch_ns == 0 {
        return None;
    }
    if drained == 0 {
        return Some(u64::MAX);
    }
    let t = (in_flight as u128) * (epoch_ns as u128) / (drained as u128);
    Some(if t > u64::MAX as u128 {
        u64::MAX
    } else {
        t as u64
    })
}

/// The drain time above which an epoch is pressured, ns (see the module
/// docs): the target for [`TargetMode::Fixed`] or without a base; else
/// `max(target, base × 112.5 / decrease_percent)`.
///
/// ```
/// use railyard_core::cc::aimd::pressure_threshold_ns;
/// use railyard_core::cc::{CcConfig, TargetMode};
///
/// let p = CcConfig::default().validate().unwrap(); // adaptive, target 200 µs, decrease 50 %
/// assert_eq!(pressure_threshold_ns(&p, None), 200_000); // no base yet: the RFC rule
/// assert_eq!(pressure_threshold_ns(&p, Some(400_000)), 900_000); // 2.25 × base
/// assert_eq!(pressure_threshold_ns(&p, Some(10_000)), 200_000); // never below the target
/// let fixed = CcConfig { target_mode: TargetMode::Fixed, ..CcConfig::default() }.validate().unwrap();
/// assert_eq!(pressure_threshold_ns(&fixed, Some(400_000)), 200_000);
/// ```
#[inline]
pub const fn pressure_threshold_ns(p: &Params, base: Option<u64>) -> u64 {
    match (p.target_mode, base) {
        (TargetMode::Adaptive, Some(b)) => {
            let pct = if p.decrease_percent == 0 {
                1
            } else {
                p.decrease_percent
            };
            let scaled = (b as u128) * 1125 / (10 * pct as u128);
            let scaled = if scaled > u64::MAX as u128 {
                u64::MAX
            } else {
                scaled as u64
            };
            if scaled > p.target_drain_ns {
                scaled
            } else {
                p.target_drain_ns
            }
        }
        _ => p.target_drain_ns,
    }
}

/// Bytes a floor-level span must drain before it yields one base sample,
/// in units of the minimum window: enough completions that one slice more
/// or less in an epoch does not move the sample much.
pub const BASE_SPAN_WINDOWS: u64 = 4;

/// Epochs a floor-level span may last before it is discarded unsampled: a
/// backlog that needs longer to drain four minimum windows is stuck, not a
/// measurement of the path.
pub const BASE_SPAN_MAX_EPOCHS: u32 = 64;

/// How long one base-drain period lasts: the base is the minimum over the
/// current and the previous period (10 s, the base-RTT window of BBR and
/// Copa), so a path that became slower is re-learned within two periods of
/// samples.
pub const BASE_PERIOD_NS: u64 = 10 * crate::time::NS_PER_SEC;

/// A domain's base drain time: a windowed minimum (two periods of
/// [`BASE_PERIOD_NS`]) of its drain-time samples. The monitor feeds it only
/// spans in which the domain held at most one decrease above the minimum
/// window (see the module docs), so the base is what the path does with the
/// least backlog the controller leaves on it.
///
/// A period ends only when a sample arrives after it, so the base never
/// expires without a replacement measured on the same path; it is
/// [cleared](BaseDrain::clear) when the route moves to a new generation.
///
/// ```
/// use railyard_core::cc::aimd::{BaseDrain, BASE_PERIOD_NS};
///
/// let mut b = BaseDrain::default();
/// assert_eq!(b.base(), None);
/// b.sample(3_000_000, 0);
/// b.sample(2_500_000, 1_000);
/// assert_eq!(b.base(), Some(2_500_000));
/// // Two periods later the old minimum has aged out.
/// b.sample(4_000_000, BASE_PERIOD_NS);
/// b.sample(4_000_000, 2 * BASE_PERIOD_NS);
/// assert_eq!(b.base(), Some(4_000_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BaseDrain {
    /// Minimum of the current period (0 = no sample yet).
    cur: u64,
    /// Minimum of the previous period (0 = none).
    prev: u64,
    /// Start of the current period.
    since: Nanos,
}

impl BaseDrain {
    /// Adds a drain-time sample taken at `now`.
    ///
    /// ```
    /// use railyard_core::cc::aimd::BaseDrain;
    /// let mut b = BaseDrain::default();
    /// b.sample(500_000, 0);
    /// b.sample(700_000, 1_000); // not a new minimum
    /// assert_eq!(b.base(), Some(500_000));
    /// ```
    #[inline]
    pub fn sample(&mut self, drain_ns: u64, now: Nanos) {
        let d = if drain_ns == 0 { 1 } else { drain_ns };
        if self.cur == 0 {
            self.since = now;
        } else if elapsed(now, self.since) >= BASE_PERIOD_NS {
            self.prev = self.cur;
            self.cur = 0;
            self.since = now;
        }
        self.cur = if self.cur == 0 || d < self.cur {
            d
        } else {
            self.cur
        };
    }

    /// The base drain time, if any sample was taken.
    ///
    /// ```
    /// use railyard_core::cc::aimd::BaseDrain;
    /// let mut b = BaseDrain::default();
    /// assert_eq!(b.base(), None);
    /// b.sample(0, 0); // a zero sample counts as 1 ns, never as "none"
    /// assert_eq!(b.base(), Some(1));
    /// ```
    #[inline]
    pub const fn base(&self) -> Option<u64> {
        match (self.cur, self.prev) {
            (0, 0) => None,
            (0, p) => Some(p),
            (c, 0) => Some(c),
            (c, p) => Some(if c < p { c } else { p }),
        }
    }

    /// Forgets every sample (the path changed).
    ///
    /// ```
    /// use railyard_core::cc::aimd::BaseDrain;
    /// let mut b = BaseDrain::default();
    /// b.sample(300_000, 0);
    /// b.clear(); // the route moved to a new generation
    /// assert_eq!(b.base(), None);
    /// ```
    #[inline]
    pub fn clear(&mut self) {
        *self = BaseDrain::default();
    }
}

/// Whether one epoch was pressured: drain time (`in_flight` bytes at the
/// drain rate observed this epoch) above `target_drain_ns` (the monitor
/// passes [`pressure_threshold_ns`]). A backlog that drained nothing at all
/// is pressured; an empty domain never is.
///
/// ```
/// use railyard_core::cc::aimd::epoch_pressured;
/// // 1 MiB in flight drained at 1 MiB per ms is 1 ms of queue: above a 200 µs target.
/// assert!(epoch_pressured(1 << 20, 1 << 20, 1_000_000, 200_000));
/// assert!(!epoch_pressured(1 << 20, 8 << 20, 1_000_000, 200_000)); // 125 µs
/// assert!(!epoch_pressured(0, 0, 1_000_000, 200_000)); // empty
/// ```
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
    ///
    /// ```
    /// use railyard_core::cc::aimd::{Aimd, Sample};
    /// use railyard_core::cc::CcConfig;
    /// let p = CcConfig::default().validate().unwrap(); // 3 epochs of pressure, 3 calm
    /// let mut a = Aimd::default();
    /// let hot = Sample { pressured: true, receiver_pressure: false, may_grow: true };
    /// a.epoch(&p, p.max_window, hot);
    /// a.epoch(&p, p.max_window, hot);
    /// assert_eq!((a.high_streak(), a.low_streak()), (2, 0));
    /// ```
    pub const fn high_streak(&self) -> u32 {
        self.high_streak
    }

    /// Consecutive calm epochs so far.
    ///
    /// ```
    /// use railyard_core::cc::aimd::{Aimd, Sample};
    /// use railyard_core::cc::CcConfig;
    /// let p = CcConfig::default().validate().unwrap(); // 3 epochs of pressure, 3 calm
    /// let mut a = Aimd::default();
    /// let hot = Sample { pressured: true, receiver_pressure: false, may_grow: true };
    /// let calm = Sample { pressured: false, ..hot };
    /// a.epoch(&p, p.max_window, hot);
    /// a.epoch(&p, p.max_window, calm);
    /// assert_eq!((a.high_streak(), a.low_streak()), (0, 1));
    /// ```
    pub const fn low_streak(&self) -> u32 {
        self.low_streak
    }

    /// Multiplicative decrease, floored at the minimum window.
    ///
    /// ```
    /// use railyard_core::cc::aimd::Aimd;
    /// use railyard_core::cc::CcConfig;
    /// let p = CcConfig::default().validate().unwrap(); // keep 50 %, floor 256 KiB
    /// assert_eq!(Aimd::decrease(&p, 4 << 20), 2 << 20);
    /// assert_eq!(Aimd::decrease(&p, 300 << 10), p.min_window);
    /// ```
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
    ///
    /// ```
    /// use railyard_core::cc::aimd::Aimd;
    /// use railyard_core::cc::CcConfig;
    /// let p = CcConfig::default().validate().unwrap(); // +64 KiB, cap 64 MiB
    /// assert_eq!(Aimd::increase(&p, 1 << 20), (1 << 20) + (64 << 10));
    /// assert_eq!(Aimd::increase(&p, p.max_window), p.max_window);
    /// ```
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
    ///
    /// ```
    /// use railyard_core::cc::aimd::{Aimd, Sample};
    /// use railyard_core::cc::CcConfig;
    /// let p = CcConfig::default().validate().unwrap(); // 3 epochs of pressure, 3 calm
    /// let mut a = Aimd::default();
    /// let hot = Sample { pressured: true, receiver_pressure: false, may_grow: true };
    /// let w = 8 << 20;
    /// assert_eq!(a.epoch(&p, w, hot).sustained, None); // inside the hysteresis band
    /// assert_eq!(a.epoch(&p, w, hot).sustained, None);
    /// let v = a.epoch(&p, w, hot); // third pressured epoch in a row
    /// assert_eq!((v.window, v.sustained), (4 << 20, Some(true)));
    /// // Receiver pressure (RNR) backs off at once.
    /// let rnr = Sample { pressured: false, receiver_pressure: true, may_grow: true };
    /// assert_eq!(Aimd::default().epoch(&p, w, rnr).window, 4 << 20);
    /// ```
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
