//! Inverse-score rail (NIC) selection with an opt-in per-peer ledger
//! (RFC 4534).
//!
//! A [`Selector`] owns a fixed set of candidate devices, each with a nominal
//! link rate and a NUMA tier weight. Every candidate is scored
//!
//! ```text
//! score = (in-flight bytes + slice bytes) / bandwidth estimate × tier weight
//! ```
//!
//! and lower is better: a single slice goes to the lowest score
//! ([`Selector::pick`]); a multi-slice request is split in proportion to the
//! inverse scores, remainder to the best ([`Selector::plan`]). Every Nth
//! decision is a bounded round-robin probe, so a device that lost traffic
//! keeps getting fresh samples. The NIC bandwidth estimate is an EWMA of
//! completions, clamped to multiples of the nominal rate. Scores are exact
//! fractions compared by 128-bit cross-multiplication: no float, no
//! division on the single-slice path, same inputs → same decision.
//!
//! ## Peer feedback (the RFC 4534 experiment)
//!
//! Behind the compile-time `peer-feedback` feature **and** the runtime flag
//! [`RailConfig::peer_accounting`] (default off), a ledger keeps in-flight
//! bytes and a completion EWMA per device × peer (segment id), and the
//! [`Variant`] (V0–V3) chooses the score inputs. With the flag off there
//! are no peer entries (no ledger is even allocated), no peer atomics are
//! touched and no peer time stamps are read or written.
//!
//! ## Charges
//!
//! A pick charges the NIC (and the peer, if the ledger is on and the peer
//! is known) for the actual slice bytes and returns a [`RailCharge`]. The
//! charge is not `Clone`: it is released exactly once, by
//! [`Selector::release`], on completion or failure, or stored in the
//! attempt's [`TokenRecord`] with
//! [`RailCharge::record_into`] and taken back with [`RailCharge::take_from`]
//! (or [`Selector::release_record`]). A peer accounting error is counted and
//! reported but never keeps the NIC charge from being released.
//!
//! ## Cost
//!
//! ns per decision, single thread, 64 KiB slices, V2/V3 with fresh peer
//! samples; minimum over 3 alternated runs of each build of criterion's
//! point estimate (differences under ~3 ns are noise on the shared 2-core
//! host). "No ledger compiled" is the build without `peer-feedback`:
//!
//! ```text
//! cargo bench -p railyard-benches --bench rail -- --warm-up-time 0.5 --measurement-time 1
//! cargo bench -p railyard-benches --bench rail --features peer-feedback -- --warm-up-time 0.5 --measurement-time 1
//! ```
//!
//! `pick` (charge included, release untimed):
//!
//! | devices | no ledger compiled | flag off | V0 | V1 | V2 | V3 |
//! |---|---|---|---|---|---|---|
//! | 2 | 17.2 | 18.9 | 40.3 | 44.8 | 44.8 | 52.5 |
//! | 4 | 23.4 | 25.7 | 46.2 | 48.5 | 66.8 | 54.7 |
//! | 8 | 26.4 | 28.2 | 43.8 | 43.1 | 64.1 | 70.8 |
//!
//! `pick` + `release(Completed)` with EWMA updates, 4 devices: no ledger
//! 34.0, flag off 43.4, V0 81.9, V1 88.9, V2 82.6, V3 82.1. In
//! instructions (callgrind, `ci/icount.sh`): no ledger compiled 286,
//! compiled in with the flag off 306.
//!
//! The flag-off path differs from no ledger compiled only by one
//! predictable branch on the (absent) ledger per `pick` and per `charge`.
//! The ledger adds one CAS (pin) and one `fetch_add` per charge and per
//! release; V2/V3 add one ledger lookup per candidate. The sessions, and
//! why the 1 ns flag-off goal is neither confirmed nor refuted:
//! `docs/benchmarks.md`.

mod calibrate;
#[cfg(all(feature = "alloc", feature = "peer-feedback"))]
mod ledger;
#[cfg(feature = "alloc")]
mod selector;
mod variant;

pub use calibrate::{CalibrationError, TtlCalibrator};
#[cfg(feature = "alloc")]
pub use selector::{Choice, Pick, PlanInfo, Selector};
pub use variant::{
    bandwidth_sample, clamp_bw, ewma_step, needs_fallback, sample_state, score_input, NicView,
    PeerView, SampleState, Score, ScoreInput, Variant,
};

use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC};
use crate::token::{OptId, TokenRecord};
use core::fmt;

