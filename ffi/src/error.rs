//! Status codes, the thread-local last error message, and the entry-point
//! helpers every `extern "C"` function runs in: [`guard`] (no panic crosses
//! the boundary; an error becomes its status and the thread's message),
//! [`ret`] and [`ret_opt`] (the same, writing one result to an out-pointer).

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
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
    /// Credit: protocol violation (a cumulative total overflowed, or usage
    /// exceeds grants); the peer is quarantined.
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
    /// Credit update or usage report rejected: a cumulative total decreased
    /// (RFC 2849 rule 5). Nothing changed; counted in `protocol_errors`;
    /// the peer is not quarantined and its next honest message applies.
    CreditDecreasing = -73,

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

/// `(value, "RY_STATUS_NAME")` of every [`RyStatus`], generated by
/// `build.rs` from the enum above (the names cbindgen gives them).
const STATUS_NAMES: &[(i32, &CStr)] = include!(concat!(env!("OUT_DIR"), "/status_names.rs"));

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

/// `From<E> for Error` for core's (and the engine's) error types: the
/// error's text and the status its `match` names (`E` is the error type,
/// `S` is [`RyStatus`]). The `match` is exhaustive: a new error variant
/// needs its own status.
macro_rules! status_of {
    ($($e:ident => $map:tt)+) => {$(
        impl From<$e> for Error {
            #[allow(unused_imports)]
            fn from(e: $e) -> Self {
                use $e as E;
                use RyStatus as S;
                Error::new(status_of!(@map e $map), e)
            }
        }
    )+};
    (@map $x:ident { $($p:pat => $s:expr),+ $(,)? }) => { match $x { $($p => $s),+ } };
    (@map $x:ident (|$y:ident| $s:expr)) => { { let $y = $x; $s } };
    (@map $x:ident ($s:expr)) => { $s };
}
#[cfg(feature = "engine")]
pub(crate) use status_of;

