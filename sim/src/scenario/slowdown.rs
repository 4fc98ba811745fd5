//! `slowdown`: 16 senders, a 5 ms consumer slowdown, capacity 64 (RFC 2849).
//!
//! Same shape as `incast`, but every transfer spends 5 ms more in the
//! receiver's consumer (a commit latency: consumers work in parallel), so
//! the occupancy a fixed window produces is throughput × 5 ms.

use super::{ab_figures, incast, AbRow, Opts, Outcome};
use crate::model::{ReceiverConfig, RunResult, Sim, Slowdown};
use crate::report::{delta_pct, us, Table};
use railyard_core::time::NS_PER_MS;

/// Receiver slots.
pub const CAPACITY: u32 = 64;

/// Runs fixed vs credit.
pub fn run(o: &Opts) -> Outcome {
    let mut out = Outcome::new("slowdown");
    let n = o.senders.unwrap_or(16);
    let mut t = Table::new(
        &format!("slowdown: {n} senders, 5 ms consumer slowdown, {CAPACITY}-slot cap"),
        &[
            "Arm",
            "Peak / violations",
            "Throughput",
            "Mean P99",
            "Worst P99",
            "Jain",
        ],
    );
    let mut figs = vec![];
    let mut runs: Vec<(&str, RunResult)> = vec![];
    for credit in [false, true] {
        let mut cfg = incast::config(n, credit, o);
        cfg.receivers = vec![ReceiverConfig {
            slot_capacity: CAPACITY,
            byte_capacity: u64::from(CAPACITY) * incast::TRANSFER,
            slowdown: Some(Slowdown {
                start_ns: 0,
                end_ns: u64::MAX,
                extra_ns: 5 * NS_PER_MS,
            }),
            ..cfg.receivers[0].clone()
        }];
        cfg.duration_ns = o.duration_ms.unwrap_or(200) * NS_PER_MS;
        let r = Sim::new(cfg.clone()).expect("valid config").run();
        let arm = if credit { "credit" } else { "fixed" };
        let f = ab_figures(&r, &cfg);
        out.run_invariants(arm, &r);
        if credit {
            out.check(
                "credit: capacity never exceeded",
                f.peak <= CAPACITY && f.violations == 0,
                format!("peak {} violations {}", f.peak, f.violations),
            );
        }
        t.row(vec![
            arm.into(),
            format!("{} / {}", f.peak, f.violations),
            format!("{:.3} GB/s", f.gbps),
            us(f.mean_p99),
            us(f.worst_p99),
            format!("{:.6}", f.jain),
        ]);
        out.row(AbRow::new(n, arm, o, CAPACITY, &f, &r));
        runs.push((arm, r));
        figs.push(f);
    }
    out.check(
        "fixed exceeds capacity under slowdown (RFC shape)",
        figs[0].peak > CAPACITY,
        format!("fixed peak {}", figs[0].peak),
    );
    t.notes.push(format!(
        "credit vs fixed throughput {:+.2}%",
        delta_pct(figs[0].gbps, figs[1].gbps)
    ));
    out.tables.push(t);
    out.figure = incast::figure(
        &format!(
            "slowdown: {n} senders, +5 ms consumer commit, {CAPACITY}-slot receiver, fixed vs credit (seed {})",
            o.seed
        ),
        &runs,
        CAPACITY,
    );
    out.summary = format!(
        "fixed peak {}/{CAPACITY} ({} viol.), credit {}/{CAPACITY} ({} viol.), thr {:+.2}%",
        figs[0].peak,
        figs[0].violations,
        figs[1].peak,
        figs[1].violations,
        delta_pct(figs[0].gbps, figs[1].gbps)
    );
    out
}