/// Subtracts `bytes` from `cell` unless that would go below zero; returns
/// whether it did. (The NIC and peer in-flight counters never wrap.) The
/// selector's NIC counters and the peer ledger's both release through it.
#[cfg(feature = "alloc")]
#[inline]
pub(crate) fn sub_refusing_underflow(cell: &crate::sync::AtomicU64, bytes: u64) -> bool {
    use crate::sync::Ordering;
    #[cfg(railyard_broken = "rail_racy_release")]
    {
        // BROKEN on purpose (loom twin): check-then-act, plain load + store.
        let cur = cell.load(Ordering::Acquire);
        if cur < bytes {
            return false;
        }
        crate::sync::spin_hint();
        cell.store(cur - bytes, Ordering::Release);
        true
    }
    #[cfg(not(railyard_broken = "rail_racy_release"))]
    cell.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        cur.checked_sub(bytes)
    })
    .is_ok()
}

/// Largest number of candidate devices a selector accepts.
pub const MAX_DEVICES: usize = 64;

/// One candidate device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// Nominal link rate in bytes per second (e.g. 200 Gb/s = `25_000_000_000`).
    pub nominal_bps: u64,
    /// NUMA tier weight in Q8 (`256` = 1.0, `512` = twice as expensive).
    pub tier_q8: u16,
}

impl DeviceSpec {
    /// A device with `nominal_bps` and tier weight 1.0.
    ///
    /// ```
    /// use railyard_core::rail::DeviceSpec;
    /// let nic = DeviceSpec::new(25_000_000_000); // 200 Gb/s
    /// assert_eq!((nic.nominal_bps, nic.tier_q8), (25_000_000_000, 256));
    /// ```
    pub const fn new(nominal_bps: u64) -> Self {
        DeviceSpec {
            nominal_bps,
            tier_q8: 256,
        }
    }

    /// The same device with tier weight `tier_q8` (Q8).
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// // The same NIC, but across a NUMA hop: twice as expensive.
    /// let far = DeviceSpec::new(25_000_000_000).with_tier_q8(512);
    /// let sel = Selector::new(&[far, DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let c = sel.choose(None, 65536, 0, 0b11).unwrap();
    /// assert_eq!(c.device, 1); // the near one wins on equal load
    /// ```
    pub const fn with_tier_q8(self, tier_q8: u16) -> Self {
        DeviceSpec { tier_q8, ..self }
    }
}

/// Every constant of the selector, with documented defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RailConfig {
    /// Maintain the per-peer ledger and score with [`Self::variant`].
    /// Default `false`. Requires the `peer-feedback` feature.
    pub peer_accounting: bool,
    /// Score inputs when `peer_accounting` is on. Default [`Variant::V1`].
    /// With the flag off scoring is NIC in-flight + NIC EWMA (V1's inputs)
    /// without a ledger.
    pub variant: Variant,
    /// Every `probe_interval`-th decision is a round-robin probe; a power
    /// of two, or 0 to never probe. Default 64.
    pub probe_interval: u32,
    /// A probe only goes to a device whose score is at most this multiple
    /// (Q8) of the best score; otherwise the best device is used. Default
    /// 1024 (4×). Must be at least 256.
    pub probe_bound_q8: u32,
    /// EWMA weight of a new completion sample, Q16 (1..=65536). Default
    /// 8192 (1/8).
    pub ewma_alpha_q16: u32,
    /// Lowest bandwidth estimate, as a multiple (Q8) of nominal. Default 4
    /// (1/64 of nominal).
    pub ewma_floor_q8: u32,
    /// Highest bandwidth estimate, as a multiple (Q8) of nominal. Default
    /// 256 (1×: a measurement can lower a NIC's estimate, never raise it
    /// above the link rate).
    pub ewma_ceil_q8: u32,
    /// A peer sample older than this is expired. Default 10 ms; calibrate
    /// it with [`TtlCalibrator`].
    pub peer_ttl_ns: Nanos,
    /// Ledger slots per device (fixed storage); a power of two. Default 64.
    pub peer_slots: u32,
    /// Idle entries retained per device (not admission control: active
    /// entries may exceed it). Default 32. At most `peer_slots`.
    pub history_target: u32,
    /// An entry without charges is idle after this long without activity.
    /// Default 1 s.
    pub idle_reclaim_ns: Nanos,
    /// Per-decision trace ([`Pick::trace`]) for TTL calibration. Default
    /// `false`; costs a ledger read per candidate when on.
    pub trace: bool,
}

