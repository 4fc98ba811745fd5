//! C mirrors of railyard's enums: `repr(u32)`, stable values. In C each is
//! a `uint32_t` typedef plus named constants. Values a caller passes in are
//! checked (`RY_STATUS_INVALID_ARGUMENT`), never transmuted.

use crate::error::{Error, Result};

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

impl From<railyard_core::classify::FailureClass> for ry_failure_class {
    fn from(v: railyard_core::classify::FailureClass) -> Self {
        match v {
            railyard_core::classify::FailureClass::Success => ry_failure_class::Success,
            railyard_core::classify::FailureClass::Congestion => ry_failure_class::Congestion,
            railyard_core::classify::FailureClass::ReceiverPressure => {
                ry_failure_class::ReceiverPressure
            }
            railyard_core::classify::FailureClass::RouteTimeout => ry_failure_class::RouteTimeout,
            railyard_core::classify::FailureClass::LocalConfiguration => {
                ry_failure_class::LocalConfiguration
            }
            railyard_core::classify::FailureClass::RemoteMetadata => {
                ry_failure_class::RemoteMetadata
            }
            railyard_core::classify::FailureClass::DerivedFlush => ry_failure_class::DerivedFlush,
            railyard_core::classify::FailureClass::Fatal => ry_failure_class::Fatal,
            railyard_core::classify::FailureClass::RouteConnection => {
                ry_failure_class::RouteConnection
            }
            railyard_core::classify::FailureClass::NoUsablePath => ry_failure_class::NoUsablePath,
            railyard_core::classify::FailureClass::ByteWindow => ry_failure_class::ByteWindow,
            railyard_core::classify::FailureClass::PathQuarantined => {
                ry_failure_class::PathQuarantined
            }
            railyard_core::classify::FailureClass::GenerationChanged => {
                ry_failure_class::GenerationChanged
            }
            railyard_core::classify::FailureClass::PostRejected => ry_failure_class::PostRejected,
            railyard_core::classify::FailureClass::PollerStall => ry_failure_class::PollerStall,
            railyard_core::classify::FailureClass::ControlPlane => ry_failure_class::ControlPlane,
            railyard_core::classify::FailureClass::Cancelled => ry_failure_class::Cancelled,
            railyard_core::classify::FailureClass::NonFailure => ry_failure_class::NonFailure,
            railyard_core::classify::FailureClass::Unclassified => ry_failure_class::Unclassified,
        }
    }
}

impl ry_failure_class {
    /// The core value of a C `ry_failure_class`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::classify::FailureClass> {
        Ok(match v {
            0 => railyard_core::classify::FailureClass::Success,
            1 => railyard_core::classify::FailureClass::Congestion,
            2 => railyard_core::classify::FailureClass::ReceiverPressure,
            3 => railyard_core::classify::FailureClass::RouteTimeout,
            4 => railyard_core::classify::FailureClass::LocalConfiguration,
            5 => railyard_core::classify::FailureClass::RemoteMetadata,
            6 => railyard_core::classify::FailureClass::DerivedFlush,
            7 => railyard_core::classify::FailureClass::Fatal,
            8 => railyard_core::classify::FailureClass::RouteConnection,
            9 => railyard_core::classify::FailureClass::NoUsablePath,
            10 => railyard_core::classify::FailureClass::ByteWindow,
            11 => railyard_core::classify::FailureClass::PathQuarantined,
            12 => railyard_core::classify::FailureClass::GenerationChanged,
            13 => railyard_core::classify::FailureClass::PostRejected,
            14 => railyard_core::classify::FailureClass::PollerStall,
            15 => railyard_core::classify::FailureClass::ControlPlane,
            16 => railyard_core::classify::FailureClass::Cancelled,
            17 => railyard_core::classify::FailureClass::NonFailure,
            18 => railyard_core::classify::FailureClass::Unclassified,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_failure_class"
                )))
            }
        })
    }
}

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

