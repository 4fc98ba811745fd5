//! Status codes, the thread-local last error message, and the panic guard
//! every entry point runs in.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};

use railyard_core::cc::{AcquireError, ConfigError, ReleaseError};
use railyard_core::credit::{
    AllocError, CommitError, ConfigError as CreditConfigError, KeyError, RecordError,
    ReleaseError as CreditReleaseError, ReserveError, UpdateError,
};
use railyard_core::endpoint::EndpointError;
use railyard_core::rail::{ConfigError as RailConfigError, RailError};
use railyard_core::slice::SliceError;
use railyard_core::token::TokenError;
use railyard_core::wire::credit::{DecodeError, EncodeError};

/// The result of every `ry_` function: `RY_STATUS_OK` (0) or a negative,
/// typed error. The thread's `ry_last_error_message()` describes the
/// error in words.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RyStatus {
    /// Success.
    Ok = 0,
    /// A required pointer argument was NULL.
    NullArgument = -1,
    /// A handle is zero, foreign (another kind of object, or never issued)
    /// or already destroyed.
    InvalidHandle = -2,
    /// An argument is out of its documented domain (an unknown enum value,
    /// a length mismatch, ...).
    InvalidArgument = -3,
    /// A Rust panic was caught at the boundary (a bug in railyard: please
    /// report it with the message). No state was handed out.
    Panic = -4,
    /// The output buffer is too small.
    BufferTooSmall = -5,
    /// `ry_set_log_callback`: another `tracing` subscriber is already the
    /// process's global one.
    LogUnavailable = -6,

    /// Token pool: every slot is owned by a posted attempt (backpressure).
    TokenExhausted = -10,
    /// Token pool: the wr_id names a slot beyond the pool's capacity.
    TokenOutOfRange = -11,
    /// Token pool: the wr_id was already completed (duplicate completion).
    TokenDuplicate = -12,
    /// Token pool: the wr_id is stale (its slot belongs to a newer attempt).
    TokenStale = -13,
    /// Token pool: the wr_id was never issued by this pool.
    TokenForged = -14,
    /// Token pool: capacity must be in 1..=u32::MAX-1 (a token cache's:
    /// a power of two in 2..=`RY_TOKEN_CACHE_MAX_CAPACITY`).
    TokenInvalidCapacity = -15,
    /// Token cache: the cache was created over another pool or hot path
    /// than the one named in the call (nothing was claimed or completed).
    TokenCacheWrongPool = -16,

    /// CC config: the mode is not off, observe or enforce.
    CcConfigInvalidMode = -20,
    /// CC config: a value is not a decimal integer that fits.
    CcConfigNotANumber = -21,
    /// CC config: a value is zero (every value must be positive).
    CcConfigZero = -22,
    /// CC config: minimum window above maximum window.
    CcConfigMinAboveMax = -23,
    /// CC config: probe window above minimum window.
    CcConfigProbeAboveMin = -24,
    /// CC config: initial window outside [min, max].
    CcConfigInitialOutOfRange = -25,
    /// CC config: decrease percent outside 1..=99.
    CcConfigDecreaseOutOfRange = -26,
    /// CC config: a value is larger than the controller supports.
    CcConfigTooLarge = -27,
    /// CC config: a route is bound to a device index that does not exist.
    CcConfigRouteDeviceOutOfRange = -28,
    /// CC config: the target mode is not adaptive or fixed.
    CcConfigInvalidTargetMode = -29,

    /// CC admission: a zero-byte slice.
    CcZeroBytes = -30,
    /// CC: the device index is out of range.
    CcNoSuchDevice = -31,
    /// CC: the route index is out of range.
    CcNoSuchRoute = -32,
    /// CC admission: the route is bound to another device.
    CcWrongDevice = -33,
    /// CC release: the permit / record holds no permit (already released).
    CcNotHeld = -34,
    /// CC release: would drive in-flight bytes negative; refused and counted.
    CcUnderflow = -35,
    /// CC split: `head` is not in 1..bytes; the permit is unchanged.
    CcSplitOutOfRange = -36,
    /// CC record: the token record already holds a permit; nothing moved.
    CcAlreadyHeld = -37,
    /// CC config: `MC_ADAPTIVE_CC_SOFTWARE_DRAIN` is not advisory or enforce.
    CcConfigInvalidSoftwareDrain = -38,

    /// Rail config: rejected selector configuration or device list.
    RailConfig = -40,
    /// Rail: the device index is not a candidate.
    RailUnknownDevice = -41,
    /// Rail release: would take NIC in-flight below zero; refused.
    RailNicUnderflow = -42,
    /// Rail release: the NIC side was released, the peer side failed.
    RailPeerAccounting = -43,
    /// Rail release: the charge / record holds no rail charge.
    RailNotHeld = -44,
    /// Rail choice: no candidate device is usable.
    RailNoCandidate = -45,

    /// Credit: peer index out of range for the table.
    CreditUnknownPeer = -50,
    /// Credit: QoS class out of range for the table.
    CreditUnknownClass = -51,
    /// Credit: a resource this table does not model.
    CreditUnknownResource = -52,
    /// Credit: a single charge larger than the resource's whole window.
    CreditChargeTooLarge = -53,
    /// Credit: an entry from another table (forged record).
    CreditForeignEntry = -54,
    /// Credit reserve: the entry is not open for dispatch (unbound,
    /// fencing, stale or quarantined).
    CreditClosed = -55,
    /// Credit reserve: not enough credit; nothing was taken.
    CreditInsufficient = -56,
    /// Credit commit: a new session/epoch was bound; do not dispatch.
    CreditEpochChanged = -57,
    /// Credit: a counter would overflow (double release?); refused, counted.
    CreditOverflow = -58,
    /// Credit update: the peer has no bound session.
    CreditNotBound = -59,
    /// Credit update for another receiver session than the bound one, or a
    /// bind to a session that orders before it (a superseded incarnation);
    /// stale, counted.
    CreditSessionMismatch = -60,
    /// Credit update for another epoch (stale, counted), or a receiver
    /// `close` / `fence_complete` naming another epoch than the one it may
    /// act on (a stale close; nothing changed).
    CreditEpochMismatch = -61,
    /// Credit: the peer is quarantined after a violation.
    CreditQuarantined = -62,
    /// Credit: protocol violation (a cumulative total decreased or
    /// overflowed, or usage exceeds grants); the peer is quarantined.
    CreditViolation = -63,
    /// Credit release: the record / committed charge holds no credit.
    CreditNotHeld = -64,
    /// Credit record: the charge cannot be encoded in a token record, or
    /// `record.bytes` differs from its DATA_BYTES.
    CreditNotRecordable = -65,
    /// Credit: invalid ledger / allocator configuration.
    CreditConfig = -66,
    /// Credit allocator: the peer's session is not open.
    CreditPeerNotOpen = -67,
    /// Credit allocator: usage for an old session or epoch (ignored, counted).
    CreditStale = -68,
    /// Credit: a release beyond what is outstanding (a second release of
    /// the same charge, or a forged / oversized one; nothing changed), or a
    /// grant beyond the entry cap.
    CreditOverRelease = -69,
    /// Credit allocator: `fence_complete` with nothing fencing.
    CreditNothingFencing = -70,
    /// Credit: an empty charge or grant (every resource zero); refused so
    /// it can never pass the credit gate reserving nothing.
    CreditEmptyCharge = -71,
    /// Credit: session, epoch or sequence 0 (reserved, never valid).
    CreditZeroId = -72,

    /// Wire: fewer bytes than the header or body requires.
    WireTruncated = -80,
    /// Wire: bytes after the stated body.
    WireTrailingBytes = -81,
    /// Wire: schema version not spoken here.
    WireUnknownVersion = -82,
    /// Wire: unknown message type.
    WireUnknownMessageType = -83,
    /// Wire: unknown flag bits, a nonzero reserved field, or a reserved
    /// zero session / epoch / sequence / version.
    WireMalformed = -84,
    /// Wire: a resource list longer than the maximum.
    WireTooManyResources = -85,
    /// Wire: the same resource twice in one list.
    WireDuplicateResource = -86,
    /// Wire: an unknown resource marked required.
    WireUnknownRequiredResource = -87,
    /// Wire: an enum field with an undefined value.
    WireBadEnum = -88,
    /// Wire: the header's body length disagrees with the body.
    WireLengthMismatch = -89,

    /// Engine: a configuration value is invalid; the message names the
    /// variable (`MC_*`) or field.
    EngineConfig = -100,
    /// Engine: no RDMA device is present (or the kernel has no RDMA support).
    EngineNoDevice = -101,
    /// Engine: devices exist, but none has the configured name.
    EngineDeviceNotFound = -102,
    /// Engine: a verbs call failed (PD, CQ, QP, MR registration, ...).
    EngineVerbs = -103,
    /// Engine: the out-of-band handshake with the peer failed.
    EngineHandshake = -104,
    /// Engine: the peer's descriptor does not fit ours.
    EnginePeerMismatch = -105,
    /// Engine: the endpoint table refused (full, ...).
    EngineEndpoint = -106,
    /// Engine: the listener socket or a thread could not be set up.
    EngineIo = -107,
    /// Engine: no batch with this id (never allocated, or freed).
    EngineNoSuchBatch = -108,
    /// Engine: no task with this index in the batch.
    EngineNoSuchTask = -109,
    /// Engine: no segment with this id.
    EngineNoSuchSegment = -110,
    /// Engine: the segment's endpoint was retired (error or shutdown).
    EngineSegmentClosed = -111,
    /// Engine: submitting would exceed the batch's capacity; nothing queued.
    EngineBatchFull = -112,
    /// Engine: `ry_engine_free_batch` on a batch with unfinished tasks
    /// (cancel it first).
    EngineBatchBusy = -113,
    /// Engine: every task slot is in use (`max_tasks`); nothing queued.
    EngineOutOfTasks = -114,
    /// Engine: not enough free slices (`max_slices`); nothing queued.
    EngineOutOfSlices = -115,
    /// Engine: a zero-length transfer; nothing queued.
    EngineZeroLength = -116,
    /// Engine: a local range is not inside one memory region registered
    /// with this engine; nothing queued.
    EngineLocalRange = -117,
    /// Engine: a remote range is not inside one region the peer exported;
    /// nothing queued.
    EngineRemoteRange = -118,
    /// Engine: the engine has registered its maximum number of regions.
    EngineTooManyRegions = -119,
    /// Engine: not implemented yet (the message says what it waits for).
    EngineUnsupported = -120,
    /// Engine: an internal table could not be built.
    EngineCore = -121,
    /// Engine: registering memory that overlaps a registered region;
    /// nothing registered.
    EngineRegionOverlap = -122,
    /// Engine: deregistering an address that is not the start of a
    /// registered region.
    EngineNoSuchRegion = -123,
    /// Engine: deregistering memory that transfers may still touch (slices
    /// queued or posted on it); nothing changed, try again once they
    /// finished.
    EngineMemoryBusy = -124,
    /// Engine: the receiver-credit negotiation refused the peer (RFC 2849:
    /// `MC_RECEIVER_CREDIT=required` against a peer without a compatible
    /// capability, or an off engine against a required peer); the
    /// connection was dropped before any QP was connected.
    EngineCreditRefused = -125,
    /// Engine: the segment has no active receiver-credit session.
    EngineCreditNotActive = -126,
    /// Engine: `ry_engine_consume` asked for more consumer slots than the
    /// sender reported written and not yet consumed; nothing changed.
    EngineCreditConsume = -127,

    /// Hot path: the post was refused (backpressure, a full window, a
    /// quarantined path, a refused endpoint, a stale slice attempt);
    /// `ry_post_result.refusal` names the source. Nothing is held.
    PostRefused = -130,
    /// Hot path: the configuration cannot be built (the message says why).
    HotpathConfig = -131,

    /// Endpoint: the handle names a reclaimed generation.
    EndpointStaleGeneration = -140,
    /// Endpoint: retired; no new posts.
    EndpointRetired = -141,
    /// Endpoint: already retired (a second retire is harmless).
    EndpointAlreadyRetired = -142,
    /// Endpoint: slot beyond the table.
    EndpointOutOfRange = -143,
    /// Endpoint: QP index beyond the endpoint's QPs.
    EndpointBadQp = -144,
    /// Endpoint: the QP's send queue is full (backpressure).
    EndpointQpFull = -145,
    /// Endpoint: the outstanding-post counter is at its limit.
    EndpointSaturated = -146,
    /// Endpoint: a release with nothing outstanding (refused).
    EndpointUnderflow = -147,
    /// Endpoint: every slot holds a live or draining endpoint.
    EndpointTableFull = -148,
    /// Endpoint: invalid table configuration.
    EndpointInvalidConfig = -149,

    /// Slice: the attempt is not the current one.
    SliceStaleAttempt = -155,
    /// Slice: the current attempt already reached a terminal state.
    SliceAlreadyTerminal = -156,
    /// Slice: the slot is open (pending) and cannot be reopened.
    SliceBusy = -157,
    /// Slice: the slot was never opened.
    SliceNotOpen = -158,
    /// Slice: index beyond the table.
    SliceOutOfRange = -159,
    /// Slice: invalid table capacity.
    SliceInvalidCapacity = -160,
}

