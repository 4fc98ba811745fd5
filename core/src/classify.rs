//! Failure classification (RFC 4162): pure, total functions from raw ibverbs
//! numbers and transport signals to a normalized class, the scope the
//! evidence supports, what to do with the current object, and what the
//! congestion controller may do with it.
//!
//! Every function here is `const`-free of state, never panics and is total
//! over its whole input domain: any `u32` is a valid input, and values that
//! ibverbs does not define fail closed exactly as the RFC says (an unknown WC
//! status is [`FailureClass::Fatal`] at [`FailureScope::Qp`]; an unknown
//! async event changes nothing).
//!
//! The numeric values are those of `enum ibv_wc_status` and
//! `enum ibv_event_type` in `<infiniband/verbs.h>`; see [`wc`] and [`event`].
//!
//! ## What a completion does to its slice: [`wc_outcome`]
//!
//! This is the **only** mapping from a work completion to what completion
//! ownership (RFC 3136) does with the slice, and every integrator gets it
//! through [`completion::HotPath::complete`](crate::completion::HotPath::complete)
//! (the engine, the simulator, the C ABI). It is derived row by row from
//! the "Current-object handling" column of RFC 4162's WC table, read as
//! what happens to the *operation* (the slice attempt) on that object:
//!
//! | WC status | class / scope | current-object handling (RFC 4162) | slice ([`WcOutcome`]) |
//! |---|---|---|---|
//! | `SUCCESS` | Success / operation | complete normally, release the permit | `Success`: settle succeeded |
//! | `RNR_RETRY_EXC_ERR` | ReceiverPressure / QP | reconnect or rebuild the current QP | `Retryable`: a new attempt on the rebuilt QP |
//! | `RETRY_EXC_ERR`, `RESP_TIMEOUT_ERR` | RouteTimeout / QP | the QP is no longer safe to reuse: rebuild it | `Retryable` |
//! | `LOC_LEN_ERR`, `LOC_PROT_ERR`, `MW_BIND_ERR`, `LOC_ACCESS_ERR` | LocalConfiguration / operation | **fail the operation**, fix length / MR / PD / access / binding | `Fatal`: settle failed (the same WR fails again) |
//! | `LOC_QP_OP_ERR`, `LOC_EEC_OP_ERR`, `LOC_RDD_VIOL_ERR`, `INV_EECN_ERR`, `INV_EEC_STATE_ERR` | LocalConfiguration / QP | stop reusing and rebuild the incorrect local *object* | `Retryable`: the object was wrong, not the operation; the attempt goes again on the rebuilt object |
//! | `BAD_RESP_ERR`, `REM_INV_REQ_ERR`, `REM_ACCESS_ERR`, `REM_OP_ERR`, `REM_INV_RD_REQ_ERR`, `REM_ABORT_ERR` | RemoteMetadata / operation | refresh address, rkey, permissions, endpoint generation, *then the existing retry path runs* | `Retryable` |
//! | `WR_FLUSH_ERR` | DerivedFlush / QP | teardown cleanup, release the permit once; inherits the root cause | `Retryable`: the flushed WR never executed |
//! | `FATAL_ERR`, `GENERAL_ERR`, `TM_ERR`, `TM_RNDV_INCOMPLETE` | Fatal / QP | immediately stop reusing the *object*, keep `vendor_err` | `Retryable`: on a new object, within the slice's budget (RFC 3136: retry behaviour across failover is preserved) |
//! | unknown status | Fatal / QP | **fail closed**, stop reusing the object, keep the raw status | `Fatal`: settle failed |
//!
//! `Retryable` always means *within the slice's retry budget*: the slice
//! table turns an exhausted budget into a failure, exactly once. A
//! completion of a stale attempt never reaches the slice at all (it only
//! releases what its token owned); the outcome then only decides nothing.
//!
//! ```
//! use railyard_core::classify::{classify_wc, wc, Effect, FailureClass, FailureScope};
//!
//! let c = classify_wc(wc::RETRY_EXC_ERR, 0x81);
//! assert_eq!(c.class, FailureClass::RouteTimeout);
//! assert_eq!(c.scope, FailureScope::Qp);
//! assert_eq!(c.effect, Effect::HardError);
//! assert_eq!(c.vendor_err, 0x81); // evidence only: never widens the scope
//!
//! // Unknown statuses fail closed.
//! let u = classify_wc(9999, 0);
//! assert!(!u.known);
//! assert_eq!((u.class, u.scope), (FailureClass::Fatal, FailureScope::Qp));
//! ```

use crate::endpoint::RetireReason;
/// The isolation scope every classification carries (defined with the
/// evidence that records it).
pub use crate::evidence::FailureScope;
use crate::evidence::{AnomalyState, Reason};

