//! The three policy layers of the composed hot path, as small traits, each
//! implemented by its real type, by `()` (layer off: holds nothing, costs
//! nothing) and by `Option<L>` (layer chosen at run time; `None` = off).
//!
//! A layer takes at most one hold per posted attempt and names it in the
//! attempt's [`TokenRecord`] by its `HOLDS_*` bit; every release clears that
//! bit first, so a record can never release a hold twice. A release changes
//! nothing else in the record (the composition hands the record back as
//! posted, its holds restored), and the composition calls it only while the
//! bit is set.
//!
//! | layer | real type | hold | `HOLDS_*` bit |
//! |---|---|---|---|
//! | [`CreditLayer`] | [`SenderLedger`] | a committed receiver-credit charge | `HOLDS_CREDIT` |
//! | [`RailLayer`] | [`Selector`] | the NIC (and peer) in-flight charge | `HOLDS_RAIL_CHARGE` (+ `HOLDS_RAIL_PEER_CHARGE`) |
//! | [`CcLayer`] | [`Controller`] | the device + route byte permit | `HOLDS_PERMIT` |

use crate::cc::{
    AcquireError, Admission, Avoidance, Controller, Deferral, Mode, ReleaseError, Settlement,
};
use crate::classify::Effect;
use crate::credit::{
    BackpressureInfo, Charge, EntryId, KeyError, RecordError, ReleaseError as CreditReleaseError,
    ReleaseOutcome, ReserveError, ResourceSet, SenderLedger,
};
use crate::evidence::{Observation, Observed, PathId, Reason};
use crate::rail::{Choice as RailChoice, RailError, Selector};
use crate::time::Nanos;
use crate::token::TokenRecord;

/// The rail layer (RFC 4534): chooses a local NIC among the usable
/// candidates and charges the slice's bytes to it.
pub trait RailLayer {
    /// Chooses one device among `mask` (bit `d` set: device `d` is a usable
    /// candidate) for a slice of `bytes` to `peer`. Takes nothing.
    ///
    /// ```
    /// use railyard_core::completion::RailLayer;
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// use railyard_core::token::TokenRecord;
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let c = RailLayer::choose(&sel, None, 65536, 0, 0b10).unwrap();
    /// assert_eq!(c.device, 1); // device 0 masked out (its route is quarantined)
    /// assert_eq!(RailLayer::choose(&(), None, 65536, 0, 0b100).unwrap().device, 2); // off: the lowest candidate
    /// ```
    fn choose(
        &self,
        peer: Option<u32>,
        bytes: u32,
        now: Nanos,
        mask: u64,
    ) -> Result<RailChoice, RailError>;

    /// Counts a choice whose post was carried out (a refused post's
    /// choice is dropped uncounted).
    ///
    /// ```
    /// use railyard_core::completion::RailLayer;
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// use railyard_core::token::TokenRecord;
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let c = RailLayer::choose(&sel, None, 65536, 0, 0b11).unwrap();
    /// RailLayer::chosen(&sel, &c); // the post went out: one decision
    /// assert_eq!(sel.counters().decisions, 1);
    /// ```
    fn chosen(&self, _choice: &RailChoice) {}

    /// Charges `rec.bytes` to `rec.device` (and `rec.peer` with the ledger
    /// on) and records the charge in `rec`.
    ///
    /// ```
    /// use railyard_core::completion::RailLayer;
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// use railyard_core::token::TokenRecord;
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let mut rec = TokenRecord { device: 1, bytes: 4096, ..TokenRecord::default() };
    /// RailLayer::charge(&sel, &mut rec, 0).unwrap();
    /// assert_eq!(sel.nic_inflight(1), Some(4096));
    /// RailLayer::release(&sel, &mut rec, false, 1).unwrap();
    /// ```
    fn charge(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), RailError>;

