//! The compiled-out controller: the same API, no state, admits everything.
//!
//! Without the `adaptive-cc` feature this *is* [`Controller`](super::Controller)
//! (and [`BypassMonitor`] is [`Monitor`](super::Monitor)). It is always
//! compiled so the benchmark can measure the compiled-out cost in the same
//! run as the compiled-in modes.

use super::config::{CcConfig, ConfigError, DrainSignal, Mode};
use super::{
    AcquireError, Admission, CcStats, DomainSnapshot, EpochReport, Permit, PolicyView,
    PollerStatus, ReleaseError, Settlement,
};
use crate::classify::{Effect, EventClassification};
use crate::time::Nanos;
use crate::token::TokenRecord;

/// A controller that admits every slice and keeps no state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bypass {
    devices: u16,
    routes: usize,
}

/// The monitor of a [`Bypass`]: every epoch is a no-op.
#[derive(Clone, Copy, Debug, Default)]
pub struct BypassMonitor;

impl Bypass {
    /// Validates `cfg` (so a bad configuration is reported the same way
    /// whether or not the controller is compiled in) and builds the bypass.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig, Mode};
    ///
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (bypass, _monitor) = Bypass::new(&cfg, 2, &[0, 1]).unwrap();
    /// assert_eq!((bypass.devices(), bypass.routes(), bypass.mode()), (2, 2, Mode::Off));
    /// // A bad configuration is refused as the compiled-in controller refuses it.
    /// assert!(Bypass::new(&CcConfig { min_window_bytes: 0, ..cfg }, 1, &[0]).is_err());
    /// ```
    pub fn new(
        cfg: &CcConfig,
        devices: u16,
        route_devices: &[u16],
    ) -> Result<(Self, BypassMonitor), ConfigError> {
        cfg.validate()?;
        super::config::check_topology(devices, route_devices)?;
        Ok((
            Self {
                devices,
                routes: route_devices.len(),
            },
            BypassMonitor,
        ))
    }

    /// Never fails: the configuration only matters when compiled in.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (_bypass, _monitor, err) = Bypass::new_or_off(&CcConfig { min_window_bytes: 0, ..CcConfig::default() }, 1, &[0]);
    /// assert!(err.is_some()); // reported, though nothing depends on it
    /// ```
    pub fn new_or_off(
        cfg: &CcConfig,
        devices: u16,
        route_devices: &[u16],
    ) -> (Self, BypassMonitor, Option<ConfigError>) {
        (
            Self {
                devices,
                routes: route_devices.len(),
            },
            BypassMonitor,
            cfg.validate()
                .and_then(|_| super::config::check_topology(devices, route_devices))
                .err(),
        )
    }

