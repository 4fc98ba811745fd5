//! Selective signaling through the composed hot path: a CQE covers the
//! unsignaled requests recorded before it on its QP ([`PostOrder`]), and
//! [`HotPath::complete_covered`] completes them — in posting order, each
//! token exactly once, whatever mix of success, error, flush, duplicate
//! and stale completions arrives (RFC 3136: a stale completion only
//! releases what it owned).

use railyard_core::cc::{CcConfig, Controller, Mode};
use railyard_core::classify::wc;
use railyard_core::completion::{
    Completed, HotPath, Layers, Path, PostOrder, PostRequest, SignalPolicy, SliceEffect,
};
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, EndpointTable};
use railyard_core::slice::{SliceRef, SliceState, SliceTable};
use railyard_core::token::{TokenError, TokenPool, WrId};

struct Rig {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    ep: EndpointHandle,
    opened: std::cell::Cell<u32>,
}

impl Rig {
    fn new() -> Self {
        let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
        let ep = eps.open(()).unwrap();
        Rig {
            tokens: TokenPool::new(64).unwrap(),
            slices: SliceTable::new(64).unwrap(),
            eps,
            ep,
            opened: std::cell::Cell::new(0),
        }
    }

    fn next(&self) -> u32 {
        let i = self.opened.get();
        self.opened.set(i + 1);
        i
    }

    fn owner(&self) -> HotPath<'_, ()> {
        HotPath::new(&self.tokens, &self.slices, &self.eps)
    }
}

/// Posts `n` slices on QP 0 as one chain and records it; returns the
/// slices, the wr_ids and which were signaled under `policy`.
fn post_chain(
    rig: &Rig,
    order: &PostOrder,
    n: usize,
    policy: SignalPolicy,
) -> (Vec<SliceRef>, Vec<WrId>, Vec<bool>) {
    let owner = rig.owner();
    let mut slices = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..n {
        let s = rig.slices.open(rig.next()).unwrap();
        let p = owner.post(PostRequest::new(s, rig.ep, 0, 4096, 0)).unwrap();
        slices.push(s);
        ids.push(p.wr_id);
    }
    assert!(order.record(&ids));
    let sig = (0..n).map(|i| policy.signaled(i, n)).collect();
    (slices, ids, sig)
}

/// What the engine's poller does with one CQE: the covered requests
/// first, in order, then the CQE's own.
fn cqe(
    owner: &HotPath<'_, ()>,
    order: &PostOrder,
    w: WrId,
    status: u32,
) -> Vec<(WrId, Result<Completed, TokenError>)> {
    let mut v: Vec<_> = order
        .covered_by(w)
        .map(|x| (x, owner.complete_covered(x, status, 5)))
        .collect();
    v.push((w, owner.complete(w, status, 0, 5)));
    v
}

#[test]
fn success_cqes_cover_the_unsignaled_in_posting_order() {
    let rig = Rig::new();
    let owner = rig.owner();
    let order = PostOrder::new(16).unwrap();
    let (slices, ids, sig) = post_chain(&rig, &order, 8, SignalPolicy::new(3).unwrap());
    assert_eq!(sig, [false, false, true, false, false, true, false, true]);
    assert_eq!(
        rig.eps.qp_depth(rig.ep, 0),
        Ok(8),
        "unsignaled ones hold SQ slots"
    );
    let mut seen = Vec::new();
    for (i, _) in sig.iter().enumerate().filter(|(_, s)| **s) {
        for (w, r) in cqe(&owner, &order, ids[i], wc::SUCCESS) {
            let d = r.unwrap();
            assert_eq!(d.slice, SliceEffect::Settled(SliceState::Succeeded));
            seen.push(w);
        }
        // Every request up to this CQE is released, none after it.
        assert_eq!(rig.tokens.in_use(), 8 - (i + 1));
        assert_eq!(rig.eps.qp_depth(rig.ep, 0), Ok(8 - (i as u32 + 1)));
    }
    assert_eq!(seen, ids, "each token once, in posting order");
    for s in slices {
        assert_eq!(
            rig.slices.status(s.index).unwrap().state,
            SliceState::Succeeded
        );
    }
    assert!(order.is_empty());
}

#[test]
fn an_unsignaled_error_and_its_flushes_release_every_token_once() {
    // rxe: an unsignaled request that fails gets its own CQE, and so does
    // every request flushed after it; the last (signaled) one flushes too.
    let rig = Rig::new();
    let owner = rig.owner();
    let order = PostOrder::new(16).unwrap();
    let (slices, ids, _) = post_chain(&rig, &order, 8, SignalPolicy::new(8).unwrap());
    let mut done = cqe(&owner, &order, ids[2], wc::REM_ACCESS_ERR);
    for &w in &ids[3..] {
        done.extend(cqe(&owner, &order, w, wc::WR_FLUSH_ERR));
    }
    let got: Vec<WrId> = done.iter().map(|(w, _)| *w).collect();
    assert_eq!(got, ids);
    for (i, (_, r)) in done.iter().enumerate() {
        let d = r.as_ref().unwrap();
        match i {
            // Covered by an error CQE: a derived flush, retried, never a
            // success nobody proved.
            0 | 1 => {
                assert_eq!(d.wc.status, wc::WR_FLUSH_ERR);
                assert!(
                    matches!(d.slice, SliceEffect::Retry(_)),
                    "{i}: {:?}",
                    d.slice
                );
            }
            // The root error keeps its own status (core's mapping decides
            // retry or failure; never success).
            2 => {
                assert_eq!(d.wc.status, wc::REM_ACCESS_ERR);
                assert_ne!(d.slice, SliceEffect::Settled(SliceState::Succeeded));
            }
            _ => assert!(matches!(d.slice, SliceEffect::Retry(_))),
        }
    }
    assert_eq!(rig.tokens.in_use(), 0);
    assert_eq!(rig.eps.qp_depth(rig.ep, 0), Ok(0));
    for s in slices {
        assert_ne!(
            rig.slices.status(s.index).unwrap().state,
            SliceState::Succeeded
        );
    }
    assert!(order.is_empty());
}

