//! The selector: shared per-device state, decisions, charges and releases.

use alloc::boxed::Box;
use alloc::vec::Vec;

#[cfg(feature = "peer-feedback")]
use super::ledger::{EwmaParams, PeerLedger, PinRefused, UnpinError};
use super::variant::{bandwidth_sample, ewma_step, NicView, Score, ScoreInput};
#[cfg(feature = "peer-feedback")]
use super::variant::{sample_state, score_input, SampleState, Variant};
use super::{
    sub_refusing_underflow, ConfigError, DeviceSpec, Outcome, PeerAccountingError, RailCharge,
    RailConfig, RailCounters, RailError, MAX_DEVICES,
};
use crate::sync::{AtomicU64, Ordering};
use crate::time::{elapsed, Nanos};
use crate::token::TokenRecord;

#[repr(align(64))]
struct DeviceState {
    nominal: u64,
    tier_q8: u16,
    inflight: AtomicU64,
    bw: AtomicU64,
    sample_ns: AtomicU64,
}

impl DeviceState {
    #[inline]
    fn nic_view(&self) -> NicView {
        NicView {
            inflight: self.inflight.load(Ordering::Relaxed),
            bw: self.bw.load(Ordering::Relaxed),
            nominal: self.nominal,
        }
    }
}

#[repr(align(64))]
struct Counters {
    probes: AtomicU64,
    fallbacks: AtomicU64,
    missing: AtomicU64,
    expired: AtomicU64,
    exhausted: AtomicU64,
    contended: AtomicU64,
    peer_errors: AtomicU64,
    nic_errors: AtomicU64,
    reclaimed: AtomicU64,
}

#[repr(align(64))]
struct DecisionClock(AtomicU64);

/// The worst possible score (placeholder before the first candidate).
const WORST: Score = Score {
    num: u64::MAX,
    den: 1,
};

/// Whether device `d` is in candidate mask `mask`.
#[inline(always)]
fn in_mask(mask: u64, d: usize) -> bool {
    d < 64 && mask & (1u64 << d) != 0
}

/// Peer-sample counts one decision saw, counted once it is carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    missing: u8,
    expired: u8,
    fallback: bool,
}

/// What [`Selector::choose`] chose for one slice (nothing charged or
/// counted yet: [`Selector::chosen`] counts it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The chosen local device (rail).
    pub device: u16,
    /// The choice was a probe of a non-best device.
    pub probe: bool,
    /// V2/V3 fell back to NIC-scope feedback for the candidate set.
    pub fallback: bool,
    /// With [`RailConfig::trace`] and the ledger on, for a known peer: the
    /// largest candidate sample age, `Some(None)` for a cold decision
    /// (feed it to [`TtlCalibrator::observe`](super::TtlCalibrator::observe)).
    pub trace: Option<Option<Nanos>>,
    pub(crate) tally: Tally,
}

impl Choice {
    /// A choice of `device` made without a selector (rail layer off).
    ///
    /// ```
    /// use railyard_core::rail::Choice;
    /// let c = Choice::plain(2);
    /// assert_eq!((c.device, c.probe, c.fallback, c.trace), (2, false, false, None));
    /// ```
    pub const fn plain(device: u16) -> Self {
        Choice {
            device,
            probe: false,
            fallback: false,
            trace: None,
            tally: Tally {
                missing: 0,
                expired: 0,
                fallback: false,
            },
        }
    }
}

/// The result of a single-slice decision.
#[derive(Debug)]
#[must_use = "the charge must be released exactly once"]
pub struct Pick {
    /// The charge taken on the chosen device (and peer).
    pub charge: RailCharge,
    /// This decision was a probe (not the best score).
    pub probe: bool,
    /// V2/V3 fell back to NIC feedback for the whole candidate set.
    pub fallback: bool,
    /// With [`RailConfig::trace`] and the ledger on, for a known peer: the
    /// largest peer sample age over the candidates, `Some(None)` if any
    /// candidate had no sample (a cold decision). Feed it to
    /// [`TtlCalibrator::observe`](super::TtlCalibrator::observe).
    pub trace: Option<Option<Nanos>>,
}

/// What [`Selector::plan`] decided for a multi-slice request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanInfo {
    /// The device with the best score (it got the remainder).
    pub best: u16,
    /// The device that got the probe slice, if this decision probed.
    pub probe: Option<u16>,
    /// V2/V3 fell back to NIC feedback for the whole candidate set.
    pub fallback: bool,
    /// As [`Pick::trace`]: with [`RailConfig::trace`] and the ledger on, for
    /// a known peer, the largest peer sample age over the candidates
    /// (`Some(None)`: a cold decision). An aggregate decision's trace, the
    /// input of RFC 4534's TTL calibration.
    pub trace: Option<Option<Nanos>>,
}

