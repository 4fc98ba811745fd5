//! The posted-attempt token pool (RFC 3136): `wr_id` names one posted
//! attempt, and completing it hands its record back exactly once.
//!
//! [`ry_token_record`] is every hold of one attempt (the hot path hands it
//! back with each completion); the standalone pool (`ry_token_*`) is part
//! of the per-layer ABI (cargo feature `layers`, `RY_LAYERS` in C).

use railyard_core::endpoint::EndpointHandle;
use railyard_core::slice::SliceRef;
use railyard_core::token::{OptId, TokenRecord};

/// `ry_token_record.holds`: the attempt holds a congestion-control permit.
pub const RY_HOLDS_PERMIT: u8 = 1 << 0;
/// `ry_token_record.holds`: the attempt holds a rail-selector charge.
pub const RY_HOLDS_RAIL_CHARGE: u8 = 1 << 1;
/// `ry_token_record.holds`: the attempt holds a committed receiver credit.
pub const RY_HOLDS_CREDIT: u8 = 1 << 2;
/// `ry_token_record.holds`: the attempt counts in its endpoint's outstanding posts.
pub const RY_HOLDS_OUTSTANDING: u8 = 1 << 3;
/// `ry_token_record.holds`: the rail charge includes the peer entry.
pub const RY_HOLDS_RAIL_PEER_CHARGE: u8 = 1 << 4;

// cbindgen needs literal values; they must equal core's bits.
const _: () = {
    assert!(RY_HOLDS_PERMIT == TokenRecord::HOLDS_PERMIT);
    assert!(RY_HOLDS_RAIL_CHARGE == TokenRecord::HOLDS_RAIL_CHARGE);
    assert!(RY_HOLDS_CREDIT == TokenRecord::HOLDS_CREDIT);
    assert!(RY_HOLDS_OUTSTANDING == TokenRecord::HOLDS_OUTSTANDING);
    assert!(RY_HOLDS_RAIL_PEER_CHARGE == TokenRecord::HOLDS_RAIL_PEER_CHARGE);
};

/// Everything one posted attempt owns, as plain data (the C mirror of
/// railyard's `TokenRecord`). Zero-initialise it, then fill what applies.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_token_record {
    /// Post time, from the caller's clock (ns).
    pub post_ns: u64,
    /// Slice index.
    pub slice_index: u32,
    /// Slice attempt current at post time.
    pub slice_attempt: u32,
    /// Endpoint slot.
    pub endpoint_slot: u32,
    /// Endpoint generation.
    pub endpoint_generation: u32,
    /// Bytes in this work request.
    pub bytes: u32,
    /// Route domain index (for the controller).
    pub route: u32,
    /// Route generation at admission.
    pub route_generation: u32,
    /// Remote peer (segment id); meaningful only if `has_peer`.
    pub peer: u32,
    /// Credit ledger entry; meaningful only if `has_credit_key`.
    pub credit_key: u32,
    /// QP index within the endpoint.
    pub qp: u16,
    /// Local device (device domain / rail) index.
    pub device: u16,
    /// `RY_HOLDS_*` bits: the resources this attempt holds.
    pub holds: u8,
    /// Nonzero if `peer` is known (peer 0 is a real peer).
    pub has_peer: u8,
    /// Nonzero if `credit_key` is set.
    pub has_credit_key: u8,
    /// Reserved, zero (explicit: the struct has no implicit padding).
    pub reserved: [u8; 5],
}

impl From<&ry_token_record> for TokenRecord {
    fn from(r: &ry_token_record) -> Self {
        TokenRecord {
            slice: SliceRef {
                index: r.slice_index,
                attempt: r.slice_attempt,
            },
            endpoint: EndpointHandle {
                slot: r.endpoint_slot,
                generation: r.endpoint_generation,
            },
            post_ns: r.post_ns,
            bytes: r.bytes,
            route: r.route,
            route_generation: r.route_generation,
            peer: OptId::new((r.has_peer != 0).then_some(r.peer)),
            credit_key: OptId::new((r.has_credit_key != 0).then_some(r.credit_key)),
            qp: r.qp,
            device: r.device,
            holds: r.holds,
        }
    }
}

impl From<&TokenRecord> for ry_token_record {
    fn from(r: &TokenRecord) -> Self {
        ry_token_record {
            post_ns: r.post_ns,
            slice_index: r.slice.index,
            slice_attempt: r.slice.attempt,
            endpoint_slot: r.endpoint.slot,
            endpoint_generation: r.endpoint.generation,
            bytes: r.bytes,
            route: r.route,
            route_generation: r.route_generation,
            peer: r.peer.get().unwrap_or(0),
            credit_key: r.credit_key.get().unwrap_or(0),
            qp: r.qp,
            device: r.device,
            holds: r.holds,
            has_peer: u8::from(r.peer.is_some()),
            has_credit_key: u8::from(r.credit_key.is_some()),
            reserved: [0; 5],
        }
    }
}

