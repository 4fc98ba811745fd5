//! C mirrors of railyard's enums: `repr(u32)`, stable values. In C each is
//! a `uint32_t` typedef plus named constants. Values a caller passes in are
//! checked (`RY_STATUS_INVALID_ARGUMENT`), never transmuted.
//!
//! The definitions are written out (cbindgen reads them; it does not expand
//! macros); `mirror!` (`crate::mirror`) generates every conversion from one list of variant
//! names per enum.

use railyard_core::cc::{DomainKind, Health, Mode, PollerStatus, Settlement, TargetMode};
use railyard_core::classify::{Effect, FailureClass, FailureScope, ObjectHandling, Signal};
use railyard_core::evidence::{AnomalyState, Reason};
use railyard_core::rail::Variant;

use crate::mirror::mirror;

/// Normalized failure class (RFC 4162 classification tables).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_failure_class {
    /// The operation completed.
    Success = 0,
    /// Transfers succeed but drain time / backlog keeps rising.
    Congestion = 1,
    /// The receiver ran out of receive resources (RNR).
    ReceiverPressure = 2,
    /// The route timed out (transport retries or a software deadline).
    RouteTimeout = 3,
    /// A local programming or configuration error (length, MR, PD, access, QP state).
    LocalConfiguration = 4,
    /// Stale remote metadata: address, rkey, permission, endpoint generation.
    RemoteMetadata = 5,
    /// A flush: derived from the root cause that put the QP into ERR.
    DerivedFlush = 6,
    /// A fatal error of the object (or an unknown status: fail closed).
    Fatal = 7,
    /// The send path failed to establish or lost the route connection (RDMA CM).
    RouteConnection = 8,
    /// No usable RDMA path remains.
    NoUsablePath = 9,
    /// Byte-window admission deferred the work.
    ByteWindow = 10,
    /// The path is quarantined; the work goes to another rail.
    PathQuarantined = 11,
    /// The route generation changed between admission and post.
    GenerationChanged = 12,
    /// The post was rejected synchronously; the WR never reached hardware.
    PostRejected = 13,
    /// A deadline passed while the CQ poller was stalled: no network verdict.
    PollerStall = 14,
    /// A control-plane RPC failed (not a data-plane signal).
    ControlPlane = 15,
    /// Explicit cancellation, QP teardown or old-endpoint reclamation.
    Cancelled = 16,
    /// A non-failure event (port active, GID/LID/PKEY change, path migrated, ...).
    NonFailure = 17,
    /// An async event type ibverbs does not define: changes nothing.
    Unclassified = 18,
}

mirror!(ry_failure_class <=> FailureClass: Success, Congestion, ReceiverPressure, RouteTimeout,
    LocalConfiguration, RemoteMetadata, DerivedFlush, Fatal, RouteConnection, NoUsablePath,
    ByteWindow, PathQuarantined, GenerationChanged, PostRejected, PollerStall, ControlPlane,
    Cancelled, NonFailure, Unclassified);

/// Maximum isolation scope of a failure.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_failure_scope {
    /// No failure scope (success, non-failure events, unknown events).
    None = 0,
    /// The current operation / WR only.
    Operation = 1,
    /// The current QP (and the current generation of its dependent objects).
    Qp = 2,
    /// The CQ and every QP associated with it.
    Cq = 3,
    /// The current local-NIC to remote-NIC path.
    Route = 4,
    /// QPs, GIDs and routes on one port.
    Port = 5,
    /// The current local RDMA device (never the remote peer).
    Device = 6,
}

mirror!(ry_failure_scope <=> FailureScope: None, Operation, Qp, Cq, Route, Port, Device);

/// What happens to the current object.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_object_handling {
    /// Complete normally and release the permit.
    CompleteNormally = 0,
    /// Keep using the QP.
    ContinueUsing = 1,
    /// Reconnect or rebuild the current QP through the existing lifecycle.
    RebuildQp = 2,
    /// Fail the operation; fix the local length, MR, PD, access or binding.
    FailOperation = 3,
    /// Stop reusing and rebuild the incorrect local communication object.
    RebuildLocalObject = 4,
    /// Refresh address, rkey, permissions, metadata and endpoint generation, then retry.
    RefreshMetadata = 5,
    /// Complete teardown / cancellation cleanup; release the permit once.
    CompleteTeardown = 6,
    /// Immediately stop reusing the object; retain the raw status and `vendor_err`.
    StopReuse = 7,
    /// Stop the WQ/SRQ and its dependent QPs.
    StopWqAndDependents = 8,
    /// The CQ is unusable: isolate every QP associated with it.
    IsolateCq = 9,
    /// Stop using the failed migration path; the rail owner selects another.
    StopMigrationPath = 10,
    /// Isolate device and route use through the port; wait for recovery + probe.
    IsolatePort = 11,
    /// Isolate the whole local device.
    IsolateDevice = 12,
    /// Let the topology / endpoint lifecycle refresh; recovery needs a new-generation probe.
    RefreshTopology = 13,
    /// Leave handling and diagnostics to the existing event owner.
    LeaveToEventOwner = 14,
    /// Do not post: the slice stays in its transport queue.
    LeaveQueued = 15,
    /// Do not post: use the existing alternate rail or transport.
    UseAlternateRail = 16,
    /// Roll back both reservations and resolve the endpoint / path again.
    RollbackAndResolve = 17,
    /// Release the unposted permit now; the endpoint / QP owner handles the error.
    ReleaseUnposted = 18,
    /// Keep diagnostics; do not count a route timeout.
    RetainDiagnostics = 19,
    /// Discard the failed connection and retry at most once.
    RetryReadOnlyOnce = 20,
    /// Keep single-attempt behavior; never replay.
    SingleAttempt = 21,
    /// Settle and release every in-flight permit once.
    SettleAndRelease = 22,
    /// Delegate to the existing transport failover.
    DelegateFailover = 23,
    /// The existing RDMA CM owner isolates and reconnects the connection.
    CmReconnect = 24,
    /// The existing RDMA CM owner destroys the `rdma_cm_id` and isolates the device.
    CmRemoveDevice = 25,
}

