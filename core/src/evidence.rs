//! Task anomaly evidence (RFC 4162, "Caller Observability").
//!
//! Each logical task owns one [`TaskEvidence`]: a bounded, fixed-capacity
//! (`N` slots, in the type; no allocation) record of the anomalies its slices
//! observed. The completion path records; callers query read-only — both
//! queries take `&self` and never mutate, poll, post or probe anything.
//!
//! * The minimal query ([`TaskEvidence::state`]) returns [`AnomalyState`]:
//!   NORMAL, CONGESTED, LONG_UNAVAILABLE or UNKNOWN.
//! * The detailed query ([`TaskEvidence::detail`]) returns the winning
//!   [`Observation`] (reason, scope, path, time, resolved flag,
//!   attempt/generation, window, in-flight bytes, cooldown), with every field
//!   that was not observed marked [`Observed::Unobserved`].
//!
//! For multi-slice tasks the most severe *unresolved* state wins
//! (LONG_UNAVAILABLE, then CONGESTED, then UNKNOWN, then NORMAL). A success
//! of the slice resolves its evidence; a new attempt of the slice clears its
//! old blocking evidence; evidence of an older attempt, or of an older route
//! generation within the same attempt, never overwrites newer evidence.
//!
//! ```
//! use railyard_core::evidence::{Observation, Reason, TaskEvidence, AnomalyState};
//! use railyard_core::slice::SliceRef;
//!
//! let mut ev = TaskEvidence::<4>::new();
//! assert_eq!(ev.state(), AnomalyState::Unknown); // no evidence yet
//! let s0 = SliceRef { index: 0, attempt: 1 };
//! ev.record(s0, Observation::new(Reason::ByteWindow, 10));
//! assert_eq!(ev.state(), AnomalyState::Congested);
//! ev.resolve(s0, 20);
//! assert_eq!(ev.state(), AnomalyState::Normal);
//! ```

use crate::slice::SliceRef;
use crate::time::Nanos;

/// The caller-visible anomaly state of a task (the minimal query). Not
/// to be confused with an engine task's lifecycle (waiting, pending,
/// completed, ...): this says what its unresolved evidence means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AnomalyState {
    /// Successful completion with no unresolved anomaly.
    Normal,
    /// Local configuration, remote metadata, derived flush, fatal without
    /// path evidence, controller off, unsupported transport, or no evidence.
    Unknown,
    /// Byte window, receiver pressure, congestion feedback or a route timeout
    /// before quarantine: keep the task or retry with upper-layer backoff.
    Congested,
    /// Quarantined path, failed probe, or no usable path: try another rail.
    LongUnavailable,
}

impl AnomalyState {
    /// Severity for the multi-slice "most severe wins" rule (higher wins).
    ///
    /// ```
    /// use railyard_core::evidence::AnomalyState;
    /// assert!(AnomalyState::LongUnavailable.severity() > AnomalyState::Congested.severity());
    /// assert!(AnomalyState::Unknown.severity() > AnomalyState::Normal.severity());
    /// ```
    #[inline]
    pub const fn severity(self) -> u8 {
        match self {
            AnomalyState::Normal => 0,
            AnomalyState::Unknown => 1,
            AnomalyState::Congested => 2,
            AnomalyState::LongUnavailable => 3,
        }
    }
}

/// The reason recorded with one piece of evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Byte-window admission deferred the slice (`BYTE_WINDOW`).
    ByteWindow,
    /// Receiver pressure (RNR) on the route.
    ReceiverPressure,
    /// Success with rising drain time / backlog.
    CongestionFeedback,
    /// A route timeout before quarantine.
    RouteTimeout,
    /// Route-scoped connection evidence (RDMA CM disconnected / unreachable).
    RouteConnection,
    /// The path is quarantined (`PATH_QUARANTINED`).
    PathQuarantined,
    /// A new-generation probe failed.
    ProbeFailed,
    /// No usable RDMA path remains.
    NoUsablePath,
    /// The local device was removed (RDMA CM device removal / device fatal).
    DeviceRemoved,
    /// A local configuration error.
    LocalConfiguration,
    /// Stale remote metadata.
    RemoteMetadata,
    /// A flush derived from another root cause.
    DerivedFlush,
    /// A fatal error without attributable current-path evidence.
    Fatal,
    /// The generation changed after admission (rolled back, re-resolved).
    GenerationChanged,
    /// The post was rejected synchronously.
    PostRejected,
    /// A deadline passed while the poller was stalled.
    PollerStall,
    /// A control-plane RPC failed.
    ControlPlane,
    /// Cancellation, teardown or reclamation.
    Cancelled,
}