/// Inverse-score rail selector over a fixed set of candidate devices.
///
/// All methods take `&self`: submit threads pick and charge, completion
/// threads release, a monitor thread reclaims; nothing blocks.
///
/// ```
/// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
///
/// let nics = [DeviceSpec::new(25_000_000_000), DeviceSpec::new(25_000_000_000).with_tier_q8(512)];
/// let sel = Selector::new(&nics, RailConfig::default()).unwrap();
/// let pick = sel.pick(Some(7), 65536, 1_000);
/// assert_eq!(pick.charge.device(), 0); // same load, better tier
/// assert_eq!(sel.nic_inflight(0), Some(65536));
/// sel.release(pick.charge, Outcome::Completed { post_ns: 1_000 }, 9_000).unwrap();
/// assert_eq!(sel.nic_inflight(0), Some(0));
/// ```
pub struct Selector {
    devices: Box<[DeviceState]>,
    cfg: RailConfig,
    clock: DecisionClock,
    counters: Counters,
    #[cfg(feature = "peer-feedback")]
    ledger: Option<PeerLedger>,
}

impl core::fmt::Debug for Selector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Selector")
            .field("devices", &self.devices.len())
            .field("cfg", &self.cfg)
            .field("counters", &self.counters())
            .finish()
    }
}

impl Selector {
    /// Builds a selector over `devices` (allocates once; the ledger only if
    /// `cfg.peer_accounting`).
    ///
    /// ```
    /// use railyard_core::rail::{ConfigError, DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(12_500_000_000); 4], RailConfig::default()).unwrap();
    /// assert_eq!(sel.len(), 4);
    /// assert_eq!(Selector::new(&[DeviceSpec::new(0)], RailConfig::default()).unwrap_err(),
    ///     ConfigError::ZeroNominal { device: 0 });
    /// ```
    pub fn new(devices: &[DeviceSpec], cfg: RailConfig) -> Result<Self, ConfigError> {
        cfg.validate(devices)?;
        let states: Vec<DeviceState> = devices
            .iter()
            .map(|d| DeviceState {
                nominal: d.nominal_bps,
                tier_q8: d.tier_q8,
                inflight: AtomicU64::new(0),
                bw: AtomicU64::new(d.nominal_bps),
                sample_ns: AtomicU64::new(0),
            })
            .collect();
        let z = || AtomicU64::new(0);
        Ok(Selector {
            #[cfg(feature = "peer-feedback")]
            ledger: cfg.peer_accounting.then(|| {
                PeerLedger::new(
                    devices.len(),
                    cfg.peer_slots as usize,
                    cfg.history_target,
                    cfg.idle_reclaim_ns,
                )
            }),
            devices: states.into_boxed_slice(),
            cfg,
            clock: DecisionClock(z()),
            counters: Counters {
                probes: z(),
                fallbacks: z(),
                missing: z(),
                expired: z(),
                exhausted: z(),
                contended: z(),
                peer_errors: z(),
                nic_errors: z(),
                reclaimed: z(),
            },
        })
    }

    /// Number of candidate devices.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(1_000_000_000); 3], RailConfig::default()).unwrap();
    /// assert_eq!(sel.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Always false: a selector has at least one device.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(1_000_000_000)], RailConfig::default()).unwrap();
    /// assert!(!sel.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The configuration.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let cfg = RailConfig { probe_interval: 0, ..RailConfig::default() };
    /// let sel = Selector::new(&[DeviceSpec::new(1_000_000_000)], cfg).unwrap();
    /// assert_eq!(sel.config().probe_interval, 0);
    /// ```
    pub fn config(&self) -> &RailConfig {
        &self.cfg
    }

    /// Whether a peer ledger is compiled in and switched on.
    ///
    /// ```
    /// use railyard_core::rail::{ConfigError, DeviceSpec, RailConfig, Selector};
    /// let nics = [DeviceSpec::new(1_000_000_000)];
    /// assert!(!Selector::new(&nics, RailConfig::default()).unwrap().peer_accounting());
    /// let on = RailConfig { peer_accounting: true, ..RailConfig::default() };
    /// match Selector::new(&nics, on) {
    ///     Ok(sel) => assert!(sel.peer_accounting()), // built with `peer-feedback`
    ///     Err(e) => assert_eq!(e, ConfigError::PeerFeedbackNotCompiled),
    /// }
    /// ```
    #[inline]
    pub fn peer_accounting(&self) -> bool {
        #[cfg(feature = "peer-feedback")]
        return self.ledger.is_some();
        #[cfg(not(feature = "peer-feedback"))]
        false
    }

    /// Counts one decision; true if it is due to probe.
    #[inline]
    fn tick(&self) -> (u64, bool) {
        let n = self.clock.0.fetch_add(1, Ordering::Relaxed);
        (n, self.probe_due(n))
    }

    /// The next decision's number and whether it is due to probe, without
    /// counting it (a choice counts once it is carried out: [`Selector::chosen`]).
    #[inline]
    fn peek(&self) -> (u64, bool) {
        let n = self.clock.0.load(Ordering::Relaxed);
        (n, self.probe_due(n))
    }

    #[inline]
    fn probe_due(&self, n: u64) -> bool {
        let iv = u64::from(self.cfg.probe_interval);
        iv != 0 && n & (iv - 1) == iv - 1
    }

