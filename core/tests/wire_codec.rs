//! Wire codec: round trips, every typed rejection, and property tests.
use proptest::prelude::*;
use railyard_core::wire::credit::*;

fn amt(resource: u16, required: bool, value: u64) -> WireAmount {
    WireAmount {
        resource,
        required,
        value,
    }
}

fn list(items: &[WireAmount]) -> Amounts {
    let mut a = Amounts::new();
    for i in items {
        a.push(*i).unwrap();
    }
    a
}

fn enc(m: &Message) -> Vec<u8> {
    let mut buf = [0u8; MAX_MESSAGE_LEN];
    let n = encode(m, &mut buf).unwrap();
    assert_eq!(n, encoded_len(m));
    buf[..n].to_vec()
}

fn update() -> Message {
    Message::CreditUpdate(CreditUpdateV1 {
        qos_class: 3,
        freshness_ttl_ms: 250,
        receiver_session: 0x0102_0304_0506_0708_090A_0B0C_0D0E_0F10,
        epoch: 7,
        sequence: 42,
        grants: list(&[amt(1, true, 1 << 30), amt(2, true, 64)]),
    })
}

fn usage() -> Message {
    Message::CreditUsage(CreditUsageV1 {
        receiver_session: 5,
        epoch: 1,
        sequence: 2,
        qos_class: 0,
        consumed: list(&[amt(1, true, 100), amt(4, true, 1)]),
        released: list(&[amt(1, true, 50)]),
        returned: list(&[]),
        pending_demand: list(&[amt(3, false, 2), amt(77, false, 9)]),
    })
}

fn offer() -> Message {
    Message::CapabilityOffer(CapabilityOfferV1 {
        min_version: 1,
        max_version: 1,
        required: true,
        max_classes: 4,
        windows: list(&[amt(1, true, u32::MAX as u64), amt(2, true, 2047)]),
    })
}

fn answer() -> Message {
    Message::CapabilityAnswer(CapabilityAnswerV1 {
        version: 1,
        result: NegotiationResult::Accepted,
        classes: 2,
        receiver_session: u128::MAX,
        epoch: u64::MAX,
        caps: list(&[amt(4, true, 8)]),
    })
}

#[test]
fn every_message_round_trips_byte_identically() {
    for m in [update(), usage(), offer(), answer()] {
        let bytes = enc(&m);
        let back = decode(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(enc(&back), bytes);
    }
}

#[test]
fn update_layout_is_as_documented() {
    let b = enc(&update());
    assert_eq!(&b[0..2], &[1, 0]); // schema_version 1, LE
    assert_eq!(b[2], 1); // CreditUpdate
    assert_eq!(b[3], 0); // flags
    assert_eq!(
        u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize,
        b.len() - 8
    );
    assert_eq!(b.len(), 8 + 44 + 2 * 12);
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 3); // qos_class
    assert_eq!(b[16], 0x10); // session LSB first
    assert_eq!(u64::from_le_bytes(b[32..40].try_into().unwrap()), 7); // epoch
    assert_eq!(u64::from_le_bytes(b[40..48].try_into().unwrap()), 42); // sequence
    assert_eq!(b[48], 2); // n_grants
    assert_eq!(&b[52..54], &[1, 0]); // DATA_BYTES
    assert_eq!(&b[54..56], &[1, 0]); // REQUIRED
    assert_eq!(u64::from_le_bytes(b[56..64].try_into().unwrap()), 1 << 30);
}

#[test]
fn every_truncation_is_a_typed_error() {
    for m in [update(), usage(), offer(), answer()] {
        let b = enc(&m);
        for cut in 0..b.len() {
            match decode(&b[..cut]) {
                Err(DecodeError::Truncated { .. }) => {}
                other => panic!("cut {cut} of {}: {other:?}", b.len()),
            }
        }
    }
}

#[test]
fn trailing_bytes_are_rejected() {
    let mut b = enc(&update());
    b.push(0);
    assert_eq!(decode(&b), Err(DecodeError::TrailingBytes(1)));
}

#[test]
fn unknown_version_type_and_flags_are_rejected() {
    let b = enc(&update());
    let mut v = b.clone();
    v[0] = 2;
    assert_eq!(decode(&v), Err(DecodeError::UnknownVersion(2)));
    let mut t = b.clone();
    t[2] = 9;
    assert_eq!(decode(&t), Err(DecodeError::UnknownMessageType(9)));
    let mut f = b.clone();
    f[3] = 1;
    assert_eq!(decode(&f), Err(DecodeError::UnknownFlags));
    let mut af = b.clone();
    af[54] = 0b10; // amount flag bit 1 is undefined
    assert_eq!(decode(&af), Err(DecodeError::UnknownFlags));
    let mut r = b;
    r[50] = 1; // reserved after n_grants
    assert_eq!(decode(&r), Err(DecodeError::NonzeroReserved));
}

#[test]
fn oversized_counts_are_rejected_before_reading_the_list() {
    let mut b = enc(&update());
    b[48] = (MAX_RESOURCES_PER_MSG + 1) as u8;
    assert_eq!(decode(&b), Err(DecodeError::TooManyResources(9)));
    b[48] = 255;
    assert_eq!(decode(&b), Err(DecodeError::TooManyResources(255)));
}

#[test]
fn count_and_body_length_must_agree() {
    let mut b = enc(&update());
    b[48] = 1; // claims one grant, body holds two
    assert!(matches!(
        decode(&b),
        Err(DecodeError::LengthMismatch { .. })
    ));
}

