//! The composed hot path through per-thread token caches
//! (`HotPath::post_via` / `complete_via` / `unposted_via` with a
//! `TokenCache`): the pool's `wr_id` semantics, typed errors and
//! exactly-once completion; claim on one thread and completion on another;
//! exhaustion while another cache holds free tokens is backpressure that the
//! next answer of the other cache lifts, never a permanent "no token"; every
//! token back in the pool (`free == capacity`) once the caches are gone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, PostRequest, Refusal, SliceEffect};
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, EndpointTable};
use railyard_core::slice::{Outcome, SliceState, SliceTable};
use railyard_core::token::{TokenError, TokenPool, TokenRecord};

/// Every token of `pool` is on its shared lists: a plain claim gets each
/// slot exactly once, then `Exhausted`.
fn all_tokens_in_the_pool(pool: &TokenPool) {
    assert_eq!(pool.in_use(), 0, "live attempts left");
    let ids: Vec<_> = (0..pool.capacity())
        .map(|i| {
            pool.claim(TokenRecord::default())
                .unwrap_or_else(|e| panic!("token {i} of {} missing: {e}", pool.capacity()))
        })
        .collect();
    assert_eq!(
        pool.claim(TokenRecord::default()),
        Err(TokenError::Exhausted)
    );
    let mut idx: Vec<u32> = ids.iter().map(|&w| w as u32).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), pool.capacity(), "every slot exactly once");
    for w in ids {
        pool.complete(w).unwrap();
    }
}

struct World {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    ep: EndpointHandle,
}

impl World {
    fn new(tokens: usize, slices: usize) -> Self {
        let eps = EndpointTable::new(EndpointConfig {
            max_wr_per_qp: 1 << 16,
            ..EndpointConfig::default()
        })
        .unwrap();
        let ep = eps.open(()).unwrap();
        World {
            tokens: TokenPool::new(tokens).unwrap(),
            slices: SliceTable::new(slices).unwrap(),
            eps,
            ep,
        }
    }

    fn owner(&self) -> HotPath<'_> {
        HotPath::new(&self.tokens, &self.slices, &self.eps)
    }
}

#[test]
fn claimed_on_one_cache_completed_on_another_with_the_pools_errors() {
    let w = World::new(16, 16);
    let o = w.owner();
    let mut poster = o.token_cache::<4>();
    let mut poller = o.token_cache::<4>();
    let s = w.slices.open(0).unwrap();
    let p = o
        .post_via(&mut poster, PostRequest::new(s, w.ep, 0, 4096, 1))
        .unwrap();
    assert!(w.tokens.is_live(p.wr_id));
    assert_eq!(w.eps.outstanding_total(), 1);
    let d = o
        .complete_via(&mut poller, p.wr_id, wc::SUCCESS, 0, 2)
        .unwrap();
    assert_eq!(d.slice, SliceEffect::Settled(SliceState::Succeeded));
    assert_eq!(d.record.bytes, 4096);
    assert_eq!(w.eps.outstanding_total(), 0);
    assert_eq!(w.tokens.in_use(), 0, "a cached free token is not in use");
    assert_eq!(poller.cached(), 1, "the completer's cache keeps the slot");
    // Exactly once, through any source.
    for e in [
        o.complete_via(&mut poller, p.wr_id, wc::SUCCESS, 0, 3),
        o.complete_via(&mut poster, p.wr_id, wc::SUCCESS, 0, 3),
        o.complete(p.wr_id, wc::SUCCESS, 0, 3),
    ] {
        assert_eq!(e.unwrap_err(), TokenError::Duplicate);
    }
    assert_eq!(
        o.complete_via(&mut poller, 99, wc::SUCCESS, 0, 3)
            .unwrap_err(),
        TokenError::OutOfRange
    );
    assert_eq!(
        o.complete_via(&mut poller, p.wr_id + (1 << 32), wc::SUCCESS, 0, 3)
            .unwrap_err(),
        TokenError::Forged
    );
    // The poller's cache reuses the slot: the old id is now stale, and a
    // stale completion changes nothing.
    let s2 = w.slices.open(1).unwrap();
    let q = o
        .post_via(&mut poller, PostRequest::new(s2, w.ep, 0, 512, 4))
        .unwrap();
    assert_eq!(q.wr_id as u32, p.wr_id as u32, "hottest slot reused");
    assert_eq!(
        o.complete_via(&mut poster, p.wr_id, wc::SUCCESS, 0, 5)
            .unwrap_err(),
        TokenError::Stale
    );
    assert!(w.tokens.is_live(q.wr_id));
    // A bad_wr tail returned through a cache: released, attempt kept.
    let (rec, _) = o.unposted_via(&mut poster, q.wr_id, 6).unwrap();
    assert_eq!(rec.slice, s2);
    assert!(w.slices.is_current(s2));
    assert_eq!(w.eps.outstanding_total(), 0);
    drop((poster, poller));
    all_tokens_in_the_pool(&w.tokens);
}

