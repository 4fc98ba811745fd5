//! # railyard-sim
//!
//! A deterministic discrete-event fabric simulator whose senders run the
//! **real** `railyard-core`: every simulated WR reserves receiver credit in
//! a `core::credit` ledger granted by a `core::credit` allocator, is placed
//! by the `core::rail` selector, admitted by the `core::cc` controller and
//! posted through
//! [`HotPath::post`](railyard_core::completion::HotPath::post) (token pool,
//! slice table, endpoint table); every completion, including injected
//! error statuses, comes back through
//! [`HotPath::complete`](railyard_core::completion::HotPath::complete) and
//! `classify`.
//!
//! | module | role |
//! |---|---|
//! | [`engine`] | binary-heap event queue, `(time, sequence)` order |
//! | [`rng`] | seeded SplitMix64 |
//! | [`model`] | hosts, NICs, switch, receivers, consumer, faults; the run loop |
//! | [`stack`] | rail + cc admission and release, async events, monitor epochs |
//! | [`credit`] | the credit plane: ledgers, allocators, grant/usage messages |
//! | [`scenario`] | incast, slowdown, cc, peer-feedback |
//! | [`report`] | tables, nearest-rank percentiles, Jain |
//! | [`plot`] | figures (overlaid arms, reference lines, state bands, stacked shares) as SVG via plotters |
//! | [`cli`] | `railyard sim`'s arguments (clap) and runner |
//!
//! ```
//! use railyard_sim::scenario::{self, Opts};
//! let out = scenario::run("incast", &Opts { senders: Some(4), duration_ms: Some(5), ..Opts::default() }).unwrap();
//! assert!(out.ok());
//! println!("{}", out.render());
//! ```
//!
//! Model assumptions and limits: `sim/README.md`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cli;
pub mod credit;
pub mod engine;
pub mod model;
pub mod plot;
pub mod report;
pub mod rng;
pub mod scenario;
pub mod stack;