/// `enum ibv_wc_status` values.
pub mod wc {
    /// `IBV_WC_SUCCESS`
    pub const SUCCESS: u32 = 0;
    /// `IBV_WC_LOC_LEN_ERR`
    pub const LOC_LEN_ERR: u32 = 1;
    /// `IBV_WC_LOC_QP_OP_ERR`
    pub const LOC_QP_OP_ERR: u32 = 2;
    /// `IBV_WC_LOC_EEC_OP_ERR`
    pub const LOC_EEC_OP_ERR: u32 = 3;
    /// `IBV_WC_LOC_PROT_ERR`
    pub const LOC_PROT_ERR: u32 = 4;
    /// `IBV_WC_WR_FLUSH_ERR`
    pub const WR_FLUSH_ERR: u32 = 5;
    /// `IBV_WC_MW_BIND_ERR`
    pub const MW_BIND_ERR: u32 = 6;
    /// `IBV_WC_BAD_RESP_ERR`
    pub const BAD_RESP_ERR: u32 = 7;
    /// `IBV_WC_LOC_ACCESS_ERR`
    pub const LOC_ACCESS_ERR: u32 = 8;
    /// `IBV_WC_REM_INV_REQ_ERR`
    pub const REM_INV_REQ_ERR: u32 = 9;
    /// `IBV_WC_REM_ACCESS_ERR`
    pub const REM_ACCESS_ERR: u32 = 10;
    /// `IBV_WC_REM_OP_ERR`
    pub const REM_OP_ERR: u32 = 11;
    /// `IBV_WC_RETRY_EXC_ERR`
    pub const RETRY_EXC_ERR: u32 = 12;
    /// `IBV_WC_RNR_RETRY_EXC_ERR`
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    /// `IBV_WC_LOC_RDD_VIOL_ERR`
    pub const LOC_RDD_VIOL_ERR: u32 = 14;
    /// `IBV_WC_REM_INV_RD_REQ_ERR`
    pub const REM_INV_RD_REQ_ERR: u32 = 15;
    /// `IBV_WC_REM_ABORT_ERR`
    pub const REM_ABORT_ERR: u32 = 16;
    /// `IBV_WC_INV_EECN_ERR`
    pub const INV_EECN_ERR: u32 = 17;
    /// `IBV_WC_INV_EEC_STATE_ERR`
    pub const INV_EEC_STATE_ERR: u32 = 18;
    /// `IBV_WC_FATAL_ERR`
    pub const FATAL_ERR: u32 = 19;
    /// `IBV_WC_RESP_TIMEOUT_ERR`
    pub const RESP_TIMEOUT_ERR: u32 = 20;
    /// `IBV_WC_GENERAL_ERR`
    pub const GENERAL_ERR: u32 = 21;
    /// `IBV_WC_TM_ERR`
    pub const TM_ERR: u32 = 22;
    /// `IBV_WC_TM_RNDV_INCOMPLETE`
    pub const TM_RNDV_INCOMPLETE: u32 = 23;
    /// Largest status ibverbs defines; anything above is unknown.
    pub const MAX_KNOWN: u32 = TM_RNDV_INCOMPLETE;
}

/// `enum ibv_event_type` values.
pub mod event {
    /// `IBV_EVENT_CQ_ERR`
    pub const CQ_ERR: u32 = 0;
    /// `IBV_EVENT_QP_FATAL`
    pub const QP_FATAL: u32 = 1;
    /// `IBV_EVENT_QP_REQ_ERR`
    pub const QP_REQ_ERR: u32 = 2;
    /// `IBV_EVENT_QP_ACCESS_ERR`
    pub const QP_ACCESS_ERR: u32 = 3;
    /// `IBV_EVENT_COMM_EST`
    pub const COMM_EST: u32 = 4;
    /// `IBV_EVENT_SQ_DRAINED`
    pub const SQ_DRAINED: u32 = 5;
    /// `IBV_EVENT_PATH_MIG` (successful path migration)
    pub const PATH_MIG: u32 = 6;
    /// `IBV_EVENT_PATH_MIG_ERR`
    pub const PATH_MIG_ERR: u32 = 7;
    /// `IBV_EVENT_DEVICE_FATAL`
    pub const DEVICE_FATAL: u32 = 8;
    /// `IBV_EVENT_PORT_ACTIVE`
    pub const PORT_ACTIVE: u32 = 9;
    /// `IBV_EVENT_PORT_ERR`
    pub const PORT_ERR: u32 = 10;
    /// `IBV_EVENT_LID_CHANGE`
    pub const LID_CHANGE: u32 = 11;
    /// `IBV_EVENT_PKEY_CHANGE`
    pub const PKEY_CHANGE: u32 = 12;
    /// `IBV_EVENT_SM_CHANGE`
    pub const SM_CHANGE: u32 = 13;
    /// `IBV_EVENT_SRQ_ERR`
    pub const SRQ_ERR: u32 = 14;
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`
    pub const SRQ_LIMIT_REACHED: u32 = 15;
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`
    pub const QP_LAST_WQE_REACHED: u32 = 16;
    /// `IBV_EVENT_CLIENT_REREGISTER`
    pub const CLIENT_REREGISTER: u32 = 17;
    /// `IBV_EVENT_GID_CHANGE`
    pub const GID_CHANGE: u32 = 18;
    /// `IBV_EVENT_WQ_FATAL`
    pub const WQ_FATAL: u32 = 19;
    /// Largest event type ibverbs defines; anything above is unknown.
    pub const MAX_KNOWN: u32 = WQ_FATAL;
}

