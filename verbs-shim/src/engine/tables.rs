//! The engine's per-slice and per-task records and its batches
//! ([`Tables`]): the core slice table (a slice's current attempt and how it
//! ended), what `submit` wrote about each slice ([`SliceMeta`]), each
//! task's counters and evidence ([`TaskCell`]), the batches, the free task
//! and slice slots, and the waiters of `Engine::wait_batch`. Every slice
//! ends through [`Tables::settled`]: its memory pin, its task's counters,
//! its waiters.

use super::error::EngineError;
use super::memory::MemTable;
use super::types::{BatchId, TaskState, TaskStatus, MAX_RAILS};
use super::waiters::{self, Waiters, Watched};
use crossbeam_queue::ArrayQueue;
use railyard_core::evidence::{AnomalyState, Detail as AnomalyDetail, Observation, TaskEvidence};
use railyard_core::slice::{Outcome, SliceError, SliceRef, SliceState, SliceTable};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

/// Per-slice data written by `submit` before the slice is queued (the
/// queue's push/pop orders it) and read by workers.
#[derive(Default)]
pub(crate) struct SliceMeta {
    pub(crate) task: AtomicU32,
    pub(crate) mem: AtomicU32,
    pub(crate) region: AtomicU32,
    pub(crate) op: AtomicU32,
    pub(crate) len: AtomicU32,
    pub(crate) qp: AtomicU32,
    pub(crate) shard: AtomicU32,
    /// Local device (rail) of the slice's endpoint.
    pub(crate) dev: AtomicU32,
    /// The attempt that holds a token (claimed for `ibv_post_send`; 0 =
    /// none, or its chain was refused): a deadline on it is a software
    /// completion timeout.
    pub(crate) posted: AtomicU32,
    /// The attempt's endpoint, packed by [`ep_word`](super::types::ep_word).
    pub(crate) ep: AtomicU64,
    pub(crate) segment: AtomicU32,
    pub(crate) route: AtomicU32,
    pub(crate) local_off: AtomicU64,
    pub(crate) remote_off: AtomicU64,
}

#[derive(Default)]
pub(crate) struct TaskCell {
    pub(crate) total: AtomicU32,
    pub(crate) ok: AtomicU32,
    pub(crate) failed: AtomicU32,
    pub(crate) timed_out: AtomicU32,
    pub(crate) canceled: AtomicU32,
    pub(crate) started: AtomicBool,
    pub(crate) bytes_done: AtomicU64,
    pub(crate) bytes_total: AtomicU64,
    pub(crate) deadline_ns: AtomicU64,
    /// Anomaly evidence (RFC 4162). Locked only when there is something to
    /// record or resolve: a task without anomalies never takes the lock on
    /// the completion path (`anomalies` == 0).
    pub(crate) evidence: Mutex<TaskEvidence>,
    /// Observations recorded since submit.
    pub(crate) anomalies: AtomicU32,
    /// The last receiver-credit backpressure a WRITE of the task met
    /// (RFC 2849 typed backpressure); locked only on a credit refusal.
    pub(crate) backpressure: Mutex<Option<railyard_core::credit::BackpressureInfo>>,
    /// Threads in [`Engine::wait_batch`](super::Engine::wait_batch) watching
    /// this task (`waiters.rs`); never reset by submit (a waiter still
    /// registered on a reused slot only gets a spurious wake).
    pub(crate) waited: AtomicU32,
}

impl Watched for TaskCell {
    fn waited(&self) -> &AtomicU32 {
        &self.waited
    }
    fn still_open(&self) -> bool {
        !self.is_done_seqcst()
    }
}

impl TaskCell {
    pub(crate) fn settled(&self) -> u32 {
        self.ok.load(Ordering::Acquire)
            + self.failed.load(Ordering::Acquire)
            + self.timed_out.load(Ordering::Acquire)
            + self.canceled.load(Ordering::Acquire)
    }

    /// Whether every slice of the task has settled (a terminal state).
    pub(crate) fn is_done(&self) -> bool {
        self.settled() >= self.total.load(Ordering::Acquire)
    }

    /// [`is_done`](Self::is_done) with SeqCst loads: the settling thread's
    /// check before it wakes waiters (see `waiters.rs`).
    fn is_done_seqcst(&self) -> bool {
        let settled = self.ok.load(Ordering::SeqCst)
            + self.failed.load(Ordering::SeqCst)
            + self.timed_out.load(Ordering::SeqCst)
            + self.canceled.load(Ordering::SeqCst);
        settled >= self.total.load(Ordering::SeqCst)
    }

