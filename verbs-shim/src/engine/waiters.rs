//! Blocking batch waits ([`Engine::wait_batch`](super::Engine::wait_batch),
//! issue #18): a waiter sleeps instead of spinning on `batch_done`, leaving
//! the cores to the workers, and only the waiters watching the task that
//! finished are woken.
//!
//! The waiter watches one open task (the last open one of its batch: tasks
//! finish roughly in order). For the whole wait it owns one *slot* of the
//! engine's fixed table ([`SLOTS`], allocated once with the engine; a bit of
//! the `claimed` mask each): a parker (an epoch under a mutex, a condition
//! variable) and the address of the task it watches (`key`). Each round it
//! writes the task's address into its slot, then raises the task's `waited`
//! count. The path that settles a slice
//! ([`Tables::settled`](super::tables::Tables::settled)) looks at the count
//! only after the task counter it bumped, and only when the task is watched
//! and has just become terminal does it scan the claimed slots and wake
//! those whose key is that task: without waiters the completion path pays
//! one load per slice and never locks, and a wake reaches only the waiters
//! of that task. A waiter that finds every slot taken sleeps on the shared
//! parker instead (`overflow` counts them) and is woken by every watched
//! task that finishes: more waiters than slots still works, untargeted.
//!
//! No lost wake-up. The waiter, each round: reads its parker's epoch
//! (`seen`), probes (an open task `t`), stores `t`'s address in its slot's
//! key (SeqCst; the overflow waiter raised `overflow` (SeqCst) once at the
//! start instead), does `t.waited += 1` (SeqCst), a SeqCst fence, then
//! re-reads `t`'s counters (SeqCst) and sleeps only if `t` is still open and
//! only while its parker's epoch is still `seen`. The settler: `counter +=
//! 1` (SeqCst), reads `waited` (SeqCst), then `t`'s counters (SeqCst), then
//! `claimed` and the claimed keys (SeqCst), or `overflow`; for each match it
//! bumps that parker's epoch under its mutex and notifies. Take the settler
//! whose counter bump is last in the SeqCst order: its reads see every
//! bump, so it sees `t` terminal. Either its `waited` read comes before the
//! waiter's `waited += 1` in that order: then its bump precedes the waiter's
//! re-check, which sees `t` terminal and does not sleep. Or it sees the
//! waiter's increment: then it also sees what the waiter stored before it,
//! the claim bit and the key (or the `overflow` count), so it bumps the
//! waiter's parker's epoch. If that bump came before the waiter read
//! `seen`, the bump happens-before the re-check, which then sees `t`
//! terminal; if after, the epoch differs from `seen` and the waiter does not
//! sleep, or is woken. A key the settler matched that meanwhile moved on
//! (the waiter's next round, or another waiter reusing the slot) only makes
//! a spurious wake: every wake re-probes. Neither side holds a parker's
//! mutex while it takes another lock.
//!
//! The waiter gives its registration back on every return, an error or a
//! panic from the probe included (drop guards): the key and `waited` at the
//! end of each round, the slot (or the overflow count) at the end of the
//! wait.
//!
//! The loom model (`loom-tests/tests/waiters.rs`) compiles this file over
//! loom's primitives (the parent's `waiters_sync` facade) and checks a slot
//! waiter, the overflow fallback and the targeted wake, each with a broken
//! twin (`railyard_broken` below, only under `--cfg railyard_loom`).

use super::waiters_sync::{fence, AtomicU32, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};
use std::time::{Duration, Instant};

/// Slots of an engine's waiter table ([`Waiters::default`]): one bit each in
/// the `claimed` mask, so at most 64. Waiters beyond them share one parker.
pub(crate) const SLOTS: usize = 64;

/// An epoch under a mutex and a condition variable: a waiter sleeps while
/// the epoch is the one it read before its re-check; a wake bumps it.
#[derive(Default)]
struct Parker {
    epoch: Mutex<u64>,
    cv: Condvar,
    /// Threads inside the condition variable's wait (the unit tests wait
    /// for a waiter to be asleep before they settle its task).
    #[cfg(all(test, not(railyard_loom)))]
    sleeping: std::sync::atomic::AtomicU32,
}

