//! The state the engine handle and its threads share ([`Shared`]): its
//! parts, each owning its state with its own methods in its own file
//! (the fabric, the slice/task tables, the registry of segments, memory,
//! telemetry, the run state, receiver credit, fault injection) and the
//! core pieces of the composed hot path (the token pool, the endpoint
//! table, the rail selector, the CC gate, selective signaling). What needs
//! several parts at once is here, in [`Shared`]'s one impl: building the
//! engine, the composed hot path, settling and re-queueing a slice. The
//! paths over it are functions of it, each in its own file: connection
//! setup, retire and reconnect (`connect/`), submit (`submit.rs`), the
//! workers (`worker.rs`), the control threads (`control.rs`) and the
//! stats and logging (`observe.rs`); none of them keeps state of its own.

use super::cc_gate::CcGate;
use super::config::EngineConfig;
use super::credit::EngineCredit;
use super::error::{ConfigError, EngineError};
use super::fabric::{Dev, EpResource, Fabric};
use super::fault;
use super::hotpath::EngineHotPath;
use super::lifecycle::Lifecycle;
use super::memory;
use super::registry::Registry;
use super::tables::Tables;
use super::telemetry::Telemetry;
use railyard_core::cc::SoftwareProvider;
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, EndpointTable, Phase};
use railyard_core::rail::{DeviceSpec, Selector};
use railyard_core::slice::{Outcome, SliceRef};
use railyard_core::token::{TokenError, TokenPool};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// State shared by the engine handle and its threads.
pub(crate) struct Shared {
    pub(crate) cfg: EngineConfig,
    /// The devices, their shards and workers (`fabric.rs`).
    pub(crate) fabric: Fabric,
    /// Rail selection over the devices (RFC 4534).
    pub(crate) rails: Selector,
    pub(crate) epoch: Instant,
    /// Selective signaling (`MC_SIGNAL_INTERVAL`; `signal.rs`).
    pub(crate) signal: super::signal::Signaling,
    pub(crate) tokens: TokenPool,
    pub(crate) endpoints: EndpointTable<EpResource>,
    /// Slices, tasks and batches (`tables.rs`).
    pub(crate) tables: Tables,
    /// The congestion controller: the CC layer of the composed hot path,
    /// and its control-plane duties.
    pub(crate) gate: CcGate,
    /// Why the configured controller stayed off, if it did.
    pub(crate) cc_error: Option<railyard_core::cc::ConfigError>,
    /// Segments, their rails, QP numbers and route domains (`registry.rs`).
    pub(crate) registry: Registry,
    /// Registered memory: the region table and its pins (`memory.rs`).
    pub(crate) mem: memory::MemTable,
    /// Running, draining or stopping, and the reconnect threads
    /// (`lifecycle.rs`).
    pub(crate) lifecycle: Lifecycle,
    /// The counters (`telemetry.rs`).
    pub(crate) telemetry: Telemetry,
    /// Fault-injection state (empty without the `fault-injection` feature).
    pub(crate) fault: fault::FaultState,
    /// This `Shared` itself, for the automatic reconnect thread.
    pub(crate) me: OnceLock<std::sync::Weak<Shared>>,
    /// Receiver credit (RFC 2849, `credit/`); `None` with it off.
    pub(crate) credit: Option<EngineCredit>,
}

