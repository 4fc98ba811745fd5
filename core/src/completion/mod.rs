//! The one composed hot path: admission and completion of every posted
//! work request, for every integrator (the engine, the simulator, the C
//! ABI), composed once here from [`token`](crate::token),
//! [`slice`](crate::slice), [`endpoint`](crate::endpoint) and the three
//! policy layers — receiver credit ([`credit`](crate::credit)), rail
//! selection ([`rail`](crate::rail)) and congestion control
//! ([`cc`](crate::cc)) — with [`classify`](crate::classify) deciding what a
//! completion means.
//!
//! Nobody outside this module takes a permit, a rail charge or a credit for
//! a posted attempt, or maps a WC status to a slice outcome
//! ([`classify::wc_outcome`](crate::classify::wc_outcome) is that mapping).
//!
//! ## Admission: [`HotPath::post`]
//!
//! One fixed order for every caller; a refusal at any step gives back
//! everything taken before it, in reverse, and returns one typed
//! [`Refusal`] naming its source:
//!
//! | step | what | refusal |
//! |---|---|---|
//! | 1 | the slice attempt is current | [`Refusal::Slice`] |
//! | 2 | rail: choose a device among the usable candidates (CC-quarantined ones excluded) | [`Refusal::NoUsablePath`] / [`Refusal::Avoided`] |
//! | 3 | endpoint: generation, phase, QP depth (counts the post) | [`Refusal::Endpoint`] |
//! | 4 | rail: charge the slice's bytes to the chosen NIC (and peer) | — |
//! | 5 | CC: device + route byte permit | [`Refusal::Deferred`] / [`Refusal::Avoided`] |
//! | 6 | credit: all-or-nothing reserve of the charge vector | [`Refusal::Backpressure`] |
//! | 7 | token: claim the `wr_id`, publishing the record of everything held; then commit the credit | [`Refusal::Token`] (and [`Refusal::Backpressure`] if the receiver's epoch changed in between) |
//!
//! Why this order:
//!
//! * **The endpoint is admitted before any policy hold**, and released
//!   after every hold on completion. An endpoint therefore drains (and
//!   [`EndpointTable::poll_reclaim`] reports it reclaimed) only when no
//!   attempt posted on it holds a permit, a charge or a credit any more:
//!   "reclaimed" means "settled", with no window in between (the loom model
//!   `hotpath_reclaim_implies_released` checks it; its broken twin releases
//!   the endpoint first). It is also the cheapest hard refusal (a retired
//!   endpoint or a full QP) and must not consume window or credit.
//! * **The rail is chosen before the endpoint** because the device decides
//!   which endpoint and route the slice uses; it is *charged* only once
//!   the endpoint admitted it, so a refused endpoint holds nothing.
//! * **CC comes before credit.** Receiver credit is owned by the receiver
//!   and shared by every worker of this sender towards it; taking it for
//!   work the local byte window would defer would take receiver capacity
//!   away for a local reason and make the other workers stall spuriously
//!   (RFC 2849: effective dispatch = local window AND scheduler eligibility
//!   AND receiver credit; the reserve is the last gate before handoff).
//!   CC is still "immediately before posting" (RFC 4162): only the credit
//!   CAS and the token claim separate it from `ibv_post_send`.
//! * **The token is last**: the claim publishes the record, which must
//!   already name every hold so the completion can release exactly those.
//!
//! The credit charge is *reserved* at step 6 (named in the record) and
//! *committed* — handed to the transport, visible to the receiver's
//! accounting — only after the token claim succeeded, so every refusal of
//! a post only rolls a local reservation back. An unposted `bad_wr` tail
//! was committed: it is reported released (the receiver gets it back
//! through the next usage report); the sender never mints credit locally.
//!
//! With several candidate paths ([`PathChoice::Pick`]), a path that avoids
//! (quarantined) or whose endpoint refuses is dropped and the rail chooses
//! again among the rest; a full window ([`Refusal::Deferred`]), credit
//! backpressure and token exhaustion stop the post (they are backpressure,
//! not a broken path).
//!
//! ## Completion: [`HotPath::complete`]
//!
//! `complete(wr_id, status, vendor_err, now)` hands the token's record back
//! exactly once (a duplicate, stale, forged or out-of-range `wr_id` gets the
//! token pool's typed error and changes nothing), classifies the WC **once**
//! ([`classify_wc`]), releases every hold the record names in reverse
//! admission order — credit, CC (applying the class's effect to the route's
//! current generation only), rail (a success feeds the bandwidth estimate),
//! then the endpoint — and only then applies
//! [`wc_outcome`] to the slice, if the
//! attempt is still current (RFC 3136's four rules):
//!
//! 1. release the resources the posted attempt owned — always, exactly once;
//! 2. check whether the token's attempt is still the slice's current one;
//! 3. mutate slice status, retry count or retry only if it is;
//! 4. otherwise treat the completion as a resource-release event only.
//!
//! [`HotPath::unposted`] gives back a `bad_wr` tail the same way, without
//! feedback and without touching the slice.
//!
//! With selective signaling ([`SignalPolicy`], [`PostOrder`]) a CQE also
//! covers the requests posted before it on its QP:
//! [`HotPath::complete_covered`] completes each of them, in posting order,
//! before the CQE's own — as success after a successful CQE, as a derived
//! flush (`WR_FLUSH_ERR`) after any error — with the same exactly-once
//! token hand-back.
//!
//! ## Layers and cost
//!
//! The layers are type parameters ([`Layers`]): `()` is a layer that is
//! off and compiles away, `Option<L>` chooses at run time, and the real
//! types are [`SenderLedger`](crate::credit::SenderLedger),
//! [`Selector`](crate::rail::Selector) and
//! [`Controller`](crate::cc::Controller). Static dispatch; post and
//! complete never allocate (`tests/no_alloc.rs`).
//!
//! ```
//! use railyard_core::cc::{CcConfig, Controller, Mode};
//! use railyard_core::classify::wc;
//! use railyard_core::completion::{Layers, HotPath, Path, PostRequest, SliceEffect};
//! use railyard_core::endpoint::{EndpointConfig, EndpointTable};
//! use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
//! use railyard_core::slice::{SliceState, SliceTable};
//! use railyard_core::token::TokenPool;
//!
//! let tokens: TokenPool = TokenPool::new(8).unwrap();
//! let slices = SliceTable::new(8).unwrap();
//! let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
//! let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
//! let (cc, _monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap(); // route r on device r
//! let rails = Selector::new(&[DeviceSpec::new(100_000_000_000); 2], RailConfig::default()).unwrap();
//! let owner = HotPath::new(&tokens, &slices, &eps).with_layers(Layers {
//!     credit: (),   // receiver credit off
//!     rail: &rails,
//!     cc: &cc,
//! });
//!
//! let paths = [
//!     Path { device: 0, qp: 0, route: 0, endpoint: eps.open(()).unwrap() },
//!     Path { device: 1, qp: 0, route: 1, endpoint: eps.open(()).unwrap() },
//! ];
//! let s = slices.open(0).unwrap();
//! let posted = owner.post(PostRequest::pick(s, &paths, 65536, 0).to_peer(7)).unwrap();
//! // ibv_post_send(..., wr.wr_id = posted.wr_id, ...); then, polled:
//! let done = owner.complete(posted.wr_id, wc::SUCCESS, 0, 10_000).unwrap();
//! assert_eq!(done.slice, SliceEffect::Settled(SliceState::Succeeded));
//! assert_eq!(done.faults().count(), 0);
//! assert_eq!(tokens.in_use(), 0);
//! assert_eq!(rails.nic_inflight(usize::from(posted.path.device)), Some(0));
//! // (no snapshot when the controller is compiled out: `adaptive-cc` off)
//! assert_eq!(cc.route_snapshot(posted.path.route).map_or(0, |r| r.in_flight), 0);
//! ```
//!
//! ## Cost
//!
//! Instructions per slice (post + complete) under callgrind, the
//! composition against the same work composed by hand from the layers' own
//! APIs, in the same build: `ci/icount.sh` (the `hotpath_icount` arms of
//! `benches/examples/hotpath_icount.rs`; refs at N = 200 000 minus refs at
//! N = 0, divided by N).
//!
//! | layers (arm) | hand-composed | `HotPath` | overhead |
//! |---|---|---|---|
//! | no CC layer, rail + credit off (`hand_nocc` / `composed_nocc`) | 346 | 356 | +2.9 % |
//! | CC enforce, rail + credit off (`composed_enforce`) | 540 | 548 | +1.5 % |
//! | CC enforce + rail + credit (`composed_all`) | 1127 | 1155 | +2.5 % |
//!
//! The other arms (CC `off` / `observe`, chains, covered completions,
//! token caches) are in `docs/benchmarks.md` with their dates. Issue #13's
//! goal is ≤ 2 % over hand-composed; met with CC enforce alone, not with
//! every layer (+2.5 %) or none (+2.9 %). Selective
//! signaling's saving is outside core (15 of 16 CQEs the provider never
//! writes and `ibv_poll_cq` never reads), a token cache's is the two
//! shared-line CASes per slice that two threads on one pool fight over;
//! neither shows in instruction counts. The dated sessions, the figures
//! before the compact token record, and what the composition still pays
//! for: `docs/benchmarks.md`.

