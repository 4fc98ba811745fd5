//! Controller configuration: every `MC_ADAPTIVE_CC_*` parameter of RFC 4162,
//! typed and validated. An invalid configuration is a [`ConfigError`] and the
//! controller stays off; nothing is partially defaulted.
//!
//! ## The drain-time target
//!
//! RFC 4162 reads drain time above `MC_ADAPTIVE_CC_TARGET_DRAIN_US` as
//! pressure. An absolute target misreads a path that is simply slower or
//! farther (a 25 G NIC, a long link, Soft-RoCE, which drains 256 KiB in
//! ~3 ms) as permanently congested and pins its window at the minimum. By
//! default ([`TargetMode::Adaptive`]) the target is therefore judged against
//! what the path can do: pressure is drain time above
//! `max(target, base × 112.5 / decrease_percent)`, where `base` is the
//! domain's measured base drain time (see [`crate::cc::aimd::BaseDrain`]).
//! Setting `MC_ADAPTIVE_CC_TARGET_DRAIN_US` explicitly keeps the RFC's
//! absolute meaning ([`TargetMode::Fixed`]) unless
//! `MC_ADAPTIVE_CC_TARGET_MODE=adaptive` is set as well.
//!
//! ## Software providers: drain time is advisory
//!
//! On a software RDMA provider (Soft-RoCE `rxe`, Soft-iWARP `siw`:
//! [`SoftwareProvider::from_vendor_id`]) the "send queue" is host CPU, not a
//! fabric: drain time measures how the host schedules the provider's
//! threads, and throughput keeps rising with bytes in flight (batching
//! amortises per-request cost), so no drain-time rule can tell it from a
//! congested path. By default drain-time pressure on such a device's
//! domains is therefore [`DrainSignal::Advisory`]: observed and reported,
//! never enforced (see [`CcConfig::software_drain`]). Every health signal
//! (hard errors, timeouts, receiver pressure, quarantine, probing,
//! generation fencing) acts as on any other device.

use core::fmt;

/// Runtime mode, fixed at construction (rollback = drain and restart with `Off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Bypass policy and admission state: every slice is admitted, nothing is accounted.
    #[default]
    Off,
    /// Record signals and compute policy, but never defer or avoid work.
    Observe,
    /// Apply byte admission and path quarantine.
    Enforce,
}

impl Mode {
    /// Parses `off|observe|enforce` (ASCII case-insensitive, surrounding whitespace ignored).
    ///
    /// ```
    /// use railyard_core::cc::{ConfigError, Mode};
    /// assert_eq!(Mode::parse(" Enforce\n"), Ok(Mode::Enforce));
    /// assert_eq!(Mode::parse("on"), Err(ConfigError::InvalidMode));
    /// ```
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("off") {
            Ok(Mode::Off)
        } else if t.eq_ignore_ascii_case("observe") {
            Ok(Mode::Observe)
        } else if t.eq_ignore_ascii_case("enforce") {
            Ok(Mode::Enforce)
        } else {
            Err(ConfigError::InvalidMode)
        }
    }

    /// The mode's name as `MC_ADAPTIVE_CC_MODE` spells it.
    ///
    /// ```
    /// use railyard_core::cc::Mode;
    /// assert_eq!(Mode::parse(Mode::Observe.as_str()), Ok(Mode::Observe));
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Observe => "observe",
            Mode::Enforce => "enforce",
        }
    }
}

/// How drain time is judged (railyard extension, `MC_ADAPTIVE_CC_TARGET_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TargetMode {
    /// Pressure is drain time above `max(target, base × 112.5 / decrease_percent)`,
    /// `base` being the domain's measured base drain time; until a base is
    /// measured, above `target` (the RFC rule). The default.
    #[default]
    Adaptive,
    /// RFC 4162 literally: pressure is drain time above `target`.
    Fixed,
}

