//! Blocking batch waits ([`Engine::wait_batch`](super::Engine::wait_batch),
//! issue #18): a waiter sleeps on a condition variable instead of spinning
//! on `batch_done`, leaving the cores to the workers.
//!
//! The waiter watches one open task (the last open one of its batch: tasks
//! finish roughly in order) by raising that task's `waited` count. The path
//! that settles a slice ([`Shared::settled`](super::shared::Shared::settled))
//! looks at the count only after the task counter it bumped and wakes the
//! engine's waiters only when the task is watched and has just become
//! terminal: without waiters the completion path pays one load per slice and
//! never locks.
//!
//! No lost wake-up: the settling thread does `counter += 1` (SeqCst), then
//! reads `waited` (SeqCst); the waiter does `waited += 1` (SeqCst), a SeqCst
//! fence, then reads the task counters. Either the settler sees the waiter
//! (and wakes it after it re-checked the task with SeqCst loads), or the
//! waiter's re-check sees the settlement. The wake bumps an epoch under the
//! mutex; the waiter reads the epoch before its re-check and sleeps only
//! while it is unchanged, so a wake between its re-check and its sleep is
//! not missed. The waiter never holds the mutex while it takes another lock.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The engine's waiter registry: one epoch and condition variable for all
/// waiters (a wake is rare: once per watched task that finishes).
#[derive(Default)]
pub(crate) struct Waiters {
    epoch: Mutex<u64>,
    cv: Condvar,
}

/// A task a waiter can watch.
pub(crate) trait Watched {
    /// The task's waiter count.
    fn waited(&self) -> &AtomicU32;
    /// Whether the task is still open, read with SeqCst loads (the
    /// re-check after registering).
    fn still_open(&self) -> bool;
}

/// What a waiter's probe found.
pub(crate) enum Probe<'a, T> {
    /// Everything it waits for is terminal.
    Done,
    /// Not yet: an open task to watch.
    Watch(&'a T),
}

/// Lowers a watched task's waiter count when the wait round ends (also on
/// an error return).
struct Watching<'a>(&'a AtomicU32);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Waiters {
    /// Wakes every waiter (called by the settling thread when a watched
    /// task became terminal).
    #[cold]
    pub(crate) fn wake(&self) {
        let mut e = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
        *e = e.wrapping_add(1);
        drop(e);
        self.cv.notify_all();
    }

    fn epoch(&self) -> u64 {
        *self.epoch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until `probe` says done (`Ok(true)`) or `timeout` passes
    /// (`Ok(false)`, after one last probe); an error from `probe` ends the
    /// wait. `probe` names an open task to watch when it is not done.
    pub(crate) fn wait<'a, T: Watched + 'a, E>(
        &self,
        timeout: Duration,
        mut probe: impl FnMut() -> Result<Probe<'a, T>, E>,
    ) -> Result<bool, E> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let seen = self.epoch();
            let task = match probe()? {
                Probe::Done => return Ok(true),
                Probe::Watch(t) => t,
            };
            let waited = task.waited();
            waited.fetch_add(1, Ordering::SeqCst);
            let _watching = Watching(waited);
            fence(Ordering::SeqCst);
            if !task.still_open() {
                continue;
            }
            let mut g = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
            while *g == seen {
                match deadline {
                    None => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            drop(g);
                            return Ok(matches!(probe()?, Probe::Done));
                        }
                        g = self
                            .cv
                            .wait_timeout(g, d - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A "task": a done flag and a waiter count, settled the way
    /// `Shared::settled` does (flag SeqCst, then the count, then wake).
    #[derive(Default)]
    struct Task {
        done: AtomicBool,
        waited: AtomicU32,
    }

    impl Watched for Task {
        fn waited(&self) -> &AtomicU32 {
            &self.waited
        }
        fn still_open(&self) -> bool {
            !self.done.load(Ordering::SeqCst)
        }
    }

    impl Task {
        fn settle(&self, w: &Waiters) {
            self.done.store(true, Ordering::SeqCst);
            if self.waited.load(Ordering::SeqCst) > 0 && self.done.load(Ordering::SeqCst) {
                w.wake();
            }
        }
    }

    fn wait_for(w: &Waiters, tasks: &[Task], timeout: Duration) -> bool {
        w.wait::<_, ()>(timeout, || {
            Ok(
                match tasks.iter().rev().find(|t| !t.done.load(Ordering::Acquire)) {
                    None => Probe::Done,
                    Some(t) => Probe::Watch(t),
                },
            )
        })
        .unwrap()
    }

    /// Many rounds of one settler racing one waiter: the waiter (with no
    /// timeout) must return, and find every task done. A lost wake-up hangs
    /// the test (the harness's timeout fails it).
    #[test]
    fn no_lost_wakeups_under_races() {
        for round in 0..2000 {
            let w = Arc::new(Waiters::default());
            let tasks: Arc<Vec<Task>> = Arc::new((0..3).map(|_| Task::default()).collect());
            let (w2, t2) = (w.clone(), tasks.clone());
            let settler = std::thread::spawn(move || {
                for (i, t) in t2.iter().enumerate() {
                    if (round + i) % 3 == 0 {
                        std::thread::yield_now();
                    }
                    t.settle(&w2);
                }
            });
            assert!(wait_for(&w, &tasks, Duration::MAX));
            assert!(tasks.iter().all(|t| t.done.load(Ordering::Acquire)));
            assert!(tasks.iter().all(|t| t.waited.load(Ordering::Acquire) == 0));
            settler.join().unwrap();
        }
    }

    /// The race made deterministic: the task settles right after the
    /// waiter's probe found it open and before it registers (the settler
    /// sees no waiter and wakes nobody). The re-check after registering
    /// must catch it; without it the wait sleeps to its timeout.
    #[test]
    fn settles_between_probe_and_registration() {
        let w = Waiters::default();
        let tasks = [Task::default(), Task::default()];
        let got = w.wait::<_, ()>(Duration::from_secs(30), || {
            Ok(
                match tasks.iter().rev().find(|t| !t.done.load(Ordering::Acquire)) {
                    None => Probe::Done,
                    Some(t) => {
                        t.settle(&w);
                        Probe::Watch(t)
                    }
                },
            )
        });
        assert_eq!(got, Ok(true));
        assert!(tasks.iter().all(|t| t.waited.load(Ordering::Acquire) == 0));
    }

    /// A task that never settles: the wait returns false at the timeout and
    /// leaves no registration behind.
    #[test]
    fn times_out_and_deregisters() {
        let w = Waiters::default();
        let tasks = [Task::default()];
        assert!(!wait_for(&w, &tasks, Duration::from_millis(5)));
        assert_eq!(tasks[0].waited.load(Ordering::Acquire), 0);
        tasks[0].settle(&w);
        assert!(wait_for(&w, &tasks, Duration::ZERO));
    }
}
