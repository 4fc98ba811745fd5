//! The only raw-pointer accesses of the crate: NULL-checked conversions of
//! caller pointers into references, and slices.

use crate::error::{Error, Result};

/// `&T` from a caller pointer, NULL refused.
///
/// # Safety
/// `p` is NULL or points to a valid, aligned, initialised `T` that no
/// other thread writes for the duration of the call (the caller's contract,
/// documented on every function).
pub(crate) unsafe fn in_ref<'a, T>(p: *const T, name: &str) -> Result<&'a T> {
    // SAFETY: the caller guarantees `p` is NULL or valid for reads; `as_ref`
    // turns NULL into `None`.
    unsafe { p.as_ref() }.ok_or_else(|| Error::null(name))
}

/// An optional by-value input: NULL means `None`.
///
/// # Safety
/// `p` is NULL or points to a valid, aligned `T`.
pub(crate) unsafe fn in_opt<T: Copy>(p: *const T) -> Option<T> {
    // SAFETY: the caller guarantees `p` is NULL or valid for reads; `as_ref`
    // turns NULL into `None`.
    unsafe { p.as_ref() }.copied()
}

/// `&mut T` from a caller pointer, NULL refused.
///
/// # Safety
/// `p` is NULL or points to a valid, aligned `T` (initialised: every `T`
/// here is plain data for which any bit pattern the caller wrote is
/// accepted) that nothing else accesses for the duration of the call.
#[cfg_attr(not(any(feature = "layers", feature = "engine")), allow(dead_code))]
pub(crate) unsafe fn out_ref<'a, T>(p: *mut T, name: &str) -> Result<&'a mut T> {
    // SAFETY: the caller guarantees `p` is NULL or valid for reads and
    // writes and unaliased during the call.
    unsafe { p.as_mut() }.ok_or_else(|| Error::null(name))
}

/// `&[T]` of `len` elements; NULL is allowed only with `len == 0`.
///
/// # Safety
/// If `len > 0`, `p` points to `len` valid, aligned, initialised `T`s not
/// written by anyone else during the call.
pub(crate) unsafe fn in_slice<'a, T>(p: *const T, len: usize, name: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::null(name));
    }
    check_len::<T>(len, name)?;
    // SAFETY: non-NULL, `len` elements fit in `isize`, and the caller
    // guarantees `len` valid elements.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `&mut [T]` of `len` elements; NULL is allowed only with `len == 0`.
///
/// # Safety
/// If `len > 0`, `p` points to `len` valid, aligned, writable `T`s (any
/// bit pattern is a valid `T` here) that nothing else accesses during the
/// call.
pub(crate) unsafe fn out_slice<'a, T>(p: *mut T, len: usize, name: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::null(name));
    }
    check_len::<T>(len, name)?;
    // SAFETY: non-NULL, `len` elements fit in `isize`, and the caller
    // guarantees `len` writable, unaliased elements.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// A length no buffer can have (more than `isize::MAX` bytes) is a typed
/// error, not the abort of `from_raw_parts`' precondition check.
fn check_len<T>(len: usize, name: &str) -> Result<()> {
    match len.checked_mul(std::mem::size_of::<T>()) {
        Some(bytes) if bytes <= isize::MAX as usize => Ok(()),
        _ => Err(Error::invalid(format_args!(
            "`{name}`: {len} elements exceed any buffer"
        ))),
    }
}

/// Writes `v` to a caller out-pointer without reading the old contents
/// (which may be uninitialised), NULL refused.
///
/// # Safety
/// `p` is NULL or valid for writes of one aligned `T`, and nothing else
/// accesses it during the call.
pub(crate) unsafe fn write_out<T>(p: *mut T, v: T, name: &str) -> Result<()> {
    if p.is_null() {
        return Err(Error::null(name));
    }
    // SAFETY: non-NULL; the caller guarantees it is valid for writes.
    unsafe { p.write(v) };
    Ok(())
}

/// Writes `v` to an optional caller out-pointer: NULL drops it.
///
/// # Safety
/// `p` is NULL or valid for writes of one aligned `T`, and nothing else
/// accesses it during the call.
pub(crate) unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-NULL; the caller guarantees it is valid for writes.
        unsafe { p.write(v) };
    }
}
