//! The engine's threads: busy-poll workers (shared or dedicated-poller
//! model), the monitor (reclaim, forced flush, task timeouts), the
//! async-event thread and the handshake listener.
//!
//! A worker's post path, per work request, is exactly: read the slice's
//! description → the composed hot path's `Owner::post` (slice attempt,
//! endpoint generation + QP depth, rail charge, CC permit, token = wr_id;
//! any refusal gives back everything) → `ibv_post_send` of up to
//! [`MAX_POST_BATCH`] requests of one QP. On a `bad_wr` only
//! `wrs[posted..]` are released (`Owner::unposted`) and re-queued. Its
//! poll path is `ibv_poll_cq` → `Owner::complete(wr_id, status,
//! vendor_err)` (classified once, every hold released, the slice settled or
//! retried by core's one WC mapping) → task accounting or re-queue of the
//! new attempt. No pointer ever travels through a `wr_id`.

use super::{HotPath, Shared};
use crate::engine::events::{event_action, EventAction};
use crate::handshake::{serve, ListenLimits};
use crate::wire::PeerDescriptor;
use crate::{RdmaOp, RdmaWr, WorkCompletion, MAX_POST_BATCH, WC_SUCCESS};
use railyard_core::cc::PollerStatus;
use railyard_core::classify::{classify_event, FailureScope, Signal};
use railyard_core::completion::{Path, PostRequest, Refusal, SliceEffect};
use railyard_core::endpoint::{EndpointGuard, EndpointHandle, ReclaimEvent, RetireReason};
use railyard_core::evidence::{Observed, Reason};
use railyard_core::slice::{Outcome, SliceRef};
use railyard_core::token::{TokenRecord, WrId};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Empty rounds a worker spins before it starts yielding its core.
const SPIN_ROUNDS: u32 = 256;

/// Starts the workers, the monitor, the async-event thread and the
/// listener. If a thread cannot be spawned, the ones already running are
/// stopped and joined, and the OS error is returned.
pub(crate) fn spawn_all(
    sh: &Arc<Shared>,
    listener: TcpListener,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let mut v: Vec<JoinHandle<()>> = Vec::new();
    let r = (|| {
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name).spawn(f)
        };
        for w in 0..sh.counters.len() {
            let s = sh.clone();
            v.push(spawn(
                format!("railyard-w{w}"),
                Box::new(move || worker(&s, w)),
            )?);
        }
        let _ = sh
            .threads
            .set(v.iter().map(|h| h.thread().clone()).collect());
        let s = sh.clone();
        v.push(spawn(
            "railyard-monitor".into(),
            Box::new(move || monitor(&s)),
        )?);
        for d in 0..sh.devs.len() {
            let s = sh.clone();
            v.push(spawn(
                format!("railyard-async{d}"),
                Box::new(move || async_events(&s, d)),
            )?);
        }
        let s = sh.clone();
        v.push(spawn(
            "railyard-listen".into(),
            Box::new(move || listen(&s, listener)),
        )?);
        Ok(())
    })();
    match r {
        Ok(()) => Ok(v),
        Err(e) => {
            sh.stop.store(true, Ordering::Release);
            for t in v {
                let _ = t.join();
            }
            Err(e)
        }
    }
}

/// What worker `w` posts and polls. Workers come in blocks of
/// `MC_WORKERS_PER_CTX` per device: in the shared model worker `w` posts
/// and polls shard `w`; with a dedicated poller the first worker of
/// device `d`'s block polls every shard of `d` and the others post one each.
fn roles(sh: &Shared, w: usize) -> (Option<usize>, Vec<usize>) {
    match sh.cfg.worker_model {
        super::WorkerModel::Shared => (Some(w), vec![w]),
        super::WorkerModel::DedicatedPoller => match sh.post_shard(w) {
            Some(s) => (Some(s), Vec::new()),
            None => {
                let d = w / usize::from(sh.cfg.workers);
                (None, (d * sh.spd..(d + 1) * sh.spd).collect())
            }
        },
    }
}

