//! Deterministic protocol tests from RFC 2849's test matrix, driving the
//! real sender ledger, receiver allocator and link state machine.
#![cfg(feature = "alloc")]
use railyard_core::credit::*;
use railyard_core::token::TokenRecord;
use railyard_core::wire::credit::{self as wire, CapabilityOfferV1, NegotiationResult, WireAmount};

const RX: SessionId = SessionId::new(1, 0xA11CE);
const WINDOW: [u64; 4] = [1 << 20, 15, 7, 7];

struct Pair {
    ledger: SenderLedger,
    ctl: SenderControl,
    alloc: ReceiverAllocator,
    epoch: u64,
}

/// Sender knows the receiver as peer 0; the receiver knows the sender as
/// peer 0. Both sides start the first epoch.
fn pair(capacity: [u64; 4]) -> Pair {
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 2,
        window: WINDOW,
    })
    .unwrap();
    let mut alloc = ReceiverAllocator::new(AllocatorConfig::new(RX, 2, 2, capacity)).unwrap();
    let epoch = alloc.open(0).unwrap();
    ctl.bind(&ledger, 0, RX, epoch).unwrap();
    Pair {
        ledger,
        ctl,
        alloc,
        epoch,
    }
}

impl Pair {
    fn e(&self) -> EntryId {
        self.ledger.entry(0, 0).unwrap()
    }
    fn avail(&self) -> Charge {
        self.ledger.available(self.e()).unwrap().0
    }
    fn grant(&mut self, add: Charge) -> CreditUpdate {
        self.alloc.grant(0, 0, &add).unwrap()
    }
    fn apply(&mut self, u: &CreditUpdate) -> Result<UpdateOutcome, UpdateError> {
        self.ctl.apply_update(&self.ledger, 0, u, 0)
    }
    fn report(&mut self) -> Result<allocator::UsageOutcome, AllocError> {
        let u = self.ctl.usage(&self.ledger, 0, 0, Charge::ZERO).unwrap();
        self.alloc.on_usage(0, &u)
    }
}

#[test]
fn duplicate_update_is_a_noop() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u1 = p.grant(Charge([8192, 2, 0, 2]));
    assert_eq!(p.apply(&u1), Ok(UpdateOutcome::Applied));
    let c = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(p.avail(), Charge([4096, 1, 0, 1]));
    // Retransmission of the same cumulative update mints nothing.
    assert_eq!(p.apply(&u1), Ok(UpdateOutcome::Duplicate));
    assert_eq!(p.avail(), Charge([4096, 1, 0, 1]));
    assert_eq!(p.ctl.metrics(&p.ledger).duplicate_updates, 1);
    assert_eq!(p.ledger.release(c), Ok(ReleaseOutcome::Released));
}

#[test]
fn reordered_updates_never_double_apply() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u1 = p.grant(Charge([4096, 1, 0, 1]));
    let u2 = p.grant(Charge([4096, 1, 0, 1]));
    assert_eq!(
        p.apply(&u2),
        Ok(UpdateOutcome::AppliedAfterGap { missed: 1 })
    );
    assert_eq!(p.apply(&u1), Ok(UpdateOutcome::Duplicate));
    // Cumulative totals: 8192, not 12288.
    assert_eq!(p.avail(), Charge([8192, 2, 0, 2]));
}

#[test]
fn lost_update_is_covered_by_the_next_cumulative_total() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let _lost = p.grant(Charge([4096, 1, 0, 1]));
    let u2 = p.grant(Charge([1000, 0, 0, 0]));
    assert!(matches!(
        p.apply(&u2),
        Ok(UpdateOutcome::AppliedAfterGap { missed: 1 })
    ));
    assert_eq!(p.avail(), Charge([5096, 1, 0, 1]));
    assert_eq!(p.ctl.metrics(&p.ledger).sequence_gaps, 1);
}

