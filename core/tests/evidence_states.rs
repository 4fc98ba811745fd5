//! Task anomaly evidence: one test per row of RFC 4162's caller-visible
//! table, plus multi-slice severity, attempts, fencing, bounds and read-only queries.

use railyard_core::classify::{classify_signal, classify_wc, wc, FailureScope, Signal};
use railyard_core::evidence::{
    AnomalyState, Observation, Observed, PathId, Reason, Recorded, TaskEvidence,
};
use railyard_core::slice::SliceRef;

fn s(index: u32, attempt: u32) -> SliceRef {
    SliceRef { index, attempt }
}

#[test]
fn row_success_without_unresolved_anomaly_is_normal() {
    let mut ev = TaskEvidence::<4>::new();
    ev.resolve(s(0, 0), 5);
    assert_eq!(ev.state(), AnomalyState::Normal);
}

#[test]
fn row_congestion_reasons_are_congested() {
    for r in [
        Reason::ByteWindow,
        Reason::ReceiverPressure,
        Reason::CongestionFeedback,
        Reason::RouteTimeout,
    ] {
        let mut ev = TaskEvidence::<4>::new();
        ev.record(s(0, 0), Observation::new(r, 1));
        assert_eq!(ev.state(), AnomalyState::Congested, "{r:?}");
    }
}

#[test]
fn row_unavailability_reasons_are_long_unavailable() {
    for r in [
        Reason::PathQuarantined,
        Reason::ProbeFailed,
        Reason::NoUsablePath,
    ] {
        let mut ev = TaskEvidence::<4>::new();
        ev.record(s(0, 0), Observation::new(r, 1));
        assert_eq!(ev.state(), AnomalyState::LongUnavailable, "{r:?}");
    }
}

#[test]
fn row_non_congestion_failures_are_unknown() {
    for r in [
        Reason::LocalConfiguration,
        Reason::RemoteMetadata,
        Reason::DerivedFlush,
        Reason::Fatal,
    ] {
        let mut ev = TaskEvidence::<4>::new();
        ev.record(s(0, 0), Observation::new(r, 1));
        assert_eq!(ev.state(), AnomalyState::Unknown, "{r:?}");
    }
    // Through the classifier: a local length error alone is UNKNOWN.
    let r = classify_wc(wc::LOC_LEN_ERR, 0).reason().unwrap();
    assert_eq!(r.task_state(), AnomalyState::Unknown);
}

#[test]
fn no_evidence_is_unknown() {
    let ev = TaskEvidence::<4>::new();
    let d = ev.detail();
    assert_eq!((d.state, d.winner), (AnomalyState::Unknown, None));
}

#[test]
fn most_severe_unresolved_state_wins() {
    let mut ev = TaskEvidence::<4>::new();
    ev.record(s(0, 0), Observation::new(Reason::LocalConfiguration, 1));
    assert_eq!(ev.state(), AnomalyState::Unknown);
    ev.record(s(1, 0), Observation::new(Reason::ByteWindow, 2));
    assert_eq!(ev.state(), AnomalyState::Congested);
    ev.record(s(2, 0), Observation::new(Reason::PathQuarantined, 3));
    ev.record(s(3, 0), Observation::new(Reason::RouteTimeout, 4));
    assert_eq!(ev.state(), AnomalyState::LongUnavailable);
    assert_eq!(ev.detail().winner.unwrap().reason, Reason::PathQuarantined);
    ev.resolve(s(2, 0), 5);
    assert_eq!(ev.state(), AnomalyState::Congested);
    assert_eq!(
        ev.detail().winner.unwrap().reason,
        Reason::RouteTimeout,
        "most recent among equals"
    );
    ev.resolve(s(1, 0), 6);
    ev.resolve(s(3, 0), 6);
    ev.resolve(s(0, 0), 6);
    assert_eq!(ev.state(), AnomalyState::Normal);
    assert!(ev.detail().winner.unwrap().resolved);
}

#[test]
fn new_attempt_clears_old_blocking_evidence_and_late_feedback_cannot_overwrite() {
    let mut ev = TaskEvidence::<4>::new();
    ev.record(s(0, 1), Observation::new(Reason::PathQuarantined, 1));
    assert_eq!(ev.state(), AnomalyState::LongUnavailable);
    ev.begin_attempt(s(0, 2));
    assert_ne!(ev.state(), AnomalyState::LongUnavailable);
    ev.record(s(0, 2), Observation::new(Reason::ByteWindow, 3));
    assert_eq!(ev.state(), AnomalyState::Congested);
    // Late evidence from attempt 1.
    assert_eq!(
        ev.record(s(0, 1), Observation::new(Reason::ProbeFailed, 4)),
        Recorded::Stale
    );
    assert_eq!(ev.state(), AnomalyState::Congested);
    assert_eq!(ev.detail().stale, 1);
    // A late success of attempt 1 cannot resolve attempt 2's evidence either... it is older,
    // so it may only resolve evidence of its own or older attempts.
    assert!(!ev.resolve(s(0, 1), 5));
    assert_eq!(ev.state(), AnomalyState::Congested);
}

