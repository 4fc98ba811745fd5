//! loom models of the sender credit ledger (`railyard_core::credit::ledger`).
//!
//! Each model checks one invariant of the real ledger code; each has a
//! broken twin (a `railyard_broken` cfg inside core) that must be caught.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::credit::{
    Charge, CommittedCharge, CreditUpdate, EntryId, LedgerConfig, ReleaseError, ReleaseOutcome,
    Resource, SenderControl, SenderLedger, SessionId, Totals,
};

const RX: SessionId = SessionId::new(1, 1);

/// A 1×1 ledger whose only entry has been granted `bytes` and `slots` in epoch 1.
fn granted(bytes: u64, slots: u64) -> (Arc<SenderLedger>, SenderControl, EntryId) {
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 1,
        max_classes: 1,
        window: [7, 3, 0, 0],
    })
    .unwrap();
    ctl.bind(&ledger, 0, RX, 1).unwrap();
    let u = CreditUpdate {
        receiver_session: RX,
        epoch: 1,
        sequence: 1,
        grants: Totals::default()
            .with(Resource::DataBytes, bytes)
            .with(Resource::RequestSlots, slots),
        ..Default::default()
    };
    ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    let e = ledger.entry(0, 0).unwrap();
    (Arc::new(ledger), ctl, e)
}

fn concurrent_reservations_model() {
    loom::model(|| {
        // 3 bytes, 2 slots: only one charge of (2 bytes, 1 slot) fits.
        let (ledger, _ctl, e) = granted(3, 2);
        let charge = Charge([2, 1, 0, 0]);
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let l = ledger.clone();
                thread::spawn(move || match l.try_reserve(e, &charge) {
                    Ok(r) => {
                        r.commit().unwrap();
                        1u64
                    }
                    Err(_) => 0,
                })
            })
            .collect();
        let won: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(
            won * 2 <= 3,
            "{won} reservations of 2 bytes from a 3-byte grant"
        );
        let (avail, _) = ledger.available(e).unwrap();
        assert_eq!(
            avail,
            Charge([3 - 2 * won, 2 - won, 0, 0]),
            "available != grant - consumed"
        );
    });
}

/// Concurrent reservations never exceed the grant, and available is exactly
/// grant − consumed afterwards.
#[test]
fn concurrent_reservations_never_exceed_the_grant() {
    concurrent_reservations_model();
}

/// Broken twin: check-then-act without CAS overdraws.
#[cfg(railyard_broken = "credit_check_then_act")]
#[should_panic]
#[test]
fn broken_credit_check_then_act() {
    concurrent_reservations_model();
}

fn partial_visibility_model() {
    loom::model(|| {
        let (ledger, _ctl, e) = granted(2, 1);
        let l = ledger.clone();
        let reserver = thread::spawn(move || {
            // Reserve both resources, then roll back (drop).
            let r = l.try_reserve(e, &Charge([2, 1, 0, 0]));
            drop(r);
        });
        let l = ledger.clone();
        let observer = thread::spawn(move || {
            for _ in 0..2 {
                let (a, _) = l.available(e).unwrap();
                let v = (a.get(Resource::DataBytes), a.get(Resource::RequestSlots));
                assert!(
                    v == (2, 1) || v == (0, 0),
                    "partially visible reservation {v:?}"
                );
            }
        });
        reserver.join().unwrap();
        observer.join().unwrap();
        assert_eq!(ledger.available(e).unwrap().0, Charge([2, 1, 0, 0]));
    });
}

/// A multi-resource reservation is never partially visible: an observer
/// sees all of the charge taken or none of it.
#[test]
fn reserve_is_never_partially_visible() {
    partial_visibility_model();
}

/// Broken twin: one CAS per resource exposes a half-taken charge.
#[cfg(railyard_broken = "credit_partial_reserve")]
#[should_panic]
#[test]
fn broken_credit_partial_reserve() {
    partial_visibility_model();
}

fn old_epoch_release_model() {
    loom::model(|| {
        let (ledger, mut ctl, e) = granted(4, 2);
        let committed = ledger
            .try_reserve(e, &Charge([1, 1, 0, 0]))
            .unwrap()
            .commit()
            .unwrap();
        let l = ledger.clone();
        let completion = thread::spawn(move || l.release(committed));
        let l = ledger.clone();
        let control = thread::spawn(move || {
            // The receiver moved to epoch 2: fence, apply its first grant,
            // and dispatch one charge of the same shape in the new epoch.
            ctl.bind(&l, 0, RX, 2).unwrap();
            let u = CreditUpdate {
                receiver_session: RX,
                epoch: 2,
                sequence: 1,
                grants: Totals::default()
                    .with(Resource::DataBytes, 4)
                    .with(Resource::RequestSlots, 2),
                ..Default::default()
            };
            ctl.apply_update(&l, 0, &u, 0).unwrap();
            let fresh = l
                .try_reserve(e, &Charge([1, 1, 0, 0]))
                .unwrap()
                .commit()
                .unwrap();
            let usage = ctl.usage(&l, 0, 0, Charge::ZERO).unwrap();
            (ctl, usage, fresh)
        });
        let outcome = completion.join().unwrap();
        let (mut ctl, first, _fresh) = control.join().unwrap();
        assert!(
            matches!(
                outcome,
                Ok(ReleaseOutcome::Released | ReleaseOutcome::Fenced)
            ),
            "old completion refused: {outcome:?}"
        );
        let last = ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
        for usage in [first, last] {
            assert_eq!(
                usage.released.get(Resource::DataBytes),
                Some(0),
                "an epoch-1 completion was reported in epoch 2 ({outcome:?})"
            );
            assert_eq!(usage.consumed.get(Resource::DataBytes), Some(1));
        }
    });
}