impl Reason {
    /// The minimal state this reason projects to.
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, Reason};
    /// assert_eq!(Reason::ReceiverPressure.task_state(), AnomalyState::Congested);
    /// assert_eq!(Reason::NoUsablePath.task_state(), AnomalyState::LongUnavailable);
    /// assert_eq!(Reason::DerivedFlush.task_state(), AnomalyState::Unknown);
    /// ```
    #[inline]
    pub const fn task_state(self) -> AnomalyState {
        match self {
            Reason::ByteWindow
            | Reason::ReceiverPressure
            | Reason::CongestionFeedback
            | Reason::RouteTimeout
            | Reason::RouteConnection => AnomalyState::Congested,
            Reason::PathQuarantined
            | Reason::ProbeFailed
            | Reason::NoUsablePath
            | Reason::DeviceRemoved => AnomalyState::LongUnavailable,
            Reason::LocalConfiguration
            | Reason::RemoteMetadata
            | Reason::DerivedFlush
            | Reason::Fatal
            | Reason::GenerationChanged
            | Reason::PostRejected
            | Reason::PollerStall
            | Reason::ControlPlane
            | Reason::Cancelled => AnomalyState::Unknown,
        }
    }
}

/// How far the evidence lets a failure be isolated. The scope is the
/// *maximum*: handling never widens it further.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureScope {
    /// No failure scope (success, non-failure events, unknown events).
    None,
    /// The current operation / WR only.
    Operation,
    /// The current QP (and the current generation of its dependent objects).
    Qp,
    /// The CQ and every QP associated with it.
    Cq,
    /// The current local-NIC to remote-NIC path.
    Route,
    /// QPs, GIDs and routes on one port.
    Port,
    /// The current local RDMA device (never the remote peer).
    Device,
}

/// A field that may not have been observed: never a silent zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Observed<T> {
    /// Not observed when the anomaly was recorded.
    #[default]
    Unobserved,
    /// The observed value.
    Value(T),
}

impl<T: Copy> Observed<T> {
    /// The value, if observed.
    ///
    /// ```
    /// use railyard_core::evidence::Observed;
    /// assert_eq!(Observed::Value(7u64).get(), Some(7));
    /// assert_eq!(Observed::<u64>::Unobserved.get(), None);
    /// ```
    #[inline]
    pub const fn get(&self) -> Option<T> {
        match *self {
            Observed::Value(v) => Some(v),
            Observed::Unobserved => None,
        }
    }
}

/// A local-device × route path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PathId {
    /// Device domain index.
    pub device: u16,
    /// Route domain index.
    pub route: u32,
}

/// One piece of anomaly evidence (the detailed query's payload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Observation {
    /// The most recent relevant reason.
    pub reason: Reason,
    /// The failure scope.
    pub scope: Observed<FailureScope>,
    /// The affected path.
    pub path: Observed<PathId>,
    /// Observation time (caller's clock).
    pub observed_ns: Nanos,
    /// Whether the slice later resolved this evidence (success or recovery).
    pub resolved: bool,
    /// Slice index and attempt the evidence belongs to (filled by `record`).
    pub slice: SliceRef,
    /// Route generation the evidence was observed on.
    pub generation: Observed<u32>,
    /// The domain's byte window at observation time.
    pub window: Observed<u64>,
    /// The domain's in-flight bytes at observation time.
    pub in_flight: Observed<u64>,
    /// Cooldown remaining (ns) at observation time, for a quarantined path.
    pub cooldown_remaining_ns: Observed<u64>,
}

impl Observation {
    /// Evidence with only a reason and a time; every other field unobserved.
    ///
    /// ```
    /// use railyard_core::evidence::{Observation, Observed, Reason};
    /// let o = Observation::new(Reason::PollerStall, 42);
    /// assert_eq!((o.reason, o.observed_ns, o.resolved), (Reason::PollerStall, 42, false));
    /// assert_eq!(o.window, Observed::Unobserved); // everything else unobserved
    /// ```
    #[inline]
    pub const fn new(reason: Reason, observed_ns: Nanos) -> Self {
        Self {
            reason,
            scope: Observed::Unobserved,
            path: Observed::Unobserved,
            observed_ns,
            resolved: false,
            slice: SliceRef {
                index: 0,
                attempt: 0,
            },
            generation: Observed::Unobserved,
            window: Observed::Unobserved,
            in_flight: Observed::Unobserved,
            cooldown_remaining_ns: Observed::Unobserved,
        }
    }

    /// The minimal state of this evidence (ignoring `resolved`).
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, Observation, Reason};
    /// assert_eq!(Observation::new(Reason::PathQuarantined, 0).task_state(), AnomalyState::LongUnavailable);
    /// ```
    #[inline]
    pub const fn task_state(&self) -> AnomalyState {
        self.reason.task_state()
    }
}

