//! The composed hot path (`completion::HotPath` with every layer on): the
//! fixed admission order, rollback on every refusal source, the rail
//! never choosing a quarantined rail while another is usable, and the
//! completion releasing exactly what the record names, once.
//!
//! The controller must be compiled in (`adaptive-cc`): the tests quarantine
//! routes and read its in-flight bytes.
#![cfg(feature = "adaptive-cc")]

use railyard_core::cc::{CcConfig, Controller, DomainKind, Health, Mode, Monitor};
use railyard_core::classify::{classify_wc, wc, wc_outcome, Effect, WcOutcome};
use railyard_core::completion::{
    CreditDemand, HotPath, InvalidPost, Layers, Path, PostRequest, Refusal, SliceEffect,
};
use railyard_core::credit::{
    Charge, CreditUpdate, LedgerConfig, ReleaseOutcome, Resource, SenderControl, SenderLedger,
    SessionId, Totals,
};
use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, RetireReason};
use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
use railyard_core::slice::{SliceState, SliceTable};
use railyard_core::token::{TokenError, TokenPool};

const SLICE: u32 = 64 * 1024;

/// Two devices, one route each (route r on device r), credit for peer 0.
struct Fixture {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    cc: Controller,
    _monitor: Monitor,
    rails: Selector,
    ledger: SenderLedger,
    ctl: SenderControl,
    /// The last credit update's sequence.
    seq: u64,
    paths: [Path; 2],
}

impl Fixture {
    fn new(tokens: usize, window: u64) -> Self {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            min_window_bytes: window,
            max_window_bytes: window,
            ..CcConfig::default()
        };
        let (cc, monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
        let rails = Selector::new(
            &[DeviceSpec::new(100_000_000_000); 2],
            RailConfig {
                probe_interval: 0,
                ..RailConfig::default()
            },
        )
        .unwrap();
        let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
        let paths = [0u16, 1].map(|d| Path {
            device: d,
            qp: 0,
            route: u32::from(d),
            endpoint: eps.open(()).unwrap(),
        });
        let (ledger, ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
        let mut f = Fixture {
            tokens: TokenPool::new(tokens).unwrap(),
            slices: SliceTable::new(64).unwrap(),
            eps,
            cc,
            _monitor: monitor,
            rails,
            ledger,
            ctl,
            seq: 0,
            paths,
        };
        f.grant(8 << 20, 64, 64);
        f
    }

    /// Cumulative grant to peer 0 (session 1, epoch 1).
    fn grant(&mut self, bytes: u64, requests: u64, consumers: u64) {
        let s = SessionId(1);
        if self.seq == 0 {
            self.ctl.bind(&self.ledger, 0, s, 1).unwrap();
        }
        self.seq += 1;
        let u = CreditUpdate {
            receiver_session: s,
            epoch: 1,
            sequence: self.seq,
            grants: Totals::all([bytes, requests, 0, consumers]),
            ..Default::default()
        };
        self.ctl.apply_update(&self.ledger, 0, &u, 0).unwrap();
    }

    fn owner(&self) -> HotPath<'_, (), Layers<&SenderLedger, &Selector, &Controller>> {
        HotPath::new(&self.tokens, &self.slices, &self.eps)
            .with_max_retries(2)
            .with_layers(Layers {
                credit: &self.ledger,
                rail: &self.rails,
                cc: &self.cc,
            })
    }

    fn demand(&self, bytes: u32) -> CreditDemand {
        CreditDemand {
            entry: self.ledger.entry(0, 0).unwrap(),
            charge: Charge::direct_write(bytes),
        }
    }

    fn credit_available(&self) -> Charge {
        self.ledger
            .available(self.ledger.entry(0, 0).unwrap())
            .unwrap()
            .0
    }

    /// Everything the policy layers and the endpoint table hold.
    fn held(&self) -> (u64, u64, u64, u64) {
        let cc: u64 = (0..2)
            .map(|d| self.cc.device_snapshot(d).unwrap().in_flight)
            .chain((0..2).map(|r| self.cc.route_snapshot(r).unwrap().in_flight))
            .sum();
        let rail: u64 = (0..2).filter_map(|d| self.rails.nic_inflight(d)).sum();
        (
            cc,
            rail,
            self.eps.outstanding_total(),
            self.tokens.in_use() as u64,
        )
    }
}