#[test]
fn a_cache_over_another_pool_is_never_used() {
    let w = World::new(8, 8);
    let other: TokenPool = TokenPool::new(8).unwrap();
    let o = w.owner();
    let mut foreign = other.cache::<4>();
    let s = w.slices.open(0).unwrap();
    let p = o
        .post_via(&mut foreign, PostRequest::new(s, w.ep, 0, 64, 0))
        .unwrap();
    assert!(w.tokens.is_live(p.wr_id), "claimed from the owner's pool");
    assert_eq!(other.in_use(), 0);
    o.complete_via(&mut foreign, p.wr_id, wc::SUCCESS, 0, 1)
        .unwrap();
    assert_eq!(foreign.cached(), 0, "returned to the owner's pool");
    all_tokens_in_the_pool(&w.tokens);
    // `None` is the pool, too.
    let s = w.slices.open(1).unwrap();
    let mut none: Option<railyard_core::token::TokenCache<'_>> = None;
    let p = o
        .post_via(&mut none, PostRequest::new(s, w.ep, 0, 64, 0))
        .unwrap();
    o.complete_via(&mut none, p.wr_id, wc::SUCCESS, 0, 1)
        .unwrap();
    all_tokens_in_the_pool(&w.tokens);
}

#[test]
fn exhaustion_while_another_cache_holds_tokens_is_only_backpressure() {
    // 8 tokens; the poller's cache ends up holding the free ones.
    let w = World::new(8, 16);
    let o = w.owner();
    let mut poster = o.token_cache::<4>();
    let mut poller = o.token_cache::<4>();
    let mut live = Vec::new();
    for i in 0..8 {
        let s = w.slices.open(i).unwrap();
        live.push(
            o.post_via(&mut poster, PostRequest::new(s, w.ep, 0, 64, 0))
                .unwrap()
                .wr_id,
        );
    }
    // Complete three: the poller's cache keeps them (it is not full).
    for wr in live.drain(..3) {
        o.complete_via(&mut poller, wr, wc::SUCCESS, 0, 1).unwrap();
    }
    assert_eq!(poller.cached(), 3);
    assert_eq!(w.tokens.in_use(), 5);
    let s = w.slices.open(8).unwrap();
    let req = PostRequest::new(s, w.ep, 0, 64, 2);
    // Typed backpressure; nothing held by the refusal.
    let r = o.post_via(&mut poster, req).unwrap_err();
    assert_eq!(r, Refusal::Token(TokenError::Exhausted));
    assert!(r.is_backpressure());
    assert_eq!(w.eps.outstanding_total(), 5);
    assert!(w.slices.is_current(s), "the slice stays queued");
    // The refusal asked every cache for its tokens: the idle poller answers.
    assert!(poller.flush_requested());
    assert_eq!(poller.idle(false), 3);
    assert_eq!(poller.cached(), 0);
    assert!(!poller.flush_requested());
    let p = o.post_via(&mut poster, req).unwrap();
    live.push(p.wr_id);
    // A busy poller answers inside its next completion instead.
    let s = w.slices.open(9).unwrap();
    let req = PostRequest::new(s, w.ep, 0, 64, 3);
    o.complete_via(&mut poller, live.remove(0), wc::SUCCESS, 0, 4)
        .unwrap();
    o.complete_via(&mut poller, live.remove(0), wc::SUCCESS, 0, 4)
        .unwrap();
    assert_eq!(poller.cached(), 2);
    // Claim whatever the poster's cache and the pool still have.
    for i in 10.. {
        let s = w.slices.open(i).unwrap();
        match o.post_via(&mut poster, PostRequest::new(s, w.ep, 0, 64, 0)) {
            Ok(p) => live.push(p.wr_id),
            Err(r) => {
                assert_eq!(r, Refusal::Token(TokenError::Exhausted));
                w.slices.settle(s, Outcome::Canceled).unwrap();
                break;
            }
        }
    }
    assert_eq!(poller.cached(), 2, "the two the pool could not see");
    assert_eq!(
        o.post_via(&mut poster, req).unwrap_err(),
        Refusal::Token(TokenError::Exhausted)
    );
    o.complete_via(&mut poller, live.remove(0), wc::SUCCESS, 0, 5)
        .unwrap();
    assert_eq!(poller.cached(), 0, "answered the request in complete");
    live.push(o.post_via(&mut poster, req).unwrap().wr_id);
    // A parking cache holds nothing, asked or not.
    o.complete_via(&mut poller, live.remove(0), wc::SUCCESS, 0, 6)
        .unwrap();
    assert_eq!(poller.cached(), 1);
    assert_eq!(poller.idle(false), 0, "nothing asked");
    assert_eq!(poller.idle(true), 1);
    for wr in live {
        o.complete_via(&mut poller, wr, wc::SUCCESS, 0, 7).unwrap();
    }
    // Four of the slices above were left open by the test; settle nothing
    // else. Every token is back once the caches are gone.
    drop((poster, poller));
    all_tokens_in_the_pool(&w.tokens);
}

