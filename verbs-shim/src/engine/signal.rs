//! Selective signaling in the engine (`MC_SIGNAL_INTERVAL`): the per-QP
//! posting-order records and the per-token note of which record holds a
//! token. The rule (what a CQE covers, what status a covered request gets,
//! what bounds an unsignaled request's latency) is core's
//! (`railyard_core::completion::PostOrder`, `SignalPolicy`,
//! `HotPath::complete_covered`); this file only feeds it.
//!
//! There is one [`PostOrder`] per (endpoint slot, QP index), sized by
//! `max_wr` (a recorded request occupies a send-queue slot, and the
//! endpoint table admits at most `max_wr` per QP), allocated once at engine
//! start and only when the interval is above 1. A QP index of an endpoint
//! is posted by one worker (its shard's) and its CQ polled by one worker,
//! so each record is single-producer single-consumer, as `PostOrder`
//! requires. An endpoint slot outlives its endpoints: every token notes
//! the endpoint generation it was recorded under, so a CQE on a new
//! endpoint that meets a leftover of an abandoned one (never drained)
//! releases it as a flush, never as a success it cannot prove.

use railyard_core::completion::{PostOrder, SignalPolicy};
use railyard_core::endpoint::EndpointHandle;
use railyard_core::token::WrId;
use std::sync::atomic::{AtomicU64, Ordering};

/// The engine's selective-signaling state.
pub(crate) struct Signaling {
    /// Which requests of a chain are signaled.
    pub(crate) policy: SignalPolicy,
    qps: usize,
    /// `slot * qps + qp`: that QP's posting order (empty: every request
    /// signaled).
    orders: Box<[PostOrder]>,
    /// Per token slot: `(order index + 1) << 32 | endpoint generation` of
    /// the post that holds it, 0 when it was not recorded.
    tok: Box<[AtomicU64]>,
}

impl Signaling {
    /// State for `endpoints` slots of `qps` QPs of depth `max_wr` each and
    /// `tokens` token slots; nothing is allocated with `policy` = every.
    pub(crate) fn new(
        policy: SignalPolicy,
        endpoints: u32,
        qps: u16,
        max_wr: u32,
        tokens: usize,
    ) -> Self {
        let on = policy.interval() > 1;
        let n = if on {
            endpoints as usize * usize::from(qps)
        } else {
            0
        };
        Self {
            policy,
            qps: usize::from(qps),
            orders: (0..n)
                .map(|_| PostOrder::new(max_wr.max(1) as usize).expect("1..=32768 entries"))
                .collect(),
            tok: (0..if on { tokens } else { 0 })
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Records one chain about to be posted on QP `qp` of `h`, before the
    /// doorbell; true if it was recorded (then it may be posted selectively
    /// signaled), false to post it fully signaled (selective signaling
    /// off, or the record is full).
    pub(crate) fn record(&self, h: EndpointHandle, qp: usize, wr_ids: &[WrId]) -> bool {
        let i = h.slot as usize * self.qps + qp;
        let Some(order) = self.orders.get(i) else {
            return false;
        };
        let fits = order.len() + wr_ids.len() <= order.capacity();
        let note = if fits {
            ((i as u64 + 1) << 32) | u64::from(h.generation)
        } else {
            0
        };
        // Before the record (and the doorbell): the poller reads a note
        // only for a token whose CQE it polled, or that a CQE covers.
        for &w in wr_ids {
            if let Some(a) = self.tok.get(w as u32 as usize) {
                a.store(note, Ordering::Release);
            }
        }
        fits && order.record(wr_ids)
    }

    /// Forgets the `n` most recent entries recorded on QP `qp` of `h` (a
    /// `bad_wr` tail).
    pub(crate) fn retract(&self, h: EndpointHandle, qp: usize, n: usize) {
        if let Some(o) = self.orders.get(h.slot as usize * self.qps + qp) {
            o.retract(n);
        }
    }

    /// The order that recorded the live token `wr_id`, and the endpoint
    /// generation it was recorded under.
    #[inline]
    pub(crate) fn order_of(&self, wr_id: WrId) -> Option<(&PostOrder, u32)> {
        let v = self.tok.get(wr_id as u32 as usize)?.load(Ordering::Acquire);
        let i = (v >> 32).checked_sub(1)? as usize;
        Some((self.orders.get(i)?, v as u32))
    }

    /// Whether the live token `wr_id` was recorded under endpoint
    /// generation `generation` of the same order.
    #[inline]
    pub(crate) fn same_endpoint(&self, wr_id: WrId, order: &PostOrder, generation: u32) -> bool {
        self.order_of(wr_id)
            .is_some_and(|(o, g)| std::ptr::eq(o, order) && g == generation)
    }
}