/// What [`TaskEvidence::record`] did with an observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Recorded {
    /// Stored (new slot or replacing the slice's older evidence).
    Stored,
    /// Ignored: it came from an older attempt or an older generation.
    Stale,
    /// Dropped: storage full of more severe unresolved evidence (counted).
    Dropped,
}

/// The detailed query's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Detail {
    /// Same as [`TaskEvidence::state`].
    pub state: AnomalyState,
    /// The evidence that decided `state` (the most severe unresolved one,
    /// most recent among equals), or the most recent resolved one when
    /// nothing is unresolved; `None` when there is no evidence at all.
    pub winner: Option<Observation>,
    /// Observations dropped because storage was full.
    pub dropped: u32,
    /// Stale observations ignored (old attempt / old generation).
    pub stale: u32,
}

/// Bounded anomaly evidence for one logical task, `N` slices of evidence.
#[derive(Clone, Debug)]
pub struct TaskEvidence<const N: usize = 8> {
    slots: heapless::Vec<Observation, N>,
    successes: u32,
    dropped: u32,
    stale: u32,
}

impl<const N: usize> Default for TaskEvidence<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> TaskEvidence<N> {
    /// Empty evidence (minimal state UNKNOWN until something is observed).
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, TaskEvidence};
    /// let ev = TaskEvidence::<16>::new();
    /// assert_eq!((ev.state(), ev.capacity()), (AnomalyState::Unknown, 16));
    /// ```
    pub const fn new() -> Self {
        Self {
            slots: heapless::Vec::new(),
            successes: 0,
            dropped: 0,
            stale: 0,
        }
    }

    /// Fixed capacity, in slices.
    ///
    /// ```
    /// use railyard_core::evidence::TaskEvidence;
    /// let ev: TaskEvidence = TaskEvidence::new();
    /// assert_eq!(ev.capacity(), 8); // the default: 8 slices of evidence
    /// ```
    pub const fn capacity(&self) -> usize {
        N
    }

    fn position(&self, slice_index: u32) -> Option<usize> {
        self.slots.iter().position(|o| o.slice.index == slice_index)
    }

    /// Records evidence for `slice`. Evidence of an older attempt (or an
    /// older generation within the same attempt) than the slice's stored
    /// evidence is ignored; a newer attempt replaces the old evidence.
    ///
    /// ```
    /// use railyard_core::evidence::{Observation, Reason, Recorded, TaskEvidence};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let mut ev = TaskEvidence::<1>::new();
    /// let s = SliceRef { index: 0, attempt: 2 };
    /// assert_eq!(ev.record(s, Observation::new(Reason::ByteWindow, 10)), Recorded::Stored);
    /// // A late observation of the slice's previous attempt never overwrites it.
    /// let old = SliceRef { attempt: 1, ..s };
    /// assert_eq!(ev.record(old, Observation::new(Reason::Fatal, 11)), Recorded::Stale);
    /// // Full of more severe evidence: a less severe slice's is dropped (and counted).
    /// ev.record(s, Observation::new(Reason::NoUsablePath, 12));
    /// let other = SliceRef { index: 1, attempt: 1 };
    /// assert_eq!(ev.record(other, Observation::new(Reason::ByteWindow, 13)), Recorded::Dropped);
    /// assert_eq!(ev.detail().dropped, 1);
    /// ```
    pub fn record(&mut self, slice: SliceRef, mut obs: Observation) -> Recorded {
        obs.slice = slice;
        obs.resolved = false;
        if let Some(i) = self.position(slice.index) {
            let old = self.slots[i];
            if is_older(&obs, &old) {
                self.stale = self.stale.saturating_add(1);
                return Recorded::Stale;
            }
            self.slots[i] = obs;
            return Recorded::Stored;
        }
        if self.slots.push(obs).is_ok() {
            return Recorded::Stored;
        }
        // Full: evict the oldest resolved slot, else the least severe
        // unresolved slot if the new evidence is more severe.
        let victim = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, o)| o.resolved)
            .min_by_key(|(_, o)| o.observed_ns)
            .map(|(i, _)| i)
            .or_else(|| {
                self.slots
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, o)| (o.task_state().severity(), o.observed_ns))
                    .filter(|(_, o)| o.task_state().severity() < obs.task_state().severity())
                    .map(|(i, _)| i)
            });
        match victim {
            Some(i) => {
                self.slots[i] = obs;
                self.dropped = self.dropped.saturating_add(1);
                Recorded::Stored
            }
            None => {
                self.dropped = self.dropped.saturating_add(1);
                Recorded::Dropped
            }
        }
    }

    /// A success of `slice` (its current attempt): resolves the slice's
    /// evidence of this or an older attempt. Returns whether something was
    /// resolved.
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, Observation, Reason, TaskEvidence};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let mut ev = TaskEvidence::<4>::new();
    /// let s = SliceRef { index: 3, attempt: 1 };
    /// ev.record(s, Observation::new(Reason::RouteTimeout, 5));
    /// assert!(ev.resolve(s, 9)); // the slice succeeded after all
    /// assert!(!ev.resolve(s, 10)); // nothing left to resolve
    /// assert_eq!(ev.state(), AnomalyState::Normal);
    /// ```
    pub fn resolve(&mut self, slice: SliceRef, _now: Nanos) -> bool {
        self.successes = self.successes.saturating_add(1);
        match self.position(slice.index) {
            Some(i) if self.slots[i].slice.attempt <= slice.attempt && !self.slots[i].resolved => {
                self.slots[i].resolved = true;
                true
            }
            _ => false,
        }
    }

    /// A new attempt of `slice` starts: its old blocking evidence is cleared
    /// (marked resolved, kept for the detailed query) and late evidence of
    /// older attempts will be ignored.
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, Observation, Reason, Recorded, TaskEvidence};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let mut ev = TaskEvidence::<4>::new();
    /// let a1 = SliceRef { index: 0, attempt: 1 };
    /// ev.record(a1, Observation::new(Reason::RouteTimeout, 5));
    /// let a2 = SliceRef { attempt: 2, ..a1 };
    /// ev.begin_attempt(a2); // the retry: attempt 1's evidence no longer blocks
    /// assert_ne!(ev.state(), AnomalyState::Congested);
    /// assert_eq!(ev.record(a1, Observation::new(Reason::Fatal, 6)), Recorded::Stale);
    /// ```
    pub fn begin_attempt(&mut self, slice: SliceRef) {
        if let Some(i) = self.position(slice.index) {
            let o = &mut self.slots[i];
            if o.slice.attempt < slice.attempt {
                o.resolved = true;
                o.slice.attempt = slice.attempt;
                o.generation = Observed::Unobserved;
            }
        }
    }

    /// The minimal query. Never mutates.
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, Observation, Reason, TaskEvidence};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let mut ev = TaskEvidence::<4>::new();
    /// ev.record(SliceRef { index: 0, attempt: 1 }, Observation::new(Reason::ByteWindow, 1));
    /// ev.record(SliceRef { index: 1, attempt: 1 }, Observation::new(Reason::PathQuarantined, 2));
    /// assert_eq!(ev.state(), AnomalyState::LongUnavailable); // the most severe unresolved wins
    /// ```
    pub fn state(&self) -> AnomalyState {
        self.detail().state
    }

    /// The detailed query. Never mutates.
    ///
    /// ```
    /// use railyard_core::evidence::{AnomalyState, Observation, Reason, TaskEvidence};
    /// use railyard_core::slice::SliceRef;
    ///
    /// let mut ev = TaskEvidence::<4>::new();
    /// assert_eq!(ev.detail().winner, None);
    /// let s = SliceRef { index: 0, attempt: 1 };
    /// ev.record(s, Observation::new(Reason::RemoteMetadata, 7));
    /// let d = ev.detail();
    /// assert_eq!(d.state, AnomalyState::Unknown);
    /// let w = d.winner.unwrap();
    /// assert_eq!((w.reason, w.slice, w.resolved), (Reason::RemoteMetadata, s, false));
    /// ```
    pub fn detail(&self) -> Detail {
        let unresolved = self
            .slots
            .iter()
            .filter(|o| !o.resolved)
            .max_by_key(|o| (o.task_state().severity(), o.observed_ns));
        let (state, winner) = match unresolved {
            Some(o) => (o.task_state(), Some(*o)),
            None => {
                let last = self.slots.iter().max_by_key(|o| o.observed_ns).copied();
                let state = if self.successes > 0 {
                    AnomalyState::Normal
                } else {
                    AnomalyState::Unknown
                };
                (state, last)
            }
        };
        Detail {
            state,
            winner,
            dropped: self.dropped,
            stale: self.stale,
        }
    }
}

/// Whether `new` comes from an older attempt or generation than `old`.
fn is_older(new: &Observation, old: &Observation) -> bool {
    if new.slice.attempt != old.slice.attempt {
        return new.slice.attempt < old.slice.attempt;
    }
    // Generations wrap: compare by signed distance.
    matches!((new.generation, old.generation), (Observed::Value(n), Observed::Value(o)) if (o.wrapping_sub(n) as i32) > 0)
}
