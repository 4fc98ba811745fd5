//! Rail selector cost (RFC 4534): `pick` for flag-off, V0, V1, V2 and V3
//! with 2, 4 and 8 devices, and a full `pick` + `release` cycle.
//!
//! Two builds, because "no ledger compiled in" is a compile-time property:
//!
//! ```text
//! # no ledger compiled in (baseline): only flag_off exists
//! cargo bench -p railyard-benches --bench rail -- --warm-up-time 1 --measurement-time 3
//! # ledger compiled in: flag_off, V0..V3 in the same run
//! cargo bench -p railyard-benches --bench rail --features peer-feedback -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! `pick` is timed alone (charges are released outside the timed loop);
//! `cycle` is `pick` + `release(Completed)` (NIC and peer EWMA update).
//! V2/V3 run with fresh peer samples on every device (no fallback); peers
//! rotate over 4 ids. Results: see the table in `railyard_core::rail`; the
//! measured sessions: the rail-selection section of `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use railyard_core::rail::{DeviceSpec, Outcome, RailCharge, RailConfig, Selector, Variant};

const SLICE: u32 = 65536;
const PEERS: u32 = 4;
const BATCH: usize = 1024;

fn modes() -> Vec<(&'static str, RailConfig)> {
    let base = RailConfig {
        peer_ttl_ns: u64::MAX / 2,
        ..RailConfig::default()
    };
    #[allow(unused_mut)]
    let mut m = vec![("flag_off", base)];
    #[cfg(feature = "peer-feedback")]
    for (name, v) in [
        ("V0", Variant::V0),
        ("V1", Variant::V1),
        ("V2", Variant::V2),
        ("V3", Variant::V3),
    ] {
        m.push((
            name,
            RailConfig {
                peer_accounting: true,
                variant: v,
                ..base
            },
        ));
    }
    let _ = Variant::V0;
    m
}

/// A selector over `n` devices with a completed sample for every peer on
/// every device, so V2/V3 score with peer feedback.
fn warmed(n: usize, cfg: RailConfig) -> Selector {
    let devs: Vec<DeviceSpec> = (0..n)
        .map(|i| DeviceSpec::new(25_000_000_000).with_tier_q8(if i % 2 == 0 { 256 } else { 320 }))
        .collect();
    let sel = Selector::new(&devs, cfg).unwrap();
    for d in 0..n as u16 {
        for p in 0..PEERS {
            let c = sel.charge(d, Some(p), SLICE, 1_000).unwrap();
            sel.release(
                c,
                Outcome::Completed { post_ns: 1_000 },
                4_000 + u64::from(d) * 100,
            )
            .unwrap();
        }
    }
    sel
}

fn pick(c: &mut Criterion) {
    let mut g = c.benchmark_group("rail_pick");
    for n in [2usize, 4, 8] {
        for (name, cfg) in modes() {
            let sel = warmed(n, cfg);
            let mut held: Vec<RailCharge> = Vec::with_capacity(BATCH);
            let mut now = 10_000u64;
            g.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let k = left.min(BATCH as u64);
                        let start = Instant::now();
                        for i in 0..k {
                            now += 1;
                            let p =
                                sel.pick(black_box(Some(i as u32 % PEERS)), black_box(SLICE), now);
                            held.push(p.charge);
                        }
                        total += start.elapsed();
                        for ch in held.drain(..) {
                            sel.release(ch, Outcome::Failed, now).unwrap();
                        }
                        left -= k;
                    }
                    total
                })
            });
        }
    }
    g.finish();
}

fn cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("rail_cycle");
    for n in [4usize] {
        for (name, cfg) in modes() {
            let sel = warmed(n, cfg);
            let mut now = 10_000u64;
            let mut i = 0u32;
            g.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    now += 3_000;
                    i = i.wrapping_add(1);
                    let p = sel.pick(black_box(Some(i % PEERS)), black_box(SLICE), now);
                    sel.release(
                        p.charge,
                        Outcome::Completed {
                            post_ns: now - 2_700,
                        },
                        now,
                    )
                    .unwrap();
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, pick, cycle);
criterion_main!(benches);