mirror!(ry_object_handling <=> ObjectHandling: CompleteNormally, ContinueUsing, RebuildQp,
    FailOperation, RebuildLocalObject, RefreshMetadata, CompleteTeardown, StopReuse,
    StopWqAndDependents, IsolateCq, StopMigrationPath, IsolatePort, IsolateDevice, RefreshTopology,
    LeaveToEventOwner, LeaveQueued, UseAlternateRail, RollbackAndResolve, ReleaseUnposted,
    RetainDiagnostics, RetryReadOnlyOnce, SingleAttempt, SettleAndRelease, DelegateFailover,
    CmReconnect, CmRemoveDevice);

/// What the congestion controller does with a signal.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_effect {
    /// Nothing: settle accounting only.
    None = 0,
    /// A success: completed bytes; resolves SUSPECT / PROBING on the current generation.
    Success = 1,
    /// Receiver pressure: back off only the receiving route.
    ReceiverPressure = 2,
    /// One route hard error (counted immediately, towards the threshold).
    HardError = 3,
    /// One software route timeout: counted at the next epoch unless the poller stalled.
    Timeout = 4,
    /// Immediately fatal evidence for the scope: quarantine it. The caller
    /// applies it at the classification's scope and no wider: CQ → the
    /// routes whose QPs use that CQ (`cc::Controller::route_feedback`),
    /// port → the routes on that port, device →
    /// `cc::Controller::quarantine_device`.
    Quarantine = 5,
}

mirror!(ry_effect <=> Effect: None, Success, ReceiverPressure, HardError, Timeout, Quarantine);

/// A non-WC, non-event signal the classifier knows (RFC 4162).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_signal {
    /// `tryAcquire` returned Defer.
    AcquireDeferred = 0,
    /// `tryAcquire` returned Avoid on a quarantined path.
    AcquireAvoided = 1,
    /// The route / endpoint generation changed after acquisition.
    GenerationChanged = 2,
    /// `ibv_post_send` (or equivalent) rejected the WR synchronously.
    PostRejected = 3,
    /// A software completion deadline passed while the CQ poller made progress.
    DeadlinePollerProgressing = 4,
    /// A software completion deadline passed while the CQ poller was stalled.
    DeadlinePollerStalled = 5,
    /// A read-only metadata RPC (`GetSegmentDesc`) failed.
    ReadOnlyRpcFailure = 6,
    /// A mutating notification / control RPC failed.
    MutatingRpcFailure = 7,
    /// Stale metadata, rkey, address or permission.
    StaleMetadata = 8,
    /// Explicit cancellation, QP teardown or old-endpoint reclamation.
    Cancellation = 9,
    /// All RDMA rails are unavailable.
    AllRailsUnavailable = 10,
    /// `RDMA_CM_EVENT_DISCONNECTED` (only when the transport already uses librdmacm).
    CmDisconnected = 11,
    /// `RDMA_CM_EVENT_UNREACHABLE` (only when the transport already uses librdmacm).
    CmUnreachable = 12,
    /// `RDMA_CM_EVENT_DEVICE_REMOVAL`.
    CmDeviceRemoval = 13,
}

mirror!(ry_signal <=> Signal: AcquireDeferred, AcquireAvoided, GenerationChanged, PostRejected,
    DeadlinePollerProgressing, DeadlinePollerStalled, ReadOnlyRpcFailure, MutatingRpcFailure,
    StaleMetadata, Cancellation, AllRailsUnavailable, CmDisconnected, CmUnreachable,
    CmDeviceRemoval);

