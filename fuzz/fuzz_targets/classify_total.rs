//! Arbitrary (status, vendor_err, event, signal): classification is total,
//! never panics, and unknown inputs fail closed as RFC 4162 says.
#![no_main]
use libfuzzer_sys::fuzz_target;
use railyard_core::classify::{
    classify_event, classify_signal, classify_wc, event, wc, Effect, FailureClass, FailureScope,
    Signal,
};

fuzz_target!(|input: (u32, u32, u32, u8)| {
    let (status, vendor_err, ev, sig) = input;
    let c = classify_wc(status, vendor_err);
    assert_eq!((c.status, c.vendor_err), (status, vendor_err));
    assert_eq!(c.known, status <= wc::MAX_KNOWN);
    if !c.known {
        assert_eq!(
            (c.class, c.scope, c.effect),
            (FailureClass::Fatal, FailureScope::Qp, Effect::HardError)
        );
    }
    // vendor_err is evidence only.
    let z = classify_wc(status, 0);
    assert_eq!(
        (z.class, z.scope, z.handling, z.effect),
        (c.class, c.scope, c.handling, c.effect)
    );
    if matches!(
        c.class,
        FailureClass::LocalConfiguration
            | FailureClass::RemoteMetadata
            | FailureClass::DerivedFlush
    ) {
        assert!(!c.counts_hard_error());
    }
    let e = classify_event(ev);
    assert_eq!(e.known, ev <= event::MAX_KNOWN);
    if !e.known {
        assert_eq!(e.effect, Effect::None);
    }
    let s = classify_signal(Signal::ALL[usize::from(sig) % Signal::ALL.len()]);
    assert_eq!(s.task_state, s.reason.task_state());
});
