//! loom: the composed hot path (`completion::HotPath`) claiming and
//! completing through per-thread token caches — a poster's cache on one
//! thread, a poller's cache on another (the dedicated-poller model), on a
//! pool the poster drains.
//!
//! The invariant: **a claim refused `Exhausted` while another cache holds
//! free tokens is never a permanent "no token".** The engine parks the
//! refused slice until its release stamp moves (a completion counted, or an
//! idle worker's [`TokenCache::idle`] returning tokens) and retries then.
//! So whenever the poller has gone to sleep, either the stamp moved since
//! the poster's last refused claim, or the retry finds a token. It holds
//! because a sleeping cache returns everything (`idle(true)`) and a starved
//! claim asks every cache for its tokens (the flush epoch); the broken twin
//! `token_cache_park_keeps` (loom only) returns tokens at `idle(true)` only
//! if asked, so a poller that checked just before the poster starved sleeps
//! with both tokens.
//!
//! [`TokenCache::idle`]: railyard_core::token::TokenCache::idle
#![cfg(railyard_loom)]

use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, PostRequest, Refusal};
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, EndpointTable};
use railyard_core::slice::SliceTable;
use railyard_core::token::{TokenError, TokenPool};

struct World {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    ep: EndpointHandle,
    /// The engine's release stamp: completions counted and cache returns.
    stamp: AtomicU64,
    /// The poller has gone to sleep (after its last stamp move).
    asleep: AtomicBool,
    /// The poster is done with its retries.
    done: AtomicBool,
}

impl World {
    fn new() -> Self {
        let eps = EndpointTable::new(EndpointConfig {
            capacity: 1,
            qps_per_endpoint: 1,
            max_wr_per_qp: 4,
            drain_timeout_ns: 1_000,
        })
        .unwrap();
        let ep = eps.open(()).unwrap();
        World {
            tokens: TokenPool::new(2).unwrap(),
            slices: SliceTable::new(3).unwrap(),
            eps,
            ep,
            stamp: AtomicU64::new(0),
            asleep: AtomicBool::new(false),
            done: AtomicBool::new(false),
        }
    }

    fn owner(&self) -> HotPath<'_> {
        HotPath::new(&self.tokens, &self.slices, &self.eps)
    }
}

fn starved_claim_is_woken() {
    loom::model(|| {
        let w = Arc::new(World::new());
        let o = w.owner();
        let mut poster = o.token_cache::<2>();
        // The poster drains the pool: both tokens in flight.
        let posted: Vec<u64> = (0..2)
            .map(|i| {
                let s = w.slices.open(i).unwrap();
                o.post_via(&mut poster, PostRequest::new(s, w.ep, 0, 64, 0))
                    .unwrap()
                    .wr_id
            })
            .collect();
        let w2 = w.clone();
        let poller = thread::spawn(move || {
            let o = w2.owner();
            let mut cache = o.token_cache::<2>();
            for wr in posted {
                o.complete_via(&mut cache, wr, wc::SUCCESS, 0, 1).unwrap();
            }
            // Completions are counted after their release.
            w2.stamp.fetch_add(1, Ordering::Release);
            // Nothing more to poll: the worker goes to sleep.
            if cache.idle(true) > 0 {
                w2.stamp.fetch_add(1, Ordering::Release);
            }
            w2.asleep.store(true, Ordering::Release);
            // Asleep, holding whatever its cache still holds.
            while !w2.done.load(Ordering::Acquire) {
                thread::yield_now();
            }
        });
        // The poster's next slice: refused while the tokens are away, then
        // parked until the stamp moves, then offered again.
        let s = w.slices.open(2).unwrap();
        let req = PostRequest::new(s, w.ep, 0, 64, 2);
        let mut seen = w.stamp.load(Ordering::Acquire);
        let p = 'retry: loop {
            match o.post_via(&mut poster, req) {
                Ok(p) => break p,
                Err(r) => assert_eq!(r, Refusal::Token(TokenError::Exhausted)),
            }
            // Parked on the stamp read before that claim.
            loop {
                let now = w.stamp.load(Ordering::Acquire);
                if now != seen {
                    seen = now;
                    continue 'retry;
                }
                if w.asleep.load(Ordering::Acquire) {
                    let now = w.stamp.load(Ordering::Acquire);
                    assert_ne!(
                        now, seen,
                        "no token, and nothing will wake the slice: the poller \
                         sleeps with the free tokens in its cache"
                    );
                }
                thread::yield_now();
            }
        };
        o.complete_via(&mut poster, p.wr_id, wc::SUCCESS, 0, 3)
            .unwrap();
        w.done.store(true, Ordering::Release);
        poller.join().unwrap();
        drop(poster);
        assert_eq!(w.tokens.in_use(), 0);
        assert_eq!(w.tokens.free_in_pool(), 2, "every token back in the pool");
        assert_eq!(w.eps.outstanding_total(), 0);
    });
}

#[test]
fn token_cache_starved_claim_is_woken() {
    starved_claim_is_woken();
}

/// A parking cache that returns its tokens only when asked: the poller
/// checks for a request just before the poster starves, and sleeps with
/// both tokens while the poster's slice waits for a release that never
/// comes.
#[cfg(railyard_broken = "token_cache_park_keeps")]
#[test]
#[should_panic]
fn broken_token_cache_park_keeps() {
    starved_claim_is_woken();
}
