//! The primitives `waiters.rs` is built on: std's here; the loom model
//! (`loom-tests/tests/waiters.rs`) compiles the same file over loom's.

pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::{Condvar, Mutex};
