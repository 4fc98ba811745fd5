//! A fake provider (no device): `post_send` / `poll_cq` entries that
//! behave like an RC send queue, and a rig of one context, CQ and RC QP
//! registered with a [`State`]. The host tests drive the preload's post and
//! poll paths through it, and `examples/icount.rs` counts the preload's
//! instructions per work request against the provider alone.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::c_int;

use railyard_core::cc::{CcConfig, Mode};
use railyard_core::classify::wc;
use rdma_sys::{
    ibv_context, ibv_cq, ibv_qp, ibv_qp_type, ibv_send_flags, ibv_send_wr, ibv_sge, ibv_wc,
};

use crate::config::PreloadConfig;
use crate::state::State;

/// One request the fake NIC took.
#[derive(Clone, Copy, Debug)]
pub struct Taken {
    /// The `wr_id` it carried (a token under the preload).
    pub wr_id: u64,
    /// Whether it asked for a completion.
    pub signaled: bool,
    /// Its QP.
    pub qpn: u32,
}

/// The fake NIC's state (one per thread: see [`NIC`]).
#[derive(Default)]
pub struct FakeNic {
    /// Requests taken and not yet completed, in posting order.
    pub taken: VecDeque<Taken>,
    /// Fail the post at this index of the next chain, with this code.
    pub fail_at: Option<(usize, c_int)>,
    /// Complete the next CQE with this status (then back to success).
    pub error_next: Option<u32>,
    /// Every wr_id the NIC saw, in order (when `record` is set).
    pub seen: Vec<u64>,
    /// Keep `seen` (off for long runs).
    pub record: bool,
}

thread_local! {
    /// This thread's fake NIC.
    pub static NIC: RefCell<FakeNic> = RefCell::new(FakeNic { record: true, ..FakeNic::default() });
}

/// The fake `post_send`.
///
/// # Safety
/// A valid chain, `bad` writable.
pub unsafe extern "C" fn fake_post(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    NIC.with(|n| {
        let mut n = n.borrow_mut();
        let fail = n.fail_at.take();
        let mut cur = wr;
        let mut i = 0;
        while !cur.is_null() {
            if let Some((at, rc)) = fail {
                if at == i {
                    // SAFETY: test-owned pointers.
                    unsafe { *bad = cur };
                    return rc;
                }
            }
            // SAFETY: the chain the preload handed over (test-owned memory).
            let w = unsafe { &*cur };
            if n.record {
                n.seen.push(w.wr_id);
            }
            n.taken.push_back(Taken {
                wr_id: w.wr_id,
                signaled: w.send_flags & ibv_send_flags::IBV_SEND_SIGNALED.0 != 0,
                // SAFETY: a test QP.
                qpn: unsafe { (*qp).qp_num },
            });
            cur = w.next;
            i += 1;
        }
        0
    })
}

/// RC: the send queue completes in order; only signaled requests (or an
/// error) produce a CQE.
/// The fake `poll_cq`.
///
/// # Safety
/// `out` has room for `num` completions.
pub unsafe extern "C" fn fake_poll(_cq: *mut ibv_cq, num: c_int, out: *mut ibv_wc) -> c_int {
    NIC.with(|n| {
        let mut n = n.borrow_mut();
        let mut k = 0;
        while (k as c_int) < num {
            let Some(t) = n.taken.pop_front() else { break };
            let status = n.error_next.take();
            if !t.signaled && status.is_none() {
                continue;
            }
            // SAFETY: `out` has room for `num` entries (test-owned).
            unsafe {
                let w = &mut *out.add(k);
                *w = std::mem::zeroed();
                w.wr_id = t.wr_id;
                w.status = status.unwrap_or(wc::SUCCESS);
                w.opcode = 1;
                w.qp_num = t.qpn;
            }
            k += 1;
        }
        k as c_int
    })
}

/// A state with one fake context, CQ and RC QP at RTS.
pub struct Rig {
    /// The preload's state.
    pub st: State,
    /// The context.
    pub ctx: Box<ibv_context>,
    /// The CQ (send and receive).
    pub cq: Box<ibv_cq>,
    /// The QP (number 17).
    pub qp: Box<ibv_qp>,
    /// The context's slot.
    pub ci: usize,
}

/// A zeroed verbs struct on the heap.
pub fn zeroed<T>() -> Box<T> {
    // SAFETY: the verbs structs used here are C data (ints, pointers,
    // pthread objects): all-zero is a valid value.
    Box::new(unsafe { std::mem::zeroed() })
}

