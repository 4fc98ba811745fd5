//! The compiled-in controller: fixed arrays of atomic domains, allocated once.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::aimd::{
    drain_time_ns, epoch_pressured, pressure_threshold_ns, Aimd, BaseDrain, Sample,
    BASE_SPAN_MAX_EPOCHS, BASE_SPAN_WINDOWS,
};
use super::config::{CcConfig, ConfigError, DrainSignal, Mode, Params, TargetMode};
use super::health::{arrow_exists, needs_escalation, step, Event, Health, HealthWord};
use super::{
    AcquireError, Admission, Avoidance, CcStats, Deferral, DomainKind, DomainSnapshot, EpochReport,
    Permit, PolicyView, PollerStatus, ReleaseError, Settlement,
};
use crate::classify::{Effect, EventClassification, FailureScope};
use crate::evidence::Observed;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::time::{elapsed, Nanos};
use crate::token::TokenRecord;

/// One admission domain (a device or a route). Cache-line aligned so two
/// routes never share a line; every field fits in that one line.
///
/// In-flight bytes are `acquired - released`, two monotonic (wrapping)
/// totals: admission CASes `acquired` against the window, release CASes
/// `released` and refuses to pass `acquired` (never negative). The
/// `released` total doubles as the drain counter the monitor samples, so a
/// slice costs two CASes per domain and nothing else.
#[derive(Debug)]
#[repr(align(64))]
struct Domain {
    /// Total bytes ever reserved.
    acquired: AtomicU64,
    /// Total bytes ever released (never passes `acquired`).
    released: AtomicU64,
    /// Bytes of `released` that were admission rollbacks (never drained).
    rolled_back: AtomicU64,
    /// Current AIMD window; written by the monitor (and by probe recovery).
    window: AtomicU64,
    /// Packed [`HealthWord`].
    health: AtomicU64,
    /// Cooldown deadline while quarantined (0 = none), for snapshots.
    cooldown_until: AtomicU64,
    /// Software timeouts since the last epoch (current generation at report time).
    timeouts: AtomicU32,
    /// Receiver-pressure reports since the last epoch.
    rnr: AtomicU32,
    /// Routes: the device the route is bound to. Devices: unused.
    device: AtomicU32,
}

impl Domain {
    fn new(window: u64, device: u32) -> Self {
        Self {
            acquired: AtomicU64::new(0),
            released: AtomicU64::new(0),
            rolled_back: AtomicU64::new(0),
            window: AtomicU64::new(window),
            health: AtomicU64::new(HealthWord::new(0).0),
            cooldown_until: AtomicU64::new(0),
            timeouts: AtomicU32::new(0),
            rnr: AtomicU32::new(0),
            device: AtomicU32::new(device),
        }
    }

    #[inline]
    fn word(&self) -> HealthWord {
        HealthWord(self.health.load(Ordering::Acquire))
    }

    /// In-flight bytes, read as **one consistent value**: exactly
    /// `acquired − released` at the instant `acquired` was read.
    ///
    /// Two loads cannot give that by themselves: read `released` then
    /// `acquired`, and everything released (and re-acquired) between the two
    /// loads is counted as in flight, so a reader preempted between them
    /// overstates in-flight without bound (seen: 110 MB against a 1 MiB
    /// window). So `released` is read on both sides of `acquired`; if it did
    /// not move, `acquired` was read at an instant when `released` held that
    /// value (both are monotonic), and the difference is exact, never
    /// negative (a release never passes the `acquired` it saw, which
    /// happens-before our `Acquire` load of `released`) and never above the
    /// admission bound, max(largest window, one slice) (an admission never
    /// passes its window over the `released` it saw, which is at most ours).
    ///
    /// If `released` keeps moving for [`SNAPSHOT_TRIES`] rounds, the last
    /// round's `acquired − released(after)` is returned, clamped at 0: a
    /// **bounded** under-estimate, at most the true value at the instant
    /// `acquired` was read and short of it by no more than what was released
    /// between the two loads; never an over-estimate.
    #[inline]
    fn in_flight(&self) -> u64 {
        // BROKEN: the old two-load read (`released`, then `acquired`).
        #[cfg(all(railyard_loom, railyard_broken = "cc_snapshot_two_loads"))]
        {
            let r = self.released.load(Ordering::Acquire);
            return self.acquired.load(Ordering::Acquire).wrapping_sub(r);
        }
        #[allow(unreachable_code)]
        let mut r = self.released.load(Ordering::Acquire);
        let mut a = 0;
        for _ in 0..SNAPSHOT_TRIES {
            a = self.acquired.load(Ordering::Acquire);
            let after = self.released.load(Ordering::Acquire);
            if after == r {
                return a.wrapping_sub(r);
            }
            r = after;
        }
        clamp_signed(a.wrapping_sub(r))
    }

    /// Reserves `bytes` if the domain is empty or the window has room:
    /// the bound is max(window, one slice). Admission is decided against
    /// the `released` total read first, which can only be stale low (an
    /// overestimate of in-flight, conservative); a refusal is re-checked
    /// against a fresh `released` and returned only on a consistent reading
    /// (the same rule as [`Domain::in_flight`]), so a preempted poster never
    /// defers on, or reports, bytes that were already released.
    #[inline]
    fn try_reserve(&self, bytes: u64) -> Result<(), (u64, u64)> {
        let window = self.window.load(Ordering::Relaxed);
        let mut r = self.released.load(Ordering::Acquire);
        #[cfg(railyard_broken = "cc_reserve_check_then_add")]
        {
            // BROKEN: the check and the add are separate steps.
            let _ = &mut r;
            let cur = self.acquired.load(Ordering::Acquire).wrapping_sub(r);
            if cur != 0 && cur.saturating_add(bytes) > window {
                return Err((window, cur));
            }
            self.acquired.fetch_add(bytes, Ordering::AcqRel);
            Ok(())
        }
        #[cfg(not(railyard_broken = "cc_reserve_check_then_add"))]
        {
            let mut a = self.acquired.load(Ordering::Acquire);
            loop {
                let cur = a.wrapping_sub(r);
                match cur.checked_add(bytes) {
                    Some(n) if cur == 0 || n <= window => {}
                    _ => {
                        let after = self.released.load(Ordering::Acquire);
                        if after == r {
                            return Err((window, cur));
                        }
                        r = after;
                        a = self.acquired.load(Ordering::Acquire);
                        continue;
                    }
                }
                match self.acquired.compare_exchange_weak(
                    a,
                    a.wrapping_add(bytes),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Ok(()),
                    Err(actual) => a = actual,
                }
            }
        }
    }

