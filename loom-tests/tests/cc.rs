//! loom models of the shared congestion controller (`railyard_core::cc`).
//!
//! * `reservations_never_negative_and_bounded` — concurrent acquire/release on
//!   shared domains never drive in-flight bytes negative and never exceed
//!   max(window, one slice) per domain; broken twin `cc_reserve_check_then_add`.
//! * `deferred_second_domain_rolls_back_first` — a route deferral returns the
//!   device reservation; broken twin `cc_no_rollback`.
//! * `concurrent_feedback_takes_only_diagram_arrows` — a success and a hard
//!   error racing on a SUSPECT route move it only along arrows of the
//!   diagram; broken twin `cc_health_blind_store`.
//! * `old_generation_feedback_cannot_fail_the_new_probe` — a late hard error
//!   of the quarantined generation racing QUARANTINED → PROBING (new
//!   generation) only settles; broken twin `cc_unfenced_feedback`.
//! * `in_flight_snapshot_is_one_consistent_value` — a snapshot racing a
//!   release and a re-admission reads a value the domain really held, never
//!   the released bytes counted again; broken twin `cc_snapshot_two_loads`
//!   (the old `released`-then-`acquired` read).
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::cc::{Admission, CcConfig, Controller, Health, Mode, Monitor, PollerStatus};
use railyard_core::classify::Effect;

const WINDOW: u64 = 100;

fn controller(routes: &[u16]) -> (Controller, Monitor) {
    let cfg = CcConfig {
        mode: Mode::Enforce,
        min_window_bytes: 50,
        max_window_bytes: WINDOW,
        initial_window_bytes: Some(WINDOW),
        hard_error_threshold: 2,
        ..CcConfig::default()
    };
    Controller::new(&cfg, 1, routes).unwrap()
}

/// Acquire, check the bound while holding, release.
fn acquire_check_release(c: &Controller, route: u32, bytes: u32) {
    if let Admission::Admit(p) = c.try_acquire(0, route, bytes, 0).unwrap() {
        let d = c.device_snapshot(0).unwrap();
        let r = c.route_snapshot(route).unwrap();
        let bound = WINDOW.max(u64::from(bytes));
        assert!(
            d.in_flight <= bound,
            "device in flight {} > {}",
            d.in_flight,
            bound
        );
        assert!(
            r.in_flight <= bound,
            "route in flight {} > {}",
            r.in_flight,
            bound
        );
        c.release(p, Effect::Success).unwrap();
    }
}

fn reservations_model() {
    loom::model(|| {
        let (c, _m) = controller(&[0]);
        let c = Arc::new(c);
        let c2 = c.clone();
        let t = thread::spawn(move || acquire_check_release(&c2, 0, 60));
        acquire_check_release(&c, 0, 60);
        acquire_check_release(&c, 0, 30);
        t.join().unwrap();
        assert_eq!(c.device_snapshot(0).unwrap().in_flight, 0);
        assert_eq!(c.route_snapshot(0).unwrap().in_flight, 0);
        assert_eq!(c.stats().underflow_refusals, 0);
    });
}

#[test]
fn reservations_never_negative_and_bounded() {
    reservations_model();
}

#[test]
#[cfg(railyard_broken = "cc_reserve_check_then_add")]
#[should_panic]
fn broken_cc_reserve_check_then_add() {
    reservations_model();
}

fn rollback_model() {
    loom::model(|| {
        let (c, mut m) = controller(&[0]);
        // Shrink only the route window to 50 (receiver pressure is route-local).
        m.on_epoch(&c, 0, PollerStatus::Progressing);
        let g = c.route_generation(0).unwrap();
        c.route_feedback(0, g, Effect::ReceiverPressure).unwrap();
        m.on_epoch(&c, 1_000_000, PollerStatus::Progressing);
        assert_eq!(c.route_snapshot(0).unwrap().window, 50);
        let c = Arc::new(c);
        let c2 = c.clone();
        let t = thread::spawn(move || acquire_check_release(&c2, 0, 40));
        acquire_check_release(&c, 0, 40);
        t.join().unwrap();
        assert_eq!(
            c.device_snapshot(0).unwrap().in_flight,
            0,
            "device reservation leaked"
        );
        assert_eq!(c.route_snapshot(0).unwrap().in_flight, 0);
    });
}