    pub(crate) fn status(&self) -> TaskStatus {
        let state = if self.is_done() {
            if self.failed.load(Ordering::Acquire) > 0 {
                TaskState::Failed
            } else if self.timed_out.load(Ordering::Acquire) > 0 {
                TaskState::Timeout
            } else if self.canceled.load(Ordering::Acquire) > 0 {
                TaskState::Canceled
            } else {
                TaskState::Completed
            }
        } else if self.started.load(Ordering::Acquire) {
            TaskState::Pending
        } else {
            TaskState::Waiting
        };
        TaskStatus {
            state,
            transferred_bytes: self.bytes_done.load(Ordering::Acquire),
            total_bytes: self.bytes_total.load(Ordering::Acquire),
        }
    }

    /// Resets the record for a new task of `slices` slices and `bytes`
    /// bytes due by `deadline_ns` (submit, on a slot taken from the free
    /// list).
    pub(crate) fn reset(&self, slices: u32, bytes: u64, deadline_ns: u64) {
        self.total.store(slices, Ordering::Relaxed);
        for a in [&self.ok, &self.failed, &self.timed_out, &self.canceled] {
            a.store(0, Ordering::Relaxed);
        }
        self.started.store(false, Ordering::Relaxed);
        self.bytes_done.store(0, Ordering::Relaxed);
        self.bytes_total.store(bytes, Ordering::Relaxed);
        self.deadline_ns.store(deadline_ns, Ordering::Relaxed);
        *self.evidence.lock().unwrap_or_else(|e| e.into_inner()) = TaskEvidence::new();
        self.anomalies.store(0, Ordering::Relaxed);
        *self.backpressure.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The caller-visible anomaly of the task ([`project_anomaly`] of its
    /// evidence; `enabled`: whether the controller is on).
    pub(crate) fn anomaly(&self, enabled: bool) -> AnomalyDetail {
        let d = self
            .evidence
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .detail();
        project_anomaly(d, self.ok.load(Ordering::Acquire), enabled)
    }
}

/// The caller-visible anomaly of a task from its evidence's detail, the
/// task's succeeded-slice count and whether the controller is on.
/// Successes are counted into the evidence only once the task has an
/// anomaly (the lock-free fast path), so a task with no unresolved evidence
/// and at least one success is NORMAL; with the controller off, UNKNOWN.
pub(crate) fn project_anomaly(
    mut d: AnomalyDetail,
    succeeded: u32,
    enabled: bool,
) -> AnomalyDetail {
    if d.state == AnomalyState::Unknown && d.winner.map_or(true, |w| w.resolved) && succeeded > 0 {
        d.state = AnomalyState::Normal;
    }
    if !enabled {
        d.state = AnomalyState::Unknown;
    }
    d
}

pub(crate) struct TaskEntry {
    pub(crate) task: u32,
    pub(crate) slices: Vec<u32>,
}

pub(crate) struct Batch {
    pub(crate) capacity: usize,
    pub(crate) tasks: Vec<TaskEntry>,
}

/// The engine's slice, task and batch records (see the module docs).
pub(crate) struct Tables {
    /// The core slice table: each slice's current attempt and state.
    pub(crate) slices: SliceTable,
    pub(crate) meta: Box<[SliceMeta]>,
    pub(crate) tasks: Box<[TaskCell]>,
    batches: RwLock<HashMap<u64, Batch>>,
    free_slices: ArrayQueue<u32>,
    free_tasks: ArrayQueue<u32>,
    next_batch: AtomicU64,
    next_run: AtomicU64,
    /// Blocking batch waits (`waiters.rs`).
    waiters: Waiters,
}

impl Tables {
    /// `max_slices` slice and `max_tasks` task slots, all free.
    pub(crate) fn new(max_slices: u32, max_tasks: u32) -> Result<Self, EngineError> {
        let slices = SliceTable::new(max_slices as usize)
            .map_err(|_: SliceError| EngineError::Core("slice table"))?;
        let free_slices = ArrayQueue::new(max_slices as usize);
        for i in 0..max_slices {
            let _ = free_slices.push(i);
        }
        let free_tasks = ArrayQueue::new(max_tasks as usize);
        for i in 0..max_tasks {
            let _ = free_tasks.push(i);
        }
        Ok(Self {
            slices,
            meta: (0..max_slices).map(|_| SliceMeta::default()).collect(),
            tasks: (0..max_tasks).map(|_| TaskCell::default()).collect(),
            batches: RwLock::new(HashMap::new()),
            free_slices,
            free_tasks,
            next_batch: AtomicU64::new(1),
            next_run: AtomicU64::new(0),
            waiters: Waiters::default(),
        })
    }

    /// Accounts a slice that reached a terminal state through the caller
    /// (exactly once: only the winner of the slice CAS gets here), and
    /// gives back its memory pin in `mem`.
    pub(crate) fn settled(&self, mem: &MemTable, slice: u32, state: SliceState) {
        let m = &self.meta[slice as usize];
        // The slice's pin on its memory, before the task counters make the
        // batch freeable (then the slot and `m.mem` may be reused).
        if !matches!(state, SliceState::Idle | SliceState::Pending) {
            mem.unpin(m.mem.load(Ordering::Relaxed) as usize, 1);
        }
        let t = &self.tasks[m.task.load(Ordering::Relaxed) as usize];
        match state {
            // The counters are bumped SeqCst (free on x86: a locked add
            // either way) so the waiter check below cannot miss a waiter
            // that missed this settlement (`waiters.rs`).
            SliceState::Succeeded => {
                t.bytes_done
                    .fetch_add(u64::from(m.len.load(Ordering::Relaxed)), Ordering::AcqRel);
                t.ok.fetch_add(1, Ordering::SeqCst);
            }
            SliceState::Failed => {
                t.failed.fetch_add(1, Ordering::SeqCst);
            }
            SliceState::TimedOut => {
                t.timed_out.fetch_add(1, Ordering::SeqCst);
            }
            SliceState::Canceled => {
                t.canceled.fetch_add(1, Ordering::SeqCst);
            }
            SliceState::Idle | SliceState::Pending => return,
        }
        // Wake the task's waiters only when it is watched and just became
        // terminal: one load per slice without waiters, no lock.
        if t.waited.load(Ordering::SeqCst) > 0 && t.is_done_seqcst() {
            self.waiters.wake(t);
        }
    }

    /// Settles the slice's current attempt (if it still is current).
    pub(crate) fn settle(&self, mem: &MemTable, r: SliceRef, outcome: Outcome) {
        if let Ok(s) = self.slices.settle(r, outcome) {
            self.settled(mem, r.index, s);
        }
    }

    /// Whether `r` is still its slice's pending attempt (a queued or parked
    /// reference may be stale: canceled, timed out, or its slot reused).
    pub(crate) fn is_current(&self, r: SliceRef) -> bool {
        matches!(self.slices.status(r.index), Ok(st) if st.attempt == r.attempt && st.state == SliceState::Pending)
    }

    /// The task slice `slice` belongs to.
    pub(crate) fn task_of(&self, slice: u32) -> &TaskCell {
        let t = self.meta[slice as usize].task.load(Ordering::Relaxed);
        &self.tasks[t as usize]
    }

    /// Records anomaly evidence for slice attempt `r` in its task.
    pub(crate) fn note(&self, r: SliceRef, obs: Observation) {
        let t = self.task_of(r.index);
        let mut ev = t.evidence.lock().unwrap_or_else(|e| e.into_inner());
        ev.record(r, obs);
        t.anomalies.fetch_add(1, Ordering::Release);
    }

    /// As [`note`](Self::note), only if `r` is still the slice's pending
    /// attempt ([`is_current`](Self::is_current)).
    pub(crate) fn note_if_current(&self, r: SliceRef, obs: impl FnOnce() -> Observation) {
        if self.is_current(r) {
            self.note(r, obs());
        }
    }

    /// A success of slice attempt `r`: resolves its evidence (no lock when
    /// the task never saw an anomaly).
    pub(crate) fn resolve_evidence(&self, r: SliceRef, now: u64) {
        let t = self.task_of(r.index);
        if t.anomalies.load(Ordering::Acquire) != 0 {
            let mut ev = t.evidence.lock().unwrap_or_else(|e| e.into_inner());
            ev.resolve(r, now);
        }
    }

    /// A new attempt `r` of a slice starts: its old blocking evidence clears.
    pub(crate) fn begin_attempt(&self, r: SliceRef) {
        let t = self.task_of(r.index);
        if t.anomalies.load(Ordering::Acquire) != 0 {
            let mut ev = t.evidence.lock().unwrap_or_else(|e| e.into_inner());
            ev.begin_attempt(r);
        }
    }

    /// Settles every pending slice of the tasks `pred` selects, calling
    /// `each` for every slice attempt this call settled.
    pub(crate) fn settle_where(
        &self,
        mem: &MemTable,
        outcome: Outcome,
        mut pred: impl FnMut(u64, &TaskCell) -> bool,
        mut each: impl FnMut(SliceRef),
    ) {
        let Ok(batches) = self.batches.read() else {
            return;
        };
        for (&id, b) in batches.iter() {
            for te in &b.tasks {
                let t = &self.tasks[te.task as usize];
                if t.settled() >= t.total.load(Ordering::Acquire) || !pred(id, t) {
                    continue;
                }
                for &s in &te.slices {
                    if let Ok(st) = self.slices.status(s) {
                        if st.state == SliceState::Pending {
                            let r = SliceRef {
                                index: s,
                                attempt: st.attempt,
                            };
                            if let Ok(state) = self.slices.settle(r, outcome) {
                                self.settled(mem, s, state);
                                each(r);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Runs `f` on `batch` under the batch map's read lock.
    pub(crate) fn with_batch<T>(
        &self,
        batch: BatchId,
        f: impl FnOnce(&Batch) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let batches = self.batches.read().unwrap_or_else(|e| e.into_inner());
        f(batches
            .get(&batch.0)
            .ok_or(EngineError::NoSuchBatch(batch))?)
    }

    /// Runs `f` on task `task` of `batch` (under the batch map's read lock).
    pub(crate) fn with_task<T>(
        &self,
        batch: BatchId,
        task: usize,
        f: impl FnOnce(&TaskCell) -> T,
    ) -> Result<T, EngineError> {
        self.with_batch(batch, |b| {
            let te = b
                .tasks
                .get(task)
                .ok_or(EngineError::NoSuchTask { batch, task })?;
            Ok(f(&self.tasks[te.task as usize]))
        })
    }

    /// Runs `f` on `batch` under the batch map's write lock (submit).
    pub(crate) fn with_batch_mut<T>(
        &self,
        batch: BatchId,
        f: impl FnOnce(&mut Batch) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let mut batches = self.batches.write().unwrap_or_else(|e| e.into_inner());
        f(batches
            .get_mut(&batch.0)
            .ok_or(EngineError::NoSuchBatch(batch))?)
    }

    /// Whether every task of `batch` is terminal.
    pub(crate) fn batch_done(&self, batch: BatchId) -> Result<bool, EngineError> {
        self.with_batch(batch, |b| {
            Ok(b.tasks
                .iter()
                .all(|te| self.tasks[te.task as usize].is_done()))
        })
    }

    /// Blocks until every task of `batch` is terminal (`Ok(true)`) or
    /// `timeout` passes (`Ok(false)`), watching its last open task.
    pub(crate) fn wait_batch(
        &self,
        batch: BatchId,
        timeout: Duration,
    ) -> Result<bool, EngineError> {
        self.waiters.wait(timeout, || {
            self.with_batch(batch, |b| {
                // The last open task: tasks finish roughly in submission
                // order, so it is usually the last to finish (one wake).
                Ok(
                    match b
                        .tasks
                        .iter()
                        .rev()
                        .map(|te| &self.tasks[te.task as usize])
                        .find(|t| !t.is_done())
                    {
                        None => waiters::Probe::Done,
                        Some(t) => waiters::Probe::Watch(t),
                    },
                )
            })
        })
    }

    /// Every task of `batch`, in submission order.
    pub(crate) fn batch_status(&self, batch: BatchId) -> Result<Vec<TaskStatus>, EngineError> {
        self.with_batch(batch, |b| {
            Ok(b.tasks
                .iter()
                .map(|te| self.tasks[te.task as usize].status())
                .collect())
        })
    }

    /// How many slices of task `task` of `batch` are on each local device,
    /// from the device of each slice's current (or last) attempt.
    pub(crate) fn task_devices(
        &self,
        batch: BatchId,
        task: usize,
    ) -> Result<[u32; MAX_RAILS], EngineError> {
        self.with_batch(batch, |b| {
            let te = b
                .tasks
                .get(task)
                .ok_or(EngineError::NoSuchTask { batch, task })?;
            let mut counts = [0u32; MAX_RAILS];
            for &s in &te.slices {
                let d = self.meta[s as usize].dev.load(Ordering::Relaxed) as usize;
                if let Some(c) = counts.get_mut(d) {
                    *c += 1;
                }
            }
            Ok(counts)
        })
    }

    /// Creates an empty batch for up to `capacity` tasks.
    pub(crate) fn allocate_batch(&self, capacity: usize) -> BatchId {
        let id = self.next_batch.fetch_add(1, Ordering::Relaxed);
        self.batches
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id,
                Batch {
                    capacity,
                    tasks: Vec::with_capacity(capacity.min(1 << 16)),
                },
            );
        BatchId(id)
    }

    /// Takes `tasks` task slots and `slices` slice slots, all or nothing.
    pub(crate) fn reserve(
        &self,
        tasks: usize,
        slices: u64,
    ) -> Result<(Vec<u32>, Vec<u32>), EngineError> {
        let needed = slices;
        let mut task_ids = Vec::with_capacity(tasks);
        let mut slice_ids = Vec::with_capacity(needed as usize);
        let give_back = |task_ids: &[u32], slice_ids: &[u32]| {
            for &t in task_ids {
                let _ = self.free_tasks.push(t);
            }
            for &s in slice_ids {
                let _ = self.free_slices.push(s);
            }
        };
        for _ in 0..tasks {
            match self.free_tasks.pop() {
                Some(t) => task_ids.push(t),
                None => {
                    give_back(&task_ids, &slice_ids);
                    return Err(EngineError::OutOfTasks);
                }
            }
        }
        for _ in 0..needed {
            match self.free_slices.pop() {
                Some(s) => slice_ids.push(s),
                None => {
                    give_back(&task_ids, &slice_ids);
                    return Err(EngineError::OutOfSlices { needed });
                }
            }
        }
        Ok((task_ids, slice_ids))
    }

    /// The first of `runs` consecutive QP-run numbers (a transfer's runs
    /// of slices rotate over the QPs of an endpoint from there).
    pub(crate) fn next_runs(&self, runs: u64) -> u64 {
        self.next_run.fetch_add(runs, Ordering::Relaxed)
    }

    /// Frees a batch whose tasks are all finished ([`EngineError::BatchBusy`]
    /// otherwise); its task and slice slots return to the pools.
    pub(crate) fn free_batch(&self, batch: BatchId) -> Result<(), EngineError> {
        let mut batches = self.batches.write().unwrap_or_else(|e| e.into_inner());
        let b = batches
            .get(&batch.0)
            .ok_or(EngineError::NoSuchBatch(batch))?;
        if b.tasks
            .iter()
            .any(|te| !self.tasks[te.task as usize].status().state.is_terminal())
        {
            return Err(EngineError::BatchBusy(batch));
        }
        if let Some(b) = batches.remove(&batch.0) {
            for te in b.tasks {
                for s in te.slices {
                    let _ = self.free_slices.push(s);
                }
                let _ = self.free_tasks.push(te.task);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_state_rules() {
        let t = TaskCell::default();
        t.total.store(3, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Waiting);
        t.started.store(true, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Pending);
        t.ok.store(2, Ordering::Relaxed);
        t.canceled.store(1, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Canceled);
        t.canceled.store(0, Ordering::Relaxed);
        t.timed_out.store(1, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Timeout);
        t.ok.store(1, Ordering::Relaxed);
        t.failed.store(1, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Failed);
        t.failed.store(0, Ordering::Relaxed);
        t.timed_out.store(0, Ordering::Relaxed);
        t.ok.store(3, Ordering::Relaxed);
        assert_eq!(t.status().state, TaskState::Completed);
    }

    #[test]
    fn anomaly_projection_follows_the_rfc_table() {
        use railyard_core::evidence::{Observation, Reason, TaskEvidence};
        let s0 = SliceRef {
            index: 0,
            attempt: 1,
        };
        let mut ev = TaskEvidence::<8>::new();
        // No evidence, no success: UNKNOWN; no evidence, a success: NORMAL.
        assert_eq!(
            project_anomaly(ev.detail(), 0, true).state,
            AnomalyState::Unknown
        );
        assert_eq!(
            project_anomaly(ev.detail(), 1, true).state,
            AnomalyState::Normal
        );
        // Unresolved byte-window evidence wins over the success count.
        ev.record(s0, Observation::new(Reason::ByteWindow, 5));
        assert_eq!(
            project_anomaly(ev.detail(), 3, true).state,
            AnomalyState::Congested
        );
        // A new attempt clears it; a success elsewhere makes it NORMAL.
        ev.begin_attempt(SliceRef {
            index: 0,
            attempt: 2,
        });
        assert_eq!(
            project_anomaly(ev.detail(), 0, true).state,
            AnomalyState::Unknown
        );
        assert_eq!(
            project_anomaly(ev.detail(), 1, true).state,
            AnomalyState::Normal
        );
        // Quarantine evidence: LONG_UNAVAILABLE; with CC off: UNKNOWN, with
        // the evidence still shown.
        ev.record(
            SliceRef {
                index: 1,
                attempt: 1,
            },
            Observation::new(Reason::PathQuarantined, 9),
        );
        let d = project_anomaly(ev.detail(), 1, true);
        assert_eq!(d.state, AnomalyState::LongUnavailable);
        let off = project_anomaly(ev.detail(), 1, false);
        assert_eq!(off.state, AnomalyState::Unknown);
        assert_eq!(off.winner, d.winner);
    }
}
