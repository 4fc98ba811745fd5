//! The fabric model: hosts, NICs, one switch, receivers, faults, and the
//! sender stack that posts through the real `railyard-core`.
//!
//! See `sim/README.md` for the model's assumptions and limits.

use std::collections::VecDeque;
use std::rc::Rc;

use railyard_core::completion::{
    CreditDemand, HotPath, Layers, Path, PathChoice, PostRequest, Refusal, SliceEffect,
};
use railyard_core::credit::Charge;
use railyard_core::endpoint::{
    EndpointConfig, EndpointHandle, EndpointLocal, EndpointTable, RetireReason,
};
use railyard_core::evidence::{AnomalyState, Observation, Reason, TaskEvidence};
use railyard_core::slice::{SliceRef, SliceState, SliceTable};
use railyard_core::time::{NS_PER_MS, NS_PER_SEC, NS_PER_US};
use railyard_core::token::{TokenCacheOver, TokenPool, TokenRecord, WrId};

use crate::credit::{CreditMsg, CreditPlane, RxCapacity};
use crate::engine::EventQueue;
pub use crate::report::Series;
use crate::rng::Rng;
use crate::stack::{Stack, StackConfig};

/// ibverbs `IBV_WC_SUCCESS`.
pub const WC_SUCCESS: u16 = 0;
/// ibverbs `IBV_WC_WR_FLUSH_ERR`.
pub const WC_WR_FLUSH_ERR: u16 = 5;
/// ibverbs `IBV_WC_RETRY_EXC_ERR`.
pub const WC_RETRY_EXC_ERR: u16 = 12;
/// ibverbs `IBV_EVENT_QP_FATAL`.
pub const EV_QP_FATAL: u32 = 1;
/// ibverbs `IBV_EVENT_DEVICE_FATAL`.
pub const EV_DEVICE_FATAL: u32 = 8;
/// ibverbs `IBV_EVENT_PORT_ACTIVE`.
pub const EV_PORT_ACTIVE: u32 = 9;
/// ibverbs `IBV_EVENT_PORT_ERR`.
pub const EV_PORT_ERR: u32 = 10;

/// Network constants.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// NICs per host (rails). Sender NIC `k` reaches receiver NIC `k`.
    pub nics_per_host: usize,
    /// Line rate of every NIC and switch port, bytes per second.
    pub line_rate: u64,
    /// One-way propagation delay of one link (host to switch), ns.
    pub prop_ns: u64,
    /// Switching unit: a WR is cut into segments of at most this size.
    pub seg_bytes: u32,
    /// Buffer per switch egress port, bytes. Lossless (PFC-like): a NIC
    /// whose next segment does not fit is paused until it does.
    pub switch_buffer: u64,
    /// Transport retry timeout: how long after a blackholed segment the WR
    /// completes with `IBV_WC_RETRY_EXC_ERR`.
    pub retry_timeout_ns: u64,
    /// Time to rebuild an endpoint (new generation) after a QP error.
    pub reconnect_ns: u64,
    /// Uniform jitter added to each segment's propagation, ns (seeded).
    pub jitter_ns: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            nics_per_host: 1,
            line_rate: 50_000_000_000, // 400 Gb/s
            prop_ns: 1_000,
            seg_bytes: 64 * 1024,
            switch_buffer: 16 << 20,
            retry_timeout_ns: 2 * NS_PER_MS,
            reconnect_ns: NS_PER_MS,
            jitter_ns: 100,
        }
    }
}

/// A consumer slowdown window at a receiver.
#[derive(Clone, Copy, Debug)]
pub struct Slowdown {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// Extra consumer time per WR while in the window, ns.
    pub extra_ns: u64,
}

/// One receiver host.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Receive slots (one WR occupies one slot from its first landed byte
    /// until the consumer has consumed it).
    pub slot_capacity: u32,
    /// Receive bytes (same lifetime as a slot).
    pub byte_capacity: u64,
    /// Request slots (REQUEST_SLOTS, returned by sender completions) the
    /// credit allocator grants from.
    pub request_slots: u32,
    /// Consumer drain rate of one worker, bytes per second.
    pub consumer_rate: u64,
    /// Consumer workers working in parallel (`u32::MAX`: one per slot,
    /// i.e. a pure commit latency).
    pub consumer_workers: u32,
    /// Fixed consumer cost per WR, ns.
    pub consumer_overhead_ns: u64,
    /// Optional slowdown window.
    pub slowdown: Option<Slowdown>,
    /// A rate-limited slow destination: the switch port towards this
    /// receiver drains at this rate instead of the line rate.
    pub rate_limit: Option<u64>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            slot_capacity: u32::MAX,
            byte_capacity: u64::MAX,
            request_slots: 2047,
            consumer_rate: 100_000_000_000,
            consumer_workers: 1,
            consumer_overhead_ns: 0,
            slowdown: None,
            rate_limit: None,
        }
    }
}

/// How a stream generates transfers.
#[derive(Clone, Copy, Debug)]
pub enum Arrivals {
    /// Keep this many transfers submitted and not yet complete.
    Closed {
        /// Outstanding transfers.
        outstanding: u32,
    },
    /// One transfer every `interval_ns` (plus seeded jitter of up to 1/8).
    Open {
        /// Mean inter-arrival time.
        interval_ns: u64,
    },
}

/// A stream of transfers from one sender to one receiver.
#[derive(Clone, Copy, Debug)]
pub struct Stream {
    /// Destination receiver index.
    pub rx: u32,
    /// Bytes per transfer.
    pub transfer_bytes: u64,
    /// Bytes per slice (one WR per slice attempt).
    pub slice_bytes: u32,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Only this local NIC reaches the destination (topology candidate
    /// rule); `None`: every NIC does.
    pub pin_nic: Option<u16>,
}

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Segments on route `(sender, nic) → rx` are blackholed for `dur_ns`;
    /// each WR hit completes with `IBV_WC_RETRY_EXC_ERR` after the retry
    /// timeout and flushes the rest of its QP.
    RouteTimeout {
        /// Sender.
        sender: u32,
        /// Local NIC.
        nic: u16,
        /// Receiver.
        rx: u32,
        /// Duration, ns.
        dur_ns: u64,
    },
    /// The QP of route `(sender, nic) → rx` goes to ERR
    /// (`IBV_EVENT_QP_FATAL`): its posted WRs flush.
    QpError {
        /// Sender.
        sender: u32,
        /// Local NIC.
        nic: u16,
        /// Receiver.
        rx: u32,
    },
    /// The sender NIC's port goes down (`IBV_EVENT_PORT_ERR`) for `dur_ns`,
    /// then comes back (`IBV_EVENT_PORT_ACTIVE`).
    PortDown {
        /// Sender.
        sender: u32,
        /// Local NIC.
        nic: u16,
        /// Duration, ns.
        dur_ns: u64,
    },
    /// The sender NIC dies for good (`IBV_EVENT_DEVICE_FATAL`).
    DeviceFatal {
        /// Sender.
        sender: u32,
        /// Local NIC.
        nic: u16,
    },
}

