//! The scenarios: each mirrors one RFC experiment and returns an
//! [`Outcome`]: RFC-shaped tables, JSON lines, a time series to plot, and
//! the invariant checks the integration tests assert.

use crate::model::{RunResult, Series, SimConfig};
use crate::report::{jain, percentile, JsonLine, Table};

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// One JSON line per arm.
    pub json: Vec<JsonLine>,
    /// Time series for `--plot`.
    pub series: Vec<Series>,
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
            format!("{:?}", r.leaks),
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

/// Prefixes every series name with `arm`.
pub(crate) fn tag(series: &[Series], arm: &str, keep: &[&str]) -> Vec<Series> {
    series
        .iter()
        .filter(|s| keep.is_empty() || keep.iter().any(|k| s.name == *k))
        .map(|s| Series {
            name: format!("{arm}: {}", s.name),
            ..s.clone()
        })
        .collect()
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