/// The Rust-side error of an entry point: a status and its message.
pub(crate) struct Error {
    pub(crate) status: RyStatus,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(status: RyStatus, message: impl Display) -> Self {
        Error {
            status,
            message: message.to_string(),
        }
    }

    pub(crate) fn null(arg: &str) -> Self {
        Error::new(RyStatus::NullArgument, format_args!("`{arg}` is NULL"))
    }

    pub(crate) fn invalid(message: impl Display) -> Self {
        Error::new(RyStatus::InvalidArgument, message)
    }
}

pub(crate) type Result<T> = std::result::Result<T, Error>;

impl From<TokenError> for Error {
    fn from(e: TokenError) -> Self {
        let s = match e {
            TokenError::Exhausted => RyStatus::TokenExhausted,
            TokenError::OutOfRange => RyStatus::TokenOutOfRange,
            TokenError::Duplicate => RyStatus::TokenDuplicate,
            TokenError::Stale => RyStatus::TokenStale,
            TokenError::Forged => RyStatus::TokenForged,
            TokenError::InvalidCapacity => RyStatus::TokenInvalidCapacity,
        };
        Error::new(s, e)
    }
}

impl From<EndpointError> for Error {
    fn from(e: EndpointError) -> Self {
        let s = match e {
            EndpointError::StaleGeneration => RyStatus::EndpointStaleGeneration,
            EndpointError::Retired => RyStatus::EndpointRetired,
            EndpointError::AlreadyRetired => RyStatus::EndpointAlreadyRetired,
            EndpointError::OutOfRange => RyStatus::EndpointOutOfRange,
            EndpointError::BadQp => RyStatus::EndpointBadQp,
            EndpointError::QpFull => RyStatus::EndpointQpFull,
            EndpointError::Saturated => RyStatus::EndpointSaturated,
            EndpointError::Underflow => RyStatus::EndpointUnderflow,
            EndpointError::TableFull => RyStatus::EndpointTableFull,
            EndpointError::InvalidConfig | EndpointError::ForeignGuard => {
                RyStatus::EndpointInvalidConfig
            }
        };
        Error::new(s, e)
    }
}

