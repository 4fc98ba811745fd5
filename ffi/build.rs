//! Packaging hook: `RAILYARD_SONAME=librailyard.so.0.1` (set by
//! `ffi/install.sh`) gives the shared library that SONAME. A plain `cargo
//! build` leaves it unset, so `target/*/librailyard_ffi.so` stays loadable
//! under its own file name by the in-tree tests.
fn main() {
    println!("cargo:rerun-if-env-changed=RAILYARD_SONAME");
    if let Ok(soname) = std::env::var("RAILYARD_SONAME") {
        if !soname.is_empty() {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
        }
    }
}
