//! The engine's credit plane ([`EngineCredit`]): the receiver's allocator,
//! the sender's ledger and the control channels between them, and the
//! round the control thread (`control.rs`) runs ([`EngineCredit::tick`]). The negotiation and
//! the public metrics types are in the parent module, the configuration in
//! `config.rs`.

use super::*;

/// One frame buffer.
type Frame = heapless::Vec<u8, { wire::MAX_MESSAGE_LEN }>;

/// A credit control channel: one segment's handshake connection.
struct Chan {
    stream: TcpStream,
    /// Our segment id (the sender ledger's peer index).
    seg: u32,
    /// The allocator's peer index for the sender on the other end.
    rx_peer: u32,
    rx_epoch: u64,
    /// The connection's endpoints (one per rail).
    eps: Vec<EndpointHandle>,
    /// Sender side: the receiver session bound on this channel.
    bound: Option<SessionId>,
    inbuf: Vec<u8>,
    /// Bytes of frames being written.
    out: Vec<u8>,
    /// Coalesced latest update / usage to send.
    pending_update: Option<Frame>,
    pending_usage: Option<Frame>,
    /// Fault hook: held-back / delayed updates.
    held: Vec<(u64, Frame)>,
    last_refresh_ns: u64,
    last_usage: [u64; RESOURCES],
    last_usage_ns: u64,
    last_update_ns: Option<u64>,
    dead: bool,
}

/// A receiver peer index whose old epoch waits for its endpoints to drain.
struct Fencing {
    rx_peer: u32,
    epoch: u64,
    /// The old connection's endpoints.
    eps: Vec<EndpointHandle>,
    /// When they were first seen stopped (0 = still active).
    stopped_ns: u64,
}

struct Inner {
    ctl: SenderControl,
    alloc: ReceiverAllocator,
    chans: Vec<Chan>,
    /// Segment → the allocator peer index of the sender on it.
    rx_peer_of_seg: HashMap<u32, u32>,
    next_rx_peer: u32,
    fencing: Vec<Fencing>,
    negotiated: HashMap<u32, Negotiated>,
    faults: CreditFaults,
}

/// Per credit peer counters the hot path updates (no lock).
#[derive(Default)]
pub(super) struct PeerAtomics {
    pub(super) gated: AtomicBool,
    pub(super) stalls: AtomicU64,
    pub(super) stall_ns: AtomicU64,
    pub(super) last_stall_ns: AtomicU64,
}

/// The engine's credit plumbing (one per engine; `None` in `Shared` when
/// the policy is off).
pub(crate) struct EngineCredit {
    pub(crate) cfg: CreditConfig,
    pub(crate) ledger: SenderLedger,
    session: SessionId,
    pub(super) peers: Box<[PeerAtomics]>,
    inner: Mutex<Inner>,
    legacy: AtomicU64,
    refused: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
    malformed: AtomicU64,
    lost: AtomicU64,
    fenced: AtomicU64,
    consumed: AtomicU64,
}

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn encode(msg: &Message) -> Option<Frame> {
    let mut f = Frame::new();
    f.resize_default(wire::MAX_MESSAGE_LEN).ok()?;
    let n = wire::encode(msg, &mut f).ok()?;
    f.truncate(n);
    Some(f)
}

/// A fresh receiver session id: the wall clock orders incarnations (a
/// restarted engine gets a larger one), a random nonce tells engines apart.
fn new_session() -> SessionId {
    use std::hash::{BuildHasher, Hasher};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        .max(1);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now);
    SessionId::new(now, h.finish() | 1)
}