impl From<SliceError> for Error {
    fn from(e: SliceError) -> Self {
        let s = match e {
            SliceError::StaleAttempt => RyStatus::SliceStaleAttempt,
            SliceError::AlreadyTerminal => RyStatus::SliceAlreadyTerminal,
            SliceError::Busy => RyStatus::SliceBusy,
            SliceError::NotOpen => RyStatus::SliceNotOpen,
            SliceError::OutOfRange => RyStatus::SliceOutOfRange,
            SliceError::InvalidCapacity => RyStatus::SliceInvalidCapacity,
        };
        Error::new(s, e)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        let s = match e {
            ConfigError::InvalidMode => RyStatus::CcConfigInvalidMode,
            ConfigError::InvalidTargetMode => RyStatus::CcConfigInvalidTargetMode,
            ConfigError::InvalidSoftwareDrain => RyStatus::CcConfigInvalidSoftwareDrain,
            ConfigError::NotANumber(_) => RyStatus::CcConfigNotANumber,
            ConfigError::Zero(_) => RyStatus::CcConfigZero,
            ConfigError::MinAboveMax { .. } => RyStatus::CcConfigMinAboveMax,
            ConfigError::ProbeAboveMin { .. } => RyStatus::CcConfigProbeAboveMin,
            ConfigError::InitialOutOfRange { .. } => RyStatus::CcConfigInitialOutOfRange,
            ConfigError::DecreaseOutOfRange(_) => RyStatus::CcConfigDecreaseOutOfRange,
            ConfigError::TooLarge(_) => RyStatus::CcConfigTooLarge,
            ConfigError::RouteDeviceOutOfRange { .. } => RyStatus::CcConfigRouteDeviceOutOfRange,
        };
        Error::new(s, e)
    }
}