impl TargetMode {
    /// Parses `adaptive|fixed` (ASCII case-insensitive, surrounding whitespace ignored).
    ///
    /// ```
    /// use railyard_core::cc::{ConfigError, TargetMode};
    /// assert_eq!(TargetMode::parse("FIXED"), Ok(TargetMode::Fixed));
    /// assert_eq!(TargetMode::parse("auto"), Err(ConfigError::InvalidTargetMode));
    /// ```
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("adaptive") {
            Ok(TargetMode::Adaptive)
        } else if t.eq_ignore_ascii_case("fixed") {
            Ok(TargetMode::Fixed)
        } else {
            Err(ConfigError::InvalidTargetMode)
        }
    }
}

/// What the controller does with a device's drain-time pressure
/// (`MC_ADAPTIVE_CC_SOFTWARE_DRAIN` selects it for software providers).
///
/// Set per device on the [`Monitor`](crate::cc::Monitor) when the device is
/// opened; a route follows the device it is bound to. It only decides
/// whether drain-time pressure may shrink the window: receiver pressure,
/// hard errors, timeouts, quarantine and probing act the same either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DrainSignal {
    /// Sustained drain-time pressure decreases the window and marks the
    /// domain CONGESTED (RFC 4162). The default for every device.
    #[default]
    Enforce,
    /// Drain time and pressure are computed and reported (the monitor
    /// counts pressured epochs it did not act on), but they never decrease
    /// the window or mark the domain CONGESTED: the default for software
    /// providers, whose drain time measures host CPU scheduling, not a fabric.
    Advisory,
}

impl DrainSignal {
    /// Parses `advisory|enforce` (ASCII case-insensitive, surrounding whitespace ignored).
    ///
    /// ```
    /// use railyard_core::cc::{ConfigError, DrainSignal};
    /// assert_eq!(DrainSignal::parse("advisory"), Ok(DrainSignal::Advisory));
    /// assert_eq!(DrainSignal::parse("ignore"), Err(ConfigError::InvalidSoftwareDrain));
    /// ```
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("advisory") {
            Ok(DrainSignal::Advisory)
        } else if t.eq_ignore_ascii_case("enforce") {
            Ok(DrainSignal::Enforce)
        } else {
            Err(ConfigError::InvalidSoftwareDrain)
        }
    }

    /// `"enforce"` or `"advisory"` (what [`DrainSignal::parse`] reads).
    ///
    /// ```
    /// use railyard_core::cc::DrainSignal;
    /// for s in [DrainSignal::Enforce, DrainSignal::Advisory] {
    ///     assert_eq!(DrainSignal::parse(s.as_str()), Ok(s));
    /// }
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            DrainSignal::Enforce => "enforce",
            DrainSignal::Advisory => "advisory",
        }
    }
}

/// A software RDMA provider: the device is the host CPU running the verbs
/// protocol in the kernel, recognised by `ibv_device_attr.vendor_id`.
///
/// | provider | vendor id | kernel source |
/// |---|---|---|
/// | Soft-RoCE (`rxe`) | `0xFFFFFF` | `RXE_VENDOR_ID`, `drivers/infiniband/sw/rxe/rxe_param.h` |
/// | Soft-iWARP (`siw`) | `0x626D74` (ASCII `bmt`) | `SIW_VENDOR_ID`, `drivers/infiniband/sw/siw/siw.h` |
///
/// Kernels before the change that gave rxe its vendor id reported 0 for
/// it; 0 is not classified (it names no vendor, and is not rxe's alone), so
/// such a device keeps the hardware rule unless configured otherwise.
///
/// ```
/// use railyard_core::cc::{CcConfig, DrainSignal, SoftwareProvider};
///
/// assert_eq!(SoftwareProvider::from_vendor_id(0xFF_FFFF), Some(SoftwareProvider::Rxe));
/// assert_eq!(SoftwareProvider::from_vendor_id(0x62_6D74), Some(SoftwareProvider::Siw));
/// assert_eq!(SoftwareProvider::from_vendor_id(0x02C9), None); // Mellanox
/// let cfg = CcConfig::default();
/// assert_eq!(cfg.drain_signal(Some(SoftwareProvider::Rxe)), DrainSignal::Advisory);
/// assert_eq!(cfg.drain_signal(None), DrainSignal::Enforce);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftwareProvider {
    /// Soft-RoCE (`rdma_rxe`).
    Rxe,
    /// Soft-iWARP (`siw`).
    Siw,
}

