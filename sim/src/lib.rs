//! # railyard-sim
//!
//! A deterministic discrete-event fabric simulator whose senders run the
//! **real** `railyard-core`: every simulated WR is posted through
//! [`Owner::post`](railyard_core::completion::Owner::post) (token pool,
//! slice table, endpoint table) and every completion, including injected
//! error statuses, comes back through
//! [`Owner::complete`](railyard_core::completion::Owner::complete).
//!
//! Model assumptions and limits: `sim/README.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod cli;
pub mod credit;
pub mod engine;
pub mod model;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod stack;

pub use cli::cli_main;
