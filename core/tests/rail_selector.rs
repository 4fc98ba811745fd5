//! Selector behaviour: scoring, allocation, probing, EWMA, charges and
//! config validation. Runs with and without `peer-feedback`.
#![cfg(feature = "alloc")]

use railyard_core::rail::{
    ConfigError, DeviceSpec, Outcome, RailCharge, RailConfig, RailError, Selector,
};
use railyard_core::token::{OptId, TokenRecord};

const GBPS: u64 = 1_000_000_000; // 1 GB/s nominal
const SLICE: u32 = 65536;
/// Latency of one slice at nominal rate.
const FAST_NS: u64 = 65_536;

fn no_probe() -> RailConfig {
    RailConfig {
        probe_interval: 0,
        ..RailConfig::default()
    }
}

#[test]
fn single_slice_goes_to_lowest_score() {
    let devs = [
        DeviceSpec::new(GBPS),
        DeviceSpec::new(2 * GBPS),
        DeviceSpec::new(2 * GBPS).with_tier_q8(768),
    ];
    let sel = Selector::new(&devs, no_probe()).unwrap();
    // Twice the bandwidth halves the score; tier 3.0 undoes it.
    let p = sel.pick(None, SLICE, 0);
    assert_eq!(p.charge.device(), 1);
    // Device 1 now has 64 KiB in flight: (64K+64K)/2G = 64K/1G → tie with
    // device 0, lowest index wins.
    let q = sel.pick(None, SLICE, 0);
    assert_eq!(q.charge.device(), 0);
    assert_eq!(sel.nic_inflight(0).unwrap(), u64::from(SLICE));
    assert_eq!(sel.nic_inflight(1).unwrap(), u64::from(SLICE));
    for c in [p.charge, q.charge] {
        sel.release(c, Outcome::Failed, 1).unwrap();
    }
    assert_eq!(
        sel.nic_inflight(0).unwrap() + sel.nic_inflight(1).unwrap() + sel.nic_inflight(2).unwrap(),
        0
    );
}

#[test]
fn multi_slice_split_is_proportional_with_remainder_to_best() {
    // 1:3 bandwidth → 8 and 24 of 32 slices.
    let sel = Selector::new(
        &[DeviceSpec::new(GBPS), DeviceSpec::new(3 * GBPS)],
        no_probe(),
    )
    .unwrap();
    let mut counts = [0u32; 2];
    let info = sel.plan(Some(1), 32, SLICE, 0, &mut counts).unwrap();
    assert_eq!(counts, [8, 24]);
    assert_eq!(info.best, 1);
    // Three equal devices: 10 each, remainder 2 to the best (index 0 on ties).
    let sel = Selector::new(&[DeviceSpec::new(GBPS); 3], no_probe()).unwrap();
    let mut counts = [7u32; 4];
    sel.plan(None, 32, SLICE, 0, &mut counts).unwrap();
    assert_eq!(
        counts,
        [12, 10, 10, 7],
        "only the first len() counts are written"
    );
    assert_eq!(
        sel.plan(None, 1, SLICE, 0, &mut [0u32; 2]),
        Err(RailError::CountsTooShort { need: 3 })
    );
}

#[test]
fn plan_charges_actual_slice_bytes() {
    // 2 MiB + 100 B in 64 KiB slices: 33 slices, the last one 100 bytes.
    let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], no_probe()).unwrap();
    let total: u64 = 2 * 1024 * 1024 + 100;
    let slices = total.div_ceil(u64::from(SLICE)) as u32;
    let mut counts = [0u32; 2];
    sel.plan(Some(4), slices, SLICE, 0, &mut counts).unwrap();
    assert_eq!(counts.iter().sum::<u32>(), 33);
    let mut left = total;
    let mut charges = Vec::new();
    for (d, &c) in counts.iter().enumerate() {
        for _ in 0..c {
            let b = left.min(u64::from(SLICE)) as u32;
            left -= u64::from(b);
            charges.push(sel.charge(d as u16, Some(4), b, 0).unwrap());
        }
    }
    assert_eq!(left, 0);
    assert_eq!(
        sel.nic_inflight(0).unwrap() + sel.nic_inflight(1).unwrap(),
        total
    );
    for c in charges {
        sel.release(c, Outcome::Completed { post_ns: 0 }, FAST_NS)
            .unwrap();
    }
    assert_eq!(
        sel.nic_inflight(0).unwrap() + sel.nic_inflight(1).unwrap(),
        0
    );
}

