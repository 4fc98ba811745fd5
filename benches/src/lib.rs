//! Benchmarks live in `benches/`; see each file for its baselines and measured ratios.
//! Shared fixtures used by a criterion bench and its callgrind driver alike:

pub mod hotpath;
