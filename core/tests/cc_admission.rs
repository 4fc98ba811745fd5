//! Admission, permits, rollback, partial release and generation fencing (RFC 4162).
#![cfg(feature = "adaptive-cc")]

use railyard_core::cc::{
    AcquireError, Admission, CcConfig, Controller, DeferReason, DomainKind, Mode, Monitor, Permit,
    ReleaseError, Settlement, TargetMode,
};
use railyard_core::classify::Effect;
use railyard_core::token::TokenRecord;

fn cfg(mode: Mode) -> CcConfig {
    CcConfig {
        mode,
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

/// Two devices; routes 0,1 on device 0, route 2 on device 1.
fn ctl(mode: Mode) -> (Controller, Monitor) {
    Controller::new(&cfg(mode), 2, &[0, 0, 1]).unwrap()
}

fn admit(a: Admission) -> Permit {
    match a {
        Admission::Admit(p) => p,
        other => panic!("expected Admit, got {other:?}"),
    }
}

fn in_flight(c: &Controller, device: u16, route: u32) -> (u64, u64) {
    (
        c.device_snapshot(device).unwrap().in_flight,
        c.route_snapshot(route).unwrap().in_flight,
    )
}

#[test]
fn permit_reserves_full_slice_in_both_domains() {
    let (c, _) = ctl(Mode::Enforce);
    let p = admit(c.try_acquire(0, 1, 1_500, 0).unwrap());
    assert_eq!((p.device(), p.route(), p.bytes()), (0, 1, 1_500));
    assert_eq!(in_flight(&c, 0, 1), (1_500, 1_500));
    assert_eq!(c.release(p, Effect::Success).unwrap(), Settlement::Current);
    assert_eq!(in_flight(&c, 0, 1), (0, 0));
}

#[test]
fn full_window_defers_with_byte_window() {
    let (c, _) = ctl(Mode::Enforce);
    let p1 = admit(c.try_acquire(0, 0, 3_000, 0).unwrap());
    match c.try_acquire(0, 0, 1_500, 0).unwrap() {
        Admission::Defer(d) => {
            assert_eq!(d.reason, DeferReason::ByteWindow);
            assert_eq!(d.domain, DomainKind::Device);
            assert_eq!((d.window, d.in_flight), (4_000, 3_000));
        }
        other => panic!("{other:?}"),
    }
    // Exactly filling the window is allowed.
    let p2 = admit(c.try_acquire(0, 0, 1_000, 0).unwrap());
    assert_eq!(in_flight(&c, 0, 0), (4_000, 4_000));
    c.release(p1, Effect::Success).unwrap();
    c.release(p2, Effect::Success).unwrap();
}

#[test]
fn device_defer_reserves_nothing_in_either_domain() {
    let (c, _) = ctl(Mode::Enforce);
    let p1 = admit(c.try_acquire(0, 0, 2_000, 0).unwrap());
    let p2 = admit(c.try_acquire(0, 1, 1_500, 0).unwrap()); // device 3500 of 4000
    match c.try_acquire(0, 1, 600, 0).unwrap() {
        Admission::Defer(d) => assert_eq!((d.domain, d.in_flight), (DomainKind::Device, 3_500)),
        other => panic!("{other:?}"),
    }
    assert_eq!(in_flight(&c, 0, 1), (3_500, 1_500));
    c.release(p1, Effect::Success).unwrap();
    c.release(p2, Effect::None).unwrap();
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
    assert_eq!(in_flight(&c, 0, 1), (0, 0));
}

#[test]
fn route_defer_rolls_back_the_device_reservation() {
    // Device window larger than route window: the route rejects second.
    let mut config = cfg(Mode::Enforce);
    config.initial_window_bytes = Some(4_000);
    let (c, mut m) = Controller::new(&config, 1, &[0, 0]).unwrap();
    // Shrink route 0's window with receiver pressure (route-only back-off).
    m.on_epoch(&c, 0, railyard_core::cc::PollerStatus::Progressing);
    let g = c.route_generation(0).unwrap();
    c.route_feedback(0, g, Effect::ReceiverPressure).unwrap();
    m.on_epoch(&c, 1_000_000, railyard_core::cc::PollerStatus::Progressing);
    assert_eq!(c.route_snapshot(0).unwrap().window, 2_000);
    assert_eq!(c.device_snapshot(0).unwrap().window, 4_000);
    let p = admit(c.try_acquire(0, 0, 1_500, 0).unwrap());
    match c.try_acquire(0, 0, 1_000, 0).unwrap() {
        Admission::Defer(d) => assert_eq!(d.domain, DomainKind::Route),
        other => panic!("{other:?}"),
    }
    // The device reservation was rolled back: only p's bytes remain.
    assert_eq!(in_flight(&c, 0, 0), (1_500, 1_500));
    c.release(p, Effect::None).unwrap();
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
}

#[test]
fn empty_domain_admits_one_slice_larger_than_window() {
    let (c, _) = ctl(Mode::Enforce);
    let big = admit(c.try_acquire(0, 0, 9_000, 0).unwrap());
    assert_eq!(in_flight(&c, 0, 0), (9_000, 9_000));
    // It blocks further admission until it drains.
    assert!(matches!(
        c.try_acquire(0, 0, 1, 0).unwrap(),
        Admission::Defer(_)
    ));
    assert!(matches!(
        c.try_acquire(0, 1, 1, 0).unwrap(),
        Admission::Defer(_)
    ));
    c.release(big, Effect::Success).unwrap();
    admit(c.try_acquire(0, 0, 1, 0).unwrap())
        .record_into(&mut TokenRecord::default())
        .unwrap();
}

#[test]
fn invalid_inputs_are_typed_errors() {
    let (c, _) = ctl(Mode::Enforce);
    assert_eq!(c.try_acquire(0, 0, 0, 0), Err(AcquireError::ZeroBytes));
    assert_eq!(
        c.try_acquire(9, 0, 1, 0),
        Err(AcquireError::NoSuchDevice(9))
    );
    assert_eq!(
        c.try_acquire(0, 99, 1, 0),
        Err(AcquireError::NoSuchRoute(99))
    );
    assert_eq!(
        c.try_acquire(1, 0, 1, 0),
        Err(AcquireError::WrongDevice {
            route: 0,
            bound: 0,
            given: 1
        })
    );
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
    assert!(!format!(
        "{}",
        AcquireError::WrongDevice {
            route: 0,
            bound: 0,
            given: 1
        }
    )
    .is_empty());
}

#[test]
fn partial_post_returns_only_the_unposted_part() {
    let (c, _) = ctl(Mode::Enforce);
    let p = admit(c.try_acquire(0, 0, 3_000, 0).unwrap());
    // A chain of two WRs: 1000 posted, 2000 rejected at bad_wr.
    let (posted, unposted) = p.split(1_000).unwrap();
    c.release(unposted, Effect::None).unwrap();
    assert_eq!(in_flight(&c, 0, 0), (1_000, 1_000));
    let mut rec = TokenRecord::default();
    posted.record_into(&mut rec).unwrap();
    assert_eq!(rec.bytes, 1_000);
    c.release_record(&mut rec, Effect::Success).unwrap();
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
}

#[test]
fn split_out_of_range_returns_the_permit() {
    let (c, _) = ctl(Mode::Enforce);
    let p = admit(c.try_acquire(0, 0, 3_000, 0).unwrap());
    let p = p.split(0).unwrap_err();
    let p = p.split(3_000).unwrap_err();
    assert_eq!(p.bytes(), 3_000);
    c.release(p, Effect::None).unwrap();
}

#[test]
fn record_release_is_exactly_once() {
    let (c, _) = ctl(Mode::Enforce);
    let p = admit(c.try_acquire(0, 1, 700, 0).unwrap());
    let mut rec = TokenRecord::default();
    p.record_into(&mut rec).unwrap();
    assert_eq!((rec.device, rec.route, rec.bytes), (0, 1, 700));
    assert_ne!(rec.holds & TokenRecord::HOLDS_PERMIT, 0);
    // A second permit cannot be recorded into a record that holds one.
    let p2 = admit(c.try_acquire(0, 1, 10, 0).unwrap());
    let p2 = p2.record_into(&mut rec).unwrap_err();
    c.release(p2, Effect::None).unwrap();
    assert_eq!(
        c.release_record(&mut rec, Effect::Success).unwrap(),
        Settlement::Current
    );
    assert_eq!(rec.holds & TokenRecord::HOLDS_PERMIT, 0);
    assert_eq!(
        c.release_record(&mut rec, Effect::Success),
        Err(ReleaseError::NotHeld)
    );
    assert_eq!(in_flight(&c, 0, 1), (0, 0));
}

#[test]
fn forged_record_underflow_is_refused_and_counted() {
    let (c, _) = ctl(Mode::Enforce);
    let mut rec = TokenRecord {
        bytes: 500,
        holds: TokenRecord::HOLDS_PERMIT,
        ..TokenRecord::default()
    };
    assert!(matches!(
        c.release_record(&mut rec, Effect::Success),
        Err(ReleaseError::Underflow { .. })
    ));
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
    assert_eq!(c.stats().underflow_refusals, 1);
    let mut rec = TokenRecord {
        route: 77,
        bytes: 1,
        holds: TokenRecord::HOLDS_PERMIT,
        ..TokenRecord::default()
    };
    assert_eq!(
        c.release_record(&mut rec, Effect::Success),
        Err(ReleaseError::NoSuchRoute(77))
    );
}

#[test]
fn generation_change_after_acquisition_rolls_back_both() {
    let (c, _) = ctl(Mode::Enforce);
    let p = admit(c.try_acquire(0, 0, 2_000, 0).unwrap());
    assert!(c.is_current(&p));
    let g1 = c.advance_generation(0).unwrap();
    assert_eq!(g1, p.generation() + 1);
    assert!(!c.is_current(&p));
    // Not posted: roll back both reservations; the old attempt cannot affect the new generation.
    assert_eq!(c.release(p, Effect::HardError).unwrap(), Settlement::Stale);
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
    assert_eq!(c.route_snapshot(0).unwrap().errors, 0);
}

#[test]
fn rebind_route_moves_to_a_new_device_and_generation() {
    let (c, _) = ctl(Mode::Enforce);
    let p = admit(c.try_acquire(0, 0, 100, 0).unwrap());
    let g = c.rebind_route(0, 1).unwrap();
    assert_eq!(g, 1);
    assert!(matches!(
        c.try_acquire(0, 0, 1, 0),
        Err(AcquireError::WrongDevice { .. })
    ));
    let q = admit(c.try_acquire(1, 0, 50, 0).unwrap());
    // The old permit releases the old device's bytes.
    assert_eq!(c.release(p, Effect::Success).unwrap(), Settlement::Stale);
    assert_eq!(c.device_snapshot(0).unwrap().in_flight, 0);
    assert_eq!(c.device_snapshot(1).unwrap().in_flight, 50);
    c.release(q, Effect::Success).unwrap();
    assert_eq!(c.rebind_route(0, 7), Err(AcquireError::NoSuchDevice(7)));
}

#[test]
fn off_mode_admits_everything_without_accounting() {
    let (c, _) = ctl(Mode::Off);
    for _ in 0..100 {
        let p = admit(c.try_acquire(0, 0, 1_000_000, 0).unwrap());
        assert!(c.is_current(&p));
        // Off keeps no state: releasing is a no-op that still consumes the permit.
        c.release(p, Effect::HardError).unwrap();
    }
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
}

#[test]
fn observe_mode_accounts_but_never_defers_or_avoids() {
    let (c, _) = ctl(Mode::Observe);
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(admit(c.try_acquire(0, 0, 3_000, 0).unwrap()));
    }
    assert_eq!(in_flight(&c, 0, 0), (15_000, 15_000));
    assert_eq!(c.stats().would_defer, 4);
    c.quarantine_device(0).unwrap();
    held.push(admit(c.try_acquire(0, 0, 1, 0).unwrap()));
    assert_eq!(c.stats().would_avoid, 1);
    for p in held {
        c.release(p, Effect::None).unwrap();
    }
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
}

#[test]
fn enforce_avoids_a_quarantined_route_without_counting_again() {
    let (c, _) = ctl(Mode::Enforce);
    let g = c.route_generation(0).unwrap();
    c.route_feedback(0, g, Effect::Quarantine).unwrap();
    let errors = c.route_snapshot(0).unwrap().errors;
    for _ in 0..3 {
        match c.try_acquire(0, 0, 10, 0).unwrap() {
            Admission::Avoid(a) => assert_eq!(a.domain, DomainKind::Route),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(c.route_snapshot(0).unwrap().errors, errors);
    assert_eq!(in_flight(&c, 0, 0), (0, 0));
    // Other routes on the same device are not affected.
    let p = admit(c.try_acquire(0, 1, 10, 0).unwrap());
    c.release(p, Effect::Success).unwrap();
}

#[test]
fn topology_is_validated_at_construction() {
    assert_eq!(
        Controller::new(&cfg(Mode::Enforce), 2, &[0, 2]).err(),
        Some(railyard_core::cc::ConfigError::RouteDeviceOutOfRange {
            route: 1,
            device: 2,
            devices: 2
        })
    );
    let (c, _m, err) = Controller::new_or_off(&cfg(Mode::Enforce), 2, &[0, 2]);
    assert!(err.is_some());
    assert_eq!(c.mode(), Mode::Off);
}

#[test]
fn controller_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Controller>();
    fn assert_send<T: Send>() {}
    assert_send::<Monitor>();
    assert_send::<Permit>();
}

#[test]
fn invalid_config_stays_off() {
    let mut bad = cfg(Mode::Enforce);
    bad.min_window_bytes = 0;
    assert!(Controller::new(&bad, 1, &[0]).is_err());
    let (c, _m, err) = Controller::new_or_off(&bad, 1, &[0]);
    assert!(err.is_some());
    assert_eq!(c.mode(), Mode::Off);
    assert!(Controller::compiled_in());
}