impl From<railyard_core::classify::FailureScope> for ry_failure_scope {
    fn from(v: railyard_core::classify::FailureScope) -> Self {
        match v {
            railyard_core::classify::FailureScope::None => ry_failure_scope::None,
            railyard_core::classify::FailureScope::Operation => ry_failure_scope::Operation,
            railyard_core::classify::FailureScope::Qp => ry_failure_scope::Qp,
            railyard_core::classify::FailureScope::Cq => ry_failure_scope::Cq,
            railyard_core::classify::FailureScope::Route => ry_failure_scope::Route,
            railyard_core::classify::FailureScope::Port => ry_failure_scope::Port,
            railyard_core::classify::FailureScope::Device => ry_failure_scope::Device,
        }
    }
}

impl ry_failure_scope {
    /// The core value of a C `ry_failure_scope`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::classify::FailureScope> {
        Ok(match v {
            0 => railyard_core::classify::FailureScope::None,
            1 => railyard_core::classify::FailureScope::Operation,
            2 => railyard_core::classify::FailureScope::Qp,
            3 => railyard_core::classify::FailureScope::Cq,
            4 => railyard_core::classify::FailureScope::Route,
            5 => railyard_core::classify::FailureScope::Port,
            6 => railyard_core::classify::FailureScope::Device,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_failure_scope"
                )))
            }
        })
    }
}

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

impl From<railyard_core::classify::ObjectHandling> for ry_object_handling {
    fn from(v: railyard_core::classify::ObjectHandling) -> Self {
        match v {
            railyard_core::classify::ObjectHandling::CompleteNormally => {
                ry_object_handling::CompleteNormally
            }
            railyard_core::classify::ObjectHandling::ContinueUsing => {
                ry_object_handling::ContinueUsing
            }
            railyard_core::classify::ObjectHandling::RebuildQp => ry_object_handling::RebuildQp,
            railyard_core::classify::ObjectHandling::FailOperation => {
                ry_object_handling::FailOperation
            }
            railyard_core::classify::ObjectHandling::RebuildLocalObject => {
                ry_object_handling::RebuildLocalObject
            }
            railyard_core::classify::ObjectHandling::RefreshMetadata => {
                ry_object_handling::RefreshMetadata
            }
            railyard_core::classify::ObjectHandling::CompleteTeardown => {
                ry_object_handling::CompleteTeardown
            }
            railyard_core::classify::ObjectHandling::StopReuse => ry_object_handling::StopReuse,
            railyard_core::classify::ObjectHandling::StopWqAndDependents => {
                ry_object_handling::StopWqAndDependents
            }
            railyard_core::classify::ObjectHandling::IsolateCq => ry_object_handling::IsolateCq,
            railyard_core::classify::ObjectHandling::StopMigrationPath => {
                ry_object_handling::StopMigrationPath
            }
            railyard_core::classify::ObjectHandling::IsolatePort => ry_object_handling::IsolatePort,
            railyard_core::classify::ObjectHandling::IsolateDevice => {
                ry_object_handling::IsolateDevice
            }
            railyard_core::classify::ObjectHandling::RefreshTopology => {
                ry_object_handling::RefreshTopology
            }
            railyard_core::classify::ObjectHandling::LeaveToEventOwner => {
                ry_object_handling::LeaveToEventOwner
            }
            railyard_core::classify::ObjectHandling::LeaveQueued => ry_object_handling::LeaveQueued,
            railyard_core::classify::ObjectHandling::UseAlternateRail => {
                ry_object_handling::UseAlternateRail
            }
            railyard_core::classify::ObjectHandling::RollbackAndResolve => {
                ry_object_handling::RollbackAndResolve
            }
            railyard_core::classify::ObjectHandling::ReleaseUnposted => {
                ry_object_handling::ReleaseUnposted
            }
            railyard_core::classify::ObjectHandling::RetainDiagnostics => {
                ry_object_handling::RetainDiagnostics
            }
            railyard_core::classify::ObjectHandling::RetryReadOnlyOnce => {
                ry_object_handling::RetryReadOnlyOnce
            }
            railyard_core::classify::ObjectHandling::SingleAttempt => {
                ry_object_handling::SingleAttempt
            }
            railyard_core::classify::ObjectHandling::SettleAndRelease => {
                ry_object_handling::SettleAndRelease
            }
            railyard_core::classify::ObjectHandling::DelegateFailover => {
                ry_object_handling::DelegateFailover
            }
            railyard_core::classify::ObjectHandling::CmReconnect => ry_object_handling::CmReconnect,
            railyard_core::classify::ObjectHandling::CmRemoveDevice => {
                ry_object_handling::CmRemoveDevice
            }
        }
    }
}