impl EngineCredit {
    /// The plumbing for `cfg`, or `None` with credit off.
    pub(crate) fn new(cfg: CreditConfig) -> Result<Option<Self>, EngineError> {
        if cfg.policy == CreditPolicy::Off {
            return Ok(None);
        }
        cfg.validate()?;
        let (ledger, ctl) = SenderLedger::new(LedgerConfig {
            max_peers: cfg.peers,
            max_classes: 1,
            window: [u64::from(u32::MAX), MAX_SLOTS, 0, MAX_SLOTS],
        })
        .map_err(|_| EngineError::Core("the receiver-credit sender ledger"))?;
        let session = new_session();
        let alloc = ReceiverAllocator::new(AllocatorConfig::new(
            session,
            cfg.peers,
            1,
            [cfg.bytes, cfg.requests, 0, cfg.consumers],
        ))
        .map_err(|_| EngineError::Core("the receiver-credit allocator"))?;
        Ok(Some(Self {
            cfg,
            ledger,
            session,
            peers: (0..cfg.peers).map(|_| PeerAtomics::default()).collect(),
            inner: Mutex::new(Inner {
                ctl,
                alloc,
                chans: Vec::new(),
                rx_peer_of_seg: HashMap::new(),
                next_rx_peer: 0,
                fencing: Vec::new(),
                negotiated: HashMap::new(),
                faults: CreditFaults::default(),
            }),
            legacy: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            consumed: AtomicU64::new(0),
        }))
    }

    /// Counts a negotiation refusal.
    pub(crate) fn note_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The hot path's demand for a slice of `bytes` to segment `seg`, if
    /// WRITEs to it are credit-gated. Lock-free.
    #[inline]
    pub(crate) fn demand(
        &self,
        seg: u32,
        bytes: u32,
    ) -> Option<railyard_core::completion::CreditDemand> {
        let p = self.peers.get(seg as usize)?;
        if !p.gated.load(Ordering::Acquire) {
            return None;
        }
        let entry: EntryId = self.ledger.entry(seg, 0).ok()?;
        Some(railyard_core::completion::CreditDemand {
            entry,
            charge: Charge::direct_write(bytes),
        })
    }

    /// A WRITE to `peer` was refused for credit at `now` (ns): counts the
    /// stall and extends its span. Lock-free.
    pub(crate) fn stalled(&self, peer: u32, now: u64) {
        let Some(p) = self.peers.get(peer as usize) else {
            return;
        };
        p.stalls.fetch_add(1, Ordering::Relaxed);
        let last = p.last_stall_ns.swap(now, Ordering::Relaxed);
        let gap = now.saturating_sub(last);
        // Back-to-back refusals (within two refresh periods) are one stall.
        if last != 0 && gap <= 2 * self.cfg.refresh.as_nanos() as u64 {
            p.stall_ns.fetch_add(gap, Ordering::Relaxed);
        }
    }

    /// The typed backpressure a stalled WRITE's task shows: the refusal's
    /// info with the retry hint (the next refresh).
    pub(crate) fn backpressure(&self, mut b: BackpressureInfo) -> BackpressureInfo {
        b.retry_after_us = self.cfg.refresh.as_micros() as u64;
        b.fallback_allowed = false;
        b
    }

