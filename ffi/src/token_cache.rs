//! Per-thread token caches (`railyard_core::token::TokenCache`) for C and
//! C++ transports with several poster or poller threads: each thread claims
//! and returns tokens through its own cache, touching the pool's shared
//! cache lines only when its cache runs dry or full (then in batches of
//! half its capacity), as the engine's workers do.
//!
//! A cache is bound at creation to one pool: a standalone token pool
//! (`ry_token_cache_create`, then `ry_token_cache_claim` /
//! `ry_token_cache_complete`) or a hot path's (`ry_hotpath_token_cache_create`,
//! then `ry_hotpath_post_via` / `ry_hotpath_complete_via` /
//! `ry_hotpath_unposted_via`). The `wr_id` layout, the exactly-once
//! completion and every typed error are the pool's own: a token claimed
//! through one cache (or none) may be completed through another (the
//! dedicated-poller model). Using a cache with another pool or hot path is
//! `RY_STATUS_TOKEN_CACHE_WRONG_POOL` and does nothing.
//!
//! A cache holds at most `capacity` free tokens; they are not in use
//! (`ry_token_pool_in_use`, `ry_hotpath_stats.tokens_in_use` never count
//! them). Every claim that finds the pool empty asks every cache to return
//! its free tokens at its next call; `ry_token_cache_idle` answers that from
//! an idle loop (and returns everything when the thread is about to sleep),
//! `ry_token_cache_flush` returns everything now, and
//! `ry_token_cache_destroy` returns everything before the handle dies. A
//! cache keeps its pool's memory alive: destroying the pool or hot path
//! first makes their handles invalid, but the cache's calls stay safe until
//! it is destroyed too.
//!
//! One cache is meant for one thread at a time. It is never a data race to
//! share one: a call that finds the cache in use by another thread claims
//! or returns its token through the pool directly (the same `wr_id`s and
//! errors), so it never blocks.
//!
//! Caches over a standalone pool (`ry_token_cache_create`, `_claim`,
//! `_complete`) are part of the per-layer ABI (cargo feature `layers`,
//! `RY_LAYERS` in C).

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use railyard_core::token::{TokenCacheOver, TokenPool, TokenRecord};

use crate::error::{guard, ret, ret_opt, Error, Result, RyStatus};
use crate::handle::Registry;
use crate::hotpath::{ry_hotpath, HotPathHandle};

/// Largest `capacity` a token cache may have (free tokens it holds at most).
pub const RY_TOKEN_CACHE_MAX_CAPACITY: u32 = 256;

/// A token cache handle. Zero is never a valid handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_token_cache {
    /// Opaque handle bits.
    pub bits: u64,
}

/// The pool a cache is over, kept alive by the cache.
pub(crate) enum PoolRef {
    /// A standalone `ry_token_pool`.
    #[cfg(feature = "layers")]
    Pool(Arc<TokenPool>),
    /// A hot path's own pool.
    HotPath(Arc<HotPathHandle>),
}

impl Deref for PoolRef {
    type Target = TokenPool;

    #[inline(always)]
    fn deref(&self) -> &TokenPool {
        match self {
            #[cfg(feature = "layers")]
            PoolRef::Pool(p) => p,
            PoolRef::HotPath(h) => h.tokens(),
        }
    }
}

/// A cache of one of the supported capacities (`TokenCacheOver`'s
/// capacity is a compile-time constant).
// One per handle, on the heap behind its mutex: boxing the big variants
// would only add a pointer chase to every call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum AnyCache {
    /// Capacity 2.
    C2(TokenCacheOver<PoolRef, TokenRecord, 2>),
    /// Capacity 4.
    C4(TokenCacheOver<PoolRef, TokenRecord, 4>),
    /// Capacity 8.
    C8(TokenCacheOver<PoolRef, TokenRecord, 8>),
    /// Capacity 16.
    C16(TokenCacheOver<PoolRef, TokenRecord, 16>),
    /// Capacity 32.
    C32(TokenCacheOver<PoolRef, TokenRecord, 32>),
    /// Capacity 64.
    C64(TokenCacheOver<PoolRef, TokenRecord, 64>),
    /// Capacity 128.
    C128(TokenCacheOver<PoolRef, TokenRecord, 128>),
    /// Capacity 256.
    C256(TokenCacheOver<PoolRef, TokenRecord, 256>),
}

