//! The per-peer credit link state machine and capability negotiation.
//!
//! ```text
//! Disabled ------------------------------> Legacy
//!    | (mode Optional / Required)
//!    v
//! Negotiating -- unsupported -----------> Legacy (Optional) or Failed (Required)
//!    |
//!    +-- compatible --------------------> Active(version)
//!                                           |
//!                      stale/disconnect ----+----> Stale --- newer update --> Active
//!                                           |
//!                      new session/epoch ---+----> Fencing -> Active(new epoch)
//!  any live state -- credit violation ---------> Quarantined
//! ```
//!
//! Pure and deterministic: no atomics, no time. The dispatch path asks
//! [`CreditLink::gate`]; with credit disabled that is one enum match
//! returning [`Gate::Bypass`]. **Required mode never treats missing credit as
//! infinite:** it can never reach `Legacy`, and every non-`Active` state
//! gates to `Block` or `Fail`.
use core::fmt;

/// Configured rollout mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CreditMode {
    /// Receiver credit off (the default): current behavior unchanged.
    #[default]
    Disabled,
    /// Negotiate; legacy peers keep bounded local dispatch (counted).
    Optional,
    /// Negotiate; unsupported or stale peers cannot use the gated path.
    Required,
}

/// The negotiated capability of a peer link (RFC 2849).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// The peer has no receiver-credit capability.
    Unsupported,
    /// Rollout allows legacy bounded local dispatch for this peer.
    OptionalLegacy,
    /// Credit is required but not (yet / any more) active.
    Required,
    /// Typed updates of this schema version are accepted.
    Active(u16),
}

/// Link state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkState {
    /// Credit disabled by configuration, not started.
    Disabled,
    /// Legacy bounded local dispatch (disabled, or optional + old peer).
    Legacy,
    /// Capability negotiation in progress.
    Negotiating,
    /// Updates accepted; dispatch reserves credit.
    Active(u16),
    /// No fresh update / control disconnected: no new gated dispatch;
    /// handed-off work continues to its terminal state.
    Stale(u16),
    /// A new session/epoch: old state is being fenced.
    Fencing(u16),
    /// Required mode with an unsupported peer.
    Failed,
    /// A credit violation: the peer is quarantined.
    Quarantined,
}

/// An input to the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkEvent {
    /// Peer setup begins.
    Start,
    /// Negotiation found no compatible capability.
    PeerUnsupported,
    /// Negotiation agreed on `version`.
    PeerCompatible(u16),
    /// A fresh update was accepted.
    UpdateAccepted,
    /// Update freshness expired or the control channel disconnected.
    StaleOrDisconnect,
    /// The peer has a new session or epoch.
    NewSessionOrEpoch,
    /// Old session fenced and the new epoch's first update applied.
    Fenced,
    /// A credit protocol violation.
    Violation,
}

/// What the dispatch path must do for this link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gate {
    /// Credit is not in play: dispatch as without this layer.
    Bypass,
    /// Reserve the full charge before handoff.
    Reserve,
    /// Keep the work queued (backpressure, source RECEIVER_CREDIT).
    Block {
        /// Whether the caller may take a configured fallback.
        fallback_allowed: bool,
    },
    /// Fail the work explicitly (required mode, failed / quarantined peer).
    Fail,
}

/// An event that is not valid in the current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionError {
    /// The state.
    pub from: LinkState,
    /// The rejected event.
    pub event: LinkEvent,
}

impl fmt::Display for TransitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "credit link: event {:?} invalid in state {:?}",
            self.event, self.from
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for TransitionError {}

/// One peer link's credit state.
///
/// ```
/// use railyard_core::credit::{CreditLink, CreditMode, Gate, LinkEvent, LinkState};
/// // Default: disabled → legacy, and dispatch bypasses credit.
/// let mut l = CreditLink::new(CreditMode::Disabled);
/// l.on(LinkEvent::Start).unwrap();
/// assert_eq!(l.gate(), Gate::Bypass);
/// // Required mode with an old peer fails, never falls back to "infinite".
/// let mut r = CreditLink::new(CreditMode::Required);
/// r.on(LinkEvent::Start).unwrap();
/// r.on(LinkEvent::PeerUnsupported).unwrap();
/// assert_eq!(r.state(), LinkState::Failed);
/// assert_eq!(r.gate(), Gate::Fail);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditLink {
    mode: CreditMode,
    state: LinkState,
    legacy_fallbacks: u64,
    violations: u64,
    epoch_resets: u64,
}

impl CreditLink {
    /// A link in `Disabled`.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, LinkState};
    /// let l = CreditLink::new(CreditMode::Optional);
    /// assert_eq!((l.mode(), l.state()), (CreditMode::Optional, LinkState::Disabled));
    /// ```
    pub const fn new(mode: CreditMode) -> CreditLink {
        CreditLink {
            mode,
            state: LinkState::Disabled,
            legacy_fallbacks: 0,
            violations: 0,
            epoch_resets: 0,
        }
    }

    /// The configured mode.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode};
    /// assert_eq!(CreditLink::new(CreditMode::Required).mode(), CreditMode::Required);
    /// ```
    pub const fn mode(&self) -> CreditMode {
        self.mode
    }

    /// The current state.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, LinkEvent, LinkState};
    /// let mut l = CreditLink::new(CreditMode::Optional);
    /// l.on(LinkEvent::Start).unwrap();
    /// assert_eq!(l.state(), LinkState::Negotiating);
    /// ```
    pub const fn state(&self) -> LinkState {
        self.state
    }

