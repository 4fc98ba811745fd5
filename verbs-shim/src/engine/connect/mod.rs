//! Connections: devices and their QPs, the descriptors this engine sends,
//! the handshake's two sides ([`Side`]: connect / accept, then establish:
//! INIT → RTR → RTS, barrier, one endpoint per rail), the passive retire of
//! a connection the peer replaced, and reconnect.
//!
//! Reconnect, and where a retry of a retired endpoint's slice goes, are in
//! [`reconnect`](mod@reconnect); the endpoint store's eviction of an idle
//! segment when every slot is taken in [`evict`](mod@evict).

use super::config::CreditPolicy;
use super::credit::{self, Negotiated};
use super::error::EngineError;
use super::fabric::EpResource;
use super::fault::TraceEvent;
use super::observe::log_retired;
use super::registry::RailEntry;
use super::shared::Shared;
use super::types::{ep_from_word, ep_word, SegmentId};
use crate::handshake::{Handshake, HandshakeError};
use crate::wire::{EndpointDescriptor, PeerDescriptor, QpEndpoint};
use crate::{QueuePair, RemoteQp};
use railyard_core::endpoint::{EndpointHandle, RetireReason};
use railyard_core::slice::SliceRef;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;

mod evict;
mod reconnect;
pub(crate) use reconnect::{
    reconnect, reconnect_evicted, retire, retire_after_wc, retire_all, retry_route,
};

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

/// What [`establish`] built.
pub(crate) struct Established {
    /// One per rail.
    pub(crate) rails: Vec<RailEntry>,
    /// The peer's QP number of the connection this one replaces.
    pub(crate) replaces: Option<u32>,
    /// The receiver-credit negotiation's outcome.
    pub(crate) credit: Negotiated,
    /// The handshake connection (after the barrier).
    pub(crate) hs: Handshake,
}

/// Which side of the handshake [`establish`] runs.
pub(crate) enum Side {
    /// We connected: send our descriptor first.
    Initiator,
    /// The peer connected and its descriptor is already received.
    Target(PeerDescriptor),
}

/// This engine's NIC entry for device `dev` and the QPs `qps` on it:
/// GID, QPs with their initial PSNs (PSN base returned), and every
/// region with the rkey of its registration on `dev`.
pub(crate) fn local_descriptor(
    sh: &Shared,
    dev: usize,
    qps: &[QueuePair],
) -> Result<(EndpointDescriptor, u32), EngineError> {
    let d = &sh.fabric.devs[dev];
    let gid = d.ctx.gid(d.qp_cfg.port_num, d.qp_cfg.gid_index)?;
    let lid = d.ctx.port(d.qp_cfg.port_num)?.lid;
    let psn_base = (sh.now() as u32 ^ qps.first().map(|q| q.qpn()).unwrap_or(0)) & 0xFF_FFFF;
    let segments = sh.mem.region_descriptors(dev);
    Ok((
        EndpointDescriptor {
            gid,
            lid,
            qps: qps
                .iter()
                .enumerate()
                .map(|(i, q)| QpEndpoint {
                    qpn: q.qpn(),
                    psn: (psn_base + i as u32) & 0xFF_FFFF,
                })
                .collect(),
            segments,
        },
        psn_base,
    ))
}

/// The initiator's side of the handshake, then records the segment
/// (`peer`: the address we dialed, which this engine can reconnect).
pub(crate) fn connect(
    sh: &Shared,
    hs: Handshake,
    peer: Option<SocketAddr>,
) -> Result<SegmentId, EngineError> {
    let est = establish(sh, hs, Side::Initiator, None)?;
    let seg = sh.registry.record(est.rails, peer, sh.now());
    attach_credit(sh, seg, est.credit, est.hs, None)?;
    Ok(seg)
}

/// The target's side, for a descriptor the listener already received
/// and decoded: refuses a replay ([`Registry::is_replay`](super::registry::Registry::is_replay)) before
/// anything is built, then connects and records the segment, retiring
/// the connection the peer says it replaces.
pub(crate) fn accept_peer(
    sh: &Shared,
    peer: PeerDescriptor,
    hs: Handshake,
) -> Result<(), EngineError> {
    if sh.registry.is_replay(&peer) {
        // Dropping `hs` closes the connection.
        return Err(EngineError::Handshake(HandshakeError::Replayed));
    }
    let est = establish(sh, hs, Side::Target(peer), None)?;
    let old = est
        .replaces
        .and_then(|q| retire_replaced(sh, q, &est.rails));
    let seg = sh.registry.record(est.rails, None, sh.now());
    attach_credit(sh, seg, est.credit, est.hs, old)
}