/// A token pool handle. Zero is never a valid handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_token_pool {
    /// Opaque handle bits.
    pub bits: u64,
}

#[cfg(feature = "layers")]
pub use layer::*;

/// The standalone token pool's calls (feature `layers`).
#[cfg(feature = "layers")]
mod layer {
    use std::sync::Arc;

    use railyard_core::token::{TokenPool, TokenRecord};

    use super::{ry_token_pool, ry_token_record};
    use crate::error::{guard, ret, Result, RyStatus};
    use crate::handle::{Pinned, Registry};
    use crate::ptr::in_ref;

    // Behind an `Arc`: a token cache over the pool keeps its memory alive.
    static POOLS: Registry<Arc<TokenPool>> = Registry::new(1, "token pool");

    /// The live pool named by `pool`.
    pub(crate) fn pool(pool: ry_token_pool) -> Result<Pinned<Arc<TokenPool>>> {
        POOLS.get(pool.bits)
    }

    /// Creates a token pool of `capacity` slots (allocated once, here).
    ///
    /// Ownership: on success `*out` names a new pool owned by the caller; free
    /// it with `ry_token_pool_destroy`. Thread-safety: any thread.
    ///
    /// # Safety
    /// `out` is NULL (refused) or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_pool_create(
        capacity: u32,
        out: *mut ry_token_pool,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is NULL or valid for writes.
        unsafe {
            ret(out, "out", || {
                let pool = TokenPool::new(capacity as usize)?;
                Ok(ry_token_pool {
                    bits: POOLS.insert(Arc::new(pool))?,
                })
            })
        }
    }

    /// Destroys a pool. Records of attempts still live are dropped with it:
    /// complete them first (`ry_token_pool_in_use` tells how many are live).
    /// A token cache over the pool keeps its memory until the cache is
    /// destroyed too (its calls then need the pool's handle, now invalid).
    /// A second destroy, or any later use of the handle, is
    /// `RY_STATUS_INVALID_HANDLE`. Thread-safety: any thread; calls already
    /// running on the pool in other threads finish safely.
    ///
    /// Ownership: consumes the handle; every copy of it becomes invalid.
    #[no_mangle]
    pub extern "C" fn ry_token_pool_destroy(pool: ry_token_pool) -> RyStatus {
        guard(|| POOLS.remove(pool.bits))
    }

    /// Claims a slot for one posted attempt holding `*record` (copied in) and
    /// writes its `wr_id`. Never blocks: a full pool is
    /// `RY_STATUS_TOKEN_EXHAUSTED` (backpressure).
    ///
    /// Ownership: the pool owns the record copy until `ry_token_complete`.
    /// Thread-safety: lock-free; any number of threads at once.
    ///
    /// # Safety
    /// `record` is valid for reads; `wr_id_out` is valid for writes (NULLs are
    /// refused).
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_claim(
        pool: ry_token_pool,
        record: *const ry_token_record,
        wr_id_out: *mut u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `record` valid for reads, `wr_id_out` for
        // writes (checked before claiming, so a NULL never leaks a slot).
        unsafe {
            ret(wr_id_out, "wr_id_out", || {
                let p = POOLS.get(pool.bits)?;
                Ok(p.claim(TokenRecord::from(in_ref(record, "record")?))?)
            })
        }
    }

    /// Completes the attempt `wr_id` exactly once and writes its record to
    /// `*record_out`. A duplicate, stale, forged or out-of-range `wr_id` is a
    /// typed error and releases nothing.
    ///
    /// Ownership: the record moves to the caller, who releases what its
    /// `holds` bits name. Thread-safety: lock-free; exactly one of several
    /// concurrent completers of the same `wr_id` succeeds.
    ///
    /// # Safety
    /// `record_out` is valid for writes (NULL is refused before anything is
    /// completed).
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_complete(
        pool: ry_token_pool,
        wr_id: u64,
        record_out: *mut ry_token_record,
    ) -> RyStatus {
        // SAFETY: caller contract: `record_out` is valid for writes.
        unsafe {
            ret(record_out, "record_out", || {
                Ok((&POOLS.get(pool.bits)?.complete(wr_id)?).into())
            })
        }
    }

    /// Writes the number of live (claimed, not completed) attempts.
    /// A snapshot: concurrent claims/completions may change it at once.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_pool_in_use(pool: ry_token_pool, out: *mut u32) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                Ok(u32::try_from(POOLS.get(pool.bits)?.in_use()).unwrap_or(u32::MAX))
            })
        }
    }

    /// Writes the pool's capacity.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: pure; any thread, concurrently.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_token_pool_capacity(
        pool: ry_token_pool,
        out: *mut u32,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                Ok(u32::try_from(POOLS.get(pool.bits)?.capacity()).unwrap_or(u32::MAX))
            })
        }
    }
}