/// The normalized failure class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureClass {
    /// The operation completed.
    Success,
    /// Transfers succeed but drain time / backlog keeps rising.
    Congestion,
    /// The receiver ran out of receive resources (RNR).
    ReceiverPressure,
    /// The route timed out (transport retries or a software deadline).
    RouteTimeout,
    /// A local programming or configuration error (length, MR, PD, access, QP state).
    LocalConfiguration,
    /// Stale remote metadata: address, rkey, permission, endpoint generation.
    RemoteMetadata,
    /// A flush: derived from the root cause that put the QP into ERR.
    DerivedFlush,
    /// A fatal error of the object (or an unknown status: fail closed).
    Fatal,
    /// The send path failed to establish or lost the route connection (RDMA CM).
    RouteConnection,
    /// No usable RDMA path remains.
    NoUsablePath,
    /// Byte-window admission deferred the work.
    ByteWindow,
    /// The path is quarantined; the work goes to another rail.
    PathQuarantined,
    /// The route generation changed between admission and post.
    GenerationChanged,
    /// The post was rejected synchronously; the WR never reached hardware.
    PostRejected,
    /// A deadline passed while the CQ poller was stalled: no network verdict.
    PollerStall,
    /// A control-plane RPC failed (not a data-plane signal).
    ControlPlane,
    /// Explicit cancellation, QP teardown or old-endpoint reclamation.
    Cancelled,
    /// A non-failure event (port active, GID/LID/PKEY change, path migrated, ...).
    NonFailure,
    /// An async event type ibverbs does not define: changes nothing.
    Unclassified,
}

/// What happens to the current RDMA object (owned by the existing
/// endpoint / QP / event owners, not by the controller).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectHandling {
    /// Complete normally and release the permit.
    CompleteNormally,
    /// Keep using the QP.
    ContinueUsing,
    /// Reconnect or rebuild the current QP through the existing lifecycle.
    RebuildQp,
    /// Fail the operation; fix the local length, MR, PD, access or binding.
    FailOperation,
    /// Stop reusing and rebuild the incorrect local communication object.
    RebuildLocalObject,
    /// Refresh address, rkey, permissions, metadata and endpoint generation, then retry.
    RefreshMetadata,
    /// Complete teardown / cancellation cleanup; release the permit once.
    CompleteTeardown,
    /// Immediately stop reusing the object; retain the raw status and `vendor_err`.
    StopReuse,
    /// Stop the WQ/SRQ and its dependent QPs.
    StopWqAndDependents,
    /// The CQ is unusable: isolate every QP associated with it.
    IsolateCq,
    /// Stop using the failed migration path; the rail owner selects another.
    StopMigrationPath,
    /// Isolate device and route use through the port; wait for recovery + probe.
    IsolatePort,
    /// Isolate the whole local device.
    IsolateDevice,
    /// Let the topology / endpoint lifecycle refresh; recovery needs a new-generation probe.
    RefreshTopology,
    /// Leave handling and diagnostics to the existing event owner.
    LeaveToEventOwner,
    /// Do not post: the slice stays in its transport queue.
    LeaveQueued,
    /// Do not post: use the existing alternate rail or transport.
    UseAlternateRail,
    /// Roll back both reservations and resolve the endpoint / path again.
    RollbackAndResolve,
    /// Release the unposted permit now; the endpoint / QP owner handles the error.
    ReleaseUnposted,
    /// Keep diagnostics; do not count a route timeout.
    RetainDiagnostics,
    /// Discard the failed connection and retry at most once.
    RetryReadOnlyOnce,
    /// Keep single-attempt behavior; never replay.
    SingleAttempt,
    /// Settle and release every in-flight permit once.
    SettleAndRelease,
    /// Delegate to the existing transport failover.
    DelegateFailover,
    /// The existing RDMA CM owner isolates and reconnects the connection.
    CmReconnect,
    /// The existing RDMA CM owner destroys the `rdma_cm_id` and isolates the device.
    CmRemoveDevice,
}

