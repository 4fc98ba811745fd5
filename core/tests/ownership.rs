//! RFC 3136 Testing Plan: the six interleavings, each driven step by step
//! through a scriptable fake completion source, each checking the RFC's
//! five properties:
//!
//! 1. no slice reaches both success and failure (one terminal state);
//! 2. retry count advances only for the owning attempt;
//! 3. QP-depth and CQ-outstanding counters never go negative and never leak;
//! 4. stale completions do not delete or mutate the active generation;
//! 5. retired endpoints are eventually reclaimed after completions drain.
//!
//! Where an interleaving involves a second thread, it is also run with real
//! threads (the loom models in `loom-tests/` explore the same races
//! exhaustively at small sizes).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, PostRequest, Refusal, SliceEffect};
use railyard_core::endpoint::{
    EndpointConfig, EndpointError, EndpointHandle, EndpointTable, Phase, ReclaimEvent, RetireReason,
};
use railyard_core::slice::{SliceRef, SliceState, SliceTable};
use railyard_core::token::{TokenPool, WrId};

/// A CQ whose completions the test scripts: which wr_ids complete, with
/// which outcome, in which order. Tracks CQ outstanding with a counter that
/// refuses to go negative.
#[derive(Default)]
struct FakeCq {
    queue: VecDeque<(WrId, u32)>,
    /// wr_id -> still expected to complete on this CQ.
    posted: HashMap<WrId, bool>,
    underflows: u32,
}

impl FakeCq {
    fn outstanding(&self) -> usize {
        self.posted.values().filter(|p| **p).count()
    }
    /// The NIC accepted `wr`.
    fn accept(&mut self, wr: WrId) {
        assert!(
            self.posted.insert(wr, true).is_none(),
            "wr_id reused while live"
        );
    }
    /// Script: `wr` completes with WC status `status` next.
    fn script(&mut self, wr: WrId, status: u32) {
        self.queue.push_back((wr, status));
    }
    /// Script: the QP went to ERR; every live wr flushes (retryable).
    fn flush_all(&mut self, wrs: &[WrId]) {
        for &w in wrs {
            self.script(w, wc::WR_FLUSH_ERR);
        }
    }
    fn poll(&mut self) -> Option<(WrId, u32)> {
        let (wr, o) = self.queue.pop_front()?;
        match self.posted.get_mut(&wr) {
            Some(live @ true) => *live = false,
            _ => self.underflows += 1,
        }
        Some((wr, o))
    }
}

/// The tables plus the observations the properties are checked against.
struct World {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    cq: FakeCq,
    /// Terminal states seen per (slice index, attempt id).
    terminal: HashMap<u32, Vec<SliceState>>,
    /// Retries started per slice index, by completions of the current attempt.
    retries: HashMap<u32, u16>,
    stale_release_only: u32,
}

const TIMEOUT: u64 = 1_000;

impl World {
    fn new() -> Self {
        Self {
            tokens: TokenPool::new(64).unwrap(),
            slices: SliceTable::new(16).unwrap(),
            eps: EndpointTable::new(EndpointConfig {
                capacity: 4,
                qps_per_endpoint: 2,
                max_wr_per_qp: 16,
                drain_timeout_ns: TIMEOUT,
            })
            .unwrap(),
            cq: FakeCq::default(),
            terminal: HashMap::new(),
            retries: HashMap::new(),
            stale_release_only: 0,
        }
    }