impl Default for RailConfig {
    fn default() -> Self {
        RailConfig {
            peer_accounting: false,
            variant: Variant::V1,
            probe_interval: 64,
            probe_bound_q8: 1024,
            ewma_alpha_q16: 8192,
            ewma_floor_q8: 4,
            ewma_ceil_q8: 256,
            peer_ttl_ns: 10 * NS_PER_MS,
            peer_slots: 64,
            history_target: 32,
            idle_reclaim_ns: NS_PER_SEC,
            trace: false,
        }
    }
}

impl RailConfig {
    /// Checks the config against `devices`.
    ///
    /// ```
    /// use railyard_core::rail::{ConfigError, DeviceSpec, RailConfig};
    /// let nics = [DeviceSpec::new(25_000_000_000); 2];
    /// assert_eq!(RailConfig::default().validate(&nics), Ok(()));
    /// let bad = RailConfig { probe_interval: 48, ..RailConfig::default() };
    /// assert_eq!(bad.validate(&nics), Err(ConfigError::ProbeIntervalNotPowerOfTwo { interval: 48 }));
    /// assert_eq!(RailConfig::default().validate(&[]), Err(ConfigError::NoDevices));
    /// ```
    pub fn validate(&self, devices: &[DeviceSpec]) -> Result<(), ConfigError> {
        if devices.is_empty() {
            return Err(ConfigError::NoDevices);
        }
        if devices.len() > MAX_DEVICES {
            return Err(ConfigError::TooManyDevices {
                count: devices.len(),
            });
        }
        for (i, d) in devices.iter().enumerate() {
            if d.nominal_bps == 0 {
                return Err(ConfigError::ZeroNominal { device: i });
            }
            if d.tier_q8 == 0 {
                return Err(ConfigError::ZeroTierWeight { device: i });
            }
        }
        if self.probe_interval != 0 && !self.probe_interval.is_power_of_two() {
            return Err(ConfigError::ProbeIntervalNotPowerOfTwo {
                interval: self.probe_interval,
            });
        }
        if self.probe_bound_q8 < 256 {
            return Err(ConfigError::ProbeBoundBelowOne {
                bound_q8: self.probe_bound_q8,
            });
        }
        if self.ewma_alpha_q16 == 0 || self.ewma_alpha_q16 > 65536 {
            return Err(ConfigError::AlphaOutOfRange {
                alpha_q16: self.ewma_alpha_q16,
            });
        }
        if self.ewma_floor_q8 == 0 || self.ewma_floor_q8 > self.ewma_ceil_q8 {
            return Err(ConfigError::ClampInverted {
                floor_q8: self.ewma_floor_q8,
                ceil_q8: self.ewma_ceil_q8,
            });
        }
        if self.peer_accounting {
            if !cfg!(feature = "peer-feedback") {
                return Err(ConfigError::PeerFeedbackNotCompiled);
            }
            if !self.peer_slots.is_power_of_two() {
                return Err(ConfigError::PeerSlotsNotPowerOfTwo {
                    slots: self.peer_slots,
                });
            }
            if self.history_target > self.peer_slots {
                return Err(ConfigError::HistoryTargetAboveSlots {
                    target: self.history_target,
                    slots: self.peer_slots,
                });
            }
        }
        Ok(())
    }
}

