//! Why an engine call failed: [`EngineError`], and [`ConfigError`] for a
//! configuration value that cannot be used.

use super::types::{BatchId, SegmentId, MAX_MEMORY_REGIONS};
use crate::handshake::HandshakeError;
use crate::VerbsError;
use railyard_core::endpoint::EndpointError;
use std::fmt;

/// Why an engine call failed. Nothing is leaked on any of these paths.
#[derive(Debug)]
pub enum EngineError {
    /// Bad configuration (names the variable).
    Config(ConfigError),
    /// A verbs call failed (device, PD, CQ, QP, MR).
    Verbs(VerbsError),
    /// The out-of-band handshake failed; the connection was dropped.
    Handshake(HandshakeError),
    /// The peer's descriptor does not fit ours.
    PeerMismatch {
        /// What differs.
        what: &'static str,
        /// Our value.
        ours: u64,
        /// Theirs.
        theirs: u64,
    },
    /// The endpoint table refused (full, ...).
    Endpoint(EndpointError),
    /// Setting up the listener socket or spawning a thread failed.
    Io(std::io::Error),
    /// No batch with this id (never allocated, or freed).
    NoSuchBatch(BatchId),
    /// No task with this index in the batch.
    NoSuchTask {
        /// The batch.
        batch: BatchId,
        /// The index asked for.
        task: usize,
    },
    /// No segment with this id.
    NoSuchSegment(SegmentId),
    /// The segment's endpoint was retired (error or shutdown).
    SegmentClosed(SegmentId),
    /// Submitting would exceed the batch's capacity.
    BatchFull {
        /// The batch's capacity.
        capacity: usize,
    },
    /// `free_batch` on a batch with unfinished tasks.
    BatchBusy(BatchId),
    /// Every task slot is in use (`max_tasks`).
    OutOfTasks,
    /// Not enough free slices (`max_slices`) for this submit.
    OutOfSlices {
        /// Slices the submit needs.
        needed: u64,
    },
    /// A zero-length transfer.
    ZeroLength,
    /// `local..local+len` is not inside one memory region of this engine.
    LocalRange {
        /// Address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// `remote..remote+len` is not inside one region the peer exported.
    RemoteRange {
        /// Address.
        addr: u64,
        /// Length.
        len: u64,
    },
    /// [`MAX_MEMORY_REGIONS`] regions are registered.
    TooManyRegions,
    /// `register_memory` of a range that overlaps a registered region.
    RegionOverlap {
        /// Start of the refused range.
        addr: u64,
        /// Its length.
        len: u64,
        /// Start of the registered region it overlaps.
        other: u64,
    },
    /// `deregister_memory` of an address that is not the start of a
    /// registered region.
    NoSuchRegion {
        /// The address given.
        addr: u64,
    },
    /// `deregister_memory` while transfers may still touch the region
    /// (slices queued or posted on it); nothing changed.
    MemoryBusy {
        /// The region's start.
        addr: u64,
        /// Slices queued plus work requests in flight on it.
        pins: u64,
    },
    /// The receiver-credit negotiation refused the peer (RFC 2849: a
    /// required side never treats an unsupported peer as unlimited); the
    /// connection was dropped before any QP was connected.
    CreditRefused {
        /// Our `MC_RECEIVER_CREDIT` policy.
        ours: &'static str,
        /// What the peer's descriptor offered (`off` = no capability).
        theirs: &'static str,
        /// Why.
        why: &'static str,
    },
    /// The segment has no active receiver-credit session (credit off,
    /// unsupported or legacy peer, or not a segment).
    CreditNotActive(u32),
    /// `consume` was refused by the receiver allocator; nothing changed.
    CreditConsume {
        /// The segment.
        segment: u32,
        /// Slots asked for.
        slots: u64,
        /// Why.
        why: &'static str,
    },
    /// Not implemented yet; the message says what it waits for.
    Unsupported(&'static str),
    /// A core table could not be built.
    Core(&'static str),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
            Self::Verbs(e) => write!(f, "{e}"),
            Self::Handshake(e) => write!(f, "{e}"),
            Self::PeerMismatch { what, ours, theirs } => {
                write!(
                    f,
                    "peer descriptor mismatch: {what} is {ours} here, {theirs} there"
                )
            }
            Self::Endpoint(e) => write!(f, "endpoint: {e}"),
            Self::Io(e) => write!(f, "engine socket or thread setup: {e}"),
            Self::NoSuchBatch(b) => write!(f, "no batch {}", b.0),
            Self::NoSuchTask { batch, task } => write!(f, "no task {task} in batch {}", batch.0),
            Self::NoSuchSegment(s) => write!(f, "no segment {}", s.0),
            Self::SegmentClosed(s) => write!(f, "segment {} is closed (endpoint retired)", s.0),
            Self::BatchFull { capacity } => write!(f, "batch full ({capacity} tasks)"),
            Self::BatchBusy(b) => write!(f, "batch {} still has unfinished tasks", b.0),
            Self::OutOfTasks => f.write_str("out of task slots (max_tasks)"),
            Self::OutOfSlices { needed } => {
                write!(f, "out of slice slots: need {needed} (max_slices)")
            }
            Self::ZeroLength => f.write_str("zero-length transfer"),
            Self::LocalRange { addr, len } => write!(
                f,
                "local range {addr:#x}+{len} is not inside one registered memory region"
            ),
            Self::RemoteRange { addr, len } => write!(
                f,
                "remote range {addr:#x}+{len} is not inside one region the peer exported"
            ),
            Self::TooManyRegions => write!(f, "at most {MAX_MEMORY_REGIONS} memory regions"),
            Self::RegionOverlap { addr, len, other } => write!(
                f,
                "memory {addr:#x}+{len} overlaps the region registered at {other:#x}"
            ),
            Self::NoSuchRegion { addr } => {
                write!(f, "no memory region registered at {addr:#x}")
            }
            Self::MemoryBusy { addr, pins } => write!(
                f,
                "memory region {addr:#x} is in use by transfers ({pins} slices queued or in flight); not deregistered"
            ),
            Self::CreditRefused { ours, theirs, why } => write!(
                f,
                "receiver credit refused the peer: MC_RECEIVER_CREDIT is {ours} here, the peer's is {theirs}: {why}"
            ),
            Self::CreditNotActive(s) => {
                write!(f, "segment {s} has no active receiver-credit session")
            }
            Self::CreditConsume {
                segment,
                slots,
                why,
            } => write!(
                f,
                "consume({segment}, {slots}) refused: {why}; nothing changed"
            ),
            Self::Unsupported(what) => write!(f, "not supported yet: {what}"),
            Self::Core(what) => write!(f, "cannot build {what}"),
        }
    }
}

/// The underlying error, for reporters that walk the chain. `Config`,
/// `Verbs` and `Handshake` display exactly their inner error, so they are
/// transparent: their source is the inner error's source (a handshake's
/// `io::Error`, a decode error), not the inner error again. `Endpoint` and
/// `Io` add context to the inner error, which is their source.
impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(e) => e.source(),
            Self::Verbs(e) => e.source(),
            Self::Handshake(e) => e.source(),
            Self::Endpoint(e) => Some(e),
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<VerbsError> for EngineError {
    fn from(e: VerbsError) -> Self {
        Self::Verbs(e)
    }
}
impl From<HandshakeError> for EngineError {
    fn from(e: HandshakeError) -> Self {
        Self::Handshake(e)
    }
}
impl From<ConfigError> for EngineError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

/// A configuration value that cannot be used. Names the variable (or field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The environment variable (or, for fields set in code, the field name).
    pub var: &'static str,
    /// The value given.
    pub value: String,
    /// What is allowed.
    pub expected: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}={:?}: expected {}",
            self.var, self.value, self.expected
        )
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_expose_their_source() {
        use std::error::Error;
        let io = EngineError::Io(std::io::Error::other("bind"));
        assert_eq!(io.source().map(|e| e.to_string()), Some("bind".into()));
        let ep = EngineError::Endpoint(EndpointError::TableFull);
        assert!(ep.source().is_some_and(|e| e.is::<EndpointError>()));
        // Transparent: the handshake's own source (the io::Error), once.
        let hs = EngineError::Handshake(HandshakeError::Io {
            during: "connecting",
            source: std::io::Error::other("refused"),
        });
        assert_eq!(
            hs.to_string(),
            "handshake I/O error while connecting: refused"
        );
        assert!(hs.source().is_some_and(|e| e.is::<std::io::Error>()));
        assert!(EngineError::ZeroLength.source().is_none());
        assert!(EngineError::Verbs(VerbsError::NoDevice).source().is_none());
    }
}
