//! `peer-feedback`: RFC 4534's two-peer experiment.
//!
//! One sender with two NICs; peer A (receiver 0) is healthy, peer B
//! (receiver 1) is a rate-limited slow destination that the topology only
//! reaches through NIC1 (a candidate rule: B's slices are charged to NIC1
//! without a decision). Both peers receive independent open-loop streams
//! of 2 MiB WRITEs in 64 KiB blocks (32 slices). A's slices are placed by
//! the selector over both NICs.
//!
//! Arms: ledger-disabled baseline, V1 (NIC in-flight + NIC EWMA, ledger
//! kept), V2 (NIC in-flight + peer EWMA), V3 (peer in-flight + peer EWMA).
//! The peer TTL is calibrated once from a V1 traced run (nearest-rank P99
//! of the maximum candidate sample age, rounded up to ms), as the RFC says.
//!
//! *Attribution error*: each epoch, the bandwidth estimate the arm's
//! scoring uses for A on NIC1 (NIC EWMA, or A's peer EWMA when V2/V3 have
//! fresh samples for every candidate) against an oracle EWMA of A's own
//! completions on NIC1; mean relative error.

use serde::Serialize;

use super::{Opts, Outcome};
use crate::model::{Arrivals, NetConfig, ReceiverConfig, RunResult, Sim, SimConfig, Stream};
use crate::plot::{Figure, Panel};
use crate::report::{percentile, us, Table};
use crate::stack::StackConfig;
use railyard_core::rail::{RailConfig, Variant};
use railyard_core::time::{NS_PER_MS, NS_PER_US};

/// One arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    /// Ledger disabled (peer accounting off).
    Baseline,
    /// Ledger on, this variant.
    Ledger(Variant),
}

impl Arm {
    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Baseline => "baseline",
            Arm::Ledger(Variant::V0) => "V0",
            Arm::Ledger(Variant::V1) => "V1",
            Arm::Ledger(Variant::V2) => "V2",
            Arm::Ledger(Variant::V3) => "V3",
        }
    }
}

/// The configuration of one arm (`ttl_ns` for V2/V3, `trace` for the
/// calibration run).
pub fn config(o: &Opts, arm: Arm, ttl_ns: u64, trace: bool) -> SimConfig {
    let rail = match arm {
        Arm::Baseline => RailConfig::default(),
        Arm::Ledger(v) => RailConfig {
            peer_accounting: true,
            variant: v,
            peer_ttl_ns: ttl_ns,
            trace,
            ..RailConfig::default()
        },
    };
    let stream = |rx, interval_ns, pin_nic| Stream {
        rx,
        transfer_bytes: 2 << 20,
        slice_bytes: 64 << 10,
        arrivals: Arrivals::Open { interval_ns },
        pin_nic,
    };
    let rx = ReceiverConfig {
        consumer_rate: 100_000_000_000,
        consumer_workers: u32::MAX,
        ..ReceiverConfig::default()
    };
    SimConfig {
        seed: o.seed,
        net: NetConfig {
            nics_per_host: 2,
            ..NetConfig::default()
        },
        senders: 1,
        receivers: vec![
            rx.clone(),
            ReceiverConfig {
                rate_limit: Some(5_000_000_000),
                ..rx
            },
        ],
        streams: vec![
            stream(0, 60 * NS_PER_US, None),
            stream(1, 500 * NS_PER_US, Some(1)),
        ],
        stack: StackConfig {
            window_ops: 512,
            rail,
            attribution: Some((1, 0)),
            ..StackConfig::default()
        },
        duration_ns: o.duration_ms.unwrap_or(100) * NS_PER_MS,
        ..SimConfig::default()
    }
}

fn lat(r: &RunResult, stream: usize) -> (f64, u64) {
    let v = &r.latencies[0][stream];
    let mean = v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    (mean, percentile(v, 99.0))
}