/// A fault at a time.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    /// When, ns.
    pub at_ns: u64,
    /// What.
    pub kind: FaultKind,
}

/// A whole experiment.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Network.
    pub net: NetConfig,
    /// Senders (each a host with `nics_per_host` NICs).
    pub senders: usize,
    /// Receivers.
    pub receivers: Vec<ReceiverConfig>,
    /// Streams of every sender (the same for each sender).
    pub streams: Vec<Stream>,
    /// Sender stack (window, credit, cc, rail).
    pub stack: StackConfig,
    /// Transfers are submitted until this time; the run then drains.
    pub duration_ns: u64,
    /// Sampling period of the time series and the control epoch, ns.
    pub epoch_ns: u64,
    /// Faults.
    pub faults: Vec<Fault>,
    /// Hard stop for the drain phase (a bug guard, not a result).
    pub drain_limit_ns: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            net: NetConfig::default(),
            senders: 1,
            receivers: vec![ReceiverConfig::default()],
            streams: vec![],
            stack: StackConfig::default(),
            duration_ns: 10 * NS_PER_MS,
            epoch_ns: 100 * NS_PER_US,
            faults: vec![],
            drain_limit_ns: 10 * NS_PER_SEC,
        }
    }
}

impl Stack {
    /// Builds the sender stack of `cfg`: its `stack` configuration for
    /// `cfg.senders` senders with `net.nics_per_host` NICs each and one
    /// route per receiver and NIC ([`Stack::build`]).
    pub fn new(cfg: &SimConfig) -> Result<Stack, String> {
        Stack::build(
            &cfg.stack,
            cfg.senders,
            cfg.receivers.len(),
            cfg.net.nics_per_host,
            cfg.net.line_rate,
        )
    }
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    NicTxDone {
        nic: u32,
        wr: u32,
        bytes: u32,
    },
    SwitchIn {
        port: u32,
        wr: u32,
        bytes: u32,
    },
    PortTxDone {
        port: u32,
    },
    RecvIn {
        wr: u32,
        bytes: u32,
    },
    Cqe {
        wr: u32,
        status: u16,
    },
    ConsumerDone {
        rx: u32,
        sender: u32,
        bytes: u64,
        credited: bool,
    },
    Arrival {
        sender: u32,
        stream: u32,
    },
    Credit(CreditMsg),
    Epoch,
    Fault {
        idx: u32,
    },
    PortUp {
        sender: u32,
        nic: u16,
    },
    Reconnect {
        sender: u32,
        route: u32,
    },
    RouteHeal {
        sender: u32,
        route: u32,
    },
}

/// State of one sender route's endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpState {
    Up(EndpointHandle),
    Down,
}

pub(crate) struct Pending {
    pub slice: SliceRef,
    pub transfer: u32,
    pub bytes: u32,
}

struct Transfer {
    live: bool,
    stream: u32,
    submit_ns: u64,
    slices_left: u32,
    failed: bool,
    bytes: u64,
    /// RFC 4162 task evidence, recorded by the completion path.
    evidence: TaskEvidence<8>,
    /// The most severe state a caller could have queried during the task.
    worst: AnomalyState,
}

/// Per-sender state: the real core's ownership tables plus the stack.
pub(crate) struct Sender {
    pub tokens: Rc<TokenPool>,
    /// The sender's token cache over `tokens`, as each engine worker has
    /// one: every post claims and every completion returns through it. One
    /// cache per pool and a single thread, so it never hides a token from a
    /// claim; only which free slot a `wr_id` names differs from the pool's
    /// own order.
    cache: TokenCacheOver<Rc<TokenPool>, TokenRecord, SENDER_TOKEN_CACHE>,
    pub slices: SliceTable,
    pub eps: EndpointTable<()>,
    pub ep_local: EndpointLocal,
    pub routes: Vec<EpState>,
    pub blackholed: Vec<bool>,
    free_slices: Vec<u32>,
    slice_owner: Vec<Option<u32>>,
    pub queue: VecDeque<Pending>,
    transfers: Vec<Transfer>,
    free_transfers: Vec<u32>,
    stream_live: Vec<u32>,
    pub outstanding_wrs: u32,
    pub outstanding_bytes: u64,
    pub nic_up: Vec<bool>,
    pub nic_dead: Vec<bool>,
    /// Transfer latencies per stream, ns.
    pub latencies: Vec<Vec<u64>>,
    pub bytes_done: u64,
    pub transfers_failed: u64,
    /// Tasks by the worst state observed during their life / their final
    /// state, indexed by `AnomalyState::severity`.
    pub task_worst: [u64; 4],
    pub task_final: [u64; 4],
    pub rng: Rng,
}

struct Wr {
    live: bool,
    sender: u32,
    wr_id: WrId,
    port: u32,
    rx: u32,
    route: u32,
    bytes: u32,
    left_tx: u32,
    landed: u64,
    occupied: bool,
    dead: bool,
    cqe: bool,
    in_nic: bool,
    segs: u32,
    credited: bool,
}

struct Nic {
    queue: VecDeque<u32>,
    busy: bool,
    paused: bool,
    up: bool,
}

struct Port {
    rate: u64,
    queue: VecDeque<(u32, u32)>,
    queued: u64,
    reserved: u64,
    busy: bool,
    waiters: VecDeque<u32>,
    peak: u64,
    pauses: u64,
}

struct Receiver {
    cfg: ReceiverConfig,
    occ_slots: u32,
    occ_bytes: u64,
    peak_slots: u32,
    peak_bytes: u64,
    violations: u64,
    consumer: VecDeque<(u32, u64, bool)>,
    consumer_busy: u32,
    consumed_bytes: u64,
    consumed_in_window: u64,
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Completions by ibverbs WC status (index = status, 0..=21).
    pub wc: [u64; 22],
    /// Slices retried (new attempt).
    pub retries: u64,
    /// Completions that released only (stale attempt).
    pub stale: u64,
    /// Slices failed for good.
    pub slices_failed: u64,
    /// Posts refused by the token pool (backpressure).
    pub token_refusals: u64,
    /// Posts refused by an endpoint (retired / full).
    pub endpoint_refusals: u64,
    /// Endpoints retired.
    pub retired: u64,
    /// Endpoints reclaimed.
    pub reclaimed: u64,
    /// Events processed.
    pub events: u64,
}

/// What is left held at the end of a run (all must be zero).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leaks {
    /// Tokens still in use.
    pub tokens: u64,
    /// Slices still pending.
    pub slices: u64,
    /// Endpoint outstanding posts.
    pub endpoint_outstanding: u64,
    /// Stack-held resources (cc in-flight bytes, rail charges, credit).
    pub stack: u64,
    /// Receiver slots still occupied.
    pub receiver_slots: u64,
    /// Queued slices never posted.
    pub queued: u64,
    /// Receiver capacity not back in the allocators' free pools after the
    /// unused credit was returned, plus credit API errors (all must be 0).
    pub credit: u64,
}

