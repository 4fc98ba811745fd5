//! Regression tests for the exactly-once and fencing defects of issue #13
//! item 4 (RFC 2849). Each of the five defects was shown failing on the
//! code before its fix by a first version of these tests written against
//! the old API (`release(&c)`, `release_record(&rec)`, `close(peer)`): a
//! second record release and an over-release were accepted, a session two
//! restarts old was bound again, an empty charge reserved, a stale close
//! closed the newer epoch, and epoch 0 decoded and bound.
#![cfg(feature = "alloc")]
use proptest::prelude::*;
use railyard_core::credit::*;
use railyard_core::token::{OptId, TokenRecord};
use railyard_core::wire::credit::{
    self as wire, CapabilityAnswerV1, CreditUpdateV1, CreditUsageV1, Message,
};

const WINDOW: [u64; 4] = [1 << 20, 15, 7, 7];
const RX: SessionId = SessionId::new(1, 0xA11CE);

fn ledger(peers: u32) -> (SenderLedger, SenderControl) {
    SenderLedger::new(LedgerConfig {
        max_peers: peers,
        max_classes: 1,
        window: WINDOW,
    })
    .unwrap()
}

fn update(s: SessionId, epoch: u64, seq: u64, g: [u64; 4]) -> CreditUpdate {
    CreditUpdate {
        receiver_session: s,
        epoch,
        sequence: seq,
        grants: Totals::all(g),
        ..Default::default()
    }
}

/// A sender bound to `RX` epoch 1 of a real allocator, with `grant` applied.
struct Pair {
    l: SenderLedger,
    c: SenderControl,
    a: ReceiverAllocator,
}

fn pair(grant: [u64; 4]) -> Pair {
    let (l, mut c) = ledger(1);
    let mut a =
        ReceiverAllocator::new(AllocatorConfig::new(RX, 1, 1, [1 << 20, 16, 8, 8])).unwrap();
    let epoch = a.open(0).unwrap();
    c.bind(&l, 0, RX, epoch).unwrap();
    let u = a.grant(0, 0, &Charge(grant)).unwrap();
    c.apply_update(&l, 0, &u, 0).unwrap();
    Pair { l, c, a }
}

impl Pair {
    fn e(&self) -> EntryId {
        self.l.entry(0, 0).unwrap()
    }
    fn commit(&self, charge: Charge) -> CommittedCharge {
        self.l
            .try_reserve(self.e(), &charge)
            .unwrap()
            .commit()
            .unwrap()
    }
    /// Commits a direct WRITE of `bytes` and moves it into a token record.
    fn recorded(&self, bytes: u32) -> TokenRecord {
        let mut rec = TokenRecord {
            bytes,
            ..Default::default()
        };
        self.commit(Charge::direct_write(bytes))
            .record_into(&mut rec)
            .unwrap();
        rec
    }
    fn metrics(&self) -> EntryMetrics {
        self.c.entry_metrics(&self.l, 0, 0).unwrap()
    }
    /// Reports usage to the receiver; the receiver must accept it.
    fn report(&mut self) -> CreditUsage {
        let u = self.c.usage(&self.l, 0, 0, Charge::ZERO).unwrap();
        assert!(
            matches!(
                self.a.on_usage(0, &u),
                Ok(allocator::UsageOutcome::Applied(_))
            ),
            "receiver refused an honest report {u:?}"
        );
        u
    }
}

// --- 1. a committed charge is released exactly once -------------------------