impl From<AcquireError> for Error {
    fn from(e: AcquireError) -> Self {
        let s = match e {
            AcquireError::ZeroBytes => RyStatus::CcZeroBytes,
            AcquireError::AlreadyHeld => RyStatus::CcAlreadyHeld,
            AcquireError::NoSuchDevice(_) => RyStatus::CcNoSuchDevice,
            AcquireError::NoSuchRoute(_) => RyStatus::CcNoSuchRoute,
            AcquireError::WrongDevice { .. } => RyStatus::CcWrongDevice,
        };
        Error::new(s, e)
    }
}

impl From<ReleaseError> for Error {
    fn from(e: ReleaseError) -> Self {
        let s = match e {
            ReleaseError::NotHeld => RyStatus::CcNotHeld,
            ReleaseError::NoSuchDevice(_) => RyStatus::CcNoSuchDevice,
            ReleaseError::NoSuchRoute(_) => RyStatus::CcNoSuchRoute,
            ReleaseError::Underflow { .. } => RyStatus::CcUnderflow,
        };
        Error::new(s, e)
    }
}

impl From<RailConfigError> for Error {
    fn from(e: RailConfigError) -> Self {
        Error::new(RyStatus::RailConfig, e)
    }
}

impl From<RailError> for Error {
    fn from(e: RailError) -> Self {
        let s = match e {
            RailError::UnknownDevice { .. } => RyStatus::RailUnknownDevice,
            RailError::NicUnderflow { .. } => RyStatus::RailNicUnderflow,
            RailError::PeerAccounting { .. } => RyStatus::RailPeerAccounting,
            RailError::NotHeld => RyStatus::RailNotHeld,
            RailError::NoCandidate => RyStatus::RailNoCandidate,
            RailError::CountsTooShort { .. } => RyStatus::BufferTooSmall,
        };
        Error::new(s, e)
    }
}