/// A rejected [`RailConfig`] or device list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// No candidate devices.
    NoDevices,
    /// More than [`MAX_DEVICES`] candidates.
    TooManyDevices {
        /// Devices given.
        count: usize,
    },
    /// A device with a zero nominal rate.
    ZeroNominal {
        /// Index of the device.
        device: usize,
    },
    /// A device with a zero tier weight.
    ZeroTierWeight {
        /// Index of the device.
        device: usize,
    },
    /// `probe_interval` is neither 0 nor a power of two.
    ProbeIntervalNotPowerOfTwo {
        /// The interval given.
        interval: u32,
    },
    /// `probe_bound_q8` below 256 (1×) would forbid every probe.
    ProbeBoundBelowOne {
        /// The bound given.
        bound_q8: u32,
    },
    /// `ewma_alpha_q16` outside `1..=65536`.
    AlphaOutOfRange {
        /// The alpha given.
        alpha_q16: u32,
    },
    /// Floor zero or above ceiling.
    ClampInverted {
        /// The floor given.
        floor_q8: u32,
        /// The ceiling given.
        ceil_q8: u32,
    },
    /// `peer_accounting` is on but the `peer-feedback` feature is not compiled.
    PeerFeedbackNotCompiled,
    /// `peer_slots` is not a power of two (or zero).
    PeerSlotsNotPowerOfTwo {
        /// The slots given.
        slots: u32,
    },
    /// `history_target` is larger than `peer_slots`.
    HistoryTargetAboveSlots {
        /// The target given.
        target: u32,
        /// The slots given.
        slots: u32,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoDevices => {
                write!(f, "rail selector needs at least one candidate device")
            }
            ConfigError::TooManyDevices { count } => {
                write!(
                    f,
                    "{count} candidate devices exceed the maximum of {MAX_DEVICES}"
                )
            }
            ConfigError::ZeroNominal { device } => {
                write!(f, "device {device} has a zero nominal rate")
            }
            ConfigError::ZeroTierWeight { device } => {
                write!(f, "device {device} has a zero tier weight")
            }
            ConfigError::ProbeIntervalNotPowerOfTwo { interval } => {
                write!(
                    f,
                    "probe interval {interval} is neither 0 nor a power of two"
                )
            }
            ConfigError::ProbeBoundBelowOne { bound_q8 } => {
                write!(f, "probe bound {bound_q8}/256 is below 1x")
            }
            ConfigError::AlphaOutOfRange { alpha_q16 } => {
                write!(f, "EWMA alpha {alpha_q16}/65536 is outside 1..=65536")
            }
            ConfigError::ClampInverted { floor_q8, ceil_q8 } => {
                write!(
                    f,
                    "EWMA clamp floor {floor_q8}/256 is zero or above ceiling {ceil_q8}/256"
                )
            }
            ConfigError::PeerFeedbackNotCompiled => {
                write!(f, "peer_accounting requires the `peer-feedback` feature")
            }
            ConfigError::PeerSlotsNotPowerOfTwo { slots } => {
                write!(f, "peer slots {slots} is not a power of two")
            }
            ConfigError::HistoryTargetAboveSlots { target, slots } => {
                write!(f, "history target {target} exceeds {slots} peer slots")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}

/// Why a peer release failed. The NIC side was released regardless.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerAccountingError {
    /// No ledger entry for the peer on the device.
    NotFound,
    /// The entry held fewer bytes than released; refused, bytes unchanged.
    Underflow,
    /// The entry had no live charge to drop.
    NoPin,
    /// The charge names a peer but this selector keeps no ledger.
    NoLedger,
}

/// A refused or inconsistent rail operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RailError {
    /// The device index is not one of the selector's candidates.
    UnknownDevice {
        /// The index given.
        device: u16,
    },
    /// Releasing would take the NIC's in-flight bytes below zero; refused
    /// (the peer side, if any, was still released).
    NicUnderflow {
        /// The device.
        device: u16,
        /// Bytes the charge named.
        bytes: u32,
    },
    /// The NIC side was released; the peer side failed.
    PeerAccounting {
        /// The device.
        device: u16,
        /// The peer the charge named.
        peer: u32,
        /// What went wrong.
        kind: PeerAccountingError,
    },
    /// The record holds no rail charge (already released, or never charged).
    NotHeld,
    /// No candidate device is usable (an empty candidate mask).
    NoCandidate,
    /// The `counts` buffer is shorter than the candidate list.
    CountsTooShort {
        /// Candidates in the selector.
        need: usize,
    },
}

impl fmt::Display for RailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RailError::UnknownDevice { device } => {
                write!(f, "device {device} is not a rail candidate")
            }
            RailError::NicUnderflow { device, bytes } => {
                write!(
                    f,
                    "release of {bytes} bytes would take device {device} in-flight below zero"
                )
            }
            RailError::PeerAccounting { device, peer, kind } => {
                write!(
                    f,
                    "peer {peer} on device {device}: peer release failed ({kind:?}); NIC released"
                )
            }
            RailError::NotHeld => write!(f, "record holds no rail charge"),
            RailError::NoCandidate => write!(f, "no usable rail candidate"),
            RailError::CountsTooShort { need } => write!(f, "counts buffer needs {need} entries"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RailError {}

/// How a charged attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Completed successfully; `post_ns` is the post time, so the latency
    /// feeds the NIC (and peer) bandwidth EWMA.
    Completed {
        /// Post time, from the caller's clock.
        post_ns: Nanos,
    },
    /// Failed or flushed: release only, no bandwidth sample.
    Failed,
}

/// The bytes one attempt holds on a device (and its peer entry), released
/// exactly once.
///
/// Not `Clone`: the only ways out are [`Selector::release`] and
/// [`RailCharge::record_into`], which moves it into a
/// [`TokenRecord`] (`device`, `bytes`, `HOLDS_RAIL_CHARGE`, and, when the
/// peer was charged, `peer` plus `HOLDS_RAIL_PEER_CHARGE`). The peer is
/// charged only with the flag on, a known peer and no NIC-scope fallback.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a rail charge must be released exactly once"]
pub struct RailCharge {
    device: u16,
    peer: Option<u32>,
    bytes: u32,
}

