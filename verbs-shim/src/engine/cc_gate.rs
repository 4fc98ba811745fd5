//! [`CcGate`]: the RFC 4162 congestion controller
//! ([`railyard_core::cc::Controller`]) behind the engine's [`PostGate`].
//!
//! | engine event | controller call |
//! |---|---|
//! | `admit(rec)` | `try_acquire(rec.device, rec.route, rec.bytes, now)`: `Admit` → `Permit::record_into(rec)`; `Defer` → [`GateDecision::Defer`]; `Avoid` → [`GateDecision::Avoid`] (nothing held) |
//! | `release(rec, Some(status))` | `release_record(rec, classify_wc(status).effect)` |
//! | `release(rec, None)` (refused by ownership, `bad_wr` tail) | `release_record(rec, Effect::None)`: accounting only, no feedback |
//! | monitor tick | `Monitor::on_epoch(now, poller)` |
//! | async event on a QP / route | `route_feedback(route, generation, effect)` |
//! | async event on the port / device | `quarantine_device(device)` for `Effect::Quarantine` |
//!
//! **Numbering.** Device domain = the engine's local device (one per engine,
//! index 0). Route domain = one per (local device, remote NIC) pair: the
//! engine gives each distinct peer GID/LID it connects to a route index
//! ([`Engine`](super::Engine) keeps the map), so every segment to the same
//! remote NIC shares one route window. `max_endpoints` route domains exist.
//!
//! **Accounting checks.** `admitted` / `released` count permits (each on its
//! own cache line); `acquire_errors` / `release_errors` count refusals of
//! the controller (a bad route index, a double release, an underflow) and
//! must stay zero. In `Mode::Off` permits are still counted, but the
//! controller keeps no byte accounting.

use super::gate::{GateDecision, PostGate};
use railyard_core::cc::{
    Admission, CcConfig, ConfigError, Controller, Mode, Monitor, PollerStatus,
};
use railyard_core::classify::{classify_wc, Effect};
use railyard_core::evidence::{Observation, Observed, PathId, Reason};
use railyard_core::token::TokenRecord;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

/// Counters of a [`CcGate`] (and what any gate reports through
/// [`PostGate::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateStats {
    /// Whether a controller is in the gate and not in `Mode::Off`.
    pub enabled: bool,
    /// Permits admitted.
    pub admitted: u64,
    /// Permits released (with or without feedback).
    pub released: u64,
    /// In-flight bytes summed over every device and route domain.
    pub in_flight_bytes: u64,
    /// `try_acquire` errors (bad device/route index): admitted without a permit.
    pub acquire_errors: u64,
    /// `release_record` refusals (not held, underflow, bad index).
    pub release_errors: u64,
    /// Control epochs run.
    pub epochs: u64,
    /// Software route timeouts (task deadlines) the control epochs counted
    /// as route hard errors (RFC 4162: poller progressing).
    pub route_timeouts: u64,
    /// Software route timeouts suppressed because the poller stalled.
    pub suppressed_timeouts: u64,
}

/// The congestion-controller post gate (RFC 4162).
pub struct CcGate {
    ctl: Controller,
    monitor: Mutex<Monitor>,
    routes_per_device: u32,
    admitted: Padded,
    released: Padded,
    acquire_errors: AtomicU64,
    release_errors: AtomicU64,
    epochs: AtomicU64,
    route_timeouts: AtomicU64,
    suppressed_timeouts: AtomicU64,
}

impl std::fmt::Debug for CcGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcGate")
            .field("mode", &self.ctl.mode())
            .field("routes", &self.ctl.routes())
            .field("stats", &self.stats())
            .finish()
    }
}

impl CcGate {
    /// A gate for one local device (index 0) and `routes` route domains
    /// bound to it. An invalid `cfg` is an error.
    pub fn new(cfg: &CcConfig, routes: u32) -> Result<Self, ConfigError> {
        Self::with_devices(cfg, 1, routes)
    }

    /// A gate for `devices` local devices with `routes_per_device` route
    /// domains each: route `r` is bound to device `r / routes_per_device`
    /// (see [`route_index`](Self::route_index)). An invalid `cfg` is an error.
    pub fn with_devices(
        cfg: &CcConfig,
        devices: u16,
        routes_per_device: u32,
    ) -> Result<Self, ConfigError> {
        let (ctl, monitor) =
            Controller::new(cfg, devices, &Self::topology(devices, routes_per_device))?;
        Ok(Self::from_parts(ctl, monitor, routes_per_device))
    }

