//! Shared byte-window congestion control at the post boundary (RFC 4162).
//!
//! This is software admission control, not DCQCN: after the transport has
//! resolved the actual RDMA path and immediately before it posts a WR, it
//! asks [`Controller::try_acquire`] to reserve the whole slice in the
//! **device** domain (one per worker context) and the **route** domain (one
//! per local context × remote NIC path):
//!
//! * [`Admission::Admit`]`(`[`Permit`]`)` — both reservations are held;
//! * [`Admission::Defer`] (`BYTE_WINDOW`) — neither is held (a failed second
//!   reservation rolls back the first); the work stays with its queue owner;
//! * [`Admission::Avoid`] (`PATH_QUARANTINED`) — use another rail; this is not
//!   counted again as a failure.
//!
//! A [`Permit`] is not `Copy`/`Clone` and is consumed exactly once: by
//! [`Controller::release`], or by [`Permit::record_into`] a
//! [`crate::token::TokenRecord`] whose
//! [`HOLDS_PERMIT`](crate::token::TokenRecord::HOLDS_PERMIT) bit
//! [`Controller::release_record`] clears when the completion settles it. A
//! partial post ([`Permit::split`]) returns only the unposted part. A permit
//! whose route generation changed before the post ([`Controller::is_current`])
//! is released, rolling back both reservations; feedback carrying an old
//! generation settles accounting only.
//!
//! An empty domain admits one valid slice larger than its window (also while
//! probing): the bound is max(window, one indivisible slice).
//!
//! The policy — AIMD with hysteresis ([`aimd`]), the path health state
//! machine ([`health`]) — is pure; the [`Monitor`] applies it once per control
//! epoch from the monitor thread, never from the data path.
//!
//! ## Drain time is judged against the path (adaptive target, the default)
//!
//! RFC 4162 reads drain time above `MC_ADAPTIVE_CC_TARGET_DRAIN_US` (200 µs)
//! as pressure. Taken literally on a path that is simply slower or farther
//! than the fabric the constant was chosen for (a 25 G NIC, a long link,
//! Soft-RoCE, which drains 256 KiB in ~3 ms) every epoch is "pressured", the
//! window sits at its minimum and throughput drops by half. So by default
//! ([`TargetMode::Adaptive`]) each domain measures its **base drain time** —
//! the windowed minimum of the drain time it shows while it holds no more
//! than one decrease above the minimum window, like base RTT in delay-based
//! datacenter CC — and an epoch is pressured when drain time exceeds
//! `max(target, base × 112.5 / decrease_percent)` (2.25× the base at the
//! default 50% decrease: the AIMD saw-tooth's trough then lands 12.5% above
//! the path's bandwidth-delay product). Until a base is measured the rule *is* the
//! RFC's, and the target is the threshold's floor, so a fast fabric keeps the
//! RFC behaviour exactly: in `railyard sim cc` the 16-sender incast still
//! goes from a 15.9 MiB to a 9.0 MiB standing queue, while healthy bulk on a
//! 25 Gb/s, 200 µs-RTT path runs within 0.5% of off in steady state instead
//! of −57%. Details and the reasoning: [`aimd`]. Setting
//! `MC_ADAPTIVE_CC_TARGET_DRAIN_US` explicitly keeps the RFC's absolute
//! meaning ([`TargetMode::Fixed`]) unless `MC_ADAPTIVE_CC_TARGET_MODE=adaptive`
//! is set too.
//!
//! ## Software providers: drain time is advisory (the default)
//!
//! On a software RDMA provider — Soft-RoCE (`rxe`, `vendor_id` 0xFFFFFF) or
//! Soft-iWARP (`siw`, 0x626D74), [`SoftwareProvider::from_vendor_id`] — the
//! "send queue" is host CPU, not a fabric: drain time measures how the host
//! schedules the provider's kernel threads, and throughput keeps rising
//! with bytes in flight up to several MiB (batching amortises per-request
//! cost), so no per-sender drain-time rule can tell it from a synchronized
//! incast (see [`aimd`]). The engine therefore sets such a device's
//! [`DrainSignal`] to [`DrainSignal::Advisory`] when it opens it
//! ([`Monitor::set_drain_signal`] with [`CcConfig::drain_signal`]; routes
//! follow their device): each epoch still computes drain time, threshold
//! and the pressure verdict — visible in [`PolicyView`]
//! ([`Monitor::route_policy`]), [`EpochReport::advisory_pressure`] and the
//! engine's TRACE epoch line — but a pressured epoch is fed to the AIMD as
//! calm, so drain time never shrinks the window or marks the domain
//! CONGESTED. Every health signal (completion-error classification,
//! software timeouts, receiver pressure, quarantine, probing, generation
//! fencing) acts exactly as on any other device. On a software provider the
//! enforce arm thus measures the controller's overhead and its health
//! policy, not a drain policy; hardware keeps the adaptive rule above.
//! `MC_ADAPTIVE_CC_SOFTWARE_DRAIN=enforce` restores drain enforcement there;
//! an explicit `MC_ADAPTIVE_CC_TARGET_DRAIN_US` (the RFC's absolute meaning)
//! enforces it everywhere unless that knob says `advisory`. A device is
//! only ever advisory if it is told so: the simulator's fabrics and every
//! controller built without [`Monitor::set_drain_signal`] enforce.
//!
//! ## Snapshots
//!
//! [`Controller::route_snapshot`] / [`Controller::device_snapshot`] (and the
//! evidence built from them, [`Deferral::in_flight`], and the monitor's own
//! reading) take in-flight bytes as **one consistent value**: the exact
//! in-flight at one instant, never the released-then-reacquired bytes
//! counted twice by a reader preempted between two loads (if the domain's
//! counters keep moving for several rounds, a bounded under-estimate, never
//! an over-estimate). The other fields of a snapshot are separate words
//! read one after the other: each is a value it really had, and the
//! cooldown is cleared before the state leaves QUARANTINED, so a snapshot
//! never shows one quarantine's cooldown on another. The monitor's drained
//! bytes per epoch are **bounded** (see the monitor's docs).
//!
//! ## Compiled out
//!
//! Without the `adaptive-cc` feature, [`Controller`] and [`Monitor`] are the
//! zero-sized [`Bypass`] / [`BypassMonitor`]: the same API, admitting
//! everything at zero cost, so engines need no `cfg`s.
//!
//! ## Cost (per slice: `try_acquire` + `release`, one thread, uncontended)
//!
//! `cargo bench -p railyard-benches --bench cc -- --warm-up-time 1
//! --measurement-time 4` (criterion, all arms in one run, on a shared
//! 2-core VM):
//!
//! | arm | median | note |
//! |---|---|---|
//! | compiled out ([`Bypass`]) | 0.59 ns | baseline |
//! | [`Mode::Off`] | 0.94 ns | +0.35 ns: goal ≤ 1 ns over compiled out met |
//! | [`Mode::Observe`] | 25.0 ns | |
//! | [`Mode::Enforce`], two domains | 25.7 ns | goal ≤ 39 ns met on an unsaturated host |
//! | 4 bare locked RMWs (floor) | 19.5 ns | enforce = 1.32× floor |
//!
//! The runs behind it, and how they move with the host's load:
//! `docs/benchmarks.md`.
//!
//! Each domain keeps in-flight bytes as two monotonic totals (`acquired`,
//! `released`), so a slice costs exactly one CAS per domain on admission
//! and one on release; `released` doubles as the monitor's drain counter.
//! Everything else on the data path is loads of the same cache line.

