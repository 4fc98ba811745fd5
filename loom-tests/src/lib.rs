//! loom models for railyard-core live in `tests/`, one file per structure and
//! one model per invariant. They compile only with `--cfg railyard_loom`
//! (see `ci/loom.sh`); a normal `cargo test` builds this empty library.
//!
//! Each model has a deliberately broken twin, `broken_<variant>`, compiled
//! with `--cfg railyard_broken="<variant>"`, which switches one known bug
//! into the real core code; the twin is `#[should_panic]`, so the model is
//! shown to catch that bug.
