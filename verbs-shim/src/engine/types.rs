//! The engine's plain vocabulary: ids, [`Transfer`], task state and
//! status, and the limits every layer shares. Plain data: no engine state
//! lives here, and nothing here imports the rest of the engine.

use railyard_core::endpoint::EndpointHandle;

/// Most devices (rails) one engine drives (the handshake's NIC limit).
pub const MAX_RAILS: usize = crate::wire::MAX_NICS;

/// Most memory regions one engine registers.
pub const MAX_MEMORY_REGIONS: usize = 256;
/// Slices of one transfer go to the same QP in runs of this many, so a
/// worker can post them as one chain (one doorbell).
pub const SLICES_PER_QP_RUN: u64 = 8;

/// A batch of transfers (Mooncake's `BatchID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchId(pub u64);

/// A connection to a peer engine: its endpoint and its exported regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentId(pub u32);

/// RDMA operation of a transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// remote → local.
    Read,
    /// local → remote.
    Write,
}

/// One transfer request (Mooncake's `TransferRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// READ or WRITE.
    pub op: Op,
    /// Local address, inside memory registered with this engine.
    pub local: u64,
    /// Bytes (> 0).
    pub len: u64,
    /// The peer.
    pub segment: SegmentId,
    /// Remote address, inside one region the peer exported
    /// ([`Engine::segment_regions`](super::Engine::segment_regions)); Mooncake's `target_offset`.
    pub remote_offset: u64,
}

/// Mooncake's task states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Submitted, nothing posted yet.
    Waiting,
    /// At least one slice posted, not all settled.
    Pending,
    /// Every slice succeeded.
    Completed,
    /// Every slice settled and at least one failed.
    Failed,
    /// Settled, none failed, at least one timed out.
    Timeout,
    /// Settled, none failed or timed out, at least one canceled.
    Canceled,
}

impl TaskState {
    /// Whether the task is finished.
    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskState::Waiting | TaskState::Pending)
    }
}

/// A task's state and progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// Bytes of slices that succeeded.
    pub transferred_bytes: u64,
    /// Bytes requested.
    pub total_bytes: u64,
}

/// An endpoint handle packed into one word (generation high, slot low), as
/// a slice's metadata holds it.
pub(crate) fn ep_word(h: EndpointHandle) -> u64 {
    (u64::from(h.generation) << 32) | u64::from(h.slot)
}

/// The handle [`ep_word`] packed.
pub(crate) fn ep_from_word(v: u64) -> EndpointHandle {
    EndpointHandle {
        slot: v as u32,
        generation: (v >> 32) as u32,
    }
}