impl Leaks {
    /// Whether nothing leaked.
    pub fn is_clean(&self) -> bool {
        *self == Leaks::default()
    }
}

/// `nothing held`, or the non-zero counts: `3 tokens, 1 queued slice`.
impl std::fmt::Display for Leaks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            (self.tokens, "tokens in use"),
            (self.slices, "slices pending"),
            (self.endpoint_outstanding, "endpoint posts outstanding"),
            (self.stack, "bytes held by cc/rail"),
            (self.receiver_slots, "receiver slots held"),
            (self.queued, "slices queued"),
            (self.credit, "credit units missing or errors"),
        ];
        let held: Vec<String> = parts
            .iter()
            .filter(|(n, _)| *n != 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        if held.is_empty() {
            f.write_str("nothing held")
        } else {
            f.write_str(&held.join(", "))
        }
    }
}

/// Per-receiver results.
#[derive(Clone, Debug, Default)]
pub struct RxStats {
    /// Peak occupied slots.
    pub peak_slots: u32,
    /// Peak occupied bytes.
    pub peak_bytes: u64,
    /// Arrivals that pushed occupancy over slot or byte capacity.
    pub violations: u64,
    /// Bytes consumed before `duration_ns`.
    pub consumed_in_window: u64,
    /// Bytes consumed in total.
    pub consumed: u64,
}

/// Everything a run measured.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// Per sender, per stream: transfer latencies, ns (submit → last slice).
    pub latencies: Vec<Vec<Vec<u64>>>,
    /// Per sender: bytes of completed transfers within the window.
    pub sender_bytes: Vec<u64>,
    /// Transfers failed.
    pub transfers_failed: u64,
    /// Transfers by the worst RFC 4162 task state a caller could have
    /// queried during their life (`[NORMAL, UNKNOWN, CONGESTED,
    /// LONG_UNAVAILABLE]`).
    pub task_worst: [u64; 4],
    /// Transfers by their task state at completion (same order).
    pub task_final: [u64; 4],
    /// Per receiver.
    pub rx: Vec<RxStats>,
    /// Per switch egress port: peak queued bytes.
    pub port_peak: Vec<u64>,
    /// Total NIC pauses (egress buffer full).
    pub pauses: u64,
    /// Counters.
    pub counters: Counters,
    /// End-of-run leak check.
    pub leaks: Leaks,
    /// Simulated end time (after drain), ns.
    pub end_ns: u64,
    /// Time series.
    pub series: Vec<Series>,
    /// Stack-specific observations (cc timeline, rail counters, ...).
    pub stack: crate::stack::StackReport,
    /// Credit-plane counters (zero without credit).
    pub credit: crate::credit::CreditCounters,
}

/// The simulator.
pub struct Sim {
    cfg: SimConfig,
    q: EventQueue<Ev>,
    pub(crate) senders: Vec<Sender>,
    nics: Vec<Nic>,
    ports: Vec<Port>,
    rxs: Vec<Receiver>,
    wrs: Vec<Wr>,
    free_wrs: Vec<u32>,
    pub(crate) stack: Stack,
    credit: Option<CreditPlane>,
    credit_out: Vec<CreditMsg>,
    counters: Counters,
    rng: Rng,
    stopping: bool,
    series: Vec<Series>,
    last_consumed: u64,
}

const MAX_SLICES_PER_SENDER: usize = 4096;
const TOKENS_PER_SENDER: usize = 1024;
/// Free tokens a sender's cache holds at most (the engine's per-worker 32).
const SENDER_TOKEN_CACHE: usize = 32;

impl Sim {
    /// Builds a simulator for `cfg`.
    pub fn new(cfg: SimConfig) -> Result<Sim, String> {
        let n = cfg.net.nics_per_host;
        if n == 0 || cfg.senders == 0 || cfg.receivers.is_empty() {
            return Err("need at least one NIC, sender and receiver".into());
        }
        if cfg.net.line_rate == 0 || cfg.net.seg_bytes == 0 {
            return Err("line rate and segment size must be positive".into());
        }
        for s in &cfg.streams {
            if s.rx as usize >= cfg.receivers.len() || s.slice_bytes == 0 || s.transfer_bytes == 0 {
                return Err(format!("invalid stream {s:?}"));
            }
            if u64::from(cfg.net.seg_bytes) * 1024 < u64::from(s.slice_bytes) {
                return Err("slice larger than 1024 segments".into());
            }
        }
        let mut rng = Rng::new(cfg.seed);
        let routes = cfg.receivers.len() * n;
        let mut senders = Vec::with_capacity(cfg.senders);
        for s in 0..cfg.senders {
            let eps = EndpointTable::new(EndpointConfig {
                capacity: (routes * 4) as u32,
                qps_per_endpoint: 1,
                max_wr_per_qp: 512,
                drain_timeout_ns: 50 * NS_PER_MS,
            })
            .map_err(|e| e.to_string())?;
            let ep_local = eps.register();
            let mut r = Vec::with_capacity(routes);
            for _ in 0..routes {
                r.push(EpState::Up(eps.open(()).map_err(|e| e.to_string())?));
            }
            let tokens = Rc::new(TokenPool::new(TOKENS_PER_SENDER).map_err(|e| e.to_string())?);
            senders.push(Sender {
                cache: TokenCacheOver::new(Rc::clone(&tokens)),
                tokens,
                slices: SliceTable::new(MAX_SLICES_PER_SENDER).map_err(|e| e.to_string())?,
                eps,
                ep_local,
                routes: r,
                blackholed: vec![false; routes],
                free_slices: (0..MAX_SLICES_PER_SENDER as u32).rev().collect(),
                slice_owner: vec![None; MAX_SLICES_PER_SENDER],
                queue: VecDeque::new(),
                transfers: vec![],
                free_transfers: vec![],
                stream_live: vec![0; cfg.streams.len()],
                outstanding_wrs: 0,
                outstanding_bytes: 0,
                nic_up: vec![true; n],
                nic_dead: vec![false; n],
                latencies: vec![vec![]; cfg.streams.len()],
                bytes_done: 0,
                transfers_failed: 0,
                task_worst: [0; 4],
                task_final: [0; 4],
                rng: rng.fork(s as u64),
            });
        }
        let nics = (0..cfg.senders * n)
            .map(|_| Nic {
                queue: VecDeque::new(),
                busy: false,
                paused: false,
                up: true,
            })
            .collect();
        let ports = cfg
            .receivers
            .iter()
            .flat_map(|r| {
                let rate = r
                    .rate_limit
                    .map_or(cfg.net.line_rate, |l| l.min(cfg.net.line_rate));
                (0..n).map(move |_| Port {
                    rate,
                    queue: VecDeque::new(),
                    queued: 0,
                    reserved: 0,
                    busy: false,
                    waiters: VecDeque::new(),
                    peak: 0,
                    pauses: 0,
                })
            })
            .collect();
        let rxs = cfg
            .receivers
            .iter()
            .map(|c| Receiver {
                cfg: c.clone(),
                occ_slots: 0,
                occ_bytes: 0,
                peak_slots: 0,
                peak_bytes: 0,
                violations: 0,
                consumer: VecDeque::new(),
                consumer_busy: 0,
                consumed_bytes: 0,
                consumed_in_window: 0,
            })
            .collect();
        let stack = Stack::new(&cfg)?;
        let credit = match cfg.stack.credit {
            None => None,
            Some(cc) => {
                let caps: Vec<RxCapacity> = cfg
                    .receivers
                    .iter()
                    .map(|r| RxCapacity {
                        bytes: r.byte_capacity,
                        slots: u64::from(r.slot_capacity),
                        request_slots: u64::from(r.request_slots),
                    })
                    .collect();
                let units: Vec<u64> = (0..cfg.receivers.len() as u32)
                    .map(|rx| {
                        cfg.streams
                            .iter()
                            .filter(|s| s.rx == rx)
                            .map(|s| u64::from(s.slice_bytes))
                            .max()
                            .unwrap_or(1)
                    })
                    .collect();
                Some(CreditPlane::new(
                    cfg.senders,
                    &caps,
                    &units,
                    cc.lease_batch,
                )?)
            }
        };
        let series = stack.series_names();
        Ok(Sim {
            q: EventQueue::new(),
            senders,
            nics,
            ports,
            rxs,
            wrs: vec![],
            free_wrs: vec![],
            stack,
            credit,
            credit_out: vec![],
            counters: Counters::default(),
            rng,
            stopping: false,
            series,
            last_consumed: 0,
            cfg,
        })
    }

