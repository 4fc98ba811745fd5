//! loom models of the rail selector's charges (RFC 4534): NIC in-flight
//! bytes and the per-peer ledger under concurrent charge, release and
//! idle reclamation.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector, Variant};

fn selector(idle_reclaim_ns: u64, history_target: u32) -> Selector {
    let cfg = RailConfig {
        peer_accounting: true,
        variant: Variant::V3,
        probe_interval: 0,
        peer_slots: 2,
        history_target,
        idle_reclaim_ns,
        ..RailConfig::default()
    };
    Selector::new(&[DeviceSpec::new(1_000_000_000)], cfg).unwrap()
}

fn peer_inflight(sel: &Selector) -> u64 {
    sel.peer_view(0, 1).map_or(0, |v| v.inflight)
}

/// A release racing a charge of the same NIC and peer: both counters stay
/// within [0, total charged] throughout and end at exactly zero, with no
/// refusal counted.
fn charge_release_model() {
    loom::model(|| {
        let sel = Arc::new(selector(u64::MAX, 2));
        let first = sel.charge(0, Some(1), 100, 0).unwrap();
        let s = sel.clone();
        let releaser = thread::spawn(move || s.release(first, Outcome::Failed, 1));
        let s = sel.clone();
        let charger = thread::spawn(move || {
            let c = s.charge(0, Some(1), 50, 1).unwrap();
            assert_eq!(c.peer(), Some(1));
            let (nic, peer) = (s.nic_inflight(0).unwrap(), peer_inflight(&s));
            assert!((50..=150).contains(&nic), "NIC in-flight {nic}");
            assert!((50..=150).contains(&peer), "peer in-flight {peer}");
            s.release(c, Outcome::Completed { post_ns: 1 }, 2)
        });
        assert_eq!(releaser.join().unwrap(), Ok(()));
        assert_eq!(charger.join().unwrap(), Ok(()));
        assert_eq!(sel.nic_inflight(0).unwrap(), 0, "NIC in-flight consistent");
        assert_eq!(peer_inflight(&sel), 0, "peer in-flight consistent");
        let k = sel.counters();
        assert_eq!((k.nic_accounting_errors, k.peer_accounting_errors), (0, 0));
    });
}

#[test]
fn concurrent_charge_and_release_keep_nic_and_peer_inflight_consistent() {
    charge_release_model();
}

#[cfg(railyard_broken = "rail_racy_release")]
#[test]
#[should_panic]
fn broken_rail_racy_release() {
    charge_release_model();
}

/// Idle reclamation racing the release of the entry's last charge never
/// takes the entry while bytes are still charged to it: the release always
/// succeeds and nothing is counted as an accounting error.
fn reclaim_release_model() {
    loom::model(|| {
        // Everything is idle at once and the target keeps nothing.
        let sel = Arc::new(selector(0, 0));
        let charge = sel.charge(0, Some(1), 100, 0).unwrap();
        assert_eq!(charge.peer(), Some(1));
        let s = sel.clone();
        let releaser = thread::spawn(move || s.release(charge, Outcome::Failed, 1));
        let s = sel.clone();
        let reclaimer = thread::spawn(move || s.reclaim_idle(1));
        assert_eq!(releaser.join().unwrap(), Ok(()));
        reclaimer.join().unwrap();
        assert_eq!(sel.nic_inflight(0).unwrap(), 0);
        assert_eq!(peer_inflight(&sel), 0);
        assert_eq!(
            sel.counters().peer_accounting_errors,
            0,
            "no residue, no lost entry"
        );
    });
}

#[test]
fn reclaim_never_takes_an_entry_with_charged_bytes() {
    reclaim_release_model();
}

#[cfg(railyard_broken = "rail_unpin_first")]
#[test]
#[should_panic]
fn broken_rail_unpin_first() {
    reclaim_release_model();
}

/// Two first charges of the same new peer on the same device race to
/// insert it: the device never holds two entries for one peer, and each
/// charge is either on that one entry or (insert lock busy) at NIC scope.
fn first_charges_model() {
    loom::model(|| {
        let sel = Arc::new(selector(u64::MAX, 2));
        let spawn = |bytes: u32| {
            let s = sel.clone();
            thread::spawn(move || s.charge(0, Some(1), bytes, 0).unwrap())
        };
        let (a, b) = (spawn(100), spawn(50));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert!(sel.peer_entries(0) <= 1, "one entry per peer and device");
        let on_peer: u64 = [&a, &b]
            .iter()
            .filter(|c| c.peer().is_some())
            .map(|c| u64::from(c.bytes()))
            .sum();
        assert_eq!(peer_inflight(&sel), on_peer);
        assert_eq!(sel.nic_inflight(0).unwrap(), 150);
        sel.release(a, Outcome::Failed, 1).unwrap();
        sel.release(b, Outcome::Failed, 1).unwrap();
        assert_eq!((sel.nic_inflight(0).unwrap(), peer_inflight(&sel)), (0, 0));
    });
}

#[test]
fn a_peer_never_gets_two_entries_on_one_device() {
    first_charges_model();
}

#[cfg(railyard_broken = "rail_insert_without_rescan")]
#[test]
#[should_panic]
fn broken_rail_insert_without_rescan() {
    first_charges_model();
}
