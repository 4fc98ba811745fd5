//! Packaging hook: `RAILYARD_SONAME=librailyard.so.0.1` (set by
//! `ffi/install.sh`) gives the shared library that SONAME. A plain `cargo
//! build` leaves it unset, so `target/*/librailyard_ffi.so` stays loadable
//! under its own file name by the in-tree tests.
//!
//! It also writes `$OUT_DIR/status_names.rs`, the `ry_status_name` table,
//! from the `RyStatus` enum in `src/error.rs` (one `Name = value,` line per
//! variant), named as cbindgen names the constants: `RY_STATUS_` and the
//! variant in SCREAMING_SNAKE_CASE. `tests/boundary.rs` checks every name
//! against the header.
use std::fmt::Write as _;

fn main() {
    println!("cargo:rerun-if-env-changed=RAILYARD_SONAME");
    println!("cargo:rerun-if-changed=src/error.rs");
    if let Ok(soname) = std::env::var("RAILYARD_SONAME") {
        if !soname.is_empty() {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
        }
    }
    let src = std::fs::read_to_string("src/error.rs").expect("read src/error.rs");
    let body = src
        .split_once("pub enum RyStatus {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .expect("src/error.rs declares `pub enum RyStatus { ... }`")
        .0;
    let mut table = String::from("&[\n");
    let mut n = 0;
    for line in body.lines().map(str::trim) {
        let Some((name, value)) = line.strip_suffix(',').and_then(|l| l.split_once(" = ")) else {
            continue;
        };
        let value: i32 = value.parse().expect("a RyStatus value is an integer");
        let mut upper = String::new();
        for (i, c) in name.chars().enumerate() {
            if i > 0 && c.is_ascii_uppercase() {
                upper.push('_');
            }
            upper.push(c.to_ascii_uppercase());
        }
        writeln!(table, "    ({value}, c\"RY_STATUS_{upper}\"),").unwrap();
        n += 1;
    }
    assert!(
        n > 100,
        "parsed only {n} RyStatus variants from src/error.rs"
    );
    table.push(']');
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("status_names.rs");
    std::fs::write(out, table).expect("write status_names.rs");
}