    fn owner(&self) -> HotPath<'_> {
        HotPath::new(&self.tokens, &self.slices, &self.eps).with_max_retries(3)
    }

    fn post(&mut self, s: SliceRef, ep: EndpointHandle, qp: u16) -> Result<WrId, Refusal> {
        let wr = self
            .owner()
            .post(PostRequest::new(s, ep, qp, 4096, 0))?
            .wr_id;
        self.cq.accept(wr);
        Ok(wr)
    }

    /// Polls one scripted completion through the real protocol.
    fn poll(&mut self) -> Option<SliceEffect> {
        let (wr, outcome) = self.cq.poll()?;
        let before = self.slices.status(0).ok();
        let done = self
            .owner()
            .complete(wr, outcome, 0, 0)
            .expect("each wr completes once");
        assert_ne!(done.released.endpoint, Err(EndpointError::Underflow));
        let idx = done.record.slice.index;
        match done.slice {
            SliceEffect::Settled(st) => self.terminal.entry(idx).or_default().push(st),
            SliceEffect::Retry(_) => *self.retries.entry(idx).or_default() += 1,
            SliceEffect::StaleReleaseOnly => {
                self.stale_release_only += 1;
                // Property 4 for slices: a stale completion changed nothing.
                if idx == 0 {
                    assert_eq!(self.slices.status(0).ok(), before);
                }
            }
        }
        Some(done.slice)
    }

    fn drain(&mut self) {
        while self.poll().is_some() {}
    }

    fn reclaim(&self, now: u64) -> Vec<ReclaimEvent> {
        let local = self.eps.register();
        let guard = local.pin();
        let mut evs = Vec::new();
        self.eps.poll_reclaim(now, &guard, |e| evs.push(e)).unwrap();
        evs
    }

    /// The five properties, at the end of a scenario.
    fn check(&self, live_endpoints: usize) {
        // 1. one terminal state per slice opening, never success and failure.
        for (idx, states) in &self.terminal {
            assert!(states.len() <= 1, "slice {idx} settled twice: {states:?}");
        }
        // 2. retries counted only for owning attempts.
        for (idx, n) in &self.retries {
            assert_eq!(self.slices.status(*idx).unwrap().retries, *n, "slice {idx}");
        }
        // 3. counters never negative, never leaked.
        assert_eq!(self.cq.underflows, 0, "CQ outstanding went negative");
        assert_eq!(self.cq.outstanding(), 0, "CQ outstanding leaked");
        assert_eq!(self.tokens.in_use(), 0, "token leaked");
        assert_eq!(
            self.eps.outstanding_total(),
            0,
            "endpoint outstanding leaked"
        );
        assert_eq!(self.eps.qp_depth_total(), 0, "QP depth leaked");
        // 5. retired endpoints reclaimed.
        assert_eq!(
            self.eps.live(),
            live_endpoints,
            "retired endpoint not reclaimed"
        );
    }
}

#[test]
fn post_then_retry_then_old_completion_arrives() {
    let mut w = World::new();
    let ep1 = w.eps.open(()).unwrap();
    let ep2 = w.eps.open(()).unwrap();
    let a1 = w.slices.open(0).unwrap();
    let old = w.post(a1, ep1, 0).unwrap();
    // The software timeout path retries before the WC arrives.
    let a2 = w.slices.retry(a1, 3).unwrap().attempt().unwrap();
    w.retries.insert(0, 1);
    let new = w.post(a2, ep2, 0).unwrap();
    let ep2_before = w.eps.state(ep2).unwrap();
    // The old completion arrives (as success!) and may only release.
    w.cq.script(old, wc::SUCCESS);
    assert_eq!(w.poll(), Some(SliceEffect::StaleReleaseOnly));
    assert_eq!(
        w.eps.state(ep2).unwrap(),
        ep2_before,
        "active generation untouched"
    );
    assert_eq!(w.slices.status(0).unwrap().state, SliceState::Pending);
    // A stale post is refused too.
    assert!(matches!(w.post(a1, ep1, 0), Err(Refusal::Slice(_))));
    w.cq.script(new, wc::SUCCESS);
    assert_eq!(w.poll(), Some(SliceEffect::Settled(SliceState::Succeeded)));
    w.check(2);
}

#[test]
fn partial_post_with_bad_wr_chain_releases_only_unposted() {
    let mut w = World::new();
    let ep = w.eps.open(()).unwrap();
    let refs: Vec<SliceRef> = (0..4).map(|i| w.slices.open(i).unwrap()).collect();
    // Build a chain of 4 WRs: tokens claimed and admitted for all.
    let chain: Vec<WrId> = refs
        .iter()
        .map(|&s| {
            w.owner()
                .post(PostRequest::new(s, ep, 1, 4096, 0))
                .unwrap()
                .wr_id
        })
        .collect();
    assert_eq!(w.eps.qp_depth(ep, 1), Ok(4));
    // ibv_post_send returned bad_wr = chain[2]: 0 and 1 reached the NIC.
    let bad = 2;
    for &wr in &chain[..bad] {
        w.cq.accept(wr);
    }
    for &wr in &chain[bad..] {
        let rec = w.owner().unposted(wr, 0).map(|(r, _)| r).unwrap();
        assert!(
            w.slices.is_current(rec.slice),
            "unposted slice stays current"
        );
    }
    assert_eq!(w.tokens.in_use(), 2);
    assert_eq!(
        w.eps.qp_depth(ep, 1),
        Ok(2),
        "only the unposted depth returned"
    );
    // Unposted ids are dead now.
    assert!(w.owner().complete(chain[2], wc::SUCCESS, 0, 0).is_err());
    // Posted ones complete; unposted slices are re-posted with the same attempt.
    w.cq.script(chain[0], wc::SUCCESS);
    w.cq.script(chain[1], wc::SUCCESS);
    w.drain();
    for &s in &refs[bad..] {
        let wr = w.post(s, ep, 1).unwrap();
        w.cq.script(wr, wc::SUCCESS);
    }
    w.drain();
    for i in 0..4 {
        assert_eq!(w.slices.status(i).unwrap().state, SliceState::Succeeded);
    }
    w.check(1);
}