/// Runs baseline, V1, V2, V3.
pub fn run(o: &Opts) -> Outcome {
    let mut out = Outcome::new("peer-feedback");
    // TTL calibration from a traced V1 run.
    let cal = Sim::new(config(o, Arm::Ledger(Variant::V1), 10 * NS_PER_MS, true))
        .expect("valid")
        .run();
    out.run_invariants("V1 calibration", &cal);
    let ttl = cal.stack.get("calibrated_ttl_ns");
    out.check(
        "TTL calibrated from V1 non-cold decisions",
        ttl >= 1e6,
        format!("{ttl} ns, {} cold", cal.stack.get("calibration_cold")),
    );
    let ttl = if ttl >= 1e6 {
        ttl as u64
    } else {
        10 * NS_PER_MS
    };
    let mut t = Table::new(
        &format!(
            "peer-feedback: 2 MiB WRITEs in 64 KiB blocks; peer B slow (5 GB/s, NIC1 only); TTL {} ms",
            ttl / NS_PER_MS
        ),
        &[
            "Arm",
            "Attribution error",
            "A mean / P99",
            "B mean / P99",
            "A bytes on NIC1",
            "Fallbacks",
            "Missing / expired",
        ],
    );
    let arms = [
        Arm::Baseline,
        Arm::Ledger(Variant::V1),
        Arm::Ledger(Variant::V2),
        Arm::Ledger(Variant::V3),
    ];
    let mut res = vec![];
    let mut shares: Vec<(String, f64)> = vec![];
    for arm in arms {
        let cfg = config(o, arm, ttl, false);
        let r = Sim::new(cfg).expect("valid").run();
        out.run_invariants(arm.name(), &r);
        out.check(
            format!("{}: no peer or NIC accounting error", arm.name()),
            r.stack.get("rail_accounting_errors") == 0.0,
            format!("{}", r.stack.get("rail_accounting_errors")),
        );
        let (am, ap) = lat(&r, 0);
        let (bm, bp) = lat(&r, 1);
        let err = r.stack.get("attribution_error");
        let fb = r.stack.get("rail_fallbacks");
        let (miss, exp) = (
            r.stack.get("rail_missing_samples"),
            r.stack.get("rail_expired_samples"),
        );
        let share = r.stack.get("a_nic1_share");
        t.row(vec![
            arm.name().into(),
            format!("{:.2}%", err * 100.0),
            format!("{} / {}", us(am), us(ap as f64)),
            format!("{} / {}", us(bm), us(bp as f64)),
            format!("{:.1}%", share * 100.0),
            format!("{fb}"),
            format!("{miss} / {exp}"),
        ]);
        out.row(Row {
            arm: arm.name(),
            seed: o.seed,
            ttl_ns: ttl,
            attribution_error_fraction: err,
            a_mean_us: am / 1e3,
            a_p99_us: ap as f64 / 1e3,
            b_mean_us: bm / 1e3,
            b_p99_us: bp as f64 / 1e3,
            a_nic1_share_fraction: share,
            fallbacks: fb as u64,
            missing_samples: miss as u64,
            expired_samples: exp as u64,
            a_transfers: r.latencies[0][0].len() as u64,
            b_transfers: r.latencies[0][1].len() as u64,
            events: r.counters.events,
        });
        shares.push((arm.name().to_string(), share));
        res.push((arm, err, am, r));
    }
    out.check(
        "baseline and V1 decide identically (the ledger only costs, never steers)",
        res[0].2 == res[1].2,
        format!("A mean {:.0} vs {:.0} ns", res[0].2, res[1].2),
    );
    t.notes.push(
        "attribution error: |estimate used for A on NIC1 - oracle EWMA of A's own NIC1 completions| / oracle, mean over epochs".into(),
    );
    out.tables.push(t);
    let mut f = Figure::new(format!(
        "peer-feedback (RFC 4534): where the rail selector sends peer A's bytes (seed {})",
        o.seed
    ));
    f.push(Panel::stacked_bars(
        "peer A's bytes per NIC, per arm (peer B is slow and reachable only through NIC1)",
        "share of A's bytes",
        shares.iter().map(|(a, _)| a.clone()).collect(),
        vec![
            (
                "NIC0".into(),
                shares.iter().map(|(_, s)| (1.0 - s) * 100.0).collect(),
            ),
            (
                "NIC1 (shared with slow peer B)".into(),
                shares.iter().map(|(_, s)| s * 100.0).collect(),
            ),
        ],
    ));
    out.figure = f;
    out.summary = format!(
        "attribution error baseline {:.0}%, V1 {:.0}%, V2 {:.0}%, V3 {:.0}%",
        res[0].1 * 100.0,
        res[1].1 * 100.0,
        res[2].1 * 100.0,
        res[3].1 * 100.0
    );
    out
}

/// JSON row: one arm.
#[derive(Serialize)]
struct Row {
    arm: &'static str,
    seed: u64,
    ttl_ns: u64,
    /// Mean relative error of the estimate used for A on NIC1.
    attribution_error_fraction: f64,
    a_mean_us: f64,
    a_p99_us: f64,
    b_mean_us: f64,
    b_p99_us: f64,
    /// A's bytes on NIC1 / A's bytes.
    a_nic1_share_fraction: f64,
    fallbacks: u64,
    missing_samples: u64,
    expired_samples: u64,
    a_transfers: u64,
    b_transfers: u64,
    events: u64,
}