/// A completion from an old epoch never touches the new epoch's accounting
/// (not even its outstanding commits), whichever way it races the fencing.
#[test]
fn old_epoch_release_never_touches_new_epoch() {
    old_epoch_release_model();
}

/// Broken twin: release without the generation / tag check.
#[cfg(railyard_broken = "credit_untagged_release")]
#[should_panic]
#[test]
fn broken_credit_untagged_release() {
    old_epoch_release_model();
}

fn double_release_model() {
    loom::model(|| {
        let (ledger, mut ctl, e) = granted(4, 2);
        let committed = ledger
            .try_reserve(e, &Charge([2, 1, 0, 0]))
            .unwrap()
            .commit()
            .unwrap();
        // A duplicated completion: the same charge rebuilt from its parts.
        let dup = CommittedCharge::new_unchecked(
            committed.entry().index(),
            committed.generation(),
            committed.charge(),
        );
        let l = ledger.clone();
        let a = thread::spawn(move || l.release(committed));
        let l = ledger.clone();
        let b = thread::spawn(move || l.release(dup));
        let outcomes = [a.join().unwrap(), b.join().unwrap()];
        let released = outcomes
            .iter()
            .filter(|o| **o == Ok(ReleaseOutcome::Released))
            .count();
        assert_eq!(released, 1, "released {released} times: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .any(|o| matches!(o, Err(ReleaseError::NotOutstanding(_)))),
            "{outcomes:?}"
        );
        let usage = ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
        assert_eq!(usage.released.get(Resource::DataBytes), Some(2));
        assert_eq!(usage.released.get(Resource::RequestSlots), Some(1));
    });
}

/// Two completions racing to release the same committed charge: exactly
/// one releases it, the other is refused, and the report says "once".
#[test]
fn a_charge_is_released_exactly_once() {
    double_release_model();
}

/// Broken twin: release without the outstanding check (the old code).
#[cfg(railyard_broken = "credit_double_release")]
#[should_panic]
#[test]
fn broken_credit_double_release() {
    double_release_model();
}

fn commit_order_model() {
    loom::model(|| {
        let (ledger, mut ctl, e) = granted(4, 2);
        let l = ledger.clone();
        let worker = thread::spawn(move || {
            l.try_reserve(e, &Charge([1, 1, 0, 0]))
                .unwrap()
                .commit()
                .unwrap()
        });
        let l = ledger.clone();
        let control = thread::spawn(move || {
            let u = ctl.usage(&l, 0, 0, Charge::ZERO).unwrap();
            (ctl, u)
        });
        let _held = worker.join().unwrap();
        let (mut ctl, during) = control.join().unwrap();
        let after = ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
        for (when, u) in [("during", during), ("after", after)] {
            assert_eq!(
                u.released.get(Resource::DataBytes),
                Some(0),
                "{when}: an unreleased commit was reported released"
            );
        }
        assert_eq!(after.consumed.get(Resource::DataBytes), Some(1));
    });
}

/// A usage report racing a commit never counts the commit as released
/// (released is derived as consumed - outstanding; the commit joins
/// outstanding before consumed).
#[test]
fn commit_is_never_reported_released() {
    commit_order_model();
}

/// Broken twin: the commit's two steps in the other order.
#[cfg(railyard_broken = "credit_commit_order")]
#[should_panic]
#[test]
fn broken_credit_commit_order() {
    commit_order_model();
}

fn racing_update_model() {
    loom::model(|| {
        let (ledger, mut ctl, e) = granted(3, 2);
        let charge = Charge([2, 1, 0, 0]);
        let reservers: Vec<_> = (0..2)
            .map(|_| {
                let l = ledger.clone();
                thread::spawn(move || match l.try_reserve(e, &charge) {
                    Ok(r) => {
                        r.commit().unwrap();
                        1u64
                    }
                    Err(_) => 0,
                })
            })
            .collect();
        let l = ledger.clone();
        let control = thread::spawn(move || {
            // The receiver raises the cumulative grant to 5 bytes / 3 slots.
            let u = CreditUpdate {
                receiver_session: RX,
                epoch: 1,
                sequence: 2,
                grants: Totals::default()
                    .with(Resource::DataBytes, 5)
                    .with(Resource::RequestSlots, 3),
                ..Default::default()
            };
            ctl.apply_update(&l, 0, &u, 0).unwrap();
            ctl
        });
        let won: u64 = reservers.into_iter().map(|h| h.join().unwrap()).sum();
        let mut ctl = control.join().unwrap();
        let (avail, _) = ledger.available(e).unwrap();
        assert!(
            won * 2 <= 5,
            "{won} reservations of 2 bytes from a 5-byte grant"
        );
        assert_eq!(
            avail,
            Charge([5 - 2 * won, 3 - won, 0, 0]),
            "credit not conserved"
        );
        let usage = ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
        assert_eq!(usage.consumed.get(Resource::DataBytes), Some(2 * won));
    });
}

/// Reservations racing a grant update: consumption never exceeds the grant
/// and available + consumed == granted exactly.
#[test]
fn reservations_racing_an_update_conserve_credit() {
    racing_update_model();
}

/// Broken twin: check-then-act also loses credit against a racing update.
#[cfg(railyard_broken = "credit_check_then_act")]
#[should_panic]
#[test]
fn broken_credit_check_then_act_racing_update() {
    racing_update_model();
}