impl SoftwareProvider {
    /// `RXE_VENDOR_ID` (IBTA "no vendor" OUI).
    pub const RXE_VENDOR_ID: u32 = 0x00FF_FFFF;
    /// `SIW_VENDOR_ID` (ASCII `bmt`).
    pub const SIW_VENDOR_ID: u32 = 0x0062_6D74;

    /// The software provider with this `ibv_device_attr.vendor_id`, or
    /// `None` (a hardware device, or an unknown one).
    ///
    /// ```
    /// use railyard_core::cc::SoftwareProvider;
    /// assert_eq!(SoftwareProvider::from_vendor_id(0), None); // names no vendor: hardware rule
    /// assert_eq!(SoftwareProvider::from_vendor_id(SoftwareProvider::SIW_VENDOR_ID), Some(SoftwareProvider::Siw));
    /// ```
    pub const fn from_vendor_id(vendor_id: u32) -> Option<Self> {
        match vendor_id {
            Self::RXE_VENDOR_ID => Some(SoftwareProvider::Rxe),
            Self::SIW_VENDOR_ID => Some(SoftwareProvider::Siw),
            _ => None,
        }
    }

    /// The provider's kernel driver name (`"rxe"`, `"siw"`).
    ///
    /// ```
    /// use railyard_core::cc::SoftwareProvider;
    /// assert_eq!(SoftwareProvider::Rxe.name(), "rxe");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            SoftwareProvider::Rxe => "rxe",
            SoftwareProvider::Siw => "siw",
        }
    }
}

/// A configuration parameter (for error messages and env names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// `MC_ADAPTIVE_CC_MODE`
    Mode,
    /// `MC_ADAPTIVE_CC_MIN_WINDOW_BYTES`
    MinWindowBytes,
    /// `MC_ADAPTIVE_CC_MAX_WINDOW_BYTES`
    MaxWindowBytes,
    /// `MC_ADAPTIVE_CC_INITIAL_WINDOW_BYTES` (railyard extension; default = max)
    InitialWindowBytes,
    /// `MC_ADAPTIVE_CC_TARGET_DRAIN_US`
    TargetDrainUs,
    /// `MC_ADAPTIVE_CC_HIGH_PRESSURE_EPOCHS`
    HighPressureEpochs,
    /// `MC_ADAPTIVE_CC_LOW_PRESSURE_EPOCHS`
    LowPressureEpochs,
    /// `MC_ADAPTIVE_CC_HARD_ERROR_THRESHOLD`
    HardErrorThreshold,
    /// `MC_ADAPTIVE_CC_COOLDOWN_MS`
    CooldownMs,
    /// `MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES`
    ProbeWindowBytes,
    /// `MC_ADAPTIVE_CC_ADDITIVE_INCREASE_BYTES` (railyard extension)
    AdditiveIncreaseBytes,
    /// `MC_ADAPTIVE_CC_DECREASE_PERCENT` (railyard extension: window kept on decrease, 1..=99)
    DecreasePercent,
    /// `MC_ADAPTIVE_CC_TARGET_MODE` (railyard extension: `adaptive` or `fixed`)
    TargetMode,
    /// `MC_ADAPTIVE_CC_SOFTWARE_DRAIN` (railyard extension: `advisory` or
    /// `enforce`, drain-time pressure on software providers)
    SoftwareDrain,
}

impl Param {
    /// Every parameter.
    pub const ALL: [Param; 14] = [
        Param::Mode,
        Param::MinWindowBytes,
        Param::MaxWindowBytes,
        Param::InitialWindowBytes,
        Param::TargetDrainUs,
        Param::HighPressureEpochs,
        Param::LowPressureEpochs,
        Param::HardErrorThreshold,
        Param::CooldownMs,
        Param::ProbeWindowBytes,
        Param::AdditiveIncreaseBytes,
        Param::DecreasePercent,
        Param::TargetMode,
        Param::SoftwareDrain,
    ];

