//! `railyard sim`: its arguments ([`SimArgs`], clap derive; the
//! `railyard` command embeds them, so `railyard sim --help` is generated
//! from the doc comments here) and [`run`].

use std::io::{IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, ValueEnum};

use crate::plot::render_svg;
use crate::scenario::{self, Opts, Outcome, ALL};

/// Which scenario to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// RFC 2849: 1/4/16 senders into an 8-slot receiver, fixed window vs receiver credit
    Incast,
    /// RFC 2849: 16 senders, +5 ms consumer commit, 64 slots, fixed vs credit
    Slowdown,
    /// RFC 4162: incast, healthy bulk, route failure and multi-NIC failure, controller off vs enforce
    Cc,
    /// RFC 4534: two peers, one slow; where the rail selector sends the healthy peer's bytes
    PeerFeedback,
    /// Every scenario, one line each
    All,
}

impl Scenario {
    /// The scenario's name as typed (`peer-feedback`).
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Incast => "incast",
            Scenario::Slowdown => "slowdown",
            Scenario::Cc => "cc",
            Scenario::PeerFeedback => "peer-feedback",
            Scenario::All => "all",
        }
    }
}

mod int_in;
pub use int_in::int_in;

/// The deterministic fabric simulator: scenarios from the RFCs through the real core.
///
/// Prints each scenario's tables in the RFC's shape and its invariant
/// checks; exit code 0 when every check held, 1 when one failed, 2 on a
/// usage error.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(name = "railyard sim", term_width = 100)]
pub struct SimArgs {
    /// The scenario to run
    #[arg(value_enum, value_name = "SCENARIO")]
    pub scenario: Scenario,
    /// Run only this sender count (incast and cc sweep it; slowdown uses 16)
    #[arg(long, value_name = "N", value_parser = int_in(1, 256))]
    pub senders: Option<u64>,
    /// Seed of the run's randomness (link jitter, arrival times)
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Simulated time per run in ms [default: the scenario's own; cc's fault runs never shorter than 80 / 60 ms]
    #[arg(long = "duration-ms", value_name = "MS", value_parser = int_in(1, 10_000))]
    pub duration_ms: Option<u64>,
    /// Print JSON instead of tables: one document per scenario, one per line
    #[arg(long)]
    pub json: bool,
    /// Write the plot as SVG to PATH; with `all` (or an existing directory), one PATH/SCENARIO.svg each
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
    /// No progress on stderr (it is only shown on a terminal anyway)
    #[arg(short, long)]
    pub quiet: bool,
}

impl SimArgs {
    /// The scenario options.
    pub fn opts(&self) -> Opts {
        Opts {
            senders: self.senders.map(|n| n as usize),
            seed: self.seed,
            duration_ms: self.duration_ms,
        }
    }
}

/// Where the plot of scenario `name` goes, or why it cannot.
fn plot_path(arg: &Path, name: &str, all: bool) -> Result<PathBuf, String> {
    if all || arg.is_dir() {
        if arg.exists() && !arg.is_dir() {
            return Err(format!(
                "--plot {}: is a file; `all` writes one SVG per scenario into a directory",
                arg.display()
            ));
        }
        std::fs::create_dir_all(arg)
            .map_err(|e| format!("--plot {}: cannot create the directory: {e}", arg.display()))?;
        return Ok(arg.join(format!("{name}.svg")));
    }
    Ok(arg.to_path_buf())
}

