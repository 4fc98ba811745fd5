//! The shared byte-window congestion controller (RFC 4162): configuration,
//! admission, permits (whole, split, recorded), release, feedback, route
//! state and the monitor's control epoch.
//!
//! A permit crosses the boundary as a plain [`ry_permit`] whose `held`
//! flag every consuming call clears (release, record, split keeps it on
//! the head), so releasing the same `ry_permit` twice is
//! `RY_STATUS_CC_NOT_HELD`. Do not copy a held permit: two copies are two
//! claims on one reservation, and the controller can only refuse the
//! second release if it would underflow (it counts the refusal).
//!
//! The configuration functions are always built (the hot path's `cc` is an
//! [`ry_cc_config`]); the controller object (`ry_cc_create` and every call
//! on an [`ry_cc`] or an [`ry_permit`]) is part of the per-layer ABI
//! (cargo feature `layers`, `RY_LAYERS` in C).

use railyard_core::cc::{CcConfig, CcStats, ConfigError, EpochReport};

use crate::enums::{ry_domain_kind, ry_health, ry_mode, ry_target_mode};
use crate::error::{guard, ret, Error, Result, RyStatus};
use crate::mirror::{mirror, mirror_struct, CEnum};
use crate::ptr::in_ref;

/// Controller configuration (every `MC_ADAPTIVE_CC_*` parameter). Fill it
/// with `ry_cc_config_default` or `ry_cc_config_from_env`, then edit.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_cc_config {
    /// `ry_mode`: off, observe or enforce.
    pub mode: u32,
    /// Accumulated route hard errors / timeouts before quarantine (1..=65535).
    pub hard_error_threshold: u32,
    /// Consecutive pressured epochs to enter congestion.
    pub high_pressure_epochs: u32,
    /// Consecutive calm epochs to resume growth.
    pub low_pressure_epochs: u32,
    /// `ry_target_mode`: how drain time is judged (0 = adaptive, the
    /// default; 1 = fixed, RFC 4162's absolute target).
    pub target_mode: u32,
    /// Minimum window (bytes).
    pub min_window_bytes: u64,
    /// Maximum window (bytes).
    pub max_window_bytes: u64,
    /// Initial window (bytes); 0 = the maximum window.
    pub initial_window_bytes: u64,
    /// Drain time above this is pressure (microseconds); with the adaptive
    /// target mode, the floor of the path-relative threshold.
    pub target_drain_us: u64,
    /// Quarantine cooldown (milliseconds).
    pub cooldown_ms: u64,
    /// Probe window (bytes); 0 = the minimum window.
    pub probe_window_bytes: u64,
    /// Additive increase per calm epoch (bytes).
    pub additive_increase_bytes: u64,
    /// Percent of the window kept on a multiplicative decrease (1..=99).
    pub decrease_percent: u64,
}

impl From<&CcConfig> for ry_cc_config {
    fn from(c: &CcConfig) -> Self {
        ry_cc_config {
            mode: ry_mode::from(c.mode) as u32,
            hard_error_threshold: u32::from(c.hard_error_threshold),
            high_pressure_epochs: c.high_pressure_epochs,
            low_pressure_epochs: c.low_pressure_epochs,
            target_mode: ry_target_mode::from(c.target_mode) as u32,
            min_window_bytes: c.min_window_bytes,
            max_window_bytes: c.max_window_bytes,
            initial_window_bytes: c.initial_window_bytes.unwrap_or(0),
            target_drain_us: c.target_drain_us,
            cooldown_ms: c.cooldown_ms,
            probe_window_bytes: c.probe_window_bytes.unwrap_or(0),
            additive_increase_bytes: c.additive_increase_bytes,
            decrease_percent: c.decrease_percent,
        }
    }
}

