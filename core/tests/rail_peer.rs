//! The peer ledger and the V0–V3 variants (RFC 4534): score inputs, the
//! whole-set fallback, V3's peer in-flight during fallback, attribution of a
//! slow peer, identity, idle reclamation, exhaustion and the TTL trace.
#![cfg(all(feature = "alloc", feature = "peer-feedback"))]

use railyard_core::rail::{
    DeviceSpec, Outcome, RailCharge, RailConfig, Score, Selector, TtlCalibrator, Variant,
};

const GBPS: u64 = 1_000_000_000;
const SLICE: u32 = 65536;
/// One slice at 1 GB/s.
const FAST_NS: u64 = 65_536;

fn on(variant: Variant) -> RailConfig {
    RailConfig {
        peer_accounting: true,
        variant,
        probe_interval: 0,
        ewma_alpha_q16: 65536,
        peer_ttl_ns: 1_000_000,
        ..RailConfig::default()
    }
}

/// One completed slice of `peer` on `device`, taking `latency` and ending at `now`.
fn complete(sel: &Selector, device: u16, peer: u32, latency: u64, now: u64) {
    let c = sel
        .charge(device, Some(peer), SLICE, now - latency)
        .unwrap();
    assert_eq!(c.peer(), Some(peer));
    sel.release(
        c,
        Outcome::Completed {
            post_ns: now - latency,
        },
        now,
    )
    .unwrap();
}

/// Device 0: peer 1 completed at 1/2 rate, then peer 2 at 1/4 rate (so the
/// NIC EWMA is 1/4); 1000 bytes of peer 1 and 5000 of peer 2 in flight.
fn history(variant: Variant) -> (Selector, Vec<RailCharge>) {
    let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], on(variant)).unwrap();
    complete(&sel, 0, 1, 2 * FAST_NS, 1_000_000);
    complete(&sel, 0, 2, 4 * FAST_NS, 1_000_000);
    let held = vec![
        sel.charge(0, Some(1), 1000, 1_000_000).unwrap(),
        sel.charge(0, Some(2), 5000, 1_000_000).unwrap(),
    ];
    (sel, held)
}

fn score(inflight: u64, bw: u64) -> Score {
    Score {
        num: (inflight + u64::from(SLICE)) * 256,
        den: bw,
    }
}

#[test]
fn each_variant_scores_with_its_row_of_the_table() {
    let expect = [
        (Variant::V0, score(0, GBPS), score(0, GBPS)),
        (Variant::V1, score(6000, GBPS / 4), score(6000, GBPS / 4)),
        (Variant::V2, score(6000, GBPS / 2), score(6000, GBPS / 4)),
        (Variant::V3, score(1000, GBPS / 2), score(1000, GBPS / 4)),
    ];
    for (v, normal, fallback) in expect {
        let (sel, held) = history(v);
        assert_eq!(sel.peer_view(0, 1).unwrap().inflight, 1000);
        assert_eq!(sel.nic_inflight(0).unwrap(), 6000);
        assert_eq!(
            sel.score_of(0, Some(1), SLICE, false).unwrap(),
            normal,
            "{v:?}"
        );
        assert_eq!(
            sel.score_of(0, Some(1), SLICE, true).unwrap(),
            fallback,
            "{v:?} in fallback"
        );
        for c in held {
            sel.release(c, Outcome::Failed, 2_000_000).unwrap();
        }
        assert_eq!(
            (
                sel.nic_inflight(0).unwrap(),
                sel.peer_view(0, 1).unwrap().inflight
            ),
            (0, 0)
        );
        assert_eq!(sel.counters().peer_accounting_errors, 0);
    }
}

#[test]
fn fallback_covers_the_whole_candidate_set() {
    let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], on(Variant::V2)).unwrap();
    let t = 1_000_000;
    // Device 0: peer 1 fast, but the NIC is slow (peer 2). Device 1: no
    // sample for peer 1 at all.
    complete(&sel, 0, 1, FAST_NS, t);
    complete(&sel, 0, 2, 4 * FAST_NS, t);
    let p = sel.pick(Some(1), SLICE, t);
    assert!(p.fallback);
    // Whole-set fallback: device 0 scores with its slow NIC EWMA too, so
    // device 1 wins. (A per-candidate fallback would tie and pick 0.)
    assert_eq!(p.charge.device(), 1);
    sel.release(p.charge, Outcome::Failed, t).unwrap();
    let c = sel.counters();
    assert_eq!(
        (c.fallbacks, c.missing_samples, c.expired_samples),
        (1, 1, 0)
    );

    // Both fresh: peer feedback, device 0 is as good as 1 → 0 on the tie.
    complete(&sel, 1, 1, FAST_NS, t);
    let p = sel.pick(Some(1), SLICE, t);
    assert!(!p.fallback);
    assert_eq!(p.charge.device(), 0);
    sel.release(p.charge, Outcome::Failed, t).unwrap();

    // One sample goes stale (TTL 1 ms, age > TTL): whole-set fallback again.
    complete(&sel, 1, 1, FAST_NS, t + 1_500_000);
    let p = sel.pick(Some(1), SLICE, t + 1_000_000);
    assert!(!p.fallback, "age exactly the TTL is still fresh");
    sel.release(p.charge, Outcome::Failed, t).unwrap();
    let p = sel.pick(Some(1), SLICE, t + 1_000_001);
    assert!(p.fallback);
    assert_eq!(p.charge.device(), 1);
    sel.release(p.charge, Outcome::Failed, t).unwrap();
    let c = sel.counters();
    assert_eq!(
        (c.fallbacks, c.missing_samples, c.expired_samples),
        (2, 1, 1)
    );
}

