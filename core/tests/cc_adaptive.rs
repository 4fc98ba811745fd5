//! The adaptive drain target through the real controller and monitor,
//! against a fluid model of two paths (RFC 4162 healthy bulk):
//!
//! * a *slow, far* path — one sender alone on a 100 MB/s path with a 2 ms
//!   round trip (bandwidth-delay product 200 KB): nothing is congested, but
//!   no slice drains within the RFC's absolute 200 µs target;
//! * a *fast* path whose drain time at the minimum window is far below the
//!   target, where the adaptive rule must be exactly the RFC's.
#![cfg(feature = "adaptive-cc")]

use std::collections::VecDeque;

use railyard_core::cc::{
    Admission, CcConfig, Controller, Mode, Monitor, Permit, PollerStatus, TargetMode,
};
use railyard_core::classify::Effect;
use railyard_core::time::NS_PER_MS;

const SLICE: u32 = 16 * 1024;
const GO: PollerStatus = PollerStatus::Progressing;

/// A pipe: delivers `min(rate, in_flight / rtt)` per epoch; the sender keeps
/// as much in flight as the window admits (up to `demand`).
struct Pipe {
    epoch_ns: u64,
    rate_per_epoch: u64,
    rtt_epochs: u64,
    demand: u64,
}

struct Run {
    delivered: Vec<u64>,
    windows: Vec<u64>,
    base: Option<u64>,
}

fn run(path: &Pipe, mode: TargetMode, epochs: usize) -> Run {
    let cfg = CcConfig {
        mode: Mode::Enforce,
        min_window_bytes: 64 * 1024,
        max_window_bytes: 16 << 20,
        additive_increase_bytes: 16 * 1024,
        target_mode: mode,
        ..CcConfig::default()
    };
    let (c, mut m): (Controller, Monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
    let mut held: VecDeque<Permit> = VecDeque::new();
    let mut in_flight = 0u64;
    let mut credit = 0u64;
    let mut out = Run {
        delivered: vec![],
        windows: vec![],
        base: None,
    };
    for e in 0..epochs {
        // One epoch of the pipe, completing whole slices in order.
        credit += path.rate_per_epoch.min(in_flight / path.rtt_epochs);
        let mut delivered = 0;
        while let Some(p) = held.front() {
            if u64::from(p.bytes()) > credit {
                break;
            }
            credit -= u64::from(p.bytes());
            let p = held.pop_front().unwrap();
            in_flight -= u64::from(p.bytes());
            delivered += u64::from(p.bytes());
            c.release(p, Effect::Success).unwrap();
        }
        out.delivered.push(delivered);
        // The sender reposts at once: the window is full when the monitor looks.
        while in_flight + u64::from(SLICE) <= path.demand {
            match c.try_acquire(0, 0, SLICE, 0).unwrap() {
                Admission::Admit(p) => {
                    in_flight += u64::from(p.bytes());
                    held.push_back(p);
                }
                _ => break,
            }
        }
        m.on_epoch(&c, (e as u64 + 1) * path.epoch_ns, GO);
        out.windows.push(c.route_snapshot(0).unwrap().window);
    }
    out.base = m.route_base_drain_ns(0);
    for p in held {
        c.release(p, Effect::None).unwrap();
    }
    assert_eq!(c.route_snapshot(0).unwrap().in_flight, 0);
    assert_eq!(c.stats().illegal_transitions, 0);
    out
}

fn mean_rate(r: &Run, from: usize) -> f64 {
    let d = &r.delivered[from..];
    d.iter().sum::<u64>() as f64 / d.len() as f64
}

#[test]
fn a_slow_far_path_is_not_read_as_congested() {
    let path = Pipe {
        epoch_ns: NS_PER_MS,
        rate_per_epoch: 100_000,
        rtt_epochs: 2,
        demand: 4 << 20,
    };
    let fixed = run(&path, TargetMode::Fixed, 3_000);
    let adaptive = run(&path, TargetMode::Adaptive, 3_000);
    let (f, a) = (mean_rate(&fixed, 1_000), mean_rate(&adaptive, 1_000));
    // The fixed 200 µs target pins the window at the minimum (64 KiB over a
    // 2 ms round trip: a third of the path).
    assert!(f < 0.5 * 100_000.0, "fixed target: {f} B/epoch");
    assert!(*fixed.windows.last().unwrap() <= 128 * 1024);
    // The adaptive target learns the path's base (~2 ms at the floor) and
    // lets the window settle around the bandwidth-delay product.
    assert!(a >= 0.97 * 100_000.0, "adaptive target: {a} B/epoch");
    let base = adaptive.base.expect("a base was measured");
    assert!(
        (1_500_000..=3_000_000).contains(&base),
        "base {base} ns vs a 2 ms round trip"
    );
    // ... and still pushes back on a standing queue: the window stays within
    // a few BDPs, far below the 4 MiB the sender would keep in flight.
    let wmax = adaptive.windows[1_000..].iter().max().unwrap();
    assert!(*wmax <= 1 << 20, "window grew to {wmax}");
}

#[test]
fn a_fast_path_keeps_the_rfc_target() {
    // 10 GB/s with a 50 µs round trip: drain times reach the 200 µs target
    // only with a standing queue, long before the window is near its
    // minimum, so the adaptive threshold stays the target and the controller
    // does exactly what the RFC's rule does.
    let path = Pipe {
        epoch_ns: 50_000,
        rate_per_epoch: 512 * 1024,
        rtt_epochs: 1,
        demand: 4 << 20,
    };
    let fixed = run(&path, TargetMode::Fixed, 2_000);
    let adaptive = run(&path, TargetMode::Adaptive, 2_000);
    // (It never even needs the floor: no base is measured.)
    assert!(
        adaptive.base.is_none_or(|b| b <= 60_000),
        "{:?}",
        adaptive.base
    );
    assert_eq!(
        fixed.windows, adaptive.windows,
        "identical windows epoch by epoch"
    );
    assert!(
        fixed.windows[1_000..].iter().all(|&w| w <= 3 << 20),
        "the target still bounds the window below the 4 MiB the sender wants"
    );
}
