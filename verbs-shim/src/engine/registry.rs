//! The engine's registry of connections ([`Registry`]): every segment
//! (its rails, each an endpoint on a local device towards the peer's NIC
//! of the same index), which endpoint owns which QP number, and which CC
//! route domain each (local device, peer NIC) pair got. The list of
//! segments is append-only: a segment id is never reused.

use super::error::EngineError;
use super::types::SegmentId;
use crate::wire::{PeerDescriptor, SegmentDescriptor};
use railyard_core::endpoint::EndpointHandle;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LockResult, Mutex, RwLock, RwLockReadGuard};

/// A CC route domain's key: (local device, peer NIC GID, peer NIC LID).
type RouteKey = (u16, [u8; 16], u16);

/// One rail of a segment: local device `dev` ↔ the peer's NIC `dev`.
pub(crate) struct RailEntry {
    pub(crate) dev: u16,
    pub(crate) handle: EndpointHandle,
    /// The peer's regions with the rkeys of its NIC `dev`.
    pub(crate) remote: Vec<SegmentDescriptor>,
    /// Shard of each QP.
    pub(crate) shards: Vec<u16>,
    /// QP numbers (scripted async events name one; the async-event path
    /// itself looks QPs up by number: [`Registry::endpoint_of_qpn`]).
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub(crate) qpns: Vec<u32>,
    /// The peer's first QP number on this rail (a reconnect names the
    /// connection it replaces by it: [`PeerDescriptor::replaces`]).
    pub(crate) peer_qpn: u32,
    /// That QP's initial PSN and the peer NIC's GID: with `peer_qpn`, what
    /// a replayed descriptor repeats ([`Registry::is_replay`]).
    pub(crate) peer_psn: u32,
    pub(crate) peer_gid: [u8; 16],
    /// CC route domain (local device × the peer's NIC).
    pub(crate) route: u32,
}

pub(crate) struct SegmentEntry {
    /// Rail `i` connects local device `i` to peer NIC `i`; there are
    /// `min(local devices, peer NICs)` of them.
    pub(crate) rails: Vec<RailEntry>,
    /// The peer's handshake address, for segments this engine opened
    /// (those it can reconnect).
    pub(crate) peer: Option<SocketAddr>,
    /// A reconnect is in progress (retries wait for it).
    pub(crate) reconnecting: bool,
    /// Reconnects that replaced the endpoints.
    pub(crate) reconnects: u32,
    /// Closed by its owner ([`Engine::close_segment`](super::Engine::close_segment))
    /// and not reconnected since: retries failing on it are teardown, not
    /// a path failure.
    pub(crate) closed: bool,
    /// Its endpoints were evicted from the endpoint store (RFC 3136
    /// `StoreEviction`) to make room for another connection: the next
    /// transfer to it reconnects it.
    pub(crate) evicted: bool,
    /// The reconnect after an eviction failed: retries fail
    /// (`NO_USABLE_PATH`) instead of reconnecting in a loop; the next
    /// submit to the segment tries once more.
    pub(crate) evict_reconnect_failed: bool,
    /// When a transfer was last submitted to it (engine clock, ns): the
    /// store evicts the least recently used idle segment first.
    pub(crate) last_used: AtomicU64,
}

impl SegmentEntry {
    /// Notes a submit to the segment at `now` (a relaxed store: an
    /// eviction order, not a synchronisation).
    pub(crate) fn touch(&self, now: u64) {
        self.last_used.store(now, Ordering::Relaxed);
    }
}

/// A segment's connection state, for one of its rails
/// ([`Engine::segment_info`](super::Engine::segment_info), [`Engine::segment_rail_info`](super::Engine::segment_rail_info)).
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
    /// Whether the endpoint store evicted the segment's endpoints (idle,
    /// least recently used, to make room for another connection); the
    /// next transfer to it reconnects it.
    pub evicted: bool,
}

