//! `CcConfig::from_env` (std only). One test in its own binary: it mutates
//! the process environment.
#![cfg(feature = "std")]

use railyard_core::cc::{CcConfig, ConfigError, Mode, Param};

#[test]
fn from_env_reads_and_validates_the_process_environment() {
    for p in Param::ALL {
        std::env::remove_var(p.env_name());
    }
    assert_eq!(CcConfig::from_env(), Ok(CcConfig::default()));
    std::env::set_var("MC_ADAPTIVE_CC_MODE", "observe");
    std::env::set_var("MC_ADAPTIVE_CC_MIN_WINDOW_BYTES", "4096");
    std::env::set_var("MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES", "2048");
    let c = CcConfig::from_env().unwrap();
    assert_eq!(
        (c.mode, c.min_window_bytes, c.probe_window_bytes),
        (Mode::Observe, 4096, Some(2048))
    );
    std::env::set_var("MC_ADAPTIVE_CC_LOW_PRESSURE_EPOCHS", "0");
    assert_eq!(
        CcConfig::from_env(),
        Err(ConfigError::Zero(Param::LowPressureEpochs))
    );
    let e: Box<dyn std::error::Error> = Box::new(ConfigError::Zero(Param::LowPressureEpochs));
    assert!(e.to_string().contains("MC_ADAPTIVE_CC_LOW_PRESSURE_EPOCHS"));
    for p in Param::ALL {
        std::env::remove_var(p.env_name());
    }
}