    /// Releases the charge `rec` holds (if any); a success feeds the
    /// bandwidth estimate with `rec.post_ns`.
    ///
    /// ```
    /// use railyard_core::completion::RailLayer;
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// use railyard_core::token::TokenRecord;
    /// let sel = Selector::new(&[DeviceSpec::new(25_000_000_000); 2], RailConfig::default()).unwrap();
    /// let mut rec = TokenRecord { device: 0, bytes: 4096, post_ns: 0, ..TokenRecord::default() };
    /// RailLayer::charge(&sel, &mut rec, 0).unwrap();
    /// RailLayer::release(&sel, &mut rec, true, 10_000).unwrap();
    /// assert_eq!(sel.nic_inflight(0), Some(0));
    /// assert!(RailLayer::release(&sel, &mut rec, true, 10_001).is_err()); // the hold bit is gone
    /// ```
    fn release(&self, rec: &mut TokenRecord, success: bool, now: Nanos) -> Result<(), RailError>;
}

/// The congestion-control layer (RFC 4162): byte-window admission on the
/// device and route domains, right before posting.
pub trait CcLayer {
    /// Whether new work may be steered to `device` × `route`: false while
    /// either domain is quarantined in enforce mode. Two loads; no side effect.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// use railyard_core::completion::CcLayer;
    /// use railyard_core::token::TokenRecord;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// cc.quarantine_device(0).unwrap();
    /// assert!(!CcLayer::usable(&cc, 0, 0) && CcLayer::usable(&cc, 1, 1));
    /// assert!(CcLayer::usable(&(), 0, 0)); // CC off: everything usable
    /// ```
    fn usable(&self, device: u16, route: u32) -> bool;

    /// Admits `rec.bytes` on `rec.device` × `rec.route` and records the
    /// permit in `rec`, or defers / avoids holding nothing.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// use railyard_core::completion::CcLayer;
    /// use railyard_core::token::TokenRecord;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// let mut rec = TokenRecord { device: 1, route: 1, bytes: 4096, ..TokenRecord::default() };
    /// CcLayer::acquire(&cc, &mut rec, 0).unwrap(); // the permit is in the record now
    /// assert_ne!(rec.holds & TokenRecord::HOLDS_PERMIT, 0);
    /// assert!(CcLayer::acquire(&cc, &mut rec, 0).is_err()); // a record holds one permit
    /// CcLayer::release(&cc, &mut rec, railyard_core::classify::Effect::Success).unwrap();
    /// ```
    fn acquire(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), CcRefusal>;

    /// Releases the permit `rec` holds, applying `effect` to the route's
    /// current generation only.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// use railyard_core::completion::CcLayer;
    /// use railyard_core::token::TokenRecord;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// use railyard_core::cc::Settlement;
    /// use railyard_core::classify::Effect;
    /// let mut rec = TokenRecord { device: 0, route: 0, bytes: 4096, ..TokenRecord::default() };
    /// CcLayer::acquire(&cc, &mut rec, 0).unwrap();
    /// assert_eq!(CcLayer::release(&cc, &mut rec, Effect::Success), Ok(Settlement::Current));
    /// assert_eq!(cc.route_snapshot(0).unwrap().in_flight, 0);
    /// ```
    fn release(&self, rec: &mut TokenRecord, effect: Effect) -> Result<Settlement, ReleaseError>;

    /// Task evidence for `path` (slow path, errors and refusals only): the
    /// path, plus whatever the layer observes of its route (generation,
    /// window, in-flight bytes, cooldown).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// use railyard_core::completion::CcLayer;
    /// use railyard_core::token::TokenRecord;
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    /// use railyard_core::evidence::{Observed, PathId, Reason};
    /// let p = PathId { device: 1, route: 1 };
    /// let o = CcLayer::observation(&cc, p, Reason::ByteWindow, 5);
    /// assert_eq!((o.path, o.window), (Observed::Value(p), Observed::Value(cfg.max_window_bytes)));
    /// assert_eq!(CcLayer::observation(&(), p, Reason::ByteWindow, 5).window, Observed::Unobserved); // CC off
    /// ```
    fn observation(&self, path: PathId, reason: Reason, now: Nanos) -> Observation {
        let mut o = Observation::new(reason, now);
        o.path = Observed::Value(path);
        o
    }
}

