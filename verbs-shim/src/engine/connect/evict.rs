//! The endpoint store's eviction (RFC 3136 `StoreEviction`; part of the
//! connection room, [`super`]): an open that finds every endpoint slot
//! taken evicts the least recently used idle segment instead of failing
//! with `TableFull`.
//!
//! * **Which**: a segment this engine opened (it can reconnect it), open,
//!   not being reconnected, whose every rail's endpoint is active with no
//!   post outstanding, least recently submitted to first
//!   ([`Registry::eviction_candidates`](super::super::registry::Registry::eviction_candidates)).
//!   A segment a peer opened to us is never evicted here: the peer's
//!   one-sided WRITEs on it leave no trace on this side, so it cannot be
//!   known idle; the peer evicts it from its own store.
//! * **How**: the segment is marked evicted, then each endpoint goes
//!   through the one retire API ([`retire`]) with `StoreEviction`; being
//!   idle it drains at once, and a reclaim pass run right here frees its
//!   slot (QPs destroyed once no reader can see them), so the open that
//!   asked reuses it without waiting for the monitor.
//! * **After**: the next transfer to the evicted segment (or an attempt
//!   that was queued on it) starts a reconnect, as after an error
//!   ([`reconnect_evicted`](super::reconnect::reconnect_evicted)); its
//!   slices wait for it and are re-pointed to the new endpoints. The new
//!   handshake names the connection it replaces, so the peer retires its
//!   stale side (`PassiveHandshakeStale`).
//! * **When nothing is idle** the open still fails with `TableFull` (typed,
//!   nothing built is kept): every slot holds a busy endpoint, one a
//!   peer opened, or one still draining.

use super::*;
use crate::engine::fabric::EpResource;
use crate::engine::reclaim::reclaim_pass;
use railyard_core::endpoint::{EndpointError, Phase};
use std::time::{Duration, Instant};

/// Opens an endpoint holding `res`; when the store is full, evicts the
/// least recently used idle segment ([`evict_idle`]) and retries with the
/// same resource until a slot is free, nothing is idle, or the handshake
/// timeout passed (then `TableFull`, and `res` is dropped: its QPs are
/// destroyed).
pub(crate) fn open_endpoint(
    sh: &Shared,
    mut res: EpResource,
) -> Result<EndpointHandle, EngineError> {
    let full = || EngineError::Endpoint(EndpointError::TableFull);
    let deadline = Instant::now() + sh.cfg.handshake_timeout;
    let local = sh.endpoints.register();
    // Endpoints this open evicted that are not reclaimed yet.
    let mut evicted: Vec<EndpointHandle> = Vec::new();
    loop {
        match sh.endpoints.open_or_return(res) {
            Ok(h) => return Ok(h),
            Err((EndpointError::TableFull, back)) => res = back,
            Err((e, _)) => return Err(EngineError::Endpoint(e)),
        }
        if reclaim_pass(sh, sh.now(), &local.pin()) > 0 {
            continue;
        }
        // Reclaimed (by the pass above or the monitor's): gone from the table.
        evicted.retain(|&h| sh.endpoints.state(h).is_ok());
        if evicted.is_empty() {
            match evict_idle(sh) {
                Some(hs) => {
                    evicted = hs;
                    continue;
                }
                None => return Err(full()),
            }
        }
        // An evicted endpoint still drains a post admitted just before
        // its retire: wait for it (bounded).
        if Instant::now() >= deadline {
            return Err(full());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Evicts the least recently used idle segment (see the module docs) and
/// returns its retired endpoints, or `None` if no segment is idle.
pub(crate) fn evict_idle(sh: &Shared) -> Option<Vec<EndpointHandle>> {
    for (seg, seen, hs) in sh.registry.eviction_candidates() {
        let idle = hs.iter().all(|&h| {
            matches!(sh.endpoints.state(h),
                Ok(s) if s.phase == Phase::Active && s.outstanding == 0)
        });
        // Marked first, retired after: a transfer that finds the segment
        // evicted reconnects it, never a retired endpoint and no plan.
        if !idle || !sh.registry.mark_evicted(seg, &hs, seen) {
            continue;
        }
        for &h in &hs {
            retire(sh, h, RetireReason::StoreEviction);
        }
        sh.telemetry.evictions.fetch_add(1, Ordering::Relaxed);
        tracing::info!(target: "railyard::endpoint", segment = seg, endpoints = hs.len(),
            idle_ms = sh.now().saturating_sub(seen) / 1_000_000,
            "endpoint store full: evicted the least recently used idle segment");
        return Some(hs);
    }
    None
}
