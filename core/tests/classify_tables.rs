//! One test per row of RFC 4162's WC, async-event and non-WC tables, plus
//! totality over `u32`.

use proptest::prelude::*;
use railyard_core::classify::{
    classify_event, classify_signal, classify_wc, event, wc, Effect, FailureClass as C,
    FailureScope as S, ObjectHandling as H, Signal,
};
use railyard_core::evidence::{AnomalyState, Reason};

fn wc_row(statuses: &[u32], class: C, scope: S, handling: H, effect: Effect) {
    for &s in statuses {
        let c = classify_wc(s, 0xdead);
        assert!(c.known, "status {s}");
        assert_eq!(
            (c.class, c.scope, c.handling, c.effect),
            (class, scope, handling, effect),
            "status {s}"
        );
        assert_eq!(
            (c.status, c.vendor_err),
            (s, 0xdead),
            "raw values kept as evidence"
        );
        assert_eq!(c.counts_hard_error(), effect.counts_hard_error());
    }
}

// ---- WC matrix ----

#[test]
fn wc_success() {
    wc_row(
        &[wc::SUCCESS],
        C::Success,
        S::Operation,
        H::CompleteNormally,
        Effect::Success,
    );
    assert_eq!(classify_wc(wc::SUCCESS, 0).reason(), None);
}

#[test]
fn wc_success_with_rising_drain_is_congestion_row() {
    // Not a WC status: the epoch's verdict (see cc_state_machine's
    // healthy_to_congested_on_sustained_pressure_with_success). Its class maps to
    // CONGESTION_FEEDBACK, task CONGESTED, never a hard error.
    assert_eq!(
        railyard_core::classify::class_reason(C::Congestion),
        Some(Reason::CongestionFeedback)
    );
    assert_eq!(
        Reason::CongestionFeedback.task_state(),
        AnomalyState::Congested
    );
}

#[test]
fn wc_rnr_retry_exceeded_is_receiver_pressure() {
    wc_row(
        &[wc::RNR_RETRY_EXC_ERR],
        C::ReceiverPressure,
        S::Qp,
        H::RebuildQp,
        Effect::ReceiverPressure,
    );
    assert!(!classify_wc(wc::RNR_RETRY_EXC_ERR, 0).counts_hard_error());
}

#[test]
fn wc_retry_exceeded_and_response_timeout_are_route_timeouts() {
    wc_row(
        &[wc::RETRY_EXC_ERR, wc::RESP_TIMEOUT_ERR],
        C::RouteTimeout,
        S::Qp,
        H::RebuildQp,
        Effect::HardError,
    );
}

#[test]
fn wc_local_operation_errors_are_local_configuration_at_operation_scope() {
    wc_row(
        &[
            wc::LOC_LEN_ERR,
            wc::LOC_PROT_ERR,
            wc::MW_BIND_ERR,
            wc::LOC_ACCESS_ERR,
        ],
        C::LocalConfiguration,
        S::Operation,
        H::FailOperation,
        Effect::None,
    );
    assert_eq!(
        classify_wc(wc::LOC_LEN_ERR, 0)
            .reason()
            .unwrap()
            .task_state(),
        AnomalyState::Unknown
    );
}

#[test]
fn wc_local_qp_errors_are_local_configuration_at_qp_scope() {
    wc_row(
        &[
            wc::LOC_QP_OP_ERR,
            wc::LOC_EEC_OP_ERR,
            wc::LOC_RDD_VIOL_ERR,
            wc::INV_EECN_ERR,
            wc::INV_EEC_STATE_ERR,
        ],
        C::LocalConfiguration,
        S::Qp,
        H::RebuildLocalObject,
        Effect::None,
    );
}

#[test]
fn wc_remote_errors_are_remote_metadata() {
    wc_row(
        &[
            wc::BAD_RESP_ERR,
            wc::REM_INV_REQ_ERR,
            wc::REM_ACCESS_ERR,
            wc::REM_OP_ERR,
            wc::REM_INV_RD_REQ_ERR,
            wc::REM_ABORT_ERR,
        ],
        C::RemoteMetadata,
        S::Operation,
        H::RefreshMetadata,
        Effect::None,
    );
}