    /// The environment variable name.
    ///
    /// ```
    /// use railyard_core::cc::Param;
    /// assert_eq!(Param::CooldownMs.env_name(), "MC_ADAPTIVE_CC_COOLDOWN_MS");
    /// assert!(Param::ALL.iter().all(|p| p.env_name().starts_with("MC_ADAPTIVE_CC_")));
    /// ```
    pub const fn env_name(self) -> &'static str {
        match self {
            Param::Mode => "MC_ADAPTIVE_CC_MODE",
            Param::MinWindowBytes => "MC_ADAPTIVE_CC_MIN_WINDOW_BYTES",
            Param::MaxWindowBytes => "MC_ADAPTIVE_CC_MAX_WINDOW_BYTES",
            Param::InitialWindowBytes => "MC_ADAPTIVE_CC_INITIAL_WINDOW_BYTES",
            Param::TargetDrainUs => "MC_ADAPTIVE_CC_TARGET_DRAIN_US",
            Param::HighPressureEpochs => "MC_ADAPTIVE_CC_HIGH_PRESSURE_EPOCHS",
            Param::LowPressureEpochs => "MC_ADAPTIVE_CC_LOW_PRESSURE_EPOCHS",
            Param::HardErrorThreshold => "MC_ADAPTIVE_CC_HARD_ERROR_THRESHOLD",
            Param::CooldownMs => "MC_ADAPTIVE_CC_COOLDOWN_MS",
            Param::ProbeWindowBytes => "MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES",
            Param::AdditiveIncreaseBytes => "MC_ADAPTIVE_CC_ADDITIVE_INCREASE_BYTES",
            Param::DecreasePercent => "MC_ADAPTIVE_CC_DECREASE_PERCENT",
            Param::TargetMode => "MC_ADAPTIVE_CC_TARGET_MODE",
            Param::SoftwareDrain => "MC_ADAPTIVE_CC_SOFTWARE_DRAIN",
        }
    }
}