/// A rig under `cfg` (and a fresh fake NIC).
pub fn rig_with(cfg: PreloadConfig) -> Rig {
    NIC.with(|n| {
        *n.borrow_mut() = FakeNic {
            record: true,
            ..FakeNic::default()
        }
    });
    let st = State::new(cfg, 1).unwrap();
    let mut ctx: Box<ibv_context> = zeroed();
    let ci = st
        .add_context(&mut *ctx as *mut _ as usize, 0, fake_post, fake_poll, 0)
        .unwrap();
    let mut cq: Box<ibv_cq> = zeroed();
    cq.context = &mut *ctx;
    st.add_cq(&mut *cq as *mut _ as usize);
    let mut qp: Box<ibv_qp> = zeroed();
    qp.context = &mut *ctx;
    qp.qp_num = 17;
    qp.send_cq = &mut *cq;
    qp.recv_cq = &mut *cq;
    qp.qp_type = ibv_qp_type::IBV_QPT_RC;
    let q = &mut *qp as *mut _ as usize;
    st.add_qp(
        q,
        qp.context as usize,
        17,
        &mut *cq as *mut _ as usize,
        true,
        (64, 2, 64),
    );
    st.qp_rtr(q, [7; 16]);
    st.qp_rts(q);
    Rig {
        st,
        ctx,
        cq,
        qp,
        ci,
    }
}

/// A rig with the default configuration (CC off).
pub fn rig() -> Rig {
    rig_with(PreloadConfig::default())
}

/// CC enforce with a fixed byte window.
pub fn enforce(window: u64) -> PreloadConfig {
    PreloadConfig {
        cc: CcConfig {
            mode: Mode::Enforce,
            min_window_bytes: window,
            max_window_bytes: window,
            initial_window_bytes: Some(window),
            probe_window_bytes: Some(window.min(4096)),
            ..CcConfig::default()
        },
        ..PreloadConfig::default()
    }
}

/// The application's chain: `n` WRITEs of `len` bytes, `wr_id` = base + i.
/// The application's chain: its requests and their scatter lists.
pub struct Chain {
    /// The requests, linked in order.
    pub wrs: Vec<ibv_send_wr>,
    /// Their scatter entries.
    pub _sges: Vec<ibv_sge>,
}

/// `n` WRITEs of `len` bytes, `wr_id` = `base + i`, signaled where `signal(i)`.
pub fn chain(base: u64, n: usize, len: u32, signal: impl Fn(usize) -> bool) -> Chain {
    let mut sges: Vec<ibv_sge> = (0..n)
        .map(|i| ibv_sge {
            addr: 0x10000 + i as u64 * 0x1000,
            length: len,
            lkey: 5,
        })
        .collect();
    // SAFETY: zeroed C data is valid.
    let mut wrs: Vec<ibv_send_wr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
    for i in 0..n {
        wrs[i].wr_id = base + i as u64;
        wrs[i].sg_list = &mut sges[i];
        wrs[i].num_sge = 1;
        wrs[i].send_flags = if signal(i) {
            ibv_send_flags::IBV_SEND_SIGNALED.0
        } else {
            0
        };
    }
    for i in 0..n.saturating_sub(1) {
        let next: *mut ibv_send_wr = &mut wrs[i + 1];
        wrs[i].next = next;
    }
    Chain { wrs, _sges: sges }
}

impl Rig {
    /// Posts the chain through the preload (fake provider).
    pub fn post(&mut self, c: &mut Chain) -> (c_int, *mut ibv_send_wr) {
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: a test QP and a valid chain; the fake provider.
        let rc = unsafe {
            self.st
                .post(fake_post, &mut *self.qp, c.wrs.as_mut_ptr(), &mut bad)
        };
        (rc, bad)
    }

    /// Polls up to `n` completions through the preload.
    pub fn poll(&mut self, n: usize) -> Vec<ibv_wc> {
        // SAFETY: zeroed C data.
        let mut out: Vec<ibv_wc> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: a test CQ with room for `n` completions; the fake provider.
        let k = unsafe {
            self.st.poll(
                fake_poll,
                self.ci,
                &mut *self.cq,
                n as c_int,
                out.as_mut_ptr(),
            )
        };
        assert!(k >= 0);
        out.truncate(k as usize);
        out
    }

    /// Asserts that every gauge is back to zero.
    pub fn drained(&self) {
        let s = self.st.stats();
        assert_eq!(
            (
                s.tokens_in_use,
                s.endpoint_outstanding,
                s.cc_in_flight,
                s.deferred_now,
                s.release_faults
            ),
            (0, 0, 0, 0, 0),
            "{s:?}"
        );
    }
}
