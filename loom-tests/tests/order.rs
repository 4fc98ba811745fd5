//! loom: one QP's posting-order record (selective signaling): the poster
//! records chains while the poller pops what each CQE covers.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::completion::PostOrder;

/// The poster records a chain of two (the ring's whole capacity), then a
/// third request that fits only once the poller popped; the poller covers
/// each CQE's predecessors. Every request is yielded exactly once, in
/// posting order, with the value the poster recorded (never a slot the
/// poster already reused), and the ring ends empty.
fn order_cover_spsc() {
    loom::model(|| {
        let o = Arc::new(PostOrder::new(2).unwrap());
        let p = o.clone();
        let poster = thread::spawn(move || {
            assert!(p.record(&[11, 12]));
            while !p.record(&[13]) {
                thread::yield_now();
            }
        });
        let mut got = Vec::new();
        for cqe in [12u64, 13] {
            loop {
                let mut c = o.covered_by(cqe);
                if c.found() {
                    got.extend(c.by_ref());
                    got.push(cqe);
                    break;
                }
                thread::yield_now();
            }
        }
        poster.join().unwrap();
        assert_eq!(got, [11, 12, 13], "each once, in posting order");
        assert!(o.is_empty());
    });
}

#[test]
fn order_cover_spsc_each_once_in_order() {
    order_cover_spsc();
}

/// Releasing a slot (moving the tail) before reading it lets the poster
/// record the next request over it: the poller yields 13 for 11.
#[cfg(railyard_broken = "order_tail_before_read")]
#[test]
#[should_panic]
fn broken_order_tail_before_read() {
    order_cover_spsc();
}