    /// Observe mode: account without bounding; returns whether enforce
    /// would have deferred. Judged like [`Domain::try_reserve`]: an
    /// over-window reading counts only if `released` did not move meanwhile;
    /// otherwise against the fresh `released` (clamped, never an
    /// over-estimate).
    #[inline]
    fn reserve_unbounded(&self, bytes: u64) -> bool {
        let window = self.window.load(Ordering::Relaxed);
        let r = self.released.load(Ordering::Acquire);
        let a = self.acquired.fetch_add(bytes, Ordering::AcqRel);
        let over = |cur: u64| cur != 0 && cur.saturating_add(bytes) > window;
        if !over(a.wrapping_sub(r)) {
            return false;
        }
        let after = self.released.load(Ordering::Acquire);
        if after == r {
            return true;
        }
        over(clamp_signed(a.wrapping_sub(after)))
    }

    /// Returns `bytes`; refuses (and reports) an underflow instead of
    /// wrapping: `released` never passes `acquired`.
    #[inline]
    fn unreserve(&self, bytes: u64) -> Result<(), ()> {
        // Acquire on `released`: a release or rollback we observe was
        // preceded by its `acquired` increment, which we must then also see
        // (loom found the Relaxed version refusing a legitimate release).
        let mut r = self.released.load(Ordering::Acquire);
        loop {
            let a = self.acquired.load(Ordering::Acquire);
            if bytes > a.wrapping_sub(r) {
                return Err(());
            }
            match self.released.compare_exchange_weak(
                r,
                r.wrapping_add(bytes),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => r = actual,
            }
        }
    }

    /// Rolls back an admission reservation (not counted as drained).
    #[inline]
    fn roll_back(&self, bytes: u64) -> Result<(), ()> {
        self.unreserve(bytes)?;
        self.rolled_back.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }
}

/// Rounds of [`Domain::in_flight`]'s consistency check before it falls back
/// to its bounded estimate.
const SNAPSHOT_TRIES: u32 = 8;

/// A wrapping difference of two monotonic totals read in the "wrong" order
/// (the subtrahend after the minuend): negative means zero.
#[inline]
fn clamp_signed(d: u64) -> u64 {
    if (d as i64) < 0 {
        0
    } else {
        d
    }
}

#[derive(Debug)]
struct Counters {
    underflow_refusals: AtomicU64,
    stale_feedback: AtomicU64,
    would_defer: AtomicU64,
    would_avoid: AtomicU64,
    suppressed_timeouts: AtomicU64,
    illegal_transitions: AtomicU64,
}

impl Counters {
    fn new() -> Self {
        Self {
            underflow_refusals: AtomicU64::new(0),
            stale_feedback: AtomicU64::new(0),
            would_defer: AtomicU64::new(0),
            would_avoid: AtomicU64::new(0),
            suppressed_timeouts: AtomicU64::new(0),
            illegal_transitions: AtomicU64::new(0),
        }
    }
}

#[inline]
fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The shared congestion controller: one device domain per worker context,
/// one route domain per (local context, remote NIC path). Shared by every
/// posting and polling thread (`&self` everywhere); the policy side runs in
/// the [`Monitor`].
///
/// ```
/// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
/// use railyard_core::classify::Effect;
///
/// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
/// // One device, two routes on it.
/// let (cc, _monitor) = Controller::new(&cfg, 1, &[0, 0]).unwrap();
/// match cc.try_acquire(0, 1, 64 * 1024, 0).unwrap() {
///     Admission::Admit(permit) => {
///         // ... post; on completion:
///         cc.release(permit, Effect::Success).unwrap();
///     }
///     Admission::Defer(_) => { /* leave the slice queued */ }
///     Admission::Avoid(_) => { /* use another rail */ }
/// }
/// ```
#[derive(Debug)]
pub struct Controller {
    mode: Mode,
    params: Params,
    devices: Box<[Domain]>,
    routes: Box<[Domain]>,
    counters: Counters,
}