#[test]
fn wc_flush_is_derived_and_never_counted() {
    wc_row(
        &[wc::WR_FLUSH_ERR],
        C::DerivedFlush,
        S::Qp,
        H::CompleteTeardown,
        Effect::None,
    );
}

#[test]
fn wc_fatal_family_is_fatal_at_qp_scope_and_counted() {
    wc_row(
        &[
            wc::FATAL_ERR,
            wc::GENERAL_ERR,
            wc::TM_ERR,
            wc::TM_RNDV_INCOMPLETE,
        ],
        C::Fatal,
        S::Qp,
        H::StopReuse,
        Effect::HardError,
    );
}

#[test]
fn wc_unknown_status_fails_closed_at_qp_scope() {
    for s in [wc::MAX_KNOWN + 1, 100, 0x8000_0000, u32::MAX] {
        let c = classify_wc(s, 42);
        assert!(!c.known);
        assert_eq!(
            (c.class, c.scope, c.handling, c.effect),
            (C::Fatal, S::Qp, H::StopReuse, Effect::HardError)
        );
        assert_eq!((c.status, c.vendor_err), (s, 42));
    }
}

#[test]
fn wc_every_known_status_is_in_exactly_one_row() {
    for s in 0..=wc::MAX_KNOWN {
        assert!(
            classify_wc(s, 0).known,
            "status {s} must be classified by a table row"
        );
    }
}

#[test]
fn wc_classes_that_never_enter_hard_error_counters() {
    for s in 0..=wc::MAX_KNOWN {
        let c = classify_wc(s, 0);
        if matches!(
            c.class,
            C::LocalConfiguration | C::RemoteMetadata | C::DerivedFlush
        ) {
            assert!(!c.counts_hard_error(), "status {s}");
        }
    }
}

#[test]
fn wc_vendor_err_never_changes_the_result() {
    for s in 0..=wc::MAX_KNOWN + 3 {
        let a = classify_wc(s, 0);
        let b = classify_wc(s, u32::MAX);
        assert_eq!(
            (a.class, a.scope, a.handling, a.effect),
            (b.class, b.scope, b.handling, b.effect)
        );
    }
}

// ---- async event matrix ----

fn ev_row(events: &[u32], class: C, scope: S, handling: H, effect: Effect) {
    for &e in events {
        let c = classify_event(e);
        assert!(c.known, "event {e}");
        assert_eq!(
            (c.class, c.scope, c.handling, c.effect),
            (class, scope, handling, effect),
            "event {e}"
        );
        assert_eq!(c.event, e);
    }
}

#[test]
fn event_qp_errors_are_qp_scope_one_hard_error() {
    ev_row(
        &[event::QP_FATAL, event::QP_REQ_ERR, event::QP_ACCESS_ERR],
        C::Fatal,
        S::Qp,
        H::RebuildQp,
        Effect::HardError,
    );
}

#[test]
fn event_wq_and_srq_errors_report_at_qp_scope() {
    ev_row(
        &[event::WQ_FATAL, event::SRQ_ERR],
        C::Fatal,
        S::Qp,
        H::StopWqAndDependents,
        Effect::HardError,
    );
}

#[test]
fn event_cq_error_is_cq_scope_and_immediately_fatal() {
    ev_row(
        &[event::CQ_ERR],
        C::Fatal,
        S::Cq,
        H::IsolateCq,
        Effect::Quarantine,
    );
}

#[test]
fn event_path_migration_error_is_route_scope_one_hard_error() {
    ev_row(
        &[event::PATH_MIG_ERR],
        C::RouteTimeout,
        S::Route,
        H::StopMigrationPath,
        Effect::HardError,
    );
}

#[test]
fn event_port_error_isolates_the_port() {
    ev_row(
        &[event::PORT_ERR],
        C::Fatal,
        S::Port,
        H::IsolatePort,
        Effect::Quarantine,
    );
}

#[test]
fn event_device_fatal_isolates_the_local_device_only() {
    ev_row(
        &[event::DEVICE_FATAL],
        C::Fatal,
        S::Device,
        H::IsolateDevice,
        Effect::Quarantine,
    );
}