fn zero_held(f: &Fixture, what: &str) {
    assert_eq!(
        f.held(),
        (0, 0, 0, 0),
        "{what}: (cc, rail, endpoint, tokens) held"
    );
}

#[test]
fn post_and_success_release_every_hold_once() {
    let f = Fixture::new(16, 1 << 20);
    let before = f.credit_available();
    let o = f.owner();
    let s = f.slices.open(0).unwrap();
    let p = o
        .post(
            PostRequest::on(s, f.paths[1], SLICE, 100)
                .to_peer(0)
                .with_credit(f.demand(SLICE)),
        )
        .unwrap();
    let r = p;
    for bit in [
        railyard_core::token::TokenRecord::HOLDS_OUTSTANDING,
        railyard_core::token::TokenRecord::HOLDS_RAIL_CHARGE,
        railyard_core::token::TokenRecord::HOLDS_PERMIT,
        railyard_core::token::TokenRecord::HOLDS_CREDIT,
    ] {
        assert!(r.holds & bit != 0, "record holds {bit:#x}: {r:?}");
    }
    assert_eq!((r.path.device, r.path.route), (1, 1));
    assert_eq!(f.held().0, 2 * u64::from(SLICE)); // device + route domain
    assert_eq!(
        f.credit_available().get(Resource::DataBytes),
        before.get(Resource::DataBytes) - u64::from(SLICE)
    );

    let done = o.complete(p.wr_id, wc::SUCCESS, 0, 5_000).unwrap();
    assert_eq!(done.slice, SliceEffect::Settled(SliceState::Succeeded));
    assert_eq!(done.released.credit(), Some(ReleaseOutcome::Released));
    assert!(done.released.cc().is_some());
    assert_eq!(done.faults().count(), 0);
    zero_held(&f, "after success");
    // Exactly once: the same wr_id again is a typed error, nothing moves.
    assert_eq!(
        o.complete(p.wr_id, wc::SUCCESS, 0, 6_000).unwrap_err(),
        TokenError::Duplicate
    );
    zero_held(&f, "after a duplicate");
    // The success fed the rail's bandwidth estimate.
    assert_eq!(f.rails.nic_sample_ns(1), Some(5_000));
}

