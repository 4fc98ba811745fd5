//! The per-device, per-peer ledger (compiled with `peer-feedback`).
//!
//! Fixed storage: `devices × slots` entries, allocated once. Each device
//! has an open-addressed table keyed by peer id. An entry's *key word*
//! packs an occupied bit, the peer id and the number of live charges
//! ("pins"), so pinning an entry and reclaiming it are both single CAS
//! operations on the same word and can never interleave: an entry with a
//! live charge cannot be reclaimed, and a reclaimed entry cannot be pinned.
//!
//! Hot path (peer already present): a bounded scan from the peer's hash
//! slot, one CAS to pin, one `fetch_add` of bytes. Inserting a new peer and
//! reclaiming idle entries take a per-device *try*-lock: nobody ever waits
//! on it. A charge that finds it busy (after one rescan) or finds the table
//! full of active entries falls back to NIC scope and is counted.
//!
//! The *history target* is not admission control: live entries may exceed
//! it; it only bounds how many **idle** entries (no live charge, no activity
//! for `idle_ns`) are kept. Peer ids are `u32`; an empty slot is not
//! peer 0 (the occupied bit tells them apart).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::sub_refusing_underflow;
use super::variant::{ewma_step, PeerView};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::time::{elapsed, Nanos};

const PEER_MASK: u64 = 0xffff_ffff;
const OCCUPIED: u64 = 1 << 32;
const IDENT_MASK: u64 = OCCUPIED | PEER_MASK;
const PIN_SHIFT: u32 = 33;
const PIN_ONE: u64 = 1 << PIN_SHIFT;
const MAX_PINS: u64 = u64::MAX >> PIN_SHIFT;

#[inline]
const fn ident(peer: u32) -> u64 {
    OCCUPIED | peer as u64
}

#[inline]
const fn pins(key: u64) -> u64 {
    key >> PIN_SHIFT
}

/// Why a peer charge could not be taken (the NIC charge stands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PinRefused {
    /// Every slot holds an active (or not yet idle) entry.
    Exhausted,
    /// Another thread holds the insert lock of this device's table.
    Contended,
    /// The entry's charge count is saturated.
    Saturated,
}

/// Why a peer release failed (the NIC release is unaffected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnpinError {
    /// No entry for this peer on this device.
    NotFound,
    /// The entry has fewer in-flight bytes than released (refused; the
    /// entry's bytes are left unchanged and its pin is still dropped).
    Underflow,
    /// The entry has no live charge to drop.
    NoPin,
}

#[repr(align(64))]
struct Entry {
    key: AtomicU64,
    inflight: AtomicU64,
    bw: AtomicU64,
    sample_ns: AtomicU64,
    active_ns: AtomicU64,
}

impl Entry {
    fn new() -> Self {
        Entry {
            key: AtomicU64::new(0),
            inflight: AtomicU64::new(0),
            bw: AtomicU64::new(0),
            sample_ns: AtomicU64::new(0),
            active_ns: AtomicU64::new(0),
        }
    }
}

#[repr(align(64))]
struct Table {
    lock: AtomicBool,
    live: AtomicU32,
    /// Largest displacement from its hash slot of any live entry.
    max_probe: AtomicU32,
}

/// EWMA parameters shared by every entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EwmaParams {
    pub(crate) alpha_q16: u32,
    pub(crate) floor_q8: u32,
    pub(crate) ceil_q8: u32,
}

/// The peer ledger: fixed storage for `devices × slots` entries.
pub(crate) struct PeerLedger {
    entries: Box<[Entry]>,
    tables: Box<[Table]>,
    mask: usize,
    target: u32,
    idle_ns: Nanos,
}

impl PeerLedger {
    /// `slots` must be a power of two (checked by the config).
    pub(crate) fn new(devices: usize, slots: usize, target: u32, idle_ns: Nanos) -> Self {
        let entries: Vec<Entry> = (0..devices * slots).map(|_| Entry::new()).collect();
        let tables: Vec<Table> = (0..devices)
            .map(|_| Table {
                lock: AtomicBool::new(false),
                live: AtomicU32::new(0),
                max_probe: AtomicU32::new(0),
            })
            .collect();
        PeerLedger {
            entries: entries.into_boxed_slice(),
            tables: tables.into_boxed_slice(),
            mask: slots - 1,
            target,
            idle_ns,
        }
    }

