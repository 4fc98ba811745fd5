//! Versioned endpoint descriptors and their wire encoding.
//!
//! Two peers exchange one [`PeerDescriptor`] each over an out-of-band TCP
//! connection (`railyard_verbs::handshake` does the socket I/O) before their RC QPs can be moved to
//! RTR: each side needs the other's QP numbers, initial PSNs and GID, and the
//! address, length and rkey of every memory segment it may target.
//!
//! # Frame layout, version 2 (all integers little-endian)
//!
//! One frame carries one NIC entry per local device (rail) of the sender,
//! so two multi-NIC engines can connect rail-matched pairs (local device
//! `i` ↔ peer NIC `i`). Regions (address, length) are listed once; each NIC
//! entry carries its own rkey per region (memory is registered on every
//! device, so every device has its own keys).
//!
//! | bytes | field | notes |
//! |---|---|---|
//! | 4 | `frame_len` | length of everything after this field; at most [`MAX_FRAME_LEN`] |
//! | 4 | `magic` | [`MAGIC`] (`b"RYHS"`) |
//! | 2 | `version` | [`VERSION`] (2); any other value is [`DecodeError::UnknownVersion`] |
//! | 2 | `flags` | bit 0 = [`FLAG_REPLACES`], bit 1 = [`FLAG_CREDIT`]; every other bit is reserved and must be 0 ([`DecodeError::ReservedFlags`]) |
//! | 2 | `n_nics` | 1..=[`MAX_NICS`] |
//! | 2 | `n_segments` | 0..=[`MAX_SEGMENTS`] |
//! | 4, only with [`FLAG_REPLACES`] | `replaces_qpn` | < 2^24: see [`PeerDescriptor::replaces`] |
//! | 6, only with [`FLAG_CREDIT`] | credit capability | `min_version: u16` (≥ 1), `max_version: u16` (≥ min), `mode: u16` (bit 0 = required; other bits reserved, 0): see [`CreditCapability`] |
//! | 16 × n_segments | region | `addr: u64`, `len: u64` (> 0, `addr + len` must not overflow) |
//! | per NIC: 16 | `gid` | raw GID bytes, network order as `ibv_query_gid` returns them |
//! | 2 | `lid` | 0 on RoCE |
//! | 2 | `n_qps` | 1..=[`MAX_QPS`] |
//! | 8 × n_qps | qp | `qpn: u32`, `psn: u32`, both < 2^24 |
//! | 4 × n_segments | rkey | this NIC's rkey of each region, in region order |
//!
//! The credit capability (RFC 2849 negotiation) is optional and flagged,
//! so a peer that does not offer receiver credit sends exactly the bytes
//! it sent before the field existed, and its descriptor decodes with
//! `credit: None` (the peer is *Unsupported*). A build that predates the
//! flag refuses a descriptor that carries it ([`DecodeError::ReservedFlags`]):
//! an engine therefore only offers the capability when its credit mode is
//! not off.
//!
//! Version 1 (one NIC, rkey inline with each segment) is no longer spoken:
//! a version-1 peer gets [`DecodeError::UnknownVersion`] and the handshake
//! drops the connection.
//!
//! The decoder is strict: the length prefix must match the payload exactly
//! (no trailing bytes), and the length prefix is checked against
//! [`MAX_FRAME_LEN`] *before* anything is allocated or read, so a hostile
//! prefix cannot make the receiver allocate or wait for gigabytes. Counts
//! are checked against their limits and against the bytes present before
//! anything is allocated for them.
//!
//! A future layout change bumps [`VERSION`]; a receiver refuses versions it
//! does not know with a typed error (and the handshake drops the connection)
//! rather than guessing.

use super::cursor::{Put, Reader, Short};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Frame magic, `b"RYHS"` read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"RYHS");
/// The only descriptor version this crate speaks.
pub const VERSION: u16 = 2;
/// Flag bit: the frame carries `replaces_qpn` ([`PeerDescriptor::replaces`]).
pub const FLAG_REPLACES: u16 = 1;
/// Flag bit: the frame carries a [`CreditCapability`] ([`PeerDescriptor::credit`]).
pub const FLAG_CREDIT: u16 = 2;
/// Encoded size of the optional credit capability.
pub const CREDIT_LEN: usize = 6;
/// Credit-capability mode bit: the sender of the descriptor requires
/// receiver credit (an unsupported peer is refused, never unlimited).
pub const CREDIT_REQUIRED: u16 = 1;
/// Most QPs one NIC entry may carry.
pub const MAX_QPS: usize = 64;
/// Most memory segments (regions) one descriptor may carry.
pub const MAX_SEGMENTS: usize = 1024;
/// Most NIC entries (rails) one descriptor may carry.
pub const MAX_NICS: usize = 8;
/// Fixed part of the payload (after the length prefix).
pub const HEADER_LEN: usize = 4 + 2 + 2 + 2 + 2;
/// Encoded size of one region entry (address, length).
pub const REGION_ENTRY_LEN: usize = 16;
/// Encoded size of the optional `replaces_qpn` field.
pub const REPLACES_LEN: usize = 4;
/// Fixed part of one NIC entry (GID, LID, QP count).
pub const NIC_HEADER_LEN: usize = 16 + 2 + 2;
/// Encoded size of one QP entry.
pub const QP_ENTRY_LEN: usize = 8;
/// Encoded size of one rkey.
pub const RKEY_LEN: usize = 4;
/// Largest payload a receiver accepts (the largest valid descriptor).
pub const MAX_FRAME_LEN: usize = HEADER_LEN
    + REPLACES_LEN
    + CREDIT_LEN
    + MAX_SEGMENTS * REGION_ENTRY_LEN
    + MAX_NICS * (NIC_HEADER_LEN + MAX_QPS * QP_ENTRY_LEN + MAX_SEGMENTS * RKEY_LEN);
/// Largest PSN / QP number: both are 24-bit quantities in the BTH.
pub const MAX_24BIT: u32 = (1 << 24) - 1;

/// One RC QP as the peer needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpEndpoint {
    /// QP number (24 bits).
    pub qpn: u32,
    /// Initial packet sequence number of this QP's send queue (24 bits); the
    /// peer uses it as its receive PSN.
    pub psn: u32,
}

/// One registered memory region the peer may target with RDMA READ/WRITE,
/// with the rkey of one NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SegmentDescriptor {
    /// Virtual address of the first byte (the MR's iova).
    pub addr: u64,
    /// Length in bytes, > 0.
    pub len: u64,
    /// Remote key (of the NIC this descriptor belongs to).
    pub rkey: u32,
}