impl ry_object_handling {
    /// The core value of a C `ry_object_handling`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::classify::ObjectHandling> {
        Ok(match v {
            0 => railyard_core::classify::ObjectHandling::CompleteNormally,
            1 => railyard_core::classify::ObjectHandling::ContinueUsing,
            2 => railyard_core::classify::ObjectHandling::RebuildQp,
            3 => railyard_core::classify::ObjectHandling::FailOperation,
            4 => railyard_core::classify::ObjectHandling::RebuildLocalObject,
            5 => railyard_core::classify::ObjectHandling::RefreshMetadata,
            6 => railyard_core::classify::ObjectHandling::CompleteTeardown,
            7 => railyard_core::classify::ObjectHandling::StopReuse,
            8 => railyard_core::classify::ObjectHandling::StopWqAndDependents,
            9 => railyard_core::classify::ObjectHandling::IsolateCq,
            10 => railyard_core::classify::ObjectHandling::StopMigrationPath,
            11 => railyard_core::classify::ObjectHandling::IsolatePort,
            12 => railyard_core::classify::ObjectHandling::IsolateDevice,
            13 => railyard_core::classify::ObjectHandling::RefreshTopology,
            14 => railyard_core::classify::ObjectHandling::LeaveToEventOwner,
            15 => railyard_core::classify::ObjectHandling::LeaveQueued,
            16 => railyard_core::classify::ObjectHandling::UseAlternateRail,
            17 => railyard_core::classify::ObjectHandling::RollbackAndResolve,
            18 => railyard_core::classify::ObjectHandling::ReleaseUnposted,
            19 => railyard_core::classify::ObjectHandling::RetainDiagnostics,
            20 => railyard_core::classify::ObjectHandling::RetryReadOnlyOnce,
            21 => railyard_core::classify::ObjectHandling::SingleAttempt,
            22 => railyard_core::classify::ObjectHandling::SettleAndRelease,
            23 => railyard_core::classify::ObjectHandling::DelegateFailover,
            24 => railyard_core::classify::ObjectHandling::CmReconnect,
            25 => railyard_core::classify::ObjectHandling::CmRemoveDevice,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_object_handling"
                )))
            }
        })
    }
}

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

impl From<railyard_core::classify::Effect> for ry_effect {
    fn from(v: railyard_core::classify::Effect) -> Self {
        match v {
            railyard_core::classify::Effect::None => ry_effect::None,
            railyard_core::classify::Effect::Success => ry_effect::Success,
            railyard_core::classify::Effect::ReceiverPressure => ry_effect::ReceiverPressure,
            railyard_core::classify::Effect::HardError => ry_effect::HardError,
            railyard_core::classify::Effect::Timeout => ry_effect::Timeout,
            railyard_core::classify::Effect::Quarantine => ry_effect::Quarantine,
        }
    }
}

impl ry_effect {
    /// The core value of a C `ry_effect`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::classify::Effect> {
        Ok(match v {
            0 => railyard_core::classify::Effect::None,
            1 => railyard_core::classify::Effect::Success,
            2 => railyard_core::classify::Effect::ReceiverPressure,
            3 => railyard_core::classify::Effect::HardError,
            4 => railyard_core::classify::Effect::Timeout,
            5 => railyard_core::classify::Effect::Quarantine,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_effect"
                )))
            }
        })
    }
}

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

