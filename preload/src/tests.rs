//! The post and poll paths against a fake provider (no device): what the
//! application sees is exactly what it would see without railyard, and
//! every token, permit and endpoint count comes back.

use railyard_core::classify::wc;
use rdma_sys::{ibv_qp, ibv_send_wr, ibv_wc};

use crate::config::PreloadConfig;
use crate::fake::*;

fn ids(w: &[ibv_wc]) -> Vec<u64> {
    w.iter().map(|w| w.wr_id).collect()
}

/// The chain as the application built it: ids and links untouched.
fn intact(c: &Chain, base: u64) {
    for (i, w) in c.wrs.iter().enumerate() {
        assert_eq!(w.wr_id, base + i as u64);
        let want: *const ibv_send_wr = c.wrs.get(i + 1).map_or(std::ptr::null(), |n| n);
        assert!(std::ptr::eq(w.next, want), "link {i}");
    }
}

#[test]
fn tokens_go_down_and_the_application_ids_come_back() {
    let mut r = rig();
    let mut c = chain(100, 3, 4096, |_| true);
    assert_eq!(r.post(&mut c).0, 0);
    intact(&c, 100);
    let seen = NIC.with(|n| n.borrow().seen.clone());
    assert_eq!(seen.len(), 3);
    assert!(
        seen.iter().all(|id| !(100..103).contains(id)),
        "the NIC saw tokens: {seen:?}"
    );
    assert_eq!(r.st.stats().tokens_in_use, 3);
    assert_eq!(ids(&r.poll(8)), [100, 101, 102]);
    let s = r.st.stats();
    assert_eq!((s.posted_wrs, s.completions, s.post_calls), (3, 3, 1));
    r.drained();
    let _ = (&r.ctx,);
}

#[test]
fn unsignaled_requests_are_covered_by_the_next_completion() {
    let mut r = rig();
    let mut c = chain(0, 4, 1024, |i| i == 3);
    assert_eq!(r.post(&mut c).0, 0);
    assert_eq!(ids(&r.poll(8)), [3]);
    let s = r.st.stats();
    assert_eq!((s.completions, s.covered), (1, 3));
    r.drained();
}

#[test]
fn a_bad_wr_is_the_applications_own_and_its_tokens_come_back() {
    let mut r = rig();
    NIC.with(|n| n.borrow_mut().fail_at = Some((1, libc::ENOMEM)));
    let mut c = chain(10, 3, 512, |_| true);
    let (rc, bad) = r.post(&mut c);
    assert_eq!(rc, libc::ENOMEM);
    assert!(
        std::ptr::eq(bad, &c.wrs[1]),
        "bad_wr points into the application's chain"
    );
    intact(&c, 10);
    assert_eq!(r.st.stats().tokens_in_use, 1);
    assert_eq!(ids(&r.poll(8)), [10]);
    r.drained();
}

#[test]
fn a_cc_deferral_is_never_an_error_and_order_is_kept() {
    // Window of two 4 KiB requests: the rest is held back, posted as
    // completions free the window, in order, behind what waits already.
    let mut r = rig_with(enforce(8192));
    let mut a = chain(0, 4, 4096, |_| true);
    assert_eq!(r.post(&mut a).0, 0);
    intact(&a, 0);
    let mut b = chain(4, 2, 4096, |_| true);
    assert_eq!(r.post(&mut b).0, 0, "behind held-back work, still no error");
    let s = r.st.stats();
    assert_eq!(
        (
            s.posted_wrs,
            s.deferred_wrs,
            s.deferred_cc,
            s.deferred_behind
        ),
        (2, 4, 2, 2)
    );
    // The application reuses its arrays at once: the copies stand.
    a.wrs.iter_mut().for_each(|w| w.wr_id = 999);
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(ids(&r.poll(8)));
    }
    assert_eq!(got, [0, 1, 2, 3, 4, 5]);
    let s = r.st.stats();
    assert_eq!((s.deferred_posted, s.completions), (4, 6));
    r.drained();
}

#[test]
fn a_full_deferral_queue_answers_enomem_at_the_first_request_that_did_not_fit() {
    let mut r = rig_with(PreloadConfig {
        defer_wrs: Some(2),
        ..enforce(4096)
    });
    let mut c = chain(0, 5, 4096, |_| true);
    let (rc, bad) = r.post(&mut c);
    assert_eq!(rc, libc::ENOMEM);
    assert!(std::ptr::eq(bad, &c.wrs[3]));
    let s = r.st.stats();
    assert_eq!((s.posted_wrs, s.deferred_now, s.enomem_returns), (1, 2, 1));
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(ids(&r.poll(8)));
    }
    assert_eq!(got, [0, 1, 2]);
    r.drained();
}