use core::fmt;

mod layer;
mod order;
mod tables;

pub use layer::{CcLayer, CcRefusal, CreditDemand, CreditLayer, CreditRefusal, RailLayer};
pub use order::{
    BadOrderCapacity, BadSignalInterval, Covered, PostOrder, SignalPolicy, MAX_SIGNAL_INTERVAL,
};
pub use tables::{HotPathConfig, HotPathControl, HotPathError, HotPathLayers, HotPathTables};

use crate::cc::{AcquireError, Avoidance, Deferral, DomainKind, Settlement};
pub use crate::classify::WcOutcome;
use crate::classify::{classify_wc, wc_outcome, Effect, WcClassification};
use crate::credit::{BackpressureInfo, KeyError, RecordError, ReleaseOutcome};
use crate::endpoint::{EndpointError, EndpointHandle, EndpointTable};
use crate::evidence::{Observation, Observed, PathId, Reason};
use crate::rail::{Choice as RailChoice, RailError};
use crate::slice::{Outcome, Retry, SliceError, SliceRef, SliceState, SliceTable};
use crate::time::Nanos;
use crate::token::{OptId, TokenCache, TokenCacheOver, TokenError, TokenPool, TokenRecord, WrId};

/// One resolved RDMA path for a slice: the local device (rail), the route
/// domain (local device × remote NIC) and the endpoint and QP that carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path {
    /// Local device (device domain / rail index).
    pub device: u16,
    /// QP index within the endpoint.
    pub qp: u16,
    /// Route domain index.
    pub route: u32,
    /// The endpoint (slot + generation).
    pub endpoint: EndpointHandle,
}

impl Path {
    /// The evidence path id (device, route).
    ///
    /// ```
    /// use railyard_core::completion::Path;
    /// use railyard_core::evidence::PathId;
    ///
    /// let p = Path { device: 1, qp: 0, route: 5, ..Path::default() };
    /// assert_eq!(p.id(), PathId { device: 1, route: 5 });
    /// ```
    #[inline]
    pub const fn id(&self) -> PathId {
        PathId {
            device: self.device,
            route: self.route,
        }
    }
}

/// Where a slice may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathChoice<'p> {
    /// The caller resolved the path: the rail layer only charges it, and a
    /// quarantined path is [`Refusal::Avoided`].
    Fixed(Path),
    /// The rail layer chooses among these candidates (distinct devices, at
    /// most 64), skipping the ones CC has quarantined.
    Pick(&'p [Path]),
}

/// What to post: the current attempt of a slice, its bytes, its peer, the
/// credit it consumes (if any) and where it may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostRequest<'p> {
    /// The slice and the attempt the caller believes current.
    pub slice: SliceRef,
    /// Bytes in this work request (non-zero).
    pub bytes: u32,
    /// Remote peer (segment id), if known: the rail's per-peer ledger and
    /// the record's `peer`. `None` is distinct from peer 0.
    pub peer: Option<u32>,
    /// Receiver credit this work consumes (a direct WRITE with credit on);
    /// `None` for work that is not credit-gated (a READ, or credit off).
    pub credit: Option<CreditDemand>,
    /// The path, or the candidates to choose from.
    pub path: PathChoice<'p>,
    /// The caller's clock.
    pub now: Nanos,
}

impl PostRequest<'static> {
    /// A request on QP `qp` of endpoint `endpoint`, device 0, route 0.
    ///
    /// ```
    /// use railyard_core::completion::{PathChoice, PostRequest};
    /// use railyard_core::endpoint::EndpointHandle;
    /// use railyard_core::slice::SliceRef;
    ///
    /// let (s, ep) = (SliceRef::default(), EndpointHandle::default());
    /// let req = PostRequest::new(s, ep, 1, 4096, 0);
    /// let PathChoice::Fixed(p) = req.path else { unreachable!() };
    /// assert_eq!((p.device, p.route, p.qp, p.endpoint), (0, 0, 1, ep));
    /// assert_eq!((req.peer, req.credit), (None, None));
    /// ```
    pub fn new(slice: SliceRef, endpoint: EndpointHandle, qp: u16, bytes: u32, now: Nanos) -> Self {
        Self::on(
            slice,
            Path {
                device: 0,
                qp,
                route: 0,
                endpoint,
            },
            bytes,
            now,
        )
    }

    /// A request on a resolved `path`.
    ///
    /// ```
    /// use railyard_core::completion::{Path, PathChoice, PostRequest};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let path = Path { device: 1, qp: 0, route: 3, ..Path::default() };
    /// let req = PostRequest::on(SliceRef::default(), path, 65536, 10);
    /// assert_eq!(req.path, PathChoice::Fixed(path));
    /// assert_eq!((req.bytes, req.now), (65536, 10));
    /// ```
    pub fn on(slice: SliceRef, path: Path, bytes: u32, now: Nanos) -> Self {
        PostRequest {
            slice,
            bytes,
            peer: None,
            credit: None,
            path: PathChoice::Fixed(path),
            now,
        }
    }
}

impl<'p> PostRequest<'p> {
    /// A request the rail layer places on one of `paths`.
    ///
    /// ```
    /// use railyard_core::completion::{Path, PathChoice, PostRequest};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let paths = [Path { device: 0, ..Path::default() }, Path { device: 1, route: 1, ..Path::default() }];
    /// let req = PostRequest::pick(SliceRef::default(), &paths, 65536, 0);
    /// assert_eq!(req.path, PathChoice::Pick(&paths)); // the rail layer chooses
    /// ```
    pub fn pick(slice: SliceRef, paths: &'p [Path], bytes: u32, now: Nanos) -> Self {
        PostRequest {
            slice,
            bytes,
            peer: None,
            credit: None,
            path: PathChoice::Pick(paths),
            now,
        }
    }

    /// Names the remote peer.
    ///
    /// ```
    /// use railyard_core::completion::PostRequest;
    /// use railyard_core::endpoint::EndpointHandle;
    /// use railyard_core::slice::SliceRef;
    ///
    /// let req = PostRequest::new(SliceRef::default(), EndpointHandle::default(), 0, 4096, 0);
    /// assert_eq!(req.to_peer(0).peer, Some(0)); // peer 0 is a peer, distinct from None
    /// ```
    #[must_use]
    pub fn to_peer(mut self, peer: u32) -> Self {
        self.peer = Some(peer);
        self
    }

    /// Makes the post consume receiver credit.
    ///
    /// ```
    /// use railyard_core::classify::wc;
    /// use railyard_core::completion::{CreditDemand, Layers, HotPath, PostRequest, Refusal};
    /// use railyard_core::credit::*;
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// use railyard_core::slice::SliceTable;
    /// use railyard_core::token::TokenPool;
    ///
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// let s = SessionId::new(1, 7);
    /// ctl.bind(&ledger, 0, s, 1).unwrap();
    /// let u = CreditUpdate { receiver_session: s, epoch: 1, sequence: 1,
    ///     grants: Totals::all([8192, 4, 0, 4]), ..Default::default() };
    /// ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    ///
    /// let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// let slices = SliceTable::new(8).unwrap();
    /// let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps)
    ///     .with_layers(Layers { credit: &ledger, rail: (), cc: () });
    /// let ep = eps.open(()).unwrap();
    /// let demand = CreditDemand { entry: ledger.entry(0, 0).unwrap(), charge: Charge::direct_write(8192) };
    /// let a = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 8192, 0).with_credit(demand)).unwrap();
    /// // The receiver granted 8 KiB: a second 8 KiB WRITE is typed backpressure.
    /// let b = owner.post(PostRequest::new(slices.open(1).unwrap(), ep, 0, 8192, 0).with_credit(demand));
    /// assert!(matches!(b, Err(Refusal::Backpressure(_))));
    /// let done = owner.complete(a.wr_id, wc::SUCCESS, 0, 10).unwrap();
    /// assert_eq!(done.released.credit(), Some(ReleaseOutcome::Released));
    /// ```
    #[must_use]
    pub fn with_credit(mut self, demand: CreditDemand) -> Self {
        self.credit = Some(demand);
        self
    }
}

/// A posted attempt: the `wr_id` to hand to `ibv_post_send`, the path it
/// was admitted on, and what its record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    /// The work-request id (names this attempt, never a pointer).
    pub wr_id: WrId,
    /// The path the attempt was admitted on (for a [`PathChoice::Pick`]
    /// request, the one the rail layer chose).
    pub path: Path,
    /// The `HOLDS_*` bits of the record the token holds.
    pub holds: u8,
    /// Candidates dropped before this one was admitted (quarantined path,
    /// refused endpoint).
    pub skipped: u8,
    /// What the rail layer chose, for a [`PathChoice::Pick`] request.
    pub rail: Option<RailChoice>,
}

