//! `railyard._native`: the PyO3 extension behind the `railyard` Python
//! package (`python/railyard`), built with maturin as an abi3 wheel for
//! CPython >= 3.9.
//!
//! | Python | here |
//! |---|---|
//! | `railyard.TransferEngine` | [`mooncake::TransferEngine`]: Mooncake's `mooncake.engine.TransferEngine` methods and return codes |
//! | `railyard.Engine` (base `_Engine`) | [`engine::NativeEngine`]: railyard's API, typed exceptions, anomaly queries, stats |
//! | `railyard.Config` | [`engine::Config`]: the `MC_*` configuration |
//! | `railyard.TaskStatus` | [`engine::TaskStatusPy`] |
//!
//! Every call that waits (handshakes, synchronous transfers, status
//! waits, shutdown) runs with the GIL released. The exceptions are the
//! Python classes of `railyard._errors`, raised with the engine's error
//! kind (`.kind`), Mooncake's code (`.code`) and, for configuration
//! errors, the variable (`.var`).

mod core;
mod engine;
mod managed;
mod mooncake;

use pyo3::prelude::*;

/// Mooncake's error codes, by name (`ERR_INVALID_ARGUMENT`, ...).
fn error_codes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use crate::core::mc;
    for (k, v) in [
        ("ERR_INVALID_ARGUMENT", mc::INVALID_ARGUMENT),
        ("ERR_TOO_MANY_REQUESTS", mc::TOO_MANY_REQUESTS),
        ("ERR_ADDRESS_NOT_REGISTERED", mc::ADDRESS_NOT_REGISTERED),
        ("ERR_BATCH_BUSY", mc::BATCH_BUSY),
        ("ERR_DEVICE_NOT_FOUND", mc::DEVICE_NOT_FOUND),
        ("ERR_ADDRESS_OVERLAPPED", mc::ADDRESS_OVERLAPPED),
        ("ERR_SOCKET", mc::SOCKET),
        ("ERR_REJECT_HANDSHAKE", mc::REJECT_HANDSHAKE),
        ("ERR_ENDPOINT", mc::ENDPOINT),
        ("ERR_CONTEXT", mc::CONTEXT),
        ("ERR_MEMORY", mc::MEMORY),
        ("ERR_NOT_IMPLEMENTED", mc::NOT_IMPLEMENTED),
    ] {
        m.add(k, v)?;
    }
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<mooncake::TransferEngine>()?;
    m.add_class::<engine::NativeEngine>()?;
    m.add_class::<engine::Config>()?;
    m.add_class::<engine::TaskStatusPy>()?;
    m.add("P2PHANDSHAKE", mooncake::P2PHANDSHAKE)?;
    m.add(
        "MAX_MEMORY_REGIONS",
        railyard_verbs::engine::MAX_MEMORY_REGIONS,
    )?;
    error_codes(m)?;
    Ok(())
}