impl RailCharge {
    /// The charged device.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let charge = sel.charge(1, Some(9), 4096, 0).unwrap();
    /// assert_eq!(charge.device(), 1);
    /// sel.release(charge, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn device(&self) -> u16 {
        self.device
    }

    /// The charged peer, if the peer was charged.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let charge = sel.charge(1, Some(9), 4096, 0).unwrap();
    /// // The peer is charged only with a peer ledger (`peer-feedback`, on).
    /// assert_eq!(charge.peer(), None);
    /// sel.release(charge, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn peer(&self) -> Option<u32> {
        self.peer
    }

    /// The charged bytes (the actual slice bytes).
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let charge = sel.charge(1, Some(9), 4096, 0).unwrap();
    /// assert_eq!(charge.bytes(), 4096);
    /// sel.release(charge, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn bytes(&self) -> u32 {
        self.bytes
    }

    /// Moves the charge into `record`: sets `device`, `bytes` and
    /// `HOLDS_RAIL_CHARGE`; if the peer was charged, also sets `peer` and
    /// `HOLDS_RAIL_PEER_CHARGE`. A record's `peer` otherwise keeps naming
    /// the destination, charged or not.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, RailError, Selector};
    /// use railyard_core::token::TokenRecord;
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let mut rec = TokenRecord { post_ns: 100, ..TokenRecord::default() };
    /// sel.charge(0, None, 65536, 100).unwrap().record_into(&mut rec);
    /// assert_ne!(rec.holds & TokenRecord::HOLDS_RAIL_CHARGE, 0);
    /// // The completion path has only the record:
    /// sel.release_record(&mut rec, true, 5_100).unwrap();
    /// assert_eq!(sel.release_record(&mut rec, true, 5_200), Err(RailError::NotHeld));
    /// assert_eq!(sel.nic_inflight(0), Some(0));
    /// ```
    pub fn record_into(self, record: &mut TokenRecord) {
        record.device = self.device;
        record.bytes = self.bytes;
        record.holds |= TokenRecord::HOLDS_RAIL_CHARGE;
        record.holds &= !TokenRecord::HOLDS_RAIL_PEER_CHARGE;
        if let Some(p) = self.peer {
            record.peer = OptId::some(p);
            record.holds |= TokenRecord::HOLDS_RAIL_PEER_CHARGE;
        }
    }

    /// Takes the charge back out of `record`, clearing `HOLDS_RAIL_CHARGE`
    /// so it cannot be taken twice. `None` if the record holds none.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, Outcome, RailCharge, RailConfig, Selector};
    /// use railyard_core::token::TokenRecord;
    ///
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000)], RailConfig::default()).unwrap();
    /// let mut rec = TokenRecord::default();
    /// sel.charge(0, None, 4096, 0).unwrap().record_into(&mut rec);
    /// let c = RailCharge::take_from(&mut rec).unwrap();
    /// assert!(RailCharge::take_from(&mut rec).is_none()); // never twice
    /// sel.release(c, Outcome::Failed, 1).unwrap();
    /// ```
    pub fn take_from(record: &mut TokenRecord) -> Option<RailCharge> {
        if record.holds & TokenRecord::HOLDS_RAIL_CHARGE == 0 {
            return None;
        }
        let peer_charged = record.holds & TokenRecord::HOLDS_RAIL_PEER_CHARGE != 0;
        record.holds &= !(TokenRecord::HOLDS_RAIL_CHARGE | TokenRecord::HOLDS_RAIL_PEER_CHARGE);
        Some(RailCharge {
            device: record.device,
            peer: if peer_charged {
                record.peer.get()
            } else {
                None
            },
            bytes: record.bytes,
        })
    }
}

/// A snapshot of the selector's counters (monotonic since construction).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RailCounters {
    /// Decisions taken (single picks and multi-slice plans).
    pub decisions: u64,
    /// Decisions that probed a device other than the best.
    pub probes: u64,
    /// V2/V3 decisions that fell back to NIC feedback for the whole set.
    pub fallbacks: u64,
    /// Candidate peer samples found missing in V2/V3 decisions.
    pub missing_samples: u64,
    /// Candidate peer samples found older than the TTL in V2/V3 decisions.
    pub expired_samples: u64,
    /// Peer charges that fell back to NIC scope: ledger full of active entries.
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