    /// Records the outcome of `seg`'s negotiation and, for an `Active`
    /// one, turns its handshake connection into the control channel and
    /// opens the receiver side (`inherit`: the segment whose connection
    /// this one replaces, whose receiver peer index it keeps). Returns
    /// false if the segment cannot be credit-gated (no peer index left):
    /// the caller refuses it in required mode.
    pub(crate) fn attach(
        &self,
        seg: u32,
        neg: Negotiated,
        stream: Option<TcpStream>,
        inherit: Option<u32>,
        eps: Vec<EndpointHandle>,
    ) -> bool {
        let mut g = lock(&self.inner);
        let inner = &mut *g;
        inner.negotiated.insert(seg, neg);
        if neg == Negotiated::OptionalLegacy {
            self.legacy.fetch_add(1, Ordering::Relaxed);
            inner.ctl.note_legacy_fallback();
        }
        let (Negotiated::Active(_), Some(stream)) = (neg, stream) else {
            if let Some(p) = self.peers.get(seg as usize) {
                p.gated.store(false, Ordering::Release);
            }
            return true;
        };
        // Our own reconnect keeps the segment; the peer's names the one
        // it replaces: either way the sender keeps its receiver peer index.
        let prior = inner.rx_peer_of_seg.get(&inherit.unwrap_or(seg)).copied();
        let rx_peer = match prior {
            Some(p) => Some(p),
            None if inner.next_rx_peer < self.cfg.peers => {
                inner.next_rx_peer += 1;
                Some(inner.next_rx_peer - 1)
            }
            None => None,
        };
        let (Some(rx_peer), Some(pa)) = (rx_peer, self.peers.get(seg as usize)) else {
            return false;
        };
        if stream.set_nonblocking(true).is_err() {
            return false;
        }
        let _ = stream.set_nodelay(true);
        // A replaced connection of this segment (our reconnect) or of the
        // inherited one (the peer's) ends here; its receiver epoch fences
        // (`open` moves its outstanding grants to fencing).
        let old_epoch = inner.alloc.epoch(rx_peer).filter(|&e| e > 0);
        let mut old_eps = Vec::new();
        inner.chans.retain_mut(|c| {
            let replaced = c.seg == seg || Some(c.seg) == inherit;
            if replaced {
                old_eps.append(&mut c.eps);
            }
            !replaced
        });
        let Ok(epoch) = inner.alloc.open(rx_peer) else {
            return false;
        };
        if let Some(old) = old_epoch {
            inner.fencing.push(Fencing {
                rx_peer,
                epoch: old,
                eps: old_eps,
                stopped_ns: 0,
            });
        }
        inner.rx_peer_of_seg.insert(seg, rx_peer);
        inner.chans.push(Chan {
            stream,
            seg,
            rx_peer,
            rx_epoch: epoch,
            eps,
            bound: None,
            inbuf: Vec::with_capacity(wire::MAX_MESSAGE_LEN),
            out: Vec::with_capacity(4 * wire::MAX_MESSAGE_LEN),
            pending_update: None,
            pending_usage: None,
            held: Vec::new(),
            last_refresh_ns: 0,
            last_usage: [0; RESOURCES],
            last_usage_ns: 0,
            last_update_ns: None,
            dead: false,
        });
        pa.gated.store(true, Ordering::Release);
        true
    }

    /// Returns `n` consumer slots of the sender on segment `seg` (the
    /// application used what it wrote); the next refresh grants them again.
    pub(crate) fn consume(&self, seg: u32, n: u64) -> Result<(), EngineError> {
        let mut g = lock(&self.inner);
        let Some(&rx_peer) = g.rx_peer_of_seg.get(&seg) else {
            return Err(EngineError::CreditNotActive(seg));
        };
        let can = g
            .alloc
            .consumable(rx_peer, 0)
            .map_or(0, |c| c.get(Resource::ConsumerSlots));
        if n == 0 || n > can {
            return Err(EngineError::CreditConsume {
                segment: seg,
                slots: n,
                why: "more consumer slots than the sender reported written and not yet consumed (or zero)",
            });
        }
        g.alloc
            .consumed(rx_peer, 0, &Charge::ZERO.with(Resource::ConsumerSlots, n))
            .map_err(|e| EngineError::CreditConsume {
                segment: seg,
                slots: n,
                why: alloc_why(e),
            })?;
        self.consumed.fetch_add(n, Ordering::Relaxed);
        // Publish at the next tick, not the next refresh.
        if let Some(c) = g.chans.iter_mut().find(|c| c.rx_peer == rx_peer) {
            c.last_refresh_ns = 0;
        }
        Ok(())
    }

