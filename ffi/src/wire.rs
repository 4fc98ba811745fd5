//! The versioned credit wire schema (RFC 2849): encode and decode the four
//! V1 messages. Decoding runs every check on the raw bytes before any
//! value is built; a rejected buffer is a typed `RY_STATUS_WIRE_*` error.
//!
//! The C view is the runtime view: resource lists are [`ry_totals`] of the
//! four known resources. Unknown *optional* resources a peer sent are
//! ignored (as the core's runtime conversion does), and encoding marks
//! every present resource required — so a message from this library
//! re-encodes byte for byte; one carrying unknown optional resources, or a
//! known resource marked optional, is accepted and normalised
//! (`tests/wire_prop.rs`).

use railyard_core::wire::credit::{
    decode, encode, from_totals, to_totals, CapabilityAnswerV1, CapabilityOfferV1, CreditUpdateV1,
    CreditUsageV1, Message, NegotiationResult, MAX_MESSAGE_LEN,
};

use crate::credit::{ry_credit_update, ry_credit_usage, ry_session_id, ry_totals};
use crate::error::{ret, Result, RyStatus};
use crate::mirror::{mirror, CEnum};
use crate::ptr::{in_ref, in_slice, out_slice};

/// Largest encoded message, in bytes: a buffer this big always suffices.
pub const RY_WIRE_MAX_MESSAGE_LEN: usize = 432;
const _: () = assert!(RY_WIRE_MAX_MESSAGE_LEN == MAX_MESSAGE_LEN);

/// The schema version this library speaks.
pub const RY_WIRE_SCHEMA_V1: u16 = 1;
const _: () = assert!(RY_WIRE_SCHEMA_V1 == railyard_core::wire::credit::SCHEMA_V1);

/// Message type codes (`ry_wire_message.msg_type`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_msg_type {
    /// `ReceiverCreditUpdateV1`: `ry_wire_message.update`.
    CreditUpdate = 1,
    /// `SenderCreditUsageV1`: `ry_wire_message.usage`.
    CreditUsage = 2,
    /// Capability offer: `ry_wire_message.offer`.
    CapabilityOffer = 3,
    /// Capability answer: `ry_wire_message.answer`.
    CapabilityAnswer = 4,
}

/// Negotiation result codes (`ry_capability_answer.result`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_negotiation_result {
    /// Credit active at `version`.
    Accepted = 0,
    /// No common version / capability: legacy or fail per mode.
    Unsupported = 1,
    /// Refused by receiver policy.
    Rejected = 2,
}

mirror!(ry_msg_type: CreditUpdate, CreditUsage, CapabilityOffer, CapabilityAnswer);
mirror!(ry_negotiation_result <=> NegotiationResult: Accepted, Unsupported, Rejected);

/// Sender -> receiver at bootstrap: supported versions, mode, windows.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_capability_offer {
    /// The sender's per-entry tracking window per resource.
    pub windows: ry_totals,
    /// QoS classes the sender wants.
    pub max_classes: u32,
    /// Lowest schema version supported.
    pub min_version: u16,
    /// Highest schema version supported.
    pub max_version: u16,
    /// Nonzero: the sender runs in required mode.
    pub required: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

/// Receiver -> sender: the negotiated version and session binding.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_capability_answer {
    /// Receiver session.
    pub receiver_session: ry_session_id,
    /// First epoch.
    pub epoch: u64,
    /// Receiver per-entry caps per resource.
    pub caps: ry_totals,
    /// `ry_negotiation_result`.
    pub result: u32,
    /// QoS classes authorized for this sender.
    pub classes: u32,
    /// Chosen version (0 unless accepted).
    pub version: u16,
    /// Reserved, zero.
    pub reserved: [u8; 6],
}

/// One wire message: `type` says which member is meaningful.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_wire_message {
    /// `RY_MSG_TYPE_CREDIT_UPDATE`.
    pub update: ry_credit_update,
    /// `RY_MSG_TYPE_CREDIT_USAGE`.
    pub usage: ry_credit_usage,
    /// `RY_MSG_TYPE_CAPABILITY_OFFER`.
    pub offer: ry_capability_offer,
    /// `RY_MSG_TYPE_CAPABILITY_ANSWER`.
    pub answer: ry_capability_answer,
    /// `ry_msg_type`.
    pub msg_type: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

fn totals(a: &railyard_core::wire::credit::Amounts) -> ry_totals {
    ry_totals::from_core(&to_totals(a))
}