impl SegmentDescriptor {
    /// Address of byte `offset..offset + len` inside the segment, or `None`
    /// when that range does not lie fully inside it.
    ///
    /// ```
    /// use railyard_core::wire::handshake::SegmentDescriptor;
    /// let s = SegmentDescriptor { addr: 0x10000, len: 4096, rkey: 7 };
    /// assert_eq!(s.addr_of(1024, 1024), Some(0x10400));
    /// assert_eq!(s.addr_of(4000, 100), None); // past the end
    /// assert_eq!(s.addr_of(u64::MAX, 2), None); // overflow: no wrap
    /// ```
    pub fn addr_of(&self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        self.addr.checked_add(offset)
    }
}

/// One NIC of a peer: what connecting to it needs.
///
/// On its own it encodes as a one-NIC frame (a single-device peer):
///
/// ```
/// use railyard_core::wire::handshake::{DecodeError, EndpointDescriptor, QpEndpoint, SegmentDescriptor};
/// let d = EndpointDescriptor {
///     gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1],
///     lid: 0,
///     qps: vec![QpEndpoint { qpn: 0x11, psn: 0x1234 }],
///     segments: vec![SegmentDescriptor { addr: 0x7f00_0000_0000, len: 1 << 20, rkey: 0x2a }],
/// };
/// let frame = d.encode()?;
/// assert_eq!(EndpointDescriptor::decode_frame(&frame), Ok(d));
/// // A peer speaking another layout is refused, not misread.
/// let mut newer = frame.clone();
/// newer[8] = 3;
/// assert_eq!(
///     EndpointDescriptor::decode_frame(&newer),
///     Err(DecodeError::UnknownVersion { got: 3, supported: 2 })
/// );
/// # Ok::<(), railyard_core::wire::handshake::EncodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointDescriptor {
    /// Raw GID of the port the QPs use.
    pub gid: [u8; 16],
    /// LID (InfiniBand only; 0 on RoCE).
    pub lid: u16,
    /// The endpoint's RC QPs, in connection order: QP `i` here talks to QP `i`
    /// of the peer.
    pub qps: Vec<QpEndpoint>,
    /// Memory the peer may target, with this NIC's rkeys.
    pub segments: Vec<SegmentDescriptor>,
}

/// Everything one side tells the other during the handshake: one NIC entry
/// per device, in rail order. Every NIC lists the same regions (address and
/// length), each with its own rkeys.
///
/// ```
/// use railyard_core::wire::handshake::{EndpointDescriptor, PeerDescriptor, QpEndpoint, SegmentDescriptor};
/// let nic = |g: u8, rkey: u32| EndpointDescriptor {
///     gid: [g; 16],
///     lid: 0,
///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey }],
/// };
/// let d = PeerDescriptor { nics: vec![nic(1, 7), nic(2, 9)], replaces: None, credit: None };
/// let frame = d.encode()?;
/// assert_eq!(PeerDescriptor::decode_frame(&frame), Ok(d));
/// # Ok::<(), railyard_core::wire::handshake::EncodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerDescriptor {
    /// NIC `i` is the sender's device `i` (its rail `i`).
    pub nics: Vec<EndpointDescriptor>,
    /// A reconnect: the receiver's own QP number (the first QP of its
    /// rail 0) of the connection this one replaces, so the receiver can
    /// retire that stale connection instead of keeping it forever. The
    /// receiver honours it only for a connection from the same peer NIC.
    /// `None` for a first connection.
    pub replaces: Option<u32>,
    /// The receiver-credit capability the sender of the descriptor offers
    /// (RFC 2849 bootstrap negotiation); `None` = no credit capability
    /// (credit off, or a build without it): the peer is *Unsupported*.
    pub credit: Option<CreditCapability>,
}

/// The receiver-credit capability carried in a descriptor: the credit wire
/// schema versions (`railyard_core::wire::credit`) the engine speaks and
/// whether it requires credit.
///
/// ```
/// use railyard_core::wire::handshake::{CreditCapability, EndpointDescriptor, PeerDescriptor, QpEndpoint};
/// let nic = EndpointDescriptor { gid: [1; 16], lid: 0, qps: vec![QpEndpoint { qpn: 1, psn: 1 }], segments: vec![] };
/// let mut d = PeerDescriptor::from(nic);
/// d.credit = Some(CreditCapability { min_version: 1, max_version: 1, required: true });
/// let frame = d.encode()?;
/// assert_eq!(PeerDescriptor::decode_frame(&frame), Ok(d));
/// # Ok::<(), railyard_core::wire::handshake::EncodeError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CreditCapability {
    /// Lowest credit schema version spoken (≥ 1).
    pub min_version: u16,
    /// Highest credit schema version spoken (≥ `min_version`).
    pub max_version: u16,
    /// The sender runs credit in required mode.
    pub required: bool,
}

impl From<EndpointDescriptor> for PeerDescriptor {
    fn from(d: EndpointDescriptor) -> Self {
        Self {
            nics: vec![d],
            replaces: None,
            credit: None,
        }
    }
}

