//! The scenarios: each mirrors one RFC experiment and returns an
//! [`Outcome`]: RFC-shaped tables, JSON rows, a figure to plot, and the
//! invariant checks the integration tests assert.
//!
//! Units in JSON field names: `_ns`, `_us`, `_ms` (time), `_mib` (2^20
//! bytes), `_gbytes_per_s` (10^9 bytes per second), `_fraction` (0..=1);
//! a name without a unit is a count.

use serde::Serialize;

use crate::model::{RunResult, Series, SimConfig};
use crate::plot::Figure;
use crate::report::{jain, percentile, Table};

pub mod cc;
pub mod incast;
pub mod peer_feedback;
pub mod slowdown;

/// Options shared by every scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opts {
    /// Run only this sender count (scenarios with a sender sweep).
    pub senders: Option<usize>,
    /// Seed.
    pub seed: u64,
    /// Override the simulated duration, ms.
    pub duration_ms: Option<u64>,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            senders: None,
            seed: 1,
            duration_ms: None,
        }
    }
}

/// One invariant or expectation, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// Whether it held.
    pub ok: bool,
    /// Measured value(s).
    pub detail: String,
}

/// What a scenario produced.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Scenario name.
    pub name: String,
    /// Tables in the RFC's shape.
    pub tables: Vec<Table>,
    /// One JSON object per arm (and part): typed rows serialized by serde.
    pub rows: Vec<serde_json::Value>,
    /// What `--plot` draws.
    pub figure: Figure,
    /// Invariants (must hold) and RFC-shape expectations.
    pub checks: Vec<Check>,
    /// One line for `sim all`.
    pub summary: String,
    /// Events processed over all runs.
    pub events: u64,
    /// What could not be evaluated (missing core modules, say).
    pub missing: Vec<String>,
}

impl Outcome {
    pub(crate) fn new(name: &str) -> Outcome {
        Outcome {
            name: name.into(),
            ..Outcome::default()
        }
    }

    /// Adds a row (any `Serialize` struct) to the JSON output.
    pub(crate) fn row(&mut self, row: impl Serialize) {
        self.rows
            .push(serde_json::to_value(row).expect("a row struct serializes"));
    }

    pub(crate) fn check(&mut self, name: impl Into<String>, ok: bool, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            ok,
            detail: detail.into(),
        });
    }

    /// Whether every check held.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// Adds the invariants every run must satisfy.
    pub(crate) fn run_invariants(&mut self, arm: &str, r: &RunResult) {
        self.check(
            format!("{arm}: every token, slice, permit, charge and credit released"),
            r.leaks.is_clean(),
            r.leaks.to_string(),
        );
        self.check(
            format!("{arm}: no post refused by an endpoint table bug"),
            r.stack
                .values
                .iter()
                .all(|(k, v)| !k.starts_with("illegal") || *v == 0.0),
            "illegal transitions 0".to_string(),
        );
        self.events += r.counters.events;
    }

    /// The scenario as one JSON document: its options, whether every
    /// check held, the rows, the checks and what was not evaluated.
    ///
    /// ```
    /// use railyard_sim::scenario::{self, Opts};
    /// let o = Opts { senders: Some(1), duration_ms: Some(5), ..Opts::default() };
    /// let j = scenario::run("incast", &o).unwrap().to_json(&o);
    /// assert_eq!(j["scenario"], "incast");
    /// assert_eq!(j["ok"], true);
    /// assert!(j["checks"].as_array().unwrap().iter().all(|c| c["ok"] == true));
    /// assert!(j["rows"][0]["throughput_gbytes_per_s"].as_f64().unwrap() > 0.0);
    /// ```
    pub fn to_json(&self, o: &Opts) -> serde_json::Value {
        #[derive(Serialize)]
        struct Doc<'a> {
            scenario: &'a str,
            seed: u64,
            senders: Option<usize>,
            duration_ms: Option<u64>,
            ok: bool,
            summary: &'a str,
            events: u64,
            rows: &'a [serde_json::Value],
            checks: &'a [Check],
            not_evaluated: &'a [String],
        }
        serde_json::to_value(Doc {
            scenario: &self.name,
            seed: o.seed,
            senders: o.senders,
            duration_ms: o.duration_ms,
            ok: self.ok(),
            summary: &self.summary,
            events: self.events,
            rows: &self.rows,
            checks: &self.checks,
            not_evaluated: &self.missing,
        })
        .expect("the document serializes")
    }

    /// Renders the tables, checks and missing pieces as text.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for t in &self.tables {
            o.push_str(&t.render());
            o.push('\n');
        }
        for c in &self.checks {
            o.push_str(&format!(
                "[{}] {} ({})\n",
                if c.ok { "ok" } else { "FAIL" },
                c.name,
                c.detail
            ));
        }
        for m in &self.missing {
            o.push_str(&format!("[not evaluated] {m}\n"));
        }
        o
    }
}