/// What the congestion controller does with the signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Nothing: settle accounting only.
    None,
    /// A success: completed bytes; resolves SUSPECT / PROBING on the current generation.
    Success,
    /// Receiver pressure: back off only the receiving route.
    ReceiverPressure,
    /// One route hard error (counted immediately, towards the threshold).
    HardError,
    /// One software route timeout: counted at the next epoch unless the poller stalled.
    Timeout,
    /// Immediately fatal evidence for the scope: quarantine it. The caller
    /// applies it at the classification's scope and no wider: CQ → the
    /// routes whose QPs use that CQ (`cc::Controller::route_feedback`),
    /// port → the routes on that port, device →
    /// `cc::Controller::quarantine_device`.
    Quarantine,
}

impl Effect {
    /// Whether this effect enters the AIMD hard-error counters.
    ///
    /// ```
    /// use railyard_core::classify::Effect;
    /// assert!(Effect::Timeout.counts_hard_error());
    /// assert!(!Effect::ReceiverPressure.counts_hard_error()); // backs off, never quarantines
    /// ```
    #[inline]
    pub const fn counts_hard_error(self) -> bool {
        matches!(
            self,
            Effect::HardError | Effect::Timeout | Effect::Quarantine
        )
    }
}

/// The classification of one work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WcClassification {
    /// The raw `ibv_wc.status`, kept as evidence.
    pub status: u32,
    /// The raw `ibv_wc.vendor_err`, kept as diagnostic evidence only.
    pub vendor_err: u32,
    /// Whether ibverbs defines `status`.
    pub known: bool,
    /// Normalized class.
    pub class: FailureClass,
    /// Maximum isolation scope.
    pub scope: FailureScope,
    /// What happens to the current object.
    pub handling: ObjectHandling,
    /// What the controller does.
    pub effect: Effect,
}

impl WcClassification {
    /// Whether this completion enters the AIMD hard-error counters.
    ///
    /// ```
    /// use railyard_core::classify::{classify_wc, wc};
    /// assert!(classify_wc(wc::RETRY_EXC_ERR, 0).counts_hard_error());
    /// assert!(!classify_wc(wc::WR_FLUSH_ERR, 0).counts_hard_error()); // derived, not a root cause
    /// ```
    #[inline]
    pub const fn counts_hard_error(&self) -> bool {
        self.effect.counts_hard_error()
    }

    /// The task-evidence reason, or `None` for a success (which resolves instead).
    ///
    /// ```
    /// use railyard_core::classify::{classify_wc, wc};
    /// use railyard_core::evidence::Reason;
    /// assert_eq!(classify_wc(wc::REM_ACCESS_ERR, 0).reason(), Some(Reason::RemoteMetadata));
    /// assert_eq!(classify_wc(wc::SUCCESS, 0).reason(), None);
    /// ```
    #[inline]
    pub const fn reason(&self) -> Option<Reason> {
        class_reason(self.class)
    }
}

/// What completion ownership does with the slice whose attempt completed:
/// the one WC → slice mapping (see the module docs' table).
///
/// ```
/// use railyard_core::classify::{classify_wc, wc, wc_outcome, WcOutcome};
///
/// assert_eq!(wc_outcome(&classify_wc(wc::SUCCESS, 0)), WcOutcome::Success);
/// assert_eq!(wc_outcome(&classify_wc(wc::RETRY_EXC_ERR, 0)), WcOutcome::Retryable);
/// assert_eq!(wc_outcome(&classify_wc(wc::LOC_LEN_ERR, 0)), WcOutcome::Fatal);
/// assert_eq!(wc_outcome(&classify_wc(wc::FATAL_ERR, 0)), WcOutcome::Retryable);
/// assert_eq!(wc_outcome(&classify_wc(9999, 0)), WcOutcome::Fatal); // fail closed
/// ```
#[inline]
pub const fn wc_outcome(c: &WcClassification) -> WcOutcome {
    if !c.known {
        // Unknown status: fail closed.
        return WcOutcome::Fatal;
    }
    match c.handling {
        ObjectHandling::CompleteNormally => WcOutcome::Success,
        ObjectHandling::FailOperation => WcOutcome::Fatal,
        // The object is rebuilt / refreshed / torn down; the operation goes
        // again on its replacement.
        _ => WcOutcome::Retryable,
    }
}

