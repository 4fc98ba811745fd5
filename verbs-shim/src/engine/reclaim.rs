//! The endpoint store's back end: one reclaim pass over retired
//! endpoints (drained ones reclaimed, a drain that timed out forced
//! to flush, one that never drains abandoned) and the forced flush
//! itself. The monitor runs a pass every tick; an open that found the
//! store full and evicted an idle endpoint runs one at once, so the
//! slot it freed is reusable without waiting for the monitor.

use super::shared::Shared;
use railyard_core::endpoint::{EndpointGuard, EndpointHandle, ReclaimEvent};
use std::sync::atomic::Ordering;

/// Moves the QPs of endpoint `h` to ERR (forced flush).
pub(crate) fn flush_endpoint(sh: &Shared, h: EndpointHandle, guard: &EndpointGuard) {
    if let Ok(res) = sh.endpoints.resource(h, guard) {
        for qp in &res.qps {
            if let Err(e) = qp.to_error_shared() {
                tracing::debug!(target: "railyard::qp", qpn = qp.qpn(), error = %e,
                    "moving the QP to ERR failed");
            }
        }
    }
}

/// One reclaim pass at `now`: every retired endpoint that drained is
/// reclaimed (its slot free again, its QP numbers forgotten), one whose
/// drain timed out is flushed, one still undrained after twice that is
/// abandoned. Safe beside another pass (the table's transitions are
/// compare-and-swap: each event happens once). Returns the slots freed.
pub(crate) fn reclaim_pass(sh: &Shared, now: u64, guard: &EndpointGuard) -> usize {
    let mut events = Vec::new();
    let _ = sh.endpoints.poll_reclaim(now, guard, |e| events.push(e));
    let mut freed = 0;
    for e in events {
        match e {
            ReclaimEvent::ForceFlush {
                handle,
                outstanding,
            } => {
                tracing::warn!(target: "railyard::endpoint", slot = handle.slot,
                    generation = handle.generation, outstanding,
                    "drain timed out: forcing a flush (QPs to ERR)");
                sh.telemetry.force_flushes.fetch_add(1, Ordering::Relaxed);
                flush_endpoint(sh, handle, guard);
            }
            ReclaimEvent::Reclaimed { handle, .. } | ReclaimEvent::Abandoned { handle, .. } => {
                if let ReclaimEvent::Abandoned { outstanding, .. } = e {
                    tracing::warn!(target: "railyard::endpoint", slot = handle.slot,
                        generation = handle.generation, outstanding,
                        "endpoint abandoned undrained: reclaimed anyway");
                } else {
                    tracing::info!(target: "railyard::endpoint", slot = handle.slot,
                        generation = handle.generation, "endpoint reclaimed");
                }
                sh.telemetry.reclaimed.fetch_add(1, Ordering::Relaxed);
                sh.registry.forget_endpoint(handle);
                freed += 1;
            }
        }
    }
    freed
}
