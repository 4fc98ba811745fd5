//! `cc`: the shared congestion controller (RFC 4162) in the fabric.
//!
//! * incast with the controller off vs enforce (switch queue peak,
//!   throughput);
//! * a healthy bulk run, where enforce must stay within 3% of off;
//! * a route-failure timeline (SUSPECT → QUARANTINED → PROBING → HEALTHY);
//! * a multi-NIC failure (port down + device fatal on one host).

use serde::Serialize;

use super::{series_ms, Opts, Outcome};
use crate::model::{
    Arrivals, Fault, FaultKind, NetConfig, ReceiverConfig, RunResult, Sim, SimConfig, Stream,
};
use crate::plot::{Figure, Line, Panel, Span};
use crate::report::Table;
use crate::report::{percentile, us};
use crate::stack::HealthChange;
use crate::stack::StackConfig;
use railyard_core::cc::{health::arrow_exists, CcConfig, Health, Mode};
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
pub fn route_failure_config(o: &Opts, cc: CcConfig) -> SimConfig {
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
        // The fault timeline is fixed: never shorter than 80 ms.
        duration_ns: o.duration_ms.unwrap_or(80).max(80) * NS_PER_MS,
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
pub fn multi_nic_config(o: &Opts, cc: CcConfig) -> SimConfig {
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
        // The fault timeline is fixed: never shorter than 60 ms.
        duration_ns: o.duration_ms.unwrap_or(60).max(60) * NS_PER_MS,
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

/// The controller configuration of an arm: RFC 4162 defaults, except a
/// 5 ms quarantine cooldown so the timeline fits a short run.
pub fn cc_config(mode: Mode) -> CcConfig {
    CcConfig {
        mode,
        cooldown_ms: 5,
        ..CcConfig::default()
    }
}

fn arm_name(cc: CcConfig) -> &'static str {
    match cc.mode {
        Mode::Off => "off",
        Mode::Observe => "observe",
        Mode::Enforce => "enforce",
    }
}

/// Incast under the controller: 16 senders, 256 KiB slices, a deep local
/// window (64 WRs), one receiver port.
pub fn incast_config(o: &Opts, cc: CcConfig) -> SimConfig {
    SimConfig {
        seed: o.seed,
        senders: o.senders.unwrap_or(16),
        receivers: vec![fast_receiver()],
        streams: vec![bulk_stream(4 << 20, 256 << 10, 4)],
        stack: StackConfig {
            window_ops: 64,
            cc,
            ..StackConfig::default()
        },
        duration_ns: o.duration_ms.unwrap_or(50) * NS_PER_MS,
        ..SimConfig::default()
    }
}

/// Healthy bulk: one sender, one receiver, 64 MiB transfers in 1 MiB
/// slices, 32 WRs of local window.
pub fn bulk_config(o: &Opts, cc: CcConfig) -> SimConfig {
    SimConfig {
        seed: o.seed,
        senders: 1,
        receivers: vec![fast_receiver()],
        streams: vec![bulk_stream(64 << 20, 1 << 20, 2)],
        stack: StackConfig {
            window_ops: 32,
            cc,
            ..StackConfig::default()
        },
        duration_ns: o.duration_ms.unwrap_or(50) * NS_PER_MS,
        ..SimConfig::default()
    }
}

fn series<'a>(r: &'a RunResult, name: &str) -> &'a [(u64, f64)] {
    &r.series
        .iter()
        .find(|s| s.name == name)
        .expect("known series")
        .points
}

fn name(h: Health) -> &'static str {
    match h {
        Health::Healthy => "HEALTHY",
        Health::Congested => "CONGESTED",
        Health::Suspect => "SUSPECT",
        Health::Quarantined => "QUARANTINED",
        Health::Probing => "PROBING",
    }
}

/// Whether `a → b` is one arrow of RFC 4162's diagram, or two (the
/// controller takes fatal evidence HEALTHY → SUSPECT → QUARANTINED inside
/// one call, so an observer between calls can see both arrows at once).
pub fn reachable_by_arrows(a: Health, b: Health) -> bool {
    const ALL: [Health; 5] = [
        Health::Healthy,
        Health::Congested,
        Health::Suspect,
        Health::Quarantined,
        Health::Probing,
    ];
    arrow_exists(a, b)
        || ALL
            .iter()
            .any(|&x| arrow_exists(a, x) && arrow_exists(x, b))
}