/// A configuration error. The controller stays off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigError {
    /// `MC_ADAPTIVE_CC_MODE` is not `off|observe|enforce`.
    InvalidMode,
    /// `MC_ADAPTIVE_CC_TARGET_MODE` is not `adaptive|fixed`.
    InvalidTargetMode,
    /// `MC_ADAPTIVE_CC_SOFTWARE_DRAIN` is not `advisory|enforce`.
    InvalidSoftwareDrain,
    /// A numeric value is not a decimal integer that fits.
    NotANumber(Param),
    /// A numeric value is zero (every value must be positive).
    Zero(Param),
    /// `min_window_bytes > max_window_bytes`.
    MinAboveMax {
        /// Minimum window.
        min: u64,
        /// Maximum window.
        max: u64,
    },
    /// The explicitly configured probe window exceeds the minimum window.
    ProbeAboveMin {
        /// Probe window.
        probe: u64,
        /// Minimum window.
        min: u64,
    },
    /// The initial window is outside `[min, max]`.
    InitialOutOfRange {
        /// Initial window.
        initial: u64,
        /// Minimum window.
        min: u64,
        /// Maximum window.
        max: u64,
    },
    /// The decrease percentage is not in `1..=99`.
    DecreaseOutOfRange(u64),
    /// A value is larger than the controller supports (the error counter is
    /// 16 bits, epoch counters 32 bits).
    TooLarge(Param),
    /// A route is bound to a device index that does not exist.
    RouteDeviceOutOfRange {
        /// The route.
        route: u32,
        /// Its device.
        device: u16,
        /// Number of devices.
        devices: u16,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::InvalidMode => write!(
                f,
                "{} must be off, observe or enforce",
                Param::Mode.env_name()
            ),
            ConfigError::InvalidTargetMode => write!(
                f,
                "{} must be adaptive or fixed",
                Param::TargetMode.env_name()
            ),
            ConfigError::InvalidSoftwareDrain => write!(
                f,
                "{} must be advisory or enforce",
                Param::SoftwareDrain.env_name()
            ),
            ConfigError::NotANumber(p) => write!(f, "{} is not a decimal integer", p.env_name()),
            ConfigError::Zero(p) => write!(f, "{} must be positive", p.env_name()),
            ConfigError::MinAboveMax { min, max } => {
                write!(f, "minimum window {min} exceeds maximum window {max}")
            }
            ConfigError::ProbeAboveMin { probe, min } => {
                write!(f, "probe window {probe} exceeds minimum window {min}")
            }
            ConfigError::InitialOutOfRange { initial, min, max } => {
                write!(f, "initial window {initial} outside [{min}, {max}]")
            }
            ConfigError::DecreaseOutOfRange(v) => write!(f, "decrease percent {v} outside 1..=99"),
            ConfigError::TooLarge(p) => write!(f, "{} is too large", p.env_name()),
            ConfigError::RouteDeviceOutOfRange {
                route,
                device,
                devices,
            } => write!(
                f,
                "route {route} is bound to device {device}, but there are {devices} devices"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ConfigError {}

/// The controller configuration. Build with [`CcConfig::default`] and
/// field updates, then [`CcConfig::validate`] (the controller constructor
/// validates too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CcConfig {
    /// `MC_ADAPTIVE_CC_MODE`.
    pub mode: Mode,
    /// `MC_ADAPTIVE_CC_MIN_WINDOW_BYTES`.
    pub min_window_bytes: u64,
    /// `MC_ADAPTIVE_CC_MAX_WINDOW_BYTES`.
    pub max_window_bytes: u64,
    /// Initial window (`None` = the maximum). Must be in `[min, max]`.
    pub initial_window_bytes: Option<u64>,
    /// `MC_ADAPTIVE_CC_TARGET_DRAIN_US`: drain time above this is pressure
    /// ([`TargetMode::Fixed`]), or the floor of the adaptive threshold
    /// ([`TargetMode::Adaptive`]).
    pub target_drain_us: u64,
    /// How drain time is judged (extension; default [`TargetMode::Adaptive`]).
    pub target_mode: TargetMode,
    /// Drain-time pressure on software providers (extension,
    /// `MC_ADAPTIVE_CC_SOFTWARE_DRAIN`). `None` (the default) follows the
    /// target mode: [`DrainSignal::Advisory`] with [`TargetMode::Adaptive`],
    /// [`DrainSignal::Enforce`] with [`TargetMode::Fixed`] (an explicit
    /// `MC_ADAPTIVE_CC_TARGET_DRAIN_US` keeps the RFC meaning on every
    /// device). Hardware devices always enforce (see [`CcConfig::drain_signal`]).
    pub software_drain: Option<DrainSignal>,
    /// `MC_ADAPTIVE_CC_HIGH_PRESSURE_EPOCHS`: consecutive pressured epochs to enter congestion.
    pub high_pressure_epochs: u32,
    /// `MC_ADAPTIVE_CC_LOW_PRESSURE_EPOCHS`: consecutive calm epochs to resume growth.
    pub low_pressure_epochs: u32,
    /// `MC_ADAPTIVE_CC_HARD_ERROR_THRESHOLD`: accumulated route timeouts / hard errors before quarantine.
    pub hard_error_threshold: u16,
    /// `MC_ADAPTIVE_CC_COOLDOWN_MS`: quarantine cooldown.
    pub cooldown_ms: u64,
    /// `MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES` (`None` = the minimum window).
    pub probe_window_bytes: Option<u64>,
    /// Additive increase per calm epoch (extension; default 64 KiB).
    pub additive_increase_bytes: u64,
    /// Percent of the window kept on a multiplicative decrease (extension; default 50).
    pub decrease_percent: u64,
}

impl Default for CcConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Off,
            min_window_bytes: 256 * 1024,
            max_window_bytes: 64 * 1024 * 1024,
            initial_window_bytes: None,
            target_drain_us: 200,
            target_mode: TargetMode::Adaptive,
            software_drain: None,
            high_pressure_epochs: 3,
            low_pressure_epochs: 3,
            hard_error_threshold: 3,
            cooldown_ms: 1_000,
            probe_window_bytes: None,
            additive_increase_bytes: 64 * 1024,
            decrease_percent: 50,
        }
    }
}