/// How a work completion ends for the slice attempt it completed, reduced
/// to what completion ownership needs. Produced only by [`wc_outcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOutcome {
    /// `IBV_WC_SUCCESS`: settle the slice succeeded.
    Success,
    /// Retry the slice on a new attempt, within its retry budget.
    Retryable,
    /// Settle the slice failed.
    Fatal,
}

/// Classifies a work completion. Total over `u32`; `vendor_err` is evidence
/// only and never changes the result.
///
/// ```
/// use railyard_core::classify::{classify_wc, wc, Effect, FailureClass, ObjectHandling};
/// use railyard_core::evidence::FailureScope;
///
/// let c = classify_wc(wc::RNR_RETRY_EXC_ERR, 0x81);
/// assert_eq!((c.class, c.scope, c.effect), (FailureClass::ReceiverPressure, FailureScope::Qp, Effect::ReceiverPressure));
/// assert_eq!(c.handling, ObjectHandling::RebuildQp);
/// assert_eq!(c.vendor_err, 0x81); // kept as evidence, never changes the result
/// assert_eq!(classify_wc(wc::RNR_RETRY_EXC_ERR, 0).class, c.class);
/// let unknown = classify_wc(4242, 0);
/// assert!(!unknown.known && unknown.class == FailureClass::Fatal);
/// ```
#[inline]
pub const fn classify_wc(status: u32, vendor_err: u32) -> WcClassification {
    use FailureClass as C;
    use FailureScope as S;
    use ObjectHandling as H;
    let (known, class, scope, handling, effect) = match status {
        wc::SUCCESS => (
            true,
            C::Success,
            S::Operation,
            H::CompleteNormally,
            Effect::Success,
        ),
        wc::RNR_RETRY_EXC_ERR => (
            true,
            C::ReceiverPressure,
            S::Qp,
            H::RebuildQp,
            Effect::ReceiverPressure,
        ),
        wc::RETRY_EXC_ERR | wc::RESP_TIMEOUT_ERR => (
            true,
            C::RouteTimeout,
            S::Qp,
            H::RebuildQp,
            Effect::HardError,
        ),
        wc::LOC_LEN_ERR | wc::LOC_PROT_ERR | wc::MW_BIND_ERR | wc::LOC_ACCESS_ERR => (
            true,
            C::LocalConfiguration,
            S::Operation,
            H::FailOperation,
            Effect::None,
        ),
        wc::LOC_QP_OP_ERR
        | wc::LOC_EEC_OP_ERR
        | wc::LOC_RDD_VIOL_ERR
        | wc::INV_EECN_ERR
        | wc::INV_EEC_STATE_ERR => (
            true,
            C::LocalConfiguration,
            S::Qp,
            H::RebuildLocalObject,
            Effect::None,
        ),
        wc::BAD_RESP_ERR
        | wc::REM_INV_REQ_ERR
        | wc::REM_ACCESS_ERR
        | wc::REM_OP_ERR
        | wc::REM_INV_RD_REQ_ERR
        | wc::REM_ABORT_ERR => (
            true,
            C::RemoteMetadata,
            S::Operation,
            H::RefreshMetadata,
            Effect::None,
        ),
        wc::WR_FLUSH_ERR => (
            true,
            C::DerivedFlush,
            S::Qp,
            H::CompleteTeardown,
            Effect::None,
        ),
        wc::FATAL_ERR | wc::GENERAL_ERR | wc::TM_ERR | wc::TM_RNDV_INCOMPLETE => {
            (true, C::Fatal, S::Qp, H::StopReuse, Effect::HardError)
        }
        // Unknown: fail closed, minimum QP/route scope; an async event or a
        // probe is required before the scope may expand.
        _ => (false, C::Fatal, S::Qp, H::StopReuse, Effect::HardError),
    };
    WcClassification {
        status,
        vendor_err,
        known,
        class,
        scope,
        handling,
        effect,
    }
}

/// The classification of one async event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventClassification {
    /// The raw `ibv_async_event.event_type`.
    pub event: u32,
    /// Whether ibverbs defines `event`.
    pub known: bool,
    /// Normalized class.
    pub class: FailureClass,
    /// Maximum isolation scope.
    pub scope: FailureScope,
    /// What happens to the affected objects.
    pub handling: ObjectHandling,
    /// What the controller does (at `scope`: route for QP/CQ/route, the
    /// port's routes for port, the device for device).
    pub effect: Effect,
}

