//! Shared pieces of the token benchmarks (`benches/token.rs`) and the
//! callgrind driver (`examples/token_icount.rs`): the two baseline free
//! lists with the same API as `TokenPool`, per-thread handles, and the
//! two-thread drivers, so both measure exactly the same code.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use railyard_core::token::{TokenCache, TokenPool};

/// Slots of every contender.
pub const CAP: usize = 1024;
/// Tokens a per-worker cache holds (moved in batches of half that).
pub const CACHE: usize = 64;

/// The operations every contender offers.
pub trait Pool: Sync {
    /// Claims a token holding `record`; its wr_id.
    fn claim(&self, record: u64) -> Option<u64>;
    /// Completes `wr_id`; its record.
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

/// Free list on crossbeam's `ArrayQueue`.
pub struct AqPool {
    free: ArrayQueue<u32>,
    slots: Slots,
}

impl AqPool {
    /// All `CAP` slots free.
    pub fn new() -> Self {
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

/// Free list in a `Mutex<Vec<u32>>`.
pub struct MutexPool {
    free: Mutex<Vec<u32>>,
    slots: Slots,
}

impl MutexPool {
    /// All `CAP` slots free.
    pub fn new() -> Self {
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

/// One claim + complete on `p`.
#[inline]
pub fn round_trip<P: Pool>(p: &P, v: u64) -> u64 {
    let wr = p.claim(v).unwrap();
    p.complete(black_box(wr)).unwrap()
}

/// One thread's handle on a contender: the shared pool itself, or a
/// per-worker `TokenCache` over it.
pub trait Worker {
    /// Claims a token holding `record`; its wr_id.
    fn claim(&mut self, record: u64) -> Option<u64>;
    /// Completes `wr_id`; its record.
    fn complete(&mut self, wr_id: u64) -> Option<u64>;
}

/// A thread using a shared contender directly.
pub struct Direct<'a, P>(pub &'a P);

impl<P: Pool> Worker for Direct<'_, P> {
    #[inline]
    fn claim(&mut self, record: u64) -> Option<u64> {
        self.0.claim(record)
    }
    #[inline]
    fn complete(&mut self, wr_id: u64) -> Option<u64> {
        self.0.complete(wr_id)
    }
}

impl<const N: usize> Worker for TokenCache<'_, u64, N> {
    #[inline]
    fn claim(&mut self, record: u64) -> Option<u64> {
        TokenCache::claim(self, record).ok()
    }
    #[inline]
    fn complete(&mut self, wr_id: u64) -> Option<u64> {
        TokenCache::complete(self, wr_id).ok()
    }
}

/// Time for `iters` round trips per thread on `threads` threads, each with
/// its own handle from `mk`, divided so the result is per round trip.
pub fn contended<W: Worker, F: Fn() -> W + Sync>(mk: &F, threads: u64, iters: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut h = mk();
                for i in 0..iters {
                    let wr = h.claim(black_box(t ^ i)).unwrap();
                    black_box(h.complete(black_box(wr)).unwrap());
                }
            });
        }
    });
    start.elapsed() / threads as u32
}

/// Waits for `f` to yield a value: spin briefly, then yield the CPU (two
/// threads on a shared 2-vCPU VM must not spin against a descheduled peer).
#[inline]
pub fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let mut spins = 0u32;
    loop {
        if let Some(v) = f() {
            return v;
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The dedicated-poller model: one thread claims and "posts" (pushes the
/// wr_id to a completion queue), another polls and completes. Per token.
pub fn poster_poller<W: Worker, F: Fn() -> W + Sync>(mk: &F, iters: u64) -> Duration {
    let cq = ArrayQueue::<u64>::new(256);
    let start = Instant::now();
    std::thread::scope(|s| {
        let cq = &cq;
        s.spawn(move || {
            let mut h = mk();
            for i in 0..iters {
                let wr = wait_for(|| h.claim(black_box(i)));
                wait_for(|| cq.push(wr).ok());
            }
        });
        s.spawn(move || {
            let mut h = mk();
            for _ in 0..iters {
                let wr = wait_for(|| cq.pop());
                black_box(h.complete(wr).unwrap());
            }
        });
    });
    start.elapsed()
}

impl Default for AqPool {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for MutexPool {
    fn default() -> Self {
        Self::new()
    }
}