fn write_plot(o: &Outcome, path: &Path) -> Result<(), String> {
    let svg = render_svg(&o.figure).map_err(|e| format!("plot of {}: {e}", o.name))?;
    std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs `railyard sim` with parsed arguments, writing results to `out`
/// and messages (progress on a terminal, files written, errors) to
/// `err`. Returns the exit code: 0 every check held, 1 a check failed, 2
/// the output could not be written.
pub fn run(a: &SimArgs, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let progress = !a.quiet && std::io::stderr().is_terminal();
    let names: Vec<&str> = match a.scenario {
        Scenario::All => ALL.to_vec(),
        s => vec![s.name()],
    };
    let all = a.scenario == Scenario::All;
    let opts = a.opts();
    let mut code = 0;
    let mut rows = vec![];
    for (i, name) in names.iter().enumerate() {
        if progress && all {
            let _ = write!(err, "\r[{}/{}] {name} ...            ", i + 1, names.len());
            let _ = err.flush();
        }
        let t = Instant::now();
        let o = scenario::run(name, &opts).expect("a known scenario");
        let wall = t.elapsed().as_secs_f64();
        if !o.ok() {
            code = 1;
        }
        if a.json {
            let _ = writeln!(out, "{}", o.to_json(&opts));
        } else if !all {
            let _ = write!(out, "{}", o.render());
        }
        if let Some(p) = &a.plot {
            let written = plot_path(p, name, all).and_then(|path| {
                write_plot(&o, &path)?;
                Ok(path)
            });
            match written {
                Ok(path) => {
                    if progress && all {
                        let _ = write!(err, "\r{:40}\r", "");
                    }
                    let _ = writeln!(err, "wrote {}", path.display());
                }
                Err(e) => {
                    let _ = writeln!(err, "railyard sim: error: {e}");
                    return 2;
                }
            }
        }
        rows.push((o, wall));
    }
    if progress && all {
        let _ = write!(err, "\r{:40}\r", "");
    }
    if all && !a.json {
        let _ = write!(out, "{}", summary(&rows, a.seed));
    }
    code
}

/// The one-screen summary of `sim all`.
fn summary(rows: &[(Outcome, f64)], seed: u64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "railyard sim all (seed {seed})");
    for (o, wall) in rows {
        let failed = o.checks.iter().filter(|c| !c.ok).count();
        let status = if !o.missing.is_empty() && o.checks.is_empty() {
            "n/a "
        } else if failed == 0 {
            "ok  "
        } else {
            "FAIL"
        };
        let _ = writeln!(
            s,
            "{status} {:<14} {:>3} checks  {:>9} events  {:>6.2}s  {}",
            o.name,
            o.checks.len(),
            o.events,
            wall,
            o.summary
        );
        for c in o.checks.iter().filter(|c| !c.ok) {
            let _ = writeln!(s, "     FAIL {} ({})", c.name, c.detail);
        }
        for m in &o.missing {
            let _ = writeln!(s, "     not evaluated: {m}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<SimArgs, clap::Error> {
        SimArgs::try_parse_from(std::iter::once("railyard sim").chain(s.split_whitespace()))
    }

    #[test]
    fn parses_flags_both_ways_and_rejects_bad_input() {
        let a = parse("incast --senders 4 --seed=9 --json --plot x.svg").unwrap();
        assert_eq!(a.scenario, Scenario::Incast);
        assert_eq!(a.opts().senders, Some(4));
        assert_eq!(a.seed, 9);
        assert!(a.json);
        assert_eq!(a.plot.as_deref(), Some(Path::new("x.svg")));
        assert_eq!(
            parse("peer-feedback").unwrap().scenario,
            Scenario::PeerFeedback
        );
        assert_eq!(parse("all --duration-ms=20").unwrap().duration_ms, Some(20));
        for bad in [
            "bogus",
            "incast --senders 0",
            "incast --senders 257",
            "incast --senders x",
            "incast --seed",
            "incast --frobnicate",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        let e = parse("incast --senders 300").unwrap_err().to_string();
        assert!(e.contains("out of range"), "{e}");
        let e = parse("incast --senders many").unwrap_err().to_string();
        assert!(e.contains("not a number"), "{e}");
    }

    #[test]
    fn plot_paths() {
        let d = std::env::temp_dir().join(format!("railyard-sim-plot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert_eq!(plot_path(&d, "cc", true).unwrap(), d.join("cc.svg"));
        assert!(d.is_dir());
        // An existing directory for one scenario: PATH/<name>.svg.
        assert_eq!(
            plot_path(&d, "incast", false).unwrap(),
            d.join("incast.svg")
        );
        let f = d.join("file.svg");
        std::fs::write(&f, "x").unwrap();
        assert_eq!(plot_path(&f, "cc", false).unwrap(), f);
        assert!(plot_path(&f, "cc", true).unwrap_err().contains("is a file"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