/// Whether `seq` occurs in order (not necessarily adjacent) in the
/// timeline of `route`.
pub fn has_sequence(t: &[HealthChange], route: u32, seq: &[Health]) -> bool {
    let mut i = 0;
    for c in t.iter().filter(|c| c.route == route) {
        if i < seq.len() && c.to == seq[i] {
            i += 1;
        }
    }
    i == seq.len()
}

fn transitions_ok(out: &mut Outcome, arm: &str, r: &RunResult) {
    let bad: Vec<String> = r
        .stack
        .timeline
        .iter()
        .filter(|c| !reachable_by_arrows(c.from, c.to))
        .map(|c| format!("{}->{}", name(c.from), name(c.to)))
        .collect();
    out.check(
        format!("{arm}: state transitions only along arrows that exist"),
        bad.is_empty() && r.stack.get("illegal_transitions") == 0.0,
        format!(
            "{} observed changes, {} not on the diagram [{}], controller CAS-level illegal {}",
            r.stack.timeline.len(),
            bad.len(),
            bad.join(", "),
            r.stack.get("illegal_transitions")
        ),
    );
}

/// RFC 4162 caller observability: every task that completed successfully
/// queries NORMAL at the end (its evidence was resolved).
fn task_checks(out: &mut Outcome, arm: &str, r: &RunResult) {
    let done: u64 = r.latencies.iter().flatten().map(|v| v.len() as u64).sum();
    out.check(
        format!("{arm}: every completed task queries NORMAL"),
        r.task_final[0] == done,
        format!(
            "{} of {done} completed tasks query NORMAL ({})",
            r.task_final[0],
            task_counts(&r.task_final)
        ),
    );
}

