//! The versioned credit wire schema (RFC 2849): little-endian, explicit
//! lengths, bounded resource lists, no allocation.
//!
//! The byte layout is documented in `docs/wire.md`. Every message is an
//! 8-byte header followed by a body whose length the header states exactly:
//!
//! ```text
//! u16 schema_version | u8 msg_type | u8 flags (0) | u32 body_len | body ...
//! ```
//!
//! [`decode`] runs **every** check on the raw bytes — version, message type,
//! truncation, trailing bytes, reserved-zero fields, flag bits, list counts
//! (at most [`MAX_RESOURCES_PER_MSG`]), duplicate resources, unknown
//! resources marked required — *before* it builds any value. Decoding never
//! panics and never allocates (lists are `heapless::Vec`s). The encoding is
//! canonical: anything [`decode`] accepts, [`encode`] writes back byte for
//! byte (unknown *optional* resources are preserved for that reason and
//! ignored when converting to runtime types).
//!
//! ```
//! use railyard_core::wire::credit::{decode, encode, CreditUpdateV1, Message, WireAmount};
//! let mut m = CreditUpdateV1 { receiver_session: 9, epoch: 1, sequence: 4, ..Default::default() };
//! m.grants.push(WireAmount { resource: 1, required: true, value: 1 << 20 }).unwrap();
//! let msg = Message::CreditUpdate(m);
//! let mut buf = [0u8; 256];
//! let n = encode(&msg, &mut buf).unwrap();
//! assert_eq!(decode(&buf[..n]), Ok(msg));
//! assert!(decode(&buf[..n - 1]).is_err()); // truncated
//! ```
use core::fmt;

use super::cursor::{Put, Reader, Short, SliceWriter};
use crate::credit::{CreditUpdate, CreditUsage, Resource, SessionId, Totals, ZeroField};

/// The schema version this codec speaks.
pub const SCHEMA_V1: u16 = 1;
/// Maximum entries in one resource list.
pub const MAX_RESOURCES_PER_MSG: usize = 8;
/// Header size in bytes.
pub const HEADER_LEN: usize = 8;
/// Size of one encoded resource amount.
pub const AMOUNT_LEN: usize = 12;
/// Largest encoded message (a usage report with four full lists).
pub const MAX_MESSAGE_LEN: usize =
    HEADER_LEN + USAGE_FIXED + 4 * MAX_RESOURCES_PER_MSG * AMOUNT_LEN;

const UPDATE_FIXED: usize = 44;
const USAGE_FIXED: usize = 40;
const OFFER_FIXED: usize = 12;
const ANSWER_FIXED: usize = 32;
/// Amount flag: the receiver of the message must understand this resource.
pub const AMOUNT_REQUIRED: u16 = 1;

/// Message type codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum MsgType {
    /// [`CreditUpdateV1`].
    CreditUpdate = 1,
    /// [`CreditUsageV1`].
    CreditUsage = 2,
    /// [`CapabilityOfferV1`].
    CapabilityOffer = 3,
    /// [`CapabilityAnswerV1`].
    CapabilityAnswer = 4,
}

/// One resource amount on the wire. `resource` is a raw code so unknown
/// optional resources survive a round trip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireAmount {
    /// Resource code ([`Resource::code`] for known ones).
    pub resource: u16,
    /// Whether the peer must understand the resource.
    pub required: bool,
    /// Cumulative total, window or demand.
    pub value: u64,
}

/// A bounded resource list.
pub type Amounts = heapless::Vec<WireAmount, MAX_RESOURCES_PER_MSG>;

/// `ReceiverCreditUpdateV1`: cumulative grant totals for one class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreditUpdateV1 {
    /// QoS class.
    pub qos_class: u32,
    /// Freshness hint, ms after local receipt; 0 = none.
    pub freshness_ttl_ms: u32,
    /// Receiver session.
    pub receiver_session: u128,
    /// Epoch.
    pub epoch: u64,
    /// Sequence.
    pub sequence: u64,
    /// Cumulative grants.
    pub grants: Amounts,
}