/// RFC 2849 "Rules", 5: a decreasing cumulative total rejects the update
/// (nothing changes, a protocol error is counted) without quarantining the
/// peer (rule 4 keeps quarantine for credit violations): dispatch goes on
/// and the next honest update applies.
#[test]
fn decreasing_total_is_rejected_and_counted_not_quarantined() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u1 = p.grant(Charge([8192, 2, 0, 2]));
    p.apply(&u1).unwrap();
    let mut bad = u1;
    bad.sequence += 1;
    bad.grants = bad.grants.with(Resource::DataBytes, 4096);
    assert_eq!(
        p.apply(&bad),
        Err(UpdateError::Decreasing(Resource::DataBytes))
    );
    let m = p.ctl.metrics(&p.ledger);
    assert_eq!((m.protocol_errors, m.violations), (1, 0));
    // The rejected update changed nothing: grants and availability as before.
    assert_eq!(
        p.ctl.entry_metrics(&p.ledger, 0, 0).unwrap().granted,
        [8192, 2, 0, 2]
    );
    assert_eq!(p.avail(), Charge([8192, 2, 0, 2]));
    // Not quarantined: dispatch still reserves, and the next honest update
    // (the rejected one's sequence was not consumed) applies.
    let r = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(1))
        .unwrap();
    r.rollback();
    let u2 = p.grant(Charge([4096, 0, 0, 0]));
    assert_eq!(u2.sequence, bad.sequence);
    assert_eq!(p.apply(&u2), Ok(UpdateOutcome::Applied));
    assert_eq!(p.avail(), Charge([12288, 2, 0, 2]));
    assert_eq!(p.ctl.metrics(&p.ledger).protocol_errors, 1);
}

#[test]
fn huge_grants_do_not_overflow_and_are_banked_beyond_the_window() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = CreditUpdate {
        receiver_session: RX,
        epoch: p.epoch,
        sequence: 1,
        grants: Totals::default()
            .with(Resource::DataBytes, u64::MAX)
            .with(Resource::RequestSlots, 100),
        ..Default::default()
    };
    assert_eq!(p.apply(&u), Ok(UpdateOutcome::Applied));
    // Only the tracking window is available; the rest is banked.
    assert_eq!(p.avail(), Charge([WINDOW[0], WINDOW[1], 0, 0]));
    let m = p.ctl.entry_metrics(&p.ledger, 0, 0).unwrap();
    assert_eq!(m.banked[0], u64::MAX - WINDOW[0]);
    assert_eq!(m.banked[1], 100 - WINDOW[1]);
    // Completions free window room; the next drain makes banked credit usable.
    let charge = Charge([0, 1, 0, 0]);
    let mut done = vec![];
    for _ in 0..WINDOW[1] {
        done.push(
            p.ledger
                .try_reserve(p.e(), &charge)
                .unwrap()
                .commit()
                .unwrap(),
        );
    }
    assert!(p.ledger.try_reserve(p.e(), &charge).is_err());
    for c in done.drain(..5) {
        assert_eq!(p.ledger.release(c), Ok(ReleaseOutcome::Released));
    }
    p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap(); // drains
    assert_eq!(p.avail().get(Resource::RequestSlots), 5);
    assert_eq!(p.ctl.metrics(&p.ledger).refused_ops, 0);
}

#[test]
fn receiver_usage_overflow_is_a_violation() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    p.grant(Charge([4096, 1, 0, 1]));
    let mut u = CreditUsage {
        receiver_session: RX,
        epoch: p.epoch,
        sequence: 1,
        ..Default::default()
    };
    u.consumed = Totals::default().with(Resource::DataBytes, u64::MAX);
    u.returned = Totals::default().with(Resource::DataBytes, 1);
    assert_eq!(
        p.alloc.on_usage(0, &u),
        Err(AllocError::Violation(Resource::DataBytes))
    );
    assert!(p.alloc.conserved());
    // Consumed more than granted is a violation too (a fresh pair).
    let mut q = pair([1 << 20, 16, 8, 8]);
    q.grant(Charge([4096, 1, 0, 1]));
    let mut u = CreditUsage {
        receiver_session: RX,
        epoch: q.epoch,
        sequence: 1,
        ..Default::default()
    };
    u.consumed = Totals::default().with(Resource::DataBytes, 4097);
    assert_eq!(
        q.alloc.on_usage(0, &u),
        Err(AllocError::Violation(Resource::DataBytes))
    );
}

