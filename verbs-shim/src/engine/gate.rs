//! The post gate: the seam where the congestion controller (issue #3,
//! RFC 4162) admits each work request right before `ibv_post_send`, and
//! the seams for event classification and task anomalies.
//!
//! ## Where the gate sits, exactly
//!
//! For every work request a worker does, in this order and with nothing in
//! between but building the WR:
//!
//! 1. [`PostGate::admit`] with the request's [`TokenRecord`] (slice,
//!    endpoint, qp, bytes, route, device, `post_ns`). An `Admit` may set
//!    `HOLDS_PERMIT` (and whatever else the gate takes) in the record;
//! 2. `Owner::post(record)`: slice attempt check, endpoint generation and
//!    QP-depth admission, token claim → `wr_id`. The record is copied into
//!    the token here, which is why the gate runs first: what the gate took
//!    must be named in the token so the completion releases it;
//! 3. `ibv_post_send` of the chain.
//!
//! Every path gives back exactly what was taken:
//!
//! | what happened | gate call |
//! |---|---|
//! | gate said `Defer`/`Avoid` | nothing was taken; the slice is re-queued |
//! | `Owner::post` refused (stale slice, retired endpoint, QP full, no token) | `release(rec, None)` |
//! | `ibv_post_send` refused the tail of a chain (`bad_wr`) | `Owner::unposted(wr_id)` then `release(rec, None)` for each unposted WR only |
//! | the WR completed (any status) | `Owner::complete(wr_id, ..)` then `release(rec, Some(wc_status))` |
//! | the endpoint was abandoned (never drained) | the token stays live until its flush completion arrives; nothing is released twice |
//!
//! [`OpenGate`] admits everything and holds nothing.

use railyard_core::endpoint::RetireReason;
use railyard_core::token::TokenRecord;

/// What the gate decided for one work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateDecision {
    /// Post it now. The gate may have recorded what it took in the record.
    Admit,
    /// Not now (window full): re-queue the slice and try later. Nothing held.
    Defer,
    /// The route is unhealthy: prefer another rail. With one rail the slice
    /// is re-queued like `Defer` and counted separately. Nothing held.
    Avoid,
}

/// Admission right before `ibv_post_send`. Implemented by the congestion
/// controller; must be cheap, lock-free and allocation-free (it runs once
/// per work request on the worker thread).
pub trait PostGate: Send + Sync {
    /// Decides whether the work request described by `rec` may be posted at
    /// `now_ns`. On `Admit` it may mark in `rec.holds` what it took (e.g.
    /// `TokenRecord::HOLDS_PERMIT`); on `Defer`/`Avoid` it must take nothing.
    fn admit(&self, rec: &mut TokenRecord, now_ns: u64) -> GateDecision;

    /// Gives back what `admit` took for `rec`, exactly once per `Admit`.
    /// `wc_status` is the work completion's status (ibverbs values), or
    /// `None` when the request never reached the NIC (refused by ownership
    /// checks, or the unposted tail of a `bad_wr` chain).
    fn release(&self, rec: &TokenRecord, wc_status: Option<u32>, now_ns: u64);
}

/// A gate that admits everything and holds nothing (CC off).
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenGate;

impl PostGate for OpenGate {
    #[inline]
    fn admit(&self, _rec: &mut TokenRecord, _now_ns: u64) -> GateDecision {
        GateDecision::Admit
    }
    #[inline]
    fn release(&self, _rec: &TokenRecord, _wc_status: Option<u32>, _now_ns: u64) {}
}

/// What to do about an async event: the seam for the #3 classifier
/// (`core::classify`), which is not on main yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventAction {
    /// Nothing (informational: port active, COMM_EST, ...).
    Ignore,
    /// Retire the endpoint owning the event's QP.
    RetireQp(RetireReason),
    /// Retire every endpoint of this context (device fatal, GID change,
    /// port error).
    RetireAll(RetireReason),
}

/// Classifies async events and work-completion statuses. The lead plugs
/// the #3 classifier in here; [`DefaultClassifier`] is the conservative
/// stand-in used until then.
pub trait Classifier: Send + Sync {
    /// What to do about an `ibv_async_event` of type `event_type`.
    fn event(&self, event_type: u32) -> EventAction;
    /// How an error completion's status affects its slice.
    fn wc(&self, status: u32) -> railyard_core::completion::WcOutcome;
}

/// The stand-in classifier: QP-scope errors retire the QP's endpoint;
/// device fatal, port error and GID change retire all endpoints; flushes,
/// transport-retry and RNR-retry exhaustion are retryable; every other
/// error status is fatal for the slice.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultClassifier;

/// `IBV_WC_RETRY_EXC_ERR`.
pub const WC_RETRY_EXC_ERR: u32 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const WC_RNR_RETRY_EXC_ERR: u32 = 13;

impl Classifier for DefaultClassifier {
    fn event(&self, event_type: u32) -> EventAction {
        use crate::verbs::*;
        match event_type {
            EVENT_QP_FATAL | EVENT_QP_REQ_ERR | EVENT_QP_ACCESS_ERR => {
                EventAction::RetireQp(RetireReason::QpFatal)
            }
            EVENT_DEVICE_FATAL => EventAction::RetireAll(RetireReason::ContextFatal),
            EVENT_PORT_ERR => EventAction::RetireAll(RetireReason::ContextFatal),
            EVENT_GID_CHANGE => EventAction::RetireAll(RetireReason::GidChange),
            _ => EventAction::Ignore,
        }
    }

    fn wc(&self, status: u32) -> railyard_core::completion::WcOutcome {
        use railyard_core::completion::WcOutcome;
        match status {
            crate::WC_SUCCESS => WcOutcome::Success,
            crate::WC_WR_FLUSH_ERR | WC_RETRY_EXC_ERR | WC_RNR_RETRY_EXC_ERR => {
                WcOutcome::Retryable
            }
            _ => WcOutcome::Fatal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_core::completion::WcOutcome;

    #[test]
    fn open_gate_admits_and_takes_nothing() {
        let mut r = TokenRecord::default();
        assert_eq!(OpenGate.admit(&mut r, 1), GateDecision::Admit);
        assert_eq!(r, TokenRecord::default());
    }

    #[test]
    fn default_classifier() {
        let c = DefaultClassifier;
        assert_eq!(c.wc(0), WcOutcome::Success);
        assert_eq!(c.wc(crate::WC_WR_FLUSH_ERR), WcOutcome::Retryable);
        assert_eq!(c.wc(10), WcOutcome::Fatal); // REM_ACCESS_ERR
        assert_eq!(
            c.event(crate::verbs::EVENT_QP_FATAL),
            EventAction::RetireQp(RetireReason::QpFatal)
        );
        assert_eq!(
            c.event(crate::verbs::EVENT_GID_CHANGE),
            EventAction::RetireAll(RetireReason::GidChange)
        );
        assert_eq!(
            c.event(crate::verbs::EVENT_PORT_ACTIVE),
            EventAction::Ignore
        );
    }
}