impl ry_cc_config {
    pub(crate) fn to_core(self) -> Result<CcConfig> {
        let threshold = u16::try_from(self.hard_error_threshold).map_err(|_| {
            Error::from(ConfigError::TooLarge(
                railyard_core::cc::Param::HardErrorThreshold,
            ))
        })?;
        let c = CcConfig {
            mode: ry_mode::to_core(self.mode, "mode")
                .map_err(|_| Error::from(ConfigError::InvalidMode))?,
            min_window_bytes: self.min_window_bytes,
            max_window_bytes: self.max_window_bytes,
            initial_window_bytes: (self.initial_window_bytes != 0)
                .then_some(self.initial_window_bytes),
            target_drain_us: self.target_drain_us,
            target_mode: ry_target_mode::to_core(self.target_mode, "target_mode")
                .map_err(|_| Error::from(ConfigError::InvalidTargetMode))?,
            // Not a field of the C struct (its layout is ABI 3's): unset, it
            // follows `target_mode` (adaptive: advisory on software
            // providers; fixed: enforced everywhere, the RFC meaning).
            software_drain: None,
            high_pressure_epochs: self.high_pressure_epochs,
            low_pressure_epochs: self.low_pressure_epochs,
            hard_error_threshold: threshold,
            cooldown_ms: self.cooldown_ms,
            probe_window_bytes: (self.probe_window_bytes != 0).then_some(self.probe_window_bytes),
            additive_increase_bytes: self.additive_increase_bytes,
            decrease_percent: self.decrease_percent,
        };
        c.validate()?;
        Ok(c)
    }
}

/// Writes the default configuration (mode off; RFC 4162 defaults).
///
/// Ownership: writes `*out`. Thread-safety: any thread.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_cc_config_default(out: *mut ry_cc_config) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe { ret(out, "out", || Ok((&CcConfig::default()).into())) }
}

/// Reads `MC_ADAPTIVE_CC_*` from the process environment over the
/// defaults and validates the result. A set but malformed or invalid
/// variable is a `RY_STATUS_CC_CONFIG_*` error naming it in
/// `ry_last_error_message()`, and `*out` is left untouched (the RFC: the
/// controller stays off rather than running partially defaulted).
///
/// Thread-safety: reads the environment; do not call concurrently with
/// `setenv` in another thread (a libc restriction).
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_cc_config_from_env(out: *mut ry_cc_config) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe { ret(out, "out", || Ok((&CcConfig::from_env()?).into())) }
}

/// Validates a configuration without building anything.
///
/// Thread-safety: pure; any thread.
///
/// Ownership: borrows its arguments for the call only; retains nothing.
///
/// # Safety
/// `cfg` is valid for reads.
#[no_mangle]
pub unsafe extern "C" fn ry_cc_config_validate(cfg: *const ry_cc_config) -> RyStatus {
    guard(|| {
        // SAFETY: caller contract: valid for reads.
        unsafe { in_ref(cfg, "cfg") }?.to_core().map(drop)
    })
}

/// A controller handle (controller + its monitor). Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_cc {
    /// Opaque handle bits.
    pub bits: u64,
}

/// A reservation of one slice's bytes in a device and a route domain, as
/// plain data. Consumed exactly once by `ry_cc_release` or
/// `ry_permit_record_into` (both clear `held`); `ry_permit_split` leaves
/// the head here and writes the tail. Do not copy a held permit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_permit {
    /// Reserved bytes.
    pub bytes: u32,
    /// Route domain index.
    pub route: u32,
    /// Route generation at admission.
    pub generation: u32,
    /// Device domain index.
    pub device: u16,
    /// 1 while the permit holds its reservation; 0 once consumed.
    pub held: u8,
    /// Reserved, zero.
    pub reserved: u8,
}

/// `ry_admission.kind`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_admission_kind {
    /// Post: `permit` holds both reservations.
    Admit = 0,
    /// `BYTE_WINDOW`: do not post; the slice stays queued. No permit.
    Defer = 1,
    /// `PATH_QUARANTINED`: use another rail; not a new failure. No permit.
    Avoid = 2,
}

/// The admission decision.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_admission {
    /// Admit, defer or avoid.
    pub kind: ry_admission_kind,
    /// Defer / avoid: the domain that decided (device or route).
    pub domain: ry_domain_kind,
    /// Defer: that domain's window (bytes); 0 otherwise.
    pub window: u64,
    /// Defer: that domain's in-flight bytes; 0 otherwise.
    pub in_flight: u64,
    /// Admit: the permit (`held = 1`); otherwise all zero.
    pub permit: ry_permit,
}

/// A read-only view of one controller domain.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_domain_snapshot {
    /// Byte window.
    pub window: u64,
    /// In-flight bytes.
    pub in_flight: u64,
    /// Cooldown deadline (ns, caller's clock); meaningful only if
    /// `cooldown_until_observed`.
    pub cooldown_until_ns: u64,
    /// Health state.
    pub health: ry_health,
    /// Generation.
    pub generation: u32,
    /// Hard errors counted towards the threshold.
    pub errors: u32,
    /// Whether the monitor has started the quarantine cooldown.
    pub cooldown_until_observed: bool,
}

