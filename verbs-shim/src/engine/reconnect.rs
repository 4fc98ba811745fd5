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
//!   ([`CcGate::new_generation`](super::CcGate::new_generation)), and
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

use super::{ep_from_word, ep_word, Engine, EngineError, SegmentId, Shared};
use railyard_core::cc::{CcStats, DomainSnapshot};
use railyard_core::endpoint::{EndpointHandle, Phase, RetireReason};
use railyard_core::slice::SliceRef;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

/// A segment's connection state, for one of its rails
/// ([`Engine::segment_info`], [`Engine::segment_rail_info`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The rail's local device index (rail `i` = local device `i` ↔ the
    /// peer's NIC `i`).
    pub device: u16,
    /// How many rails the segment has.
    pub rails: u16,
    /// The rail's current endpoint (slot and generation).
    pub endpoint: EndpointHandle,
    /// Whether that endpoint accepts posts.
    pub active: bool,
    /// Whether a reconnect of the segment is in progress.
    pub reconnecting: bool,
    /// The peer's handshake address (only for segments this engine opened).
    pub peer: Option<SocketAddr>,
    /// The rail's CC route domain (local device × the peer's NIC).
    pub route: u32,
    /// Reconnects that replaced the segment's endpoints so far.
    pub reconnects: u32,
}

/// What a retry whose endpoint was retired does.
pub(crate) enum RetryRoute {
    /// Re-pointed to its rail's current endpoint: re-queue it.
    Repointed,
    /// Moved to another live rail of the segment (already re-queued).
    Moved,
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

impl Shared {
    fn is_active(&self, h: EndpointHandle) -> bool {
        matches!(self.endpoints.state(h), Ok(s) if s.phase == Phase::Active)
    }