    /// Adds a decision's sample tally to the counters.
    #[inline]
    fn count(&self, t: Tally) {
        if t.missing > 0 {
            self.counters
                .missing
                .fetch_add(u64::from(t.missing), Ordering::Relaxed);
        }
        if t.expired > 0 {
            self.counters
                .expired
                .fetch_add(u64::from(t.expired), Ordering::Relaxed);
        }
        if t.fallback {
            self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The scoring mode of a decision for `peer`: `Some(view source)` if
    /// the ledger is on.
    #[cfg(feature = "peer-feedback")]
    #[inline]
    fn peer_mode(&self, peer: Option<u32>) -> Option<(&PeerLedger, u32, Variant)> {
        match (&self.ledger, peer) {
            (Some(l), Some(p)) => Some((l, p, self.cfg.variant)),
            _ => None,
        }
    }

    /// Score inputs of device `d` (NIC scope, or variant with ledger).
    #[inline]
    fn input(&self, d: usize, _peer: Option<u32>, _fallback: bool) -> ScoreInput {
        let nic = self.devices[d].nic_view();
        #[cfg(feature = "peer-feedback")]
        if let Some(l) = &self.ledger {
            let v = self.cfg.variant;
            return match _peer {
                Some(p) if v.uses_peer_feedback() => {
                    score_input(v, &nic, l.view(d, p).as_ref(), _fallback)
                }
                // V0/V1 never read the peer entry. An anonymous request has
                // no peer scope: V0 stays V0, V2/V3 score as V1.
                _ if v == Variant::V0 => score_input(Variant::V0, &nic, None, false),
                _ => score_input(Variant::V1, &nic, None, false),
            };
        }
        ScoreInput {
            inflight: nic.inflight,
            bw: nic.bw,
        }
    }

    #[inline]
    fn score(&self, d: usize, peer: Option<u32>, bytes: u64, fallback: bool) -> Score {
        Score::new(
            self.input(d, peer, fallback),
            bytes,
            self.devices[d].tier_q8,
        )
    }

    /// The whole-set feedback decision for `peer`: whether V2/V3 fall back,
    /// counting missing/expired samples; and the trace (max sample age).
    #[inline]
    fn feedback_state(
        &self,
        _peer: Option<u32>,
        _now_ns: Nanos,
        _mask: u64,
    ) -> (bool, Option<Option<Nanos>>, Tally) {
        #[cfg(feature = "peer-feedback")]
        if let Some((l, p, v)) = self.peer_mode(_peer) {
            let trace = self.cfg.trace;
            if !v.uses_peer_feedback() && !trace {
                return (false, None, Tally::default());
            }
            let (mut missing, mut expired, mut max_age) = (0u64, 0u64, Some(0u64));
            for d in (0..self.devices.len()).filter(|&d| in_mask(_mask, d)) {
                let view = l.view(d, p);
                match sample_state(view.as_ref(), _now_ns, self.cfg.peer_ttl_ns) {
                    SampleState::Fresh => {}
                    SampleState::Missing => missing += 1,
                    SampleState::Expired => expired += 1,
                }
                max_age = match (max_age, view) {
                    (Some(m), Some(pv)) if pv.bw != 0 => {
                        Some(m.max(elapsed(_now_ns, pv.sample_ns)))
                    }
                    _ => None,
                };
            }
            let fallback = v.uses_peer_feedback() && missing + expired > 0;
            let tally = if v.uses_peer_feedback() {
                Tally {
                    missing: missing as u8,
                    expired: expired as u8,
                    fallback,
                }
            } else {
                Tally::default()
            };
            return (fallback, trace.then_some(max_age), tally);
        }
        (false, None, Tally::default())
    }

    /// Lowest score over all candidates (lowest index on ties).
    #[cfg(feature = "peer-feedback")]
    #[inline]
    fn best(&self, peer: Option<u32>, bytes: u64, fallback: bool, mask: u64) -> (usize, Score) {
        let mut best: Option<(usize, Score)> = None;
        for d in (0..self.devices.len()).filter(|&d| in_mask(mask, d)) {
            let s = self.score(d, peer, bytes, fallback);
            if best.map_or(true, |(_, b)| s.better_than(b)) {
                best = Some((d, s));
            }
        }
        // `mask` is non-empty (checked by the callers).
        best.unwrap_or((0, WORST))
    }

    /// The single-slice decision: best device, its score, whole-set
    /// fallback, trace.
    #[inline]
    fn decide(
        &self,
        _peer: Option<u32>,
        b: u64,
        _now_ns: Nanos,
        mask: u64,
    ) -> (usize, Score, bool, Option<Option<Nanos>>, Tally) {
        #[cfg(feature = "peer-feedback")]
        if let Some(l) = &self.ledger {
            return self.decide_with_ledger(l, _peer, b, _now_ns, mask);
        }
        // No ledger (flag off or not compiled): NIC in-flight, NIC EWMA.
        let (d, s) = self.best_by(b, mask, |dev| ScoreInput {
            inflight: dev.inflight.load(Ordering::Relaxed),
            bw: dev.bw.load(Ordering::Relaxed),
        });
        (d, s, false, None, Tally::default())
    }

    /// The decision with the peer ledger switched on. Kept out of line so
    /// that the flag-off path of [`Selector::pick`] stays as small as the
    /// build without the ledger compiled in.
    #[cfg(feature = "peer-feedback")]
    #[inline(never)]
    fn decide_with_ledger(
        &self,
        l: &PeerLedger,
        _peer: Option<u32>,
        b: u64,
        _now_ns: Nanos,
        mask: u64,
    ) -> (usize, Score, bool, Option<Option<Nanos>>, Tally) {
        let v = self.cfg.variant;
        if let (Some(p), true, false) = (_peer, v.uses_peer_feedback(), self.cfg.trace) {
            return self.decide_peer_feedback(l, p, v, b, _now_ns, mask);
        }
        let (fallback, trace, tally) = self.feedback_state(_peer, _now_ns, mask);
        let (d, s) = match v {
            Variant::V0 => self.best_by(b, mask, |dev| ScoreInput {
                inflight: 0,
                bw: dev.nominal,
            }),
            Variant::V2 | Variant::V3 if _peer.is_some() => self.best(_peer, b, fallback, mask),
            _ => self.best_by(b, mask, |dev| ScoreInput {
                inflight: dev.inflight.load(Ordering::Relaxed),
                bw: dev.bw.load(Ordering::Relaxed),
            }),
        };
        (d, s, fallback, trace, tally)
    }

    /// Lowest score over all candidates with inputs from `input` (no
    /// ledger in the loop); lowest index on ties.
    #[inline(always)]
    fn best_by(
        &self,
        b: u64,
        mask: u64,
        input: impl Fn(&DeviceState) -> ScoreInput,
    ) -> (usize, Score) {
        let mut best: Option<(usize, Score)> = None;
        for (d, dev) in self.devices.iter().enumerate() {
            if !in_mask(mask, d) {
                continue;
            }
            let s = Score::new(input(dev), b, dev.tier_q8);
            if best.map_or(true, |(_, x)| s.better_than(x)) {
                best = Some((d, s));
            }
        }
        // `mask` is non-empty (checked by the callers).
        best.unwrap_or((0, WORST))
    }

    /// V2/V3 in one pass over the candidates: one ledger read per device,
    /// tracking the best with peer feedback and the best with NIC feedback,
    /// then keeping the one the whole-set rule calls for.
    #[cfg(feature = "peer-feedback")]
    #[inline]
    fn decide_peer_feedback(
        &self,
        l: &PeerLedger,
        p: u32,
        v: Variant,
        b: u64,
        now_ns: Nanos,
        mask: u64,
    ) -> (usize, Score, bool, Option<Option<Nanos>>, Tally) {
        let (mut missing, mut expired) = (0u64, 0u64);
        let (mut best_p, mut best_f) = ((0, WORST), (0, WORST));
        let mut first = true;
        for (d, dev) in self.devices.iter().enumerate() {
            if !in_mask(mask, d) {
                continue;
            }
            let nic = dev.nic_view();
            let view = l.view(d, p);
            match sample_state(view.as_ref(), now_ns, self.cfg.peer_ttl_ns) {
                SampleState::Fresh => {}
                SampleState::Missing => missing += 1,
                SampleState::Expired => expired += 1,
            }
            let sp = Score::new(score_input(v, &nic, view.as_ref(), false), b, dev.tier_q8);
            let sf = Score::new(score_input(v, &nic, view.as_ref(), true), b, dev.tier_q8);
            if first || sp.better_than(best_p.1) {
                best_p = (d, sp);
            }
            if first || sf.better_than(best_f.1) {
                best_f = (d, sf);
            }
            first = false;
        }
        if missing + expired == 0 {
            return (best_p.0, best_p.1, false, None, Tally::default());
        }
        let tally = Tally {
            missing: missing as u8,
            expired: expired as u8,
            fallback: true,
        };
        (best_f.0, best_f.1, true, None, tally)
    }

    /// The probe target for decision `n`: the next device in round-robin
    /// order, other than `best`, whose score is within the probe bound.
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn probe_target(
        &self,
        n: u64,
        best: usize,
        best_score: Score,
        peer: Option<u32>,
        bytes: u64,
        fb: bool,
        mask: u64,
    ) -> Option<usize> {
        let len = self.devices.len();
        let start = ((n / u64::from(self.cfg.probe_interval)) % len as u64) as usize;
        (0..len).map(|k| (start + k) % len).find(|&d| {
            d != best
                && in_mask(mask, d)
                && self
                    .score(d, peer, bytes, fb)
                    .within(best_score, self.cfg.probe_bound_q8)
        })
    }

    /// Chooses a device for one slice of `bytes` to `peer` and charges it.
    ///
    /// `peer` is the remote segment id, `None` if unknown (distinct from
    /// peer 0). `now_ns` is read only with the ledger on.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let cfg = RailConfig { probe_interval: 0, ..RailConfig::default() };
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], cfg).unwrap();
    /// let a = sel.pick(None, 1 << 20, 0);
    /// let b = sel.pick(None, 1 << 20, 0);
    /// // The second slice goes where less is queued.
    /// assert_ne!(a.charge.device(), b.charge.device());
    /// assert_eq!(sel.counters().decisions, 2);
    /// sel.release(a.charge, Outcome::Completed { post_ns: 0 }, 50_000).unwrap();
    /// sel.release(b.charge, Outcome::Failed, 50_000).unwrap();
    /// assert_eq!((sel.nic_inflight(0), sel.nic_inflight(1)), (Some(0), Some(0)));
    /// ```
    #[inline]
    pub fn pick(&self, peer: Option<u32>, bytes: u32, now_ns: Nanos) -> Pick {
        let c = self.choose_in(peer, bytes, now_ns, self.all());
        self.chosen(&c);
        Pick {
            charge: self.charge_unchecked(usize::from(c.device), peer, bytes, now_ns),
            probe: c.probe,
            fallback: c.fallback,
            trace: c.trace,
        }
    }