/// Runs every part.
pub fn run(o: &Opts) -> Outcome {
    let mut out = Outcome::new("cc");
    let arms = [cc_config(Mode::Off), cc_config(Mode::Enforce)];

    // 1. Incast, off vs enforce.
    let mut t = Table::new(
        &format!(
            "cc: {}-sender incast, 256 KiB slices, 64-WR local window (RFC 4162 incast)",
            o.senders.unwrap_or(16)
        ),
        &[
            "Arm",
            "Throughput",
            "Queue peak",
            "Queue mean 10ms+",
            "Queue peak 10ms+",
            "NIC pauses",
            "Mean transfer P99",
        ],
    );
    let mut inc = vec![];
    let mut incast_runs: Vec<(&str, RunResult)> = vec![];
    for &cc in &arms {
        let cfg = incast_config(o, cc);
        let r = Sim::new(cfg.clone()).expect("valid").run();
        let arm = arm_name(cc);
        out.run_invariants(&format!("incast {arm}"), &r);
        transitions_ok(&mut out, &format!("incast {arm}"), &r);
        let q = series(&r, "switch queue (max port)");
        let late: Vec<f64> = q
            .iter()
            .filter(|p| p.0 >= 10 * NS_PER_MS && p.0 <= cfg.duration_ns)
            .map(|p| p.1)
            .collect();
        let qmean = late.iter().sum::<f64>() / late.len().max(1) as f64;
        let qpeak_late = late.iter().cloned().fold(0.0, f64::max);
        let qpeak = r.port_peak[0] as f64 / f64::from(1u32 << 20);
        let p99s: Vec<f64> = r
            .latencies
            .iter()
            .map(|s| percentile(&s[0], 99.0) as f64)
            .collect();
        let mp99 = p99s.iter().sum::<f64>() / p99s.len().max(1) as f64;
        let g = gbps(&r, &cfg);
        t.row(vec![
            arm.into(),
            format!("{g:.2} GB/s"),
            format!("{qpeak:.2} MiB"),
            format!("{qmean:.2} MiB"),
            format!("{qpeak_late:.2} MiB"),
            format!("{}", r.pauses),
            us(mp99),
        ]);
        out.row(IncastRow {
            part: "incast",
            arm,
            seed: o.seed,
            senders: cfg.senders,
            throughput_gbytes_per_s: g,
            queue_peak_mib: qpeak,
            queue_mean_after_10ms_mib: qmean,
            queue_peak_after_10ms_mib: qpeak_late,
            nic_pauses: r.pauses,
            mean_sender_p99_us: mp99 / 1e3,
            cc_defers: r.stack.get("cc_defers") as u64,
            events: r.counters.events,
        });
        incast_runs.push((arm, r));
        inc.push((g, qmean));
    }
    out.check(
        "incast: enforce lowers the standing switch queue",
        inc[1].1 < inc[0].1,
        format!("mean queue {:.2} -> {:.2} MiB", inc[0].1, inc[1].1),
    );
    out.tables.push(t);

    // 2. Healthy bulk: enforce within 3% of off.
    let mut t = Table::new(
        "cc: healthy bulk, 1 sender, 1 MiB slices (RFC 4162 gate: enforce <= 3% below off)",
        &["Arm", "Throughput", "Delta vs off"],
    );
    let mut bulk = vec![];
    for &cc in &arms {
        let cfg = bulk_config(o, cc);
        let r = Sim::new(cfg.clone()).expect("valid").run();
        let arm = arm_name(cc);
        out.run_invariants(&format!("bulk {arm}"), &r);
        transitions_ok(&mut out, &format!("bulk {arm}"), &r);
        let g = gbps(&r, &cfg);
        bulk.push(g);
        t.row(vec![
            arm.into(),
            format!("{g:.3} GB/s"),
            format!("{:+.2}%", crate::report::delta_pct(bulk[0], g)),
        ]);
        out.row(BulkRow {
            part: "healthy-bulk",
            arm,
            seed: o.seed,
            throughput_gbytes_per_s: g,
            events: r.counters.events,
        });
    }
    out.check(
        "healthy bulk: enforce within 3% of off",
        bulk[1] >= bulk[0] * 0.97,
        format!("{:.3} vs {:.3} GB/s", bulk[0], bulk[1]),
    );
    out.tables.push(t);

    // 3. Route failure and its timeline.
    let mut t = Table::new(
        "cc: route failure (NIC0 route blackholed 10..40 ms, 2 NICs, cooldown 5 ms)",
        &[
            "Arm",
            "Throughput",
            "During fault",
            "RETRY_EXC / FLUSH",
            "Retries",
            "Failed transfers",
            "Endpoints retired",
            "Transfers > 1 ms / max",
            "Tasks seen CONGESTED / LONG_UNAVAIL.",
        ],
    );
    let mut timeline = Table::new("cc: route 0 timeline (enforce)", &["t (ms)", "from", "to"]);
    let mut route_runs: Vec<(&str, RunResult)> = vec![];
    let mut route_states = vec![];
    for &cc in &arms {
        let cfg = route_failure_config(o, cc);
        let r = Sim::new(cfg.clone()).expect("valid").run();
        let arm = arm_name(cc);
        out.run_invariants(&format!("route failure {arm}"), &r);
        let all: Vec<u64> = r.latencies[0][0].clone();
        let max = all.iter().copied().max().unwrap_or(0);
        let slow = all.iter().filter(|&&l| l > NS_PER_MS).count();
        transitions_ok(&mut out, &format!("route failure {arm}"), &r);
        t.row(vec![
            arm.into(),
            format!("{:.2} GB/s", gbps(&r, &cfg)),
            format!("{:.2} GB/s", phase_gbps(&r, 10, 40)),
            format!("{} / {}", r.counters.wc[12], r.counters.wc[5]),
            format!("{}", r.counters.retries),
            format!("{}", r.transfers_failed),
            format!("{}", r.counters.retired),
            format!("{slow} / {}", us(max as f64)),
            format!("{} / {}", r.task_worst[2], r.task_worst[3]),
        ]);
        task_checks(&mut out, &format!("route failure {arm}"), &r);
        out.row(RouteFailureRow {
            part: "route-failure",
            arm,
            seed: o.seed,
            throughput_gbytes_per_s: gbps(&r, &cfg),
            during_fault_gbytes_per_s: phase_gbps(&r, 10, 40),
            retry_exc_completions: r.counters.wc[12],
            flush_completions: r.counters.wc[5],
            retries: r.counters.retries,
            failed_transfers: r.transfers_failed,
            endpoints_retired: r.counters.retired,
            transfers_over_1ms: slow as u64,
            transfer_max_us: max as f64 / 1e3,
            tasks_seen_congested: r.task_worst[2],
            tasks_seen_long_unavailable: r.task_worst[3],
            health_changes: r.stack.timeline.len() as u64,
            events: r.counters.events,
        });
        if cc.mode == Mode::Enforce {
            for c in r.stack.timeline.iter().filter(|c| c.route == 0) {
                timeline.row(vec![
                    format!("{:.3}", c.at_ns as f64 / 1e6),
                    name(c.from).into(),
                    name(c.to).into(),
                ]);
                out.row(TimelineRow {
                    part: "route-timeline",
                    seed: o.seed,
                    t_ns: c.at_ns,
                    route: c.route,
                    from: name(c.from),
                    to: name(c.to),
                });
            }
            let seq = [
                Health::Suspect,
                Health::Quarantined,
                Health::Probing,
                Health::Healthy,
            ];
            out.check(
                "route failure enforce: timeline SUSPECT -> QUARANTINED -> PROBING -> HEALTHY",
                has_sequence(&r.stack.timeline, 0, &seq),
                format!("{} changes on route 0", timeline.rows.len()),
            );
            out.check(
                "route failure enforce: nothing is posted on the quarantined path while NIC1 is usable",
                r.stack.get("posts_on_quarantined") == 0.0,
                format!("{} posts on a quarantined path", r.stack.get("posts_on_quarantined")),
            );
            out.check(
                "route failure enforce: the healthy route (NIC1) is never quarantined",
                r.stack
                    .timeline
                    .iter()
                    .all(|c| c.route != 1 || c.to != Health::Quarantined),
                "route 1",
            );
            route_states = spans(&r, 0, cfg.duration_ns);
        }
        route_runs.push((arm, r));
    }
    out.tables.push(t);
    out.tables.push(timeline);

    // 4. Multi-NIC failure.
    let mut t = Table::new(
        "cc: multi-NIC failure (4 NICs; NIC1 port down 10..30 ms, NIC2 fatal at 15 ms)",
        &[
            "Arm",
            "Before (0-10 ms)",
            "NIC1+2 out (15-30)",
            "After (35-60)",
            "NIC1 HEALTHY again",
            "Failed transfers",
            "Retries",
        ],
    );
    let mut multi_runs: Vec<(&str, RunResult)> = vec![];
    for &cc in &arms {
        let cfg = multi_nic_config(o, cc);
        let r = Sim::new(cfg.clone()).expect("valid").run();
        let arm = arm_name(cc);
        out.run_invariants(&format!("multi-NIC {arm}"), &r);
        task_checks(&mut out, &format!("multi-NIC {arm}"), &r);
        transitions_ok(&mut out, &format!("multi-NIC {arm}"), &r);
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
        let recovered = r
            .stack
            .timeline
            .iter()
            .find(|c| c.route == 1 && c.at_ns >= 30 * NS_PER_MS && c.to == Health::Healthy)
            .map(|c| c.at_ns);
        if cc.mode == Mode::Enforce {
            out.check(
                "multi-NIC enforce: the fatal device stays quarantined, the port's route recovers by probe",
                recovered.is_some()
                    && matches!(
                        r.stack.get("sender0_device2_health") as u8,
                        x if x == Health::Quarantined as u8 || x == Health::Probing as u8
                    ),
                format!(
                    "NIC1 healthy again at {}; NIC2 device state {}",
                    recovered.map_or("never".into(), |t| format!("{:.3} ms", t as f64 / 1e6)),
                    health_name(r.stack.get("sender0_device2_health") as u8)
                ),
            );
        }
        t.row(vec![
            arm.into(),
            format!("{b:.2} GB/s"),
            format!("{d:.2} GB/s"),
            format!("{a:.2} GB/s"),
            recovered.map_or("-".into(), |x| format!("{:.3} ms", x as f64 / 1e6)),
            format!("{}", r.transfers_failed),
            format!("{}", r.counters.retries),
        ]);
        out.row(MultiNicRow {
            part: "multi-nic",
            arm,
            seed: o.seed,
            before_gbytes_per_s: b,
            during_gbytes_per_s: d,
            after_gbytes_per_s: a,
            nic1_recovered_ns: recovered,
            failed_transfers: r.transfers_failed,
            retries: r.counters.retries,
            events: r.counters.events,
        });
        multi_runs.push((arm, r));
    }
    out.tables.push(t);
    out.figure = figure(o, &incast_runs, &route_runs, route_states, &multi_runs);
    out.summary = format!(
        "bulk enforce {:+.2}% vs off; incast mean queue {:.1} -> {:.1} MiB",
        crate::report::delta_pct(bulk[0], bulk[1]),
        inc[0].1,
        inc[1].1
    );
    out
}

