//! `railyard-verbs`: a thin, safe layer over libibverbs (through `rdma-sys`)
//! for railyard's transport, plus the out-of-band handshake peers use to
//! exchange QP and memory descriptors.
//!
//! What is here:
//!
//! - device discovery ([`devices`], [`Context::open`]); with no device the
//!   error is [`VerbsError::NoDevice`] ("no RDMA device found"), never a panic;
//! - [`Context`], [`ProtectionDomain`], [`MemoryRegion`] (owning, page-aligned,
//!   registered), [`CompletionQueue`] (with an outstanding-completion count),
//!   RC [`QueuePair`] with INIT → RTR → RTS driven by a [`QpConfig`] (GID
//!   index, MTU, ACK timeout, retry counts);
//! - [`wire`]: versioned, length-prefixed little-endian endpoint descriptors
//!   (QPNs, PSNs, GID, segment addr/len/rkey) with typed decode errors: the
//!   codec is `railyard_core::wire::handshake` (it builds without rdma
//!   headers and is fuzzed there), re-exported here;
//! - [`handshake`]: the TCP exchange of those descriptors (this crate keeps
//!   only the socket I/O: deadlines, the bounded listener);
//! - [`engine`]: the transfer engine (batches, slices, workers) with every
//!   post owned through `railyard-core` (RFC 3136).
//!
//! Work-request ids are plain `u64`s chosen by the caller (railyard's core
//! uses its token ids), and completions come back as plain numbers
//! ([`WorkCompletion`]) with ibverbs' status and opcode values.
//!
//! Tests that need a device live in `tests/rxe_loopback.rs` and run inside a
//! Soft-RoCE guest through `scripts/rxe-vm` (see `ci/rxe.sh`); without a
//! device they print a SKIP line, and with `RAILYARD_REQUIRE_RDMA=1` they fail.
#![deny(missing_docs)]

pub mod engine;
mod error;
pub mod handshake;
mod verbs;
/// The endpoint descriptor codec ([`railyard_core::wire::handshake`]).
pub use railyard_core::wire::handshake as wire;

pub use error::VerbsError;
pub use verbs::{
    devices, Access, AsyncEvent, CompletionQueue, Context, CqId, DeviceCaps, DeviceInfo,
    MemoryRegion, Mtu, PortInfo, PostError, ProtectionDomain, QpCaps, QpConfig, QpState, QueuePair,
    RdmaOp, RdmaWr, RemoteQp, WorkCompletion, MAX_POST_BATCH, PORT_ACTIVE, WC_SUCCESS,
    WC_WR_FLUSH_ERR,
};
pub use verbs::{
    EVENT_CQ_ERR, EVENT_DEVICE_FATAL, EVENT_GID_CHANGE, EVENT_PORT_ACTIVE, EVENT_PORT_ERR,
    EVENT_QP_ACCESS_ERR, EVENT_QP_FATAL, EVENT_QP_LAST_WQE_REACHED, EVENT_QP_REQ_ERR,
};