/// RFC 2849 rule 5 on the receiver: a usage report whose cumulative total
/// went down is rejected and counted, changes nothing, and does not
/// quarantine the sender; its next honest report applies.
#[test]
fn receiver_decreasing_usage_is_rejected_not_quarantined() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([8192, 2, 0, 2]));
    p.apply(&u).unwrap();
    let c = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    p.ledger.release(c).unwrap();
    let first = p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    assert!(matches!(
        p.alloc.on_usage(0, &first),
        Ok(UsageOutcome::Applied(_))
    ));
    let free = p.alloc.metrics().free;
    let mut down = first;
    down.sequence += 1;
    down.consumed = down.consumed.with(Resource::DataBytes, 0);
    assert_eq!(
        p.alloc.on_usage(0, &down),
        Err(AllocError::Decreasing(Resource::DataBytes))
    );
    let m = p.alloc.metrics();
    assert_eq!((m.protocol_errors, m.violations, m.free), (1, 0, free));
    assert!(p.alloc.conserved());
    // Not quarantined: the receiver still grants, and the honest next
    // report (same sequence as the rejected one) applies.
    assert!(p.alloc.grant(0, 0, &Charge([4096, 0, 0, 0])).is_ok());
    let next = p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    assert_eq!(next.sequence, down.sequence);
    assert!(p.alloc.on_usage(0, &next).is_ok());
}

#[test]
fn epoch_mismatch_is_stale_and_changes_nothing() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let mut u = p.grant(Charge([4096, 1, 0, 1]));
    u.epoch += 1;
    assert_eq!(
        p.apply(&u),
        Err(UpdateError::EpochMismatch {
            ours: p.epoch,
            theirs: p.epoch + 1
        })
    );
    assert_eq!(p.avail(), Charge::ZERO);
    assert_eq!(p.ctl.metrics(&p.ledger).stale_updates, 1);
}

#[test]
fn receiver_restart_fences_the_old_session() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([8192, 2, 0, 2]));
    p.apply(&u).unwrap();
    let inflight = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    let pending = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(1024))
        .unwrap();
    // Receiver restarts with a new (larger) session.
    let rx2 = SessionId::new(2, 0xB0B);
    let mut alloc2 =
        ReceiverAllocator::new(AllocatorConfig::new(rx2, 2, 2, [1 << 20, 16, 8, 8])).unwrap();
    let epoch2 = alloc2.open(0).unwrap();
    // An update from the old incarnation is stale.
    let mut old = u;
    old.sequence += 1;
    p.ctl.bind(&p.ledger, 0, rx2, epoch2).unwrap();
    assert_eq!(
        p.ctl.apply_update(&p.ledger, 0, &old, 0),
        Err(UpdateError::SessionMismatch)
    );
    // The pending reservation cannot be handed off any more.
    assert_eq!(pending.commit().err(), Some(CommitError::EpochChanged));
    // The in-flight completion is fenced, not credited to the new session.
    assert_eq!(p.ledger.release(inflight), Ok(ReleaseOutcome::Fenced));
    let m = p.ctl.metrics(&p.ledger);
    assert_eq!(m.epoch_resets, 1);
    assert_eq!(m.fenced_inflight, [4096, 1, 0, 1]);
    // Nothing is available until the new session grants.
    assert_eq!(
        p.ledger.try_reserve(p.e(), &Charge::direct_write(1)).err(),
        Some(ReserveError::Closed)
    );
    let u2 = alloc2.grant(0, 0, &Charge([2048, 1, 0, 1])).unwrap();
    p.apply(&u2).unwrap();
    assert_eq!(p.avail(), Charge([2048, 1, 0, 1]));
}