/// `SenderCreditUsageV1`: cumulative usage for one class, plus demand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreditUsageV1 {
    /// Receiver session.
    pub receiver_session: u128,
    /// Epoch.
    pub epoch: u64,
    /// Sender's report sequence.
    pub sequence: u64,
    /// QoS class.
    pub qos_class: u32,
    /// Cumulative committed totals.
    pub consumed: Amounts,
    /// Cumulative completion-released totals.
    pub released: Amounts,
    /// Cumulative explicitly returned unused credit.
    pub returned: Amounts,
    /// Credit-stalled demand.
    pub pending_demand: Amounts,
}

/// Sender → receiver at bootstrap: supported versions, mode, windows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapabilityOfferV1 {
    /// Lowest schema version supported.
    pub min_version: u16,
    /// Highest schema version supported.
    pub max_version: u16,
    /// The sender runs in required mode.
    pub required: bool,
    /// QoS classes the sender wants.
    pub max_classes: u32,
    /// The sender's per-entry tracking window per resource.
    pub windows: Amounts,
}

/// Negotiation result codes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum NegotiationResult {
    /// Credit active at `version`.
    #[default]
    Accepted = 0,
    /// No common version / capability: legacy or fail per mode.
    Unsupported = 1,
    /// Refused by receiver policy.
    Rejected = 2,
}

/// Receiver → sender: the negotiated version and session binding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapabilityAnswerV1 {
    /// Chosen version (0 unless accepted).
    pub version: u16,
    /// Result.
    pub result: NegotiationResult,
    /// QoS classes authorized for this sender.
    pub classes: u32,
    /// Receiver session.
    pub receiver_session: u128,
    /// First epoch.
    pub epoch: u64,
    /// Receiver per-entry caps per resource.
    pub caps: Amounts,
}

/// A decoded message. Unboxed on purpose: decoding never allocates.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Receiver credit update.
    CreditUpdate(CreditUpdateV1),
    /// Sender usage report.
    CreditUsage(CreditUsageV1),
    /// Capability offer.
    CapabilityOffer(CapabilityOfferV1),
    /// Capability answer.
    CapabilityAnswer(CapabilityAnswerV1),
}

