//! The path state machine, arrow by arrow, through the real controller and
//! monitor; plus generation fencing, poller-stall suppression, receiver
//! pressure and scope isolation (RFC 4162).
#![cfg(feature = "adaptive-cc")]

use railyard_core::cc::{
    Admission, CcConfig, Controller, DomainKind, Health, Mode, Monitor, Permit, PollerStatus,
    TargetMode,
};
use railyard_core::classify::{classify_event, classify_wc, event, wc, Effect};
use railyard_core::time::NS_PER_MS;

const MS: u64 = NS_PER_MS;
const GO: PollerStatus = PollerStatus::Progressing;

fn cfg() -> CcConfig {
    CcConfig {
        mode: Mode::Enforce,
        min_window_bytes: 1_000,
        max_window_bytes: 10_000,
        initial_window_bytes: Some(4_000),
        target_drain_us: 100,
        target_mode: TargetMode::Fixed,
        software_drain: None,
        high_pressure_epochs: 2,
        low_pressure_epochs: 2,
        hard_error_threshold: 3,
        cooldown_ms: 10,
        probe_window_bytes: Some(500),
        additive_increase_bytes: 1_000,
        decrease_percent: 50,
    }
}

/// Device 0: routes 0, 1. Device 1: route 2.
struct Rig {
    c: Controller,
    m: Monitor,
    now: u64,
}

impl Rig {
    fn new() -> Self {
        let (c, mut m) = Controller::new(&cfg(), 2, &[0, 0, 1]).unwrap();
        m.on_epoch(&c, 0, GO);
        Self { c, m, now: 0 }
    }
    fn epoch(&mut self, poller: PollerStatus) {
        self.now += MS;
        self.m.on_epoch(&self.c, self.now, poller);
    }
    fn route(&self, r: u32) -> Health {
        self.c.route_snapshot(r).unwrap().health
    }
    fn device(&self, d: u16) -> Health {
        self.c.device_snapshot(d).unwrap().health
    }
    fn gen(&self, r: u32) -> u32 {
        self.c.route_generation(r).unwrap()
    }
    fn acquire(&self, d: u16, r: u32, bytes: u32) -> Permit {
        match self.c.try_acquire(d, r, bytes, self.now).unwrap() {
            Admission::Admit(p) => p,
            other => panic!("expected Admit, got {other:?}"),
        }
    }
    fn hard_error(&self, r: u32) {
        let g = self.gen(r);
        self.c
            .route_feedback(r, g, classify_wc(wc::RETRY_EXC_ERR, 0).effect)
            .unwrap();
    }
    fn success(&self, d: u16, r: u32) {
        let p = self.acquire(d, r, 10);
        self.c.release(p, Effect::Success).unwrap();
    }
    /// Drive route `r` (device `d`) to CONGESTED with a stuck backlog.
    fn congest(&mut self, d: u16, r: u32) -> Permit {
        let p = self.acquire(d, r, 3_000);
        self.epoch(GO);
        assert_eq!(
            self.route(r),
            Health::Healthy,
            "one pressured epoch is inside the hysteresis band"
        );
        self.epoch(GO);
        assert_eq!(self.route(r), Health::Congested);
        p
    }
    fn quarantine(&mut self, r: u32) {
        for _ in 0..3 {
            self.hard_error(r);
        }
        assert_eq!(self.route(r), Health::Quarantined);
    }
    fn drive_to_probing(&mut self, r: u32) {
        self.quarantine(r);
        self.epoch(GO); // starts the cooldown
        for _ in 0..10 {
            self.epoch(GO);
        }
        assert_eq!(self.route(r), Health::Probing);
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            assert_eq!(self.c.stats().illegal_transitions, 0);
        }
    }
}