    /// Chooses a device for one slice of `bytes` to `peer` among the
    /// candidates in `mask` (bit `d` set: device `d` may be chosen; bits
    /// beyond [`len`](Self::len) are ignored) and charges **nothing** and
    /// counts nothing: once the rest of the path admitted the choice, charge
    /// it with [`Selector::charge`] and count it with [`Selector::chosen`]
    /// (a choice whose post was refused — a full window, no credit — is
    /// simply dropped, so it neither counts as a decision nor uses up the
    /// probe schedule).
    ///
    /// The composed hot path passes the devices whose route is not
    /// quarantined, so a quarantined rail is never chosen while another
    /// usable one exists. [`RailError::NoCandidate`] if `mask` names none.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, RailError, Selector};
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(100_000_000_000); 2], RailConfig::default()).unwrap();
    /// assert_eq!(sel.choose(None, 65536, 0, 0b10).unwrap().device, 1); // device 0 excluded
    /// assert_eq!(sel.choose(None, 65536, 0, 0), Err(RailError::NoCandidate));
    /// assert_eq!(sel.nic_inflight(1), Some(0)); // nothing charged
    /// ```
    #[inline]
    pub fn choose(
        &self,
        peer: Option<u32>,
        bytes: u32,
        now_ns: Nanos,
        mask: u64,
    ) -> Result<Choice, RailError> {
        let mask = mask & self.all();
        if mask == 0 {
            return Err(RailError::NoCandidate);
        }
        Ok(self.choose_in(peer, bytes, now_ns, mask))
    }

    /// [`choose`](Self::choose) over a non-empty `mask`.
    #[inline]
    fn choose_in(&self, peer: Option<u32>, bytes: u32, now_ns: Nanos, mask: u64) -> Choice {
        let (n, probe_due) = self.peek();
        let b = u64::from(bytes);
        let (mut device, score, fallback, trace, tally) = self.decide(peer, b, now_ns, mask);
        let mut probe = false;
        if probe_due {
            if let Some(d) = self.probe_target(n, device, score, peer, b, fallback, mask) {
                device = d;
                probe = true;
            }
        }
        Choice {
            device: device as u16,
            probe,
            fallback,
            trace,
            tally,
        }
    }

    /// Counts a [`choose`](Self::choose) decision that was carried out:
    /// one decision (the probe schedule advances), a probe if it probed,
    /// and the missing / expired peer samples and the fallback it saw.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let c = sel.choose(None, 65536, 0, 0b11).unwrap();
    /// // ... the endpoint and the window admitted it:
    /// let charge = sel.charge(c.device, None, 65536, 0).unwrap();
    /// sel.chosen(&c); // one decision carried out
    /// assert_eq!(sel.counters().decisions, 1);
    /// sel.release(charge, Outcome::Failed, 1).unwrap();
    /// ```
    #[inline]
    pub fn chosen(&self, c: &Choice) {
        self.clock.0.fetch_add(1, Ordering::Relaxed);
        if c.probe {
            self.counters.probes.fetch_add(1, Ordering::Relaxed);
        }
        self.count(c.tally);
    }

    /// Every candidate device, as a mask.
    #[inline]
    fn all(&self) -> u64 {
        match self.devices.len() {
            64.. => u64::MAX,
            n => (1u64 << n) - 1,
        }
    }

    /// Splits a request of `slices` slices of `slice_bytes` to `peer` across
    /// the candidates in proportion to their inverse scores; the remainder
    /// of the integer split goes to the best device. Writes per-device slice
    /// counts into `counts[..len()]` (zeroing them first) and charges
    /// nothing: charge each slice with its *actual* bytes via
    /// [`Selector::charge`].
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let nics = [DeviceSpec::new(10_000_000_000); 4];
    /// let cfg = RailConfig { probe_interval: 0, ..RailConfig::default() };
    /// let sel = Selector::new(&nics, cfg).unwrap();
    /// // 2 MiB in 64 KiB slices: 32 slices, 8 per idle, equal NIC.
    /// let mut counts = [0u32; 4];
    /// sel.plan(Some(1), 32, 65536, 0, &mut counts).unwrap();
    /// assert_eq!(counts, [8, 8, 8, 8]);
    /// let mut charges = Vec::new();
    /// for (d, &c) in counts.iter().enumerate() {
    ///     for _ in 0..c {
    ///         charges.push(sel.charge(d as u16, Some(1), 65536, 0).unwrap());
    ///     }
    /// }
    /// assert_eq!(sel.nic_inflight(2), Some(8 * 65536));
    /// for c in charges {
    ///     sel.release(c, Outcome::Failed, 1).unwrap();
    /// }
    /// assert_eq!(sel.nic_inflight(2), Some(0));
    /// assert_eq!(sel.nic_inflight(4), None); // not a candidate
    /// ```
    pub fn plan(
        &self,
        peer: Option<u32>,
        slices: u32,
        slice_bytes: u32,
        now_ns: Nanos,
        counts: &mut [u32],
    ) -> Result<PlanInfo, RailError> {
        self.plan_among(peer, slices, slice_bytes, now_ns, self.all(), counts)
    }

    /// [`plan`](Self::plan) over the candidates in `mask` only (bit `d`:
    /// device `d`); the others get 0 slices. [`RailError::NoCandidate`] if
    /// `mask` names none of the selector's devices.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    ///
    /// let cfg = RailConfig { probe_interval: 0, ..RailConfig::default() };
    /// let sel = Selector::new(&[DeviceSpec::new(10_000_000_000); 4], cfg).unwrap();
    /// let mut counts = [0u32; 4];
    /// sel.plan_among(Some(1), 32, 65536, 0, 0b1011, &mut counts).unwrap(); // device 2 quarantined
    /// assert_eq!(counts[2], 0);
    /// assert_eq!(counts.iter().sum::<u32>(), 32);
    /// ```
    pub fn plan_among(
        &self,
        peer: Option<u32>,
        slices: u32,
        slice_bytes: u32,
        now_ns: Nanos,
        mask: u64,
        counts: &mut [u32],
    ) -> Result<PlanInfo, RailError> {
        let len = self.devices.len();
        let Some(counts) = counts.get_mut(..len) else {
            return Err(RailError::CountsTooShort { need: len });
        };
        let mask = mask & self.all();
        if mask == 0 {
            return Err(RailError::NoCandidate);
        }
        counts.fill(0);
        let (n, probe_due) = self.tick();
        let (fallback, trace, tally) = self.feedback_state(peer, now_ns, mask);
        self.count(tally);
        let b = u64::from(slice_bytes);
        let mut inv = [0u64; MAX_DEVICES];
        let mut sum: u128 = 0;
        let mut best_of: Option<(usize, Score)> = None;
        for (d, w) in inv.iter_mut().enumerate().take(len) {
            if !in_mask(mask, d) {
                continue;
            }
            let s = self.score(d, peer, b, fallback);
            if best_of.map_or(true, |(_, x)| s.better_than(x)) {
                best_of = Some((d, s));
            }
            *w = s.inverse_q32().max(1);
            sum += u128::from(*w);
        }
        let (best, best_score) = best_of.unwrap_or((0, WORST));
        let mut given: u32 = 0;
        for (c, &w) in counts.iter_mut().zip(&inv[..len]) {
            // share <= slices, since w <= sum.
            let share = (u128::from(slices) * u128::from(w) / sum) as u32;
            *c = share;
            given += share;
        }
        counts[best] += slices - given;
        let mut probe = None;
        if probe_due && counts[best] > 0 {
            if let Some(d) = self.probe_target(n, best, best_score, peer, b, fallback, mask) {
                counts[best] -= 1;
                counts[d] += 1;
                probe = Some(d as u16);
                self.counters.probes.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(PlanInfo {
            best: best as u16,
            probe,
            fallback,
            trace,
        })
    }

    /// Charges `bytes` to `device` (and to `peer` there, if the ledger is
    /// on and the peer is known). Used for the slices of a [`Selector::plan`].
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, RailError, Selector};
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let c = sel.charge(0, Some(3), 1000, 0).unwrap();
    /// assert_eq!(sel.nic_inflight(0), Some(1000));
    /// assert_eq!(sel.charge(1, None, 1000, 0).unwrap_err(), RailError::UnknownDevice { device: 1 });
    /// sel.release(c, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn charge(
        &self,
        device: u16,
        peer: Option<u32>,
        bytes: u32,
        now_ns: Nanos,
    ) -> Result<RailCharge, RailError> {
        if usize::from(device) >= self.devices.len() {
            return Err(RailError::UnknownDevice { device });
        }
        Ok(self.charge_unchecked(usize::from(device), peer, bytes, now_ns))
    }

    #[inline]
    fn charge_unchecked(
        &self,
        device: usize,
        peer: Option<u32>,
        bytes: u32,
        _now_ns: Nanos,
    ) -> RailCharge {
        self.devices[device]
            .inflight
            .fetch_add(u64::from(bytes), Ordering::AcqRel);
        #[allow(unused_mut)]
        let mut charged = None;
        #[cfg(feature = "peer-feedback")]
        if let (Some(l), Some(p)) = (&self.ledger, peer) {
            charged = self.charge_peer(l, device, p, bytes, _now_ns);
        }
        let _ = peer;
        RailCharge {
            device: device as u16,
            peer: charged,
            bytes,
        }
    }

    /// The peer side of a charge (ledger on). Out of line, as
    /// [`Selector::decide_with_ledger`]. `Some(peer)` if the peer was charged.
    #[cfg(feature = "peer-feedback")]
    #[inline(never)]
    fn charge_peer(
        &self,
        l: &PeerLedger,
        device: usize,
        p: u32,
        bytes: u32,
        now_ns: Nanos,
    ) -> Option<u32> {
        match l.charge(device, p, bytes, now_ns) {
            Ok(()) => Some(p),
            Err(PinRefused::Exhausted | PinRefused::Saturated) => {
                self.counters.exhausted.fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(PinRefused::Contended) => {
                self.counters.contended.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Releases `charge` exactly once (it is consumed). On
    /// [`Outcome::Completed`] the latency feeds the NIC EWMA (and the peer
    /// EWMA, if the peer was charged).
    ///
    /// Both sides are always attempted: a peer-side failure is returned as
    /// [`RailError::PeerAccounting`] *after* the NIC bytes were released.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let nic = DeviceSpec::new(10_000_000_000); // 10 GB/s nominal
    /// let sel = Selector::new(&[nic], RailConfig::default()).unwrap();
    /// let c = sel.charge(0, None, 1 << 20, 1_000).unwrap();
    /// // 1 MiB in 1 ms: ~1 GB/s, far below nominal: the estimate drops.
    /// sel.release(c, Outcome::Completed { post_ns: 1_000 }, 1_001_000).unwrap();
    /// let v = sel.nic_view(0).unwrap();
    /// assert_eq!(v.inflight, 0);
    /// assert!(v.bw < v.nominal);
    /// assert_eq!(sel.nic_sample_ns(0), Some(1_001_000));
    /// ```
    pub fn release(
        &self,
        charge: RailCharge,
        outcome: Outcome,
        now_ns: Nanos,
    ) -> Result<(), RailError> {
        let RailCharge {
            device,
            peer,
            bytes,
        } = charge;
        let Some(dev) = self.devices.get(usize::from(device)) else {
            self.counters.nic_errors.fetch_add(1, Ordering::Relaxed);
            return Err(RailError::UnknownDevice { device });
        };
        let sample = match outcome {
            Outcome::Completed { post_ns } => {
                Some(bandwidth_sample(u64::from(bytes), elapsed(now_ns, post_ns)))
            }
            Outcome::Failed => None,
        };
        let mut result = Ok(());
        if !sub_refusing_underflow(&dev.inflight, u64::from(bytes)) {
            self.counters.nic_errors.fetch_add(1, Ordering::Relaxed);
            result = Err(RailError::NicUnderflow { device, bytes });
        }
        if let Some(s) = sample {
            let (a, lo, hi) = (
                self.cfg.ewma_alpha_q16,
                self.cfg.ewma_floor_q8,
                self.cfg.ewma_ceil_q8,
            );
            let _ = dev
                .bw
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                    Some(ewma_step(old, s, a, dev.nominal, lo, hi))
                });
            dev.sample_ns.store(now_ns, Ordering::Release);
        }
        if let Some(p) = peer {
            if let Err(kind) = self.release_peer(usize::from(device), p, bytes, sample, now_ns) {
                self.counters.peer_errors.fetch_add(1, Ordering::Relaxed);
                if result.is_ok() {
                    result = Err(RailError::PeerAccounting {
                        device,
                        peer: p,
                        kind,
                    });
                }
            }
        }
        result
    }

    #[inline]
    fn release_peer(
        &self,
        _device: usize,
        _peer: u32,
        _bytes: u32,
        _sample: Option<u64>,
        _now_ns: Nanos,
    ) -> Result<(), PeerAccountingError> {
        #[cfg(feature = "peer-feedback")]
        if let Some(l) = &self.ledger {
            let ewma = EwmaParams {
                alpha_q16: self.cfg.ewma_alpha_q16,
                floor_q8: self.cfg.ewma_floor_q8,
                ceil_q8: self.cfg.ewma_ceil_q8,
            };
            let sample = _sample.map(|s| (s, self.devices[_device].nominal));
            return l
                .release(_device, _peer, _bytes, sample, ewma, _now_ns)
                .map_err(|e| match e {
                    UnpinError::NotFound => PeerAccountingError::NotFound,
                    UnpinError::Underflow => PeerAccountingError::Underflow,
                    UnpinError::NoPin => PeerAccountingError::NoPin,
                });
        }
        Err(PeerAccountingError::NoLedger)
    }

    /// Takes the rail charge out of `record` (clearing `HOLDS_RAIL_CHARGE`)
    /// and releases it; a success feeds back with `record.post_ns`.
    /// [`RailError::NotHeld`] if the record holds no rail charge, so a
    /// second call on the same record releases nothing.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// use railyard_core::token::TokenRecord;
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let mut rec = TokenRecord { post_ns: 0, ..TokenRecord::default() };
    /// sel.charge(0, None, 4096, 0).unwrap().record_into(&mut rec);
    /// sel.release_record(&mut rec, false, 10).unwrap(); // failed: no bandwidth sample
    /// assert_eq!(sel.nic_sample_ns(0), Some(0));
    /// assert_eq!(sel.nic_inflight(0), Some(0));
    /// ```
    pub fn release_record(
        &self,
        record: &mut TokenRecord,
        success: bool,
        now_ns: Nanos,
    ) -> Result<(), RailError> {
        let charge = RailCharge::take_from(record).ok_or(RailError::NotHeld)?;
        let outcome = if success {
            Outcome::Completed {
                post_ns: record.post_ns,
            }
        } else {
            Outcome::Failed
        };
        self.release(charge, outcome, now_ns)
    }

    /// Reclaims idle ledger entries beyond the history target (monitor
    /// thread; skips a device whose insert lock is busy). Returns how many
    /// were reclaimed; 0 with no ledger.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// assert_eq!(sel.reclaim_idle(1_000_000_000), 0); // no ledger: nothing to reclaim
    /// ```
    pub fn reclaim_idle(&self, _now_ns: Nanos) -> u32 {
        #[cfg(feature = "peer-feedback")]
        if let Some(l) = &self.ledger {
            let (n, residue) = l.reclaim_idle(_now_ns);
            self.counters
                .reclaimed
                .fetch_add(u64::from(n), Ordering::Relaxed);
            if residue > 0 {
                self.counters
                    .peer_errors
                    .fetch_add(u64::from(residue), Ordering::Relaxed);
            }
            return n;
        }
        0
    }

    /// Bytes charged to `device` and not yet released (all peers); `None`
    /// if `device` is not a candidate.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let c = sel.charge(0, None, 700, 0).unwrap();
    /// assert_eq!((sel.nic_inflight(0), sel.nic_inflight(1)), (Some(700), None));
    /// sel.release(c, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn nic_inflight(&self, device: usize) -> Option<u64> {
        let d = self.devices.get(device)?;
        Some(d.inflight.load(Ordering::Acquire))
    }

    /// NIC-scope state of `device`; `None` if it is not a candidate.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let v = sel.nic_view(0).unwrap();
    /// assert_eq!((v.inflight, v.bw, v.nominal), (0, 25_000_000_000, 25_000_000_000)); // starts at nominal
    /// ```
    pub fn nic_view(&self, device: usize) -> Option<NicView> {
        self.devices.get(device).map(DeviceState::nic_view)
    }

    /// When `device` last got a completion sample (0 before the first);
    /// `None` if it is not a candidate.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// assert_eq!(sel.nic_sample_ns(0), Some(0)); // no completion yet
    /// ```
    pub fn nic_sample_ns(&self, device: usize) -> Option<Nanos> {
        let d = self.devices.get(device)?;
        Some(d.sample_ns.load(Ordering::Acquire))
    }

    /// `peer`'s ledger entry on `device`, if the ledger is on, `device` is
    /// a candidate and the ledger has one.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let on = RailConfig { peer_accounting: true, ..RailConfig::default() };
    /// if let Ok(sel) = Selector::new(&[DeviceSpec::new(25_000_000_000)], on) { // with `peer-feedback`
    ///     let c = sel.charge(0, Some(4), 8192, 0).unwrap();
    ///     assert_eq!(sel.peer_view(0, 4).unwrap().inflight, 8192);
    ///     assert_eq!(sel.peer_entries(0), 1);
    ///     sel.release(c, Outcome::Failed, 1).unwrap();
    /// }
    /// let off = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// assert!(off.peer_view(0, 4).is_none());
    /// ```
    pub fn peer_view(&self, _device: usize, _peer: u32) -> Option<super::PeerView> {
        #[cfg(feature = "peer-feedback")]
        if let (Some(l), true) = (&self.ledger, _device < self.devices.len()) {
            return l.view(_device, _peer);
        }
        None
    }

    /// Live ledger entries on `device` (0 with no ledger, or if `device` is
    /// not a candidate).
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// assert_eq!(sel.peer_entries(0), 0); // no ledger
    /// ```
    pub fn peer_entries(&self, _device: usize) -> u32 {
        #[cfg(feature = "peer-feedback")]
        if let (Some(l), true) = (&self.ledger, _device < self.devices.len()) {
            return l.live(_device);
        }
        0
    }

    /// The score `device` would get for a slice of `bytes` to `peer` now,
    /// given the whole-set `fallback` decision (diagnostics and tests);
    /// `None` if `device` is not a candidate.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let c = sel.charge(0, None, 1 << 20, 0).unwrap();
    /// let busy = sel.score_of(0, None, 65536, false).unwrap();
    /// let idle = sel.score_of(1, None, 65536, false).unwrap();
    /// assert!(idle.better_than(busy));
    /// assert!(sel.score_of(2, None, 65536, false).is_none());
    /// sel.release(c, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn score_of(
        &self,
        device: usize,
        peer: Option<u32>,
        bytes: u32,
        fallback: bool,
    ) -> Option<Score> {
        (device < self.devices.len()).then(|| self.score(device, peer, u64::from(bytes), fallback))
    }

    /// A snapshot of the counters.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let p = sel.pick(None, 4096, 0);
    /// sel.release(p.charge, Outcome::Failed, 1).unwrap();
    /// let c = sel.counters();
    /// assert_eq!((c.decisions, c.nic_accounting_errors), (1, 0));
    /// ```
    pub fn counters(&self) -> RailCounters {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RailCounters {
            decisions: l(&self.clock.0),
            probes: l(&c.probes),
            fallbacks: l(&c.fallbacks),
            missing_samples: l(&c.missing),
            expired_samples: l(&c.expired),
            exhausted: l(&c.exhausted),
            contended: l(&c.contended),
            peer_accounting_errors: l(&c.peer_errors),
            nic_accounting_errors: l(&c.nic_errors),
            reclaimed: l(&c.reclaimed),
        }
    }
}