impl AnyCache {
    fn new(pool: PoolRef, capacity: u32) -> Result<Self> {
        Ok(match capacity {
            2 => AnyCache::C2(TokenCacheOver::new(pool)),
            4 => AnyCache::C4(TokenCacheOver::new(pool)),
            8 => AnyCache::C8(TokenCacheOver::new(pool)),
            16 => AnyCache::C16(TokenCacheOver::new(pool)),
            32 => AnyCache::C32(TokenCacheOver::new(pool)),
            64 => AnyCache::C64(TokenCacheOver::new(pool)),
            128 => AnyCache::C128(TokenCacheOver::new(pool)),
            256 => AnyCache::C256(TokenCacheOver::new(pool)),
            c => {
                return Err(Error::new(
                    RyStatus::TokenInvalidCapacity,
                    format_args!(
                        "capacity: {c} is not a power of two in 2..={RY_TOKEN_CACHE_MAX_CAPACITY}"
                    ),
                ))
            }
        })
    }
}

/// Runs `$body` with `$c` bound to the concrete cache inside `$any` (an
/// `&AnyCache` or `&mut AnyCache`): one monomorphic copy per capacity.
macro_rules! with_cache {
    ($any:expr, $c:ident => $body:expr) => {
        match $any {
            $crate::token_cache::AnyCache::C2($c) => $body,
            $crate::token_cache::AnyCache::C4($c) => $body,
            $crate::token_cache::AnyCache::C8($c) => $body,
            $crate::token_cache::AnyCache::C16($c) => $body,
            $crate::token_cache::AnyCache::C32($c) => $body,
            $crate::token_cache::AnyCache::C64($c) => $body,
            $crate::token_cache::AnyCache::C128($c) => $body,
            $crate::token_cache::AnyCache::C256($c) => $body,
        }
    };
}
pub(crate) use with_cache;

/// What a cache handle names.
pub(crate) struct CacheObj {
    cache: Mutex<AnyCache>,
    /// The pool's address (kept alive by the cache's `PoolRef`), to refuse
    /// a wrong pool without taking the cache.
    pool: usize,
    capacity: u32,
}