/// A validated configuration, in the units the controller uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Params {
    /// Runtime mode.
    pub mode: Mode,
    /// Minimum window (bytes).
    pub min_window: u64,
    /// Maximum window (bytes).
    pub max_window: u64,
    /// Initial window (bytes).
    pub initial_window: u64,
    /// Target drain time (ns).
    pub target_drain_ns: u64,
    /// How drain time is judged.
    pub target_mode: TargetMode,
    /// Drain-time pressure on software providers (resolved: see
    /// [`CcConfig::software_drain`]).
    pub software_drain: DrainSignal,
    /// Epochs of pressure to enter congestion.
    pub high_pressure_epochs: u32,
    /// Calm epochs to grow again.
    pub low_pressure_epochs: u32,
    /// Hard-error threshold.
    pub hard_error_threshold: u16,
    /// Cooldown (ns).
    pub cooldown_ns: u64,
    /// Probe window (bytes).
    pub probe_window: u64,
    /// Additive increase (bytes).
    pub additive_increase: u64,
    /// Percent kept on decrease.
    pub decrease_percent: u64,
}

/// Checks that every route is bound to an existing device.
pub(crate) fn check_topology(devices: u16, route_devices: &[u16]) -> Result<(), ConfigError> {
    match route_devices.iter().position(|&d| d >= devices) {
        Some(i) => Err(ConfigError::RouteDeviceOutOfRange {
            route: i as u32,
            device: route_devices[i],
            devices,
        }),
        None => Ok(()),
    }
}

impl CcConfig {
    /// Validates every rule of the RFC: all values positive, min ≤ max,
    /// an explicit probe window ≤ min; plus initial in `[min, max]` and
    /// decrease percent in `1..=99`.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, ConfigError};
    ///
    /// let p = CcConfig::default().validate().unwrap();
    /// assert_eq!(p.initial_window, p.max_window); // initial defaults to the maximum
    /// assert_eq!(p.target_drain_ns, 200_000); // in the controller's unit
    /// let bad = CcConfig { min_window_bytes: 8 << 20, max_window_bytes: 1 << 20, ..CcConfig::default() };
    /// assert_eq!(bad.validate().unwrap_err(), ConfigError::MinAboveMax { min: 8 << 20, max: 1 << 20 });
    /// ```
    pub fn validate(&self) -> Result<Params, ConfigError> {
        let pos = |v: u64, p: Param| {
            if v == 0 {
                Err(ConfigError::Zero(p))
            } else {
                Ok(v)
            }
        };
        let min = pos(self.min_window_bytes, Param::MinWindowBytes)?;
        let max = pos(self.max_window_bytes, Param::MaxWindowBytes)?;
        if min > max {
            return Err(ConfigError::MinAboveMax { min, max });
        }
        let initial = match self.initial_window_bytes {
            Some(v) => pos(v, Param::InitialWindowBytes)?,
            None => max,
        };
        if initial < min || initial > max {
            return Err(ConfigError::InitialOutOfRange { initial, min, max });
        }
        let target = pos(self.target_drain_us, Param::TargetDrainUs)?;
        let high = pos(self.high_pressure_epochs.into(), Param::HighPressureEpochs)?;
        let low = pos(self.low_pressure_epochs.into(), Param::LowPressureEpochs)?;
        pos(self.hard_error_threshold.into(), Param::HardErrorThreshold)?;
        let cooldown = pos(self.cooldown_ms, Param::CooldownMs)?;
        let probe = match self.probe_window_bytes {
            Some(v) => {
                let v = pos(v, Param::ProbeWindowBytes)?;
                if v > min {
                    return Err(ConfigError::ProbeAboveMin { probe: v, min });
                }
                v
            }
            None => min,
        };
        let ai = pos(self.additive_increase_bytes, Param::AdditiveIncreaseBytes)?;
        if self.decrease_percent == 0 || self.decrease_percent >= 100 {
            return Err(ConfigError::DecreaseOutOfRange(self.decrease_percent));
        }
        let target_drain_ns = target
            .checked_mul(crate::time::NS_PER_US)
            .ok_or(ConfigError::TooLarge(Param::TargetDrainUs))?;
        let cooldown_ns = cooldown
            .checked_mul(crate::time::NS_PER_MS)
            .ok_or(ConfigError::TooLarge(Param::CooldownMs))?;
        Ok(Params {
            mode: self.mode,
            min_window: min,
            max_window: max,
            initial_window: initial,
            target_drain_ns,
            target_mode: self.target_mode,
            software_drain: self.software_drain_signal(),
            high_pressure_epochs: high as u32,
            low_pressure_epochs: low as u32,
            hard_error_threshold: self.hard_error_threshold,
            cooldown_ns,
            probe_window: probe,
            additive_increase: ai,
            decrease_percent: self.decrease_percent,
        })
    }

