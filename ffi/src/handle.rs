//! Generation-checked handles: no Rust pointer is ever handed to C.
//!
//! A handle is a `u64`: `kind` (8 bits) | `generation` (24 bits) | `slot`
//! (32 bits). Each object kind has its own registry: a two-level table of
//! slots (64 lazily allocated segments of 1024 slots: 65 536 live objects
//! per kind). A slot holds an epoch-managed pointer to the object together
//! with the generation it was created under. A lookup checks kind, slot
//! range, liveness and generation, so a zero, foreign (another kind, or
//! never issued) or already-destroyed handle is
//! [`RyStatus::InvalidHandle`], never a crash. Generation 0 is never
//! issued, so a zero-initialised handle is always invalid.
//!
//! ## Concurrency and cost
//!
//! Lookups are lock-free and write no shared memory: pin the calling
//! thread's epoch (crossbeam-epoch; a thread-local operation), load the
//! segment and the slot pointer, compare the generation stored *in the
//! object's allocation*. Create and destroy take a per-kind mutex (control
//! path). Destroy unlinks the object and defers freeing it until every
//! thread that could have loaded it has unpinned, so a destroy racing with
//! calls on the same object in other threads is safe: those calls finish
//! on the old object, later ones get `RY_STATUS_INVALID_HANDLE`.
//!
//! One C call costs about 7 ns (token) to 13 ns (cc: the admission and
//! permit travel as plain data) over the direct Rust call, single-threaded
//! (`cargo bench -p railyard-benches --bench ffi`; the sessions, and the
//! first design, a `RwLock` table handing out `Arc` clones, at 2.4×–3.5×:
//! `docs/benchmarks.md`). Each lookup pins the epoch (a locked op on a
//! thread-local line) and every 128th pin scans the global epoch list,
//! which is where shared-line traffic remains.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};

use crate::error::{Error, Result, RyStatus};

const GEN_BITS: u32 = 24;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
const SEG_BITS: u32 = 10;
const SEG_SIZE: usize = 1 << SEG_BITS;
const SEGMENTS: usize = 64;

/// An object and the generation it was registered under.
struct Entry<T> {
    generation: u32,
    value: T,
}

type Segment<T> = [Atomic<Entry<T>>; SEG_SIZE];

/// Create/destroy bookkeeping (behind the mutex).
struct Alloc {
    /// Slots never used yet start at this index.
    next: u32,
    /// Freed slots and the generation their next object gets.
    free: Vec<(u32, u32)>,
}

/// A registry of one kind of object.
pub(crate) struct Registry<T> {
    kind: u8,
    name: &'static str,
    segments: [AtomicPtr<Segment<T>>; SEGMENTS],
    alloc: Mutex<Alloc>,
    /// Send/Sync follow `T` (the objects are shared across threads).
    _marker: std::marker::PhantomData<T>,
}

/// A live object, valid while this value exists (it keeps the thread's
/// epoch pinned, so the object cannot be freed under it).
pub(crate) struct Pinned<T> {
    _guard: Guard,
    value: *const T,
}

impl<T> std::ops::Deref for Pinned<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: `value` was loaded from a registry slot while `_guard`
        // was pinned, and was non-null; destroy only frees an unlinked
        // object through `defer_destroy`, which waits for every guard
        // pinned before the unlink — including ours, alive as long as self.
        unsafe { &*self.value }
    }
}