impl CacheObj {
    /// The cache for this call, or `None` when another thread is using it
    /// (the caller then goes to the pool directly). Refuses a cache over
    /// another pool than `pool`.
    pub(crate) fn lock_for(&self, pool: &TokenPool) -> Result<Option<MutexGuard<'_, AnyCache>>> {
        if self.pool != std::ptr::from_ref(pool) as usize {
            return Err(wrong_pool());
        }
        match self.cache.try_lock() {
            Ok(g) => Ok(Some(g)),
            // Every mutation leaves the cache consistent (core's cache
            // never panics half-way through one).
            Err(TryLockError::Poisoned(p)) => Ok(Some(p.into_inner())),
            Err(TryLockError::WouldBlock) => Ok(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, AnyCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn wrong_pool() -> Error {
    Error::new(
        RyStatus::TokenCacheWrongPool,
        "this token cache was created over another pool or hot path",
    )
}

static CACHES: Registry<CacheObj> = Registry::new(9, "token cache");

/// The live cache named by `c`.
pub(crate) fn lookup(c: ry_token_cache) -> Result<crate::handle::Pinned<CacheObj>> {
    CACHES.get(c.bits)
}

/// A new cache over `pool`, as its handle.
fn create(pool: PoolRef, capacity: u32) -> Result<ry_token_cache> {
    let addr = std::ptr::from_ref::<TokenPool>(&*pool) as usize;
    let cache = Mutex::new(AnyCache::new(pool, capacity)?);
    let bits = CACHES.insert(CacheObj {
        cache,
        pool: addr,
        capacity,
    })?;
    Ok(ry_token_cache { bits })
}

/// Creates a cache of at most `capacity` free tokens (a power of two in
/// 2..=`RY_TOKEN_CACHE_MAX_CAPACITY`) over hot path `hp`'s token pool, for
/// `ry_hotpath_post_via`, `ry_hotpath_complete_via` and
/// `ry_hotpath_unposted_via`: one per poster or poller thread.
///
/// Ownership: on success `*out` is the caller's; free it with
/// `ry_token_cache_destroy`. The cache keeps the hot path's memory alive
/// until then. Thread-safety: any thread.
///
/// # Safety
/// `out` is NULL (refused) or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_token_cache_create(
    hp: ry_hotpath,
    capacity: u32,
    out: *mut ry_token_cache,
) -> RyStatus {
    // SAFETY: caller contract: `out` is NULL (refused) or valid for writes.
    unsafe {
        ret(out, "out", || {
            let hp = Arc::clone(&*crate::hotpath::hotpath(hp)?);
            create(PoolRef::HotPath(hp), capacity)
        })
    }
}

/// Returns every token the cache holds to its pool and destroys the cache.
/// A second destroy, or any later use of the handle, is
/// `RY_STATUS_INVALID_HANDLE`.
///
/// Ownership: consumes the handle; every copy becomes invalid.
/// Thread-safety: any thread; a call racing on another thread finishes on
/// the old cache, whose tokens go back to the pool when it is freed.
#[no_mangle]
pub extern "C" fn ry_token_cache_destroy(cache: ry_token_cache) -> RyStatus {
    guard(|| {
        {
            let c = lookup(cache)?;
            let mut g = c.lock();
            with_cache!(&mut *g, x => x.flush());
        }
        CACHES.remove(cache.bits)
    })
}

/// Returns every token the cache holds to its pool now (e.g. before a
/// thread stops posting for a while); writes how many to `*returned_out`
/// (optional).
///
/// Ownership: writes plain data. Thread-safety: any thread (waits for a
/// call on the cache running in another thread; never called on the data
/// path).
///
/// # Safety
/// `returned_out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_token_cache_flush(
    cache: ry_token_cache,
    returned_out: *mut u32,
) -> RyStatus {
    // SAFETY: caller contract: `returned_out` NULL or valid for writes.
    unsafe {
        ret_opt(returned_out, || {
            let c = lookup(cache)?;
            let mut g = c.lock();
            Ok(with_cache!(&mut *g, x => {
                let n = x.cached();
                x.flush();
                n as u32
            }))
        })
    }
}

/// For a thread's idle loop: answers a pending request to return tokens
/// (a claim anywhere found the pool empty since this cache last looked)
/// and, with `parking` nonzero (the thread is about to sleep or block),
/// returns every cached token whatever was asked. Writes how many tokens
/// went back to `*returned_out` (optional); when not 0, wake whatever waits
/// for a token (work refused with `RY_STATUS_TOKEN_EXHAUSTED` or a
/// `RY_REFUSAL_TOKEN` post).
///
/// Ownership: writes plain data. Thread-safety: the cache's own thread.
///
/// # Safety
/// `returned_out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_token_cache_idle(
    cache: ry_token_cache,
    parking: u8,
    returned_out: *mut u32,
) -> RyStatus {
    // SAFETY: caller contract: `returned_out` NULL or valid for writes.
    unsafe {
        ret_opt(returned_out, || {
            let c = lookup(cache)?;
            let mut g = c.lock();
            Ok(with_cache!(&mut *g, x => x.idle(parking != 0)) as u32)
        })
    }
}

/// Writes the number of free tokens the cache holds now (at most its
/// capacity) to `*cached_out` and, if `capacity_out` is not NULL, its
/// capacity.
///
/// Ownership: writes plain data. Thread-safety: any thread (a snapshot).
///
/// # Safety
/// `cached_out` is valid for writes; `capacity_out` is NULL or valid for
/// writes.
#[no_mangle]
pub unsafe extern "C" fn ry_token_cache_cached(
    cache: ry_token_cache,
    cached_out: *mut u32,
    capacity_out: *mut u32,
) -> RyStatus {
    // SAFETY: caller contract: `cached_out` valid for writes,
    // `capacity_out` NULL or valid for writes.
    unsafe {
        ret(cached_out, "cached_out", || {
            let c = lookup(cache)?;
            let n = with_cache!(&*c.lock(), x => x.cached());
            crate::ptr::put(capacity_out, c.capacity);
            Ok(n as u32)
        })
    }
}