    /// Always [`Mode::Off`].
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.mode(), railyard_core::cc::Mode::Off);
    /// ```
    #[inline(always)]
    pub fn mode(&self) -> Mode {
        Mode::Off
    }

    /// Whether the controller is compiled in: `false` for the bypass.
    ///
    /// ```
    /// use railyard_core::cc::Bypass;
    /// assert!(!Bypass::compiled_in());
    /// ```
    pub const fn compiled_in() -> bool {
        false
    }

    /// Number of device domains given at construction.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.devices(), 2);
    /// ```
    pub fn devices(&self) -> usize {
        usize::from(self.devices)
    }

    /// Number of route domains given at construction.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.routes(), 2);
    /// ```
    pub fn routes(&self) -> usize {
        self.routes
    }

    /// Never quarantined.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// cc.quarantine_device(0).unwrap();
    /// assert!(!cc.is_quarantined(0, 0)); // nothing is ever avoided
    /// ```
    #[inline(always)]
    pub fn is_quarantined(&self, _device: u16, _route: u32) -> bool {
        false
    }

    /// Admits everything.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, Bypass, CcConfig, Settlement};
    /// use railyard_core::classify::Effect;
    ///
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, u32::MAX, 0).unwrap() else { unreachable!() };
    /// assert_eq!(p.bytes(), u32::MAX); // no window
    /// assert_eq!(cc.release(p, Effect::HardError), Ok(Settlement::Current));
    /// ```
    #[inline(always)]
    pub fn try_acquire(
        &self,
        device: u16,
        route: u32,
        bytes: u32,
        _now: Nanos,
    ) -> Result<Admission, AcquireError> {
        Ok(Admission::Admit(Permit::new(device, route, 0, bytes)))
    }

    /// Always current.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, Bypass, CcConfig};
    /// use railyard_core::classify::Effect;
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 64, 0).unwrap() else { unreachable!() };
    /// cc.advance_generation(0).unwrap();
    /// assert!(cc.is_current(&p)); // no generations to fall behind
    /// cc.release(p, Effect::None).unwrap();
    /// ```
    #[inline(always)]
    pub fn is_current(&self, _permit: &Permit) -> bool {
        true
    }

    /// Consumes the permit.
    ///
    /// ```
    /// use railyard_core::cc::{Admission, Bypass, CcConfig, Settlement};
    /// use railyard_core::classify::Effect;
    ///
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// assert_eq!(cc.release(p, Effect::Success), Ok(Settlement::Current));
    /// assert_eq!(cc.stats().stale_feedback, 0);
    /// ```
    #[inline(always)]
    pub fn release(&self, permit: Permit, _effect: Effect) -> Result<Settlement, ReleaseError> {
        let _ = permit.into_parts();
        Ok(Settlement::Current)
    }

    /// Clears `HOLDS_PERMIT` (a second release of the record is refused, as when compiled in).
    ///
    /// ```
    /// use railyard_core::cc::{Admission, Bypass, CcConfig, ReleaseError};
    /// use railyard_core::classify::Effect;
    /// use railyard_core::token::TokenRecord;
    ///
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// let Admission::Admit(p) = cc.try_acquire(0, 0, 4096, 0).unwrap() else { unreachable!() };
    /// let mut rec = TokenRecord::default();
    /// p.record_into(&mut rec).unwrap();
    /// cc.release_record(&mut rec, Effect::Success).unwrap();
    /// // The hold bit is honoured exactly as with the controller.
    /// assert_eq!(cc.release_record(&mut rec, Effect::Success), Err(ReleaseError::NotHeld));
    /// ```
    #[inline(always)]
    pub fn release_record(
        &self,
        record: &mut TokenRecord,
        _effect: Effect,
    ) -> Result<Settlement, ReleaseError> {
        if record.holds & TokenRecord::HOLDS_PERMIT == 0 {
            return Err(ReleaseError::NotHeld);
        }
        record.holds &= !TokenRecord::HOLDS_PERMIT;
        Ok(Settlement::Current)
    }

    /// No-op.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// use railyard_core::cc::Settlement;
    /// use railyard_core::classify::Effect;
    /// assert_eq!(cc.route_feedback(0, 7, Effect::Quarantine), Ok(Settlement::Current));
    /// assert!(cc.route_snapshot(0).is_none()); // and nothing to change
    /// ```
    pub fn route_feedback(
        &self,
        _route: u32,
        _generation: u32,
        _effect: Effect,
    ) -> Result<Settlement, ReleaseError> {
        Ok(Settlement::Current)
    }

    /// No-op.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.quarantine_device(1), Ok(()));
    /// ```
    pub fn quarantine_device(&self, _device: u16) -> Result<(), AcquireError> {
        Ok(())
    }

    /// No-op (index checks only, as in the controller).
    ///
    /// ```
    /// use railyard_core::cc::{AcquireError, Bypass, CcConfig};
    /// use railyard_core::classify::{classify_event, event};
    ///
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// assert_eq!(cc.apply_event(&classify_event(event::PORT_ERR), 0, Some(0)), Ok(()));
    /// assert_eq!(cc.apply_event(&classify_event(event::PORT_ERR), 3, None), Err(AcquireError::NoSuchDevice(3)));
    /// ```
    pub fn apply_event(
        &self,
        _event: &EventClassification,
        device: u16,
        route: Option<u32>,
    ) -> Result<(), AcquireError> {
        if device >= self.devices {
            return Err(AcquireError::NoSuchDevice(device));
        }
        match route {
            Some(r) if r as usize >= self.routes => Err(AcquireError::NoSuchRoute(r)),
            _ => Ok(()),
        }
    }

    /// Always `None`: the bypass keeps no route binding.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.route_device(1), None);
    /// ```
    pub fn route_device(&self, _route: u32) -> Option<u16> {
        None
    }

    /// No generations: always 0.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.advance_generation(0), Ok(0));
    /// ```
    pub fn advance_generation(&self, _route: u32) -> Result<u32, AcquireError> {
        Ok(0)
    }

    /// No generations: always 0.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.rebind_route(0, 1), Ok(0));
    /// ```
    pub fn rebind_route(&self, _route: u32, _device: u16) -> Result<u32, AcquireError> {
        Ok(0)
    }

    /// No generations: always `Some(0)`.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.route_generation(1), Some(0));
    /// ```
    pub fn route_generation(&self, _route: u32) -> Option<u32> {
        Some(0)
    }

    /// No state: `None`.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert!(cc.route_snapshot(0).is_none());
    /// ```
    pub fn route_snapshot(&self, _route: u32) -> Option<DomainSnapshot> {
        None
    }

    /// No state: `None`.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert!(cc.device_snapshot(0).is_none());
    /// ```
    pub fn device_snapshot(&self, _device: u16) -> Option<DomainSnapshot> {
        None
    }

    /// All zero.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, _monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(cc.stats(), railyard_core::cc::CcStats::default());
    /// ```
    pub fn stats(&self) -> CcStats {
        CcStats::default()
    }
}