impl Controller {
    /// Builds a controller with `devices` device domains and one route domain
    /// per entry of `route_devices` (the device each route is bound to), and
    /// its [`Monitor`]. An invalid configuration is an error; see
    /// [`Controller::new_or_off`] for the "stay off" fallback.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, ConfigError, Controller, Mode};
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// // Two devices; routes 0 and 1 on device 0, route 2 on device 1.
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 0, 1]).unwrap();
    /// assert_eq!((cc.devices(), cc.routes(), cc.route_device(2)), (2, 3, Some(1)));
    /// let bad = CcConfig { min_window_bytes: 0, ..cfg };
    /// assert!(matches!(Controller::new(&bad, 1, &[0]), Err(ConfigError::Zero(_))));
    /// ```
    pub fn new(
        cfg: &CcConfig,
        devices: u16,
        route_devices: &[u16],
    ) -> Result<(Self, Monitor), ConfigError> {
        let params = cfg.validate()?;
        super::config::check_topology(devices, route_devices)?;
        Ok(Self::build(params, devices, route_devices))
    }

    /// Like [`Controller::new`], but an invalid configuration yields a
    /// controller in [`Mode::Off`] together with the error (RFC: the
    /// controller stays off rather than running partially defaulted).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    ///
    /// let bad = CcConfig { mode: Mode::Enforce, min_window_bytes: 0, ..CcConfig::default() };
    /// let (cc, _monitor, err) = Controller::new_or_off(&bad, 1, &[0]);
    /// assert!(err.is_some());
    /// assert_eq!(cc.mode(), Mode::Off); // off, never partially defaulted
    /// ```
    pub fn new_or_off(
        cfg: &CcConfig,
        devices: u16,
        route_devices: &[u16],
    ) -> (Self, Monitor, Option<ConfigError>) {
        match cfg
            .validate()
            .and_then(|p| super::config::check_topology(devices, route_devices).map(|()| p))
        {
            Ok(p) => {
                let (c, m) = Self::build(p, devices, route_devices);
                (c, m, None)
            }
            Err(e) => {
                let p = CcConfig {
                    mode: Mode::Off,
                    ..CcConfig::default()
                }
                .validate()
                .unwrap_or_else(|_| unreachable!("default config is valid"));
                let (c, m) = Self::build(p, devices, route_devices);
                (c, m, Some(e))
            }
        }
    }

    fn build(params: Params, devices: u16, route_devices: &[u16]) -> (Self, Monitor) {
        let w = params.initial_window;
        let devs: Vec<Domain> = (0..devices).map(|_| Domain::new(w, u32::MAX)).collect();
        let routes: Vec<Domain> = route_devices
            .iter()
            .map(|&d| Domain::new(w, d.into()))
            .collect();
        let monitor = Monitor {
            routes: (0..route_devices.len())
                .map(|_| PolicyState::default())
                .collect(),
            devices: (0..devices).map(|_| PolicyState::default()).collect(),
            drain: (0..devices).map(|_| DrainSignal::Enforce).collect(),
            last_epoch: None,
        };
        let c = Self {
            mode: params.mode,
            params,
            devices: devs.into_boxed_slice(),
            routes: routes.into_boxed_slice(),
            counters: Counters::new(),
        };
        (c, monitor)
    }

    /// The runtime mode (fixed at construction).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// assert_eq!(cc.mode(), Mode::Enforce);
    /// ```
    #[inline]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether the controller is compiled in (always `true` here).
    ///
    /// ```
    /// use railyard_core::cc::Controller;
    /// // `adaptive-cc` (a default feature) compiles the controller in.
    /// assert_eq!(Controller::compiled_in(), cfg!(feature = "adaptive-cc"));
    /// ```
    pub const fn compiled_in() -> bool {
        true
    }

    /// Number of device domains.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 4, &[0, 1, 2, 3, 0]).unwrap();
    /// assert_eq!(cc.devices(), 4);
    /// ```
    pub fn devices(&self) -> usize {
        self.devices.len()
    }

    /// Number of route domains.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 4, &[0, 1, 2, 3, 0]).unwrap();
    /// assert_eq!(cc.routes(), 5);
    /// ```
    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    #[inline]
    fn domains(&self, device: u16, route: u32) -> Result<(&Domain, &Domain), AcquireError> {
        let d = self
            .devices
            .get(usize::from(device))
            .ok_or(AcquireError::NoSuchDevice(device))?;
        let r = self
            .routes
            .get(route as usize)
            .ok_or(AcquireError::NoSuchRoute(route))?;
        Ok((d, r))
    }

    /// Byte-window admission of one whole slice on `device` × `route`,
    /// immediately before posting. Reserves `bytes` in both domains or in
    /// neither.
    ///
    /// * [`Admission::Admit`]: post, then record or release the permit exactly once.
    /// * [`Admission::Defer`] (`BYTE_WINDOW`): do not post; the slice stays with its queue owner.
    /// * [`Admission::Avoid`] (`PATH_QUARANTINED`): use another rail; not a new failure.
    ///
    /// In [`Mode::Off`] every slice is admitted without any accounting; in
    /// [`Mode::Observe`] every slice is admitted and accounted.
    ///
    /// ```
    /// use railyard_core::cc::{AcquireError, Admission, CcConfig, Controller, DomainKind, Mode};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, min_window_bytes: 65536,
    ///     initial_window_bytes: Some(131072), ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(a) = cc.try_acquire(0, 0, 65536, 0).unwrap() else { unreachable!() };
    /// let Admission::Admit(b) = cc.try_acquire(0, 0, 65536, 0).unwrap() else { unreachable!() };
    /// // The 128 KiB window is full: BYTE_WINDOW, nothing reserved.
    /// let Admission::Defer(d) = cc.try_acquire(0, 0, 65536, 0).unwrap() else { unreachable!() };
    /// assert_eq!((d.domain, d.window, d.in_flight), (DomainKind::Device, 131072, 131072));
    /// assert_eq!(cc.try_acquire(0, 7, 64, 0).unwrap_err(), AcquireError::NoSuchRoute(7));
    /// cc.release(a, Effect::Success).unwrap();
    /// cc.release(b, Effect::Success).unwrap();
    /// assert_eq!(cc.route_snapshot(0).unwrap().in_flight, 0);
    /// ```
    #[inline(always)]
    pub fn try_acquire(
        &self,
        device: u16,
        route: u32,
        bytes: u32,
        _now: Nanos,
    ) -> Result<Admission, AcquireError> {
        if self.mode == Mode::Off {
            return Ok(Admission::Admit(Permit::new(device, route, 0, bytes)));
        }
        self.acquire_accounted(device, route, bytes)
    }

    #[inline]
    fn acquire_accounted(
        &self,
        device: u16,
        route: u32,
        bytes: u32,
    ) -> Result<Admission, AcquireError> {
        if bytes == 0 {
            return Err(AcquireError::ZeroBytes);
        }
        let (d, r) = self.domains(device, route)?;
        let bound = r.device.load(Ordering::Relaxed);
        if bound != u32::from(device) {
            return Err(AcquireError::WrongDevice {
                route,
                bound,
                given: device,
            });
        }
        let rw = r.word();
        let quarantined = if rw.health() == Health::Quarantined {
            Some(DomainKind::Route)
        } else if d.word().health() == Health::Quarantined {
            Some(DomainKind::Device)
        } else {
            None
        };
        let b = u64::from(bytes);
        if self.mode == Mode::Enforce {
            if let Some(domain) = quarantined {
                return Ok(Admission::Avoid(Avoidance::quarantined(domain)));
            }
            if let Err((window, in_flight)) = d.try_reserve(b) {
                return Ok(Admission::Defer(Deferral::byte_window(
                    DomainKind::Device,
                    window,
                    in_flight,
                )));
            }
            if let Err((window, in_flight)) = r.try_reserve(b) {
                #[cfg(not(railyard_broken = "cc_no_rollback"))]
                if d.roll_back(b).is_err() {
                    bump(&self.counters.underflow_refusals);
                }
                return Ok(Admission::Defer(Deferral::byte_window(
                    DomainKind::Route,
                    window,
                    in_flight,
                )));
            }
        } else {
            if quarantined.is_some() {
                bump(&self.counters.would_avoid);
            }
            let over_d = d.reserve_unbounded(b);
            let over_r = r.reserve_unbounded(b);
            if over_d || over_r {
                bump(&self.counters.would_defer);
            }
        }
        Ok(Admission::Admit(Permit::new(
            device,
            route,
            rw.generation(),
            bytes,
        )))
    }

    /// Whether either domain of `device` × `route` is QUARANTINED: the path
    /// would be avoided in enforce mode. Two loads, no side effect; an
    /// out-of-range index reads as not quarantined (admission then refuses
    /// it with a typed error). For rail selection before admission.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// cc.quarantine_device(1).unwrap();
    /// assert!(cc.is_quarantined(1, 1) && !cc.is_quarantined(0, 0)); // pick rail 0
    /// ```
    #[inline]
    pub fn is_quarantined(&self, device: u16, route: u32) -> bool {
        if self.mode == Mode::Off {
            return false;
        }
        match self.domains(device, route) {
            Ok((d, r)) => {
                r.word().health() == Health::Quarantined || d.word().health() == Health::Quarantined
            }
            Err(_) => false,
        }
    }

    /// Whether `permit` was admitted on the route's current generation. A
    /// permit that is no longer current must not be posted: release it with
    /// [`Effect::None`] (both reservations roll back) and resolve the path again.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// assert!(cc.is_current(&p));
    /// cc.advance_generation(0).unwrap(); // the route's QP was rebuilt
    /// assert!(!cc.is_current(&p)); // do not post it: release and resolve again
    /// cc.release(p, Effect::None).unwrap();
    /// ```
    #[inline]
    pub fn is_current(&self, permit: &Permit) -> bool {
        if self.mode == Mode::Off {
            return true;
        }
        match self.routes.get(permit.route() as usize) {
            Some(r) => r.word().generation() == permit.generation(),
            None => false,
        }
    }

    /// Releases a permit exactly once (it is consumed) and applies `effect`.
    /// Accounting is always settled; `effect` is applied only if the permit's
    /// route generation is still current ([`Settlement::Stale`] otherwise).
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode, Settlement};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// let Admission::Admit(q) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(cc.release(p, Effect::Success), Ok(Settlement::Current));
    /// cc.advance_generation(0).unwrap();
    /// // Feedback from the old generation only settles the bytes.
    /// assert_eq!(cc.release(q, Effect::HardError), Ok(Settlement::Stale));
    /// assert_eq!(cc.route_snapshot(0).unwrap().errors, 0);
    /// ```
    #[inline(always)]
    pub fn release(&self, permit: Permit, effect: Effect) -> Result<Settlement, ReleaseError> {
        let (device, route, generation, bytes) = permit.into_parts();
        if self.mode == Mode::Off {
            return Ok(Settlement::Current);
        }
        self.settle(device, route, generation, bytes, effect)
    }

    /// Releases the permit recorded in `record` (completion path), clearing
    /// `HOLDS_PERMIT` so a second release of the same record is refused.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode, ReleaseError};
    /// use railyard_core::classify::Effect;
    /// use railyard_core::token::TokenRecord;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// let mut rec = TokenRecord::default();
    /// p.record_into(&mut rec).unwrap();
    /// cc.release_record(&mut rec, Effect::Success).unwrap();
    /// assert_eq!(cc.release_record(&mut rec, Effect::Success), Err(ReleaseError::NotHeld));
    /// assert_eq!(cc.device_snapshot(0).unwrap().in_flight, 0);
    /// ```
    #[inline(always)]
    pub fn release_record(
        &self,
        record: &mut TokenRecord,
        effect: Effect,
    ) -> Result<Settlement, ReleaseError> {
        if record.holds & TokenRecord::HOLDS_PERMIT == 0 {
            return Err(ReleaseError::NotHeld);
        }
        record.holds &= !TokenRecord::HOLDS_PERMIT;
        if self.mode == Mode::Off {
            return Ok(Settlement::Current);
        }
        self.settle(
            record.device,
            record.route,
            record.route_generation,
            record.bytes,
            effect,
        )
    }

    #[inline]
    fn settle(
        &self,
        device: u16,
        route: u32,
        generation: u32,
        bytes: u32,
        effect: Effect,
    ) -> Result<Settlement, ReleaseError> {
        if self.mode == Mode::Off {
            return Ok(Settlement::Current);
        }
        let d = self
            .devices
            .get(usize::from(device))
            .ok_or(ReleaseError::NoSuchDevice(device))?;
        let r = self
            .routes
            .get(route as usize)
            .ok_or(ReleaseError::NoSuchRoute(route))?;
        let b = u64::from(bytes);
        if r.unreserve(b).is_err() {
            bump(&self.counters.underflow_refusals);
            return Err(ReleaseError::Underflow {
                domain: DomainKind::Route,
            });
        }
        if d.unreserve(b).is_err() {
            // Restore the route so both domains stay consistent.
            r.acquired.fetch_add(b, Ordering::AcqRel);
            bump(&self.counters.underflow_refusals);
            return Err(ReleaseError::Underflow {
                domain: DomainKind::Device,
            });
        }
        Ok(self.apply(d, r, generation, effect))
    }

    #[inline]
    fn apply(&self, d: &Domain, r: &Domain, generation: u32, effect: Effect) -> Settlement {
        let w = r.word();
        if w.generation() != generation {
            bump(&self.counters.stale_feedback);
            return Settlement::Stale;
        }
        match effect {
            Effect::None => {}
            Effect::Success => {
                if matches!(w.health(), Health::Suspect | Health::Probing) {
                    self.recover(r, Some(generation));
                }
                if d.word().health() == Health::Probing {
                    self.recover(d, None);
                }
            }
            Effect::ReceiverPressure => {
                r.rnr.fetch_add(1, Ordering::Relaxed);
            }
            Effect::Timeout => {
                r.timeouts.fetch_add(1, Ordering::Relaxed);
            }
            Effect::HardError => self.escalate(r, Some(generation), Event::HardError),
            Effect::Quarantine => self.escalate(r, Some(generation), Event::Fatal),
        }
        Settlement::Current
    }

    /// SUSPECT/PROBING → HEALTHY/CONGESTED; a recovered probe restarts from the minimum window.
    fn recover(&self, dom: &Domain, generation: Option<u32>) {
        if let Some((prev, _)) = self.transition(dom, generation, Event::Success) {
            if prev.health() == Health::Probing {
                dom.window.store(self.params.min_window, Ordering::Relaxed);
            }
        }
    }

    /// Applies a failure event and, if it saturated the threshold, the
    /// SUSPECT → QUARANTINED arrow.
    fn escalate(&self, dom: &Domain, generation: Option<u32>, event: Event) {
        if let Some((_, next)) = self.transition(dom, generation, event) {
            if needs_escalation(next, self.params.hard_error_threshold) {
                self.transition(dom, Some(next.generation()), Event::Fatal);
            }
        }
    }

    /// One arrow by CAS, fenced by `generation` if given. Returns the
    /// replaced and the new word.
    fn transition(
        &self,
        dom: &Domain,
        generation: Option<u32>,
        event: Event,
    ) -> Option<(HealthWord, HealthWord)> {
        // BROKEN: the generation is checked only before the CAS loop (in
        // `apply`), not against the word the CAS actually replaces.
        #[cfg(railyard_broken = "cc_unfenced_feedback")]
        let generation: Option<u32> = generation.filter(|_| false);
        let mut cur = dom.word();
        loop {
            if let Some(g) = generation {
                if cur.generation() != g {
                    bump(&self.counters.stale_feedback);
                    return None;
                }
            }
            let next = step(cur, event, self.params.hard_error_threshold)?;
            #[cfg(not(railyard_broken = "cc_health_blind_store"))]
            let res =
                dom.health
                    .compare_exchange(cur.0, next.0, Ordering::AcqRel, Ordering::Acquire);
            // BROKEN: decide from a stale load, then overwrite whatever is there.
            #[cfg(railyard_broken = "cc_health_blind_store")]
            let res: Result<u64, u64> = Ok(dom.health.swap(next.0, Ordering::AcqRel));
            match res {
                Ok(prev) => {
                    let prev = HealthWord(prev);
                    if !arrow_exists(prev.health(), next.health()) {
                        bump(&self.counters.illegal_transitions);
                    }
                    return Some((prev, next));
                }
                Err(actual) => cur = HealthWord(actual),
            }
        }
    }

    /// Feedback not carried by a permit (an async event on a QP of this
    /// route, a software deadline, RDMA CM route evidence), fenced by the
    /// route `generation` the evidence belongs to.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Health, Mode, Settlement};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let g = cc.route_generation(0).unwrap();
    /// // An async QP error on this route, fenced by the generation it belongs to.
    /// assert_eq!(cc.route_feedback(0, g, Effect::Quarantine), Ok(Settlement::Current));
    /// assert_eq!(cc.route_snapshot(0).unwrap().health, Health::Quarantined);
    /// ```
    pub fn route_feedback(
        &self,
        route: u32,
        generation: u32,
        effect: Effect,
    ) -> Result<Settlement, ReleaseError> {
        if self.mode == Mode::Off {
            return Ok(Settlement::Current);
        }
        let r = self
            .routes
            .get(route as usize)
            .ok_or(ReleaseError::NoSuchRoute(route))?;
        let dev = r.device.load(Ordering::Relaxed);
        let d = self
            .devices
            .get(dev as usize)
            .ok_or(ReleaseError::NoSuchDevice(dev as u16))?;
        Ok(self.apply(d, r, generation, effect))
    }

    /// Device-scope fatal evidence (`IBV_EVENT_DEVICE_FATAL`, RDMA CM device
    /// removal, or a port error on a single-port device): quarantines the
    /// device and moves every route bound to it to a new generation, so late
    /// feedback from before the isolation only settles accounting. Never
    /// touches other devices or any peer state.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Health, Mode};
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let g = cc.route_generation(0).unwrap();
    /// cc.quarantine_device(0).unwrap(); // IBV_EVENT_DEVICE_FATAL on device 0
    /// assert_eq!(cc.device_snapshot(0).unwrap().health, Health::Quarantined);
    /// assert_ne!(cc.route_generation(0), Some(g)); // its routes moved on
    /// assert!(matches!(cc.try_acquire(0, 0, 64, 0).unwrap(), Admission::Avoid(_)));
    /// let Admission::Admit(p) = cc.try_acquire(1, 1, 64, 0).unwrap() else { panic!() }; // device 1 untouched
    /// cc.release(p, railyard_core::classify::Effect::Success).unwrap();
    /// ```
    pub fn quarantine_device(&self, device: u16) -> Result<(), AcquireError> {
        let d = self
            .devices
            .get(usize::from(device))
            .ok_or(AcquireError::NoSuchDevice(device))?;
        if self.mode == Mode::Off {
            return Ok(());
        }
        self.escalate(d, None, Event::Fatal);
        self.bump_routes_of(device);
        Ok(())
    }

    /// Applies a classified async event at its scope and no wider (RFC
    /// 4162's async-event matrix, the controller side; the endpoint side is
    /// [`event_action`](crate::classify::event_action)): QP / CQ / route
    /// scope to `route` (the route of the event's QP; `None`: nothing to
    /// feed), port scope to every route bound to `device`, device scope to
    /// the device domain. Feedback goes to each route's current generation.
    /// Events without an effect change nothing.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Health, Mode};
    /// use railyard_core::classify::{classify_event, event};
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 0, 1]).unwrap();
    /// // A port error on device 0 quarantines both of its routes, not device 1's.
    /// cc.apply_event(&classify_event(event::PORT_ERR), 0, None).unwrap();
    /// assert_eq!(cc.route_snapshot(0).unwrap().health, Health::Quarantined);
    /// assert_eq!(cc.route_snapshot(1).unwrap().health, Health::Quarantined);
    /// assert_eq!(cc.route_snapshot(2).unwrap().health, Health::Healthy);
    /// ```
    pub fn apply_event(
        &self,
        event: &EventClassification,
        device: u16,
        route: Option<u32>,
    ) -> Result<(), AcquireError> {
        if usize::from(device) >= self.devices.len() {
            return Err(AcquireError::NoSuchDevice(device));
        }
        if let Some(r) = route {
            if r as usize >= self.routes.len() {
                return Err(AcquireError::NoSuchRoute(r));
            }
        }
        if event.effect == Effect::None || self.mode == Mode::Off {
            return Ok(());
        }
        let feed = |r: u32| {
            if let Some(g) = self.route_generation(r) {
                // In range (checked above or enumerated): cannot fail.
                let _ = self.route_feedback(r, g, event.effect);
            }
        };
        match event.scope {
            FailureScope::Qp | FailureScope::Cq | FailureScope::Route => {
                if let Some(r) = route {
                    feed(r);
                }
            }
            FailureScope::Port => {
                for (i, r) in self.routes.iter().enumerate() {
                    if r.device.load(Ordering::Relaxed) == u32::from(device) {
                        feed(i as u32);
                    }
                }
            }
            FailureScope::Device => {
                if event.effect == Effect::Quarantine {
                    self.quarantine_device(device)?;
                }
            }
            FailureScope::None | FailureScope::Operation => {}
        }
        Ok(())
    }

    /// The device route `route` is bound to now.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[1, 0]).unwrap();
    /// assert_eq!((cc.route_device(0), cc.route_device(2)), (Some(1), None));
    /// ```
    pub fn route_device(&self, route: u32) -> Option<u16> {
        self.routes
            .get(route as usize)
            .map(|r| r.device.load(Ordering::Relaxed) as u16)
    }

    fn bump_routes_of(&self, device: u16) {
        for r in self.routes.iter() {
            if r.device.load(Ordering::Relaxed) == u32::from(device) {
                self.transition(r, None, Event::NewGeneration);
            }
        }
    }

    /// The transport rebuilt the route's endpoint / QP: a new generation.
    /// The state (and the accumulated error count) is kept; late feedback of
    /// the old generation will only settle accounting. Returns the new generation.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let g = cc.route_generation(0).unwrap();
    /// assert_eq!(cc.advance_generation(0), Ok(g + 1)); // reconnected
    /// assert!(cc.advance_generation(1).is_err());
    /// ```
    pub fn advance_generation(&self, route: u32) -> Result<u32, AcquireError> {
        let r = self
            .routes
            .get(route as usize)
            .ok_or(AcquireError::NoSuchRoute(route))?;
        let (_, next) = self
            .transition(r, None, Event::NewGeneration)
            .unwrap_or_else(|| unreachable!("NewGeneration always steps"));
        Ok(next.generation())
    }

    /// A local-NIC handoff: binds `route` to `device` on a new generation.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0]).unwrap();
    /// let g = cc.route_generation(0).unwrap();
    /// assert_eq!(cc.rebind_route(0, 1), Ok(g + 1)); // handed off to NIC 1
    /// assert_eq!(cc.route_device(0), Some(1));
    /// ```
    pub fn rebind_route(&self, route: u32, device: u16) -> Result<u32, AcquireError> {
        let r = self
            .routes
            .get(route as usize)
            .ok_or(AcquireError::NoSuchRoute(route))?;
        if usize::from(device) >= self.devices.len() {
            return Err(AcquireError::NoSuchDevice(device));
        }
        r.device.store(u32::from(device), Ordering::Relaxed);
        self.advance_generation(route)
    }

    /// The route's current generation.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let g = cc.route_generation(0).unwrap();
    /// cc.advance_generation(0).unwrap();
    /// assert_eq!(cc.route_generation(0), Some(g + 1));
    /// assert_eq!(cc.route_generation(9), None);
    /// ```
    pub fn route_generation(&self, route: u32) -> Option<u32> {
        self.routes
            .get(route as usize)
            .map(|r| r.word().generation())
    }

    fn snapshot(d: &Domain) -> DomainSnapshot {
        let w = d.word();
        let until = d.cooldown_until.load(Ordering::Relaxed);
        DomainSnapshot {
            health: w.health(),
            generation: w.generation(),
            errors: w.errors(),
            window: d.window.load(Ordering::Relaxed),
            in_flight: d.in_flight(),
            cooldown_until: if w.health() == Health::Quarantined && until != 0 {
                Observed::Value(until)
            } else {
                Observed::Unobserved
            },
        }
    }

    /// A read-only snapshot of a route domain (slow path: diagnostics, evidence).
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Health, Mode};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// let s = cc.route_snapshot(0).unwrap();
    /// assert_eq!((s.health, s.in_flight, s.window), (Health::Healthy, 4096, cfg.max_window_bytes));
    /// cc.release(p, Effect::Success).unwrap();
    /// ```
    pub fn route_snapshot(&self, route: u32) -> Option<DomainSnapshot> {
        self.routes.get(route as usize).map(Self::snapshot)
    }

    /// A read-only snapshot of a device domain.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0, 0]).unwrap();
    /// let Admission::Admit(a) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// let Admission::Admit(b) = cc.try_acquire(0, 1, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(cc.device_snapshot(0).unwrap().in_flight, 8192); // both routes' bytes
    /// cc.release(a, Effect::Success).unwrap();
    /// cc.release(b, Effect::Success).unwrap();
    /// assert!(cc.device_snapshot(1).is_none());
    /// ```
    pub fn device_snapshot(&self, device: u16) -> Option<DomainSnapshot> {
        self.devices.get(usize::from(device)).map(Self::snapshot)
    }

    /// Counters (refusals, stale feedback, observe-mode would-defer/avoid, ...).
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// cc.advance_generation(0).unwrap();
    /// cc.release(p, Effect::HardError).unwrap(); // from the old generation
    /// assert_eq!(cc.stats().stale_feedback, 1);
    /// ```
    pub fn stats(&self) -> CcStats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CcStats {
            underflow_refusals: l(&c.underflow_refusals),
            stale_feedback: l(&c.stale_feedback),
            would_defer: l(&c.would_defer),
            would_avoid: l(&c.would_avoid),
            suppressed_timeouts: l(&c.suppressed_timeouts),
            illegal_transitions: l(&c.illegal_transitions),
        }
    }
}

