//! Per-slice cost of congestion-control admission (RFC 4162):
//! `try_acquire` + `release` of one 64 KiB slice, one thread, uncontended.
//!
//! All arms run in the same process and run:
//!
//! * `floor_4_rmw` — four bare locked RMWs on two cache lines: the hardware
//!   floor of any scheme that reserves in two shared domains;
//! * `compiled_out` — [`Bypass`], the exact type `cc::Controller` is when
//!   `adaptive-cc` is compiled out (baseline);
//! * `off` — the compiled-in controller in `Mode::Off`;
//! * `observe` — `Mode::Observe` (accounted in both domains, never defers);
//! * `enforce` — `Mode::Enforce`, device + route domain (two CAS reservations,
//!   two CAS releases, completed-bytes counter, health checks);
//! * `enforce_record` — enforce through the completion path's shape:
//!   `record_into` a `TokenRecord`, then `release_record`.
//!
//! `cargo bench -p railyard-benches --no-default-features --bench cc` builds
//! core without `adaptive-cc`; then `controller_compiled_out` measures
//! `cc::Controller` itself (= `Bypass`) to confirm the baseline.
//!
//! Goals: off ≤ 1 ns over compiled out; enforce ≤ 39 ns per slice (the 3 %
//! gate at 400 Gb/s with 64 KiB slices: 64 KiB / 50 GB/s = 1.31 µs, 3 % ≈ 39 ns).
//!
//! Current figures: `railyard_core::cc`'s module docs; the measured
//! sessions (run to run spread, load, the compiled-out build): the
//! congestion-control section of `docs/benchmarks.md`.
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{criterion_group, criterion_main, Criterion};
use railyard_core::cc::{Admission, Bypass, CcConfig, Controller, Mode};
use railyard_core::classify::Effect;
#[cfg(feature = "adaptive-cc")]
use railyard_core::token::TokenRecord;

const SLICE: u32 = 64 * 1024;

#[repr(align(64))]
struct Padded(AtomicU64);

fn config(mode: Mode) -> CcConfig {
    CcConfig {
        mode,
        ..CcConfig::default()
    }
}

fn per_slice(c: &mut Criterion) {
    let mut g = c.benchmark_group("cc_per_slice");

    // Hardware floor of any two-domain scheme: one RMW per domain on
    // admission and one on release (4 uncontended locked RMWs, separate lines).
    let floor = [Padded(AtomicU64::new(0)), Padded(AtomicU64::new(0))];
    g.bench_function("floor_4_rmw", |b| {
        b.iter(|| {
            let f = black_box(&floor);
            f[0].0
                .fetch_add(black_box(u64::from(SLICE)), Ordering::AcqRel);
            f[1].0
                .fetch_add(black_box(u64::from(SLICE)), Ordering::AcqRel);
            f[1].0
                .fetch_sub(black_box(u64::from(SLICE)), Ordering::AcqRel);
            f[0].0
                .fetch_sub(black_box(u64::from(SLICE)), Ordering::AcqRel)
        })
    });

    let (bypass, _) = Bypass::new(&config(Mode::Enforce), 1, &[0]).unwrap();
    g.bench_function("compiled_out", |b| {
        b.iter(|| {
            let ctl = black_box(&bypass);
            match ctl.try_acquire(black_box(0), black_box(0), black_box(SLICE), 0) {
                Ok(Admission::Admit(p)) => ctl.release(p, Effect::Success).is_ok(),
                _ => false,
            }
        })
    });

    #[cfg(not(feature = "adaptive-cc"))]
    {
        let (ctl, _) = Controller::new(&config(Mode::Enforce), 1, &[0]).unwrap();
        assert!(!Controller::compiled_in());
        g.bench_function("controller_compiled_out", |b| {
            b.iter(|| {
                let ctl = black_box(&ctl);
                match ctl.try_acquire(black_box(0), black_box(0), black_box(SLICE), 0) {
                    Ok(Admission::Admit(p)) => ctl.release(p, Effect::Success).is_ok(),
                    _ => false,
                }
            })
        });
    }

    #[cfg(feature = "adaptive-cc")]
    for (name, mode) in [
        ("off", Mode::Off),
        ("observe", Mode::Observe),
        ("enforce", Mode::Enforce),
    ] {
        // One device, two routes; the bench uses route 1.
        let (ctl, _m) = Controller::new(&config(mode), 1, &[0, 0]).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| {
                let ctl = black_box(&ctl);
                match ctl.try_acquire(black_box(0), black_box(1), black_box(SLICE), 0) {
                    Ok(Admission::Admit(p)) => ctl.release(p, Effect::Success).is_ok(),
                    _ => false,
                }
            })
        });
        if mode == Mode::Enforce {
            assert_eq!(ctl.route_snapshot(1).unwrap().in_flight, 0);
            g.bench_function("enforce_record", |b| {
                b.iter(|| {
                    let ctl = black_box(&ctl);
                    let mut rec = TokenRecord::default();
                    match ctl.try_acquire(black_box(0), black_box(1), black_box(SLICE), 0) {
                        Ok(Admission::Admit(p)) => {
                            if p.record_into(&mut rec).is_err() {
                                return false;
                            }
                            ctl.release_record(black_box(&mut rec), Effect::Success)
                                .is_ok()
                        }
                        _ => false,
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, per_slice);
criterion_main!(benches);
