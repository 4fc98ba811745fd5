//! Cost of the C ABI: the same operations through `railyard-ffi`'s
//! `extern "C"` entry points (handle lookup, panic guard, plain-data
//! conversions) against calling `railyard-core` directly, in the same run.
//!
//! - `token/*`: claim + complete of a full `TokenRecord` round trip;
//!   `2 threads` runs two threads on one shared pool (time per round trip);
//!   `ffi cache` goes through a per-thread `ry_token_cache` of 32 tokens
//!   (`ry_token_cache_claim` / `ry_token_cache_complete`; with 2 threads,
//!   one cache each).
//! - `cc/*`: `try_acquire` + `release` of one slice, enforce mode.
//!
//! Run: `cargo bench -p railyard-benches --bench ffi -- --warm-up-time 1 --measurement-time 3`
//!
//! The measured sessions (this registry against the first design, the
//! per-thread caches): the C ABI section of `docs/benchmarks.md`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use railyard_core::cc::{Admission, CcConfig, Controller, Mode};
use railyard_core::classify::Effect;
use railyard_core::token::{TokenPool, TokenRecord};
use railyard_ffi::cc::{
    ry_admission, ry_cc, ry_cc_config, ry_cc_config_default, ry_cc_create, ry_cc_release,
    ry_cc_try_acquire,
};
use railyard_ffi::enums::ry_effect;
use railyard_ffi::ry_status;
use railyard_ffi::token::{
    ry_token_claim, ry_token_complete, ry_token_pool, ry_token_pool_create, ry_token_record,
};
use railyard_ffi::token_cache::{
    ry_token_cache, ry_token_cache_claim, ry_token_cache_complete, ry_token_cache_create,
    ry_token_cache_destroy,
};

fn ffi_pool() -> ry_token_pool {
    let mut p = ry_token_pool::default();
    // SAFETY: `p` is a live local.
    assert_eq!(unsafe { ry_token_pool_create(1024, &mut p) }, ry_status::Ok);
    p
}

#[inline]
fn ffi_round_trip(p: ry_token_pool, rec: &ry_token_record, out: &mut ry_token_record) {
    let mut wr = 0u64;
    // SAFETY: all pointers come from live references.
    let st = unsafe { ry_token_claim(p, rec, &mut wr) };
    debug_assert_eq!(st, ry_status::Ok);
    // SAFETY: as above.
    let st = unsafe { ry_token_complete(p, wr, out) };
    debug_assert_eq!(st, ry_status::Ok);
}

fn ffi_cache(p: ry_token_pool) -> ry_token_cache {
    let mut c = ry_token_cache::default();
    // SAFETY: `c` is a live local.
    let st = unsafe { ry_token_cache_create(p, 32, &mut c) };
    assert_eq!(st, ry_status::Ok);
    c
}

#[inline]
fn ffi_cache_round_trip(
    c: ry_token_cache,
    p: ry_token_pool,
    rec: &ry_token_record,
    out: &mut ry_token_record,
) {
    let mut wr = 0u64;
    // SAFETY: all pointers come from live references.
    let st = unsafe { ry_token_cache_claim(c, p, rec, &mut wr) };
    debug_assert_eq!(st, ry_status::Ok);
    // SAFETY: as above.
    let st = unsafe { ry_token_cache_complete(c, p, wr, out) };
    debug_assert_eq!(st, ry_status::Ok);
}

/// Two threads each do `iters` operations; time per operation as in
/// `token.rs` (elapsed / threads).
fn two_threads(iters: u64, op: impl Fn() + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..iters {
                    op();
                }
            });
        }
    });
    start.elapsed() / 2
}

