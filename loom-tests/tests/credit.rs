//! loom models of the sender credit ledger (`railyard_core::credit::ledger`).
//!
//! Each model checks one invariant of the real ledger code; each has a
//! broken twin (a `railyard_broken` cfg inside core) that must be caught.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::credit::{
    Charge, CreditUpdate, EntryId, LedgerConfig, ReleaseOutcome, Resource, SenderControl,
    SenderLedger, SessionId, Totals,
};

const RX: SessionId = SessionId(1);

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
        let completion = thread::spawn(move || l.release(&committed).unwrap());
        let l = ledger.clone();
        let control = thread::spawn(move || {
            // The receiver moved to epoch 2: fence, then apply its first grant.
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
            ctl.usage(&l, 0, 0, Charge::ZERO).unwrap()
        });
        let outcome = completion.join().unwrap();
        let usage = control.join().unwrap();
        assert_ne!(outcome, ReleaseOutcome::Refused);
        assert_eq!(
            usage.released.get(Resource::DataBytes),
            Some(0),
            "an epoch-1 completion was reported in epoch 2 ({outcome:?})"
        );
        assert_eq!(usage.consumed.get(Resource::DataBytes), Some(0));
    });
}

/// A completion from an old epoch never touches the new epoch's accounting,
/// whichever way it races the fencing.
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
