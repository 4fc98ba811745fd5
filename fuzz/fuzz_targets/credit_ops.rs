//! Structured update / reserve / commit / release / report / fence /
//! restart sequences against the real sender ledger and receiver allocator.
//! Honest traffic with receiver peer 0 (delivered with loss, duplication
//! and reordering, across receiver restarts) is mixed with forged updates
//! and releases aimed at receiver peer 1, duplicated releases, replayed
//! negotiations of superseded receiver incarnations, stale closes and
//! stale fence confirmations. Invariants after every step: the allocator
//! conserves capacity, no entry has more available + consumed than
//! granted, honest traffic never looks like a violation, an honest release
//! is never refused, a release is never accepted twice, no superseded
//! session can be bound again, a stale close or fence changes nothing, an
//! empty charge never reserves, and nothing panics.
#![no_main]
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use railyard_core::credit::*;

#[derive(Arbitrary, Debug)]
enum Op {
    Grant {
        class: u8,
        add: [u16; 4],
    },
    Deliver {
        pick: u8,
        keep: bool,
    },
    Reserve {
        class: u8,
        charge: [u16; 4],
    },
    Commit {
        pick: u8,
    },
    Rollback {
        pick: u8,
    },
    Release {
        pick: u8,
    },
    Report {
        class: u8,
        deliver: bool,
    },
    Return {
        class: u8,
        max: [u16; 4],
    },
    Consume {
        class: u8,
        amount: [u8; 2],
    },
    DoubleRelease {
        pick: u8,
    },
    Stale,
    NewEpoch,
    Fence {
        back: u8,
    },
    Close {
        back: u8,
    },
    RestartReceiver,
    ReplayOldSession {
        pick: u8,
        epoch: u8,
    },
    Expire {
        now_ms: u16,
    },
    ForgedUpdate {
        class: u8,
        seq: u8,
        epoch: u8,
        totals: [u64; 4],
        present: u8,
    },
    ForgedRelease {
        class: u8,
        generation: u16,
        charge: [u16; 4],
    },
}

const EVIL: SessionId = SessionId::new(1, 66);

fn receiver(incarnation: u64) -> ReceiverAllocator {
    let s = SessionId::new(incarnation, 7);
    ReceiverAllocator::new(AllocatorConfig::new(s, 1, 2, [1 << 18, 32, 8, 8])).unwrap()
}

