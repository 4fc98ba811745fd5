//! Passes `RAILYARD_BROKEN=<variant>` through as `--cfg railyard_broken="<variant>"`,
//! and only under `--cfg railyard_loom`.
//!
//! The loom models' deliberately broken twins switch one known bug into the
//! real code. Setting the cfg through this build script (rather than
//! RUSTFLAGS) rebuilds only this crate and its dependents, not every
//! dependency, so `ci/loom.sh` can check each variant in seconds.
//!
//! A broken twin must never reach a real build: with `RAILYARD_BROKEN` set
//! (or `--cfg railyard_broken=...` in RUSTFLAGS) but without
//! `--cfg railyard_loom`, the build fails here with a message saying so
//! (`ci/broken-guard.sh` checks it).
fn main() {
    println!("cargo:rerun-if-env-changed=RAILYARD_BROKEN");
    let var = std::env::var("RAILYARD_BROKEN").unwrap_or_default();
    // Cargo exposes every --cfg of RUSTFLAGS to build scripts as CARGO_CFG_*.
    let flag = std::env::var("CARGO_CFG_RAILYARD_BROKEN").unwrap_or_default();
    let loom = std::env::var_os("CARGO_CFG_RAILYARD_LOOM").is_some();
    if (!var.is_empty() || !flag.is_empty()) && !loom {
        let what = if var.is_empty() {
            format!("--cfg railyard_broken=\"{flag}\" is in RUSTFLAGS")
        } else {
            format!("RAILYARD_BROKEN={var} is set")
        };
        eprintln!(
            "error: {what}, which compiles a deliberately broken twin into railyard-core, \
             but --cfg railyard_loom is not: broken twins exist only for the loom models \
             (ci/loom.sh). Unset RAILYARD_BROKEN, or build the loom tests with \
             RUSTFLAGS=\"--cfg railyard_loom\"."
        );
        std::process::exit(1);
    }
    if !var.is_empty() {
        println!("cargo:rustc-cfg=railyard_broken=\"{var}\"");
    }
}