pub mod aimd;
mod bypass;
pub mod config;
pub mod health;

#[cfg(any(feature = "adaptive-cc", all(railyard_loom, feature = "alloc")))]
mod adaptive;

#[cfg(any(feature = "adaptive-cc", all(railyard_loom, feature = "alloc")))]
pub use adaptive::{Controller, Monitor};
pub use bypass::{Bypass, BypassMonitor};
#[cfg(not(any(feature = "adaptive-cc", all(railyard_loom, feature = "alloc"))))]
pub use bypass::{Bypass as Controller, BypassMonitor as Monitor};

pub use config::{
    CcConfig, ConfigError, DrainSignal, Mode, Param, Params, SoftwareProvider, TargetMode,
};
pub use health::Health;

use core::fmt;

use crate::evidence::{Observation, Observed, PathId, Reason};
use crate::time::Nanos;
use crate::token::TokenRecord;

/// Which of the two domains decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainKind {
    /// The device (worker context) domain.
    Device,
    /// The route (local context × remote NIC path) domain.
    Route,
}

/// A reservation of one slice's bytes in a device and a route domain.
///
/// Not `Copy`/`Clone`: it is consumed exactly once by
/// [`Controller::release`], [`Permit::record_into`] or [`Permit::split`].
#[must_use = "a permit must be released or recorded into a TokenRecord exactly once"]
#[derive(Debug, PartialEq, Eq)]
pub struct Permit {
    device: u16,
    route: u32,
    generation: u32,
    bytes: u32,
}