#[test]
fn a_second_release_of_a_record_is_refused_and_changes_nothing() {
    let mut p = pair([8192, 4, 0, 4]);
    let mut rec = p.recorded(4096);
    let copy = rec; // a duplicated completion (TokenRecord is Copy)
    assert_eq!(p.l.release_record(&mut rec), Ok(ReleaseOutcome::Released));
    assert_eq!(rec.holds & TokenRecord::HOLDS_CREDIT, 0, "hold bit kept");
    assert_eq!(p.l.release_record(&mut rec), Err(ReleaseError::NotHeld));
    let before = p.metrics();
    // The copy still claims the hold, but nothing is outstanding any more.
    let mut copy2 = copy;
    assert_eq!(
        p.l.release_record(&mut copy2),
        Err(ReleaseError::NotOutstanding(
            ResourceSet::EMPTY
                .with(Resource::DataBytes)
                .with(Resource::RequestSlots)
                .with(Resource::ConsumerSlots)
        ))
    );
    assert_eq!(copy2, copy, "a refused release touched the record");
    assert_eq!(p.metrics(), before, "a refused release changed the ledger");
    assert_eq!(p.c.metrics(&p.l).refused_ops, 1);
    let u = p.report();
    assert_eq!(u.released.get(Resource::DataBytes), Some(4096));
    assert_eq!(u.released.get(Resource::RequestSlots), Some(1));
}

#[test]
fn a_release_larger_than_consumed_is_refused() {
    let mut p = pair([8192, 4, 0, 4]);
    let k = p.commit(Charge::direct_write(4096));
    let e = p.e();
    let bigger = CommittedCharge::new_unchecked(e.index(), k.generation(), Charge([4097, 1, 0, 1]));
    let before = p.metrics();
    assert_eq!(
        p.l.release(bigger),
        Err(ReleaseError::NotOutstanding(
            ResourceSet::EMPTY.with(Resource::DataBytes)
        ))
    );
    assert_eq!(p.metrics(), before);
    // A different-shaped charge no larger than what is outstanding is
    // accepted; the totals still never report more released than consumed.
    assert_eq!(p.l.release(k), Ok(ReleaseOutcome::Released));
    let twice = CommittedCharge::new_unchecked(e.index(), 1, Charge([1, 0, 0, 0]));
    assert!(matches!(
        p.l.release(twice),
        Err(ReleaseError::NotOutstanding(_))
    ));
    let u = p.report();
    for r in Resource::ALL {
        assert!(u.released.get(r) <= u.consumed.get(r), "{r}: {u:?}");
    }
}

#[test]
fn a_record_that_already_holds_credit_is_not_overwritten() {
    let p = pair([8192, 4, 0, 4]);
    let a = p.commit(Charge::direct_write(4096));
    let b = p.commit(Charge::direct_write(4096));
    let mut rec = TokenRecord {
        bytes: 4096,
        ..Default::default()
    };
    a.record_into(&mut rec).unwrap();
    let (err, b) = b.record_into(&mut rec).unwrap_err();
    assert_eq!(err, RecordError::AlreadyHeld);
    // The refused charge came back and still releases.
    assert_eq!(p.l.release(b), Ok(ReleaseOutcome::Released));
    assert_eq!(p.l.release_record(&mut rec), Ok(ReleaseOutcome::Released));
}

#[test]
fn an_old_epoch_record_releases_as_fenced_once() {
    let mut p = pair([8192, 4, 0, 4]);
    let mut rec = p.recorded(4096);
    let e2 = p.a.open(0).unwrap();
    p.c.bind(&p.l, 0, RX, e2).unwrap();
    assert_eq!(p.l.release_record(&mut rec), Ok(ReleaseOutcome::Fenced));
    assert_eq!(p.l.release_record(&mut rec), Err(ReleaseError::NotHeld));
    assert_eq!(p.c.metrics(&p.l).fenced_ops, 1);
}