    /// Current simulated time.
    pub fn now(&self) -> u64 {
        self.q.now()
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Runs the experiment to completion and returns what it measured.
    pub fn run(mut self) -> RunResult {
        for s in 0..self.cfg.senders as u32 {
            for (i, st) in self.cfg.streams.clone().iter().enumerate() {
                match st.arrivals {
                    Arrivals::Closed { outstanding } => {
                        for _ in 0..outstanding {
                            self.submit(s, i as u32);
                        }
                    }
                    Arrivals::Open { interval_ns } => {
                        let j = self.senders[s as usize].rng.below(interval_ns / 8 + 1);
                        self.q.at(
                            j,
                            Ev::Arrival {
                                sender: s,
                                stream: i as u32,
                            },
                        );
                    }
                }
            }
            self.pump(s);
        }
        for (i, f) in self.cfg.faults.iter().enumerate() {
            self.q.at(f.at_ns, Ev::Fault { idx: i as u32 });
        }
        self.q.at(0, Ev::Epoch);
        let limit = self.cfg.duration_ns.saturating_add(self.cfg.drain_limit_ns);
        while let Some(ev) = self.q.pop_until(limit) {
            if !self.stopping && self.q.now() >= self.cfg.duration_ns {
                self.stopping = true;
            }
            self.handle(ev);
        }
        self.finish()
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::NicTxDone { nic, wr, bytes } => self.on_nic_tx_done(nic, wr, bytes),
            Ev::SwitchIn { port, wr, bytes } => {
                let p = &mut self.ports[port as usize];
                p.queue.push_back((wr, bytes));
                p.queued += u64::from(bytes);
                p.peak = p.peak.max(p.queued);
                self.port_kick(port);
            }
            Ev::PortTxDone { port } => self.on_port_tx_done(port),
            Ev::RecvIn { wr, bytes } => self.on_recv(wr, bytes),
            Ev::Cqe { wr, status } => self.on_cqe(wr, status),
            Ev::ConsumerDone {
                rx,
                sender,
                bytes,
                credited,
            } => self.on_consumer_done(rx, sender, bytes, credited),
            Ev::Arrival { sender, stream } => {
                if self.stopping {
                    return;
                }
                self.submit(sender, stream);
                if let Arrivals::Open { interval_ns } = self.cfg.streams[stream as usize].arrivals {
                    let s = &mut self.senders[sender as usize];
                    let j = s.rng.below(interval_ns / 4 + 1);
                    let next = interval_ns - interval_ns / 8 + j;
                    self.q.after(next, Ev::Arrival { sender, stream });
                }
                self.pump(sender);
            }
            Ev::Credit(m) => self.on_credit_msg(m),
            Ev::Epoch => self.on_epoch(),
            Ev::Fault { idx } => self.on_fault(self.cfg.faults[idx as usize].kind),
            Ev::PortUp { sender, nic } => {
                let now = self.now();
                let n = self.cfg.net.nics_per_host;
                self.nics[sender as usize * n + nic as usize].up = true;
                self.senders[sender as usize].nic_up[nic as usize] = true;
                self.stack
                    .on_async_event(sender, nic, None, EV_PORT_ACTIVE, now);
                self.nic_kick((sender as usize * n + nic as usize) as u32);
                for rx in 0..self.cfg.receivers.len() {
                    let route = (rx * n + nic as usize) as u32;
                    self.q
                        .after(self.cfg.net.reconnect_ns, Ev::Reconnect { sender, route });
                }
            }
            Ev::Reconnect { sender, route } => self.reconnect(sender, route),
            Ev::RouteHeal { sender, route } => {
                self.senders[sender as usize].blackholed[route as usize] = false;
            }
        }
    }

    // ---- workload -------------------------------------------------------

    fn submit(&mut self, sender: u32, stream: u32) {
        let st = self.cfg.streams[stream as usize];
        let now = self.now();
        let s = &mut self.senders[sender as usize];
        let n_slices = st.transfer_bytes.div_ceil(u64::from(st.slice_bytes)) as u32;
        if s.free_slices.len() < n_slices as usize {
            // Out of slice slots: the workload outran the table; drop the
            // arrival (counted as failed, never silently).
            s.transfers_failed += 1;
            return;
        }
        let t = Transfer {
            live: true,
            stream,
            submit_ns: now,
            slices_left: n_slices,
            failed: false,
            bytes: st.transfer_bytes,
            evidence: TaskEvidence::new(),
            worst: AnomalyState::Normal,
        };
        let tid = match s.free_transfers.pop() {
            Some(i) => {
                s.transfers[i as usize] = t;
                i
            }
            None => {
                s.transfers.push(t);
                (s.transfers.len() - 1) as u32
            }
        };
        s.stream_live[stream as usize] += 1;
        let mut left = st.transfer_bytes;
        while left > 0 {
            let b = left.min(u64::from(st.slice_bytes)) as u32;
            left -= u64::from(b);
            let idx = s.free_slices.pop().expect("checked above");
            let slice = s.slices.open(idx).expect("free slice slot opens");
            s.slice_owner[idx as usize] = Some(tid);
            s.queue.push_back(Pending {
                slice,
                transfer: tid,
                bytes: b,
            });
        }
    }

