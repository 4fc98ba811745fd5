//! [`HotPathTables`]: the composed hot path with its tables and layers owned, built
//! from one configuration, for integrators that do not already own the
//! tables (the C ABI is one). Layers are chosen at run time
//! (`Option<&L>`), so one type serves every configuration.

use alloc::vec::Vec;
use core::fmt;

use super::{HotPath, Layers};
use crate::cc::{CcConfig, ConfigError as CcConfigError, Controller, Monitor};
use crate::credit::{ConfigError as CreditConfigError, LedgerConfig, SenderControl, SenderLedger};
use crate::endpoint::{EndpointConfig, EndpointError, EndpointTable};
use crate::rail::{ConfigError as RailConfigError, DeviceSpec, RailConfig, Selector};
use crate::slice::{SliceError, SliceTable};
use crate::token::{TokenError, TokenPool};

/// How to build a [`HotPathTables`].
#[derive(Clone, Debug)]
pub struct HotPathConfig {
    /// Token pool capacity (posted attempts in flight at once).
    pub tokens: usize,
    /// Slice table capacity.
    pub slices: usize,
    /// The endpoint table.
    pub endpoints: EndpointConfig,
    /// Retry budget per slice.
    pub max_retries: u16,
    /// The congestion controller (`mode: Off` keeps it off).
    pub cc: CcConfig,
    /// Local devices (device domains).
    pub devices: u16,
    /// Route domains: `route_devices[r]` is the device route `r` is bound to.
    pub route_devices: Vec<u16>,
    /// The rail layer (`None`: off; the caller's path decides the device).
    /// The device specs must number `devices`.
    pub rail: Option<(RailConfig, Vec<DeviceSpec>)>,
    /// Receiver credit (`None`: off).
    pub credit: Option<LedgerConfig>,
}

impl Default for HotPathConfig {
    fn default() -> Self {
        HotPathConfig {
            tokens: 4096,
            slices: 4096,
            endpoints: EndpointConfig::default(),
            max_retries: super::DEFAULT_MAX_RETRIES,
            cc: CcConfig::default(),
            devices: 1,
            route_devices: alloc::vec![0],
            rail: None,
            credit: None,
        }
    }
}

/// Why a [`HotPathTables`] could not be built (nothing is left allocated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HotPathError {
    /// Token pool capacity.
    Tokens(TokenError),
    /// Slice table capacity.
    Slices(SliceError),
    /// Endpoint table configuration.
    Endpoints(EndpointError),
    /// Congestion-control configuration or topology.
    Cc(CcConfigError),
    /// Rail configuration, or device specs that do not number `devices`.
    Rail(RailConfigError),
    /// Credit ledger configuration.
    Credit(CreditConfigError),
    /// The rail device list does not have one spec per device.
    RailDevices {
        /// `devices`.
        devices: u16,
        /// Specs given.
        specs: usize,
    },
}

impl fmt::Display for HotPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HotPathError::Tokens(e) => write!(f, "token pool: {e}"),
            HotPathError::Slices(e) => write!(f, "slice table: {e}"),
            HotPathError::Endpoints(e) => write!(f, "endpoint table: {e}"),
            HotPathError::Cc(e) => write!(f, "congestion control: {e}"),
            HotPathError::Rail(e) => write!(f, "rail selector: {e}"),
            HotPathError::Credit(e) => write!(f, "credit ledger: {e}"),
            HotPathError::RailDevices { devices, specs } => {
                write!(f, "rail: {specs} device specs for {devices} devices")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for HotPathError {}

/// The composed hot path with everything it needs, owned. The data path
/// (`&self`, any thread) goes through [`HotPathTables::hot_path`]; the control-plane
/// halves that need `&mut` (the CC monitor, the credit control half) are
/// handed out separately by [`HotPathTables::new`] as [`HotPathControl`], for the
/// caller's one control thread.
///
/// ```
/// use railyard_core::cc::{CcConfig, Mode, PollerStatus};
/// use railyard_core::classify::wc;
/// use railyard_core::completion::{Path, PostRequest, SliceEffect, HotPathTables, HotPathConfig};
///
/// let cfg = HotPathConfig {
///     cc: CcConfig { mode: Mode::Enforce, ..CcConfig::default() },
///     ..HotPathConfig::default()
/// };
/// let (tables, mut control) = HotPathTables::<()>::new(&cfg).unwrap();
/// let ep = tables.endpoints.open(()).unwrap();
/// let path = Path { device: 0, qp: 0, route: 0, endpoint: ep };
/// let owner = tables.hot_path();
/// let s = tables.slices.open(0).unwrap();
/// let p = owner.post(PostRequest::on(s, path, 65536, 0)).unwrap();
/// let done = owner.complete(p.wr_id, wc::SUCCESS, 0, 1_000).unwrap();
/// assert!(matches!(done.slice, SliceEffect::Settled(_)));
/// control.monitor.on_epoch(&tables.cc, 2_000, PollerStatus::Progressing);
/// assert_eq!(tables.tokens.in_use(), 0);
/// ```
pub struct HotPathTables<R: Send + Sync + 'static = ()> {
    /// The posted-attempt token pool.
    pub tokens: TokenPool,
    /// Slice attempts.
    pub slices: SliceTable,
    /// Endpoints (resources `R`: the caller's QPs, or a cookie).
    pub endpoints: EndpointTable<R>,
    /// The congestion controller (mode `Off` when configured off).
    pub cc: Controller,
    /// The rail selector, if on.
    pub rail: Option<Selector>,
    /// The sender credit ledger's data half, if on.
    pub credit: Option<SenderLedger>,
    max_retries: u16,
}