/// Monitor-private policy state of one domain.
#[derive(Clone, Copy, Debug, Default)]
struct PolicyState {
    aimd: Aimd,
    /// Quarantine entry seen (sequence) and its cooldown deadline.
    quarantine: Option<(u8, Nanos)>,
    /// `released − rolled_back` at the previous epoch.
    last_drained: u64,
    /// The domain's base drain time (adaptive target).
    base: BaseDrain,
    /// The generation `base` was measured on.
    base_generation: u32,
    /// The open floor-level span: Σ in-flight × epoch length, Σ drained.
    span_in_flight_ns: u128,
    span_drained: u64,
    span_epochs: u32,
    /// In-flight bytes at the previous epoch (for the span's start rule).
    last_in_flight: u64,
    /// The drain signal applied at the last epoch and what that epoch saw
    /// (diagnostics: [`Monitor::route_policy`] / [`Monitor::device_policy`]).
    view: PolicyView,
}

/// The most a domain may hold for its epoch to measure the base: one
/// multiplicative decrease above the minimum window (`min / β`), the band a
/// window pinned near the floor moves in (a decrease from anywhere in it
/// lands on the floor).
#[inline]
fn floor_level(p: &Params) -> u64 {
    let pct = p.decrease_percent.max(1);
    u64::try_from(u128::from(p.min_window) * 100 / u128::from(pct)).unwrap_or(u64::MAX)
}

