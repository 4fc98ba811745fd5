//! The engine's busy-poll workers (shared or dedicated-poller model): the
//! post path and the poll path, nothing else (the monitor, async events
//! and the listener are `control.rs`).
//!
//! A worker's post path, per work request, is exactly: read the slice's
//! description → the composed hot path's `HotPath::post` (`hotpath.rs`:
//! memory pin, slice attempt, endpoint generation + QP depth, rail charge,
//! CC permit, token = wr_id; any refusal gives back everything) →
//! `ibv_post_send` of up to
//! [`MAX_POST_BATCH`] requests of one QP (one open chain per (endpoint, QP)
//! in a round, `chains.rs`). On a `bad_wr` only
//! `wrs[posted..]` are released (`HotPath::unposted`) and re-queued. Its
//! poll path is `ibv_poll_cq` → `HotPath::complete(wr_id, status,
//! vendor_err)` (classified once, every hold released, the memory pin
//! with them, the slice settled or retried by core's one WC mapping) →
//! where the completion lands (`completion.rs`: task accounting or re-queue
//! of the new attempt). No pointer ever travels through a `wr_id`.

use super::chains::OpenChains;
use super::completion::on_completed;
use super::config::MONITOR_TICK;
use super::connect::{re_rail, retire, retry_route, RetryRoute};
use super::hotpath::{Cqe, EngineHotPath, WorkerTokens};
use super::park::{Block, Key, Lot, Now, SliceKey, Wake};
use super::shared::Shared;
use super::telemetry::WorkerCounters;
use super::types::ep_from_word;
use crate::{RdmaOp, RdmaWr, WorkCompletion, MAX_POST_BATCH, WC_WR_FLUSH_ERR};
use railyard_core::cc::{Avoidance, DomainKind};
use railyard_core::classify::{FailureScope, Signal};
use railyard_core::completion::{Path, PostRequest, Refusal};
use railyard_core::endpoint::{EndpointError, EndpointGuard, RetireReason};
use railyard_core::evidence::{Observed, Reason};
use railyard_core::slice::{Outcome, SliceRef};
use railyard_core::token::{TokenRecord, WrId};
use std::sync::atomic::Ordering;

/// Empty rounds a worker spins before it starts yielding its core.
const SPIN_ROUNDS: u32 = 256;

/// The longest park while fault injection pauses polling: the worker
/// cannot see its CQs' work then, so nothing would unpark it when polling
/// resumes.
const PAUSED_PARK: std::time::Duration = std::time::Duration::from_millis(1);

