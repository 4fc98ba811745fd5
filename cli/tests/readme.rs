//! The README quotes the help of `railyard sim` and `railyard bench` and
//! the C example; this test keeps the quotes equal to the real thing. With
//! `RAILYARD_BLESS_README=1` it rewrites the quoted blocks instead.
//!
//! Markers: `<!-- help: railyard ARGS -->` before a ```text block (the
//! command's stdout), `<!-- quote: PATH -->` before a code block (the
//! lines of PATH between `--- README example begins ---` and `... ends
//! ---`, dedented).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("cli/ has a parent")
        .to_path_buf()
}

fn help(cmd: &str) -> String {
    let mut words = cmd.split_whitespace();
    assert_eq!(words.next(), Some("railyard"), "{cmd}");
    let out = Command::new(env!("CARGO_BIN_EXE_railyard"))
        .args(words)
        .output()
        .expect("run railyard");
    assert!(out.status.success(), "{cmd}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

fn quote(path: &str) -> String {
    let text = std::fs::read_to_string(root().join(path)).expect("quoted file");
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("--- README example begins ---"))
        .skip(1)
        .take_while(|l| !l.contains("--- README example ends ---"))
        .collect();
    assert!(!lines.is_empty(), "{path}: no README example markers");
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut s: String = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").to_string() + "\n")
        .collect();
    s.truncate(s.trim_end().len());
    s.push('\n');
    s
}

/// `(marker, expected block text)` for every marker, and the README with
/// every quoted block replaced by its expected text.
fn expected(readme: &str) -> (Vec<(String, String, String)>, String) {
    let mut found = vec![];
    let mut out = String::new();
    let mut lines = readme.lines().peekable();
    while let Some(l) = lines.next() {
        out.push_str(l);
        out.push('\n');
        let marker = l.trim();
        let want = if let Some(cmd) = marker
            .strip_prefix("<!-- help: ")
            .and_then(|m| m.strip_suffix(" -->"))
        {
            help(cmd)
        } else if let Some(path) = marker
            .strip_prefix("<!-- quote: ")
            .and_then(|m| m.strip_suffix(" -->"))
        {
            quote(path)
        } else {
            continue;
        };
        let fence = lines
            .next()
            .unwrap_or_else(|| panic!("{marker}: no code block after it"));
        assert!(
            fence.starts_with("```"),
            "{marker}: followed by {fence:?}, not a code block"
        );
        out.push_str(fence);
        out.push('\n');
        let mut got = String::new();
        for b in lines.by_ref() {
            if b.starts_with("```") {
                break;
            }
            got.push_str(b);
            got.push('\n');
        }
        out.push_str(&want);
        out.push_str("```\n");
        found.push((marker.to_string(), got, want));
    }
    (found, out)
}

#[test]
fn readme_quotes_the_real_help_and_example() {
    let path = root().join("README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let (found, blessed) = expected(&readme);
    let helps = found.iter().filter(|f| f.0.contains("help:")).count();
    let quotes = found.iter().filter(|f| f.0.contains("quote:")).count();
    assert!(
        helps >= 2 && quotes >= 1,
        "README lost its quoted help ({helps}) or example ({quotes})"
    );
    if std::env::var_os("RAILYARD_BLESS_README").is_some() {
        std::fs::write(&path, blessed).expect("write README.md");
        return;
    }
    for (marker, got, want) in &found {
        assert_eq!(
            got, want,
            "README block after {marker} differs from the real output; run \
             RAILYARD_BLESS_README=1 cargo test -p railyard-cli --test readme"
        );
    }
}
