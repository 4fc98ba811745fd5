//! `railyard sim` through the real binary: exit codes, and byte-identical
//! output for the same seed.

use std::process::Command;

fn railyard(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(args)
        .output()
        .expect("run railyard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf-8"),
    )
}

#[test]
fn sim_scenario_is_deterministic_and_passes_its_checks() {
    let a = railyard(&["sim", "incast", "--senders", "4", "--seed", "7"]);
    let b = railyard(&["sim", "incast", "--senders", "4", "--seed", "7"]);
    assert_eq!(a.0, 0, "invariant checks failed:\n{}", a.1);
    assert!(a.1.contains("incast"), "{}", a.1);
    assert_eq!(a, b, "same seed, different output");
}

#[test]
fn unknown_command_and_scenario_are_usage_errors() {
    assert_eq!(railyard(&["sim", "no-such-scenario"]).0, 2);
    assert_eq!(railyard(&["no-such-command"]).0, 2);
}