proptest! {
    /// Any interleaving of commits, honest releases and duplicated (forged)
    /// releases: the ledger behaves exactly like a per-resource
    /// "outstanding" counter that refuses to go below zero, the receiver
    /// always accepts the sender's reports (released never exceeds
    /// consumed), and the reported totals are exact.
    #[test]
    fn releases_never_exceed_what_is_outstanding(ops in proptest::collection::vec((0u8..4, any::<u8>()), 1..64)) {
        let mut p = pair([1 << 20, 15, 0, 7]);
        let mut live: Vec<CommittedCharge> = vec![];
        let mut shapes: Vec<(u16, Charge)> = vec![];
        let (mut committed, mut released) = ([0u64; 4], [0u64; 4]);
        let release = |p: &Pair, k: CommittedCharge, committed: &[u64; 4], released: &mut [u64; 4]| {
            let c = k.charge();
            let fits = (0..4).all(|i| c.0[i] <= committed[i] - released[i]);
            let r = p.l.release(k);
            if fits {
                assert_eq!(r, Ok(ReleaseOutcome::Released));
                for (r, x) in released.iter_mut().zip(c.0) { *r += x; }
            } else {
                assert!(matches!(r, Err(ReleaseError::NotOutstanding(_))), "{r:?}");
            }
        };
        for (op, x) in ops {
            match op {
                0 => {
                    let c = Charge::direct_write(u32::from(x) + 1);
                    if let Ok(r) = p.l.try_reserve(p.e(), &c) {
                        let k = r.commit().unwrap();
                        shapes.push((k.generation(), k.charge()));
                        for (t, x) in committed.iter_mut().zip(c.0) { *t += x; }
                        live.push(k);
                    }
                }
                1 if !live.is_empty() => {
                    let k = live.swap_remove(x as usize % live.len());
                    release(&p, k, &committed, &mut released);
                }
                2 if !shapes.is_empty() => {
                    let (g, c) = shapes[x as usize % shapes.len()];
                    let dup = CommittedCharge::new_unchecked(p.e().index(), g, c);
                    release(&p, dup, &committed, &mut released);
                }
                _ => {
                    let u = p.report();
                    for r in Resource::ALL {
                        prop_assert!(u.released.get(r) <= u.consumed.get(r));
                    }
                }
            }
        }
        let u = p.report();
        for r in [Resource::DataBytes, Resource::RequestSlots, Resource::ConsumerSlots] {
            prop_assert_eq!(u.consumed.get(r), Some(committed[r.index()]));
            prop_assert_eq!(u.released.get(r), Some(released[r.index()]));
        }
    }
}

// --- 2. every superseded receiver session stays fenced ----------------------

#[test]
fn every_superseded_session_stays_fenced_after_many_restarts() {
    let (l, mut c) = ledger(1);
    let e = l.entry(0, 0).unwrap();
    let mut old: Vec<(SessionId, CreditUpdate, Message)> = vec![];
    for inc in 1..=20u64 {
        // Each incarnation: negotiate (answer on the wire), bind, grant.
        let s = SessionId::new(inc, 0x5eed ^ inc.wrapping_mul(0x9e37_79b9));
        let answer = Message::CapabilityAnswer(CapabilityAnswerV1 {
            version: 1,
            result: wire::NegotiationResult::Accepted,
            classes: 1,
            receiver_session: s.0,
            epoch: 1,
            caps: Default::default(),
        });
        c.bind(&l, 0, s, 1).unwrap();
        let u = update(s, 1, 1, [8192, 4, 0, 4]);
        c.apply_update(&l, 0, &u, 0).unwrap();
        assert_eq!(l.available(e).unwrap().0, Charge([8192, 4, 0, 4]));
        old.push((s, u, answer));
    }
    let (current, _, _) = old.pop().unwrap();
    // Use up the live credit so any minted credit would show.
    let held = l
        .try_reserve(e, &Charge([8192, 4, 0, 4]))
        .unwrap()
        .commit()
        .unwrap();
    for (s, u, answer) in &old {
        // A replayed negotiation of any earlier incarnation...
        let mut buf = [0u8; wire::MAX_MESSAGE_LEN];
        let n = wire::encode(answer, &mut buf).unwrap();
        let Message::CapabilityAnswer(a) = wire::decode(&buf[..n]).unwrap() else {
            unreachable!()
        };
        assert_eq!(
            c.bind(&l, 0, SessionId(a.receiver_session), a.epoch),
            Err(UpdateError::SessionMismatch),
            "bind to superseded {s:?}"
        );
        // ...a later epoch of it...
        assert_eq!(c.bind(&l, 0, *s, 99), Err(UpdateError::SessionMismatch));
        // ...its updates and grants, even with newer sequences...
        let mut newer = *u;
        newer.sequence = 1000;
        newer.grants = Totals::all([1 << 19, 15, 0, 7]);
        assert_eq!(
            c.apply_update(&l, 0, &newer, 0),
            Err(UpdateError::SessionMismatch)
        );
        // ...and its credit keys: none yields usable credit.
        let key = CreditKey {
            receiver_session: *s,
            sender_peer: 0,
            qos_class: 0,
        };
        assert_eq!(c.entry_for(&l, &key), Err(UpdateError::SessionMismatch));
        assert_eq!(l.available(e).unwrap().0, Charge::ZERO);
        assert!(l.try_reserve(e, &Charge::direct_write(1)).is_err());
    }
    assert_eq!(c.binding(0), Some((current, 1)));
    assert_eq!(l.release(held), Ok(ReleaseOutcome::Released));
    assert_eq!(c.metrics(&l).epoch_resets, 19);
}