fn to_message(m: &ry_wire_message) -> Result<Message> {
    Ok(match ry_msg_type::from_u32(m.msg_type, "type")? {
        ry_msg_type::CreditUpdate => {
            Message::CreditUpdate(CreditUpdateV1::from_update(&m.update.to_core()?))
        }
        ry_msg_type::CreditUsage => {
            Message::CreditUsage(CreditUsageV1::from_usage(&m.usage.to_core()?))
        }
        ry_msg_type::CapabilityOffer => Message::CapabilityOffer(CapabilityOfferV1 {
            min_version: m.offer.min_version,
            max_version: m.offer.max_version,
            required: m.offer.required != 0,
            max_classes: m.offer.max_classes,
            windows: from_totals(&m.offer.windows.to_core()?),
        }),
        ry_msg_type::CapabilityAnswer => Message::CapabilityAnswer(CapabilityAnswerV1 {
            version: m.answer.version,
            result: ry_negotiation_result::to_core(m.answer.result, "answer.result")?,
            classes: m.answer.classes,
            receiver_session: railyard_core::credit::SessionId::from(m.answer.receiver_session).0,
            epoch: m.answer.epoch,
            caps: from_totals(&m.answer.caps.to_core()?),
        }),
    })
}

fn from_message(m: &Message) -> ry_wire_message {
    let mut out = ry_wire_message::default();
    match m {
        Message::CreditUpdate(u) => {
            out.msg_type = ry_msg_type::CreditUpdate as u32;
            out.update = ry_credit_update::from_core(&u.to_update());
        }
        Message::CreditUsage(u) => {
            out.msg_type = ry_msg_type::CreditUsage as u32;
            out.usage = ry_credit_usage::from_core(&u.to_usage());
        }
        Message::CapabilityOffer(o) => {
            out.msg_type = ry_msg_type::CapabilityOffer as u32;
            out.offer = ry_capability_offer {
                windows: totals(&o.windows),
                max_classes: o.max_classes,
                min_version: o.min_version,
                max_version: o.max_version,
                required: u8::from(o.required),
                reserved: [0; 7],
            };
        }
        Message::CapabilityAnswer(a) => {
            out.msg_type = ry_msg_type::CapabilityAnswer as u32;
            out.answer = ry_capability_answer {
                receiver_session: railyard_core::credit::SessionId(a.receiver_session).into(),
                epoch: a.epoch,
                caps: totals(&a.caps),
                result: ry_negotiation_result::from(a.result) as u32,
                classes: a.classes,
                version: a.version,
                reserved: [0; 6],
            };
        }
    }
    out
}

/// Encodes `*msg` into `buf[0..cap)` and writes the encoded length to
/// `*len_out`. A buffer of `RY_WIRE_MAX_MESSAGE_LEN` always suffices; a
/// smaller one is `RY_STATUS_BUFFER_TOO_SMALL` (nothing useful written).
///
/// Thread-safety: pure; any thread.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
///
/// # Safety
/// `msg` is valid for reads; `buf` points to `cap` writable bytes;
/// `len_out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_wire_encode(
    msg: *const ry_wire_message,
    buf: *mut u8,
    cap: usize,
    len_out: *mut usize,
) -> RyStatus {
    // SAFETY: caller contract: `msg` valid for reads, `buf` holds `cap`
    // writable bytes not aliased during the call, `len_out` valid for writes.
    unsafe {
        ret(len_out, "len_out", || {
            let m = to_message(in_ref(msg, "msg")?)?;
            Ok(encode(&m, out_slice(buf, cap, "buf")?)?)
        })
    }
}

/// Decodes exactly `len` bytes at `buf` into `*out`. Every check
/// (version, type, truncation, trailing bytes, reserved fields, list
/// counts, duplicate and unknown-required resources) runs before anything
/// is written; a rejected buffer is a `RY_STATUS_WIRE_*` error and `*out`
/// is untouched. Never reads beyond `len`.
///
/// Thread-safety: pure; any thread.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
///
/// # Safety
/// `buf` points to `len` readable bytes (may be NULL if `len == 0`);
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_wire_decode(
    buf: *const u8,
    len: usize,
    out: *mut ry_wire_message,
) -> RyStatus {
    // SAFETY: caller contract: `buf` holds `len` readable bytes, `out` is
    // valid for writes.
    unsafe {
        ret(out, "out", || {
            Ok(from_message(&decode(in_slice(buf, len, "buf")?)?))
        })
    }
}