fn token(c: &mut Criterion) {
    let mut g = c.benchmark_group("token");
    let rec = TokenRecord {
        bytes: 65536,
        ..TokenRecord::default()
    };
    let core_pool: TokenPool = TokenPool::new(1024).unwrap();
    g.bench_function("core", |b| {
        b.iter(|| {
            let wr = core_pool.claim(black_box(rec)).unwrap();
            black_box(core_pool.complete(wr).unwrap())
        })
    });
    let p = ffi_pool();
    let frec = ry_token_record {
        bytes: 65536,
        ..Default::default()
    };
    g.bench_function("ffi", |b| {
        let mut out = ry_token_record::default();
        b.iter(|| {
            ffi_round_trip(p, black_box(&frec), &mut out);
            black_box(out.bytes)
        })
    });
    let shared: TokenPool = TokenPool::new(1024).unwrap();
    g.bench_function("core 2 threads", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                let wr = shared.claim(rec).unwrap();
                black_box(shared.complete(wr).unwrap());
            })
        })
    });
    g.bench_function("ffi 2 threads", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, || {
                let mut out = ry_token_record::default();
                ffi_round_trip(p, &frec, &mut out);
                black_box(out.bytes);
            })
        })
    });
    let one = ffi_cache(p);
    g.bench_function("ffi cache", |b| {
        let mut out = ry_token_record::default();
        b.iter(|| {
            ffi_cache_round_trip(one, p, black_box(&frec), &mut out);
            black_box(out.bytes)
        })
    });
    assert_eq!(ry_token_cache_destroy(one), ry_status::Ok);
    g.bench_function("ffi cache 2 threads", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        let c = ffi_cache(p);
                        let mut out = ry_token_record::default();
                        for _ in 0..iters {
                            ffi_cache_round_trip(c, p, &frec, &mut out);
                            black_box(out.bytes);
                        }
                        assert_eq!(ry_token_cache_destroy(c), ry_status::Ok);
                    });
                }
            });
            start.elapsed() / 2
        })
    });
    g.finish();
}

fn cc(c: &mut Criterion) {
    let mut g = c.benchmark_group("cc");
    let cfg = CcConfig {
        mode: Mode::Enforce,
        ..CcConfig::default()
    };
    let (ctl, _m) = Controller::new(&cfg, 1, &[0]).unwrap();
    g.bench_function("core", |b| {
        b.iter(
            || match ctl.try_acquire(0, 0, black_box(65536), 0).unwrap() {
                Admission::Admit(p) => black_box(ctl.release(p, Effect::Success).unwrap()),
                _ => unreachable!(),
            },
        )
    });
    let mut fcfg = ry_cc_config {
        mode: 0,
        hard_error_threshold: 0,
        high_pressure_epochs: 0,
        low_pressure_epochs: 0,
        target_mode: 0,
        min_window_bytes: 0,
        max_window_bytes: 0,
        initial_window_bytes: 0,
        target_drain_us: 0,
        cooldown_ms: 0,
        probe_window_bytes: 0,
        additive_increase_bytes: 0,
        decrease_percent: 0,
    };
    let mut h = ry_cc::default();
    // SAFETY: pointers come from live locals.
    unsafe {
        assert_eq!(ry_cc_config_default(&mut fcfg), ry_status::Ok);
        fcfg.mode = 2; // enforce
        assert_eq!(
            ry_cc_create(&fcfg, 1, [0u16].as_ptr(), 1, &mut h),
            ry_status::Ok
        );
    }
    g.bench_function("ffi", |b| {
        let mut adm = std::mem::MaybeUninit::<ry_admission>::uninit();
        b.iter(|| {
            // SAFETY: `adm` is written by try_acquire before it is read.
            unsafe {
                let st = ry_cc_try_acquire(h, 0, 0, black_box(65536), 0, adm.as_mut_ptr());
                debug_assert_eq!(st, ry_status::Ok);
                let a = adm.assume_init_mut();
                let st = ry_cc_release(
                    h,
                    &mut a.permit,
                    ry_effect::Success as u32,
                    std::ptr::null_mut(),
                );
                black_box(st)
            }
        })
    });
    g.finish();
}

criterion_group!(benches, token, cc);
criterion_main!(benches);
