//! Retire and reconnect (part of the connection room, [`super`]): every
//! endpoint deletion goes through [`retire`], the one teardown API, which
//! counts and logs it and, where the QP must be rebuilt, starts the
//! automatic reconnect: a segment's retired endpoint is replaced by a new
//! one on a new route generation (RFC 4162 generation fencing, RFC 3136
//! endpoint generations).
//!
//! * **When**: explicitly ([`Engine::reconnect_segment`](super::super::Engine::reconnect_segment)), or automatically
//!   once, on a background thread, when the endpoint of a segment this
//!   engine opened is retired for a CQ error or a QP-scope async event (the
//!   RC QP is in ERR and must be rebuilt; RFC 4162: refresh the address,
//!   rkey and endpoint generation before the existing retry path runs).
//!   Segments a peer opened to us are reconnected by that peer.
//! * **How**: the old endpoint (if still active) is retired through the one
//!   retire API, the handshake runs again (fresh descriptors: rkeys,
//!   addresses), the route moves to a new generation
//!   ([`CcGate::new_generation`](super::super::CcGate::new_generation)), and
//!   only then is the new endpoint published under the same [`SegmentId`].
//!   The new descriptor names the connection it replaces (the peer's
//!   rail-0 QP number, `PeerDescriptor::replaces`), so the peer retires
//!   its stale side (`PassiveHandshakeStale`) instead of keeping it.
//! * **Retries**: a slice attempt whose endpoint was retired is re-pointed
//!   to the segment's current endpoint if that one is active; while a
//!   reconnect is in progress it waits in its queue (bounded by the task
//!   deadline); otherwise it fails with `NO_USABLE_PATH`.
//! * **Late completions** of the old endpoint carry the old route
//!   generation in their token: they settle accounting only and cannot move
//!   the new generation's path state; their slice effects are fenced by the
//!   slice attempt as always.
//! * **Path recovery** is the controller's: a route QUARANTINED before the
//!   reconnect stays QUARANTINED (new posts avoided) until its cooldown
//!   moves it to PROBING, and a successful bounded probe on the current
//!   generation makes it HEALTHY again.

use super::*;
use crate::engine::observe::{log_reconnect, log_retired};
use railyard_core::completion::Completed;

/// Retires an endpoint (the one teardown API) and counts it. A QP that
/// must be rebuilt (CQ error, QP-scope event) on a segment this engine
/// opened starts one automatic reconnect ([`after_retire`]).
pub(crate) fn retire(sh: &Shared, h: EndpointHandle, reason: RetireReason) {
    // Counted and logged there.
    retire_logged(sh, h, reason, None);
}

/// Retires every endpoint of this engine.
pub(crate) fn retire_all(sh: &Shared, reason: RetireReason) {
    for (_, h, _, _) in sh.registry.rail_endpoints() {
        retire(sh, h, reason);
    }
}