    /// Installs control-frame faults (tests).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn set_faults(&self, f: CreditFaults) {
        lock(&self.inner).faults = f;
    }

    /// One round of the control thread at `now`: read and apply frames, top
    /// up and refresh grants (at least one `slice_size` of bytes per peer),
    /// report usage, expire stale links, complete fences (an old epoch's
    /// grants are freed once none of its endpoints is `active` any more
    /// and `drain` ns passed since), write what is pending. Never blocks
    /// (non-blocking sockets). Returns the segments whose credit changed
    /// (a grant arrived, a link was lost), for the caller to wake the
    /// slices parked on them after this round's lock is released.
    pub(crate) fn tick(
        &self,
        now: u64,
        slice_size: u32,
        drain: u64,
        active: impl Fn(&[EndpointHandle]) -> bool,
    ) -> Vec<u32> {
        let refresh = self.cfg.refresh.as_nanos() as u64;
        let mut g = lock(&self.inner);
        let inner = &mut *g;
        let mut lost = Vec::new();
        let mut changed = Vec::new();
        for i in 0..inner.chans.len() {
            self.read_chan(inner, i, now, &mut changed);
        }
        // Receiver: top up every open peer to its share, or heartbeat.
        let open = inner.chans.iter().filter(|c| !c.dead).count().max(1) as u64;
        let cap = inner.alloc.capacity();
        let slice = u64::from(slice_size);
        let target = [
            (cap[0] / open).max(slice.min(cap[0])),
            (cap[1] / open).max(1),
            0,
            (cap[3] / open).max(1),
        ];
        let faults = inner.faults;
        for c in inner.chans.iter_mut().filter(|c| !c.dead) {
            if now.saturating_sub(c.last_refresh_ns) < refresh && c.last_refresh_ns != 0 {
                continue;
            }
            c.last_refresh_ns = now.max(1);
            let out = inner
                .alloc
                .outstanding(c.rx_peer, 0)
                .unwrap_or(Charge::ZERO);
            let free = inner.alloc.free();
            let mut add = Charge::ZERO;
            for k in [0usize, 1, 3] {
                add.0[k] = target[k].saturating_sub(out.0[k]).min(free[k]);
            }
            let u = if add != Charge::ZERO {
                inner.alloc.grant(c.rx_peer, 0, &add)
            } else {
                inner.alloc.heartbeat(c.rx_peer, 0)
            };
            // Nothing ever granted and nothing free: an empty first grant
            // is impossible; the sender stays Negotiating until capacity
            // frees up.
            let Ok(mut u) = u else { continue };
            u.freshness_ttl_ms = self.cfg.ttl.as_millis() as u32;
            if faults.silence {
                continue;
            }
            let Some(f) = encode(&Message::CreditUpdate(CreditUpdateV1::from_update(&u))) else {
                continue;
            };
            if faults.reorder || !faults.delay.is_zero() {
                c.held.push((now + faults.delay.as_nanos() as u64, f));
            } else {
                if faults.duplicate {
                    c.out.extend_from_slice(&f);
                }
                c.pending_update = Some(f);
            }
        }
        // Fault hook: release delayed updates; reorder = newest first.
        for c in inner.chans.iter_mut() {
            if c.held.is_empty() {
                continue;
            }
            let ready = if faults.reorder {
                c.held.len() >= 2 || c.held.iter().all(|h| h.0 <= now)
            } else {
                c.held.iter().any(|h| h.0 <= now)
            };
            if !ready {
                continue;
            }
            let mut h = std::mem::take(&mut c.held);
            if faults.reorder {
                h.reverse();
            }
            let mut keep = Vec::new();
            for (at, f) in h {
                if at <= now || faults.reorder {
                    c.out.extend_from_slice(&f);
                    if faults.duplicate {
                        c.out.extend_from_slice(&f);
                    }
                    self.sent.fetch_add(1, Ordering::Relaxed);
                } else {
                    keep.push((at, f));
                }
            }
            c.held = keep;
        }
        // Sender: report usage when it moved, or every refresh.
        for c in inner
            .chans
            .iter_mut()
            .filter(|c| !c.dead && c.bound.is_some())
        {
            let Ok(m) = inner.ctl.entry_metrics(&self.ledger, c.seg, 0) else {
                continue;
            };
            let moved = m.released != c.last_usage;
            if !moved && now.saturating_sub(c.last_usage_ns) < refresh {
                continue;
            }
            let Ok(u) = inner.ctl.usage(&self.ledger, c.seg, 0, Charge::ZERO) else {
                continue;
            };
            c.last_usage = m.released;
            c.last_usage_ns = now;
            if let Some(f) = encode(&Message::CreditUsage(CreditUsageV1::from_usage(&u))) {
                c.pending_usage = Some(f);
            }
        }
        let _ = inner.ctl.expire(&self.ledger, now);
        // Write; a channel whose socket failed is lost.
        for (i, c) in inner.chans.iter_mut().enumerate() {
            for f in [c.pending_update.take(), c.pending_usage.take()]
                .into_iter()
                .flatten()
            {
                c.out.extend_from_slice(&f);
                self.sent.fetch_add(1, Ordering::Relaxed);
            }
            while !c.out.is_empty() && !c.dead {
                match c.stream.write(&c.out) {
                    Ok(0) => c.dead = true,
                    Ok(n) => {
                        c.out.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => c.dead = true,
                }
            }
            // Bounded: a peer that does not read gets at most a few
            // frames buffered, then its channel is dropped.
            if c.out.len() > 16 * wire::MAX_MESSAGE_LEN {
                c.dead = true;
            }
            if c.dead {
                lost.push(i);
            }
        }
        for &i in lost.iter().rev() {
            let c = inner.chans.remove(i);
            self.lost.fetch_add(1, Ordering::Relaxed);
            let _ = inner.ctl.mark_stale(&self.ledger, c.seg);
            if inner.alloc.close(c.rx_peer, c.rx_epoch).is_ok() {
                inner.fencing.push(Fencing {
                    rx_peer: c.rx_peer,
                    epoch: c.rx_epoch,
                    eps: c.eps,
                    stopped_ns: 0,
                });
            }
            changed.push(c.seg);
        }
        // Fences: old-epoch grants become free once the old endpoints
        // stopped and then had the engine's whole drain bound.
        let mut done = 0;
        let alloc = &mut inner.alloc;
        inner.fencing.retain_mut(|f| {
            if f.stopped_ns == 0 {
                if active(&f.eps) {
                    return true;
                }
                f.stopped_ns = now.max(1);
            }
            if now.saturating_sub(f.stopped_ns) < drain {
                return true;
            }
            if alloc.fence_complete(f.rx_peer, f.epoch).is_ok() {
                done += 1;
            }
            false
        });
        self.fenced.fetch_add(done, Ordering::Relaxed);
        drop(g);
        changed
    }

    /// Reads what channel `i` has and applies every whole frame.
    fn read_chan(&self, inner: &mut Inner, i: usize, now: u64, changed: &mut Vec<u32>) {
        let mut buf = [0u8; 1024];
        loop {
            let c = &mut inner.chans[i];
            if c.dead {
                return;
            }
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    c.dead = true;
                    return;
                }
                Ok(n) => c.inbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.dead = true;
                    return;
                }
            }
            // Whole frames out of the buffer before reading more.
            loop {
                let c = &mut inner.chans[i];
                if c.inbuf.len() < wire::HEADER_LEN {
                    break;
                }
                let body =
                    u32::from_le_bytes([c.inbuf[4], c.inbuf[5], c.inbuf[6], c.inbuf[7]]) as usize;
                if body > wire::MAX_MESSAGE_LEN - wire::HEADER_LEN {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                    c.dead = true;
                    return;
                }
                let len = wire::HEADER_LEN + body;
                if c.inbuf.len() < len {
                    break;
                }
                let msg = wire::decode(&c.inbuf[..len]);
                c.inbuf.drain(..len);
                self.received.fetch_add(1, Ordering::Relaxed);
                match msg {
                    Ok(m) => self.apply(inner, i, m, now, changed),
                    Err(_) => {
                        self.malformed.fetch_add(1, Ordering::Relaxed);
                        inner.chans[i].dead = true;
                        return;
                    }
                }
            }
        }
    }

    /// Applies one decoded frame from channel `i`: identity is the channel.
    fn apply(&self, inner: &mut Inner, i: usize, m: Message, now: u64, changed: &mut Vec<u32>) {
        let c = &mut inner.chans[i];
        match m {
            Message::CreditUpdate(u) => {
                let u = u.to_update();
                match c.bound {
                    None => {
                        if inner
                            .ctl
                            .bind(&self.ledger, c.seg, u.receiver_session, u.epoch)
                            .is_err()
                        {
                            // An older session/epoch than the one bound:
                            // fenced (counted stale by the ledger).
                            return;
                        }
                        c.bound = Some(u.receiver_session);
                    }
                    Some(s) if s != u.receiver_session => {
                        // Another receiver session on this connection:
                        // not the peer we negotiated with. Fail closed.
                        self.malformed.fetch_add(1, Ordering::Relaxed);
                        let _ = inner.ctl.quarantine(&self.ledger, c.seg);
                        return;
                    }
                    Some(_) => {}
                }
                if inner.ctl.apply_update(&self.ledger, c.seg, &u, now).is_ok() {
                    c.last_update_ns = Some(now);
                }
                changed.push(c.seg);
            }
            Message::CreditUsage(u) => {
                let u = u.to_usage();
                if let Ok(UsageOutcome::Applied(back)) = inner.alloc.on_usage(c.rx_peer, &u) {
                    if back != Charge::ZERO {
                        // Capacity came back: top up at this tick.
                        c.last_refresh_ns = 0;
                    }
                }
            }
            // Capability messages belong to the handshake: unexpected here.
            Message::CapabilityOffer(_) | Message::CapabilityAnswer(_) => {
                self.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The credit metrics.
    pub(crate) fn stats(&self, now: u64) -> CreditStats {
        let g = lock(&self.inner);
        let mut peers: Vec<PeerCredit> = g
            .negotiated
            .iter()
            .map(|(&seg, &neg)| {
                let chan = g.chans.iter().find(|c| c.seg == seg);
                let pa = self.peers.get(seg as usize);
                let gated = pa.is_some_and(|p| p.gated.load(Ordering::Acquire));
                let phase = if !gated {
                    LinkPhase::Ungated
                } else if g.ctl.is_active(seg) {
                    LinkPhase::Active
                } else if chan.is_some_and(|c| c.bound.is_none()) {
                    LinkPhase::Negotiating
                } else if g.ctl.metrics(&self.ledger).violations > 0 && chan.is_some() {
                    LinkPhase::Quarantined
                } else {
                    LinkPhase::Stale
                };
                let rx = g.rx_peer_of_seg.get(&seg).copied();
                PeerCredit {
                    segment: seg,
                    negotiated: Some(neg),
                    phase,
                    sender: if gated {
                        g.ctl
                            .entry_metrics(&self.ledger, seg, 0)
                            .unwrap_or_default()
                    } else {
                        EntryMetrics::default()
                    },
                    stalls: pa.map_or(0, |p| p.stalls.load(Ordering::Relaxed)),
                    stall_ns: pa.map_or(0, |p| p.stall_ns.load(Ordering::Relaxed)),
                    update_age_ms: chan
                        .and_then(|c| c.last_update_ns)
                        .map(|t| now.saturating_sub(t) / 1_000_000),
                    receiver_outstanding: rx
                        .and_then(|p| g.alloc.outstanding(p, 0).ok())
                        .map_or([0; RESOURCES], |c| c.0),
                    receiver_epoch: rx.and_then(|p| g.alloc.epoch(p)).unwrap_or(0),
                    receiver_consumable: rx
                        .and_then(|p| g.alloc.consumable(p, 0).ok())
                        .map_or(0, |c| c.get(Resource::ConsumerSlots)),
                }
            })
            .collect();
        peers.sort_by_key(|p| p.segment);
        CreditStats {
            policy: self.cfg.policy,
            session: self.session.0,
            sender: g.ctl.metrics(&self.ledger),
            receiver: g.alloc.metrics(),
            capacity: g.alloc.capacity(),
            legacy_fallbacks: self.legacy.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            frames_sent: self.sent.load(Ordering::Relaxed),
            frames_received: self.received.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            channels_lost: self.lost.load(Ordering::Relaxed),
            fences_completed: self.fenced.load(Ordering::Relaxed),
            consumed_slots: self.consumed.load(Ordering::Relaxed),
            peers,
        }
    }
}

fn alloc_why(e: railyard_core::credit::AllocError) -> &'static str {
    use railyard_core::credit::AllocError as A;
    match e {
        A::OverRelease(_) => "more consumer slots than the peer was granted and has not returned",
        A::PeerNotOpen => "the peer's credit session is closed or quarantined",
        A::Key(_) => "not a credit peer",
        _ => "refused by the receiver allocator",
    }
}