status_of! {
    TokenError => {
        E::Exhausted => S::TokenExhausted,
        E::OutOfRange => S::TokenOutOfRange,
        E::Duplicate => S::TokenDuplicate,
        E::Stale => S::TokenStale,
        E::Forged => S::TokenForged,
        E::InvalidCapacity => S::TokenInvalidCapacity,
    }
    EndpointError => {
        E::StaleGeneration => S::EndpointStaleGeneration,
        E::Retired => S::EndpointRetired,
        E::AlreadyRetired => S::EndpointAlreadyRetired,
        E::OutOfRange => S::EndpointOutOfRange,
        E::BadQp => S::EndpointBadQp,
        E::QpFull => S::EndpointQpFull,
        E::Saturated => S::EndpointSaturated,
        E::Underflow => S::EndpointUnderflow,
        E::TableFull => S::EndpointTableFull,
        E::InvalidConfig | E::ForeignGuard => S::EndpointInvalidConfig,
    }
    SliceError => {
        E::StaleAttempt => S::SliceStaleAttempt,
        E::AlreadyTerminal => S::SliceAlreadyTerminal,
        E::Busy => S::SliceBusy,
        E::NotOpen => S::SliceNotOpen,
        E::OutOfRange => S::SliceOutOfRange,
        E::InvalidCapacity => S::SliceInvalidCapacity,
    }
    ConfigError => {
        E::InvalidMode => S::CcConfigInvalidMode,
        E::InvalidTargetMode => S::CcConfigInvalidTargetMode,
        E::InvalidSoftwareDrain => S::CcConfigInvalidSoftwareDrain,
        E::NotANumber(_) => S::CcConfigNotANumber,
        E::Zero(_) => S::CcConfigZero,
        E::MinAboveMax { .. } => S::CcConfigMinAboveMax,
        E::ProbeAboveMin { .. } => S::CcConfigProbeAboveMin,
        E::InitialOutOfRange { .. } => S::CcConfigInitialOutOfRange,
        E::DecreaseOutOfRange(_) => S::CcConfigDecreaseOutOfRange,
        E::TooLarge(_) => S::CcConfigTooLarge,
        E::RouteDeviceOutOfRange { .. } => S::CcConfigRouteDeviceOutOfRange,
    }
    AcquireError => {
        E::ZeroBytes => S::CcZeroBytes,
        E::AlreadyHeld => S::CcAlreadyHeld,
        E::NoSuchDevice(_) => S::CcNoSuchDevice,
        E::NoSuchRoute(_) => S::CcNoSuchRoute,
        E::WrongDevice { .. } => S::CcWrongDevice,
    }
    ReleaseError => {
        E::NotHeld => S::CcNotHeld,
        E::NoSuchDevice(_) => S::CcNoSuchDevice,
        E::NoSuchRoute(_) => S::CcNoSuchRoute,
        E::Underflow { .. } => S::CcUnderflow,
    }
    RailConfigError => (S::RailConfig)
    RailError => {
        E::UnknownDevice { .. } => S::RailUnknownDevice,
        E::NicUnderflow { .. } => S::RailNicUnderflow,
        E::PeerAccounting { .. } => S::RailPeerAccounting,
        E::NotHeld => S::RailNotHeld,
        E::NoCandidate => S::RailNoCandidate,
        E::CountsTooShort { .. } => S::BufferTooSmall,
    }
    KeyError => (|e| key_status(e))
    ReserveError => {
        E::Key(k) => key_status(k),
        E::Closed => S::CreditClosed,
        E::Insufficient(_) => S::CreditInsufficient,
    }
    CommitError => {
        E::EpochChanged => S::CreditEpochChanged,
        E::Overflow => S::CreditOverflow,
    }
    UpdateError => {
        E::Key(k) => key_status(k),
        E::NotBound => S::CreditNotBound,
        E::SessionMismatch => S::CreditSessionMismatch,
        E::EpochMismatch { .. } => S::CreditEpochMismatch,
        E::Quarantined => S::CreditQuarantined,
        E::Decreasing(_) => S::CreditDecreasing,
        E::Overflow(_) => S::CreditViolation,
        E::ForeignLedger => S::CreditForeignEntry,
        E::Zero(_) => S::CreditZeroId,
    }
    RecordError => {
        E::NoCredit => S::CreditNotHeld,
        E::NotRecordable | E::BytesMismatch | E::AlreadyHeld => S::CreditNotRecordable,
        E::Key(k) => key_status(k),
    }
    CreditReleaseError => {
        E::NotHeld => S::CreditNotHeld,
        E::Key(k) => key_status(k),
        E::NotOutstanding(_) => S::CreditOverRelease,
    }
    CreditConfigError => (S::CreditConfig)
    AllocError => {
        E::Key(k) => key_status(k),
        E::BadConfig => S::CreditConfig,
        E::Insufficient(_) => S::CreditInsufficient,
        E::EntryCap(_) | E::OverRelease(_) => S::CreditOverRelease,
        E::PeerNotOpen => S::CreditPeerNotOpen,
        E::Stale => S::CreditStale,
        E::Violation(_) => S::CreditViolation,
        E::Decreasing(_) => S::CreditDecreasing,
        E::NothingFencing => S::CreditNothingFencing,
        E::EpochMismatch { .. } => S::CreditEpochMismatch,
        E::Zero(_) => S::CreditZeroId,
    }
    DecodeError => {
        E::Truncated { .. } => S::WireTruncated,
        E::TrailingBytes(_) => S::WireTrailingBytes,
        E::UnknownVersion(_) => S::WireUnknownVersion,
        E::UnknownMessageType(_) => S::WireUnknownMessageType,
        E::UnknownFlags | E::NonzeroReserved | E::Zero(_) => S::WireMalformed,
        E::TooManyResources(_) => S::WireTooManyResources,
        E::DuplicateResource(_) => S::WireDuplicateResource,
        E::UnknownRequiredResource(_) => S::WireUnknownRequiredResource,
        E::BadEnum(_) => S::WireBadEnum,
        E::LengthMismatch { .. } => S::WireLengthMismatch,
    }
    EncodeError => {
        E::BufferTooSmall { .. } => S::BufferTooSmall,
        E::Invalid(d) => Error::from(d).status,
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

/// [`guard`] for an entry point with one result: `f`'s value is written
/// to `out`. A NULL `out` is refused (naming it `name`) before `f` runs,
/// so nothing `f` would hand out (a permit, a token, a new handle) is lost.
///
/// # Safety
/// `out` is NULL or valid for writes of one `T`.
pub(crate) unsafe fn ret<T>(out: *mut T, name: &str, f: impl FnOnce() -> Result<T>) -> RyStatus {
    guard(|| {
        if out.is_null() {
            return Err(Error::null(name));
        }
        let v = f()?;
        // SAFETY: non-NULL, and the caller guarantees it is valid for writes.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// [`ret`] for an optional out-pointer: with `out` NULL the value is
/// dropped (`f` still runs).
///
/// # Safety
/// `out` is NULL or valid for writes of one `T`.
pub(crate) unsafe fn ret_opt<T>(out: *mut T, f: impl FnOnce() -> Result<T>) -> RyStatus {
    guard(|| {
        let v = f()?;
        // SAFETY: the caller guarantees `out` is NULL or valid for writes.
        unsafe { crate::ptr::put(out, v) };
        Ok(())
    })
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
    STATUS_NAMES
        .iter()
        .find(|(v, _)| *v == status)
        .map_or(c"RY_STATUS_UNKNOWN", |(_, n)| *n)
        .as_ptr()
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
