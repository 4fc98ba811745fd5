//! The pure policy: state-machine steps, AIMD with hysteresis, drain-time
//! pressure, configuration validation and env parsing (plain numbers only).

use proptest::prelude::*;
use railyard_core::cc::aimd::{
    drain_time_ns, epoch_pressured, pressure_threshold_ns, Aimd, BaseDrain, Sample, BASE_PERIOD_NS,
};
use railyard_core::cc::health::{arrow_exists, needs_escalation, step, Event, Health, HealthWord};
use railyard_core::cc::{
    CcConfig, ConfigError, DrainSignal, Mode, Param, SoftwareProvider, TargetMode,
};

const STATES: [Health; 5] = [
    Health::Healthy,
    Health::Congested,
    Health::Suspect,
    Health::Quarantined,
    Health::Probing,
];

fn word_in(h: Health) -> HealthWord {
    // Drive a fresh word into `h` through real steps.
    let w = HealthWord::new(7);
    match h {
        Health::Healthy => w,
        Health::Congested => step(w, Event::Pressure(true), 3).unwrap(),
        Health::Suspect => step(w, Event::HardError, 3).unwrap(),
        Health::Quarantined => step(step(w, Event::Fatal, 3).unwrap(), Event::Fatal, 3).unwrap(),
        Health::Probing => step(word_in(Health::Quarantined), Event::CooldownExpired, 3).unwrap(),
    }
}

#[test]
fn the_diagram_has_exactly_ten_arrows() {
    let n = STATES
        .iter()
        .flat_map(|&a| STATES.iter().map(move |&b| (a, b)))
        .filter(|&(a, b)| a != b && arrow_exists(a, b))
        .count();
    assert_eq!(n, 10);
    assert!(!arrow_exists(Health::Healthy, Health::Quarantined));
    assert!(!arrow_exists(Health::Quarantined, Health::Healthy));
    assert!(!arrow_exists(Health::Healthy, Health::Probing));
}

#[test]
fn fatal_evidence_takes_two_real_arrows() {
    let w = step(HealthWord::new(0), Event::Fatal, 3).unwrap();
    assert_eq!(w.health(), Health::Suspect);
    assert!(needs_escalation(w, 3));
    let q = step(w, Event::Fatal, 3).unwrap();
    assert_eq!(q.health(), Health::Quarantined);
}

#[test]
fn cooldown_expiry_bumps_generation_and_quarantine_seq_distinguishes_entries() {
    let q1 = word_in(Health::Quarantined);
    let p = step(q1, Event::CooldownExpired, 3).unwrap();
    assert_eq!(p.generation(), q1.generation() + 1);
    let q2 = step(p, Event::HardError, 3).unwrap();
    assert_eq!(q2.health(), Health::Quarantined);
    assert_ne!(q1.quarantine_seq(), q2.quarantine_seq());
}

proptest! {
    #[test]
    fn every_step_is_an_arrow(events in proptest::collection::vec(0u8..8, 0..64), thr in 1u16..6) {
        let mut w = HealthWord::new(0);
        for e in events {
            let ev = match e {
                0 => Event::Success,
                1 => Event::HardError,
                2 => Event::Fatal,
                3 => Event::Pressure(true),
                4 => Event::Pressure(false),
                5 => Event::CooldownExpired,
                6 => Event::NewGeneration,
                _ => Event::HardError,
            };
            if let Some(n) = step(w, ev, thr) {
                prop_assert!(arrow_exists(w.health(), n.health()), "{:?} -{:?}-> {:?}", w.health(), ev, n.health());
                if ev != Event::NewGeneration && ev != Event::CooldownExpired {
                    prop_assert_eq!(n.generation(), w.generation());
                }
                w = n;
            }
        }
    }
}

// ---- AIMD ----

fn params() -> railyard_core::cc::Params {
    CcConfig {
        min_window_bytes: 1_000,
        max_window_bytes: 10_000,
        initial_window_bytes: Some(4_000),
        high_pressure_epochs: 2,
        low_pressure_epochs: 3,
        additive_increase_bytes: 500,
        decrease_percent: 50,
        ..CcConfig::default()
    }
    .validate()
    .unwrap()
}