#[test]
fn binding_moves_forward_in_session_then_epoch_order() {
    let (l, mut c) = ledger(1);
    let (s1, s2) = (SessionId::new(1, 0), SessionId::new(2, 0));
    c.bind(&l, 0, s1, 5).unwrap();
    c.bind(&l, 0, s1, 5).unwrap(); // idempotent
    assert_eq!(
        c.bind(&l, 0, s1, 4),
        Err(UpdateError::EpochMismatch { ours: 5, theirs: 4 })
    );
    c.bind(&l, 0, s1, 6).unwrap();
    // A new incarnation starts its epochs over.
    c.bind(&l, 0, s2, 1).unwrap();
    assert_eq!(c.bind(&l, 0, s1, 7), Err(UpdateError::SessionMismatch));
    assert_eq!(c.binding(0), Some((s2, 1)));
    assert_eq!(c.metrics(&l).stale_updates, 2);
}

proptest! {
    /// Whatever order bind attempts arrive in, the binding is the maximum
    /// `(session, epoch)` seen so far, and an update of any other binding
    /// never yields credit.
    #[test]
    fn binding_is_the_running_maximum(attempts in proptest::collection::vec((1u128..6, 1u64..4), 1..40)) {
        let (l, mut c) = ledger(1);
        let e = l.entry(0, 0).unwrap();
        let mut max: Option<(u128, u64)> = None;
        // Whether the current binding's one update has been applied.
        let mut granted = false;
        for (s, ep) in attempts {
            let r = c.bind(&l, 0, SessionId(s), ep);
            let newer = max.map_or(true, |m| (s, ep) >= m);
            prop_assert_eq!(r.is_ok(), newer, "bind {:?} with max {:?}", (s, ep), max);
            if newer && max != Some((s, ep)) {
                max = Some((s, ep));
                granted = false;
            }
            let (ms, me) = max.unwrap();
            prop_assert_eq!(c.binding(0), Some((SessionId(ms), me)));
            // Every binding's receiver sends the same update; only the
            // current binding's copy may be applied, and only once.
            let u = update(SessionId(s), ep, 7, [64, 1, 0, 1]);
            let applied = matches!(c.apply_update(&l, 0, &u, 0), Ok(UpdateOutcome::AppliedAfterGap { .. }));
            prop_assert_eq!(applied, (s, ep) == (ms, me) && !granted);
            granted |= applied;
            let want = if granted { Charge([64, 1, 0, 1]) } else { Charge::ZERO };
            prop_assert_eq!(l.available(e).unwrap().0, want);
        }
    }
}

// --- 3. a charge with no resources is refused --------------------------------