impl PolicyState {
    /// Feeds the base drain time: consecutive epochs in which the domain
    /// held at most [`floor_level`] from start to end form a span; once the span has
    /// drained [`BASE_SPAN_WINDOWS`] minimum windows, its drain time (Little's
    /// law over the span: time-averaged in-flight bytes over drain rate)
    /// is one sample. An epoch above the floor ends the span unsampled, and
    /// so does a span that has not drained enough after
    /// [`BASE_SPAN_MAX_EPOCHS`]. Idle epochs (nothing in flight) neither
    /// count nor break the span.
    fn base_sample(&mut self, p: &Params, in_flight: u64, e: EpochInput) {
        if in_flight == 0 && e.drained == 0 {
            return;
        }
        let floor = floor_level(p);
        // The epoch must have started at floor level too: while a backlog
        // above the floor drains, it drains at the path's full rate, which
        // says nothing about how long the floor's worth takes on its own.
        let started_at_floor = self.last_in_flight <= floor;
        self.last_in_flight = in_flight;
        if !started_at_floor || in_flight > floor || self.span_epochs >= BASE_SPAN_MAX_EPOCHS {
            self.span_in_flight_ns = 0;
            self.span_drained = 0;
            self.span_epochs = 0;
            if !started_at_floor || in_flight > floor {
                return;
            }
        }
        self.span_in_flight_ns = self
            .span_in_flight_ns
            .saturating_add(u128::from(in_flight) * u128::from(e.epoch_ns));
        self.span_drained = self.span_drained.saturating_add(e.drained);
        self.span_epochs += 1;
        if self.span_drained >= p.min_window.saturating_mul(BASE_SPAN_WINDOWS) {
            let d = self.span_in_flight_ns / u128::from(self.span_drained);
            self.base
                .sample(u64::try_from(d).unwrap_or(u64::MAX), e.now);
            self.span_in_flight_ns = 0;
            self.span_drained = 0;
            self.span_epochs = 0;
        }
    }