/// Per-run figures in the RFC 2849 A/B shape.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AbFigures {
    /// Receiver throughput, GB/s (consumed bytes in the window).
    pub gbps: f64,
    /// Mean of per-sender P99 transfer latency, ns.
    pub mean_p99: f64,
    /// Worst sender's P99, ns.
    pub worst_p99: f64,
    /// Jain fairness over per-sender bytes.
    pub jain: f64,
    /// Receiver peak occupied slots.
    pub peak: u32,
    /// Capacity violations.
    pub violations: u64,
    /// Completed transfers.
    pub transfers: u64,
}

/// The JSON row of one arm of an RFC 2849 A/B scenario (incast, slowdown).
#[derive(Clone, Debug, Serialize)]
pub struct AbRow {
    /// Senders in the run.
    pub senders: usize,
    /// `fixed` (local window only) or `credit` (receiver credit too).
    pub arm: &'static str,
    /// Seed.
    pub seed: u64,
    /// Receiver slot capacity.
    pub capacity_slots: u32,
    /// Receiver peak occupied slots.
    pub peak_slots: u32,
    /// WR arrivals that found the receiver above its slot or byte capacity.
    pub violations: u64,
    /// Receiver throughput (consumed bytes in the window), 10^9 bytes/s.
    pub throughput_gbytes_per_s: f64,
    /// Mean over senders of each sender's P99 transfer latency, µs.
    pub mean_sender_p99_us: f64,
    /// The worst sender's P99 transfer latency, µs.
    pub worst_sender_p99_us: f64,
    /// Jain fairness over per-sender bytes (1 = fair).
    pub jain_fairness: f64,
    /// Completed transfers.
    pub transfers: u64,
    /// Failed transfers.
    pub failed_transfers: u64,
    /// Credit grants sent by the receiver.
    pub credit_grants: u64,
    /// Usage reports sent by the senders.
    pub credit_usage_reports: u64,
    /// Times a sender found no credit and had to wait.
    pub credit_stalls: u64,
    /// Simulator events processed.
    pub events: u64,
}

impl AbRow {
    pub(crate) fn new(
        senders: usize,
        arm: &'static str,
        o: &Opts,
        capacity: u32,
        f: &AbFigures,
        r: &RunResult,
    ) -> AbRow {
        AbRow {
            senders,
            arm,
            seed: o.seed,
            capacity_slots: capacity,
            peak_slots: f.peak,
            violations: f.violations,
            throughput_gbytes_per_s: f.gbps,
            mean_sender_p99_us: f.mean_p99 / 1e3,
            worst_sender_p99_us: f.worst_p99 / 1e3,
            jain_fairness: f.jain,
            transfers: f.transfers,
            failed_transfers: r.transfers_failed,
            credit_grants: r.credit.grants,
            credit_usage_reports: r.credit.usage_reports,
            credit_stalls: r.credit.stalls,
            events: r.counters.events,
        }
    }
}

/// Computes [`AbFigures`] of receiver 0 and stream 0.
pub fn ab_figures(r: &RunResult, cfg: &SimConfig) -> AbFigures {
    let secs = cfg.duration_ns as f64 / 1e9;
    let p99s: Vec<f64> = r
        .latencies
        .iter()
        .map(|s| percentile(&s[0], 99.0) as f64)
        .collect();
    let bytes: Vec<f64> = r.sender_bytes.iter().map(|&b| b as f64).collect();
    AbFigures {
        gbps: r.rx[0].consumed_in_window as f64 / secs / 1e9,
        mean_p99: p99s.iter().sum::<f64>() / p99s.len().max(1) as f64,
        worst_p99: p99s.iter().cloned().fold(0.0, f64::max),
        jain: jain(&bytes),
        peak: r.rx[0].peak_slots,
        violations: r.rx[0].violations,
        transfers: r.latencies.iter().map(|s| s[0].len() as u64).sum(),
    }
}

/// The points of series `name` of `r`, time in ms (for plots).
pub(crate) fn series_ms(r: &RunResult, name: &str) -> Vec<(f64, f64)> {
    r.series
        .iter()
        .find(|s: &&Series| s.name == name)
        .map(|s| s.points.iter().map(|&(t, v)| (t as f64 / 1e6, v)).collect())
        .unwrap_or_default()
}

/// Every scenario name, in `sim all` order.
pub const ALL: [&str; 4] = ["incast", "slowdown", "cc", "peer-feedback"];

/// Runs scenario `name`.
pub fn run(name: &str, o: &Opts) -> Option<Outcome> {
    Some(match name {
        "incast" => incast::run(o),
        "slowdown" => slowdown::run(o),
        "cc" => cc::run(o),
        "peer-feedback" => peer_feedback::run(o),
        _ => return None,
    })
}