/// Both sides of the handshake: builds QPs on every device, exchanges
/// descriptors (one NIC entry per device; the initiator sends first, the
/// target has already received the initiator's: [`Side::Target`]),
/// connects the rail-matched pairs, barriers, then opens one endpoint
/// per rail in the table. The caller publishes the rails.
///
/// **Rail rule**: local device `i` connects to the peer's NIC `i`, for
/// `i < min(local devices, peer NICs)`. With different counts the extra
/// devices of the larger side carry nothing to this peer (their QPs
/// are destroyed unconnected); both sides compute the same pairs.
/// A route domain is the same for the same (device, peer NIC), so a
/// reconnect lands on the same routes.
///
/// `replaces` (a reconnect): the peer's QP number of the connection
/// this one replaces, sent to the peer ([`PeerDescriptor::replaces`]).
/// Returns the rails, what the *peer* said it replaces, the receiver
/// credit negotiation's outcome and the handshake connection (the
/// credit control channel of an `Active` segment).
///
/// Receiver credit (RFC 2849) is negotiated from the two descriptors
/// right after the exchange, before any QP is connected: a refusal
/// ([`EngineError::CreditRefused`]) drops the connection, and since
/// the target replies before it decides, both sides see the other's
/// capability and both report the refusal.
pub(crate) fn establish(
    sh: &Shared,
    hs: Handshake,
    side: Side,
    replaces: Option<u32>,
) -> Result<Established, EngineError> {
    let mut built = Vec::with_capacity(sh.fabric.devs.len());
    let mut local = PeerDescriptor {
        nics: Vec::new(),
        replaces,
        credit: sh.cfg.credit.capability(),
    };
    for d in 0..sh.fabric.devs.len() {
        let (qps, shards) = sh
            .fabric
            .new_qps(d, sh.cfg.qps_per_endpoint, sh.cfg.max_wr)?;
        let (nic, psn_base) = local_descriptor(sh, d, &qps)?;
        local.nics.push(nic);
        built.push((qps, shards, psn_base));
    }
    let (peer, mut hs) = match side {
        Side::Initiator => hs.exchange_as_initiator(&local)?,
        Side::Target(peer) => (peer, hs.reply(&local)?),
    };
    let credit = credit::negotiate(sh.cfg.credit.policy, peer.credit).inspect_err(|_| {
        if let Some(c) = &sh.credit {
            c.note_refused();
        }
    })?;
    let rails = built.len().min(peer.nics.len());
    built.truncate(rails);
    let mut connected = Vec::with_capacity(rails);
    for (d, ((mut qps, shards, psn_base), nic)) in built.into_iter().zip(&peer.nics).enumerate() {
        if nic.qps.len() != qps.len() {
            return Err(EngineError::PeerMismatch {
                what: "QPs per endpoint (MC_NUM_QP_PER_EP)",
                ours: qps.len() as u64,
                theirs: nic.qps.len() as u64,
            });
        }
        let qp_cfg = &sh.fabric.devs[d].qp_cfg;
        for (i, (qp, rq)) in qps.iter_mut().zip(&nic.qps).enumerate() {
            let remote = RemoteQp {
                qp: *rq,
                gid: nic.gid,
                lid: nic.lid,
            };
            qp.connect(qp_cfg, (psn_base + i as u32) & 0xFF_FFFF, &remote)?;
        }
        connected.push((d as u16, qps, shards, nic));
    }
    hs.barrier()?;
    let mut entry: Vec<RailEntry> = Vec::with_capacity(rails);
    for (dev, qps, shards, nic) in connected {
        // Only a peer that completed the barrier gets a CC route
        // domain (a fixed-size table): one that drops out never holds one.
        let route = match sh
            .registry
            .route_for(dev, nic.gid, nic.lid, sh.cfg.max_endpoints)
        {
            Ok(r) => r,
            Err(e) => {
                for r in &entry {
                    retire(sh, r.handle, RetireReason::Shutdown);
                }
                return Err(e);
            }
        };
        let remote = nic.segments.clone();
        let qpns: Vec<u32> = qps.iter().map(|q| q.qpn()).collect();
        // A full store evicts its least recently used idle segment.
        let handle = match evict::open_endpoint(
            sh,
            EpResource {
                qps,
                remote: remote.clone(),
            },
        ) {
            Ok(h) => h,
            Err(e) => {
                // Nothing was posted on the rails opened so far: retire
                // them (the one teardown API) and give up the segment.
                for r in &entry {
                    retire(sh, r.handle, RetireReason::Shutdown);
                }
                return Err(e);
            }
        };
        sh.registry.map_qpns(dev, &qpns, handle);
        tracing::debug!(target: "railyard::endpoint", device = dev, route,
            slot = handle.slot, generation = handle.generation, ?qpns,
            peer_qpn = nic.qps[0].qpn, "endpoint opened");
        entry.push(RailEntry {
            dev,
            handle,
            remote,
            shards,
            qpns,
            peer_qpn: nic.qps[0].qpn,
            peer_psn: nic.qps[0].psn,
            peer_gid: nic.gid,
            route,
        });
    }
    Ok(Established {
        rails: entry,
        replaces: peer.replaces,
        credit,
        hs,
    })
}