/// Controller counters (monotonic since creation).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_cc_stats {
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

/// What one control epoch did.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_epoch_report {
    /// Software timeouts counted as route hard errors.
    pub counted_timeouts: u64,
    /// Software timeouts suppressed because the poller stalled.
    pub suppressed_timeouts: u64,
    /// Domains seen QUARANTINED.
    pub quarantined: u32,
    /// Domains moved QUARANTINED -> PROBING.
    pub probes_started: u32,
}

mirror!(ry_admission_kind: Admit, Defer, Avoid);
mirror_struct!(
    ry_cc_stats
        <= CcStats {
            underflow_refusals,
            stale_feedback,
            would_defer,
            would_avoid,
            suppressed_timeouts,
            illegal_transitions
        }
);
mirror_struct!(ry_epoch_report <= EpochReport {
    counted_timeouts, suppressed_timeouts, quarantined, probes_started; advisory_pressure
});

#[cfg(feature = "layers")]
pub use layer::*;

/// The controller object's calls (feature `layers`).
#[cfg(feature = "layers")]
mod layer {
    use std::sync::Mutex;

    use railyard_core::cc::{Admission, Controller, DomainSnapshot, Monitor, Permit, PollerStatus};
    use railyard_core::classify::Effect;
    use railyard_core::evidence::Observed;
    use railyard_core::token::TokenRecord;

    use super::*;
    use crate::enums::{ry_effect, ry_poller_status, ry_settlement};
    use crate::error::ret_opt;
    use crate::handle::{Pinned, Registry};
    use crate::ptr::out_ref;
    use crate::token::ry_token_record;

    struct Cc {
        ctl: Controller,
        monitor: Mutex<Monitor>,
    }

    static CCS: Registry<Cc> = Registry::new(2, "controller");

    fn cc(h: ry_cc) -> Result<Pinned<Cc>> {
        CCS.get(h.bits)
    }

    impl ry_permit {
        fn from_core(p: Permit) -> Self {
            let mut rec = TokenRecord::default();
            // A fresh record holds no permit, so this cannot hand it back.
            let _ = p.record_into(&mut rec);
            ry_permit {
                bytes: rec.bytes,
                route: rec.route,
                generation: rec.route_generation,
                device: rec.device,
                held: 1,
                reserved: 0,
            }
        }

        /// Takes the permit out (clearing `held`).
        fn take(&mut self) -> Result<Permit> {
            if self.held == 0 {
                return Err(Error::new(
                    RyStatus::CcNotHeld,
                    "permit is not held (already released, recorded, or never admitted)",
                ));
            }
            let mut rec = TokenRecord {
                device: self.device,
                route: self.route,
                route_generation: self.generation,
                bytes: self.bytes,
                holds: TokenRecord::HOLDS_PERMIT,
                ..TokenRecord::default()
            };
            self.held = 0;
            Permit::take_from(&mut rec).ok_or_else(|| Error::new(RyStatus::Panic, "unreachable"))
        }
    }

    fn effect(v: u32) -> Result<Effect> {
        ry_effect::to_core(v, "effect")
    }

