//! Managed buffers (`allocate_managed_buffer` / `free_managed_buffer`):
//! Mooncake's size classes over railyard's engine memory.
//!
//! Mooncake rounds a request up to one of 16 power-of-two classes
//! (8 KiB .. 256 MiB) carved by buddy splitting from 2 GiB registrations,
//! and gives anything larger its own registration. Here the classes are
//! the same, but blocks are carved from [`CHUNK`] (64 MiB) registrations,
//! so a small buffer pins 64 MiB rather than 2 GiB (Soft-RoCE guests have
//! little memory); the 128 and 256 MiB classes get one registration per
//! block. Freed blocks go back to their class (like Mooncake, memory
//! returns to the system only with the engine), larger buffers are
//! deregistered and freed at once. Every block is registered memory: a
//! transfer may use it as its local side at once, and peers see it if it
//! was allocated before they connected.

use crate::core::{Core, Failure};
use std::collections::HashMap;

/// Smallest class.
pub const MIN_CLASS: u64 = 8 << 10;
/// Classes: `MIN_CLASS << c` for `c < CLASSES` (8 KiB .. 256 MiB).
pub const CLASSES: usize = 16;
/// Registration blocks of the classes below it are carved from.
pub const CHUNK: u64 = 64 << 20;

/// Free lists per class and what is handed out.
#[derive(Default)]
pub struct Managed {
    free: [Vec<u64>; CLASSES],
    /// Blocks handed out: address → class (`None`: its own registration).
    out: HashMap<u64, Option<usize>>,
}

/// The class of `len` (0 maps to the smallest, as in Mooncake), or `None`
/// above 256 MiB.
pub fn class_of(len: u64) -> Option<usize> {
    (0..CLASSES).find(|&c| len <= MIN_CLASS << c)
}

impl Managed {
    fn block(&mut self, core: &Core, c: usize) -> Result<u64, Failure> {
        if let Some(a) = self.free[c].pop() {
            return Ok(a);
        }
        let size = MIN_CLASS << c;
        if size >= CHUNK {
            return core.alloc(size);
        }
        let a = self.block(core, c + 1)?;
        self.free[c].push(a + size);
        Ok(a)
    }

    /// A registered buffer of at least `len` bytes.
    pub fn allocate(&mut self, core: &Core, len: u64) -> Result<u64, Failure> {
        match class_of(len) {
            Some(c) => {
                let a = self.block(core, c)?;
                self.out.insert(a, Some(c));
                Ok(a)
            }
            None => {
                let a = core.alloc(len)?;
                self.out.insert(a, None);
                Ok(a)
            }
        }
    }

    /// Gives back `addr` (allocated with `len`).
    pub fn free(&mut self, core: &Core, addr: u64, len: u64) -> Result<(), Failure> {
        let want = class_of(len);
        match self.out.get(&addr) {
            Some(&c) if c == want => {}
            Some(_) => {
                return Err(Failure::invalid(format!(
                    "managed buffer {addr:#x} was not allocated with length {len}"
                )))
            }
            None => {
                return Err(Failure::invalid(format!(
                    "{addr:#x} is not a managed buffer of this engine (or already freed)"
                )))
            }
        }
        match want {
            Some(c) => {
                self.out.remove(&addr);
                self.free[c].push(addr);
                Ok(())
            }
            None => {
                // Deregistration is refused while a transfer uses it.
                core.deregister(addr)?;
                self.out.remove(&addr);
                Ok(())
            }
        }
    }
}
