//! Typed backpressure: *who* is pushing back, on which resources, and what
//! the caller may do about it (RFC 2849 `BackpressureInfo`).
use core::fmt;

use super::ResourceSet;

/// Where the pressure comes from. The discriminants are stable codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PressureSource {
    /// The receiver has not granted enough credit.
    ReceiverCredit = 1,
    /// The sender's local runtime queue / dispatch window is full.
    LocalQueue = 2,
    /// Staging capacity is exhausted.
    Staging = 3,
    /// The transport (QP depth, congestion control) pushes back.
    Transport = 4,
}

impl fmt::Display for PressureSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PressureSource::ReceiverCredit => "RECEIVER_CREDIT",
            PressureSource::LocalQueue => "LOCAL_QUEUE",
            PressureSource::Staging => "STAGING",
            PressureSource::Transport => "TRANSPORT",
        })
    }
}

/// Structured backpressure instead of a generic "too many requests".
///
/// ```
/// use railyard_core::credit::{BackpressureInfo, PressureSource, Resource, ResourceSet};
/// let b = BackpressureInfo::receiver_credit(3, 1, ResourceSet::EMPTY.with(Resource::DataBytes), 50, false);
/// assert_eq!(b.source, PressureSource::ReceiverCredit);
/// assert!(b.exhausted.contains(Resource::DataBytes));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BackpressureInfo {
    /// The pressure source.
    pub source: PressureSource,
    /// Peer index the pressure concerns.
    pub peer: u32,
    /// QoS class.
    pub qos_class: u32,
    /// Exhausted credit resources (empty if not resource-specific, e.g. a
    /// stale or fencing link).
    pub exhausted: ResourceSet,
    /// Suggested retry delay.
    pub retry_after_us: u64,
    /// Whether the caller may fall back (other node, legacy path, recompute).
    pub fallback_allowed: bool,
}

impl BackpressureInfo {
    /// Receiver-credit pressure.
    ///
    /// ```
    /// use railyard_core::credit::{BackpressureInfo, PressureSource, Resource, ResourceSet};
    /// let b = BackpressureInfo::receiver_credit(4, 0, ResourceSet::EMPTY.with(Resource::RequestSlots), 100, true);
    /// assert_eq!((b.source, b.peer, b.retry_after_us, b.fallback_allowed), (PressureSource::ReceiverCredit, 4, 100, true));
    /// ```
    pub const fn receiver_credit(
        peer: u32,
        qos_class: u32,
        exhausted: ResourceSet,
        retry_after_us: u64,
        fallback_allowed: bool,
    ) -> Self {
        BackpressureInfo {
            source: PressureSource::ReceiverCredit,
            peer,
            qos_class,
            exhausted,
            retry_after_us,
            fallback_allowed,
        }
    }

    /// Pressure from another source (no credit resources involved).
    ///
    /// ```
    /// use railyard_core::credit::{BackpressureInfo, PressureSource};
    /// let b = BackpressureInfo::other(PressureSource::Transport, 1, 0, 0, false);
    /// assert!(b.exhausted.is_empty()); // no credit resource involved
    /// ```
    pub const fn other(
        source: PressureSource,
        peer: u32,
        qos_class: u32,
        retry_after_us: u64,
        fallback_allowed: bool,
    ) -> Self {
        BackpressureInfo {
            source,
            peer,
            qos_class,
            exhausted: ResourceSet::EMPTY,
            retry_after_us,
            fallback_allowed,
        }
    }
}

impl fmt::Display for BackpressureInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "backpressure from {} (peer {}, class {}, exhausted {:#06b}, retry after {} us, fallback {})",
            self.source,
            self.peer,
            self.qos_class,
            self.exhausted.bits(),
            self.retry_after_us,
            if self.fallback_allowed { "allowed" } else { "not allowed" }
        )
    }
}