    /// Like [`with_devices`](Self::with_devices), but an invalid `cfg`
    /// leaves the controller off and hands the error back.
    pub fn new_or_off_devices(
        cfg: &CcConfig,
        devices: u16,
        routes_per_device: u32,
    ) -> (Self, Option<ConfigError>) {
        let (ctl, monitor, err) =
            Controller::new_or_off(cfg, devices, &Self::topology(devices, routes_per_device));
        (Self::from_parts(ctl, monitor, routes_per_device), err)
    }

    fn topology(devices: u16, routes_per_device: u32) -> Vec<u16> {
        (0..devices)
            .flat_map(|d| std::iter::repeat(d).take(routes_per_device as usize))
            .collect()
    }

    /// The route index of the `k`-th route domain of `device` (routes are
    /// allocated in per-device blocks).
    pub fn route_index(&self, device: u16, k: u32) -> u32 {
        u32::from(device) * self.routes_per_device + k
    }

    /// Like [`new`](Self::new), but an invalid `cfg` leaves the controller
    /// off (RFC 4162: never partially defaulted) and hands the error back
    /// so the caller can surface it ([`Controller::new_or_off`]).
    pub fn new_or_off(cfg: &CcConfig, routes: u32) -> (Self, Option<ConfigError>) {
        Self::new_or_off_devices(cfg, 1, routes)
    }

    fn from_parts(ctl: Controller, monitor: Monitor, routes_per_device: u32) -> Self {
        Self {
            ctl,
            monitor: Mutex::new(monitor),
            routes_per_device,
            admitted: Padded::default(),
            released: Padded::default(),
            acquire_errors: AtomicU64::new(0),
            release_errors: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
            route_timeouts: AtomicU64::new(0),
            suppressed_timeouts: AtomicU64::new(0),
        }
    }

    /// The controller (snapshots, stats).
    pub fn controller(&self) -> &Controller {
        &self.ctl
    }

    /// The controller's mode.
    pub fn mode(&self) -> Mode {
        self.ctl.mode()
    }

    fn in_flight_total(&self) -> u64 {
        let d = (0..self.ctl.devices() as u16)
            .filter_map(|d| self.ctl.device_snapshot(d))
            .map(|s| s.in_flight);
        let r = (0..self.ctl.routes() as u32)
            .filter_map(|r| self.ctl.route_snapshot(r))
            .map(|s| s.in_flight);
        d.chain(r).fold(0u64, u64::saturating_add)
    }
}

impl PostGate for CcGate {
    #[inline]
    fn admit(&self, rec: &mut TokenRecord, now_ns: u64) -> GateDecision {
        // `rec.device` is the rail the engine picked; `rec.route` is a
        // route domain of that device.
        match self
            .ctl
            .try_acquire(rec.device, rec.route, rec.bytes, now_ns)
        {
            Ok(Admission::Admit(p)) => {
                if let Err(p) = p.record_into(rec) {
                    // The record already held a permit: give this one back.
                    let _ = self.ctl.release(p, Effect::None);
                    self.acquire_errors.fetch_add(1, Ordering::Relaxed);
                    return GateDecision::Admit;
                }
                self.admitted.0.fetch_add(1, Ordering::Relaxed);
                GateDecision::Admit
            }
            Ok(Admission::Defer(_)) => GateDecision::Defer,
            Ok(Admission::Avoid(_)) => GateDecision::Avoid,
            Err(_) => {
                // A bad index is an engine bug: fail open (post without a
                // permit, like CC off) and count it rather than stall.
                self.acquire_errors.fetch_add(1, Ordering::Relaxed);
                GateDecision::Admit
            }
        }
    }

