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

use std::sync::Mutex;

use railyard_core::cc::{
    Admission, CcConfig, ConfigError, Controller, DomainSnapshot, Mode, Monitor, Permit, Settlement,
};
use railyard_core::evidence::Observed;
use railyard_core::token::TokenRecord;

use crate::enums::{
    ry_domain_kind, ry_effect, ry_health, ry_mode, ry_poller_status, ry_settlement, ry_target_mode,
};
use crate::error::{guard, Error, Result, RyStatus};
use crate::handle::Registry;
use crate::ptr::{in_ref, in_slice, out_ref, write_out};
use crate::token::ry_token_record;

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
        let mode = ry_mode::to_core(self.mode, "mode")
            .map_err(|_| Error::from(ConfigError::InvalidMode))?;
        let threshold = u16::try_from(self.hard_error_threshold).map_err(|_| {
            Error::from(ConfigError::TooLarge(
                railyard_core::cc::Param::HardErrorThreshold,
            ))
        })?;
        let c = CcConfig {
            mode,
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
    guard(|| {
        let c = ry_cc_config::from(&CcConfig::default());
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, c, "out") }
    })
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
    guard(|| {
        if out.is_null() {
            return Err(Error::null("out"));
        }
        let c = CcConfig::from_env()?;
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, ry_cc_config::from(&c), "out") }
    })
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

struct Cc {
    ctl: Controller,
    monitor: Mutex<Monitor>,
}

static CCS: Registry<Cc> = Registry::new(2, "controller");

fn cc(h: ry_cc) -> Result<crate::handle::Pinned<Cc>> {
    CCS.get(h.bits)
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
    guard(|| {
        // SAFETY: caller contract: valid for reads.
        let cfg = unsafe { in_ref(cfg, "cfg") }?.to_core()?;
        // SAFETY: caller contract: `routes` valid elements.
        let rd = unsafe { in_slice(route_devices, routes, "route_devices") }?;
        if out.is_null() {
            return Err(Error::null("out"));
        }
        let (ctl, monitor) = Controller::new(&cfg, devices, rd)?;
        let bits = CCS.insert(Cc {
            ctl,
            monitor: Mutex::new(monitor),
        })?;
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, ry_cc { bits }, "out") }
    })
}

/// Destroys a controller. Thread-safety: any thread; calls already
/// running on it finish safely; later calls get `RY_STATUS_INVALID_HANDLE`.
///
/// Ownership: consumes the handle; every copy of it becomes invalid.
#[no_mangle]
pub extern "C" fn ry_cc_destroy(cc: ry_cc) -> RyStatus {
    guard(|| CCS.remove(cc.bits))
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
    guard(|| {
        let c = self::cc(cc)?;
        if out.is_null() {
            return Err(Error::null("out"));
        }
        let adm = match c.ctl.try_acquire(device, route, bytes, now_ns)? {
            Admission::Admit(p) => ry_admission {
                kind: ry_admission_kind::Admit,
                domain: ry_domain_kind::Route,
                window: 0,
                in_flight: 0,
                permit: ry_permit::from_core(p),
            },
            Admission::Defer(d) => ry_admission {
                kind: ry_admission_kind::Defer,
                domain: d.domain.into(),
                window: d.window,
                in_flight: d.in_flight,
                permit: ry_permit::default(),
            },
            Admission::Avoid(a) => ry_admission {
                kind: ry_admission_kind::Avoid,
                domain: a.domain.into(),
                window: 0,
                in_flight: 0,
                permit: ry_permit::default(),
            },
        };
        // SAFETY: caller contract: valid for writes (checked non-NULL
        // before admission, so a permit is never lost).
        unsafe { write_out(out, adm, "out") }
    })
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
    guard(|| {
        let c = self::cc(cc)?;
        // SAFETY: caller contract: valid for reads.
        let p = *unsafe { in_ref(permit, "permit") }?;
        let current = if p.held == 0 {
            false
        } else {
            let mut copy = p;
            let permit = copy.take()?;
            // `permit` is a view of the caller's plain-data permit (taken
            // from a copy): nothing is released, the caller's permit is
            // untouched.
            c.ctl.is_current(&permit)
        };
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, current, "out") }
    })
}