fn worker(sh: &Shared, w: usize) {
    let (post_shard, poll_all) = roles(sh, w);
    let local = sh.endpoints.register();
    let owner = sh.owner();
    let c = &sh.counters[w];
    let mut wcs = [WorkCompletion::default(); 64];
    let mut idle = 0u32;
    while !sh.stop.load(Ordering::Acquire) {
        let mut did = 0;
        if let Some(s) = post_shard {
            did += post_round(sh, &owner, &local, s, c);
        }
        let poll: &[usize] = if sh.fault.polling_paused() {
            &[]
        } else {
            &poll_all
        };
        for &q in poll {
            did += poll_cq(sh, &owner, q, &mut wcs, c);
        }
        if !poll.is_empty() {
            // Heartbeat for the control epoch's poller-stall check.
            c.polls.fetch_add(1, Ordering::Relaxed);
        }
        if did == 0 {
            idle = idle.saturating_add(1);
            if idle <= SPIN_ROUNDS {
                std::hint::spin_loop();
            } else if has_work(sh, post_shard, poll) {
                // Work is on the wire: keep polling, but let the kernel
                // (and, on Soft-RoCE, the NIC itself) run.
                match sh.cfg.inflight_nap {
                    Some(d) if idle > 16 * SPIN_ROUNDS => std::thread::sleep(d),
                    _ => std::thread::yield_now(),
                }
            } else if let Some(d) = sh.cfg.idle_sleep {
                // Nothing queued and nothing in flight: park (Mooncake's
                // workers suspend when idle too) until a submit, a retry or
                // a post for our CQ unparks us, or `d` passes. Park tokens
                // make the check-then-park race harmless. `None` =
                // pure busy-poll.
                std::thread::park_timeout(d);
            } else {
                std::thread::yield_now();
            }
        } else {
            idle = 0;
        }
    }
}

/// Whether worker's queue or CQs have anything pending.
fn has_work(sh: &Shared, post_shard: Option<usize>, poll: &[usize]) -> bool {
    post_shard.is_some_and(|s| !sh.queues[s].is_empty())
        || poll.iter().any(|&q| sh.cqs[q].outstanding() > 0)
}

/// One posted-to-be work request, between `Owner::post` and the doorbell.
#[derive(Clone, Copy)]
struct Pending {
    wr_id: WrId,
    slice: SliceRef,
    path: Path,
    /// The memory region this post pinned (and only it is posted from).
    mem: u32,
}