#[test]
fn event_non_failure_events_refresh_without_failure() {
    ev_row(
        &[
            event::PORT_ACTIVE,
            event::GID_CHANGE,
            event::LID_CHANGE,
            event::PKEY_CHANGE,
            event::PATH_MIG,
            event::COMM_EST,
            event::SQ_DRAINED,
            event::SM_CHANGE,
            event::SRQ_LIMIT_REACHED,
            event::QP_LAST_WQE_REACHED,
            event::CLIENT_REREGISTER,
        ],
        C::NonFailure,
        S::None,
        H::RefreshTopology,
        Effect::None,
    );
}

#[test]
fn event_unknown_changes_no_congestion_state() {
    for e in [event::MAX_KNOWN + 1, 1000, u32::MAX] {
        let c = classify_event(e);
        assert!(!c.known);
        assert_eq!(
            (c.class, c.scope, c.handling, c.effect),
            (C::Unclassified, S::None, H::LeaveToEventOwner, Effect::None)
        );
    }
}

#[test]
fn event_every_known_type_is_classified() {
    for e in 0..=event::MAX_KNOWN {
        assert!(classify_event(e).known, "event {e}");
    }
}

// ---- non-WC / control-plane matrix ----

fn sig_row(
    s: Signal,
    class: C,
    scope: S,
    handling: H,
    effect: Effect,
    reason: Reason,
    state: AnomalyState,
) {
    let c = classify_signal(s);
    assert_eq!(c.signal, s);
    assert_eq!(
        (c.class, c.scope, c.handling, c.effect),
        (class, scope, handling, effect),
        "{s:?}"
    );
    assert_eq!((c.reason, c.task_state), (reason, state), "{s:?}");
}

#[test]
fn signal_defer() {
    sig_row(
        Signal::AcquireDeferred,
        C::ByteWindow,
        S::Route,
        H::LeaveQueued,
        Effect::None,
        Reason::ByteWindow,
        AnomalyState::Congested,
    );
}

#[test]
fn signal_avoid_is_not_a_new_failure() {
    sig_row(
        Signal::AcquireAvoided,
        C::PathQuarantined,
        S::Route,
        H::UseAlternateRail,
        Effect::None,
        Reason::PathQuarantined,
        AnomalyState::LongUnavailable,
    );
}