    fn transfer_slice_done(&mut self, sender: u32, tid: u32, ok: bool) {
        let now = self.now();
        let window_end = self.cfg.duration_ns;
        let s = &mut self.senders[sender as usize];
        let t = &mut s.transfers[tid as usize];
        debug_assert!(t.live);
        t.failed |= !ok;
        t.slices_left -= 1;
        if t.slices_left > 0 {
            return;
        }
        t.live = false;
        s.task_worst[usize::from(t.worst.severity())] += 1;
        s.task_final[usize::from(t.evidence.state().severity())] += 1;
        let (stream, failed, bytes, submit) = (t.stream, t.failed, t.bytes, t.submit_ns);
        s.free_transfers.push(tid);
        s.stream_live[stream as usize] -= 1;
        if failed {
            s.transfers_failed += 1;
        } else {
            s.latencies[stream as usize].push(now - submit);
            if now <= window_end {
                s.bytes_done += bytes;
            }
        }
        if let Arrivals::Closed { .. } = self.cfg.streams[stream as usize].arrivals {
            if !self.stopping {
                self.submit(sender, stream);
            }
        }
    }

    // ---- the sender stack: post through the real core -------------------

    /// Posts as many queued slices of `sender` as its stack admits.
    fn pump(&mut self, sender: u32) {
        let now = self.now();
        let n = self.cfg.net.nics_per_host;
        loop {
            let si = sender as usize;
            let Some(head) = self.senders[si].queue.front() else {
                return;
            };
            let (slice, tid, bytes) = (head.slice, head.transfer, head.bytes);
            let st = self.cfg.streams[self.senders[si].transfers[tid as usize].stream as usize];
            let rx = st.rx as usize;
            // 1. local dispatch window.
            if self.senders[si].outstanding_wrs >= self.cfg.stack.window_ops {
                return;
            }
            // The NICs this slice may use: port up, allowed by the
            // topology rule, endpoint up (not being rebuilt).
            let usable: Vec<bool> = (0..n)
                .map(|k| {
                    let s = &self.senders[si];
                    s.nic_up[k]
                        && st.pin_nic.map_or(true, |p| p as usize == k)
                        && matches!(s.routes[rx * n + k], EpState::Up(_))
                })
                .collect();
            // 2-5. the composed hot path (core::completion): rail choice
            // among the usable NICs (a quarantined one is never chosen while
            // another is usable), endpoint, rail charge, CC, receiver
            // credit, token — the same composition the engine and the C
            // ABI use.
            let paths: Vec<Path> = (0..n)
                .filter(|&k| usable[k])
                .filter_map(|k| match self.senders[si].routes[rx * n + k] {
                    EpState::Up(ep) => Some(Path {
                        device: k as u16,
                        qp: 0,
                        route: (rx * n + k) as u32,
                        endpoint: ep,
                    }),
                    _ => None,
                })
                .collect();
            if paths.is_empty() {
                self.record_evidence(sender, slice, Reason::NoUsablePath);
                return;
            }
            let credit = self.credit.as_ref().map(|cp| cp.ledger(sender));
            let demand = credit.and_then(|l| {
                Some(CreditDemand {
                    entry: l.entry(rx as u32, 0).ok()?,
                    charge: Charge::direct_write(bytes),
                })
            });
            let s = &mut self.senders[si];
            let (cc, rail) = self.stack.layers(sender);
            let owner =
                HotPath::new(&s.tokens, &s.slices, &s.eps).with_layers(Layers { credit, rail, cc });
            // A single candidate (the topology rule) is charged without a
            // rail decision.
            let choice = match paths.as_slice() {
                [one] => PathChoice::Fixed(*one),
                many => PathChoice::Pick(many),
            };
            let req = PostRequest {
                slice,
                bytes,
                peer: Some(rx as u32),
                credit: demand,
                path: choice,
                now,
            };
            let posted = owner.post_via(&mut s.cache, req);
            let refusal_obs = match &posted {
                Err(r) => owner.refusal_observation(r, now).map(|o| o.reason),
                Ok(_) => None,
            };
            let p = match posted {
                Ok(p) => p,
                Err(r) => {
                    self.stack.on_refusal(&r);
                    if let Some(reason) = refusal_obs {
                        self.record_evidence(sender, slice, reason);
                    }
                    match r {
                        Refusal::Token(_) => self.counters.token_refusals += 1,
                        Refusal::Endpoint { .. } => self.counters.endpoint_refusals += 1,
                        Refusal::Backpressure(_) => {
                            if let Some(m) = self
                                .credit
                                .as_mut()
                                .and_then(|cp| cp.stalled(sender, rx as u32))
                            {
                                self.send_credit(m);
                            }
                        }
                        Refusal::Invalid(_) => {
                            if let Some(cp) = self.credit.as_mut() {
                                cp.count_error();
                            }
                        }
                        _ => {}
                    }
                    return;
                }
            };
            self.stack.on_posted(sender, &p);
            let k = usize::from(p.path.device);
            let route = p.path.route;
            let wr_id = p.wr_id;
            let credited = p.holds & TokenRecord::HOLDS_CREDIT != 0;
            let s = &mut self.senders[si];
            s.queue.pop_front();
            s.outstanding_wrs += 1;
            s.outstanding_bytes += u64::from(bytes);
            let nic = (si * n + k) as u32;
            let w = Wr {
                live: true,
                sender,
                wr_id,
                port: (rx * n + k) as u32,
                rx: rx as u32,
                route,
                bytes,
                left_tx: bytes,
                landed: 0,
                occupied: false,
                dead: false,
                cqe: false,
                in_nic: true,
                segs: 0,
                credited,
            };
            let wi = match self.free_wrs.pop() {
                Some(i) => {
                    self.wrs[i as usize] = w;
                    i
                }
                None => {
                    self.wrs.push(w);
                    (self.wrs.len() - 1) as u32
                }
            };
            self.nics[nic as usize].queue.push_back(wi);
            self.nic_kick(nic);
        }
    }