    /// Bytes that left the domain since the last epoch (completions of any
    /// outcome and unposted releases), excluding admission rollbacks.
    ///
    /// **Bounded**, not exact: `released` and `rolled_back` are two words,
    /// and a rollback adds to the first before the second, so a sample taken
    /// between the two counts that rollback as drained (or, read the other
    /// way round, not yet). The error of one epoch is at most the bytes of
    /// the rollbacks in progress at the two sampling instants (one slice per
    /// thread inside `try_acquire`), and it does not accumulate: the
    /// baseline is the sampled total, and a sample that would go backwards
    /// is ignored (0 drained) without moving the baseline, so the next epoch
    /// recovers it.
    fn drained(&mut self, dom: &Domain) -> u64 {
        let total = dom
            .released
            .load(Ordering::Acquire)
            .wrapping_sub(dom.rolled_back.load(Ordering::Acquire));
        let d = total.wrapping_sub(self.last_drained);
        if (d as i64) < 0 {
            return 0;
        }
        self.last_drained = total;
        d
    }
}

/// The policy side of the controller: runs from the monitor thread, never
/// on the data path. Owns the hysteresis and cooldown state (`&mut self`);
/// reads and updates the shared domains through the [`Controller`].
#[derive(Debug)]
pub struct Monitor {
    routes: Box<[PolicyState]>,
    devices: Box<[PolicyState]>,
    /// Per device: what its (and its routes') drain-time pressure does.
    drain: Box<[DrainSignal]>,
    last_epoch: Option<Nanos>,
}