/// Whether `peer`'s rail-0 QP (GID, QP number, initial PSN) is among
/// `known`, the peer sides of connections already made.
fn repeats(known: impl IntoIterator<Item = ([u8; 16], u32, u32)>, peer: &PeerDescriptor) -> bool {
    let Some((nic, qp)) = peer.nics.first().and_then(|n| Some((n, n.qps.first()?))) else {
        return false;
    };
    known.into_iter().any(|k| k == (nic.gid, qp.qpn, qp.psn))
}

/// The engine's segments, QP numbers and route domains (see the module
/// docs).
#[derive(Default)]
pub(crate) struct Registry {
    segments: RwLock<Vec<SegmentEntry>>,
    /// (device, QP number) → endpoint (QP numbers are per device).
    qpn_map: RwLock<HashMap<(u16, u32), EndpointHandle>>,
    /// CC route index per (local device, peer NIC GID, LID); at most
    /// `max_endpoints` per device.
    routes: Mutex<HashMap<RouteKey, u32>>,
}

impl Registry {
    /// The segments, read-locked (submit's validation, a retry's route, a
    /// rail move: the caller decides what a poisoned lock means).
    pub(crate) fn read_segments(&self) -> LockResult<RwLockReadGuard<'_, Vec<SegmentEntry>>> {
        self.segments.read()
    }

    /// Every live rail endpoint with its device, route and QP shards.
    pub(crate) fn rail_endpoints(&self) -> Vec<(u16, EndpointHandle, u32, Vec<u16>)> {
        self.segments
            .read()
            .map(|s| {
                s.iter()
                    .flat_map(|e| &e.rails)
                    .map(|r| (r.dev, r.handle, r.route, r.shards.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The CC route index of the peer NIC `(gid, lid)` seen from local
    /// device `dev`, assigned on first use: `dev * max_endpoints + k`, the
    /// block layout of [`CcGate::with_devices`](super::CcGate::with_devices).
    pub(crate) fn route_for(
        &self,
        dev: u16,
        gid: [u8; 16],
        lid: u16,
        max_endpoints: u32,
    ) -> Result<u32, EngineError> {
        let mut m = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&r) = m.get(&(dev, gid, lid)) {
            return Ok(r);
        }
        let n = m.keys().filter(|k| k.0 == dev).count() as u32;
        if n >= max_endpoints {
            return Err(EngineError::Core(
                "a CC route domain: more distinct peer NICs than max_endpoints",
            ));
        }
        let r = u32::from(dev) * max_endpoints + n;
        m.insert((dev, gid, lid), r);
        Ok(r)
    }

    /// The routes assigned so far, with their devices, by route index.
    pub(crate) fn assigned_routes(&self) -> Vec<(u32, u16)> {
        let m = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(u32, u16)> = m.iter().map(|(k, &r)| (r, k.0)).collect();
        v.sort_unstable();
        v
    }

    /// Records a new segment over `rails` (`peer`: the address this engine
    /// dialed, which it can reconnect).
    pub(crate) fn record(
        &self,
        rails: Vec<RailEntry>,
        peer: Option<SocketAddr>,
        now: u64,
    ) -> SegmentId {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        segs.push(SegmentEntry {
            rails,
            peer,
            reconnecting: false,
            reconnects: 0,
            closed: false,
            evicted: false,
            evict_reconnect_failed: false,
            last_used: AtomicU64::new(now),
        });
        SegmentId(segs.len() as u32 - 1)
    }

    /// A replayed descriptor: its rail-0 QP (GID, QP number and initial
    /// PSN) is the peer side of a connection this engine already made. A
    /// real peer's new connection, a reconnect included, always brings new
    /// QPs (and a fresh random PSN, so even a QP number the kernel reused
    /// after a peer restart does not match), so only a copy of an old
    /// descriptor can. Checked against every segment ever recorded
    /// (closed ones too: the list is append-only).
    pub(crate) fn is_replay(&self, peer: &PeerDescriptor) -> bool {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        repeats(
            segs.iter()
                .filter_map(|e| e.rails.first())
                .map(|r| (r.peer_gid, r.peer_qpn, r.peer_psn)),
            peer,
        )
    }

    /// Records that the QPs `qpns` of device `dev` belong to endpoint `h`.
    pub(crate) fn map_qpns(&self, dev: u16, qpns: &[u32], h: EndpointHandle) {
        if let Ok(mut m) = self.qpn_map.write() {
            for &q in qpns {
                m.insert((dev, q), h);
            }
        }
    }

    /// The endpoint that owns QP number `qpn` of device `dev`, if any.
    pub(crate) fn endpoint_of_qpn(&self, dev: u16, qpn: u32) -> Option<EndpointHandle> {
        self.qpn_map
            .read()
            .ok()
            .and_then(|m| m.get(&(dev, qpn)).copied())
    }

    /// Every endpoint that still owns a QP number (not yet reclaimed).
    pub(crate) fn qp_endpoints(&self) -> Vec<EndpointHandle> {
        self.qpn_map
            .read()
            .map(|m| m.values().copied().collect())
            .unwrap_or_default()
    }

    /// Forgets the QP numbers of a reclaimed endpoint (also one a
    /// reconnect already replaced in its segment).
    pub(crate) fn forget_endpoint(&self, h: EndpointHandle) {
        if let Ok(mut m) = self.qpn_map.write() {
            m.retain(|_, v| *v != h);
        }
    }

    /// The passive side of a reconnect: the peer replaced the connection
    /// whose rail-0 endpoint here has QP number `qpn`. Marks its segment
    /// closed and returns it with its endpoints, only if that connection
    /// came from the same peer NIC (the same rail-0 route domain) as the
    /// new rails `new`; anything else is ignored (`None`).
    pub(crate) fn close_replaced(
        &self,
        qpn: u32,
        new: &[RailEntry],
    ) -> Option<(u32, Vec<EndpointHandle>)> {
        let h = self.endpoint_of_qpn(0, qpn)?;
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let (i, e) = segs.iter_mut().enumerate().find(|(_, e)| {
            e.rails
                .first()
                .is_some_and(|r| r.handle == h && new.first().is_some_and(|n| n.route == r.route))
        })?;
        e.closed = true;
        Some((i as u32, e.rails.iter().map(|r| r.handle).collect()))
    }

    /// Marks `seg` closed and returns its endpoints, one per rail, and
    /// whether the endpoint store had evicted it (its endpoints are
    /// retired already).
    pub(crate) fn close(&self, seg: SegmentId) -> Result<(Vec<EndpointHandle>, bool), EngineError> {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let e = segs
            .get_mut(seg.0 as usize)
            .ok_or(EngineError::NoSuchSegment(seg))?;
        e.closed = true;
        Ok((e.rails.iter().map(|r| r.handle).collect(), e.evicted))
    }

    /// Number of rails of `seg` (local device `i` ↔ peer NIC `i`).
    pub(crate) fn segment_rails(&self, seg: SegmentId) -> Result<usize, EngineError> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        segs.get(seg.0 as usize)
            .map(|e| e.rails.len())
            .ok_or(EngineError::NoSuchSegment(seg))
    }

    /// The regions the peer exported at handshake time.
    pub(crate) fn segment_regions(
        &self,
        seg: SegmentId,
    ) -> Result<Vec<SegmentDescriptor>, EngineError> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        segs.get(seg.0 as usize)
            .and_then(|e| e.rails.first())
            .map(|r| r.remote.clone())
            .ok_or(EngineError::NoSuchSegment(seg))
    }

    /// Every segment recorded (the list is append-only).
    pub(crate) fn segment_ids(&self) -> Vec<SegmentId> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        (0..segs.len() as u32).map(SegmentId).collect()
    }

    /// The endpoints of `seg`, one per rail (none for an unknown segment).
    pub(crate) fn endpoints_of(&self, seg: SegmentId) -> Vec<EndpointHandle> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        segs.get(seg.0 as usize)
            .map(|e| e.rails.iter().map(|r| r.handle).collect())
            .unwrap_or_default()
    }

    /// The first QP number of `seg`'s first rail (scripted async events).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn first_qpn(&self, seg: SegmentId) -> Result<u32, EngineError> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        segs.get(seg.0 as usize)
            .and_then(|e| e.rails.first())
            .and_then(|x| x.qpns.first())
            .copied()
            .ok_or(EngineError::NoSuchSegment(seg))
    }

    /// The connection state of `seg`'s rail `rail` (local device `rail`);
    /// `active` says whether an endpoint accepts posts.
    pub(crate) fn segment_info(
        &self,
        seg: SegmentId,
        rail: u16,
        active: impl Fn(EndpointHandle) -> bool,
    ) -> Result<SegmentInfo, EngineError> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
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
            active: active(x.handle),
            reconnecting: e.reconnecting,
            peer: e.peer,
            route: x.route,
            reconnects: e.reconnects,
            evicted: e.evicted,
        })
    }

    /// The segments the endpoint store may evict, least recently used
    /// first, each with when it was last used and its endpoints: open, not being reconnected, not
    /// already evicted, and opened by this engine (it can reconnect them
    /// on the next transfer). A segment a peer opened to us is the
    /// peer's to evict: one-sided traffic on it leaves no trace here, so
    /// it can never be known idle, and evicting it would break the
    /// peer's WRITEs without a word.
    pub(crate) fn eviction_candidates(&self) -> Vec<(usize, u64, Vec<EndpointHandle>)> {
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(u64, usize, Vec<EndpointHandle>)> = segs
            .iter()
            .enumerate()
            .filter(|(_, e)| {
                e.peer.is_some()
                    && !e.closed
                    && !e.reconnecting
                    && !e.evicted
                    && !e.rails.is_empty()
            })
            .map(|(i, e)| {
                let hs = e.rails.iter().map(|r| r.handle).collect();
                (e.last_used.load(Ordering::Relaxed), i, hs)
            })
            .collect();
        v.sort_unstable_by_key(|&(t, i, _)| (t, i));
        v.into_iter().map(|(t, i, hs)| (i, t, hs)).collect()
    }

    /// Marks `seg` evicted if it still is the candidate
    /// [`eviction_candidates`](Self::eviction_candidates) listed (same
    /// endpoints, still open, not reconnecting) and was not used since
    /// `seen` (ns). True if this call marked it; the caller then retires
    /// its endpoints.
    pub(crate) fn mark_evicted(&self, seg: usize, handles: &[EndpointHandle], seen: u64) -> bool {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let Some(e) = segs.get_mut(seg) else {
            return false;
        };
        let same = e.rails.iter().map(|r| r.handle).eq(handles.iter().copied());
        if !same
            || e.closed
            || e.reconnecting
            || e.evicted
            || e.last_used.load(Ordering::Relaxed) > seen
        {
            return false;
        }
        e.evicted = true;
        e.evict_reconnect_failed = false;
        true
    }

    /// Starts the reconnect of an evicted segment (marks it reconnecting)
    /// unless one is under way; `fresh` (a new submit) also tries again
    /// after a failed one. Returns whether this call started it, and
    /// whether the segment is (still) waiting for one: `(started,
    /// waiting)`.
    pub(crate) fn begin_evicted_reconnect(&self, seg: usize, fresh: bool) -> (bool, bool) {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let Some(e) = segs.get_mut(seg) else {
            return (false, false);
        };
        if !e.evicted || e.peer.is_none() || e.closed {
            return (false, false);
        }
        if e.reconnecting {
            return (false, true);
        }
        if e.evict_reconnect_failed && !fresh {
            return (false, false);
        }
        e.reconnecting = true;
        e.evict_reconnect_failed = false;
        (true, true)
    }

    /// The segment, device and route of the rail whose endpoint is `h`,
    /// looked up without waiting (`None` while the segment lock is held,
    /// or for an endpoint no rail has).
    pub(crate) fn rail_of(&self, h: EndpointHandle) -> Option<(u32, u16, u32)> {
        self.segments.try_read().ok().and_then(|segs| {
            segs.iter().enumerate().find_map(|(i, e)| {
                e.rails
                    .iter()
                    .find(|r| r.handle == h)
                    .map(|r| (i as u32, r.dev, r.route))
            })
        })
    }

    /// Marks the segment with endpoint `h` reconnecting and returns it, if
    /// this engine opened it (it knows the peer's address) and no reconnect
    /// of it is under way.
    pub(crate) fn begin_reconnect(&self, h: EndpointHandle) -> Option<usize> {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let (i, e) = segs.iter_mut().enumerate().find(|(_, e)| {
            e.rails.iter().any(|x| x.handle == h) && e.peer.is_some() && !e.reconnecting
        })?;
        e.reconnecting = true;
        Some(i)
    }

    /// Ends the reconnect [`begin_reconnect`](Self::begin_reconnect) marked.
    pub(crate) fn end_reconnect(&self, seg: usize) {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = segs.get_mut(seg) {
            e.reconnecting = false;
            // Ended without publishing: a failed reconnect.
            e.evict_reconnect_failed = e.evicted;
        }
    }

    /// What a reconnect of `seg` needs: the peer's address, the current
    /// endpoints and the peer's rail-0 QP number (the connection it
    /// replaces). Only a segment this engine opened can be reconnected.
    #[allow(clippy::type_complexity)]
    pub(crate) fn reconnect_target(
        &self,
        seg: usize,
    ) -> Result<(SocketAddr, Vec<EndpointHandle>, Option<u32>), EngineError> {
        let id = SegmentId(seg as u32);
        let segs = self.segments.read().unwrap_or_else(|e| e.into_inner());
        let e = segs.get(seg).ok_or(EngineError::NoSuchSegment(id))?;
        let peer = e.peer.ok_or(EngineError::Unsupported(
            "reconnecting a segment the peer opened (the peer reconnects it)",
        ))?;
        let old: Vec<EndpointHandle> = e.rails.iter().map(|x| x.handle).collect();
        Ok((peer, old, e.rails.first().map(|x| x.peer_qpn)))
    }

    /// Publishes a reconnect's new rails for `seg` (counted, the segment
    /// open again); `auto` also ends the reconnect mark in the same
    /// critical section.
    pub(crate) fn publish(
        &self,
        seg: usize,
        rails: Vec<RailEntry>,
        auto: bool,
    ) -> Result<(), EngineError> {
        let mut segs = self.segments.write().unwrap_or_else(|e| e.into_inner());
        let e = segs
            .get_mut(seg)
            .ok_or(EngineError::NoSuchSegment(SegmentId(seg as u32)))?;
        e.rails = rails;
        e.reconnects += 1;
        e.closed = false;
        e.evicted = false;
        e.evict_reconnect_failed = false;
        if auto {
            e.reconnecting = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EndpointDescriptor, QpEndpoint};

    #[test]
    fn a_replay_repeats_gid_qpn_and_psn_of_rail_0() {
        let nic = |gid: u8, qpn: u32, psn: u32| EndpointDescriptor {
            gid: [gid; 16],
            lid: 0,
            qps: vec![QpEndpoint { qpn, psn }, QpEndpoint { qpn: 99, psn: 1 }],
            segments: vec![],
        };
        let known = [([1u8; 16], 10, 500), ([2u8; 16], 11, 600)];
        let p = |n: EndpointDescriptor| PeerDescriptor::from(n);
        assert!(repeats(known, &p(nic(1, 10, 500))));
        assert!(repeats(known, &p(nic(2, 11, 600))));
        // A reused QP number after a peer restart has a fresh PSN.
        assert!(!repeats(known, &p(nic(1, 10, 501))));
        assert!(!repeats(known, &p(nic(1, 11, 500))));
        assert!(!repeats(known, &p(nic(3, 10, 500))));
        assert!(!repeats([], &p(nic(1, 10, 500))));
        // Only rail 0's first QP counts (a second NIC entry is not a replay).
        let two = PeerDescriptor {
            nics: vec![nic(3, 1, 1), nic(1, 10, 500)],
            replaces: None,
            credit: None,
        };
        assert!(!repeats(known, &two));
    }

    fn rail(slot: u32) -> RailEntry {
        RailEntry {
            dev: 0,
            handle: EndpointHandle {
                slot,
                generation: 1,
            },
            remote: vec![],
            shards: vec![0],
            qpns: vec![100 + slot],
            peer_qpn: 200 + slot,
            peer_psn: 0,
            peer_gid: [0; 16],
            route: 0,
        }
    }

    #[test]
    fn eviction_takes_the_least_recently_used_segment_this_engine_opened() {
        let r = Registry::default();
        let peer = Some("127.0.0.1:1".parse().unwrap());
        let a = r.record(vec![rail(0)], peer, 10).0 as usize;
        let b = r.record(vec![rail(1)], peer, 20).0 as usize;
        let passive = r.record(vec![rail(2)], None, 5).0 as usize;
        let closed = r.record(vec![rail(3)], peer, 1);
        let c = r.record(vec![rail(4)], peer, 30).0 as usize;
        r.close(closed).unwrap();
        r.read_segments().unwrap()[a].touch(40);
        let order: Vec<usize> = r.eviction_candidates().iter().map(|x| x.0).collect();
        // Least recently used first; never the peer's segment, never a closed one.
        assert_eq!(order, [b, c, a]);
        assert!(!order.contains(&passive));
        let (_, seen, hs) = r.eviction_candidates().remove(0);
        assert_eq!(seen, 20);
        // Used since the candidates were listed: not evicted.
        r.read_segments().unwrap()[b].touch(45);
        assert!(!r.mark_evicted(b, &hs, seen));
        // Other endpoints than listed (reconnected meanwhile): not evicted.
        assert!(!r.mark_evicted(b, &[rail(9).handle], 45));
        assert!(r.mark_evicted(b, &hs, 45));
        assert!(!r.mark_evicted(b, &hs, 45), "evicted once");
        assert!(
            r.segment_info(SegmentId(b as u32), 0, |_| false)
                .unwrap()
                .evicted
        );
        let order: Vec<usize> = r.eviction_candidates().iter().map(|x| x.0).collect();
        assert_eq!(order, [c, a]);
        // A segment never evicted has no evicted reconnect.
        assert_eq!(r.begin_evicted_reconnect(c, true), (false, false));
        assert_eq!(r.begin_evicted_reconnect(passive, true), (false, false));
    }

    #[test]
    fn an_evicted_segment_reconnects_once_per_submit_until_published() {
        let r = Registry::default();
        let peer = Some("127.0.0.1:1".parse().unwrap());
        let s = r.record(vec![rail(0)], peer, 10).0 as usize;
        assert!(r.mark_evicted(s, &[rail(0).handle], 10));
        assert_eq!(r.begin_evicted_reconnect(s, false), (true, true), "started");
        assert_eq!(
            r.begin_evicted_reconnect(s, true),
            (false, true),
            "under way: wait"
        );
        // The reconnect failed (ended without publishing): a queued retry
        // gets no path, a new submit tries again.
        r.end_reconnect(s);
        assert_eq!(r.begin_evicted_reconnect(s, false), (false, false));
        assert_eq!(r.begin_evicted_reconnect(s, true), (true, true));
        r.publish(s, vec![rail(5)], true).unwrap();
        let info = r.segment_info(SegmentId(s as u32), 0, |_| true).unwrap();
        assert!(!info.evicted && !info.reconnecting && info.reconnects == 1);
        assert_eq!(r.begin_evicted_reconnect(s, true), (false, false));
        // Usable again: a candidate once more.
        assert_eq!(r.eviction_candidates()[0].0, s);
    }
}