/// Retires `h` for `reason` (the one teardown API) and, only if this
/// call retired it, counts it, starts the automatic reconnect where
/// one applies ([`after_retire`]) and logs it (after `wc`'s
/// classification when an error completion caused it: the endpoint's
/// first one; the flushes after it find it retired and log nothing).
pub(crate) fn retire_logged(
    sh: &Shared,
    h: EndpointHandle,
    reason: RetireReason,
    wc: Option<&Completed>,
) {
    if sh.endpoints.retire(h, reason, sh.now()).is_err() {
        return;
    }
    sh.telemetry
        .retired
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The reconnect first (it marks the segment reconnecting, so that
    // retries wait for it), the log lines after: writing them must not
    // widen the window in which a retry finds the endpoint retired and
    // no reconnect under way.
    let reconnect = after_retire(sh, h, reason);
    if let Some(done) = wc {
        let c = &done.wc;
        tracing::warn!(target: "railyard::endpoint", status = c.status,
            vendor_err = c.vendor_err, class = ?c.class, scope = ?c.scope,
            effect = ?c.effect, device = done.record.device, qp = done.record.qp,
            route = done.record.route, peer = ?done.record.peer,
            "error completion classified");
    }
    log_retired(sh, h, reason);
    if let Some(segment) = reconnect {
        tracing::info!(target: "railyard::reconnect", segment, ?reason,
            "automatic reconnect scheduled");
    }
}

/// The poll path's retire after an error completion (see
/// [`retire_logged`]).
pub(crate) fn retire_after_wc(sh: &Shared, done: &Completed) {
    retire_logged(sh, done.record.endpoint, RetireReason::CqError, Some(done));
}

/// Where slice attempt `r`, refused because its endpoint is retired,
/// goes next: its rail's replacement endpoint (after a reconnect),
/// else wait for a reconnect in progress, else another live rail of
/// the segment, else nowhere.
pub(crate) fn retry_route(sh: &Shared, r: SliceRef) -> RetryRoute {
    let m = &sh.tables.meta[r.index as usize];
    let ep = m.ep.load(Ordering::Relaxed);
    let dev = m.dev.load(Ordering::Relaxed) as u16;
    let teardown = {
        let segs = sh
            .registry
            .read_segments()
            .unwrap_or_else(|e| e.into_inner());
        // Teardown: the endpoint was retired by its owner (it may
        // already be reclaimed, so the segment's `closed` mark says it
        // too).
        let mut teardown = matches!(
            sh.endpoints.state(ep_from_word(ep)),
            Ok(s) if s.reason == Some(RetireReason::Shutdown)
        );
        let Some(e) = segs.get(m.segment.load(Ordering::Relaxed) as usize) else {
            return RetryRoute::NoPath { teardown };
        };
        if let Some(x) = e.rails.iter().find(|x| x.dev == dev) {
            teardown |= e.closed && ep_word(x.handle) == ep;
            if ep_word(x.handle) != ep && sh.is_active(x.handle) && !x.shards.is_empty() {
                let qp = m.qp.load(Ordering::Relaxed) as usize % x.shards.len();
                m.qp.store(qp as u32, Ordering::Relaxed);
                m.shard.store(u32::from(x.shards[qp]), Ordering::Relaxed);
                m.route.store(x.route, Ordering::Relaxed);
                m.ep.store(ep_word(x.handle), Ordering::Release);
                return RetryRoute::Repointed;
            }
        }
        if e.reconnecting {
            return RetryRoute::Wait;
        }
        if e.evicted && !e.closed {
            Err(m.segment.load(Ordering::Relaxed) as usize)
        } else {
            Ok(teardown)
        }
    };
    // Evicted from the endpoint store while this attempt was queued:
    // reconnect it (once; a failed reconnect is no path).
    let teardown = match teardown {
        Ok(t) => t,
        Err(seg) if reconnect_evicted(sh, seg, false) => return RetryRoute::Wait,
        Err(_) => false,
    };
    if !teardown && re_rail(sh, r) {
        return RetryRoute::Moved;
    }
    RetryRoute::NoPath { teardown }
}

/// Called after `h` was retired for `reason`: starts one automatic
/// reconnect of its segment if this engine opened it and the QP must
/// be rebuilt (CQ error, QP-scope event). Returns that segment, if it
/// started one.
pub(crate) fn after_retire(sh: &Shared, h: EndpointHandle, reason: RetireReason) -> Option<usize> {
    if !matches!(reason, RetireReason::CqError | RetireReason::QpFatal)
        || sh.lifecycle.draining.load(Ordering::Acquire)
        || sh.lifecycle.stop.load(Ordering::Acquire)
    {
        return None;
    }
    let seg = sh.registry.begin_reconnect(h)?;
    spawn_reconnect(sh, seg).then_some(seg)
}

/// Makes an evicted segment usable again: starts its reconnect in the
/// background unless one is under way (`fresh`, a new submit: also
/// after a failed one). True while the segment waits for a reconnect
/// (retries wait for it); false if it is not evicted, or its last
/// reconnect failed and this is no new submit.
pub(crate) fn reconnect_evicted(sh: &Shared, seg: usize, fresh: bool) -> bool {
    if sh.lifecycle.draining.load(Ordering::Acquire) || sh.lifecycle.stop.load(Ordering::Acquire) {
        return false;
    }
    match sh.registry.begin_evicted_reconnect(seg, fresh) {
        (true, _) => {
            tracing::info!(target: "railyard::reconnect", segment = seg,
                "evicted segment used again: reconnecting");
            spawn_reconnect(sh, seg)
        }
        (false, waiting) => waiting,
    }
}

/// Runs one automatic reconnect of `seg` (already marked reconnecting)
/// on a background thread. False (the mark ended) if the engine is
/// going away or no thread could be spawned.
fn spawn_reconnect(sh: &Shared, seg: usize) -> bool {
    let Some(me) = sh.me.get().and_then(|w| w.upgrade()) else {
        sh.registry.end_reconnect(seg);
        return false;
    };
    let spawned = std::thread::Builder::new()
        .name("railyard-reconnect".into())
        .spawn(move || {
            tracing::info!(target: "railyard::reconnect", segment = seg, "reconnect started");
            // Ends the reconnect (`reconnect_once`) before the line
            // below is written.
            let r = reconnect_once(&me, seg, true);
            // Logged only after the reconnect ended, so that writing
            // the line does not widen the window in which a retry finds
            // the endpoint retired and the reconnect still under way.
            log_reconnect(&me, seg, &r);
        });
    match spawned {
        Ok(t) => {
            sh.lifecycle.keep_reconnect(Some(t));
            true
        }
        Err(_) => {
            sh.lifecycle.keep_reconnect(None);
            sh.registry.end_reconnect(seg);
            false
        }
    }
}

/// Replaces segment `seg`'s endpoints (every rail: the handshake
/// covers them all): retires the old ones still active, runs the
/// handshake again, advances each rail's route generation, publishes
/// the new endpoints. Reconnects are serialized, so no new endpoint is
/// ever orphaned. Returns rail 0's new endpoint generation.
pub(crate) fn reconnect(sh: &Shared, seg: usize) -> Result<u32, EngineError> {
    tracing::info!(target: "railyard::reconnect", segment = seg, "reconnect started");
    let r = reconnect_once(sh, seg, false);
    log_reconnect(sh, seg, &r);
    r
}

/// One reconnect of `seg` ([`reconnect()`]). `auto`:
/// the automatic reconnect [`after_retire`]
/// started, whose `reconnecting` mark this ends: in the same critical
/// section that publishes the new endpoints, so that an error
/// completion on a new endpoint, however soon, finds no reconnect under
/// way and starts the next one (else that retry would find its endpoint
/// retired and nothing coming: `NO_USABLE_PATH`); or, if it fails
/// before publishing anything, on the way out.
fn reconnect_once(sh: &Shared, seg: usize, auto: bool) -> Result<u32, EngineError> {
    let mut published = false;
    let r = replace_endpoints(sh, seg, auto, &mut published);
    if auto && !published {
        sh.registry.end_reconnect(seg);
    }
    r
}

fn replace_endpoints(
    sh: &Shared,
    seg: usize,
    auto: bool,
    published: &mut bool,
) -> Result<u32, EngineError> {
    let id = SegmentId(seg as u32);
    let _one = sh.lifecycle.one_reconnect();
    let (peer, old, replaces) = sh.registry.reconnect_target(seg)?;
    if sh.lifecycle.draining.load(Ordering::Acquire) {
        return Err(EngineError::SegmentClosed(id));
    }
    for h in old {
        if sh.is_active(h)
            && sh
                .endpoints
                .retire(h, RetireReason::Shutdown, sh.now())
                .is_ok()
        {
            sh.telemetry.retired.fetch_add(1, Ordering::Relaxed);
            log_retired(sh, h, RetireReason::Shutdown);
        }
    }
    // The peer retires its side of the old connection (named by its
    // rail-0 QP number) once the new one is up.
    let est = fetch_retried_once(sh, || {
        let hs = crate::handshake::Handshake::connect(peer, sh.cfg.handshake_timeout)?;
        establish(sh, hs, Side::Initiator, replaces)
    })?;
    let new = est.rails;
    // The new generations first, then the endpoints become visible: no
    // post on a new endpoint is admitted on an old generation.
    for x in &new {
        let g = sh.gate.new_generation(x.route);
        tracing::debug!(target: "railyard::reconnect", segment = seg, device = x.dev,
            route = x.route, generation = ?g, "route moved to a new generation");
        sh.fault.trace(&sh.gate, TraceEvent::NewGeneration(x.route));
    }
    let generation = new.first().map_or(0, |x| x.handle.generation);
    sh.registry.publish(seg, new, auto)?;
    *published = true;
    // Receiver credit re-negotiated: a new control channel and a new
    // epoch on both sides; the old one's grants are fenced.
    attach_credit(sh, id, est.credit, est.hs, None)?;
    Ok(generation)
}