    fn on_cqe(&mut self, wi: u32, status: u16) {
        let now = self.now();
        let w = &mut self.wrs[wi as usize];
        debug_assert!(w.live);
        w.live = false;
        let (sender, wr_id, rx, occupied, credited, bytes) =
            (w.sender, w.wr_id, w.rx, w.occupied, w.credited, w.bytes);
        w.occupied = false;
        self.maybe_free_wr(wi);
        self.counters.wc[usize::from(status).min(21)] += 1;
        if status != WC_SUCCESS {
            // The data never fully landed: the receiver frees what it held
            // at once (model simplification, see README).
            if occupied {
                self.release_rx_slot(rx, u64::from(bytes));
            }
        }
        let si = sender as usize;
        let s = &mut self.senders[si];
        let credit = self.credit.as_ref().map(|cp| cp.ledger(sender));
        let (cc, rail) = self.stack.layers(sender);
        let owner =
            HotPath::new(&s.tokens, &s.slices, &s.eps).with_layers(Layers { credit, rail, cc });
        let done = owner
            .complete_via(&mut s.cache, wr_id, u32::from(status), 0, now)
            .expect("every CQE names a live token exactly once");
        let obs = owner.completion_observation(&done, now).map(|o| o.reason);
        let rec = done.record;
        if credited {
            if let Some(cp) = self.credit.as_mut() {
                cp.released(sender, rx, done.released.credit());
                if status != WC_SUCCESS {
                    cp.never_consumed(sender, rx, &rec);
                }
            }
            if status != WC_SUCCESS {
                self.flush_credit(rx);
            }
        }
        self.stack.on_completion(sender, &done, now);
        match obs {
            Some(reason) => self.record_evidence(sender, rec.slice, reason),
            None => {
                if let Some(tid) = self.find_transfer_of(sender, rec.slice.index) {
                    self.senders[si].transfers[tid as usize]
                        .evidence
                        .resolve(rec.slice, now);
                }
            }
        }
        let s = &mut self.senders[si];
        s.outstanding_wrs -= 1;
        s.outstanding_bytes -= u64::from(bytes);
        match done.slice {
            SliceEffect::Settled(state) => {
                let tid = self.find_transfer_of(sender, rec.slice.index);
                self.senders[si].slice_owner[rec.slice.index as usize] = None;
                self.senders[si].free_slices.push(rec.slice.index);
                if state != SliceState::Succeeded {
                    self.counters.slices_failed += 1;
                }
                if let Some(tid) = tid {
                    self.transfer_slice_done(sender, tid, state == SliceState::Succeeded);
                }
            }
            SliceEffect::Retry(next) => {
                self.counters.retries += 1;
                let tid = self
                    .find_transfer_of(sender, rec.slice.index)
                    .expect("a retried slice belongs to a live transfer");
                self.senders[si].transfers[tid as usize]
                    .evidence
                    .begin_attempt(next);
                self.senders[si].queue.push_front(Pending {
                    slice: next,
                    transfer: tid,
                    bytes,
                });
            }
            SliceEffect::StaleReleaseOnly => self.counters.stale += 1,
        }
        self.pump(sender);
    }

    /// Records evidence for the task owning `slice` (the completion path's
    /// `evidence.record`), tracking the worst state a caller could see.
    fn record_evidence(
        &mut self,
        sender: u32,
        slice: SliceRef,
        reason: railyard_core::evidence::Reason,
    ) {
        let now = self.now();
        if let Some(tid) = self.find_transfer_of(sender, slice.index) {
            let t = &mut self.senders[sender as usize].transfers[tid as usize];
            t.evidence.record(slice, Observation::new(reason, now));
            let st = t.evidence.state();
            if st.severity() > t.worst.severity() {
                t.worst = st;
            }
        }
    }

    /// A WR slot is reused only once nothing refers to it: completed, no
    /// segment on the wire, not in a NIC queue.
    fn maybe_free_wr(&mut self, wi: u32) {
        let w = &self.wrs[wi as usize];
        if !w.live && w.segs == 0 && !w.in_nic {
            self.free_wrs.push(wi);
        }
    }

    fn find_transfer_of(&self, sender: u32, slice_index: u32) -> Option<u32> {
        self.senders[sender as usize]
            .slice_owner
            .get(slice_index as usize)
            .copied()
            .flatten()
    }

    // ---- network -------------------------------------------------------

    fn ser_ns(bytes: u32, rate: u64) -> u64 {
        (u128::from(bytes) * u128::from(NS_PER_SEC)).div_ceil(u128::from(rate)) as u64
    }

    fn jitter(&mut self) -> u64 {
        self.rng.below(self.cfg.net.jitter_ns + 1)
    }

    fn nic_kick(&mut self, nic: u32) {
        let seg = self.cfg.net.seg_bytes;
        let nc = &mut self.nics[nic as usize];
        if nc.busy || nc.paused || !nc.up {
            return;
        }
        let wi = loop {
            let Some(&wi) = nc.queue.front() else {
                return;
            };
            if self.wrs[wi as usize].dead || !self.wrs[wi as usize].live {
                nc.queue.pop_front();
                self.wrs[wi as usize].in_nic = false;
                if !self.wrs[wi as usize].live && self.wrs[wi as usize].segs == 0 {
                    self.free_wrs.push(wi);
                }
                continue;
            }
            break wi;
        };
        let w = &mut self.wrs[wi as usize];
        let b = w.left_tx.min(seg);
        let port = &mut self.ports[w.port as usize];
        if port.reserved + u64::from(b) > self.cfg.net.switch_buffer {
            nc.paused = true;
            port.pauses += 1;
            port.waiters.push_back(nic);
            return;
        }
        port.reserved += u64::from(b);
        w.left_tx -= b;
        w.segs += 1;
        if w.left_tx == 0 {
            nc.queue.pop_front();
            w.in_nic = false;
        }
        nc.busy = true;
        let d = Self::ser_ns(b, self.cfg.net.line_rate);
        self.q.after(
            d,
            Ev::NicTxDone {
                nic,
                wr: wi,
                bytes: b,
            },
        );
    }

    fn on_nic_tx_done(&mut self, nic: u32, wi: u32, bytes: u32) {
        self.nics[nic as usize].busy = false;
        let w = &self.wrs[wi as usize];
        let (sender, route, port) = (w.sender, w.route, w.port);
        let blackholed = self.senders[sender as usize].blackholed[route as usize];
        if !w.live || w.dead || blackholed {
            // Dropped: give the egress reservation back.
            self.ports[port as usize].reserved -= u64::from(bytes);
            self.wrs[wi as usize].segs -= 1;
            self.wake_port_waiters(port);
            let w = &mut self.wrs[wi as usize];
            if blackholed && w.live && !w.cqe {
                w.dead = true;
                w.cqe = true;
                self.q.after(
                    self.cfg.net.retry_timeout_ns,
                    Ev::Cqe {
                        wr: wi,
                        status: WC_RETRY_EXC_ERR,
                    },
                );
                // The QP goes to ERR when that completion is generated;
                // its other WRs flush then.
                let at = self.now() + self.cfg.net.retry_timeout_ns;
                self.flush_route(sender, route, at, Some(wi));
            }
        } else {
            let d = self.cfg.net.prop_ns + self.jitter();
            self.q.after(
                d,
                Ev::SwitchIn {
                    port,
                    wr: wi,
                    bytes,
                },
            );
        }
        self.maybe_free_wr(wi);
        self.nic_kick(nic);
    }

    fn port_kick(&mut self, port: u32) {
        let p = &mut self.ports[port as usize];
        if p.busy {
            return;
        }
        let Some(&(_, b)) = p.queue.front() else {
            return;
        };
        p.busy = true;
        let d = Self::ser_ns(b, p.rate);
        self.q.after(d, Ev::PortTxDone { port });
    }

    fn on_port_tx_done(&mut self, port: u32) {
        let p = &mut self.ports[port as usize];
        let (wi, b) = p.queue.pop_front().expect("a port transmits its head");
        p.busy = false;
        p.queued -= u64::from(b);
        p.reserved -= u64::from(b);
        let d = self.cfg.net.prop_ns + self.jitter();
        self.q.after(d, Ev::RecvIn { wr: wi, bytes: b });
        self.wake_port_waiters(port);
        self.port_kick(port);
    }

