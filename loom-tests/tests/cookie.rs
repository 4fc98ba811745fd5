//! loom model of `railyard_core::token::TokenCookies`: a late read of a
//! completed token racing the next claimant's set of the same slot.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::token::TokenCookies;

/// Slot 0, sequence 1 (live) and then 3 (the slot's next claim).
const OLD: u64 = 1 << 32;
const NEW: u64 = 3 << 32;

/// The old token's completion reads its cookie while the slot's next
/// claimant sets its own: the reader gets the old value or nothing, never
/// the new one.
fn late_read_model() {
    loom::model(|| {
        let c = Arc::new(TokenCookies::new(1));
        c.set(OLD, 10);
        let r = {
            let c = c.clone();
            thread::spawn(move || c.get(OLD))
        };
        c.set(NEW, 20);
        let got = r.join().unwrap();
        assert!(
            got.is_none() || got == Some(10),
            "the old token read {got:?}"
        );
        assert_eq!(c.get(NEW), Some(20));
        assert_eq!(c.get(OLD), None);
    });
}

#[test]
fn a_late_read_never_takes_the_next_claimants_cookie() {
    late_read_model();
}

#[cfg(railyard_broken = "cookie_no_invalidate")]
#[test]
#[should_panic]
fn broken_cookie_no_invalidate() {
    late_read_model();
}
