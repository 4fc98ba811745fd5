//! Registered memory: the region table, its pins, and deregistration.
//!
//! * **Table**: [`MAX_MEMORY_REGIONS`] slots. `MemTable::regions` (under a
//!   mutex) owns each region's [`MemEntry`] (`Arc`); `MemTable::slots[i]`
//!   mirrors it for the workers: a raw pointer to the same entry, read
//!   lock-free, and the slot's [`Pins`].
//! * **Pins** (`railyard_core::pin`): `submit` pins a region once per slice
//!   it queues (validation and pin under the table lock, so a slot cannot
//!   be reused in between); the slice unpins when it settles. A worker pins
//!   once more per posted work request, right before `HotPath::post`, and
//!   unpins when that token ends (completion of any status, a refused post,
//!   or the unposted `bad_wr` tail), with the token's other holds (the
//!   engine's hot path, `hotpath.rs`); the region each token pinned is kept in `tok_mem`,
//!   indexed by the token's slot (the low 32 bits of its `wr_id`). A
//!   canceled or timed-out slice whose last attempt is still on the wire
//!   therefore keeps its region pinned until that completion arrives.
//! * **Deregistration** ([`Engine::deregister_memory`](super::Engine::deregister_memory)) closes the slot's
//!   pins: refused with [`EngineError::MemoryBusy`] while anything is
//!   pinned; once closed, no pin succeeds, so the entry is unpublished and
//!   dropped at once (every device's `ibv_dereg_mr`, then the buffer if the
//!   engine allocated it) before the call returns.
//! * A slot is reused by a later registration (`Pins::reopen`).
//!
//! The only `unsafe` is the workers' dereference of the slot pointer,
//! valid because a worker holds a pin on the slot while it reads it (see
//! [`MemTable::entry_pinned`]); `loom-tests/tests/pin.rs` models the pin
//! protocol.

use super::error::EngineError;
use super::types::MAX_MEMORY_REGIONS;
use crate::MemoryRegion;
use railyard_core::pin::{PinError, Pins};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One region slot as the workers see it.
pub(crate) struct MemSlot {
    /// Slices queued and work requests posted on the region; closed while
    /// the slot is empty.
    pub(crate) pins: Pins,
    /// The entry `MemTable::regions[i]` owns (`Arc::as_ptr`), or null.
    entry: AtomicPtr<MemEntry>,
}

/// The engine's registered memory (see the module docs).
pub(crate) struct MemTable {
    pub(crate) slots: Box<[MemSlot]>,
    regions: Mutex<Vec<Option<Arc<MemEntry>>>>,
    /// Region index + 1 of the post that holds each token slot (0: none).
    tok_mem: Box<[AtomicU32]>,
}

/// A memory region registered on every device: `regs[d]` is the
/// registration on device `d` (its lkey/rkey). `regs[0]` owns an
/// engine-allocated buffer, so the registrations are dropped last-first.
pub(crate) struct MemEntry {
    pub(crate) regs: Vec<Arc<MemoryRegion>>,
}

impl Drop for MemEntry {
    fn drop(&mut self) {
        // Deregister the extra devices before the owner frees the buffer.
        while let Some(r) = self.regs.pop() {
            drop(r);
        }
    }
}

/// A region found for a local range: its slot and the offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Located {
    pub(crate) mem: u32,
    pub(crate) offset: u64,
}