fuzz_target!(|ops: Vec<Op>| {
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 2,
        window: [1 << 20, 63, 15, 15],
    })
    .unwrap();
    let mut incarnation = 1u64;
    let mut alloc = receiver(incarnation);
    let epoch = alloc.open(0).unwrap();
    ctl.bind(&ledger, 0, alloc.session(), epoch).unwrap();
    ctl.bind(&ledger, 1, EVIL, 1).unwrap();
    // Sessions of superseded receiver incarnations (bounded).
    let mut old_sessions: Vec<SessionId> = Vec::new();
    // Whether the receiver's current epoch for peer 0 is open (not closed).
    let mut rx_open = true;
    let mut inbox: Vec<CreditUpdate> = Vec::new();
    let mut reservations: Vec<Reservation<'_>> = Vec::new();
    let mut committed: Vec<CommittedCharge> = Vec::new();
    // Consumer/staging units committed to receiver 0 in its current epoch,
    // not yet consumed by the receiver's consumer (keeps Consume honest).
    let mut unconsumed = [[0u64; 4]; 2];
    for op in ops.into_iter().take(256) {
        match op {
            Op::Grant { class, add } => {
                let add = Charge(add.map(u64::from));
                if let Ok(u) = alloc.grant(0, (class % 2) as u32, &add) {
                    if inbox.len() < 8 {
                        inbox.push(u);
                    }
                }
            }
            Op::Deliver { pick, keep } => {
                if inbox.is_empty() {
                    continue;
                }
                let i = pick as usize % inbox.len();
                let u = if keep { inbox[i] } else { inbox.remove(i) };
                match ctl.apply_update(&ledger, 0, &u, 0) {
                    Ok(_) => {}
                    Err(UpdateError::EpochMismatch { ours, theirs }) if theirs > ours => {
                        ctl.bind(&ledger, 0, alloc.session(), theirs).unwrap();
                        let _ = ctl.apply_update(&ledger, 0, &u, 0);
                    }
                    Err(e) => assert!(!e.is_protocol_error(), "honest update rejected as {e}"),
                }
            }
            Op::Reserve { class, charge } => {
                if reservations.len() >= 16 {
                    continue;
                }
                let peer = (class / 2 % 2) as u32;
                if let Ok(e) = ledger.entry(peer, (class % 2) as u32) {
                    let charge = Charge(charge.map(u64::from));
                    match ledger.try_reserve(e, &charge) {
                        Ok(r) => {
                            assert_ne!(charge, Charge::ZERO, "an empty charge reserved");
                            reservations.push(r);
                        }
                        Err(err) if charge == Charge::ZERO => {
                            assert_eq!(err, ReserveError::Key(KeyError::EmptyCharge));
                        }
                        Err(_) => {}
                    }
                }
            }
            Op::Commit { pick } => {
                if reservations.is_empty() {
                    continue;
                }
                let r = reservations.swap_remove(pick as usize % reservations.len());
                let (peer, class) = (r.entry().index() / 2, r.entry().index() % 2);
                if let Ok(c) = r.commit() {
                    let live = Some((alloc.session(), alloc.epoch(0).unwrap()));
                    if peer == 0 && rx_open && ctl.binding(0) == live {
                        unconsumed[class as usize][2] += c.charge().0[2];
                        unconsumed[class as usize][3] += c.charge().0[3];
                    }
                    committed.push(c);
                }
            }
            Op::Rollback { pick } => {
                if !reservations.is_empty() {
                    reservations
                        .swap_remove(pick as usize % reservations.len())
                        .rollback();
                }
            }
            Op::Release { pick } => {
                if committed.is_empty() {
                    continue;
                }
                let c = committed.swap_remove(pick as usize % committed.len());
                // Forged releases aimed at peer 1 may have taken its
                // outstanding credit; peer 0's releases are all honest.
                let honest = c.entry().index() / 2 == 0;
                match ledger.release(c) {
                    Ok(_) => {}
                    Err(ReleaseError::NotOutstanding(_)) if !honest => {}
                    Err(e) => panic!("honest release refused: {e}"),
                }
            }
            Op::DoubleRelease { pick } => {
                if committed.is_empty() {
                    continue;
                }
                let c = committed.swap_remove(pick as usize % committed.len());
                let (entry, generation, charge) = (c.entry(), c.generation(), c.charge());
                let honest = entry.index() / 2 == 0;
                let first = ledger.release(c);
                assert!(
                    first.is_ok() || !honest,
                    "honest release refused: {first:?}"
                );
                // Only when nothing else is outstanding in that entry and
                // epoch (else a duplicate may take another charge's share,
                // which the credit_fences proptest covers): the duplicate
                // takes nothing.
                let alone = !committed
                    .iter()
                    .any(|k| k.entry() == entry && k.generation() == generation);
                if alone {
                    let dup = CommittedCharge::new_unchecked(entry.index(), generation, charge);
                    let second = ledger.release(dup);
                    assert!(
                        matches!(
                            second,
                            Err(ReleaseError::NotOutstanding(_)) | Ok(ReleaseOutcome::Fenced)
                        ),
                        "a charge was released twice: {first:?} then {second:?}"
                    );
                }
            }
            Op::Report { class, deliver } => {
                if let Ok(u) = ctl.usage(&ledger, 0, (class % 2) as u32, Charge::ZERO) {
                    if deliver {
                        let r = alloc.on_usage(0, &u);
                        assert!(
                            !matches!(r, Err(AllocError::Violation(_) | AllocError::Decreasing(_))),
                            "honest usage is a violation: {r:?}"
                        );
                    }
                }
            }
            Op::Return { class, max } => {
                let _ =
                    ctl.return_unused(&ledger, 0, (class % 2) as u32, Charge(max.map(u64::from)));
            }
            Op::Consume { class, amount } => {
                let c = (class % 2) as usize;
                let add = Charge([
                    0,
                    0,
                    (amount[0] as u64).min(unconsumed[c][2]),
                    (amount[1] as u64).min(unconsumed[c][3]),
                ]);
                alloc
                    .consumed(0, c as u32, &add)
                    .expect("honest local consumption");
                unconsumed[c][2] -= add.0[2];
                unconsumed[c][3] -= add.0[3];
            }
            Op::Stale => ctl.mark_stale(&ledger, 0).unwrap(),
            Op::NewEpoch => {
                let e = alloc.open(0).unwrap();
                unconsumed = [[0; 4]; 2];
                rx_open = true;
                // Usually the sender learns from the next update; sometimes now.
                if e % 2 == 0 {
                    ctl.bind(&ledger, 0, alloc.session(), e).unwrap();
                }
            }
            Op::Fence { back } => {
                // The caller asserts old QPs are drained; in this model old
                // work holds no receiver memory the invariants look at. A
                // confirmation older than the newest fenced epoch frees
                // nothing.
                let e = alloc.epoch(0).unwrap().saturating_sub(u64::from(back % 3));
                let before = alloc.metrics();
                if let Err(AllocError::EpochMismatch { .. } | AllocError::Zero(_)) =
                    alloc.fence_complete(0, e)
                {
                    assert_eq!(alloc.metrics(), before, "a stale fence changed something");
                }
            }
            Op::Close { back } => {
                let cur = alloc.epoch(0).unwrap();
                let e = cur.saturating_sub(u64::from(back % 3));
                let before = alloc.metrics();
                match alloc.close(0, e) {
                    Ok(()) => {
                        assert_eq!(e, cur);
                        rx_open = false;
                    }
                    Err(AllocError::EpochMismatch { .. } | AllocError::Zero(_)) => {
                        assert_ne!(e, cur);
                        assert_eq!(alloc.metrics(), before, "a stale close changed something");
                    }
                    Err(err) => panic!("close: {err}"),
                }
                unconsumed = [[0; 4]; 2];
            }
            Op::RestartReceiver => {
                // A new receiver incarnation with a larger session id. Old
                // work is fenced at the sender; the new receiver's capacity
                // starts whole.
                if old_sessions.len() < 8 {
                    old_sessions.push(alloc.session());
                }
                incarnation += 1;
                alloc = receiver(incarnation);
                let e = alloc.open(0).unwrap();
                ctl.bind(&ledger, 0, alloc.session(), e).unwrap();
                inbox.clear();
                unconsumed = [[0; 4]; 2];
                rx_open = true;
            }
            Op::ReplayOldSession { pick, epoch } => {
                if old_sessions.is_empty() {
                    continue;
                }
                let s = old_sessions[pick as usize % old_sessions.len()];
                let epoch = u64::from(epoch).max(1);
                let before = ctl.binding(0);
                assert_eq!(
                    ctl.bind(&ledger, 0, s, epoch),
                    Err(UpdateError::SessionMismatch),
                    "a superseded session was bound again"
                );
                let u = CreditUpdate {
                    receiver_session: s,
                    epoch,
                    sequence: 1 << 40,
                    qos_class: 0,
                    freshness_ttl_ms: 0,
                    grants: Totals::all([1 << 18, 32, 8, 8]),
                };
                assert!(ctl.apply_update(&ledger, 0, &u, 0).is_err());
                assert_eq!(ctl.binding(0), before);
            }
            Op::Expire { now_ms } => {
                let _ = ctl.expire(&ledger, now_ms as u64 * 1_000_000);
            }
            Op::ForgedUpdate {
                class,
                seq,
                epoch,
                totals,
                present,
            } => {
                let mut t = Totals::default();
                for r in Resource::ALL {
                    if present & (1 << r.index()) != 0 {
                        t = t.with(r, totals[r.index()]);
                    }
                }
                let u = CreditUpdate {
                    receiver_session: if seq % 5 == 0 { alloc.session() } else { EVIL },
                    epoch: epoch as u64 % 3,
                    sequence: seq as u64,
                    qos_class: class as u32 % 3,
                    freshness_ttl_ms: 0,
                    grants: t,
                };
                let _ = ctl.apply_update(&ledger, 1, &u, 0);
            }
            Op::ForgedRelease {
                class,
                generation,
                charge,
            } => {
                if let Ok(e) = ledger.entry(1, (class % 2) as u32) {
                    let c = CommittedCharge::new_unchecked(
                        e.index(),
                        generation,
                        Charge(charge.map(u64::from)),
                    );
                    let _ = ledger.release(c);
                }
            }
        }
        assert!(alloc.conserved(), "allocator lost or minted capacity");
        for peer in 0..2 {
            for class in 0..2 {
                let m = ctl.entry_metrics(&ledger, peer, class).unwrap();
                for k in 0..4 {
                    assert!(
                        m.available[k] + m.consumed[k] <= m.granted[k],
                        "entry ({peer},{class}) overdrawn: {m:?}"
                    );
                }
            }
        }
    }
    drop(reservations);
});