/// JSON row: incast under the controller, one arm.
#[derive(Serialize)]
struct IncastRow {
    part: &'static str,
    arm: &'static str,
    seed: u64,
    senders: usize,
    throughput_gbytes_per_s: f64,
    queue_peak_mib: f64,
    queue_mean_after_10ms_mib: f64,
    queue_peak_after_10ms_mib: f64,
    nic_pauses: u64,
    mean_sender_p99_us: f64,
    cc_defers: u64,
    events: u64,
}

/// JSON row: healthy bulk, one arm.
#[derive(Serialize)]
struct BulkRow {
    part: &'static str,
    arm: &'static str,
    seed: u64,
    throughput_gbytes_per_s: f64,
    events: u64,
}

/// JSON row: the route failure, one arm.
#[derive(Serialize)]
struct RouteFailureRow {
    part: &'static str,
    arm: &'static str,
    seed: u64,
    throughput_gbytes_per_s: f64,
    during_fault_gbytes_per_s: f64,
    retry_exc_completions: u64,
    flush_completions: u64,
    retries: u64,
    failed_transfers: u64,
    endpoints_retired: u64,
    transfers_over_1ms: u64,
    transfer_max_us: f64,
    tasks_seen_congested: u64,
    tasks_seen_long_unavailable: u64,
    health_changes: u64,
    events: u64,
}