#[test]
fn healthy_to_congested_on_sustained_pressure_with_success() {
    // Also the WC-matrix row "success while drain time/backlog keeps rising":
    // CONGESTED, only the window shrinks, no quarantine, no rail replacement.
    let mut t = Rig::new();
    let p = t.congest(0, 0);
    assert_eq!(t.c.route_snapshot(0).unwrap().window, 2_000);
    assert_eq!(t.device(0), Health::Congested);
    assert_eq!(t.c.device_snapshot(0).unwrap().window, 2_000);
    assert_eq!(
        t.route(1),
        Health::Healthy,
        "a route without backlog is not congested"
    );
    assert_eq!(t.device(1), Health::Healthy);
    // Deferred by the smaller window, never avoided: the path stays usable.
    assert!(
        matches!(t.c.try_acquire(0, 1, 10, 0).unwrap(), Admission::Defer(d) if d.domain == DomainKind::Device)
    );
    t.c.release(p, Effect::Success).unwrap();
    t.success(0, 1);
}

#[test]
fn congested_to_healthy_after_calm_epochs_then_additive_increase() {
    let mut t = Rig::new();
    let p = t.congest(0, 0);
    t.c.release(p, Effect::Success).unwrap();
    t.epoch(GO);
    assert_eq!(t.route(0), Health::Congested);
    t.epoch(GO);
    assert_eq!(t.route(0), Health::Healthy);
    assert_eq!(
        t.c.route_snapshot(0).unwrap().window,
        3_000,
        "2000 after MD, +1000 AI"
    );
    t.epoch(GO);
    assert_eq!(t.c.route_snapshot(0).unwrap().window, 4_000);
    for _ in 0..20 {
        t.epoch(GO);
    }
    assert_eq!(
        t.c.route_snapshot(0).unwrap().window,
        10_000,
        "capped at max"
    );
}

#[test]
fn healthy_to_suspect_on_one_hard_error_and_growth_stops() {
    let mut t = Rig::new();
    t.hard_error(0);
    assert_eq!(t.route(0), Health::Suspect);
    assert_eq!(t.c.route_snapshot(0).unwrap().errors, 1);
    for _ in 0..5 {
        t.epoch(GO);
    }
    assert_eq!(
        t.c.route_snapshot(0).unwrap().window,
        4_000,
        "SUSPECT does not grow"
    );
    assert_eq!(
        t.route(1),
        Health::Healthy,
        "other routes on the device are untouched"
    );
    assert_eq!(
        t.device(0),
        Health::Healthy,
        "a QP/route error never widens to the device"
    );
}

#[test]
fn congested_to_suspect_on_hard_error() {
    let mut t = Rig::new();
    let p = t.congest(0, 0);
    t.hard_error(0);
    assert_eq!(t.route(0), Health::Suspect);
    t.c.release(p, Effect::None).unwrap();
}

#[test]
fn suspect_to_healthy_on_success() {
    let t = Rig::new();
    t.hard_error(0);
    t.success(0, 0);
    assert_eq!(t.route(0), Health::Healthy);
    assert_eq!(t.c.route_snapshot(0).unwrap().errors, 0);
}

#[test]
fn suspect_to_congested_on_success_while_pressured() {
    let mut t = Rig::new();
    let p = t.congest(0, 0);
    t.hard_error(0);
    assert_eq!(t.route(0), Health::Suspect);
    t.c.release(p, Effect::Success).unwrap();
    assert_eq!(t.route(0), Health::Congested);
}

#[test]
fn suspect_to_quarantined_at_threshold_and_avoided() {
    let t = Rig::new();
    t.hard_error(0);
    t.hard_error(0);
    assert_eq!(t.route(0), Health::Suspect, "below the threshold");
    t.hard_error(0);
    assert_eq!(t.route(0), Health::Quarantined);
    assert!(
        matches!(t.c.try_acquire(0, 0, 10, 0).unwrap(), Admission::Avoid(a) if a.domain == DomainKind::Route)
    );
    assert_eq!(t.route(1), Health::Healthy);
}