#[test]
fn after_an_error_completion_later_work_completes_as_flushed() {
    let mut r = rig_with(enforce(8192));
    let mut a = chain(0, 3, 4096, |_| true);
    assert_eq!(r.post(&mut a).0, 0); // 2 posted, 1 held
    NIC.with(|n| n.borrow_mut().error_next = Some(wc::REM_ACCESS_ERR));
    let first = r.poll(1);
    assert_eq!((first[0].wr_id, first[0].status), (0, wc::REM_ACCESS_ERR));
    // The endpoint is retired; new work is held and flushed, after the
    // posted request's own completion, with the application's ids.
    let mut b = chain(3, 1, 4096, |_| true);
    assert_eq!(r.post(&mut b).0, 0);
    let rest = r.poll(8);
    assert_eq!(ids(&rest), [1, 2, 3]);
    assert_eq!(rest[0].status, wc::SUCCESS);
    assert!(rest[1..]
        .iter()
        .all(|w| w.status == wc::WR_FLUSH_ERR && w.qp_num == 17));
    let s = r.st.stats();
    assert_eq!(
        (s.error_completions, s.endpoints_retired, s.deferred_flushed),
        (1, 1, 2)
    );
    r.drained();
}

#[test]
fn destroy_flushes_outstanding_tokens_and_late_completions_are_restored() {
    let mut r = rig();
    let mut c = chain(50, 2, 4096, |_| true);
    assert_eq!(r.post(&mut c).0, 0);
    let q = &mut *r.qp as *mut _ as usize;
    let closing = r.st.qp_closing(q).unwrap();
    r.st.qp_destroyed(closing);
    let s = r.st.stats();
    assert_eq!((s.flushed_at_teardown, s.qps_live), (2, 0));
    r.drained();
    // The provider still had their CQEs: not a token any more, restored.
    let w = r.poll(8);
    assert_eq!(ids(&w), [50, 51]);
    assert_eq!(r.st.stats().late_restored, 2);
}

#[test]
fn completions_that_are_not_ours_are_left_as_polled() {
    let mut r = rig();
    // A receive on the shared CQ, and a request the NIC took untokenized.
    NIC.with(|n| {
        n.borrow_mut().taken.push_back(Taken {
            wr_id: 0xabc,
            signaled: true,
            qpn: 17,
        })
    });
    let w = r.poll(4);
    assert_eq!(ids(&w), [0xabc]);
    assert_eq!(r.st.stats().foreign_completions, 1);
    NIC.with(|n| {
        n.borrow_mut().taken.push_back(Taken {
            wr_id: 0x1234,
            signaled: true,
            qpn: 99,
        })
    });
    assert_eq!(
        ids(&r.poll(4)),
        [0x1234],
        "a QP the preload does not manage"
    );
    r.drained();
}

#[test]
fn posts_before_rts_pass_through_untouched() {
    let mut r = rig();
    let mut qp2: Box<ibv_qp> = zeroed();
    qp2.context = &mut *r.ctx;
    qp2.qp_num = 18;
    qp2.send_cq = &mut *r.cq;
    let q2 = &mut *qp2 as *mut _ as usize;
    r.st.add_qp(
        q2,
        r.qp.context as usize,
        18,
        &mut *r.cq as *mut _ as usize,
        true,
        (16, 1, 0),
    );
    let mut c = chain(7, 1, 64, |_| true);
    let mut bad = std::ptr::null_mut();
    // SAFETY: test QP and chain; fake provider.
    let rc = unsafe {
        r.st.post(fake_post, &mut *qp2, c.wrs.as_mut_ptr(), &mut bad)
    };
    assert_eq!(rc, 0);
    assert_eq!(NIC.with(|n| n.borrow().seen.clone()), [7]);
    assert_eq!(ids(&r.poll(4)), [7]);
    let s = r.st.stats();
    assert_eq!((s.passthrough_wrs, s.tokens_in_use), (1, 0));
}

#[test]
fn an_async_qp_error_retires_the_endpoint_and_held_work_flushes() {
    let mut r = rig_with(enforce(4096));
    let mut c = chain(0, 2, 4096, |_| true);
    assert_eq!(r.post(&mut c).0, 0);
    let q = &mut *r.qp as *mut _ as usize;
    r.st.on_event(
        r.ci,
        railyard_core::classify::event::QP_FATAL,
        Some(q),
        None,
    );
    assert_eq!(r.st.stats().endpoints_retired, 1);
    // The posted one completes (flushed by the NIC); the held one flushes.
    NIC.with(|n| n.borrow_mut().error_next = Some(wc::WR_FLUSH_ERR));
    let w = r.poll(8);
    assert_eq!(ids(&w), [0, 1]);
    assert!(w.iter().all(|w| w.status == wc::WR_FLUSH_ERR));
    r.drained();
}