/// Why a descriptor could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// No QPs, or more than [`MAX_QPS`].
    QpCount(usize),
    /// More than [`MAX_SEGMENTS`] segments.
    SegmentCount(usize),
    /// No NIC entries, or more than [`MAX_NICS`] (or, for a single
    /// [`EndpointDescriptor`], a frame with other than one NIC).
    NicCount(usize),
    /// A credit capability with version 0 or `min_version > max_version`.
    BadCreditVersions {
        /// Lowest version announced.
        min: u16,
        /// Highest version announced.
        max: u16,
    },
    /// NIC `nic` lists other regions (count, address or length) than NIC 0.
    RegionMismatch {
        /// Index of the NIC.
        nic: usize,
    },
    /// A QP number or PSN does not fit in 24 bits.
    Not24Bit {
        /// Which field.
        field: &'static str,
        /// The offending value.
        value: u32,
    },
    /// A segment is empty or its end overflows u64.
    BadSegment {
        /// Index of the segment.
        index: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::QpCount(n) => write!(f, "descriptor has {n} QPs; must be 1..={MAX_QPS}"),
            Self::SegmentCount(n) => {
                write!(f, "descriptor has {n} segments; at most {MAX_SEGMENTS}")
            }
            Self::NicCount(n) => {
                write!(f, "descriptor has {n} NIC entries; must be 1..={MAX_NICS}")
            }
            Self::RegionMismatch { nic } => {
                write!(f, "NIC entry {nic} lists other regions than NIC entry 0")
            }
            Self::BadCreditVersions { min, max } => write!(
                f,
                "credit capability versions {min}..={max}: must be 1 <= min <= max"
            ),
            Self::Not24Bit { field, value } => {
                write!(f, "{field} {value:#x} does not fit in 24 bits")
            }
            Self::BadSegment { index } => {
                write!(f, "segment {index} is empty or its end overflows u64")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EncodeError {}

/// Why received bytes are not a valid descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The length prefix announces more than [`MAX_FRAME_LEN`] bytes.
    Oversized {
        /// Announced payload length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// The payload ends before the fields it announces.
    Truncated {
        /// Bytes needed so far.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// The payload is longer than the fields it announces.
    TrailingBytes {
        /// Extra bytes.
        extra: usize,
    },
    /// Not a railyard handshake frame.
    BadMagic(u32),
    /// A descriptor version this build does not speak.
    UnknownVersion {
        /// Version found.
        got: u16,
        /// Version supported.
        supported: u16,
    },
    /// Reserved flags set.
    ReservedFlags(u16),
    /// Field values out of range (counts, 24-bit values, empty segments).
    Invalid(EncodeError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Oversized { len, max } => {
                write!(
                    f,
                    "descriptor frame of {len} bytes exceeds the {max}-byte limit"
                )
            }
            Self::Truncated { needed, got } => {
                write!(f, "descriptor truncated: needs {needed} bytes, got {got}")
            }
            Self::TrailingBytes { extra } => {
                write!(f, "descriptor has {extra} unexpected trailing bytes")
            }
            Self::BadMagic(m) => write!(f, "bad handshake magic {m:#010x}"),
            Self::UnknownVersion { got, supported } => write!(
                f,
                "unknown descriptor version {got} (this build speaks version {supported})"
            ),
            Self::ReservedFlags(x) => write!(f, "reserved descriptor flags set: {x:#06x}"),
            Self::Invalid(e) => write!(f, "invalid descriptor: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for DecodeError {}

fn check(qps: &[QpEndpoint], segments: &[SegmentDescriptor]) -> Result<(), EncodeError> {
    if qps.is_empty() || qps.len() > MAX_QPS {
        return Err(EncodeError::QpCount(qps.len()));
    }
    if segments.len() > MAX_SEGMENTS {
        return Err(EncodeError::SegmentCount(segments.len()));
    }
    for q in qps {
        if q.qpn > MAX_24BIT {
            return Err(EncodeError::Not24Bit {
                field: "qpn",
                value: q.qpn,
            });
        }
        if q.psn > MAX_24BIT {
            return Err(EncodeError::Not24Bit {
                field: "psn",
                value: q.psn,
            });
        }
    }
    for (index, s) in segments.iter().enumerate() {
        if s.len == 0 || s.addr.checked_add(s.len).is_none() {
            return Err(EncodeError::BadSegment { index });
        }
    }
    Ok(())
}

impl EndpointDescriptor {
    /// Payload length (without the 4-byte length prefix) of its one-NIC frame.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let d = EndpointDescriptor {
    ///     gid: [7; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: 0x21, psn: 0x99 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: 3 }],
    /// };
    /// let frame = d.encode().unwrap();
    /// assert_eq!(frame.len(), 4 + d.payload_len()); // the prefix plus the payload
    /// ```
    pub fn payload_len(&self) -> usize {
        HEADER_LEN
            + self.segments.len() * REGION_ENTRY_LEN
            + NIC_HEADER_LEN
            + self.qps.len() * QP_ENTRY_LEN
            + self.segments.len() * RKEY_LEN
    }

    /// Checks the field ranges the wire format requires.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let d = EndpointDescriptor {
    ///     gid: [7; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: 0x21, psn: 0x99 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: 3 }],
    /// };
    /// assert_eq!(d.validate(), Ok(()));
    /// let bad = EndpointDescriptor { qps: vec![QpEndpoint { qpn: 1 << 24, psn: 0 }], ..d.clone() };
    /// assert_eq!(bad.validate(), Err(EncodeError::Not24Bit { field: "qpn", value: 1 << 24 }));
    /// let none = EndpointDescriptor { qps: vec![], ..d };
    /// assert_eq!(none.validate(), Err(EncodeError::QpCount(0)));
    /// ```
    pub fn validate(&self) -> Result<(), EncodeError> {
        check(&self.qps, &self.segments)
    }

    /// Encodes the descriptor as one length-prefixed one-NIC frame appended
    /// to `out`.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let d = EndpointDescriptor {
    ///     gid: [7; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: 0x21, psn: 0x99 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: 3 }],
    /// };
    /// let mut out = b"prefix".to_vec();
    /// d.encode_into(&mut out).unwrap(); // appended
    /// assert_eq!(EndpointDescriptor::decode_frame(&out[6..]), Ok(d));
    /// ```
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode_nics(core::slice::from_ref(self), None, None, out)
    }

    /// Encodes the descriptor as one length-prefixed one-NIC frame.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let d = EndpointDescriptor {
    ///     gid: [7; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: 0x21, psn: 0x99 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: 3 }],
    /// };
    /// let frame = d.encode().unwrap();
    /// assert_eq!(&frame[4..8], b"RYHS"); // after the length prefix, the magic
    /// ```
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::new();
        self.encode_into(&mut v)?;
        Ok(v)
    }

    /// Decodes one whole frame (length prefix included) that must carry
    /// exactly one NIC entry.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let d = EndpointDescriptor {
    ///     gid: [7; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: 0x21, psn: 0x99 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: 3 }],
    /// };
    /// let frame = d.encode().unwrap();
    /// assert_eq!(EndpointDescriptor::decode_frame(&frame), Ok(d.clone()));
    /// // A two-NIC frame is not a single endpoint: refused, not truncated to one.
    /// let two = PeerDescriptor { nics: vec![d.clone(), EndpointDescriptor { gid: [8; 16], ..d }], replaces: None, credit: None };
    /// assert!(EndpointDescriptor::decode_frame(&two.encode().unwrap()).is_err());
    /// ```
    pub fn decode_frame(frame: &[u8]) -> Result<Self, DecodeError> {
        Self::single(PeerDescriptor::decode_frame(frame)?)
    }

    /// Decodes a payload (the bytes after the length prefix) that must
    /// carry exactly one NIC entry.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let d = EndpointDescriptor {
    ///     gid: [7; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: 0x21, psn: 0x99 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: 3 }],
    /// };
    /// let frame = d.encode().unwrap();
    /// assert_eq!(EndpointDescriptor::decode_payload(&frame[4..]), Ok(d)); // the socket read the prefix
    /// ```
    pub fn decode_payload(p: &[u8]) -> Result<Self, DecodeError> {
        Self::single(PeerDescriptor::decode_payload(p)?)
    }

    fn single(mut d: PeerDescriptor) -> Result<Self, DecodeError> {
        if d.replaces.is_some() {
            // This one-NIC form has no place for it: refuse, never drop it.
            return Err(DecodeError::ReservedFlags(FLAG_REPLACES));
        }
        if d.credit.is_some() {
            return Err(DecodeError::ReservedFlags(FLAG_CREDIT));
        }
        if d.nics.len() != 1 {
            return Err(DecodeError::Invalid(EncodeError::NicCount(d.nics.len())));
        }
        Ok(d.nics.remove(0))
    }
}

fn validate_nics(nics: &[EndpointDescriptor]) -> Result<(), EncodeError> {
    if nics.is_empty() || nics.len() > MAX_NICS {
        return Err(EncodeError::NicCount(nics.len()));
    }
    let first = &nics[0].segments;
    for (i, n) in nics.iter().enumerate() {
        check(&n.qps, &n.segments)?;
        if n.segments.len() != first.len()
            || n.segments
                .iter()
                .zip(first)
                .any(|(a, b)| (a.addr, a.len) != (b.addr, b.len))
        {
            return Err(EncodeError::RegionMismatch { nic: i });
        }
    }
    Ok(())
}

fn payload_len_of(
    nics: &[EndpointDescriptor],
    replaces: Option<u32>,
    credit: Option<CreditCapability>,
) -> usize {
    let nseg = nics.first().map_or(0, |n| n.segments.len());
    HEADER_LEN
        + replaces.map_or(0, |_| REPLACES_LEN)
        + credit.map_or(0, |_| CREDIT_LEN)
        + nseg * REGION_ENTRY_LEN
        + nics
            .iter()
            .map(|n| NIC_HEADER_LEN + n.qps.len() * QP_ENTRY_LEN + nseg * RKEY_LEN)
            .sum::<usize>()
}

fn encode_nics(
    nics: &[EndpointDescriptor],
    replaces: Option<u32>,
    credit: Option<CreditCapability>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    validate_nics(nics)?;
    if let Some(c) = credit {
        check_credit(c)?;
    }
    if let Some(q) = replaces {
        if q >= 1 << 24 {
            return Err(EncodeError::Not24Bit {
                field: "replaces_qpn",
                value: q,
            });
        }
    }
    let payload = payload_len_of(nics, replaces, credit);
    debug_assert!(payload <= MAX_FRAME_LEN);
    let regions = &nics[0].segments;
    out.reserve(4 + payload);
    // Lossless: validation bounds the payload by MAX_FRAME_LEN (< 2^32) and
    // the counts by MAX_NICS / MAX_SEGMENTS / MAX_QPS.
    out.put_u32(payload as u32);
    out.put_u32(MAGIC);
    out.put_u16(VERSION);
    let flags = if replaces.is_some() { FLAG_REPLACES } else { 0 }
        | if credit.is_some() { FLAG_CREDIT } else { 0 };
    out.put_u16(flags);
    out.put_u16(nics.len() as u16);
    out.put_u16(regions.len() as u16);
    if let Some(q) = replaces {
        out.put_u32(q);
    }
    if let Some(c) = credit {
        out.put_u16(c.min_version);
        out.put_u16(c.max_version);
        out.put_u16(if c.required { CREDIT_REQUIRED } else { 0 });
    }
    for s in regions {
        out.put_u64(s.addr);
        out.put_u64(s.len);
    }
    for n in nics {
        out.put(&n.gid);
        out.put_u16(n.lid);
        out.put_u16(n.qps.len() as u16);
        for q in &n.qps {
            out.put_u32(q.qpn);
            out.put_u32(q.psn);
        }
        for s in &n.segments {
            out.put_u32(s.rkey);
        }
    }
    Ok(())
}

impl PeerDescriptor {
    /// Payload length (without the 4-byte length prefix) of the encoding.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let nic = |g: u8| EndpointDescriptor {
    ///     gid: [g; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: u32::from(g) }],
    /// };
    /// let d = PeerDescriptor { nics: vec![nic(1), nic(2)], replaces: Some(0x33), credit: None };
    /// assert_eq!(d.encode().unwrap().len(), 4 + d.payload_len());
    /// ```
    pub fn payload_len(&self) -> usize {
        payload_len_of(&self.nics, self.replaces, self.credit)
    }

    /// Checks the field ranges and the cross-NIC rules the wire format
    /// requires (1..=[`MAX_NICS`] NICs, all listing the same regions).
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let nic = |g: u8| EndpointDescriptor {
    ///     gid: [g; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: u32::from(g) }],
    /// };
    /// let mut other = nic(2);
    /// other.segments[0].len = 8192; // NIC 1 lists another region than NIC 0
    /// let d = PeerDescriptor { nics: vec![nic(1), other], replaces: None, credit: None };
    /// assert_eq!(d.validate(), Err(EncodeError::RegionMismatch { nic: 1 }));
    /// assert_eq!(PeerDescriptor { nics: vec![], replaces: None, credit: None }.validate(), Err(EncodeError::NicCount(0)));
    /// ```
    pub fn validate(&self) -> Result<(), EncodeError> {
        validate_nics(&self.nics)
    }

    /// Encodes the descriptor as one length-prefixed frame appended to `out`.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let nic = |g: u8| EndpointDescriptor {
    ///     gid: [g; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: u32::from(g) }],
    /// };
    /// let d = PeerDescriptor::from(nic(1));
    /// let mut out = Vec::new();
    /// d.encode_into(&mut out).unwrap();
    /// d.encode_into(&mut out).unwrap(); // two frames back to back
    /// let n = 4 + frame_len(&out).unwrap();
    /// assert_eq!(PeerDescriptor::decode_frame(&out[n..]), Ok(d));
    /// ```
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        encode_nics(&self.nics, self.replaces, self.credit, out)
    }

    /// Encodes the descriptor as one length-prefixed frame.
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let nic = |g: u8| EndpointDescriptor {
    ///     gid: [g; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: u32::from(g) }],
    /// };
    /// let bad = PeerDescriptor { credit: Some(CreditCapability { min_version: 2, max_version: 1, required: false }), ..PeerDescriptor::from(nic(1)) };
    /// assert_eq!(bad.encode(), Err(EncodeError::BadCreditVersions { min: 2, max: 1 }));
    /// ```
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut v = Vec::new();
        self.encode_into(&mut v)?;
        Ok(v)
    }

    /// Decodes one whole frame (length prefix included).
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let nic = |g: u8| EndpointDescriptor {
    ///     gid: [g; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: u32::from(g) }],
    /// };
    /// let d = PeerDescriptor { nics: vec![nic(1), nic(2)], replaces: Some(9), credit: None };
    /// let mut frame = d.encode().unwrap();
    /// assert_eq!(PeerDescriptor::decode_frame(&frame), Ok(d));
    /// frame.push(0); // one byte more than the prefix announces
    /// assert_eq!(PeerDescriptor::decode_frame(&frame), Err(DecodeError::TrailingBytes { extra: 1 }));
    /// assert!(matches!(PeerDescriptor::decode_frame(&frame[..10]), Err(DecodeError::Truncated { .. })));
    /// ```
    pub fn decode_frame(frame: &[u8]) -> Result<Self, DecodeError> {
        let len = frame_len(frame)?;
        let body = &frame[4..];
        if body.len() < len {
            return Err(DecodeError::Truncated {
                needed: 4 + len,
                got: frame.len(),
            });
        }
        if body.len() > len {
            return Err(DecodeError::TrailingBytes {
                extra: body.len() - len,
            });
        }
        Self::decode_payload(body)
    }

    /// Decodes a payload (the bytes after the length prefix).
    ///
    /// ```
    /// use railyard_core::wire::handshake::*;
    /// let nic = |g: u8| EndpointDescriptor {
    ///     gid: [g; 16],
    ///     lid: 0,
    ///     qps: vec![QpEndpoint { qpn: u32::from(g), psn: 1 }],
    ///     segments: vec![SegmentDescriptor { addr: 0x1000, len: 4096, rkey: u32::from(g) }],
    /// };
    /// let d = PeerDescriptor::from(nic(3));
    /// let frame = d.encode().unwrap();
    /// assert_eq!(PeerDescriptor::decode_payload(&frame[4..]), Ok(d));
    /// assert!(matches!(PeerDescriptor::decode_payload(b"GET / HTTP/1.1\r\n"), Err(DecodeError::BadMagic(_))));
    /// ```
    pub fn decode_payload(p: &[u8]) -> Result<Self, DecodeError> {
        if p.len() > MAX_FRAME_LEN {
            return Err(DecodeError::Oversized {
                len: p.len() as u64,
                max: MAX_FRAME_LEN,
            });
        }
        let mut r = Reader::new(p);
        let magic = r.u32()?;
        if magic != MAGIC {
            return Err(DecodeError::BadMagic(magic));
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(DecodeError::UnknownVersion {
                got: version,
                supported: VERSION,
            });
        }
        let flags = r.u16()?;
        if flags & !(FLAG_REPLACES | FLAG_CREDIT) != 0 {
            return Err(DecodeError::ReservedFlags(flags));
        }
        let n_nics = usize::from(r.u16()?);
        let n_segments = usize::from(r.u16()?);
        let replaces = if flags & FLAG_REPLACES != 0 {
            let q = r.u32()?;
            if q >= 1 << 24 {
                return Err(DecodeError::Invalid(EncodeError::Not24Bit {
                    field: "replaces_qpn",
                    value: q,
                }));
            }
            Some(q)
        } else {
            None
        };
        let credit = if flags & FLAG_CREDIT != 0 {
            let (min_version, max_version, mode) = (r.u16()?, r.u16()?, r.u16()?);
            if mode & !CREDIT_REQUIRED != 0 {
                return Err(DecodeError::ReservedFlags(mode));
            }
            let c = CreditCapability {
                min_version,
                max_version,
                required: mode & CREDIT_REQUIRED != 0,
            };
            check_credit(c).map_err(DecodeError::Invalid)?;
            Some(c)
        } else {
            None
        };
        if n_nics == 0 || n_nics > MAX_NICS {
            return Err(DecodeError::Invalid(EncodeError::NicCount(n_nics)));
        }
        if n_segments > MAX_SEGMENTS {
            return Err(DecodeError::Invalid(EncodeError::SegmentCount(n_segments)));
        }
        // The smallest payload these counts allow (one QP per NIC), checked
        // before allocating for them.
        let least = HEADER_LEN
            + replaces.map_or(0, |_| REPLACES_LEN)
            + credit.map_or(0, |_| CREDIT_LEN)
            + n_segments * REGION_ENTRY_LEN
            + n_nics * (NIC_HEADER_LEN + QP_ENTRY_LEN + n_segments * RKEY_LEN);
        if p.len() < least {
            return Err(DecodeError::Truncated {
                needed: least,
                got: p.len(),
            });
        }
        let mut regions = Vec::with_capacity(n_segments);
        for _ in 0..n_segments {
            regions.push((r.u64()?, r.u64()?));
        }
        let mut nics = Vec::with_capacity(n_nics);
        for _ in 0..n_nics {
            let gid: [u8; 16] = r.array()?;
            let lid = r.u16()?;
            let n_qps = usize::from(r.u16()?);
            if n_qps == 0 || n_qps > MAX_QPS {
                return Err(DecodeError::Invalid(EncodeError::QpCount(n_qps)));
            }
            let need = r.pos() + n_qps * QP_ENTRY_LEN + n_segments * RKEY_LEN;
            if p.len() < need {
                return Err(DecodeError::Truncated {
                    needed: need,
                    got: p.len(),
                });
            }
            let mut qps = Vec::with_capacity(n_qps);
            for _ in 0..n_qps {
                qps.push(QpEndpoint {
                    qpn: r.u32()?,
                    psn: r.u32()?,
                });
            }
            let mut segments = Vec::with_capacity(n_segments);
            for &(addr, len) in &regions {
                segments.push(SegmentDescriptor {
                    addr,
                    len,
                    rkey: r.u32()?,
                });
            }
            nics.push(EndpointDescriptor {
                gid,
                lid,
                qps,
                segments,
            });
        }
        if r.remaining() > 0 {
            return Err(DecodeError::TrailingBytes {
                extra: r.remaining(),
            });
        }
        validate_nics(&nics).map_err(DecodeError::Invalid)?;
        Ok(Self {
            nics,
            replaces,
            credit,
        })
    }
}

fn check_credit(c: CreditCapability) -> Result<(), EncodeError> {
    if c.min_version == 0 || c.min_version > c.max_version {
        return Err(EncodeError::BadCreditVersions {
            min: c.min_version,
            max: c.max_version,
        });
    }
    Ok(())
}

/// Reads and bounds-checks the 4-byte length prefix at the start of `frame`.
///
/// ```
/// use railyard_core::wire::handshake::{frame_len, DecodeError, MAX_FRAME_LEN};
/// assert_eq!(frame_len(&[16, 0, 0, 0, 0xAA]), Ok(16));
/// assert!(matches!(frame_len(&[1, 2]), Err(DecodeError::Truncated { needed: 4, got: 2 })));
/// // A hostile prefix is refused before anything is read or allocated.
/// assert!(matches!(frame_len(&u32::MAX.to_le_bytes()), Err(DecodeError::Oversized { max: MAX_FRAME_LEN, .. })));
/// ```
pub fn frame_len(frame: &[u8]) -> Result<usize, DecodeError> {
    let Some(prefix) = frame.get(..4) else {
        return Err(DecodeError::Truncated {
            needed: 4,
            got: frame.len(),
        });
    };
    let mut b = [0u8; 4];
    b.copy_from_slice(prefix);
    check_len(u32::from_le_bytes(b))
}

/// Checks a decoded length prefix against [`MAX_FRAME_LEN`].
///
/// ```
/// use railyard_core::wire::handshake::{check_len, MAX_FRAME_LEN};
/// assert_eq!(check_len(MAX_FRAME_LEN as u32), Ok(MAX_FRAME_LEN));
/// assert!(check_len(MAX_FRAME_LEN as u32 + 1).is_err());
/// ```
pub fn check_len(len: u32) -> Result<usize, DecodeError> {
    let len_usize = usize::try_from(len).unwrap_or(usize::MAX);
    if len_usize > MAX_FRAME_LEN {
        return Err(DecodeError::Oversized {
            len: u64::from(len),
            max: MAX_FRAME_LEN,
        });
    }
    Ok(len_usize)
}

impl From<Short> for DecodeError {
    fn from(s: Short) -> Self {
        DecodeError::Truncated {
            needed: s.need,
            got: s.have,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> EndpointDescriptor {
        EndpointDescriptor {
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 1, 1],
            lid: 0,
            qps: vec![
                QpEndpoint {
                    qpn: 0x11,
                    psn: 0x9274e9,
                },
                QpEndpoint { qpn: 0x12, psn: 7 },
            ],
            segments: vec![SegmentDescriptor {
                addr: 0x5625_e06a_c000,
                len: 1 << 20,
                rkey: 0x26b,
            }],
        }
    }

    /// RFC 2849 negotiation: the credit capability is flagged and
    /// optional; a descriptor without it is byte-identical to the layout
    /// before the field existed and decodes as "no capability".
    #[test]
    fn credit_capability_is_optional_and_checked() {
        let plain = PeerDescriptor::from(sample());
        let old = plain.encode().unwrap();
        assert_eq!(&old[10..12], &[0, 0], "no credit, no flag: the old bytes");
        assert_eq!(PeerDescriptor::decode_frame(&old).unwrap().credit, None);
        let cap = CreditCapability {
            min_version: 1,
            max_version: 3,
            required: true,
        };
        let d = PeerDescriptor {
            credit: Some(cap),
            ..plain.clone()
        };
        let f = d.encode().unwrap();
        assert_eq!(f.len(), old.len() + CREDIT_LEN);
        assert_eq!(&f[10..12], &FLAG_CREDIT.to_le_bytes());
        assert_eq!(&f[16..22], &[1, 0, 3, 0, 1, 0]);
        assert_eq!(PeerDescriptor::decode_frame(&f).unwrap(), d);
        // Reserved mode bits, version 0 and min > max are refused.
        let mut bad = f.clone();
        bad[20] = 2;
        assert_eq!(
            PeerDescriptor::decode_frame(&bad),
            Err(DecodeError::ReservedFlags(2))
        );
        for (lo, hi) in [(0u16, 1u16), (3, 2)] {
            let mut bad = f.clone();
            bad[16..18].copy_from_slice(&lo.to_le_bytes());
            bad[18..20].copy_from_slice(&hi.to_le_bytes());
            assert_eq!(
                PeerDescriptor::decode_frame(&bad),
                Err(DecodeError::Invalid(EncodeError::BadCreditVersions {
                    min: lo,
                    max: hi
                }))
            );
            let mut e = d.clone();
            e.credit = Some(CreditCapability {
                min_version: lo,
                max_version: hi,
                required: false,
            });
            assert!(e.encode().is_err());
        }
        // The one-NIC form has no place for it.
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::ReservedFlags(FLAG_CREDIT))
        );
        // Truncated inside the capability.
        let mut short = f[..20].to_vec();
        short[..4].copy_from_slice(&16u32.to_le_bytes());
        assert!(PeerDescriptor::decode_frame(&short).is_err());
    }

    #[test]
    fn round_trip_and_exact_layout() {
        let d = sample();
        let f = d.encode().unwrap();
        assert_eq!(f.len(), 4 + d.payload_len());
        assert_eq!(&f[..4], &(d.payload_len() as u32).to_le_bytes());
        assert_eq!(&f[4..8], b"RYHS");
        assert_eq!(&f[8..10], &[2, 0]); // version 2, little-endian
        assert_eq!(&f[10..12], &[0, 0]);
        assert_eq!(&f[12..14], &[1, 0]); // one NIC
        assert_eq!(&f[14..16], &[1, 0]); // one region
        assert_eq!(&f[16..24], &0x5625_e06a_c000u64.to_le_bytes());
        // the NIC entry right after the regions: GID, LID, QP count, QPs
        let nic = 4 + HEADER_LEN + REGION_ENTRY_LEN;
        assert_eq!(&f[nic..nic + 16], &d.gid);
        assert_eq!(&f[nic + 18..nic + 20], &[2, 0]);
        assert_eq!(&f[nic + 20..nic + 24], &0x11u32.to_le_bytes());
        // the rkeys close the NIC entry
        assert_eq!(&f[f.len() - 4..], &0x26bu32.to_le_bytes());
        assert_eq!(EndpointDescriptor::decode_frame(&f).unwrap(), d);
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let f = sample().encode().unwrap();
        for cut in 0..f.len() {
            let e = EndpointDescriptor::decode_frame(&f[..cut]).unwrap_err();
            assert!(
                matches!(e, DecodeError::Truncated { .. }),
                "cut {cut}: {e:?}"
            );
            // A consistent prefix with a short payload is also caught.
            if cut >= 4 {
                let body = &f[4..cut];
                let e = EndpointDescriptor::decode_payload(body).unwrap_err();
                assert!(
                    matches!(e, DecodeError::Truncated { .. }),
                    "payload cut {cut}: {e:?}"
                );
            }
        }
    }

    #[test]
    fn oversized_prefix_is_refused_before_reading() {
        let mut f = vec![0u8; 4];
        f[..4].copy_from_slice(&(MAX_FRAME_LEN as u32 + 1).to_le_bytes());
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Oversized {
                len: MAX_FRAME_LEN as u64 + 1,
                max: MAX_FRAME_LEN
            })
        );
        assert!(matches!(
            check_len(u32::MAX),
            Err(DecodeError::Oversized { .. })
        ));
        assert_eq!(check_len(MAX_FRAME_LEN as u32), Ok(MAX_FRAME_LEN));
        let e = EndpointDescriptor::decode_payload(&vec![0; MAX_FRAME_LEN + 1]).unwrap_err();
        assert!(matches!(e, DecodeError::Oversized { .. }));
    }

    #[test]
    fn unknown_version_bad_magic_flags_and_trailing() {
        let f = sample().encode().unwrap();
        let mut v = f.clone();
        // Version 1 (the single-NIC layout) and future versions are refused.
        for got in [1u16, 3] {
            v[8..10].copy_from_slice(&got.to_le_bytes());
            assert_eq!(
                EndpointDescriptor::decode_frame(&v),
                Err(DecodeError::UnknownVersion { got, supported: 2 })
            );
        }
        let mut m = f.clone();
        m[4] ^= 0xff;
        assert!(matches!(
            EndpointDescriptor::decode_frame(&m),
            Err(DecodeError::BadMagic(_))
        ));
        let mut fl = f.clone();
        fl[10] = 4; // bit 0 is FLAG_REPLACES, bit 1 FLAG_CREDIT; bit 2 is reserved
        assert_eq!(
            EndpointDescriptor::decode_frame(&fl),
            Err(DecodeError::ReservedFlags(4))
        );
        let mut t = f.clone();
        t.push(0);
        assert_eq!(
            EndpointDescriptor::decode_frame(&t),
            Err(DecodeError::TrailingBytes { extra: 1 })
        );
        // Prefix and payload agree, but the payload is longer than its counts say.
        let mut t2 = f[4..].to_vec();
        t2.extend_from_slice(&[0; 3]);
        assert_eq!(
            EndpointDescriptor::decode_payload(&t2),
            Err(DecodeError::TrailingBytes { extra: 3 })
        );
    }

    #[test]
    fn out_of_range_fields() {
        let mut d = sample();
        d.qps[0].psn = 1 << 24;
        assert_eq!(
            d.encode(),
            Err(EncodeError::Not24Bit {
                field: "psn",
                value: 1 << 24
            })
        );
        // The decoder refuses the same value when a buggy peer sends it.
        let mut f = sample().encode().unwrap();
        let at = 4 + HEADER_LEN + REGION_ENTRY_LEN + NIC_HEADER_LEN + 4;
        f[at..at + 4].copy_from_slice(&(1u32 << 24).to_le_bytes());
        assert!(matches!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Invalid(EncodeError::Not24Bit {
                field: "psn",
                ..
            }))
        ));

        let mut d = sample();
        d.qps.clear();
        assert_eq!(d.encode(), Err(EncodeError::QpCount(0)));
        let mut d = sample();
        d.qps = vec![QpEndpoint { qpn: 1, psn: 1 }; MAX_QPS + 1];
        assert_eq!(d.encode(), Err(EncodeError::QpCount(MAX_QPS + 1)));
        let mut d = sample();
        d.segments[0].len = 0;
        assert_eq!(d.encode(), Err(EncodeError::BadSegment { index: 0 }));
        let mut d = sample();
        d.segments[0].addr = u64::MAX;
        assert_eq!(d.encode(), Err(EncodeError::BadSegment { index: 0 }));

        // Count fields larger than the limits are refused before allocation.
        let mut f = sample().encode().unwrap();
        let nqps = 4 + HEADER_LEN + REGION_ENTRY_LEN + 18;
        f[nqps..nqps + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Invalid(EncodeError::QpCount(
                u16::MAX as usize
            )))
        );
        let mut f = sample().encode().unwrap();
        f[12..14].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Invalid(EncodeError::NicCount(
                u16::MAX as usize
            )))
        );
        f[12..14].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Invalid(EncodeError::NicCount(0)))
        );
        let mut f = sample().encode().unwrap();
        f[14..16].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Invalid(EncodeError::SegmentCount(
                u16::MAX as usize
            )))
        );
        // Counts within limits but larger than the payload: truncated, not a panic.
        let mut f = sample().encode().unwrap();
        f[14..16].copy_from_slice(&5u16.to_le_bytes());
        assert!(matches!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn largest_descriptor_fits_the_limit() {
        let d = EndpointDescriptor {
            gid: [1; 16],
            lid: 3,
            qps: vec![
                QpEndpoint {
                    qpn: MAX_24BIT,
                    psn: MAX_24BIT
                };
                MAX_QPS
            ],
            segments: vec![
                SegmentDescriptor {
                    addr: 0,
                    len: u64::MAX,
                    rkey: 9
                };
                MAX_SEGMENTS
            ],
        };
        let one = d.encode().unwrap();
        assert_eq!(EndpointDescriptor::decode_frame(&one).unwrap(), d);
        let all = PeerDescriptor {
            nics: vec![d; MAX_NICS],
            replaces: Some(MAX_24BIT),
            credit: Some(CreditCapability {
                min_version: 1,
                max_version: u16::MAX,
                required: true,
            }),
        };
        let f = all.encode().unwrap();
        assert_eq!(f.len(), 4 + MAX_FRAME_LEN);
        assert_eq!(PeerDescriptor::decode_frame(&f).unwrap(), all);
        // One NIC too many is refused on both sides.
        let mut over = all.clone();
        over.nics.push(over.nics[0].clone());
        assert_eq!(over.encode(), Err(EncodeError::NicCount(MAX_NICS + 1)));
    }

    #[test]
    fn replaces_round_trips_and_is_strict() {
        let d = PeerDescriptor {
            nics: vec![sample()],
            replaces: Some(0x12_3456),
            credit: None,
        };
        let f = d.encode().unwrap();
        assert_eq!(f.len(), 4 + d.payload_len());
        assert_eq!(
            f.len(),
            4 + PeerDescriptor::from(sample()).payload_len() + REPLACES_LEN
        );
        assert_eq!(PeerDescriptor::decode_frame(&f).unwrap(), d);
        // The flag is bit 0 of the flags field (bytes 10..12 of the frame).
        assert_eq!(u16::from_le_bytes([f[10], f[11]]), FLAG_REPLACES);
        // The one-NIC form cannot carry it: refused, not dropped.
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::ReservedFlags(FLAG_REPLACES))
        );
        // A QP number beyond 24 bits, on either side.
        let bad = PeerDescriptor {
            replaces: Some(1 << 24),
            credit: None,
            ..d.clone()
        };
        assert!(matches!(
            bad.encode(),
            Err(EncodeError::Not24Bit {
                field: "replaces_qpn",
                ..
            })
        ));
        let mut g = f.clone();
        g[16..20].copy_from_slice(&(1u32 << 24).to_le_bytes());
        assert!(matches!(
            PeerDescriptor::decode_frame(&g),
            Err(DecodeError::Invalid(EncodeError::Not24Bit {
                field: "replaces_qpn",
                ..
            }))
        ));
        // Any other flag bit is still reserved.
        let mut h = f.clone();
        h[10..12].copy_from_slice(&(FLAG_REPLACES | 4).to_le_bytes());
        assert_eq!(
            PeerDescriptor::decode_frame(&h),
            Err(DecodeError::ReservedFlags(FLAG_REPLACES | 4))
        );
        // Without the flag the field is absent: a flagless frame is 4 bytes
        // shorter and decodes to `None`.
        let plain = PeerDescriptor::from(sample()).encode().unwrap();
        assert_eq!(plain.len() + REPLACES_LEN, f.len());
        assert_eq!(PeerDescriptor::decode_frame(&plain).unwrap().replaces, None);
    }

    #[test]
    fn several_nics_carry_their_own_gid_qps_and_rkeys() {
        let mut b = sample();
        b.gid = [9; 16];
        b.qps = vec![QpEndpoint { qpn: 0x99, psn: 3 }];
        b.segments[0].rkey = 0x777;
        let d = PeerDescriptor {
            nics: vec![sample(), b.clone()],
            replaces: None,
            credit: None,
        };
        let f = d.encode().unwrap();
        assert_eq!(f.len(), 4 + d.payload_len());
        let back = PeerDescriptor::decode_frame(&f).unwrap();
        assert_eq!(back, d);
        assert_eq!(back.nics[1].segments[0].rkey, 0x777);
        assert_eq!(back.nics[1].segments[0].addr, sample().segments[0].addr);
        // A single-NIC reader refuses a two-NIC frame with a typed error.
        assert_eq!(
            EndpointDescriptor::decode_frame(&f),
            Err(DecodeError::Invalid(EncodeError::NicCount(2)))
        );
        // NICs must list the same regions.
        let mut bad = d.clone();
        bad.nics[1].segments[0].len += 1;
        assert_eq!(bad.encode(), Err(EncodeError::RegionMismatch { nic: 1 }));
        let mut bad = d.clone();
        bad.nics[1].segments.clear();
        assert_eq!(bad.encode(), Err(EncodeError::RegionMismatch { nic: 1 }));
        // Every truncation of a two-NIC frame is a typed error.
        for cut in 0..f.len() {
            assert!(matches!(
                PeerDescriptor::decode_frame(&f[..cut]),
                Err(DecodeError::Truncated { .. })
            ));
        }
        let mut t = f.clone();
        t.push(1);
        assert_eq!(
            PeerDescriptor::decode_frame(&t),
            Err(DecodeError::TrailingBytes { extra: 1 })
        );
    }

    #[test]
    fn segment_addr_of_bounds() {
        let s = SegmentDescriptor {
            addr: 1000,
            len: 100,
            rkey: 1,
        };
        assert_eq!(s.addr_of(0, 100), Some(1000));
        assert_eq!(s.addr_of(99, 1), Some(1099));
        assert_eq!(s.addr_of(99, 2), None);
        assert_eq!(s.addr_of(u64::MAX, 2), None);
    }

    fn arb_desc() -> impl Strategy<Value = EndpointDescriptor> {
        (
            any::<[u8; 16]>(),
            any::<u16>(),
            prop::collection::vec((0..=MAX_24BIT, 0..=MAX_24BIT), 1..=MAX_QPS),
            prop::collection::vec((any::<u32>(), 1..=u32::MAX as u64, any::<u32>()), 0..40),
        )
            .prop_map(|(gid, lid, qps, segs)| EndpointDescriptor {
                gid,
                lid,
                qps: qps
                    .into_iter()
                    .map(|(qpn, psn)| QpEndpoint { qpn, psn })
                    .collect(),
                segments: segs
                    .into_iter()
                    .map(|(a, len, rkey)| SegmentDescriptor {
                        addr: u64::from(a),
                        len,
                        rkey,
                    })
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn prop_round_trip(d in arb_desc()) {
            let f = d.encode().unwrap();
            prop_assert_eq!(EndpointDescriptor::decode_frame(&f).unwrap(), d);
        }

        #[test]
        fn prop_multi_nic_round_trip(
            d in arb_desc(),
            n in 1usize..=MAX_NICS,
            salt in any::<u32>(),
            replaces in prop::option::of(0u32..=MAX_24BIT),
            credit in prop::option::of((1u16..8, 0u16..8, any::<bool>())),
        ) {
            // Every NIC lists the same regions with its own GID, QPs and rkeys.
            let nics: Vec<EndpointDescriptor> = (0..n)
                .map(|i| {
                    let mut x = d.clone();
                    x.gid[0] = i as u8;
                    x.qps.truncate(1 + i % x.qps.len());
                    for s in &mut x.segments {
                        s.rkey ^= salt.wrapping_mul(i as u32 + 1);
                    }
                    x
                })
                .collect();
            let credit = credit.map(|(min_version, d, required)| CreditCapability {
                min_version,
                max_version: min_version + d,
                required,
            });
            let p = PeerDescriptor {
                nics,
                replaces,
                credit,
            };
            let f = p.encode().unwrap();
            prop_assert_eq!(f.len(), 4 + p.payload_len());
            prop_assert_eq!(PeerDescriptor::decode_frame(&f).unwrap(), p);
        }

        #[test]
        fn prop_garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = EndpointDescriptor::decode_frame(&bytes);
            let _ = EndpointDescriptor::decode_payload(&bytes);
            let _ = PeerDescriptor::decode_frame(&bytes);
        }

        #[test]
        fn prop_bit_flips_decode_or_error(d in arb_desc(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut f = d.encode().unwrap();
            let i = at.index(f.len());
            f[i] ^= 1 << bit;
            // Either a typed error or a descriptor that re-encodes to the same bytes.
            if let Ok(d2) = EndpointDescriptor::decode_frame(&f) {
                prop_assert_eq!(d2.encode().unwrap(), f);
            }
        }
    }
}