#[test]
fn quarantine_evidence_carries_window_in_flight_and_cooldown() {
    use railyard_core::evidence::{AnomalyState, Observed, PathId, Reason};
    let mut t = Rig::new();
    t.quarantine(0);
    t.epoch(GO);
    let snap = t.c.route_snapshot(0).unwrap();
    let o = snap.observation(
        Reason::PathQuarantined,
        PathId {
            device: 0,
            route: 0,
        },
        t.now + 4 * MS,
    );
    assert_eq!(o.task_state(), AnomalyState::LongUnavailable);
    assert_eq!(o.cooldown_remaining_ns, Observed::Value(6 * MS));
    assert_eq!(o.window, Observed::Value(4_000));
    assert_eq!(o.in_flight, Observed::Value(0));
    assert_eq!(o.generation, Observed::Value(t.gen(0)));
    assert_eq!(
        o.scope,
        Observed::Unobserved,
        "the caller fills the scope it has evidence for"
    );
    // A healthy route has no cooldown to report.
    let h = t.c.route_snapshot(1).unwrap().observation(
        Reason::ByteWindow,
        PathId {
            device: 0,
            route: 1,
        },
        t.now,
    );
    assert_eq!(h.cooldown_remaining_ns, Observed::Unobserved);
}

#[test]
fn quarantined_to_probing_after_cooldown_on_new_generation() {
    let mut t = Rig::new();
    let g0 = t.gen(0);
    t.quarantine(0);
    t.epoch(GO); // observes the quarantine: cooldown until now + 10 ms
    let until = t.c.route_snapshot(0).unwrap().cooldown_until.get().unwrap();
    assert_eq!(until, t.now + 10 * MS);
    for _ in 0..9 {
        t.epoch(GO);
        assert_eq!(t.route(0), Health::Quarantined);
    }
    t.epoch(GO);
    assert_eq!(t.route(0), Health::Probing);
    assert_eq!(t.gen(0), g0 + 1, "the probe runs on a new generation");
    assert_eq!(
        t.c.route_snapshot(0).unwrap().window,
        500,
        "bounded probe window"
    );
    assert_eq!(
        t.c.route_snapshot(0).unwrap().errors,
        0,
        "threshold counts afresh on the new generation"
    );
}

#[test]
fn probing_admits_one_slice_larger_than_the_probe_window_then_blocks() {
    let mut t = Rig::new();
    t.drive_to_probing(0);
    let p = t.acquire(0, 0, 800);
    assert!(
        matches!(t.c.try_acquire(0, 0, 1, 0).unwrap(), Admission::Defer(d) if d.domain == DomainKind::Route)
    );
    t.c.release(p, Effect::None).unwrap();
}

#[test]
fn probing_to_healthy_on_success_recovers_from_min_window() {
    let mut t = Rig::new();
    t.drive_to_probing(0);
    t.success(0, 0);
    assert_eq!(t.route(0), Health::Healthy);
    assert_eq!(t.c.route_snapshot(0).unwrap().window, 1_000);
}

#[test]
fn probing_to_quarantined_on_failure_starts_a_new_cooldown() {
    let mut t = Rig::new();
    t.drive_to_probing(0);
    t.hard_error(0);
    assert_eq!(t.route(0), Health::Quarantined);
    t.epoch(GO);
    let until = t.c.route_snapshot(0).unwrap().cooldown_until.get().unwrap();
    assert_eq!(
        until,
        t.now + 10 * MS,
        "a fresh cooldown, not the expired one"
    );
}

#[test]
fn late_old_generation_feedback_only_settles_accounting() {
    let mut t = Rig::new();
    let old = t.acquire(0, 0, 300);
    let g_old = t.gen(0);
    t.drive_to_probing(0);
    // A late hard error and a late success from the old generation.
    t.c.route_feedback(0, g_old, Effect::HardError).unwrap();
    assert_eq!(t.route(0), Health::Probing);
    assert_eq!(
        t.c.release(old, Effect::Success).unwrap(),
        railyard_core::cc::Settlement::Stale
    );
    assert_eq!(
        t.route(0),
        Health::Probing,
        "old success must not pass the new probe"
    );
    assert_eq!(
        t.c.route_snapshot(0).unwrap().in_flight,
        0,
        "but accounting settled"
    );
    assert!(t.c.stats().stale_feedback >= 2);
}

