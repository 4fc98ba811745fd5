//! Every scenario's invariants: credit capacity never exceeded; every
//! token, slice, permit, rail charge and credit released at the end; path
//! states change only along the arrows of RFC 4162's diagram.

use railyard_core::cc::{health::arrow_exists, Health};
use railyard_sim::model::Sim;
use railyard_sim::scenario::{self, cc, incast, Opts};

fn opts(ms: u64) -> Opts {
    Opts {
        duration_ms: Some(ms),
        ..Opts::default()
    }
}

fn assert_all_ok(name: &str, o: &Opts) -> scenario::Outcome {
    let out = scenario::run(name, o).expect("known");
    let failed: Vec<_> = out.checks.iter().filter(|c| !c.ok).collect();
    assert!(failed.is_empty(), "{name}: failed checks {failed:#?}");
    assert!(!out.checks.is_empty(), "{name}: no checks ran");
    out
}

#[test]
fn incast_credit_holds_capacity_and_fixed_does_not() {
    for n in [1usize, 4, 16] {
        let o = Opts {
            senders: Some(n),
            ..opts(30)
        };
        for credit in [false, true] {
            let cfg = incast::config(n, credit, &o);
            let r = Sim::new(cfg).unwrap().run();
            assert!(r.leaks.is_clean(), "{n} {credit}: {:?}", r.leaks);
            assert_eq!(r.transfers_failed, 0);
            let rx = &r.rx[0];
            if credit {
                assert!(
                    rx.peak_slots <= incast::CAPACITY,
                    "{n}: peak {}",
                    rx.peak_slots
                );
                assert_eq!(rx.violations, 0);
                assert!(rx.peak_bytes <= u64::from(incast::CAPACITY) * incast::TRANSFER);
            } else if n == 16 {
                // The checker can fail: without credit it sees violations.
                assert!(rx.peak_slots > incast::CAPACITY);
                assert!(rx.violations > 0);
            }
            assert!(rx.consumed > 0);
        }
    }
    assert_all_ok("incast", &opts(30));
}

#[test]
fn slowdown_credit_holds_capacity() {
    let out = assert_all_ok("slowdown", &opts(60));
    assert!(out.rows.iter().any(|r| r["arm"] == "credit"));
}

#[test]
fn cc_scenario_invariants_and_route_timeline() {
    let out = assert_all_ok("cc", &Opts::default());
    assert!(out.checks.iter().any(|c| c
        .name
        .contains("SUSPECT -> QUARANTINED -> PROBING -> HEALTHY")));
    // Independently of the scenario's own check: every observed change of
    // the route-failure run is one arrow, or two (fatal evidence).
    let r = Sim::new(cc::route_failure_config(
        &Opts::default(),
        cc::cc_config(railyard_core::cc::Mode::Enforce),
    ))
    .unwrap()
    .run();
    assert!(!r.stack.timeline.is_empty());
    for c in &r.stack.timeline {
        assert!(cc::reachable_by_arrows(c.from, c.to), "{c:?}");
    }
    assert!(cc::has_sequence(
        &r.stack.timeline,
        0,
        &[
            Health::Suspect,
            Health::Quarantined,
            Health::Probing,
            Health::Healthy
        ]
    ));
    assert_eq!(r.stack.get("illegal_transitions"), 0.0);
    assert!(r.leaks.is_clean());
    // The checker can fail.
    assert!(!cc::reachable_by_arrows(Health::Healthy, Health::Probing));
    assert!(!arrow_exists(Health::Quarantined, Health::Healthy));
}

#[test]
fn peer_feedback_invariants() {
    let out = assert_all_ok("peer-feedback", &opts(40));
    assert_eq!(out.rows.len(), 4);
}

#[test]
fn sim_all_runs_every_scenario_and_plots_each() {
    use clap::Parser as _;
    let dir = std::env::temp_dir().join(format!("railyard-sim-all-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let a = railyard_sim::cli::SimArgs::try_parse_from([
        "railyard sim",
        "all",
        "--duration-ms",
        "20",
        "--plot",
        dir.to_str().expect("utf-8 path"),
    ])
    .expect("valid arguments");
    let (mut out, mut err) = (vec![], vec![]);
    assert_eq!(railyard_sim::cli::run(&a, &mut out, &mut err), 0);
    let out = String::from_utf8(out).expect("utf-8");
    let err = String::from_utf8(err).expect("utf-8");
    for name in scenario::ALL {
        assert!(out.contains(&format!("ok   {name}")), "{out}");
        let svg =
            std::fs::read_to_string(dir.join(format!("{name}.svg"))).expect("one SVG per scenario");
        // Axes with units and a legend in every file.
        assert!(svg.contains("<svg") && svg.contains("<text"), "{name}");
        assert!(
            err.contains(&format!(
                "wrote {}",
                dir.join(format!("{name}.svg")).display()
            )),
            "{err}"
        );
    }
    let pf = std::fs::read_to_string(dir.join("peer-feedback.svg")).expect("svg");
    for label in ["baseline", "V1", "V2", "V3", "NIC0", "NIC1"] {
        assert!(pf.contains(label), "peer-feedback plot lacks {label}");
    }
    let cc = std::fs::read_to_string(dir.join("cc.svg")).expect("svg");
    for label in [
        "off",
        "enforce",
        "QUARANTINED",
        "HEALTHY",
        "time (ms)",
        "GB/s",
    ] {
        assert!(cc.contains(label), "cc plot lacks {label}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_real_core_layers_are_exercised() {
    use railyard_core::cc::Mode;
    // cc incast under enforce: the controller defers, the selector decides,
    // every permit and charge comes back.
    let o = opts(20);
    let r = Sim::new(cc::incast_config(&o, cc::cc_config(Mode::Enforce)))
        .unwrap()
        .run();
    assert!(r.stack.get("cc_defers") > 0.0);
    assert_eq!(r.stack.get("rail_decisions"), 0.0, "one NIC: no decision");
    assert_eq!(r.stack.get("release_errors"), 0.0);
    assert!(
        r.task_worst[2] > 0,
        "byte-window deferrals are task evidence"
    );
    assert!(r.leaks.is_clean(), "{:?}", r.leaks);
    // Two NICs: the selector decides, the controller quarantines the
    // failing path and the rail never chooses it while NIC1 is usable.
    let r = Sim::new(cc::route_failure_config(&o, cc::cc_config(Mode::Enforce)))
        .unwrap()
        .run();
    assert!(r.stack.get("rail_decisions") > 0.0);
    assert!(r
        .stack
        .timeline
        .iter()
        .any(|c| c.route == 0 && c.to == Health::Quarantined));
    assert_eq!(r.stack.get("posts_on_quarantined"), 0.0);
    assert!(r.leaks.is_clean(), "{:?}", r.leaks);
    // incast with credit: grants and usage reports flow through the real
    // ledger and allocator, and the allocator is whole at the end.
    let r = Sim::new(incast::config(16, true, &o)).unwrap().run();
    assert!(r.credit.grants > 0 && r.credit.usage_reports > 0 && r.credit.stalls > 0);
    assert_eq!(r.credit.errors, 0);
    assert_eq!(r.leaks.credit, 0);
    // every completion came back through HotPath::complete exactly once.
    let done: u64 = r.counters.wc.iter().sum();
    assert!(done > 0);
    assert_eq!(r.leaks.tokens, 0);
}