impl Permit {
    #[inline(always)]
    pub(crate) const fn new(device: u16, route: u32, generation: u32, bytes: u32) -> Self {
        Self {
            device,
            route,
            generation,
            bytes,
        }
    }

    #[inline(always)]
    pub(crate) const fn into_parts(self) -> (u16, u32, u32, u32) {
        (self.device, self.route, self.generation, self.bytes)
    }

    /// Device domain index.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(1, 1, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(p.device(), 1);
    /// cc.release(p, Effect::Success).unwrap();
    /// ```
    #[inline]
    pub const fn device(&self) -> u16 {
        self.device
    }

    /// Route domain index.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(1, 1, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(p.route(), 1);
    /// cc.release(p, Effect::Success).unwrap();
    /// ```
    #[inline]
    pub const fn route(&self) -> u32 {
        self.route
    }

    /// Route generation at admission.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(1, 1, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(Some(p.generation()), cc.route_generation(1));
    /// cc.release(p, Effect::Success).unwrap();
    /// ```
    #[inline]
    pub const fn generation(&self) -> u32 {
        self.generation
    }

    /// Reserved bytes.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(1, 1, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(p.bytes(), 4096);
    /// cc.release(p, Effect::Success).unwrap();
    /// ```
    #[inline]
    pub const fn bytes(&self) -> u32 {
        self.bytes
    }

    /// Splits off the first `head` bytes (for a WR chain: each WR's record
    /// holds its own part; after a `bad_wr` the unposted tail is released).
    /// `head` must be in `1..bytes`; otherwise the permit is returned intact.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
    /// use railyard_core::classify::Effect;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(1, 1, 4096, 0).unwrap() else { unreachable!() };
    /// // A 4 KiB slice as a chain of 1 KiB + 3 KiB work requests.
    /// let (head, tail) = p.split(1024).unwrap();
    /// assert_eq!((head.bytes(), tail.bytes()), (1024, 3072));
    /// let whole = tail.split(3072).unwrap_err(); // head must be in 1..bytes: handed back intact
    /// cc.release(head, Effect::Success).unwrap();
    /// cc.release(whole, Effect::Success).unwrap();
    /// ```
    pub fn split(self, head: u32) -> Result<(Permit, Permit), Permit> {
        if head == 0 || head >= self.bytes {
            return Err(self);
        }
        let tail = Permit::new(self.device, self.route, self.generation, self.bytes - head);
        Ok((
            Permit::new(self.device, self.route, self.generation, head),
            tail,
        ))
    }