#[test]
fn an_empty_charge_never_passes_the_gate() {
    let mut p = pair([8192, 4, 0, 4]);
    let before = p.metrics();
    assert_eq!(
        p.l.try_reserve(p.e(), &Charge::ZERO).err(),
        Some(ReserveError::Key(KeyError::EmptyCharge))
    );
    assert_eq!(
        p.l.release(CommittedCharge::new_unchecked(
            p.e().index(),
            1,
            Charge::ZERO
        )),
        Err(ReleaseError::Key(KeyError::EmptyCharge))
    );
    // A zero-byte record with no slots names no charge either.
    let mut rec = TokenRecord {
        holds: TokenRecord::HOLDS_CREDIT,
        credit_key: OptId::some(p.e().index() | (1 << 16)),
        ..Default::default()
    };
    assert_eq!(
        p.l.release_record(&mut rec),
        Err(ReleaseError::Key(KeyError::EmptyCharge))
    );
    assert_eq!(p.metrics(), before);
    assert_eq!(p.c.metrics(&p.l).stalls, 0);
    // The receiver refuses an empty grant (no sequence is burnt).
    assert_eq!(
        p.a.grant(0, 0, &Charge::ZERO),
        Err(AllocError::Key(KeyError::EmptyCharge))
    );
    assert_eq!(p.a.current_update(0, 0).unwrap().unwrap().sequence, 1);
}

// --- 4. close names the epoch it closes --------------------------------------

#[test]
fn a_stale_close_never_closes_a_newer_epoch() {
    let mut a = ReceiverAllocator::new(AllocatorConfig::new(RX, 1, 1, [1 << 20, 8, 0, 8])).unwrap();
    let e1 = a.open(0).unwrap();
    a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    let e2 = a.open(0).unwrap();
    let before = a.metrics();
    // The close for epoch 1 arrives after epoch 2 was opened.
    assert_eq!(
        a.close(0, e1),
        Err(AllocError::EpochMismatch {
            ours: e2,
            theirs: e1
        })
    );
    assert_eq!(a.metrics(), before, "a stale close changed the allocator");
    assert!(a.grant(0, 0, &Charge([4096, 1, 0, 1])).is_ok());
    assert_eq!(a.close(0, 0), Err(AllocError::Zero(ZeroField::Epoch)));
    assert!(matches!(
        a.close(0, e2 + 1),
        Err(AllocError::EpochMismatch { .. })
    ));
    a.close(0, e2).unwrap();
    a.close(0, e2).unwrap(); // closing a closed epoch is a no-op
    assert_eq!(
        a.grant(0, 0, &Charge([1, 0, 0, 0])),
        Err(AllocError::PeerNotOpen)
    );
    assert_eq!(a.metrics().fencing, [8192, 2, 0, 2]);
    assert!(a.conserved());
}

#[test]
fn a_stale_fence_confirmation_never_frees_a_newer_epoch() {
    let mut a = ReceiverAllocator::new(AllocatorConfig::new(RX, 1, 1, [1 << 20, 8, 0, 8])).unwrap();
    let e1 = a.open(0).unwrap();
    a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    let e2 = a.open(0).unwrap();
    a.grant(0, 0, &Charge([1024, 1, 0, 1])).unwrap();
    a.close(0, e2).unwrap();
    // Epoch 1's QPs drained, epoch 2's not yet: nothing may come back.
    assert_eq!(
        a.fence_complete(0, e1),
        Err(AllocError::EpochMismatch {
            ours: e2,
            theirs: e1
        })
    );
    assert_eq!(a.free(), [(1 << 20) - 5120, 6, 0, 6]);
    assert!(matches!(
        a.fence_complete(0, e2 + 1),
        Err(AllocError::EpochMismatch { .. })
    ));
    assert_eq!(a.fence_complete(0, e2), Ok(Charge([5120, 2, 0, 2])));
    assert_eq!(a.fence_complete(0, e2), Err(AllocError::NothingFencing));
    assert!(a.conserved());
}

// --- 5. session, epoch and sequence 0 are not valid --------------------------

fn encoded(m: &Message) -> Vec<u8> {
    // Encode a valid twin, then patch the field in the bytes, so the
    // decoder (not the encoder) is what refuses.
    let mut buf = [0u8; wire::MAX_MESSAGE_LEN];
    let n = wire::encode(m, &mut buf).unwrap();
    buf[..n].to_vec()
}