#[test]
fn completion_error_retires_endpoint_while_another_worker_posts() {
    // Deterministic: worker B is admitted on ep just before worker A's
    // completion error retires it; B's post drains; later posts are refused.
    let mut w = World::new();
    let ep = w.eps.open(()).unwrap();
    let spare = w.eps.open(()).unwrap();
    let sa = w.slices.open(0).unwrap();
    let sb = w.slices.open(1).unwrap();
    let wa = w.post(sa, ep, 0).unwrap();
    let wb = w.post(sb, ep, 1).unwrap();
    w.cq.script(wa, wc::WR_FLUSH_ERR);
    let SliceEffect::Retry(sa2) = w.poll().unwrap() else {
        panic!("retry expected")
    };
    w.eps.retire(ep, RetireReason::CqError, 0).unwrap();
    assert!(matches!(
        w.post(sa2, ep, 0),
        Err(Refusal::Endpoint {
            error: EndpointError::Retired,
            ..
        })
    ));
    assert!(w.reclaim(1).is_empty(), "B's post still outstanding");
    let wa2 = w.post(sa2, spare, 0).unwrap();
    w.cq.script(wb, wc::SUCCESS);
    w.cq.script(wa2, wc::SUCCESS);
    w.drain();
    assert!(matches!(w.reclaim(2)[..], [ReclaimEvent::Reclaimed { .. }]));
    w.check(1);
}

#[test]
fn retire_while_another_thread_posts_threaded() {
    let tokens: TokenPool = TokenPool::new(256).unwrap();
    let slices = SliceTable::new(2).unwrap();
    let eps = EndpointTable::<()>::new(EndpointConfig {
        capacity: 2,
        qps_per_endpoint: 1,
        max_wr_per_qp: 64,
        drain_timeout_ns: TIMEOUT,
    })
    .unwrap();
    let ep = eps.open(()).unwrap();
    let owner = HotPath::new(&tokens, &slices, &eps);
    let retired = AtomicBool::new(false);
    let posted_after_retire_seen = AtomicU64::new(0);
    let completed = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Poster + poller: posts until refused, completing as it goes.
            let mut inflight = VecDeque::new();
            loop {
                let r = slices.open(0).unwrap();
                match owner.post(PostRequest::new(r, ep, 0, 64, 0)) {
                    Ok(posted) => {
                        let wr = posted.wr_id;
                        if retired.load(Ordering::SeqCst) {
                            posted_after_retire_seen.fetch_add(1, Ordering::SeqCst);
                        }
                        inflight.push_back(wr);
                    }
                    Err(Refusal::Endpoint {
                        error: EndpointError::Retired,
                        ..
                    }) => {
                        slices
                            .settle(r, railyard_core::slice::Outcome::Canceled)
                            .unwrap();
                        break;
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
                while let Some(wr) = inflight.pop_front() {
                    let d = owner.complete(wr, wc::SUCCESS, 0, 0).unwrap();
                    assert_eq!(d.slice, SliceEffect::Settled(SliceState::Succeeded));
                    completed.fetch_add(1, Ordering::SeqCst);
                }
            }
            assert!(inflight.is_empty());
        });
        s.spawn(|| {
            std::thread::yield_now();
            eps.retire(ep, RetireReason::QpFatal, 0).unwrap();
            retired.store(true, Ordering::SeqCst);
        });
    });
    // A post that read `retired == true` *after* its admission succeeded is
    // fine (admission linearized before retire); but after the loop ended,
    // nothing is outstanding and the endpoint reclaims.
    assert_eq!(tokens.in_use(), 0);
    assert_eq!(eps.outstanding_total(), 0);
    let local = eps.register();
    let g = local.pin();
    assert_eq!(eps.poll_reclaim(1, &g, |_| {}), Ok(1));
    assert_eq!(eps.live(), 0);
    assert!(completed.load(Ordering::SeqCst) >= posted_after_retire_seen.load(Ordering::SeqCst));
}