/// Invalid post input (a bug in the caller, or a forged request): typed,
/// and nothing is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidPost {
    /// A work request of zero bytes.
    ZeroBytes,
    /// [`PathChoice::Pick`] with no candidates.
    NoCandidates,
    /// Two candidates name the same device, or a device index ≥ 64.
    BadCandidate(u16),
    /// The controller refused the device / route indices.
    Cc(AcquireError),
    /// The rail selector refused the device index.
    Rail(RailError),
    /// The credit demand is invalid for the ledger.
    Credit(KeyError),
    /// The credit charge cannot be named in a token record.
    CreditRecord(RecordError),
}

/// Why a post was refused, naming its source. Nothing is held after a
/// refusal: every hold taken before it was given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The slice attempt is not current (or the slice is terminal).
    Slice(SliceError),
    /// No candidate path at all is usable (every one was refused).
    NoUsablePath,
    /// The endpoint of `path` refused admission (retired, stale
    /// generation, QP full, ...).
    Endpoint {
        /// The path.
        path: Path,
        /// Why.
        error: EndpointError,
    },
    /// CC deferred (`BYTE_WINDOW`): the slice stays queued.
    Deferred {
        /// The path.
        path: Path,
        /// Which domain, its window and in-flight bytes.
        deferral: Deferral,
    },
    /// CC avoided a quarantined path (`PATH_QUARANTINED`) and no other
    /// candidate was usable.
    Avoided {
        /// The path.
        path: Path,
        /// Which domain.
        avoidance: Avoidance,
    },
    /// Receiver credit is short or not open (RFC 2849 typed backpressure).
    Backpressure(BackpressureInfo),
    /// No token is free: backpressure.
    Token(TokenError),
    /// The request is invalid.
    Invalid(InvalidPost),
}

impl Refusal {
    /// The task-evidence reason of this refusal, if it is an anomaly the
    /// caller's task should record (RFC 4162 non-WC table): `BYTE_WINDOW`,
    /// `PATH_QUARANTINED`, `NO_USABLE_PATH`, receiver pressure for credit
    /// backpressure, `GENERATION_CHANGED` for a retired / stale endpoint.
    ///
    /// ```
    /// use railyard_core::completion::Refusal;
    /// use railyard_core::evidence::Reason;
    /// use railyard_core::token::TokenError;
    ///
    /// assert_eq!(Refusal::NoUsablePath.reason(), Some(Reason::NoUsablePath));
    /// // No token free is backpressure, not a task anomaly.
    /// assert_eq!(Refusal::Token(TokenError::Exhausted).reason(), None);
    /// ```
    pub const fn reason(&self) -> Option<Reason> {
        match self {
            Refusal::Deferred { .. } => Some(Reason::ByteWindow),
            Refusal::Avoided { .. } => Some(Reason::PathQuarantined),
            Refusal::NoUsablePath => Some(Reason::NoUsablePath),
            Refusal::Backpressure(_) => Some(Reason::ReceiverPressure),
            Refusal::Endpoint {
                error: EndpointError::Retired | EndpointError::StaleGeneration,
                ..
            } => Some(Reason::GenerationChanged),
            _ => None,
        }
    }

    /// The typed backpressure (RFC 2849 `BackpressureInfo`) this refusal
    /// is, for a post to `peer` in QoS class `class`; `None` for a refusal
    /// that is not backpressure. One source per thing that pushed back:
    /// receiver credit is the refusal's own info (`RECEIVER_CREDIT`, the
    /// exhausted resources); a CC deferral (`BYTE_WINDOW`), an avoided
    /// quarantined path and a full QP or saturated endpoint are
    /// `TRANSPORT`; no free token is `LOCAL_QUEUE` (the sender's own
    /// dispatch window). Outside credit the retry hint is 0 (retry on the
    /// next release) and only a congested or quarantined path allows a
    /// fallback (another path or node may not be congested).
    ///
    /// ```
    /// use railyard_core::completion::{Path, Refusal};
    /// use railyard_core::credit::PressureSource;
    /// use railyard_core::endpoint::EndpointError;
    /// use railyard_core::token::TokenError;
    ///
    /// let b = Refusal::Token(TokenError::Exhausted).backpressure_info(3, 0).unwrap();
    /// assert_eq!((b.source, b.peer, b.fallback_allowed), (PressureSource::LocalQueue, 3, false));
    /// let full = Refusal::Endpoint { path: Path::default(), error: EndpointError::QpFull };
    /// assert_eq!(full.backpressure_info(3, 0).unwrap().source, PressureSource::Transport);
    /// assert!(Refusal::NoUsablePath.backpressure_info(3, 0).is_none()); // not backpressure
    /// ```
    pub const fn backpressure_info(&self, peer: u32, class: u32) -> Option<BackpressureInfo> {
        use crate::credit::PressureSource as S;
        let (source, fallback) = match self {
            Refusal::Backpressure(b) => return Some(*b),
            Refusal::Deferred { .. } | Refusal::Avoided { .. } => (S::Transport, true),
            Refusal::Endpoint {
                error: EndpointError::QpFull | EndpointError::Saturated,
                ..
            } => (S::Transport, false),
            Refusal::Token(TokenError::Exhausted) => (S::LocalQueue, false),
            _ => return None,
        };
        Some(BackpressureInfo::other(source, peer, class, 0, fallback))
    }

    /// Whether this is backpressure (try again later, unchanged): a full
    /// window, a full QP, credit, or no token.
    ///
    /// ```
    /// use railyard_core::completion::{Path, Refusal};
    /// use railyard_core::endpoint::EndpointError;
    /// use railyard_core::token::TokenError;
    ///
    /// assert!(Refusal::Token(TokenError::Exhausted).is_backpressure());
    /// let full = Refusal::Endpoint { path: Path::default(), error: EndpointError::QpFull };
    /// assert!(full.is_backpressure()); // try again later
    /// let gone = Refusal::Endpoint { path: Path::default(), error: EndpointError::Retired };
    /// assert!(!gone.is_backpressure()); // pick another path
    /// ```
    pub const fn is_backpressure(&self) -> bool {
        matches!(
            self,
            Refusal::Deferred { .. }
                | Refusal::Backpressure(_)
                | Refusal::Token(TokenError::Exhausted)
                | Refusal::Endpoint {
                    error: EndpointError::QpFull | EndpointError::Saturated,
                    ..
                }
        )
    }

    /// The path the refusal concerns, if one was resolved.
    ///
    /// ```
    /// use railyard_core::completion::{Path, Refusal};
    /// use railyard_core::endpoint::EndpointError;
    ///
    /// let p = Path { device: 1, route: 2, ..Path::default() };
    /// assert_eq!(Refusal::Endpoint { path: p, error: EndpointError::Retired }.path(), Some(p));
    /// assert_eq!(Refusal::NoUsablePath.path(), None);
    /// ```
    pub const fn path(&self) -> Option<Path> {
        match self {
            Refusal::Endpoint { path, .. }
            | Refusal::Deferred { path, .. }
            | Refusal::Avoided { path, .. } => Some(*path),
            _ => None,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Slice(e) => write!(f, "post refused by slice: {e}"),
            Refusal::NoUsablePath => f.write_str("post refused: no usable path"),
            Refusal::Endpoint { path, error } => write!(
                f,
                "post refused by endpoint {}:{} (device {}): {error}",
                path.endpoint.slot, path.endpoint.generation, path.device
            ),
            Refusal::Deferred { path, deferral } => write!(
                f,
                "post deferred by {:?} window on device {} route {} (window {}, in flight {})",
                deferral.domain, path.device, path.route, deferral.window, deferral.in_flight
            ),
            Refusal::Avoided { path, avoidance } => write!(
                f,
                "post avoided: {:?} domain of device {} route {} is quarantined",
                avoidance.domain, path.device, path.route
            ),
            Refusal::Backpressure(b) => write!(f, "post refused: {b}"),
            Refusal::Token(e) => write!(f, "post refused by token pool: {e}"),
            Refusal::Invalid(e) => write!(f, "invalid post: {e:?}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Refusal {}

/// What a completion did to its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SliceEffect {
    /// The current attempt settled the slice in this terminal state.
    Settled(SliceState),
    /// The completion belonged to a stale attempt (or the slice was already
    /// terminal): it released its own resources and changed nothing else.
    StaleReleaseOnly,
    /// The current attempt failed and a new attempt was started: re-enqueue
    /// the slice with this reference.
    Retry(SliceRef),
}

/// Holds whose release was refused by their layer (a forged or corrupted
/// record; in a correct integration always empty). The hold bit is cleared
/// either way, so nothing is retried or released twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Faults(u8);

impl Faults {
    /// The credit ledger refused the release.
    pub const CREDIT: u8 = 1 << 0;
    /// The controller refused the release (underflow, bad index).
    pub const CC: u8 = 1 << 1;
    /// The rail selector refused the release.
    pub const RAIL: u8 = 1 << 2;

    /// The raw bits.
    ///
    /// ```
    /// use railyard_core::completion::Faults;
    /// assert_eq!(Faults::default().bits(), 0); // a correct integration
    /// assert_ne!(Faults::CREDIT & Faults::CC, Faults::CC);
    /// ```
    #[inline]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// How many layers refused.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::SliceTable;
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), eps.open(()).unwrap(), 0, 64, 0)).unwrap();
    /// let done = owner.complete(p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert_eq!(done.faults().count(), 0);
    /// ```
    #[inline]
    pub const fn count(self) -> u32 {
        self.0.count_ones()
    }
}

