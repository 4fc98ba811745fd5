//! `cc`: the shared congestion controller (RFC 4162) in the fabric.
//!
//! * incast with the controller off vs enforce (switch queue peak,
//!   throughput);
//! * a healthy bulk run, where enforce must stay within 3% of off;
//! * a route-failure timeline (SUSPECT → QUARANTINED → PROBING → HEALTHY);
//! * a multi-NIC failure (port down + device fatal on one host).

use super::{tag, Opts, Outcome};
use crate::model::{
    Arrivals, Fault, FaultKind, NetConfig, ReceiverConfig, RunResult, Sim, SimConfig, Stream,
};
use crate::report::{JsonLine, Table};
use crate::stack::{CcSetting, StackConfig};
use railyard_core::time::NS_PER_MS;

fn bulk_stream(transfer: u64, slice: u32, outstanding: u32) -> Stream {
    Stream {
        rx: 0,
        transfer_bytes: transfer,
        slice_bytes: slice,
        arrivals: Arrivals::Closed { outstanding },
        pin_nic: None,
    }
}

fn fast_receiver() -> ReceiverConfig {
    ReceiverConfig {
        consumer_rate: 100_000_000_000,
        consumer_workers: u32::MAX,
        ..ReceiverConfig::default()
    }
}

/// The route-failure experiment: one sender with two NICs; route NIC0→rx0
/// blackholes for 30 ms from t = 10 ms.
pub fn route_failure_config(o: &Opts, cc: CcSetting) -> SimConfig {
    SimConfig {
        seed: o.seed,
        net: NetConfig {
            nics_per_host: 2,
            ..NetConfig::default()
        },
        senders: 1,
        receivers: vec![fast_receiver()],
        streams: vec![bulk_stream(1 << 20, 256 << 10, 8)],
        stack: StackConfig {
            window_ops: 16,
            cc,
            ..StackConfig::default()
        },
        duration_ns: o.duration_ms.unwrap_or(80) * NS_PER_MS,
        faults: vec![Fault {
            at_ns: 10 * NS_PER_MS,
            kind: FaultKind::RouteTimeout {
                sender: 0,
                nic: 0,
                rx: 0,
                dur_ns: 30 * NS_PER_MS,
            },
        }],
        ..SimConfig::default()
    }
}

/// The multi-NIC failure: one sender with four NICs; NIC1's port goes down
/// at 10 ms for 20 ms, NIC2 dies at 15 ms.
pub fn multi_nic_config(o: &Opts, cc: CcSetting) -> SimConfig {
    SimConfig {
        seed: o.seed,
        net: NetConfig {
            nics_per_host: 4,
            ..NetConfig::default()
        },
        senders: 1,
        receivers: vec![fast_receiver()],
        streams: vec![bulk_stream(4 << 20, 256 << 10, 4)],
        stack: StackConfig {
            window_ops: 32,
            cc,
            ..StackConfig::default()
        },
        duration_ns: o.duration_ms.unwrap_or(60) * NS_PER_MS,
        faults: vec![
            Fault {
                at_ns: 10 * NS_PER_MS,
                kind: FaultKind::PortDown {
                    sender: 0,
                    nic: 1,
                    dur_ns: 20 * NS_PER_MS,
                },
            },
            Fault {
                at_ns: 15 * NS_PER_MS,
                kind: FaultKind::DeviceFatal { sender: 0, nic: 2 },
            },
        ],
        ..SimConfig::default()
    }
}

fn gbps(r: &RunResult, cfg: &SimConfig) -> f64 {
    r.rx[0].consumed_in_window as f64 / (cfg.duration_ns as f64 / 1e9) / 1e9
}