/// Hands a recorded segment's negotiation to the receiver-credit
/// plumbing: an `Active` one keeps its handshake connection as the
/// control channel (`inherit`: the segment whose connection it
/// replaces). A segment that cannot be credit-gated (no credit peer
/// slot left, `MC_RECEIVER_CREDIT_PEERS`) is closed and refused in
/// required mode and falls back to legacy dispatch in optional mode.
pub(crate) fn attach_credit(
    sh: &Shared,
    seg: SegmentId,
    neg: Negotiated,
    hs: Handshake,
    inherit: Option<u32>,
) -> Result<(), EngineError> {
    let Some(c) = &sh.credit else {
        return Ok(());
    };
    let eps = sh.registry.endpoints_of(seg);
    let stream = matches!(neg, Negotiated::Active(_)).then(|| hs.into_stream());
    if c.attach(seg.0, neg, stream, inherit, eps) {
        return Ok(());
    }
    if sh.cfg.credit.policy == CreditPolicy::Required {
        c.note_refused();
        let _ = close_segment(sh, seg);
        return Err(EngineError::CreditRefused {
            ours: "required",
            theirs: "required or optional",
            why: "no receiver-credit peer slot left (MC_RECEIVER_CREDIT_PEERS)",
        });
    }
    c.attach(seg.0, Negotiated::OptionalLegacy, None, None, Vec::new());
    Ok(())
}

/// The passive side of a reconnect: the peer replaced the connection
/// whose rail-0 endpoint here has QP number `qpn`. Its segment is
/// closed and its endpoints retired (RFC 3136 "passive-handshake
/// stale"), so repeated reconnects do not pile up stale endpoints.
/// Honoured only if that connection came from the same peer NIC (the
/// same rail-0 route domain) as the new one; anything else is ignored.
/// Returns the replaced segment's id.
pub(crate) fn retire_replaced(sh: &Shared, qpn: u32, new: &[RailEntry]) -> Option<u32> {
    let (seg, old) = sh.registry.close_replaced(qpn, new)?;
    for h in old {
        retire(sh, h, RetireReason::PassiveHandshakeStale);
    }
    Some(seg)
}

/// Moves slice attempt `r` (held by the caller: in no queue) to another
/// rail of its segment, RFC 4162's "use the existing alternate rail":
/// the best-scoring rail on another device whose endpoint is active and
/// whose device and route the gate finds usable. Rewrites the slice's
/// rail (device, endpoint, shard, route; the QP index is kept) and
/// queues it there. False, changing nothing, if there is no such rail
/// (always with one device).
pub(crate) fn re_rail(sh: &Shared, r: SliceRef) -> bool {
    if sh.fabric.devs.len() < 2 {
        return false;
    }
    let m = &sh.tables.meta[r.index as usize];
    let cur = m.dev.load(Ordering::Relaxed) as u16;
    let seg = m.segment.load(Ordering::Relaxed);
    let qp = m.qp.load(Ordering::Relaxed) as usize;
    let bytes = m.len.load(Ordering::Relaxed);
    let choice = {
        let Ok(segs) = sh.registry.read_segments() else {
            return false;
        };
        let Some(e) = segs.get(seg as usize) else {
            return false;
        };
        e.rails
            .iter()
            .filter(|x| {
                x.dev != cur
                    && matches!(sh.endpoints.state(x.handle),
                        Ok(s) if s.phase == railyard_core::endpoint::Phase::Active)
                    && sh.gate.usable(x.dev, x.route)
            })
            .filter_map(|x| {
                let score = sh
                    .rails
                    .score_of(usize::from(x.dev), Some(seg), bytes, false)?;
                Some((score, x.dev, x.handle, x.shards.get(qp).copied(), x.route))
            })
            .reduce(|a, b| if b.0.better_than(a.0) { b } else { a })
    };
    let Some((_, dev, h, Some(shard), route)) = choice else {
        return false;
    };
    m.dev.store(u32::from(dev), Ordering::Relaxed);
    m.ep.store(ep_word(h), Ordering::Relaxed);
    m.shard.store(u32::from(shard), Ordering::Relaxed);
    m.route.store(route, Ordering::Relaxed);
    sh.requeue(r);
    true
}