impl From<railyard_core::classify::Signal> for ry_signal {
    fn from(v: railyard_core::classify::Signal) -> Self {
        match v {
            railyard_core::classify::Signal::AcquireDeferred => ry_signal::AcquireDeferred,
            railyard_core::classify::Signal::AcquireAvoided => ry_signal::AcquireAvoided,
            railyard_core::classify::Signal::GenerationChanged => ry_signal::GenerationChanged,
            railyard_core::classify::Signal::PostRejected => ry_signal::PostRejected,
            railyard_core::classify::Signal::DeadlinePollerProgressing => {
                ry_signal::DeadlinePollerProgressing
            }
            railyard_core::classify::Signal::DeadlinePollerStalled => {
                ry_signal::DeadlinePollerStalled
            }
            railyard_core::classify::Signal::ReadOnlyRpcFailure => ry_signal::ReadOnlyRpcFailure,
            railyard_core::classify::Signal::MutatingRpcFailure => ry_signal::MutatingRpcFailure,
            railyard_core::classify::Signal::StaleMetadata => ry_signal::StaleMetadata,
            railyard_core::classify::Signal::Cancellation => ry_signal::Cancellation,
            railyard_core::classify::Signal::AllRailsUnavailable => ry_signal::AllRailsUnavailable,
            railyard_core::classify::Signal::CmDisconnected => ry_signal::CmDisconnected,
            railyard_core::classify::Signal::CmUnreachable => ry_signal::CmUnreachable,
            railyard_core::classify::Signal::CmDeviceRemoval => ry_signal::CmDeviceRemoval,
        }
    }
}

impl ry_signal {
    /// The core value of a C `ry_signal`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::classify::Signal> {
        Ok(match v {
            0 => railyard_core::classify::Signal::AcquireDeferred,
            1 => railyard_core::classify::Signal::AcquireAvoided,
            2 => railyard_core::classify::Signal::GenerationChanged,
            3 => railyard_core::classify::Signal::PostRejected,
            4 => railyard_core::classify::Signal::DeadlinePollerProgressing,
            5 => railyard_core::classify::Signal::DeadlinePollerStalled,
            6 => railyard_core::classify::Signal::ReadOnlyRpcFailure,
            7 => railyard_core::classify::Signal::MutatingRpcFailure,
            8 => railyard_core::classify::Signal::StaleMetadata,
            9 => railyard_core::classify::Signal::Cancellation,
            10 => railyard_core::classify::Signal::AllRailsUnavailable,
            11 => railyard_core::classify::Signal::CmDisconnected,
            12 => railyard_core::classify::Signal::CmUnreachable,
            13 => railyard_core::classify::Signal::CmDeviceRemoval,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_signal"
                )))
            }
        })
    }
}

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

impl From<railyard_core::evidence::Reason> for ry_reason {
    fn from(v: railyard_core::evidence::Reason) -> Self {
        match v {
            railyard_core::evidence::Reason::ByteWindow => ry_reason::ByteWindow,
            railyard_core::evidence::Reason::ReceiverPressure => ry_reason::ReceiverPressure,
            railyard_core::evidence::Reason::CongestionFeedback => ry_reason::CongestionFeedback,
            railyard_core::evidence::Reason::RouteTimeout => ry_reason::RouteTimeout,
            railyard_core::evidence::Reason::RouteConnection => ry_reason::RouteConnection,
            railyard_core::evidence::Reason::PathQuarantined => ry_reason::PathQuarantined,
            railyard_core::evidence::Reason::ProbeFailed => ry_reason::ProbeFailed,
            railyard_core::evidence::Reason::NoUsablePath => ry_reason::NoUsablePath,
            railyard_core::evidence::Reason::DeviceRemoved => ry_reason::DeviceRemoved,
            railyard_core::evidence::Reason::LocalConfiguration => ry_reason::LocalConfiguration,
            railyard_core::evidence::Reason::RemoteMetadata => ry_reason::RemoteMetadata,
            railyard_core::evidence::Reason::DerivedFlush => ry_reason::DerivedFlush,
            railyard_core::evidence::Reason::Fatal => ry_reason::Fatal,
            railyard_core::evidence::Reason::GenerationChanged => ry_reason::GenerationChanged,
            railyard_core::evidence::Reason::PostRejected => ry_reason::PostRejected,
            railyard_core::evidence::Reason::PollerStall => ry_reason::PollerStall,
            railyard_core::evidence::Reason::ControlPlane => ry_reason::ControlPlane,
            railyard_core::evidence::Reason::Cancelled => ry_reason::Cancelled,
        }
    }
}