    /// Moves the permit into `record` (device, route, route_generation,
    /// bytes, `holds |= HOLDS_PERMIT`). If the record already holds a
    /// permit, nothing changes and the permit is handed back.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode, ReleaseError};
    /// use railyard_core::classify::classify_wc;
    /// use railyard_core::token::TokenRecord;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(permit) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// // A chain of two WRs: the second was rejected at bad_wr.
    /// let (posted, unposted) = permit.split(1024).unwrap();
    /// cc.release(unposted, classify_wc(0, 0).effect).unwrap(); // only the unposted part
    /// let mut record = TokenRecord::default();
    /// posted.record_into(&mut record).unwrap();
    /// // ... the completion path only has the record:
    /// let wc = classify_wc(0 /* IBV_WC_SUCCESS */, 0);
    /// cc.release_record(&mut record, wc.effect).unwrap();
    /// assert_eq!(cc.release_record(&mut record, wc.effect), Err(ReleaseError::NotHeld));
    /// ```
    pub fn record_into(self, record: &mut TokenRecord) -> Result<(), Permit> {
        if record.holds & TokenRecord::HOLDS_PERMIT != 0 {
            return Err(self);
        }
        record.device = self.device;
        record.route = self.route;
        record.route_generation = self.generation;
        record.bytes = self.bytes;
        record.holds |= TokenRecord::HOLDS_PERMIT;
        Ok(())
    }

    /// Takes the permit back out of `record` (clearing `HOLDS_PERMIT`, so
    /// it cannot be taken twice): the inverse of [`Permit::record_into`].
    /// `None` if the record holds no permit. Used by boundaries that carry
    /// permits as plain data (the C ABI) and need [`Permit::split`] or
    /// [`Controller::release`] afterwards; a forged record is no stronger
    /// than one passed to [`Controller::release_record`] (an underflowing
    /// release is refused and counted).
    ///
    /// ```
    /// use railyard_core::cc::{Admission, CcConfig, Controller, Mode, Permit};
    /// use railyard_core::classify::Effect;
    /// use railyard_core::token::TokenRecord;
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// let mut rec = TokenRecord::default();
    /// p.record_into(&mut rec).unwrap();
    /// let p = Permit::take_from(&mut rec).unwrap();
    /// assert!(Permit::take_from(&mut rec).is_none());
    /// assert_eq!(p.bytes(), 4096);
    /// cc.release(p, Effect::None).unwrap();
    /// // (With `adaptive-cc` compiled out the controller keeps no domains.)
    /// # #[cfg(feature = "adaptive-cc")]
    /// assert_eq!(cc.route_snapshot(0).unwrap().in_flight, 0);
    /// ```
    pub fn take_from(record: &mut TokenRecord) -> Option<Permit> {
        if record.holds & TokenRecord::HOLDS_PERMIT == 0 {
            return None;
        }
        record.holds &= !TokenRecord::HOLDS_PERMIT;
        Some(Permit::new(
            record.device,
            record.route,
            record.route_generation,
            record.bytes,
        ))
    }
}

/// Why admission deferred.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeferReason {
    /// `BYTE_WINDOW`: the domain's byte window is full.
    ByteWindow,
}

/// A deferral: do not post; the slice stays in its transport queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deferral {
    /// Always [`DeferReason::ByteWindow`].
    pub reason: DeferReason,
    /// The domain whose window was full.
    pub domain: DomainKind,
    /// That domain's window.
    pub window: u64,
    /// That domain's in-flight bytes.
    pub in_flight: u64,
}

impl Deferral {
    /// A `BYTE_WINDOW` deferral by `domain`.
    ///
    /// ```
    /// use railyard_core::cc::{DeferReason, Deferral, DomainKind};
    /// let d = Deferral::byte_window(DomainKind::Route, 262144, 262144);
    /// assert_eq!((d.reason, d.domain), (DeferReason::ByteWindow, DomainKind::Route));
    /// ```
    #[inline]
    pub const fn byte_window(domain: DomainKind, window: u64, in_flight: u64) -> Self {
        Self {
            reason: DeferReason::ByteWindow,
            domain,
            window,
            in_flight,
        }
    }
}