/// Resolves `peer`, runs the initiator's handshake and records the
/// segment with the address that answered (the one to dial again on
/// reconnect).
pub(crate) fn open_segment(
    sh: &Shared,
    peer: impl ToSocketAddrs,
) -> Result<SegmentId, EngineError> {
    let addrs: Vec<SocketAddr> = peer
        .to_socket_addrs()
        .map_err(|source| HandshakeError::Io {
            during: "resolving the peer",
            source,
        })?
        .collect();
    let r = fetch_retried_once(sh, || {
        let hs = Handshake::connect(&addrs[..], sh.cfg.handshake_timeout)?;
        // The address that answered (the one to dial again on reconnect).
        let dialed = hs.stream().peer_addr().ok().or(addrs.first().copied());
        Ok((connect(sh, hs, dialed)?, dialed))
    });
    match &r {
        Ok((seg, peer)) => tracing::info!(target: "railyard::handshake", ?peer,
            segment = seg.0, rails = sh.registry.segment_rails(*seg).unwrap_or(0),
            "segment opened"),
        Err(e) => tracing::warn!(target: "railyard::handshake", peer = ?addrs.first(),
            reason = %e, "opening a segment failed"),
    }
    r.map(|(seg, _)| seg)
}

/// Runs `attempt` (connect, fetch the peer's descriptor, establish) and,
/// if it failed in a transport error of the read-only descriptor fetch
/// ([`HandshakeError::is_descriptor_fetch_transport`]), once more on a new
/// connection, as core's classification of a read-only metadata RPC
/// failure says (RFC 4162 non-WC table: `RetryReadOnlyOnce`; the
/// congestion window is not touched). The failed attempt built nothing
/// that is kept (its QPs are destroyed with it). The second failure is
/// returned as it is. Counted in `EngineStats::fetch_retries`.
pub(crate) fn fetch_retried_once<T>(
    sh: &Shared,
    mut attempt: impl FnMut() -> Result<T, EngineError>,
) -> Result<T, EngineError> {
    use railyard_core::classify::{classify_signal, ObjectHandling, Signal};
    let first = attempt();
    match &first {
        Err(EngineError::Handshake(e))
            if e.is_descriptor_fetch_transport()
                && classify_signal(Signal::ReadOnlyRpcFailure).handling
                    == ObjectHandling::RetryReadOnlyOnce =>
        {
            sh.telemetry.fetch_retries.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target: "railyard::handshake", reason = %e,
                "fetching the peer's descriptor failed: retrying once on a new connection");
            attempt()
        }
        _ => first,
    }
}

/// Marks `seg` closed and retires its endpoints, one per rail.
pub(crate) fn close_segment(sh: &Shared, seg: SegmentId) -> Result<(), EngineError> {
    let (hs, evicted) = sh.registry.close(seg)?;
    if evicted {
        // Its endpoints were retired when the store evicted it.
        return Ok(());
    }
    let mut first_err = None;
    for h in hs {
        match sh.endpoints.retire(h, RetireReason::Shutdown, sh.now()) {
            Ok(_) => {
                sh.telemetry.retired.fetch_add(1, Ordering::Relaxed);
                log_retired(sh, h, RetireReason::Shutdown);
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    match first_err {
        Some(e) => Err(EngineError::Endpoint(e)),
        None => Ok(()),
    }
}