impl Monitor {
    /// One control epoch at `now`: applies pending software timeouts (or
    /// suppresses them if the poller stalled), computes drain-time pressure
    /// against the target (adaptive by default: see [`super::aimd`]) with
    /// hysteresis, adjusts windows (AI after calm epochs, MD under pressure,
    /// immediate route-only back-off on receiver pressure), moves HEALTHY ⇄
    /// CONGESTED, and moves QUARANTINED → PROBING (new generation, probe
    /// window) once the cooldown expires. The cooldown starts at the first
    /// epoch that observes the quarantine.
    ///
    /// Receiver pressure (RNR) is applied in every epoch it was reported
    /// in, including the first epoch and epochs in which the poller stalled:
    /// RFC 4162 suppresses only *software timeouts* during a stall. (A
    /// stalled or first epoch gives no drain-time verdict: there is no drain
    /// rate to judge.) RNR reported on a route that is QUARANTINED or
    /// PROBING is subsumed, not lost: such a route admits nothing or only the
    /// probe window, and it recovers from the minimum window, which is where
    /// the back-off would have floored.
    ///
    /// `ctl` must be the controller this monitor was built with (domains
    /// beyond the shorter of the two are ignored).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Health, Mode, PollerStatus};
    /// use railyard_core::classify::Effect;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, cooldown_ms: 1, ..CcConfig::default() };
    /// let (cc, mut monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let g = cc.route_generation(0).unwrap();
    /// cc.route_feedback(0, g, Effect::Quarantine).unwrap();
    /// // The monitor thread, once per control epoch:
    /// let r = monitor.on_epoch(&cc, 0, PollerStatus::Progressing); // cooldown starts
    /// assert_eq!(r.quarantined, 1);
    /// let r = monitor.on_epoch(&cc, 2_000_000, PollerStatus::Progressing); // 2 ms later
    /// assert_eq!(r.probes_started, 1);
    /// assert_eq!(cc.route_snapshot(0).unwrap().health, Health::Probing);
    /// ```
    pub fn on_epoch(&mut self, ctl: &Controller, now: Nanos, poller: PollerStatus) -> EpochReport {
        let mut report = EpochReport::default();
        let epoch_ns = self.last_epoch.map_or(0, |l| elapsed(now, l));
        self.last_epoch = Some(now);
        if ctl.mode == Mode::Off {
            return report;
        }
        let stalled = poller == PollerStatus::Stalled;
        let drain = &self.drain;
        let signal_of = |dev: u32| {
            usize::try_from(dev)
                .ok()
                .and_then(|d| drain.get(d).copied())
                .unwrap_or_default()
        };
        for (st, r) in self.routes.iter_mut().zip(ctl.routes.iter()) {
            let drained = st.drained(r);
            let timeouts = r.timeouts.swap(0, Ordering::Relaxed);
            if timeouts > 0 {
                if stalled {
                    report.suppressed_timeouts += u64::from(timeouts);
                    ctl.counters
                        .suppressed_timeouts
                        .fetch_add(u64::from(timeouts), Ordering::Relaxed);
                } else {
                    for _ in 0..timeouts {
                        ctl.escalate(r, None, Event::HardError);
                    }
                    report.counted_timeouts += u64::from(timeouts);
                }
            }
            let rnr = r.rnr.swap(0, Ordering::Relaxed) > 0;
            let e = EpochInput {
                drained,
                epoch_ns,
                now,
                stalled,
                rnr,
                signal: signal_of(r.device.load(Ordering::Relaxed)),
            };
            Self::policy(ctl, st, r, e, &mut report, None);
        }
        for (i, (st, d)) in self.devices.iter_mut().zip(ctl.devices.iter()).enumerate() {
            let drained = st.drained(d);
            let e = EpochInput {
                drained,
                epoch_ns,
                now,
                stalled,
                rnr: false,
                signal: signal_of(i as u32),
            };
            Self::policy(ctl, st, d, e, &mut report, Some(i as u16));
        }
        report
    }

    /// The base drain time the monitor has measured for route `route`
    /// (diagnostics; `None` before a sample or for an unknown route).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (_cc, monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// assert_eq!(monitor.route_base_drain_ns(0), None); // nothing measured yet
    /// ```
    pub fn route_base_drain_ns(&self, route: u32) -> Option<u64> {
        self.routes.get(route as usize).and_then(|s| s.base.base())
    }

    /// The base drain time the monitor has measured for device `device`.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (_cc, monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// assert_eq!((monitor.device_base_drain_ns(0), monitor.device_base_drain_ns(5)), (None, None));
    /// ```
    pub fn device_base_drain_ns(&self, device: u16) -> Option<u64> {
        self.devices
            .get(usize::from(device))
            .and_then(|s| s.base.base())
    }