#[test]
fn duplicate_and_unknown_required_resources_are_rejected() {
    let mut b = enc(&update());
    b[64] = 1; // second grant's code = DATA_BYTES again
    assert_eq!(decode(&b), Err(DecodeError::DuplicateResource(1)));
    let mut u = enc(&update());
    u[64] = 50; // unknown code, still marked required
    assert_eq!(decode(&u), Err(DecodeError::UnknownRequiredResource(50)));
    // The encoder refuses to emit either.
    let bad = Message::CreditUpdate(CreditUpdateV1 {
        grants: list(&[amt(2, true, 1), amt(2, false, 1)]),
        ..Default::default()
    });
    let mut buf = [0u8; 256];
    assert_eq!(
        encode(&bad, &mut buf),
        Err(EncodeError::Invalid(DecodeError::DuplicateResource(2)))
    );
}

#[test]
fn unknown_optional_resource_is_preserved_and_ignored_at_runtime() {
    let m = usage();
    let b = enc(&m);
    let Message::CreditUsage(u) = decode(&b).unwrap() else {
        panic!("wrong type")
    };
    assert_eq!(u.pending_demand.len(), 2);
    let rt = u.to_usage();
    assert_eq!(rt.pending_demand.present.len(), 1);
    assert_eq!(CreditUsageV1::from_usage(&rt).pending_demand.len(), 1);
}

#[test]
fn bad_enums_are_rejected() {
    let mut b = enc(&offer());
    b[12] = 2; // mode
    assert_eq!(decode(&b), Err(DecodeError::BadEnum(2)));
    let mut a = enc(&answer());
    a[10] = 3; // result
    assert_eq!(decode(&a), Err(DecodeError::BadEnum(3)));
}

#[test]
fn small_output_buffer_is_an_error_not_a_panic() {
    let m = update();
    let mut buf = [0u8; 10];
    assert_eq!(
        encode(&m, &mut buf),
        Err(EncodeError::BufferTooSmall {
            need: encoded_len(&m)
        })
    );
}

fn arb_amounts() -> impl Strategy<Value = Amounts> {
    proptest::collection::btree_map(
        0u16..12,
        (any::<bool>(), any::<u64>()),
        0..=MAX_RESOURCES_PER_MSG,
    )
    .prop_map(|m| {
        let mut a = Amounts::new();
        for (code, (req, v)) in m {
            let known = (1..=4).contains(&code);
            a.push(amt(code, req && known, v)).unwrap();
        }
        a
    })
}

fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        // Session, epoch and sequence 0 are reserved (never valid).
        (
            any::<u32>(),
            any::<u32>(),
            1..=u128::MAX,
            1..=u64::MAX,
            1..=u64::MAX,
            arb_amounts()
        )
            .prop_map(|(q, t, s, e, n, g)| Message::CreditUpdate(CreditUpdateV1 {
                qos_class: q,
                freshness_ttl_ms: t,
                receiver_session: s,
                epoch: e,
                sequence: n,
                grants: g
            })),
        (
            1..=u128::MAX,
            1..=u64::MAX,
            1..=u64::MAX,
            any::<u32>(),
            arb_amounts(),
            arb_amounts(),
            arb_amounts(),
            arb_amounts()
        )
            .prop_map(
                |(s, e, n, q, a, b, c, d)| Message::CreditUsage(CreditUsageV1 {
                    receiver_session: s,
                    epoch: e,
                    sequence: n,
                    qos_class: q,
                    consumed: a,
                    released: b,
                    returned: c,
                    pending_demand: d
                })
            ),
        (
            any::<u16>(),
            any::<u16>(),
            any::<bool>(),
            any::<u32>(),
            arb_amounts()
        )
            .prop_map(|(a, b, r, c, w)| {
                Message::CapabilityOffer(CapabilityOfferV1 {
                    min_version: a,
                    max_version: b,
                    required: r,
                    max_classes: c,
                    windows: w,
                })
            }),
        // An accepted answer binds a nonzero version, session and epoch; a
        // refusal binds none.
        (
            1..=u16::MAX,
            0u8..3,
            any::<u32>(),
            1..=u128::MAX,
            1..=u64::MAX,
            arb_amounts()
        )
            .prop_map(|(v, r, c, s, e, caps)| {
                let (v, s, e) = if r == 0 { (v, s, e) } else { (0, 0, 0) };
                Message::CapabilityAnswer(CapabilityAnswerV1 {
                    version: v,
                    result: [
                        NegotiationResult::Accepted,
                        NegotiationResult::Unsupported,
                        NegotiationResult::Rejected,
                    ][r as usize],
                    classes: c,
                    receiver_session: s,
                    epoch: e,
                    caps,
                })
            }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_messages_round_trip(m in arb_message()) {
        let b = enc(&m);
        let back = decode(&b).unwrap();
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(enc(&back), b);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_bytes_reencode_identically(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(m) = decode(&bytes) {
            prop_assert_eq!(enc(&m), bytes);
        }
    }

    #[test]
    fn mutated_valid_messages_never_panic(m in arb_message(), at in any::<usize>(), byte in any::<u8>()) {
        let mut b = enc(&m);
        let i = at % b.len();
        b[i] = byte;
        if let Ok(m2) = decode(&b) {
            prop_assert_eq!(enc(&m2), b);
        }
    }
}