#[test]
fn sender_restart_cannot_reuse_old_capacity_until_fenced() {
    let mut p = pair([8192, 4, 2, 2]);
    let u = p.grant(Charge([8192, 2, 0, 2]));
    p.apply(&u).unwrap();
    let _c = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    let old_usage = p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    // The sender restarts: the receiver opens a new epoch for it.
    let e2 = p.alloc.open(0).unwrap();
    assert_eq!(p.alloc.free(), [0, 2, 2, 0]);
    assert_eq!(p.alloc.metrics().fencing, [8192, 2, 0, 2]);
    // New sender state; the old epoch's report is stale at the receiver.
    let (l2, mut c2) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 2,
        window: WINDOW,
    })
    .unwrap();
    c2.bind(&l2, 0, RX, e2).unwrap();
    assert_eq!(p.alloc.on_usage(0, &old_usage), Err(AllocError::Stale));
    // Old capacity is not reusable before fencing.
    assert_eq!(
        p.alloc.grant(0, 0, &Charge([1, 0, 0, 0])).err(),
        Some(AllocError::Insufficient(Resource::DataBytes))
    );
    assert!(p.alloc.conserved());
    // Old QPs drained: capacity returns.
    assert_eq!(
        p.alloc.fence_complete(0, p.epoch),
        Ok(Charge([8192, 2, 0, 2]))
    );
    let u2 = p.alloc.grant(0, 0, &Charge([8192, 2, 0, 2])).unwrap();
    assert_eq!(u2.epoch, e2);
    c2.apply_update(&l2, 0, &u2, 0).unwrap();
    assert!(l2
        .try_reserve(l2.entry(0, 0).unwrap(), &Charge::direct_write(8192))
        .is_ok());
}

#[test]
fn old_completion_after_new_epoch_is_fenced() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([8192, 2, 0, 2]));
    p.apply(&u).unwrap();
    let old = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    let mut rec = TokenRecord {
        bytes: 4096,
        ..Default::default()
    };
    old.record_into(&mut rec).unwrap();
    let e2 = p.alloc.open(0).unwrap();
    p.ctl.bind(&p.ledger, 0, RX, e2).unwrap();
    let u2 = p.alloc.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    p.apply(&u2).unwrap();
    // The old completion releases from the record alone, and is fenced.
    assert_eq!(
        p.ledger.release_record(&mut rec),
        Ok(ReleaseOutcome::Fenced)
    );
    let usage = p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    assert_eq!(usage.released.get(Resource::DataBytes), Some(0));
    assert_eq!(usage.epoch, e2);
    assert_eq!(p.ctl.metrics(&p.ledger).fenced_ops, 1);
    // An old-epoch usage report cannot return the old capacity twice.
    assert!(matches!(
        p.alloc.on_usage(0, &usage),
        Ok(allocator::UsageOutcome::Applied(_))
    ));
    assert!(p.alloc.conserved());
}

#[test]
fn control_disconnect_while_payload_in_flight() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([8192, 2, 0, 2]));
    p.apply(&u).unwrap();
    let inflight = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    let mut link = CreditLink::new(CreditMode::Required);
    link.on(LinkEvent::Start).unwrap();
    link.on(LinkEvent::PeerCompatible(1)).unwrap();
    // Control channel drops.
    link.on(LinkEvent::StaleOrDisconnect).unwrap();
    p.ctl.mark_stale(&p.ledger, 0).unwrap();
    assert_eq!(
        link.gate(),
        Gate::Block {
            fallback_allowed: false
        }
    );
    assert_eq!(
        p.ledger.try_reserve(p.e(), &Charge::direct_write(1)).err(),
        Some(ReserveError::Closed)
    );
    // Payload already handed off still completes and is counted.
    assert_eq!(p.ledger.release(inflight), Ok(ReleaseOutcome::Released));
    // Reconnect: a newer update reopens.
    let u2 = p.grant(Charge([0, 1, 0, 0]));
    assert!(p.apply(&u2).is_ok());
    link.on(LinkEvent::UpdateAccepted).unwrap();
    assert_eq!(link.gate(), Gate::Reserve);
    assert_eq!(p.avail(), Charge([4096, 2, 0, 1]));
    // The release reaches the receiver and returns capacity.
    let free_before = p.alloc.free();
    assert!(p.report().is_ok());
    assert_eq!(p.alloc.free()[0], free_before[0] + 4096);
    assert_eq!(p.alloc.free()[1], free_before[1] + 1);
    // Consumer slots return through receiver consumption, not completion.
    assert_eq!(p.alloc.free()[3], free_before[3]);
    p.alloc.consumed(0, 0, &Charge([0, 0, 0, 1])).unwrap();
    assert_eq!(p.alloc.free()[3], free_before[3] + 1);
    assert!(p.alloc.conserved());
}