    /// Builds a controller with `devices` device domains and `routes` route
    /// domains, route `i` bound to device `route_devices[i]`. An invalid
    /// configuration or topology is an error and nothing is created.
    ///
    /// Ownership: on success `*out` names a new controller owned by the
    /// caller; free it with `ry_cc_destroy` (outstanding permits become
    /// invalid with it). Thread-safety: any thread.
    ///
    /// # Safety
    /// `cfg` is valid for reads; `route_devices` points to `routes` `uint16_t`s
    /// (may be NULL if `routes == 0`); `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_create(
        cfg: *const ry_cc_config,
        devices: u16,
        route_devices: *const u16,
        routes: usize,
        out: *mut ry_cc,
    ) -> RyStatus {
        // SAFETY: caller contract: `cfg` valid for reads, `route_devices`
        // holds `routes` elements, `out` valid for writes.
        unsafe {
            ret(out, "out", || {
                let cfg = in_ref(cfg, "cfg")?.to_core()?;
                let rd = crate::ptr::in_slice(route_devices, routes, "route_devices")?;
                let (ctl, monitor) = Controller::new(&cfg, devices, rd)?;
                let monitor = Mutex::new(monitor);
                Ok(ry_cc {
                    bits: CCS.insert(Cc { ctl, monitor })?,
                })
            })
        }
    }

    /// Destroys a controller. Thread-safety: any thread; calls already
    /// running on it finish safely; later calls get `RY_STATUS_INVALID_HANDLE`.
    ///
    /// Ownership: consumes the handle; every copy of it becomes invalid.
    #[no_mangle]
    pub extern "C" fn ry_cc_destroy(cc: ry_cc) -> RyStatus {
        guard(|| CCS.remove(cc.bits))
    }

    /// Byte-window admission of one whole slice on `device` x `route`,
    /// immediately before posting: reserves `bytes` in both domains or neither.
    /// On `RY_ADMISSION_KIND_ADMIT` the caller owns `out->permit` and must
    /// release or record it exactly once.
    ///
    /// Thread-safety: lock-free; the data path, any number of threads.
    ///
    /// Ownership: on admit the caller owns `out->permit` (see above); retains nothing else.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_try_acquire(
        cc: ry_cc,
        device: u16,
        route: u32,
        bytes: u32,
        now_ns: u64,
        out: *mut ry_admission,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes (checked non-NULL
        // before admission, so a permit is never lost).
        unsafe {
            ret(out, "out", || {
                let none = |kind, domain, window, in_flight| ry_admission {
                    kind,
                    domain,
                    window,
                    in_flight,
                    permit: ry_permit::default(),
                };
                let (defer, avoid) = (ry_admission_kind::Defer, ry_admission_kind::Avoid);
                let decision = self::cc(cc)?
                    .ctl
                    .try_acquire(device, route, bytes, now_ns)?;
                Ok(match decision {
                    Admission::Admit(p) => ry_admission {
                        permit: ry_permit::from_core(p),
                        ..none(ry_admission_kind::Admit, ry_domain_kind::Route, 0, 0)
                    },
                    Admission::Defer(d) => none(defer, d.domain.into(), d.window, d.in_flight),
                    Admission::Avoid(a) => none(avoid, a.domain.into(), 0, 0),
                })
            })
        }
    }

    /// Writes whether `permit` was admitted on the route's current generation.
    /// A permit that is not current must not be posted: release it with
    /// `RY_EFFECT_NONE` and resolve the path again.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: lock-free; any thread, concurrently with any call on the same object.
    ///
    /// # Safety
    /// `permit` is valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_is_current(
        cc: ry_cc,
        permit: *const ry_permit,
        out: *mut bool,
    ) -> RyStatus {
        // SAFETY: caller contract: `permit` valid for reads, `out` for writes.
        unsafe {
            ret(out, "out", || {
                let c = self::cc(cc)?;
                let mut copy = *in_ref(permit, "permit")?;
                // A view of a copy of the caller's plain-data permit: nothing
                // is released, the caller's permit is untouched.
                Ok(copy.held != 0 && c.ctl.is_current(&copy.take()?))
            })
        }
    }

    /// Releases `*permit` exactly once (clearing `held`) and applies `effect`
    /// (`ry_effect`, e.g. a WC classification's `effect`). Accounting always
    /// settles; `*settlement_out` (optional) says whether the effect applied
    /// to the current generation. A permit not held is `RY_STATUS_CC_NOT_HELD`
    /// and releases nothing.
    ///
    /// Thread-safety: lock-free; any thread (the permit itself must not be
    /// shared between threads without synchronisation).
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    ///
    /// # Safety
    /// `permit` is valid for reads and writes; `settlement_out` is NULL or
    /// valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_release(
        cc: ry_cc,
        permit: *mut ry_permit,
        effect: u32,
        settlement_out: *mut ry_settlement,
    ) -> RyStatus {
        // SAFETY: caller contract: `permit` valid for reads and writes,
        // `settlement_out` NULL or valid for writes.
        unsafe {
            ret_opt(settlement_out, || {
                let c = self::cc(cc)?;
                let effect = self::effect(effect)?;
                let p = out_ref(permit, "permit")?.take()?;
                Ok(c.ctl.release(p, effect)?.into())
            })
        }
    }

    /// Splits a held permit for a WR chain: `*permit` keeps the first `head`
    /// bytes and `*tail_out` receives the rest (held). `head` must be in
    /// `1..bytes`; otherwise `RY_STATUS_CC_SPLIT_OUT_OF_RANGE` and `*permit`
    /// is unchanged. After a `bad_wr`, release the unposted part only.
    ///
    /// Thread-safety: pure data; no controller involved.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    ///
    /// # Safety
    /// `permit` is valid for reads and writes; `tail_out` is valid for writes
    /// and does not alias `permit`.
    #[no_mangle]
    pub unsafe extern "C" fn ry_permit_split(
        permit: *mut ry_permit,
        head: u32,
        tail_out: *mut ry_permit,
    ) -> RyStatus {
        // SAFETY: caller contract: `permit` valid for reads and writes,
        // `tail_out` valid for writes and not aliasing it.
        unsafe {
            ret(tail_out, "tail_out", || {
                let p = out_ref(permit, "permit")?;
                match p.take()?.split(head) {
                    Ok((h, t)) => {
                        *p = ry_permit::from_core(h);
                        Ok(ry_permit::from_core(t))
                    }
                    Err(back) => {
                        *p = ry_permit::from_core(back);
                        Err(Error::new(
                            RyStatus::CcSplitOutOfRange,
                            format_args!("split head {head} not in 1..{}", p.bytes),
                        ))
                    }
                }
            })
        }
    }

    /// Moves a held permit into a token record (device, route,
    /// route_generation, bytes, `holds |= RY_HOLDS_PERMIT`) and clears
    /// `held`. If the record already holds a permit, nothing moves:
    /// `RY_STATUS_CC_ALREADY_HELD`.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    /// Thread-safety: pure data transformation; do not share the same struct between threads without synchronisation.
    ///
    /// # Safety
    /// `permit` and `record` are valid for reads and writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_permit_record_into(
        permit: *mut ry_permit,
        record: *mut ry_token_record,
    ) -> RyStatus {
        // SAFETY: caller contract: `permit` and `record` valid for reads and
        // writes.
        guard(|| unsafe {
            let held = || Error::new(RyStatus::CcAlreadyHeld, "record already holds a permit");
            let p = out_ref(permit, "permit")?;
            let r = out_ref(record, "record")?;
            if r.holds & TokenRecord::HOLDS_PERMIT != 0 {
                return Err(held());
            }
            let mut rec = TokenRecord::from(&*r);
            if let Err(back) = p.take()?.record_into(&mut rec) {
                *p = ry_permit::from_core(back);
                return Err(held());
            }
            *r = ry_token_record::from(&rec);
            Ok(())
        })
    }

    /// Releases the permit recorded in `*record` (the completion path) and
    /// clears `RY_HOLDS_PERMIT`, so a second release of the same record is
    /// `RY_STATUS_CC_NOT_HELD`. A forged record whose release would drive
    /// in-flight bytes negative is refused (`RY_STATUS_CC_UNDERFLOW`, counted).
    ///
    /// Thread-safety: lock-free; any thread.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    ///
    /// # Safety
    /// `record` is valid for reads and writes; `settlement_out` is NULL or
    /// valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_release_record(
        cc: ry_cc,
        record: *mut ry_token_record,
        effect: u32,
        settlement_out: *mut ry_settlement,
    ) -> RyStatus {
        // SAFETY: caller contract: `record` valid for reads and writes,
        // `settlement_out` NULL or valid for writes.
        unsafe {
            ret_opt(settlement_out, || {
                let c = self::cc(cc)?;
                let effect = self::effect(effect)?;
                let r = out_ref(record, "record")?;
                let mut rec = TokenRecord::from(&*r);
                let res = c.ctl.release_record(&mut rec, effect);
                r.holds = rec.holds;
                Ok(res?.into())
            })
        }
    }

    /// Feedback not carried by a permit (an async event on a QP of the route,
    /// a software deadline, RDMA CM evidence), fenced by the route
    /// `generation` it belongs to.
    ///
    /// Thread-safety: lock-free; any thread.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    ///
    /// # Safety
    /// `settlement_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_route_feedback(
        cc: ry_cc,
        route: u32,
        generation: u32,
        effect: u32,
        settlement_out: *mut ry_settlement,
    ) -> RyStatus {
        // SAFETY: caller contract: `settlement_out` NULL or valid for writes.
        unsafe {
            ret_opt(settlement_out, || {
                let c = self::cc(cc)?;
                let effect = self::effect(effect)?;
                Ok(c.ctl.route_feedback(route, generation, effect)?.into())
            })
        }
    }

    /// Device-scope fatal evidence: quarantines the device and moves every
    /// route bound to it to a new generation. Thread-safety: any thread.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    #[no_mangle]
    pub extern "C" fn ry_cc_quarantine_device(cc: ry_cc, device: u16) -> RyStatus {
        guard(|| Ok(self::cc(cc)?.ctl.quarantine_device(device)?))
    }

    /// The route's endpoint / QP was rebuilt: a new generation, written to
    /// `*generation_out` (optional). Thread-safety: any thread.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    ///
    /// # Safety
    /// `generation_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_advance_generation(
        cc: ry_cc,
        route: u32,
        generation_out: *mut u32,
    ) -> RyStatus {
        // SAFETY: caller contract: `generation_out` NULL or valid for writes.
        unsafe {
            ret_opt(generation_out, || {
                Ok(self::cc(cc)?.ctl.advance_generation(route)?)
            })
        }
    }

    /// A local-NIC handoff: binds `route` to `device` on a new generation,
    /// written to `*generation_out` (optional). Thread-safety: any thread.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    ///
    /// # Safety
    /// `generation_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_rebind_route(
        cc: ry_cc,
        route: u32,
        device: u16,
        generation_out: *mut u32,
    ) -> RyStatus {
        // SAFETY: caller contract: `generation_out` NULL or valid for writes.
        unsafe {
            ret_opt(generation_out, || {
                Ok(self::cc(cc)?.ctl.rebind_route(route, device)?)
            })
        }
    }

    fn snapshot(s: DomainSnapshot) -> ry_domain_snapshot {
        let (until, seen) = match s.cooldown_until {
            Observed::Value(v) => (v, true),
            Observed::Unobserved => (0, false),
        };
        ry_domain_snapshot {
            window: s.window,
            in_flight: s.in_flight,
            cooldown_until_ns: until,
            health: s.health.into(),
            generation: s.generation,
            errors: u32::from(s.errors),
            cooldown_until_observed: seen,
        }
    }

    /// Route domain `route`'s snapshot, or `RY_STATUS_CC_NO_SUCH_ROUTE`.
    pub(crate) fn route_snapshot(h: ry_cc, route: u32) -> Result<DomainSnapshot> {
        let no = || {
            Error::new(
                RyStatus::CcNoSuchRoute,
                format_args!("no route domain {route}"),
            )
        };
        cc(h)?.ctl.route_snapshot(route).ok_or_else(no)
    }

    /// Writes a snapshot of route domain `route` (slow path: diagnostics).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_route_snapshot(
        cc: ry_cc,
        route: u32,
        out: *mut ry_domain_snapshot,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe { ret(out, "out", || Ok(snapshot(route_snapshot(cc, route)?))) }
    }

    /// Writes a snapshot of device domain `device` (slow path: diagnostics).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_device_snapshot(
        cc: ry_cc,
        device: u16,
        out: *mut ry_domain_snapshot,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let s = self::cc(cc)?.ctl.device_snapshot(device).ok_or_else(|| {
                    Error::new(
                        RyStatus::CcNoSuchDevice,
                        format_args!("no device domain {device}"),
                    )
                })?;
                Ok(snapshot(s))
            })
        }
    }

    /// Writes the controller's counters.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_stats_get(cc: ry_cc, out: *mut ry_cc_stats) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe { ret(out, "out", || Ok(self::cc(cc)?.ctl.stats().into())) }
    }

    /// One control epoch at `now_ns` (the monitor's tick): applies pending
    /// timeouts (or suppresses them if `poller` is `RY_POLLER_STATUS_STALLED`),
    /// AIMD with hysteresis, HEALTHY <-> CONGESTED, and QUARANTINED -> PROBING
    /// after the cooldown. `*report_out` is optional.
    ///
    /// Thread-safety: meant for one monitor thread; concurrent calls on the
    /// same controller are serialised by an internal mutex (never taken by the
    /// data-path functions).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    ///
    /// # Safety
    /// `report_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_on_epoch(
        cc: ry_cc,
        now_ns: u64,
        poller: u32,
        report_out: *mut ry_epoch_report,
    ) -> RyStatus {
        // SAFETY: caller contract: `report_out` NULL or valid for writes.
        unsafe {
            ret_opt(report_out, || {
                let c = self::cc(cc)?;
                let poller: PollerStatus = ry_poller_status::to_core(poller, "poller")?;
                let mut m = c.monitor.lock().unwrap_or_else(|e| e.into_inner());
                Ok(m.on_epoch(&c.ctl, now_ns, poller).into())
            })
        }
    }

    /// Writes the controller's mode (`ry_mode`).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: pure; any thread, concurrently.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_mode(cc: ry_cc, out: *mut ry_mode) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe { ret(out, "out", || Ok(self::cc(cc)?.ctl.mode().into())) }
    }
}
