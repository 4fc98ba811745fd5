//! Arbitrary sequences of acquire / release / split / record / feedback /
//! epoch / generation / device isolation keep the controller's invariants:
//! in-flight bytes equal the sum of held reservations (never negative),
//! enforce admission stays within max(window, one slice), no release is
//! refused, and the health word only moves along the diagram's arrows.
#![no_main]
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use railyard_core::cc::{
    Admission, CcConfig, Controller, DrainSignal, Mode, Permit, PollerStatus, TargetMode,
};
use railyard_core::classify::Effect;
use railyard_core::token::TokenRecord;

const ROUTE_DEVICES: [u16; 3] = [0, 0, 1];

#[derive(Arbitrary, Debug)]
enum Op {
    Acquire { route: u8, bytes: u16 },
    Release { idx: u8, effect: u8 },
    Split { idx: u8, head: u16 },
    Record { idx: u8 },
    ReleaseRecord { idx: u8, effect: u8 },
    Feedback { route: u8, effect: u8, stale: bool },
    Epoch { dt_us: u16, stalled: bool },
    Advance { route: u8 },
    QuarantineDevice { device: bool },
}

#[derive(Arbitrary, Debug)]
struct Input {
    mode: u8,
    threshold: u8,
    ops: Vec<Op>,
}

fn effect(e: u8) -> Effect {
    [
        Effect::None,
        Effect::Success,
        Effect::ReceiverPressure,
        Effect::HardError,
        Effect::Timeout,
        Effect::Quarantine,
    ][usize::from(e) % 6]
}

fuzz_target!(|input: Input| {
    let mode = [Mode::Off, Mode::Observe, Mode::Enforce][usize::from(input.mode) % 3];
    let cfg = CcConfig {
        mode,
        min_window_bytes: 1_000,
        max_window_bytes: 20_000,
        initial_window_bytes: Some(8_000),
        target_drain_us: 50,
        // Both ways of judging drain time (the spare bits of `threshold`).
        target_mode: if input.threshold & 0x10 == 0 {
            TargetMode::Adaptive
        } else {
            TargetMode::Fixed
        },
        software_drain: None,
        high_pressure_epochs: 2,
        low_pressure_epochs: 2,
        hard_error_threshold: u16::from(input.threshold % 4) + 1,
        cooldown_ms: 1,
        probe_window_bytes: Some(500),
        additive_increase_bytes: 1_000,
        decrease_percent: 50,
    };
    let (c, mut m) = Controller::new(&cfg, 2, &ROUTE_DEVICES).unwrap();
    // Device 1 a software provider (advisory drain) or not (another spare bit).
    if input.threshold & 0x20 != 0 {
        m.set_drain_signal(1, DrainSignal::Advisory).unwrap();
    }
    let mut held: Vec<Permit> = Vec::new();
    let mut records: Vec<TokenRecord> = Vec::new();
    let mut now = 0u64;
    for op in input.ops.into_iter().take(256) {
        match op {
            Op::Acquire { route, bytes } => {
                let route = u32::from(route) % 3;
                let device = ROUTE_DEVICES[route as usize];
                let bytes = u32::from(bytes) + 1;
                let (dw, rw) = (
                    c.device_snapshot(device).unwrap().window,
                    c.route_snapshot(route).unwrap().window,
                );
                match c.try_acquire(device, route, bytes, now).unwrap() {
                    Admission::Admit(p) => {
                        if mode == Mode::Enforce {
                            let b = u64::from(bytes);
                            assert!(c.device_snapshot(device).unwrap().in_flight <= dw.max(b));
                            assert!(c.route_snapshot(route).unwrap().in_flight <= rw.max(b));
                        }
                        held.push(p);
                    }
                    Admission::Defer(_) | Admission::Avoid(_) => assert_eq!(mode, Mode::Enforce),
                }
            }
            Op::Release { idx, effect: e } => {
                if !held.is_empty() {
                    let p = held.swap_remove(usize::from(idx) % held.len());
                    c.release(p, effect(e)).unwrap();
                }
            }
            Op::Split { idx, head } => {
                if !held.is_empty() {
                    let p = held.swap_remove(usize::from(idx) % held.len());
                    match p.split(u32::from(head)) {
                        Ok((a, b)) => {
                            held.push(a);
                            held.push(b);
                        }
                        Err(p) => held.push(p),
                    }
                }
            }
            Op::Record { idx } => {
                if !held.is_empty() {
                    let p = held.swap_remove(usize::from(idx) % held.len());
                    let mut r = TokenRecord::default();
                    p.record_into(&mut r).unwrap();
                    records.push(r);
                }
            }
            Op::ReleaseRecord { idx, effect: e } => {
                if !records.is_empty() {
                    let mut r = records.swap_remove(usize::from(idx) % records.len());
                    c.release_record(&mut r, effect(e)).unwrap();
                    assert!(
                        c.release_record(&mut r, effect(e)).is_err(),
                        "released twice"
                    );
                }
            }
            Op::Feedback {
                route,
                effect: e,
                stale,
            } => {
                let route = u32::from(route) % 3;
                let g = c
                    .route_generation(route)
                    .unwrap()
                    .wrapping_sub(u32::from(stale));
                c.route_feedback(route, g, effect(e)).unwrap();
            }
            Op::Epoch { dt_us, stalled } => {
                now += u64::from(dt_us) * 1_000;
                let poller = if stalled {
                    PollerStatus::Stalled
                } else {
                    PollerStatus::Progressing
                };
                m.on_epoch(&c, now, poller);
            }
            Op::Advance { route } => {
                c.advance_generation(u32::from(route) % 3).unwrap();
            }
            Op::QuarantineDevice { device } => c.quarantine_device(u16::from(device)).unwrap(),
        }
        // Shadow accounting: in-flight bytes are exactly what is held.
        if mode != Mode::Off {
            for route in 0..3u32 {
                let want: u64 = held
                    .iter()
                    .filter(|p| p.route() == route)
                    .map(|p| u64::from(p.bytes()))
                    .sum::<u64>()
                    + records
                        .iter()
                        .filter(|r| r.route == route)
                        .map(|r| u64::from(r.bytes))
                        .sum::<u64>();
                assert_eq!(c.route_snapshot(route).unwrap().in_flight, want);
            }
            for device in 0..2u16 {
                let want: u64 = held
                    .iter()
                    .filter(|p| p.device() == device)
                    .map(|p| u64::from(p.bytes()))
                    .sum::<u64>()
                    + records
                        .iter()
                        .filter(|r| r.device == device)
                        .map(|r| u64::from(r.bytes))
                        .sum::<u64>();
                assert_eq!(c.device_snapshot(device).unwrap().in_flight, want);
            }
        }
        let s = c.stats();
        assert_eq!(s.illegal_transitions, 0);
        assert_eq!(s.underflow_refusals, 0);
    }
    for p in held {
        c.release(p, Effect::None).unwrap();
    }
    for mut r in records {
        c.release_record(&mut r, Effect::None).unwrap();
    }
    for route in 0..3 {
        assert_eq!(c.route_snapshot(route).unwrap().in_flight, 0);
    }
});