#[test]
fn freshness_expiry_marks_stale() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let mut u = p.grant(Charge([8192, 2, 0, 2]));
    u.freshness_ttl_ms = 10;
    p.ctl.apply_update(&p.ledger, 0, &u, 1_000_000).unwrap();
    assert_eq!(p.ctl.expire(&p.ledger, 5_000_000), Ok(0));
    assert_eq!(p.ctl.expire(&p.ledger, 11_000_000), Ok(1));
    assert!(!p.ctl.is_active(0));
    assert_eq!(
        p.ledger.try_reserve(p.e(), &Charge::direct_write(1)).err(),
        Some(ReserveError::Closed)
    );
}

#[test]
fn atomic_multi_resource_failure_takes_nothing() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    // Bytes and request slots granted, but no consumer slot.
    let u = p.grant(Charge([8192, 2, 0, 0]));
    p.apply(&u).unwrap();
    let err = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .err();
    assert_eq!(
        err,
        Some(ReserveError::Insufficient(
            ResourceSet::EMPTY.with(Resource::ConsumerSlots)
        ))
    );
    assert_eq!(p.avail(), Charge([8192, 2, 0, 0]));
    // Two resources short at once are both reported.
    let err = p
        .ledger
        .try_reserve(p.e(), &Charge::staged_write(9000))
        .err();
    let want = ResourceSet::EMPTY
        .with(Resource::DataBytes)
        .with(Resource::StagingSlots)
        .with(Resource::ConsumerSlots);
    assert_eq!(err, Some(ReserveError::Insufficient(want)));
    assert_eq!(p.avail(), Charge([8192, 2, 0, 0]));
    assert_eq!(p.ctl.metrics(&p.ledger).stalls, 2);
    // Typed backpressure from the failure.
    if let Some(ReserveError::Insufficient(ex)) = err {
        let b = BackpressureInfo::receiver_credit(0, 0, ex, 100, false);
        assert_eq!(b.source, PressureSource::ReceiverCredit);
        assert_eq!(b.exhausted.len(), 3);
    }
    // A dropped reservation is rolled back exactly.
    let r = p
        .ledger
        .try_reserve(p.e(), &Charge([4096, 1, 0, 0]))
        .unwrap();
    assert_eq!(p.avail(), Charge([4096, 1, 0, 0]));
    drop(r);
    assert_eq!(p.avail(), Charge([8192, 2, 0, 0]));
}

#[test]
fn unknown_peer_class_or_resource_is_rejected_up_front() {
    let (ledger, _ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 2,
        window: [1 << 20, 15, 0, 0],
    })
    .unwrap();
    assert_eq!(ledger.entry(2, 0), Err(KeyError::UnknownPeer(2)));
    assert_eq!(ledger.entry(0, 2), Err(KeyError::UnknownClass(2)));
    let e = ledger.entry(0, 0).unwrap();
    assert_eq!(
        ledger.try_reserve(e, &Charge::direct_write(1)).err(),
        Some(ReserveError::Key(KeyError::UnknownResource(
            Resource::ConsumerSlots
        )))
    );
    assert_eq!(
        ledger.try_reserve(e, &Charge([1 << 21, 0, 0, 0])).err(),
        Some(ReserveError::Key(KeyError::ChargeTooLarge(
            Resource::DataBytes
        )))
    );
    assert_eq!(
        SenderLedger::new(LedgerConfig {
            max_peers: 8192,
            max_classes: 2,
            window: [1, 1, 1, 1]
        })
        .err(),
        Some(ConfigError::TooManyEntries)
    );
    assert_eq!(
        SenderLedger::new(LedgerConfig {
            max_peers: 1,
            max_classes: 1,
            window: [u64::MAX, 1, 1, 1]
        })
        .err(),
        Some(ConfigError::WindowTooWide)
    );
}