#[test]
fn flush_burst_counts_once_attributed_to_root_cause() {
    let t = Rig::new();
    let g = t.gen(0);
    let root = classify_wc(wc::FATAL_ERR, 7);
    t.c.route_feedback(0, g, root.effect).unwrap();
    for _ in 0..50 {
        let f = classify_wc(wc::WR_FLUSH_ERR, 0);
        t.c.route_feedback(0, g, f.effect).unwrap();
    }
    assert_eq!(t.c.route_snapshot(0).unwrap().errors, 1);
    assert_eq!(t.route(0), Health::Suspect);
}

#[test]
fn late_errors_of_a_rebuilt_qp_do_not_count_against_the_new_generation() {
    let t = Rig::new();
    let g = t.gen(0);
    t.c.route_feedback(0, g, Effect::HardError).unwrap();
    let g2 = t.c.advance_generation(0).unwrap();
    for _ in 0..5 {
        t.c.route_feedback(0, g, Effect::HardError).unwrap();
    }
    assert_eq!(t.route(0), Health::Suspect);
    assert_eq!(t.c.route_snapshot(0).unwrap().errors, 1);
    // Errors on the new generation still accumulate to the threshold.
    t.c.route_feedback(0, g2, Effect::HardError).unwrap();
    t.c.route_feedback(0, g2, Effect::HardError).unwrap();
    assert_eq!(t.route(0), Health::Quarantined);
}

#[test]
fn software_timeouts_during_poller_stall_are_suppressed() {
    let mut t = Rig::new();
    let g = t.gen(0);
    for _ in 0..5 {
        t.c.route_feedback(0, g, Effect::Timeout).unwrap();
    }
    t.epoch(PollerStatus::Stalled);
    assert_eq!(t.route(0), Health::Healthy);
    assert_eq!(t.c.stats().suppressed_timeouts, 5);
    // The next epoch does not resurrect them.
    t.epoch(GO);
    assert_eq!(t.route(0), Health::Healthy);
}

#[test]
fn software_timeouts_with_poller_progress_count_as_route_timeouts() {
    let mut t = Rig::new();
    let g = t.gen(0);
    t.c.route_feedback(0, g, Effect::Timeout).unwrap();
    assert_eq!(
        t.route(0),
        Health::Healthy,
        "counted at the epoch, not before"
    );
    t.epoch(GO);
    assert_eq!(t.route(0), Health::Suspect);
    t.c.route_feedback(0, g, Effect::Timeout).unwrap();
    t.c.route_feedback(0, g, Effect::Timeout).unwrap();
    t.epoch(GO);
    assert_eq!(t.route(0), Health::Quarantined);
}

#[test]
fn stalled_epoch_gives_no_pressure_verdict() {
    let mut t = Rig::new();
    let p = t.acquire(0, 0, 3_000);
    for _ in 0..5 {
        t.epoch(PollerStatus::Stalled);
    }
    assert_eq!(t.route(0), Health::Healthy);
    assert_eq!(t.c.route_snapshot(0).unwrap().window, 4_000);
    t.c.release(p, Effect::None).unwrap();
}

#[test]
fn receiver_pressure_backs_off_only_the_receiving_route() {
    let mut t = Rig::new();
    let g = t.gen(0);
    let c = classify_wc(wc::RNR_RETRY_EXC_ERR, 0);
    t.c.route_feedback(0, g, c.effect).unwrap();
    t.epoch(GO);
    assert_eq!(t.c.route_snapshot(0).unwrap().window, 2_000);
    assert_eq!(
        t.c.route_snapshot(1).unwrap().window,
        4_000,
        "other receiver on the same NIC"
    );
    assert_eq!(
        t.c.device_snapshot(0).unwrap().window,
        4_000,
        "the source NIC is not backed off"
    );
    assert_eq!(t.route(0), Health::Congested, "pressure, never a failure");
    assert_eq!(t.c.route_snapshot(0).unwrap().errors, 0);
}

