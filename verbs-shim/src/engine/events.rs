//! Async events → what happens to the engine's endpoints (RFC 4162's
//! async-event matrix, the endpoint side). The controller side — the
//! event's effect at its scope — comes from the same
//! `railyard_core::classify::classify_event` row and goes to
//! [`CcGate::event_feedback`](super::CcGate::event_feedback) /
//! [`CcGate::device_feedback`](super::CcGate::device_feedback).
//!
//! Work completions are not mapped here: what a WC does to its slice is
//! decided inside the composed hot path (`railyard_core::completion`), by
//! `railyard_core::classify::wc_outcome`, for every integrator alike.
//!
//! | classified scope | endpoints |
//! |---|---|
//! | none, operation (informational: port active, COMM_EST, unknown events) | untouched |
//! | QP, WQ / SRQ, route | retire the endpoint owning the event's QP |
//! | CQ, port, device | retire every endpoint of the scope (the engine narrows a CQ event to the endpoints with a QP on that CQ, and port / device events to that device) |
//! | `GID_CHANGE` | retire every endpoint (the lifecycle refreshes the addresses; no controller effect) |

use railyard_core::classify::{classify_event, FailureScope};
use railyard_core::endpoint::RetireReason;

/// What to do about an async event (the endpoint side).
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

/// The endpoint action for an `ibv_async_event` of type `event_type`.
pub fn event_action(event_type: u32) -> EventAction {
    if event_type == crate::verbs::EVENT_GID_CHANGE {
        return EventAction::RetireAll(RetireReason::GidChange);
    }
    match classify_event(event_type).scope {
        FailureScope::None | FailureScope::Operation => EventAction::Ignore,
        FailureScope::Qp | FailureScope::Route => EventAction::RetireQp(RetireReason::QpFatal),
        FailureScope::Cq | FailureScope::Port | FailureScope::Device => {
            EventAction::RetireAll(RetireReason::ContextFatal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_core::classify::Effect;

    #[test]
    fn every_event_row_lands_at_its_scope() {
        use crate::verbs::*;
        let all = EventAction::RetireAll(RetireReason::ContextFatal);
        assert_eq!(event_action(EVENT_DEVICE_FATAL), all);
        assert_eq!(event_action(EVENT_CQ_ERR), all);
        assert_eq!(event_action(EVENT_PORT_ERR), all);
        assert_eq!(
            event_action(7),
            EventAction::RetireQp(RetireReason::QpFatal)
        ); // PATH_MIG_ERR
        assert_eq!(
            event_action(EVENT_QP_FATAL),
            EventAction::RetireQp(RetireReason::QpFatal)
        );
        assert_eq!(event_action(4), EventAction::Ignore); // COMM_EST
        assert_eq!(event_action(12345), EventAction::Ignore); // unknown
        assert_eq!(event_action(EVENT_PORT_ACTIVE), EventAction::Ignore);
        assert_eq!(
            event_action(EVENT_GID_CHANGE),
            EventAction::RetireAll(RetireReason::GidChange)
        );
        assert_eq!(classify_event(EVENT_PORT_ERR).effect, Effect::Quarantine);
    }
}
