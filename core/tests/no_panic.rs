//! No public API panics on any input (issue #19): the rail selector, the
//! congestion controller and its monitor, the sender credit ledger, the
//! endpoint table, the token pool and the slice table, driven with
//! arbitrary indices, handles, ids and values (out of range, forged,
//! foreign, extreme). Every call returns a value or a typed error; after
//! every forged release nothing that was never charged has been taken back.
//!
//! Debug builds check arithmetic overflow, so an overflow is a panic here.

use proptest::prelude::*;
use railyard_core::cc::{CcConfig, Controller, Mode, PollerStatus};
use railyard_core::classify::Effect;
use railyard_core::credit::allocator::{AllocatorConfig, ReceiverAllocator, ReturnPath};
use railyard_core::credit::{
    Charge, CommittedCharge, CreditKey, CreditUpdate, CreditUsage, LedgerConfig, SenderLedger,
    SessionId, Totals,
};
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, EndpointTable, RetireReason};
use railyard_core::rail::{
    clamp_bw, ewma_step, DeviceSpec, Outcome, RailConfig, Score, Selector, TtlCalibrator, Variant,
    MAX_DEVICES,
};
use railyard_core::slice::{Outcome as SliceOutcome, SliceRef, SliceTable};
use railyard_core::token::{TokenPool, TokenRecord, WrId};

/// Small values most of the time (to hit the valid paths), extremes and
/// anything else the rest of the time.
fn idx() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..8, 1 => Just(u32::MAX), 1 => any::<u32>()]
}
fn big() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..1 << 20, 1 => Just(u64::MAX), 1 => any::<u64>()]
}
fn record() -> impl Strategy<Value = TokenRecord> {
    (
        (idx(), idx(), idx(), idx()),
        (big(), any::<u32>(), idx(), idx()),
        (prop::option::of(idx()), prop::option::of(idx())),
        (0u16..8, 0u16..8, any::<u8>()),
    )
        .prop_map(
            |((si, sa, es, eg), (post_ns, bytes, route, rg), (peer, ck), (qp, dev, holds))| {
                TokenRecord {
                    slice: SliceRef {
                        index: si,
                        attempt: sa,
                    },
                    endpoint: EndpointHandle {
                        slot: es,
                        generation: eg,
                    },
                    post_ns,
                    bytes,
                    route,
                    route_generation: rg,
                    peer: peer.into(),
                    credit_key: ck.into(),
                    qp,
                    device: dev,
                    holds,
                }
            },
        )
}

#[derive(Clone, Debug)]
enum RailOp {
    Pick(Option<u32>, u32, u64),
    Plan(Option<u32>, u32, u32, u64, usize),
    Charge(u16, Option<u32>, u32, u64),
    /// Release the `i`-th live charge (a real one).
    Release(usize, bool, u64, u64),
    ReleaseRecord(TokenRecord, bool, u64),
    Reclaim(u64),
    Query(usize, u32, u32, bool),
}

fn rail_op() -> impl Strategy<Value = RailOp> {
    let peer = || prop::option::of(idx());
    let dev = || prop_oneof![4 => 0usize..8, 1 => Just(usize::MAX), 1 => any::<usize>()];
    prop_oneof![
        (peer(), any::<u32>(), big()).prop_map(|(p, b, n)| RailOp::Pick(p, b, n)),
        (peer(), any::<u32>(), any::<u32>(), big(), 0usize..70)
            .prop_map(|(p, s, b, n, l)| RailOp::Plan(p, s, b, n, l)),
        (any::<u16>(), peer(), any::<u32>(), big())
            .prop_map(|(d, p, b, n)| RailOp::Charge(d, p, b, n)),
        (any::<usize>(), any::<bool>(), big(), big())
            .prop_map(|(i, ok, post, n)| RailOp::Release(i, ok, post, n)),
        (record(), any::<bool>(), big()).prop_map(|(r, ok, n)| RailOp::ReleaseRecord(r, ok, n)),
        big().prop_map(RailOp::Reclaim),
        (dev(), any::<u32>(), any::<u32>(), any::<bool>())
            .prop_map(|(d, p, b, f)| RailOp::Query(d, p, b, f)),
    ]
}

