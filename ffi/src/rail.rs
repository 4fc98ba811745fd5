//! Inverse-score rail (NIC) selection (RFC 4534): create, pick (charging
//! the chosen NIC), plan a multi-slice request, charge, release.
//!
//! A charge crosses the boundary as a plain [`ry_rail_charge`] whose
//! `held` flag the release (or the move into a token record) clears, so
//! releasing the same charge twice is `RY_STATUS_RAIL_NOT_HELD`.
//!
//! `ry_rail_config_default` is always built (the hot path's `rail` is an
//! [`ry_rail_config`]); the selector object (`ry_rail_*`) is part of the
//! per-layer ABI (cargo feature `layers`, `RY_LAYERS` in C).

use railyard_core::rail::{RailConfig, RailCounters};

use crate::enums::ry_variant;
use crate::error::{ret, Result, RyStatus};
use crate::mirror::{mirror_struct, CEnum};

/// Largest number of candidate devices a selector accepts.
pub const RY_RAIL_MAX_DEVICES: u32 = 64;
const _: () = assert!(RY_RAIL_MAX_DEVICES as usize == railyard_core::rail::MAX_DEVICES);

/// One candidate device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_device_spec {
    /// Nominal link rate, bytes per second (200 Gb/s = 25000000000).
    pub nominal_bps: u64,
    /// NUMA tier weight, Q8 (256 = 1.0; 512 = twice as expensive).
    pub tier_q8: u16,
}

/// Every constant of the selector. Fill with `ry_rail_config_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_rail_config {
    /// A peer sample older than this is expired (ns).
    pub peer_ttl_ns: u64,
    /// An idle ledger entry is reclaimable after this long (ns).
    pub idle_reclaim_ns: u64,
    /// `ry_variant`: score inputs with peer accounting on.
    pub variant: u32,
    /// Every Nth decision is a round-robin probe; a power of two, or 0.
    pub probe_interval: u32,
    /// A probe only goes to a device within this multiple (Q8) of the best.
    pub probe_bound_q8: u32,
    /// EWMA weight of a new completion sample, Q16 (1..=65536).
    pub ewma_alpha_q16: u32,
    /// Lowest bandwidth estimate, Q8 multiple of nominal.
    pub ewma_floor_q8: u32,
    /// Highest bandwidth estimate, Q8 multiple of nominal.
    pub ewma_ceil_q8: u32,
    /// Ledger slots per device; a power of two.
    pub peer_slots: u32,
    /// Idle entries retained per device.
    pub history_target: u32,
    /// Nonzero: keep the per-peer ledger (needs the `peer-feedback` build
    /// feature; otherwise `RY_STATUS_RAIL_CONFIG`).
    pub peer_accounting: u8,
    /// Nonzero: per-decision trace for TTL calibration.
    pub trace: u8,
}

impl From<&RailConfig> for ry_rail_config {
    fn from(c: &RailConfig) -> Self {
        ry_rail_config {
            peer_ttl_ns: c.peer_ttl_ns,
            idle_reclaim_ns: c.idle_reclaim_ns,
            variant: ry_variant::from(c.variant) as u32,
            probe_interval: c.probe_interval,
            probe_bound_q8: c.probe_bound_q8,
            ewma_alpha_q16: c.ewma_alpha_q16,
            ewma_floor_q8: c.ewma_floor_q8,
            ewma_ceil_q8: c.ewma_ceil_q8,
            peer_slots: c.peer_slots,
            history_target: c.history_target,
            peer_accounting: u8::from(c.peer_accounting),
            trace: u8::from(c.trace),
        }
    }
}

impl ry_rail_config {
    pub(crate) fn to_core(self) -> Result<RailConfig> {
        Ok(RailConfig {
            peer_accounting: self.peer_accounting != 0,
            variant: ry_variant::to_core(self.variant, "variant")?,
            probe_interval: self.probe_interval,
            probe_bound_q8: self.probe_bound_q8,
            ewma_alpha_q16: self.ewma_alpha_q16,
            ewma_floor_q8: self.ewma_floor_q8,
            ewma_ceil_q8: self.ewma_ceil_q8,
            peer_ttl_ns: self.peer_ttl_ns,
            peer_slots: self.peer_slots,
            history_target: self.history_target,
            idle_reclaim_ns: self.idle_reclaim_ns,
            trace: self.trace != 0,
        })
    }
}

