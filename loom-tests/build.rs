//! Passes `RAILYARD_BROKEN=<variant>` through as `--cfg railyard_broken="<variant>"`.
//!
//! The loom models' deliberately broken twins switch one known bug into the
//! real code. Setting the cfg through this build script (rather than
//! RUSTFLAGS) rebuilds only this crate and its dependents, not every
//! dependency, so `ci/loom.sh` can check each variant in seconds. Without
//! `--cfg railyard_loom` the variable fails the build (railyard-core's build
//! script refuses it, and this crate always builds railyard-core).
fn main() {
    println!("cargo:rerun-if-env-changed=RAILYARD_BROKEN");
    if let Ok(v) = std::env::var("RAILYARD_BROKEN") {
        if !v.is_empty() {
            println!("cargo:rustc-cfg=railyard_broken=\"{v}\"");
        }
    }
}
