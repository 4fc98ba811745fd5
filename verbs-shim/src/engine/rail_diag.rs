//! Read-only diagnostics of the rail selector (RFC 4534's evaluation):
//! its counters, NIC and peer-ledger views, the per-decision sample-age
//! trace for TTL calibration, and where a task's slices went.
//!
//! Nothing here is on the post or completion path. The trace is recorded
//! only with [`RailConfig::trace`](railyard_core::rail::RailConfig::trace)
//! and the peer ledger on (a diagnostic run: one uncontended lock per
//! submitted multi-rail transfer); otherwise [`RailTrace::record`] is one
//! branch.

use super::error::EngineError;
use super::types::{BatchId, SegmentId, MAX_RAILS};
use super::Engine;
use railyard_core::rail::{NicView, PeerView, RailCounters};
use railyard_core::time::Nanos;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Most aggregate-decision traces an engine keeps before counting the rest
/// as dropped (fixed storage, allocated only when tracing).
pub const RAIL_TRACE_CAPACITY: usize = 1 << 16;

/// The aggregate-decision traces of a traced engine (see
/// [`Engine::take_rail_traces`]).
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

    fn take(&self) -> RailTraces {
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

impl Engine {
    /// The rail selector's counters: decisions, probes, V2/V3 fallbacks,
    /// missing / expired peer samples, ledger exhaustion and contention,
    /// and peer / NIC accounting errors (which must stay zero).
    pub fn rail_counters(&self) -> RailCounters {
        self.shared.rails.counters()
    }

    /// The NIC-scope state of local device `device` (in-flight bytes, the
    /// completion EWMA, the nominal rate), or `None` past the last rail.
    pub fn rail_nic_view(&self, device: usize) -> Option<NicView> {
        self.shared.rails.nic_view(device)
    }

    /// The peer ledger's entry for `seg` on local device `device`: bytes in
    /// flight to that peer on that device, the peer's own completion EWMA
    /// and the time of its last sample (engine clock, see
    /// [`Engine::now_ns`]). `None` without the ledger (`peer-feedback`
    /// feature and `rail.peer_accounting`), past the last rail, or if the
    /// peer has no entry there.
    pub fn rail_peer_view(&self, device: usize, seg: SegmentId) -> Option<PeerView> {
        (device < self.shared.rails.len())
            .then(|| self.shared.rails.peer_view(device, seg.0))
            .flatten()
    }

    /// Live peer-ledger entries on local device `device` (0 without the
    /// ledger or past the last rail). Idle entries are kept up to the
    /// history target; only their in-flight bytes must return to zero.
    pub fn rail_peer_entries(&self, device: usize) -> u32 {
        if device < self.shared.rails.len() {
            self.shared.rails.peer_entries(device)
        } else {
            0
        }
    }

    /// The engine's clock (nanoseconds since it started): the time base of
    /// [`PeerView::sample_ns`] and of the trace ages.
    pub fn now_ns(&self) -> Nanos {
        self.shared.now()
    }

    /// Takes the aggregate-decision traces recorded since the last call
    /// (empty unless `rail.trace` and the peer ledger are on). One entry
    /// per transfer whose slices were planned over two or more rails, as
    /// RFC 4534's TTL calibration wants: feed them to
    /// [`TtlCalibrator`](railyard_core::rail::TtlCalibrator) (a V1 run).
    pub fn take_rail_traces(&self) -> RailTraces {
        self.shared.rail_trace.take()
    }

    /// How many slices of task `task` of `batch` are on each local device
    /// (rail), `[..rails]`: the device of each slice's current (or last)
    /// attempt. Read it before [`Engine::free_batch`].
    pub fn task_rail_slices(
        &self,
        batch: BatchId,
        task: usize,
    ) -> Result<[u32; MAX_RAILS], EngineError> {
        self.shared.with_batch(batch, |b| {
            let te = b
                .tasks
                .get(task)
                .ok_or(EngineError::NoSuchTask { batch, task })?;
            let mut counts = [0u32; MAX_RAILS];
            for &s in &te.slices {
                let d = self.shared.meta[s as usize].dev.load(Ordering::Relaxed) as usize;
                if let Some(c) = counts.get_mut(d) {
                    *c += 1;
                }
            }
            Ok(counts)
        })
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