/// JSON row: one path-state change of route 0 (enforce).
#[derive(Serialize)]
struct TimelineRow {
    part: &'static str,
    seed: u64,
    t_ns: u64,
    route: u32,
    from: &'static str,
    to: &'static str,
}

/// JSON row: the multi-NIC failure, one arm (`nic1_recovered_ns` is null
/// when NIC1 never went back to HEALTHY).
#[derive(Serialize)]
struct MultiNicRow {
    part: &'static str,
    arm: &'static str,
    seed: u64,
    before_gbytes_per_s: f64,
    during_gbytes_per_s: f64,
    after_gbytes_per_s: f64,
    nic1_recovered_ns: Option<u64>,
    failed_transfers: u64,
    retries: u64,
    events: u64,
}

/// `NORMAL 10, UNKNOWN 0, CONGESTED 3, LONG_UNAVAILABLE 0`.
fn task_counts(c: &[u64; 4]) -> String {
    format!(
        "NORMAL {}, UNKNOWN {}, CONGESTED {}, LONG_UNAVAILABLE {}",
        c[0], c[1], c[2], c[3]
    )
}

/// The name of a path state stored as its `u8` value.
fn health_name(v: u8) -> &'static str {
    [
        Health::Healthy,
        Health::Congested,
        Health::Suspect,
        Health::Quarantined,
        Health::Probing,
    ]
    .into_iter()
    .find(|h| *h as u8 == v)
    .map_or("?", name)
}

/// Path-state colours: green (healthy) to red (quarantined), blue probing.
const STATE_COLOURS: [(&str, (u8, u8, u8)); 5] = [
    ("HEALTHY", (0x2c, 0xa0, 0x2c)),
    ("CONGESTED", (0xe6, 0xb4, 0x00)),
    ("SUSPECT", (0xff, 0x7f, 0x0e)),
    ("QUARANTINED", (0xd6, 0x27, 0x28)),
    ("PROBING", (0x94, 0x67, 0xbd)),
];

