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
//! ## Measured
//!
//! Criterion on the 2-core dev VM with the machine otherwise idle
//! (2026-11-29, 14:40 UTC), ratios from the same run:
//!
//! | contender | 1 thread | vs array_queue |
//! |---|---|---|
//! | railyard | 15.0 ns | 0.90× |
//! | array_queue | 16.7 ns | 1.00× |
//! | mutex_vec | 25.0 ns | 1.50× |
//! | railyard_full_record (56-byte record) | 21.0 ns | 1.26× |
//!
//! Two threads on one pool do not give a stable answer on this VM: three
//! consecutive runs after adding the CAS backoff gave railyard / array_queue
//! / mutex_vec = 29 / 259 / 187 ns, then 113 / 44 / 139 ns; before the
//! backoff, 160 / 222 / 111 and 175 / 52 / 130 ns. The two vCPUs'
//! scheduling dominates; quote no contended ratio from this machine.
//!
//! The compact record (issue #18), one criterion run per build alternated
//! twice on a heavily loaded host (load average 7–8 on 2 cores, so only the
//! ratios mean anything): `railyard_full_record` 44.3 / 132 ns with the old
//! 64-byte record vs 23.1 / 28.2 ns with the 56-byte one (round trip with
//! a `u64` record in the same runs: 9.1 / 18.9 and 16.5 / 23.2 ns). Under
//! callgrind the full-record round trip went 105 → 100 instructions
//! (`token_icount railyard_full_record`; the `u64` arm 85 → 85).
//!
//! Instructions per round trip under callgrind (`ci/icount.sh`, repeatable
//! whatever the load): railyard 66, array_queue 115 (railyard 0.57×),
//! mutex_vec 91 (uncontended futex mutex: two CAS pairs and no syscall).
//!
//! Per-worker caches (issue #18 item 4; `railyard_cache` = a
//! `TokenCache<u64, 32>` per thread over the shared pool, what the engine's
//! workers use), two criterion runs back to back on 2026-12-01 ~20:32 UTC
//! with another agent's qemu guest running (load average 2.7–3.9 on 2
//! cores), `cargo bench -p railyard-benches --bench token -- --warm-up-time 1
//! --measurement-time 3`; two threads each doing claim + complete on one
//! pool, time per round trip:
//!
//! | contender | run 1 | run 2 | vs array_queue (run 1 / 2) |
//! |---|---|---|---|
//! | railyard (pool) | 9.9 ns | 10.2 ns | 0.59× / 0.84× |
//! | railyard_cache | 7.5 ns | 7.0 ns | 0.45× / 0.57× |
//! | array_queue | 16.7 ns | 12.2 ns | 1.00× |
//! | mutex_vec | 14.8 ns | 16.4 ns | 0.88× / 1.34× |
//!
//! (One thread in run 1: railyard 11.4, railyard_cache 5.4, array_queue 8.6,
//! mutex_vec 11.7 ns.) The poster/poller group is dominated by the hand-off
//! queue and was not stable (railyard_cache 59 then 132 ns; the others
//! 49–102 ns); quote no ratio from it.
//!
//! Goal (issue #2): railyard ≤ 1.0× ArrayQueue — met single-threaded (time
//! and instructions); the contended case is unresolved on this machine.

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