#[test]
fn receiver_pressure_before_the_first_epoch_still_counts() {
    // Feedback can arrive before the monitor's first epoch (which has no
    // length, so it gives no drain-time verdict): the RNR must not be lost.
    let (c, mut m) = Controller::new(&cfg(), 2, &[0, 0, 1]).unwrap();
    let g = c.route_generation(0).unwrap();
    c.route_feedback(0, g, classify_wc(wc::RNR_RETRY_EXC_ERR, 0).effect)
        .unwrap();
    m.on_epoch(&c, 5 * MS, GO);
    let s = c.route_snapshot(0).unwrap();
    assert_eq!(s.window, 2_000, "backed off at the first epoch");
    assert_eq!(s.health, Health::Congested);
    assert_eq!(c.route_snapshot(1).unwrap().window, 4_000);
    assert_eq!(c.stats().illegal_transitions, 0);
}

#[test]
fn receiver_pressure_during_a_poller_stall_still_counts() {
    // RFC 4162 suppresses only software timeouts in a stalled epoch; receiver
    // pressure is the receiver's verdict, not the poller's, and still counts.
    let mut t = Rig::new();
    let g = t.gen(0);
    t.c.route_feedback(0, g, Effect::Timeout).unwrap();
    t.c.route_feedback(0, g, classify_wc(wc::RNR_RETRY_EXC_ERR, 0).effect)
        .unwrap();
    t.epoch(PollerStatus::Stalled);
    assert_eq!(
        t.c.stats().suppressed_timeouts,
        1,
        "the timeout is suppressed"
    );
    assert_eq!(
        t.c.route_snapshot(0).unwrap().window,
        2_000,
        "the RNR is not"
    );
    assert_eq!(t.route(0), Health::Congested);
    assert_eq!(t.c.route_snapshot(0).unwrap().errors, 0);
    // Consumed once: the next epochs do not back off again.
    t.epoch(GO);
    assert_eq!(t.c.route_snapshot(0).unwrap().window, 2_000);
}

#[test]
fn local_configuration_and_remote_metadata_never_shrink_or_count() {
    let mut t = Rig::new();
    let g = t.gen(0);
    for s in [
        wc::LOC_LEN_ERR,
        wc::LOC_QP_OP_ERR,
        wc::REM_ACCESS_ERR,
        wc::BAD_RESP_ERR,
        wc::WR_FLUSH_ERR,
    ] {
        let p = t.acquire(0, 0, 10);
        t.c.release(p, classify_wc(s, 0).effect).unwrap();
        t.c.route_feedback(0, g, classify_wc(s, 0).effect).unwrap();
    }
    t.epoch(GO);
    let s = t.c.route_snapshot(0).unwrap();
    assert_eq!((s.health, s.errors, s.window), (Health::Healthy, 0, 4_000));
}

#[test]
fn cq_error_is_immediately_fatal_for_the_route_only() {
    let t = Rig::new();
    let g = t.gen(0);
    t.c.route_feedback(0, g, classify_event(event::CQ_ERR).effect)
        .unwrap();
    assert_eq!(t.route(0), Health::Quarantined);
    assert_eq!(t.route(1), Health::Healthy);
    assert_eq!(t.device(0), Health::Healthy);
}