/// Worker `w`'s loop: post its shard's queue, poll its CQs
/// ([`Topology`](super::topology::Topology) says which), spin, then yield or
/// park when idle.
pub(crate) fn worker(sh: &Shared, w: usize) {
    let post_shard = sh.fabric.topo.post_shard(w);
    let poll_all: Vec<usize> = sh.fabric.topo.poll_shards(w).collect();
    let local = sh.endpoints.register();
    let owner = sh.hot_path();
    // This thread's token cache: its posts claim from it, its polls return
    // to it (`EngineHotPath::worker_tokens`); flushed when the loop ends.
    let mut tokens = owner.worker_tokens(sh.fabric.topo.workers());
    let c = &sh.telemetry.workers[w];
    let mut wcs = [WorkCompletion::default(); 64];
    // Refused slices wait here for the event that can change the answer
    // (`park.rs`); allocated once, here.
    let mut lot = Lot::new(if post_shard.is_some() {
        sh.cfg.max_slices as usize
    } else {
        1
    });
    let mut idle = 0u32;
    while !sh.lifecycle.stop.load(Ordering::Acquire) {
        let mut did = 0;
        if let Some(s) = post_shard {
            did += post_round(sh, &owner, &mut tokens, &local, s, c, &mut lot);
        }
        let poll: &[usize] = if sh.fault.polling_paused() {
            &[]
        } else {
            &poll_all
        };
        for &q in poll {
            did += poll_cq(sh, &owner, &mut tokens, q, &mut wcs, c);
        }
        if !poll.is_empty() {
            // Heartbeat for the control epoch's poller-stall check.
            c.polls.fetch_add(1, Ordering::Relaxed);
        }
        if did == 0 {
            idle = idle.saturating_add(1);
            if idle > SPIN_ROUNDS && idle % 64 == 0 && !lot.is_empty() {
                // Idle with slices parked: drop those whose task ended
                // meanwhile (a deadline, a cancel), so a long block (a
                // cooldown) holds no stale ones and the engine reads idle.
                let dropped = lot.retain_current(|r| sh.tables.is_current(r));
                if dropped > 0 {
                    c.parked.store(lot.len() as u64, Ordering::Relaxed);
                }
            }
            // Idle: answer a starved claim's request for this cache's free
            // tokens (the slice it refused is parked on the release stamp,
            // which this moves).
            idle_tokens(&mut tokens, false, c);
            if idle <= SPIN_ROUNDS {
                std::hint::spin_loop();
            } else if has_work(sh, post_shard, poll) || !(lot.is_empty() || lot.only_timed()) {
                // Work is on the wire: keep polling, but let the kernel
                // (and, on Soft-RoCE, the NIC itself) run.
                match sh.cfg.inflight_nap {
                    Some(d) if idle > 16 * SPIN_ROUNDS => {
                        idle_tokens(&mut tokens, true, c);
                        std::thread::sleep(d)
                    }
                    _ => std::thread::yield_now(),
                }
            } else if let (false, Some(d)) = (lot.is_empty(), park_limit(sh)) {
                // A sleeping worker's cache holds no free token.
                idle_tokens(&mut tokens, true, c);
                // Only parked slices that wait for a deadline (a cooldown,
                // a credit retry time) or an unpark (a credit grant, a
                // submit): sleep until the earliest, not a poll loop.
                let now = sh.now();
                let until = lot.next_deadline().unwrap_or(now);
                let wait = std::time::Duration::from_nanos(until.saturating_sub(now));
                std::thread::park_timeout(wait.min(d));
            } else if let Some(d) = park_limit(sh) {
                // Nothing queued and nothing in flight: park (Mooncake's
                // workers suspend when idle too) until a submit, a retry or
                // a post for our CQ unparks us, or `d` passes. Park tokens
                // make the check-then-park race harmless. `None` =
                // pure busy-poll.
                idle_tokens(&mut tokens, true, c);
                std::thread::park_timeout(d);
            } else {
                std::thread::yield_now();
            }
        } else {
            idle = 0;
        }
    }
    // Shutdown: nothing parked stays open, and every cached token goes
    // back to the pool (`free == capacity` once the workers are joined).
    lot.drain(|r| sh.settle(r, Outcome::Canceled));
    c.parked.store(0, Ordering::Relaxed);
    idle_tokens(&mut tokens, true, c);
}

/// The longest an idle worker parks now: the configured idle park, at most
/// [`PAUSED_PARK`] while polling is paused.
fn park_limit(sh: &Shared) -> Option<std::time::Duration> {
    let d = sh.cfg.idle_sleep?;
    Some(if sh.fault.polling_paused() {
        d.min(PAUSED_PARK)
    } else {
        d
    })
}

/// A worker's idle round for its token cache ([`TokenCache::idle`]): with
/// `parking` returns every cached token, else answers a pending request;
/// tokens returned move the release stamp, so a slice parked on "no
/// token" is offered again.
///
/// [`TokenCache::idle`]: railyard_core::token::TokenCache::idle
#[inline]
fn idle_tokens(tokens: &mut WorkerTokens<'_>, parking: bool, c: &WorkerCounters) {
    if let Some(t) = tokens {
        if t.idle(parking) > 0 {
            // After the return (`Shared::release_stamp`).
            c.token_returns.fetch_add(1, Ordering::Release);
        }
    }
}

/// Whether worker's queue or CQs have anything pending (parked slices are
/// the caller's to judge: see [`Lot::only_timed`]).
fn has_work(sh: &Shared, post_shard: Option<usize>, poll: &[usize]) -> bool {
    post_shard.is_some_and(|s| !sh.fabric.queues[s].is_empty())
        || poll.iter().any(|&q| sh.fabric.cqs[q].outstanding() > 0)
}

/// One posted-to-be work request, between `HotPath::post` and the doorbell.
#[derive(Clone, Copy)]
struct Pending {
    wr_id: WrId,
    slice: SliceRef,
    path: Path,
    /// The memory region this post pinned (and only it is posted from).
    mem: u32,
}

