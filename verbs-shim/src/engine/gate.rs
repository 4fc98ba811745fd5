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
//! [`CcGate`](super::CcGate) is the RFC 4162 controller behind this trait
//! (what [`Engine::new`](super::Engine::new) uses); [`OpenGate`] admits
//! everything and holds nothing. Besides admission, the gate gets the
//! monitor's control epoch ([`PostGate::on_epoch`]), async-event feedback
//! ([`PostGate::event_feedback`]) and builds task evidence
//! ([`PostGate::observe`]).

pub use super::cc_gate::GateStats;
use railyard_core::cc::PollerStatus;
use railyard_core::classify::{
    classify_event, classify_wc, Effect, EventClassification, FailureScope, ObjectHandling,
};
use railyard_core::endpoint::RetireReason;
use railyard_core::evidence::{Observation, Observed, PathId, Reason};
use railyard_core::token::TokenRecord;

/// What the gate decided for one work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateDecision {
    /// Post it now. The gate may have recorded what it took in the record.
    Admit,
    /// Not now (window full): re-queue the slice and try later. Nothing held.
    Defer,
    /// The route is unhealthy: prefer another rail. The engine moves the
    /// slice to another usable rail of its segment if there is one
    /// (`EngineStats::rail_moves`); with one rail it is re-queued like
    /// `Defer` and counted separately. Nothing held.
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

    /// One control epoch (the engine's monitor thread, every tick; never
    /// the data path). `poller` says whether the CQ pollers made progress.
    fn on_epoch(&self, _now_ns: u64, _poller: PollerStatus) {}

    /// Controller feedback not carried by a permit: an async event's
    /// effect at route scope (`Some(route)`: QP / route events) or at
    /// device scope (`None`: port / device events).
    fn event_feedback(&self, _route: Option<u32>, _effect: Effect) {}

    /// Device-scope feedback (port / device events) for local device
    /// `device` (rail). The default forwards to
    /// [`event_feedback`](Self::event_feedback)`(None, ..)` for device 0.
    fn device_feedback(&self, device: u16, effect: Effect) {
        if device == 0 {
            self.event_feedback(None, effect);
        }
    }

    /// Whether new work may be steered to `device` × `route` (rail
    /// selection avoids a quarantined device or route, RFC 4162 `kAvoid`).
    /// Slow path: read once per transfer at submit, never per WR.
    fn usable(&self, _device: u16, _route: u32) -> bool {
        true
    }

    /// Task evidence for a non-admission or an error of the request in
    /// `rec` (path, and whatever the gate can observe: window, in-flight
    /// bytes, generation, cooldown). Read-only.
    fn observe(&self, rec: &TokenRecord, reason: Reason, now_ns: u64) -> Observation {
        let mut o = Observation::new(reason, now_ns);
        o.path = Observed::Value(PathId {
            device: rec.device,
            route: rec.route,
        });
        o
    }

    /// The transport replaced the route's endpoint (reconnect): the route
    /// moves to a new generation, its state kept (RFC 4162 generation
    /// fencing: late feedback of the old generation settles accounting
    /// only). Returns the new generation, or `None` for a gate that keeps
    /// no routes.
    fn new_generation(&self, _route: u32) -> Option<u32> {
        None
    }

    /// A read-only snapshot of route `route` (health, generation, errors,
    /// window), or `None` for a gate that keeps no routes. Slow path.
    fn route_snapshot(&self, _route: u32) -> Option<railyard_core::cc::DomainSnapshot> {
        None
    }

    /// A read-only snapshot of local device `device`'s domain.
    fn device_snapshot(&self, _device: u16) -> Option<railyard_core::cc::DomainSnapshot> {
        None
    }

    /// The controller's counters (stale feedback, illegal transitions, ...).
    fn cc_stats(&self) -> Option<railyard_core::cc::CcStats> {
        None
    }

    /// Whether a congestion controller is on (not `Mode::Off`). With it
    /// off, [`Engine::task_anomaly`](super::Engine::task_anomaly) reports
    /// UNKNOWN (RFC 4162, caller observability).
    fn enabled(&self) -> bool {
        false
    }

    /// Counters and the in-flight gauge (all zero for a gate that keeps none).
    fn stats(&self) -> GateStats {
        GateStats::default()
    }
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

/// What to do about an async event (the endpoint side; the controller
/// side is [`Classifier::event_class`] → [`PostGate::event_feedback`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventAction {
    /// Nothing (informational: port active, COMM_EST, unknown events, ...).
    Ignore,
    /// Retire the endpoint owning the event's QP (QP / WQ / route scope).
    RetireQp(RetireReason),
    /// Retire every endpoint of this context (CQ, port and device scope,
    /// and the topology refresh after a GID change).
    RetireAll(RetireReason),
}

/// Classifies async events and work-completion statuses (RFC 4162 tables).
pub trait Classifier: Send + Sync {
    /// What to do about an `ibv_async_event` of type `event_type`.
    fn event(&self, event_type: u32) -> EventAction;
    /// How an error completion's status affects its slice.
    fn wc(&self, status: u32) -> railyard_core::completion::WcOutcome;
    /// The full classification of an async event (scope and controller
    /// effect), for [`PostGate::event_feedback`].
    fn event_class(&self, event_type: u32) -> EventClassification {
        classify_event(event_type)
    }
}

