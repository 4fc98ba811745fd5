//! Task anomaly evidence (RFC 4162, "Caller Observability"): the minimal
//! query (`ry_task_state`) and the detailed one (`ry_task_detail`), whose
//! observation carries an explicit `*_observed` flag per optional field:
//! an unobserved field is never a silent zero.

use std::sync::Mutex;

use railyard_core::evidence::{Detail, Observation, Observed, PathId, Recorded, TaskEvidence};
use railyard_core::slice::SliceRef;

use crate::enums::{ry_failure_scope, ry_reason, ry_task_state};
use crate::error::{guard, ret, ret_opt, Result, RyStatus};
use crate::handle::Registry;
use crate::mirror::{mirror, CEnum};
use crate::ptr::in_ref;

/// Slices of evidence one task keeps (fixed capacity, no allocation after
/// creation); more are handled by the core's eviction rules and counted in
/// `ry_task_detail.dropped`.
pub const RY_TASK_EVIDENCE_CAPACITY: u32 = 8;

/// One piece of anomaly evidence. Each optional field has its own
/// `*_observed` flag (nonzero = observed); an unobserved field's value is
/// meaningless (written as 0). Used as input (`ry_task_record`) and output
/// (`ry_task_detail.winner`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_observation {
    /// Observation time (caller's clock, ns).
    pub observed_ns: u64,
    /// The domain's byte window at observation time.
    pub window: u64,
    /// The domain's in-flight bytes at observation time.
    pub in_flight: u64,
    /// Cooldown remaining (ns) for a quarantined path.
    pub cooldown_remaining_ns: u64,
    /// `ry_reason`: the most recent relevant reason.
    pub reason: u32,
    /// `ry_failure_scope`.
    pub scope: u32,
    /// Route of the affected path.
    pub path_route: u32,
    /// Route generation the evidence was observed on.
    pub generation: u32,
    /// Slice index (output; filled by `ry_task_record`).
    pub slice_index: u32,
    /// Slice attempt (output; filled by `ry_task_record`).
    pub slice_attempt: u32,
    /// Device of the affected path.
    pub path_device: u16,
    /// Output: the slice later resolved this evidence (success / recovery).
    pub resolved: u8,
    /// `scope` was observed.
    pub scope_observed: u8,
    /// `path_device` and `path_route` were observed.
    pub path_observed: u8,
    /// `generation` was observed.
    pub generation_observed: u8,
    /// `window` was observed.
    pub window_observed: u8,
    /// `in_flight` was observed.
    pub in_flight_observed: u8,
    /// `cooldown_remaining_ns` was observed.
    pub cooldown_remaining_observed: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

fn obs_in<T: Copy>(flag: u8, v: T) -> Observed<T> {
    if flag != 0 {
        Observed::Value(v)
    } else {
        Observed::Unobserved
    }
}

fn obs_out<T: Copy + Default>(o: Observed<T>) -> (T, u8) {
    match o {
        Observed::Value(v) => (v, 1),
        Observed::Unobserved => (T::default(), 0),
    }
}

impl ry_observation {
    fn to_core(self) -> Result<Observation> {
        let reason = ry_reason::to_core(self.reason, "reason")?;
        let mut o = Observation::new(reason, self.observed_ns);
        o.scope = if self.scope_observed != 0 {
            Observed::Value(ry_failure_scope::to_core(self.scope, "scope")?)
        } else {
            Observed::Unobserved
        };
        o.path = obs_in(
            self.path_observed,
            PathId {
                device: self.path_device,
                route: self.path_route,
            },
        );
        o.generation = obs_in(self.generation_observed, self.generation);
        o.window = obs_in(self.window_observed, self.window);
        o.in_flight = obs_in(self.in_flight_observed, self.in_flight);
        o.cooldown_remaining_ns =
            obs_in(self.cooldown_remaining_observed, self.cooldown_remaining_ns);
        Ok(o)
    }

