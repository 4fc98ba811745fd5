//! Receiver-credit ledger: lock-free packed-word ledger vs a `Mutex` ledger
//! with the same semantics, measured in the same run; plus the cost of the
//! disabled path.
//!
//! One op = `try_reserve` + `commit` + `release` of a two-resource charge
//! (4 KiB DATA_BYTES + 1 REQUEST_SLOT) on one shared entry. The control
//! half refills the cumulative grant every 1024 ops (drain + apply update),
//! identically for both ledgers. With 2 threads both hammer the same entry
//! (worst-case contention); one of them also runs the refills. Times are per
//! op per thread (`elapsed / iters`, each thread doing `iters` ops).
//!
//! Run: `cargo bench -p railyard-benches --bench credit -- --warm-up-time 1
//! --measurement-time 3`. Current figures: `railyard_core::credit`'s module
//! docs; the measured sessions: the receiver-credit section of
//! `docs/benchmarks.md`.
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use railyard_core::credit::{
    Charge, CreditLink, CreditMode, CreditUpdate, EntryId, Gate, LedgerConfig, LinkEvent,
    SenderControl, SenderLedger, SessionId, Totals,
};

const RX: SessionId = SessionId(42);
const CHARGE: Charge = Charge([4096, 1, 0, 0]);
const REFILL_EVERY: u64 = 1024;
const REFILL_OPS: u64 = 4096;

/// Operations a credit ledger offers to the benchmark loop.
trait Ledger: Sync {
    /// reserve + commit + release on entry `i` (0 or 1); false if refused
    /// for lack of credit.
    fn op(&self, i: usize) -> bool;
}

// --- the lock-free ledger ----------------------------------------------------

struct LockFree {
    ledger: SenderLedger,
    entries: [EntryId; 2],
}

struct LockFreeCtl {
    ctl: SenderControl,
    granted_ops: u64,
    seq: u64,
}

fn lock_free() -> (LockFree, LockFreeCtl) {
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 1,
        window: [u32::MAX as u64, (1 << 20) - 1, 0, 0],
    })
    .unwrap();
    ctl.bind(&ledger, 0, RX, 1).unwrap();
    ctl.bind(&ledger, 1, RX, 1).unwrap();
    let entries = [ledger.entry(0, 0).unwrap(), ledger.entry(1, 0).unwrap()];
    let mut c = LockFreeCtl {
        ctl,
        granted_ops: 0,
        seq: 0,
    };
    let lf = LockFree { ledger, entries };
    c.refill(&lf);
    (lf, c)
}

impl LockFreeCtl {
    fn refill(&mut self, lf: &LockFree) {
        self.granted_ops += REFILL_OPS;
        self.seq += 1;
        for peer in 0..2 {
            self.ctl.usage(&lf.ledger, peer, 0, Charge::ZERO).unwrap(); // drain
            let u = CreditUpdate {
                receiver_session: RX,
                epoch: 1,
                sequence: self.seq,
                grants: Totals::from_charge(&Charge([
                    self.granted_ops * CHARGE.0[0],
                    self.granted_ops,
                    0,
                    0,
                ])),
                ..Default::default()
            };
            self.ctl.apply_update(&lf.ledger, peer, &u, 0).unwrap();
        }
    }
}

impl Ledger for LockFree {
    #[inline]
    fn op(&self, i: usize) -> bool {
        match self.ledger.try_reserve(self.entries[i], black_box(&CHARGE)) {
            Ok(r) => {
                let c = r.commit().unwrap();
                black_box(self.ledger.release(c).unwrap());
                true
            }
            Err(_) => false,
        }
    }
}

// --- the Mutex ledger with the same semantics ---------------------------------

#[derive(Default)]
struct State {
    grant: [u64; 4],
    avail: [u64; 4],
    committed: [u64; 4],
    released: [u64; 4],
    drained_released: [u64; 4],
    open: bool,
    generation: u16,
}

/// The RFC's reference design: one ledger critical section.
struct Locked {
    state: Mutex<[State; 2]>,
}

struct LockedCtl {
    granted_ops: u64,
}

impl Locked {
    fn reserve(&self, i: usize, c: &Charge) -> Result<u16, ()> {
        let mut g = self.state.lock().unwrap();
        let s = &mut g[i];
        if !s.open || (0..4).any(|k| s.avail[k] < c.0[k]) {
            return Err(());
        }
        for k in 0..4 {
            s.avail[k] -= c.0[k];
        }
        Ok(s.generation)
    }
    fn commit(&self, i: usize, generation: u16, c: &Charge) -> Result<(), ()> {
        let mut g = self.state.lock().unwrap();
        let s = &mut g[i];
        if s.generation != generation {
            return Err(());
        }
        for k in 0..4 {
            s.committed[k] = s.committed[k].checked_add(c.0[k]).ok_or(())?;
        }
        Ok(())
    }
    fn release(&self, i: usize, generation: u16, c: &Charge) -> bool {
        let mut g = self.state.lock().unwrap();
        let s = &mut g[i];
        if s.generation != generation {
            return false;
        }
        // Exactly once: never release more than is committed.
        if (0..4).any(|k| s.released[k] + c.0[k] > s.committed[k]) {
            return false;
        }
        for k in 0..4 {
            s.released[k] += c.0[k];
        }
        true
    }
}