#[test]
fn drain_time_pressure() {
    // 1000 bytes in flight, 1000 drained in a 1 ms epoch: drain time 1 ms.
    assert!(!epoch_pressured(1_000, 1_000, 1_000_000, 1_000_000));
    assert!(epoch_pressured(1_001, 1_000, 1_000_000, 1_000_000));
    assert!(
        epoch_pressured(1, 0, 1_000_000, 1_000_000),
        "backlog that drained nothing"
    );
    assert!(
        !epoch_pressured(0, 0, 1_000_000, 1),
        "an empty domain is never pressured"
    );
    assert!(
        !epoch_pressured(u64::MAX, u64::MAX, u64::MAX, u64::MAX),
        "no overflow"
    );
}

#[test]
fn multiplicative_decrease_after_high_pressure_epochs() {
    let p = params();
    let mut a = Aimd::default();
    let hot = Sample {
        pressured: true,
        receiver_pressure: false,
        may_grow: true,
    };
    let v = a.epoch(&p, 4_000, hot);
    assert_eq!((v.window, v.sustained), (4_000, None));
    let v = a.epoch(&p, 4_000, hot);
    assert_eq!((v.window, v.sustained), (2_000, Some(true)));
    let v = a.epoch(&p, 2_000, hot);
    assert_eq!(v.window, 1_000);
    let v = a.epoch(&p, 1_000, hot);
    assert_eq!(v.window, 1_000, "floored at min");
}

#[test]
fn additive_increase_after_low_pressure_epochs() {
    let p = params();
    let mut a = Aimd::default();
    let calm = Sample {
        pressured: false,
        receiver_pressure: false,
        may_grow: true,
    };
    assert_eq!(a.epoch(&p, 4_000, calm).window, 4_000);
    assert_eq!(a.epoch(&p, 4_000, calm).window, 4_000);
    let v = a.epoch(&p, 4_000, calm);
    assert_eq!((v.window, v.sustained), (4_500, Some(false)));
    assert_eq!(a.epoch(&p, 9_800, calm).window, 10_000, "capped at max");
    // A pressured epoch resets the calm streak.
    a.epoch(
        &p,
        4_000,
        Sample {
            pressured: true,
            ..calm
        },
    );
    assert_eq!(a.low_streak(), 0);
    assert_eq!(a.epoch(&p, 4_000, calm).window, 4_000);
}

#[test]
fn no_growth_when_not_allowed() {
    let p = params();
    let mut a = Aimd::default();
    let calm = Sample {
        pressured: false,
        receiver_pressure: false,
        may_grow: false,
    };
    for _ in 0..5 {
        assert_eq!(a.epoch(&p, 4_000, calm).window, 4_000);
    }
}

#[test]
fn receiver_pressure_backs_off_immediately() {
    let p = params();
    let mut a = Aimd::default();
    let v = a.epoch(
        &p,
        4_000,
        Sample {
            pressured: false,
            receiver_pressure: true,
            may_grow: true,
        },
    );
    assert_eq!((v.window, v.sustained), (2_000, Some(true)));
}

// ---- configuration ----

#[test]
fn default_config_is_valid_and_off() {
    let p = CcConfig::default().validate().unwrap();
    assert_eq!(p.mode, Mode::Off);
    assert_eq!(
        p.probe_window, p.min_window,
        "probe defaults to the minimum window"
    );
    assert_eq!(p.initial_window, p.max_window);
}

#[test]
fn every_numeric_value_must_be_positive() {
    let base = CcConfig::default();
    let cases: [(CcConfig, Param); 9] = [
        (
            CcConfig {
                min_window_bytes: 0,
                ..base
            },
            Param::MinWindowBytes,
        ),
        (
            CcConfig {
                max_window_bytes: 0,
                ..base
            },
            Param::MaxWindowBytes,
        ),
        (
            CcConfig {
                initial_window_bytes: Some(0),
                ..base
            },
            Param::InitialWindowBytes,
        ),
        (
            CcConfig {
                target_drain_us: 0,
                ..base
            },
            Param::TargetDrainUs,
        ),
        (
            CcConfig {
                high_pressure_epochs: 0,
                ..base
            },
            Param::HighPressureEpochs,
        ),
        (
            CcConfig {
                low_pressure_epochs: 0,
                ..base
            },
            Param::LowPressureEpochs,
        ),
        (
            CcConfig {
                hard_error_threshold: 0,
                ..base
            },
            Param::HardErrorThreshold,
        ),
        (
            CcConfig {
                cooldown_ms: 0,
                ..base
            },
            Param::CooldownMs,
        ),
        (
            CcConfig {
                probe_window_bytes: Some(0),
                ..base
            },
            Param::ProbeWindowBytes,
        ),
    ];
    for (c, p) in cases {
        assert_eq!(c.validate(), Err(ConfigError::Zero(p)));
    }
    assert_eq!(
        CcConfig {
            additive_increase_bytes: 0,
            ..base
        }
        .validate(),
        Err(ConfigError::Zero(Param::AdditiveIncreaseBytes))
    );
}

