//! Token claim + complete round trip: `railyard_core::token::TokenPool`
//! against two baselines with the same API shape, measured in the same run.
//!
//! Every contender does the same work per round trip: take a free slot,
//! store a `u64` record, publish an odd per-slot sequence with `Release`,
//! build the wr_id; then CAS the sequence forward (the exactly-once check),
//! read the record and return the slot. They differ only in the free list:
//!
//! - `railyard`: the Treiber stack with an ABA-tagged head (`TokenPool<u64>`);
//! - `array_queue`: crossbeam's `ArrayQueue<u32>` of free indices;
//! - `mutex_vec`: a `std::sync::Mutex<Vec<u32>>` of free indices.
//!
//! `railyard_full_record` is the real 56-byte `TokenRecord`, for reference
//! (it was 64 bytes until 2026-12-01, and its slots straddled cache lines).
//! The 2-thread group runs two threads doing round trips on one shared pool
//! and reports time per round trip.
//!
//! Run: `cargo bench -p railyard-benches --bench token`
//!
//! Goal (issue #2): railyard ≤ 1.0× ArrayQueue. Current figures:
//! `railyard_core::token`'s module docs; the measured sessions (one
//! thread, two threads, the compact record, per-worker caches): the token
//! pool section of `docs/benchmarks.md`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use railyard_benches::token::{
    contended, poster_poller, round_trip, AqPool, Direct, MutexPool, CACHE, CAP,
};
use railyard_core::token::{TokenPool, TokenRecord};

fn bench(c: &mut Criterion) {
    let ours = TokenPool::<u64>::new(CAP).unwrap();
    let aq = AqPool::new();
    let mx = MutexPool::new();
    let full: TokenPool = TokenPool::new(CAP).unwrap();

    let mut g = c.benchmark_group("token_round_trip_1thread");
    g.bench_function("railyard", |b| b.iter(|| round_trip(&ours, black_box(7))));
    {
        let mut cache = ours.cache::<CACHE>();
        g.bench_function("railyard_cache", |b| {
            b.iter(|| {
                let wr = cache.claim(black_box(7)).unwrap();
                cache.complete(black_box(wr)).unwrap()
            })
        });
    }
    g.bench_function("array_queue", |b| b.iter(|| round_trip(&aq, black_box(7))));
    g.bench_function("mutex_vec", |b| b.iter(|| round_trip(&mx, black_box(7))));
    let rec = TokenRecord {
        bytes: 65536,
        post_ns: 1,
        ..TokenRecord::default()
    };
    g.bench_function("railyard_full_record", |b| {
        b.iter(|| {
            let wr = full.claim(black_box(rec)).unwrap();
            full.complete(black_box(wr)).unwrap()
        })
    });
    g.finish();

    let direct_ours = || Direct(&ours);
    let cached_ours = || ours.cache::<CACHE>();
    let direct_aq = || Direct(&aq);
    let direct_mx = || Direct(&mx);

    let mut g = c.benchmark_group("token_round_trip_2threads");
    g.bench_function("railyard", |b| {
        b.iter_custom(|n| contended(&direct_ours, 2, n))
    });
    g.bench_function("railyard_cache", |b| {
        b.iter_custom(|n| contended(&cached_ours, 2, n))
    });
    g.bench_function("array_queue", |b| {
        b.iter_custom(|n| contended(&direct_aq, 2, n))
    });
    g.bench_function("mutex_vec", |b| {
        b.iter_custom(|n| contended(&direct_mx, 2, n))
    });
    g.finish();

    let mut g = c.benchmark_group("token_poster_poller_2threads");
    g.bench_function("railyard", |b| {
        b.iter_custom(|n| poster_poller(&direct_ours, n))
    });
    g.bench_function("railyard_cache", |b| {
        b.iter_custom(|n| poster_poller(&cached_ours, n))
    });
    g.bench_function("array_queue", |b| {
        b.iter_custom(|n| poster_poller(&direct_aq, n))
    });
    g.bench_function("mutex_vec", |b| {
        b.iter_custom(|n| poster_poller(&direct_mx, n))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
