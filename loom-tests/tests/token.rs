//! loom: the token pool under concurrent claim/complete, and the
//! per-worker token caches over it.
#![cfg(railyard_loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use railyard_core::token::{TokenError, TokenPool};

/// Three threads claim and complete on a pool of two: every claimed wr_id
/// completes exactly once with its own record, and the pool ends empty.
fn three_threads_claim_complete_exactly_once() {
    loom::model(|| {
        let pool = Arc::new(TokenPool::<u64>::new(2).unwrap());
        let handles: Vec<_> = (0..3u64)
            .map(|t| {
                let pool = pool.clone();
                thread::spawn(move || match pool.claim(100 + t) {
                    Ok(wr) => {
                        assert_eq!(pool.complete(wr), Ok(100 + t), "own record, once");
                        assert!(pool.complete(wr).is_err(), "never twice");
                        true
                    }
                    Err(e) => {
                        assert_eq!(e, TokenError::Exhausted);
                        false
                    }
                })
            })
            .collect();
        let claimed = handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .filter(|c| *c)
            .count();
        assert!(claimed >= 2, "with 2 slots at least 2 of 3 claims succeed");
        assert_eq!(pool.in_use(), 0);
        // Both slots are back on the free list.
        let a = pool.claim(1).unwrap();
        let b = pool.claim(2).unwrap();
        assert_ne!(a as u32, b as u32);
    });
}

/// ABA: while one thread is between reading the free-list head and its CAS,
/// another claims both slots and completes the first. Without the head's
/// tag the stale CAS installs a slot that is still owned, and the next
/// claim hands it to a second owner.
fn free_list_never_hands_a_slot_to_two_owners() {
    loom::model(|| {
        let pool = Arc::new(TokenPool::<u64>::new(2).unwrap());
        let p = pool.clone();
        let w = thread::spawn(move || {
            let a = p.claim(1).ok();
            let b = p.claim(2).ok();
            if let Some(a) = a {
                assert_eq!(p.complete(a), Ok(1), "slot stolen from its owner");
            }
            thread::yield_now();
            if let Some(b) = b {
                assert_eq!(p.complete(b), Ok(2), "slot stolen from its owner");
            }
        });
        if let Ok(x) = pool.claim(10) {
            if let Ok(y) = pool.claim(11) {
                assert_eq!(pool.complete(y), Ok(11), "slot stolen from its owner");
            }
            assert_eq!(pool.complete(x), Ok(10), "slot stolen from its owner");
        }
        w.join().unwrap();
        assert_eq!(pool.in_use(), 0);
    });
}

/// The poster claims and "posts"; the poller learns the wr_id through a
/// relaxed CQ word (the NIC gives no C11 ordering) and completes it: the
/// record it reads is the one the poster wrote.
fn record_reaches_a_poller_on_another_thread() {
    loom::model(|| {
        let pool = Arc::new(TokenPool::<u64>::new(1).unwrap());
        let cq = Arc::new(AtomicU64::new(0));
        let (p, q) = (pool.clone(), cq.clone());
        let poller = thread::spawn(move || loop {
            let wr = q.load(Ordering::Relaxed);
            if wr != 0 {
                assert_eq!(p.complete(wr), Ok(0xfeed));
                break;
            }
            thread::yield_now();
        });
        let wr = pool.claim(0xfeed).unwrap();
        cq.store(wr, Ordering::Relaxed);
        poller.join().unwrap();
        assert_eq!(pool.in_use(), 0);
    });
}

/// `complete_with` lends the record in its slot: the poller reads the
/// poster's record and overwrites it while the slot is still its own,
/// while the main thread waits for the slot to come back and claims it
/// again. The slot is freed only after the lender is done (the new
/// owner's record is never clobbered), and only once.
fn lent_record_is_freed_after_the_lender() {
    loom::model(|| {
        let pool = Arc::new(TokenPool::<u64>::new(1).unwrap());
        let cq = Arc::new(AtomicU64::new(0));
        let (p, q) = (pool.clone(), cq.clone());
        let poller = thread::spawn(move || loop {
            let wr = q.load(Ordering::Relaxed);
            if wr != 0 {
                let seen = p.complete_with(wr, |r| core::mem::replace(r, 0));
                assert_eq!(seen, Ok(0xfeed), "the poster's record, once");
                // Duplicate, or Stale once the main thread took the slot again.
                let twice = p.complete_with(wr, |r| *r);
                assert!(
                    matches!(twice, Err(TokenError::Duplicate | TokenError::Stale)),
                    "never twice: {twice:?}"
                );
                break;
            }
            thread::yield_now();
        });
        let wr = pool.claim(0xfeed).unwrap();
        cq.store(wr, Ordering::Relaxed);
        let again = loop {
            match pool.claim(7) {
                Ok(w) => break w,
                Err(_) => thread::yield_now(),
            }
        };
        assert_ne!(again, wr, "a new sequence for the reused slot");
        poller.join().unwrap();
        assert_eq!(pool.complete(again), Ok(7), "the lender wrote a freed slot");
        assert_eq!(pool.in_use(), 0);
    });
}

