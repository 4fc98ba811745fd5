//! The `railyard` binary as a user meets it: help and version everywhere,
//! `--flag=value`, exit codes, byte-identical output for the same seed,
//! and every bad input as one clear line on stderr with a non-zero exit.

use std::process::Command;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn railyard(args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(args)
        .output()
        .expect("run railyard");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        stderr: String::from_utf8(out.stderr).expect("utf-8"),
    }
}

#[test]
fn sim_scenario_is_deterministic_and_passes_its_checks() {
    let a = railyard(&["sim", "incast", "--senders", "4", "--seed", "7"]);
    let b = railyard(&["sim", "incast", "--senders=4", "--seed=7"]);
    assert_eq!(a.code, 0, "invariant checks failed:\n{}", a.stdout);
    assert!(a.stdout.contains("incast"), "{}", a.stdout);
    assert_eq!(a.stdout, b.stdout, "same seed, different output");
    // Tables without Rust debug formatting.
    assert!(
        !a.stdout.contains("Leaks {") && !a.stdout.contains("Some("),
        "{}",
        a.stdout
    );
}

#[test]
fn sim_json_is_one_document_with_checks_and_unit_names() {
    let o = railyard(&[
        "sim",
        "incast",
        "--senders",
        "1",
        "--duration-ms",
        "5",
        "--json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("one JSON document");
    assert_eq!(j["scenario"], "incast");
    assert_eq!(j["ok"], true);
    let row = &j["rows"][0];
    assert!(row["throughput_gbytes_per_s"].as_f64().expect("a number") > 1.0);
    assert!(row.get("throughput_gbps").is_none());
    let checks = j["checks"].as_array().expect("checks");
    assert!(
        !checks.is_empty()
            && checks
                .iter()
                .all(|c| c["ok"] == true && c["name"].is_string())
    );
    // `all --json`: one document per scenario, one per line.
    let all = railyard(&["sim", "all", "--duration-ms", "5", "--json", "--quiet"]);
    let docs: Vec<serde_json::Value> = all
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["incast", "slowdown", "cc", "peer-feedback"]);
}

#[test]
fn progress_only_on_a_terminal() {
    // stderr is a pipe here: no `\r[i/4]` counter in it.
    let o = railyard(&["sim", "all", "--duration-ms", "20"]);
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(
        !o.stderr.contains('\r') && !o.stderr.contains("[1/4]"),
        "{:?}",
        o.stderr
    );
}

#[test]
fn help_and_version_everywhere() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["help"],
        &["sim", "--help"],
        &["sim", "-h"],
        &["help", "sim"],
        &["bench", "--help"],
        &["bench", "-h"],
    ] {
        let o = railyard(args);
        assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
        assert!(
            o.stdout.contains("Usage: railyard"),
            "{args:?}: {}",
            o.stdout
        );
    }
    let version = format!("railyard {}", env!("CARGO_PKG_VERSION"));
    for args in [&["--version"][..], &["-V"]] {
        let o = railyard(args);
        assert_eq!((o.code, o.stdout.trim()), (0, version.as_str()), "{args:?}");
    }
    for (args, name) in [
        (&["sim", "--version"][..], "railyard-sim"),
        (&["bench", "-V"], "railyard-bench"),
    ] {
        let o = railyard(args);
        let want = format!("{name} {}", env!("CARGO_PKG_VERSION"));
        assert_eq!((o.code, o.stdout.trim()), (0, want.as_str()), "{args:?}");
    }
    // No command at all: the help, as a usage error.
    let o = railyard(&[]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("Usage: railyard"));
}

/// Every bad input: exit 2, one line on stderr that says what is wrong
/// (and, for a typo, what was meant), nothing on stdout.
#[test]
fn bad_input_is_one_clear_line_and_exit_2() {
    for (args, want) in [
        (
            &["no-such-command"][..],
            "unrecognized subcommand 'no-such-command'",
        ),
        (&["sim"], "required arguments were not provided: <SCENARIO>"),
        (
            &["sim", "no-such-scenario"],
            "invalid value 'no-such-scenario'",
        ),
        (&["sim", "incst"], "a similar value exists: 'incast'"),
        (&["sim", "--help-me"], "unexpected argument '--help-me'"),
        (
            &["sim", "incast", "--sendrs", "4"],
            "a similar argument exists: '--senders'",
        ),
        (&["sim", "incast", "--senders", "0"], "out of range"),
        (&["sim", "incast", "--senders=999"], "out of range"),
        (&["sim", "incast", "--senders", "many"], "not a number"),
        (&["sim", "incast", "--duration-ms", "0"], "out of range"),
        (
            &["sim", "incast", "--seed"],
            "a value is required for '--seed <S>'",
        ),
        (
            &["sim", "incast", "--seed", "-1"],
            "unexpected argument '-1'",
        ),
        (&["bench", "-x", "300", "host"], "out of range"),
        (&["bench", "-x", "one", "host"], "not a number"),
        (&["bench", "-s", "64Q", "host"], "not a size"),
        (&["bench", "-s", "0", "host"], "out of range"),
        (
            &["bench", "--op", "copy", "host"],
            "[possible values: write, read]",
        ),
        (
            &["bench", "--treads", "4", "host"],
            "a similar argument exists: '--threads'",
        ),
        (&["bench", "-a", "-s", "4K", "host"], "cannot be used with"),
        (
            &["bench", "-n", "5", "-D", "5", "host"],
            "cannot be used with",
        ),
        (
            &["bench", "--threads", "64", "--depth", "64", "host"],
            "out of range",
        ),
        (
            &["bench", "--verify", "--buffer_size", "1M", "host"],
            "--verify",
        ),
    ] {
        let o = railyard(args);
        assert_eq!(o.code, 2, "{args:?}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{args:?}: stdout {}", o.stdout);
        let lines: Vec<&str> = o.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: not one line: {}", o.stderr);
        assert!(
            lines[0].starts_with("railyard: error: "),
            "{args:?}: {}",
            lines[0]
        );
        assert!(lines[0].contains(want), "{args:?}: {}", lines[0]);
        assert!(lines[0].contains("--help'"), "{args:?}: {}", lines[0]);
        assert!(
            !lines[0].contains("Some(") && !lines[0].contains("{ "),
            "{args:?}: {}",
            lines[0]
        );
    }
}

#[test]
fn sim_plot_writes_a_file_or_a_directory() {
    let dir = std::env::temp_dir().join(format!("railyard-cli-plot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pf.svg");
    let o = railyard(&[
        "sim",
        "peer-feedback",
        "--duration-ms",
        "10",
        "--plot",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("wrote {}", file.display())),
        "{}",
        o.stderr
    );
    let svg = std::fs::read_to_string(&file).unwrap();
    // Not empty: the per-NIC share of every variant.
    for label in ["baseline", "V1", "V2", "V3", "NIC0", "NIC1"] {
        assert!(svg.contains(label), "{label}");
    }
    // `all` into a file that exists: refused, one line.
    let o = railyard(&[
        "sim",
        "all",
        "--duration-ms",
        "5",
        "--plot",
        file.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("is a file"), "{}", o.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(not(feature = "verbs"))]
#[test]
fn bench_without_verbs_says_how_to_get_it() {
    let o = railyard(&["bench", "host"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--features verbs"), "{}", o.stderr);
}
