//! loom: the blocking batch wait of railyard-verbs (`Engine::wait_batch`,
//! `verbs-shim/src/engine/waiters.rs`): a waiter registers in its slot (or
//! the overflow count), re-checks its task and sleeps; the settler bumps the
//! task's counter, reads the waiter count and wakes the matching slots.
//!
//! The real file is compiled here over loom's atomics, mutex and condition
//! variable (`waiters_sync` below stands in for the engine's facade of the
//! same name), so the models explore the shipped code; the task is a model
//! of `TaskCell` (one counter per slice, bumped SeqCst, and `waited`), and
//! the settle is `Tables::settled`'s check. A lost wake-up leaves a waiter
//! asleep with every other thread finished: loom reports the deadlock.
#![cfg(railyard_loom)]

mod waiters_sync {
    pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::{Condvar, Mutex};
}

#[allow(dead_code)]
#[path = "../../verbs-shim/src/engine/waiters.rs"]
mod waiters;

use loom::sync::atomic::{fence, AtomicU32, Ordering};
use loom::thread;
// std's Arc, not loom's: a model whose waiter deadlocks (the broken twins)
// unwinds that waiter's closure after loom's execution is gone, and loom's
// Arc aborts the test binary when dropped then.
use std::sync::Arc;
use std::time::Duration;
use waiters::{Probe, Waiters, Watched};

/// A one-slice task: `settled` as the slice counters, `waited` as in
/// `TaskCell`.
struct Task {
    settled: AtomicU32,
    waited: AtomicU32,
}

impl Task {
    fn new() -> Self {
        Task {
            settled: AtomicU32::new(0),
            waited: AtomicU32::new(0),
        }
    }

    fn done(&self, order: Ordering) -> bool {
        self.settled.load(order) >= 1
    }

    /// `Tables::settled`: the counter (SeqCst), then the waiter count, then
    /// the terminal check (SeqCst), then the wake. The waiters it
    /// signalled.
    ///
    /// The fence is the model's, not the engine's: loom regards SeqCst
    /// accesses as AcqRel (its README, "Unsupported features"; only
    /// `fence(SeqCst)` is modelled), so it would let the settler's `waited`
    /// load miss the waiter's increment while the waiter's re-check misses
    /// the counter bump. C11 forbids that outcome for the engine's SeqCst
    /// RMW + SeqCst load against the waiter's SeqCst RMW + fence + SeqCst
    /// load (the load of `waited` precedes the waiter's increment in the
    /// single SeqCst order, the increment its fence, the fence the counter
    /// bump, the bump the load: a cycle); the fence states that order in
    /// terms loom models.
    fn settle(&self, w: &Waiters) -> usize {
        self.settled.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.waited.load(Ordering::SeqCst) > 0 && self.done(Ordering::SeqCst) {
            w.wake(self)
        } else {
            0
        }
    }
}

impl Watched for Task {
    fn waited(&self) -> &AtomicU32 {
        &self.waited
    }
    fn still_open(&self) -> bool {
        !self.done(Ordering::SeqCst)
    }
}

/// `Engine::wait_batch`'s probe: the last open task of the batch (Acquire
/// loads, as `is_done`), no deadline.
fn wait_all(w: &Waiters, batch: &[Task]) -> bool {
    w.wait::<_, ()>(Duration::MAX, || {
        Ok(
            match batch.iter().rev().find(|t| !t.done(Ordering::Acquire)) {
                None => Probe::Done,
                Some(t) => Probe::Watch(t),
            },
        )
    })
    .unwrap()
}

/// One waiter in a slot on a batch of two tasks, settled last-first by
/// another thread, so the waiter watches the second task, then (unless it
/// saw both done) the first: the wait returns with both done and leaves no
/// registration behind, in every interleaving.
fn slot_waiter_model() {
    loom::model(|| {
        let w = Arc::new(Waiters::with_slots(1));
        let batch = Arc::new([Task::new(), Task::new()]);
        let (w2, b2) = (w.clone(), batch.clone());
        let waiter = thread::spawn(move || {
            assert!(wait_all(&w2, &b2[..]));
            assert!(b2.iter().all(|t| t.done(Ordering::Acquire)));
        });
        batch[1].settle(&w);
        batch[0].settle(&w);
        waiter.join().unwrap();
        assert!(batch.iter().all(|t| t.waited.load(Ordering::SeqCst) == 0));
        assert_eq!(w.registered(), (0, 0), "the slot was given back");
    });
}

#[test]
fn slot_waiter_is_never_lost() {
    slot_waiter_model();
}

/// Skipping the re-check after registering: a settlement between the probe
/// and the registration sees no waiter, and the waiter sleeps for good.
#[cfg(railyard_broken = "waiters_no_recheck")]
#[test]
#[should_panic(expected = "deadlock")]
fn broken_waiters_no_recheck() {
    slot_waiter_model();
}

/// Reading the parker's epoch after the re-check instead of before: a wake
/// between the two is taken for the one to wait for, and lost.
#[cfg(railyard_broken = "waiters_late_epoch")]
#[test]
#[should_panic(expected = "deadlock")]
fn broken_waiters_late_epoch() {
    slot_waiter_model();
}

/// One waiter thread per task, each waiting for its own task only.
fn spawn_waiters(w: &Arc<Waiters>, tasks: &Arc<[Task; 2]>) -> Vec<thread::JoinHandle<()>> {
    (0..2)
        .map(|i| {
            let (w, t) = (w.clone(), tasks.clone());
            thread::spawn(move || assert!(wait_all(&w, &t[i..=i])))
        })
        .collect()
}

/// Two waiters, one slot: one sleeps in the slot, the other on the shared
/// parker. Each task is settled by its own thread; both waits return, and
/// the slot and the overflow count are given back.
fn overflow_model() {
    loom::model(|| {
        let w = Arc::new(Waiters::with_slots(1));
        let tasks = Arc::new([Task::new(), Task::new()]);
        let waiters = spawn_waiters(&w, &tasks);
        tasks[0].settle(&w);
        tasks[1].settle(&w);
        for j in waiters {
            j.join().unwrap();
        }
        assert!(tasks.iter().all(|t| t.waited.load(Ordering::SeqCst) == 0));
        assert_eq!(w.registered(), (0, 0), "slot and overflow given back");
    });
}

#[test]
fn overflow_waiter_is_never_lost() {
    overflow_model();
}

#[cfg(railyard_broken = "waiters_no_recheck")]
#[test]
#[should_panic(expected = "deadlock")]
fn broken_waiters_no_recheck_overflow() {
    overflow_model();
}

/// Two waiters in two slots, each on its own task: the settlement of B's
/// task signals at most B's waiter, never A's (the targeted wake), and both
/// waits still return once A's task settles too.
fn targeted_model() {
    loom::model(|| {
        let w = Arc::new(Waiters::with_slots(2));
        let tasks = Arc::new([Task::new(), Task::new()]);
        let waiters = spawn_waiters(&w, &tasks);
        let woken = tasks[1].settle(&w);
        assert!(woken <= 1, "B's settlement signalled {woken} waiters");
        tasks[0].settle(&w);
        for j in waiters {
            j.join().unwrap();
        }
        assert_eq!(w.registered(), (0, 0));
    });
}

#[test]
fn wake_signals_only_the_watching_waiter() {
    targeted_model();
}

/// Waking every claimed slot (one condition variable for all, the scheme
/// the slots replace): B's settlement signals A's waiter too.
#[cfg(railyard_broken = "waiters_broadcast")]
#[test]
#[should_panic(expected = "signalled 2 waiters")]
fn broken_waiters_broadcast() {
    targeted_model();
}