#[test]
fn min_must_not_exceed_max() {
    let c = CcConfig {
        min_window_bytes: 10,
        max_window_bytes: 9,
        ..CcConfig::default()
    };
    assert_eq!(
        c.validate(),
        Err(ConfigError::MinAboveMax { min: 10, max: 9 })
    );
    let c = CcConfig {
        min_window_bytes: 9,
        max_window_bytes: 9,
        initial_window_bytes: Some(9),
        ..CcConfig::default()
    };
    assert!(c.validate().is_ok());
}

#[test]
fn explicit_probe_must_not_exceed_min() {
    let c = CcConfig {
        probe_window_bytes: Some(256 * 1024 + 1),
        ..CcConfig::default()
    };
    assert_eq!(
        c.validate(),
        Err(ConfigError::ProbeAboveMin {
            probe: 256 * 1024 + 1,
            min: 256 * 1024
        })
    );
    let c = CcConfig {
        probe_window_bytes: Some(256 * 1024),
        ..CcConfig::default()
    };
    assert!(c.validate().is_ok());
}

#[test]
fn initial_and_decrease_ranges() {
    let c = CcConfig {
        initial_window_bytes: Some(1),
        ..CcConfig::default()
    };
    assert!(matches!(
        c.validate(),
        Err(ConfigError::InitialOutOfRange { .. })
    ));
    for d in [0, 100, 250] {
        let c = CcConfig {
            decrease_percent: d,
            ..CcConfig::default()
        };
        assert_eq!(c.validate(), Err(ConfigError::DecreaseOutOfRange(d)));
    }
    let c = CcConfig {
        cooldown_ms: u64::MAX,
        ..CcConfig::default()
    };
    assert_eq!(c.validate(), Err(ConfigError::TooLarge(Param::CooldownMs)));
}

#[test]
fn errors_display_the_variable_name() {
    let e = ConfigError::Zero(Param::CooldownMs);
    assert!(e.to_string().contains("MC_ADAPTIVE_CC_COOLDOWN_MS"));
    assert!(ConfigError::InvalidMode
        .to_string()
        .contains("MC_ADAPTIVE_CC_MODE"));
}

fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl FnMut(&'static str) -> Option<&'a str> + 'a {
    move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
}

