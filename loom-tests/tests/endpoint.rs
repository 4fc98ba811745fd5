//! loom: retire versus post, and reclaim versus a late completion.
#![cfg(railyard_loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use railyard_core::endpoint::{
    EndpointConfig, EndpointError, EndpointTable, ReclaimEvent, RetireReason,
};

fn table() -> EndpointTable<()> {
    EndpointTable::new(EndpointConfig {
        capacity: 1,
        qps_per_endpoint: 1,
        max_wr_per_qp: 4,
        drain_timeout_ns: 10,
    })
    .unwrap()
}

/// Stands in for the QP: a poster touches it between admission and
/// release; reclaim "destroys" it. loom flags any overlap.
struct Qp(UnsafeCell<u32>);
// SAFETY: access is what the model checks; loom's cell reports any race.
unsafe impl Sync for Qp {}

/// A poster races retire + reclaim: the QP is never destroyed while an
/// admitted post uses it, and after retire no post is admitted.
fn retire_vs_post_never_destroys_a_qp_in_use() {
    loom::model(|| {
        let t = Arc::new(table());
        let qp = Arc::new(Qp(UnsafeCell::new(0)));
        let h = t.open(()).unwrap();
        let (t2, qp2) = (t.clone(), qp.clone());
        let poster = thread::spawn(move || match t2.admit_post(h, 0) {
            Ok(()) => {
                // SAFETY: model access; loom checks exclusivity.
                qp2.0.with_mut(|p| unsafe { *p += 1 });
                t2.release_post(h, 0).unwrap();
                true
            }
            Err(e) => {
                // Retired, or already reclaimed (its slot moved on).
                assert!(
                    matches!(e, EndpointError::Retired | EndpointError::StaleGeneration),
                    "{e:?}"
                );
                false
            }
        });
        t.retire(h, RetireReason::CqError, 0).unwrap();
        assert_eq!(t.admit_post(h, 0), Err(EndpointError::Retired));
        let local = t.register();
        let mut reclaimed = false;
        for _ in 0..3 {
            let g = local.pin();
            t.poll_reclaim(1, &g, |e| {
                if let ReclaimEvent::Reclaimed { .. } = e {
                    // SAFETY: model access; loom checks exclusivity.
                    qp.0.with_mut(|p| unsafe { *p = u32::MAX });
                    reclaimed = true;
                }
            })
            .unwrap();
            if reclaimed {
                break;
            }
            thread::yield_now();
        }
        poster.join().unwrap();
        if !reclaimed {
            let g = local.pin();
            assert_eq!(t.poll_reclaim(1, &g, |_| {}), Ok(1), "drained: reclaimable");
        }
        assert_eq!(t.outstanding_total(), 0);
        assert_eq!(t.qp_depth_total(), 0);
    });
}

/// An endpoint is abandoned after its timeout and the slot reopened with
/// one post, while the abandoned generation's late completion arrives: the
/// new generation's counters are never touched.
fn reclaim_vs_late_completion_never_touches_new_generation() {
    loom::model(|| {
        let t = Arc::new(table());
        let h = t.open(()).unwrap();
        t.admit_post(h, 0).unwrap();
        t.retire(h, RetireReason::ContextFatal, 0).unwrap();
        let t2 = t.clone();
        let late = thread::spawn(move || t2.release_post(h, 0));
        let local = t.register();
        let g = local.pin();
        // ForceFlush at 10, Abandoned at 20 unless drained first; a CAS lost
        // to the racing release just defers the decision to the next poll.
        let mut reclaimed = 0;
        for now in [10, 20, 30] {
            reclaimed += t.poll_reclaim(now, &g, |_| {}).unwrap();
        }
        assert_eq!(reclaimed, 1);
        drop(g);
        let h2 = t.open(()).unwrap();
        assert_ne!(h2.generation, h.generation);
        t.admit_post(h2, 0).unwrap();
        let r = late.join().unwrap();
        assert!(
            matches!(r, Ok(_) | Err(EndpointError::StaleGeneration)),
            "{r:?}"
        );
        assert_eq!(
            t.state(h2).unwrap().outstanding,
            1,
            "new generation untouched"
        );
        assert_eq!(
            t.qp_depth(h2, 0),
            Ok(1),
            "new generation's QP depth untouched"
        );
        t.release_post(h2, 0).unwrap();
        assert_eq!(t.outstanding_total(), 0);
    });
}

#[test]
fn endpoint_retire_vs_post_never_destroys_a_qp_in_use() {
    retire_vs_post_never_destroys_a_qp_in_use();
}

#[test]
fn endpoint_reclaim_vs_late_completion_never_touches_new_generation() {
    reclaim_vs_late_completion_never_touches_new_generation();
}

/// Reclaiming a retired endpoint without waiting for its outstanding posts
/// destroys the QP under the poster.
#[cfg(railyard_broken = "endpoint_reclaim_ignores_outstanding")]
#[test]
#[should_panic]
fn broken_endpoint_reclaim_ignores_outstanding() {
    retire_vs_post_never_destroys_a_qp_in_use();
}

/// A release that ignores the generation decrements the new endpoint.
#[cfg(railyard_broken = "endpoint_release_ignores_generation")]
#[test]
#[should_panic]
fn broken_endpoint_release_ignores_generation() {
    reclaim_vs_late_completion_never_touches_new_generation();
}