#[test]
fn every_nth_decision_probes_round_robin_within_the_bound() {
    let cfg = RailConfig {
        probe_interval: 4,
        probe_bound_q8: 512,
        ..RailConfig::default()
    };
    // Device 2 is 4x slower: outside a 2x bound, never probed.
    let devs = [
        DeviceSpec::new(GBPS),
        DeviceSpec::new(GBPS),
        DeviceSpec::new(GBPS / 4),
    ];
    let sel = Selector::new(&devs, cfg).unwrap();
    let mut probes = Vec::new();
    for i in 0..16 {
        let p = sel.pick(None, SLICE, 0);
        if p.probe {
            probes.push((i, p.charge.device()));
        } else {
            assert_eq!(p.charge.device(), 0, "decision {i} should be the best");
        }
        sel.release(p.charge, Outcome::Failed, 0).unwrap();
    }
    // Due at 3, 7, 11, 15; round-robin cursor 0,1,2,0. Cursor 0 is the best
    // (skipped) → 1; cursor 2 is out of bound → 0 (best) → 1.
    assert_eq!(probes, vec![(3, 1), (7, 1), (11, 1), (15, 1)]);
    assert_eq!(sel.counters().probes, 4);
    assert_eq!(sel.counters().decisions, 16);
}

#[test]
fn a_plan_probe_moves_one_slice_off_the_best() {
    let cfg = RailConfig {
        probe_interval: 1,
        ..RailConfig::default()
    };
    let sel = Selector::new(&[DeviceSpec::new(3 * GBPS), DeviceSpec::new(GBPS)], cfg).unwrap();
    let mut counts = [0u32; 2];
    let info = sel.plan(None, 4, SLICE, 0, &mut counts).unwrap();
    assert_eq!((info.best, info.probe), (0, Some(1)));
    assert_eq!(counts, [2, 2], "3:1 split is [3, 1]; the probe moves one");
}

#[test]
fn ewma_follows_completions_and_is_clamped_to_nominal_multiples() {
    let cfg = RailConfig {
        ewma_alpha_q16: 65536,
        ewma_floor_q8: 64,
        ewma_ceil_q8: 512,
        ..no_probe()
    };
    let sel = Selector::new(&[DeviceSpec::new(GBPS)], cfg).unwrap();
    assert_eq!(sel.nic_view(0).unwrap().bw, GBPS);
    let c = sel.charge(0, None, SLICE, 0).unwrap();
    sel.release(c, Outcome::Completed { post_ns: 0 }, 2 * FAST_NS)
        .unwrap();
    assert_eq!(sel.nic_view(0).unwrap().bw, GBPS / 2);
    let c = sel.charge(0, None, SLICE, 0).unwrap();
    sel.release(c, Outcome::Completed { post_ns: 0 }, 1000 * FAST_NS)
        .unwrap();
    assert_eq!(
        sel.nic_view(0).unwrap().bw,
        GBPS / 4,
        "floor is 64/256 of nominal"
    );
    let c = sel.charge(0, None, SLICE, 0).unwrap();
    sel.release(c, Outcome::Completed { post_ns: 0 }, 1)
        .unwrap();
    assert_eq!(
        sel.nic_view(0).unwrap().bw,
        2 * GBPS,
        "ceiling is 512/256 of nominal"
    );
    assert_eq!(sel.nic_sample_ns(0).unwrap(), 1);
    // A failure releases without a sample.
    let c = sel.charge(0, None, SLICE, 0).unwrap();
    sel.release(c, Outcome::Failed, 5).unwrap();
    assert_eq!(
        (sel.nic_view(0).unwrap().bw, sel.nic_sample_ns(0).unwrap()),
        (2 * GBPS, 1)
    );
}