    fn wake_port_waiters(&mut self, port: u32) {
        while let Some(nic) = self.ports[port as usize].waiters.pop_front() {
            self.nics[nic as usize].paused = false;
            self.nic_kick(nic);
            if self.nics[nic as usize].paused {
                break; // it re-queued itself at the back: buffer full again
            }
        }
    }

    // ---- receivers -------------------------------------------------------

    fn on_recv(&mut self, wi: u32, bytes: u32) {
        let w = &mut self.wrs[wi as usize];
        w.segs -= 1;
        if !w.live || w.dead {
            self.maybe_free_wr(wi);
            return;
        }
        let rx = w.rx;
        if !w.occupied {
            w.occupied = true;
            let wb = u64::from(w.bytes);
            let r = &mut self.rxs[rx as usize];
            r.occ_slots += 1;
            r.occ_bytes += wb;
            r.peak_slots = r.peak_slots.max(r.occ_slots);
            r.peak_bytes = r.peak_bytes.max(r.occ_bytes);
            if r.occ_slots > r.cfg.slot_capacity || r.occ_bytes > r.cfg.byte_capacity {
                r.violations += 1;
            }
        }
        let w = &mut self.wrs[wi as usize];
        w.landed += u64::from(bytes);
        if w.landed == u64::from(w.bytes) {
            // Last byte landed: the ACK travels back, the consumer takes it.
            let (sender, credited, wb) = (w.sender, w.credited, u64::from(w.bytes));
            w.occupied = false; // ownership moves to the consumer queue
            w.cqe = true;
            let d = 2 * self.cfg.net.prop_ns + self.jitter();
            self.q.after(
                d,
                Ev::Cqe {
                    wr: wi,
                    status: WC_SUCCESS,
                },
            );
            let r = &mut self.rxs[rx as usize];
            r.consumer.push_back((sender, wb, credited));
            self.consumer_kick(rx);
        }
    }

    fn consumer_kick(&mut self, rx: u32) {
        let now = self.now();
        let r = &mut self.rxs[rx as usize];
        while r.consumer_busy < r.cfg.consumer_workers {
            let Some((sender, b, credited)) = r.consumer.pop_front() else {
                return;
            };
            r.consumer_busy += 1;
            let mut d = r.cfg.consumer_overhead_ns
                + (u128::from(b) * u128::from(NS_PER_SEC)).div_ceil(u128::from(r.cfg.consumer_rate))
                    as u64;
            if let Some(sd) = r.cfg.slowdown {
                if now >= sd.start_ns && now < sd.end_ns {
                    d += sd.extra_ns;
                }
            }
            self.q.after(
                d,
                Ev::ConsumerDone {
                    rx,
                    sender,
                    bytes: b,
                    credited,
                },
            );
        }
    }

    fn on_consumer_done(&mut self, rx: u32, sender: u32, b: u64, credited: bool) {
        let now = self.now();
        let r = &mut self.rxs[rx as usize];
        r.consumer_busy -= 1;
        r.consumed_bytes += b;
        if now <= self.cfg.duration_ns {
            r.consumed_in_window += b;
        }
        self.release_rx_slot(rx, b);
        if credited {
            if let Some(cp) = self.credit.as_mut() {
                cp.consumer_done(sender, rx, b);
            }
            self.flush_credit(rx);
        }
        self.consumer_kick(rx);
    }

    fn release_rx_slot(&mut self, rx: u32, bytes: u64) {
        let r = &mut self.rxs[rx as usize];
        r.occ_slots -= 1;
        r.occ_bytes -= bytes;
    }

    /// Sends a credit control message (2 hops, lossless).
    fn send_credit(&mut self, m: CreditMsg) {
        self.q.after(2 * self.cfg.net.prop_ns, Ev::Credit(m));
    }

    /// The receiver grants what it can to waiting senders.
    fn flush_credit(&mut self, rx: u32) {
        let Some(cp) = self.credit.as_mut() else {
            return;
        };
        let mut out = std::mem::take(&mut self.credit_out);
        cp.try_grant(rx, &mut out);
        for m in out.drain(..) {
            self.send_credit(m);
        }
        self.credit_out = out;
    }

    fn on_credit_msg(&mut self, m: CreditMsg) {
        let now = self.now();
        let Some(cp) = self.credit.as_mut() else {
            return;
        };
        match m {
            CreditMsg::Demand { sender, rx } => {
                cp.on_demand(sender, rx);
                self.flush_credit(rx);
            }
            CreditMsg::Grant { sender, rx, update } => {
                cp.on_grant(sender, rx, update, now);
                self.pump(sender);
            }
            CreditMsg::Usage { sender, rx, usage } => {
                cp.on_usage(sender, rx, usage);
                self.flush_credit(rx);
            }
        }
    }

    // ---- faults ------------------------------------------------------------

    fn on_fault(&mut self, kind: FaultKind) {
        let now = self.now();
        let n = self.cfg.net.nics_per_host;
        match kind {
            FaultKind::RouteTimeout {
                sender,
                nic,
                rx,
                dur_ns,
            } => {
                let route = (rx as usize * n + nic as usize) as u32;
                self.senders[sender as usize].blackholed[route as usize] = true;
                self.q.after(dur_ns, Ev::RouteHeal { sender, route });
            }
            FaultKind::QpError { sender, nic, rx } => {
                let route = (rx as usize * n + nic as usize) as u32;
                self.stack
                    .on_async_event(sender, nic, Some(route), EV_QP_FATAL, now);
                self.flush_route(sender, route, now, None);
            }
            FaultKind::PortDown {
                sender,
                nic,
                dur_ns,
            } => {
                self.nics[sender as usize * n + nic as usize].up = false;
                self.senders[sender as usize].nic_up[nic as usize] = false;
                self.stack
                    .on_async_event(sender, nic, None, EV_PORT_ERR, now);
                // Posted WRs on the port never get an ACK: the first of each
                // QP times out, the rest flush behind it.
                let at = now + self.cfg.net.retry_timeout_ns;
                for rx in 0..self.cfg.receivers.len() {
                    let route = (rx * n + nic as usize) as u32;
                    let first = self.oldest_live_on(sender, route);
                    if let Some(f) = first {
                        self.wrs[f as usize].dead = true;
                        self.wrs[f as usize].cqe = true;
                        self.q.at(
                            at,
                            Ev::Cqe {
                                wr: f,
                                status: WC_RETRY_EXC_ERR,
                            },
                        );
                    }
                    self.flush_route(sender, route, at, first);
                }
                self.q.after(dur_ns, Ev::PortUp { sender, nic });
            }
            FaultKind::DeviceFatal { sender, nic } => {
                self.nics[sender as usize * n + nic as usize].up = false;
                let s = &mut self.senders[sender as usize];
                s.nic_up[nic as usize] = false;
                s.nic_dead[nic as usize] = true;
                self.stack
                    .on_async_event(sender, nic, None, EV_DEVICE_FATAL, now);
                for rx in 0..self.cfg.receivers.len() {
                    let route = (rx * n + nic as usize) as u32;
                    self.flush_route(sender, route, now, None);
                }
            }
        }
    }

