//! The checked-in header must be exactly what cbindgen generates from the
//! current source (CI fails on a stale header; regenerate with
//! `ffi/gen-header.sh`), and every struct it declares must be covered by
//! the C-side ABI check.

use std::path::{Path, PathBuf};
use std::process::Command;

fn ffi_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn cbindgen() -> PathBuf {
    let in_path = Command::new("cbindgen").arg("--version").output().is_ok();
    if in_path {
        return PathBuf::from("cbindgen");
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let p = home.join("bin/cbindgen");
    assert!(
        p.exists(),
        "cbindgen not found: `cargo install cbindgen --locked` (the header check must not be skipped)"
    );
    p
}

#[test]
fn checked_in_header_is_not_stale() {
    let fresh = Path::new(env!("CARGO_TARGET_TMPDIR")).join("railyard.h");
    let out = Command::new(cbindgen())
        .current_dir(ffi_dir())
        .args([
            "--quiet",
            "--config",
            "cbindgen.toml",
            "--crate",
            "railyard-ffi",
            "--output",
        ])
        .arg(&fresh)
        .output()
        .expect("run cbindgen");
    assert!(
        out.status.success(),
        "cbindgen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = std::fs::read_to_string(&fresh).expect("read generated header");
    let checked_in =
        std::fs::read_to_string(ffi_dir().join("include/railyard.h")).expect("read header");
    assert!(
        fresh == checked_in,
        "ffi/include/railyard.h is stale: run ffi/gen-header.sh and commit it"
    );
}

#[test]
fn every_struct_and_enum_is_in_the_abi_check() {
    let header =
        std::fs::read_to_string(ffi_dir().join("include/railyard.h")).expect("read header");
    let check = std::fs::read_to_string(ffi_dir().join("../examples/c/abi_check.h"))
        .expect("read abi_check.h");
    let mut names: Vec<&str> = header
        .lines()
        .filter_map(|l| l.strip_prefix("} "))
        .filter_map(|l| l.strip_suffix(';'))
        .collect();
    names.extend(
        header
            .lines()
            .filter_map(|l| {
                l.strip_prefix("typedef uint32_t ")
                    .or_else(|| l.strip_prefix("typedef int32_t "))
            })
            .filter_map(|l| l.strip_suffix(';')),
    );
    names.sort();
    names.dedup();
    assert!(names.len() > 30, "parsed too few types: {names:?}");
    let missing: Vec<&&str> = names
        .iter()
        .filter(|n| **n != "ry_abi_layout_t" && **n != "ry_abi_type")
        .filter(|n| !check.contains(&format!(", {n});")))
        .collect();
    assert!(
        missing.is_empty(),
        "types without a layout check in examples/c/abi_check.h: {missing:?}"
    );
}
