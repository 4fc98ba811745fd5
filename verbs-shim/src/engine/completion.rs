//! Where a completion lands ([`on_completed`]): the engine's side of one
//! token the poll path completed. By then the composed hot path
//! ([`EngineHotPath::complete_via`]) has released every hold of the token (CC
//! permit, rail charge, receiver credit, QP depth, and its memory pin),
//! classified the WC once and settled or retried the slice in the slice
//! table; what is left is the engine's bookkeeping, all of it here, in
//! this order:
//!
//! 1. the fault-injection CC trace (a no-op without the feature);
//! 2. an error completion retires its endpoint (the one teardown API,
//!    which may start the automatic reconnect): its QP is in ERR;
//! 3. the task's evidence for the slice's attempt (resolved on success,
//!    recorded on an error);
//! 4. a settled slice is accounted in its task (the slice's own memory pin
//!    given back, the task's counters, its waiters woken when it became
//!    terminal); a retried one starts its new attempt and goes back to its
//!    queue; a stale completion released holds only.

use super::connect::retire_after_wc;
use super::fault::TraceEvent;
use super::hotpath::EngineHotPath;
use super::shared::Shared;
use super::telemetry::WorkerCounters;
use crate::WC_SUCCESS;
use railyard_core::completion::{Completed, SliceEffect};
use std::sync::atomic::Ordering;

/// The engine's side of the completed token `done` (see the module docs),
/// at `now`, counted in the polling worker's counters `c`.
#[inline(always)]
pub(crate) fn on_completed(
    sh: &Shared,
    hot: &EngineHotPath<'_>,
    c: &WorkerCounters,
    done: &Completed,
    now: u64,
) {
    sh.fault
        .trace(&sh.gate, TraceEvent::Completion(done.wc.status));
    if done.wc.status != WC_SUCCESS {
        // The QP is in ERR now: retire its endpoint (one API). For a
        // flush this is a no-op unless the QP went to ERR behind the
        // engine's back (then the burst retires it exactly once).
        retire_after_wc(sh, done);
    }
    // Task evidence, for the slice's current attempt only (a stale
    // completion's slice slot may already belong to another task).
    let evidence = || match hot.completion_observation(done, now) {
        None => sh.tables.resolve_evidence(done.record.slice, now),
        Some(o) => sh.tables.note(done.record.slice, o),
    };
    match done.slice {
        SliceEffect::Settled(s) => {
            evidence();
            sh.tables.settled(&sh.mem, done.record.slice.index, s)
        }
        SliceEffect::Retry(r) => {
            c.retries.fetch_add(1, Ordering::Relaxed);
            evidence();
            sh.tables.begin_attempt(r);
            sh.requeue(r);
        }
        SliceEffect::StaleReleaseOnly => {
            c.stale.fetch_add(1, Ordering::Relaxed);
        }
    }
}