#[test]
fn explicit_return_of_unused_credit() {
    let mut p = pair([16384, 16, 8, 8]);
    let u = p.grant(Charge([16384, 4, 0, 4]));
    p.apply(&u).unwrap();
    let c = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    let returned = p
        .ctl
        .return_unused(&p.ledger, 0, 0, Charge([u64::MAX; 4]))
        .unwrap();
    assert_eq!(returned, Charge([12288, 3, 0, 3]));
    assert_eq!(p.avail(), Charge::ZERO);
    assert_eq!(p.alloc.free(), [0, 12, 8, 4]);
    assert!(matches!(
        p.report(),
        Ok(allocator::UsageOutcome::Applied(Charge([12288, 3, 0, 3])))
    ));
    assert_eq!(p.alloc.free(), [12288, 15, 8, 7]);
    assert!(p.alloc.conserved());
    // A duplicate report returns nothing twice.
    let mut dup = p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    dup.sequence -= 1;
    assert_eq!(
        p.alloc.on_usage(0, &dup),
        Ok(allocator::UsageOutcome::Duplicate)
    );
    assert_eq!(p.alloc.free(), [12288, 15, 8, 7]);
    // The in-flight charge still releases normally.
    assert_eq!(p.ledger.release(c), Ok(ReleaseOutcome::Released));
    assert!(p.report().is_ok());
    assert_eq!(p.alloc.free(), [16384, 16, 8, 7]);
    assert_eq!(p.ctl.metrics(&p.ledger).returned, [12288, 3, 0, 3]);
}

#[test]
fn completion_never_mints_sender_credit() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([4096, 1, 0, 1]));
    p.apply(&u).unwrap();
    let c = p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(p.ledger.release(c), Ok(ReleaseOutcome::Released));
    p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    assert_eq!(p.avail(), Charge::ZERO);
    assert!(p
        .ledger
        .try_reserve(p.e(), &Charge::direct_write(1))
        .is_err());
}

#[test]
fn charge_records_into_and_releases_from_a_token_record() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([8192, 2, 2, 2]));
    p.apply(&u).unwrap();
    let c = p
        .ledger
        .try_reserve(p.e(), &Charge::staged_write(4096))
        .unwrap()
        .commit()
        .unwrap();
    let mut rec = TokenRecord {
        bytes: 4096,
        ..Default::default()
    };
    let shape = CommittedCharge::new_unchecked(c.entry().index(), c.generation(), c.charge());
    // Mismatched bytes are refused; the record is untouched and the charge
    // comes back.
    let mut wrong = TokenRecord {
        bytes: 1,
        ..Default::default()
    };
    let (err, c) = c.record_into(&mut wrong).unwrap_err();
    assert_eq!(err, RecordError::BytesMismatch);
    assert_eq!(wrong.holds, 0);
    c.record_into(&mut rec).unwrap();
    assert_eq!(rec.holds, TokenRecord::HOLDS_CREDIT);
    assert_eq!(CommittedCharge::from_record(&rec), Ok(shape));
    assert_eq!(
        p.ledger.release_record(&mut rec),
        Ok(ReleaseOutcome::Released)
    );
    let usage = p.ctl.usage(&p.ledger, 0, 0, Charge::ZERO).unwrap();
    assert_eq!(usage.released.get(Resource::StagingSlots), Some(1));
    // Unrecordable charges are refused.
    let big = CommittedCharge::new_unchecked(0, 1, Charge([1, 2, 0, 0]));
    assert_eq!(big.credit_key(), Err(RecordError::NotRecordable));
    assert_eq!(
        p.ledger.release_record(&mut TokenRecord::default()),
        Err(ReleaseError::NotHeld)
    );
}

#[test]
fn receiver_never_grants_beyond_capacity() {
    let mut p = pair([10_000, 4, 2, 2]);
    p.alloc.open(1).unwrap();
    p.grant(Charge([6000, 2, 0, 1]));
    assert_eq!(
        p.alloc.grant(1, 0, &Charge([5000, 1, 0, 1])).err(),
        Some(AllocError::Insufficient(Resource::DataBytes))
    );
    // All-or-nothing: nothing was carved by the refused grant.
    assert_eq!(p.alloc.free(), [4000, 2, 2, 1]);
    p.alloc.grant(1, 1, &Charge([4000, 2, 0, 1])).unwrap();
    assert_eq!(p.alloc.metrics().outstanding, [10_000, 4, 0, 2]);
    assert!(p.alloc.conserved());
    // A local consumption report cannot free more than outstanding.
    assert_eq!(
        p.alloc.consumed(1, 1, &Charge([0, 0, 0, 2])),
        Err(AllocError::OverRelease(Resource::ConsumerSlots))
    );
}