/// Why CC did not admit (nothing is held).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcRefusal {
    /// `BYTE_WINDOW`.
    Deferred(Deferral),
    /// `PATH_QUARANTINED`.
    Avoided(Avoidance),
    /// Bad device / route indices, or a record already holding a permit.
    Invalid(AcquireError),
}

/// What one post asks of receiver credit (RFC 2849): the full charge vector
/// for the ledger entry of `(peer, class)`. Only work that consumes remote
/// receiver resources carries one (a direct WRITE; never a READ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditDemand {
    /// The entry, resolved once by [`SenderLedger::entry`].
    pub entry: EntryId,
    /// The charge (e.g. [`Charge::direct_write`]); its DATA_BYTES must equal
    /// the slice's bytes.
    pub charge: Charge,
}

/// Why credit refused a post.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreditRefusal {
    /// Not enough credit, or the entry is not open: typed backpressure.
    Backpressure(BackpressureInfo),
    /// The demand is invalid for this ledger (bad entry, resource, size).
    Invalid(KeyError),
    /// The charge cannot be named in a token record (see [`RecordError`]).
    Unrecordable(RecordError),
}

/// The receiver-credit layer (RFC 2849): an all-or-nothing reserve of the
/// full charge vector, named in the record, and committed on handoff (once
/// the token is claimed, so a refusal before it only rolls back locally
/// and never reaches the receiver).
pub trait CreditLayer {
    /// What a reservation holds until it is committed (dropping it rolls
    /// the reservation back).
    type Reserved<'a>
    where
        Self: 'a;

    /// Reserves `demand` and names it in `rec` (`credit_key`,
    /// `HOLDS_CREDIT`); nothing is committed yet.
    ///
    /// ```
    /// use railyard_core::completion::{CreditDemand, CreditLayer};
    /// use railyard_core::credit::*;
    /// use railyard_core::token::TokenRecord;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    ///     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// let demand = CreditDemand { entry: ledger.entry(0, 0).unwrap(), charge: Charge::direct_write(4096) };
    /// let mut rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
    /// let r = CreditLayer::reserve(&ledger, &demand, &mut rec).unwrap();
    /// assert_ne!(rec.holds & TokenRecord::HOLDS_CREDIT, 0); // named in the record already
    /// drop(r); // the token claim failed: the reservation rolls back
    /// assert_eq!(ledger.available(demand.entry).unwrap().0, Charge([8192, 2, 0, 2]));
    /// ```
    fn reserve<'a>(
        &'a self,
        demand: &CreditDemand,
        rec: &mut TokenRecord,
    ) -> Result<Self::Reserved<'a>, CreditRefusal>;

    /// Commits a reservation on handoff to the transport. A refusal (the
    /// receiver's epoch changed meanwhile) holds nothing.
    ///
    /// ```
    /// use railyard_core::completion::{CreditDemand, CreditLayer};
    /// use railyard_core::credit::*;
    /// use railyard_core::token::TokenRecord;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    ///     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// let demand = CreditDemand { entry: ledger.entry(0, 0).unwrap(), charge: Charge::direct_write(4096) };
    /// let mut rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
    /// let r = CreditLayer::reserve(&ledger, &demand, &mut rec).unwrap();
    /// CreditLayer::commit(&ledger, r).unwrap(); // handed to the transport
    /// assert_eq!(ctl.entry_metrics(&ledger, 0, 0).unwrap().consumed[0], 4096);
    /// CreditLayer::release(&ledger, &mut rec).unwrap();
    /// ```
    fn commit<'a>(&'a self, reserved: Self::Reserved<'a>) -> Result<(), CreditRefusal>;

    /// Reports the committed charge `rec` holds as released (completion, or
    /// work that never reached the NIC). Never mints credit locally.
    ///
    /// ```
    /// use railyard_core::completion::{CreditDemand, CreditLayer};
    /// use railyard_core::credit::*;
    /// use railyard_core::token::TokenRecord;
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    ///     grants: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    /// let demand = CreditDemand { entry: ledger.entry(0, 0).unwrap(), charge: Charge::direct_write(4096) };
    /// let mut rec = TokenRecord { bytes: 4096, ..TokenRecord::default() };
    /// let r = CreditLayer::reserve(&ledger, &demand, &mut rec).unwrap();
    /// CreditLayer::commit(&ledger, r).unwrap();
    /// assert_eq!(CreditLayer::release(&ledger, &mut rec), Ok(ReleaseOutcome::Released));
    /// assert_eq!(CreditLayer::release(&ledger, &mut rec), Err(ReleaseError::NotHeld));
    /// ```
    fn release(&self, rec: &mut TokenRecord) -> Result<ReleaseOutcome, CreditReleaseError>;
}