/// What giving back one record's holds did: one flag byte and the
/// endpoint release (kept small: the completion path returns it by value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    /// The endpoint release: `Ok(true)` when it drained a retired endpoint
    /// (run reclaim), `Ok(false)` otherwise or when no admission was held,
    /// `Err(StaleGeneration)` when the endpoint had been abandoned and
    /// reclaimed.
    pub endpoint: Result<bool, EndpointError>,
    flags: u8,
}

impl Released {
    const CC_HELD: u8 = 1 << 3;
    const CC_STALE: u8 = 1 << 4;
    const CREDIT_HELD: u8 = 1 << 5;
    const CREDIT_FENCED: u8 = 1 << 6;
    const FAULTS: u8 = Faults::CREDIT | Faults::CC | Faults::RAIL;

    /// The CC permit's settlement (`None`: no permit was held, or its
    /// release was refused — see [`faults`](Self::faults)).
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode, Settlement};
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::SliceTable;
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let cfg = CcConfig { mode: Mode::Enforce, ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps).with_layers(Layers { credit: (), rail: (), cc: &cc });
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), eps.open(()).unwrap(), 0, 4096, 0)).unwrap();
    /// let done = owner.complete(p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// // No snapshot, and no permit, when the controller is compiled out.
    /// if Controller::compiled_in() {
    ///     assert_eq!(done.released.cc(), Some(Settlement::Current));
    /// }
    /// ```
    #[inline]
    pub const fn cc(&self) -> Option<Settlement> {
        if self.flags & Self::CC_HELD == 0 || self.flags & Faults::CC != 0 {
            None
        } else if self.flags & Self::CC_STALE != 0 {
            Some(Settlement::Stale)
        } else {
            Some(Settlement::Current)
        }
    }

    /// The credit release (`None`: no credit was held, or the ledger refused
    /// the release — see [`faults`](Self::faults)).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::SliceTable;
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps); // credit off
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), eps.open(()).unwrap(), 0, 64, 0)).unwrap();
    /// let done = owner.complete(p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert_eq!(done.released.credit(), None); // nothing was held
    /// ```
    #[inline]
    pub const fn credit(&self) -> Option<ReleaseOutcome> {
        if self.flags & Self::CREDIT_HELD == 0 || self.flags & Faults::CREDIT != 0 {
            None
        } else if self.flags & Self::CREDIT_FENCED != 0 {
            Some(ReleaseOutcome::Fenced)
        } else {
            Some(ReleaseOutcome::Released)
        }
    }

    /// Layers that refused their release (always empty in a correct
    /// integration).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::SliceTable;
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), eps.open(()).unwrap(), 0, 64, 0)).unwrap();
    /// let (_, released) = owner.unposted(p.wr_id, 1).unwrap();
    /// assert_eq!(released.faults(), Faults::default());
    /// assert_eq!(released.endpoint, Ok(false));
    /// ```
    #[inline]
    pub const fn faults(&self) -> Faults {
        Faults(self.flags & Self::FAULTS)
    }
}

/// The result of processing one completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The record the token owned, as it was posted: `holds` names what
    /// it held (all released by now).
    pub record: TokenRecord,
    /// The WC's classification (computed once, here).
    pub wc: WcClassification,
    /// What happened to the slice.
    pub slice: SliceEffect,
    /// What the release of the record's holds did.
    pub released: Released,
}

impl Completed {
    /// The path the attempt was posted on.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::SliceTable;
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let path = Path { device: 0, qp: 1, route: 0, endpoint: eps.open(()).unwrap() };
    /// let p = owner.post(PostRequest::on(slices.open(0).unwrap(), path, 64, 0)).unwrap();
    /// let done = owner.complete(p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert_eq!(done.path(), path); // from the token's record
    /// ```
    #[inline]
    pub const fn path(&self) -> Path {
        Path {
            device: self.record.device,
            qp: self.record.qp,
            route: self.record.route,
            endpoint: self.record.endpoint,
        }
    }

    /// Layers that refused their release (always empty in a correct integration).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::SliceTable;
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), eps.open(()).unwrap(), 0, 64, 0)).unwrap();
    /// let done = owner.complete(p.wr_id, wc::REM_ACCESS_ERR, 0, 1).unwrap();
    /// assert_eq!(done.faults().count(), 0); // an error WC still releases cleanly
    /// ```
    #[inline]
    pub const fn faults(&self) -> Faults {
        self.released.faults()
    }
}

/// Why `r` is not its slice's current attempt (a refused post). Cold, and
/// it borrows only the slice table, never the whole [`HotPath`].
#[cold]
fn why_not_current(slices: &SliceTable, r: SliceRef) -> SliceError {
    match slices.status(r.index) {
        Err(e) => e,
        Ok(s) if s.attempt != r.attempt => SliceError::StaleAttempt,
        Ok(_) => SliceError::AlreadyTerminal,
    }
}

/// Marks the path that calls it as unlikely (a branch weight for the
/// optimiser; the call itself costs nothing on the likely path).
#[cold]
#[inline(never)]
fn cold_path() {}

/// A record that never counted a post on its endpoint (not one this
/// composition posted): nothing to release. Out of line: every posted
/// record holds its endpoint admission.
#[cold]
#[inline(never)]
fn not_outstanding() -> Result<bool, EndpointError> {
    Ok(false)
}

/// [`Refusal::Endpoint`], built out of line (nothing is held yet).
#[cold]
#[inline(never)]
fn endpoint_refusal(
    device: u16,
    qp: u16,
    route: u32,
    endpoint: EndpointHandle,
    error: EndpointError,
) -> Refusal {
    let path = Path {
        device,
        qp,
        route,
        endpoint,
    };
    Refusal::Endpoint { path, error }
}

/// The [`Refusal`] for a CC refusal on a path, built out of line.
#[cold]
#[inline(never)]
fn cc_refusal(device: u16, qp: u16, route: u32, endpoint: EndpointHandle, c: CcRefusal) -> Refusal {
    let path = Path {
        device,
        qp,
        route,
        endpoint,
    };
    match c {
        CcRefusal::Deferred(deferral) => Refusal::Deferred { path, deferral },
        CcRefusal::Avoided(avoidance) => Refusal::Avoided { path, avoidance },
        CcRefusal::Invalid(e) => Refusal::Invalid(InvalidPost::Cc(e)),
    }
}

/// The [`Refusal`] for a credit refusal, built out of line.
#[cold]
#[inline(never)]
fn credit_refusal(c: CreditRefusal) -> Refusal {
    match c {
        CreditRefusal::Backpressure(b) => Refusal::Backpressure(b),
        CreditRefusal::Invalid(k) => Refusal::Invalid(InvalidPost::Credit(k)),
        CreditRefusal::Unrecordable(e) => Refusal::Invalid(InvalidPost::CreditRecord(e)),
    }
}

/// The three policy layers in their fixed order of admission (credit is
/// the last gate before the token, rail the first; see the module docs).
/// `()` switches a layer off; `Option<L>` chooses at run time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layers<Cr = (), Ra = (), Cc = ()> {
    /// Receiver credit (RFC 2849).
    pub credit: Cr,
    /// Rail selection (RFC 4534).
    pub rail: Ra,
    /// Congestion control (RFC 4162).
    pub cc: Cc,
}

mod sealed {
    pub trait Sealed {}
}