fn negotiate(mode: CreditMode, receiver_speaks: Option<(u16, u16)>) -> CreditLink {
    let offer = CapabilityOfferV1 {
        min_version: 1,
        max_version: 1,
        required: mode == CreditMode::Required,
        max_classes: 2,
        windows: Default::default(),
    };
    let mut link = CreditLink::new(mode);
    link.on(LinkEvent::Start).unwrap();
    if mode == CreditMode::Disabled {
        return link;
    }
    // An old receiver does not understand the offer at all.
    let answer = receiver_speaks.map(|ours| offer.answer(ours, 1, 1, 2, Default::default()));
    match answer {
        Some(a) if a.result == NegotiationResult::Accepted => {
            link.on(LinkEvent::PeerCompatible(a.version))
        }
        _ => link.on(LinkEvent::PeerUnsupported),
    }
    .unwrap();
    link
}

#[test]
fn unsupported_old_peer_optional_falls_back_to_legacy() {
    let link = negotiate(CreditMode::Optional, None);
    assert_eq!(link.state(), LinkState::Legacy);
    assert_eq!(link.capability(), Capability::OptionalLegacy);
    assert_eq!(link.gate(), Gate::Bypass);
    assert_eq!(link.legacy_fallbacks(), 1);
    // A peer speaking only a future version is unsupported too.
    let link = negotiate(CreditMode::Optional, Some((2, 3)));
    assert_eq!(link.state(), LinkState::Legacy);
}

#[test]
fn unsupported_old_peer_required_fails_never_infinite() {
    let mut link = negotiate(CreditMode::Required, None);
    assert_eq!(link.state(), LinkState::Failed);
    assert_eq!(link.capability(), Capability::Required);
    assert_eq!(link.gate(), Gate::Fail);
    assert!(link.on(LinkEvent::UpdateAccepted).is_err());
    // Required + compatible: only Active reserves; Stale and Fencing block.
    let mut link = negotiate(CreditMode::Required, Some((1, 1)));
    assert_eq!(link.capability(), Capability::Active(1));
    link.on(LinkEvent::StaleOrDisconnect).unwrap();
    assert_eq!(
        link.gate(),
        Gate::Block {
            fallback_allowed: false
        }
    );
    assert_eq!(link.capability(), Capability::Required);
    link.on(LinkEvent::NewSessionOrEpoch).unwrap();
    assert_eq!(link.state(), LinkState::Fencing(1));
    link.on(LinkEvent::Fenced).unwrap();
    assert_eq!(link.gate(), Gate::Reserve);
    link.on(LinkEvent::Violation).unwrap();
    assert_eq!(link.gate(), Gate::Fail);
    assert_eq!(link.violations(), 1);
}

#[test]
fn disabled_is_legacy_and_bypasses() {
    let link = negotiate(CreditMode::Disabled, None);
    assert_eq!(link.state(), LinkState::Legacy);
    assert_eq!(link.gate(), Gate::Bypass);
    assert_eq!(CreditLink::new(CreditMode::default()).gate(), Gate::Bypass);
}

#[test]
fn zero_data_credit_never_blocks_the_reopening_message() {
    let p = pair([1 << 20, 16, 8, 8]);
    // No data credit at all.
    assert_eq!(p.avail(), Charge::ZERO);
    let mut budget = ControlBudget::new(4, 1).unwrap();
    let mut held = vec![];
    while let Ok(permit) = budget.try_acquire(ControlKind::Health) {
        held.push(permit);
    }
    assert_eq!(held.len(), 3);
    assert!(budget.try_acquire(ControlKind::Usage).is_err());
    assert!(budget.try_acquire(ControlKind::Heartbeat).is_err());
    // The credit update that reopens the window still goes.
    let credit = budget.try_acquire(ControlKind::Credit).unwrap();
    assert!(budget.try_acquire(ControlKind::Reset).is_err());
    budget.complete(credit).unwrap();
    assert!(budget.try_acquire(ControlKind::Reset).is_ok());
    assert_eq!(budget.refused(ControlKind::Usage), 1);
    assert_eq!(ControlBudget::new(1, 2).err(), Some(BudgetError::BadConfig));
}

