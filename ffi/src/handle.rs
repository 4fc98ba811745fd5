//! Generation-checked handles: no Rust pointer is ever handed to C.
//!
//! A handle is a `u64`: `kind` (8 bits) | `generation` (24 bits) | `slot`
//! (32 bits). Each object kind has its own registry: a table of slots,
//! each with a generation that advances when the object is destroyed. A
//! lookup checks kind, slot range, generation and liveness, so a zero,
//! foreign (another kind, or never issued) or already-destroyed handle is
//! [`RyStatus::InvalidHandle`], never a crash. Generation 0 is never
//! issued, so a zero-initialised handle is always invalid.
//!
//! Cost: a lookup takes the registry's read lock and clones an `Arc`
//! (uncontended: two atomic RMWs plus one on drop); create/destroy take the
//! write lock. A destroy while another thread is inside a call on the same
//! object is safe: that call holds its own `Arc`, and the object is freed
//! when the last call returns.

use std::sync::{Arc, RwLock};

use crate::error::{Error, Result, RyStatus};

const GEN_BITS: u32 = 24;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

struct Slot<T> {
    generation: u32,
    value: Option<Arc<T>>,
}

struct Table<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

/// A registry of one kind of object.
pub(crate) struct Registry<T> {
    kind: u8,
    name: &'static str,
    table: RwLock<Table<T>>,
}

impl<T> Registry<T> {
    pub(crate) const fn new(kind: u8, name: &'static str) -> Self {
        Registry {
            kind,
            name,
            table: RwLock::new(Table {
                slots: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table<T>> {
        // A poisoned lock only means a panic elsewhere while it was held;
        // every mutation below leaves the table consistent, so go on.
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Table<T>> {
        self.table.write().unwrap_or_else(|e| e.into_inner())
    }

    fn encode(&self, slot: u32, generation: u32) -> u64 {
        (u64::from(self.kind) << 56) | (u64::from(generation) << 32) | u64::from(slot)
    }

    fn decode(&self, handle: u64) -> Result<(usize, u32)> {
        let kind = (handle >> 56) as u8;
        let generation = ((handle >> 32) as u32) & GEN_MASK;
        if handle == 0 {
            return Err(self.bad(handle, "zero (never created)"));
        }
        if kind != self.kind || generation == 0 {
            return Err(self.bad(handle, "not a handle of this kind"));
        }
        Ok((handle as u32 as usize, generation))
    }

    fn bad(&self, handle: u64, why: &str) -> Error {
        Error::new(
            RyStatus::InvalidHandle,
            format_args!("invalid {} handle {handle:#018x}: {why}", self.name),
        )
    }

    /// Registers `value` and returns its handle.
    pub(crate) fn insert(&self, value: T) -> Result<u64> {
        let value = Arc::new(value);
        let mut t = self.write();
        if let Some(i) = t.free.pop() {
            let s = &mut t.slots[i as usize];
            s.value = Some(value);
            return Ok(self.encode(i, s.generation));
        }
        let i = u32::try_from(t.slots.len())
            .map_err(|_| Error::invalid(format_args!("too many live {} handles", self.name)))?;
        t.slots.push(Slot {
            generation: 1,
            value: Some(value),
        });
        Ok(self.encode(i, 1))
    }

    /// The live object named by `handle`.
    pub(crate) fn get(&self, handle: u64) -> Result<Arc<T>> {
        let (i, generation) = self.decode(handle)?;
        let t = self.read();
        match t.slots.get(i) {
            Some(Slot {
                generation: g,
                value: Some(v),
            }) if *g == generation => Ok(Arc::clone(v)),
            Some(_) => Err(self.bad(handle, "already destroyed")),
            None => Err(self.bad(handle, "never issued")),
        }
    }

    /// Unregisters the object named by `handle`; it is dropped when the
    /// last in-flight call on it returns. A second destroy is an error.
    pub(crate) fn remove(&self, handle: u64) -> Result<Arc<T>> {
        let (i, generation) = self.decode(handle)?;
        let mut t = self.write();
        let slot = match t.slots.get_mut(i) {
            Some(s) if s.generation == generation && s.value.is_some() => s,
            Some(_) => return Err(self.bad(handle, "already destroyed")),
            None => return Err(self.bad(handle, "never issued")),
        };
        let v = slot.value.take().unwrap_or_else(|| unreachable!());
        // Skip generation 0 on wrap: it is never a valid handle.
        slot.generation = match (slot.generation + 1) & GEN_MASK {
            0 => 1,
            g => g,
        };
        t.free.push(i as u32);
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_zero_handles_are_refused() {
        let a: Registry<u32> = Registry::new(1, "a");
        let b: Registry<u32> = Registry::new(2, "b");
        let h = a.insert(7).ok().unwrap();
        assert_eq!(*a.get(h).ok().unwrap(), 7);
        assert_eq!(b.get(h).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(a.get(0).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(
            a.get(h + 1).err().unwrap().status,
            RyStatus::InvalidHandle,
            "slot never issued"
        );
        a.remove(h).ok().unwrap();
        assert_eq!(a.get(h).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(a.remove(h).err().unwrap().status, RyStatus::InvalidHandle);
        // The slot is reused under a new generation; the old handle stays dead.
        let h2 = a.insert(8).ok().unwrap();
        assert_eq!(h2 as u32, h as u32);
        assert_ne!(h2, h);
        assert_eq!(a.get(h).err().unwrap().status, RyStatus::InvalidHandle);
        assert_eq!(*a.get(h2).ok().unwrap(), 8);
    }
}