    /// What drain-time pressure does on software providers:
    /// [`CcConfig::software_drain`], or, unset, [`DrainSignal::Advisory`]
    /// with the adaptive target and [`DrainSignal::Enforce`] with the fixed
    /// (RFC) one.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, DrainSignal, TargetMode};
    /// assert_eq!(CcConfig::default().software_drain_signal(), DrainSignal::Advisory);
    /// let rfc = CcConfig { target_mode: TargetMode::Fixed, ..CcConfig::default() };
    /// assert_eq!(rfc.software_drain_signal(), DrainSignal::Enforce);
    /// let set = CcConfig { software_drain: Some(DrainSignal::Enforce), ..CcConfig::default() };
    /// assert_eq!(set.software_drain_signal(), DrainSignal::Enforce);
    /// ```
    pub const fn software_drain_signal(&self) -> DrainSignal {
        match (self.software_drain, self.target_mode) {
            (Some(s), _) => s,
            (None, TargetMode::Adaptive) => DrainSignal::Advisory,
            (None, TargetMode::Fixed) => DrainSignal::Enforce,
        }
    }

    /// The [`DrainSignal`] for a device: [`DrainSignal::Enforce`] for
    /// hardware (`provider` `None`), [`CcConfig::software_drain_signal`]
    /// for a software provider. The engine sets it on the monitor when it
    /// opens the device.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, DrainSignal, SoftwareProvider};
    /// let cfg = CcConfig::default();
    /// assert_eq!(cfg.drain_signal(SoftwareProvider::from_vendor_id(0x62_6D74)), DrainSignal::Advisory);
    /// assert_eq!(cfg.drain_signal(SoftwareProvider::from_vendor_id(0x15B3)), DrainSignal::Enforce);
    /// ```
    pub const fn drain_signal(&self, provider: Option<SoftwareProvider>) -> DrainSignal {
        match provider {
            None => DrainSignal::Enforce,
            Some(_) => self.software_drain_signal(),
        }
    }