#[test]
fn update_survives_the_wire() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let u = p.grant(Charge([4096, 1, 0, 1]));
    let msg = wire::Message::CreditUpdate(wire::CreditUpdateV1::from_update(&u));
    let mut buf = [0u8; wire::MAX_MESSAGE_LEN];
    let n = wire::encode(&msg, &mut buf).unwrap();
    let wire::Message::CreditUpdate(back) = wire::decode(&buf[..n]).unwrap() else {
        panic!("wrong message type")
    };
    assert_eq!(back.to_update(), u);
    // Unknown optional resources from a newer receiver are ignored.
    let mut newer = back.clone();
    newer
        .grants
        .push(WireAmount {
            resource: 99,
            required: false,
            value: 5,
        })
        .unwrap();
    assert_eq!(newer.to_update(), u);
    assert_eq!(p.apply(&newer.to_update()), Ok(UpdateOutcome::Applied));
}

#[test]
fn binding_never_goes_back_to_an_old_epoch_or_session() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let old_epoch = p.epoch;
    let e2 = p.alloc.open(0).unwrap();
    p.ctl.bind(&p.ledger, 0, RX, e2).unwrap();
    assert_eq!(
        p.ctl.bind(&p.ledger, 0, RX, old_epoch),
        Err(UpdateError::EpochMismatch {
            ours: e2,
            theirs: old_epoch
        })
    );
    let rx2 = SessionId::new(2, 0xB0B);
    p.ctl.bind(&p.ledger, 0, rx2, 1).unwrap();
    assert_eq!(
        p.ctl.bind(&p.ledger, 0, RX, e2 + 1),
        Err(UpdateError::SessionMismatch)
    );
    assert_eq!(p.ctl.binding(0), Some((rx2, 1)));
    assert_eq!(p.ctl.metrics(&p.ledger).stale_updates, 2);
}

/// Regression (found by the `credit_ops` fuzz target): forged releases
/// (released > committed) must not let a later update push a field past its
/// window into its neighbour, nor make more available than granted. Since
/// releases are checked against what is outstanding, the forged release is
/// now refused outright.
#[test]
fn forged_releases_cannot_inflate_available_credit() {
    let mut p = pair([1 << 20, 16, 8, 8]);
    let e = p.e();
    let forged = CommittedCharge::new_unchecked(e.index(), 1, Charge([0, 1, 1, 0]));
    assert!(matches!(
        p.ledger.release(forged),
        Err(ReleaseError::NotOutstanding(_))
    ));
    let u = CreditUpdate {
        receiver_session: RX,
        epoch: p.epoch,
        sequence: 1,
        grants: Totals::default()
            .with(Resource::DataBytes, u64::MAX)
            .with(Resource::RequestSlots, u64::MAX)
            .with(Resource::StagingSlots, u64::MAX),
        ..Default::default()
    };
    p.apply(&u).unwrap();
    let m = p.ctl.entry_metrics(&p.ledger, 0, 0).unwrap();
    assert_eq!(m.available, [WINDOW[0], WINDOW[1], WINDOW[2], 0]);
    for k in 0..4 {
        assert!(m.available[k] <= m.granted[k]);
    }
}

#[test]
fn credit_key_resolves_only_for_the_bound_session() {
    let p = pair([1 << 20, 16, 8, 8]);
    let key = CreditKey {
        receiver_session: RX,
        sender_peer: 0,
        qos_class: 1,
    };
    assert_eq!(
        p.ctl.entry_for(&p.ledger, &key),
        Ok(p.ledger.entry(0, 1).unwrap())
    );
    let old = CreditKey {
        receiver_session: SessionId::new(0, 1),
        ..key
    };
    assert_eq!(
        p.ctl.entry_for(&p.ledger, &old),
        Err(UpdateError::SessionMismatch)
    );
    let unbound = CreditKey {
        sender_peer: 1,
        ..key
    };
    assert_eq!(
        p.ctl.entry_for(&p.ledger, &unbound),
        Err(UpdateError::NotBound)
    );
    let bad = CreditKey {
        qos_class: 9,
        ..key
    };
    assert_eq!(
        p.ctl.entry_for(&p.ledger, &bad),
        Err(UpdateError::Key(KeyError::UnknownClass(9)))
    );
}
