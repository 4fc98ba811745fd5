//! Property tests of the C view of the wire codec: any message built
//! through the C structs encodes, decodes to the same struct and
//! re-encodes to the same bytes; any single-byte corruption is either a
//! typed error that leaves the output untouched, or a message whose C view
//! is stable under encode/decode. Decoding arbitrary bytes never panics.
//!
//! The C view is the runtime view (see `ffi/src/wire.rs`): a known resource
//! a peer marked optional is accepted and re-encoded as required, so bytes
//! are preserved only for messages this library produced
//! (`an_optional_known_resource_is_normalised` pins that down).

use proptest::prelude::*;
use railyard_ffi::credit::{ry_credit_update, ry_credit_usage, ry_session_id, ry_totals};
use railyard_ffi::ry_status;
use railyard_ffi::wire::{
    ry_capability_answer, ry_capability_offer, ry_wire_decode, ry_wire_encode, ry_wire_message,
    RY_WIRE_MAX_MESSAGE_LEN,
};

fn encode(m: &ry_wire_message) -> Result<Vec<u8>, ry_status> {
    let mut buf = vec![0u8; RY_WIRE_MAX_MESSAGE_LEN];
    let mut len = 0usize;
    // SAFETY: all pointers come from live references / a buffer of `cap` bytes.
    let st = unsafe { ry_wire_encode(m, buf.as_mut_ptr(), buf.len(), &mut len) };
    if st != ry_status::Ok {
        return Err(st);
    }
    buf.truncate(len);
    Ok(buf)
}

fn decode(bytes: &[u8], out: &mut ry_wire_message) -> ry_status {
    // SAFETY: `bytes` is a live slice; `out` a live reference.
    unsafe { ry_wire_decode(bytes.as_ptr(), bytes.len(), out) }
}

fn totals() -> impl Strategy<Value = ry_totals> {
    (any::<[u64; 4]>(), 0u8..16).prop_map(|(mut v, present)| {
        for (i, x) in v.iter_mut().enumerate() {
            if present & (1 << i) == 0 {
                *x = 0;
            }
        }
        ry_totals {
            v,
            present,
            reserved: [0; 7],
        }
    })
}

/// Session 0 is reserved (never valid on the wire).
fn session() -> impl Strategy<Value = ry_session_id> {
    (any::<u64>(), any::<u64>()).prop_map(|(lo, hi)| ry_session_id {
        lo: if hi == 0 { lo.max(1) } else { lo },
        hi,
    })
}

fn message() -> impl Strategy<Value = ry_wire_message> {
    // Epoch and sequence 0 are reserved too.
    let update = (
        session(),
        1..=u64::MAX,
        1..=u64::MAX,
        totals(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(s, e, q, g, c, t)| ry_wire_message {
            msg_type: 1,
            update: ry_credit_update {
                receiver_session: s,
                epoch: e,
                sequence: q,
                grants: g,
                qos_class: c,
                freshness_ttl_ms: t,
            },
            ..Default::default()
        });
    let usage = (
        session(),
        1..=u64::MAX,
        1..=u64::MAX,
        [totals(), totals(), totals(), totals()],
        any::<u32>(),
    )
        .prop_map(|(s, e, q, [a, b, c, d], k)| ry_wire_message {
            msg_type: 2,
            usage: ry_credit_usage {
                receiver_session: s,
                epoch: e,
                sequence: q,
                consumed: a,
                released: b,
                returned: c,
                pending_demand: d,
                qos_class: k,
                reserved: 0,
            },
            ..Default::default()
        });
    let offer = (totals(), any::<u32>(), any::<u16>(), any::<u16>(), 0u8..2).prop_map(
        |(w, c, lo, hi, r)| ry_wire_message {
            msg_type: 3,
            offer: ry_capability_offer {
                windows: w,
                max_classes: c,
                min_version: lo,
                max_version: hi,
                required: r,
                reserved: [0; 7],
            },
            ..Default::default()
        },
    );
    // An accepted answer binds a nonzero version, session and epoch; a
    // refusal binds none.
    let answer = (
        session(),
        1..=u64::MAX,
        totals(),
        0u32..3,
        any::<u32>(),
        1..=u16::MAX,
    )
        .prop_map(|(s, e, caps, r, c, v)| {
            let (s, e, v) = if r == 0 {
                (s, e, v)
            } else {
                (ry_session_id::default(), 0, 0)
            };
            ry_wire_message {
                msg_type: 4,
                answer: ry_capability_answer {
                    receiver_session: s,
                    epoch: e,
                    caps,
                    result: r,
                    classes: c,
                    version: v,
                    reserved: [0; 6],
                },
                ..Default::default()
            }
        });
    prop_oneof![update, usage, offer, answer]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn c_messages_round_trip_byte_for_byte(m in message()) {
        let bytes = encode(&m).expect("a C message always encodes");
        let mut back = ry_wire_message::default();
        prop_assert_eq!(decode(&bytes, &mut back), ry_status::Ok);
        prop_assert_eq!(back, m);
        prop_assert_eq!(encode(&back).unwrap(), bytes);
    }

    #[test]
    fn a_corrupted_byte_is_a_typed_error_or_a_canonical_message(
        m in message(),
        at in any::<prop::sample::Index>(),
        x in 1u8..=255,
    ) {
        let mut bytes = encode(&m).unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= x;
        let sentinel = ry_wire_message { reserved: 0xdead_beef, ..Default::default() };
        let mut out = sentinel;
        match decode(&bytes, &mut out) {
            ry_status::Ok => {
                // Accepted: its C view is a fixed point of encode/decode.
                let again = encode(&out).unwrap();
                let mut back = ry_wire_message::default();
                prop_assert_eq!(decode(&again, &mut back), ry_status::Ok);
                prop_assert_eq!(back, out);
            }
            st => {
                prop_assert!((st as i32) <= -80 && (st as i32) >= -89, "{:?}", st);
                prop_assert_eq!(out, sentinel, "output written on a rejection");
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut out = ry_wire_message::default();
        let st = decode(&bytes, &mut out);
        prop_assert!(st == ry_status::Ok || ((st as i32) <= -80 && (st as i32) >= -89), "{:?}", st);
    }
}

#[test]
fn an_optional_known_resource_is_normalised() {
    let m = ry_wire_message {
        msg_type: 1,
        update: ry_credit_update {
            receiver_session: ry_session_id { lo: 1, hi: 0 },
            epoch: 1,
            sequence: 1,
            grants: ry_totals {
                v: [4096, 0, 0, 0],
                present: 1,
                reserved: [0; 7],
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let bytes = encode(&m).unwrap();
    // Header (8) + fixed update body (44), then the one amount:
    // resource u16, flags u16 (bit 0 = REQUIRED), value u64.
    assert_eq!(bytes.len(), 8 + 44 + 12);
    assert_eq!(&bytes[52..56], &[1, 0, 1, 0]);
    let mut optional = bytes.clone();
    optional[54] = 0;
    let mut out = ry_wire_message::default();
    assert_eq!(decode(&optional, &mut out), ry_status::Ok);
    assert_eq!(out, m);
    assert_eq!(encode(&out).unwrap(), bytes, "re-encoded as required");
}