/// Pops up to one queue-length of slices from `shard`'s queue and posts
/// them, chained per QP. Returns how many were handled.
fn post_round(
    sh: &Shared,
    owner: &HotPath<'_>,
    local: &railyard_core::endpoint::EndpointLocal,
    shard: usize,
    c: &super::WorkerCounters,
) -> usize {
    let q = &sh.queues[shard];
    let budget = q.len().min(4 * MAX_POST_BATCH);
    if budget == 0 {
        return 0;
    }
    let guard = local.pin();
    let mut chain: heapless::Vec<Pending, MAX_POST_BATCH> = heapless::Vec::new();
    let mut key: Option<(u64, u32)> = None;
    let mut handled = 0;
    for _ in 0..budget {
        let Some(r) = q.pop() else { break };
        handled += 1;
        if sh.draining.load(Ordering::Relaxed) {
            sh.settle(r, Outcome::Canceled);
            continue;
        }
        let m = &sh.meta[r.index as usize];
        let ep = m.ep.load(Ordering::Relaxed);
        let qp = m.qp.load(Ordering::Relaxed);
        if key != Some((ep, qp)) || chain.is_full() {
            flush_chain(sh, owner, &guard, &mut chain, c);
            key = Some((ep, qp));
        }
        let now = sh.now();
        let path = Path {
            device: m.dev.load(Ordering::Relaxed) as u16,
            qp: qp as u16,
            route: m.route.load(Ordering::Relaxed),
            endpoint: super::ep_from_word(ep),
        };
        let req = PostRequest::on(r, path, m.len.load(Ordering::Relaxed), now)
            .to_peer(m.segment.load(Ordering::Relaxed));
        // The memory pin of this post (memory.rs): held until its token
        // ends. Refused only for a stale queued reference (its slice
        // settled and its region was deregistered; the settle is then a
        // no-op): nothing to post, nothing held yet.
        let mem = m.mem.load(Ordering::Relaxed);
        if !sh.mem.pin_post(mem as usize) {
            sh.settle(r, Outcome::Failure);
            continue;
        }
        // Owned by a token from the claim on: a deadline then finds it in
        // flight (cleared if the post or the chain refuses it).
        m.posted.store(r.attempt, Ordering::Release);
        let refusal = match owner.post(req) {
            Ok(p) => {
                sh.mem.token_holds(p.wr_id, mem);
                // `chain` was flushed above if full.
                let _ = chain.push(Pending {
                    wr_id: p.wr_id,
                    slice: r,
                    path: p.path,
                    mem,
                });
                continue;
            }
            Err(e) => e,
        };
        m.posted.store(0, Ordering::Release);
        sh.mem.unpin(mem as usize, 1);
        let rec = TokenRecord {
            slice: r,
            endpoint: path.endpoint,
            bytes: req.bytes,
            route: path.route,
            peer: req.peer,
            qp: path.qp,
            device: path.device,
            ..TokenRecord::default()
        };
        match refusal {
            // Not now: the slice goes back to its queue and this round
            // stops (the window frees only when a completion is polled, so
            // popping on would only spin pop → defer → push and steal the
            // CPU the NIC — on Soft-RoCE — and the poller need). A deferral
            // is not progress: the worker's idle back-off applies.
            Refusal::Deferred { .. } => {
                c.deferrals.fetch_add(1, Ordering::Relaxed);
                if let Some(o) = owner.refusal_observation(&refusal, now) {
                    sh.note_if_current(r, || o);
                }
                sh.requeue(r);
                handled -= 1;
                break;
            }
            Refusal::Avoided { .. } => {
                c.avoids.fetch_add(1, Ordering::Relaxed);
                if let Some(o) = owner.refusal_observation(&refusal, now) {
                    sh.note_if_current(r, || o);
                }
                // Another rail if there is one; else wait for the cooldown.
                if sh.re_rail(r) {
                    c.rail_moves.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                sh.requeue(r);
                handled -= 1;
                break;
            }
            _ if refusal.is_backpressure() => {
                c.backpressure.fetch_add(1, Ordering::Relaxed);
                sh.requeue(r);
            }
            // Timed out or canceled meanwhile: nothing to do.
            Refusal::Slice(_) => {}
            // Retired or reclaimed endpoint: its rail's new endpoint, or
            // wait for the segment's reconnect, or another live rail (rail
            // failover); else NO_USABLE_PATH.
            Refusal::Endpoint { .. } => match sh.retry_route(r) {
                super::reconnect::RetryRoute::Repointed => sh.requeue(r),
                super::reconnect::RetryRoute::Moved => {
                    c.rail_moves.fetch_add(1, Ordering::Relaxed);
                }
                super::reconnect::RetryRoute::Wait => {
                    sh.requeue(r);
                    handled -= 1;
                    break;
                }
                // Retired by its owner: teardown, no new root failure; like
                // its flushes, DERIVED_FLUSH (UNKNOWN without other evidence).
                super::reconnect::RetryRoute::NoPath { teardown: true } => {
                    let mut o = sh.gate.observe(&rec, Reason::DerivedFlush, now);
                    o.scope = Observed::Value(FailureScope::Qp);
                    sh.note(r, o);
                    sh.settle(r, Outcome::Failure)
                }
                super::reconnect::RetryRoute::NoPath { teardown: false } => {
                    no_usable_path(sh, r, &rec, now);
                }
            },
            Refusal::NoUsablePath => no_usable_path(sh, r, &rec, now),
            // A bad index or a forged record: an engine bug. The slice
            // fails (never posted without its holds), and it is counted.
            Refusal::Invalid(_) | Refusal::Backpressure(_) | Refusal::Token(_) => {
                c.invalid.fetch_add(1, Ordering::Relaxed);
                sh.settle(r, Outcome::Failure);
            }
        }
    }
    flush_chain(sh, owner, &guard, &mut chain, c);
    handled
}

/// Settles slice attempt `r` failed as NO_USABLE_PATH (RFC 4162: every
/// RDMA rail unavailable; LONG_UNAVAILABLE with the path evidence).
fn no_usable_path(sh: &Shared, r: SliceRef, rec: &TokenRecord, now: u64) {
    let sig = railyard_core::classify::classify_signal(Signal::AllRailsUnavailable);
    let mut o = sh.gate.observe(rec, sig.reason, now);
    o.scope = Observed::Value(sig.scope);
    sh.note(r, o);
    sh.settle(r, Outcome::Failure)
}

/// (3) `ibv_post_send` of one QP's chain; on `bad_wr`, releases only the
/// unposted tail and re-queues its slices.
fn flush_chain(
    sh: &Shared,
    owner: &HotPath<'_>,
    guard: &EndpointGuard,
    chain: &mut heapless::Vec<Pending, MAX_POST_BATCH>,
    c: &super::WorkerCounters,
) {
    let Some(first) = chain.first().copied() else {
        return;
    };
    let h = first.path.endpoint;
    let qp_idx = usize::from(first.path.qp);
    let release_from = |from: usize, requeue: bool, chain: &[Pending]| {
        let now = sh.now();
        for p in &chain[from..] {
            if owner.unposted(p.wr_id, now).is_ok() {
                sh.mem.unpin(p.mem as usize, 1);
            }
            sh.meta[p.slice.index as usize]
                .posted
                .store(0, Ordering::Release);
            c.unposted.fetch_add(1, Ordering::Relaxed);
            if requeue {
                let shard = sh.meta[p.slice.index as usize]
                    .shard
                    .load(Ordering::Relaxed);
                let _ = sh.queues[shard as usize].push(p.slice);
            } else {
                sh.settle(p.slice, Outcome::Failure);
            }
        }
    };
    let res = match sh.endpoints.resource(h, guard) {
        Ok(r) => r,
        Err(_) => {
            release_from(0, false, chain);
            chain.clear();
            return;
        }
    };
    let Some(qp) = res.qps.get(qp_idx) else {
        release_from(0, false, chain);
        chain.clear();
        return;
    };
    let mut wrs: heapless::Vec<RdmaWr<'_>, MAX_POST_BATCH> = heapless::Vec::new();
    for p in chain.iter() {
        let m = &sh.meta[p.slice.index as usize];
        let mi = p.mem as usize;
        let dev = usize::from(p.path.device);
        // Pinned by this post (`pin_post`), so the entry is live.
        let mem = sh
            .mem
            .entry_pinned(mi)
            .and_then(|e| e.regs.get(dev))
            .map(|r| sh.fault.local(mi, dev, r));
        let remote = res
            .remote
            .get(m.region.load(Ordering::Relaxed) as usize)
            .map(|d| sh.fault.remote(h, *d));
        let (Some(mem), Some(remote)) = (mem, remote) else {
            // Cannot happen for a validated submit; fail rather than guess.
            release_from(0, false, chain);
            chain.clear();
            return;
        };
        let _ = wrs.push(RdmaWr {
            wr_id: p.wr_id,
            op: if m.op.load(Ordering::Relaxed) == 1 {
                RdmaOp::Read
            } else {
                RdmaOp::Write
            },
            local: mem,
            local_off: m.local_off.load(Ordering::Relaxed) as usize,
            len: m.len.load(Ordering::Relaxed),
            remote,
            remote_off: m.remote_off.load(Ordering::Relaxed),
            signaled: true,
        });
    }
    c.doorbells.fetch_add(1, Ordering::Relaxed);
    // SAFETY: every local region is one the engine registered, pinned by
    // its post until the token ends (completion or unposted tail), so it
    // cannot be deregistered meanwhile (`memory.rs`); at engine drop every
    // QP was moved to ERR and every token came back (or the drain timed
    // out, after which the QPs, being in ERR, no longer touch memory).
    match unsafe { qp.post_batch(&wrs) } {
        Ok(()) => {
            c.posts.fetch_add(wrs.len() as u64, Ordering::Relaxed);
            let shard = sh.meta[first.slice.index as usize]
                .shard
                .load(Ordering::Relaxed);
            sh.wake_poller(shard as usize);
            for p in chain.iter() {
                let t = sh.meta[p.slice.index as usize].task.load(Ordering::Relaxed);
                sh.tasks[t as usize].started.store(true, Ordering::Relaxed);
            }
        }
        Err(e) => {
            c.posts.fetch_add(e.posted as u64, Ordering::Relaxed);
            let shard = sh.meta[first.slice.index as usize]
                .shard
                .load(Ordering::Relaxed);
            sh.wake_poller(shard as usize);
            for p in &chain[..e.posted] {
                let t = sh.meta[p.slice.index as usize].task.load(Ordering::Relaxed);
                sh.tasks[t as usize].started.store(true, Ordering::Relaxed);
            }
            // Only the tail is ours to release. A QP that refuses outright
            // (not ENOMEM) is broken: retire its endpoint (the one API), and
            // the re-queued slices then fail at admission.
            let transient = matches!(
                e.error,
                crate::VerbsError::Os { errno, .. } if errno == libc::ENOMEM
            );
            if !transient {
                sh.retire(h, RetireReason::QpFatal);
            }
            release_from(e.posted, true, chain);
        }
    }
    chain.clear();
}

/// Polls one CQ and resolves every completion through its token.
fn poll_cq(
    sh: &Shared,
    owner: &HotPath<'_>,
    cq: usize,
    wcs: &mut [WorkCompletion],
    c: &super::WorkerCounters,
) -> usize {
    let n = match sh.cqs[cq].poll(wcs) {
        Ok(n) => n,
        Err(_) => return 0,
    };
    if n == 0 {
        return 0;
    }
    let now = sh.now();
    c.completions.fetch_add(n as u64, Ordering::Relaxed);
    for wc in &wcs[..n] {
        // The region this token pinned, read while the token is still
        // live (after `complete` its slot may belong to another post).
        let pinned = sh.mem.token_region(wc.wr_id);
        // Classified once, every hold released, the slice settled or
        // retried: all inside the composed hot path.
        let done = match owner.complete(wc.wr_id, wc.status, wc.vendor_err, now) {
            Ok(d) => d,
            Err(_) => {
                c.bad.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        if let Some(m) = pinned {
            sh.mem.unpin(m, 1);
        }
        sh.fault
            .trace(&sh.gate, super::fault::TraceEvent::Completion(wc.status));
        if wc.status != WC_SUCCESS {
            // The QP is in ERR now: retire its endpoint (one API). For a
            // flush this is a no-op unless the QP went to ERR behind the
            // engine's back (then the burst retires it exactly once).
            sh.retire(done.record.endpoint, RetireReason::CqError);
        }
        // Task evidence, for the slice's current attempt only (a stale
        // completion's slice slot may already belong to another task).
        let evidence = |sh: &Shared| match owner.completion_observation(&done, now) {
            None => sh.resolve(done.record.slice, now),
            Some(o) => sh.note(done.record.slice, o),
        };
        match done.slice {
            SliceEffect::Settled(s) => {
                evidence(sh);
                sh.settled(done.record.slice.index, s)
            }
            SliceEffect::Retry(r) => {
                c.retries.fetch_add(1, Ordering::Relaxed);
                evidence(sh);
                sh.begin_attempt(r);
                sh.requeue(r);
            }
            SliceEffect::StaleReleaseOnly => {
                c.stale.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    n
}

/// Moves the QPs of endpoint `h` to ERR (forced flush).
fn flush_endpoint(sh: &Shared, h: EndpointHandle, guard: &EndpointGuard) {
    if let Ok(res) = sh.endpoints.resource(h, guard) {
        for qp in &res.qps {
            let _ = qp.to_error_shared();
        }
    }
}

/// Moves every live endpoint's QPs to ERR (shutdown).
pub(crate) fn flush_all(sh: &Shared) {
    let local = sh.endpoints.register();
    let guard = local.pin();
    let hs: Vec<EndpointHandle> = sh
        .qpn_map
        .read()
        .map(|m| m.values().copied().collect())
        .unwrap_or_default();
    for h in hs {
        flush_endpoint(sh, h, &guard);
    }
}

/// How often the monitor runs reclaim (task timeouts: every 4th tick).
/// Reclaim and timeouts are millisecond-scale policies; a faster tick only
/// steals CPU from the workers.
const MONITOR_TICK: Duration = Duration::from_millis(5);

/// Reclaim, forced flush and task timeouts, every [`MONITOR_TICK`].
fn monitor(sh: &Shared) {
    let local = sh.endpoints.register();
    let mut tick = 0u64;
    let mut last_polls = u64::MAX;
    while !sh.stop.load(Ordering::Acquire) {
        let now = sh.now();
        // The CC control epoch: the pollers stalled if work was on a CQ and
        // no poller ran a round since the last epoch.
        let polls: u64 = sh
            .counters
            .iter()
            .map(|c| c.polls.load(Ordering::Relaxed))
            .sum();
        let outstanding = sh.cqs.iter().any(|q| q.outstanding() > 0);
        let poller = if outstanding && polls == last_polls {
            PollerStatus::Stalled
        } else {
            PollerStatus::Progressing
        };
        last_polls = polls;
        sh.gate.on_epoch(now, poller);
        sh.fault
            .trace(&sh.gate, super::fault::TraceEvent::Epoch(poller));
        {
            let guard = local.pin();
            let mut events = Vec::new();
            let _ = sh.endpoints.poll_reclaim(now, &guard, |e| events.push(e));
            for e in events {
                match e {
                    ReclaimEvent::ForceFlush { handle, .. } => {
                        sh.force_flushes.fetch_add(1, Ordering::Relaxed);
                        flush_endpoint(sh, handle, &guard);
                    }
                    ReclaimEvent::Reclaimed { handle, .. }
                    | ReclaimEvent::Abandoned { handle, .. } => {
                        sh.reclaimed.fetch_add(1, Ordering::Relaxed);
                        sh.forget_endpoint(handle);
                    }
                }
            }
        }
        if tick % 4 == 0 {
            sh.expire_tasks(now, poller);
        }
        tick += 1;
        std::thread::sleep(MONITOR_TICK);
    }
}

/// Where one async event lands (RFC 4162, async-event matrix): the
/// endpoints to retire (through the one retire API) and the controller
/// feedback, at the classified scope and no wider.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct EventTargets {
    /// Endpoints to retire.
    pub(crate) retire: Vec<EndpointHandle>,
    /// Routes that get the event's effect (route feedback).
    pub(crate) routes: Vec<u32>,
    /// The device gets the event's effect (device feedback).
    pub(crate) device: bool,
}

/// One live rail endpoint as the event mapping sees it: (device, handle,
/// route, shard of each QP).
pub(crate) type RailEp = (u16, EndpointHandle, u32, Vec<u16>);

/// Maps an event on device `dev` to its targets. `qp_ep` is the endpoint of
/// the event's QP (if it names one of ours); `cq_shard` the shard whose CQ
/// the event names (if it names one of ours); `eps` every live rail
/// endpoint.
///
/// * QP / route scope: the QP's endpoint; feedback to its route.
/// * CQ scope: every endpoint with a QP on that CQ (all of them use the
///   CQ's shard), feedback to each of their routes (immediately fatal
///   route evidence); QPs on other CQs and other devices are untouched. A
///   CQ the engine does not know (or an event without one) falls back to
///   the device's endpoints, with no controller feedback.
/// * port / device scope: every endpoint on `dev`; device feedback.
/// * `EventAction::RetireAll` of a non-failure event (GID change): every
///   endpoint on `dev`, no feedback.
pub(crate) fn event_targets(
    dev: u16,
    scope: FailureScope,
    action: EventAction,
    qp_ep: Option<EndpointHandle>,
    cq_shard: Option<usize>,
    eps: &[RailEp],
) -> EventTargets {
    let mut t = EventTargets::default();
    let on_dev = || eps.iter().filter(|e| e.0 == dev);
    match scope {
        FailureScope::Qp | FailureScope::Route => {
            if let Some(h) = qp_ep {
                if let Some(e) = eps.iter().find(|e| e.1 == h) {
                    t.routes.push(e.2);
                }
            }
        }
        FailureScope::Cq => {
            if let Some(s) = cq_shard {
                for e in on_dev().filter(|e| e.3.iter().any(|&q| usize::from(q) == s)) {
                    t.retire.push(e.1);
                    if !t.routes.contains(&e.2) {
                        t.routes.push(e.2);
                    }
                }
                return t;
            }
        }
        FailureScope::Port | FailureScope::Device => t.device = true,
        FailureScope::Operation | FailureScope::None => {}
    }
    match action {
        EventAction::Ignore => {}
        EventAction::RetireQp(_) => t.retire.extend(qp_ep),
        EventAction::RetireAll(_) => t.retire.extend(on_dev().map(|e| e.1)),
    }
    t
}

/// Reads device `dev`'s `ibv_get_async_event` (non-blocking fd + poll with
/// a timeout, so it stops within 50 ms), retires the affected endpoints
/// through the one retire API and feeds the controller, at the scope
/// [`event_targets`] gives.
fn async_events(sh: &Shared, dev: usize) {
    while !sh.stop.load(Ordering::Acquire) {
        let ev = match sh.devs[dev].ctx.next_async_event(50) {
            Ok(Some(ev)) => ev,
            Ok(None) => continue,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        handle_async_event(sh, dev, ev.event_type, ev.qp_num, ev.cq);
    }
}

/// Handles one async event of device `dev`: controller feedback and
/// retire at the classified scope ([`event_targets`]). Also the path of
/// scripted events (`Engine::fault_async_event`).
pub(crate) fn handle_async_event(
    sh: &Shared,
    dev: usize,
    event_type: u32,
    qp_num: Option<u32>,
    cq: Option<crate::verbs::CqId>,
) {
    let d16 = dev as u16;
    sh.async_events.fetch_add(1, Ordering::Relaxed);
    let qp_ep = qp_num.and_then(|q| {
        sh.qpn_map
            .read()
            .ok()
            .and_then(|m| m.get(&(d16, q)).copied())
    });
    let cq_shard =
        cq.and_then(|id| (dev * sh.spd..(dev + 1) * sh.spd).find(|&s| sh.cqs[s].id() == id));
    let k = classify_event(event_type);
    let action = event_action(event_type);
    let reason = match action {
        EventAction::RetireQp(r) | EventAction::RetireAll(r) => r,
        EventAction::Ignore => RetireReason::ContextFatal,
    };
    let t = event_targets(d16, k.scope, action, qp_ep, cq_shard, &sh.rail_endpoints());
    for &r in &t.routes {
        sh.gate.event_feedback(Some(r), k.effect);
        sh.fault.trace(
            &sh.gate,
            super::fault::TraceEvent::Feedback(Some(r), k.effect),
        );
    }
    if t.device {
        sh.gate.device_feedback(d16, k.effect);
        sh.fault
            .trace(&sh.gate, super::fault::TraceEvent::Feedback(None, k.effect));
    }
    for h in t.retire {
        sh.retire(h, reason);
    }
}

/// Accepts peers' handshakes (the passive side of `open_segment`): each
/// on its own thread, at most `max_handshakes` at once, each bounded by
/// `handshake_timeout` from accept to barrier; every connection is counted
/// in [`EngineStats::handshakes`](super::EngineStats::handshakes).
fn listen(sh: &Shared, listener: TcpListener) {
    let limits = ListenLimits {
        max_concurrent: usize::from(sh.cfg.max_handshakes),
        deadline: sh.cfg.handshake_timeout,
    };
    serve(
        &listener,
        &limits,
        &sh.stop,
        |peer: PeerDescriptor, hs| sh.handshakes.finished(&sh.accept_peer(peer, hs)),
        |r| sh.handshakes.refused(&r),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::{EVENT_CQ_ERR, EVENT_DEVICE_FATAL, EVENT_PORT_ERR, EVENT_QP_FATAL};

    fn h(slot: u32) -> EndpointHandle {
        EndpointHandle {
            slot,
            generation: 1,
        }
    }

    /// Device 0 has shards 0 and 1, device 1 shards 2 and 3. Endpoint 1
    /// (route 10) uses shards 0+1, endpoint 2 (route 11) shard 1 only,
    /// endpoint 3 (route 12) shard 0 only, endpoint 4 (route 20) is on
    /// device 1.
    fn eps() -> Vec<RailEp> {
        vec![
            (0, h(1), 10, vec![0, 1]),
            (0, h(2), 11, vec![1, 1]),
            (0, h(3), 12, vec![0, 0]),
            (1, h(4), 20, vec![2, 3]),
        ]
    }

    fn targets(ev: u32, qp: Option<EndpointHandle>, cq: Option<usize>, dev: u16) -> EventTargets {
        event_targets(
            dev,
            classify_event(ev).scope,
            event_action(ev),
            qp,
            cq,
            &eps(),
        )
    }

    #[test]
    fn cq_error_isolates_only_the_qps_on_that_cq() {
        // CQ of shard 1: endpoints 1 and 2 use it; 3 (shard 0) and 4
        // (another device) do not.
        let t = targets(EVENT_CQ_ERR, None, Some(1), 0);
        assert_eq!(t.retire, vec![h(1), h(2)]);
        assert_eq!(t.routes, vec![10, 11]);
        assert!(!t.device);
        // Fatal route evidence (RFC 4162: "immediately fatal evidence for
        // the route").
        assert_eq!(
            classify_event(EVENT_CQ_ERR).effect,
            railyard_core::classify::Effect::Quarantine
        );
        // A CQ the engine does not know: the device's endpoints, no
        // controller feedback.
        let t = targets(EVENT_CQ_ERR, None, None, 0);
        assert_eq!(t.retire, vec![h(1), h(2), h(3)]);
        assert!(t.routes.is_empty() && !t.device);
    }

    #[test]
    fn qp_port_and_device_events_keep_their_scope() {
        let t = targets(EVENT_QP_FATAL, Some(h(3)), None, 0);
        assert_eq!(t.retire, vec![h(3)]);
        assert_eq!(t.routes, vec![12]);
        assert!(!t.device);
        // A QP event for a QP the engine does not know: nothing.
        assert_eq!(
            targets(EVENT_QP_FATAL, None, None, 0),
            EventTargets::default()
        );
        // Port / device: every endpoint of that device only, device feedback.
        for ev in [EVENT_PORT_ERR, EVENT_DEVICE_FATAL] {
            let t = targets(ev, None, None, 1);
            assert_eq!(t.retire, vec![h(4)]);
            assert!(t.device && t.routes.is_empty());
        }
        // Unknown events change nothing.
        assert_eq!(targets(12345, None, None, 0), EventTargets::default());
    }
}
