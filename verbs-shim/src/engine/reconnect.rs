//! Reconnect: a segment's retired endpoint is replaced by a new one on a
//! new route generation (RFC 4162 generation fencing, RFC 3136 endpoint
//! generations).
//!
//! * **When**: explicitly ([`Engine::reconnect_segment`]), or automatically
//!   once, on a background thread, when the endpoint of a segment this
//!   engine opened is retired for a CQ error or a QP-scope async event (the
//!   RC QP is in ERR and must be rebuilt; RFC 4162: refresh the address,
//!   rkey and endpoint generation before the existing retry path runs).
//!   Segments a peer opened to us are reconnected by that peer.
//! * **How**: the old endpoint (if still active) is retired through the one
//!   retire API, the handshake runs again (fresh descriptors: rkeys,
//!   addresses), the route moves to a new generation
//!   ([`PostGate::new_generation`](super::PostGate::new_generation)), and
//!   only then is the new endpoint published under the same [`SegmentId`].
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

use super::{Engine, EngineError, SegmentId, Shared};
use railyard_core::cc::{CcStats, DomainSnapshot};
use railyard_core::endpoint::{EndpointHandle, Phase, RetireReason};
use railyard_core::slice::SliceRef;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

/// A segment's connection state ([`Engine::segment_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The segment's current endpoint (slot and generation).
    pub endpoint: EndpointHandle,
    /// Whether that endpoint accepts posts.
    pub active: bool,
    /// Whether a reconnect is in progress.
    pub reconnecting: bool,
    /// The peer's handshake address (only for segments this engine opened).
    pub peer: Option<SocketAddr>,
    /// The CC route domain (local device × the peer's NIC).
    pub route: u32,
    /// Reconnects that replaced the endpoint so far.
    pub reconnects: u32,
}

/// What a retry whose endpoint was retired does.
pub(crate) enum RetryRoute {
    /// Re-pointed to the segment's current endpoint: re-queue it.
    Repointed,
    /// A reconnect is in progress: re-queue it and back off.
    Wait,
    /// No usable endpoint. `teardown`: its owner retired it (close,
    /// reconnect, shutdown), which is no new root failure (RFC 4162:
    /// UNKNOWN without other evidence) rather than `NO_USABLE_PATH`.
    NoPath {
        /// Retired by its owner.
        teardown: bool,
    },
}

fn decode(v: u64) -> EndpointHandle {
    EndpointHandle {
        slot: v as u32,
        generation: (v >> 32) as u32,
    }
}

fn encode(h: EndpointHandle) -> u64 {
    (u64::from(h.generation) << 32) | u64::from(h.slot)
}

impl Shared {
    fn is_active(&self, h: EndpointHandle) -> bool {
        matches!(self.endpoints.state(h), Ok(s) if s.phase == Phase::Active)
    }

    /// Where slice attempt `r`, refused because its endpoint is retired,
    /// goes next.
    pub(crate) fn retry_route(&self, r: SliceRef) -> RetryRoute {
        let m = &self.meta[r.index as usize];
        let ep = m.ep.load(Ordering::Relaxed);
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        // Teardown: the endpoint was retired by its owner (it may already
        // be reclaimed, so the segment's `closed` mark says it too).
        let mut teardown = matches!(
            self.endpoints.state(decode(ep)),
            Ok(s) if s.reason == Some(RetireReason::Shutdown)
        );
        let Some(e) = segs.get(m.segment.load(Ordering::Relaxed) as usize) else {
            return RetryRoute::NoPath { teardown };
        };
        teardown |= e.closed && encode(e.handle) == ep;
        if encode(e.handle) != ep && self.is_active(e.handle) && !e.shards.is_empty() {
            let qp = m.qp.load(Ordering::Relaxed) as usize % e.shards.len();
            m.qp.store(qp as u32, Ordering::Relaxed);
            m.shard.store(u32::from(e.shards[qp]), Ordering::Relaxed);
            m.route.store(e.route, Ordering::Relaxed);
            m.ep.store(encode(e.handle), Ordering::Release);
            return RetryRoute::Repointed;
        }
        if e.reconnecting {
            RetryRoute::Wait
        } else {
            RetryRoute::NoPath { teardown }
        }
    }

