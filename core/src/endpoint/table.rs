//! The endpoint table itself (needs `alloc`: slots are allocated once, and
//! each endpoint's resource is boxed by crossbeam-epoch when it is opened).
#![allow(unsafe_code)]

use super::*;
use crate::sync::{store_u64, AtomicU64, Ordering};
use crate::time::{expired, Nanos};
use alloc::{boxed::Box, vec::Vec};
use crossbeam_epoch::{Atomic, Collector, Guard, LocalHandle, Owned, Shared};

/// A thread's registration with an [`EndpointTable`]'s epoch collector.
/// Register once per thread (it allocates), then [`pin`](Self::pin) per use.
pub struct EndpointLocal(LocalHandle);

impl EndpointLocal {
    /// Pins the current thread: resources read under the returned guard
    /// stay valid until it is dropped.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open("qp pair 0").unwrap();
    /// let local = table.register(); // once per thread
    /// let guard = local.pin(); // per use
    /// assert_eq!(table.resource(h, &guard), Ok(&"qp pair 0"));
    /// ```
    #[inline]
    pub fn pin(&self) -> EndpointGuard {
        EndpointGuard(self.0.pin())
    }
}

impl fmt::Debug for EndpointLocal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EndpointLocal")
    }
}

/// An epoch guard: while it lives, no resource read through it is freed.
pub struct EndpointGuard(Guard);

impl fmt::Debug for EndpointGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EndpointGuard")
    }
}

/// Per-slot retire metadata: `[generation:32 | reason:8]`, written after the
/// retire CAS and read by the reclaimer only when its generation matches.
#[inline]
fn meta(generation: u32, reason: RetireReason) -> u64 {
    (u64::from(generation) << 32) | reason as u64
}

struct Slot<R> {
    word: AtomicU64,
    retired_at: AtomicU64,
    retire_meta: AtomicU64,
    resource: Atomic<R>,
}

/// A fixed-capacity table of endpoints with generations, lock-free
/// admission and the one retire API. See the [module docs](super).
pub struct EndpointTable<R: Send + Sync + 'static> {
    cfg: EndpointConfig,
    slots: Box<[Slot<R>]>,
    /// `[generation:32 | depth:32]` per (slot, qp).
    qp_depth: Box<[AtomicU64]>,
    collector: Collector,
    abandoned_posts: AtomicU64,
    stale_releases: AtomicU64,
}

impl<R: Send + Sync + 'static> fmt::Debug for EndpointTable<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointTable")
            .field("cfg", &self.cfg)
            .field("outstanding", &self.outstanding_total())
            .finish()
    }
}

#[inline]
fn depth_word(generation: u32, depth: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(depth)
}