#[test]
fn the_decoder_refuses_zero_identifiers() {
    let up = CreditUpdateV1 {
        receiver_session: 3,
        epoch: 1,
        sequence: 1,
        ..Default::default()
    };
    let b = encoded(&Message::CreditUpdate(up.clone()));
    // Update body: session at 8, epoch at 24, sequence at 32 (after the 8-byte header).
    for (at, len, z) in [
        (8 + 8, 16, ZeroField::Session),
        (8 + 24, 8, ZeroField::Epoch),
        (8 + 32, 8, ZeroField::Sequence),
    ] {
        let mut x = b.clone();
        x[at..at + len].fill(0);
        assert_eq!(wire::decode(&x), Err(wire::DecodeError::Zero(z)));
    }
    let us = CreditUsageV1 {
        receiver_session: 3,
        epoch: 1,
        sequence: 1,
        ..Default::default()
    };
    let b = encoded(&Message::CreditUsage(us));
    for (at, len, z) in [
        (8, 16, ZeroField::Session),
        (8 + 16, 8, ZeroField::Epoch),
        (8 + 24, 8, ZeroField::Sequence),
    ] {
        let mut x = b.clone();
        x[at..at + len].fill(0);
        assert_eq!(wire::decode(&x), Err(wire::DecodeError::Zero(z)));
    }
    // The encoder never emits them either.
    let mut buf = [0u8; wire::MAX_MESSAGE_LEN];
    let zero_epoch = CreditUpdateV1 { epoch: 0, ..up };
    assert_eq!(
        wire::encode(&Message::CreditUpdate(zero_epoch), &mut buf),
        Err(wire::EncodeError::Invalid(wire::DecodeError::Zero(
            ZeroField::Epoch
        )))
    );
}

#[test]
fn an_accepted_answer_binds_nonzero_ids_and_a_refusal_binds_none() {
    let ok = CapabilityAnswerV1 {
        version: 1,
        result: wire::NegotiationResult::Accepted,
        classes: 1,
        receiver_session: 9,
        epoch: 1,
        caps: Default::default(),
    };
    let b = encoded(&Message::CapabilityAnswer(ok.clone()));
    // Answer body: version at 0, session at 8, epoch at 24.
    for (at, len, z) in [
        (8, 2, ZeroField::Version),
        (8 + 8, 16, ZeroField::Session),
        (8 + 24, 8, ZeroField::Epoch),
    ] {
        let mut x = b.clone();
        x[at..at + len].fill(0);
        assert_eq!(wire::decode(&x), Err(wire::DecodeError::Zero(z)));
    }
    // A refusal names no binding a careless sender could bind.
    let mut refused = b.clone();
    refused[8 + 2] = wire::NegotiationResult::Unsupported as u8;
    assert_eq!(
        wire::decode(&refused),
        Err(wire::DecodeError::NonzeroReserved)
    );
    let offer = wire::CapabilityOfferV1 {
        min_version: 2,
        max_version: 3,
        ..Default::default()
    };
    let no = offer.answer((1, 1), 9, 1, 1, Default::default());
    assert_eq!(no.result, wire::NegotiationResult::Unsupported);
    let b = encoded(&Message::CapabilityAnswer(no.clone()));
    assert_eq!(wire::decode(&b), Ok(Message::CapabilityAnswer(no)));
}