#[test]
fn async_qp_fatal_races_completion_both_orders() {
    for completion_first in [true, false] {
        let mut w = World::new();
        let ep = w.eps.open(()).unwrap();
        let spare = w.eps.open(()).unwrap();
        let s1 = w.slices.open(0).unwrap();
        let wr = w.post(s1, ep, 0).unwrap();
        // The async-event thread handles IBV_EVENT_QP_FATAL: retire the
        // endpoint and retry the in-flight slice elsewhere.
        let fatal = |w: &mut World| {
            w.eps.retire(ep, RetireReason::QpFatal, 0).unwrap();
            match w.slices.retry(s1, 3) {
                Ok(r) => {
                    *w.retries.entry(0).or_default() += 1;
                    Some(r.attempt().unwrap())
                }
                Err(_) => None, // the completion won: nothing to retry
            }
        };
        let mut next = None;
        if completion_first {
            w.cq.script(wr, wc::SUCCESS);
            assert_eq!(w.poll(), Some(SliceEffect::Settled(SliceState::Succeeded)));
            assert_eq!(fatal(&mut w), None);
        } else {
            next = fatal(&mut w);
            // The QP's in-flight WR now flushes; it belongs to attempt 1.
            w.cq.flush_all(&[wr]);
            assert_eq!(w.poll(), Some(SliceEffect::StaleReleaseOnly));
        }
        if let Some(s2) = next {
            let wr2 = w.post(s2, spare, 0).unwrap();
            w.cq.script(wr2, wc::SUCCESS);
            w.drain();
        }
        assert_eq!(w.slices.status(0).unwrap().state, SliceState::Succeeded);
        assert_eq!(w.reclaim(1).len(), 1);
        w.check(1);
    }
}

#[test]
fn async_qp_fatal_races_completion_threaded() {
    for _ in 0..200 {
        let tokens: TokenPool = TokenPool::new(4).unwrap();
        let slices = SliceTable::new(1).unwrap();
        let eps = EndpointTable::<()>::new(EndpointConfig::default()).unwrap();
        let ep = eps.open(()).unwrap();
        let owner = HotPath::new(&tokens, &slices, &eps);
        let s1 = slices.open(0).unwrap();
        let wr = owner
            .post(PostRequest::new(s1, ep, 0, 64, 0))
            .unwrap()
            .wr_id;
        let (done, retried) = std::thread::scope(|s| {
            let poller = s.spawn(|| owner.complete(wr, wc::SUCCESS, 0, 0).unwrap().slice);
            let async_thread = s.spawn(|| {
                eps.retire(ep, RetireReason::QpFatal, 0).unwrap();
                slices.retry(s1, 3).ok()
            });
            (poller.join().unwrap(), async_thread.join().unwrap())
        });
        match (done, retried) {
            (SliceEffect::Settled(SliceState::Succeeded), None) => {}
            (SliceEffect::StaleReleaseOnly, Some(r)) => {
                assert!(slices.is_current(r.attempt().unwrap()));
            }
            other => panic!("impossible outcome {other:?}"),
        }
        assert_eq!(tokens.in_use(), 0);
        assert_eq!(eps.outstanding_total(), 0);
    }
}

#[test]
fn reclaim_with_completions_pending_waits_then_force_flushes() {
    let mut w = World::new();
    let ep = w.eps.open(()).unwrap();
    let wrs: Vec<WrId> = (0..3)
        .map(|i| {
            let s = w.slices.open(i).unwrap();
            w.post(s, ep, 0).unwrap()
        })
        .collect();
    w.eps.retire(ep, RetireReason::StoreEviction, 100).unwrap();
    assert!(
        w.reclaim(100 + TIMEOUT - 1).is_empty(),
        "pending: no reclaim"
    );
    assert_eq!(w.eps.state(ep).unwrap().phase, Phase::Retired);
    assert_eq!(
        w.reclaim(100 + TIMEOUT),
        vec![ReclaimEvent::ForceFlush {
            handle: ep,
            outstanding: 3
        }]
    );
    // The shim moves the QP to ERR: everything flushes.
    w.cq.flush_all(&wrs);
    w.drain();
    assert_eq!(
        w.reclaim(100 + TIMEOUT + 1),
        vec![ReclaimEvent::Reclaimed {
            handle: ep,
            reason: Some(RetireReason::StoreEviction)
        }]
    );
    // Flushes were current attempts: each started a retry.
    for i in 0..3 {
        assert_eq!(w.slices.status(i).unwrap().retries, 1);
        let st = w.slices.status(i).unwrap();
        w.slices
            .settle(
                SliceRef {
                    index: i,
                    attempt: st.attempt,
                },
                railyard_core::slice::Outcome::Canceled,
            )
            .unwrap();
    }
    w.check(0);
}

