//! Wire decode from arbitrary bytes: never panics; anything accepted
//! re-encodes to exactly the same bytes, and converts to runtime types.
#![no_main]
use libfuzzer_sys::fuzz_target;
use railyard_core::wire::credit::{decode, encode, encoded_len, Message, MAX_MESSAGE_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode(data) {
        assert_eq!(encoded_len(&m), data.len());
        let mut buf = [0u8; MAX_MESSAGE_LEN];
        let n = encode(&m, &mut buf).expect("an accepted message re-encodes");
        assert_eq!(&buf[..n], data, "re-encoding is not byte-identical");
        match &m {
            Message::CreditUpdate(u) => {
                let rt = u.to_update();
                assert!(rt.grants.present.len() <= u.grants.len());
            }
            Message::CreditUsage(u) => {
                let _ = u.to_usage();
            }
            Message::CapabilityOffer(_) | Message::CapabilityAnswer(_) => {}
        }
    }
});