// ---- layer off: `()` ----------------------------------------------------

impl RailLayer for () {
    #[inline(always)]
    fn choose(&self, _: Option<u32>, _: u32, _: Nanos, mask: u64) -> Result<RailChoice, RailError> {
        if mask == 0 {
            return Err(RailError::NoCandidate);
        }
        Ok(RailChoice::plain(mask.trailing_zeros() as u16))
    }
    #[inline(always)]
    fn charge(&self, _: &mut TokenRecord, _: Nanos) -> Result<(), RailError> {
        Ok(())
    }
    #[inline(always)]
    fn release(&self, _: &mut TokenRecord, _: bool, _: Nanos) -> Result<(), RailError> {
        Ok(())
    }
}

impl CcLayer for () {
    #[inline(always)]
    fn usable(&self, _: u16, _: u32) -> bool {
        true
    }
    #[inline(always)]
    fn acquire(&self, _: &mut TokenRecord, _: Nanos) -> Result<(), CcRefusal> {
        Ok(())
    }
    #[inline(always)]
    fn release(&self, _: &mut TokenRecord, _: Effect) -> Result<Settlement, ReleaseError> {
        Ok(Settlement::Current)
    }
}

impl CreditLayer for () {
    type Reserved<'a> = ();
    #[inline(always)]
    fn reserve(&self, _: &CreditDemand, _: &mut TokenRecord) -> Result<(), CreditRefusal> {
        Ok(())
    }
    #[inline(always)]
    fn commit(&self, _: ()) -> Result<(), CreditRefusal> {
        Ok(())
    }
    #[inline(always)]
    fn release(&self, _: &mut TokenRecord) -> Result<ReleaseOutcome, CreditReleaseError> {
        Err(CreditReleaseError::NotHeld)
    }
}

// ---- references and run-time choice ---------------------------------------

impl<T: RailLayer + ?Sized> RailLayer for &T {
    #[inline(always)]
    fn choose(&self, p: Option<u32>, b: u32, n: Nanos, m: u64) -> Result<RailChoice, RailError> {
        (**self).choose(p, b, n, m)
    }
    #[inline(always)]
    fn chosen(&self, c: &RailChoice) {
        (**self).chosen(c)
    }
    #[inline(always)]
    fn charge(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), RailError> {
        (**self).charge(rec, now)
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord, ok: bool, now: Nanos) -> Result<(), RailError> {
        (**self).release(rec, ok, now)
    }
}

impl<T: CcLayer + ?Sized> CcLayer for &T {
    #[inline(always)]
    fn usable(&self, d: u16, r: u32) -> bool {
        (**self).usable(d, r)
    }
    #[inline(always)]
    fn acquire(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), CcRefusal> {
        (**self).acquire(rec, now)
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord, e: Effect) -> Result<Settlement, ReleaseError> {
        (**self).release(rec, e)
    }
    fn observation(&self, path: PathId, reason: Reason, now: Nanos) -> Observation {
        (**self).observation(path, reason, now)
    }
}

impl<T: CreditLayer + ?Sized> CreditLayer for &T {
    type Reserved<'a>
        = T::Reserved<'a>
    where
        Self: 'a;
    #[inline(always)]
    fn reserve<'a>(
        &'a self,
        d: &CreditDemand,
        rec: &mut TokenRecord,
    ) -> Result<Self::Reserved<'a>, CreditRefusal> {
        (**self).reserve(d, rec)
    }
    #[inline(always)]
    fn commit<'a>(&'a self, r: Self::Reserved<'a>) -> Result<(), CreditRefusal> {
        (**self).commit(r)
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord) -> Result<ReleaseOutcome, CreditReleaseError> {
        (**self).release(rec)
    }
}

