//! Advisory drain time (software providers) through the real controller and
//! monitor: drain-time pressure on an advisory device is computed, reported
//! and counted but never shrinks a window, while an enforce device in the
//! same controller backs off; every health signal (receiver pressure,
//! timeouts, hard errors, quarantine, probing, generation fencing) acts on
//! an advisory device exactly as on an enforce one.
#![cfg(feature = "adaptive-cc")]

use railyard_core::cc::{
    Admission, CcConfig, Controller, DrainSignal, Health, Mode, Monitor, Permit, PollerStatus,
    Settlement, SoftwareProvider, TargetMode,
};
use railyard_core::classify::Effect;
use railyard_core::time::NS_PER_MS;

const GO: PollerStatus = PollerStatus::Progressing;
const MS: u64 = NS_PER_MS;

fn cfg(mode: Mode) -> CcConfig {
    CcConfig {
        mode,
        min_window_bytes: 64 * 1024,
        max_window_bytes: 8 << 20,
        initial_window_bytes: Some(1 << 20),
        target_mode: TargetMode::Fixed,
        high_pressure_epochs: 2,
        low_pressure_epochs: 2,
        hard_error_threshold: 3,
        cooldown_ms: 5,
        ..CcConfig::default()
    }
}

/// Device 0 (route 0) enforces drain time, device 1 (route 1) is advisory.
fn rig(mode: Mode) -> (Controller, Monitor) {
    let (c, mut m) = Controller::new(&cfg(mode), 2, &[0, 1]).unwrap();
    m.set_drain_signal(1, DrainSignal::Advisory).unwrap();
    (c, m)
}

fn admit(c: &Controller, device: u16, route: u32, bytes: u32) -> Permit {
    match c.try_acquire(device, route, bytes, 0).unwrap() {
        Admission::Admit(p) => p,
        other => panic!("not admitted: {other:?}"),
    }
}

#[test]
fn advisory_device_under_sustained_drain_pressure_keeps_its_window_while_enforce_shrinks() {
    for mode in [Mode::Enforce, Mode::Observe] {
        let (c, mut m) = rig(mode);
        // A backlog that drains nothing: every epoch is pressured (drain
        // time u64::MAX) on both devices and both routes.
        let held = [admit(&c, 0, 0, 64 * 1024), admit(&c, 1, 1, 64 * 1024)];
        let mut advisory = 0;
        for e in 1..=20u64 {
            advisory += m.on_epoch(&c, e * MS, GO).advisory_pressure;
        }
        let (r0, r1) = (c.route_snapshot(0).unwrap(), c.route_snapshot(1).unwrap());
        let (d0, d1) = (c.device_snapshot(0).unwrap(), c.device_snapshot(1).unwrap());
        // Enforce: backed off to the floor, CONGESTED.
        assert_eq!((r0.window, d0.window), (64 * 1024, 64 * 1024), "{mode:?}");
        assert_eq!(
            (r0.health, d0.health),
            (Health::Congested, Health::Congested)
        );
        // Advisory: never decreased (the calm verdict lets it grow), HEALTHY.
        assert!(
            r1.window >= 1 << 20 && d1.window >= 1 << 20,
            "{r1:?} {d1:?}"
        );
        assert_eq!((r1.health, d1.health), (Health::Healthy, Health::Healthy));
        // The pressure was still computed and is visible: 19 judged epochs
        // (the first has no length) × route 1 and device 1.
        assert_eq!(advisory, 2 * 19, "{mode:?}");
        let v = m.route_policy(&c, 1).unwrap();
        assert_eq!(v.drain_signal, DrainSignal::Advisory);
        assert!(v.pressured);
        assert_eq!(v.drain_ns, Some(u64::MAX));
        assert_eq!(v.advisory_pressure_epochs, 19);
        assert_eq!(m.device_policy(1).unwrap().advisory_pressure_epochs, 19);
        // The enforce side was pressured too, and none of it was ignored.
        let v0 = m.route_policy(&c, 0).unwrap();
        assert_eq!(
            (v0.drain_signal, v0.pressured),
            (DrainSignal::Enforce, true)
        );
        assert_eq!(v0.advisory_pressure_epochs, 0);
        for p in held {
            c.release(p, Effect::Success).unwrap();
        }
        assert_eq!(c.stats().illegal_transitions, 0);
    }
}

#[test]
fn a_route_follows_the_drain_signal_of_the_device_it_is_bound_to() {
    let (c, mut m) = Controller::new(&cfg(Mode::Enforce), 2, &[0, 0]).unwrap();
    m.set_drain_signal(1, DrainSignal::Advisory).unwrap();
    // Route 1 moves to the advisory device: its pressure is no longer enforced.
    c.rebind_route(1, 1).unwrap();
    let held = [admit(&c, 0, 0, 4096), admit(&c, 1, 1, 4096)];
    for e in 1..=10u64 {
        m.on_epoch(&c, e * MS, GO);
    }
    assert_eq!(c.route_snapshot(0).unwrap().window, 64 * 1024);
    assert!(c.route_snapshot(1).unwrap().window >= 1 << 20);
    assert_eq!(
        m.route_policy(&c, 1).unwrap().drain_signal,
        DrainSignal::Advisory
    );
    for p in held {
        c.release(p, Effect::Success).unwrap();
    }
    // Unknown indices are typed errors / None, never a panic.
    assert!(m.set_drain_signal(2, DrainSignal::Enforce).is_err());
    assert_eq!(m.drain_signal(2), None);
    assert!(m.route_policy(&c, 2).is_none() && m.device_policy(2).is_none());
}