fn key_status(e: KeyError) -> RyStatus {
    match e {
        KeyError::UnknownPeer(_) => RyStatus::CreditUnknownPeer,
        KeyError::UnknownClass(_) => RyStatus::CreditUnknownClass,
        KeyError::UnknownResource(_) => RyStatus::CreditUnknownResource,
        KeyError::ChargeTooLarge(_) => RyStatus::CreditChargeTooLarge,
        KeyError::ForeignEntry => RyStatus::CreditForeignEntry,
        KeyError::EmptyCharge => RyStatus::CreditEmptyCharge,
    }
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Self {
        Error::new(key_status(e), e)
    }
}

impl From<ReserveError> for Error {
    fn from(e: ReserveError) -> Self {
        let s = match e {
            ReserveError::Key(k) => key_status(k),
            ReserveError::Closed => RyStatus::CreditClosed,
            ReserveError::Insufficient(_) => RyStatus::CreditInsufficient,
        };
        Error::new(s, e)
    }
}

impl From<CommitError> for Error {
    fn from(e: CommitError) -> Self {
        let s = match e {
            CommitError::EpochChanged => RyStatus::CreditEpochChanged,
            CommitError::Overflow => RyStatus::CreditOverflow,
        };
        Error::new(s, e)
    }
}

impl From<UpdateError> for Error {
    fn from(e: UpdateError) -> Self {
        let s = match e {
            UpdateError::Key(k) => key_status(k),
            UpdateError::NotBound => RyStatus::CreditNotBound,
            UpdateError::SessionMismatch => RyStatus::CreditSessionMismatch,
            UpdateError::EpochMismatch { .. } => RyStatus::CreditEpochMismatch,
            UpdateError::Quarantined => RyStatus::CreditQuarantined,
            UpdateError::Decreasing(_) | UpdateError::Overflow(_) => RyStatus::CreditViolation,
            UpdateError::ForeignLedger => RyStatus::CreditForeignEntry,
            UpdateError::Zero(_) => RyStatus::CreditZeroId,
        };
        Error::new(s, e)
    }
}

impl From<RecordError> for Error {
    fn from(e: RecordError) -> Self {
        let s = match e {
            RecordError::NoCredit => RyStatus::CreditNotHeld,
            RecordError::NotRecordable | RecordError::BytesMismatch | RecordError::AlreadyHeld => {
                RyStatus::CreditNotRecordable
            }
            RecordError::Key(k) => key_status(k),
        };
        Error::new(s, e)
    }
}

impl From<CreditReleaseError> for Error {
    fn from(e: CreditReleaseError) -> Self {
        let s = match e {
            CreditReleaseError::NotHeld => RyStatus::CreditNotHeld,
            CreditReleaseError::Key(k) => key_status(k),
            CreditReleaseError::NotOutstanding(_) => RyStatus::CreditOverRelease,
        };
        Error::new(s, e)
    }
}

impl From<CreditConfigError> for Error {
    fn from(e: CreditConfigError) -> Self {
        Error::new(RyStatus::CreditConfig, e)
    }
}

impl From<AllocError> for Error {
    fn from(e: AllocError) -> Self {
        let s = match e {
            AllocError::Key(k) => key_status(k),
            AllocError::BadConfig => RyStatus::CreditConfig,
            AllocError::Insufficient(_) => RyStatus::CreditInsufficient,
            AllocError::EntryCap(_) | AllocError::OverRelease(_) => RyStatus::CreditOverRelease,
            AllocError::PeerNotOpen => RyStatus::CreditPeerNotOpen,
            AllocError::Stale => RyStatus::CreditStale,
            AllocError::Violation(_) => RyStatus::CreditViolation,
            AllocError::NothingFencing => RyStatus::CreditNothingFencing,
            AllocError::EpochMismatch { .. } => RyStatus::CreditEpochMismatch,
            AllocError::Zero(_) => RyStatus::CreditZeroId,
        };
        Error::new(s, e)
    }
}

impl From<DecodeError> for Error {
    fn from(e: DecodeError) -> Self {
        let s = match e {
            DecodeError::Truncated { .. } => RyStatus::WireTruncated,
            DecodeError::TrailingBytes(_) => RyStatus::WireTrailingBytes,
            DecodeError::UnknownVersion(_) => RyStatus::WireUnknownVersion,
            DecodeError::UnknownMessageType(_) => RyStatus::WireUnknownMessageType,
            DecodeError::UnknownFlags | DecodeError::NonzeroReserved | DecodeError::Zero(_) => {
                RyStatus::WireMalformed
            }
            DecodeError::TooManyResources(_) => RyStatus::WireTooManyResources,
            DecodeError::DuplicateResource(_) => RyStatus::WireDuplicateResource,
            DecodeError::UnknownRequiredResource(_) => RyStatus::WireUnknownRequiredResource,
            DecodeError::BadEnum(_) => RyStatus::WireBadEnum,
            DecodeError::LengthMismatch { .. } => RyStatus::WireLengthMismatch,
        };
        Error::new(s, e)
    }
}

