//! Budget, state machine and metrics edge cases.
#![cfg(feature = "alloc")]
use railyard_core::credit::*;

#[test]
fn permit_from_another_budget_is_refused_not_underflowed() {
    let mut a = ControlBudget::new(2, 0).unwrap();
    let mut b = ControlBudget::new(2, 0).unwrap();
    let p = a.try_acquire(ControlKind::Heartbeat).unwrap();
    assert_eq!(b.complete(p), Err(BudgetError::NotHeld));
    assert_eq!(b.in_flight(), 0);
    assert_eq!(a.in_flight(), 1);
    assert_eq!(a.sent(ControlKind::Heartbeat), 1);
}

#[test]
fn reserved_share_serves_only_window_reopening_kinds() {
    let mut b = ControlBudget::new(2, 2).unwrap();
    for k in [
        ControlKind::Usage,
        ControlKind::Heartbeat,
        ControlKind::Cancel,
        ControlKind::Health,
    ] {
        assert_eq!(b.try_acquire(k).err(), Some(BudgetError::Exhausted(k)));
    }
    let p1 = b.try_acquire(ControlKind::Return).unwrap();
    let p2 = b.try_acquire(ControlKind::Reset).unwrap();
    assert!(b.try_acquire(ControlKind::Credit).is_err());
    assert_eq!(p1.kind(), ControlKind::Return);
    b.complete(p1).unwrap();
    b.complete(p2).unwrap();
    assert_eq!(b.in_flight(), 0);
}

#[test]
fn invalid_transitions_are_typed_and_change_nothing() {
    let mut l = CreditLink::new(CreditMode::Optional);
    let e = l.on(LinkEvent::UpdateAccepted).unwrap_err();
    assert_eq!(e.from, LinkState::Disabled);
    assert_eq!(l.state(), LinkState::Disabled);
    l.on(LinkEvent::Start).unwrap();
    assert_eq!(
        l.gate(),
        Gate::Block {
            fallback_allowed: true
        }
    );
    assert!(l.on(LinkEvent::Fenced).is_err());
    assert_eq!(l.state(), LinkState::Negotiating);
    l.on(LinkEvent::PeerCompatible(1)).unwrap();
    l.on(LinkEvent::NewSessionOrEpoch).unwrap();
    assert_eq!(l.epoch_resets(), 1);
    assert_eq!(
        l.gate(),
        Gate::Block {
            fallback_allowed: true
        }
    );
    l.on(LinkEvent::Violation).unwrap();
    // Quarantine is terminal for the link: only a new link object recovers.
    for ev in [
        LinkEvent::UpdateAccepted,
        LinkEvent::Fenced,
        LinkEvent::NewSessionOrEpoch,
        LinkEvent::Start,
    ] {
        assert!(l.on(ev).is_err());
    }
    assert_eq!(l.capability(), Capability::Unsupported);
}

#[test]
fn metrics_are_bounded_and_add_up() {
    let s = SessionId(3);
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 2,
        window: [1 << 20, 15, 7, 7],
    })
    .unwrap();
    ctl.bind(&ledger, 0, s, 1).unwrap();
    ctl.bind(&ledger, 1, s, 1).unwrap();
    for (peer, class) in [(0, 0), (1, 1)] {
        let u = CreditUpdate {
            receiver_session: s,
            epoch: 1,
            sequence: 1,
            qos_class: class,
            grants: Totals::all([8192, 4, 0, 4]),
            ..Default::default()
        };
        ctl.apply_update(&ledger, peer, &u, 0).unwrap();
    }
    let e = ledger.entry(1, 1).unwrap();
    let c = ledger
        .try_reserve(e, &Charge::direct_write(1000))
        .unwrap()
        .commit()
        .unwrap();
    assert!(ledger.try_reserve(e, &Charge::direct_write(9000)).is_err());
    ledger.record_stall(e, 1500);
    ledger.release(c).unwrap();
    ctl.note_legacy_fallback();
    let m = ctl.metrics(&ledger);
    assert_eq!(m.granted, [16384, 8, 0, 8]);
    assert_eq!(m.consumed, [1000, 1, 0, 1]);
    assert_eq!(m.available, [15384, 7, 0, 7]);
    assert_eq!((m.stalls, m.stall_ns), (1, 1500));
    assert_eq!(m.legacy_fallbacks, 1);
    assert_eq!(m.updates_applied, 2);
    let em = ctl.entry_metrics(&ledger, 1, 1).unwrap();
    assert_eq!(em.released, [1000, 1, 0, 1]);
    // A control handle refuses another ledger.
    let (other, _) = SenderLedger::new(LedgerConfig::default()).unwrap();
    assert_eq!(ctl.mark_stale(&other, 0), Err(UpdateError::ForeignLedger));
}