/// Why admission avoided the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AvoidReason {
    /// `PATH_QUARANTINED`.
    PathQuarantined,
}

/// An avoidance: use another rail or transport; not a new failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Avoidance {
    /// Always [`AvoidReason::PathQuarantined`].
    pub reason: AvoidReason,
    /// The quarantined domain.
    pub domain: DomainKind,
}

impl Avoidance {
    /// A `PATH_QUARANTINED` avoidance of `domain`.
    ///
    /// ```
    /// use railyard_core::cc::{AvoidReason, Avoidance, DomainKind};
    /// let a = Avoidance::quarantined(DomainKind::Device);
    /// assert_eq!((a.reason, a.domain), (AvoidReason::PathQuarantined, DomainKind::Device));
    /// ```
    #[inline]
    pub const fn quarantined(domain: DomainKind) -> Self {
        Self {
            reason: AvoidReason::PathQuarantined,
            domain,
        }
    }
}

/// The admission decision.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Post; both reservations are held by the permit.
    Admit(Permit),
    /// `BYTE_WINDOW`: do not post.
    Defer(Deferral),
    /// `PATH_QUARANTINED`: use another rail.
    Avoid(Avoidance),
}

impl Admission {
    /// The evidence reason of a non-admission, `None` for `Admit`.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, Deferral, DomainKind};
    /// use railyard_core::evidence::Reason;
    /// let deferred = Admission::Defer(Deferral::byte_window(DomainKind::Device, 1, 1));
    /// assert_eq!(deferred.reason(), Some(Reason::ByteWindow)); // record it on the task
    /// ```
    pub const fn reason(&self) -> Option<Reason> {
        match self {
            Admission::Admit(_) => None,
            Admission::Defer(_) => Some(Reason::ByteWindow),
            Admission::Avoid(_) => Some(Reason::PathQuarantined),
        }
    }
}

/// Invalid admission input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcquireError {
    /// A slice of zero bytes is not a valid slice.
    ZeroBytes,
    /// The token record already holds a permit: one attempt never holds two.
    AlreadyHeld,
    /// The device index is out of range.
    NoSuchDevice(u16),
    /// The route index is out of range.
    NoSuchRoute(u32),
    /// The route is bound to another device (rebind it first).
    WrongDevice {
        /// The route.
        route: u32,
        /// The device it is bound to.
        bound: u32,
        /// The device given.
        given: u16,
    },
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AcquireError::ZeroBytes => f.write_str("zero-byte slice"),
            AcquireError::AlreadyHeld => f.write_str("the token record already holds a permit"),
            AcquireError::NoSuchDevice(d) => write!(f, "no device domain {d}"),
            AcquireError::NoSuchRoute(r) => write!(f, "no route domain {r}"),
            AcquireError::WrongDevice {
                route,
                bound,
                given,
            } => {
                write!(f, "route {route} is bound to device {bound}, not {given}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AcquireError {}

/// A release that could not be applied. Nothing is lost: an underflow is
/// refused (the counter never goes negative) and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReleaseError {
    /// The record does not hold a permit (already released, or never held).
    NotHeld,
    /// The device index is out of range (forged record).
    NoSuchDevice(u16),
    /// The route index is out of range (forged record).
    NoSuchRoute(u32),
    /// Releasing would drive in-flight bytes negative (forged record): refused.
    Underflow {
        /// The domain that refused.
        domain: DomainKind,
    },
}

impl fmt::Display for ReleaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ReleaseError::NotHeld => f.write_str("record holds no permit"),
            ReleaseError::NoSuchDevice(d) => write!(f, "no device domain {d}"),
            ReleaseError::NoSuchRoute(r) => write!(f, "no route domain {r}"),
            ReleaseError::Underflow { domain } => {
                write!(f, "release would underflow the {domain:?} domain")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ReleaseError {}

/// How a release / feedback was settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Settlement {
    /// Accounting settled and the effect applied to the current generation.
    Current,
    /// Accounting settled only: the feedback came from an old generation.
    Stale,
}

/// Whether the CQ poller made progress during the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PollerStatus {
    /// The poller ran: software timeouts count as route timeouts.
    Progressing,
    /// The poller stalled: software timeouts of this epoch are suppressed.
    Stalled,
}