impl MemTable {
    pub(crate) fn new(tokens: usize) -> Self {
        Self {
            slots: (0..MAX_MEMORY_REGIONS)
                .map(|_| MemSlot {
                    pins: Pins::new_closed(),
                    entry: AtomicPtr::new(std::ptr::null_mut()),
                })
                .collect(),
            regions: Mutex::new(vec![None; MAX_MEMORY_REGIONS]),
            tok_mem: (0..tokens).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// The table, locked (registration, deregistration, submit's
    /// validation, handshake descriptors).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Option<Arc<MemEntry>>>> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `entry` in a free slot. Refuses a range that overlaps a
    /// registered region (Mooncake refuses it too), and a full table.
    pub(crate) fn insert(&self, entry: MemEntry) -> Result<(), EngineError> {
        let first = entry
            .regs
            .first()
            .ok_or(EngineError::Core("memory entry"))?;
        let (addr, len) = (first.addr(), first.len() as u64);
        let mut t = self.lock();
        if let Some(other) = t.iter().flatten().find_map(|e| {
            let r = e.regs.first()?;
            (addr < r.addr() + r.len() as u64 && r.addr() < addr + len).then_some(r)
        }) {
            return Err(EngineError::RegionOverlap {
                addr,
                len,
                other: other.addr(),
            });
        }
        let i = t
            .iter()
            .position(Option::is_none)
            .ok_or(EngineError::TooManyRegions)?;
        let e = Arc::new(entry);
        self.slots[i]
            .entry
            .store(Arc::as_ptr(&e).cast_mut(), Ordering::Release);
        t[i] = Some(e);
        // Open only after the pointer is published: a pin implies it.
        self.slots[i]
            .pins
            .reopen()
            .map_err(|_| EngineError::Core("memory slot state"))
    }

    /// The region holding `addr..addr+len`, in a locked table.
    pub(crate) fn locate(t: &[Option<Arc<MemEntry>>], addr: u64, len: u64) -> Option<Located> {
        let end = addr.checked_add(len)?;
        t.iter().enumerate().find_map(|(i, e)| {
            let r = e.as_ref()?.regs.first()?;
            (addr >= r.addr() && end <= r.addr() + r.len() as u64).then(|| Located {
                mem: i as u32,
                offset: addr - r.addr(),
            })
        })
    }

    /// The entry of slot `mem`, for a caller that holds a pin on it.
    #[inline]
    pub(crate) fn entry_pinned(&self, mem: usize) -> Option<&MemEntry> {
        let p = self.slots.get(mem)?.entry.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is `Arc::as_ptr` of the entry `regions[mem]` owns.
        // The caller holds a pin on `slots[mem]`, so `deregister` cannot
        // close the slot (its `try_close` fails while pinned), and only a
        // closed slot's entry is unpublished and dropped; the `Arc` in the
        // table therefore outlives this borrow, which the caller ends
        // before unpinning. The entry is never mutated after publication.
        #[allow(unsafe_code)]
        let entry = unsafe { &*p };
        Some(entry)
    }

    /// Pins slot `mem` for one post. False if the slot is closed.
    #[inline]
    pub(crate) fn pin_post(&self, mem: usize) -> bool {
        self.slots
            .get(mem)
            .is_some_and(|s| s.pins.try_pin(1).is_ok())
    }

    /// Drops `n` pins of slot `mem`.
    #[inline]
    pub(crate) fn unpin(&self, mem: usize, n: u64) {
        if let Some(s) = self.slots.get(mem) {
            let _ = s.pins.unpin(n);
        }
    }

    /// Records that the token `wr_id` (claimed by this thread moments ago,
    /// not yet posted) holds a post pin on `mem`.
    #[inline]
    pub(crate) fn token_holds(&self, wr_id: u64, mem: u32) {
        if let Some(a) = self.tok_mem.get(wr_id as u32 as usize) {
            a.store(mem + 1, Ordering::Release);
        }
    }

    /// The region the live token `wr_id` pinned. Read it *before* the
    /// token is completed: afterwards its slot may already hold another
    /// post. (The poster's store happened before `ibv_post_send`, whose
    /// CQ-outstanding increment the poller's poll synchronizes with.)
    #[inline]
    pub(crate) fn token_region(&self, wr_id: u64) -> Option<usize> {
        let v = self
            .tok_mem
            .get(wr_id as u32 as usize)?
            .load(Ordering::Acquire);
        v.checked_sub(1).map(|m| m as usize)
    }
    /// Closes the region that starts at `addr` and drops it (every
    /// device's `ibv_dereg_mr`) before returning; refused, changing
    /// nothing, while it is pinned ([`EngineError::MemoryBusy`]), for an
    /// address that starts no region ([`EngineError::NoSuchRegion`]), or
    /// with `allowed`'s error (asked once the region is found). See
    /// [`Engine::deregister_memory`](super::Engine::deregister_memory).
    pub(crate) fn deregister(
        &self,
        addr: u64,
        allowed: impl FnOnce() -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        let entry = {
            let mut regions = self.lock();
            let i = regions
                .iter()
                .position(|e| {
                    e.as_ref()
                        .and_then(|e| e.regs.first())
                        .is_some_and(|r| r.addr() == addr)
                })
                .ok_or(EngineError::NoSuchRegion { addr })?;
            allowed()?;
            match self.slots[i].pins.try_close() {
                Ok(()) => {}
                Err(PinError::Busy(pins)) => return Err(EngineError::MemoryBusy { addr, pins }),
                Err(_) => return Err(EngineError::Core("memory slot state")),
            }
            self.slots[i]
                .entry
                .store(std::ptr::null_mut(), Ordering::Release);
            regions[i].take()
        };
        // Closed and unpublished: no worker holds or can take a reference.
        // Dropping deregisters every device (MemEntry::drop), outside the
        // table lock.
        drop(entry);
        Ok(())
    }

    /// The handshake's view of every region registered on device `dev`.
    pub(crate) fn region_descriptors(&self, dev: usize) -> Vec<crate::wire::SegmentDescriptor> {
        self.lock()
            .iter()
            .flatten()
            .filter_map(|e| e.regs.get(dev).map(|r| r.descriptor()))
            .collect()
    }

    /// Device-0 registrations of every region (fault injection).
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    pub(crate) fn regions_first(&self) -> Vec<Option<Arc<MemoryRegion>>> {
        self.lock()
            .iter()
            .map(|e| e.as_ref().and_then(|e| e.regs.first().cloned()))
            .collect()
    }

    /// Pins held over every region (slices queued + posts in flight): zero
    /// when the engine is idle.
    pub(crate) fn pins_total(&self) -> u64 {
        self.slots.iter().map(|s| s.pins.pins()).sum()
    }

    /// Regions registered now.
    pub(crate) fn count(&self) -> u64 {
        self.lock().iter().flatten().count() as u64
    }
}

/// Slice pins `submit` took, handed back on drop unless committed.
pub(crate) struct SubmitPins<'a> {
    table: &'a MemTable,
    taken: Vec<(u32, u64)>,
}

impl<'a> SubmitPins<'a> {
    pub(crate) fn new(table: &'a MemTable) -> Self {
        Self {
            table,
            taken: Vec::new(),
        }
    }

    /// Pins `mem` for `slices` slices (the table is locked by the caller,
    /// so the slot is the one it located).
    pub(crate) fn pin(
        &mut self,
        mem: u32,
        slices: u64,
        addr: u64,
        len: u64,
    ) -> Result<(), EngineError> {
        // A located slot is open (the table is locked); only an absurd
        // count could refuse.
        match self.table.slots[mem as usize].pins.try_pin(slices) {
            Ok(()) => {
                self.taken.push((mem, slices));
                Ok(())
            }
            Err(_) => Err(EngineError::LocalRange { addr, len }),
        }
    }

    /// Keeps the pins: each slice now unpins when it settles.
    pub(crate) fn commit(mut self) {
        self.taken.clear();
    }
}

impl Drop for SubmitPins<'_> {
    fn drop(&mut self) {
        for &(m, n) in &self.taken {
            self.table.unpin(m as usize, n);
        }
    }
}