/// The control-plane halves of a [`HotPathTables`] (one control thread owns them).
pub struct HotPathControl {
    /// The CC monitor: run [`Monitor::on_epoch`] once per control epoch.
    pub monitor: Monitor,
    /// The credit ledger's control half (grants, usage reports, epochs), if
    /// credit is on.
    pub credit: Option<SenderControl>,
}

impl<R: Send + Sync + 'static> fmt::Debug for HotPathTables<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HotPathTables")
            .field("tokens_in_use", &self.tokens.in_use())
            .field("cc_mode", &self.cc.mode())
            .field("rail", &self.rail.is_some())
            .field("credit", &self.credit.is_some())
            .finish()
    }
}

/// The layer types of a [`HotPathTables`]'s owner.
pub type HotPathLayers<'a> = Layers<Option<&'a SenderLedger>, Option<&'a Selector>, &'a Controller>;

impl<R: Send + Sync + 'static> HotPathTables<R> {
    /// Builds every table and layer (all allocation happens here).
    ///
    /// ```
    /// use railyard_core::completion::{HotPathTables, HotPathConfig, HotPathError};
    /// use railyard_core::rail::{DeviceSpec, RailConfig};
    ///
    /// let cfg = HotPathConfig::default();
    /// let (tables, control) = HotPathTables::<()>::new(&cfg).unwrap();
    /// assert!(tables.rail.is_none() && tables.credit.is_none() && control.credit.is_none());
    /// // Two devices but one rail spec: refused before anything is used.
    /// let bad = HotPathConfig {
    ///     devices: 2,
    ///     route_devices: vec![0, 1],
    ///     rail: Some((RailConfig::default(), vec![DeviceSpec::new(100_000_000_000)])),
    ///     ..HotPathConfig::default()
    /// };
    /// assert!(matches!(HotPathTables::<()>::new(&bad), Err(HotPathError::RailDevices { devices: 2, specs: 1 })));
    /// ```
    pub fn new(cfg: &HotPathConfig) -> Result<(Self, HotPathControl), HotPathError> {
        let tokens = TokenPool::new(cfg.tokens).map_err(HotPathError::Tokens)?;
        let slices = SliceTable::new(cfg.slices).map_err(HotPathError::Slices)?;
        let endpoints = EndpointTable::new(cfg.endpoints).map_err(HotPathError::Endpoints)?;
        let (cc, monitor) =
            Controller::new(&cfg.cc, cfg.devices, &cfg.route_devices).map_err(HotPathError::Cc)?;
        let rail = match &cfg.rail {
            None => None,
            Some((rc, specs)) => {
                if specs.len() != usize::from(cfg.devices) {
                    return Err(HotPathError::RailDevices {
                        devices: cfg.devices,
                        specs: specs.len(),
                    });
                }
                Some(Selector::new(specs, *rc).map_err(HotPathError::Rail)?)
            }
        };
        let (credit, credit_control) = match cfg.credit {
            None => (None, None),
            Some(lc) => {
                let (l, c) = SenderLedger::new(lc).map_err(HotPathError::Credit)?;
                (Some(l), Some(c))
            }
        };
        Ok((
            HotPathTables {
                tokens,
                slices,
                endpoints,
                cc,
                rail,
                credit,
                max_retries: cfg.max_retries,
            },
            HotPathControl {
                monitor,
                credit: credit_control,
            },
        ))
    }

    /// The composed hot path over these tables and layers.
    ///
    /// ```
    /// use railyard_core::classify::wc;
    /// use railyard_core::completion::{Path, PostRequest, HotPathTables, HotPathConfig};
    ///
    /// let (tables, _control) = HotPathTables::<u32>::new(&HotPathConfig::default()).unwrap();
    /// let ep = tables.endpoints.open(7).unwrap();
    /// let owner = tables.hot_path(); // cheap to copy: one per worker
    /// let p = owner.post(PostRequest::on(tables.slices.open(0).unwrap(), Path { endpoint: ep, ..Path::default() }, 64, 0)).unwrap();
    /// owner.complete(p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert_eq!(tables.tokens.in_use(), 0);
    /// ```
    #[inline(always)]
    pub fn hot_path(&self) -> HotPath<'_, R, HotPathLayers<'_>> {
        HotPath::new(&self.tokens, &self.slices, &self.endpoints)
            .with_max_retries(self.max_retries)
            .with_layers(Layers {
                credit: self.credit.as_ref(),
                rail: self.rail.as_ref(),
                cc: &self.cc,
            })
    }
}