#[test]
fn deferred_second_domain_rolls_back_first() {
    rollback_model();
}

#[test]
#[cfg(railyard_broken = "cc_no_rollback")]
#[should_panic]
fn broken_cc_no_rollback() {
    rollback_model();
}

fn feedback_model() {
    loom::model(|| {
        let (c, _m) = controller(&[0]);
        let g = c.route_generation(0).unwrap();
        c.route_feedback(0, g, Effect::HardError).unwrap();
        assert_eq!(c.route_snapshot(0).unwrap().health, Health::Suspect);
        let c = Arc::new(c);
        let c2 = c.clone();
        let t = thread::spawn(move || {
            c2.route_feedback(0, g, Effect::Success).unwrap();
        });
        c.route_feedback(0, g, Effect::HardError).unwrap();
        t.join().unwrap();
        assert_eq!(
            c.stats().illegal_transitions,
            0,
            "a state change outside the diagram"
        );
        let h = c.route_snapshot(0).unwrap().health;
        // success then error: HEALTHY -> SUSPECT; error then success: QUARANTINED stays.
        assert!(matches!(h, Health::Suspect | Health::Quarantined), "{h:?}");
    });
}

#[test]
fn concurrent_feedback_takes_only_diagram_arrows() {
    feedback_model();
}

#[test]
#[cfg(railyard_broken = "cc_health_blind_store")]
#[should_panic]
fn broken_cc_health_blind_store() {
    feedback_model();
}

fn fencing_model() {
    loom::model(|| {
        let (c, mut m) = controller(&[0]);
        let g = c.route_generation(0).unwrap();
        c.route_feedback(0, g, Effect::Quarantine).unwrap();
        m.on_epoch(&c, 0, PollerStatus::Progressing); // starts the cooldown
        let c = Arc::new(c);
        let c2 = c.clone();
        // A late hard error of the quarantined generation races the monitor
        // moving the route to PROBING on a new generation.
        let t = thread::spawn(move || {
            c2.route_feedback(0, g, Effect::HardError).unwrap();
        });
        m.on_epoch(&c, u64::MAX / 2, PollerStatus::Progressing);
        t.join().unwrap();
        let s = c.route_snapshot(0).unwrap();
        assert_eq!(s.generation, g + 1);
        assert_eq!(
            s.health,
            Health::Probing,
            "old-generation feedback changed the new generation's state"
        );
        assert_eq!(c.stats().illegal_transitions, 0);
    });
}

#[test]
fn old_generation_feedback_cannot_fail_the_new_probe() {
    fencing_model();
}

#[test]
#[cfg(railyard_broken = "cc_unfenced_feedback")]
#[should_panic]
fn broken_cc_unfenced_feedback() {
    fencing_model();
}

/// A snapshot of in-flight bytes races a release and a re-admission of the
/// same 60 bytes: at no instant were more than 60 bytes in flight, so the
/// snapshot must not read more.
fn snapshot_model() {
    loom::model(|| {
        let (c, _m) = controller(&[0]);
        let Admission::Admit(p) = c.try_acquire(0, 0, 60, 0).unwrap() else {
            panic!("an empty domain admits")
        };
        let c = Arc::new(c);
        let c2 = c.clone();
        let reader = thread::spawn(move || c2.device_snapshot(0).unwrap().in_flight);
        c.release(p, Effect::Success).unwrap();
        if let Admission::Admit(p) = c.try_acquire(0, 0, 60, 0).unwrap() {
            c.release(p, Effect::Success).unwrap();
        }
        let d = reader.join().unwrap();
        assert!(
            d <= 60,
            "device in flight {d}: released bytes counted again"
        );
        assert_eq!(c.route_snapshot(0).unwrap().in_flight, 0);
    });
}

#[test]
fn in_flight_snapshot_is_one_consistent_value() {
    snapshot_model();
}

#[test]
#[cfg(railyard_broken = "cc_snapshot_two_loads")]
#[should_panic]
fn broken_cc_snapshot_two_loads() {
    snapshot_model();
}