#[test]
fn env_parsing_reads_every_parameter() {
    let vars = [
        ("MC_ADAPTIVE_CC_MODE", " Enforce "),
        ("MC_ADAPTIVE_CC_MIN_WINDOW_BYTES", "1000"),
        ("MC_ADAPTIVE_CC_MAX_WINDOW_BYTES", "9000"),
        ("MC_ADAPTIVE_CC_INITIAL_WINDOW_BYTES", "2000"),
        ("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "50"),
        ("MC_ADAPTIVE_CC_HIGH_PRESSURE_EPOCHS", "4"),
        ("MC_ADAPTIVE_CC_LOW_PRESSURE_EPOCHS", "5"),
        ("MC_ADAPTIVE_CC_HARD_ERROR_THRESHOLD", "6"),
        ("MC_ADAPTIVE_CC_COOLDOWN_MS", "7"),
        ("MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES", "800"),
        ("MC_ADAPTIVE_CC_ADDITIVE_INCREASE_BYTES", "100"),
        ("MC_ADAPTIVE_CC_DECREASE_PERCENT", "70"),
    ];
    let c = CcConfig::from_lookup(lookup(&vars)).unwrap();
    assert_eq!(
        c,
        CcConfig {
            mode: Mode::Enforce,
            min_window_bytes: 1000,
            max_window_bytes: 9000,
            initial_window_bytes: Some(2000),
            target_drain_us: 50,
            // An explicit target keeps the RFC's absolute meaning.
            target_mode: TargetMode::Fixed,
            software_drain: None,
            high_pressure_epochs: 4,
            low_pressure_epochs: 5,
            hard_error_threshold: 6,
            cooldown_ms: 7,
            probe_window_bytes: Some(800),
            additive_increase_bytes: 100,
            decrease_percent: 70,
        }
    );
    assert_eq!(
        CcConfig::from_lookup(lookup(&[])).unwrap(),
        CcConfig::default()
    );
}

#[test]
fn target_mode_is_adaptive_by_default_and_fixed_by_an_explicit_target() {
    let get = |v: &[(&str, &str)]| CcConfig::from_lookup(lookup(v)).unwrap();
    assert_eq!(get(&[]).target_mode, TargetMode::Adaptive);
    let c = get(&[("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "300")]);
    assert_eq!((c.target_drain_us, c.target_mode), (300, TargetMode::Fixed));
    // Both set: the explicit mode wins, the target becomes the floor.
    let c = get(&[
        ("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "300"),
        ("MC_ADAPTIVE_CC_TARGET_MODE", " Adaptive"),
    ]);
    assert_eq!(
        (c.target_drain_us, c.target_mode),
        (300, TargetMode::Adaptive)
    );
    assert_eq!(
        get(&[("MC_ADAPTIVE_CC_TARGET_MODE", "fixed")]).target_mode,
        TargetMode::Fixed
    );
    assert_eq!(
        CcConfig::from_lookup(lookup(&[("MC_ADAPTIVE_CC_TARGET_MODE", "relative")])),
        Err(ConfigError::InvalidTargetMode)
    );
    assert!(ConfigError::InvalidTargetMode
        .to_string()
        .contains("MC_ADAPTIVE_CC_TARGET_MODE"));
}

#[test]
fn software_drain_is_advisory_by_default_and_enforced_by_an_explicit_target() {
    let get = |v: &[(&str, &str)]| CcConfig::from_lookup(lookup(v)).unwrap();
    let rxe = Some(SoftwareProvider::Rxe);
    // Defaults: software providers advisory, hardware enforced.
    let c = get(&[]);
    assert_eq!(c.software_drain, None);
    assert_eq!(c.validate().unwrap().software_drain, DrainSignal::Advisory);
    assert_eq!(c.drain_signal(rxe), DrainSignal::Advisory);
    assert_eq!(c.drain_signal(None), DrainSignal::Enforce);
    // An explicit target (the RFC meaning): enforced everywhere ...
    let c = get(&[("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "300")]);
    assert_eq!(c.drain_signal(rxe), DrainSignal::Enforce);
    assert_eq!(c.validate().unwrap().software_drain, DrainSignal::Enforce);
    // ... unless the knob says otherwise.
    let c = get(&[
        ("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "300"),
        ("MC_ADAPTIVE_CC_SOFTWARE_DRAIN", " Advisory "),
    ]);
    assert_eq!(c.software_drain, Some(DrainSignal::Advisory));
    assert_eq!(c.drain_signal(rxe), DrainSignal::Advisory);
    // The knob alone: the old behaviour (enforced on software providers).
    let c = get(&[("MC_ADAPTIVE_CC_SOFTWARE_DRAIN", "enforce")]);
    assert_eq!(c.target_mode, TargetMode::Adaptive);
    assert_eq!(
        c.drain_signal(Some(SoftwareProvider::Siw)),
        DrainSignal::Enforce
    );
    // Hardware is never advisory, whatever the knob says.
    let c = get(&[("MC_ADAPTIVE_CC_SOFTWARE_DRAIN", "advisory")]);
    assert_eq!(c.drain_signal(None), DrainSignal::Enforce);
    // A bad value is a typed error naming the variable, never a default.
    for bad in ["", "off", "advise", "1"] {
        assert_eq!(
            CcConfig::from_lookup(lookup(&[("MC_ADAPTIVE_CC_SOFTWARE_DRAIN", bad)])),
            Err(ConfigError::InvalidSoftwareDrain),
            "{bad:?}"
        );
    }
    assert!(ConfigError::InvalidSoftwareDrain
        .to_string()
        .contains("MC_ADAPTIVE_CC_SOFTWARE_DRAIN"));
    assert_eq!(
        Param::SoftwareDrain.env_name(),
        "MC_ADAPTIVE_CC_SOFTWARE_DRAIN"
    );
    assert!(Param::ALL.contains(&Param::SoftwareDrain));
    for s in [DrainSignal::Enforce, DrainSignal::Advisory] {
        assert_eq!(DrainSignal::parse(s.as_str()), Ok(s));
    }
}

#[test]
fn software_providers_are_recognised_by_vendor_id() {
    // RXE_VENDOR_ID (rxe_param.h) and SIW_VENDOR_ID (siw.h).
    assert_eq!(
        SoftwareProvider::from_vendor_id(0x00FF_FFFF),
        Some(SoftwareProvider::Rxe)
    );
    assert_eq!(
        SoftwareProvider::from_vendor_id(0x0062_6D74),
        Some(SoftwareProvider::Siw)
    );
    assert_eq!(SoftwareProvider::Rxe.name(), "rxe");
    assert_eq!(SoftwareProvider::Siw.name(), "siw");
    // Hardware (Mellanox/NVIDIA 0x02c9, Broadcom 0x14e4, Intel 0x8086),
    // the pre-vendor-id rxe's 0 and neighbours of the software ids are not.
    for v in [
        0x02c9,
        0x14e4,
        0x8086,
        0,
        0x00FF_FFFE,
        0x0100_0000,
        0x0062_6D75,
        u32::MAX,
    ] {
        assert_eq!(SoftwareProvider::from_vendor_id(v), None, "{v:#x}");
    }
}

// ---- adaptive drain target ----

#[test]
fn drain_time_of_an_epoch() {
    assert_eq!(drain_time_ns(0, 10, 1_000), None, "empty: no sample");
    assert_eq!(drain_time_ns(10, 10, 0), None, "no epoch length: no sample");
    assert_eq!(
        drain_time_ns(10, 0, 1_000),
        Some(u64::MAX),
        "drained nothing"
    );
    assert_eq!(drain_time_ns(2_000, 1_000, 1_000), Some(2_000));
    assert_eq!(
        drain_time_ns(u64::MAX, 1, u64::MAX),
        Some(u64::MAX),
        "saturates"
    );
}

#[test]
fn threshold_is_the_target_until_a_base_and_then_1_125_base_over_beta() {
    let fixed = CcConfig {
        target_drain_us: 200,
        target_mode: TargetMode::Fixed,
        ..CcConfig::default()
    }
    .validate()
    .unwrap();
    let adaptive = CcConfig {
        target_drain_us: 200,
        ..CcConfig::default()
    }
    .validate()
    .unwrap();
    assert_eq!(pressure_threshold_ns(&fixed, Some(3_000_000)), 200_000);
    assert_eq!(pressure_threshold_ns(&adaptive, None), 200_000);
    // Default decrease 50%: 2.25x the base.
    assert_eq!(pressure_threshold_ns(&adaptive, Some(3_000_000)), 6_750_000);
    // A base below target / 2.25 leaves the RFC threshold.
    assert_eq!(pressure_threshold_ns(&adaptive, Some(88_000)), 200_000);
    assert_eq!(pressure_threshold_ns(&adaptive, Some(90_000)), 202_500);
    let gentle = CcConfig {
        decrease_percent: 80,
        ..CcConfig::default()
    }
    .validate()
    .unwrap();
    assert_eq!(pressure_threshold_ns(&gentle, Some(4_000_000)), 5_625_000);
    assert_eq!(pressure_threshold_ns(&adaptive, Some(u64::MAX)), u64::MAX);
}

#[test]
fn base_drain_is_a_windowed_minimum_that_never_expires_unreplaced() {
    let mut b = BaseDrain::default();
    assert_eq!(b.base(), None);
    b.sample(5_000, 0);
    b.sample(3_000, 10);
    b.sample(4_000, 20);
    assert_eq!(b.base(), Some(3_000));
    // No samples for a long time: the base stays.
    b.sample(9_000, 100 * BASE_PERIOD_NS);
    assert_eq!(b.base(), Some(3_000), "the previous period still counts");
    b.sample(8_000, 101 * BASE_PERIOD_NS);
    assert_eq!(b.base(), Some(8_000), "re-learned: the path got slower");
    b.sample(0, 101 * BASE_PERIOD_NS + 1);
    assert_eq!(b.base(), Some(1), "zero is a sample, not 'none'");
    b.clear();
    assert_eq!(b.base(), None);
}

#[test]
fn env_parsing_rejects_bad_values_without_defaulting() {
    assert_eq!(
        CcConfig::from_lookup(lookup(&[("MC_ADAPTIVE_CC_MODE", "on")])),
        Err(ConfigError::InvalidMode)
    );
    assert_eq!(
        CcConfig::from_lookup(lookup(&[("MC_ADAPTIVE_CC_COOLDOWN_MS", "-1")])),
        Err(ConfigError::NotANumber(Param::CooldownMs))
    );
    assert_eq!(
        CcConfig::from_lookup(lookup(&[("MC_ADAPTIVE_CC_HARD_ERROR_THRESHOLD", "70000")])),
        Err(ConfigError::TooLarge(Param::HardErrorThreshold))
    );
    assert_eq!(
        CcConfig::from_lookup(lookup(&[(
            "MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES",
            "999999999"
        )])),
        Err(ConfigError::ProbeAboveMin {
            probe: 999_999_999,
            min: 256 * 1024
        })
    );
}