#[test]
fn signal_generation_changed() {
    sig_row(
        Signal::GenerationChanged,
        C::GenerationChanged,
        S::Route,
        H::RollbackAndResolve,
        Effect::None,
        Reason::GenerationChanged,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_post_rejected_releases_and_fabricates_nothing() {
    sig_row(
        Signal::PostRejected,
        C::PostRejected,
        S::Operation,
        H::ReleaseUnposted,
        Effect::None,
        Reason::PostRejected,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_deadline_with_poller_progress_is_route_timeout() {
    sig_row(
        Signal::DeadlinePollerProgressing,
        C::RouteTimeout,
        S::Qp,
        H::RebuildQp,
        Effect::Timeout,
        Reason::RouteTimeout,
        AnomalyState::Congested,
    );
}

#[test]
fn signal_deadline_with_poller_stall_is_not_counted() {
    sig_row(
        Signal::DeadlinePollerStalled,
        C::PollerStall,
        S::None,
        H::RetainDiagnostics,
        Effect::None,
        Reason::PollerStall,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_read_only_rpc_failure() {
    sig_row(
        Signal::ReadOnlyRpcFailure,
        C::ControlPlane,
        S::None,
        H::RetryReadOnlyOnce,
        Effect::None,
        Reason::ControlPlane,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_mutating_rpc_failure() {
    sig_row(
        Signal::MutatingRpcFailure,
        C::ControlPlane,
        S::None,
        H::SingleAttempt,
        Effect::None,
        Reason::ControlPlane,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_stale_metadata() {
    sig_row(
        Signal::StaleMetadata,
        C::RemoteMetadata,
        S::Operation,
        H::RefreshMetadata,
        Effect::None,
        Reason::RemoteMetadata,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_cancellation_creates_no_root_failure() {
    sig_row(
        Signal::Cancellation,
        C::Cancelled,
        S::Operation,
        H::SettleAndRelease,
        Effect::None,
        Reason::Cancelled,
        AnomalyState::Unknown,
    );
}

#[test]
fn signal_all_rails_unavailable() {
    sig_row(
        Signal::AllRailsUnavailable,
        C::NoUsablePath,
        S::Route,
        H::DelegateFailover,
        Effect::None,
        Reason::NoUsablePath,
        AnomalyState::LongUnavailable,
    );
}

#[test]
fn signal_cm_disconnected_and_unreachable_are_route_scoped() {
    for s in [Signal::CmDisconnected, Signal::CmUnreachable] {
        sig_row(
            s,
            C::RouteConnection,
            S::Route,
            H::CmReconnect,
            Effect::HardError,
            Reason::RouteConnection,
            AnomalyState::Congested,
        );
    }
}

#[test]
fn signal_cm_device_removal_isolates_the_device_not_the_peer() {
    sig_row(
        Signal::CmDeviceRemoval,
        C::Fatal,
        S::Device,
        H::CmRemoveDevice,
        Effect::Quarantine,
        Reason::DeviceRemoved,
        AnomalyState::LongUnavailable,
    );
}

#[test]
fn every_signal_is_classified_consistently() {
    for s in Signal::ALL {
        let c = classify_signal(s);
        assert_eq!(c.task_state, c.reason.task_state());
    }
}

// ---- totality ----

#[test]
fn sampled_u32_range_is_total_and_fails_closed() {
    // Every 65 537th value plus both ends: a deterministic sample of the whole domain.
    let mut v: u64 = 0;
    while v <= u64::from(u32::MAX) {
        let s = v as u32;
        let c = classify_wc(s, s);
        if s > wc::MAX_KNOWN {
            assert_eq!((c.known, c.class, c.scope), (false, C::Fatal, S::Qp));
        }
        let e = classify_event(s);
        if s > event::MAX_KNOWN {
            assert_eq!((e.known, e.effect), (false, Effect::None));
        }
        v += 65_537;
    }
}

proptest! {
    #[test]
    fn classify_is_total_and_deterministic(status in any::<u32>(), vendor in any::<u32>(), ev in any::<u32>()) {
        let a = classify_wc(status, vendor);
        prop_assert_eq!(a, classify_wc(status, vendor));
        prop_assert_eq!(a.known, status <= wc::MAX_KNOWN);
        if !a.known {
            prop_assert_eq!((a.class, a.scope), (C::Fatal, S::Qp));
        }
        let e = classify_event(ev);
        prop_assert_eq!(e.known, ev <= event::MAX_KNOWN);
        if !e.known {
            prop_assert_eq!(e.effect, Effect::None);
        }
    }
}

// ---- async event → endpoint action (the one mapping every integrator uses) ----

#[test]
fn every_event_row_retires_at_its_scope() {
    use railyard_core::classify::{event_action, EventAction};
    use railyard_core::endpoint::RetireReason;
    let all = EventAction::RetireAll(RetireReason::ContextFatal);
    let qp = EventAction::RetireQp(RetireReason::QpFatal);
    for e in [event::DEVICE_FATAL, event::CQ_ERR, event::PORT_ERR] {
        assert_eq!(event_action(e), all, "event {e}");
    }
    for e in [
        event::QP_FATAL,
        event::QP_REQ_ERR,
        event::QP_ACCESS_ERR,
        event::PATH_MIG_ERR,
        event::WQ_FATAL,
        event::SRQ_ERR,
    ] {
        assert_eq!(event_action(e), qp, "event {e}");
    }
    for e in [
        event::COMM_EST,
        event::PORT_ACTIVE,
        event::SQ_DRAINED,
        12345,
    ] {
        assert_eq!(event_action(e), EventAction::Ignore, "event {e}");
    }
    assert_eq!(
        event_action(event::GID_CHANGE),
        EventAction::RetireAll(RetireReason::GidChange)
    );
    // Total: every value maps, and nothing else retires.
    for e in 0..=event::MAX_KNOWN + 3 {
        let a = event_action(e);
        let scope = classify_event(e).scope;
        if a == EventAction::Ignore {
            assert!(matches!(scope, S::None | S::Operation), "event {e}");
        }
    }
}