impl LockedCtl {
    fn refill(&mut self, l: &Locked) {
        self.granted_ops += REFILL_OPS;
        let new = [self.granted_ops * CHARGE.0[0], self.granted_ops, 0, 0];
        for i in 0..2 {
            let mut g = l.state.lock().unwrap();
            let s = &mut g[i];
            s.drained_released = s.released; // the usage-report drain
            for (k, &total) in new.iter().enumerate() {
                let add = total.checked_sub(s.grant[k]).unwrap();
                s.avail[k] += add;
            }
            s.grant = new;
            s.open = true;
        }
    }
}

fn locked() -> (Locked, LockedCtl) {
    let l = Locked {
        state: Mutex::new([State::default(), State::default()]),
    };
    let mut c = LockedCtl { granted_ops: 0 };
    c.refill(&l);
    (l, c)
}

impl Ledger for Locked {
    #[inline]
    fn op(&self, i: usize) -> bool {
        match self.reserve(i, black_box(&CHARGE)) {
            Ok(g) => {
                self.commit(i, g, &CHARGE).unwrap();
                black_box(self.release(i, g, &CHARGE));
                true
            }
            Err(()) => false,
        }
    }
}

// --- loops --------------------------------------------------------------------

/// `iters` ops on one thread that also refills every `REFILL_EVERY` ops;
/// it keeps refilling until `others_done` (the other thread may still need
/// credit after this one finished).
fn run_controller<L: Ledger>(
    l: &L,
    iters: u64,
    others_done: &AtomicBool,
    mut refill: impl FnMut(),
) {
    let mut done = 0u64;
    while done < iters {
        if l.op(0) {
            done += 1;
            if done & (REFILL_EVERY - 1) == 0 {
                refill();
            }
        } else {
            refill();
        }
    }
    while !others_done.load(Ordering::Acquire) {
        refill();
        std::thread::yield_now();
    }
}

fn run_worker<L: Ledger>(l: &L, i: usize, iters: u64) {
    let mut done = 0u64;
    while done < iters {
        if l.op(i) {
            done += 1;
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Two threads, `iters` ops each; the worker uses entry `worker_entry`
/// (0 = the controller's entry: same-entry contention; 1 = its own peer).
fn two_threads<L: Ledger>(
    l: &L,
    worker_entry: usize,
    iters: u64,
    refill: impl FnMut() + Send,
) -> Duration {
    let worker_done = AtomicBool::new(false);
    let start = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            run_worker(l, worker_entry, iters);
            worker_done.store(true, Ordering::Release);
        });
        run_controller(l, iters, &worker_done, refill);
    });
    start.elapsed()
}

fn bench_ledgers(c: &mut Criterion) {
    let mut g = c.benchmark_group("credit/reserve_commit_release");
    {
        let (lf, mut ctl) = lock_free();
        g.bench_function("lock_free/1_thread", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                run_controller(&lf, iters, &AtomicBool::new(true), || ctl.refill(&lf));
                start.elapsed()
            })
        });
        g.bench_function("lock_free/2_threads_two_peers", |b| {
            b.iter_custom(|iters| two_threads(&lf, 1, iters, || ctl.refill(&lf)))
        });
        g.bench_function("lock_free/2_threads_same_entry", |b| {
            b.iter_custom(|iters| two_threads(&lf, 0, iters, || ctl.refill(&lf)))
        });
        assert_eq!(ctl.ctl.metrics(&lf.ledger).refused_ops, 0);
    }
    {
        let (l, mut ctl) = locked();
        g.bench_function("mutex/1_thread", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                run_controller(&l, iters, &AtomicBool::new(true), || ctl.refill(&l));
                start.elapsed()
            })
        });
        g.bench_function("mutex/2_threads_two_peers", |b| {
            b.iter_custom(|iters| two_threads(&l, 1, iters, || ctl.refill(&l)))
        });
        g.bench_function("mutex/2_threads_same_entry", |b| {
            b.iter_custom(|iters| two_threads(&l, 0, iters, || ctl.refill(&l)))
        });
    }
    g.finish();
}

// --- the disabled path ----------------------------------------------------------

/// What a dispatch does without this layer: hand off.
#[inline(never)]
fn dispatch_baseline(bytes: u32) -> u64 {
    black_box(bytes) as u64
}

/// The same dispatch with the credit layer compiled in but disabled: one
/// `gate()` match, `Bypass`, and no ledger (`None`).
#[inline(never)]
fn dispatch_with_credit(link: &CreditLink, ledger: Option<&LockFree>, bytes: u32) -> u64 {
    match link.gate() {
        Gate::Bypass => black_box(bytes) as u64,
        Gate::Reserve => match ledger {
            Some(l) if l.op(0) => black_box(bytes) as u64,
            _ => 0,
        },
        Gate::Block { .. } | Gate::Fail => 0,
    }
}

fn bench_disabled(c: &mut Criterion) {
    let mut g = c.benchmark_group("credit/disabled_path");
    let mut link = CreditLink::new(CreditMode::default());
    link.on(LinkEvent::Start).unwrap();
    assert_eq!(link.gate(), Gate::Bypass);
    g.bench_function("no_credit_layer", |b| {
        b.iter(|| dispatch_baseline(black_box(4096)))
    });
    g.bench_function("credit_disabled", |b| {
        b.iter(|| dispatch_with_credit(black_box(&link), black_box(None), black_box(4096)))
    });
    g.finish();
}

criterion_group!(benches, bench_ledgers, bench_disabled);
criterion_main!(benches);