#[test]
fn reclaim_abandons_after_bound_and_late_completions_only_release_tokens() {
    let mut w = World::new();
    let ep = w.eps.open(()).unwrap();
    let s = w.slices.open(0).unwrap();
    let wr = w.post(s, ep, 0).unwrap();
    w.eps.retire(ep, RetireReason::ContextFatal, 0).unwrap();
    assert_eq!(w.reclaim(TIMEOUT).len(), 1); // ForceFlush
    assert!(matches!(
        w.reclaim(2 * TIMEOUT)[..],
        [ReclaimEvent::Abandoned { outstanding: 1, .. }]
    ));
    // The slot is reused by a new endpoint (new generation) with work on it.
    let ep2 = w.eps.open(()).unwrap();
    assert_eq!(ep2.slot, ep.slot);
    let s2 = w.slices.open(1).unwrap();
    let wr2 = w.post(s2, ep2, 0).unwrap();
    let before = (w.eps.state(ep2).unwrap(), w.eps.qp_depth(ep2, 0).unwrap());
    // The late completion of the abandoned generation arrives.
    w.cq.script(wr, wc::SUCCESS);
    let (late, _) = w.cq.poll().unwrap();
    let done = w.owner().complete(late, wc::SUCCESS, 0, 0).unwrap();
    assert_eq!(done.released.endpoint, Err(EndpointError::StaleGeneration));
    assert_eq!(
        (w.eps.state(ep2).unwrap(), w.eps.qp_depth(ep2, 0).unwrap()),
        before,
        "new generation untouched"
    );
    w.terminal.entry(0).or_default().push(SliceState::Succeeded);
    w.cq.script(wr2, wc::SUCCESS);
    w.drain();
    w.check(1);
}

#[test]
fn local_nic_handoff_while_old_flushes_drain() {
    let mut w = World::new();
    let nic_a = w.eps.open(()).unwrap();
    let nic_b = w.eps.open(()).unwrap();
    let olds: Vec<(SliceRef, WrId)> = (0..4)
        .map(|i| {
            let s = w.slices.open(i).unwrap();
            (s, w.post(s, nic_a, (i % 2) as u16).unwrap())
        })
        .collect();
    // NIC A goes away: hand every slice to NIC B (new attempt, same retry
    // budget) and retire A. Its QPs flush.
    w.eps.retire(nic_a, RetireReason::ContextFatal, 0).unwrap();
    let news: Vec<WrId> = olds
        .iter()
        .map(|(s, _)| {
            let s2 = w.slices.handoff(*s).unwrap();
            w.post(s2, nic_b, 0).unwrap()
        })
        .collect();
    let b_before = w.eps.state(nic_b).unwrap();
    // Old flushes interleave with new successes.
    for (i, (_, old)) in olds.iter().enumerate() {
        w.cq.script(*old, wc::WR_FLUSH_ERR);
        if i % 2 == 0 {
            w.cq.script(news[i], wc::SUCCESS);
        }
    }
    let mut stale = 0;
    while let Some(e) = w.poll() {
        if e == SliceEffect::StaleReleaseOnly {
            stale += 1;
            assert_eq!(
                w.eps.state(nic_b).unwrap().phase,
                b_before.phase,
                "flush of A never touches B"
            );
        }
    }
    assert_eq!(stale, 4, "every old flush was release-only");
    assert!(
        w.retries.is_empty(),
        "flushes of old attempts spent no retries"
    );
    for i in [1usize, 3] {
        w.cq.script(news[i], wc::SUCCESS);
    }
    w.drain();
    assert!(matches!(w.reclaim(1)[..], [ReclaimEvent::Reclaimed { .. }]));
    for i in 0..4 {
        assert_eq!(w.slices.status(i).unwrap().state, SliceState::Succeeded);
    }
    w.check(1);
}

#[test]
fn token_pool_stress_every_completion_exactly_once() {
    let pool = Arc::new(TokenPool::<u64>::new(64).unwrap());
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let pool = &pool;
            let seen = &seen;
            s.spawn(move || {
                for i in 0..20_000u64 {
                    let v = t << 32 | i;
                    let wr = loop {
                        match pool.claim(v) {
                            Ok(wr) => break wr,
                            Err(_) => std::thread::yield_now(),
                        }
                    };
                    assert_eq!(pool.complete(wr), Ok(v));
                    assert!(pool.complete(wr).is_err());
                    if i % 1000 == 0 {
                        seen.lock().unwrap().insert(v);
                    }
                }
            });
        }
    });
    assert_eq!(pool.in_use(), 0);
    assert_eq!(seen.lock().unwrap().len(), 4 * 20);
}