fn rail_config() -> impl Strategy<Value = RailConfig> {
    (
        any::<bool>(),
        prop_oneof![
            Just(Variant::V0),
            Just(Variant::V1),
            Just(Variant::V2),
            Just(Variant::V3)
        ],
        prop_oneof![Just(0u32), Just(1), Just(4), any::<u32>()],
        prop_oneof![Just(256u32), any::<u32>()],
        (
            prop_oneof![Just(8192u32), any::<u32>()],
            prop_oneof![Just(4u32), any::<u32>()],
            prop_oneof![Just(256u32), any::<u32>()],
        ),
        (
            big(),
            prop_oneof![Just(4u32), Just(64), any::<u32>()],
            0u32..70,
            big(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                peer_accounting,
                variant,
                probe_interval,
                probe_bound_q8,
                (a, lo, hi),
                (ttl, slots, target, idle, trace),
            )| {
                RailConfig {
                    peer_accounting: peer_accounting && cfg!(feature = "peer-feedback"),
                    variant,
                    probe_interval,
                    probe_bound_q8,
                    ewma_alpha_q16: a,
                    ewma_floor_q8: lo,
                    ewma_ceil_q8: hi,
                    peer_ttl_ns: ttl,
                    peer_slots: slots,
                    history_target: target,
                    idle_reclaim_ns: idle,
                    trace,
                }
            },
        )
}

fn device() -> impl Strategy<Value = DeviceSpec> {
    (
        prop_oneof![Just(25_000_000_000u64), big()],
        prop_oneof![Just(256u16), any::<u16>()],
    )
        .prop_map(|(n, t)| DeviceSpec::new(n).with_tier_q8(t))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The selector with any devices, any config and any sequence of calls.
    #[test]
    fn selector_never_panics(
        devices in prop::collection::vec(device(), 0..=MAX_DEVICES + 2),
        cfg in rail_config(),
        ops in prop::collection::vec(rail_op(), 0..40),
    ) {
        let Ok(sel) = Selector::new(&devices, cfg) else { return Ok(()) };
        let mut live = Vec::new();
        let (mut forged_took, mut refused) = (false, false);
        for op in ops {
            match op {
                RailOp::Pick(p, b, n) => live.push(sel.pick(p, b, n).charge),
                RailOp::Plan(p, s, b, n, l) => {
                    let mut counts = vec![0u32; l];
                    if let Ok(_info) = sel.plan(p, s, b, n, &mut counts) {
                        prop_assert_eq!(counts[..sel.len()].iter().map(|&c| u64::from(c)).sum::<u64>(), u64::from(s));
                    }
                }
                RailOp::Charge(d, p, b, n) => {
                    if let Ok(c) = sel.charge(d, p, b, n) {
                        live.push(c);
                    }
                }
                RailOp::Release(i, ok, post, n) => {
                    if !live.is_empty() {
                        let c = live.swap_remove(i % live.len());
                        let outcome = if ok { Outcome::Completed { post_ns: post } } else { Outcome::Failed };
                        // Refused only if a forged record took its bytes
                        // (or, with the ledger, its peer side was reclaimed).
                        refused |= sel.release(c, outcome, n).is_err();
                    }
                }
                RailOp::ReleaseRecord(mut r, ok, n) => {
                    let before: u64 = (0..sel.len()).filter_map(|d| sel.nic_inflight(d)).sum();
                    // A forged record may only take back what it names and
                    // what is charged; never more than is in flight.
                    let _ = sel.release_record(&mut r, ok, n);
                    let after: u64 = (0..sel.len()).filter_map(|d| sel.nic_inflight(d)).sum();
                    prop_assert!(after <= before);
                    prop_assert!(before - after <= u64::from(r.bytes));
                    forged_took |= after < before;
                }
                RailOp::Reclaim(n) => { let _ = sel.reclaim_idle(n); }
                RailOp::Query(d, p, b, f) => {
                    let known = d < sel.len();
                    prop_assert_eq!(sel.nic_inflight(d).is_some(), known);
                    prop_assert_eq!(sel.nic_view(d).is_some(), known);
                    prop_assert_eq!(sel.nic_sample_ns(d).is_some(), known);
                    prop_assert_eq!(sel.score_of(d, Some(p), b, f).is_some(), known);
                    let _ = sel.peer_view(d, p);
                    let _ = sel.peer_entries(d);
                }
            }
        }
        let _ = sel.counters();
        for c in live {
            // A forged record may have taken a real charge's bytes (it is
            // plain data): that release is then refused, never wrapped.
            refused |= sel.release(c, Outcome::Failed, 0).is_err();
        }
        let left: u64 = (0..sel.len()).filter_map(|d| sel.nic_inflight(d)).sum();
        if !forged_took {
            prop_assert_eq!(left, 0);
        }
        prop_assert!(left == 0 || refused);
    }

    /// The score arithmetic and the EWMA helpers on extreme values.
    #[test]
    fn score_and_ewma_never_panic(
        a in (big(), big()), b in (big(), big()), ratio in any::<u32>(),
        bw in big(), nominal in big(), lo in any::<u32>(), hi in any::<u32>(),
        old in big(), alpha in any::<u32>(),
    ) {
        let (s, t) = (Score { num: a.0, den: a.1 }, Score { num: b.0, den: b.1 });
        let _ = (s.better_than(t), s.inverse_q32());
        let within = s.within(t, ratio);
        // Exact: s <= t * ratio / 256, checked without overflow in u128 pieces.
        if let (Some(l), Some(r)) = (
            (u128::from(s.num) * u128::from(t.den)).checked_mul(256),
            (u128::from(t.num) * u128::from(s.den)).checked_mul(u128::from(ratio)),
        ) {
            prop_assert_eq!(within, l <= r);
        }
        let c = clamp_bw(bw, nominal, lo, hi);
        prop_assert!(c >= 1);
        let _ = ewma_step(old, bw, alpha, nominal, lo, hi);
        let mut cal: TtlCalibrator<4> = TtlCalibrator::new();
        for age in [Some(old), None, Some(bw), Some(u64::MAX), Some(0), Some(1)] {
            cal.observe(Some(age));
        }
        let _ = cal.ttl_ns();
    }

    /// The controller and its monitor with any topology and any calls.
    #[test]
    fn controller_never_panics(
        mode in prop_oneof![Just(Mode::Off), Just(Mode::Observe), Just(Mode::Enforce)],
        devices in 0u16..5,
        routes in prop::collection::vec(0u16..6, 0..6),
        ops in prop::collection::vec((0u8..8, any::<u16>(), idx(), any::<u32>(), big()), 0..60),
    ) {
        let cfg = CcConfig { mode, ..CcConfig::default() };
        let (ctl, mut mon, _err) = Controller::new_or_off(&cfg, devices, &routes);
        let effects = [Effect::None, Effect::Success, Effect::ReceiverPressure, Effect::HardError, Effect::Timeout, Effect::Quarantine];
        let mut permits = Vec::new();
        for (op, dev, route, bytes, now) in ops {
            let effect = effects[usize::from(dev) % effects.len()];
            match op {
                0 | 1 => {
                    if let Ok(railyard_core::cc::Admission::Admit(p)) = ctl.try_acquire(dev % 8, route, bytes, now) {
                        let _ = ctl.is_current(&p);
                        permits.push(p);
                    }
                }
                2 => if let Some(p) = permits.pop() { let _ = ctl.release(p, effect); },
                3 => { let mut r = TokenRecord { device: dev, route, bytes, route_generation: bytes, holds: TokenRecord::HOLDS_PERMIT, ..TokenRecord::default() };
                       let _ = ctl.release_record(&mut r, effect); }
                4 => { let _ = ctl.route_feedback(route, bytes, effect); }
                5 => { let _ = (ctl.quarantine_device(dev), ctl.advance_generation(route), ctl.rebind_route(route, dev)); }
                6 => { let _ = (ctl.route_generation(route), ctl.route_snapshot(route), ctl.device_snapshot(dev), ctl.stats()); }
                _ => { let _ = mon.on_epoch(&ctl, now, if bytes & 1 == 0 { PollerStatus::Progressing } else { PollerStatus::Stalled }); }
            }
        }
        for p in permits {
            let _ = ctl.release(p, Effect::None);
        }
        // Every real permit was released: nothing stays in flight.
        for r in 0..ctl.routes() as u32 {
            if let Some(s) = ctl.route_snapshot(r) { prop_assert_eq!(s.in_flight, 0); }
        }
    }

    /// The sender credit ledger and its control side, with any peers,
    /// classes, charges and forged committed charges or records.
    #[test]
    fn credit_ledger_never_panics(
        peers in 0u32..4, classes in 0u32..4,
        window in prop::option::of([big(), big(), big(), big()]),
        ops in prop::collection::vec((0u8..9, idx(), idx(), [big(), big(), big(), big()], big(), idx()), 0..50),
        forged in prop::collection::vec(record(), 0..8),
    ) {
        let d = LedgerConfig::default();
        let cfg = LedgerConfig { max_peers: peers, max_classes: classes, window: window.unwrap_or(d.window) };
        let Ok((ledger, mut ctl)) = SenderLedger::new(cfg) else { return Ok(()) };
        let mut committed = Vec::new();
        for (op, peer, class, amounts, n, gen) in ops {
            let charge = Charge(amounts);
            match op {
                0 => { let _ = ctl.bind(&ledger, peer, SessionId(u128::from(class)), n); }
                1 => {
                    let u = CreditUpdate { receiver_session: SessionId(u128::from(class)), epoch: n, sequence: n, qos_class: class, grants: Totals::all(amounts), ..CreditUpdate::default() };
                    let _ = ctl.apply_update(&ledger, peer, &u, n);
                }
                2 => if let Ok(e) = ledger.entry(peer, class) {
                    if let Ok(r) = ledger.try_reserve(e, &charge) {
                        if let Ok(c) = r.commit() { committed.push(c); }
                    }
                    ledger.record_stall(e, n);
                    let _ = ledger.available(e);
                },
                3 => if let Some(c) = committed.pop() { let _ = ledger.release(c); },
                4 => { let _ = ledger.release(CommittedCharge::new_unchecked(peer, gen as u16, charge)); }
                5 => { let _ = (ctl.usage(&ledger, peer, class, charge), ctl.return_unused(&ledger, peer, class, charge)); }
                6 => { let _ = (ctl.quarantine(&ledger, peer), ctl.mark_stale(&ledger, peer), ctl.expire(&ledger, n)); }
                7 => {
                    let key = CreditKey { receiver_session: SessionId(u128::from(gen)), sender_peer: peer, qos_class: class };
                    let _ = (ctl.entry_for(&ledger, &key), ctl.binding(peer), ctl.is_active(peer), ctl.entry_metrics(&ledger, peer, class), ctl.metrics(&ledger));
                }
                _ => { let c = CommittedCharge::new_unchecked(peer, gen as u16, charge); let _ = (c.credit_key(), c.entry(), c.generation()); }
            }
        }
        for mut r in forged {
            let _ = CommittedCharge::from_record(&r);
            let _ = ledger.release_record(&mut r);
        }
        for c in committed { let _ = ledger.release(c); }
    }

    /// The receiver allocator with any capacity, caps, return paths and
    /// usage reports (out-of-order, decreasing, overflowing totals).
    #[test]
    fn receiver_allocator_never_panics(
        peers in 0u32..4, classes in 0u32..4,
        capacity in [big(), big(), big(), big()],
        entry_cap in [big(), big(), big(), big()],
        paths in [any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()],
        ops in prop::collection::vec((0u8..8, idx(), idx(), [big(), big(), big(), big()], big()), 0..60),
    ) {
        let mut cfg = AllocatorConfig::new(SessionId(3), peers, classes, capacity);
        cfg.entry_cap = entry_cap;
        cfg.return_path = paths.map(|p| if p { ReturnPath::SenderCompletion } else { ReturnPath::ReceiverConsumption });
        let Ok(mut a) = ReceiverAllocator::new(cfg) else { return Ok(()) };
        for (op, peer, class, amounts, n) in ops {
            let c = Charge(amounts);
            match op {
                0 => { let _ = a.open(peer); }
                1 => { let e = if n & 1 == 0 { a.epoch(peer).unwrap_or(n) } else { n }; let _ = a.close(peer, e); }
                2 => { let e = if n & 1 == 0 { a.epoch(peer).unwrap_or(n) } else { n }; let _ = a.fence_complete(peer, e); }
                3 => { let _ = a.grant(peer, class, &c); }
                4 => { let _ = (a.current_update(peer, class), a.outstanding(peer, class), a.epoch(peer)); }
                5 | 6 => {
                    let t = Totals::all(amounts);
                    let u = CreditUsage {
                        receiver_session: SessionId(if op == 5 { 3 } else { u128::from(class) }),
                        epoch: a.epoch(peer).unwrap_or(n),
                        sequence: n,
                        qos_class: class,
                        consumed: t,
                        released: Totals::all(amounts.map(|v| v / 2)),
                        returned: Totals::all(amounts.map(|v| v / 4)),
                        pending_demand: t,
                    };
                    let _ = a.on_usage(peer, &u);
                }
                _ => { let _ = a.consumed(peer, class, &c); }
            }
            // Capacity is conserved whatever the peers report.
            prop_assert!(a.conserved());
            let _ = (a.metrics(), a.free(), a.capacity(), a.session());
        }
    }

    /// The endpoint table with forged handles and QP indices.
    #[test]
    fn endpoint_table_never_panics(
        capacity in prop_oneof![8 => 0u32..6, 1 => Just(u32::MAX)],
        qps in prop_oneof![8 => 0u16..4, 1 => Just(u16::MAX)],
        max_wr in prop_oneof![0u32..4, Just(u32::MAX)],
        ops in prop::collection::vec((0u8..7, idx(), idx(), any::<u16>(), big()), 0..60),
    ) {
        // Bounded storage (capacity x QPs counters): a huge count only with one slot.
        let capacity = if qps > 4 { capacity.min(1) } else { capacity.min(64) };
        let cfg = EndpointConfig { capacity, qps_per_endpoint: qps, max_wr_per_qp: max_wr, drain_timeout_ns: 1000 };
        let Ok(table) = EndpointTable::<u32>::new(cfg) else { return Ok(()) };
        let local = table.register();
        let mut handles = Vec::new();
        for (op, slot, generation, qp, now) in ops {
            let forged = EndpointHandle { slot, generation };
            let h = if slot & 1 == 0 { handles.last().copied().unwrap_or(forged) } else { forged };
            match op {
                0 => if let Ok(h) = table.open(slot) { handles.push(h); },
                1 => { let _ = table.admit_post(h, qp); }
                2 => { let _ = table.release_post(h, qp); }
                3 => { let _ = table.retire(h, RetireReason::Shutdown, now); }
                4 => { let _ = (table.state(h), table.qp_depth(h, qp)); }
                5 => { let g = local.pin(); let _ = table.resource(h, &g).copied(); }
                _ => { let g = local.pin(); let _ = table.poll_reclaim(now, &g, |_| {}); }
            }
        }
        let _ = (table.outstanding_total(), table.qp_depth_total(), table.live(), table.abandoned_posts(), table.stale_releases());
    }

    /// The token pool and the slice table with forged ids and references.
    #[test]
    fn token_pool_and_slice_table_never_panic(
        cap in prop_oneof![0usize..6, Just(usize::MAX)],
        ops in prop::collection::vec((0u8..8, any::<u64>(), idx(), idx(), any::<u16>()), 0..60),
    ) {
        let pool = TokenPool::<TokenRecord>::new(cap.min(64));
        let slices = SliceTable::new(cap.min(64));
        let mut ids = Vec::new();
        for (op, raw, index, attempt, retries) in ops {
            let r = SliceRef { index, attempt };
            match op {
                0 => if let Ok(p) = &pool { if let Ok(id) = p.claim(TokenRecord::default()) { ids.push(id); } },
                1 => if let Ok(p) = &pool { let id = ids.pop().unwrap_or(raw as WrId); let _ = (p.is_live(id), p.complete(id)); },
                2 => if let Ok(p) = &pool { let _ = (p.complete(raw as WrId), p.in_use(), p.capacity()); },
                3 => if let Ok(s) = &slices { let _ = s.open(index); },
                4 => if let Ok(s) = &slices { let _ = s.settle(r, SliceOutcome::Success); },
                5 => if let Ok(s) = &slices { let _ = s.retry(r, retries); },
                6 => if let Ok(s) = &slices { let _ = (s.handoff(r), s.is_current(r)); },
                _ => if let Ok(s) = &slices { let _ = (s.status(index), s.pending(), s.capacity()); },
            }
        }
    }
}