/// Task-evidence reason (the detailed query).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_reason {
    /// Byte-window admission deferred the slice (`BYTE_WINDOW`).
    ByteWindow = 0,
    /// Receiver pressure (RNR) on the route.
    ReceiverPressure = 1,
    /// Success with rising drain time / backlog.
    CongestionFeedback = 2,
    /// A route timeout before quarantine.
    RouteTimeout = 3,
    /// Route-scoped connection evidence (RDMA CM disconnected / unreachable).
    RouteConnection = 4,
    /// The path is quarantined (`PATH_QUARANTINED`).
    PathQuarantined = 5,
    /// A new-generation probe failed.
    ProbeFailed = 6,
    /// No usable RDMA path remains.
    NoUsablePath = 7,
    /// The local device was removed (RDMA CM device removal / device fatal).
    DeviceRemoved = 8,
    /// A local configuration error.
    LocalConfiguration = 9,
    /// Stale remote metadata.
    RemoteMetadata = 10,
    /// A flush derived from another root cause.
    DerivedFlush = 11,
    /// A fatal error without attributable current-path evidence.
    Fatal = 12,
    /// The generation changed after admission (rolled back, re-resolved).
    GenerationChanged = 13,
    /// The post was rejected synchronously.
    PostRejected = 14,
    /// A deadline passed while the poller was stalled.
    PollerStall = 15,
    /// A control-plane RPC failed.
    ControlPlane = 16,
    /// Cancellation, teardown or reclamation.
    Cancelled = 17,
}

mirror!(ry_reason <=> Reason: ByteWindow, ReceiverPressure, CongestionFeedback, RouteTimeout,
    RouteConnection, PathQuarantined, ProbeFailed, NoUsablePath, DeviceRemoved, LocalConfiguration,
    RemoteMetadata, DerivedFlush, Fatal, GenerationChanged, PostRejected, PollerStall,
    ControlPlane, Cancelled);

/// Caller-visible task state (the minimal query).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_task_state {
    /// Successful completion with no unresolved anomaly.
    Normal = 0,
    /// Local configuration, remote metadata, derived flush, fatal without
    /// path evidence, controller off, unsupported transport, or no evidence.
    Unknown = 1,
    /// Byte window, receiver pressure, congestion feedback or a route timeout
    /// before quarantine: keep the task or retry with upper-layer backoff.
    Congested = 2,
    /// Quarantined path, failed probe, or no usable path: try another rail.
    LongUnavailable = 3,
}

mirror!(ry_task_state <=> AnomalyState: Normal, Unknown, Congested, LongUnavailable);

/// Path health state of a controller domain.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_health {
    /// Normal admission; calm epochs grow the window.
    Healthy = 0,
    /// Succeeding but pressured: the window shrinks, no failover.
    Congested = 1,
    /// Timeouts / hard errors below the threshold: the window stops growing.
    Suspect = 2,
    /// Threshold reached, fatal scope event, or failed probe: new posts are avoided.
    Quarantined = 3,
    /// After cooldown, on a new generation: only the bounded probe window is admitted.
    Probing = 4,
}

mirror!(ry_health <=> Health: Healthy, Congested, Suspect, Quarantined, Probing);

/// Controller runtime mode, fixed at construction.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_mode {
    /// Bypass: every slice admitted, nothing accounted.
    Off = 0,
    /// Account and compute policy, never defer or avoid.
    Observe = 1,
    /// Apply byte admission and path quarantine.
    Enforce = 2,
}

mirror!(ry_mode <=> Mode: Off, Observe, Enforce);

/// How the controller judges drain time (`MC_ADAPTIVE_CC_TARGET_MODE`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_target_mode {
    /// Pressure is drain time above max(target, 1.125 x base drain / decrease
    /// fraction), the base being measured per domain (the default).
    Adaptive = 0,
    /// RFC 4162 literally: pressure is drain time above the target.
    Fixed = 1,
}

mirror!(ry_target_mode <=> TargetMode: Adaptive, Fixed);

/// Which controller domain decided.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_domain_kind {
    /// The device (worker context) domain.
    Device = 0,
    /// The route (local context x remote NIC path) domain.
    Route = 1,
}

mirror!(ry_domain_kind <=> DomainKind: Device, Route);

/// Whether the CQ poller made progress during a control epoch.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_poller_status {
    /// The poller ran: software timeouts count as route timeouts.
    Progressing = 0,
    /// The poller stalled: this epoch's software timeouts are suppressed.
    Stalled = 1,
}

mirror!(ry_poller_status <=> PollerStatus: Progressing, Stalled);

/// How a release or feedback was settled.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_settlement {
    /// Accounting settled and the effect applied to the current generation.
    Current = 0,
    /// Accounting settled only: the feedback came from an old generation.
    Stale = 1,
}

mirror!(ry_settlement <=> Settlement: Current, Stale);

/// Rail selector score inputs with peer accounting on (RFC 4534).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_variant {
    /// Zero in-flight, nominal link rate.
    V0 = 0,
    /// NIC in-flight, NIC completion EWMA (the default).
    V1 = 1,
    /// NIC in-flight, peer completion EWMA.
    V2 = 2,
    /// Peer in-flight, peer completion EWMA.
    V3 = 3,
}

mirror!(ry_variant <=> Variant: V0, V1, V2, V3);