impl EventClassification {
    /// Whether this event enters the AIMD hard-error counters.
    ///
    /// ```
    /// use railyard_core::classify::{classify_event, event};
    /// assert!(classify_event(event::QP_FATAL).counts_hard_error());
    /// assert!(!classify_event(event::PORT_ACTIVE).counts_hard_error());
    /// ```
    #[inline]
    pub const fn counts_hard_error(&self) -> bool {
        self.effect.counts_hard_error()
    }
}

/// Classifies an async event. Total over `u32`; unknown events change no
/// congestion state.
///
/// ```
/// use railyard_core::classify::{classify_event, event, Effect, FailureClass};
/// use railyard_core::evidence::FailureScope;
///
/// let c = classify_event(event::DEVICE_FATAL);
/// assert_eq!((c.scope, c.effect), (FailureScope::Device, Effect::Quarantine));
/// let c = classify_event(event::CQ_ERR);
/// assert_eq!(c.scope, FailureScope::Cq); // the routes of that CQ, no wider
/// let c = classify_event(1_000);
/// assert_eq!((c.known, c.class, c.effect), (false, FailureClass::Unclassified, Effect::None));
/// ```
#[inline]
pub const fn classify_event(event_type: u32) -> EventClassification {
    use FailureClass as C;
    use FailureScope as S;
    use ObjectHandling as H;
    let (known, class, scope, handling, effect) = match event_type {
        event::QP_FATAL | event::QP_REQ_ERR | event::QP_ACCESS_ERR => {
            (true, C::Fatal, S::Qp, H::RebuildQp, Effect::HardError)
        }
        event::WQ_FATAL | event::SRQ_ERR => (
            true,
            C::Fatal,
            S::Qp,
            H::StopWqAndDependents,
            Effect::HardError,
        ),
        event::CQ_ERR => (true, C::Fatal, S::Cq, H::IsolateCq, Effect::Quarantine),
        event::PATH_MIG_ERR => (
            true,
            C::RouteTimeout,
            S::Route,
            H::StopMigrationPath,
            Effect::HardError,
        ),
        event::PORT_ERR => (true, C::Fatal, S::Port, H::IsolatePort, Effect::Quarantine),
        event::DEVICE_FATAL => (
            true,
            C::Fatal,
            S::Device,
            H::IsolateDevice,
            Effect::Quarantine,
        ),
        event::PORT_ACTIVE
        | event::GID_CHANGE
        | event::LID_CHANGE
        | event::PKEY_CHANGE
        | event::PATH_MIG
        | event::COMM_EST
        | event::SQ_DRAINED
        | event::SM_CHANGE
        | event::SRQ_LIMIT_REACHED
        | event::QP_LAST_WQE_REACHED
        | event::CLIENT_REREGISTER => (
            true,
            C::NonFailure,
            S::None,
            H::RefreshTopology,
            Effect::None,
        ),
        _ => (
            false,
            C::Unclassified,
            S::None,
            H::LeaveToEventOwner,
            Effect::None,
        ),
    };
    EventClassification {
        event: event_type,
        known,
        class,
        scope,
        handling,
        effect,
    }
}

/// What an async event does to the integrator's endpoints (the endpoint
/// side of RFC 4162's async-event matrix; the controller side is
/// [`Controller::apply_event`](crate::cc::Controller::apply_event)). Every
/// integrator (the engine, the C ABI, the preload) retires through this one
/// mapping.
///
/// | classified scope | endpoints |
/// |---|---|
/// | none, operation (informational: port active, COMM_EST, unknown events) | untouched |
/// | QP, WQ / SRQ, route | retire the endpoint owning the event's QP |
/// | CQ, port, device | retire every endpoint of the scope (an integrator narrows a CQ event to the endpoints with a QP on that CQ, and port / device events to that device) |
/// | `GID_CHANGE` | retire every endpoint of the device (addressing refresh; no controller effect) |
///
/// ```
/// use railyard_core::classify::{event, event_action, EventAction};
/// use railyard_core::endpoint::RetireReason;
/// assert_eq!(event_action(event::QP_FATAL), EventAction::RetireQp(RetireReason::QpFatal));
/// assert_eq!(event_action(event::PORT_ERR), EventAction::RetireAll(RetireReason::ContextFatal));
/// assert_eq!(event_action(event::COMM_EST), EventAction::Ignore);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventAction {
    /// Nothing (informational: port active, COMM_EST, unknown events, ...).
    Ignore,
    /// Retire the endpoint owning the event's QP (QP / WQ / route scope).
    RetireQp(RetireReason),
    /// Retire every endpoint of the event's scope (CQ, port and device
    /// scope, and the addressing refresh after a GID change).
    RetireAll(RetireReason),
}

