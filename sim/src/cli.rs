//! `railyard sim ...`: argument parsing by hand (no dependency).

use std::io::Write as _;
use std::time::Instant;

use crate::report::svg;
use crate::scenario::{self, Opts, ALL};

const USAGE: &str = "usage: railyard sim <incast|slowdown|cc|peer-feedback|all> \
[--senders N] [--seed S] [--duration-ms D] [--json] [--plot FILE]";

/// Parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Args {
    scenario: String,
    opts: Opts,
    json: bool,
    plot: Option<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter().peekable();
    if it.peek().map(|s| s.as_str()) == Some("sim") {
        it.next();
    }
    let scenario = it.next().ok_or("missing scenario")?.clone();
    if scenario != "all" && !ALL.contains(&scenario.as_str()) {
        return Err(format!("unknown scenario '{scenario}'"));
    }
    let mut a = Args {
        scenario,
        opts: Opts::default(),
        json: false,
        plot: None,
    };
    while let Some(flag) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let num = |v: String, name: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{name}: '{v}' is not a non-negative integer"))
        };
        match flag.as_str() {
            "--senders" => {
                let n = num(value("--senders")?, "--senders")?;
                if n == 0 || n > 256 {
                    return Err("--senders must be in 1..=256".into());
                }
                a.opts.senders = Some(n as usize);
            }
            "--seed" => a.opts.seed = num(value("--seed")?, "--seed")?,
            "--duration-ms" => {
                let d = num(value("--duration-ms")?, "--duration-ms")?;
                if d == 0 || d > 10_000 {
                    return Err("--duration-ms must be in 1..=10000".into());
                }
                a.opts.duration_ms = Some(d);
            }
            "--json" => a.json = true,
            "--plot" => a.plot = Some(value("--plot")?),
            "-h" | "--help" => return Err(String::new()),
            f => return Err(format!("unknown flag '{f}'")),
        }
    }
    Ok(a)
}

/// Runs `railyard sim` with `args` (with or without a leading `"sim"`);
/// returns the process exit code: 0 when every invariant held, 1 when one
/// failed, 2 on a usage error.
pub fn cli_main(args: &[String]) -> i32 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() { 0 } else { 2 };
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.scenario == "all" {
        return run_all(&a, &mut out);
    }
    let o = scenario::run(&a.scenario, &a.opts).expect("validated name");
    if a.json {
        for l in &o.json {
            let _ = writeln!(out, "{}", l.render());
        }
    } else {
        let _ = write!(out, "{}", o.render());
    }
    if let Some(path) = &a.plot {
        let title = format!("railyard sim {} (seed {})", o.name, a.opts.seed);
        if let Err(e) = std::fs::write(path, svg(&title, &o.series)) {
            eprintln!("error: cannot write {path}: {e}");
            return 2;
        }
        eprintln!("wrote {path}");
    }
    i32::from(!o.ok())
}

fn run_all(a: &Args, out: &mut impl std::io::Write) -> i32 {
    let mut rows = vec![];
    let mut code = 0;
    let mut series = vec![];
    for (i, name) in ALL.iter().enumerate() {
        eprint!("\r[{}/{}] {name} ...            ", i + 1, ALL.len());
        let _ = std::io::stderr().flush();
        let t = Instant::now();
        let o = scenario::run(name, &a.opts).expect("known");
        let wall = t.elapsed().as_secs_f64();
        if !o.ok() {
            code = 1;
        }
        if a.json {
            for l in &o.json {
                let _ = writeln!(out, "{}", l.render());
            }
        }
        series.extend(o.series.iter().take(2).cloned());
        rows.push((o, wall));
    }
    eprintln!("\r[{}/{}] done                     ", ALL.len(), ALL.len());
    if !a.json {
        let _ = writeln!(out, "railyard sim all (seed {})", a.opts.seed);
        for (o, wall) in &rows {
            let failed = o.checks.iter().filter(|c| !c.ok).count();
            let status = if !o.missing.is_empty() && o.checks.is_empty() {
                "n/a ".to_string()
            } else if failed == 0 {
                "ok  ".to_string()
            } else {
                "FAIL".to_string()
            };
            let _ = writeln!(
                out,
                "{status} {:<14} {:>3} checks  {:>9} events  {:>6.2}s  {}",
                o.name,
                o.checks.len(),
                o.events,
                wall,
                o.summary
            );
            for c in o.checks.iter().filter(|c| !c.ok) {
                let _ = writeln!(out, "     FAIL {} ({})", c.name, c.detail);
            }
            for m in &o.missing {
                let _ = writeln!(out, "     not evaluated: {m}");
            }
        }
    }
    if let Some(path) = &a.plot {
        if std::fs::write(path, svg("railyard sim all", &series)).is_err() {
            eprintln!("error: cannot write {path}");
            return 2;
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_flags_and_rejects_bad_input() {
        let a = parse(&v("sim incast --senders 4 --seed 9 --json --plot x.svg")).unwrap();
        assert_eq!(a.scenario, "incast");
        assert_eq!(a.opts.senders, Some(4));
        assert_eq!(a.opts.seed, 9);
        assert!(a.json);
        assert_eq!(a.plot.as_deref(), Some("x.svg"));
        assert_eq!(parse(&v("all")).unwrap().scenario, "all");
        assert!(parse(&v("bogus")).is_err());
        assert!(parse(&v("incast --senders 0")).is_err());
        assert!(parse(&v("incast --senders x")).is_err());
        assert!(parse(&v("incast --seed")).is_err());
        assert!(parse(&v("incast --frobnicate")).is_err());
        assert!(parse(&[]).is_err());
    }
}