/// Offers the parked slices whose block lifted, oldest first, then pops
/// up to one queue-length of slices from `shard`'s queue, and posts them,
/// chained per QP. A refused slice is parked (`park.rs`) until the event
/// that can change the answer; a slice that a live block would refuse is
/// parked without asking the hot path again. Returns how many were handled
/// (parking is not progress: the worker's idle back-off applies).
fn post_round(
    sh: &Shared,
    owner: &EngineHotPath<'_>,
    tokens: &mut WorkerTokens<'_>,
    local: &railyard_core::endpoint::EndpointLocal,
    shard: usize,
    c: &WorkerCounters,
    lot: &mut Lot,
) -> usize {
    let q = &sh.fabric.queues[shard];
    let draining = sh.lifecycle.draining.load(Ordering::Relaxed);
    let budget = q.len().min(4 * MAX_POST_BATCH);
    if budget == 0 && lot.is_empty() {
        return 0;
    }
    if draining {
        lot.drain(|r| sh.settle(r, Outcome::Canceled));
    }
    // Read before any admission of this round: a release the admissions
    // below do not see moves the stamp past this value (pollers count
    // after releasing), so a block opened with it cannot miss its wake-up.
    let stamp = sh.release_stamp();
    // One clock read per round (and one after each mid-round doorbell),
    // not one per slice: in a VM the clocksource may be an emulated device
    // (HPET: every `clock_gettime` an MMIO exit), and a round is a few
    // microseconds of work with no syscall but its doorbells. The value is
    // every post's `post_ns` (the rail selector's latency sample, measured
    // from it to the completion's poll) and the time admission checks task
    // deadlines against: read before the doorbell, as a per-slice read was,
    // and early by at most the round's CPU time since the last read — so a
    // latency sample is longer by at most that (far below a completion's
    // round trip), and a deadline that passes within the round is caught by
    // the next round or the in-flight deadline scan, as one passing just
    // after a post always was.
    let mut now = sh.now();
    let mut ready: heapless::Vec<SliceRef, { 4 * MAX_POST_BATCH }> = heapless::Vec::new();
    if !lot.is_empty() {
        let n = Now {
            now,
            stamp,
            credit: |b: usize| sh.fabric.credit_seq(b),
        };
        // Also the ready slices a previous round had no room for: with no
        // further refusal no block would lift again to take them.
        if lot.lift(&n) > 0 || lot.has_ready() {
            lot.take_ready(&mut ready);
        }
    }
    if budget == 0 && ready.is_empty() {
        c.parked.store(lot.len() as u64, Ordering::Relaxed);
        return 0;
    }
    let lot_first = ready.len();
    // Pinned for the whole round, so every open chain's endpoint resource
    // stays readable until its doorbell. An endpoint retired mid-round
    // (another worker's `bad_wr`, the monitor) stays readable too: the QP
    // depth each admitted request holds keeps it from being reclaimed
    // (short of an abandon after twice the drain timeout, seconds: then
    // `flush_chain` fails the chain, as it always did), and its QP (in ERR)
    // turns the chain's requests into flushes that core completes as such,
    // exactly as a chain posted just before the retire.
    let guard = local.pin();
    let mut chains: OpenChains<Pending, MAX_POST_BATCH> = OpenChains::new();
    let mut handled = 0;
    let mut from_lot = ready.into_iter();
    for i in 0..lot_first + budget {
        let Some(r) = from_lot.next().or_else(|| q.pop()) else {
            break;
        };
        // A slice parked before was noted then; a fresh one is noted once.
        let fresh = i >= lot_first;
        handled += 1;
        if draining {
            sh.settle(r, Outcome::Canceled);
            continue;
        }
        let m = &sh.tables.meta[r.index as usize];
        let ep = m.ep.load(Ordering::Relaxed);
        let qp = m.qp.load(Ordering::Relaxed);
        let path = Path {
            device: m.dev.load(Ordering::Relaxed) as u16,
            qp: qp as u16,
            route: m.route.load(Ordering::Relaxed),
            endpoint: ep_from_word(ep),
        };
        let peer = m.segment.load(Ordering::Relaxed);
        // Held back by a live block: parked as the slice it refused was,
        // with the same evidence, without asking the hot path again.
        // A READ never waits on a remote credit ledger (RFC 2849): it
        // matches no peer-credit block.
        let is_write = m.op.load(Ordering::Relaxed) == 0;
        let sk = SliceKey {
            route: path.route,
            device: path.device,
            peer: if is_write { peer } else { u32::MAX },
            ep,
            qp,
        };
        if let Some(b) = lot.blocking(&sk).and_then(|id| Some((id, *lot.block(id)?))) {
            let (id, blk) = b;
            if blk.avoided() && re_rail(sh, r) {
                c.rail_moves.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if lot.park(r, id) {
                c.parks.fetch_add(1, Ordering::Relaxed);
                if fresh {
                    let refusal = blk.refusal_on(path);
                    if let Some(o) = owner.refusal_observation(&refusal, now) {
                        sh.tables.note_if_current(r, || o);
                    }
                    // Its task shows the typed backpressure (credit: the
                    // peer's, counted as a stall).
                    if let Some(b) = refusal.backpressure_info(peer, 0) {
                        sh.note_backpressure(r, b, now);
                    }
                }
                handled -= 1;
                continue;
            }
        }
        // This QP's open chain, with room for this request (a full one, or
        // the fullest when every slot holds another QP, is flushed first).
        let (chain, flushed) =
            chains.room((ep, qp), |ch| flush_chain(sh, owner, tokens, &guard, ch, c));
        if flushed {
            now = sh.now();
        }
        let mut req = PostRequest::on(r, path, m.len.load(Ordering::Relaxed), now).to_peer(peer);
        // RFC 2849: a direct WRITE (op 0) to a credit-gated segment
        // reserves its full charge vector; a READ never is gated.
        if let Some(d) = sh
            .credit
            .as_ref()
            .and_then(|c| is_write.then(|| c.demand(peer, req.bytes)).flatten())
        {
            req = req.with_credit(d);
        }
        // The memory pin of this post (memory.rs): held until its token
        // ends, released with the token's other holds (`hotpath.rs`).
        // Refused only for a stale queued reference (its slice settled and
        // its region was deregistered; the settle is then a no-op): nothing
        // to post, nothing held yet.
        let mem = m.mem.load(Ordering::Relaxed);
        if !owner.pin(mem) {
            sh.settle(r, Outcome::Failure);
            continue;
        }
        // Owned by a token from the claim on: a deadline then finds it in
        // flight (cleared if the post or the chain refuses it).
        m.posted.store(r.attempt, Ordering::Release);
        let refusal = match owner.post_via(tokens, req, mem) {
            Ok(p) => {
                // `room` left room in `chain`.
                chains.push(
                    chain,
                    Pending {
                        wr_id: p.wr_id,
                        slice: r,
                        path: p.path,
                        mem,
                    },
                );
                continue;
            }
            Err(e) => e,
        };
        m.posted.store(0, Ordering::Release);
        let rec = TokenRecord {
            slice: r,
            endpoint: path.endpoint,
            bytes: req.bytes,
            route: path.route,
            peer: req.peer.into(),
            qp: path.qp,
            device: path.device,
            ..TokenRecord::default()
        };
        // Parks `r` under a block for `refusal`; false if the lot is full
        // (the caller then falls back to re-queueing).
        let mut park = |key: Key, wake: Wake| {
            let parked = lot
                .open(Block { key, wake, refusal })
                .is_some_and(|id| lot.park(r, id));
            if parked {
                c.parks.fetch_add(1, Ordering::Relaxed);
            }
            parked
        };
        match refusal {
            // Not now: parked until a release or a CC epoch can have
            // opened the window (before the lot, the slice went back to its
            // queue and was popped, deferred and pushed again every round,
            // stealing the CPU the NIC — on Soft-RoCE — and the poller
            // need). Parking is not progress: the idle back-off applies.
            Refusal::Deferred { path: dp, deferral } => {
                c.deferrals.fetch_add(1, Ordering::Relaxed);
                if let Some(o) = owner.refusal_observation(&refusal, now) {
                    sh.tables.note_if_current(r, || o);
                }
                if let Some(b) = refusal.backpressure_info(peer, 0) {
                    sh.note_backpressure(r, b, now);
                }
                let key = match deferral.domain {
                    DomainKind::Route => Key::Route(dp.route),
                    DomainKind::Device => Key::Device(dp.device),
                };
                handled -= 1;
                if !park(key, Wake::Release(stamp)) {
                    sh.requeue(r);
                    break;
                }
            }
            Refusal::Avoided {
                path: ap,
                avoidance,
            } => {
                c.avoids.fetch_add(1, Ordering::Relaxed);
                if let Some(o) = owner.refusal_observation(&refusal, now) {
                    sh.tables.note_if_current(r, || o);
                }
                if let Some(b) = refusal.backpressure_info(peer, 0) {
                    sh.note_backpressure(r, b, now);
                }
                // Another rail if there is one; else wait for the cooldown.
                if re_rail(sh, r) {
                    c.rail_moves.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let key = match avoidance.domain {
                    DomainKind::Route => Key::Route(ap.route),
                    DomainKind::Device => Key::Device(ap.device),
                };
                handled -= 1;
                if !park(key, Wake::At(avoid_until(sh, &avoidance, ap, now))) {
                    sh.requeue(r);
                    break;
                }
            }
            _ if refusal.is_backpressure() => {
                c.backpressure.fetch_add(1, Ordering::Relaxed);
                let stamp = Wake::Release(stamp);
                // Its task shows the typed backpressure, whatever pushed
                // back (credit, a full QP, no token); RFC 2849 credit also
                // counts the stall.
                if let Some(b) = refusal.backpressure_info(peer, 0) {
                    sh.note_backpressure(r, b, now);
                }
                let (key, wake) = match refusal {
                    Refusal::Backpressure(b) => {
                        if let Some(o) = owner.refusal_observation(&refusal, now) {
                            sh.tables.note_if_current(r, || o);
                        }
                        let (bucket, seq) = sh.fabric.credit_seq_of(b.peer);
                        // A grant unparks us; its retry time bounds the
                        // wait (and a grant racing this refusal).
                        let after = b.retry_after_us.saturating_mul(1000);
                        let at = now.saturating_add(after.clamp(10_000, tick_ns()));
                        (Key::Peer(b.peer), Wake::Credit { bucket, seq, at })
                    }
                    Refusal::Endpoint {
                        error: EndpointError::QpFull,
                        ..
                    } => (Key::Qp(ep, qp), stamp),
                    Refusal::Endpoint { .. } => (Key::Endpoint(ep), stamp),
                    // No token (`TokenError::Exhausted`): any release.
                    _ => (Key::Tokens, stamp),
                };
                if park(key, wake) {
                    handled -= 1;
                } else {
                    sh.requeue(r);
                }
            }
            // Timed out or canceled meanwhile: nothing to do.
            Refusal::Slice(_) => {}
            // Retired or reclaimed endpoint: its rail's new endpoint, or
            // wait for the segment's reconnect, or another live rail (rail
            // failover); else NO_USABLE_PATH.
            Refusal::Endpoint { .. } => match retry_route(sh, r) {
                RetryRoute::Repointed => sh.requeue(r),
                RetryRoute::Moved => {
                    c.rail_moves.fetch_add(1, Ordering::Relaxed);
                }
                RetryRoute::Wait => {
                    sh.requeue(r);
                    handled -= 1;
                    break;
                }
                // Retired by its owner: teardown, no new root failure; like
                // its flushes, DERIVED_FLUSH (UNKNOWN without other evidence).
                RetryRoute::NoPath { teardown: true } => {
                    let mut o = sh.gate.observe(&rec, Reason::DerivedFlush, now);
                    o.scope = Observed::Value(FailureScope::Qp);
                    sh.tables.note(r, o);
                    sh.settle(r, Outcome::Failure)
                }
                RetryRoute::NoPath { teardown: false } => {
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
    chains.flush_all(|ch| flush_chain(sh, owner, tokens, &guard, ch, c));
    // Ready slices a stopped round did not reach: back to their queue.
    for r in from_lot {
        sh.requeue(r);
    }
    c.parked.store(lot.len() as u64, Ordering::Relaxed);
    handled
}

/// The monitor tick (one CC epoch) in nanoseconds.
fn tick_ns() -> u64 {
    MONITOR_TICK.as_nanos() as u64
}

/// When a slice avoided on `path` may be admitted again: the avoided
/// domain's cooldown deadline (the monitor moves it to PROBING at its first
/// epoch at or after it), or the next CC epoch if the deadline is not known
/// yet (set by the epoch that first sees the quarantine) or already passed.
fn avoid_until(sh: &Shared, a: &Avoidance, path: Path, now: u64) -> u64 {
    let snap = match a.domain {
        DomainKind::Route => sh.gate.route_snapshot(path.route),
        DomainKind::Device => sh.gate.device_snapshot(path.device),
    };
    match snap.map(|s| s.cooldown_until) {
        Some(Observed::Value(t)) if t > now => t,
        _ => now.saturating_add(tick_ns()),
    }
}

/// Settles slice attempt `r` failed as NO_USABLE_PATH (RFC 4162: every
/// RDMA rail unavailable; LONG_UNAVAILABLE with the path evidence).
fn no_usable_path(sh: &Shared, r: SliceRef, rec: &TokenRecord, now: u64) {
    let sig = railyard_core::classify::classify_signal(Signal::AllRailsUnavailable);
    let mut o = sh.gate.observe(rec, sig.reason, now);
    o.scope = Observed::Value(sig.scope);
    sh.tables.note(r, o);
    sh.settle(r, Outcome::Failure)
}

/// (3) `ibv_post_send` of one QP's chain; on `bad_wr`, releases only the
/// unposted tail and re-queues its slices.
fn flush_chain(
    sh: &Shared,
    owner: &EngineHotPath<'_>,
    tokens: &mut WorkerTokens<'_>,
    guard: &EndpointGuard,
    chain: &mut heapless::Vec<Pending, MAX_POST_BATCH>,
    c: &WorkerCounters,
) {
    let Some(first) = chain.first().copied() else {
        return;
    };
    let h = first.path.endpoint;
    let qp_idx = usize::from(first.path.qp);
    let release_from =
        |tokens: &mut WorkerTokens<'_>, from: usize, requeue: bool, chain: &[Pending]| {
            let now = sh.now();
            for p in &chain[from..] {
                owner.unposted_via(tokens, p.wr_id, now);
                sh.tables.meta[p.slice.index as usize]
                    .posted
                    .store(0, Ordering::Release);
                // After the release (`Shared::release_stamp`).
                c.unposted.fetch_add(1, Ordering::Release);
                if requeue {
                    let shard = sh.tables.meta[p.slice.index as usize]
                        .shard
                        .load(Ordering::Relaxed);
                    let _ = sh.fabric.queues[shard as usize].push(p.slice);
                } else {
                    sh.settle(p.slice, Outcome::Failure);
                }
            }
        };
    let res = match sh.endpoints.resource(h, guard) {
        Ok(r) => r,
        Err(_) => {
            release_from(tokens, 0, false, chain);
            chain.clear();
            return;
        }
    };
    let Some(qp) = res.qps.get(qp_idx) else {
        release_from(tokens, 0, false, chain);
        chain.clear();
        return;
    };
    // Selective signaling (`signal.rs`): recorded in posting order before
    // the doorbell, then every k-th and the last request signaled; a chain
    // that is not recorded is posted fully signaled.
    let ids: heapless::Vec<WrId, MAX_POST_BATCH> = chain.iter().map(|p| p.wr_id).collect();
    let selective = sh.signal.record(h, qp_idx, &ids);
    let n = chain.len();
    let mut wrs: heapless::Vec<RdmaWr<'_>, MAX_POST_BATCH> = heapless::Vec::new();
    for (i, p) in chain.iter().enumerate() {
        let m = &sh.tables.meta[p.slice.index as usize];
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
            if selective {
                sh.signal.retract(h, qp_idx, n);
            }
            release_from(tokens, 0, false, chain);
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
            signaled: !selective || sh.signal.policy.signaled(i, n),
        });
    }
    c.doorbells.fetch_add(1, Ordering::Relaxed);
    // SAFETY: every local region is one the engine registered, pinned by
    // its post until the token ends (completion or unposted tail), so it
    // cannot be deregistered meanwhile (`memory.rs`); at engine drop every
    // QP was moved to ERR and every token came back (or the drain timed
    // out, after which the QPs, being in ERR, no longer touch memory).
    #[allow(unsafe_code)]
    let posted = unsafe { qp.post_batch(&wrs) };
    match posted {
        Ok(()) => {
            c.posts.fetch_add(wrs.len() as u64, Ordering::Relaxed);
            let shard = sh.tables.meta[first.slice.index as usize]
                .shard
                .load(Ordering::Relaxed);
            sh.fabric.wake_poller(shard as usize);
            for p in chain.iter() {
                let t = sh.tables.meta[p.slice.index as usize]
                    .task
                    .load(Ordering::Relaxed);
                sh.tables.tasks[t as usize]
                    .started
                    .store(true, Ordering::Relaxed);
            }
        }
        Err(e) => {
            c.posts.fetch_add(e.posted as u64, Ordering::Relaxed);
            let shard = sh.tables.meta[first.slice.index as usize]
                .shard
                .load(Ordering::Relaxed);
            sh.fabric.wake_poller(shard as usize);
            for p in &chain[..e.posted] {
                let t = sh.tables.meta[p.slice.index as usize]
                    .task
                    .load(Ordering::Relaxed);
                sh.tables.tasks[t as usize]
                    .started
                    .store(true, Ordering::Relaxed);
            }
            // Only the tail is ours to release. A QP that refuses outright
            // (not ENOMEM) is broken: retire its endpoint (the one API), and
            // the re-queued slices then fail at admission.
            let transient = matches!(
                e.error,
                crate::VerbsError::Os { errno, .. } if errno == libc::ENOMEM
            );
            if !transient {
                retire(sh, h, RetireReason::QpFatal);
            }
            if selective {
                // The unposted tail never reached the send queue. (A posted
                // head whose last request is unsignaled is covered by the
                // flush of the retired QP, or by the next chain's CQE.)
                sh.signal.retract(h, qp_idx, n - e.posted);
            }
            release_from(tokens, e.posted, true, chain);
        }
    }
    chain.clear();
}

/// Polls one CQ and resolves every completion through its token, each
/// covered (unsignaled) request before the CQE that covers it.
fn poll_cq(
    sh: &Shared,
    owner: &EngineHotPath<'_>,
    tokens: &mut WorkerTokens<'_>,
    cq: usize,
    wcs: &mut [WorkCompletion],
    c: &WorkerCounters,
) -> usize {
    let n = match sh.fabric.cqs[cq].poll(wcs) {
        Ok(n) => n,
        Err(_) => return 0,
    };
    if n == 0 {
        return 0;
    }
    let now = sh.now();
    for wc in &wcs[..n] {
        if let Some((order, generation)) = sh.signal.order_of(wc.wr_id) {
            // Selective signaling: the CQE covers every request recorded
            // before it on its QP; core decides what each completes as. A
            // leftover of an abandoned endpoint in the same slot is
            // covered as a flush.
            for x in order.covered_by(wc.wr_id) {
                let status = if sh.signal.same_endpoint(x, order, generation) {
                    wc.status
                } else {
                    WC_WR_FLUSH_ERR
                };
                if resolve(sh, owner, tokens, c, x, Cqe::Covered(status), now) {
                    sh.fabric.cqs[cq].retire_covered(1);
                }
            }
        }
        let own = Cqe::Own {
            status: wc.status,
            vendor_err: wc.vendor_err,
        };
        resolve(sh, owner, tokens, c, wc.wr_id, own, now);
    }
    // Counted after every release of the batch: a poster that reads this
    // count and then sees a full window will see it move again
    // (`Shared::release_stamp`).
    c.completions.fetch_add(n as u64, Ordering::Release);
    n
}

/// Resolves one token: the composed hot path releases every hold (its
/// memory pin included) and settles or retries the slice, then the
/// completion lands ([`on_completed`]). Returns whether the token was live
/// (a duplicate or stale `wr_id` is counted as bad and changes nothing).
#[inline(always)]
fn resolve(
    sh: &Shared,
    owner: &EngineHotPath<'_>,
    tokens: &mut WorkerTokens<'_>,
    c: &WorkerCounters,
    wr_id: WrId,
    cqe: Cqe,
    now: u64,
) -> bool {
    match owner.complete_via(tokens, wr_id, cqe, now) {
        Ok(done) => {
            on_completed(sh, owner, c, &done, now);
            true
        }
        Err(_) => {
            c.bad.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}