/// Writes the default selector configuration.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: pure; any thread, concurrently.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_rail_config_default(out: *mut ry_rail_config) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe { ret(out, "out", || Ok((&RailConfig::default()).into())) }
}

/// A rail selector handle. Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_rail {
    /// Opaque handle bits.
    pub bits: u64,
}

/// The bytes one attempt holds on a device (and its peer entry), as plain
/// data. Released exactly once by `ry_rail_release`, or moved into a token
/// record by `ry_rail_charge_record_into`; both clear `held`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_rail_charge {
    /// Charged bytes.
    pub bytes: u32,
    /// Charged peer; meaningful only if `peer_charged`.
    pub peer: u32,
    /// Charged device.
    pub device: u16,
    /// 1 while held; 0 once released or recorded.
    pub held: u8,
    /// Nonzero if the peer entry was charged too.
    pub peer_charged: u8,
}

/// A single-slice decision.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_rail_pick_result {
    /// The charge on the chosen device (held).
    pub charge: ry_rail_charge,
    /// The decision was a probe (not the best score).
    pub probe: bool,
    /// V2/V3 fell back to NIC feedback for the whole candidate set.
    pub fallback: bool,
}

/// Selector counters (monotonic since creation).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_rail_counters {
    /// Decisions taken (single picks and multi-slice plans).
    pub decisions: u64,
    /// Decisions that probed a device other than the best.
    pub probes: u64,
    /// V2/V3 decisions that fell back to NIC feedback.
    pub fallbacks: u64,
    /// Candidate peer samples found missing in V2/V3 decisions.
    pub missing_samples: u64,
    /// Candidate peer samples found expired in V2/V3 decisions.
    pub expired_samples: u64,
    /// Peer charges that fell back to NIC scope: ledger full.
    pub exhausted: u64,
    /// Peer charges that fell back to NIC scope: insert lock busy.
    pub contended: u64,
    /// Peer-side release failures (NIC side released anyway).
    pub peer_accounting_errors: u64,
    /// NIC-side release refusals (underflow or unknown device).
    pub nic_accounting_errors: u64,
    /// Idle ledger entries reclaimed.
    pub reclaimed: u64,
}

mirror_struct!(
    ry_rail_counters
        <= RailCounters {
            decisions,
            probes,
            fallbacks,
            missing_samples,
            expired_samples,
            exhausted,
            contended,
            peer_accounting_errors,
            nic_accounting_errors,
            reclaimed
        }
);

#[cfg(feature = "layers")]
pub use layer::*;

/// The selector object's calls (feature `layers`).
#[cfg(feature = "layers")]
mod layer {
    use railyard_core::rail::{DeviceSpec, Outcome, RailCharge, Selector};
    use railyard_core::token::{OptId, TokenRecord};

    use super::*;
    use crate::error::{guard, Error};
    use crate::handle::Registry;
    use crate::ptr::{in_opt, in_slice, out_ref, out_slice};
    use crate::token::ry_token_record;

    static RAILS: Registry<Selector> = Registry::new(4, "rail selector");

    impl ry_rail_charge {
        fn from_core(c: RailCharge) -> Self {
            ry_rail_charge {
                bytes: c.bytes(),
                peer: c.peer().unwrap_or(0),
                device: c.device(),
                held: 1,
                peer_charged: u8::from(c.peer().is_some()),
            }
        }

        fn record(&self) -> TokenRecord {
            let mut holds = TokenRecord::HOLDS_RAIL_CHARGE;
            if self.peer_charged != 0 {
                holds |= TokenRecord::HOLDS_RAIL_PEER_CHARGE;
            }
            TokenRecord {
                device: self.device,
                bytes: self.bytes,
                peer: OptId::new((self.peer_charged != 0).then_some(self.peer)),
                holds,
                ..TokenRecord::default()
            }
        }

        fn take(&mut self) -> Result<RailCharge> {
            if self.held == 0 {
                return Err(Error::new(
                    RyStatus::RailNotHeld,
                    "rail charge is not held (already released or recorded)",
                ));
            }
            let mut rec = self.record();
            self.held = 0;
            RailCharge::take_from(&mut rec)
                .ok_or_else(|| Error::new(RyStatus::Panic, "unreachable"))
        }
    }