impl From<EncodeError> for Error {
    fn from(e: EncodeError) -> Self {
        match e {
            EncodeError::BufferTooSmall { .. } => Error::new(RyStatus::BufferTooSmall, e),
            EncodeError::Invalid(d) => Error::new(Error::from(d).status, e),
        }
    }
}

thread_local! {
    /// The calling thread's last error message (empty after a success).
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // Interior NULs cannot appear in our messages; strip them defensively.
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
}

fn clear_last_error() {
    LAST_ERROR.with(|l| {
        let mut l = l.borrow_mut();
        if !l.as_bytes().is_empty() {
            *l = CString::default();
        }
    });
}

/// Runs one entry point: converts its error into a status and the
/// thread-local message, and catches any panic so none crosses the boundary.
pub(crate) fn guard<F: FnOnce() -> Result<()>>(f: F) -> RyStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            clear_last_error();
            RyStatus::Ok
        }
        Ok(Err(e)) => {
            set_last_error(&e.message);
            e.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_string());
            set_last_error(&format!("panic caught at the railyard C boundary: {what}"));
            RyStatus::Panic
        }
    }
}

/// The message of the calling thread's most recent failed `ry_` call, or
/// an empty string if its most recent call succeeded. Never NULL.
///
/// Ownership: the string belongs to the library. It stays valid until the
/// next `ry_` call **on the same thread**; copy it to keep it.
/// Thread-safety: each thread has its own message.
#[no_mangle]
pub extern "C" fn ry_last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|l| l.borrow().as_ptr())
        .unwrap_or(c"thread is exiting".as_ptr())
}