#[test]
fn v3_keeps_peer_inflight_during_fallback() {
    for (v, expect) in [(Variant::V2, 1), (Variant::V3, 0)] {
        let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], on(v)).unwrap();
        // Device 0 is busy with another peer; no samples anywhere (cold).
        let other = sel.charge(0, Some(9), 10 * SLICE, 0).unwrap();
        let p = sel.pick(Some(1), SLICE, 0);
        assert!(p.fallback, "{v:?}");
        // V2 sees the NIC's in-flight and avoids device 0; V3 sees only
        // peer 1's in-flight (zero on both) and ties to device 0.
        assert_eq!(p.charge.device(), expect, "{v:?}");
        assert_eq!(
            sel.score_of(0, Some(1), SLICE, true).unwrap().num,
            if v == Variant::V3 {
                (2 * 65536) * 256
            } else {
                (11 * 65536) * 256
            }
        );
        sel.release(p.charge, Outcome::Failed, 1).unwrap();
        sel.release(other, Outcome::Failed, 1).unwrap();
    }
}

#[test]
fn a_slow_peer_on_nic_a_lowers_a_only_for_that_peer_under_v2_and_v3() {
    const A: usize = 0;
    const B: usize = 1;
    const SLOW: u32 = 1;
    const OTHER: u32 = 2;
    for v in [Variant::V1, Variant::V2, Variant::V3] {
        let cfg = RailConfig {
            ewma_alpha_q16: 8192,
            peer_ttl_ns: 10_000_000,
            ..on(v)
        };
        let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], cfg).unwrap();
        let mut t = 1_000_000;
        for _ in 0..40 {
            t += 1_000;
            complete(&sel, A as u16, SLOW, 10 * FAST_NS, t); // 0.1 GB/s through A
            complete(&sel, A as u16, OTHER, FAST_NS, t);
            complete(&sel, B as u16, SLOW, FAST_NS, t);
            complete(&sel, B as u16, OTHER, FAST_NS, t);
        }
        assert!(
            sel.nic_view(A).unwrap().bw < GBPS * 3 / 4,
            "A's NIC EWMA is polluted by the slow peer"
        );
        let s = |d, p| sel.score_of(d, Some(p), SLICE, false).unwrap();
        // The slow peer sees A as worse under every variant with feedback.
        assert!(
            s(B, SLOW).better_than(s(A, SLOW)),
            "{v:?}: {:?} vs {:?}",
            s(B, SLOW),
            s(A, SLOW)
        );
        if v == Variant::V1 {
            // NIC scope: the other peer is punished for the slow one.
            assert!(s(B, OTHER).better_than(s(A, OTHER)));
            assert_eq!(sel.pick(Some(OTHER), SLICE, t).charge.device(), B as u16);
        } else {
            // Peer scope: A is as good as B for the other peer.
            assert_eq!(s(A, OTHER), s(B, OTHER), "{v:?}");
            let p = sel.pick(Some(OTHER), SLICE, t);
            assert!(!p.fallback);
            assert_eq!(p.charge.device(), A as u16, "{v:?}: tie goes to A");
            let q = sel.pick(Some(SLOW), SLICE, t);
            assert_eq!(q.charge.device(), B as u16, "{v:?}");
        }
    }
}

#[test]
fn absent_peer_identity_is_not_peer_zero() {
    let sel = Selector::new(&[DeviceSpec::new(GBPS)], on(Variant::V3)).unwrap();
    let anon = sel.pick(None, SLICE, 0);
    assert_eq!(anon.charge.peer(), None);
    assert!(
        !anon.fallback,
        "an anonymous request scores at NIC scope, no fallback"
    );
    assert_eq!(sel.peer_entries(0), 0);
    assert!(sel.peer_view(0, 0).is_none());
    let zero = sel.pick(Some(0), SLICE, 0);
    assert_eq!(zero.charge.peer(), Some(0));
    assert_eq!(sel.peer_entries(0), 1);
    assert_eq!(sel.peer_view(0, 0).unwrap().inflight, u64::from(SLICE));
    assert_eq!(sel.nic_inflight(0).unwrap(), 2 * u64::from(SLICE));
    sel.release(anon.charge, Outcome::Failed, 1).unwrap();
    assert_eq!(
        sel.peer_view(0, 0).unwrap().inflight,
        u64::from(SLICE),
        "anon release leaves peer 0 alone"
    );
    sel.release(zero.charge, Outcome::Failed, 1).unwrap();
    assert_eq!(sel.peer_view(0, 0).unwrap().inflight, 0);
    assert_eq!(sel.counters().peer_accounting_errors, 0);
}

