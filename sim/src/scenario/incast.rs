//! `incast`: N senders → one receiver with 8 slots (RFC 2849).
//!
//! 1, 4 and 16 senders; 4 MiB WRITE transfers (one WR each, "batch size
//! 1"); every sender keeps two transfers submitted behind a local window of
//! two WRs. Arm *fixed*: the local window only. Arm *credit*: the same
//! window AND receiver-advertised credit (lease batch 2), the receiver
//! granting from 8 slots / 32 MiB. The sender's timer starts at submission,
//! before credit acquisition (as in the RFC's corrected timer).

use super::{ab_figures, series_ms, AbFigures, AbRow, Opts, Outcome};
use crate::model::{Arrivals, ReceiverConfig, RunResult, Sim, SimConfig, Stream};
use crate::plot::{Figure, Line, Panel};
use crate::report::{delta_pct, us, Table};
use crate::stack::{CreditConfig, StackConfig};
use railyard_core::time::NS_PER_MS;

/// Receiver slots.
pub const CAPACITY: u32 = 8;
/// Transfer size.
pub const TRANSFER: u64 = 4 << 20;

/// The configuration of one arm.
pub fn config(senders: usize, credit: bool, o: &Opts) -> SimConfig {
    SimConfig {
        seed: o.seed,
        senders,
        receivers: vec![ReceiverConfig {
            slot_capacity: CAPACITY,
            byte_capacity: u64::from(CAPACITY) * TRANSFER,
            // Commit of one 4 MiB transfer: ~173 us, workers in parallel.
            consumer_rate: 25_000_000_000,
            consumer_workers: u32::MAX,
            consumer_overhead_ns: 5_000,
            ..ReceiverConfig::default()
        }],
        streams: vec![Stream {
            rx: 0,
            transfer_bytes: TRANSFER,
            slice_bytes: TRANSFER as u32,
            arrivals: Arrivals::Closed { outstanding: 2 },
            pin_nic: None,
        }],
        stack: StackConfig {
            window_ops: 2,
            credit: credit.then_some(CreditConfig { lease_batch: 2 }),
            ..StackConfig::default()
        },
        duration_ns: o.duration_ms.unwrap_or(100) * NS_PER_MS,
        ..SimConfig::default()
    }
}

/// Runs the sweep.
pub fn run(o: &Opts) -> Outcome {
    let mut out = Outcome::new("incast");
    let counts = o.senders.map_or(vec![1, 4, 16], |n| vec![n]);
    let mut cap = Table::new(
        "incast: receiver capacity (RFC 2849 'Direct capacity-safety evidence')",
        &[
            "Condition",
            "Configured capacity",
            "Fixed peak / violations",
            "Credit peak / violations",
        ],
    );
    let mut abs = vec![];
    let mut runs: Vec<(&str, RunResult)> = vec![];
    for &n in &counts {
        let mut figs: Vec<AbFigures> = vec![];
        for credit in [false, true] {
            let cfg = config(n, credit, o);
            let r = Sim::new(cfg.clone()).expect("valid config").run();
            let arm = if credit { "credit" } else { "fixed" };
            let f = ab_figures(&r, &cfg);
            out.run_invariants(&format!("{n} senders {arm}"), &r);
            if credit {
                out.check(
                    format!("{n} senders credit: capacity never exceeded"),
                    f.peak <= CAPACITY && f.violations == 0,
                    format!(
                        "peak {} / cap {CAPACITY}, violations {}",
                        f.peak, f.violations
                    ),
                );
            }
            out.row(AbRow::new(n, arm, o, CAPACITY, &f, &r));
            if n == *counts.last().expect("non-empty") {
                runs.push((arm, r));
            }
            figs.push(f);
        }
        let (fx, cr) = (figs[0], figs[1]);
        cap.row(vec![
            format!("{n}-sender incast"),
            format!("{CAPACITY} slots"),
            format!("{} / {}", fx.peak, fx.violations),
            format!("{} / {}", cr.peak, cr.violations),
        ]);
        if n > 1 && CAPACITY < 2 * n as u32 {
            out.check(
                format!("{n} senders: fixed window exceeds capacity (RFC shape)"),
                fx.peak > CAPACITY && fx.violations > 0,
                format!("fixed peak {} violations {}", fx.peak, fx.violations),
            );
        }
        out.check(
            format!("{n} senders: credit throughput within 1% of fixed (RFC shape)"),
            delta_pct(fx.gbps, cr.gbps) > -1.0,
            format!("{:.3} vs {:.3} GB/s", fx.gbps, cr.gbps),
        );
        abs.push((n, fx, cr));
    }
    cap.notes.push(
        "violations = WR arrivals that found the receiver above its slot or byte capacity".into(),
    );
    out.tables.push(cap);
    for (n, fx, cr) in &abs {
        let mut t = Table::new(
            &format!("incast: {n}-sender A/B, 4 MiB transfers, {CAPACITY}-slot cap, lease batch 2"),
            &["Metric", "Fixed", "Receiver credit", "Delta"],
        );
        t.row(vec![
            "Receiver throughput".into(),
            format!("{:.3} GB/s", fx.gbps),
            format!("{:.3} GB/s", cr.gbps),
            format!("{:+.2}%", delta_pct(fx.gbps, cr.gbps)),
        ]);
        t.row(vec![
            format!("Mean of {n} sender P99s"),
            us(fx.mean_p99),
            us(cr.mean_p99),
            format!("{:+.2}%", delta_pct(fx.mean_p99, cr.mean_p99)),
        ]);
        t.row(vec![
            "Worst-sender P99".into(),
            us(fx.worst_p99),
            us(cr.worst_p99),
            format!("{:+.2}%", delta_pct(fx.worst_p99, cr.worst_p99)),
        ]);
        t.row(vec![
            "Sender Jain fairness".into(),
            format!("{:.6}", fx.jain),
            format!("{:.6}", cr.jain),
            format!("{:+.6}", cr.jain - fx.jain),
        ]);
        out.tables.push(t);
    }
    let (n, fx, cr) = abs.last().expect("non-empty");
    out.figure = figure(
        &format!("incast: {n} senders, {CAPACITY}-slot receiver, fixed window vs receiver credit (seed {})", o.seed),
        &runs,
        CAPACITY,
    );
    out.summary = format!(
        "{n} senders: fixed peak {}/{CAPACITY} ({} viol.), credit {}/{CAPACITY} ({} viol.), thr {:+.2}%",
        fx.peak,
        fx.violations,
        cr.peak,
        cr.violations,
        delta_pct(fx.gbps, cr.gbps)
    );
    out
}

/// The A/B figure of incast and slowdown: receiver occupancy with the
/// capacity, in-flight bytes and the fullest switch port, both arms
/// overlaid in each panel.
pub(crate) fn figure(title: &str, runs: &[(&str, RunResult)], capacity: u32) -> Figure {
    let mut f = Figure::new(title);
    let panel = |title: &str, unit: &str, series: &str| {
        runs.iter().fold(Panel::lines(title, unit), |p, (arm, r)| {
            p.line(Line::new(*arm, series_ms(r, series)))
        })
    };
    f.push(
        panel("receiver occupancy", "occupied slots", "receiver occupancy").reference(
            format!("receiver capacity ({capacity} slots)"),
            f64::from(capacity),
        ),
    );
    f.push(panel("bytes in flight (all senders)", "MiB", "in-flight"));
    f.push(panel(
        "switch queue, fullest port",
        "MiB",
        "switch queue (max port)",
    ));
    f
}
