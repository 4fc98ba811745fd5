//! The posted-attempt token pool (RFC 3136).

use crate::endpoint::EndpointHandle;
use crate::slice::SliceRef;

/// The 64-bit work-request id handed to `ibv_post_send`: it names one
/// posted attempt (slot index and per-slot sequence), never a pointer.
pub type WrId = u64;

/// Everything one posted attempt owns, in plain data: no pointers.
///
/// Every resource taken on the way down (credit, rail charge, outstanding
/// post, CC permit, the token itself) is named here, and completion releases
/// exactly those, once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenRecord {
    /// The slice and the attempt that was current at post time.
    pub slice: SliceRef,
    /// The endpoint (slot + generation) the work was posted on.
    pub endpoint: EndpointHandle,
    /// Post time, from the caller's clock.
    pub post_ns: u64,
    /// Bytes in this work request.
    pub bytes: u32,
    /// Route domain index (local context × remote NIC path), for `cc`.
    pub route: u32,
    /// Route generation at admission, for generation fencing in `cc`.
    pub route_generation: u32,
    /// Remote peer (segment id), if known. `None` is distinct from peer 0.
    pub peer: Option<u32>,
    /// Credit ledger entry charged for this attempt, if receiver credit is on.
    pub credit_key: Option<u32>,
    /// QP index within the endpoint.
    pub qp: u16,
    /// Local device (device domain / rail) index.
    pub device: u16,
    /// Which resources this attempt holds; see the `HOLDS_*` constants.
    pub holds: u8,
}

impl TokenRecord {
    /// The attempt holds a congestion-control permit (device + route bytes).
    pub const HOLDS_PERMIT: u8 = 1 << 0;
    /// The attempt holds a rail-selector charge (NIC, and peer if known).
    pub const HOLDS_RAIL_CHARGE: u8 = 1 << 1;
    /// The attempt holds a committed receiver-credit charge.
    pub const HOLDS_CREDIT: u8 = 1 << 2;
    /// The attempt is counted in its endpoint's outstanding posts.
    pub const HOLDS_OUTSTANDING: u8 = 1 << 3;
}