#[cfg(feature = "layers")]
pub use layer::*;

/// Caches over a standalone token pool (feature `layers`).
#[cfg(feature = "layers")]
mod layer {
    use super::*;
    use crate::ptr::in_ref;
    use crate::token::{ry_token_pool, ry_token_record};

    /// Creates a cache of at most `capacity` free tokens (a power of two in
    /// 2..=`RY_TOKEN_CACHE_MAX_CAPACITY`; otherwise
    /// `RY_STATUS_TOKEN_INVALID_CAPACITY`) over token pool `pool`, for
    /// `ry_token_cache_claim` / `ry_token_cache_complete`. Allocates here only.
    ///
    /// Ownership: on success `*out` names a new cache owned by the caller; free
    /// it with `ry_token_cache_destroy` (which returns its tokens). The cache
    /// keeps the pool's memory alive until then. Thread-safety: any thread.
    ///
    /// # Safety
    /// `out` is NULL (refused) or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_cache_create(
        pool: ry_token_pool,
        capacity: u32,
        out: *mut ry_token_cache,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is NULL (refused) or valid for writes.
        unsafe {
            ret(out, "out", || {
                let pool = Arc::clone(&*crate::token::pool(pool)?);
                create(PoolRef::Pool(pool), capacity)
            })
        }
    }

    /// `ry_token_claim` through `cache`, which must be over `pool`
    /// (`RY_STATUS_TOKEN_CACHE_WRONG_POOL` otherwise): the same `wr_id`s and
    /// errors. `RY_STATUS_TOKEN_EXHAUSTED` means the cache and the pool's shared
    /// lists were empty; it also asked every other cache to return its tokens.
    ///
    /// Ownership: the pool owns the record copy until it is completed.
    /// Thread-safety: the cache's own thread (lock-free; never allocates).
    ///
    /// # Safety
    /// `record` is valid for reads; `wr_id_out` is valid for writes (NULLs are
    /// refused before anything is claimed).
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_cache_claim(
        cache: ry_token_cache,
        pool: ry_token_pool,
        record: *const ry_token_record,
        wr_id_out: *mut u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `record` valid for reads, `wr_id_out` for
        // writes (checked before anything is claimed).
        unsafe {
            ret(wr_id_out, "wr_id_out", || {
                let p = crate::token::pool(pool)?;
                let c = lookup(cache)?;
                let rec = TokenRecord::from(in_ref(record, "record")?);
                let wr_id = match c.lock_for(&p)? {
                    Some(mut g) => with_cache!(&mut *g, x => x.claim(rec))?,
                    None => p.claim(rec)?,
                };
                Ok(wr_id)
            })
        }
    }

    /// `ry_token_complete` through `cache`, which must be over `pool`: the same
    /// exactly-once record and errors (a duplicate, stale, forged or
    /// out-of-range `wr_id` releases nothing); the freed slot stays in the
    /// cache, whichever cache (or none) claimed it.
    ///
    /// Ownership: the record moves to the caller. Thread-safety: the cache's
    /// own thread.
    ///
    /// # Safety
    /// `record_out` is valid for writes (NULL is refused before anything is
    /// completed).
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_cache_complete(
        cache: ry_token_cache,
        pool: ry_token_pool,
        wr_id: u64,
        record_out: *mut ry_token_record,
    ) -> RyStatus {
        // SAFETY: caller contract: `record_out` valid for writes (checked
        // before anything is completed).
        unsafe {
            ret(record_out, "record_out", || {
                let p = crate::token::pool(pool)?;
                let c = lookup(cache)?;
                let rec = match c.lock_for(&p)? {
                    Some(mut g) => with_cache!(&mut *g, x => x.complete(wr_id))?,
                    None => p.complete(wr_id)?,
                };
                Ok(ry_token_record::from(&rec))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hotpath::*;
    use crate::token::*;

    fn new_pool(cap: u32) -> ry_token_pool {
        let mut p = ry_token_pool::default();
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { ry_token_pool_create(cap, &mut p) }, RyStatus::Ok);
        p
    }

    fn new_cache(p: ry_token_pool, cap: u32) -> (RyStatus, ry_token_cache) {
        let mut c = ry_token_cache::default();
        // SAFETY: valid out-pointer.
        let st = unsafe { ry_token_cache_create(p, cap, &mut c) };
        (st, c)
    }

    fn cached(c: ry_token_cache) -> u32 {
        let mut n = u32::MAX;
        // SAFETY: valid out-pointer; NULL capacity is allowed.
        let st = unsafe { ry_token_cache_cached(c, &mut n, std::ptr::null_mut()) };
        assert_eq!(st, RyStatus::Ok);
        n
    }

    fn free_in_pool(p: ry_token_pool) -> usize {
        crate::token::pool(p).ok().unwrap().free_in_pool()
    }

    #[test]
    fn bad_input_is_typed() {
        let p = new_pool(8);
        let q = new_pool(8);
        for bad in [0, 1, 3, 6, 512, RY_TOKEN_CACHE_MAX_CAPACITY + 1, u32::MAX] {
            assert_eq!(new_cache(p, bad).0, RyStatus::TokenInvalidCapacity, "{bad}");
        }
        assert_eq!(
            new_cache(ry_token_pool::default(), 4).0,
            RyStatus::InvalidHandle
        );
        // SAFETY: NULL is refused.
        let st = unsafe { ry_token_cache_create(p, 4, std::ptr::null_mut()) };
        assert_eq!(st, RyStatus::NullArgument);
        let (st, c) = new_cache(p, 4);
        assert_eq!(st, RyStatus::Ok);
        let rec = ry_token_record {
            bytes: 7,
            ..Default::default()
        };
        let mut w = 0u64;
        // A cache of pool p used with pool q: refused, nothing claimed.
        // SAFETY: valid pointers.
        let st = unsafe { ry_token_cache_claim(c, q, &rec, &mut w) };
        assert_eq!(st, RyStatus::TokenCacheWrongPool);
        assert_eq!(free_in_pool(q), 8);
        // NULLs are refused before anything is claimed.
        // SAFETY: NULL record / out are refused.
        unsafe {
            assert_eq!(
                ry_token_cache_claim(c, p, std::ptr::null(), &mut w),
                RyStatus::NullArgument
            );
            assert_eq!(
                ry_token_cache_claim(c, p, &rec, std::ptr::null_mut()),
                RyStatus::NullArgument
            );
            assert_eq!(
                ry_token_cache_cached(c, std::ptr::null_mut(), std::ptr::null_mut()),
                RyStatus::NullArgument
            );
        }
        assert_eq!(free_in_pool(p), 8);
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_claim(c, p, &rec, &mut w) },
            RyStatus::Ok
        );
        let mut out = ry_token_record::default();
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                ry_token_cache_complete(c, q, w, &mut out),
                RyStatus::TokenCacheWrongPool
            );
            assert_eq!(
                ry_token_cache_complete(c, p, w, std::ptr::null_mut()),
                RyStatus::NullArgument
            );
            assert_eq!(ry_token_cache_complete(c, p, w, &mut out), RyStatus::Ok);
            assert_eq!(out.bytes, 7);
            assert_eq!(
                ry_token_cache_complete(c, p, w, &mut out),
                RyStatus::TokenDuplicate
            );
        }
        assert_eq!(ry_token_cache_destroy(c), RyStatus::Ok);
        assert_eq!(ry_token_cache_destroy(c), RyStatus::InvalidHandle);
        assert_eq!(
            free_in_pool(p),
            8,
            "the destroyed cache returned its tokens"
        );
        // A pool handle is not a cache handle, nor the other way round.
        assert_eq!(
            ry_token_cache_destroy(ry_token_cache { bits: p.bits }),
            RyStatus::InvalidHandle
        );
        assert_eq!(ry_token_pool_destroy(p), RyStatus::Ok);
        assert_eq!(ry_token_pool_destroy(q), RyStatus::Ok);
    }

    #[test]
    fn caches_hold_at_most_capacity_and_give_everything_back() {
        let p = new_pool(64);
        let (_, poster) = new_cache(p, 8);
        let (_, poller) = new_cache(p, 8);
        let mut cap = 0;
        let mut n = 0;
        // SAFETY: valid pointers.
        let st = unsafe { ry_token_cache_cached(poster, &mut n, &mut cap) };
        assert_eq!((st, n, cap), (RyStatus::Ok, 0, 8));
        let rec = ry_token_record::default();
        let mut ids = Vec::new();
        for _ in 0..40 {
            let mut w = 0;
            // SAFETY: valid pointers.
            assert_eq!(
                // SAFETY: every pointer comes from a live local.
                unsafe { ry_token_cache_claim(poster, p, &rec, &mut w) },
                RyStatus::Ok
            );
            ids.push(w);
        }
        let pool = crate::token::pool(p).ok().unwrap();
        assert_eq!(pool.in_use(), 40);
        // The poller completes what the poster claimed.
        let mut out = ry_token_record::default();
        for &w in &ids {
            // SAFETY: valid pointers.
            let st = unsafe { ry_token_cache_complete(poller, p, w, &mut out) };
            assert_eq!(st, RyStatus::Ok);
            assert!(cached(poller) <= 8);
        }
        assert_eq!(pool.in_use(), 0);
        let hidden = cached(poster) + cached(poller);
        assert!(hidden <= 16);
        assert_eq!(pool.free_in_pool() + hidden as usize, 64);
        let mut back = u32::MAX;
        // SAFETY: valid out-pointer.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_flush(poller, &mut back) },
            RyStatus::Ok
        );
        assert_eq!((back, cached(poller)), (hidden - cached(poster), 0));
        // SAFETY: valid out-pointer.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_idle(poster, 1, &mut back) },
            RyStatus::Ok
        );
        assert_eq!(cached(poster), 0, "a parking cache holds nothing");
        assert_eq!(pool.free_in_pool(), 64);
        drop(pool);
        // The pool's handle dies first: the caches stay safe, their calls
        // name the dead pool and are refused.
        assert_eq!(ry_token_pool_destroy(p), RyStatus::Ok);
        let mut w = 0;
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_claim(poster, p, &rec, &mut w) },
            RyStatus::InvalidHandle
        );
        assert_eq!(ry_token_cache_destroy(poster), RyStatus::Ok);
        assert_eq!(ry_token_cache_destroy(poller), RyStatus::Ok);
    }

    #[test]
    fn exhaustion_asks_other_caches_for_their_tokens() {
        let p = new_pool(4);
        let (_, a) = new_cache(p, 4);
        let (_, b) = new_cache(p, 4);
        let rec = ry_token_record::default();
        let mut w = [0u64; 4];
        for x in &mut w {
            // SAFETY: valid pointers.
            assert_eq!(unsafe { ry_token_cache_claim(a, p, &rec, x) }, RyStatus::Ok);
        }
        let mut out = ry_token_record::default();
        for &x in &w {
            // SAFETY: valid pointers.
            assert_eq!(
                // SAFETY: every pointer comes from a live local.
                unsafe { ry_token_cache_complete(a, p, x, &mut out) },
                RyStatus::Ok
            );
        }
        assert_eq!(cached(a), 4, "every free token sits in a");
        let mut x = 0;
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_claim(b, p, &rec, &mut x) },
            RyStatus::TokenExhausted
        );
        // a answers at its next idle round; b's retry then succeeds.
        let mut back = 0;
        // SAFETY: valid out-pointer.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_idle(a, 0, &mut back) },
            RyStatus::Ok
        );
        assert_eq!(back, 4);
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_claim(b, p, &rec, &mut x) },
            RyStatus::Ok
        );
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_complete(b, p, x, &mut out) },
            RyStatus::Ok
        );
        assert_eq!(ry_token_cache_destroy(a), RyStatus::Ok);
        assert_eq!(ry_token_cache_destroy(b), RyStatus::Ok);
        assert_eq!(free_in_pool(p), 4);
        assert_eq!(ry_token_pool_destroy(p), RyStatus::Ok);
    }

    fn hot_path() -> ry_hotpath {
        let mut c = std::mem::MaybeUninit::<ry_hotpath_config>::uninit();
        // SAFETY: valid out-pointer.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_hotpath_config_default(c.as_mut_ptr()) },
            RyStatus::Ok
        );
        // SAFETY: initialised by the call above.
        let mut c = unsafe { c.assume_init() };
        c.tokens = 64;
        let routes = [0u16];
        let mut hp = ry_hotpath::default();
        // SAFETY: valid pointers.
        let st = unsafe { ry_hotpath_create(&c, routes.as_ptr(), 1, &mut hp) };
        assert_eq!(st, RyStatus::Ok);
        hp
    }

    fn hp_cache(hp: ry_hotpath, cap: u32) -> (RyStatus, ry_token_cache) {
        let mut c = ry_token_cache::default();
        // SAFETY: valid out-pointer.
        let st = unsafe { ry_hotpath_token_cache_create(hp, cap, &mut c) };
        (st, c)
    }

    fn hp_stats(hp: ry_hotpath) -> ry_hotpath_stats {
        let mut s = ry_hotpath_stats::default();
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { ry_hotpath_stats_get(hp, &mut s) }, RyStatus::Ok);
        s
    }

    fn post_via(
        hp: ry_hotpath,
        c: ry_token_cache,
        s: ry_slice_ref,
        path: &ry_path,
    ) -> (RyStatus, ry_post_result) {
        let req = ry_post_request {
            now_ns: 1,
            paths: path,
            n_paths: 1,
            slice: s,
            bytes: 4096,
            peer: 0,
            credit_class: 0,
            credit_use: 0,
            has_peer: 1,
            reserved: [0; 7],
        };
        let mut o = ry_post_result::default();
        // SAFETY: valid pointers.
        let st = unsafe { ry_hotpath_post_via(hp, c, &req, &mut o) };
        (st, o)
    }

    #[test]
    fn the_hot_path_through_caches_keeps_wr_id_semantics() {
        let hp = hot_path();
        let other = hot_path();
        assert_eq!(hp_cache(hp, 0).0, RyStatus::TokenInvalidCapacity);
        assert_eq!(hp_cache(hp, 1024).0, RyStatus::TokenInvalidCapacity);
        assert_eq!(
            hp_cache(ry_hotpath::default(), 8).0,
            RyStatus::InvalidHandle
        );
        let (_, poster) = hp_cache(hp, 8);
        let (_, poller) = hp_cache(hp, 8);
        let (_, foreign) = hp_cache(other, 8);
        let p = new_pool(8);
        let (_, pool_cache) = new_cache(p, 8);
        let mut ep = ry_endpoint::default();
        // SAFETY: valid out-pointer.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_hotpath_endpoint_open(hp, 1, &mut ep) },
            RyStatus::Ok
        );
        let path = ry_path {
            endpoint: ep,
            route: 0,
            device: 0,
            qp: 0,
        };
        let mut slices = Vec::new();
        for i in 0..20 {
            let mut s = ry_slice_ref::default();
            // SAFETY: valid out-pointer.
            let st = unsafe {
                ry_hotpath_slice_open(hp, i, crate::evidence::ry_task::default(), &mut s)
            };
            assert_eq!(st, RyStatus::Ok);
            slices.push(s);
        }
        // A cache of another hot path, or of a standalone pool: refused,
        // nothing held.
        for wrong in [foreign, pool_cache] {
            let (st, _) = post_via(hp, wrong, slices[0], &path);
            assert_eq!(st, RyStatus::TokenCacheWrongPool);
        }
        assert_eq!(
            post_via(hp, ry_token_cache::default(), slices[0], &path).0,
            RyStatus::InvalidHandle
        );
        let s = hp_stats(hp);
        assert_eq!(
            (s.posts, s.tokens_in_use, s.endpoint_outstanding),
            (0, 0, 0)
        );
        // Posts through the poster's cache, completions through the
        // poller's: the same wr_ids, exactly once.
        let mut wr = Vec::new();
        for &s in &slices {
            let (st, o) = post_via(hp, poster, s, &path);
            assert_eq!(st, RyStatus::Ok);
            wr.push(o.wr_id);
        }
        assert_eq!(hp_stats(hp).tokens_in_use, 20);
        let mut c = std::mem::MaybeUninit::<ry_completion>::uninit();
        // The last one was never posted (a bad_wr tail): unposted via the poster.
        assert_eq!(
            ry_hotpath_unposted_via(hp, foreign, wr[19], 2),
            RyStatus::TokenCacheWrongPool
        );
        assert_eq!(ry_hotpath_unposted_via(hp, poster, wr[19], 2), RyStatus::Ok);
        assert_eq!(
            ry_hotpath_unposted_via(hp, poster, wr[19], 2),
            RyStatus::TokenDuplicate
        );
        for &w in &wr[..19] {
            // SAFETY: valid out-pointer.
            let st = unsafe {
                ry_hotpath_complete_via(
                    hp,
                    poller,
                    w,
                    railyard_core::classify::wc::SUCCESS,
                    0,
                    3,
                    c.as_mut_ptr(),
                )
            };
            assert_eq!(st, RyStatus::Ok);
            // SAFETY: written by the call.
            let d = unsafe { c.assume_init() };
            assert_eq!(d.effect, ry_slice_effect::Settled as u32);
        }
        // SAFETY: valid out-pointer.
        unsafe {
            assert_eq!(
                ry_hotpath_complete_via(hp, poller, wr[0], 0, 0, 4, c.as_mut_ptr()),
                RyStatus::TokenDuplicate
            );
            assert_eq!(
                ry_hotpath_complete_via(hp, foreign, wr[1], 0, 0, 4, c.as_mut_ptr()),
                RyStatus::TokenCacheWrongPool
            );
            assert_eq!(
                ry_hotpath_complete_via(hp, poller, wr[1], 0, 0, 4, std::ptr::null_mut()),
                RyStatus::NullArgument
            );
        }
        let s = hp_stats(hp);
        assert_eq!(
            (
                s.posts,
                s.completions,
                s.unposted,
                s.tokens_in_use,
                s.endpoint_outstanding,
                s.cc_in_flight
            ),
            (20, 19, 1, 0, 0, 0)
        );
        assert!(cached(poster) <= 8 && cached(poller) <= 8);
        // Destroying the hot path first keeps the caches safe; destroying
        // them returns their tokens (to the pool they keep alive).
        assert_eq!(ry_hotpath_destroy(hp), RyStatus::Ok);
        assert_eq!(
            post_via(hp, poster, slices[0], &path).0,
            RyStatus::InvalidHandle
        );
        for c in [poster, poller, foreign, pool_cache] {
            assert_eq!(ry_token_cache_destroy(c), RyStatus::Ok);
        }
        assert_eq!(ry_hotpath_destroy(other), RyStatus::Ok);
        assert_eq!(ry_token_pool_destroy(p), RyStatus::Ok);
    }

    #[test]
    fn a_cache_busy_on_another_thread_is_bypassed_not_blocked() {
        let p = new_pool(16);
        let (_, c) = new_cache(p, 4);
        let obj = lookup(c).ok().unwrap();
        let held = obj.cache.lock().unwrap();
        // Another thread holds the cache: this call goes to the pool.
        let rec = ry_token_record::default();
        let mut w = 0;
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_claim(c, p, &rec, &mut w) },
            RyStatus::Ok
        );
        let mut out = ry_token_record::default();
        // SAFETY: valid pointers.
        assert_eq!(
            // SAFETY: every pointer comes from a live local.
            unsafe { ry_token_cache_complete(c, p, w, &mut out) },
            RyStatus::Ok
        );
        drop(held);
        drop(obj);
        assert_eq!(cached(c), 0, "nothing went through the busy cache");
        assert_eq!(free_in_pool(p), 16);
        assert_eq!(ry_token_cache_destroy(c), RyStatus::Ok);
        assert_eq!(ry_token_pool_destroy(p), RyStatus::Ok);
    }
}