/// The name of a status code (e.g. `"RY_STATUS_TOKEN_DUPLICATE"`), or
/// `"RY_STATUS_UNKNOWN"` for a value that is not a status.
///
/// Ownership: a static string, never freed. Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn ry_status_name(status: i32) -> *const c_char {
    macro_rules! names {
        ($($v:ident => $n:literal),* $(,)?) => {
            $(if status == RyStatus::$v as i32 { return $n.as_ptr(); })*
        };
    }
    names!(
        Ok => c"RY_STATUS_OK",
        NullArgument => c"RY_STATUS_NULL_ARGUMENT",
        InvalidHandle => c"RY_STATUS_INVALID_HANDLE",
        InvalidArgument => c"RY_STATUS_INVALID_ARGUMENT",
        Panic => c"RY_STATUS_PANIC",
        BufferTooSmall => c"RY_STATUS_BUFFER_TOO_SMALL",
        LogUnavailable => c"RY_STATUS_LOG_UNAVAILABLE",
        TokenExhausted => c"RY_STATUS_TOKEN_EXHAUSTED",
        TokenOutOfRange => c"RY_STATUS_TOKEN_OUT_OF_RANGE",
        TokenDuplicate => c"RY_STATUS_TOKEN_DUPLICATE",
        TokenStale => c"RY_STATUS_TOKEN_STALE",
        TokenForged => c"RY_STATUS_TOKEN_FORGED",
        TokenInvalidCapacity => c"RY_STATUS_TOKEN_INVALID_CAPACITY",
        TokenCacheWrongPool => c"RY_STATUS_TOKEN_CACHE_WRONG_POOL",
        CcConfigInvalidMode => c"RY_STATUS_CC_CONFIG_INVALID_MODE",
        CcConfigNotANumber => c"RY_STATUS_CC_CONFIG_NOT_A_NUMBER",
        CcConfigZero => c"RY_STATUS_CC_CONFIG_ZERO",
        CcConfigMinAboveMax => c"RY_STATUS_CC_CONFIG_MIN_ABOVE_MAX",
        CcConfigProbeAboveMin => c"RY_STATUS_CC_CONFIG_PROBE_ABOVE_MIN",
        CcConfigInitialOutOfRange => c"RY_STATUS_CC_CONFIG_INITIAL_OUT_OF_RANGE",
        CcConfigDecreaseOutOfRange => c"RY_STATUS_CC_CONFIG_DECREASE_OUT_OF_RANGE",
        CcConfigTooLarge => c"RY_STATUS_CC_CONFIG_TOO_LARGE",
        CcConfigRouteDeviceOutOfRange => c"RY_STATUS_CC_CONFIG_ROUTE_DEVICE_OUT_OF_RANGE",
        CcConfigInvalidTargetMode => c"RY_STATUS_CC_CONFIG_INVALID_TARGET_MODE",
        CcZeroBytes => c"RY_STATUS_CC_ZERO_BYTES",
        CcNoSuchDevice => c"RY_STATUS_CC_NO_SUCH_DEVICE",
        CcNoSuchRoute => c"RY_STATUS_CC_NO_SUCH_ROUTE",
        CcWrongDevice => c"RY_STATUS_CC_WRONG_DEVICE",
        CcNotHeld => c"RY_STATUS_CC_NOT_HELD",
        CcUnderflow => c"RY_STATUS_CC_UNDERFLOW",
        CcSplitOutOfRange => c"RY_STATUS_CC_SPLIT_OUT_OF_RANGE",
        CcAlreadyHeld => c"RY_STATUS_CC_ALREADY_HELD",
        CcConfigInvalidSoftwareDrain => c"RY_STATUS_CC_CONFIG_INVALID_SOFTWARE_DRAIN",
        RailConfig => c"RY_STATUS_RAIL_CONFIG",
        RailUnknownDevice => c"RY_STATUS_RAIL_UNKNOWN_DEVICE",
        RailNicUnderflow => c"RY_STATUS_RAIL_NIC_UNDERFLOW",
        RailPeerAccounting => c"RY_STATUS_RAIL_PEER_ACCOUNTING",
        RailNotHeld => c"RY_STATUS_RAIL_NOT_HELD",
        RailNoCandidate => c"RY_STATUS_RAIL_NO_CANDIDATE",
        CreditUnknownPeer => c"RY_STATUS_CREDIT_UNKNOWN_PEER",
        CreditUnknownClass => c"RY_STATUS_CREDIT_UNKNOWN_CLASS",
        CreditUnknownResource => c"RY_STATUS_CREDIT_UNKNOWN_RESOURCE",
        CreditChargeTooLarge => c"RY_STATUS_CREDIT_CHARGE_TOO_LARGE",
        CreditForeignEntry => c"RY_STATUS_CREDIT_FOREIGN_ENTRY",
        CreditClosed => c"RY_STATUS_CREDIT_CLOSED",
        CreditInsufficient => c"RY_STATUS_CREDIT_INSUFFICIENT",
        CreditEpochChanged => c"RY_STATUS_CREDIT_EPOCH_CHANGED",
        CreditOverflow => c"RY_STATUS_CREDIT_OVERFLOW",
        CreditNotBound => c"RY_STATUS_CREDIT_NOT_BOUND",
        CreditSessionMismatch => c"RY_STATUS_CREDIT_SESSION_MISMATCH",
        CreditEpochMismatch => c"RY_STATUS_CREDIT_EPOCH_MISMATCH",
        CreditQuarantined => c"RY_STATUS_CREDIT_QUARANTINED",
        CreditViolation => c"RY_STATUS_CREDIT_VIOLATION",
        CreditNotHeld => c"RY_STATUS_CREDIT_NOT_HELD",
        CreditNotRecordable => c"RY_STATUS_CREDIT_NOT_RECORDABLE",
        CreditConfig => c"RY_STATUS_CREDIT_CONFIG",
        CreditPeerNotOpen => c"RY_STATUS_CREDIT_PEER_NOT_OPEN",
        CreditStale => c"RY_STATUS_CREDIT_STALE",
        CreditOverRelease => c"RY_STATUS_CREDIT_OVER_RELEASE",
        CreditNothingFencing => c"RY_STATUS_CREDIT_NOTHING_FENCING",
        CreditEmptyCharge => c"RY_STATUS_CREDIT_EMPTY_CHARGE",
        CreditZeroId => c"RY_STATUS_CREDIT_ZERO_ID",
        WireTruncated => c"RY_STATUS_WIRE_TRUNCATED",
        WireTrailingBytes => c"RY_STATUS_WIRE_TRAILING_BYTES",
        WireUnknownVersion => c"RY_STATUS_WIRE_UNKNOWN_VERSION",
        WireUnknownMessageType => c"RY_STATUS_WIRE_UNKNOWN_MESSAGE_TYPE",
        WireMalformed => c"RY_STATUS_WIRE_MALFORMED",
        WireTooManyResources => c"RY_STATUS_WIRE_TOO_MANY_RESOURCES",
        WireDuplicateResource => c"RY_STATUS_WIRE_DUPLICATE_RESOURCE",
        WireUnknownRequiredResource => c"RY_STATUS_WIRE_UNKNOWN_REQUIRED_RESOURCE",
        WireBadEnum => c"RY_STATUS_WIRE_BAD_ENUM",
        WireLengthMismatch => c"RY_STATUS_WIRE_LENGTH_MISMATCH",
        EngineConfig => c"RY_STATUS_ENGINE_CONFIG",
        EngineNoDevice => c"RY_STATUS_ENGINE_NO_DEVICE",
        EngineDeviceNotFound => c"RY_STATUS_ENGINE_DEVICE_NOT_FOUND",
        EngineVerbs => c"RY_STATUS_ENGINE_VERBS",
        EngineHandshake => c"RY_STATUS_ENGINE_HANDSHAKE",
        EnginePeerMismatch => c"RY_STATUS_ENGINE_PEER_MISMATCH",
        EngineEndpoint => c"RY_STATUS_ENGINE_ENDPOINT",
        EngineIo => c"RY_STATUS_ENGINE_IO",
        EngineNoSuchBatch => c"RY_STATUS_ENGINE_NO_SUCH_BATCH",
        EngineNoSuchTask => c"RY_STATUS_ENGINE_NO_SUCH_TASK",
        EngineNoSuchSegment => c"RY_STATUS_ENGINE_NO_SUCH_SEGMENT",
        EngineSegmentClosed => c"RY_STATUS_ENGINE_SEGMENT_CLOSED",
        EngineBatchFull => c"RY_STATUS_ENGINE_BATCH_FULL",
        EngineBatchBusy => c"RY_STATUS_ENGINE_BATCH_BUSY",
        EngineOutOfTasks => c"RY_STATUS_ENGINE_OUT_OF_TASKS",
        EngineOutOfSlices => c"RY_STATUS_ENGINE_OUT_OF_SLICES",
        EngineZeroLength => c"RY_STATUS_ENGINE_ZERO_LENGTH",
        EngineLocalRange => c"RY_STATUS_ENGINE_LOCAL_RANGE",
        EngineRemoteRange => c"RY_STATUS_ENGINE_REMOTE_RANGE",
        EngineTooManyRegions => c"RY_STATUS_ENGINE_TOO_MANY_REGIONS",
        EngineUnsupported => c"RY_STATUS_ENGINE_UNSUPPORTED",
        EngineCore => c"RY_STATUS_ENGINE_CORE",
        EngineRegionOverlap => c"RY_STATUS_ENGINE_REGION_OVERLAP",
        EngineNoSuchRegion => c"RY_STATUS_ENGINE_NO_SUCH_REGION",
        EngineMemoryBusy => c"RY_STATUS_ENGINE_MEMORY_BUSY",
        EngineCreditRefused => c"RY_STATUS_ENGINE_CREDIT_REFUSED",
        EngineCreditNotActive => c"RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE",
        EngineCreditConsume => c"RY_STATUS_ENGINE_CREDIT_CONSUME",
        PostRefused => c"RY_STATUS_POST_REFUSED",
        HotpathConfig => c"RY_STATUS_HOTPATH_CONFIG",
        EndpointStaleGeneration => c"RY_STATUS_ENDPOINT_STALE_GENERATION",
        EndpointRetired => c"RY_STATUS_ENDPOINT_RETIRED",
        EndpointAlreadyRetired => c"RY_STATUS_ENDPOINT_ALREADY_RETIRED",
        EndpointOutOfRange => c"RY_STATUS_ENDPOINT_OUT_OF_RANGE",
        EndpointBadQp => c"RY_STATUS_ENDPOINT_BAD_QP",
        EndpointQpFull => c"RY_STATUS_ENDPOINT_QP_FULL",
        EndpointSaturated => c"RY_STATUS_ENDPOINT_SATURATED",
        EndpointUnderflow => c"RY_STATUS_ENDPOINT_UNDERFLOW",
        EndpointTableFull => c"RY_STATUS_ENDPOINT_TABLE_FULL",
        EndpointInvalidConfig => c"RY_STATUS_ENDPOINT_INVALID_CONFIG",
        SliceStaleAttempt => c"RY_STATUS_SLICE_STALE_ATTEMPT",
        SliceAlreadyTerminal => c"RY_STATUS_SLICE_ALREADY_TERMINAL",
        SliceBusy => c"RY_STATUS_SLICE_BUSY",
        SliceNotOpen => c"RY_STATUS_SLICE_NOT_OPEN",
        SliceOutOfRange => c"RY_STATUS_SLICE_OUT_OF_RANGE",
        SliceInvalidCapacity => c"RY_STATUS_SLICE_INVALID_CAPACITY",
    );
    c"RY_STATUS_UNKNOWN".as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last() -> String {
        // SAFETY: ry_last_error_message never returns NULL and the string
        // lives until the next ry_ call on this thread.
        unsafe { CStr::from_ptr(ry_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let st = guard(|| panic!("boom {}", 42));
        assert_eq!(st, RyStatus::Panic);
        assert!(last().contains("boom 42"), "{}", last());
        let st = guard(|| std::panic::panic_any(7u8));
        assert_eq!(st, RyStatus::Panic);
        assert!(last().contains("non-string"), "{}", last());
        assert_eq!(guard(|| Ok(())), RyStatus::Ok);
        assert_eq!(last(), "");
    }

    #[test]
    fn the_last_error_is_per_thread() {
        let st = guard(|| Err(Error::invalid("only here")));
        assert_eq!(st, RyStatus::InvalidArgument);
        let other = std::thread::spawn(last).join().unwrap();
        assert_eq!(other, "");
        assert_eq!(last(), "only here");
    }

    #[test]
    fn interior_nul_does_not_lose_the_message() {
        let _ = guard(|| Err(Error::invalid("a\0b")));
        assert_eq!(last(), "a b");
    }
}