/// The endpoint action for an `ibv_async_event` of type `event_type`
/// (see [`EventAction`]). Total over `u32`.
///
/// ```
/// use railyard_core::classify::{event, event_action, EventAction};
/// use railyard_core::endpoint::RetireReason;
/// assert_eq!(event_action(event::GID_CHANGE), EventAction::RetireAll(RetireReason::GidChange));
/// assert_eq!(event_action(event::CQ_ERR), EventAction::RetireAll(RetireReason::ContextFatal));
/// assert_eq!(event_action(u32::MAX), EventAction::Ignore);
/// ```
#[inline]
pub const fn event_action(event_type: u32) -> EventAction {
    if event_type == event::GID_CHANGE {
        return EventAction::RetireAll(RetireReason::GidChange);
    }
    match classify_event(event_type).scope {
        FailureScope::None | FailureScope::Operation => EventAction::Ignore,
        FailureScope::Qp | FailureScope::Route => EventAction::RetireQp(RetireReason::QpFatal),
        FailureScope::Cq | FailureScope::Port | FailureScope::Device => {
            EventAction::RetireAll(RetireReason::ContextFatal)
        }
    }
}

/// Non-WC and control-plane signals: one variant per row of the RFC's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// `tryAcquire` returned Defer.
    AcquireDeferred,
    /// `tryAcquire` returned Avoid on a quarantined path.
    AcquireAvoided,
    /// The route / endpoint generation changed after acquisition.
    GenerationChanged,
    /// `ibv_post_send` (or equivalent) rejected the WR synchronously.
    PostRejected,
    /// A software completion deadline passed while the CQ poller made progress.
    DeadlinePollerProgressing,
    /// A software completion deadline passed while the CQ poller was stalled.
    DeadlinePollerStalled,
    /// A read-only metadata RPC (`GetSegmentDesc`) failed.
    ReadOnlyRpcFailure,
    /// A mutating notification / control RPC failed.
    MutatingRpcFailure,
    /// Stale metadata, rkey, address or permission.
    StaleMetadata,
    /// Explicit cancellation, QP teardown or old-endpoint reclamation.
    Cancellation,
    /// All RDMA rails are unavailable.
    AllRailsUnavailable,
    /// `RDMA_CM_EVENT_DISCONNECTED` (only when the transport already uses librdmacm).
    CmDisconnected,
    /// `RDMA_CM_EVENT_UNREACHABLE` (only when the transport already uses librdmacm).
    CmUnreachable,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
    CmDeviceRemoval,
}

impl Signal {
    /// Every signal, in RFC table order.
    pub const ALL: [Signal; 14] = [
        Signal::AcquireDeferred,
        Signal::AcquireAvoided,
        Signal::GenerationChanged,
        Signal::PostRejected,
        Signal::DeadlinePollerProgressing,
        Signal::DeadlinePollerStalled,
        Signal::ReadOnlyRpcFailure,
        Signal::MutatingRpcFailure,
        Signal::StaleMetadata,
        Signal::Cancellation,
        Signal::AllRailsUnavailable,
        Signal::CmDisconnected,
        Signal::CmUnreachable,
        Signal::CmDeviceRemoval,
    ];
}

/// The classification of a non-WC signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SignalClassification {
    /// The signal.
    pub signal: Signal,
    /// Normalized class.
    pub class: FailureClass,
    /// Maximum isolation scope.
    pub scope: FailureScope,
    /// What the transport does.
    pub handling: ObjectHandling,
    /// What the controller does.
    pub effect: Effect,
    /// The reason recorded in task evidence.
    pub reason: Reason,
    /// The caller-visible task state this evidence projects to.
    pub task_state: AnomalyState,
}

impl SignalClassification {
    /// Whether this signal enters the AIMD hard-error counters.
    ///
    /// ```
    /// use railyard_core::classify::{classify_signal, Signal};
    /// assert!(classify_signal(Signal::DeadlinePollerProgressing).counts_hard_error());
    /// // The same deadline while the poller stalled says nothing about the network.
    /// assert!(!classify_signal(Signal::DeadlinePollerStalled).counts_hard_error());
    /// ```
    #[inline]
    pub const fn counts_hard_error(&self) -> bool {
        self.effect.counts_hard_error()
    }
}

