//! `railyard._native`: the PyO3 extension behind the `railyard` Python
//! package (`python/railyard`), built with maturin as an abi3 wheel for
//! CPython >= 3.9.
//!
//! | Python | here |
//! |---|---|
//! | `railyard.TransferEngine` (`railyard/_mooncake.py`, base `_TransferEngine`) | `mooncake::TransferEngine`: Mooncake's `mooncake.engine.TransferEngine` methods and return codes; the transfer methods are Python over its `_transfer` |
//! | `railyard.Engine` (base `_Engine`) | `engine::NativeEngine`: railyard's API, typed exceptions, anomaly queries, stats |
//! | `railyard.Config` | `engine::Config`: the `MC_*` configuration |
//! | `railyard.TaskStatus` | `engine::TaskStatusPy` |
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
    for &(name, code) in core::mc::ALL {
        m.add(name, code)?;
    }
    Ok(())
}