    /// Where slice attempt `r`, refused because its endpoint is retired,
    /// goes next: its rail's replacement endpoint (after a reconnect),
    /// else wait for a reconnect in progress, else another live rail of
    /// the segment, else nowhere.
    pub(crate) fn retry_route(&self, r: SliceRef) -> RetryRoute {
        let m = &self.meta[r.index as usize];
        let ep = m.ep.load(Ordering::Relaxed);
        let dev = m.dev.load(Ordering::Relaxed) as u16;
        let teardown = {
            let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
            // Teardown: the endpoint was retired by its owner (it may
            // already be reclaimed, so the segment's `closed` mark says it
            // too).
            let mut teardown = matches!(
                self.endpoints.state(ep_from_word(ep)),
                Ok(s) if s.reason == Some(RetireReason::Shutdown)
            );
            let Some(e) = segs.get(m.segment.load(Ordering::Relaxed) as usize) else {
                return RetryRoute::NoPath { teardown };
            };
            if let Some(x) = e.rails.iter().find(|x| x.dev == dev) {
                teardown |= e.closed && ep_word(x.handle) == ep;
                if ep_word(x.handle) != ep && self.is_active(x.handle) && !x.shards.is_empty() {
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
            teardown
        };
        if !teardown && self.re_rail(r) {
            return RetryRoute::Moved;
        }
        RetryRoute::NoPath { teardown }
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
            let Some((i, e)) = segs.iter_mut().enumerate().find(|(_, e)| {
                e.rails.iter().any(|x| x.handle == h) && e.peer.is_some() && !e.reconnecting
            }) else {
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

    /// Replaces segment `seg`'s endpoints (every rail: the handshake
    /// covers them all): retires the old ones still active, runs the
    /// handshake again, advances each rail's route generation, publishes
    /// the new endpoints. Reconnects are serialized, so no new endpoint is
    /// ever orphaned. Returns rail 0's new endpoint generation.
    pub(crate) fn reconnect(&self, seg: usize) -> Result<u32, EngineError> {
        let id = SegmentId(seg as u32);
        let _one = self
            .reconnect_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (peer, old, replaces) = {
            let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
            let e = segs.get(seg).ok_or(EngineError::NoSuchSegment(id))?;
            let peer = e.peer.ok_or(EngineError::Unsupported(
                "reconnecting a segment the peer opened (the peer reconnects it)",
            ))?;
            let old: Vec<EndpointHandle> = e.rails.iter().map(|x| x.handle).collect();
            (peer, old, e.rails.first().map(|x| x.peer_qpn))
        };
        if self.draining.load(Ordering::Acquire) {
            return Err(EngineError::SegmentClosed(id));
        }
        for h in old {
            if self.is_active(h)
                && self
                    .endpoints
                    .retire(h, RetireReason::Shutdown, self.now())
                    .is_ok()
            {
                self.retired.fetch_add(1, Ordering::Relaxed);
            }
        }
        let hs = crate::handshake::Handshake::connect(peer, self.cfg.handshake_timeout)?;
        // The peer retires its side of the old connection (named by its
        // rail-0 QP number) once the new one is up.
        let (new, _) = self.establish(hs, super::Side::Initiator, replaces)?;
        // The new generations first, then the endpoints become visible: no
        // post on a new endpoint is admitted on an old generation.
        for x in &new {
            let _ = self.gate.new_generation(x.route);
            self.fault
                .trace(&self.gate, super::fault::TraceEvent::NewGeneration(x.route));
        }
        let generation = new.first().map_or(0, |x| x.handle.generation);
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let e = segs.get_mut(seg).ok_or(EngineError::NoSuchSegment(id))?;
        e.rails = new;
        e.reconnects += 1;
        e.closed = false;
        Ok(generation)
    }
}

impl Engine {
    /// Replaces the endpoints of `seg` (a segment this engine opened, one
    /// endpoint per rail) with new ones: the old endpoints are retired if
    /// still active (their posted work drains or is flushed; late
    /// completions settle accounting only), the handshake runs again
    /// (fresh rkeys and addresses), and each rail's route moves to a new
    /// generation. Slices waiting to retry on an old endpoint move to its
    /// rail's new one. Returns rail 0's new endpoint generation.
    ///
    /// Whether a route admits posts right away is the controller's call:
    /// a QUARANTINED route avoids them until its cooldown moves it to
    /// PROBING, and a successful probe makes it HEALTHY.
    pub fn reconnect_segment(&self, seg: SegmentId) -> Result<u32, EngineError> {
        self.shared.reconnect(seg.0 as usize)
    }

    /// The connection state of `seg`'s first rail (the only one with a
    /// single device).
    pub fn segment_info(&self, seg: SegmentId) -> Result<SegmentInfo, EngineError> {
        self.segment_rail_info(seg, 0)
    }

    /// The connection state of `seg`'s rail `rail` (local device `rail`).
    pub fn segment_rail_info(&self, seg: SegmentId, rail: u16) -> Result<SegmentInfo, EngineError> {
        let sh = &*self.shared;
        let segs = sh.segments.read().unwrap_or_else(|e| e.into_inner());
        let e = segs
            .get(seg.0 as usize)
            .ok_or(EngineError::NoSuchSegment(seg))?;
        let x = e
            .rails
            .iter()
            .find(|x| x.dev == rail)
            .ok_or(EngineError::NoSuchSegment(seg))?;
        Ok(SegmentInfo {
            device: x.dev,
            rails: e.rails.len() as u16,
            endpoint: x.handle,
            active: sh.is_active(x.handle),
            reconnecting: e.reconnecting,
            peer: e.peer,
            route: x.route,
            reconnects: e.reconnects,
        })
    }

    /// A snapshot of the CC route of `seg`'s first rail (health,
    /// generation, errors, window, in-flight bytes), or `None` without a
    /// controller. Slow path; never touches verbs.
    pub fn route_snapshot(&self, seg: SegmentId) -> Result<Option<DomainSnapshot>, EngineError> {
        let route = self.segment_info(seg)?.route;
        Ok(self.shared.gate.route_snapshot(route))
    }

    /// A snapshot of the CC route of `seg`'s rail `rail`, or `None`
    /// without a controller.
    pub fn rail_route_snapshot(
        &self,
        seg: SegmentId,
        rail: u16,
    ) -> Result<Option<DomainSnapshot>, EngineError> {
        let route = self.segment_rail_info(seg, rail)?.route;
        Ok(self.shared.gate.route_snapshot(route))
    }

    /// A snapshot of local device 0's CC domain, or `None` without a
    /// controller.
    pub fn device_snapshot(&self) -> Option<DomainSnapshot> {
        self.device_snapshot_of(0)
    }

    /// A snapshot of local device `device`'s CC domain, or `None` without
    /// a controller (or no such device).
    pub fn device_snapshot_of(&self, device: u16) -> Option<DomainSnapshot> {
        self.shared.gate.device_snapshot(device)
    }

    /// The controller's counters (stale feedback, illegal transitions, ...),
    /// or `None` without a controller.
    pub fn cc_stats(&self) -> Option<CcStats> {
        Some(self.shared.gate.cc_stats())
    }
}
