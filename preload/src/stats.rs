//! The preload's counters: what it saw, what it held back, and its leak
//! gauges, written as one JSON object (`MC_RAILYARD_STATS=FILE`, at exit
//! and on `SIGUSR1`).

use serde::Serialize;

/// Every counter of the preload. The gauges (`*_now`, `tokens_in_use`,
/// `endpoint_outstanding`, `cc_in_flight`, `endpoints_live`) are zero when
/// nothing is in flight; the others count since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PreloadStats {
    /// `off`, `observe` or `enforce`.
    pub cc_mode: &'static str,
    /// Whether railyard-core's controller is compiled in.
    pub cc_compiled_in: bool,
    /// Device contexts opened through the preload.
    pub contexts: u64,
    /// RC QPs managed since start.
    pub qps_created: u64,
    /// RC QPs managed now.
    pub qps_live: u64,
    /// QPs passed through untouched: not RC.
    pub qps_not_rc: u64,
    /// RC QPs passed through because every managed slot was taken.
    pub qps_over_capacity: u64,
    /// QPs created through the extended API (`ibv_create_qp_ex` with more
    /// than a PD), passed through untouched.
    pub qps_ext: u64,
    /// CQs created through `ibv_create_cq_ex`, passed through untouched.
    pub cqs_ext: u64,
    /// `mlx5dv_create_qp` QPs, passed through untouched.
    pub qps_mlx5dv: u64,
    /// `ibv_post_send` calls on managed QPs.
    pub post_calls: u64,
    /// Work requests posted with a railyard token (direct or after a
    /// deferral).
    pub posted_wrs: u64,
    /// Work requests passed to the provider untouched (QPs not managed, or
    /// not yet connected).
    pub passthrough_wrs: u64,
    /// Completions polled for a token (each restored to the application's
    /// `wr_id`).
    pub completions: u64,
    /// Unsignaled work requests completed by a later completion of their QP.
    pub covered: u64,
    /// Completions with an error status (a subset of `completions`).
    pub error_completions: u64,
    /// Tokens of a destroyed or reset QP completed as flushed (no
    /// completion could come for them any more).
    pub flushed_at_teardown: u64,
    /// Completions of a token already completed, restored from the record
    /// (a late completion after its QP was torn down).
    pub late_restored: u64,
    /// Completions whose `wr_id` was not a railyard token (receives,
    /// untouched work requests): left exactly as polled.
    pub foreign_completions: u64,
    /// Work requests held back (CC deferral, token pool, QP depth, or a
    /// QP in error), since start.
    pub deferred_wrs: u64,
    /// ... of them behind work already held back on their QP (posting
    /// order is kept).
    pub deferred_behind: u64,
    /// ... because CC deferred (byte window).
    pub deferred_cc: u64,
    /// ... because CC avoided a quarantined path.
    pub deferred_quarantine: u64,
    /// ... because the token pool or the QP depth was exhausted.
    pub deferred_capacity: u64,
    /// ... because the QP's endpoint was retired (QP in error): flushed.
    pub deferred_retired: u64,
    /// Held-back work requests posted later.
    pub deferred_posted: u64,
    /// Held-back work requests completed as `IBV_WC_WR_FLUSH_ERR` by the
    /// preload (their QP went to error first).
    pub deferred_flushed: u64,
    /// Held-back work requests dropped because their QP was destroyed or
    /// reset (as the provider drops posted ones).
    pub deferred_dropped: u64,
    /// Held back now (a gauge).
    pub deferred_now: u64,
    /// `ibv_post_send` answered `ENOMEM` because a deferral queue was full.
    pub enomem_returns: u64,
    /// The provider refused a post of held-back work (`bad_wr`).
    pub provider_post_errors: u64,
    /// Async events seen.
    pub async_events: u64,
    /// Endpoints retired (any reason).
    pub endpoints_retired: u64,
    /// Endpoints reclaimed after draining.
    pub endpoints_reclaimed: u64,
    /// Endpoints reclaimed without draining (their tokens stay held).
    pub endpoints_abandoned: u64,
    /// Endpoints live now (a gauge).
    pub endpoints_live: u64,
    /// Tokens held by posted work requests now (a gauge).
    pub tokens_in_use: u64,
    /// Posts counted in endpoints now (a gauge).
    pub endpoint_outstanding: u64,
    /// Bytes in flight in every CC domain, device and route (a gauge).
    pub cc_in_flight: u64,
    /// CC permits released twice or never taken (must stay 0).
    pub release_faults: u64,
    /// Rust panics caught at the boundary (must stay 0).
    pub panics: u64,
}