impl<T: RailLayer> RailLayer for Option<T> {
    #[inline(always)]
    fn choose(&self, p: Option<u32>, b: u32, n: Nanos, m: u64) -> Result<RailChoice, RailError> {
        match self {
            Some(l) => l.choose(p, b, n, m),
            None => ().choose(p, b, n, m),
        }
    }
    #[inline(always)]
    fn chosen(&self, c: &RailChoice) {
        if let Some(l) = self {
            l.chosen(c)
        }
    }
    #[inline(always)]
    fn charge(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), RailError> {
        match self {
            Some(l) => l.charge(rec, now),
            None => Ok(()),
        }
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord, ok: bool, now: Nanos) -> Result<(), RailError> {
        match self {
            Some(l) => l.release(rec, ok, now),
            None => Ok(()),
        }
    }
}

impl<T: CcLayer> CcLayer for Option<T> {
    #[inline(always)]
    fn usable(&self, d: u16, r: u32) -> bool {
        self.as_ref().map_or(true, |l| l.usable(d, r))
    }
    #[inline(always)]
    fn acquire(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), CcRefusal> {
        match self {
            Some(l) => l.acquire(rec, now),
            None => Ok(()),
        }
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord, e: Effect) -> Result<Settlement, ReleaseError> {
        match self {
            Some(l) => l.release(rec, e),
            None => Ok(Settlement::Current),
        }
    }
    fn observation(&self, path: PathId, reason: Reason, now: Nanos) -> Observation {
        match self {
            Some(l) => l.observation(path, reason, now),
            None => ().observation(path, reason, now),
        }
    }
}

impl<T: CreditLayer> CreditLayer for Option<T> {
    type Reserved<'a>
        = Option<T::Reserved<'a>>
    where
        Self: 'a;
    #[inline(always)]
    fn reserve<'a>(
        &'a self,
        d: &CreditDemand,
        rec: &mut TokenRecord,
    ) -> Result<Self::Reserved<'a>, CreditRefusal> {
        match self {
            Some(l) => l.reserve(d, rec).map(Some),
            None => Ok(None),
        }
    }
    #[inline(always)]
    fn commit<'a>(&'a self, r: Self::Reserved<'a>) -> Result<(), CreditRefusal> {
        match (self, r) {
            (Some(l), Some(r)) => l.commit(r),
            _ => Ok(()),
        }
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord) -> Result<ReleaseOutcome, CreditReleaseError> {
        match self {
            Some(l) => l.release(rec),
            None => Err(CreditReleaseError::NotHeld),
        }
    }
}

// ---- the real layers ------------------------------------------------------

impl RailLayer for Selector {
    #[inline]
    fn choose(
        &self,
        peer: Option<u32>,
        bytes: u32,
        now: Nanos,
        mask: u64,
    ) -> Result<RailChoice, RailError> {
        self.choose(peer, bytes, now, mask)
    }
    #[inline]
    fn chosen(&self, c: &RailChoice) {
        Selector::chosen(self, c)
    }
    #[inline]
    fn charge(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), RailError> {
        let c = Selector::charge(self, rec.device, rec.peer.get(), rec.bytes, now)?;
        c.record_into(rec);
        Ok(())
    }
    #[inline]
    fn release(&self, rec: &mut TokenRecord, success: bool, now: Nanos) -> Result<(), RailError> {
        self.release_record(rec, success, now)
    }
}

