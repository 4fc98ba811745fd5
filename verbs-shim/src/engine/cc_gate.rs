//! [`CcGate`]: the engine's congestion-control layer (RFC 4162): the core
//! [`Controller`] as the CC layer of the composed hot path
//! (`railyard_core::completion`), with the engine's permit counters, plus
//! the control-plane duties the engine's monitor, event and reconnect
//! paths call (epochs, feedback, generations, snapshots).
//!
//! | engine event | controller call |
//! |---|---|
//! | a post (inside `HotPath::post`) | [`CcLayer::acquire`]: `try_acquire(rec.device, rec.route, rec.bytes, now)`, permit recorded |
//! | a completion (inside `HotPath::complete`) | [`CcLayer::release`]: `release_record(rec, classify_wc(status).effect)` |
//! | refused or unposted work | [`CcLayer::release`] with `Effect::None`: accounting only |
//! | monitor tick | [`CcGate::on_epoch`] → `Monitor::on_epoch(now, poller)` |
//! | async event (route feedback, device quarantine, at its scope) | [`CcGate::apply_event`] → `apply_event(event, device, route)` |
//! | software route timeout (a task deadline) | [`CcGate::event_feedback`] → `route_feedback(route, generation, effect)` |
//! | reconnect | [`CcGate::new_generation`] → `advance_generation(route)` |
//!
//! **Numbering.** Device domain = the engine's local device (rail) index.
//! Route domain = one per (local device, remote NIC) pair, allocated in
//! per-device blocks of `max_endpoints` ([`CcGate::route_index`]), so
//! every segment to the same remote NIC shares one route window.
//!
//! **Accounting checks.** `admitted` / `released` count permits (each on its
//! own cache line); `release_errors` counts refusals of the controller (a
//! double release, an underflow) and must stay zero. In `Mode::Off`
//! permits are still counted, but the controller keeps no byte accounting.

use railyard_core::cc::{
    AcquireError, CcConfig, ConfigError, Controller, DrainSignal, Mode, Monitor, PolicyView,
    PollerStatus, ReleaseError, Settlement,
};
use railyard_core::classify::{Effect, EventClassification};
use railyard_core::completion::{CcLayer, CcRefusal};
use railyard_core::evidence::{Observation, PathId, Reason};
use railyard_core::time::Nanos;
use railyard_core::token::TokenRecord;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

/// Counters of a [`CcGate`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GateStats {
    /// Whether the controller is not in `Mode::Off`.
    pub enabled: bool,
    /// Permits admitted.
    pub admitted: u64,
    /// Permits released (with or without feedback).
    pub released: u64,
    /// In-flight bytes summed over every device and route domain.
    pub in_flight_bytes: u64,
    /// Admissions refused as invalid (bad device / route index): the slice
    /// is failed, never posted without a permit.
    pub acquire_errors: u64,
    /// `release_record` refusals (not held, underflow, bad index).
    pub release_errors: u64,
    /// Control epochs run.
    pub epochs: u64,
    /// Control epochs that saw the pollers stalled.
    pub stalled_epochs: u64,
    /// Software route timeouts (task deadlines) the control epochs counted
    /// as route hard errors (RFC 4162: poller progressing).
    pub route_timeouts: u64,
    /// Software route timeouts suppressed because the poller stalled.
    pub suppressed_timeouts: u64,
    /// Domain-epochs whose drain-time pressure was observed but not
    /// enforced (devices with [`DrainSignal::Advisory`]: software providers).
    pub advisory_pressure_epochs: u64,
}

/// The engine's congestion-control layer (RFC 4162).
pub struct CcGate {
    ctl: Controller,
    monitor: Mutex<Monitor>,
    routes_per_device: u32,
    admitted: Padded,
    released: Padded,
    acquire_errors: AtomicU64,
    release_errors: AtomicU64,
    epochs: AtomicU64,
    stalled_epochs: AtomicU64,
    route_timeouts: AtomicU64,
    suppressed_timeouts: AtomicU64,
    advisory_pressure: AtomicU64,
    /// Test hook (`fault-injection`): admissions on this device are
    /// avoided although it reads as usable (device + 1; 0 = none).
    #[cfg(feature = "fault-injection")]
    avoid_device: std::sync::atomic::AtomicU32,
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
    /// leaves the controller off (RFC 4162: never partially defaulted) and
    /// hands the error back so the caller can surface it.
    pub fn new_or_off_devices(
        cfg: &CcConfig,
        devices: u16,
        routes_per_device: u32,
    ) -> (Self, Option<ConfigError>) {
        let (ctl, monitor, err) =
            Controller::new_or_off(cfg, devices, &Self::topology(devices, routes_per_device));
        (Self::from_parts(ctl, monitor, routes_per_device), err)
    }

