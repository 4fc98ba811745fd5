//! The rail selector's per-decision sample-age trace for RFC 4534's TTL
//! calibration ([`RailTrace`]; the engine's read-only selector diagnostics,
//! `Engine::rail_counters` and the rest, read it and the selector).
//!
//! Nothing here is on the post or completion path. The trace is recorded
//! only with [`RailConfig::trace`](railyard_core::rail::RailConfig::trace)
//! and the peer ledger on (a diagnostic run: one uncontended lock per
//! submitted multi-rail transfer); otherwise [`RailTrace::record`] is one
//! branch.

use railyard_core::time::Nanos;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Most aggregate-decision traces an engine keeps before counting the rest
/// as dropped (fixed storage, allocated only when tracing).
pub const RAIL_TRACE_CAPACITY: usize = 1 << 16;

/// The aggregate-decision traces of a traced engine (see
/// [`Engine::take_rail_traces`](super::Engine::take_rail_traces)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RailTraces {
    /// One entry per multi-rail transfer planned, in submission order:
    /// `Some(age)` the largest peer sample age over the candidate devices,
    /// `None` a cold decision (some candidate had no sample for the peer).
    pub decisions: Vec<Option<Nanos>>,
    /// Decisions not kept because the storage was full.
    pub dropped: u64,
}

/// The engine's trace store: `None` unless tracing with the ledger on.
pub(crate) struct RailTrace {
    store: Option<Mutex<Vec<Option<Nanos>>>>,
    dropped: AtomicU64,
}

impl RailTrace {
    pub(crate) fn new(on: bool) -> Self {
        RailTrace {
            store: on.then(|| Mutex::new(Vec::with_capacity(RAIL_TRACE_CAPACITY))),
            dropped: AtomicU64::new(0),
        }
    }

    /// Records one plan's trace (`PlanInfo::trace`); `None` (no trace for
    /// this decision) is ignored. Never allocates: beyond the capacity
    /// reserved at construction, decisions are counted as dropped.
    #[inline]
    pub(crate) fn record(&self, trace: Option<Option<Nanos>>) {
        let (Some(store), Some(t)) = (&self.store, trace) else {
            return;
        };
        let mut v = store.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < RAIL_TRACE_CAPACITY {
            v.push(t);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes every trace recorded since the last call (and the count of
    /// those dropped).
    pub(crate) fn take(&self) -> RailTraces {
        let decisions = match &self.store {
            Some(s) => {
                let mut v = s.lock().unwrap_or_else(|e| e.into_inner());
                let out = v.clone();
                v.clear();
                out
            }
            None => Vec::new(),
        };
        RailTraces {
            decisions,
            dropped: self.dropped.swap(0, Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_store_is_off_bounded_and_drained_by_take() {
        let off = RailTrace::new(false);
        off.record(Some(Some(5)));
        assert_eq!(off.take(), RailTraces::default());
        let on = RailTrace::new(true);
        on.record(None); // a decision without a trace
        on.record(Some(None));
        on.record(Some(Some(7)));
        let t = on.take();
        assert_eq!(t.decisions, [None, Some(7)]);
        assert_eq!(t.dropped, 0);
        assert!(on.take().decisions.is_empty(), "take drains");
        for _ in 0..RAIL_TRACE_CAPACITY + 3 {
            on.record(Some(Some(1)));
        }
        let t = on.take();
        assert_eq!((t.decisions.len(), t.dropped), (RAIL_TRACE_CAPACITY, 3));
    }
}