    pub(crate) fn from_core(o: &Observation) -> Self {
        let (scope, scope_observed) = match o.scope {
            Observed::Value(s) => (ry_failure_scope::from(s) as u32, 1),
            Observed::Unobserved => (0, 0),
        };
        let (path, path_observed) = match o.path {
            Observed::Value(p) => ((p.device, p.route), 1),
            Observed::Unobserved => ((0, 0), 0),
        };
        let (generation, generation_observed) = obs_out(o.generation);
        let (window, window_observed) = obs_out(o.window);
        let (in_flight, in_flight_observed) = obs_out(o.in_flight);
        let (cooldown_remaining_ns, cooldown_remaining_observed) = obs_out(o.cooldown_remaining_ns);
        ry_observation {
            observed_ns: o.observed_ns,
            window,
            in_flight,
            cooldown_remaining_ns,
            reason: ry_reason::from(o.reason) as u32,
            scope,
            path_route: path.1,
            generation,
            slice_index: o.slice.index,
            slice_attempt: o.slice.attempt,
            path_device: path.0,
            resolved: u8::from(o.resolved),
            scope_observed,
            path_observed,
            generation_observed,
            window_observed,
            in_flight_observed,
            cooldown_remaining_observed,
            reserved: [0; 7],
        }
    }
}

/// The detailed query's result.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_task_detail {
    /// The winning evidence (meaningful only if `has_winner`): the most
    /// severe unresolved one, most recent among equals, or the most recent
    /// resolved one when nothing is unresolved.
    pub winner: ry_observation,
    /// Same as the minimal query.
    pub state: ry_task_state,
    /// Observations dropped because storage was full.
    pub dropped: u32,
    /// Stale observations ignored (old attempt / old generation).
    pub stale: u32,
    /// Whether there is any evidence at all.
    pub has_winner: bool,
}

impl ry_task_detail {
    /// The C mirror of a core detailed query result.
    pub(crate) fn from_core(d: &Detail) -> Self {
        ry_task_detail {
            winner: d
                .winner
                .as_ref()
                .map(ry_observation::from_core)
                .unwrap_or_default(),
            state: d.state.into(),
            dropped: d.dropped,
            stale: d.stale,
            has_winner: d.winner.is_some(),
        }
    }
}

/// A task-evidence handle. Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_task {
    /// Opaque handle bits.
    pub bits: u64,
}

static TASKS: Registry<Mutex<TaskEvidence<8>>> = Registry::new(3, "task evidence");

fn slice_ref(index: u32, attempt: u32) -> SliceRef {
    SliceRef { index, attempt }
}

pub(crate) fn with_task<R>(t: ry_task, f: impl FnOnce(&mut TaskEvidence<8>) -> R) -> Result<R> {
    let e = TASKS.get(t.bits)?;
    let mut g = e.lock().unwrap_or_else(|p| p.into_inner());
    Ok(f(&mut g))
}

/// Creates empty evidence for one logical task (minimal state UNKNOWN until
/// something is observed).
///
/// Ownership: `*out` is owned by the caller; free with `ry_task_destroy`.
/// Thread-safety: every `ry_task_*` call is serialised per task by an
/// internal mutex (the completion path records; callers query).
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_task_create(out: *mut ry_task) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            let bits = TASKS.insert(Mutex::new(TaskEvidence::new()))?;
            Ok(ry_task { bits })
        })
    }
}

/// Destroys task evidence. Thread-safety: any thread.
///
/// Ownership: consumes the handle; every copy of it becomes invalid.
#[no_mangle]
pub extern "C" fn ry_task_destroy(task: ry_task) -> RyStatus {
    guard(|| TASKS.remove(task.bits))
}

/// `ry_task_record`'s outcome.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_recorded {
    /// Stored (new slot or replacing the slice's older evidence).
    Stored = 0,
    /// Ignored: it came from an older attempt or an older generation.
    Stale = 1,
    /// Dropped: storage full of more severe unresolved evidence (counted).
    Dropped = 2,
}