    /// Like [`new`](Self::new), but an invalid `cfg` leaves the controller
    /// off and hands the error back.
    pub fn new_or_off(cfg: &CcConfig, routes: u32) -> (Self, Option<ConfigError>) {
        Self::new_or_off_devices(cfg, 1, routes)
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
            stalled_epochs: AtomicU64::new(0),
            route_timeouts: AtomicU64::new(0),
            suppressed_timeouts: AtomicU64::new(0),
            advisory_pressure: AtomicU64::new(0),
            #[cfg(feature = "fault-injection")]
            avoid_device: std::sync::atomic::AtomicU32::new(0),
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

    /// Whether the controller is on (not `Mode::Off`). With it off, the
    /// engine's task anomaly query reports UNKNOWN (RFC 4162).
    pub fn enabled(&self) -> bool {
        self.ctl.mode() != Mode::Off
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

    /// One control epoch (the engine's monitor thread, every tick; never
    /// the data path). `poller` says whether the CQ pollers made progress.
    pub fn on_epoch(&self, now_ns: u64, poller: PollerStatus) {
        if let Ok(mut m) = self.monitor.lock() {
            let r = m.on_epoch(&self.ctl, now_ns, poller);
            self.epochs.fetch_add(1, Ordering::Release);
            if poller == PollerStatus::Stalled {
                self.stalled_epochs.fetch_add(1, Ordering::Relaxed);
            }
            self.route_timeouts
                .fetch_add(r.counted_timeouts, Ordering::Relaxed);
            self.suppressed_timeouts
                .fetch_add(r.suppressed_timeouts, Ordering::Relaxed);
            self.advisory_pressure
                .fetch_add(u64::from(r.advisory_pressure), Ordering::Relaxed);
            if tracing::enabled!(target: "railyard::cc", tracing::Level::TRACE) {
                self.trace_epoch(&m, now_ns);
            }
        }
    }

    /// `railyard::cc` at TRACE: per epoch, one line for each domain that
    /// holds bytes or is not HEALTHY, with what the policy saw (window,
    /// bytes in flight, the base drain time the adaptive target scales
    /// from, this epoch's drain time, threshold and pressure verdict, and
    /// whether the verdict is enforced or advisory). Control path only, and
    /// only when that level is enabled: this is how to watch the controller
    /// settle on a path (`RUST_LOG=railyard::cc=trace`).
    fn trace_epoch(&self, m: &Monitor, now_ns: u64) {
        let active = |s: &railyard_core::cc::DomainSnapshot| {
            s.in_flight > 0 || s.health != railyard_core::cc::Health::Healthy
        };
        for r in 0..self.ctl.routes() as u32 {
            if let Some(s) = self.ctl.route_snapshot(r).filter(active) {
                let v = m.route_policy(&self.ctl, r).unwrap_or_default();
                tracing::trace!(target: "railyard::cc", now_ns, route = r, health = ?s.health,
                    window = s.window, in_flight = s.in_flight,
                    base_drain_ns = ?v.base_drain_ns, drain_ns = ?v.drain_ns,
                    threshold_ns = ?v.threshold_ns, pressured = v.pressured,
                    drain_signal = v.drain_signal.as_str(), "epoch");
            }
        }
        for d in 0..self.ctl.devices() as u16 {
            if let Some(s) = self.ctl.device_snapshot(d).filter(active) {
                let v = m.device_policy(d).unwrap_or_default();
                tracing::trace!(target: "railyard::cc", now_ns, device = d, health = ?s.health,
                    window = s.window, in_flight = s.in_flight,
                    base_drain_ns = ?v.base_drain_ns, drain_ns = ?v.drain_ns,
                    threshold_ns = ?v.threshold_ns, pressured = v.pressured,
                    drain_signal = v.drain_signal.as_str(), "epoch");
            }
        }
    }

    /// Sets what drain-time pressure does on local device `device` and its
    /// routes (the engine calls it at device open: advisory for a software
    /// provider by default). Control path. Out of range: `false`.
    pub fn set_drain_signal(&self, device: u16, signal: DrainSignal) -> bool {
        let mut m = self.monitor.lock().unwrap_or_else(|e| e.into_inner());
        m.set_drain_signal(device, signal).is_ok()
    }

    /// Local device `device`'s drain signal (`None` without a controller
    /// compiled in, or for an unknown device). Slow path.
    pub fn drain_signal(&self, device: u16) -> Option<DrainSignal> {
        let m = self.monitor.lock().unwrap_or_else(|e| e.into_inner());
        m.drain_signal(device)
    }

    /// What the policy saw for route `route` at its last epoch, with its
    /// device's drain signal (`None` without a controller compiled in).
    /// Slow path.
    pub fn route_policy(&self, route: u32) -> Option<PolicyView> {
        let m = self.monitor.lock().unwrap_or_else(|e| e.into_inner());
        m.route_policy(&self.ctl, route)
    }

    /// A classified async event on local device `device` (rail), applied
    /// by the controller at its scope and no wider (core's
    /// `Controller::apply_event`): QP / CQ / route scope to `route` (the
    /// route of the event's QP), port scope to every route bound to
    /// `device`, device scope to the device domain. The engine's async-event
    /// thread decides which routes and which scope an event reaches
    /// (`control.rs`).
    ///
    /// ```
    /// use railyard_core::classify::{classify_event, event};
    /// use railyard_verbs::engine::{CcConfig, CcGate, CcMode};
    ///
    /// let cfg = CcConfig { mode: CcMode::Enforce, ..CcConfig::default() };
    /// let g = CcGate::with_devices(&cfg, 2, 4).unwrap();
    /// g.apply_event(&classify_event(event::PORT_ACTIVE), 0, Some(0)).unwrap(); // informational
    /// assert!(g.apply_event(&classify_event(event::QP_FATAL), 0, Some(99)).is_err()); // no such route
    /// ```
    pub fn apply_event(
        &self,
        event: &EventClassification,
        device: u16,
        route: Option<u32>,
    ) -> Result<(), AcquireError> {
        self.ctl.apply_event(event, device, route)
    }

    /// Controller feedback not carried by a permit: an effect at route
    /// scope (`Some(route)`: software timeouts) or at device 0's scope
    /// (`None`).
    pub fn event_feedback(&self, route: Option<u32>, effect: Effect) {
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

    /// Device-scope feedback for local device `device` (rail): a
    /// quarantine isolates the device domain.
    pub fn device_feedback(&self, device: u16, effect: Effect) {
        if effect == Effect::Quarantine {
            let _ = self.ctl.quarantine_device(device);
        }
    }

    /// Whether new work may be steered to `device` × `route` (rail
    /// selection avoids a quarantined device or route, RFC 4162 `kAvoid`).
    pub fn usable(&self, device: u16, route: u32) -> bool {
        CcLayer::usable(self, device, route)
    }

    /// Task evidence for `rec`'s path (slow path): the route's generation,
    /// window, in-flight bytes and cooldown when the controller is on.
    pub fn observe(&self, rec: &TokenRecord, reason: Reason, now_ns: u64) -> Observation {
        let path = PathId {
            device: rec.device,
            route: rec.route,
        };
        CcLayer::observation(self, path, reason, now_ns)
    }

    /// The transport replaced the route's endpoint (reconnect): the route
    /// moves to a new generation, its state kept (late feedback of the old
    /// generation settles accounting only). Returns the new generation.
    pub fn new_generation(&self, route: u32) -> Option<u32> {
        self.ctl.advance_generation(route).ok()
    }

    /// A read-only snapshot of route `route`. Slow path.
    pub fn route_snapshot(&self, route: u32) -> Option<railyard_core::cc::DomainSnapshot> {
        self.ctl.route_snapshot(route)
    }

    /// A read-only snapshot of local device `device`'s domain.
    pub fn device_snapshot(&self, device: u16) -> Option<railyard_core::cc::DomainSnapshot> {
        self.ctl.device_snapshot(device)
    }

    /// Control epochs run (cheap: one load).
    pub fn epochs(&self) -> u64 {
        self.epochs.load(Ordering::Acquire)
    }

    /// The controller's counters (stale feedback, illegal transitions, ...).
    pub fn cc_stats(&self) -> railyard_core::cc::CcStats {
        self.ctl.stats()
    }

    /// Counters and the in-flight gauge.
    pub fn stats(&self) -> GateStats {
        GateStats {
            enabled: self.enabled(),
            admitted: self.admitted.0.load(Ordering::Relaxed),
            released: self.released.0.load(Ordering::Relaxed),
            in_flight_bytes: self.in_flight_total(),
            acquire_errors: self.acquire_errors.load(Ordering::Relaxed),
            release_errors: self.release_errors.load(Ordering::Relaxed),
            epochs: self.epochs.load(Ordering::Relaxed),
            stalled_epochs: self.stalled_epochs.load(Ordering::Relaxed),
            route_timeouts: self.route_timeouts.load(Ordering::Relaxed),
            suppressed_timeouts: self.suppressed_timeouts.load(Ordering::Relaxed),
            advisory_pressure_epochs: self.advisory_pressure.load(Ordering::Relaxed),
        }
    }

    /// Test hook: from now on every admission on `device` is avoided
    /// (`PATH_QUARANTINED`) while [`usable`](Self::usable) still says yes,
    /// as a quarantine racing the planner would; `None` turns it off.
    #[cfg(feature = "fault-injection")]
    pub fn fault_avoid_device(&self, device: Option<u16>) {
        self.avoid_device
            .store(device.map_or(0, |d| u32::from(d) + 1), Ordering::Release);
    }
}

/// The CC layer of the engine's composed hot path.
impl CcLayer for CcGate {
    #[inline(always)]
    fn usable(&self, device: u16, route: u32) -> bool {
        CcLayer::usable(&self.ctl, device, route)
    }

    #[inline(always)]
    fn acquire(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), CcRefusal> {
        #[cfg(feature = "fault-injection")]
        if self.avoid_device.load(Ordering::Acquire) == u32::from(rec.device) + 1 {
            return Err(CcRefusal::Avoided(
                railyard_core::cc::Avoidance::quarantined(railyard_core::cc::DomainKind::Route),
            ));
        }
        match self.ctl.acquire(rec, now) {
            Ok(()) => {
                self.admitted.0.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e @ CcRefusal::Invalid(_)) => {
                self.acquire_errors.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord, effect: Effect) -> Result<Settlement, ReleaseError> {
        match self.ctl.release_record(rec, effect) {
            Ok(s) => {
                self.released.0.fetch_add(1, Ordering::Relaxed);
                Ok(s)
            }
            Err(e) => {
                self.release_errors.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    fn observation(&self, path: PathId, reason: Reason, now: Nanos) -> Observation {
        CcLayer::observation(&self.ctl, path, reason, now)
    }
}

#[cfg(test)]
// The enforce-mode tests need the controller compiled in.
#[cfg_attr(not(feature = "adaptive-cc"), allow(dead_code, unused_imports))]
mod tests {
    use super::*;
    use railyard_core::classify::{classify_wc, wc};
    use railyard_core::evidence::Observed;
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

    fn admit(g: &CcGate, r: &mut TokenRecord) -> Result<(), CcRefusal> {
        CcLayer::acquire(g, r, 1)
    }

    fn release(g: &CcGate, r: &mut TokenRecord, status: Option<u32>) {
        let effect = status.map_or(Effect::None, |s| classify_wc(s, 0).effect);
        let _ = CcLayer::release(g, r, effect);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn admit_records_the_permit_and_release_returns_it_once() {
        let g = enforce(256 * 1024, 2);
        let mut held = Vec::new();
        // 4 × 64 KiB fill route 0's window; the 5th defers, holding nothing.
        for i in 0..4 {
            let mut r = rec(0, 65536, i);
            assert_eq!(admit(&g, &mut r), Ok(()));
            assert_ne!(r.holds & TokenRecord::HOLDS_PERMIT, 0);
            held.push(r);
        }
        let mut r = rec(0, 65536, 9);
        assert!(matches!(admit(&g, &mut r), Err(CcRefusal::Deferred(_))));
        assert_eq!(r.holds, 0);
        assert_eq!(
            g.controller().route_snapshot(0).unwrap().in_flight,
            4 * 65536
        );
        let mut r1 = rec(1, 65536, 10);
        let d = admit(&g, &mut r1);
        release(&g, &mut held[0], Some(wc::SUCCESS));
        release(&g, &mut held[1], Some(wc::WR_FLUSH_ERR));
        release(&g, &mut held[2], Some(wc::REM_ACCESS_ERR));
        release(&g, &mut held[3], None);
        if d.is_ok() {
            release(&g, &mut r1, Some(wc::SUCCESS));
        }
        let s = g.stats();
        assert!(s.enabled);
        assert_eq!(s.admitted, s.released, "{s:?}");
        assert_eq!(s.in_flight_bytes, 0, "{s:?}");
        assert_eq!((s.acquire_errors, s.release_errors), (0, 0));
        // A second release of the same record is refused, counted, and
        // changes no accounting.
        release(&g, &mut held[0], Some(wc::SUCCESS));
        let s2 = g.stats();
        assert_eq!(s2.release_errors, 1);
        assert_eq!(s2.released, s.released);
        assert_eq!(s2.in_flight_bytes, 0);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn device_quarantine_avoids_and_observation_names_the_path() {
        let g = enforce(1 << 20, 1);
        g.event_feedback(None, Effect::Quarantine);
        let mut r = rec(0, 4096, 0);
        assert!(matches!(admit(&g, &mut r), Err(CcRefusal::Avoided(_))));
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
            railyard_core::evidence::AnomalyState::LongUnavailable
        );
        g.on_epoch(10, PollerStatus::Progressing);
        g.on_epoch(20, PollerStatus::Stalled);
        assert_eq!((g.stats().epochs, g.stats().stalled_epochs), (2, 1));
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn advisory_device_pressure_is_counted_not_enforced() {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            ..CcConfig::default()
        };
        let g = CcGate::with_devices(&cfg, 2, 1).unwrap();
        assert!(g.set_drain_signal(1, DrainSignal::Advisory));
        assert!(!g.set_drain_signal(2, DrainSignal::Advisory));
        assert_eq!(g.drain_signal(1), Some(DrainSignal::Advisory));
        let mut held = [rec(0, 65536, 0), rec(1, 65536, 1)];
        held[1].device = 1;
        for r in held.iter_mut() {
            assert_eq!(admit(&g, r), Ok(()));
        }
        // Nothing drains: every judged epoch is pressured on both devices.
        for e in 1..=10 {
            g.on_epoch(e * 1_000_000, PollerStatus::Progressing);
        }
        let max = cfg.max_window_bytes;
        assert!(g.route_snapshot(0).unwrap().window < max);
        assert_eq!(g.route_snapshot(1).unwrap().window, max);
        assert_eq!(g.device_snapshot(1).unwrap().window, max);
        // Route 1 and device 1, nine judged epochs each.
        assert_eq!(g.stats().advisory_pressure_epochs, 18);
        let v = g.route_policy(1).unwrap();
        assert!(v.pressured && v.drain_signal == DrainSignal::Advisory);
        for r in held.iter_mut() {
            release(&g, r, Some(wc::SUCCESS));
        }
        assert_eq!(g.stats().in_flight_bytes, 0);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn a_bad_route_is_a_typed_refusal_and_counted() {
        let g = enforce(1 << 20, 1);
        let mut r = rec(5, 4096, 0);
        assert!(matches!(admit(&g, &mut r), Err(CcRefusal::Invalid(_))));
        assert_eq!(r.holds & TokenRecord::HOLDS_PERMIT, 0);
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
        assert_eq!(admit(&g, &mut r), Ok(()));
        release(&g, &mut r, Some(wc::SUCCESS));
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
        assert_eq!(admit(&g, &mut r1), Ok(()));
        assert_eq!(g.controller().device_snapshot(1).unwrap().in_flight, 4096);
        release(&g, &mut r1, Some(wc::SUCCESS));
        g.device_feedback(1, Effect::Quarantine);
        let mut r1 = rec(g.route_index(1, 0), 4096, 2);
        r1.device = 1;
        assert!(matches!(admit(&g, &mut r1), Err(CcRefusal::Avoided(_))));
        let mut r0 = rec(g.route_index(0, 0), 4096, 3);
        assert_eq!(admit(&g, &mut r0), Ok(()));
        release(&g, &mut r0, Some(wc::SUCCESS));
        assert!(g.usable(0, 0) && !g.usable(1, 4));
        assert_eq!(g.stats().in_flight_bytes, 0);
    }

    #[cfg(feature = "adaptive-cc")]
    #[test]
    fn software_route_timeouts_are_counted_or_suppressed_per_epoch() {
        for mode in [Mode::Enforce, Mode::Observe] {
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
                    let mut r = held.swap_remove(i % held.len());
                    let st = if status == 29 { None } else { Some(status) };
                    release(&g, &mut r, st);
                }
                let mut r = rec(route, bytes, i as u32);
                match admit(&g, &mut r) {
                    Ok(()) => {
                        proptest::prop_assert_ne!(r.holds & TokenRecord::HOLDS_PERMIT, 0);
                        held.push(r);
                    }
                    Err(_) => proptest::prop_assert_eq!(r.holds, 0),
                }
                if i % 16 == 0 {
                    g.on_epoch(i as u64 * 1_000_000, PollerStatus::Progressing);
                }
            }
            for mut r in held.drain(..) {
                release(&g, &mut r, Some(wc::SUCCESS));
            }
            let s = g.stats();
            proptest::prop_assert_eq!(s.admitted, s.released);
            proptest::prop_assert_eq!(s.in_flight_bytes, 0);
            proptest::prop_assert_eq!((s.acquire_errors, s.release_errors), (0, 0));
        }
    }
}
