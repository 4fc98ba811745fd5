//! The sync facade: every atomic and cell in core comes from here.
//!
//! With `--cfg railyard_loom` the types are loom's, so the loom models in
//! `loom-tests/` explore every interleaving of the real code. The cfg is
//! project-specific (like crossbeam's `crossbeam_loom`), so dependencies such
//! as crossbeam-epoch are *not* switched along with us.
#![allow(unused_imports, dead_code)]

#[cfg(not(railyard_loom))]
pub(crate) use core::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(railyard_loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// Spin-loop hint; under loom, a yield so the model can make progress.
#[inline(always)]
pub(crate) fn spin_hint() {
    #[cfg(railyard_loom)]
    loom::thread::yield_now();
    #[cfg(not(railyard_loom))]
    core::hint::spin_loop();
}

/// An `UnsafeCell` with loom's closure-based access API, so loom can check
/// that no two threads touch a cell's contents at once.
#[cfg(not(railyard_loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(railyard_loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    /// Shared access to the contents through a raw pointer.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Exclusive access to the contents through a raw pointer.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(railyard_loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A plain atomic store, except under loom, where it is a `swap`.
///
/// loom mis-models a plain store racing with another thread's
/// read-modify-write (tokio-rs/loom#254: the RMW may read a value older than
/// the store and still win). In C11 both are the same here: the value is
/// stored with `order`; only the instruction flavour differs, and only in
/// the model. Use it for every store that can race with a CAS.
#[inline(always)]
pub(crate) fn store_u64(a: &AtomicU64, v: u64, order: Ordering) {
    #[cfg(railyard_loom)]
    a.swap(v, order);
    #[cfg(not(railyard_loom))]
    a.store(v, order);
}

/// [`store_u64`] for `AtomicU32`.
#[inline(always)]
pub(crate) fn store_u32(a: &AtomicU32, v: u32, order: Ordering) {
    #[cfg(railyard_loom)]
    a.swap(v, order);
    #[cfg(not(railyard_loom))]
    a.store(v, order);
}