/// One scripted run of health events on route `route` of `device` (with
/// no drain pressure: every slice completes within its epoch), recording
/// the route's snapshot after each step.
fn health_script(c: &Controller, m: &mut Monitor, device: u16, route: u32) -> Vec<String> {
    let mut trace = Vec::new();
    let mut now = 0;
    let mut step = |trace: &mut Vec<String>, m: &mut Monitor, what: &str| {
        now += MS;
        m.on_epoch(c, now, GO);
        // The cooldown deadline is absolute time: identical for both runs.
        let s = c.route_snapshot(route).unwrap();
        trace.push(format!("{what}: {s:?}"));
    };
    step(&mut trace, m, "start");
    // Receiver pressure: an immediate route back-off.
    let p = admit(c, device, route, 4096);
    c.release(p, Effect::ReceiverPressure).unwrap();
    step(&mut trace, m, "rnr");
    // Software timeouts: counted at the epoch as hard errors.
    c.route_feedback(route, c.route_generation(route).unwrap(), Effect::Timeout)
        .unwrap();
    step(&mut trace, m, "timeout");
    // Hard errors up to the threshold: QUARANTINED, admission avoids.
    for _ in 0..2 {
        let p = admit(c, device, route, 4096);
        c.release(p, Effect::HardError).unwrap();
    }
    step(&mut trace, m, "hard errors");
    let avoided = match c.try_acquire(device, route, 4096, 0).unwrap() {
        Admission::Avoid(_) => true,
        // Observe mode admits (and counts would_avoid): give it back.
        Admission::Admit(p) => {
            c.release(p, Effect::None).unwrap();
            false
        }
        Admission::Defer(d) => panic!("deferred: {d:?}"),
    };
    trace.push(format!("avoided: {avoided}"));
    let gen = c.route_generation(route).unwrap();
    for _ in 0..10 {
        step(&mut trace, m, "cooldown");
    }
    // Probing on a new generation: late feedback of the old one only
    // settles accounting.
    let stale = c.route_feedback(route, gen, Effect::HardError).unwrap();
    trace.push(format!("stale: {stale:?}"));
    let p = admit(c, device, route, 4096);
    c.release(p, Effect::Success).unwrap();
    step(&mut trace, m, "probe success");
    trace
}

#[test]
fn health_signals_act_on_an_advisory_device_exactly_as_on_an_enforce_one() {
    for mode in [Mode::Enforce, Mode::Observe] {
        let (c0, mut m0) = rig(mode);
        let (c1, mut m1) = rig(mode);
        let enforce = health_script(&c0, &mut m0, 0, 0);
        let advisory = health_script(&c1, &mut m1, 1, 1);
        assert_eq!(enforce, advisory, "{mode:?}");
        // And the script did exercise every signal.
        let all = advisory.join("\n");
        assert!(
            all.contains(
                "rnr: DomainSnapshot { health: Congested, generation: 0, errors: 0, window: 524288"
            ),
            "RNR halved the window: {all}"
        );
        assert!(
            all.contains("timeout: DomainSnapshot { health: Suspect"),
            "{all}"
        );
        assert!(all.contains("health: Quarantined"), "{all}");
        assert!(all.contains("stale: Stale"), "{all}");
        if mode == Mode::Enforce {
            assert!(all.contains("avoided: true"), "{all}");
        }
        assert!(
            all.contains("probe success: DomainSnapshot { health: Healthy"),
            "{all}"
        );
        assert_eq!(m1.route_policy(&c1, 1).unwrap().advisory_pressure_epochs, 0);
    }
}

#[test]
fn device_quarantine_isolates_an_advisory_device() {
    let (c, _m) = rig(Mode::Enforce);
    c.quarantine_device(1).unwrap();
    assert!(matches!(
        c.try_acquire(1, 1, 4096, 0).unwrap(),
        Admission::Avoid(_)
    ));
    let p = admit(&c, 0, 0, 4096);
    assert_eq!(c.release(p, Effect::Success), Ok(Settlement::Current));
}

#[test]
fn the_default_config_makes_rxe_and_siw_advisory_and_hardware_enforce() {
    let c = CcConfig {
        mode: Mode::Enforce,
        ..CcConfig::default()
    };
    let (ctl, mut m) = Controller::new(&c, 3, &[0, 1, 2]).unwrap();
    for (d, vendor) in [(0u16, 0x02c9u32), (1, 0xFF_FFFF), (2, 0x62_6D74)] {
        let s = c.drain_signal(SoftwareProvider::from_vendor_id(vendor));
        m.set_drain_signal(d, s).unwrap();
    }
    let got: Vec<_> = (0..3).map(|d| m.drain_signal(d).unwrap()).collect();
    assert_eq!(
        got,
        [
            DrainSignal::Enforce,
            DrainSignal::Advisory,
            DrainSignal::Advisory
        ]
    );
    assert_eq!(ctl.routes(), 3);
}