impl<T: Send + Sync + 'static> Registry<T> {
    pub(crate) const fn new(kind: u8, name: &'static str) -> Self {
        Registry {
            kind,
            name,
            segments: [const { AtomicPtr::new(std::ptr::null_mut()) }; SEGMENTS],
            alloc: Mutex::new(Alloc {
                next: 0,
                free: Vec::new(),
            }),
            _marker: std::marker::PhantomData,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Alloc> {
        // Every mutation below leaves `Alloc` consistent; a poisoned lock
        // only means a panic elsewhere while it was held.
        self.alloc.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn encode(&self, slot: u32, generation: u32) -> u64 {
        (u64::from(self.kind) << 56) | (u64::from(generation) << 32) | u64::from(slot)
    }

    fn decode(&self, handle: u64) -> Result<(u32, u32)> {
        let kind = (handle >> 56) as u8;
        let generation = ((handle >> 32) as u32) & GEN_MASK;
        if handle == 0 {
            return Err(self.bad(handle, "zero (never created)"));
        }
        if kind != self.kind || generation == 0 {
            return Err(self.bad(handle, "not a handle of this kind"));
        }
        Ok((handle as u32, generation))
    }

    fn bad(&self, handle: u64, why: &str) -> Error {
        Error::new(
            RyStatus::InvalidHandle,
            format_args!("invalid {} handle {handle:#018x}: {why}", self.name),
        )
    }

    /// The slot for `index`, if its segment exists.
    fn slot(&self, index: u32) -> Option<&Atomic<Entry<T>>> {
        let seg = (index >> SEG_BITS) as usize;
        let p = self.segments.get(seg)?.load(Ordering::Acquire);
        // SAFETY: a non-null segment pointer was published (Release) by
        // `segment_for` from a leaked Box and is never freed or moved, so
        // it is valid for the rest of the program.
        let seg = unsafe { p.as_ref() }?;
        Some(&seg[index as usize & (SEG_SIZE - 1)])
    }

    /// The slot for `index`, allocating its segment (under the mutex).
    fn segment_for(&self, _alloc: &mut Alloc, index: u32) -> &Atomic<Entry<T>> {
        let seg = (index >> SEG_BITS) as usize;
        if self.segments[seg].load(Ordering::Acquire).is_null() {
            let fresh: Box<Segment<T>> = Box::new(std::array::from_fn(|_| Atomic::null()));
            // Segments live as long as the (static) registry: leaked on purpose.
            self.segments[seg].store(Box::into_raw(fresh), Ordering::Release);
        }
        self.slot(index)
            .unwrap_or_else(|| unreachable!("segment was just published"))
    }

    /// Registers `value` and returns its handle.
    pub(crate) fn insert(&self, value: T) -> Result<u64> {
        let mut a = self.lock();
        let (index, generation) = match a.free.pop() {
            Some(f) => f,
            None => {
                if a.next as usize >= SEGMENTS * SEG_SIZE {
                    return Err(Error::invalid(format_args!(
                        "too many live {} handles (at most {})",
                        self.name,
                        SEGMENTS * SEG_SIZE
                    )));
                }
                a.next += 1;
                (a.next - 1, 1)
            }
        };
        let slot = self.segment_for(&mut a, index);
        slot.store(Owned::new(Entry { generation, value }), Ordering::Release);
        Ok(self.encode(index, generation))
    }

    /// The live object named by `handle`. Lock-free; writes no shared memory.
    pub(crate) fn get(&self, handle: u64) -> Result<Pinned<T>> {
        let (index, generation) = self.decode(handle)?;
        let slot = self
            .slot(index)
            .ok_or_else(|| self.bad(handle, "never issued"))?;
        let guard = epoch::pin();
        let p: Shared<'_, Entry<T>> = slot.load(Ordering::Acquire, &guard);
        // SAFETY: `p` was loaded under `guard`; a non-null entry is freed
        // only via `defer_destroy` after it is unlinked, so it is valid
        // while `guard` is pinned.
        match unsafe { p.as_ref() } {
            Some(e) if e.generation == generation => {
                let value: *const T = &e.value;
                Ok(Pinned {
                    _guard: guard,
                    value,
                })
            }
            _ => Err(self.bad(handle, "already destroyed")),
        }
    }

    /// Unregisters the object named by `handle`; it is freed once no call
    /// that may have loaded it is still running. A second destroy is an
    /// error.
    pub(crate) fn remove(&self, handle: u64) -> Result<()> {
        let (index, generation) = self.decode(handle)?;
        let mut a = self.lock();
        let slot = self
            .slot(index)
            .ok_or_else(|| self.bad(handle, "never issued"))?;
        let guard = epoch::pin();
        let p = slot.load(Ordering::Acquire, &guard);
        // SAFETY: loaded under `guard`; see `get`.
        match unsafe { p.as_ref() } {
            Some(e) if e.generation == generation => {}
            _ => return Err(self.bad(handle, "already destroyed")),
        }
        // Only insert/remove store to slots, and both hold the mutex, so
        // the slot still holds `p`.
        slot.store(Shared::null(), Ordering::Release);
        // SAFETY: `p` is unlinked: no new lookup can load it, and every
        // lookup that already did holds a guard pinned before this point,
        // which `defer_destroy` waits for.
        unsafe { guard.defer_destroy(p) };
        guard.flush();
        let next = match (generation + 1) & GEN_MASK {
            0 => 1, // generation 0 is never a valid handle
            g => g,
        };
        a.free.push((index, next));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_zero_handles_are_refused() {
        static A: Registry<u32> = Registry::new(101, "a");
        static B: Registry<u32> = Registry::new(102, "b");
        let h = A.insert(7).ok().unwrap();
        assert_eq!(*A.get(h).ok().unwrap(), 7);
        assert_eq!(B.get(h).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(A.get(0).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(
            A.get(h + 1).err().unwrap().status,
            RyStatus::InvalidHandle,
            "slot never issued"
        );
        assert_eq!(
            A.get(h | 0xFFFF_0000).err().unwrap().status,
            RyStatus::InvalidHandle,
            "segment never allocated"
        );
        A.remove(h).ok().unwrap();
        assert_eq!(A.get(h).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(A.remove(h).err().unwrap().status, RyStatus::InvalidHandle);
        // The slot is reused under a new generation; the old handle stays dead.
        let h2 = A.insert(8).ok().unwrap();
        assert_eq!(h2 as u32, h as u32);
        assert_ne!(h2, h);
        assert_eq!(A.get(h).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(*A.get(h2).ok().unwrap(), 8);
    }

    #[test]
    fn many_objects_span_segments_and_are_freed() {
        use std::sync::atomic::AtomicUsize;
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct Counted(#[allow(dead_code)] u32);
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::Relaxed);
            }
        }
        static R: Registry<Counted> = Registry::new(103, "counted");
        let n = SEG_SIZE as u32 * 2 + 3;
        let hs: Vec<u64> = (0..n).map(|i| R.insert(Counted(i)).ok().unwrap()).collect();
        for (i, &h) in hs.iter().enumerate() {
            assert_eq!(R.get(h).ok().unwrap().0, i as u32);
        }
        for &h in &hs {
            R.remove(h).ok().unwrap();
        }
        // Deferred frees run as epochs advance.
        for _ in 0..1000 {
            if DROPS.load(Ordering::Relaxed) == n as usize {
                break;
            }
            epoch::pin().flush();
        }
        assert_eq!(DROPS.load(Ordering::Relaxed), n as usize);
    }
}
