//! The engine's counters ([`Telemetry`]): one cache line of counters per
//! worker ([`WorkerCounters`]), the control paths' counts (async events,
//! retired, reclaimed, evicted and force-flushed endpoints, the handshake
//! listener's outcomes) and the rail selector's decision trace. What they
//! add up to is [`EngineStats`]; the workers' completion, unposted and
//! token-return counts are also the release stamp parked slices wait on.

use super::rail_diag::RailTrace;
use super::stats::{EngineStats, HandshakeCounters};
use std::sync::atomic::{AtomicU64, Ordering};

/// Per-worker counters, each on its own cache line.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) posts: AtomicU64,
    pub(crate) doorbells: AtomicU64,
    pub(crate) completions: AtomicU64,
    pub(crate) stale: AtomicU64,
    pub(crate) bad: AtomicU64,
    pub(crate) deferrals: AtomicU64,
    pub(crate) avoids: AtomicU64,
    pub(crate) backpressure: AtomicU64,
    pub(crate) unposted: AtomicU64,
    pub(crate) retries: AtomicU64,
    /// Slices moved to another rail (`connect::re_rail`).
    pub(crate) rail_moves: AtomicU64,
    /// Posts the hot path refused as invalid (an engine bug: must stay 0).
    pub(crate) invalid: AtomicU64,
    /// Poll rounds (the control epoch's poller heartbeat).
    pub(crate) polls: AtomicU64,
    /// Slices parked (`park.rs`): refused, held until their block lifts.
    pub(crate) parks: AtomicU64,
    /// Slices in this worker's parking lot right now (a gauge).
    pub(crate) parked: AtomicU64,
    /// Times this worker's idle round returned cached free tokens to the
    /// pool (a claim starved, or the worker went to sleep): part of the
    /// release stamp, so work parked on "no token" is offered again.
    pub(crate) token_returns: AtomicU64,
}

/// The engine's counters (see the module docs).
pub(crate) struct Telemetry {
    /// Worker `w`'s counters.
    pub(crate) workers: Box<[WorkerCounters]>,
    pub(crate) async_events: AtomicU64,
    pub(crate) retired: AtomicU64,
    pub(crate) reclaimed: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) fetch_retries: AtomicU64,
    pub(crate) force_flushes: AtomicU64,
    /// The handshake listener's outcomes.
    pub(crate) handshakes: HandshakeCounters,
    /// Aggregate-decision traces for TTL calibration (only when tracing).
    pub(crate) rail_trace: RailTrace,
}

impl Telemetry {
    /// Counters for `workers` workers; `trace`: keep the rail selector's
    /// decision traces.
    pub(crate) fn new(workers: usize, trace: bool) -> Self {
        Self {
            workers: (0..workers).map(|_| WorkerCounters::default()).collect(),
            async_events: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            fetch_retries: AtomicU64::new(0),
            force_flushes: AtomicU64::new(0),
            handshakes: HandshakeCounters::default(),
            rail_trace: RailTrace::new(trace),
        }
    }

    /// What moves when a token, a QP slot or CC window bytes may have come
    /// back: every worker's polled completions, unposted releases and
    /// cache returns (each counted after its release), on top of `epochs`
    /// (the CC epochs: windows change there). A parked slice's block lifts
    /// when it moves (`park.rs`).
    pub(crate) fn release_stamp(&self, epochs: u64) -> u64 {
        self.workers.iter().fold(epochs, |a, c| {
            a.wrapping_add(c.completions.load(Ordering::Acquire))
                .wrapping_add(c.unposted.load(Ordering::Acquire))
                .wrapping_add(c.token_returns.load(Ordering::Acquire))
        })
    }

    /// Poll rounds over every worker (the control epoch's poller
    /// heartbeat).
    pub(crate) fn polls(&self) -> u64 {
        self.workers
            .iter()
            .map(|c| c.polls.load(Ordering::Relaxed))
            .sum()
    }

    /// Adds the counters to `s`: the control paths' counts and every
    /// worker's, its posts also to the rail of `post_device(w)` (the device
    /// worker `w` posts to, if it posts).
    pub(crate) fn add_to(&self, s: &mut EngineStats, post_device: impl Fn(usize) -> Option<usize>) {
        s.async_events = self.async_events.load(Ordering::Relaxed);
        s.retired = self.retired.load(Ordering::Relaxed);
        s.reclaimed = self.reclaimed.load(Ordering::Relaxed);
        s.evictions = self.evictions.load(Ordering::Relaxed);
        s.fetch_retries = self.fetch_retries.load(Ordering::Relaxed);
        s.force_flushes = self.force_flushes.load(Ordering::Relaxed);
        s.handshakes = self.handshakes.snapshot();
        for (w, c) in self.workers.iter().enumerate() {
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            if let Some(d) = post_device(w) {
                if let Some(p) = s.rail_slices_posted.get_mut(d) {
                    *p += l(&c.posts);
                }
            }
            s.posts += l(&c.posts);
            s.doorbells += l(&c.doorbells);
            s.completions += l(&c.completions);
            s.stale_completions += l(&c.stale);
            s.bad_completions += l(&c.bad);
            s.deferrals += l(&c.deferrals);
            s.avoids += l(&c.avoids);
            s.backpressure += l(&c.backpressure);
            s.unposted += l(&c.unposted);
            s.retries += l(&c.retries);
            s.rail_moves += l(&c.rail_moves);
            s.invalid_posts += l(&c.invalid);
            s.parks += l(&c.parks);
            s.parked += l(&c.parked);
        }
    }
}