#[test]
fn device_fatal_isolates_only_that_device_and_recovers_by_probe() {
    let mut t = Rig::new();
    let old = t.acquire(0, 1, 100);
    let (g0, g1, g2) = (t.gen(0), t.gen(1), t.gen(2));
    assert_eq!(
        classify_event(event::DEVICE_FATAL).effect,
        Effect::Quarantine
    );
    t.c.quarantine_device(0).unwrap();
    assert_eq!(t.device(0), Health::Quarantined);
    assert_eq!(t.device(1), Health::Healthy);
    assert!(
        matches!(t.c.try_acquire(0, 0, 1, 0).unwrap(), Admission::Avoid(a) if a.domain == DomainKind::Device)
    );
    assert!(matches!(
        t.c.try_acquire(0, 1, 1, 0).unwrap(),
        Admission::Avoid(_)
    ));
    t.success(1, 2);
    assert_eq!(
        (t.gen(0), t.gen(1), t.gen(2)),
        (g0 + 1, g1 + 1, g2),
        "routes of the device are fenced"
    );
    // Late success from before the isolation cannot recover anything.
    assert_eq!(
        t.c.release(old, Effect::Success).unwrap(),
        railyard_core::cc::Settlement::Stale
    );
    t.epoch(GO);
    for _ in 0..10 {
        t.epoch(GO);
    }
    assert_eq!(t.device(0), Health::Probing);
    assert_eq!(t.c.device_snapshot(0).unwrap().window, 500);
    t.success(0, 0);
    assert_eq!(t.device(0), Health::Healthy);
    assert_eq!(t.c.device_snapshot(0).unwrap().window, 1_000);
}

/// The controller side of the async-event matrix: each event lands at its
/// scope and no wider (`Controller::apply_event`).
#[test]
fn async_events_apply_at_their_scope_only() {
    use railyard_core::cc::{CcConfig, Controller, Health, Mode};
    let cfg = CcConfig {
        mode: Mode::Enforce,
        ..CcConfig::default()
    };
    let health = |c: &Controller, r: u32| c.route_snapshot(r).unwrap().health;
    // Routes 0, 1 on device 0; route 2 on device 1.
    let fresh = || Controller::new(&cfg, 2, &[0, 0, 1]).unwrap().0;

    // QP scope: the QP's route only, one hard error (not a quarantine).
    let c = fresh();
    c.apply_event(&classify_event(event::QP_FATAL), 0, Some(1))
        .unwrap();
    assert_eq!(c.route_snapshot(1).unwrap().errors, 1);
    assert_eq!(c.route_snapshot(0).unwrap().errors, 0);
    assert_eq!(c.route_snapshot(2).unwrap().errors, 0);
    // ... and without a route, nothing.
    let c = fresh();
    c.apply_event(&classify_event(event::QP_FATAL), 0, None)
        .unwrap();
    assert!((0..3).all(|r| c.route_snapshot(r).unwrap().errors == 0));

    // CQ scope: quarantines the route given.
    let c = fresh();
    c.apply_event(&classify_event(event::CQ_ERR), 1, Some(2))
        .unwrap();
    assert_eq!(health(&c, 2), Health::Quarantined);
    assert_eq!(health(&c, 0), Health::Healthy);

    // Port scope: every route of the device, not the other device's.
    let c = fresh();
    c.apply_event(&classify_event(event::PORT_ERR), 0, None)
        .unwrap();
    assert_eq!(health(&c, 0), Health::Quarantined);
    assert_eq!(health(&c, 1), Health::Quarantined);
    assert_eq!(health(&c, 2), Health::Healthy);

    // Device scope: the device domain; other devices untouched.
    let c = fresh();
    c.apply_event(&classify_event(event::DEVICE_FATAL), 1, None)
        .unwrap();
    assert_eq!(c.device_snapshot(1).unwrap().health, Health::Quarantined);
    assert_eq!(c.device_snapshot(0).unwrap().health, Health::Healthy);

    // Informational events and bad indices.
    let c = fresh();
    c.apply_event(&classify_event(event::COMM_EST), 0, Some(0))
        .unwrap();
    assert_eq!(c.route_snapshot(0).unwrap().errors, 0);
    assert!(c
        .apply_event(&classify_event(event::PORT_ERR), 2, None)
        .is_err());
    assert!(c
        .apply_event(&classify_event(event::QP_FATAL), 0, Some(3))
        .is_err());
}