    /// Called after `h` was retired for `reason`: starts one automatic
    /// reconnect of its segment if this engine opened it and the QP must
    /// be rebuilt (CQ error, QP-scope event).
    pub(crate) fn after_retire(&self, h: EndpointHandle, reason: RetireReason) {
        if !matches!(reason, RetireReason::CqError | RetireReason::QpFatal)
            || self.draining.load(Ordering::Acquire)
            || self.stop.load(Ordering::Acquire)
        {
            return;
        }
        let seg = {
            let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
            let Some((i, e)) = segs
                .iter_mut()
                .enumerate()
                .find(|(_, e)| e.handle == h && e.peer.is_some() && !e.reconnecting)
            else {
                return;
            };
            e.reconnecting = true;
            i
        };
        let Some(me) = self.me.get().and_then(|w| w.upgrade()) else {
            self.end_reconnect(seg);
            return;
        };
        let spawned = std::thread::Builder::new()
            .name("railyard-reconnect".into())
            .spawn(move || {
                let _ = me.reconnect(seg);
                me.end_reconnect(seg);
            });
        let mut threads = self
            .reconnect_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        threads.retain(|t| !t.is_finished());
        match spawned {
            Ok(t) => threads.push(t),
            Err(_) => self.end_reconnect(seg),
        }
    }

    fn end_reconnect(&self, seg: usize) {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = segs.get_mut(seg) {
            e.reconnecting = false;
        }
    }

    /// Replaces segment `seg`'s endpoint: retires the old one (if still
    /// active), runs the handshake again, advances the route generation,
    /// publishes the new endpoint. Reconnects are serialized, so no new
    /// endpoint is ever orphaned.
    pub(crate) fn reconnect(&self, seg: usize) -> Result<u32, EngineError> {
        let id = SegmentId(seg as u32);
        let _one = self
            .reconnect_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (peer, old) = {
            let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
            let e = segs.get(seg).ok_or(EngineError::NoSuchSegment(id))?;
            let peer = e.peer.ok_or(EngineError::Unsupported(
                "reconnecting a segment the peer opened (the peer reconnects it)",
            ))?;
            (peer, e.handle)
        };
        if self.draining.load(Ordering::Acquire) {
            return Err(EngineError::SegmentClosed(id));
        }
        if self.is_active(old)
            && self
                .endpoints
                .retire(old, RetireReason::Shutdown, self.now())
                .is_ok()
        {
            self.retired.fetch_add(1, Ordering::Relaxed);
        }
        let hs = crate::handshake::Handshake::connect(peer, self.cfg.handshake_timeout)?;
        let new = self.establish(hs, true)?;
        // The new generation first, then the endpoint becomes visible: no
        // post on the new endpoint is admitted on the old generation.
        let _ = self.gate.new_generation(new.route);
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let e = segs.get_mut(seg).ok_or(EngineError::NoSuchSegment(id))?;
        e.handle = new.handle;
        e.remote = new.remote;
        e.shards = new.shards;
        e.qpns = new.qpns;
        e.route = new.route;
        e.reconnects += 1;
        e.closed = false;
        Ok(new.handle.generation)
    }
}

impl Engine {
    /// Replaces the endpoint of `seg` (a segment this engine opened) with a
    /// new one: the old endpoint is retired if it is still active (its
    /// posted work drains or is flushed; late completions settle accounting
    /// only), the handshake runs again (fresh rkeys and addresses), and the
    /// route moves to a new generation. Slices waiting to retry on the old
    /// endpoint move to the new one. Returns the new endpoint generation.
    ///
    /// Whether the route admits posts right away is the controller's call:
    /// a QUARANTINED route avoids them until its cooldown moves it to
    /// PROBING, and a successful probe makes it HEALTHY.
    pub fn reconnect_segment(&self, seg: SegmentId) -> Result<u32, EngineError> {
        self.shared.reconnect(seg.0 as usize)
    }

    /// The connection state of `seg`.
    pub fn segment_info(&self, seg: SegmentId) -> Result<SegmentInfo, EngineError> {
        let sh = &*self.shared;
        let segs = sh.segments.read().unwrap_or_else(|e| e.into_inner());
        let e = segs
            .get(seg.0 as usize)
            .ok_or(EngineError::NoSuchSegment(seg))?;
        Ok(SegmentInfo {
            endpoint: e.handle,
            active: sh.is_active(e.handle),
            reconnecting: e.reconnecting,
            peer: e.peer,
            route: e.route,
            reconnects: e.reconnects,
        })
    }

    /// A snapshot of `seg`'s CC route (health, generation, errors, window,
    /// in-flight bytes), or `None` without a controller. Slow path; never
    /// touches verbs.
    pub fn route_snapshot(&self, seg: SegmentId) -> Result<Option<DomainSnapshot>, EngineError> {
        let route = self.segment_info(seg)?.route;
        Ok(self.shared.gate.route_snapshot(route))
    }

    /// A snapshot of the local device's CC domain, or `None` without a
    /// controller.
    pub fn device_snapshot(&self) -> Option<DomainSnapshot> {
        self.shared.gate.device_snapshot()
    }

    /// The controller's counters (stale feedback, illegal transitions, ...),
    /// or `None` without a controller.
    pub fn cc_stats(&self) -> Option<CcStats> {
        self.shared.gate.cc_stats()
    }
}