#[test]
fn ledger_and_allocator_refuse_zero_identifiers() {
    let (l, mut c) = ledger(1);
    assert_eq!(
        c.bind(&l, 0, RX, 0),
        Err(UpdateError::Zero(ZeroField::Epoch))
    );
    assert_eq!(
        c.bind(&l, 0, SessionId::NONE, 1),
        Err(UpdateError::Zero(ZeroField::Session))
    );
    assert_eq!(c.binding(0), None);
    c.bind(&l, 0, RX, 1).unwrap();
    let e = l.entry(0, 0).unwrap();
    assert_eq!(
        c.apply_update(&l, 0, &update(RX, 1, 0, [8192, 4, 0, 4]), 0),
        Err(UpdateError::Zero(ZeroField::Sequence))
    );
    assert_eq!(l.available(e).unwrap(), (Charge::ZERO, false));
    // Sequence 1 is the first update: applied, no gap.
    assert_eq!(
        c.apply_update(&l, 0, &update(RX, 1, 1, [8192, 4, 0, 4]), 0),
        Ok(UpdateOutcome::Applied)
    );
    // The first usage report of an epoch has sequence 1 too.
    let u = c.usage(&l, 0, 0, Charge::ZERO).unwrap();
    assert_eq!((u.epoch, u.sequence), (1, 1));

    assert_eq!(
        ReceiverAllocator::new(AllocatorConfig::new(SessionId::NONE, 1, 1, [1, 1, 1, 1])).err(),
        Some(AllocError::Zero(ZeroField::Session))
    );
    let mut a = ReceiverAllocator::new(AllocatorConfig::new(RX, 1, 1, [8192, 4, 0, 4])).unwrap();
    assert_eq!(a.open(0), Ok(1), "epochs start at 1");
    assert_eq!(a.current_update(0, 0), Ok(None), "no update before a grant");
    assert_eq!(a.grant(0, 0, &Charge([1, 0, 0, 0])).unwrap().sequence, 1);
    let zero_seq = CreditUsage {
        receiver_session: RX,
        epoch: 1,
        sequence: 0,
        ..Default::default()
    };
    assert_eq!(
        a.on_usage(0, &zero_seq),
        Err(AllocError::Zero(ZeroField::Sequence))
    );
    assert_eq!(a.metrics().stale_usage, 0);
}

/// A heartbeat refreshes the sender's freshness under a new sequence
/// without granting anything; a duplicate would not. It is refused for a
/// peer that was never granted or is closed.
#[test]
fn heartbeat_refreshes_freshness_without_minting_credit() {
    let mut p = pair([4096, 2, 0, 2]);
    let e = p.e();
    // Never granted / unknown: refused.
    let mut fresh =
        ReceiverAllocator::new(AllocatorConfig::new(RX, 2, 1, [1 << 20, 16, 8, 8])).unwrap();
    fresh.open(1).unwrap();
    assert!(fresh.heartbeat(1, 0).is_err());
    assert!(fresh.heartbeat(0, 0).is_err(), "never opened");
    let before = p.l.available(e).unwrap().0;
    let mut u = p.a.heartbeat(0, 0).unwrap();
    assert_eq!(u.sequence, 2);
    u.freshness_ttl_ms = 1;
    assert_eq!(
        p.c.apply_update(&p.l, 0, &u, 5_000_000).unwrap(),
        UpdateOutcome::Applied
    );
    assert_eq!(p.l.available(e).unwrap().0, before, "nothing minted");
    assert_eq!(p.a.free(), [(1 << 20) - 4096, 14, 8, 6]);
    // Within the TTL of the heartbeat's receipt: still active.
    assert_eq!(p.c.expire(&p.l, 5_500_000).unwrap(), 0);
    assert_eq!(p.c.expire(&p.l, 7_000_000).unwrap(), 1);
    p.a.close(0, 1).unwrap();
    assert_eq!(p.a.heartbeat(0, 0), Err(AllocError::PeerNotOpen));
}

/// The consumer may return only what the sender reported committed.
#[test]
fn consumable_follows_reported_usage() {
    let mut p = pair([8192, 4, 0, 4]);
    assert_eq!(p.a.consumable(0, 0).unwrap(), Charge::ZERO);
    let c = p.commit(Charge::direct_write(4096));
    assert!(p.l.release(c).is_ok());
    let u = p.c.usage(&p.l, 0, 0, Charge::ZERO).unwrap();
    p.a.on_usage(0, &u).unwrap();
    assert_eq!(p.a.consumable(0, 0).unwrap(), Charge([0, 0, 0, 1]));
    p.a.consumed(0, 0, &Charge([0, 0, 0, 1])).unwrap();
    assert_eq!(p.a.consumable(0, 0).unwrap(), Charge::ZERO);
    assert!(p.a.consumable(5, 0).is_err());
}