impl Shared {
    /// Nanoseconds since the engine started (the `now_ns` core expects).
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The composed hot path (`railyard_core::completion`, `hotpath.rs`)
    /// over this engine's tables and layers: receiver credit (the sender
    /// ledger, or `None` with credit off), the rail selector and the
    /// congestion controller, with the memory pins of posted work. Every
    /// post and every completion goes through it; nothing else takes or
    /// releases a permit, a rail charge or a post's memory pin, or maps a
    /// WC status.
    #[inline(always)]
    pub(crate) fn hot_path(&self) -> EngineHotPath<'_> {
        let core = railyard_core::completion::HotPath::new(
            &self.tokens,
            &self.tables.slices,
            &self.endpoints,
        )
        .with_layers(railyard_core::completion::Layers {
            credit: self.credit.as_ref().map(|c| &c.ledger),
            rail: &self.rails,
            cc: &self.gate,
        });
        EngineHotPath::new(core, &self.mem)
    }

    /// Settles slice attempt `r` (if it still is current) as `outcome`
    /// ([`Tables::settle`], which gives back its memory pin).
    pub(crate) fn settle(&self, r: SliceRef, outcome: Outcome) {
        self.tables.settle(&self.mem, r, outcome);
    }

    /// Queues slice attempt `r` to the shard of its QP. Each open slice is
    /// in at most one queue and every queue holds `max_slices`, so the push
    /// only fails if stale references of freed slices crowd the queue; then
    /// the slice fails rather than vanish.
    pub(crate) fn requeue(&self, r: SliceRef) {
        let shard = self.tables.meta[r.index as usize]
            .shard
            .load(Ordering::Relaxed) as usize;
        if self.fabric.queues[shard].push(r).is_err() {
            self.settle(r, Outcome::Failure);
            return;
        }
        self.fabric.wake_poster(shard);
    }

    /// A WRITE of slice attempt `r` met credit backpressure `b` at `now`:
    /// counts the stall and shows the typed backpressure on its task.
    pub(crate) fn credit_stalled(
        &self,
        r: SliceRef,
        b: railyard_core::credit::BackpressureInfo,
        now: u64,
    ) {
        let Some(c) = self.credit.as_ref() else {
            return;
        };
        c.stalled(b.peer, now);
        *self
            .tables
            .task_of(r.index)
            .backpressure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(c.backpressure(b));
    }

    /// Records the typed backpressure slice `r`'s post met on its task (any
    /// source: [`Refusal::backpressure_info`](railyard_core::completion::Refusal::backpressure_info));
    /// receiver credit also counts the peer's stall and carries the
    /// refresh as its retry hint ([`Self::credit_stalled`]).
    pub(crate) fn note_backpressure(
        &self,
        r: SliceRef,
        b: railyard_core::credit::BackpressureInfo,
        now: u64,
    ) {
        if b.source == railyard_core::credit::PressureSource::ReceiverCredit {
            return self.credit_stalled(r, b, now);
        }
        *self
            .tables
            .task_of(r.index)
            .backpressure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(b);
    }

    /// Whether endpoint `h` accepts posts.
    pub(crate) fn is_active(&self, h: EndpointHandle) -> bool {
        matches!(self.endpoints.state(h), Ok(s) if s.phase == Phase::Active)
    }

    /// Whether any of `eps` still accepts posts (receiver credit fences an
    /// old epoch only once its endpoints stopped).
    pub(crate) fn any_active(&self, eps: &[EndpointHandle]) -> bool {
        eps.iter().any(|&h| self.is_active(h))
    }

    /// What moves when a token, a QP slot or CC window bytes may have come
    /// back: every worker's polled completions, unposted releases and
    /// cache returns (each counted after its release), plus the CC epochs (windows change
    /// there). A parked slice's block lifts when it moves (`park.rs`).
    pub(crate) fn release_stamp(&self) -> u64 {
        self.telemetry.release_stamp(self.gate.epochs())
    }

    /// The engine's state over the opened devices `devs` (`max_cqe`: the
    /// smallest CQ any of them allows): the CC gate, the CQs, the rail
    /// selector and the core tables (tokens, slices, endpoints).
    pub(crate) fn new(
        cfg: EngineConfig,
        devs: Vec<Dev>,
        max_cqe: u32,
    ) -> Result<Arc<Self>, EngineError> {
        let (gate, cc_error) =
            CcGate::new_or_off_devices(&cfg.cc, cfg.rails() as u16, cfg.max_endpoints);
        if let Some(e) = &cc_error {
            tracing::warn!(target: "railyard::cc", error = %e,
                "congestion controller configuration refused: the controller stays off");
        }
        // A software provider's send queue is host CPU, not a fabric: its
        // drain time is advisory by default (railyard_core::cc::DrainSignal).
        for (i, d) in devs.iter().enumerate() {
            let provider = SoftwareProvider::from_vendor_id(d.vendor_id);
            let signal = cfg.cc.drain_signal(provider);
            gate.set_drain_signal(i as u16, signal);
            if let (Some(p), true) = (provider, gate.enabled()) {
                tracing::info!(target: "railyard::cc", device = d.ctx.name(), rail = i,
                    provider = p.name(), vendor_id = d.vendor_id, drain_signal = signal.as_str(),
                    "software RDMA provider: drain time measures host CPU, not the fabric");
            }
        }
        // Every CQ can hold every token, so no CQ can ever overflow.
        let inflight = cfg.max_inflight.min(max_cqe);
        let ndevs = devs.len();
        let fabric = Fabric::new(devs, &cfg, inflight)?;
        let fabric_workers = fabric.topo.workers();
        // The port's link rate is not queried: every rail gets the same
        // nominal rate, and the selector's completion EWMA learns the rest.
        let specs = vec![DeviceSpec::new(cfg.rail_nominal_bps); ndevs];
        let rails = Selector::new(&specs, cfg.rail).map_err(|e| ConfigError {
            var: "rail",
            value: e.to_string(),
            expected: "a valid railyard_core::rail::RailConfig",
        })?;
        let tokens = TokenPool::new(inflight as usize)
            .map_err(|_: TokenError| EngineError::Core("token pool"))?;
        let endpoints = EndpointTable::new(EndpointConfig {
            capacity: cfg.max_endpoints,
            qps_per_endpoint: cfg.qps_per_endpoint,
            max_wr_per_qp: cfg.max_wr,
            drain_timeout_ns: cfg.drain_timeout.as_nanos().clamp(1, u64::MAX as u128 / 4) as u64,
        })
        .map_err(EngineError::Endpoint)?;
        let shared = Arc::new(Shared {
            fabric,
            rails,
            epoch: Instant::now(),
            signal: super::signal::Signaling::new(
                railyard_core::completion::SignalPolicy::new(cfg.signal_interval)
                    .unwrap_or(railyard_core::completion::SignalPolicy::EVERY),
                cfg.max_endpoints,
                cfg.qps_per_endpoint,
                cfg.max_wr,
                inflight as usize,
            ),
            tokens,
            endpoints,
            tables: Tables::new(cfg.max_slices, cfg.max_tasks)?,
            gate,
            cc_error,
            registry: Registry::default(),
            mem: memory::MemTable::new(inflight as usize),
            lifecycle: Lifecycle::default(),
            telemetry: Telemetry::new(fabric_workers, cfg.rail.trace && cfg.rail.peer_accounting),
            fault: fault::FaultState::default(),
            me: OnceLock::new(),
            credit: EngineCredit::new(cfg.credit)?,
            cfg,
        });
        let _ = shared.me.set(Arc::downgrade(&shared));
        Ok(shared)
    }
}