impl Parker {
    fn epoch(&self) -> u64 {
        *self.epoch.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn unpark(&self, all: bool) {
        let mut e = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
        *e = e.wrapping_add(1);
        drop(e);
        if all {
            self.cv.notify_all();
        } else {
            self.cv.notify_one();
        }
    }

    /// Sleeps while the epoch is `seen`: `true` once it moved, `false` when
    /// `deadline` passed first.
    fn park(&self, seen: u64, deadline: Option<Instant>) -> bool {
        let mut g = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
        while *g == seen {
            // Raised and lowered under the mutex: a wake (which takes it)
            // after a test saw it raised finds the thread inside the wait.
            #[cfg(all(test, not(railyard_loom)))]
            self.sleeping.fetch_add(1, Ordering::SeqCst);
            #[cfg(all(test, not(railyard_loom)))]
            let _awake = Awake(&self.sleeping);
            match deadline {
                None => g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    g = self
                        .cv
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        true
    }
}

/// Lowers a parker's sleeping count when its thread leaves the wait.
#[cfg(all(test, not(railyard_loom)))]
struct Awake<'a>(&'a std::sync::atomic::AtomicU32);

#[cfg(all(test, not(railyard_loom)))]
impl Drop for Awake<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One waiter's place in the table.
#[cfg_attr(not(railyard_loom), repr(align(64)))]
#[derive(Default)]
struct Slot {
    /// The address of the task the owner watches this round; 0 between
    /// rounds (task addresses are never 0).
    key: AtomicUsize,
    parker: Parker,
}

/// The engine's waiter registry: a fixed table of slots, one per waiting
/// thread, and a shared parker for the waiters that find no free slot.
pub(crate) struct Waiters {
    slots: Box<[Slot]>,
    /// Bit `i` set: slot `i` is owned by a waiter. The bits past the table
    /// are always set, so a full mask means no free slot.
    claimed: AtomicU64,
    /// Waiters without a slot (they sleep on `shared`).
    overflow: AtomicU32,
    shared: Parker,
}

impl Default for Waiters {
    fn default() -> Self {
        Self::with_slots(SLOTS)
    }
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

/// The slot a wait owns (or `None`: it overflowed to the shared parker);
/// given back when the wait returns.
struct Place<'w> {
    w: &'w Waiters,
    slot: Option<usize>,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        // loom unwinds a failed model's threads after its execution is gone:
        // touching its atomics then aborts the test binary.
        #[cfg(railyard_loom)]
        if std::thread::panicking() {
            return;
        }
        match self.slot {
            Some(i) => {
                self.w.claimed.fetch_and(!(1u64 << i), Ordering::SeqCst);
            }
            None => {
                self.w.overflow.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// One round's registration on a task: its key in the slot and its
/// `waited` count, both taken back when the round ends (also on an error
/// return).
struct Watching<'a> {
    waited: &'a AtomicU32,
    key: Option<&'a AtomicUsize>,
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        // As in `Place`'s drop.
        #[cfg(railyard_loom)]
        if std::thread::panicking() {
            return;
        }
        self.waited.fetch_sub(1, Ordering::SeqCst);
        if let Some(k) = self.key {
            k.store(0, Ordering::SeqCst);
        }
    }
}

/// The key of a task: its address (stable: the engine's task table is
/// never moved, and never 0).
fn key_of<T>(task: &T) -> usize {
    task as *const T as usize
}

impl Waiters {
    /// A registry with `n` slots (at most [`SLOTS`]; 0 sends every waiter
    /// to the shared parker).
    pub(crate) fn with_slots(n: usize) -> Self {
        let n = n.min(SLOTS);
        let claimed = if n >= 64 { 0 } else { u64::MAX << n };
        Waiters {
            slots: (0..n).map(|_| Slot::default()).collect(),
            claimed: AtomicU64::new(claimed),
            overflow: AtomicU32::new(0),
            shared: Parker::default(),
        }
    }

    /// Wakes the waiters watching `task` (called by the settling thread
    /// when a watched task became terminal), and every waiter without a
    /// slot. Returns how many waiters it signalled (matched slots plus the
    /// overflow count it saw).
    #[cold]
    pub(crate) fn wake<T>(&self, task: &T) -> usize {
        let key = key_of(task);
        let mut woken = 0;
        let mut m = self.claimed.load(Ordering::SeqCst) & self.real_bits();
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            let s = &self.slots[i];
            #[cfg(not(all(railyard_loom, railyard_broken = "waiters_broadcast")))]
            let hit = s.key.load(Ordering::SeqCst) == key;
            // Broken twin: every claimed slot is woken, as with one shared
            // condition variable (what the targeted wake replaces).
            #[cfg(all(railyard_loom, railyard_broken = "waiters_broadcast"))]
            let hit = s.key.load(Ordering::SeqCst) != 0;
            if hit {
                s.parker.unpark(false);
                woken += 1;
            }
        }
        let over = self.overflow.load(Ordering::SeqCst);
        if over > 0 {
            self.shared.unpark(true);
            woken += over as usize;
        }
        woken
    }

    /// What is registered: claimed slots, overflow waiters (tests and the
    /// loom model check that a wait leaves nothing behind).
    #[cfg(any(test, railyard_loom))]
    pub(crate) fn registered(&self) -> (u32, u32) {
        let slots = (self.claimed.load(Ordering::SeqCst) & self.real_bits()).count_ones();
        (slots, self.overflow.load(Ordering::SeqCst))
    }

    /// The mask bits that stand for real slots.
    fn real_bits(&self) -> u64 {
        match self.slots.len() {
            n if n >= 64 => u64::MAX,
            n => !(u64::MAX << n),
        }
    }

    /// Claims a free slot, or counts the wait as an overflow.
    fn claim(&self) -> Place<'_> {
        let mut m = self.claimed.load(Ordering::Relaxed);
        while m != u64::MAX {
            let i = (!m).trailing_zeros() as usize;
            let bit = 1u64 << i;
            let prev = self.claimed.fetch_or(bit, Ordering::SeqCst);
            if prev & bit == 0 {
                return Place {
                    w: self,
                    slot: Some(i),
                };
            }
            m = prev | bit;
        }
        self.overflow.fetch_add(1, Ordering::SeqCst);
        Place {
            w: self,
            slot: None,
        }
    }

    /// Waits until `probe` says done (`Ok(true)`) or `timeout` passes
    /// (`Ok(false)`, after one last probe); an error from `probe` ends the
    /// wait. `probe` names an open task to watch when it is not done.
    /// `Duration::MAX` (any timeout past `Instant`'s range) has no deadline.
    pub(crate) fn wait<'a, T: Watched + 'a, E>(
        &self,
        timeout: Duration,
        mut probe: impl FnMut() -> Result<Probe<'a, T>, E>,
    ) -> Result<bool, E> {
        let deadline = Instant::now().checked_add(timeout);
        let place = self.claim();
        let (parker, key) = match place.slot {
            Some(i) => (&self.slots[i].parker, Some(&self.slots[i].key)),
            None => (&self.shared, None),
        };
        loop {
            #[cfg(not(all(railyard_loom, railyard_broken = "waiters_late_epoch")))]
            let seen = parker.epoch();
            let task = match probe()? {
                Probe::Done => return Ok(true),
                Probe::Watch(t) => t,
            };
            if let Some(k) = key {
                k.store(key_of(task), Ordering::SeqCst);
            }
            let waited = task.waited();
            waited.fetch_add(1, Ordering::SeqCst);
            let watching = Watching { waited, key };
            fence(Ordering::SeqCst);
            // Broken twin: no re-check after registering, so a settlement
            // between the probe and the registration is never seen.
            #[cfg(not(all(railyard_loom, railyard_broken = "waiters_no_recheck")))]
            if !task.still_open() {
                continue;
            }
            // Broken twin: the epoch read after the re-check, so a wake
            // between the re-check and that read is lost.
            #[cfg(all(railyard_loom, railyard_broken = "waiters_late_epoch"))]
            let seen = parker.epoch();
            if !parker.park(seen, deadline) {
                drop(watching);
                return Ok(matches!(probe()?, Probe::Done));
            }
        }
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// A "task": a done flag and a waiter count, settled the way
    /// `Tables::settled` does (flag SeqCst, then the count, then wake).
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
        /// Settles the task; the waiters the wake signalled (0 without).
        fn settle(&self, w: &Waiters) -> usize {
            self.done.store(true, Ordering::SeqCst);
            if self.waited.load(Ordering::SeqCst) > 0 && self.done.load(Ordering::SeqCst) {
                w.wake(self)
            } else {
                0
            }
        }
    }

    /// Waits for `tasks` (watching the last open one), counting probes.
    fn wait_counted(w: &Waiters, tasks: &[Task], timeout: Duration, probes: &AtomicU32) -> bool {
        w.wait::<_, ()>(timeout, || {
            probes.fetch_add(1, Ordering::SeqCst);
            Ok(
                match tasks.iter().rev().find(|t| !t.done.load(Ordering::Acquire)) {
                    None => Probe::Done,
                    Some(t) => Probe::Watch(t),
                },
            )
        })
        .unwrap()
    }

    fn wait_for(w: &Waiters, tasks: &[Task], timeout: Duration) -> bool {
        wait_counted(w, tasks, timeout, &AtomicU32::new(0))
    }

    /// Spins until `cond` holds (a test harness failure after 30 s).
    fn until(mut cond: impl FnMut() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "condition never held"
            );
            std::thread::yield_now();
        }
    }

    impl Waiters {
        /// Waiters inside a parker's wait (slots and the shared parker).
        fn asleep(&self) -> u32 {
            let n = |p: &Parker| p.sleeping.load(Ordering::SeqCst);
            self.slots.iter().map(|s| n(&s.parker)).sum::<u32>() + n(&self.shared)
        }
    }

    /// Nothing left registered: no claimed slot, no overflow waiter.
    fn assert_clean(w: &Waiters) {
        assert_eq!(w.registered(), (0, 0));
        assert!(w.slots.iter().all(|s| s.key.load(Ordering::SeqCst) == 0));
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
            assert_clean(&w);
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
        assert_clean(&w);
    }

    /// A task that never settles: the wait returns false at the timeout and
    /// leaves no registration behind.
    #[test]
    fn times_out_and_deregisters() {
        let w = Waiters::default();
        let tasks = [Task::default()];
        assert!(!wait_for(&w, &tasks, Duration::from_millis(5)));
        assert_eq!(tasks[0].waited.load(Ordering::Acquire), 0);
        assert_clean(&w);
        tasks[0].settle(&w);
        assert!(wait_for(&w, &tasks, Duration::ZERO));
    }

    /// An error from the probe ends the wait and gives the slot back.
    #[test]
    fn probe_error_deregisters() {
        let w = Waiters::with_slots(1);
        let task = Task::default();
        let mut n = 0;
        let got = w.wait(Duration::MAX, || {
            n += 1;
            if n == 1 {
                // A settlement the re-check sees: a second probe follows.
                task.settle(&w);
                Ok(Probe::Watch(&task))
            } else {
                Err("gone")
            }
        });
        assert_eq!(got, Err("gone"));
        assert_eq!(task.waited.load(Ordering::SeqCst), 0);
        assert_clean(&w);
    }

    /// Two waiters, each on its own task, both asleep: settling B's task
    /// signals B's slot only (the wake reports 1 waiter), and A is not
    /// re-probed: after B returned and A's task settled too, A probed
    /// exactly twice (before sleeping, after its own wake). With one
    /// condition variable for all (the scheme this replaces) B's settlement
    /// woke A too: 2 signalled, and A's third probe.
    #[test]
    fn wake_reaches_only_the_watching_waiter() {
        for _ in 0..50 {
            let w = Arc::new(Waiters::default());
            let a: Arc<[Task; 1]> = Arc::new([Task::default()]);
            let b: Arc<[Task; 1]> = Arc::new([Task::default()]);
            let (pa, pb) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
            let spawn = |t: &Arc<[Task; 1]>, p: &Arc<AtomicU32>| {
                let (w, t, p) = (w.clone(), t.clone(), p.clone());
                std::thread::spawn(move || wait_counted(&w, &t[..], Duration::MAX, &p))
            };
            let (ja, jb) = (spawn(&a, &pa), spawn(&b, &pb));
            // Both asleep (past their re-check): a waiter still between
            // registering and its re-check could see the settlement itself
            // and deregister before the settler reads `waited` (0 signalled,
            // correctly; CI once caught exactly that with `waited == 1` as
            // the only condition).
            until(|| w.asleep() == 2);
            assert_eq!(b[0].settle(&w), 1, "B's settlement signalled one waiter");
            assert!(jb.join().unwrap());
            // Room for a (wrong) wake of A to show as a probe.
            std::thread::sleep(Duration::from_millis(2));
            assert_eq!(pa.load(Ordering::SeqCst), 1, "A was re-probed by B's wake");
            assert_eq!(a[0].settle(&w), 1);
            assert!(ja.join().unwrap());
            assert_eq!(pa.load(Ordering::SeqCst), 2);
            assert_eq!(pb.load(Ordering::SeqCst), 2);
            assert_clean(&w);
        }
    }

    /// More waiters than slots: with one slot, the second waiter sleeps on
    /// the shared parker; each is woken by its task (the overflow one also
    /// by any other watched task), both return, and nothing stays claimed.
    #[test]
    fn more_waiters_than_slots_fall_back() {
        for first in [0usize, 1] {
            let w = Arc::new(Waiters::with_slots(1));
            let tasks: Arc<[Task; 2]> = Arc::new([Task::default(), Task::default()]);
            let joins: Vec<_> = (0..2)
                .map(|i| {
                    let (w, t) = (w.clone(), tasks.clone());
                    std::thread::spawn(move || wait_for(&w, &t[i..=i], Duration::MAX))
                })
                .collect();
            until(|| w.asleep() == 2);
            assert_eq!(w.overflow.load(Ordering::SeqCst), 1);
            assert_eq!(w.claimed.load(Ordering::SeqCst), u64::MAX);
            // The slot owner's task: the wake signals it and the overflow
            // waiter (1 + 1); the overflow waiter's: only the overflow (1).
            let slot_owner = (0..2)
                .find(|&i| w.slots[0].key.load(Ordering::SeqCst) == key_of(&tasks[i]))
                .unwrap();
            let want = if first == slot_owner { 2 } else { 1 };
            assert_eq!(tasks[first].settle(&w), want);
            assert!(joins.into_iter().enumerate().all(|(i, j)| {
                if i != first {
                    tasks[i].settle(&w);
                }
                j.join().unwrap()
            }));
            assert_clean(&w);
        }
    }

    /// Many waiters racing their settlers through a table of two slots (and
    /// none): every wait returns; nothing stays registered.
    #[test]
    fn overflow_under_races() {
        for slots in [0, 2] {
            for round in 0..200 {
                let w = Arc::new(Waiters::with_slots(slots));
                let tasks: Arc<Vec<Task>> = Arc::new((0..6).map(|_| Task::default()).collect());
                let waiters: Vec<_> = (0..3)
                    .map(|i| {
                        let (w, t) = (w.clone(), tasks.clone());
                        std::thread::spawn(move || {
                            wait_for(&w, &t[2 * i..2 * i + 2], Duration::MAX)
                        })
                    })
                    .collect();
                for (i, t) in tasks.iter().enumerate() {
                    if (round + i) % 4 == 0 {
                        std::thread::yield_now();
                    }
                    t.settle(&w);
                }
                assert!(waiters.into_iter().all(|j| j.join().unwrap()));
                assert_clean(&w);
            }
        }
    }
}