/// Where [`HotPath::post_via`] claims a token and [`HotPath::complete_via`] /
/// [`HotPath::unposted_via`] return it: the owner's pool directly (`()`), a
/// thread's [`TokenCache`] over that pool (or a [`TokenCacheOver`] any
/// pointer to it), or `Option` of one (`None`: the pool). Sealed; static
/// dispatch.
///
/// A token claimed through one source may be completed through any other
/// (the dedicated-poller model: posters claim from their caches, the
/// poller's completions refill its own): the `wr_id`, the exactly-once
/// completion and every typed error are the pool's own. A cache over a
/// *different* pool than the owner's is never used (the owner's pool is,
/// as with `()`), so a mixed-up cache cannot leak or misroute a token.
pub trait TokenSource: sealed::Sealed {
    /// Claims a token of `pool` for `record` (through this source).
    ///
    /// ```
    /// use railyard_core::completion::TokenSource;
    /// use railyard_core::token::{TokenPool, TokenRecord};
    /// let pool: TokenPool = TokenPool::new(8).unwrap();
    /// let other: TokenPool = TokenPool::new(8).unwrap();
    /// let mut cache = other.cache::<4>(); // a cache of another pool ...
    /// let w = TokenSource::claim(&mut cache, &pool, TokenRecord::default()).unwrap();
    /// assert_eq!((pool.in_use(), cache.cached()), (1, 0)); // ... is never used for this one
    /// assert!(TokenSource::complete(&mut (), &pool, w).is_ok());
    /// ```
    fn claim(&mut self, pool: &TokenPool, record: TokenRecord) -> Result<WrId, TokenError>;
    /// Completes `wr_id` of `pool` (through this source).
    ///
    /// ```
    /// use railyard_core::completion::TokenSource;
    /// use railyard_core::token::{TokenError, TokenPool, TokenRecord};
    /// let pool: TokenPool = TokenPool::new(8).unwrap();
    /// let w = TokenSource::claim(&mut (), &pool, TokenRecord { bytes: 9, ..TokenRecord::default() }).unwrap();
    /// let mut poller = Some(pool.cache::<4>());
    /// assert_eq!(TokenSource::complete(&mut poller, &pool, w).unwrap().bytes, 9);
    /// assert_eq!(TokenSource::complete(&mut poller, &pool, w), Err(TokenError::Duplicate));
    /// ```
    fn complete(&mut self, pool: &TokenPool, wr_id: WrId) -> Result<TokenRecord, TokenError>;
    /// Completes `wr_id` of `pool` (through this source), lending its
    /// record to `f` in its slot ([`TokenPool::complete_with`]).
    fn complete_with<T>(
        &mut self,
        pool: &TokenPool,
        wr_id: WrId,
        f: impl FnOnce(&mut TokenRecord) -> T,
    ) -> Result<T, TokenError>;
}

impl sealed::Sealed for () {}
impl TokenSource for () {
    #[inline(always)]
    fn claim(&mut self, pool: &TokenPool, record: TokenRecord) -> Result<WrId, TokenError> {
        pool.claim(record)
    }
    #[inline(always)]
    fn complete(&mut self, pool: &TokenPool, wr_id: WrId) -> Result<TokenRecord, TokenError> {
        pool.complete(wr_id)
    }
    #[inline(always)]
    fn complete_with<T>(
        &mut self,
        pool: &TokenPool,
        wr_id: WrId,
        f: impl FnOnce(&mut TokenRecord) -> T,
    ) -> Result<T, TokenError> {
        pool.complete_with(wr_id, f)
    }
}

impl<P: core::ops::Deref<Target = TokenPool>, const N: usize> sealed::Sealed
    for TokenCacheOver<P, TokenRecord, N>
{
}
impl<P: core::ops::Deref<Target = TokenPool>, const N: usize> TokenSource
    for TokenCacheOver<P, TokenRecord, N>
{
    #[inline(always)]
    fn claim(&mut self, pool: &TokenPool, record: TokenRecord) -> Result<WrId, TokenError> {
        if core::ptr::eq(self.pool(), pool) {
            TokenCacheOver::claim(self, record)
        } else {
            pool.claim(record)
        }
    }
    #[inline(always)]
    fn complete(&mut self, pool: &TokenPool, wr_id: WrId) -> Result<TokenRecord, TokenError> {
        if core::ptr::eq(self.pool(), pool) {
            TokenCacheOver::complete(self, wr_id)
        } else {
            pool.complete(wr_id)
        }
    }
    #[inline(always)]
    fn complete_with<T>(
        &mut self,
        pool: &TokenPool,
        wr_id: WrId,
        f: impl FnOnce(&mut TokenRecord) -> T,
    ) -> Result<T, TokenError> {
        if core::ptr::eq(self.pool(), pool) {
            TokenCacheOver::complete_with(self, wr_id, f)
        } else {
            pool.complete_with(wr_id, f)
        }
    }
}

impl<T: TokenSource> sealed::Sealed for Option<T> {}
impl<T: TokenSource> TokenSource for Option<T> {
    #[inline(always)]
    fn claim(&mut self, pool: &TokenPool, record: TokenRecord) -> Result<WrId, TokenError> {
        match self {
            Some(t) => t.claim(pool, record),
            None => pool.claim(record),
        }
    }
    #[inline(always)]
    fn complete(&mut self, pool: &TokenPool, wr_id: WrId) -> Result<TokenRecord, TokenError> {
        match self {
            Some(t) => t.complete(pool, wr_id),
            None => pool.complete(wr_id),
        }
    }
    #[inline(always)]
    fn complete_with<U>(
        &mut self,
        pool: &TokenPool,
        wr_id: WrId,
        f: impl FnOnce(&mut TokenRecord) -> U,
    ) -> Result<U, TokenError> {
        match self {
            Some(t) => t.complete_with(pool, wr_id, f),
            None => pool.complete_with(wr_id, f),
        }
    }
}

/// The composed hot path: borrowed handles on the ownership tables and the
/// policy layers. Cheap to copy; share one per worker.
///
/// Each thread may claim and return tokens through its own [`TokenCache`]
/// ([`token_cache`](Self::token_cache), then the `*_via` methods):
/// the same admission, release and errors, but a claim and a completion
/// touch no shared cache line until the cache runs dry or full.
pub struct HotPath<'a, R: Send + Sync + 'static = (), L = Layers> {
    tokens: &'a TokenPool,
    slices: &'a SliceTable,
    endpoints: &'a EndpointTable<R>,
    max_retries: u16,
    layers: L,
}

impl<R: Send + Sync + 'static, L: Copy> Clone for HotPath<'_, R, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Send + Sync + 'static, L: Copy> Copy for HotPath<'_, R, L> {}

impl<R: Send + Sync + 'static, L> fmt::Debug for HotPath<'_, R, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HotPath")
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// Default retry budget per slice.
pub const DEFAULT_MAX_RETRIES: u16 = 8;

impl<'a, R: Send + Sync + 'static> HotPath<'a, R> {
    /// Composes the three ownership tables with every policy layer off, and
    /// [`DEFAULT_MAX_RETRIES`].
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps); // every policy layer off
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 4096, 0)).unwrap();
    /// assert_eq!(owner.tokens().in_use(), 1);
    /// owner.complete(p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert_eq!((tokens.in_use(), eps.outstanding_total()), (0, 0));
    /// ```
    pub fn new(
        tokens: &'a TokenPool,
        slices: &'a SliceTable,
        endpoints: &'a EndpointTable<R>,
    ) -> Self {
        Self {
            tokens,
            slices,
            endpoints,
            max_retries: DEFAULT_MAX_RETRIES,
            layers: Layers::default(),
        }
    }
}

impl<'a, R: Send + Sync + 'static, L> HotPath<'a, R, L> {
    /// The same tables with `layers` as the policy layers.
    ///
    /// ```
    /// use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let rails = Selector::new(&[DeviceSpec::new(100_000_000_000); 2], RailConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps)
    ///     .with_layers(Layers { credit: (), rail: &rails, cc: () }); // rail on, CC and credit off
    /// let paths = [0u16, 1].map(|d| Path { device: d, qp: 0, route: u32::from(d), endpoint: eps.open(()).unwrap() });
    /// let p = owner.post(PostRequest::pick(slices.open(0).unwrap(), &paths, 65536, 0)).unwrap();
    /// assert_eq!(rails.nic_inflight(usize::from(p.path.device)), Some(65536)); // charged
    /// owner.complete(p.wr_id, wc::SUCCESS, 0, 1_000).unwrap();
    /// assert_eq!(rails.nic_inflight(usize::from(p.path.device)), Some(0));
    /// ```
    pub fn with_layers<M>(self, layers: M) -> HotPath<'a, R, M> {
        HotPath {
            tokens: self.tokens,
            slices: self.slices,
            endpoints: self.endpoints,
            max_retries: self.max_retries,
            layers,
        }
    }

    /// Sets the retry budget per slice.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps).with_max_retries(0);
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 0)).unwrap();
    /// // A retryable error (a flush) with no retry left fails the slice.
    /// let done = owner.complete(p.wr_id, wc::WR_FLUSH_ERR, 0, 1).unwrap();
    /// assert_eq!(done.slice, SliceEffect::Settled(SliceState::Failed));
    /// ```
    pub fn with_max_retries(mut self, max_retries: u16) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// The policy layers.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let layers: &Layers = owner.layers();
    /// assert_eq!(*layers, Layers::default()); // all `()`: off
    /// ```
    pub fn layers(&self) -> &L {
        &self.layers
    }

    /// A per-thread cache of free tokens over this owner's pool, for
    /// [`post_via`](HotPath::post_via) / [`complete_via`](HotPath::complete_via)
    /// (see [`TokenCache`] for its bounds: at most `N` free tokens hidden
    /// per cache, returned when any claim starves, when the thread idles
    /// ([`TokenCache::idle`]) and when dropped). Allocates nothing.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let mut cache = owner.token_cache::<4>(); // one per worker thread
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post_via(&mut cache, PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 0)).unwrap();
    /// owner.complete_via(&mut cache, p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert!(cache.cached() > 0); // free tokens wait in the cache
    /// drop(cache);
    /// assert_eq!(tokens.free_in_pool(), tokens.capacity());
    /// ```
    pub fn token_cache<const N: usize>(&self) -> TokenCache<'a, TokenRecord, N> {
        TokenCache::new(self.tokens)
    }

    /// The token pool (diagnostics: [`TokenPool::in_use`] counts live
    /// attempts only, never a cache's free tokens).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// assert!(core::ptr::eq(owner.tokens(), &tokens));
    /// ```
    pub fn tokens(&self) -> &'a TokenPool {
        self.tokens
    }
}