/// Two posting threads and one polling thread (the dedicated-poller
/// model), each with its own cache, on a pool much smaller than the work:
/// claims starve all the time while other caches hold free tokens. Every
/// post is eventually admitted, every completion releases once, and at the
/// end every token is back in the pool.
#[test]
fn posters_and_a_poller_with_caches_never_lose_or_strand_a_token() {
    const POSTS: u32 = 20_000;
    const SLICES: usize = 256;
    let w = World::new(24, SLICES);
    let (tx, rx) = mpsc::channel::<u64>();
    let stop = AtomicBool::new(false);
    let exhausted = AtomicU64::new(0);
    let completed = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for t in 0..2u32 {
            let tx = tx.clone();
            let (w, exhausted) = (&w, &exhausted);
            sc.spawn(move || {
                let o = w.owner();
                let mut cache = o.token_cache::<8>();
                for i in 0..POSTS {
                    let slot = (t * SLICES as u32 / 2) + i % (SLICES as u32 / 2);
                    // The slot is free once its previous slice settled.
                    let s = loop {
                        match w.slices.open(slot) {
                            Ok(s) => break s,
                            Err(_) => std::thread::yield_now(),
                        }
                    };
                    let req = PostRequest::new(s, w.ep, 0, 64, 0);
                    let p = loop {
                        match o.post_via(&mut cache, req) {
                            Ok(p) => break p,
                            Err(Refusal::Token(TokenError::Exhausted)) => {
                                exhausted.fetch_add(1, Ordering::Relaxed);
                                // What an engine worker does while the
                                // slice is parked: answer requests.
                                cache.idle(false);
                                std::thread::yield_now();
                            }
                            Err(e) => panic!("{e}"),
                        }
                    };
                    tx.send(p.wr_id).unwrap();
                }
                // Worker exit: the cache flushes on drop.
            });
        }
        drop(tx);
        let (w, stop, completed) = (&w, &stop, &completed);
        sc.spawn(move || {
            let o = w.owner();
            let mut cache = o.token_cache::<8>();
            loop {
                match rx.try_recv() {
                    Ok(wr) => {
                        let d = o.complete_via(&mut cache, wr, wc::SUCCESS, 0, 1).unwrap();
                        assert_eq!(d.slice, SliceEffect::Settled(SliceState::Succeeded));
                        completed.fetch_add(1, Ordering::Relaxed);
                    }
                    // An idle round of an engine worker.
                    Err(mpsc::TryRecvError::Empty) => {
                        cache.idle(false);
                        std::thread::yield_now();
                    }
                    Err(mpsc::TryRecvError::Disconnected) => break,
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    assert!(stop.load(Ordering::Relaxed));
    assert_eq!(completed.load(Ordering::Relaxed), 2 * u64::from(POSTS));
    assert_eq!(w.eps.outstanding_total(), 0);
    assert_eq!(w.slices.pending(), 0);
    all_tokens_in_the_pool(&w.tokens);
    // The pool is much smaller than the work: claims did starve.
    assert!(exhausted.load(Ordering::Relaxed) > 0 || cfg!(miri));
}