    fn oldest_live_on(&self, sender: u32, route: u32) -> Option<u32> {
        // WR slab order is not post order; the NIC queue is. Any live WR of
        // the route will do as "the one that timed out": pick the smallest
        // index for determinism.
        self.wrs
            .iter()
            .enumerate()
            .find(|(_, w)| w.live && !w.cqe && w.sender == sender && w.route == route)
            .map(|(i, _)| i as u32)
    }

    /// The route's QP went to ERR at `at`: every other live WR on it flushes,
    /// and the endpoint is retired (a new generation reconnects later unless
    /// the NIC is dead or down).
    fn flush_route(&mut self, sender: u32, route: u32, at: u64, except: Option<u32>) {
        for i in 0..self.wrs.len() {
            let w = &mut self.wrs[i];
            if w.live
                && !w.cqe
                && w.sender == sender
                && w.route == route
                && Some(i as u32) != except
            {
                w.dead = true;
                w.cqe = true;
                self.q.at(
                    at,
                    Ev::Cqe {
                        wr: i as u32,
                        status: WC_WR_FLUSH_ERR,
                    },
                );
            }
        }
        let now = self.now();
        let s = &mut self.senders[sender as usize];
        if let EpState::Up(h) = s.routes[route as usize] {
            if s.eps.retire(h, RetireReason::CqError, now).is_ok() {
                self.counters.retired += 1;
            }
            s.routes[route as usize] = EpState::Down;
            let nic = route as usize % self.cfg.net.nics_per_host;
            if s.nic_up[nic] {
                let d = (at - now) + self.cfg.net.reconnect_ns;
                self.q.after(d, Ev::Reconnect { sender, route });
            }
        }
    }

    fn reconnect(&mut self, sender: u32, route: u32) {
        let now = self.now();
        let n = self.cfg.net.nics_per_host;
        let s = &mut self.senders[sender as usize];
        let nic = route as usize % n;
        if !s.nic_up[nic] || s.nic_dead[nic] || s.routes[route as usize] != EpState::Down {
            return;
        }
        if let Ok(h) = s.eps.open(()) {
            s.routes[route as usize] = EpState::Up(h);
            self.stack.on_reconnect(sender, route, now);
            self.pump(sender);
        } else {
            // Table full of draining endpoints: try again later.
            self.q
                .after(self.cfg.net.reconnect_ns, Ev::Reconnect { sender, route });
        }
    }

    // ---- control epoch, sampling, end ----------------------------------

    fn busy(&self) -> bool {
        self.wrs.iter().any(|w| w.live)
            || self.senders.iter().any(|s| !s.queue.is_empty())
            || self
                .rxs
                .iter()
                .any(|r| !r.consumer.is_empty() || r.consumer_busy > 0)
    }

    fn on_epoch(&mut self) {
        let now = self.now();
        for s in &self.senders {
            let guard = s.ep_local.pin();
            let _ = s.eps.poll_reclaim(now, &guard, |ev| {
                if let railyard_core::endpoint::ReclaimEvent::Reclaimed { .. } = ev {
                    self.counters.reclaimed += 1;
                }
            });
        }
        self.stack.on_epoch(now);
        if let Some(cp) = self.credit.as_mut() {
            let mut out = std::mem::take(&mut self.credit_out);
            cp.on_epoch(&mut out);
            for m in out.drain(..) {
                self.send_credit(m);
            }
            self.credit_out = out;
        }
        // Senders blocked only by the controller's window get a chance.
        for s in 0..self.senders.len() as u32 {
            self.pump(s);
        }
        self.sample(now);
        if !self.stopping || self.busy() {
            self.q.after(self.cfg.epoch_ns, Ev::Epoch);
        }
    }

    fn sample(&mut self, now: u64) {
        let inflight: u64 = self.senders.iter().map(|s| s.outstanding_bytes).sum();
        let occ = self.rxs[0].occ_slots;
        let queue: u64 = self.ports.iter().map(|p| p.queued).max().unwrap_or(0);
        let consumed: u64 = self.rxs.iter().map(|r| r.consumed_bytes).sum();
        let thr = (consumed - self.last_consumed) as f64 / self.cfg.epoch_ns as f64;
        self.last_consumed = consumed;
        let mut vals = vec![
            inflight as f64 / (1u64 << 20) as f64,
            f64::from(occ),
            queue as f64 / (1u64 << 20) as f64,
            thr,
        ];
        vals.extend(self.stack.sample(now));
        for (s, v) in self.series.iter_mut().zip(vals) {
            s.points.push((now, v));
        }
    }

    fn finish(mut self) -> RunResult {
        let now = self.now();
        // Explicit return of unused credit; the allocators must be whole.
        let credit = self.credit.as_mut().map(|cp| {
            let (missing, conserved) = cp.settle();
            (missing, conserved, cp.counters())
        });
        self.counters.events = self.q.processed();
        let mut leaks = Leaks::default();
        for s in &mut self.senders {
            // Every token is live, or free on the pool's lists once the
            // cache is flushed: anything else is lost.
            s.cache.flush();
            let live = s.tokens.in_use();
            let lost = (s.tokens.capacity() - live).saturating_sub(s.tokens.free_in_pool());
            leaks.tokens += (live + lost) as u64;
            leaks.slices += s.slices.pending() as u64;
            leaks.endpoint_outstanding += s.eps.outstanding_total();
            leaks.queued += s.queue.len() as u64;
        }
        leaks.stack = self.stack.held();
        if let Some((missing, conserved, c)) = credit {
            leaks.credit = missing + u64::from(!conserved) + c.errors + c.refused_after_commit;
        }
        for r in &self.rxs {
            leaks.receiver_slots +=
                u64::from(r.occ_slots) + r.consumer.len() as u64 + u64::from(r.consumer_busy);
        }
        let stack = self.stack.report();
        RunResult {
            latencies: self.senders.iter().map(|s| s.latencies.clone()).collect(),
            sender_bytes: self.senders.iter().map(|s| s.bytes_done).collect(),
            transfers_failed: self.senders.iter().map(|s| s.transfers_failed).sum(),
            task_worst: sum4(self.senders.iter().map(|s| s.task_worst)),
            task_final: sum4(self.senders.iter().map(|s| s.task_final)),
            rx: self
                .rxs
                .iter()
                .map(|r| RxStats {
                    peak_slots: r.peak_slots,
                    peak_bytes: r.peak_bytes,
                    violations: r.violations,
                    consumed_in_window: r.consumed_in_window,
                    consumed: r.consumed_bytes,
                })
                .collect(),
            port_peak: self.ports.iter().map(|p| p.peak).collect(),
            pauses: self.ports.iter().map(|p| p.pauses).sum(),
            counters: self.counters,
            leaks,
            end_ns: now,
            series: self.series,
            stack,
            credit: credit.map(|c| c.2).unwrap_or_default(),
        }
    }
}

fn sum4(it: impl Iterator<Item = [u64; 4]>) -> [u64; 4] {
    it.fold([0; 4], |mut a, b| {
        for i in 0..4 {
            a[i] += b[i];
        }
        a
    })
}