    #[inline]
    fn home(&self, peer: u32) -> usize {
        ((u64::from(peer).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) & self.mask
    }

    #[inline]
    fn slot(&self, device: usize, i: usize) -> &Entry {
        &self.entries[device * (self.mask + 1) + (i & self.mask)]
    }

    /// Finds the slot of `peer` on `device`, scanning at most `max_probe + 1`
    /// slots from its home.
    #[inline]
    fn find(&self, device: usize, peer: u32) -> Option<(&Entry, u64)> {
        let want = ident(peer);
        let home = self.home(peer);
        let probes = self.tables[device].max_probe.load(Ordering::Acquire) as usize;
        for i in 0..=probes.min(self.mask) {
            let e = self.slot(device, home + i);
            let k = e.key.load(Ordering::Acquire);
            if k & IDENT_MASK == want {
                return Some((e, k));
            }
        }
        None
    }

    /// A snapshot of `peer`'s entry on `device`, if it exists.
    #[inline]
    pub(crate) fn view(&self, device: usize, peer: u32) -> Option<PeerView> {
        self.find(device, peer).map(|(e, _)| PeerView {
            inflight: e.inflight.load(Ordering::Relaxed),
            bw: e.bw.load(Ordering::Relaxed),
            sample_ns: e.sample_ns.load(Ordering::Relaxed),
        })
    }

    /// Pins `entry` (found with key word `key`) for one more charge; fails
    /// if the entry stopped being `peer`'s meanwhile.
    #[inline]
    fn try_pin(entry: &Entry, mut key: u64, peer: u32) -> Result<bool, PinRefused> {
        loop {
            if key & IDENT_MASK != ident(peer) {
                return Ok(false);
            }
            if pins(key) == MAX_PINS {
                return Err(PinRefused::Saturated);
            }
            match entry.key.compare_exchange_weak(
                key,
                key + PIN_ONE,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(true),
                Err(cur) => key = cur,
            }
        }
    }

    #[inline]
    fn add_bytes(entry: &Entry, bytes: u32, now_ns: Nanos) {
        entry.inflight.fetch_add(u64::from(bytes), Ordering::AcqRel);
        entry.active_ns.store(now_ns, Ordering::Relaxed);
    }

    /// Charges `bytes` to `peer` on `device`, inserting the entry if needed.
    pub(crate) fn charge(
        &self,
        device: usize,
        peer: u32,
        bytes: u32,
        now_ns: Nanos,
    ) -> Result<(), PinRefused> {
        // Fast path: the entry exists.
        if let Some((e, k)) = self.find(device, peer) {
            if Self::try_pin(e, k, peer)? {
                Self::add_bytes(e, bytes, now_ns);
                return Ok(());
            }
        }
        let table = &self.tables[device];
        if table
            .lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Whoever holds the lock may be inserting this very peer.
            if let Some((e, k)) = self.find(device, peer) {
                if Self::try_pin(e, k, peer)? {
                    Self::add_bytes(e, bytes, now_ns);
                    return Ok(());
                }
            }
            return Err(PinRefused::Contended);
        }
        let r = self.charge_locked(device, peer, bytes, now_ns);
        table.lock.store(false, Ordering::Release);
        r
    }