/// What one control epoch did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct EpochReport {
    /// Domains seen QUARANTINED.
    pub quarantined: u32,
    /// Domains moved QUARANTINED → PROBING.
    pub probes_started: u32,
    /// Software timeouts counted as route hard errors.
    pub counted_timeouts: u64,
    /// Software timeouts suppressed because the poller stalled.
    pub suppressed_timeouts: u64,
    /// Domains whose epoch was pressured by drain time but whose device's
    /// drain signal is [`DrainSignal::Advisory`]: observed, not enforced.
    pub advisory_pressure: u32,
}

/// What the monitor's policy saw for one domain at its last epoch
/// (diagnostics, slow path): the drain-time inputs and verdict, and whether
/// the verdict was enforced. `Default` is what a domain shows before its
/// first judged epoch (and what the compiled-out controller always shows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PolicyView {
    /// The drain signal in force (a route's is its device's).
    pub drain_signal: DrainSignal,
    /// The measured base drain time (adaptive target), if any.
    pub base_drain_ns: Option<u64>,
    /// Drain time of the last judged epoch (`None`: the domain was empty).
    pub drain_ns: Option<u64>,
    /// The pressure threshold of the last judged epoch.
    pub threshold_ns: Option<u64>,
    /// Whether the last judged epoch was pressured by drain time (whether
    /// or not that was enforced).
    pub pressured: bool,
    /// Pressured epochs that were not enforced ([`DrainSignal::Advisory`]).
    pub advisory_pressure_epochs: u64,
}

/// Controller counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CcStats {
    /// Releases refused because they would underflow in-flight bytes.
    pub underflow_refusals: u64,
    /// Feedback settled for accounting only (old generation).
    pub stale_feedback: u64,
    /// Observe mode: admissions enforce would have deferred.
    pub would_defer: u64,
    /// Observe mode: admissions enforce would have avoided.
    pub would_avoid: u64,
    /// Software timeouts suppressed by a poller stall.
    pub suppressed_timeouts: u64,
    /// State changes that were not an arrow of the diagram (must stay 0).
    pub illegal_transitions: u64,
}

/// A read-only view of one domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DomainSnapshot {
    /// Health state.
    pub health: Health,
    /// Generation.
    pub generation: u32,
    /// Hard errors counted towards the threshold.
    pub errors: u16,
    /// Byte window.
    pub window: u64,
    /// In-flight bytes.
    pub in_flight: u64,
    /// Cooldown deadline while quarantined, once the monitor has started it.
    pub cooldown_until: Observed<Nanos>,
}

impl DomainSnapshot {
    /// Fills an evidence [`Observation`] from this snapshot of `path`'s route.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// use railyard_core::evidence::{Observed, PathId, Reason};
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let snap = cc.route_snapshot(0).unwrap();
    /// let o = snap.observation(Reason::RouteTimeout, PathId { device: 0, route: 0 }, 100);
    /// assert_eq!(o.window, Observed::Value(snap.window));
    /// assert_eq!(o.generation, Observed::Value(snap.generation));
    /// assert_eq!(o.cooldown_remaining_ns, Observed::Unobserved); // not quarantined
    /// ```
    pub fn observation(&self, reason: Reason, path: PathId, now: Nanos) -> Observation {
        let mut o = Observation::new(reason, now);
        o.path = Observed::Value(path);
        o.generation = Observed::Value(self.generation);
        o.window = Observed::Value(self.window);
        o.in_flight = Observed::Value(self.in_flight);
        o.cooldown_remaining_ns = match self.cooldown_until {
            Observed::Value(until) => Observed::Value(until.saturating_sub(now)),
            Observed::Unobserved => Observed::Unobserved,
        };
        o
    }
}