impl CcLayer for Controller {
    #[inline]
    fn usable(&self, device: u16, route: u32) -> bool {
        self.mode() != Mode::Enforce || !self.is_quarantined(device, route)
    }
    #[inline(always)]
    fn acquire(&self, rec: &mut TokenRecord, now: Nanos) -> Result<(), CcRefusal> {
        // One test on the admitted path; the refusals are mapped out of line.
        match self.try_acquire(rec.device, rec.route, rec.bytes, now) {
            Ok(Admission::Admit(p)) => p.record_into(rec).map_err(|p| self.refuse_second(p)),
            other => Err(self.not_admitted(other)),
        }
    }
    #[inline(always)]
    fn release(&self, rec: &mut TokenRecord, effect: Effect) -> Result<Settlement, ReleaseError> {
        self.release_record(rec, effect)
    }
    fn observation(&self, path: PathId, reason: Reason, now: Nanos) -> Observation {
        match self.route_snapshot(path.route) {
            Some(snap) if self.mode() != Mode::Off => snap.observation(reason, path, now),
            _ => ().observation(path, reason, now),
        }
    }
}

impl Controller {
    /// An admission that did not admit, as the layer's refusal (nothing is
    /// held).
    #[cold]
    fn not_admitted(&self, a: Result<Admission, AcquireError>) -> CcRefusal {
        match a {
            Ok(Admission::Defer(d)) => CcRefusal::Deferred(d),
            Ok(Admission::Avoid(a)) => CcRefusal::Avoided(a),
            Err(e) => CcRefusal::Invalid(e),
            // Not passed here (the caller records an admission); were it,
            // the permit goes back rather than being held unrecorded.
            Ok(Admission::Admit(p)) => self.refuse_second(p),
        }
    }

    /// The record already held a permit: never hold two.
    #[cold]
    fn refuse_second(&self, p: crate::cc::Permit) -> CcRefusal {
        let _ = self.release(p, Effect::None);
        CcRefusal::Invalid(AcquireError::AlreadyHeld)
    }
}

impl SenderLedger {
    /// A reserve the ledger refused, as the layer's refusal (built out of
    /// line: the reserved path carries none of it).
    #[cold]
    #[inline(never)]
    fn not_reserved(&self, entry: EntryId, e: ReserveError) -> CreditRefusal {
        match e {
            ReserveError::Key(k) => CreditRefusal::Invalid(k),
            ReserveError::Closed => {
                CreditRefusal::Backpressure(self.backpressure(entry, ResourceSet::EMPTY))
            }
            ReserveError::Insufficient(short) => {
                CreditRefusal::Backpressure(self.backpressure(entry, short))
            }
        }
    }
}

/// A reservation the record cannot name: rolled back (dropped) here.
#[cold]
#[inline(never)]
fn unrecordable(r: crate::credit::Reservation<'_>, e: RecordError) -> CreditRefusal {
    drop(r);
    CreditRefusal::Unrecordable(e)
}

impl CreditLayer for SenderLedger {
    type Reserved<'a> = crate::credit::Reservation<'a>;

    #[inline(always)]
    fn reserve<'a>(
        &'a self,
        demand: &CreditDemand,
        rec: &mut TokenRecord,
    ) -> Result<Self::Reserved<'a>, CreditRefusal> {
        let r = match self.try_reserve(demand.entry, &demand.charge) {
            Ok(r) => r,
            Err(e) => return Err(self.not_reserved(demand.entry, e)),
        };
        // A demand the record cannot name (a caller bug) is refused here;
        // dropping `r` rolls the reservation back.
        match r.record_into(rec) {
            Ok(()) => Ok(r),
            Err(e) => Err(unrecordable(r, e)),
        }
    }

    #[inline(always)]
    fn commit<'a>(&'a self, r: Self::Reserved<'a>) -> Result<(), CreditRefusal> {
        let entry = r.entry();
        match r.commit() {
            Ok(_) => Ok(()),
            // The epoch changed between reserve and commit (the link is
            // being fenced): nothing is held.
            Err(_) => Err(CreditRefusal::Backpressure(
                self.backpressure(entry, ResourceSet::EMPTY),
            )),
        }
    }

    #[inline]
    fn release(&self, rec: &mut TokenRecord) -> Result<ReleaseOutcome, CreditReleaseError> {
        let out = self.release_record(rec);
        // Clear the hold whatever the ledger said: the record names it once.
        rec.holds &= !TokenRecord::HOLDS_CREDIT;
        out
    }
}