impl ry_reason {
    /// The core value of a C `ry_reason`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::evidence::Reason> {
        Ok(match v {
            0 => railyard_core::evidence::Reason::ByteWindow,
            1 => railyard_core::evidence::Reason::ReceiverPressure,
            2 => railyard_core::evidence::Reason::CongestionFeedback,
            3 => railyard_core::evidence::Reason::RouteTimeout,
            4 => railyard_core::evidence::Reason::RouteConnection,
            5 => railyard_core::evidence::Reason::PathQuarantined,
            6 => railyard_core::evidence::Reason::ProbeFailed,
            7 => railyard_core::evidence::Reason::NoUsablePath,
            8 => railyard_core::evidence::Reason::DeviceRemoved,
            9 => railyard_core::evidence::Reason::LocalConfiguration,
            10 => railyard_core::evidence::Reason::RemoteMetadata,
            11 => railyard_core::evidence::Reason::DerivedFlush,
            12 => railyard_core::evidence::Reason::Fatal,
            13 => railyard_core::evidence::Reason::GenerationChanged,
            14 => railyard_core::evidence::Reason::PostRejected,
            15 => railyard_core::evidence::Reason::PollerStall,
            16 => railyard_core::evidence::Reason::ControlPlane,
            17 => railyard_core::evidence::Reason::Cancelled,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_reason"
                )))
            }
        })
    }
}

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

impl From<railyard_core::evidence::AnomalyState> for ry_task_state {
    fn from(v: railyard_core::evidence::AnomalyState) -> Self {
        match v {
            railyard_core::evidence::AnomalyState::Normal => ry_task_state::Normal,
            railyard_core::evidence::AnomalyState::Unknown => ry_task_state::Unknown,
            railyard_core::evidence::AnomalyState::Congested => ry_task_state::Congested,
            railyard_core::evidence::AnomalyState::LongUnavailable => {
                ry_task_state::LongUnavailable
            }
        }
    }
}

impl ry_task_state {
    /// The core value of a C `ry_task_state`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::evidence::AnomalyState> {
        Ok(match v {
            0 => railyard_core::evidence::AnomalyState::Normal,
            1 => railyard_core::evidence::AnomalyState::Unknown,
            2 => railyard_core::evidence::AnomalyState::Congested,
            3 => railyard_core::evidence::AnomalyState::LongUnavailable,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_task_state"
                )))
            }
        })
    }
}

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

impl From<railyard_core::cc::Health> for ry_health {
    fn from(v: railyard_core::cc::Health) -> Self {
        match v {
            railyard_core::cc::Health::Healthy => ry_health::Healthy,
            railyard_core::cc::Health::Congested => ry_health::Congested,
            railyard_core::cc::Health::Suspect => ry_health::Suspect,
            railyard_core::cc::Health::Quarantined => ry_health::Quarantined,
            railyard_core::cc::Health::Probing => ry_health::Probing,
        }
    }
}

impl ry_health {
    /// The core value of a C `ry_health`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::cc::Health> {
        Ok(match v {
            0 => railyard_core::cc::Health::Healthy,
            1 => railyard_core::cc::Health::Congested,
            2 => railyard_core::cc::Health::Suspect,
            3 => railyard_core::cc::Health::Quarantined,
            4 => railyard_core::cc::Health::Probing,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_health"
                )))
            }
        })
    }
}

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

impl From<railyard_core::cc::Mode> for ry_mode {
    fn from(v: railyard_core::cc::Mode) -> Self {
        match v {
            railyard_core::cc::Mode::Off => ry_mode::Off,
            railyard_core::cc::Mode::Observe => ry_mode::Observe,
            railyard_core::cc::Mode::Enforce => ry_mode::Enforce,
        }
    }
}

impl ry_mode {
    /// The core value of a C `ry_mode`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::cc::Mode> {
        Ok(match v {
            0 => railyard_core::cc::Mode::Off,
            1 => railyard_core::cc::Mode::Observe,
            2 => railyard_core::cc::Mode::Enforce,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_mode"
                )))
            }
        })
    }
}

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

impl From<railyard_core::cc::TargetMode> for ry_target_mode {
    fn from(v: railyard_core::cc::TargetMode) -> Self {
        match v {
            railyard_core::cc::TargetMode::Adaptive => ry_target_mode::Adaptive,
            railyard_core::cc::TargetMode::Fixed => ry_target_mode::Fixed,
        }
    }
}