    /// Builds a configuration from a variable lookup (e.g. the process
    /// environment), starting from the defaults. Unset variables keep their
    /// defaults; a set but malformed variable is an error, never ignored.
    /// The result is validated.
    ///
    /// An explicit `MC_ADAPTIVE_CC_TARGET_DRAIN_US` keeps the RFC's absolute
    /// meaning ([`TargetMode::Fixed`]) unless `MC_ADAPTIVE_CC_TARGET_MODE`
    /// is set too; on software providers its drain-time pressure is then
    /// enforced too, unless `MC_ADAPTIVE_CC_SOFTWARE_DRAIN` says otherwise
    /// (see [`CcConfig::software_drain`]).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, DrainSignal, TargetMode};
    ///
    /// let vars = [("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "500")];
    /// let get = |n: &str| vars.iter().find(|v| v.0 == n).map(|v| v.1);
    /// let c = CcConfig::from_lookup(get).unwrap();
    /// assert_eq!((c.target_drain_us, c.target_mode), (500, TargetMode::Fixed));
    /// assert_eq!(c.software_drain_signal(), DrainSignal::Enforce);
    /// assert_eq!(CcConfig::from_lookup(|_| None::<&str>).unwrap().target_mode, TargetMode::Adaptive);
    /// ```
    pub fn from_lookup<F, S>(mut lookup: F) -> Result<Self, ConfigError>
    where
        F: FnMut(&'static str) -> Option<S>,
        S: AsRef<str>,
    {
        let mut c = CcConfig::default();
        let mut explicit_target = false;
        let mut explicit_mode = false;
        for p in Param::ALL {
            let Some(raw) = lookup(p.env_name()) else {
                continue;
            };
            let raw = raw.as_ref();
            if p == Param::Mode {
                c.mode = Mode::parse(raw)?;
                continue;
            }
            if p == Param::TargetMode {
                c.target_mode = TargetMode::parse(raw)?;
                explicit_mode = true;
                continue;
            }
            if p == Param::SoftwareDrain {
                c.software_drain = Some(DrainSignal::parse(raw)?);
                continue;
            }
            let v: u64 = raw.trim().parse().map_err(|_| ConfigError::NotANumber(p))?;
            let narrow32 = |v: u64| u32::try_from(v).map_err(|_| ConfigError::TooLarge(p));
            match p {
                Param::Mode | Param::TargetMode | Param::SoftwareDrain => {}
                Param::MinWindowBytes => c.min_window_bytes = v,
                Param::MaxWindowBytes => c.max_window_bytes = v,
                Param::InitialWindowBytes => c.initial_window_bytes = Some(v),
                Param::TargetDrainUs => {
                    c.target_drain_us = v;
                    explicit_target = true;
                }
                Param::HighPressureEpochs => c.high_pressure_epochs = narrow32(v)?,
                Param::LowPressureEpochs => c.low_pressure_epochs = narrow32(v)?,
                Param::HardErrorThreshold => {
                    c.hard_error_threshold =
                        u16::try_from(v).map_err(|_| ConfigError::TooLarge(p))?
                }
                Param::CooldownMs => c.cooldown_ms = v,
                Param::ProbeWindowBytes => c.probe_window_bytes = Some(v),
                Param::AdditiveIncreaseBytes => c.additive_increase_bytes = v,
                Param::DecreasePercent => c.decrease_percent = v,
            }
        }
        if explicit_target && !explicit_mode {
            c.target_mode = TargetMode::Fixed;
        }
        c.validate()?;
        Ok(c)
    }

    /// Reads `MC_ADAPTIVE_CC_*` from the process environment (std only).
    /// A variable that is set but not valid UTF-8 is [`ConfigError::NotANumber`]
    /// (or [`ConfigError::InvalidMode`]).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, ConfigError, Mode, Param};
    ///
    /// std::env::set_var("MC_ADAPTIVE_CC_MODE", "enforce");
    /// assert_eq!(CcConfig::from_env().unwrap().mode, Mode::Enforce);
    /// std::env::set_var("MC_ADAPTIVE_CC_COOLDOWN_MS", "soon");
    /// assert_eq!(CcConfig::from_env().unwrap_err(), ConfigError::NotANumber(Param::CooldownMs));
    /// ```
    #[cfg(feature = "std")]
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut bad: Option<Param> = None;
        let r = Self::from_lookup(|name| match std::env::var(name) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                bad = Param::ALL.iter().copied().find(|p| p.env_name() == name);
                Some(std::string::String::from("\u{0}invalid"))
            }
        });
        match (r, bad) {
            (_, Some(Param::Mode)) => Err(ConfigError::InvalidMode),
            (_, Some(Param::TargetMode)) => Err(ConfigError::InvalidTargetMode),
            (_, Some(Param::SoftwareDrain)) => Err(ConfigError::InvalidSoftwareDrain),
            (_, Some(p)) => Err(ConfigError::NotANumber(p)),
            (r, None) => r,
        }
    }
}