#[test]
fn every_refusal_source_gives_back_everything() {
    // CC defers: the window (64 KiB) holds one slice.
    let f = Fixture::new(16, SLICE.into());
    let o = f.owner();
    let a = f.slices.open(0).unwrap();
    let b = f.slices.open(1).unwrap();
    let credit0 = f.credit_available();
    let pa = o
        .post(PostRequest::on(a, f.paths[0], SLICE, 0).with_credit(f.demand(SLICE)))
        .unwrap();
    let held_one = f.held();
    let credit1 = f.credit_available();
    match o.post(PostRequest::on(b, f.paths[0], SLICE, 0).with_credit(f.demand(SLICE))) {
        Err(Refusal::Deferred { path, deferral }) => {
            assert_eq!(path, f.paths[0]);
            assert_eq!(deferral.in_flight, u64::from(SLICE));
        }
        other => panic!("expected a deferral, got {other:?}"),
    }
    assert_eq!(f.held(), held_one, "a deferral holds nothing");
    assert_eq!(
        f.credit_available(),
        credit1,
        "credit is never taken for deferred work"
    );
    o.complete(pa.wr_id, wc::SUCCESS, 0, 1).unwrap();
    zero_held(&f, "defer");
    let _ = credit0;

    // The endpoint refuses (retired): nothing is held, credit untouched.
    let f = Fixture::new(16, 1 << 20);
    let o = f.owner();
    f.eps
        .retire(f.paths[0].endpoint, RetireReason::CqError, 0)
        .unwrap();
    let c = f.credit_available();
    let s = f.slices.open(0).unwrap();
    assert!(matches!(
        o.post(PostRequest::on(s, f.paths[0], SLICE, 0).with_credit(f.demand(SLICE))),
        Err(Refusal::Endpoint {
            error: EndpointError::Retired,
            ..
        })
    ));
    zero_held(&f, "retired endpoint");
    assert_eq!(f.credit_available(), c);

    // Credit is short: typed backpressure naming the exhausted resource.
    let mut f = Fixture::new(16, 1 << 20);
    f.grant(8 << 20, 64, 64); // sequence 2: no change
    let o = f.owner();
    let s = f.slices.open(0).unwrap();
    let big = 9 << 20; // more bytes than granted
    match o.post(PostRequest::on(s, f.paths[0], big, 0).with_credit(f.demand(big))) {
        Err(Refusal::Backpressure(b)) => {
            assert!(b.exhausted.contains(Resource::DataBytes), "{b:?}");
            assert_eq!((b.peer, b.qos_class), (0, 0));
            assert_eq!(
                Refusal::Backpressure(b).reason(),
                Some(railyard_core::evidence::Reason::ReceiverPressure)
            );
        }
        other => panic!("expected backpressure, got {other:?}"),
    }
    zero_held(&f, "credit backpressure");

    // No token: everything rolls back, credit included — it is only
    // committed once the token is claimed, so the receiver never sees it.
    let f = Fixture::new(1, 1 << 20);
    let o = f.owner();
    let s0 = f.slices.open(0).unwrap();
    let s1 = f.slices.open(1).unwrap();
    let p0 = o
        .post(PostRequest::on(s0, f.paths[0], 4096, 0).with_credit(f.demand(4096)))
        .unwrap();
    let held_one = f.held();
    let credit_one = f.credit_available();
    assert_eq!(
        o.post(PostRequest::on(s1, f.paths[1], 4096, 0).with_credit(f.demand(4096)))
            .unwrap_err(),
        Refusal::Token(TokenError::Exhausted)
    );
    assert_eq!(
        f.credit_available(),
        credit_one,
        "a refused claim rolls the credit back"
    );
    assert_eq!(f.held(), held_one);
    o.complete(p0.wr_id, wc::SUCCESS, 0, 1).unwrap();
    zero_held(&f, "token exhausted");

    // Invalid input: typed, nothing held.
    let f = Fixture::new(4, 1 << 20);
    let o = f.owner();
    let s = f.slices.open(0).unwrap();
    assert_eq!(
        o.post(PostRequest::on(s, f.paths[0], 0, 0)).unwrap_err(),
        Refusal::Invalid(InvalidPost::ZeroBytes)
    );
    let dup = [f.paths[0], f.paths[0]];
    assert_eq!(
        o.post(PostRequest::pick(s, &dup, 64, 0)).unwrap_err(),
        Refusal::Invalid(InvalidPost::BadCandidate(0))
    );
    assert_eq!(
        o.post(PostRequest::pick(s, &[], 64, 0)).unwrap_err(),
        Refusal::Invalid(InvalidPost::NoCandidates)
    );
    let bad_route = Path {
        route: 99,
        ..f.paths[0]
    };
    assert!(matches!(
        o.post(PostRequest::on(s, bad_route, 64, 0)),
        Err(Refusal::Invalid(InvalidPost::Cc(_)))
    ));
    let bad_dev = Path {
        device: 7,
        ..f.paths[0]
    };
    assert!(matches!(
        o.post(PostRequest::on(s, bad_dev, 64, 0)),
        Err(Refusal::Invalid(InvalidPost::Rail(_)))
    ));
    let wrong = CreditDemand {
        entry: f.ledger.entry(0, 0).unwrap(),
        charge: Charge::direct_write(100),
    };
    assert!(matches!(
        o.post(PostRequest::on(s, f.paths[0], 64, 0).with_credit(wrong)),
        Err(Refusal::Invalid(InvalidPost::CreditRecord(_)))
    ));
    zero_held(&f, "invalid input");
    assert_eq!(f.credit_available().get(Resource::DataBytes), 8 << 20);
    // A slice whose attempt is not current.
    f.slices
        .settle(s, railyard_core::slice::Outcome::Canceled)
        .unwrap();
    assert!(matches!(
        o.post(PostRequest::on(s, f.paths[0], 64, 0)),
        Err(Refusal::Slice(_))
    ));
    zero_held(&f, "stale slice");
}

