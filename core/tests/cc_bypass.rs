//! The compiled-out controller ([`Bypass`]): same API, admits everything,
//! keeps no state, still refuses a double release of a record.

use railyard_core::cc::{
    Admission, Bypass, CcConfig, Controller, Mode, PollerStatus, ReleaseError, Settlement,
};
use railyard_core::classify::Effect;
use railyard_core::token::TokenRecord;

#[test]
fn bypass_admits_everything_and_records_exactly_once() {
    let cfg = CcConfig {
        mode: Mode::Enforce,
        ..CcConfig::default()
    };
    let (c, mut m) = Bypass::new(&cfg, 1, &[0]).unwrap();
    assert_eq!(c.mode(), Mode::Off);
    assert!(!Bypass::compiled_in());
    for _ in 0..3 {
        let Admission::Admit(p) = c.try_acquire(0, 0, u32::MAX, 0).unwrap() else {
            panic!("bypass must admit")
        };
        assert!(c.is_current(&p));
        let mut rec = TokenRecord::default();
        p.record_into(&mut rec).unwrap();
        assert_eq!(
            c.release_record(&mut rec, Effect::HardError),
            Ok(Settlement::Current)
        );
        assert_eq!(
            c.release_record(&mut rec, Effect::HardError),
            Err(ReleaseError::NotHeld)
        );
    }
    assert_eq!(
        m.on_epoch(&c, 1, PollerStatus::Progressing),
        Default::default()
    );
    assert_eq!(c.route_snapshot(0), None);
    assert_eq!((c.devices(), c.routes()), (1, 1));
}

#[test]
fn bypass_still_reports_an_invalid_config() {
    let bad = CcConfig {
        min_window_bytes: 0,
        ..CcConfig::default()
    };
    assert!(Bypass::new(&bad, 1, &[0]).is_err());
    let (_, _, err) = Bypass::new_or_off(&bad, 1, &[0]);
    assert!(err.is_some());
}

#[test]
fn controller_is_the_bypass_exactly_when_compiled_out() {
    assert_eq!(Controller::compiled_in(), cfg!(feature = "adaptive-cc"));
}