/// The classifier backed by `railyard_core::classify` (RFC 4162's WC and
/// async-event matrices).
///
/// **Work completions** (the slice is the "current object"'s operation):
///
/// | current-object handling | statuses | slice |
/// |---|---|---|
/// | complete normally | `SUCCESS` | success |
/// | rebuild the QP | `RNR_RETRY_EXC_ERR`, `RETRY_EXC_ERR`, `RESP_TIMEOUT_ERR` | retryable (on a rebuilt QP / another rail) |
/// | refresh metadata, then the existing retry path | `BAD_RESP`, `REM_INV_REQ`, `REM_ACCESS`, `REM_OP`, `REM_INV_RD_REQ`, `REM_ABORT` | retryable |
/// | complete teardown (derived flush) | `WR_FLUSH_ERR` | retryable (the root cause decides) |
/// | fail the operation | `LOC_LEN`, `LOC_PROT`, `MW_BIND`, `LOC_ACCESS` | fatal |
/// | rebuild the local object | `LOC_QP_OP`, `LOC_EEC_OP`, `LOC_RDD_VIOL`, `INV_EECN`, `INV_EEC_STATE` | fatal (a local programming error does not heal by retrying) |
/// | stop reuse | `FATAL`, `GENERAL`, `TM_*`, any unknown status | fatal (fails closed) |
///
/// A retry is only ever posted on a live endpoint. The engine retires the
/// endpoint on any error completion (an RC QP is in ERR after one) and, for
/// a segment it opened, reconnects once on a new route generation (the
/// metadata refresh); the retry then runs on the new endpoint, or fails
/// with `NO_USABLE_PATH` if the reconnect fails (see `reconnect.rs`).
///
/// **Async events** retire at the classified scope, through the one retire
/// API: QP / WQ / SRQ / route scope → the QP's endpoint; CQ, port and device
/// scope → `RetireAll`, which the engine narrows (per device; a CQ event,
/// which carries the CQ, to the endpoints with a QP on that CQ);
/// `GID_CHANGE` → every endpoint (the existing lifecycle refreshes the
/// addresses; no controller effect); other non-failure and unknown events →
/// nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultClassifier;

/// `IBV_WC_RETRY_EXC_ERR`.
pub const WC_RETRY_EXC_ERR: u32 = railyard_core::classify::wc::RETRY_EXC_ERR;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const WC_RNR_RETRY_EXC_ERR: u32 = railyard_core::classify::wc::RNR_RETRY_EXC_ERR;

impl Classifier for DefaultClassifier {
    fn event(&self, event_type: u32) -> EventAction {
        let c = classify_event(event_type);
        if event_type == crate::verbs::EVENT_GID_CHANGE {
            return EventAction::RetireAll(RetireReason::GidChange);
        }
        match c.scope {
            FailureScope::None | FailureScope::Operation => EventAction::Ignore,
            FailureScope::Qp | FailureScope::Route => EventAction::RetireQp(RetireReason::QpFatal),
            FailureScope::Cq | FailureScope::Port | FailureScope::Device => {
                EventAction::RetireAll(RetireReason::ContextFatal)
            }
        }
    }

    fn wc(&self, status: u32) -> railyard_core::completion::WcOutcome {
        use railyard_core::completion::WcOutcome;
        match classify_wc(status, 0).handling {
            ObjectHandling::CompleteNormally => WcOutcome::Success,
            ObjectHandling::RebuildQp
            | ObjectHandling::RefreshMetadata
            | ObjectHandling::CompleteTeardown => WcOutcome::Retryable,
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
        assert_eq!(c.wc(10), WcOutcome::Retryable); // REM_ACCESS_ERR: refresh, retry
        assert_eq!(c.wc(1), WcOutcome::Fatal); // LOC_LEN_ERR: fail the operation
        assert_eq!(c.wc(2), WcOutcome::Fatal); // LOC_QP_OP_ERR: rebuild local object
        assert_eq!(c.wc(WC_RETRY_EXC_ERR), WcOutcome::Retryable);
        assert_eq!(c.wc(WC_RNR_RETRY_EXC_ERR), WcOutcome::Retryable);
        assert_eq!(c.wc(19), WcOutcome::Fatal); // FATAL_ERR
        assert_eq!(c.wc(9999), WcOutcome::Fatal); // unknown: fail closed
        assert_eq!(
            c.event(crate::verbs::EVENT_DEVICE_FATAL),
            EventAction::RetireAll(RetireReason::ContextFatal)
        );
        assert_eq!(
            c.event(crate::verbs::EVENT_CQ_ERR),
            EventAction::RetireAll(RetireReason::ContextFatal)
        );
        assert_eq!(c.event(7), EventAction::RetireQp(RetireReason::QpFatal)); // PATH_MIG_ERR
        assert_eq!(c.event(4), EventAction::Ignore); // COMM_EST
        assert_eq!(c.event(12345), EventAction::Ignore); // unknown
        assert_eq!(
            c.event_class(crate::verbs::EVENT_PORT_ERR).effect,
            Effect::Quarantine
        );
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