    fn charge_locked(
        &self,
        device: usize,
        peer: u32,
        bytes: u32,
        now_ns: Nanos,
    ) -> Result<(), PinRefused> {
        let table = &self.tables[device];
        // Under the lock no entry can be inserted or reclaimed by others,
        // so one full scan is authoritative.
        let home = self.home(peer);
        // BROKEN twin (loom): insert without rescanning under the lock.
        #[cfg(not(railyard_broken = "rail_insert_without_rescan"))]
        for i in 0..=self.mask {
            let e = self.slot(device, home + i);
            let k = e.key.load(Ordering::Acquire);
            if k & IDENT_MASK == ident(peer) {
                // Only pins can change under us; the entry stays peer's.
                if Self::try_pin(e, k, peer)? {
                    Self::add_bytes(e, bytes, now_ns);
                    return Ok(());
                }
            }
        }
        if table.live.load(Ordering::Relaxed) >= self.target {
            self.reclaim_locked(device, now_ns, self.target.saturating_sub(1));
        }
        for i in 0..=self.mask {
            let e = self.slot(device, home + i);
            if e.key.load(Ordering::Acquire) == 0 {
                table.max_probe.fetch_max(i as u32, Ordering::AcqRel);
                e.active_ns.store(now_ns, Ordering::Relaxed);
                e.key.store(ident(peer) | PIN_ONE, Ordering::Release);
                Self::add_bytes(e, bytes, now_ns);
                table.live.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
        }
        Err(PinRefused::Exhausted)
    }

    /// Releases a charge of `bytes` for `peer` on `device`, feeding the
    /// peer EWMA with `sample` (bytes/s) first if the attempt succeeded.
    pub(crate) fn release(
        &self,
        device: usize,
        peer: u32,
        bytes: u32,
        sample: Option<(u64, u64)>,
        ewma: EwmaParams,
        now_ns: Nanos,
    ) -> Result<(), UnpinError> {
        let Some((e, _)) = self.find(device, peer) else {
            return Err(UnpinError::NotFound);
        };
        // Bytes leave the entry while it is still pinned, so a reclaimer
        // (which needs zero pins) never sees our bytes.
        #[cfg(railyard_broken = "rail_unpin_first")]
        let pin = Self::unpin(e);
        let sub = sub_refusing_underflow(&e.inflight, u64::from(bytes));
        if let Some((sample_bps, nominal)) = sample {
            let _ =
                e.bw.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                    Some(ewma_step(
                        old,
                        sample_bps,
                        ewma.alpha_q16,
                        nominal,
                        ewma.floor_q8,
                        ewma.ceil_q8,
                    ))
                });
            e.sample_ns.store(now_ns, Ordering::Release);
        }
        e.active_ns.store(now_ns, Ordering::Relaxed);
        #[cfg(not(railyard_broken = "rail_unpin_first"))]
        let pin = Self::unpin(e);
        match (sub, pin) {
            (true, true) => Ok(()),
            (false, _) => Err(UnpinError::Underflow),
            (true, false) => Err(UnpinError::NoPin),
        }
    }

    fn unpin(e: &Entry) -> bool {
        e.key
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |k| {
                if k & OCCUPIED != 0 && pins(k) > 0 {
                    Some(k - PIN_ONE)
                } else {
                    None
                }
            })
            .is_ok()
    }

    /// Reclaims idle entries on every device while live entries exceed the
    /// history target. Skips a device whose lock is busy. Returns
    /// `(reclaimed, residue)`: residue counts reclaimed entries that still
    /// showed in-flight bytes (an accounting error elsewhere).
    pub(crate) fn reclaim_idle(&self, now_ns: Nanos) -> (u32, u32) {
        let mut total = (0, 0);
        for (d, table) in self.tables.iter().enumerate() {
            if table
                .lock
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                let r = self.reclaim_locked(d, now_ns, self.target);
                table.lock.store(false, Ordering::Release);
                total.0 += r.0;
                total.1 += r.1;
            }
        }
        total
    }

    /// With the device lock held: reclaims idle entries until at most
    /// `keep` are live; recomputes the probe bound.
    fn reclaim_locked(&self, device: usize, now_ns: Nanos, keep: u32) -> (u32, u32) {
        let table = &self.tables[device];
        let (mut reclaimed, mut residue) = (0, 0);
        for i in 0..=self.mask {
            if table.live.load(Ordering::Relaxed) <= keep {
                break;
            }
            let e = self.slot(device, i);
            let k = e.key.load(Ordering::Acquire);
            if k & OCCUPIED == 0 || pins(k) != 0 {
                continue;
            }
            if elapsed(now_ns, e.active_ns.load(Ordering::Relaxed)) < self.idle_ns {
                continue;
            }
            // One CAS on the key word: fails if a charge pinned it meanwhile.
            if e.key
                .compare_exchange(k, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                if e.inflight.swap(0, Ordering::AcqRel) != 0 {
                    residue += 1;
                }
                e.bw.store(0, Ordering::Relaxed);
                e.sample_ns.store(0, Ordering::Relaxed);
                table.live.fetch_sub(1, Ordering::Relaxed);
                reclaimed += 1;
            }
        }
        if reclaimed > 0 {
            let mut max = 0;
            for i in 0..=self.mask {
                let k = self.slot(device, i).key.load(Ordering::Acquire);
                if k & OCCUPIED != 0 {
                    let home = self.home((k & PEER_MASK) as u32);
                    max = max.max(i.wrapping_sub(home) & self.mask);
                }
            }
            table.max_probe.store(max as u32, Ordering::Release);
        }
        (reclaimed, residue)
    }

    /// Live entries on `device`.
    pub(crate) fn live(&self, device: usize) -> u32 {
        self.tables[device].live.load(Ordering::Relaxed)
    }
}