fn small_ledger(target: u32) -> Selector {
    let cfg = RailConfig {
        peer_slots: 4,
        history_target: target,
        idle_reclaim_ns: 1000,
        ..on(Variant::V1)
    };
    Selector::new(&[DeviceSpec::new(GBPS)], cfg).unwrap()
}

#[test]
fn history_target_reclaims_only_idle_entries() {
    let sel = small_ledger(2);
    for p in 1..=3 {
        complete(&sel, 0, p, FAST_NS, 100_000);
    }
    // Not admission control: three live entries over a target of two.
    assert_eq!(sel.peer_entries(0), 3);
    assert_eq!(sel.reclaim_idle(100_500), 0, "not idle long enough");
    let held = sel.charge(0, Some(1), 10, 200_000).unwrap();
    assert_eq!(
        sel.reclaim_idle(200_000),
        1,
        "down to the target, idle only"
    );
    assert_eq!(sel.peer_entries(0), 2);
    assert!(
        sel.peer_view(0, 1).is_some(),
        "an entry with a live charge is never reclaimed"
    );
    assert_eq!(
        [2, 3]
            .iter()
            .filter(|&&p| sel.peer_view(0, p).is_some())
            .count(),
        1
    );
    sel.release(held, Outcome::Failed, 300_000).unwrap();
    assert_eq!(
        sel.reclaim_idle(10_000_000),
        0,
        "at the target: nothing reclaimed"
    );
    assert_eq!(sel.counters().reclaimed, 1);
    assert_eq!(sel.counters().peer_accounting_errors, 0);
}

#[test]
fn hard_exhaustion_falls_back_to_nic_scope_and_is_counted() {
    let sel = small_ledger(4);
    let held: Vec<_> = (1..=4)
        .map(|p| sel.charge(0, Some(p), 100, 0).unwrap())
        .collect();
    assert!(held.iter().all(|c| c.peer().is_some()));
    let over = sel.charge(0, Some(5), 100, 5000).unwrap();
    assert_eq!(over.peer(), None, "no slot: NIC scope only");
    assert_eq!(sel.counters().exhausted, 1);
    assert_eq!(sel.nic_inflight(0).unwrap(), 500);
    sel.release(over, Outcome::Failed, 5000).unwrap();
    for c in held {
        sel.release(c, Outcome::Failed, 5000).unwrap();
    }
    // Idle now: a new peer reclaims one idle entry to get a slot.
    let c = sel.charge(0, Some(5), 100, 10_000).unwrap();
    assert_eq!(c.peer(), Some(5));
    assert_eq!(sel.peer_entries(0), 4);
    sel.release(c, Outcome::Failed, 10_000).unwrap();
    let k = sel.counters();
    assert_eq!(
        (
            k.reclaimed,
            k.peer_accounting_errors,
            k.nic_accounting_errors
        ),
        (0, 0, 0)
    );
    assert_eq!(sel.nic_inflight(0).unwrap(), 0);
}

#[test]
fn v1_trace_feeds_the_ttl_calibrator_with_cold_decisions_apart() {
    let cfg = RailConfig {
        trace: true,
        ..on(Variant::V1)
    };
    let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], cfg).unwrap();
    let mut cal = TtlCalibrator::<16>::new();
    let p = sel.pick(Some(1), SLICE, 0);
    assert_eq!(p.trace, Some(None), "cold: no samples yet");
    cal.observe(p.trace);
    sel.release(p.charge, Outcome::Failed, 0).unwrap();
    complete(&sel, 0, 1, FAST_NS, 1_000_000);
    complete(&sel, 1, 1, FAST_NS, 3_000_000);
    let p = sel.pick(Some(1), SLICE, 3_500_000);
    assert_eq!(p.trace, Some(Some(2_500_000)), "max over candidates");
    cal.observe(p.trace);
    sel.release(p.charge, Outcome::Failed, 0).unwrap();
    assert_eq!(cal.cold(), 1);
    assert_eq!(cal.ttl_ns(), Ok(3_000_000));
    // An aggregate decision (plan) carries the same trace, and plans for
    // an anonymous request (no peer scope) carry none.
    let mut counts = [0u32; 2];
    let info = sel
        .plan(Some(1), 32, SLICE, 4_000_000, &mut counts)
        .unwrap();
    assert_eq!(
        info.trace,
        Some(Some(3_000_000)),
        "plan: max over candidates"
    );
    let info = sel
        .plan(Some(2), 32, SLICE, 4_000_000, &mut counts)
        .unwrap();
    assert_eq!(
        info.trace,
        Some(None),
        "plan: a peer without samples is cold"
    );
    let info = sel.plan(None, 32, SLICE, 4_000_000, &mut counts).unwrap();
    assert_eq!(info.trace, None);
    // Without trace: nothing.
    let (quiet, held) = history(Variant::V1);
    let p = quiet.pick(Some(1), SLICE, 0);
    assert_eq!(p.trace, None);
    for c in held.into_iter().chain([p.charge]) {
        quiet.release(c, Outcome::Failed, 0).unwrap();
    }
}