impl ry_target_mode {
    /// The core value of a C `ry_target_mode`, or `RY_STATUS_INVALID_ARGUMENT`.
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::cc::TargetMode> {
        Ok(match v {
            0 => railyard_core::cc::TargetMode::Adaptive,
            1 => railyard_core::cc::TargetMode::Fixed,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_target_mode"
                )))
            }
        })
    }
}

/// Which controller domain decided.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_domain_kind {
    /// The device (worker context) domain.
    Device = 0,
    /// The route (local context x remote NIC path) domain.
    Route = 1,
}

impl From<railyard_core::cc::DomainKind> for ry_domain_kind {
    fn from(v: railyard_core::cc::DomainKind) -> Self {
        match v {
            railyard_core::cc::DomainKind::Device => ry_domain_kind::Device,
            railyard_core::cc::DomainKind::Route => ry_domain_kind::Route,
        }
    }
}

impl ry_domain_kind {
    /// The core value of a C `ry_domain_kind`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::cc::DomainKind> {
        Ok(match v {
            0 => railyard_core::cc::DomainKind::Device,
            1 => railyard_core::cc::DomainKind::Route,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_domain_kind"
                )))
            }
        })
    }
}

/// Whether the CQ poller made progress during a control epoch.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_poller_status {
    /// The poller ran: software timeouts count as route timeouts.
    Progressing = 0,
    /// The poller stalled: this epoch's software timeouts are suppressed.
    Stalled = 1,
}

impl From<railyard_core::cc::PollerStatus> for ry_poller_status {
    fn from(v: railyard_core::cc::PollerStatus) -> Self {
        match v {
            railyard_core::cc::PollerStatus::Progressing => ry_poller_status::Progressing,
            railyard_core::cc::PollerStatus::Stalled => ry_poller_status::Stalled,
        }
    }
}

impl ry_poller_status {
    /// The core value of a C `ry_poller_status`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::cc::PollerStatus> {
        Ok(match v {
            0 => railyard_core::cc::PollerStatus::Progressing,
            1 => railyard_core::cc::PollerStatus::Stalled,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_poller_status"
                )))
            }
        })
    }
}

/// How a release or feedback was settled.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_settlement {
    /// Accounting settled and the effect applied to the current generation.
    Current = 0,
    /// Accounting settled only: the feedback came from an old generation.
    Stale = 1,
}

impl From<railyard_core::cc::Settlement> for ry_settlement {
    fn from(v: railyard_core::cc::Settlement) -> Self {
        match v {
            railyard_core::cc::Settlement::Current => ry_settlement::Current,
            railyard_core::cc::Settlement::Stale => ry_settlement::Stale,
        }
    }
}

impl ry_settlement {
    /// The core value of a C `ry_settlement`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::cc::Settlement> {
        Ok(match v {
            0 => railyard_core::cc::Settlement::Current,
            1 => railyard_core::cc::Settlement::Stale,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_settlement"
                )))
            }
        })
    }
}

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

impl From<railyard_core::rail::Variant> for ry_variant {
    fn from(v: railyard_core::rail::Variant) -> Self {
        match v {
            railyard_core::rail::Variant::V0 => ry_variant::V0,
            railyard_core::rail::Variant::V1 => ry_variant::V1,
            railyard_core::rail::Variant::V2 => ry_variant::V2,
            railyard_core::rail::Variant::V3 => ry_variant::V3,
        }
    }
}

impl ry_variant {
    /// The core value of a C `ry_variant`, or `RY_STATUS_INVALID_ARGUMENT`.
    #[allow(dead_code)]
    pub(crate) fn to_core(v: u32, what: &str) -> Result<railyard_core::rail::Variant> {
        Ok(match v {
            0 => railyard_core::rail::Variant::V0,
            1 => railyard_core::rail::Variant::V1,
            2 => railyard_core::rail::Variant::V2,
            3 => railyard_core::rail::Variant::V3,
            _ => {
                return Err(Error::invalid(format_args!(
                    "{what}: {v} is not a valid ry_variant"
                )))
            }
        })
    }
}