    /// Creates a selector over `n` candidate devices (`cfg` NULL = defaults).
    ///
    /// Ownership: `*out` is owned by the caller; free with `ry_rail_destroy`.
    /// Thread-safety: any thread.
    ///
    /// # Safety
    /// `devices` points to `n` specs; `cfg` is NULL or valid for reads; `out`
    /// is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_create(
        devices: *const ry_device_spec,
        n: usize,
        cfg: *const ry_rail_config,
        out: *mut ry_rail,
    ) -> RyStatus {
        // SAFETY: caller contract: `devices` holds `n` specs, `cfg` is NULL
        // or valid for reads, `out` valid for writes.
        unsafe {
            ret(out, "out", || {
                let specs: Vec<DeviceSpec> = in_slice(devices, n, "devices")?
                    .iter()
                    .map(|d| DeviceSpec::new(d.nominal_bps).with_tier_q8(d.tier_q8))
                    .collect();
                let cfg = match in_opt(cfg) {
                    None => RailConfig::default(),
                    Some(c) => c.to_core()?,
                };
                let bits = RAILS.insert(Selector::new(&specs, cfg)?)?;
                Ok(ry_rail { bits })
            })
        }
    }

    /// Destroys a selector. Thread-safety: any thread; calls already running
    /// finish safely.
    ///
    /// Ownership: consumes the handle; every copy of it becomes invalid.
    #[no_mangle]
    pub extern "C" fn ry_rail_destroy(rail: ry_rail) -> RyStatus {
        guard(|| RAILS.remove(rail.bits))
    }

    /// Chooses a device for one slice of `bytes` to `*peer` (NULL = unknown
    /// peer, distinct from peer 0) and charges it.
    ///
    /// Ownership: the caller owns `out->charge` and releases it exactly once.
    /// Thread-safety: lock-free; any number of threads.
    ///
    /// # Safety
    /// `peer` is NULL or valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_pick(
        rail: ry_rail,
        peer: *const u32,
        bytes: u32,
        now_ns: u64,
        out: *mut ry_rail_pick_result,
    ) -> RyStatus {
        // SAFETY: caller contract: `peer` NULL or valid for reads, `out` valid
        // for writes (checked before the pick, so a charge is never lost).
        unsafe {
            ret(out, "out", || {
                let p = RAILS.get(rail.bits)?.pick(in_opt(peer), bytes, now_ns);
                Ok(ry_rail_pick_result {
                    charge: ry_rail_charge::from_core(p.charge),
                    probe: p.probe,
                    fallback: p.fallback,
                })
            })
        }
    }

    /// Splits `slices` slices of `slice_bytes` to `*peer` (NULL = unknown)
    /// across the candidates in proportion to their inverse scores, writing
    /// per-device slice counts to `counts[0..counts_len)`. Charges nothing:
    /// charge each slice with `ry_rail_charge_device`.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: lock-free; any thread, concurrently with any call on the same object.
    ///
    /// # Safety
    /// `peer` is NULL or valid for reads; `counts` points to `counts_len`
    /// writable `uint32_t`s.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_plan(
        rail: ry_rail,
        peer: *const u32,
        slices: u32,
        slice_bytes: u32,
        now_ns: u64,
        counts: *mut u32,
        counts_len: usize,
    ) -> RyStatus {
        // SAFETY: caller contract: `peer` NULL or valid for reads, `counts`
        // holds `counts_len` writable elements.
        guard(|| unsafe {
            let sel = RAILS.get(rail.bits)?;
            let peer = in_opt(peer);
            if counts.is_null() {
                return Err(Error::null("counts"));
            }
            let counts = out_slice(counts, counts_len, "counts")?;
            sel.plan(peer, slices, slice_bytes, now_ns, counts)?;
            Ok(())
        })
    }

    /// Charges `bytes` to `device` (and to `*peer` there if the ledger is on)
    /// — for the slices of `ry_rail_plan`. The caller owns `*out`.
    ///
    /// Ownership: the caller owns `*out` and releases it exactly once.
    /// Thread-safety: lock-free; any thread, concurrently with any call on the same object.
    ///
    /// # Safety
    /// `peer` is NULL or valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_charge_device(
        rail: ry_rail,
        device: u16,
        peer: *const u32,
        bytes: u32,
        now_ns: u64,
        out: *mut ry_rail_charge,
    ) -> RyStatus {
        // SAFETY: caller contract: `peer` NULL or valid for reads, `out` valid
        // for writes.
        unsafe {
            ret(out, "out", || {
                let c = RAILS
                    .get(rail.bits)?
                    .charge(device, in_opt(peer), bytes, now_ns)?;
                Ok(ry_rail_charge::from_core(c))
            })
        }
    }

    /// Releases `*charge` exactly once (clearing `held`). `success` nonzero:
    /// the attempt completed, and its latency `now_ns - post_ns` feeds the
    /// bandwidth estimate; zero: failed or flushed, release only. Both NIC and
    /// peer sides are always attempted; a peer-side failure is reported
    /// (`RY_STATUS_RAIL_PEER_ACCOUNTING`) after the NIC bytes were released.
    ///
    /// Thread-safety: lock-free; any thread.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    ///
    /// # Safety
    /// `charge` is valid for reads and writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_release(
        rail: ry_rail,
        charge: *mut ry_rail_charge,
        success: u8,
        post_ns: u64,
        now_ns: u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `charge` valid for reads and writes.
        guard(|| unsafe {
            let sel = RAILS.get(rail.bits)?;
            let outcome = match success {
                0 => Outcome::Failed,
                _ => Outcome::Completed { post_ns },
            };
            Ok(sel.release(out_ref(charge, "charge")?.take()?, outcome, now_ns)?)
        })
    }

    /// Moves a held charge into a token record (device, bytes,
    /// `RY_HOLDS_RAIL_CHARGE`, and the peer if charged) and clears `held`.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    /// Thread-safety: pure data transformation; do not share the same struct between threads without synchronisation.
    ///
    /// # Safety
    /// `charge` and `record` are valid for reads and writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_charge_record_into(
        charge: *mut ry_rail_charge,
        record: *mut ry_token_record,
    ) -> RyStatus {
        // SAFETY: caller contract: `charge` and `record` valid for reads and
        // writes.
        guard(|| unsafe {
            let c = out_ref(charge, "charge")?;
            let r = out_ref(record, "record")?;
            let mut rec = TokenRecord::from(&*r);
            c.take()?.record_into(&mut rec);
            *r = ry_token_record::from(&rec);
            Ok(())
        })
    }

    /// Takes the rail charge out of `*record` (clearing `RY_HOLDS_RAIL_CHARGE`)
    /// and releases it; `success` nonzero feeds back with `record->post_ns`.
    /// A record holding no charge is `RY_STATUS_RAIL_NOT_HELD`.
    ///
    /// Ownership: moves the resource as described; the caller keeps the memory of every struct passed; retains nothing.
    /// Thread-safety: lock-free; any thread, concurrently with any call on the same object.
    ///
    /// # Safety
    /// `record` is valid for reads and writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_release_record(
        rail: ry_rail,
        record: *mut ry_token_record,
        success: u8,
        now_ns: u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `record` valid for reads and writes.
        guard(|| unsafe {
            let sel = RAILS.get(rail.bits)?;
            let r = out_ref(record, "record")?;
            let mut rec = TokenRecord::from(&*r);
            let res = sel.release_record(&mut rec, success != 0, now_ns);
            *r = ry_token_record::from(&rec);
            Ok(res?)
        })
    }

    /// Writes the bytes charged to `device` and not yet released.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_nic_inflight(
        rail: ry_rail,
        device: u16,
        out: *mut u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let sel = RAILS.get(rail.bits)?;
                sel.nic_inflight(usize::from(device)).ok_or_else(|| {
                    let why = format_args!("device {device} is not a rail candidate");
                    Error::new(RyStatus::RailUnknownDevice, why)
                })
            })
        }
    }

    /// Writes the selector's counters.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_rail_counters_get(
        rail: ry_rail,
        out: *mut ry_rail_counters,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe { ret(out, "out", || Ok(RAILS.get(rail.bits)?.counters().into())) }
    }
}