    /// Sets what drain-time pressure does on device `device` and on every
    /// route bound to it (from the next epoch on): the engine calls this
    /// when it opens the device, with [`CcConfig::drain_signal`] of the
    /// device's provider. Every device starts as [`DrainSignal::Enforce`].
    /// Health signals are not affected.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, DrainSignal, Mode, SoftwareProvider};
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, mut monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let rxe = SoftwareProvider::from_vendor_id(0xFF_FFFF);
    /// monitor.set_drain_signal(1, cfg.drain_signal(rxe)).unwrap();
    /// assert_eq!(monitor.drain_signal(1), Some(DrainSignal::Advisory));
    /// assert_eq!(monitor.route_policy(&cc, 1).unwrap().drain_signal, DrainSignal::Advisory);
    /// assert_eq!(monitor.route_policy(&cc, 0).unwrap().drain_signal, DrainSignal::Enforce);
    /// assert!(monitor.set_drain_signal(2, DrainSignal::Advisory).is_err());
    /// ```
    pub fn set_drain_signal(
        &mut self,
        device: u16,
        signal: DrainSignal,
    ) -> Result<(), AcquireError> {
        let s = self
            .drain
            .get_mut(usize::from(device))
            .ok_or(AcquireError::NoSuchDevice(device))?;
        *s = signal;
        Ok(())
    }

    /// Device `device`'s drain signal (`None` for an unknown device).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, DrainSignal, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (_cc, monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// assert_eq!(monitor.drain_signal(0), Some(DrainSignal::Enforce)); // every device starts so
    /// assert_eq!(monitor.drain_signal(1), None);
    /// ```
    pub fn drain_signal(&self, device: u16) -> Option<DrainSignal> {
        self.drain.get(usize::from(device)).copied()
    }

    /// What the policy saw for route `route` at its last judged epoch, with
    /// the drain signal of the device it is bound to now (`None` for an
    /// unknown route). `ctl` is the controller this monitor was built with.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode, PollerStatus};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, mut monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// monitor.on_epoch(&cc, 0, PollerStatus::Progressing);
    /// let v = monitor.route_policy(&cc, 0).unwrap();
    /// assert!(!v.pressured); // an idle route is not under pressure
    /// assert!(monitor.route_policy(&cc, 1).is_none());
    /// ```
    pub fn route_policy(&self, ctl: &Controller, route: u32) -> Option<PolicyView> {
        let st = self.routes.get(route as usize)?;
        let dev = ctl
            .routes
            .get(route as usize)?
            .device
            .load(Ordering::Relaxed);
        let mut v = st.view;
        v.drain_signal = usize::try_from(dev)
            .ok()
            .and_then(|d| self.drain.get(d).copied())
            .unwrap_or_default();
        v.base_drain_ns = st.base.base();
        Some(v)
    }

    /// What the policy saw for device `device` at its last judged epoch.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, DrainSignal, Mode};
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (_cc, mut monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// monitor.set_drain_signal(0, DrainSignal::Advisory).unwrap();
    /// assert_eq!(monitor.device_policy(0).unwrap().drain_signal, DrainSignal::Advisory);
    /// ```
    pub fn device_policy(&self, device: u16) -> Option<PolicyView> {
        let st = self.devices.get(usize::from(device))?;
        let mut v = st.view;
        v.drain_signal = self.drain[usize::from(device)];
        v.base_drain_ns = st.base.base();
        Some(v)
    }

    fn policy(
        ctl: &Controller,
        st: &mut PolicyState,
        dom: &Domain,
        e: EpochInput,
        report: &mut EpochReport,
        device: Option<u16>,
    ) {
        let p = &ctl.params;
        let w = dom.word();
        match w.health() {
            Health::Quarantined => {
                report.quarantined += 1;
                let until = match st.quarantine {
                    Some((seq, until)) if seq == w.quarantine_seq() => until,
                    _ => {
                        let until = e.now.saturating_add(p.cooldown_ns);
                        st.quarantine = Some((w.quarantine_seq(), until));
                        dom.cooldown_until.store(until.max(1), Ordering::Relaxed);
                        until
                    }
                };
                if e.now >= until {
                    // The probe window and the cleared cooldown are in place
                    // before PROBING is visible: a poster that sees PROBING
                    // admits against the probe window, never the window the
                    // route had before its quarantine, and a snapshot that
                    // sees the next QUARANTINED never shows this cooldown.
                    dom.window.store(p.probe_window, Ordering::Relaxed);
                    dom.cooldown_until.store(0, Ordering::Release);
                    if ctl
                        .transition(dom, Some(w.generation()), Event::CooldownExpired)
                        .is_some()
                    {
                        st.aimd = Aimd::default();
                        report.probes_started += 1;
                        if let Some(dev) = device {
                            ctl.bump_routes_of(dev);
                        }
                    } else {
                        dom.cooldown_until.store(until.max(1), Ordering::Relaxed);
                    }
                }
                return;
            }
            Health::Probing => return,
            _ => {}
        }
        if w.generation() != st.base_generation {
            // A new endpoint / QP or a rebind: the path may differ.
            st.base.clear();
            st.span_in_flight_ns = 0;
            st.span_drained = 0;
            st.span_epochs = 0;
            st.base_generation = w.generation();
        }
        let window = dom.window.load(Ordering::Relaxed);
        let may_grow = matches!(w.health(), Health::Healthy | Health::Congested);
        let sample = if e.stalled || e.epoch_ns == 0 {
            // No drain-time verdict from an epoch in which the poller did
            // not run (or that has no length), but receiver pressure counts.
            if !e.rnr {
                return;
            }
            Sample {
                pressured: false,
                receiver_pressure: true,
                may_grow,
            }
        } else {
            let in_flight = dom.in_flight();
            if p.target_mode == TargetMode::Adaptive {
                st.base_sample(p, in_flight, e);
            }
            let threshold = pressure_threshold_ns(p, st.base.base());
            let pressured = epoch_pressured(in_flight, e.drained, e.epoch_ns, threshold);
            st.view.drain_ns = drain_time_ns(in_flight, e.drained, e.epoch_ns);
            st.view.threshold_ns = Some(threshold);
            st.view.pressured = pressured;
            // Advisory: the verdict is observed and counted, never acted on.
            let enforced = match e.signal {
                DrainSignal::Enforce => pressured,
                DrainSignal::Advisory => {
                    if pressured {
                        st.view.advisory_pressure_epochs += 1;
                        report.advisory_pressure += 1;
                    }
                    false
                }
            };
            Sample {
                pressured: enforced,
                receiver_pressure: e.rnr,
                may_grow,
            }
        };
        let v = st.aimd.epoch(p, window, sample);
        if v.window != window {
            // Lost to a concurrent probe recovery: skip this epoch's change.
            let _ =
                dom.window
                    .compare_exchange(window, v.window, Ordering::Relaxed, Ordering::Relaxed);
        }
        if let Some(s) = v.sustained {
            ctl.transition(dom, None, Event::Pressure(s));
        }
    }
}

/// What one epoch feeds the policy of one domain.
#[derive(Clone, Copy, Debug)]
struct EpochInput {
    drained: u64,
    epoch_ns: u64,
    now: Nanos,
    stalled: bool,
    rnr: bool,
    /// The drain signal of the domain's device.
    signal: DrainSignal,
}