#[test]
fn charge_round_trips_through_the_token_record_exactly_once() {
    let sel = Selector::new(&[DeviceSpec::new(GBPS); 2], no_probe()).unwrap();
    let mut rec = TokenRecord {
        post_ns: 10,
        ..TokenRecord::default()
    };
    sel.pick(Some(3), 1234, 10).charge.record_into(&mut rec);
    assert_eq!((rec.device, rec.bytes), (0, 1234));
    assert_ne!(rec.holds & TokenRecord::HOLDS_RAIL_CHARGE, 0);
    assert_eq!(sel.nic_inflight(0).unwrap(), 1234);
    sel.release_record(&mut rec, true, 20).unwrap();
    assert_eq!(sel.nic_inflight(0).unwrap(), 0);
    assert_eq!(rec.holds & TokenRecord::HOLDS_RAIL_CHARGE, 0);
    assert_eq!(
        sel.release_record(&mut rec, true, 30),
        Err(RailError::NotHeld)
    );
    assert!(RailCharge::take_from(&mut rec).is_none());
    assert_eq!(sel.nic_inflight(0).unwrap(), 0);
}

#[test]
fn forged_releases_are_refused_and_counted_never_wrapped() {
    let sel = Selector::new(&[DeviceSpec::new(GBPS)], no_probe()).unwrap();
    let real = sel.charge(0, None, 100, 0).unwrap();
    let mut rec = TokenRecord {
        device: 0,
        bytes: 500,
        holds: TokenRecord::HOLDS_RAIL_CHARGE,
        ..Default::default()
    };
    assert_eq!(
        sel.release_record(&mut rec, false, 0),
        Err(RailError::NicUnderflow {
            device: 0,
            bytes: 500
        })
    );
    assert_eq!(sel.nic_inflight(0).unwrap(), 100);
    let mut rec = TokenRecord {
        device: 9,
        bytes: 1,
        holds: TokenRecord::HOLDS_RAIL_CHARGE,
        ..Default::default()
    };
    assert_eq!(
        sel.release_record(&mut rec, false, 0),
        Err(RailError::UnknownDevice { device: 9 })
    );
    assert_eq!(
        sel.charge(1, None, 1, 0),
        Err(RailError::UnknownDevice { device: 1 })
    );
    assert_eq!(sel.counters().nic_accounting_errors, 2);
    sel.release(real, Outcome::Failed, 0).unwrap();
    assert_eq!(sel.nic_inflight(0).unwrap(), 0);
}