/// Classifies a non-WC / control-plane signal (one row of the RFC table each).
///
/// ```
/// use railyard_core::classify::{classify_signal, ObjectHandling, Signal};
/// use railyard_core::evidence::{AnomalyState, Reason};
///
/// let c = classify_signal(Signal::AcquireAvoided);
/// assert_eq!((c.handling, c.reason), (ObjectHandling::UseAlternateRail, Reason::PathQuarantined));
/// assert_eq!(c.task_state, AnomalyState::LongUnavailable);
/// assert!(Signal::ALL.iter().all(|&s| classify_signal(s).signal == s));
/// ```
#[inline]
pub const fn classify_signal(signal: Signal) -> SignalClassification {
    use FailureClass as C;
    use FailureScope as S;
    use ObjectHandling as H;
    let (class, scope, handling, effect, reason) = match signal {
        Signal::AcquireDeferred => (
            C::ByteWindow,
            S::Route,
            H::LeaveQueued,
            Effect::None,
            Reason::ByteWindow,
        ),
        Signal::AcquireAvoided => (
            C::PathQuarantined,
            S::Route,
            H::UseAlternateRail,
            Effect::None,
            Reason::PathQuarantined,
        ),
        Signal::GenerationChanged => (
            C::GenerationChanged,
            S::Route,
            H::RollbackAndResolve,
            Effect::None,
            Reason::GenerationChanged,
        ),
        Signal::PostRejected => (
            C::PostRejected,
            S::Operation,
            H::ReleaseUnposted,
            Effect::None,
            Reason::PostRejected,
        ),
        Signal::DeadlinePollerProgressing => (
            C::RouteTimeout,
            S::Qp,
            H::RebuildQp,
            Effect::Timeout,
            Reason::RouteTimeout,
        ),
        Signal::DeadlinePollerStalled => (
            C::PollerStall,
            S::None,
            H::RetainDiagnostics,
            Effect::None,
            Reason::PollerStall,
        ),
        Signal::ReadOnlyRpcFailure => (
            C::ControlPlane,
            S::None,
            H::RetryReadOnlyOnce,
            Effect::None,
            Reason::ControlPlane,
        ),
        Signal::MutatingRpcFailure => (
            C::ControlPlane,
            S::None,
            H::SingleAttempt,
            Effect::None,
            Reason::ControlPlane,
        ),
        Signal::StaleMetadata => (
            C::RemoteMetadata,
            S::Operation,
            H::RefreshMetadata,
            Effect::None,
            Reason::RemoteMetadata,
        ),
        Signal::Cancellation => (
            C::Cancelled,
            S::Operation,
            H::SettleAndRelease,
            Effect::None,
            Reason::Cancelled,
        ),
        Signal::AllRailsUnavailable => (
            C::NoUsablePath,
            S::Route,
            H::DelegateFailover,
            Effect::None,
            Reason::NoUsablePath,
        ),
        Signal::CmDisconnected | Signal::CmUnreachable => (
            C::RouteConnection,
            S::Route,
            H::CmReconnect,
            Effect::HardError,
            Reason::RouteConnection,
        ),
        Signal::CmDeviceRemoval => (
            C::Fatal,
            S::Device,
            H::CmRemoveDevice,
            Effect::Quarantine,
            Reason::DeviceRemoved,
        ),
    };
    SignalClassification {
        signal,
        class,
        scope,
        handling,
        effect,
        reason,
        task_state: reason.task_state(),
    }
}

/// The evidence reason of a class, or `None` for [`FailureClass::Success`]
/// and classes that carry no task evidence.
///
/// ```
/// use railyard_core::classify::{class_reason, FailureClass};
/// use railyard_core::evidence::Reason;
/// assert_eq!(class_reason(FailureClass::DerivedFlush), Some(Reason::DerivedFlush));
/// assert_eq!(class_reason(FailureClass::NonFailure), None);
/// ```
#[inline]
pub const fn class_reason(class: FailureClass) -> Option<Reason> {
    Some(match class {
        FailureClass::Success | FailureClass::NonFailure | FailureClass::Unclassified => {
            return None
        }
        FailureClass::Congestion => Reason::CongestionFeedback,
        FailureClass::ReceiverPressure => Reason::ReceiverPressure,
        FailureClass::RouteTimeout => Reason::RouteTimeout,
        FailureClass::LocalConfiguration => Reason::LocalConfiguration,
        FailureClass::RemoteMetadata => Reason::RemoteMetadata,
        FailureClass::DerivedFlush => Reason::DerivedFlush,
        FailureClass::Fatal => Reason::Fatal,
        FailureClass::RouteConnection => Reason::RouteConnection,
        FailureClass::NoUsablePath => Reason::NoUsablePath,
        FailureClass::ByteWindow => Reason::ByteWindow,
        FailureClass::PathQuarantined => Reason::PathQuarantined,
        FailureClass::GenerationChanged => Reason::GenerationChanged,
        FailureClass::PostRejected => Reason::PostRejected,
        FailureClass::PollerStall => Reason::PollerStall,
        FailureClass::ControlPlane => Reason::ControlPlane,
        FailureClass::Cancelled => Reason::Cancelled,
    })
}