#[test]
fn older_generation_within_an_attempt_cannot_overwrite() {
    let mut ev = TaskEvidence::<4>::new();
    let mut newer = Observation::new(Reason::RouteTimeout, 2);
    newer.generation = Observed::Value(8);
    ev.record(s(0, 1), newer);
    let mut older = Observation::new(Reason::PathQuarantined, 3);
    older.generation = Observed::Value(7);
    assert_eq!(ev.record(s(0, 1), older), Recorded::Stale);
    assert_eq!(ev.detail().winner.unwrap().reason, Reason::RouteTimeout);
    // Generations wrap.
    let mut wrapped = Observation::new(Reason::ByteWindow, 4);
    wrapped.generation = Observed::Value(u32::MAX);
    let mut ev2 = TaskEvidence::<2>::new();
    let mut g0 = Observation::new(Reason::RouteTimeout, 1);
    g0.generation = Observed::Value(0);
    ev2.record(s(0, 0), g0);
    assert_eq!(
        ev2.record(s(0, 0), wrapped),
        Recorded::Stale,
        "u32::MAX precedes 0 after wrap"
    );
}

#[test]
fn detailed_query_marks_unobserved_fields() {
    let mut ev = TaskEvidence::<2>::new();
    let mut o = Observation::new(Reason::PathQuarantined, 10);
    o.scope = Observed::Value(FailureScope::Route);
    o.path = Observed::Value(PathId {
        device: 1,
        route: 3,
    });
    o.window = Observed::Value(4096);
    ev.record(s(5, 2), o);
    let w = ev.detail().winner.unwrap();
    assert_eq!(w.reason, Reason::PathQuarantined);
    assert_eq!(w.slice, s(5, 2));
    assert_eq!(w.observed_ns, 10);
    assert!(!w.resolved);
    assert_eq!(
        w.path.get(),
        Some(PathId {
            device: 1,
            route: 3
        })
    );
    assert_eq!(w.window.get(), Some(4096));
    assert_eq!(w.in_flight, Observed::Unobserved);
    assert_eq!(w.cooldown_remaining_ns, Observed::Unobserved);
    assert_eq!(w.generation, Observed::Unobserved);
}

#[test]
fn queries_never_mutate() {
    let mut ev = TaskEvidence::<3>::new();
    ev.record(s(0, 0), Observation::new(Reason::ByteWindow, 1));
    ev.record(s(1, 0), Observation::new(Reason::Fatal, 2));
    let before = format!("{ev:?}");
    for _ in 0..10 {
        let _ = ev.state();
        let _ = ev.detail();
    }
    assert_eq!(format!("{ev:?}"), before);
}

#[test]
fn storage_is_bounded_and_keeps_the_most_severe() {
    let mut ev = TaskEvidence::<2>::new();
    assert_eq!(ev.capacity(), 2);
    ev.record(s(0, 0), Observation::new(Reason::LocalConfiguration, 1));
    ev.record(s(1, 0), Observation::new(Reason::ByteWindow, 2));
    // Full: a less severe one is dropped...
    assert_eq!(
        ev.record(s(2, 0), Observation::new(Reason::DerivedFlush, 3)),
        Recorded::Dropped
    );
    // ...a more severe one evicts the least severe.
    assert_eq!(
        ev.record(s(3, 0), Observation::new(Reason::NoUsablePath, 4)),
        Recorded::Stored
    );
    assert_eq!(ev.state(), AnomalyState::LongUnavailable);
    assert_eq!(ev.detail().dropped, 2);
    // A resolved slot is evicted first.
    ev.resolve(s(1, 0), 5);
    assert_eq!(
        ev.record(s(4, 0), Observation::new(Reason::Fatal, 6)),
        Recorded::Stored
    );
    assert_eq!(ev.state(), AnomalyState::LongUnavailable);
}

#[test]
fn signal_classifications_feed_evidence() {
    let mut ev = TaskEvidence::<4>::new();
    let c = classify_signal(Signal::DeadlinePollerStalled);
    ev.record(s(0, 0), Observation::new(c.reason, 1));
    assert_eq!(
        ev.state(),
        AnomalyState::Unknown,
        "a poller stall does not blame the network"
    );
    let c = classify_signal(Signal::AcquireAvoided);
    ev.record(s(1, 0), Observation::new(c.reason, 2));
    assert_eq!(ev.state(), AnomalyState::LongUnavailable);
}
