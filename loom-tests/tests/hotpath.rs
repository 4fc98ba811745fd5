//! loom: the composed hot path (`completion::HotPath` with the CC and rail
//! layers on) — a post and its completion on one thread, retire and reclaim
//! of the endpoint on another.
//!
//! The invariant: **reclaimed ⇒ settled.** When `poll_reclaim` reports the
//! retired endpoint reclaimed (drained), no attempt posted on it holds a CC
//! permit or a rail charge any more, so the transport may destroy its QPs
//! and count the path idle. The composition guarantees it by admitting the
//! endpoint before any policy hold and releasing it after every one.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::cc::{CcConfig, Controller, Mode, Monitor};
use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, Layers, Path, PostRequest, Refusal};
use railyard_core::endpoint::{
    EndpointConfig, EndpointError, EndpointTable, ReclaimEvent, RetireReason,
};
use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
use railyard_core::slice::SliceTable;
use railyard_core::token::TokenPool;

struct World {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    cc: Controller,
    _monitor: Monitor,
    rails: Selector,
}

impl World {
    fn new() -> Self {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            ..CcConfig::default()
        };
        let (cc, monitor) = Controller::new(&cfg, 1, &[0]).unwrap();
        World {
            tokens: TokenPool::new(2).unwrap(),
            slices: SliceTable::new(2).unwrap(),
            eps: EndpointTable::new(EndpointConfig {
                capacity: 1,
                qps_per_endpoint: 1,
                max_wr_per_qp: 4,
                drain_timeout_ns: 1_000,
            })
            .unwrap(),
            cc,
            _monitor: monitor,
            rails: Selector::new(&[DeviceSpec::new(1_000_000_000)], RailConfig::default()).unwrap(),
        }
    }

    fn owner(&self) -> HotPath<'_, (), Layers<(), &Selector, &Controller>> {
        HotPath::new(&self.tokens, &self.slices, &self.eps).with_layers(Layers {
            credit: (),
            rail: &self.rails,
            cc: &self.cc,
        })
    }

    /// Bytes the policy layers hold (CC route + device domains, rail NIC).
    fn held(&self) -> u64 {
        self.cc.route_snapshot(0).unwrap().in_flight
            + self.cc.device_snapshot(0).unwrap().in_flight
            + self.rails.nic_inflight(0).unwrap()
    }
}

/// A post + its (flush) completion race retire + reclaim of the endpoint:
/// whenever the endpoint is reported reclaimed, nothing posted on it holds
/// a permit or a charge.
fn reclaim_implies_released() {
    loom::model(|| {
        let w = Arc::new(World::new());
        let ep = w.eps.open(()).unwrap();
        let path = Path {
            device: 0,
            qp: 0,
            route: 0,
            endpoint: ep,
        };
        let w2 = w.clone();
        let poster = thread::spawn(move || {
            let o = w2.owner();
            let s = w2.slices.open(0).unwrap();
            match o.post(PostRequest::on(s, path, 4096, 0)) {
                Ok(p) => {
                    // The NIC flushes it (the QP went to ERR at retire).
                    let d = o.complete(p.wr_id, wc::WR_FLUSH_ERR, 0, 1).unwrap();
                    assert_eq!(d.faults().count(), 0);
                }
                // Retired, or already reclaimed (its slot moved on).
                Err(Refusal::Endpoint {
                    error: EndpointError::Retired | EndpointError::StaleGeneration,
                    ..
                }) => {}
                Err(e) => panic!("unexpected refusal {e:?}"),
            }
        });
        w.eps.retire(ep, RetireReason::CqError, 0).unwrap();
        let local = w.eps.register();
        let mut reclaimed = false;
        for _ in 0..3 {
            let g = local.pin();
            w.eps
                .poll_reclaim(1, &g, |e| {
                    if let ReclaimEvent::Reclaimed { .. } = e {
                        reclaimed = true;
                    }
                })
                .unwrap();
            if reclaimed {
                // Reclaimed ⇒ settled.
                assert_eq!(w.held(), 0, "endpoint reclaimed while holds remain");
                break;
            }
            thread::yield_now();
        }
        poster.join().unwrap();
        assert_eq!(w.held(), 0);
        assert_eq!(w.tokens.in_use(), 0);
        assert_eq!(w.eps.outstanding_total(), 0);
    });
}

/// The dedicated-poller shape: one thread posts, another completes the
/// `wr_id` it receives, a third retires and reclaims. The poller sees the
/// record the poster published, releases exactly its holds, and the
/// endpoint drains only after them.
fn post_complete_retire_on_three_threads() {
    loom::model(|| {
        use loom::sync::atomic::{AtomicU64, Ordering};
        let w = Arc::new(World::new());
        let ep = w.eps.open(()).unwrap();
        let path = Path {
            device: 0,
            qp: 0,
            route: 0,
            endpoint: ep,
        };
        // 0 = nothing yet, u64::MAX = refused, else wr_id + 1.
        let mailbox = Arc::new(AtomicU64::new(0));
        let (w2, m2) = (w.clone(), mailbox.clone());
        let poster = thread::spawn(move || {
            let s = w2.slices.open(0).unwrap();
            let v = match w2.owner().post(PostRequest::on(s, path, 4096, 0)) {
                Ok(p) => p.wr_id + 1,
                Err(_) => u64::MAX,
            };
            m2.store(v, Ordering::Release);
        });
        let (w3, m3) = (w.clone(), mailbox.clone());
        let poller = thread::spawn(move || loop {
            match m3.load(Ordering::Acquire) {
                0 => thread::yield_now(),
                u64::MAX => return,
                v => {
                    let d = w3.owner().complete(v - 1, wc::SUCCESS, 0, 1).unwrap();
                    assert_eq!(d.record.bytes, 4096, "the poller sees the published record");
                    assert_eq!(d.faults().count(), 0);
                    return;
                }
            }
        });
        w.eps.retire(ep, RetireReason::CqError, 0).unwrap();
        let local = w.eps.register();
        let g = local.pin();
        let mut reclaimed = false;
        w.eps
            .poll_reclaim(1, &g, |e| {
                reclaimed |= matches!(e, ReclaimEvent::Reclaimed { .. })
            })
            .unwrap();
        if reclaimed {
            assert_eq!(w.held(), 0, "endpoint reclaimed while holds remain");
        }
        drop(g);
        poster.join().unwrap();
        poller.join().unwrap();
        assert_eq!(w.held(), 0);
        assert_eq!(w.tokens.in_use(), 0);
        assert_eq!(w.eps.outstanding_total(), 0);
    });
}

#[test]
fn hotpath_reclaim_implies_released() {
    reclaim_implies_released();
}

#[test]
fn hotpath_post_complete_retire_on_three_threads() {
    post_complete_retire_on_three_threads();
}

/// Releasing the endpoint before the policy holds lets a reclaimer see the
/// endpoint drained while the permit and the rail charge are still held.
#[cfg(railyard_broken = "hotpath_endpoint_first")]
#[test]
#[should_panic(expected = "endpoint reclaimed while holds remain")]
fn broken_hotpath_endpoint_first() {
    reclaim_implies_released();
}

/// The same twin on the three-thread shape.
#[cfg(railyard_broken = "hotpath_endpoint_first")]
#[test]
#[should_panic(expected = "endpoint reclaimed while holds remain")]
fn broken_hotpath_endpoint_first_three_threads() {
    post_complete_retire_on_three_threads();
}
