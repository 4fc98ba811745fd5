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
//! `railyard_full_record` is the real 56-byte `TokenRecord`, for reference.
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
//! Instructions per round trip under callgrind (`ci/icount.sh`, repeatable
//! whatever the load): railyard 66, array_queue 115 (railyard 0.57×),
//! mutex_vec 91 (uncontended futex mutex: two CAS pairs and no syscall).
//!
//! Goal (issue #2): railyard ≤ 1.0× ArrayQueue — met single-threaded (time
//! and instructions); the contended case is unresolved on this machine.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use crossbeam_queue::ArrayQueue;
use railyard_core::token::{TokenPool, TokenRecord};

const CAP: usize = 1024;

/// The operations every contender offers.
trait Pool: Sync {
    fn claim(&self, record: u64) -> Option<u64>;
    fn complete(&self, wr_id: u64) -> Option<u64>;
}

impl Pool for TokenPool<u64> {
    #[inline]
    fn claim(&self, record: u64) -> Option<u64> {
        TokenPool::claim(self, record).ok()
    }
    #[inline]
    fn complete(&self, wr_id: u64) -> Option<u64> {
        TokenPool::complete(self, wr_id).ok()
    }
}

/// Per-slot sequence and record, shared by both baselines.
struct Slots {
    seq: Box<[AtomicU32]>,
    record: Box<[AtomicU64]>,
}

impl Slots {
    fn new() -> Self {
        Self {
            seq: (0..CAP).map(|_| AtomicU32::new(0)).collect(),
            record: (0..CAP).map(|_| AtomicU64::new(0)).collect(),
        }
    }
    #[inline]
    fn publish(&self, i: u32, record: u64) -> u64 {
        let i = i as usize;
        let seq = self.seq[i].load(Ordering::Relaxed).wrapping_add(1);
        self.record[i].store(record, Ordering::Relaxed);
        self.seq[i].store(seq, Ordering::Release);
        (u64::from(seq) << 32) | i as u64
    }
    #[inline]
    fn take(&self, wr_id: u64) -> Option<(u32, u64)> {
        let i = wr_id as u32;
        let seq = (wr_id >> 32) as u32;
        let s = self.seq.get(i as usize)?;
        s.compare_exchange(
            seq,
            seq.wrapping_add(1),
            Ordering::AcqRel,
            Ordering::Relaxed,
        )
        .ok()?;
        Some((i, self.record[i as usize].load(Ordering::Relaxed)))
    }
}

struct AqPool {
    free: ArrayQueue<u32>,
    slots: Slots,
}

impl AqPool {
    fn new() -> Self {
        let free = ArrayQueue::new(CAP);
        for i in 0..CAP as u32 {
            free.push(i).unwrap();
        }
        Self {
            free,
            slots: Slots::new(),
        }
    }
}

impl Pool for AqPool {
    #[inline]
    fn claim(&self, record: u64) -> Option<u64> {
        let i = self.free.pop()?;
        Some(self.slots.publish(i, record))
    }
    #[inline]
    fn complete(&self, wr_id: u64) -> Option<u64> {
        let (i, r) = self.slots.take(wr_id)?;
        let _ = self.free.push(i);
        Some(r)
    }
}

struct MutexPool {
    free: Mutex<Vec<u32>>,
    slots: Slots,
}

impl MutexPool {
    fn new() -> Self {
        Self {
            free: Mutex::new((0..CAP as u32).collect()),
            slots: Slots::new(),
        }
    }
}

impl Pool for MutexPool {
    #[inline]
    fn claim(&self, record: u64) -> Option<u64> {
        let i = self.free.lock().unwrap().pop()?;
        Some(self.slots.publish(i, record))
    }
    #[inline]
    fn complete(&self, wr_id: u64) -> Option<u64> {
        let (i, r) = self.slots.take(wr_id)?;
        self.free.lock().unwrap().push(i);
        Some(r)
    }
}

#[inline]
fn round_trip<P: Pool>(p: &P, v: u64) -> u64 {
    let wr = p.claim(v).unwrap();
    p.complete(black_box(wr)).unwrap()
}

/// Time for `iters` round trips per thread on `threads` threads sharing `p`,
/// divided so the result is per round trip.
fn contended<P: Pool>(p: &P, threads: u64, iters: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..iters {
                    black_box(round_trip(p, t ^ i));
                }
            });
        }
    });
    start.elapsed() / threads as u32
}

fn bench(c: &mut Criterion) {
    let ours = TokenPool::<u64>::new(CAP).unwrap();
    let aq = AqPool::new();
    let mx = MutexPool::new();
    let full: TokenPool = TokenPool::new(CAP).unwrap();

    let mut g = c.benchmark_group("token_round_trip_1thread");
    g.bench_function("railyard", |b| b.iter(|| round_trip(&ours, black_box(7))));
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

    let mut g = c.benchmark_group("token_round_trip_2threads");
    g.bench_function("railyard", |b| b.iter_custom(|n| contended(&ours, 2, n)));
    g.bench_function("array_queue", |b| b.iter_custom(|n| contended(&aq, 2, n)));
    g.bench_function("mutex_vec", |b| b.iter_custom(|n| contended(&mx, 2, n)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