fn phase_gbps(r: &RunResult, from_ms: u64, to_ms: u64) -> f64 {
    let s = r
        .series
        .iter()
        .find(|s| s.name == "receiver throughput")
        .expect("fabric series");
    let v: Vec<f64> = s
        .points
        .iter()
        .filter(|p| p.0 > from_ms * NS_PER_MS && p.0 <= to_ms * NS_PER_MS)
        .map(|p| p.1)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn arm_name(cc: CcSetting) -> &'static str {
    match cc {
        CcSetting::Off => "off",
    }
}

/// Runs every part.
pub fn run(o: &Opts) -> Outcome {
    let mut out = Outcome::new("cc");
    let arms = [CcSetting::Off];
    // Route failure.
    let mut t = Table::new(
        "cc: route failure (NIC0 route blackholed 10..40 ms, 2 NICs)",
        &[
            "Arm",
            "Throughput",
            "During fault",
            "RETRY_EXC / FLUSH",
            "Retries",
            "Failed transfers",
            "Endpoints retired",
        ],
    );
    for &cc in &arms {
        let cfg = route_failure_config(o, cc);
        let r = Sim::new(cfg.clone()).expect("valid").run();
        let arm = arm_name(cc);
        out.run_invariants(&format!("route failure {arm}"), &r);
        t.row(vec![
            arm.into(),
            format!("{:.2} GB/s", gbps(&r, &cfg)),
            format!("{:.2} GB/s", phase_gbps(&r, 10, 40)),
            format!("{} / {}", r.counters.wc[12], r.counters.wc[5]),
            format!("{}", r.counters.retries),
            format!("{}", r.transfers_failed),
            format!("{}", r.counters.retired),
        ]);
        out.json.push(
            JsonLine::new("cc")
                .s("part", "route-failure")
                .s("arm", arm)
                .i("seed", o.seed)
                .f("throughput_gbps", gbps(&r, &cfg))
                .f("during_fault_gbps", phase_gbps(&r, 10, 40))
                .i("retry_exc", r.counters.wc[12])
                .i("flush", r.counters.wc[5])
                .i("retries", r.counters.retries)
                .i("failed_transfers", r.transfers_failed)
                .i("events", r.counters.events),
        );
        out.series.extend(tag(
            &r.series,
            &format!("route failure {arm}"),
            &["in-flight", "receiver throughput"],
        ));
    }
    out.tables.push(t);
    // Multi-NIC failure.
    let mut t = Table::new(
        "cc: multi-NIC failure (4 NICs; NIC1 port down 10..30 ms, NIC2 fatal at 15 ms)",
        &[
            "Arm",
            "Before (0-10 ms)",
            "NIC1+2 out (15-30)",
            "After (35-60)",
            "Failed transfers",
            "Retries",
        ],
    );
    for &cc in &arms {
        let cfg = multi_nic_config(o, cc);
        let r = Sim::new(cfg.clone()).expect("valid").run();
        let arm = arm_name(cc);
        out.run_invariants(&format!("multi-NIC {arm}"), &r);
        let (b, d, a) = (
            phase_gbps(&r, 0, 10),
            phase_gbps(&r, 15, 30),
            phase_gbps(&r, 35, 60),
        );
        out.check(
            format!("multi-NIC {arm}: traffic continues on the surviving NICs"),
            d > 0.0 && a > 0.0,
            format!("{d:.2} / {a:.2} GB/s"),
        );
        t.row(vec![
            arm.into(),
            format!("{b:.2} GB/s"),
            format!("{d:.2} GB/s"),
            format!("{a:.2} GB/s"),
            format!("{}", r.transfers_failed),
            format!("{}", r.counters.retries),
        ]);
        out.json.push(
            JsonLine::new("cc")
                .s("part", "multi-nic")
                .s("arm", arm)
                .i("seed", o.seed)
                .f("before_gbps", b)
                .f("during_gbps", d)
                .f("after_gbps", a)
                .i("failed_transfers", r.transfers_failed)
                .i("retries", r.counters.retries)
                .i("events", r.counters.events),
        );
    }
    out.tables.push(t);
    out.summary = "fault handling through the real endpoint/token path".into();
    out
}