impl BypassMonitor {
    /// No-op.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig, EpochReport, PollerStatus};
    /// let (cc, mut monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// assert_eq!(monitor.on_epoch(&cc, 1_000, PollerStatus::Progressing), EpochReport::default());
    /// ```
    pub fn on_epoch(&mut self, _ctl: &Bypass, _now: Nanos, _poller: PollerStatus) -> EpochReport {
        EpochReport::default()
    }

    /// Always `None`: nothing is measured without the controller.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(monitor.route_base_drain_ns(0), None);
    /// # let _ = cc;
    /// ```
    pub fn route_base_drain_ns(&self, _route: u32) -> Option<u64> {
        None
    }

    /// Always `None`: nothing is measured without the controller.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(monitor.device_base_drain_ns(0), None);
    /// # let _ = cc;
    /// ```
    pub fn device_base_drain_ns(&self, _device: u16) -> Option<u64> {
        None
    }

    /// No-op (nothing is judged without the controller).
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig, DrainSignal};
    /// let (_cc, mut monitor) = Bypass::new(&CcConfig::default(), 1, &[0]).unwrap();
    /// assert_eq!(monitor.set_drain_signal(0, DrainSignal::Advisory), Ok(()));
    /// assert_eq!(monitor.drain_signal(0), None); // nothing is judged
    /// ```
    pub fn set_drain_signal(
        &mut self,
        _device: u16,
        _signal: DrainSignal,
    ) -> Result<(), AcquireError> {
        Ok(())
    }

    /// Always `None`: no device domains without the controller.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert_eq!(monitor.drain_signal(0), None);
    /// # let _ = cc;
    /// ```
    pub fn drain_signal(&self, _device: u16) -> Option<DrainSignal> {
        None
    }

    /// Always `None`: nothing is judged without the controller.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert!(monitor.route_policy(&cc, 0).is_none());
    /// ```
    pub fn route_policy(&self, _ctl: &Bypass, _route: u32) -> Option<PolicyView> {
        None
    }

    /// Always `None`: nothing is judged without the controller.
    ///
    /// ```
    /// use railyard_core::cc::{Bypass, CcConfig};
    /// let (cc, monitor) = Bypass::new(&CcConfig::default(), 2, &[0, 1]).unwrap();
    /// assert!(monitor.device_policy(0).is_none());
    /// # let _ = cc;
    /// ```
    pub fn device_policy(&self, _device: u16) -> Option<PolicyView> {
        None
    }
}