#[test]
fn a_peer_accounting_error_never_strands_the_nic_charge() {
    // A record naming a peer charge that this selector never took.
    let sel = Selector::new(&[DeviceSpec::new(GBPS)], no_probe()).unwrap();
    let mut real = TokenRecord::default();
    sel.charge(0, Some(5), 700, 0)
        .unwrap()
        .record_into(&mut real);
    assert_eq!(real.peer, None, "flag off: the peer is not charged");
    let mut forged = TokenRecord {
        peer: OptId::some(5),
        holds: real.holds | TokenRecord::HOLDS_RAIL_PEER_CHARGE,
        ..real
    };
    let err = sel.release_record(&mut forged, true, 10).unwrap_err();
    assert!(
        matches!(
            err,
            RailError::PeerAccounting {
                device: 0,
                peer: 5,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        sel.nic_inflight(0).unwrap(),
        0,
        "NIC released despite the peer error"
    );
    assert_eq!(sel.counters().peer_accounting_errors, 1);
}

#[test]
fn config_is_validated_with_typed_errors() {
    let d = [DeviceSpec::new(GBPS)];
    let bad = |cfg: RailConfig| Selector::new(&d, cfg).unwrap_err();
    assert_eq!(
        Selector::new(&[], RailConfig::default()).unwrap_err(),
        ConfigError::NoDevices
    );
    assert_eq!(
        Selector::new(&[DeviceSpec::new(0)], RailConfig::default()).unwrap_err(),
        ConfigError::ZeroNominal { device: 0 }
    );
    assert_eq!(
        Selector::new(&[DeviceSpec::new(1).with_tier_q8(0)], RailConfig::default()).unwrap_err(),
        ConfigError::ZeroTierWeight { device: 0 }
    );
    assert_eq!(
        Selector::new(&[DeviceSpec::new(1); 65], RailConfig::default()).unwrap_err(),
        ConfigError::TooManyDevices { count: 65 }
    );
    assert_eq!(
        bad(RailConfig {
            probe_interval: 6,
            ..Default::default()
        }),
        ConfigError::ProbeIntervalNotPowerOfTwo { interval: 6 }
    );
    assert_eq!(
        bad(RailConfig {
            probe_bound_q8: 255,
            ..Default::default()
        }),
        ConfigError::ProbeBoundBelowOne { bound_q8: 255 }
    );
    assert_eq!(
        bad(RailConfig {
            ewma_alpha_q16: 0,
            ..Default::default()
        }),
        ConfigError::AlphaOutOfRange { alpha_q16: 0 }
    );
    assert_eq!(
        bad(RailConfig {
            ewma_floor_q8: 300,
            ..Default::default()
        }),
        ConfigError::ClampInverted {
            floor_q8: 300,
            ceil_q8: 256
        }
    );
    let on = RailConfig {
        peer_accounting: true,
        ..Default::default()
    };
    if cfg!(feature = "peer-feedback") {
        assert_eq!(
            bad(RailConfig {
                peer_slots: 48,
                ..on
            }),
            ConfigError::PeerSlotsNotPowerOfTwo { slots: 48 }
        );
        assert_eq!(
            bad(RailConfig {
                history_target: 65,
                ..on
            }),
            ConfigError::HistoryTargetAboveSlots {
                target: 65,
                slots: 64
            }
        );
    } else {
        assert_eq!(bad(on), ConfigError::PeerFeedbackNotCompiled);
        assert!(!bad(on).to_string().is_empty());
    }
}

#[test]
fn flag_off_keeps_no_peer_state() {
    let sel = Selector::new(
        &[DeviceSpec::new(GBPS); 2],
        RailConfig {
            trace: true,
            ..no_probe()
        },
    )
    .unwrap();
    assert!(!sel.peer_accounting());
    let p = sel.pick(Some(0), SLICE, 5);
    assert_eq!(p.charge.peer(), None, "no peer charge with the flag off");
    assert_eq!(p.trace, None, "no peer ages to trace");
    assert_eq!(sel.peer_entries(0), 0);
    assert!(sel.peer_view(0, 0).is_none());
    sel.release(p.charge, Outcome::Completed { post_ns: 5 }, 100)
        .unwrap();
    assert_eq!(sel.reclaim_idle(u64::MAX), 0);
}

#[test]
fn selector_is_shareable_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Selector>();
    let sel = std::sync::Arc::new(Selector::new(&[DeviceSpec::new(GBPS); 2], no_probe()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let sel = sel.clone();
            std::thread::spawn(move || {
                for i in 0..1000u32 {
                    let p = sel.pick(Some(t), 1 + i % 4096, u64::from(i));
                    sel.release(
                        p.charge,
                        Outcome::Completed {
                            post_ns: u64::from(i),
                        },
                        u64::from(i) + 500,
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        sel.nic_inflight(0).unwrap() + sel.nic_inflight(1).unwrap(),
        0
    );
    assert_eq!(sel.counters().decisions, 4000);
}