#[test]
fn a_quarantined_rail_is_never_chosen_while_another_is_usable() {
    let f = Fixture::new(64, 64 << 20);
    let o = f.owner();
    // Quarantine route 0 (device 0's only route).
    let g = f.cc.route_generation(0).unwrap();
    f.cc.route_feedback(0, g, Effect::Quarantine).unwrap();
    assert_eq!(f.cc.route_snapshot(0).unwrap().health, Health::Quarantined);
    let mut wrs = vec![];
    for i in 0..32 {
        let s = f.slices.open(i).unwrap();
        let p = o
            .post(PostRequest::pick(s, &f.paths, SLICE, 0).to_peer(3))
            .unwrap();
        assert_eq!(p.path.device, 1, "post {i} went to the quarantined rail");
        wrs.push(p.wr_id);
    }
    for w in wrs {
        o.complete(w, wc::SUCCESS, 0, 10).unwrap();
    }
    zero_held(&f, "after the quarantine run");
    // A fixed path on the quarantined rail is avoided, holding nothing.
    let s = f.slices.open(40).unwrap();
    assert!(matches!(
        o.post(PostRequest::on(s, f.paths[0], SLICE, 0)),
        Err(Refusal::Avoided { avoidance, .. }) if avoidance.domain == DomainKind::Route
    ));
    // Both quarantined: PATH_QUARANTINED, nothing held.
    let g = f.cc.route_generation(1).unwrap();
    f.cc.route_feedback(1, g, Effect::Quarantine).unwrap();
    assert!(matches!(
        o.post(PostRequest::pick(s, &f.paths, SLICE, 0)),
        Err(Refusal::Avoided { .. })
    ));
    zero_held(&f, "both quarantined");
}

#[test]
fn a_refused_endpoint_moves_the_slice_to_the_next_candidate() {
    let f = Fixture::new(16, 64 << 20);
    let o = f.owner();
    // The rail prefers device 0 (equal scores, lowest index) ...
    let s = f.slices.open(0).unwrap();
    let p = o.post(PostRequest::pick(s, &f.paths, SLICE, 0)).unwrap();
    assert_eq!((p.path.device, p.skipped), (0, 0));
    o.complete(p.wr_id, wc::SUCCESS, 0, 10).unwrap();
    // ... until device 0's endpoint is retired.
    f.eps
        .retire(f.paths[0].endpoint, RetireReason::CqError, 0)
        .unwrap();
    let s = f.slices.open(1).unwrap();
    let p = o.post(PostRequest::pick(s, &f.paths, SLICE, 0)).unwrap();
    assert_eq!((p.path.device, p.skipped), (1, 1));
    o.complete(p.wr_id, wc::SUCCESS, 0, 10).unwrap();
    zero_held(&f, "after the move");
}

#[test]
fn every_wc_status_settles_the_slice_by_the_one_mapping() {
    for status in (0..=wc::MAX_KNOWN).chain([wc::MAX_KNOWN + 1, 777, u32::MAX]) {
        let f = Fixture::new(8, 64 << 20);
        let o = f.owner();
        let s = f.slices.open(0).unwrap();
        let p = o
            .post(PostRequest::on(s, f.paths[0], SLICE, 0).with_credit(f.demand(SLICE)))
            .unwrap();
        let done = o.complete(p.wr_id, status, 0x42, 10).unwrap();
        let c = classify_wc(status, 0x42);
        assert_eq!(done.wc, c, "classified once, with vendor_err kept");
        match (wc_outcome(&c), done.slice) {
            (WcOutcome::Success, SliceEffect::Settled(SliceState::Succeeded)) => {}
            (WcOutcome::Fatal, SliceEffect::Settled(SliceState::Failed)) => {}
            (WcOutcome::Retryable, SliceEffect::Retry(n)) => {
                assert_eq!(n.attempt, s.attempt + 1, "status {status}");
            }
            (o, e) => panic!("status {status}: outcome {o:?} but slice effect {e:?}"),
        }
        assert_eq!(done.faults().count(), 0, "status {status}");
        zero_held(&f, "after one status");
        // The class's effect reached the route's current generation once.
        let route = f.cc.route_snapshot(0).unwrap();
        if c.effect == Effect::HardError {
            assert_eq!(
                (route.errors, route.health),
                (1, Health::Suspect),
                "status {status}"
            );
        } else {
            assert_eq!(route.errors, 0, "status {status}");
        }
    }
}

