//! Real threads hammering shared domains (the loom models prove the
//! interleavings; this checks the same invariants at scale).
#![cfg(feature = "adaptive-cc")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use railyard_core::cc::{Admission, CcConfig, Controller, Mode, PollerStatus};
use railyard_core::classify::Effect;
use railyard_core::token::TokenRecord;

#[test]
fn concurrent_slices_stay_within_the_bound_and_drain_to_zero() {
    let cfg = CcConfig {
        mode: Mode::Enforce,
        min_window_bytes: 4_096,
        max_window_bytes: 1 << 20,
        initial_window_bytes: Some(64 * 1024),
        ..CcConfig::default()
    };
    let (c, mut m) = Controller::new(&cfg, 1, &[0, 0]).unwrap();
    let c = Arc::new(c);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4u32)
        .map(|w| {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut admitted = 0u32;
                for i in 0..20_000u32 {
                    let route = (w + i) % 2;
                    let bytes = 1 + (i * 7919 + w) % (48 * 1024);
                    if let Admission::Admit(p) = c.try_acquire(0, route, bytes, 0).unwrap() {
                        let d = c.device_snapshot(0).unwrap();
                        // Bound: max(window, one slice); the window may shrink under
                        // the monitor, so compare with the largest window it can have.
                        assert!(
                            d.in_flight <= (1u64 << 20).max(u64::from(bytes)),
                            "{}",
                            d.in_flight
                        );
                        admitted += 1;
                        if i % 3 == 0 {
                            let mut rec = TokenRecord::default();
                            p.record_into(&mut rec).unwrap();
                            c.release_record(&mut rec, Effect::Success).unwrap();
                        } else {
                            c.release(p, Effect::Success).unwrap();
                        }
                    }
                }
                admitted
            })
        })
        .collect();
    let monitor = {
        let c = c.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut now = 0;
            while !stop.load(Ordering::Relaxed) {
                now += 100_000;
                m.on_epoch(&c, now, PollerStatus::Progressing);
                std::thread::yield_now();
            }
        })
    };
    let admitted: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    monitor.join().unwrap();
    assert!(admitted > 0);
    assert_eq!(c.device_snapshot(0).unwrap().in_flight, 0);
    assert_eq!(c.route_snapshot(0).unwrap().in_flight, 0);
    assert_eq!(c.route_snapshot(1).unwrap().in_flight, 0);
    let s = c.stats();
    assert_eq!((s.underflow_refusals, s.illegal_transitions), (0, 0));
}