/// Why bytes were rejected. No runtime value was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or body requires.
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// Bytes after the stated body.
    TrailingBytes(usize),
    /// Schema version not spoken here.
    UnknownVersion(u16),
    /// Unknown message type.
    UnknownMessageType(u8),
    /// Unknown header or amount flag bits.
    UnknownFlags,
    /// A reserved field is not zero.
    NonzeroReserved,
    /// A list longer than [`MAX_RESOURCES_PER_MSG`].
    TooManyResources(u8),
    /// The same resource twice in one list.
    DuplicateResource(u16),
    /// A resource this codec does not know, marked required.
    UnknownRequiredResource(u16),
    /// An enum field with an undefined value.
    BadEnum(u8),
    /// The header's body length disagrees with the body's own counts.
    LengthMismatch {
        /// From the header.
        stated: usize,
        /// From the body's counts.
        computed: usize,
    },
    /// A reserved zero identifier: session, epoch or sequence 0 in an
    /// update or usage report, or an accepted answer without a session,
    /// epoch or version (see [`ZeroField`] and `docs/wire.md`).
    Zero(ZeroField),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { need, have } => {
                write!(f, "truncated: need {need} bytes, have {have}")
            }
            DecodeError::TrailingBytes(n) => write!(f, "{n} trailing bytes"),
            DecodeError::UnknownVersion(v) => write!(f, "unknown schema version {v}"),
            DecodeError::UnknownMessageType(t) => write!(f, "unknown message type {t}"),
            DecodeError::UnknownFlags => f.write_str("unknown flag bits"),
            DecodeError::NonzeroReserved => f.write_str("reserved field is not zero"),
            DecodeError::TooManyResources(n) => write!(
                f,
                "{n} resources exceed the maximum of {MAX_RESOURCES_PER_MSG}"
            ),
            DecodeError::DuplicateResource(r) => write!(f, "resource {r} listed twice"),
            DecodeError::UnknownRequiredResource(r) => write!(f, "unknown required resource {r}"),
            DecodeError::BadEnum(v) => write!(f, "undefined enum value {v}"),
            DecodeError::LengthMismatch { stated, computed } => {
                write!(
                    f,
                    "body length {stated} disagrees with contents ({computed})"
                )
            }
            DecodeError::Zero(z) => write!(f, "{z}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DecodeError {}

/// Why a message could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
    },
    /// The message would not decode (duplicate or unknown-required
    /// resource, a reserved zero identifier, a refusal that names a
    /// binding); the codec never emits what it would reject.
    Invalid(DecodeError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::BufferTooSmall { need } => {
                write!(f, "output buffer too small: need {need} bytes")
            }
            EncodeError::Invalid(e) => write!(f, "message would not decode: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EncodeError {}

// --- reading -----------------------------------------------------------------

impl From<Short> for DecodeError {
    fn from(s: Short) -> Self {
        DecodeError::Truncated {
            need: s.need,
            have: s.have,
        }
    }
}

fn check_count(n: u8) -> Result<usize, DecodeError> {
    if n as usize > MAX_RESOURCES_PER_MSG {
        Err(DecodeError::TooManyResources(n))
    } else {
        Ok(n as usize)
    }
}

/// Reads and validates a list of `n` amounts (`n` already checked against
/// [`MAX_RESOURCES_PER_MSG`], their bytes against the stated length).
fn read_amounts(r: &mut Reader<'_>, n: usize) -> Result<Amounts, DecodeError> {
    let mut v = Amounts::new();
    for _ in 0..n {
        let code = r.u16()?;
        let flags = r.u16()?;
        let value = r.u64()?;
        if flags & !AMOUNT_REQUIRED != 0 {
            return Err(DecodeError::UnknownFlags);
        }
        let required = flags & AMOUNT_REQUIRED != 0;
        if required && Resource::from_code(code).is_none() {
            return Err(DecodeError::UnknownRequiredResource(code));
        }
        if v.iter().any(|a| a.resource == code) {
            return Err(DecodeError::DuplicateResource(code));
        }
        v.push(WireAmount {
            resource: code,
            required,
            value,
        })
        .map_err(|_| DecodeError::TooManyResources(n as u8))?;
    }
    Ok(v)
}

/// An accepted answer binds a real `(session, epoch)` at a real version;
/// a refusal binds nothing, so its version, session and epoch are zero.
fn check_answer_binding(
    result: NegotiationResult,
    version: u16,
    session: u128,
    epoch: u64,
) -> Result<(), DecodeError> {
    if result == NegotiationResult::Accepted {
        if version == 0 {
            return Err(DecodeError::Zero(ZeroField::Version));
        }
        ZeroField::check(session, epoch, 1).map_err(DecodeError::Zero)
    } else if version != 0 || session != 0 || epoch != 0 {
        Err(DecodeError::NonzeroReserved)
    } else {
        Ok(())
    }
}

/// The body holds exactly `computed` bytes from its start (`body_start`):
/// fewer is `Truncated`, more is `LengthMismatch`.
fn exact(r: &Reader<'_>, body_start: usize, computed: usize) -> Result<(), DecodeError> {
    let body = r.pos() - body_start + r.remaining();
    r.need(computed - (r.pos() - body_start))?;
    if body > computed {
        return Err(DecodeError::LengthMismatch {
            stated: body,
            computed,
        });
    }
    Ok(())
}

/// Decodes one message from exactly `buf`. Every check runs before the
/// message is built; never panics, never allocates.
///
/// ```
/// use railyard_core::wire::credit::{decode, encode, CreditUpdateV1, DecodeError, Message, WireAmount};
///
/// let mut m = CreditUpdateV1 { receiver_session: 1, epoch: 1, sequence: 1, ..Default::default() };
/// m.grants.push(WireAmount { resource: 1, required: true, value: 4096 }).unwrap();
/// let mut buf = [0u8; 128];
/// let n = encode(&Message::CreditUpdate(m), &mut buf).unwrap();
/// assert!(decode(&buf[..n]).is_ok());
/// // A resource this build does not know survives when optional...
/// let mut unknown = CreditUpdateV1 { receiver_session: 1, epoch: 1, sequence: 1, ..Default::default() };
/// unknown.grants.push(WireAmount { resource: 99, required: false, value: 1 }).unwrap();
/// let msg = Message::CreditUpdate(unknown);
/// let n = encode(&msg, &mut buf).unwrap();
/// assert_eq!(decode(&buf[..n]), Ok(msg));
/// // ... and a header this build does not speak is refused before anything is read.
/// assert_eq!(decode(&[2, 0, 1, 0, 0, 0, 0, 0]), Err(DecodeError::UnknownVersion(2)));
/// assert!(matches!(decode(&buf[..5]), Err(DecodeError::Truncated { .. })));
/// ```
pub fn decode(buf: &[u8]) -> Result<Message, DecodeError> {
    let mut r = Reader::new(buf);
    r.need(HEADER_LEN)?;
    let version = r.u16()?;
    if version != SCHEMA_V1 {
        return Err(DecodeError::UnknownVersion(version));
    }
    let ty = r.u8()?;
    if r.u8()? != 0 {
        return Err(DecodeError::UnknownFlags);
    }
    let body_len = r.u32()? as usize;
    let have = r.remaining();
    if have < body_len {
        return Err(DecodeError::Truncated {
            need: HEADER_LEN.saturating_add(body_len),
            have: buf.len(),
        });
    }
    if have > body_len {
        return Err(DecodeError::TrailingBytes(have - body_len));
    }
    let body = r.pos();
    match ty {
        1 => {
            r.need(UPDATE_FIXED)?;
            let qos_class = r.u32()?;
            let freshness_ttl_ms = r.u32()?;
            let receiver_session = r.u128()?;
            let epoch = r.u64()?;
            let sequence = r.u64()?;
            let count = r.u8()?;
            if r.array::<3>()? != [0, 0, 0] {
                return Err(DecodeError::NonzeroReserved);
            }
            let n = check_count(count)?;
            exact(&r, body, UPDATE_FIXED + n * AMOUNT_LEN)?;
            let grants = read_amounts(&mut r, n)?;
            ZeroField::check(receiver_session, epoch, sequence).map_err(DecodeError::Zero)?;
            Ok(Message::CreditUpdate(CreditUpdateV1 {
                qos_class,
                freshness_ttl_ms,
                receiver_session,
                epoch,
                sequence,
                grants,
            }))
        }
        2 => {
            r.need(USAGE_FIXED)?;
            let receiver_session = r.u128()?;
            let epoch = r.u64()?;
            let sequence = r.u64()?;
            let qos_class = r.u32()?;
            let mut counts = [0usize; 4];
            for (c, raw) in counts.iter_mut().zip(r.array::<4>()?) {
                *c = check_count(raw)?;
            }
            let total: usize = counts.iter().sum();
            exact(&r, body, USAGE_FIXED + total * AMOUNT_LEN)?;
            let [consumed, released, returned, pending_demand] = [
                read_amounts(&mut r, counts[0])?,
                read_amounts(&mut r, counts[1])?,
                read_amounts(&mut r, counts[2])?,
                read_amounts(&mut r, counts[3])?,
            ];
            ZeroField::check(receiver_session, epoch, sequence).map_err(DecodeError::Zero)?;
            Ok(Message::CreditUsage(CreditUsageV1 {
                receiver_session,
                epoch,
                sequence,
                qos_class,
                consumed,
                released,
                returned,
                pending_demand,
            }))
        }
        3 => {
            r.need(OFFER_FIXED)?;
            let min_version = r.u16()?;
            let max_version = r.u16()?;
            let required = r.u8()?;
            let count = r.u8()?;
            let reserved = r.u16()?;
            let max_classes = r.u32()?;
            if required > 1 {
                return Err(DecodeError::BadEnum(required));
            }
            if reserved != 0 {
                return Err(DecodeError::NonzeroReserved);
            }
            let n = check_count(count)?;
            exact(&r, body, OFFER_FIXED + n * AMOUNT_LEN)?;
            let windows = read_amounts(&mut r, n)?;
            Ok(Message::CapabilityOffer(CapabilityOfferV1 {
                min_version,
                max_version,
                required: required == 1,
                max_classes,
                windows,
            }))
        }
        4 => {
            r.need(ANSWER_FIXED)?;
            let version = r.u16()?;
            let result = match r.u8()? {
                0 => NegotiationResult::Accepted,
                1 => NegotiationResult::Unsupported,
                2 => NegotiationResult::Rejected,
                v => return Err(DecodeError::BadEnum(v)),
            };
            let n = check_count(r.u8()?)?;
            let classes = r.u32()?;
            let receiver_session = r.u128()?;
            let epoch = r.u64()?;
            exact(&r, body, ANSWER_FIXED + n * AMOUNT_LEN)?;
            let caps = read_amounts(&mut r, n)?;
            check_answer_binding(result, version, receiver_session, epoch)?;
            Ok(Message::CapabilityAnswer(CapabilityAnswerV1 {
                version,
                result,
                classes,
                receiver_session,
                epoch,
                caps,
            }))
        }
        t => Err(DecodeError::UnknownMessageType(t)),
    }
}

// --- writing -----------------------------------------------------------------

fn put_amounts(w: &mut impl Put, a: &Amounts) {
    for x in a {
        w.put_u16(x.resource);
        w.put_u16(if x.required { AMOUNT_REQUIRED } else { 0 });
        w.put_u64(x.value);
    }
}

fn validate_list(a: &Amounts) -> Result<(), DecodeError> {
    for (i, x) in a.iter().enumerate() {
        if x.required && Resource::from_code(x.resource).is_none() {
            return Err(DecodeError::UnknownRequiredResource(x.resource));
        }
        if a[..i].iter().any(|y| y.resource == x.resource) {
            return Err(DecodeError::DuplicateResource(x.resource));
        }
    }
    Ok(())
}

/// The encoded size of `msg`.
///
/// ```
/// use railyard_core::wire::credit::{encode, encoded_len, CreditUpdateV1, Message, HEADER_LEN};
/// let msg = Message::CreditUpdate(CreditUpdateV1 { receiver_session: 1, epoch: 1, sequence: 1, ..Default::default() });
/// let mut buf = [0u8; 128];
/// assert_eq!(encode(&msg, &mut buf), Ok(encoded_len(&msg)));
/// assert!(encoded_len(&msg) > HEADER_LEN);
/// ```
pub fn encoded_len(msg: &Message) -> usize {
    HEADER_LEN
        + match msg {
            Message::CreditUpdate(m) => UPDATE_FIXED + m.grants.len() * AMOUNT_LEN,
            Message::CreditUsage(m) => {
                USAGE_FIXED
                    + (m.consumed.len()
                        + m.released.len()
                        + m.returned.len()
                        + m.pending_demand.len())
                        * AMOUNT_LEN
            }
            Message::CapabilityOffer(m) => OFFER_FIXED + m.windows.len() * AMOUNT_LEN,
            Message::CapabilityAnswer(m) => ANSWER_FIXED + m.caps.len() * AMOUNT_LEN,
        }
}

/// Encodes `msg` into `out`; returns the bytes written. Never allocates.
///
/// ```
/// use railyard_core::credit::ZeroField;
/// use railyard_core::wire::credit::{encode, CreditUpdateV1, DecodeError, EncodeError, Message};
///
/// let msg = Message::CreditUpdate(CreditUpdateV1 { receiver_session: 1, epoch: 1, sequence: 1, ..Default::default() });
/// let mut small = [0u8; 8];
/// assert!(matches!(encode(&msg, &mut small), Err(EncodeError::BufferTooSmall { .. })));
/// // Sequence 0 is reserved: never put on the wire.
/// let zero = Message::CreditUpdate(CreditUpdateV1 { receiver_session: 1, epoch: 1, sequence: 0, ..Default::default() });
/// assert_eq!(encode(&zero, &mut [0u8; 128]), Err(EncodeError::Invalid(DecodeError::Zero(ZeroField::Sequence))));
/// ```
pub fn encode(msg: &Message, out: &mut [u8]) -> Result<usize, EncodeError> {
    let len = encoded_len(msg);
    let zero = |r: Result<(), ZeroField>| r.map_err(DecodeError::Zero);
    match msg {
        Message::CreditUpdate(m) => validate_list(&m.grants).and(zero(ZeroField::check(
            m.receiver_session,
            m.epoch,
            m.sequence,
        ))),
        Message::CreditUsage(m) => validate_list(&m.consumed)
            .and(validate_list(&m.released))
            .and(validate_list(&m.returned))
            .and(validate_list(&m.pending_demand))
            .and(zero(ZeroField::check(
                m.receiver_session,
                m.epoch,
                m.sequence,
            ))),
        Message::CapabilityOffer(m) => validate_list(&m.windows),
        Message::CapabilityAnswer(m) => validate_list(&m.caps).and(check_answer_binding(
            m.result,
            m.version,
            m.receiver_session,
            m.epoch,
        )),
    }
    .map_err(EncodeError::Invalid)?;
    if out.len() < len {
        return Err(EncodeError::BufferTooSmall { need: len });
    }
    let mut w = SliceWriter::new(out);
    let ty = match msg {
        Message::CreditUpdate(_) => MsgType::CreditUpdate,
        Message::CreditUsage(_) => MsgType::CreditUsage,
        Message::CapabilityOffer(_) => MsgType::CapabilityOffer,
        Message::CapabilityAnswer(_) => MsgType::CapabilityAnswer,
    };
    w.put_u16(SCHEMA_V1);
    w.put(&[ty as u8, 0]);
    // Lossless: at most MAX_MESSAGE_LEN.
    w.put_u32((len - HEADER_LEN) as u32);
    match msg {
        Message::CreditUpdate(m) => {
            w.put_u32(m.qos_class);
            w.put_u32(m.freshness_ttl_ms);
            w.put_u128(m.receiver_session);
            w.put_u64(m.epoch);
            w.put_u64(m.sequence);
            w.put(&[m.grants.len() as u8, 0, 0, 0]);
            put_amounts(&mut w, &m.grants);
        }
        Message::CreditUsage(m) => {
            w.put_u128(m.receiver_session);
            w.put_u64(m.epoch);
            w.put_u64(m.sequence);
            w.put_u32(m.qos_class);
            w.put(&[
                m.consumed.len() as u8,
                m.released.len() as u8,
                m.returned.len() as u8,
                m.pending_demand.len() as u8,
            ]);
            put_amounts(&mut w, &m.consumed);
            put_amounts(&mut w, &m.released);
            put_amounts(&mut w, &m.returned);
            put_amounts(&mut w, &m.pending_demand);
        }
        Message::CapabilityOffer(m) => {
            w.put_u16(m.min_version);
            w.put_u16(m.max_version);
            w.put(&[m.required as u8, m.windows.len() as u8, 0, 0]);
            w.put_u32(m.max_classes);
            put_amounts(&mut w, &m.windows);
        }
        Message::CapabilityAnswer(m) => {
            w.put_u16(m.version);
            w.put(&[m.result as u8, m.caps.len() as u8]);
            w.put_u32(m.classes);
            w.put_u128(m.receiver_session);
            w.put_u64(m.epoch);
            put_amounts(&mut w, &m.caps);
        }
    }
    debug_assert!(!w.overflowed() && w.written() == len);
    Ok(len)
}

// --- runtime conversion -------------------------------------------------------

/// Known resources of a validated list as runtime totals (unknown optional
/// resources are ignored).
///
/// ```
/// use railyard_core::credit::Resource;
/// use railyard_core::wire::credit::{to_totals, Amounts, WireAmount};
/// let mut a = Amounts::new();
/// a.push(WireAmount { resource: 2, required: true, value: 8 }).unwrap();
/// a.push(WireAmount { resource: 77, required: false, value: 1 }).unwrap(); // unknown, optional
/// let t = to_totals(&a);
/// assert_eq!((t.get(Resource::RequestSlots), t.present.len()), (Some(8), 1));
/// ```
pub fn to_totals(a: &Amounts) -> Totals {
    let mut t = Totals::default();
    for x in a {
        if let Some(r) = Resource::from_code(x.resource) {
            t = t.with(r, x.value);
        }
    }
    t
}

/// Runtime totals as a wire list (every present resource, marked required).
///
/// ```
/// use railyard_core::credit::{Resource, Totals};
/// use railyard_core::wire::credit::{from_totals, to_totals};
/// let t = Totals::default().with(Resource::DataBytes, 1 << 20).with(Resource::ConsumerSlots, 4);
/// let a = from_totals(&t);
/// assert!(a.iter().all(|x| x.required));
/// assert_eq!(to_totals(&a), t);
/// ```
pub fn from_totals(t: &Totals) -> Amounts {
    let mut a = Amounts::new();
    for r in t.present.iter() {
        // Cannot fail: at most 4 known resources.
        let _ = a.push(WireAmount {
            resource: r.code(),
            required: true,
            value: t.values[r.index()],
        });
    }
    a
}

impl CreditUpdateV1 {
    /// The runtime update.
    ///
    /// ```
    /// use railyard_core::credit::{Resource, SessionId};
    /// use railyard_core::wire::credit::{CreditUpdateV1, WireAmount};
    /// let mut w = CreditUpdateV1 { receiver_session: 5, epoch: 2, sequence: 3, ..Default::default() };
    /// w.grants.push(WireAmount { resource: 1, required: true, value: 4096 }).unwrap();
    /// let u = w.to_update();
    /// assert_eq!((u.receiver_session, u.epoch, u.grants.get(Resource::DataBytes)), (SessionId(5), 2, Some(4096)));
    /// ```
    pub fn to_update(&self) -> CreditUpdate {
        CreditUpdate {
            receiver_session: SessionId(self.receiver_session),
            epoch: self.epoch,
            sequence: self.sequence,
            qos_class: self.qos_class,
            freshness_ttl_ms: self.freshness_ttl_ms,
            grants: to_totals(&self.grants),
        }
    }

    /// The wire form of a runtime update.
    ///
    /// ```
    /// use railyard_core::credit::{CreditUpdate, SessionId, Totals};
    /// use railyard_core::wire::credit::CreditUpdateV1;
    /// let u = CreditUpdate { receiver_session: SessionId::new(1, 2), epoch: 1, sequence: 9,
    ///     grants: Totals::all([4096, 1, 0, 1]), ..Default::default() };
    /// assert_eq!(CreditUpdateV1::from_update(&u).to_update(), u); // lossless for known resources
    /// ```
    pub fn from_update(u: &CreditUpdate) -> CreditUpdateV1 {
        CreditUpdateV1 {
            qos_class: u.qos_class,
            freshness_ttl_ms: u.freshness_ttl_ms,
            receiver_session: u.receiver_session.0,
            epoch: u.epoch,
            sequence: u.sequence,
            grants: from_totals(&u.grants),
        }
    }
}

impl CreditUsageV1 {
    /// The runtime usage report.
    ///
    /// ```
    /// use railyard_core::credit::Resource;
    /// use railyard_core::wire::credit::{CreditUsageV1, WireAmount};
    /// let mut w = CreditUsageV1 { receiver_session: 5, epoch: 1, sequence: 1, ..Default::default() };
    /// w.released.push(WireAmount { resource: 2, required: true, value: 3 }).unwrap();
    /// assert_eq!(w.to_usage().released.get(Resource::RequestSlots), Some(3));
    /// ```
    pub fn to_usage(&self) -> CreditUsage {
        CreditUsage {
            receiver_session: SessionId(self.receiver_session),
            epoch: self.epoch,
            sequence: self.sequence,
            qos_class: self.qos_class,
            consumed: to_totals(&self.consumed),
            released: to_totals(&self.released),
            returned: to_totals(&self.returned),
            pending_demand: to_totals(&self.pending_demand),
        }
    }

    /// The wire form of a runtime usage report.
    ///
    /// ```
    /// use railyard_core::credit::{CreditUsage, SessionId, Totals};
    /// use railyard_core::wire::credit::CreditUsageV1;
    /// let u = CreditUsage { receiver_session: SessionId(3), epoch: 1, sequence: 2,
    ///     consumed: Totals::all([8192, 2, 0, 2]), ..Default::default() };
    /// assert_eq!(CreditUsageV1::from_usage(&u).to_usage(), u);
    /// ```
    pub fn from_usage(u: &CreditUsage) -> CreditUsageV1 {
        CreditUsageV1 {
            receiver_session: u.receiver_session.0,
            epoch: u.epoch,
            sequence: u.sequence,
            qos_class: u.qos_class,
            consumed: from_totals(&u.consumed),
            released: from_totals(&u.released),
            returned: from_totals(&u.returned),
            pending_demand: from_totals(&u.pending_demand),
        }
    }
}

/// Picks the highest schema version both sides support, if any.
///
/// ```
/// use railyard_core::wire::credit::negotiate_version;
/// assert_eq!(negotiate_version((1, 3), (1, 1)), Some(1));
/// assert_eq!(negotiate_version((2, 3), (1, 1)), None);
/// ```
pub fn negotiate_version(theirs: (u16, u16), ours: (u16, u16)) -> Option<u16> {
    let lo = theirs.0.max(ours.0);
    let hi = theirs.1.min(ours.1);
    if lo <= hi && hi != 0 {
        Some(hi)
    } else {
        None
    }
}

impl CapabilityOfferV1 {
    /// The receiver's answer to this offer, given the versions it speaks
    /// and the classes it authorizes (identity and class come from policy,
    /// never from the sender's claims).
    ///
    /// ```
    /// use railyard_core::wire::credit::{Amounts, CapabilityOfferV1, NegotiationResult};
    /// let offer = CapabilityOfferV1 { min_version: 1, max_version: 3, required: true, max_classes: 4, ..Default::default() };
    /// let a = offer.answer((1, 1), 0x55, 1, 2, Amounts::new());
    /// assert_eq!((a.result, a.version, a.classes), (NegotiationResult::Accepted, 1, 2)); // policy limits classes
    /// let newer = CapabilityOfferV1 { min_version: 2, max_version: 3, ..offer.clone() };
    /// assert_eq!(newer.answer((1, 1), 0x55, 1, 2, Amounts::new()).result, NegotiationResult::Unsupported);
    /// ```
    pub fn answer(
        &self,
        ours: (u16, u16),
        session: u128,
        epoch: u64,
        authorized_classes: u32,
        caps: Amounts,
    ) -> CapabilityAnswerV1 {
        match negotiate_version((self.min_version, self.max_version), ours) {
            Some(v) => CapabilityAnswerV1 {
                version: v,
                result: NegotiationResult::Accepted,
                classes: authorized_classes.min(self.max_classes),
                receiver_session: session,
                epoch,
                caps,
            },
            None => CapabilityAnswerV1 {
                result: NegotiationResult::Unsupported,
                ..Default::default()
            },
        }
    }
}