    /// Applies `event`. Invalid events leave the state unchanged.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, LinkEvent, LinkState};
    /// let mut l = CreditLink::new(CreditMode::Required);
    /// l.on(LinkEvent::Start).unwrap();
    /// assert_eq!(l.on(LinkEvent::PeerCompatible(1)), Ok(LinkState::Active(1)));
    /// assert_eq!(l.on(LinkEvent::StaleOrDisconnect), Ok(LinkState::Stale(1)));
    /// assert_eq!(l.on(LinkEvent::NewSessionOrEpoch), Ok(LinkState::Fencing(1)));
    /// assert_eq!(l.on(LinkEvent::Fenced), Ok(LinkState::Active(1)));
    /// // An event that is not valid here is refused and changes nothing.
    /// assert!(l.on(LinkEvent::PeerUnsupported).is_err());
    /// assert_eq!(l.state(), LinkState::Active(1));
    /// ```
    pub fn on(&mut self, event: LinkEvent) -> Result<LinkState, TransitionError> {
        use LinkEvent as E;
        use LinkState as S;
        let next = match (self.state, event) {
            (S::Disabled, E::Start) if self.mode == CreditMode::Disabled => S::Legacy,
            (S::Disabled, E::Start) => S::Negotiating,
            (S::Negotiating, E::PeerUnsupported) => match self.mode {
                CreditMode::Required => S::Failed,
                _ => {
                    self.legacy_fallbacks += 1;
                    S::Legacy
                }
            },
            (S::Negotiating, E::PeerCompatible(v)) => S::Active(v),
            (S::Active(v), E::UpdateAccepted) => S::Active(v),
            (S::Active(v), E::StaleOrDisconnect) => S::Stale(v),
            (S::Stale(v), E::StaleOrDisconnect) => S::Stale(v),
            (S::Stale(v), E::UpdateAccepted) => S::Active(v),
            (S::Active(v) | S::Stale(v) | S::Fencing(v), E::NewSessionOrEpoch) => {
                self.epoch_resets += 1;
                S::Fencing(v)
            }
            (S::Fencing(v), E::Fenced) => S::Active(v),
            (S::Fencing(v), E::StaleOrDisconnect) => S::Fencing(v),
            (S::Negotiating | S::Active(_) | S::Stale(_) | S::Fencing(_), E::Violation) => {
                self.violations += 1;
                S::Quarantined
            }
            (from, event) => return Err(TransitionError { from, event }),
        };
        self.state = next;
        Ok(next)
    }

    /// The capability view of the link.
    ///
    /// ```
    /// use railyard_core::credit::{Capability, CreditLink, CreditMode, LinkEvent};
    /// let mut l = CreditLink::new(CreditMode::Optional);
    /// l.on(LinkEvent::Start).unwrap();
    /// l.on(LinkEvent::PeerUnsupported).unwrap(); // an old peer
    /// assert_eq!(l.capability(), Capability::OptionalLegacy);
    /// ```
    pub const fn capability(&self) -> Capability {
        match (self.state, self.mode) {
            (LinkState::Active(v), _) => Capability::Active(v),
            (_, CreditMode::Required) => Capability::Required,
            (LinkState::Legacy, CreditMode::Optional) => Capability::OptionalLegacy,
            _ => Capability::Unsupported,
        }
    }

    /// What dispatch must do now.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, Gate, LinkEvent};
    /// let mut l = CreditLink::new(CreditMode::Optional);
    /// l.on(LinkEvent::Start).unwrap();
    /// assert_eq!(l.gate(), Gate::Block { fallback_allowed: true }); // still negotiating
    /// l.on(LinkEvent::PeerCompatible(1)).unwrap();
    /// assert_eq!(l.gate(), Gate::Reserve);
    /// l.on(LinkEvent::Violation).unwrap();
    /// assert_eq!(l.gate(), Gate::Fail);
    /// ```
    #[inline]
    pub const fn gate(&self) -> Gate {
        match self.state {
            LinkState::Disabled | LinkState::Legacy => Gate::Bypass,
            LinkState::Active(_) => Gate::Reserve,
            LinkState::Negotiating | LinkState::Stale(_) | LinkState::Fencing(_) => Gate::Block {
                fallback_allowed: matches!(self.mode, CreditMode::Optional),
            },
            LinkState::Failed | LinkState::Quarantined => Gate::Fail,
        }
    }

    /// Legacy fallbacks taken by this link (optional mode, old peer).
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, LinkEvent};
    /// let mut l = CreditLink::new(CreditMode::Optional);
    /// l.on(LinkEvent::Start).unwrap();
    /// l.on(LinkEvent::PeerUnsupported).unwrap();
    /// assert_eq!(l.legacy_fallbacks(), 1);
    /// ```
    pub const fn legacy_fallbacks(&self) -> u64 {
        self.legacy_fallbacks
    }

    /// Violations seen by this link.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, LinkEvent};
    /// let mut l = CreditLink::new(CreditMode::Required);
    /// l.on(LinkEvent::Start).unwrap();
    /// l.on(LinkEvent::Violation).unwrap();
    /// assert_eq!(l.violations(), 1);
    /// ```
    pub const fn violations(&self) -> u64 {
        self.violations
    }

    /// Session / epoch resets seen by this link.
    ///
    /// ```
    /// use railyard_core::credit::{CreditLink, CreditMode, LinkEvent};
    /// let mut l = CreditLink::new(CreditMode::Required);
    /// l.on(LinkEvent::Start).unwrap();
    /// l.on(LinkEvent::PeerCompatible(1)).unwrap();
    /// l.on(LinkEvent::NewSessionOrEpoch).unwrap(); // the receiver restarted
    /// assert_eq!(l.epoch_resets(), 1);
    /// ```
    pub const fn epoch_resets(&self) -> u64 {
        self.epoch_resets
    }
}
