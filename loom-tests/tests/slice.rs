//! loom: completion versus retry on one slice.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::slice::{Outcome, SliceError, SliceState, SliceTable};

/// The poller settles attempt 1 while the timeout path retries attempt 1:
/// exactly one wins, and the slice never ends both succeeded and retried.
fn completion_vs_retry_exactly_one_owner_wins() {
    loom::model(|| {
        let t = Arc::new(SliceTable::new(1).unwrap());
        let a1 = t.open(0).unwrap();
        let t2 = t.clone();
        let poller = thread::spawn(move || t2.settle(a1, Outcome::Success));
        let retried = t.retry(a1, 3);
        let settled = poller.join().unwrap();
        let st = t.status(0).unwrap();
        match (settled, retried) {
            (Ok(SliceState::Succeeded), Err(SliceError::AlreadyTerminal)) => {
                assert_eq!(
                    (st.state, st.retries, st.attempt),
                    (SliceState::Succeeded, 0, a1.attempt)
                );
            }
            (Err(SliceError::StaleAttempt), Ok(r)) => {
                let a2 = r.attempt().unwrap();
                assert_eq!(
                    (st.state, st.retries, st.attempt),
                    (SliceState::Pending, 1, a2.attempt)
                );
            }
            other => panic!("both or neither owner won: {other:?}"),
        }
    });
}

#[test]
fn slice_completion_vs_retry_exactly_one_owner_wins() {
    completion_vs_retry_exactly_one_owner_wins();
}

/// A load-check-store instead of a CAS lets both owners pass the check.
#[cfg(railyard_broken = "slice_check_then_act")]
#[test]
#[should_panic]
fn broken_slice_check_then_act() {
    completion_vs_retry_exactly_one_owner_wins();
}