impl<'a, R, Cr, Ra, Cc> HotPath<'a, R, Layers<Cr, Ra, Cc>>
where
    R: Send + Sync + 'static,
    Cr: CreditLayer,
    Ra: RailLayer,
    Cc: CcLayer,
{
    /// Admits and tokenizes one post, in the fixed order of the module docs:
    /// slice attempt → rail choice → endpoint → rail charge → CC → credit →
    /// token. On any refusal everything taken is given back and the typed
    /// [`Refusal`] names the source. Returns the `wr_id` to post with and
    /// the record of what it holds.
    ///
    /// Always inlined: an integrator calls it from one place (its post
    /// loop), and the layer types are known there.
    ///
    /// ```
    /// use railyard_core::cc::{CcConfig, Controller, Mode};
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// // Enforce with a window of one 64 KiB slice.
    /// let cfg = CcConfig { mode: Mode::Enforce, min_window_bytes: 65536,
    ///     initial_window_bytes: Some(65536), ..CcConfig::default() };
    /// let (cc, _monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps).with_layers(Layers { credit: (), rail: (), cc: &cc });
    /// let ep = eps.open(()).unwrap();
    /// let posted = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 65536, 0)).unwrap();
    /// // ibv_post_send with wr.wr_id = posted.wr_id
    /// let second = owner.post(PostRequest::new(slices.open(1).unwrap(), ep, 0, 65536, 0));
    /// if Controller::compiled_in() {
    ///     // The window is full: BYTE_WINDOW, the slice stays queued, nothing is held.
    ///     let refusal = second.unwrap_err();
    ///     assert!(matches!(refusal, Refusal::Deferred { .. }) && refusal.is_backpressure());
    ///     assert_eq!((tokens.in_use(), eps.outstanding_total()), (1, 1));
    /// }
    /// # let _ = posted;
    /// ```
    #[inline(always)]
    pub fn post(&self, req: PostRequest<'_>) -> Result<Posted, Refusal> {
        self.post_via(&mut (), req)
    }

    /// [`post`](Self::post), claiming the token through `tokens` (this
    /// thread's [`TokenCache`], or `()` / `None` for the pool): the same
    /// order, refusals and `wr_id`. A [`Refusal::Token`] of
    /// [`TokenError::Exhausted`] means the cache, the pool's shared lists
    /// were empty; it also asked every other cache to return its free
    /// tokens (at its next call or idle round), so retry after the next
    /// release.
    ///
    /// ```
    /// use railyard_core::classify::wc;
    /// use railyard_core::completion::{HotPath, PostRequest};
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// use railyard_core::slice::SliceTable;
    /// use railyard_core::token::TokenPool;
    ///
    /// let tokens: TokenPool = TokenPool::new(64).unwrap();
    /// let slices = SliceTable::new(8).unwrap();
    /// let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let ep = eps.open(()).unwrap();
    /// // One cache per thread: the poster's and the poller's.
    /// let mut poster = owner.token_cache::<16>();
    /// let mut poller = owner.token_cache::<16>();
    /// let s = slices.open(0).unwrap();
    /// let p = owner.post_via(&mut poster, PostRequest::new(s, ep, 0, 4096, 0)).unwrap();
    /// // ibv_post_send; the poller thread polls the completion:
    /// let done = owner.complete_via(&mut poller, p.wr_id, wc::SUCCESS, 0, 10).unwrap();
    /// assert_eq!(done.record.bytes, 4096);
    /// assert_eq!(tokens.in_use(), 0, "a cached free token is not in use");
    /// assert_eq!(poller.cached(), 1);
    /// drop((poster, poller)); // every cached token goes back to the pool
    /// ```
    #[inline(always)]
    pub fn post_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        req: PostRequest<'_>,
    ) -> Result<Posted, Refusal> {
        if req.bytes == 0 {
            return Err(Refusal::Invalid(InvalidPost::ZeroBytes));
        }
        if !self.slices.is_current(req.slice) {
            return Err(Refusal::Slice(why_not_current(self.slices, req.slice)));
        }
        match req.path {
            PathChoice::Fixed(path) => self.post_on(tokens, &req, path, None, 0),
            PathChoice::Pick(paths) => self.post_pick(tokens, &req, paths),
        }
    }

    /// The [`PathChoice::Pick`] loop: choose among the usable candidates,
    /// drop the ones that avoid or whose endpoint refuses, choose again.
    fn post_pick<T: TokenSource>(
        &self,
        tokens: &mut T,
        req: &PostRequest<'_>,
        paths: &[Path],
    ) -> Result<Posted, Refusal> {
        if paths.is_empty() {
            return Err(Refusal::Invalid(InvalidPost::NoCandidates));
        }
        let mut mask = 0u64;
        let mut usable = 0u64;
        for p in paths {
            let bit = match 1u64.checked_shl(u32::from(p.device)) {
                Some(b) if p.device < 64 && mask & b == 0 => b,
                _ => return Err(Refusal::Invalid(InvalidPost::BadCandidate(p.device))),
            };
            mask |= bit;
            if self.layers.cc.usable(p.device, p.route) {
                usable |= bit;
            }
        }
        if usable == 0 {
            // Every candidate is quarantined: PATH_QUARANTINED on the first.
            return Err(Refusal::Avoided {
                path: paths[0],
                avoidance: Avoidance::quarantined(DomainKind::Route),
            });
        }
        let mut skipped = 0u8;
        let mut last = Refusal::NoUsablePath;
        while usable != 0 {
            let choice = self
                .layers
                .rail
                .choose(req.peer, req.bytes, req.now, usable)
                .map_err(|e| Refusal::Invalid(InvalidPost::Rail(e)))?;
            let bit = 1u64 << (choice.device & 63);
            let Some(path) = paths.iter().find(|p| p.device == choice.device) else {
                // A rail layer chose outside the mask: refuse, never guess.
                return Err(Refusal::Invalid(InvalidPost::BadCandidate(choice.device)));
            };
            match self.post_on(tokens, req, *path, Some(choice), skipped) {
                Ok(p) => {
                    self.layers.rail.chosen(&choice);
                    return Ok(p);
                }
                Err(r @ (Refusal::Avoided { .. } | Refusal::Endpoint { .. })) => {
                    usable &= !bit;
                    skipped = skipped.saturating_add(1);
                    last = r;
                }
                Err(r) => return Err(r),
            }
        }
        Err(last)
    }

    /// Steps 3–7 on one resolved path.
    #[inline(always)]
    fn post_on<T: TokenSource>(
        &self,
        tokens: &mut T,
        req: &PostRequest<'_>,
        path: Path,
        rail: Option<RailChoice>,
        skipped: u8,
    ) -> Result<Posted, Refusal> {
        let now = req.now;
        let mut rec = TokenRecord {
            slice: req.slice,
            endpoint: path.endpoint,
            post_ns: now,
            bytes: req.bytes,
            route: path.route,
            peer: OptId::new(req.peer),
            qp: path.qp,
            device: path.device,
            ..TokenRecord::default()
        };
        // (3) endpoint admission, counted before any policy hold.
        if let Err(error) = self.endpoints.admit_post(path.endpoint, path.qp) {
            return Err(endpoint_refusal(
                path.device,
                path.qp,
                path.route,
                path.endpoint,
                error,
            ));
        }
        rec.holds |= TokenRecord::HOLDS_OUTSTANDING;
        // (4) rail charge.
        if let Err(e) = self.layers.rail.charge(&mut rec, now) {
            return Err(self.refused(rec, Refusal::Invalid(InvalidPost::Rail(e)), now));
        }
        // (5) CC permit.
        if let Err(c) = self.layers.cc.acquire(&mut rec, now) {
            let why = cc_refusal(path.device, path.qp, path.route, path.endpoint, c);
            return Err(self.refused(rec, why, now));
        }
        // (6) receiver credit, the last gate before handoff: reserved and
        // named in the record now, committed once the token is claimed;
        // (7) the token publishes the record of everything held. Work that
        // consumes no credit goes straight to the token.
        let wr_id = match req.credit {
            None => match tokens.claim(self.tokens, rec) {
                Ok(w) => w,
                Err(e) => return Err(self.refused(rec, Refusal::Token(e), now)),
            },
            Some(demand) => {
                // (A copy: the request itself never has its address taken.)
                let reserved = match self.layers.credit.reserve(&demand, &mut rec) {
                    Ok(r) => r,
                    Err(c) => return Err(self.refused(rec, credit_refusal(c), now)),
                };
                let wr_id = match tokens.claim(self.tokens, rec) {
                    Ok(w) => w,
                    Err(e) => {
                        // Dropping the reservation rolls it back: the
                        // receiver never sees it.
                        drop(reserved);
                        rec.holds &= !TokenRecord::HOLDS_CREDIT;
                        return Err(self.refused(rec, Refusal::Token(e), now));
                    }
                };
                if let Err(c) = self.layers.credit.commit(reserved) {
                    return Err(self.uncommitted(tokens, wr_id, c, now));
                }
                wr_id
            }
        };
        Ok(Posted {
            wr_id,
            path,
            holds: rec.holds,
            skipped,
            rail,
        })
    }

    /// The receiver's epoch changed between reserve and commit: takes the
    /// token back (its wr_id was never handed out) and gives back the rest
    /// of what its record holds; the reservation is gone with the old
    /// epoch. (Were the token already completed, its completer released
    /// the record: nothing is given back twice.)
    #[inline(always)]
    fn uncommitted<T: TokenSource>(
        &self,
        tokens: &mut T,
        wr_id: WrId,
        c: CreditRefusal,
        now: Nanos,
    ) -> Refusal {
        cold_path();
        match tokens.complete(self.tokens, wr_id) {
            Ok(mut rec) => {
                rec.holds &= !TokenRecord::HOLDS_CREDIT;
                self.refused(rec, credit_refusal(c), now)
            }
            Err(_) => credit_refusal(c),
        }
    }

    /// A refusal after partial admission: gives back everything `rec`
    /// holds (without feedback) and returns `why`. Marked unlikely, so the
    /// admitted path is laid out (and allocated) without the rollback.
    #[inline(always)]
    fn refused(&self, mut rec: TokenRecord, why: Refusal, now: Nanos) -> Refusal {
        cold_path();
        let _ = self.release(&mut rec, None, now);
        why
    }

    /// Releases work that was tokenized but never reached the NIC (the
    /// `bad_wr` tail of a partially posted chain): the token and every hold
    /// it names, without feedback; the slice is untouched and its attempt
    /// stays current, to be re-queued. Returns the record as posted.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let ep = eps.open(()).unwrap();
    /// let s = slices.open(0).unwrap();
    /// let p = owner.post(PostRequest::new(s, ep, 0, 4096, 0)).unwrap();
    /// // ibv_post_send returned this request as bad_wr: it never reached the NIC.
    /// let (record, _released) = owner.unposted(p.wr_id, 1).unwrap();
    /// assert_eq!(record.bytes, 4096);
    /// assert!(slices.is_current(s)); // the attempt stays current: re-queue it
    /// assert_eq!((tokens.in_use(), eps.outstanding_total()), (0, 0));
    /// ```
    pub fn unposted(&self, wr_id: WrId, now: Nanos) -> Result<(TokenRecord, Released), TokenError> {
        self.unposted_via(&mut (), wr_id, now)
    }

    /// [`unposted`](Self::unposted), returning the token through `tokens`.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let mut cache = owner.token_cache::<4>();
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post_via(&mut cache, PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 0)).unwrap();
    /// owner.unposted_via(&mut cache, p.wr_id, 1).unwrap();
    /// assert_eq!(tokens.in_use(), 0);
    /// ```
    pub fn unposted_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        wr_id: WrId,
        now: Nanos,
    ) -> Result<(TokenRecord, Released), TokenError> {
        let record = tokens.complete(self.tokens, wr_id)?;
        let mut rec = record;
        let released = self.release(&mut rec, None, now);
        Ok((record, released))
    }

    /// Processes one polled completion: hands the token's record back
    /// exactly once, classifies the WC once, releases every hold in reverse
    /// admission order (the endpoint last), then mutates the slice only if
    /// the attempt is current.
    ///
    /// A duplicate, stale, forged or out-of-range `wr_id` gets the token
    /// pool's typed error and changes nothing.
    ///
    /// Always inlined, like [`post`](Self::post).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps).with_max_retries(1);
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 4096, 0)).unwrap();
    /// // A retryable error: the slice gets a new attempt to re-enqueue.
    /// let done = owner.complete(p.wr_id, wc::RETRY_EXC_ERR, 0, 10).unwrap();
    /// let SliceEffect::Retry(next) = done.slice else { panic!("{:?}", done.slice) };
    /// // A duplicate of the same completion changes nothing.
    /// assert!(owner.complete(p.wr_id, wc::SUCCESS, 0, 11).is_err());
    /// let p2 = owner.post(PostRequest::new(next, ep, 0, 4096, 20)).unwrap();
    /// let done = owner.complete(p2.wr_id, wc::SUCCESS, 0, 30).unwrap();
    /// assert_eq!(done.slice, SliceEffect::Settled(SliceState::Succeeded));
    /// ```
    #[inline(always)]
    pub fn complete(
        &self,
        wr_id: WrId,
        status: u32,
        vendor_err: u32,
        now: Nanos,
    ) -> Result<Completed, TokenError> {
        self.complete_via(&mut (), wr_id, status, vendor_err, now)
    }

    /// [`complete`](Self::complete), returning the token through `tokens`
    /// (this thread's [`TokenCache`], whichever thread claimed it; `()` /
    /// `None` for the pool): the same exactly-once record, release order,
    /// slice rules and typed errors.
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let mut poster = owner.token_cache::<4>();
    /// let mut poller = owner.token_cache::<4>();
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post_via(&mut poster, PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 0)).unwrap();
    /// let done = owner.complete_via(&mut poller, p.wr_id, wc::SUCCESS, 0, 1).unwrap();
    /// assert_eq!(done.slice, SliceEffect::Settled(SliceState::Succeeded));
    /// assert!(owner.complete_via(&mut poller, p.wr_id, wc::SUCCESS, 0, 2).is_err()); // exactly once
    /// ```
    #[inline(always)]
    pub fn complete_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        wr_id: WrId,
        status: u32,
        vendor_err: u32,
        now: Nanos,
    ) -> Result<Completed, TokenError> {
        // The record is copied out of its slot once, straight into the
        // record the layers release from (`complete` would copy it twice).
        let mut taken = tokens.complete_with(
            self.tokens,
            wr_id,
            #[inline(always)]
            |slot| *slot,
        );
        let record = match &mut taken {
            Ok(record) => record,
            Err(e) => return Err(*e),
        };
        // The common case, specialised: the same classification, but a
        // constant one, so the success path folds the classification, the
        // outcome and the rail's success flag away (same behaviour).
        Ok(if status == crate::classify::wc::SUCCESS {
            self.finish(
                record,
                classify_wc(crate::classify::wc::SUCCESS, vendor_err),
                now,
            )
        } else {
            cold_path();
            self.finish(record, classify_wc(status, vendor_err), now)
        })
    }

    /// Processes a request that a CQE for a *later* request on the same QP
    /// covers (selective signaling: the request was posted unsignaled, or
    /// its own CQE never came; see [`PostOrder`] for the rule):
    /// `covering_status` is the status of that CQE. A success proves this
    /// request succeeded (RC completes a QP's send queue in order); after
    /// any error it completes as `WR_FLUSH_ERR` — a derived flush,
    /// retryable and never a root failure — because a silently flushed
    /// request must not read as moved data. Otherwise exactly
    /// [`complete`](Self::complete): the token's record back exactly once,
    /// a duplicate or stale `wr_id` a typed error that changes nothing.
    ///
    /// ```
    /// use railyard_core::classify::wc;
    /// use railyard_core::completion::{HotPath, PostOrder, PostRequest, SliceEffect};
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// use railyard_core::slice::{SliceState, SliceTable};
    /// use railyard_core::token::TokenPool;
    ///
    /// let tokens: TokenPool = TokenPool::new(4).unwrap();
    /// let slices = SliceTable::new(4).unwrap();
    /// let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let ep = eps.open(()).unwrap();
    /// let order = PostOrder::new(4).unwrap();
    /// let a = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 4096, 0)).unwrap();
    /// let b = owner.post(PostRequest::new(slices.open(1).unwrap(), ep, 0, 4096, 0)).unwrap();
    /// assert!(order.record(&[a.wr_id, b.wr_id])); // a unsignaled, b signaled
    /// // polled: b's CQE, success
    /// for w in order.covered_by(b.wr_id) {
    ///     let d = owner.complete_covered(w, wc::SUCCESS, 10).unwrap();
    ///     assert_eq!(d.slice, SliceEffect::Settled(SliceState::Succeeded));
    /// }
    /// owner.complete(b.wr_id, wc::SUCCESS, 0, 10).unwrap();
    /// assert_eq!(tokens.in_use(), 0);
    /// ```
    #[inline(always)]
    pub fn complete_covered(
        &self,
        wr_id: WrId,
        covering_status: u32,
        now: Nanos,
    ) -> Result<Completed, TokenError> {
        self.complete_covered_via(&mut (), wr_id, covering_status, now)
    }

    /// [`complete_covered`](Self::complete_covered), returning the token
    /// through `tokens` (see [`complete_via`](Self::complete_via)).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let mut poller = owner.token_cache::<4>();
    /// let ep = eps.open(()).unwrap();
    /// let order = PostOrder::new(4).unwrap();
    /// let a = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 0)).unwrap();
    /// let b = owner.post(PostRequest::new(slices.open(1).unwrap(), ep, 0, 64, 0)).unwrap();
    /// order.record(&[a.wr_id, b.wr_id]);
    /// // b's CQE is an error: a, covered by it, completes as a derived flush.
    /// for w in order.covered_by(b.wr_id) {
    ///     let d = owner.complete_covered_via(&mut poller, w, wc::REM_ACCESS_ERR, 5).unwrap();
    ///     assert_eq!(d.wc.status, wc::WR_FLUSH_ERR);
    /// }
    /// owner.complete_via(&mut poller, b.wr_id, wc::REM_ACCESS_ERR, 0, 5).unwrap();
    /// assert_eq!(tokens.in_use(), 0);
    /// ```
    #[inline(always)]
    pub fn complete_covered_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        wr_id: WrId,
        covering_status: u32,
        now: Nanos,
    ) -> Result<Completed, TokenError> {
        let status = if covering_status == crate::classify::wc::SUCCESS {
            crate::classify::wc::SUCCESS
        } else {
            crate::classify::wc::WR_FLUSH_ERR
        };
        self.complete_via(tokens, wr_id, status, 0, now)
    }

    /// The body of [`complete`](Self::complete) once the token is won.
    #[inline(always)]
    fn finish(&self, rec: &mut TokenRecord, wc: WcClassification, now: Nanos) -> Completed {
        // Released in place: a layer's release clears only its own hold
        // bit, so the record with the posted holds is the record as posted
        // (the slot's copy is freed next).
        let holds = rec.holds;
        let released = self.release(rec, Some(&wc), now);
        let record = TokenRecord { holds, ..*rec };
        let r = record.slice;
        let settled = match wc_outcome(&wc) {
            WcOutcome::Success => self
                .slices
                .settle(r, Outcome::Success)
                .map(SliceEffect::Settled),
            WcOutcome::Fatal => self
                .slices
                .settle(r, Outcome::Failure)
                .map(SliceEffect::Settled),
            WcOutcome::Retryable => self.slices.retry(r, self.max_retries).map(|x| match x {
                Retry::NewAttempt(n) => SliceEffect::Retry(n),
                Retry::Exhausted => SliceEffect::Settled(SliceState::Failed),
            }),
        };
        Completed {
            record,
            wc,
            slice: settled.unwrap_or(SliceEffect::StaleReleaseOnly),
            released,
        }
    }

    /// Evidence for a refusal (RFC 4162 non-WC table), with the path and the
    /// controller's view of its route when the layer has one; `None` when
    /// the refusal is not a task anomaly ([`Refusal::reason`]).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// use railyard_core::endpoint::RetireReason;
    /// use railyard_core::evidence::{Observed, Reason};
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let ep = eps.open(()).unwrap();
    /// eps.retire(ep, RetireReason::QpFatal, 0).unwrap();
    /// let refusal = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 5)).unwrap_err();
    /// let o = owner.refusal_observation(&refusal, 5).unwrap(); // record it on the task
    /// assert_eq!(o.reason, Reason::GenerationChanged);
    /// assert!(matches!(o.path, Observed::Value(_)));
    /// ```
    pub fn refusal_observation(&self, refusal: &Refusal, now: Nanos) -> Option<Observation> {
        let reason = refusal.reason()?;
        let mut o = match refusal.path() {
            Some(p) => self.layers.cc.observation(p.id(), reason, now),
            None => Observation::new(reason, now),
        };
        if let Refusal::Deferred { deferral, .. } = refusal {
            o.window = Observed::Value(deferral.window);
            o.in_flight = Observed::Value(deferral.in_flight);
        }
        Some(o)
    }

    /// Evidence for an error completion: its class's reason, scope, path
    /// and the route generation it was posted on; `None` for a success (the
    /// caller resolves the slice's evidence instead).
    ///
    /// ```
    /// # use railyard_core::classify::wc;
    /// # use railyard_core::completion::*;
    /// # use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    /// # use railyard_core::slice::{SliceState, SliceTable};
    /// # use railyard_core::token::TokenPool;
    /// # let tokens: TokenPool = TokenPool::new(8).unwrap();
    /// # let slices = SliceTable::new(8).unwrap();
    /// # let eps: EndpointTable<()> = EndpointTable::new(EndpointConfig::default()).unwrap();
    ///
    /// use railyard_core::evidence::{Observed, Reason};
    ///
    /// let owner = HotPath::new(&tokens, &slices, &eps);
    /// let ep = eps.open(()).unwrap();
    /// let p = owner.post(PostRequest::new(slices.open(0).unwrap(), ep, 0, 64, 0)).unwrap();
    /// let done = owner.complete(p.wr_id, wc::RETRY_EXC_ERR, 0, 9).unwrap();
    /// let o = owner.completion_observation(&done, 9).unwrap();
    /// assert_eq!(o.reason, Reason::RouteTimeout);
    /// assert_eq!(o.generation, Observed::Value(done.record.route_generation));
    /// let ok = owner.post(PostRequest::new(slices.open(1).unwrap(), ep, 0, 64, 10)).unwrap();
    /// let done = owner.complete(ok.wr_id, wc::SUCCESS, 0, 11).unwrap();
    /// assert!(owner.completion_observation(&done, 11).is_none());
    /// ```
    pub fn completion_observation(&self, done: &Completed, now: Nanos) -> Option<Observation> {
        let reason = done.wc.reason()?;
        let mut o = self.layers.cc.observation(done.path().id(), reason, now);
        o.scope = Observed::Value(done.wc.scope);
        o.generation = Observed::Value(done.record.route_generation);
        Some(o)
    }

    /// Releases every hold `rec` names, in reverse admission order: credit,
    /// CC, rail, then the endpoint. `wc` is the completion's classification
    /// (`None`: the work never reached the NIC; no feedback).
    ///
    /// Each layer is called at most once, only for a hold bit that is set,
    /// and clears that bit itself (a layer refuses a release whose bit is
    /// clear, and touches no other bit), so `rec` can never release a hold
    /// twice. `rec.holds` is left with the released bits cleared: callers
    /// that hand the record back restore the posted holds.
    #[inline(always)]
    fn release(
        &self,
        rec: &mut TokenRecord,
        wc: Option<&WcClassification>,
        now: Nanos,
    ) -> Released {
        // BROKEN twin (loom only): the endpoint drains before the holds are
        // released, so a reclaimer can see it reclaimed with holds left.
        #[cfg(railyard_broken = "hotpath_endpoint_first")]
        let early = self.release_endpoint(rec);
        let mut flags = 0u8;
        if rec.holds & TokenRecord::HOLDS_CREDIT != 0 {
            flags |= Released::CREDIT_HELD;
            match self.layers.credit.release(rec) {
                Ok(ReleaseOutcome::Released) => {}
                Ok(ReleaseOutcome::Fenced) => flags |= Released::CREDIT_FENCED,
                Err(_) => flags |= Faults::CREDIT,
            }
        }
        if rec.holds & TokenRecord::HOLDS_PERMIT != 0 {
            flags |= Released::CC_HELD;
            let effect = match wc {
                Some(c) => c.effect,
                None => Effect::None,
            };
            match self.layers.cc.release(rec, effect) {
                Ok(Settlement::Current) => {}
                Ok(Settlement::Stale) => flags |= Released::CC_STALE,
                Err(_) => flags |= Faults::CC,
            }
        }
        if rec.holds & TokenRecord::HOLDS_RAIL_CHARGE != 0 {
            let success = matches!(wc, Some(c) if c.status == crate::classify::wc::SUCCESS);
            if self.layers.rail.release(rec, success, now).is_err() {
                flags |= Faults::RAIL;
            }
        }
        #[cfg(not(railyard_broken = "hotpath_endpoint_first"))]
        let endpoint = self.release_endpoint(rec);
        #[cfg(railyard_broken = "hotpath_endpoint_first")]
        let endpoint = early;
        Released { endpoint, flags }
    }

    /// The endpoint step of [`release`](Self::release): the post admission
    /// the record names, if it names one.
    #[inline(always)]
    fn release_endpoint(&self, rec: &TokenRecord) -> Result<bool, EndpointError> {
        if rec.holds & TokenRecord::HOLDS_OUTSTANDING == 0 {
            return not_outstanding();
        }
        self.endpoints.release_post(rec.endpoint, rec.qp)
    }
}