    #[inline]
    fn release(&self, rec: &TokenRecord, wc_status: Option<u32>, _now_ns: u64) {
        if rec.holds & TokenRecord::HOLDS_PERMIT == 0 {
            // Admitted without a permit (counted at admission).
            return;
        }
        let effect = wc_status.map_or(Effect::None, |s| classify_wc(s, 0).effect);
        let mut r = *rec;
        match self.ctl.release_record(&mut r, effect) {
            Ok(_) => {
                self.released.0.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.release_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn on_epoch(&self, now_ns: u64, poller: PollerStatus) {
        if let Ok(mut m) = self.monitor.lock() {
            let r = m.on_epoch(&self.ctl, now_ns, poller);
            self.epochs.fetch_add(1, Ordering::Relaxed);
            self.route_timeouts
                .fetch_add(r.counted_timeouts, Ordering::Relaxed);
            self.suppressed_timeouts
                .fetch_add(r.suppressed_timeouts, Ordering::Relaxed);
        }
    }

    fn event_feedback(&self, route: Option<u32>, effect: Effect) {
        if effect == Effect::None {
            return;
        }
        match route {
            Some(r) => {
                if let Some(g) = self.ctl.route_generation(r) {
                    let _ = self.ctl.route_feedback(r, g, effect);
                }
            }
            None => self.device_feedback(0, effect),
        }
    }

    fn device_feedback(&self, device: u16, effect: Effect) {
        if effect == Effect::Quarantine {
            let _ = self.ctl.quarantine_device(device);
        }
    }

    fn usable(&self, device: u16, route: u32) -> bool {
        if !self.enabled() {
            return true;
        }
        let q = |s: Option<railyard_core::cc::DomainSnapshot>| {
            s.is_some_and(|s| s.health == railyard_core::cc::Health::Quarantined)
        };
        !q(self.ctl.device_snapshot(device)) && !q(self.ctl.route_snapshot(route))
    }

    fn observe(&self, rec: &TokenRecord, reason: Reason, now_ns: u64) -> Observation {
        let path = PathId {
            device: rec.device,
            route: rec.route,
        };
        // GateDecision does not say which domain refused; the route is the
        // caller-relevant one (the device domain is shared by every route).
        let snap = self.ctl.route_snapshot(rec.route);
        match snap {
            Some(s) => s.observation(reason, path, now_ns),
            None => {
                let mut o = Observation::new(reason, now_ns);
                o.path = Observed::Value(path);
                o
            }
        }
    }

    fn enabled(&self) -> bool {
        self.ctl.mode() != Mode::Off
    }

    fn new_generation(&self, route: u32) -> Option<u32> {
        self.ctl.advance_generation(route).ok()
    }

    fn route_snapshot(&self, route: u32) -> Option<railyard_core::cc::DomainSnapshot> {
        self.ctl.route_snapshot(route)
    }

    fn device_snapshot(&self, device: u16) -> Option<railyard_core::cc::DomainSnapshot> {
        self.ctl.device_snapshot(device)
    }

    fn cc_stats(&self) -> Option<railyard_core::cc::CcStats> {
        Some(self.ctl.stats())
    }

    fn stats(&self) -> GateStats {
        GateStats {
            enabled: self.enabled(),
            admitted: self.admitted.0.load(Ordering::Relaxed),
            released: self.released.0.load(Ordering::Relaxed),
            in_flight_bytes: self.in_flight_total(),
            acquire_errors: self.acquire_errors.load(Ordering::Relaxed),
            release_errors: self.release_errors.load(Ordering::Relaxed),
            epochs: self.epochs.load(Ordering::Relaxed),
            route_timeouts: self.route_timeouts.load(Ordering::Relaxed),
            suppressed_timeouts: self.suppressed_timeouts.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
// The enforce-mode tests need the controller compiled in.
#[cfg_attr(not(feature = "adaptive-cc"), allow(dead_code, unused_imports))]
mod tests {
    use super::*;
    use railyard_core::classify::wc;
    use railyard_core::slice::SliceRef;

    fn enforce(max: u64, routes: u32) -> CcGate {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            min_window_bytes: max.min(256 * 1024),
            max_window_bytes: max,
            ..CcConfig::default()
        };
        CcGate::new(&cfg, routes).unwrap()
    }

    fn rec(route: u32, bytes: u32, index: u32) -> TokenRecord {
        TokenRecord {
            slice: SliceRef { index, attempt: 1 },
            route,
            bytes,
            ..TokenRecord::default()
        }
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn admit_records_the_permit_and_release_returns_it_once() {
        let g = enforce(256 * 1024, 2);
        let mut held = Vec::new();
        // 4 × 64 KiB fill route 0's window; the 5th defers, holding nothing.
        for i in 0..4 {
            let mut r = rec(0, 65536, i);
            assert_eq!(g.admit(&mut r, 1), GateDecision::Admit);
            assert_ne!(r.holds & TokenRecord::HOLDS_PERMIT, 0);
            assert_eq!((r.device, r.route), (0, 0));
            held.push(r);
        }
        let mut r = rec(0, 65536, 9);
        assert_eq!(g.admit(&mut r, 1), GateDecision::Defer);
        assert_eq!(r.holds, 0);
        assert_eq!(
            g.controller().route_snapshot(0).unwrap().in_flight,
            4 * 65536
        );
        // Route 1 has its own window but shares the device domain.
        let mut r1 = rec(1, 65536, 10);
        let d = g.admit(&mut r1, 1);
        // Release: two completions, one flush, one unposted.
        g.release(&held[0], Some(wc::SUCCESS), 2);
        g.release(&held[1], Some(wc::WR_FLUSH_ERR), 2);
        g.release(&held[2], Some(wc::REM_ACCESS_ERR), 2);
        g.release(&held[3], None, 2);
        if d == GateDecision::Admit {
            g.release(&r1, Some(wc::SUCCESS), 2);
        }
        let s = g.stats();
        assert!(s.enabled);
        assert_eq!(s.admitted, s.released, "{s:?}");
        assert_eq!(s.in_flight_bytes, 0, "{s:?}");
        assert_eq!((s.acquire_errors, s.release_errors), (0, 0));
        // A second release of the same record is refused, counted, and
        // changes no accounting.
        g.release(&held[0], Some(wc::SUCCESS), 3);
        let s2 = g.stats();
        assert_eq!(s2.release_errors, 1);
        assert_eq!(s2.released, s.released);
        assert_eq!(s2.in_flight_bytes, 0);
        // Now there is room again.
        let mut r = rec(0, 65536, 9);
        assert_eq!(g.admit(&mut r, 4), GateDecision::Admit);
        g.release(&r, Some(wc::SUCCESS), 5);
        assert_eq!(g.stats().in_flight_bytes, 0);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn device_quarantine_avoids_and_observation_names_the_path() {
        let g = enforce(1 << 20, 1);
        g.event_feedback(None, Effect::Quarantine);
        let mut r = rec(0, 4096, 0);
        assert_eq!(g.admit(&mut r, 1), GateDecision::Avoid);
        assert_eq!(r.holds, 0);
        let o = g.observe(&r, Reason::PathQuarantined, 7);
        assert_eq!(
            o.path,
            Observed::Value(PathId {
                device: 0,
                route: 0
            })
        );
        assert_eq!(o.in_flight, Observed::Value(0));
        assert_eq!(
            o.task_state(),
            railyard_core::evidence::TaskState::LongUnavailable
        );
        // Epochs run through the gate.
        g.on_epoch(10, PollerStatus::Progressing);
        g.on_epoch(20, PollerStatus::Progressing);
        assert_eq!(g.stats().epochs, 2);
        assert_eq!(g.stats().in_flight_bytes, 0);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn bad_route_fails_open_and_is_counted() {
        let g = enforce(1 << 20, 1);
        let mut r = rec(5, 4096, 0);
        assert_eq!(g.admit(&mut r, 1), GateDecision::Admit);
        assert_eq!(r.holds & TokenRecord::HOLDS_PERMIT, 0);
        g.release(&r, Some(wc::SUCCESS), 2);
        let s = g.stats();
        assert_eq!((s.admitted, s.released, s.acquire_errors), (0, 0, 1));
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn invalid_config_leaves_the_controller_off_and_says_why() {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            decrease_percent: 100,
            ..CcConfig::default()
        };
        assert!(CcGate::new(&cfg, 1).is_err());
        let (g, err) = CcGate::new_or_off(&cfg, 1);
        assert!(err.is_some());
        assert_eq!(g.mode(), Mode::Off);
        assert!(!g.enabled());
        let mut r = rec(0, 1 << 30, 0);
        assert_eq!(g.admit(&mut r, 1), GateDecision::Admit);
        g.release(&r, Some(wc::SUCCESS), 2);
        let s = g.stats();
        assert_eq!((s.admitted, s.released, s.release_errors), (1, 1, 0));
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn devices_own_route_blocks_and_quarantine_separately() {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            ..CcConfig::default()
        };
        let g = CcGate::with_devices(&cfg, 2, 4).unwrap();
        assert_eq!(g.controller().routes(), 8);
        assert_eq!((g.route_index(0, 3), g.route_index(1, 0)), (3, 4));
        let mut r1 = rec(g.route_index(1, 0), 4096, 1);
        r1.device = 1;
        assert_eq!(g.admit(&mut r1, 1), GateDecision::Admit);
        assert_eq!(r1.device, 1);
        assert_eq!(g.controller().device_snapshot(1).unwrap().in_flight, 4096);
        g.release(&r1, Some(wc::SUCCESS), 2);
        // Quarantining device 1 avoids it and leaves device 0 alone.
        g.device_feedback(1, Effect::Quarantine);
        let mut r1 = rec(g.route_index(1, 0), 4096, 2);
        r1.device = 1;
        assert_eq!(g.admit(&mut r1, 3), GateDecision::Avoid);
        let mut r0 = rec(g.route_index(0, 0), 4096, 3);
        assert_eq!(g.admit(&mut r0, 3), GateDecision::Admit);
        g.release(&r0, Some(wc::SUCCESS), 4);
        assert!(g.usable(0, 0) && !g.usable(1, 4));
        assert_eq!(g.stats().in_flight_bytes, 0);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn software_route_timeouts_are_counted_or_suppressed_per_epoch() {
        for mode in [Mode::Enforce, Mode::Observe] {
            software_route_timeouts_in(mode);
        }
    }

    #[cfg(feature = "adaptive-cc")]
    fn software_route_timeouts_in(mode: Mode) {
        let cfg = CcConfig {
            mode,
            ..CcConfig::default()
        };
        let g = CcGate::new(&cfg, 2).unwrap();
        g.event_feedback(Some(1), Effect::Timeout);
        g.on_epoch(1_000_000, PollerStatus::Progressing);
        let s = g.stats();
        assert_eq!((s.route_timeouts, s.suppressed_timeouts), (1, 0));
        assert_eq!(g.controller().route_snapshot(1).unwrap().errors, 1);
        assert_eq!(g.controller().route_snapshot(0).unwrap().errors, 0);
        g.event_feedback(Some(1), Effect::Timeout);
        g.on_epoch(2_000_000, PollerStatus::Stalled);
        let s = g.stats();
        assert_eq!((s.route_timeouts, s.suppressed_timeouts), (1, 1));
    }

    #[test]
    fn off_gate_reports_disabled() {
        let (g, err) = CcGate::new_or_off(&CcConfig::default(), 4);
        assert!(err.is_none());
        assert!(!g.enabled());
    }

    #[cfg(feature = "adaptive-cc")]
    proptest::proptest! {
        /// Any interleaving of admissions and releases (completion of any
        /// status, or unposted): every admitted permit is released exactly
        /// once, and at the end every domain is back to zero in-flight bytes.
        #[test]
        fn every_admit_released_exactly_once(
            ops in proptest::collection::vec((0u32..3, 1u32..200_000, 0u32..30, proptest::bool::ANY), 1..200)
        ) {
            let g = enforce(512 * 1024, 3);
            let mut held: Vec<TokenRecord> = Vec::new();
            for (i, (route, bytes, status, release_first)) in ops.into_iter().enumerate() {
                if release_first && !held.is_empty() {
                    let r = held.swap_remove(i % held.len());
                    let st = if status == 29 { None } else { Some(status) };
                    g.release(&r, st, i as u64);
                }
                let mut r = rec(route, bytes, i as u32);
                match g.admit(&mut r, i as u64) {
                    GateDecision::Admit => {
                        proptest::prop_assert_ne!(r.holds & TokenRecord::HOLDS_PERMIT, 0);
                        held.push(r);
                    }
                    _ => proptest::prop_assert_eq!(r.holds, 0),
                }
                if i % 16 == 0 {
                    g.on_epoch(i as u64 * 1_000_000, PollerStatus::Progressing);
                }
            }
            for r in held.drain(..) {
                g.release(&r, Some(wc::SUCCESS), 1 << 40);
            }
            let s = g.stats();
            proptest::prop_assert_eq!(s.admitted, s.released);
            proptest::prop_assert_eq!(s.in_flight_bytes, 0);
            proptest::prop_assert_eq!((s.acquire_errors, s.release_errors), (0, 0));
        }
    }
}
