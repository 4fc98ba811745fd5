//! Benchmarks live in `benches/`; see each file for its baselines and measured ratios.

pub mod token;