/// The states of sender 0's `route` over `[0, end_ns)`, in ms (it starts
/// HEALTHY; each observed change starts a new span).
fn spans(r: &RunResult, route: u32, end_ns: u64) -> Vec<Span> {
    let ms = |t: u64| t as f64 / 1e6;
    let mut out = vec![];
    let (mut from, mut state) = (0u64, Health::Healthy);
    for c in r
        .stack
        .timeline
        .iter()
        .filter(|c| c.sender == 0 && c.route == route)
    {
        if c.at_ns > from {
            out.push(Span {
                state: name(state).into(),
                from: ms(from),
                to: ms(c.at_ns),
            });
        }
        from = c.at_ns.max(from);
        state = c.to;
    }
    out.push(Span {
        state: name(state).into(),
        from: ms(from),
        to: ms(end_ns.max(from)),
    });
    out
}

/// The latest end of `runs` in ms, at least `min`.
fn end_ms(runs: &[(&str, RunResult)], min: f64) -> f64 {
    runs.iter()
        .map(|(_, r)| r.end_ns as f64 / 1e6)
        .fold(min, f64::max)
}

/// A panel with `series` of every run but arm `except`, overlaid.
fn overlay(
    title: &str,
    unit: &str,
    runs: &[(&str, RunResult)],
    series: &str,
    except: Option<&str>,
) -> Panel {
    runs.iter()
        .filter(|(arm, _)| Some(*arm) != except)
        .fold(Panel::lines(title, unit), |p, (arm, r)| {
            p.line(Line::new(*arm, series_ms(r, series)))
        })
}

/// The cc figure: incast queue and in-flight (off vs enforce), the
/// enforce window, the route failure's throughput with its fault window
/// and route 0's path state as a band, the multi-NIC failure's
/// throughput.
fn figure(
    o: &Opts,
    incast: &[(&str, RunResult)],
    route: &[(&str, RunResult)],
    states: Vec<Span>,
    multi: &[(&str, RunResult)],
) -> Figure {
    let mut f = Figure::new(format!(
        "cc (RFC 4162): controller off vs enforce (seed {})",
        o.seed
    ));
    let n = o.senders.unwrap_or(16);
    f.push(overlay(
        &format!("{n}-sender incast: switch queue, fullest port"),
        "MiB",
        incast,
        "switch queue (max port)",
        None,
    ));
    f.push(overlay(
        &format!("{n}-sender incast: bytes in flight (all senders)"),
        "MiB",
        incast,
        "in-flight",
        None,
    ));
    let min_window = cc_config(Mode::Enforce).min_window_bytes as f64 / f64::from(1u32 << 20);
    f.push(
        overlay(
            &format!(
                "{n}-sender incast: cc byte window of sender 0, route 0 (enforce; off has none)"
            ),
            "MiB (log scale)",
            incast,
            "cc window, sender 0 route 0",
            Some("off"),
        )
        .reference(
            format!("minimum window ({} KiB)", (min_window * 1024.0) as u64),
            min_window,
        )
        .log_y(),
    );
    let end = end_ms(route, 80.0);
    f.push(
        overlay(
            "route failure (2 NICs): receiver throughput",
            "GB/s",
            route,
            "receiver throughput",
            None,
        )
        .window("NIC0 route blackholed (10-40 ms)", 10.0, 40.0)
        .x_range(0.0, end),
    );
    f.push(
        Panel::states(
            "route failure (enforce): path state of NIC0's route",
            states,
            &STATE_COLOURS,
        )
        .x_range(0.0, end),
    );
    let end = end_ms(multi, 60.0);
    f.push(
        overlay(
            "multi-NIC failure (4 NICs): receiver throughput",
            "GB/s",
            multi,
            "receiver throughput",
            None,
        )
        .window("NIC1 port down (10-30 ms)", 10.0, 30.0)
        .window("NIC2 device fatal (from 15 ms)", 15.0, end)
        .x_range(0.0, end),
    );
    f
}