fn settle(out: *mut ry_settlement, s: Settlement) -> Result<()> {
    if out.is_null() {
        return Ok(());
    }
    // SAFETY: caller contract of every function taking `settlement_out`:
    // NULL or valid for writes.
    unsafe { write_out(out, ry_settlement::from(s), "settlement_out") }
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
    guard(|| {
        let c = self::cc(cc)?;
        let effect = ry_effect::to_core(effect, "effect")?;
        // SAFETY: caller contract: valid for reads and writes.
        let p = unsafe { out_ref(permit, "permit") }?.take()?;
        settle(settlement_out, c.ctl.release(p, effect)?)
    })
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
    guard(|| {
        if tail_out.is_null() {
            return Err(Error::null("tail_out"));
        }
        // SAFETY: caller contract: valid for reads and writes.
        let p = unsafe { out_ref(permit, "permit") }?;
        let whole = p.take()?;
        match whole.split(head) {
            Ok((h, t)) => {
                *p = ry_permit::from_core(h);
                // SAFETY: caller contract: valid for writes, not aliasing `permit`.
                unsafe { write_out(tail_out, ry_permit::from_core(t), "tail_out") }
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
    guard(|| {
        // SAFETY: caller contract: valid for reads and writes.
        let p = unsafe { out_ref(permit, "permit") }?;
        // SAFETY: caller contract: valid for reads and writes.
        let r = unsafe { out_ref(record, "record") }?;
        if r.holds & TokenRecord::HOLDS_PERMIT != 0 {
            return Err(Error::new(
                RyStatus::CcAlreadyHeld,
                "record already holds a permit",
            ));
        }
        let permit = p.take()?;
        let mut rec = TokenRecord::from(&*r);
        if let Err(back) = permit.record_into(&mut rec) {
            *p = ry_permit::from_core(back);
            return Err(Error::new(
                RyStatus::CcAlreadyHeld,
                "record already holds a permit",
            ));
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
    guard(|| {
        let c = self::cc(cc)?;
        let effect = ry_effect::to_core(effect, "effect")?;
        // SAFETY: caller contract: valid for reads and writes.
        let r = unsafe { out_ref(record, "record") }?;
        let mut rec = TokenRecord::from(&*r);
        let res = c.ctl.release_record(&mut rec, effect);
        r.holds = rec.holds;
        settle(settlement_out, res?)
    })
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
    guard(|| {
        let c = self::cc(cc)?;
        let effect = ry_effect::to_core(effect, "effect")?;
        settle(
            settlement_out,
            c.ctl.route_feedback(route, generation, effect)?,
        )
    })
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
    guard(|| {
        let g = self::cc(cc)?.ctl.advance_generation(route)?;
        if generation_out.is_null() {
            return Ok(());
        }
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(generation_out, g, "generation_out") }
    })
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
    guard(|| {
        let g = self::cc(cc)?.ctl.rebind_route(route, device)?;
        if generation_out.is_null() {
            return Ok(());
        }
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(generation_out, g, "generation_out") }
    })
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
    guard(|| {
        let s = self::cc(cc)?.ctl.route_snapshot(route).ok_or_else(|| {
            Error::new(
                RyStatus::CcNoSuchRoute,
                format_args!("no route domain {route}"),
            )
        })?;
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, snapshot(s), "out") }
    })
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
    guard(|| {
        let s = self::cc(cc)?.ctl.device_snapshot(device).ok_or_else(|| {
            Error::new(
                RyStatus::CcNoSuchDevice,
                format_args!("no device domain {device}"),
            )
        })?;
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, snapshot(s), "out") }
    })
}

pub(crate) fn route_snapshot(h: ry_cc, route: u32) -> Result<DomainSnapshot> {
    cc(h)?.ctl.route_snapshot(route).ok_or_else(|| {
        Error::new(
            RyStatus::CcNoSuchRoute,
            format_args!("no route domain {route}"),
        )
    })
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

/// Writes the controller's counters.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_cc_stats_get(cc: ry_cc, out: *mut ry_cc_stats) -> RyStatus {
    guard(|| {
        let s = self::cc(cc)?.ctl.stats();
        let v = ry_cc_stats {
            underflow_refusals: s.underflow_refusals,
            stale_feedback: s.stale_feedback,
            would_defer: s.would_defer,
            would_avoid: s.would_avoid,
            suppressed_timeouts: s.suppressed_timeouts,
            illegal_transitions: s.illegal_transitions,
        };
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, v, "out") }
    })
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
    guard(|| {
        let c = self::cc(cc)?;
        let poller = ry_poller_status::to_core(poller, "poller")?;
        let r = {
            let mut m = c.monitor.lock().unwrap_or_else(|e| e.into_inner());
            m.on_epoch(&c.ctl, now_ns, poller)
        };
        if report_out.is_null() {
            return Ok(());
        }
        let v = ry_epoch_report {
            counted_timeouts: r.counted_timeouts,
            suppressed_timeouts: r.suppressed_timeouts,
            quarantined: r.quarantined,
            probes_started: r.probes_started,
        };
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(report_out, v, "report_out") }
    })
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
    guard(|| {
        let m: Mode = self::cc(cc)?.ctl.mode();
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, ry_mode::from(m), "out") }
    })
}