#[test]
fn a_stale_completion_only_releases_what_it_owned() {
    let f = Fixture::new(8, 64 << 20);
    let o = f.owner();
    let s = f.slices.open(0).unwrap();
    let old = o
        .post(PostRequest::on(s, f.paths[0], SLICE, 0).with_credit(f.demand(SLICE)))
        .unwrap();
    // The slice moves on (a timeout handoff) and is posted again.
    let s2 = f.slices.handoff(s).unwrap();
    let new = o
        .post(PostRequest::on(s2, f.paths[1], SLICE, 0).with_credit(f.demand(SLICE)))
        .unwrap();
    let late = o.complete(old.wr_id, wc::RETRY_EXC_ERR, 0, 10).unwrap();
    assert_eq!(late.slice, SliceEffect::StaleReleaseOnly);
    assert_eq!(
        f.slices.status(0).unwrap().attempt,
        s2.attempt,
        "the new attempt is untouched"
    );
    // Only the old attempt's holds went: the new one still holds its own.
    assert_eq!(f.held().0, 2 * u64::from(SLICE));
    assert_eq!(f.held().1, u64::from(SLICE));
    let done = o.complete(new.wr_id, wc::SUCCESS, 0, 20).unwrap();
    assert_eq!(done.slice, SliceEffect::Settled(SliceState::Succeeded));
    zero_held(&f, "stale then current");
}

#[test]
fn an_unposted_tail_releases_without_feedback_and_keeps_the_attempt() {
    let f = Fixture::new(8, 64 << 20);
    let o = f.owner();
    let s = f.slices.open(0).unwrap();
    let p = o
        .post(PostRequest::on(s, f.paths[0], SLICE, 0).with_credit(f.demand(SLICE)))
        .unwrap();
    let (rec, rel) = o.unposted(p.wr_id, 1).unwrap();
    assert_eq!(
        (rec.device, rec.route, rec.endpoint, rec.holds),
        (0, 0, p.path.endpoint, p.holds)
    );
    assert_eq!(rel.credit(), Some(ReleaseOutcome::Released));
    assert_eq!(rel.faults().count(), 0);
    zero_held(&f, "unposted");
    assert!(
        f.slices.is_current(s),
        "the attempt stays current, to be re-queued"
    );
    assert_eq!(
        f.rails.nic_sample_ns(0),
        Some(0),
        "no bandwidth sample from unposted work"
    );
    assert_eq!(o.unposted(p.wr_id, 2).unwrap_err(), TokenError::Duplicate);
    // And it can be posted again as is.
    let p = o.post(PostRequest::on(s, f.paths[0], SLICE, 3)).unwrap();
    o.complete(p.wr_id, wc::SUCCESS, 0, 4).unwrap();
    zero_held(&f, "re-posted");
}

#[test]
fn the_endpoint_drains_only_after_every_hold_is_released() {
    // Reclaimed ⇒ settled: when the retired endpoint reports drained, no
    // attempt on it holds a permit or a charge any more.
    let f = Fixture::new(8, 64 << 20);
    let o = f.owner();
    let s = f.slices.open(0).unwrap();
    let p = o.post(PostRequest::on(s, f.paths[0], SLICE, 0)).unwrap();
    f.eps
        .retire(f.paths[0].endpoint, RetireReason::CqError, 0)
        .unwrap();
    let done = o.complete(p.wr_id, wc::WR_FLUSH_ERR, 0, 10).unwrap();
    assert_eq!(
        done.released.endpoint,
        Ok(true),
        "this completion drained the endpoint"
    );
    assert_eq!(f.held().0 + f.held().1, 0);
}