mirror!(ry_recorded <=> Recorded: Stored, Stale, Dropped);

/// Records evidence `*obs` for attempt `slice_attempt` of slice
/// `slice_index` (the observation's own slice fields are ignored).
/// `*recorded_out` (optional) says whether it was stored.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: serialised per task by an internal mutex.
///
/// # Safety
/// `obs` is valid for reads; `recorded_out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_task_record(
    task: ry_task,
    slice_index: u32,
    slice_attempt: u32,
    obs: *const ry_observation,
    recorded_out: *mut ry_recorded,
) -> RyStatus {
    // SAFETY: caller contract: `obs` valid for reads, `recorded_out` NULL or
    // valid for writes.
    unsafe {
        ret_opt(recorded_out, || {
            let o = in_ref(obs, "obs")?.to_core()?;
            let slice = slice_ref(slice_index, slice_attempt);
            Ok(with_task(task, |t| t.record(slice, o))?.into())
        })
    }
}

/// A success of the slice's current attempt: resolves its evidence of
/// this or an older attempt. `*resolved_out` (optional) says whether
/// something was resolved.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: serialised per task by an internal mutex.
///
/// # Safety
/// `resolved_out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_task_resolve(
    task: ry_task,
    slice_index: u32,
    slice_attempt: u32,
    now_ns: u64,
    resolved_out: *mut bool,
) -> RyStatus {
    // SAFETY: caller contract: `resolved_out` NULL or valid for writes.
    unsafe {
        ret_opt(resolved_out, || {
            with_task(task, |t| {
                t.resolve(slice_ref(slice_index, slice_attempt), now_ns)
            })
        })
    }
}

/// A new attempt of the slice starts: its old blocking evidence is
/// cleared (kept, resolved, for the detailed query).
///
/// Ownership: borrows its arguments for the call only; retains nothing.
/// Thread-safety: serialised per task by an internal mutex.
#[no_mangle]
pub extern "C" fn ry_task_begin_attempt(
    task: ry_task,
    slice_index: u32,
    slice_attempt: u32,
) -> RyStatus {
    guard(|| {
        with_task(task, |t| {
            t.begin_attempt(slice_ref(slice_index, slice_attempt))
        })
    })
}

/// The minimal query: NORMAL, CONGESTED, LONG_UNAVAILABLE or UNKNOWN.
/// Read-only: never mutates, polls, posts or probes.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: serialised per task by an internal mutex.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_task_state_get(task: ry_task, out: *mut ry_task_state) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe { ret(out, "out", || Ok(with_task(task, |t| t.state())?.into())) }
}

/// The detailed query. Read-only.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
/// Thread-safety: serialised per task by an internal mutex.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_task_detail_get(task: ry_task, out: *mut ry_task_detail) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            Ok(ry_task_detail::from_core(&with_task(task, |t| t.detail())?))
        })
    }
}

/// Evidence from the controller object (feature `layers`).
#[cfg(feature = "layers")]
mod layer {
    use super::*;
    use crate::cc::ry_cc;

    /// Fills `*out` with evidence for `reason` on path `device` x `route` from
    /// a snapshot of the controller's route domain at `now_ns`: path,
    /// generation, window and in-flight are observed; the cooldown remaining
    /// only once the monitor has started it; the scope is left unobserved.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_cc_route_observation(
        cc: ry_cc,
        device: u16,
        route: u32,
        reason: u32,
        now_ns: u64,
        out: *mut ry_observation,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let reason = ry_reason::to_core(reason, "reason")?;
                let snap = crate::cc::route_snapshot(cc, route)?;
                Ok(ry_observation::from_core(&snap.observation(
                    reason,
                    PathId { device, route },
                    now_ns,
                )))
            })
        }
    }
}

#[cfg(feature = "layers")]
pub use layer::*;
