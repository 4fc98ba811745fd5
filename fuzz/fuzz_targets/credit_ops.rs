//! Structured update / reserve / commit / release / report / fence sequences
//! against the real sender ledger and receiver allocator. Honest traffic
//! with receiver peer 0 (delivered with loss, duplication and reordering)
//! is mixed with forged updates and releases aimed at receiver peer 1.
//! Invariants after every step: the allocator conserves capacity, no entry
//! has more available + consumed than granted, honest traffic never looks
//! like a violation, and nothing panics.
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
    Stale,
    NewEpoch,
    Fence,
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

const RX: SessionId = SessionId(7);
const EVIL: SessionId = SessionId(66);

fuzz_target!(|ops: Vec<Op>| {
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 2,
        max_classes: 2,
        window: [1 << 20, 63, 15, 15],
    })
    .unwrap();
    let mut alloc =
        ReceiverAllocator::new(AllocatorConfig::new(RX, 1, 2, [1 << 18, 32, 8, 8])).unwrap();
    let epoch = alloc.open(0).unwrap();
    ctl.bind(&ledger, 0, RX, epoch).unwrap();
    ctl.bind(&ledger, 1, EVIL, 1).unwrap();
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
                        ctl.bind(&ledger, 0, RX, theirs).unwrap();
                        let _ = ctl.apply_update(&ledger, 0, &u, 0);
                    }
                    Err(e) => assert!(!e.is_violation(), "honest update rejected as {e}"),
                }
            }
            Op::Reserve { class, charge } => {
                if reservations.len() >= 16 {
                    continue;
                }
                let peer = (class / 2 % 2) as u32;
                if let Ok(e) = ledger.entry(peer, (class % 2) as u32) {
                    if let Ok(r) = ledger.try_reserve(e, &Charge(charge.map(u64::from))) {
                        reservations.push(r);
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
                    if peer == 0 && ctl.binding(0).map(|b| b.1) == alloc.epoch(0) {
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
                let out = ledger.release(&c).unwrap();
                assert_ne!(out, ReleaseOutcome::Refused, "honest release refused");
            }
            Op::Report { class, deliver } => {
                if let Ok(u) = ctl.usage(&ledger, 0, (class % 2) as u32, Charge::ZERO) {
                    if deliver {
                        let r = alloc.on_usage(0, &u);
                        assert!(
                            !matches!(r, Err(AllocError::Violation(_))),
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
                // Usually the sender learns from the next update; sometimes now.
                if e % 2 == 0 {
                    ctl.bind(&ledger, 0, RX, e).unwrap();
                }
            }
            Op::Fence => {
                // The caller asserts old QPs are drained; in this model old
                // work holds no receiver memory the invariants look at.
                let _ = alloc.fence_complete(0);
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
                    receiver_session: if seq % 5 == 0 { RX } else { EVIL },
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
                    let _ = ledger.release(&c);
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