impl<R: Send + Sync + 'static> EndpointTable<R> {
    /// Creates a table of `cfg.capacity` free slots.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable};
    ///
    /// let cfg = EndpointConfig { capacity: 64, qps_per_endpoint: 2, ..EndpointConfig::default() };
    /// let table = EndpointTable::<u32>::new(cfg).unwrap();
    /// assert_eq!(table.live(), 0);
    /// let bad = EndpointConfig { qps_per_endpoint: 0, ..cfg };
    /// assert_eq!(EndpointTable::<u32>::new(bad).unwrap_err(), EndpointError::InvalidConfig);
    /// ```
    pub fn new(cfg: EndpointConfig) -> Result<Self, EndpointError> {
        if cfg.capacity == 0
            || cfg.capacity == u32::MAX
            || cfg.qps_per_endpoint == 0
            || cfg.max_wr_per_qp == 0
            || cfg.drain_timeout_ns == 0
            || cfg.drain_timeout_ns > u64::MAX / 2
        {
            return Err(EndpointError::InvalidConfig);
        }
        let slots: Vec<Slot<R>> = (0..cfg.capacity)
            .map(|_| Slot {
                word: AtomicU64::new(Word::new(0, Phase::Free, false, 0).0),
                retired_at: AtomicU64::new(0),
                retire_meta: AtomicU64::new(u64::MAX),
                resource: Atomic::null(),
            })
            .collect();
        let n = cfg.capacity as usize * usize::from(cfg.qps_per_endpoint);
        let qp_depth: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(depth_word(0, 0))).collect();
        Ok(Self {
            cfg,
            slots: slots.into_boxed_slice(),
            qp_depth: qp_depth.into_boxed_slice(),
            collector: Collector::new(),
            abandoned_posts: AtomicU64::new(0),
            stale_releases: AtomicU64::new(0),
        })
    }

    /// The table's configuration.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    ///
    /// let table = EndpointTable::<()>::new(EndpointConfig::default()).unwrap();
    /// assert_eq!(table.config().qps_per_endpoint, 2);
    /// ```
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// Registers the calling thread with the table's epoch collector.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(7u32).unwrap();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         let local = table.register(); // this thread's registration
    ///         assert_eq!(table.resource(h, &local.pin()).copied(), Ok(7));
    ///     });
    /// });
    /// ```
    pub fn register(&self) -> EndpointLocal {
        EndpointLocal(self.collector.register())
    }

    fn slot(&self, slot: u32) -> Result<&Slot<R>, EndpointError> {
        self.slots
            .get(slot as usize)
            .ok_or(EndpointError::OutOfRange)
    }

    fn qp_word(&self, slot: u32, qp: u16) -> Result<&AtomicU64, EndpointError> {
        if qp >= self.cfg.qps_per_endpoint {
            return Err(EndpointError::BadQp);
        }
        let i = slot as usize * usize::from(self.cfg.qps_per_endpoint) + usize::from(qp);
        self.qp_depth.get(i).ok_or(EndpointError::OutOfRange)
    }

    /// One CAS loop applying a pure transition to a slot word.
    #[inline]
    fn update(
        word: &AtomicU64,
        f: impl Fn(Word) -> Result<Word, EndpointError>,
    ) -> Result<Word, EndpointError> {
        let mut cur = word.load(Ordering::Acquire);
        loop {
            let next = f(Word(cur))?;
            match word.compare_exchange_weak(cur, next.0, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(next),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Opens an endpoint holding `resource` in a free slot and returns its
    /// handle. Control path: boxes the resource.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, Phase};
    ///
    /// let table = EndpointTable::new(EndpointConfig { capacity: 1, ..EndpointConfig::default() }).unwrap();
    /// let h = table.open("qps of peer A").unwrap();
    /// assert_eq!(table.state(h).unwrap().phase, Phase::Active);
    /// assert_eq!(table.open("qps of peer B"), Err(EndpointError::TableFull));
    /// ```
    pub fn open(&self, resource: R) -> Result<EndpointHandle, EndpointError> {
        self.open_or_return(resource).map_err(|(e, _)| e)
    }

    /// [`open`](Self::open) that hands the resource back when every slot
    /// is taken, so the caller can free a slot (evict an idle endpoint
    /// through [`retire`](Self::retire), let it drain and reclaim it) and
    /// try again with the same resource.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, RetireReason};
    ///
    /// let table = EndpointTable::new(EndpointConfig { capacity: 1, ..EndpointConfig::default() }).unwrap();
    /// let a = table.open("qps of peer A").unwrap();
    /// let Err((EndpointError::TableFull, back)) = table.open_or_return("qps of peer B") else {
    ///     unreachable!()
    /// };
    /// // Evict A (idle: nothing outstanding), reclaim its slot, open B there.
    /// table.retire(a, RetireReason::StoreEviction, 0).unwrap();
    /// let guard = table.register().pin();
    /// assert_eq!(table.poll_reclaim(1, &guard, |_| {}), Ok(1));
    /// let b = table.open_or_return(back).unwrap();
    /// assert_eq!((b.slot, b.generation), (a.slot, a.generation + 1));
    /// ```
    pub fn open_or_return(&self, resource: R) -> Result<EndpointHandle, (EndpointError, R)> {
        for (i, slot) in self.slots.iter().enumerate() {
            let w = Word(slot.word.load(Ordering::Acquire));
            if w.phase() != Phase::Free {
                continue;
            }
            let busy = w.with(Phase::Busy, false, 0);
            if slot
                .word
                .compare_exchange(w.0, busy.0, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let generation = w.generation();
            slot.resource.store(Owned::new(resource), Ordering::Release);
            store_u64(
                &slot.word,
                Word::new(generation, Phase::Active, false, 0).0,
                Ordering::Release,
            );
            return Ok(EndpointHandle {
                slot: i as u32,
                generation,
            });
        }
        Err((EndpointError::TableFull, resource))
    }

    /// Admits one post on QP `qp` of endpoint `h`: checks the generation and
    /// the `Active` phase and counts the post, atomically, then takes a slot
    /// of the QP's send queue. Refusals change nothing.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, RetireReason};
    ///
    /// let cfg = EndpointConfig { qps_per_endpoint: 1, max_wr_per_qp: 2, ..EndpointConfig::default() };
    /// let table = EndpointTable::new(cfg).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 0).unwrap();
    /// table.admit_post(h, 0).unwrap();
    /// assert_eq!(table.admit_post(h, 0), Err(EndpointError::QpFull)); // send queue full
    /// assert_eq!(table.admit_post(h, 1), Err(EndpointError::BadQp));
    /// table.retire(h, RetireReason::QpFatal, 0).unwrap();
    /// table.release_post(h, 0).unwrap();
    /// assert_eq!(table.admit_post(h, 0), Err(EndpointError::Retired)); // at once
    /// assert_eq!(table.state(h).unwrap().outstanding, 1); // refusals changed nothing
    /// ```
    #[inline]
    pub fn admit_post(&self, h: EndpointHandle, qp: u16) -> Result<(), EndpointError> {
        let slot = self.slot(h.slot)?;
        let depth = self.qp_word(h.slot, qp)?;
        Self::update(&slot.word, |w| admit_word(w, h))?;
        let max = self.cfg.max_wr_per_qp;
        let taken = {
            let mut cur = depth.load(Ordering::Acquire);
            loop {
                if (cur >> 32) as u32 != h.generation {
                    break Err(EndpointError::StaleGeneration);
                }
                if cur as u32 >= max {
                    break Err(EndpointError::QpFull);
                }
                match depth.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => break Ok(()),
                    Err(actual) => cur = actual,
                }
            }
        };
        if let Err(e) = taken {
            // Roll back the outstanding count; if the endpoint was
            // abandoned meanwhile there is nothing left to roll back.
            let _ = Self::update(&slot.word, |w| release_word(w, h));
            return Err(e);
        }
        Ok(())
    }

    /// Releases one post admitted on QP `qp` of endpoint `h`: its completion
    /// was polled, or it was never posted (the unposted tail of a `bad_wr`
    /// chain). Returns `true` when this release drained a retired endpoint,
    /// so the caller may run [`poll_reclaim`](Self::poll_reclaim) early.
    ///
    /// A late release for a reclaimed generation gets
    /// [`EndpointError::StaleGeneration`] and touches nothing; a release
    /// with nothing outstanding gets [`EndpointError::Underflow`].
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, RetireReason};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 1).unwrap();
    /// table.admit_post(h, 1).unwrap();
    /// assert_eq!(table.release_post(h, 1), Ok(false));
    /// table.retire(h, RetireReason::CqError, 0).unwrap();
    /// assert_eq!(table.release_post(h, 1), Ok(true)); // drained: reclaim may run now
    /// assert_eq!(table.release_post(h, 1), Err(EndpointError::Underflow));
    /// assert_eq!(table.qp_depth(h, 1), Ok(0));
    /// ```
    #[inline]
    pub fn release_post(&self, h: EndpointHandle, qp: u16) -> Result<bool, EndpointError> {
        let slot = self.slot(h.slot)?;
        let depth = self.qp_word(h.slot, qp)?;
        let mut cur = depth.load(Ordering::Acquire);
        loop {
            #[cfg(not(railyard_broken = "endpoint_release_ignores_generation"))]
            if (cur >> 32) as u32 != h.generation {
                self.stale_releases.fetch_add(1, Ordering::Relaxed);
                return Err(EndpointError::StaleGeneration);
            }
            if cur as u32 == 0 {
                return Err(EndpointError::Underflow);
            }
            match depth.compare_exchange_weak(cur, cur - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        match Self::update(&slot.word, |w| release_word(w, h)) {
            Ok(w) => Ok(w.phase() == Phase::Retired && w.outstanding() == 0),
            Err(e) => {
                if e == EndpointError::StaleGeneration {
                    self.stale_releases.fetch_add(1, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }

    /// Retires endpoint `h`: the **one** API for every deletion path (CQ
    /// error, QP fatal, context fatal / GID change, passive-handshake stale
    /// endpoint, store eviction, shutdown). From this call on the endpoint
    /// admits no posts; its posted work drains, and
    /// [`poll_reclaim`](Self::poll_reclaim) reclaims it.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, Phase, RetireReason};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.retire(h, RetireReason::GidChange, 1_000).unwrap();
    /// let st = table.state(h).unwrap();
    /// assert_eq!((st.phase, st.reason), (Phase::Retired, Some(RetireReason::GidChange)));
    /// // Every other deletion path calls the same API; a second retire is harmless.
    /// assert_eq!(table.retire(h, RetireReason::Shutdown, 2_000), Err(EndpointError::AlreadyRetired));
    /// ```
    pub fn retire(
        &self,
        h: EndpointHandle,
        reason: RetireReason,
        now: Nanos,
    ) -> Result<(), EndpointError> {
        let slot = self.slot(h.slot)?;
        Self::update(&slot.word, |w| retire_word(w, h))?;
        // The reclaimer waits until `retire_meta` carries this generation,
        // so these stores land before the slot can be reused.
        slot.retired_at.store(now, Ordering::Relaxed);
        slot.retire_meta
            .store(meta(h.generation, reason), Ordering::Release);
        Ok(())
    }

    /// Snapshot of endpoint `h`.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable, Phase};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 0).unwrap();
    /// let st = table.state(h).unwrap();
    /// assert_eq!((st.phase, st.outstanding, st.reason, st.flush_requested), (Phase::Active, 1, None, false));
    /// ```
    pub fn state(&self, h: EndpointHandle) -> Result<EndpointState, EndpointError> {
        let slot = self.slot(h.slot)?;
        let w = Word(slot.word.load(Ordering::Acquire));
        if w.generation() != h.generation {
            return Err(EndpointError::StaleGeneration);
        }
        let m = slot.retire_meta.load(Ordering::Acquire);
        let reason = if (m >> 32) as u32 == h.generation && w.phase() == Phase::Retired {
            RetireReason::from_u8(m as u8)
        } else {
            None
        };
        Ok(EndpointState {
            phase: w.phase(),
            outstanding: w.outstanding(),
            reason,
            flush_requested: w.flush(),
        })
    }

    /// Posts outstanding on QP `qp` of endpoint `h`.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 1).unwrap();
    /// assert_eq!((table.qp_depth(h, 0), table.qp_depth(h, 1)), (Ok(0), Ok(1)));
    /// ```
    pub fn qp_depth(&self, h: EndpointHandle, qp: u16) -> Result<u32, EndpointError> {
        let d = self.qp_word(h.slot, qp)?.load(Ordering::Acquire);
        if (d >> 32) as u32 != h.generation {
            return Err(EndpointError::StaleGeneration);
        }
        Ok(d as u32)
    }

    /// Posts outstanding across all endpoints (a scan; for leak checks).
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let (a, b) = (table.open(()).unwrap(), table.open(()).unwrap());
    /// table.admit_post(a, 0).unwrap();
    /// table.admit_post(b, 1).unwrap();
    /// assert_eq!(table.outstanding_total(), 2);
    /// table.release_post(a, 0).unwrap();
    /// table.release_post(b, 1).unwrap();
    /// assert_eq!(table.outstanding_total(), 0); // the leak check
    /// ```
    pub fn outstanding_total(&self) -> u64 {
        self.slots
            .iter()
            .map(|s| u64::from(Word(s.word.load(Ordering::Acquire)).outstanding()))
            .sum()
    }

    /// Sum of all per-QP depths of live generations (a scan; for leak
    /// checks). Equals [`outstanding_total`](Self::outstanding_total) when
    /// nothing runs concurrently.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 0).unwrap();
    /// table.admit_post(h, 1).unwrap();
    /// assert_eq!(table.qp_depth_total(), table.outstanding_total());
    /// ```
    pub fn qp_depth_total(&self) -> u64 {
        self.qp_depth
            .iter()
            .map(|d| u64::from(d.load(Ordering::Acquire) as u32))
            .sum()
    }

    /// Endpoints currently `Active` or `Retired` (a scan).
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable, RetireReason};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.retire(h, RetireReason::Shutdown, 0).unwrap();
    /// assert_eq!(table.live(), 1); // retired counts until it is reclaimed
    /// table.poll_reclaim(0, &table.register().pin(), |_| {}).unwrap();
    /// assert_eq!(table.live(), 0);
    /// ```
    pub fn live(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                matches!(
                    Word(s.word.load(Ordering::Acquire)).phase(),
                    Phase::Active | Phase::Retired
                )
            })
            .count()
    }

    /// Posts dropped by [`ReclaimEvent::Abandoned`] reclaims.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable, RetireReason};
    ///
    /// let cfg = EndpointConfig { drain_timeout_ns: 100, ..EndpointConfig::default() };
    /// let table = EndpointTable::new(cfg).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 0).unwrap(); // never completes
    /// table.retire(h, RetireReason::QpFatal, 0).unwrap();
    /// let g = table.register().pin();
    /// table.poll_reclaim(100, &g, |_| {}).unwrap(); // ForceFlush
    /// table.poll_reclaim(200, &g, |_| {}).unwrap(); // Abandoned
    /// assert_eq!(table.abandoned_posts(), 1);
    /// ```
    pub fn abandoned_posts(&self) -> u64 {
        self.abandoned_posts.load(Ordering::Relaxed)
    }

    /// Releases refused because their generation had been reclaimed.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, RetireReason};
    ///
    /// let cfg = EndpointConfig { drain_timeout_ns: 100, ..EndpointConfig::default() };
    /// let table = EndpointTable::new(cfg).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 0).unwrap();
    /// table.retire(h, RetireReason::QpFatal, 0).unwrap();
    /// let g = table.register().pin();
    /// table.poll_reclaim(100, &g, |_| {}).unwrap();
    /// table.poll_reclaim(200, &g, |_| {}).unwrap(); // abandoned with one post out
    /// // The post's completion arrives after all: stale, counted, nothing touched.
    /// assert_eq!(table.release_post(h, 0), Err(EndpointError::StaleGeneration));
    /// assert_eq!(table.stale_releases(), 1);
    /// ```
    pub fn stale_releases(&self) -> u64 {
        self.stale_releases.load(Ordering::Relaxed)
    }

    /// The resource of endpoint `h`, valid while `guard` lives.
    ///
    /// Checks the generation before and after reading the resource, so the
    /// answer belongs to `h` and never to a later endpoint in the same slot.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointError, EndpointTable, RetireReason};
    ///
    /// let table = EndpointTable::new(EndpointConfig::default()).unwrap();
    /// let h = table.open(String::from("qp 0x11")).unwrap();
    /// let local = table.register();
    /// let guard = local.pin();
    /// assert_eq!(table.resource(h, &guard).map(String::as_str), Ok("qp 0x11"));
    /// table.retire(h, RetireReason::Shutdown, 0).unwrap();
    /// table.poll_reclaim(0, &guard, |_| {}).unwrap();
    /// assert_eq!(table.resource(h, &guard), Err(EndpointError::StaleGeneration));
    /// // A guard of another table protects nothing here.
    /// let other = EndpointTable::<String>::new(EndpointConfig::default()).unwrap();
    /// assert_eq!(table.resource(h, &other.register().pin()), Err(EndpointError::ForeignGuard));
    /// ```
    #[inline]
    pub fn resource<'g>(
        &'g self,
        h: EndpointHandle,
        guard: &'g EndpointGuard,
    ) -> Result<&'g R, EndpointError> {
        if guard.0.collector() != Some(&self.collector) {
            return Err(EndpointError::ForeignGuard);
        }
        let slot = self.slot(h.slot)?;
        let live = |w: Word| {
            w.generation() == h.generation && matches!(w.phase(), Phase::Active | Phase::Retired)
        };
        if !live(Word(slot.word.load(Ordering::Acquire))) {
            return Err(EndpointError::StaleGeneration);
        }
        let p = slot.resource.load(Ordering::Acquire, &guard.0);
        if !live(Word(slot.word.load(Ordering::Acquire))) {
            return Err(EndpointError::StaleGeneration);
        }
        // SAFETY: `p` was loaded under `guard`, pinned on this table's
        // collector (checked above). A resource is freed only through
        // `defer_destroy` after it has been unlinked from its slot, and
        // crossbeam-epoch runs that destructor only once every guard pinned
        // before the unlink is gone; so `p` is null or valid for `'g`.
        unsafe { p.as_ref() }.ok_or(EndpointError::StaleGeneration)
    }

    /// Reclaims what can be reclaimed at `now` (monitor thread, not the data
    /// path), reporting each action to `on`. Returns how many endpoints were
    /// reclaimed.
    ///
    /// ```
    /// use railyard_core::endpoint::{EndpointConfig, EndpointTable, ReclaimEvent, RetireReason};
    ///
    /// let cfg = EndpointConfig { drain_timeout_ns: 1_000, ..EndpointConfig::default() };
    /// let table = EndpointTable::new(cfg).unwrap();
    /// let h = table.open(()).unwrap();
    /// table.admit_post(h, 0).unwrap();
    /// table.retire(h, RetireReason::CqError, 0).unwrap();
    /// let guard = table.register().pin();
    /// let mut events = vec![];
    /// // Not drained after the timeout: the shim is told to flush the QPs once.
    /// table.poll_reclaim(1_000, &guard, |e| events.push(e)).unwrap();
    /// assert_eq!(events, [ReclaimEvent::ForceFlush { handle: h, outstanding: 1 }]);
    /// // The flushed completion drains it; the next poll reclaims the slot.
    /// table.release_post(h, 0).unwrap();
    /// assert_eq!(table.poll_reclaim(1_500, &guard, |e| events.push(e)), Ok(1));
    /// assert_eq!(events[1], ReclaimEvent::Reclaimed { handle: h, reason: Some(RetireReason::CqError) });
    /// // The slot comes back with a new generation.
    /// assert_eq!(table.open(()).unwrap().generation, h.generation + 1);
    /// ```
    pub fn poll_reclaim(
        &self,
        now: Nanos,
        guard: &EndpointGuard,
        mut on: impl FnMut(ReclaimEvent),
    ) -> Result<usize, EndpointError> {
        if guard.0.collector() != Some(&self.collector) {
            return Err(EndpointError::ForeignGuard);
        }
        let timeout = self.cfg.drain_timeout_ns;
        let mut reclaimed = 0;
        for (i, slot) in self.slots.iter().enumerate() {
            let w = Word(slot.word.load(Ordering::Acquire));
            if w.phase() != Phase::Retired {
                continue;
            }
            let generation = w.generation();
            let m = slot.retire_meta.load(Ordering::Acquire);
            if (m >> 32) as u32 != generation {
                continue; // the retirer has not stamped it yet
            }
            let handle = EndpointHandle {
                slot: i as u32,
                generation,
            };
            let since = slot.retired_at.load(Ordering::Relaxed);
            let cas = |to: Word| {
                slot.word
                    .compare_exchange(w.0, to.0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            };
            if drained(w) {
                if cas(w.with(Phase::Busy, false, 0)) {
                    self.finish_reclaim(i, generation, guard);
                    reclaimed += 1;
                    on(ReclaimEvent::Reclaimed {
                        handle,
                        reason: RetireReason::from_u8(m as u8),
                    });
                }
            } else if w.flush() && expired(now, since, 2 * timeout) {
                if cas(w.with(Phase::Busy, false, 0)) {
                    self.abandoned_posts
                        .fetch_add(u64::from(w.outstanding()), Ordering::Relaxed);
                    self.finish_reclaim(i, generation, guard);
                    reclaimed += 1;
                    on(ReclaimEvent::Abandoned {
                        handle,
                        outstanding: w.outstanding(),
                    });
                }
            } else if !w.flush()
                && expired(now, since, timeout)
                && cas(w.with(Phase::Retired, true, w.outstanding()))
            {
                on(ReclaimEvent::ForceFlush {
                    handle,
                    outstanding: w.outstanding(),
                });
            }
        }
        Ok(reclaimed)
    }

    /// Second half of a reclaim: the slot is `Busy` and ours.
    fn finish_reclaim(&self, i: usize, generation: u32, guard: &EndpointGuard) {
        let slot = &self.slots[i];
        let old = slot
            .resource
            .swap(Shared::null(), Ordering::AcqRel, &guard.0);
        if !old.is_null() {
            // SAFETY: `old` is unlinked (the slot now holds null) and the
            // slot is `Busy`, so no new reader can load it; readers that
            // loaded it earlier hold guards, and crossbeam-epoch defers the
            // drop until they are gone. It is destroyed exactly once: only
            // the thread that moved the word to `Busy` gets here.
            unsafe { guard.0.defer_destroy(old) };
        }
        let next = generation.wrapping_add(1);
        let q = usize::from(self.cfg.qps_per_endpoint);
        for d in &self.qp_depth[i * q..(i + 1) * q] {
            store_u64(d, depth_word(next, 0), Ordering::Release);
        }
        store_u64(
            &slot.word,
            Word::new(next, Phase::Free, false, 0).0,
            Ordering::Release,
        );
    }
}

impl<R: Send + Sync + 'static> Drop for EndpointTable<R> {
    fn drop(&mut self) {
        let local = self.collector.register();
        let guard = local.pin();
        for slot in self.slots.iter() {
            let old = slot.resource.swap(Shared::null(), Ordering::AcqRel, &guard);
            if !old.is_null() {
                // SAFETY: the table is being dropped, so no new reader can
                // load `old`; a guard that loaded it earlier may still live
                // (guards borrow the table only for `'g` of `resource`, and
                // that borrow has ended), so the drop is deferred like any
                // other reclaim, and it happens exactly once.
                unsafe { guard.defer_destroy(old) };
            }
        }
        guard.flush();
    }
}

#[cfg(all(test, not(railyard_loom)))]
mod tests {
    use super::*;
    use alloc::sync::Arc;
    use core::sync::atomic::AtomicUsize as StdAtomicUsize;

    /// A resource that counts its drops.
    struct Res(Arc<StdAtomicUsize>);
    impl Drop for Res {
        fn drop(&mut self) {
            self.0.fetch_add(1, core::sync::atomic::Ordering::SeqCst);
        }
    }

    fn cfg() -> EndpointConfig {
        EndpointConfig {
            capacity: 2,
            qps_per_endpoint: 2,
            max_wr_per_qp: 2,
            drain_timeout_ns: 100,
        }
    }

    #[test]
    fn invalid_config_is_typed() {
        let bad = EndpointConfig {
            qps_per_endpoint: 0,
            ..cfg()
        };
        assert_eq!(
            EndpointTable::<()>::new(bad).unwrap_err(),
            EndpointError::InvalidConfig
        );
    }

    #[test]
    fn retire_blocks_posts_then_drains_and_reclaims_with_new_generation() {
        let drops = Arc::new(StdAtomicUsize::new(0));
        let t = EndpointTable::new(cfg()).unwrap();
        let local = t.register();
        let h = t.open(Res(drops.clone())).unwrap();
        t.admit_post(h, 0).unwrap();
        t.retire(h, RetireReason::CqError, 10).unwrap();
        assert_eq!(t.admit_post(h, 0), Err(EndpointError::Retired));
        assert_eq!(
            t.retire(h, RetireReason::QpFatal, 11),
            Err(EndpointError::AlreadyRetired)
        );
        let g = local.pin();
        assert_eq!(t.poll_reclaim(20, &g, |_| {}), Ok(0), "not drained");
        assert_eq!(t.release_post(h, 0), Ok(true), "drained by this release");
        let mut ev = None;
        assert_eq!(t.poll_reclaim(30, &g, |e| ev = Some(e)), Ok(1));
        assert_eq!(
            ev,
            Some(ReclaimEvent::Reclaimed {
                handle: h,
                reason: Some(RetireReason::CqError)
            })
        );
        drop(g);
        assert_eq!(t.state(h), Err(EndpointError::StaleGeneration));
        let h2 = t.open(Res(drops.clone())).unwrap();
        assert_eq!(h2.slot, h.slot);
        assert_eq!(h2.generation, h.generation + 1);
        assert_eq!(t.release_post(h, 0), Err(EndpointError::StaleGeneration));
        drop(t);
        drop(local);
        assert_eq!(drops.load(core::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn timeout_force_flushes_then_abandons() {
        let t = EndpointTable::new(cfg()).unwrap();
        let local = t.register();
        let h = t.open(()).unwrap();
        t.admit_post(h, 1).unwrap();
        t.retire(h, RetireReason::ContextFatal, 1_000).unwrap();
        let g = local.pin();
        let mut evs = heapless::Vec::<ReclaimEvent, 8>::new();
        t.poll_reclaim(1_099, &g, |e| evs.push(e).unwrap()).unwrap();
        assert!(evs.is_empty());
        t.poll_reclaim(1_100, &g, |e| evs.push(e).unwrap()).unwrap();
        t.poll_reclaim(1_150, &g, |e| evs.push(e).unwrap()).unwrap();
        assert_eq!(
            evs.as_slice(),
            &[ReclaimEvent::ForceFlush {
                handle: h,
                outstanding: 1
            }],
            "reported once"
        );
        assert!(t.state(h).unwrap().flush_requested);
        t.poll_reclaim(1_200, &g, |e| evs.push(e).unwrap()).unwrap();
        assert_eq!(
            evs[1],
            ReclaimEvent::Abandoned {
                handle: h,
                outstanding: 1
            }
        );
        assert_eq!(t.abandoned_posts(), 1);
        // The late completion only releases its token.
        assert_eq!(t.release_post(h, 1), Err(EndpointError::StaleGeneration));
        assert_eq!(t.stale_releases(), 1);
        assert_eq!(t.outstanding_total(), 0);
        assert_eq!(t.qp_depth_total(), 0);
    }

    #[test]
    fn qp_depth_is_bounded_and_rolls_back() {
        let t = EndpointTable::new(cfg()).unwrap();
        let h = t.open(()).unwrap();
        t.admit_post(h, 0).unwrap();
        t.admit_post(h, 0).unwrap();
        assert_eq!(t.admit_post(h, 0), Err(EndpointError::QpFull));
        assert_eq!(t.state(h).unwrap().outstanding, 2, "rolled back");
        assert_eq!(t.admit_post(h, 2), Err(EndpointError::BadQp));
        assert_eq!(t.qp_depth(h, 0), Ok(2));
        t.release_post(h, 0).unwrap();
        t.release_post(h, 0).unwrap();
        assert_eq!(t.release_post(h, 0), Err(EndpointError::Underflow));
        assert_eq!(t.outstanding_total(), 0);
    }

    #[test]
    fn resource_is_generation_checked_and_guard_must_be_ours() {
        let t = EndpointTable::new(cfg()).unwrap();
        let other = EndpointTable::<u32>::new(cfg()).unwrap();
        let local = t.register();
        let foreign = other.register();
        let h = t.open(7u32).unwrap();
        let g = local.pin();
        assert_eq!(t.resource(h, &g), Ok(&7));
        assert_eq!(
            t.resource(h, &foreign.pin()),
            Err(EndpointError::ForeignGuard)
        );
        let wrong = EndpointHandle {
            slot: h.slot,
            generation: h.generation + 1,
        };
        assert_eq!(t.resource(wrong, &g), Err(EndpointError::StaleGeneration));
    }

    #[test]
    fn table_full_is_typed() {
        let t = EndpointTable::new(cfg()).unwrap();
        t.open(()).unwrap();
        t.open(()).unwrap();
        assert_eq!(t.open(()), Err(EndpointError::TableFull));
        assert_eq!(t.live(), 2);
    }
}