#[test]
fn a_provider_that_flushes_only_signaled_requests_still_releases_all() {
    let rig = Rig::new();
    let owner = rig.owner();
    let order = PostOrder::new(16).unwrap();
    let (_, ids, sig) = post_chain(&rig, &order, 8, SignalPolicy::new(4).unwrap());
    // Only the two signaled ones report their flush.
    let mut n = 0;
    for (i, _) in sig.iter().enumerate().filter(|(_, s)| **s) {
        for (_, r) in cqe(&owner, &order, ids[i], wc::WR_FLUSH_ERR) {
            assert!(matches!(r.unwrap().slice, SliceEffect::Retry(_)));
            n += 1;
        }
    }
    assert_eq!(n, 8);
    assert_eq!(rig.tokens.in_use(), 0);
}

#[test]
fn duplicate_and_stale_completions_change_nothing() {
    let rig = Rig::new();
    let owner = rig.owner();
    let order = PostOrder::new(16).unwrap();
    let (slices, ids, _) = post_chain(&rig, &order, 4, SignalPolicy::new(4).unwrap());
    // Slice 1's attempt is retried elsewhere before the CQE arrives (a
    // timeout path): its covered completion releases only.
    let r = rig.slices.retry(slices[1], 8).unwrap();
    let done = cqe(&owner, &order, ids[3], wc::SUCCESS);
    assert_eq!(done.len(), 4);
    assert_eq!(
        done[1].1.as_ref().unwrap().slice,
        SliceEffect::StaleReleaseOnly
    );
    let st = rig.slices.status(slices[1].index).unwrap();
    assert_eq!(
        (st.state, st.attempt),
        (SliceState::Pending, r.attempt().unwrap().attempt)
    );
    assert_eq!(rig.tokens.in_use(), 0);
    // A duplicate CQE for the signaled one, and a late one for a covered
    // one: nothing recorded, the token pool's typed error, nothing moves.
    let again = cqe(&owner, &order, ids[3], wc::SUCCESS);
    assert_eq!(again.len(), 1);
    assert!(again[0].1.is_err());
    assert!(owner.complete_covered(ids[0], wc::SUCCESS, 6).is_err());
    assert_eq!(rig.tokens.in_use(), 0);
    assert_eq!(rig.eps.qp_depth(rig.ep, 0), Ok(0));
}

#[test]
fn a_bad_wr_tail_is_retracted_and_an_abandoned_qp_drains() {
    let rig = Rig::new();
    let owner = rig.owner();
    let order = PostOrder::new(16).unwrap();
    let (_, ids, _) = post_chain(&rig, &order, 6, SignalPolicy::new(2).unwrap());
    // The provider took only 4: the tail is released as unposted and
    // forgotten by the order.
    order.retract(2);
    for &w in &ids[4..] {
        owner.unposted(w, 5).unwrap();
    }
    assert_eq!(order.len(), 4);
    // The QP is torn down with nothing polled: drain releases the rest
    // as flushed.
    let mut n = 0;
    for w in order.drain() {
        owner.complete_covered(w, wc::WR_FLUSH_ERR, 7).unwrap();
        n += 1;
    }
    assert_eq!(n, 4);
    assert!(order.is_empty());
    assert_eq!(rig.tokens.in_use(), 0);
    assert_eq!(rig.eps.qp_depth(rig.ep, 0), Ok(0));
}

#[test]
fn covered_completions_release_the_cc_permit_and_feed_no_false_error() {
    let tokens: TokenPool = TokenPool::new(16).unwrap();
    let slices = SliceTable::new(16).unwrap();
    let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
    let cfg = CcConfig {
        mode: Mode::Enforce,
        ..CcConfig::default()
    };
    let (cc, _m) = Controller::new(&cfg, 1, &[0]).unwrap();
    let owner = HotPath::new(&tokens, &slices, &eps).with_layers(Layers {
        credit: (),
        rail: (),
        cc: &cc,
    });
    let path = Path {
        device: 0,
        qp: 0,
        route: 0,
        endpoint: eps.open(()).unwrap(),
    };
    let order = PostOrder::new(8).unwrap();
    let ids: Vec<WrId> = (0..4)
        .map(|i| {
            let s = slices.open(i).unwrap();
            owner.post(PostRequest::on(s, path, 4096, 0)).unwrap().wr_id
        })
        .collect();
    assert!(order.record(&ids));
    let covered: Vec<Completed> = order
        .covered_by(ids[3])
        .map(|w| owner.complete_covered(w, wc::SUCCESS, 1_000).unwrap())
        .collect();
    assert_eq!(covered.len(), 3);
    owner.complete(ids[3], wc::SUCCESS, 0, 1_000).unwrap();
    assert_eq!(tokens.in_use(), 0);
    assert_eq!(cc.route_snapshot(0).map_or(0, |r| r.in_flight), 0);
    assert!(covered.iter().all(|d| d.faults().count() == 0));
}