#[test]
fn token_lent_record_is_freed_after_the_lender() {
    lent_record_is_freed_after_the_lender();
}

#[test]
fn token_record_reaches_a_poller_on_another_thread() {
    record_reaches_a_poller_on_another_thread();
}

#[test]
fn token_three_threads_claim_complete_exactly_once() {
    three_threads_claim_complete_exactly_once();
}

#[test]
fn token_free_list_never_hands_a_slot_to_two_owners() {
    free_list_never_hands_a_slot_to_two_owners();
}

/// Publishing the record with `Relaxed` lets the poller read it without a
/// happens-before edge from the poster's write: loom reports the race on
/// the record cell.
#[cfg(railyard_broken = "token_publish")]
#[test]
#[should_panic]
fn broken_token_publish() {
    record_reaches_a_poller_on_another_thread();
}

/// The same broken publish under `complete_with`: the lender reads the
/// record without a happens-before edge from the poster's write.
#[cfg(railyard_broken = "token_publish")]
#[test]
#[should_panic]
fn broken_token_publish_lent() {
    lent_record_is_freed_after_the_lender();
}

/// Without the ABA tag on the free-list head, a stale `next` is installed.
#[cfg(railyard_broken = "token_aba")]
#[test]
#[should_panic]
fn broken_token_aba() {
    free_list_never_hands_a_slot_to_two_owners();
}

/// The dedicated-poller shape through per-worker caches: the poster's cache
/// claims both slots, the poller's cache completes them and returns them to
/// the depot (one batch per slot at N = 2), then says so through a relaxed
/// word (a doorbell gives no C11 ordering), and the poster's empty cache
/// refills from the depot. Every claim must get a slot nobody else owns,
/// through the links the poller wrote: the poster ends up holding both
/// slots, each once.
fn cache_batches_reach_another_cache() {
    loom::model(|| {
        let pool = Arc::new(TokenPool::<u64>::new(2).unwrap());
        let mut poster = pool.cache::<2>();
        let a = poster.claim(1).unwrap();
        let b = poster.claim(2).unwrap();
        let done = Arc::new(AtomicU64::new(0));
        let (p, d) = (pool.clone(), done.clone());
        let poller = thread::spawn(move || {
            let mut c = p.cache::<2>();
            // Completion order b, a: the depot links a -> b, unlike the
            // slots' initial links, so a stale link is a wrong one.
            assert_eq!(c.complete(b), Ok(2));
            assert_eq!(c.complete(a), Ok(1));
            c.flush();
            d.store(1, Ordering::Relaxed);
        });
        while done.load(Ordering::Relaxed) == 0 {
            thread::yield_now();
        }
        let mut held: Vec<u64> = Vec::new();
        while held.len() < 2 {
            match poster.claim(3) {
                Ok(w) => {
                    assert!(
                        held.iter().all(|&h| h as u32 != w as u32),
                        "one slot, two owners"
                    );
                    held.push(w);
                }
                Err(e) => {
                    assert_eq!(e, TokenError::Exhausted);
                    thread::yield_now();
                }
            }
        }
        assert_eq!(
            poster.claim(4),
            Err(TokenError::Exhausted),
            "a slot appeared twice"
        );
        for w in held {
            assert!(poster.complete(w).is_ok());
        }
        poller.join().unwrap();
        drop(poster);
        assert_eq!(pool.in_use(), 0);
    });
}

#[test]
fn token_cache_batches_reach_another_cache() {
    cache_batches_reach_another_cache();
}

/// Pushing a batch with `Relaxed` publishes its links to nobody: a cache
/// that pops the batch can follow a stale link.
#[cfg(railyard_broken = "token_cache_relaxed_batch")]
#[test]
#[should_panic]
fn broken_token_cache_relaxed_batch() {
    cache_batches_reach_another_cache();
}
