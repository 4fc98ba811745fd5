//! The mixed-fault soak (issue #19, item 6): real verbs across two
//! Soft-RoCE guests, traffic from both worker models with the congestion
//! controller enforcing, a schedule of injected faults, and read-back
//! verification of every transfer the whole time.
//!
//! ```text
//! soak target    [--port 18620]                         # node 1
//! soak initiator <peer-ip> [--secs N] [--fault-every S] # node 0
//! ```
//!
//! The initiator runs two engines on its device, one per worker model
//! (RFC 3136: `Shared` and `DedicatedPoller`), both with CC in enforce
//! mode, each with one segment to the target's engine and `--lanes`
//! threads. A lane loops: WRITE a fresh pattern of random length to its own
//! remote slot, READ it back into a zeroed buffer, compare. Every
//! `--fault-every` seconds the scheduler injects the next fault of the
//! rotation, on the engines in turn (those that are per engine):
//!
//! | fault | how (public API / OS only) | what the NIC then does |
//! |---|---|---|
//! | `wrong_rkey` | [`Engine::fault_corrupt_rkey`] for 1 s | `REM_ACCESS_ERR`, refresh by reconnect, retry |
//! | `qp_to_err` | [`Engine::fault_qps_to_error`] | a `WR_FLUSH_ERR` burst, rebuilt endpoint, retry |
//! | `poller_pause` | [`Engine::fault_pause_polling`] for 1.5 s | no CQ polled; completions late |
//! | `port_down_up` | `ip link set <rxe0's netdev> down`, 2 s, `up` (both engines) | `PORT_ERR` / `PORT_ACTIVE`, every endpoint of the device retired |
//! | `peer_restart` | the target drops its engine and starts a new one on the same port (1 s gap) | `RETRY_EXC_ERR`, route SUSPECT / QUARANTINED, reconnect to fresh memory |
//!
//! After each fault it waits (bounded) until every engine has verified a
//! transfer again. A lane whose transfer fails records the failure class
//! (the task's terminal state and the anomaly evidence that decided it, or
//! the submit error) and, when its segment's endpoint is gone, reconnects
//! it. A read-back that differs is a *mismatch* unless the peer restarted
//! between the WRITE and the READ (fresh memory: counted as *interrupted*).
//!
//! At the end every engine must go idle with every counter at zero
//! (tokens, endpoint outstanding, QP depth, CQ outstanding, slices, CC
//! in-flight bytes and permits, rail charges, memory pins, endpoints after
//! closing the segments), no illegal path transition, and no mismatch;
//! otherwise it exits 1. `ci/soak.sh` runs it with `scripts/rxe-vm --two`.

use clap::{Parser, Subcommand};
use railyard_verbs::engine::{
    BatchId, Engine, EngineConfig, EngineError, EngineStats, Op, SegmentId, TaskState, Transfer,
    WorkerModel,
};
use railyard_verbs::MemoryRegion;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "../tests/support/netdev.rs"]
mod netdev;
use netdev::netdev_of;

// The fault configuration, the control channel and `ip link`, shared with
// `fault_link_down`.
#[path = "support/two_guests.rs"]
mod two_guests;
use two_guests::ip_link;

/// Bytes of one lane's slot (its transfers are 1..=SLOT bytes).
const SLOT: usize = 256 * 1024;
/// How long one transfer may take before the lane calls it hung.
const HUNG: Duration = Duration::from_secs(90);
/// How long every engine may take to verify a transfer again after a fault.
const RECOVER: Duration = Duration::from_secs(120);

type Res<T> = Result<T, String>;

#[derive(Parser)]
#[command(about = "Mixed-fault soak on real verbs (two Soft-RoCE guests)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Node 1: the engine written to; restarts it on command.
    Target {
        /// Engine port (control: port + 1).
        #[arg(long, default_value_t = 18620)]
        port: u16,
        /// Give up after this long without a control command.
        #[arg(long, default_value_t = 900)]
        idle_secs: u64,
    },
    /// Node 0: traffic, faults, verification, the report.
    Initiator {
        /// The target's IP address.
        peer: String,
        /// The target's engine port (control: port + 1).
        #[arg(long, default_value_t = 18620)]
        port: u16,
        /// Seconds of traffic (default: `SOAK_SECS`, else 600).
        #[arg(long)]
        secs: Option<u64>,
        /// Seconds between fault injections (default: `SOAK_FAULT_EVERY`, else 10).
        #[arg(long)]
        fault_every: Option<u64>,
        /// Lanes (threads with their own slot) per engine.
        #[arg(long, default_value_t = 2)]
        lanes: usize,
    },
}

fn main() {
    let r = match Cli::parse().cmd {
        Cmd::Target { port, idle_secs } => target(port, Duration::from_secs(idle_secs)),
        Cmd::Initiator {
            peer,
            port,
            secs,
            fault_every,
            lanes,
        } => {
            let secs = secs.or_else(|| env_u64("SOAK_SECS")).unwrap_or(600);
            let every = fault_every
                .or_else(|| env_u64("SOAK_FAULT_EVERY"))
                .unwrap_or(10);
            initiator(&peer, port, secs, every.max(1), lanes.max(1))
        }
    };
    if let Err(e) = r {
        eprintln!("soak: FAIL: {e}");
        std::process::exit(1);
    }
}

fn env_u64(var: &str) -> Option<u64> {
    std::env::var(var).ok().and_then(|v| v.parse().ok())
}

fn config() -> Res<EngineConfig> {
    let mut c = two_guests::fault_config()?;
    // Longer than any injected stall: a TIMEOUT here would be a real one.
    c.transfer_timeout = Duration::from_secs(30);
    // The guest's "NIC" needs the CPU a spinning poller would take.
    c.inflight_nap = Some(Duration::from_micros(200));
    Ok(c)
}

fn err_name(e: &EngineError) -> String {
    let d = format!("{e:?}");
    d.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("?")
        .to_owned()
}

// ---------------------------------------------------------------------------
// Node 1.

fn start_target(cfg: &EngineConfig) -> Res<(Engine, Arc<MemoryRegion>)> {
    let t0 = Instant::now();
    loop {
        match Engine::new(cfg.clone()) {
            Ok(e) => {
                let mem = e.alloc_memory(64 * SLOT).map_err(|e| e.to_string())?;
                return Ok((e, mem));
            }
            // The old listener may linger for a moment.
            Err(EngineError::Io(e)) if t0.elapsed() < Duration::from_secs(20) => {
                eprintln!("soak target: {e}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Control commands: `ping`, `restart <ms>` (drop the engine, wait, start a
/// new one on the same port), `exit`.
fn target(port: u16, idle: Duration) -> Res<()> {
    let mut cfg = config()?;
    cfg.listen = SocketAddr::from(([0, 0, 0, 0], port));
    let mut eng = Some(start_target(&cfg)?);
    let ctl = TcpListener::bind(("0.0.0.0", port + 1)).map_err(|e| e.to_string())?;
    eprintln!("soak target: ready on :{port}, control :{}", port + 1);
    let mut restarts = 0u64;
    let mut accepted = 0u64;
    two_guests::serve(&ctl, idle, |cmd, mut s| {
        // `restart` answers once the new engine listens.
        if let Some(ms) = cmd.strip_prefix("restart ") {
            let ms: u64 = ms.parse().map_err(|_| format!("bad command {cmd:?}"))?;
            if let Some((e, _)) = eng.take() {
                accepted += e.stats().handshakes.accepted;
            }
            std::thread::sleep(Duration::from_millis(ms));
            eng = Some(start_target(&cfg)?);
            restarts += 1;
            eprintln!("soak target: restarted ({restarts})");
        }
        let _ = s.write_all(b"ok\n");
        Ok(cmd != "exit")
    })?;
    let (e, _mem) = eng.ok_or("no engine")?;
    let st = e.stats();
    let bad = leaks(&e, "target")?;
    eprintln!(
        "soak target: restarts {restarts}, segments accepted {}",
        accepted + st.handshakes.accepted
    );
    if !bad.is_empty() {
        return Err(format!("target counters: {}", bad.join(", ")));
    }
    eprintln!("soak target: OK");
    Ok(())
}

// ---------------------------------------------------------------------------
// Node 0.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    WrongRkey,
    QpToErr,
    PollerPause,
    PortDownUp,
    PeerRestart,
}

const FAULTS: [Fault; 5] = [
    Fault::WrongRkey,
    Fault::QpToErr,
    Fault::PollerPause,
    Fault::PortDownUp,
    Fault::PeerRestart,
];

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::WrongRkey => "wrong_rkey",
            Fault::QpToErr => "qp_to_err",
            Fault::PollerPause => "poller_pause",
            Fault::PortDownUp => "port_down_up",
            Fault::PeerRestart => "peer_restart",
        }
    }
    /// Whether it hits one engine (else the device or the peer: all).
    fn per_engine(self) -> bool {
        matches!(self, Fault::WrongRkey | Fault::QpToErr | Fault::PollerPause)
    }
}

/// One initiating engine and what its lanes counted.
struct Node {
    model: &'static str,
    e: Engine,
    mem: Arc<MemoryRegion>,
    seg: SegmentId,
    /// One lane reconnects at a time.
    heal: Mutex<()>,
    verified: AtomicU64,
    /// The highest fault generation a verified transfer started in.
    verified_gen: AtomicU64,
    bytes: AtomicU64,
    interrupted: AtomicU64,
    mismatches: AtomicU64,
    reconnects: AtomicU64,
    reconnect_errors: AtomicU64,
    /// `"<fault active>/<class>"` → count.
    failures: Mutex<BTreeMap<String, u64>>,
    s0: EngineStats,
}

/// State shared by the lanes and the scheduler.
struct Soak {
    stop: AtomicBool,
    /// Bumped before every peer restart is requested.
    peer_epoch: AtomicU64,
    /// The fault whose window we are in (index + 1; 0 = before the first).
    window: AtomicUsize,
    /// Bumped once each fault is undone: a transfer that started in
    /// generation `g` started after fault `g` was over.
    generation: AtomicU64,
}

impl Soak {
    fn window_name(&self) -> &'static str {
        match self.window.load(SeqCst) {
            0 => "none",
            i => FAULTS[i - 1].name(),
        }
    }
}

impl Node {
    fn fail(&self, soak: &Soak, class: String) {
        let key = format!("{}/{class}", soak.window_name());
        *self.failures.lock().unwrap().entry(key).or_default() += 1;
    }

    /// Reconnects the segment if its endpoint is gone and no reconnect is
    /// running; otherwise waits a little.
    fn heal(&self) {
        let Ok(i) = self.e.segment_info(self.seg) else {
            return;
        };
        if i.active || i.reconnecting {
            std::thread::sleep(Duration::from_millis(20));
            return;
        }
        let Ok(_g) = self.heal.try_lock() else {
            std::thread::sleep(Duration::from_millis(50));
            return;
        };
        match self.e.reconnect_segment(self.seg) {
            Ok(_) => {
                self.reconnects.fetch_add(1, SeqCst);
            }
            Err(_) => {
                self.reconnect_errors.fetch_add(1, SeqCst);
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    /// Reconnects a segment that is up but lists no peer region: the peer
    /// engine's listener answers before its memory is registered, so a
    /// handshake with a restarting peer can carry no region (the
    /// descriptors are only fetched again by a reconnect).
    fn refresh(&self) {
        let Ok(_g) = self.heal.try_lock() else {
            std::thread::sleep(Duration::from_millis(50));
            return;
        };
        if self.e.segment_regions(self.seg).is_ok_and(|v| v.is_empty()) {
            std::thread::sleep(Duration::from_millis(100));
            match self.e.reconnect_segment(self.seg) {
                Ok(_) => self.reconnects.fetch_add(1, SeqCst),
                Err(_) => self.reconnect_errors.fetch_add(1, SeqCst),
            };
        }
    }

    /// Runs one transfer to a terminal state; `Err` names its failure class.
    fn run(&self, t: Transfer) -> Result<(), String> {
        let b = self
            .e
            .allocate_batch(1)
            .map_err(|e| format!("submit:{}", err_name(&e)))?;
        if let Err(e) = self.e.submit(b, &[t]) {
            let _ = self.e.free_batch(b);
            return Err(format!("submit:{}", err_name(&e)));
        }
        let r = self.wait(b);
        let _ = self.e.free_batch(b);
        r
    }

    fn wait(&self, b: BatchId) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            let s = self.e.task_status(b, 0).map_err(|e| err_name(&e))?;
            if s.state == TaskState::Completed {
                return Ok(());
            }
            if s.state.is_terminal() {
                let why = match self.e.task_anomaly_detail(b, 0) {
                    Ok(d) => match d.winner {
                        Some(w) => format!("{:?}", w.reason),
                        None => format!("{:?}", d.state),
                    },
                    Err(e) => err_name(&e),
                };
                return Err(format!("{:?}:{why}", s.state));
            }
            if t0.elapsed() > HUNG {
                let _ = self.e.cancel_batch(b);
                let t1 = Instant::now();
                while !self
                    .e
                    .task_status(b, 0)
                    .is_ok_and(|s| s.state.is_terminal())
                    && t1.elapsed() < HUNG
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Err("hung".into());
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

/// xorshift64.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// One lane: WRITE a pattern to remote slot `slot`, READ it back, compare.
fn lane(soak: &Soak, n: &Node, idx: usize, slot: usize) {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ ((slot as u64 + 1) << 32);
    let off = idx * 2 * SLOT;
    let mut src = vec![0u8; SLOT];
    let mut back = vec![0u8; SLOT];
    let zeros = vec![0u8; SLOT];
    while !soak.stop.load(SeqCst) {
        let len = 1 + (next(&mut rng) as usize % SLOT);
        for c in src[..len].chunks_mut(8) {
            let w = next(&mut rng).to_le_bytes();
            c.copy_from_slice(&w[..c.len()]);
        }
        let epoch0 = soak.peer_epoch.load(SeqCst);
        let gen0 = soak.generation.load(SeqCst);
        let remote = match n.e.segment_regions(n.seg) {
            Ok(v) if !v.is_empty() => v[0].addr + (slot * SLOT) as u64,
            Ok(_) => {
                n.fail(soak, "submit:NoRegion".into());
                n.refresh();
                continue;
            }
            Err(e) => {
                n.fail(soak, format!("submit:{}", err_name(&e)));
                n.heal();
                continue;
            }
        };
        if n.mem.write_at(off, &src[..len]).is_err()
            || n.mem.write_at(off + SLOT, &zeros[..len]).is_err()
        {
            n.fail(soak, "local:write_at".into());
            return;
        }
        let w = Transfer {
            op: Op::Write,
            local: n.mem.addr() + off as u64,
            len: len as u64,
            segment: n.seg,
            remote_offset: remote,
        };
        let r = Transfer {
            op: Op::Read,
            local: n.mem.addr() + (off + SLOT) as u64,
            ..w
        };
        if let Err(class) = n.run(w).and_then(|()| n.run(r)) {
            n.fail(soak, class);
            n.heal();
            continue;
        }
        if n.mem.read_at(off + SLOT, &mut back[..len]).is_err() {
            n.fail(soak, "local:read_at".into());
            return;
        }
        if back[..len] == src[..len] {
            n.verified.fetch_add(1, SeqCst);
            n.verified_gen.fetch_max(gen0, SeqCst);
            n.bytes.fetch_add(len as u64, SeqCst);
        } else if soak.peer_epoch.load(SeqCst) != epoch0 {
            n.interrupted.fetch_add(1, SeqCst);
        } else {
            let at = back[..len]
                .iter()
                .zip(&src[..len])
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            eprintln!(
                "SOAK MISMATCH {} lane {idx}: {len} bytes at remote {remote:#x}, first difference at {at} (window {})",
                n.model,
                soak.window_name()
            );
            n.mismatches.fetch_add(1, SeqCst);
        }
    }
}

fn control(peer: &str, port: u16, cmd: &str) -> Res<()> {
    two_guests::send("soak: ", peer, port, cmd)
}

fn port_active(dev: &str) -> bool {
    std::process::Command::new("rdma")
        .args(["link", "show", &format!("{dev}/1")])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("state ACTIVE"))
        .unwrap_or(false)
}

/// Injects `f` (on `n` if it is per engine) and undoes it.
fn inject(f: Fault, n: &Node, soak: &Soak, peer: &str, ctl_port: u16) -> Res<()> {
    match f {
        Fault::WrongRkey => {
            n.e.fault_corrupt_rkey(n.seg).map_err(|e| e.to_string())?;
            std::thread::sleep(Duration::from_secs(1));
            n.e.fault_restore_rkey();
        }
        Fault::QpToErr => {
            // The segment may be reconnecting from an earlier fault.
            if let Err(e) = n.e.fault_qps_to_error(n.seg) {
                eprintln!("soak: qp_to_err on {}: {e} (not injected)", n.model);
                return Err(e.to_string());
            }
        }
        Fault::PollerPause => {
            n.e.fault_pause_polling(true);
            std::thread::sleep(Duration::from_millis(1500));
            n.e.fault_pause_polling(false);
        }
        Fault::PortDownUp => {
            let dev = n.e.device().to_owned();
            let netdev = netdev_of(&dev).ok_or(format!("no netdev for {dev}"))?;
            ip_link(&netdev, "down")?;
            std::thread::sleep(Duration::from_secs(2));
            ip_link(&netdev, "up")?;
            let t0 = Instant::now();
            while !port_active(&dev) {
                if t0.elapsed() > Duration::from_secs(60) {
                    return Err(format!("{dev} port never came back ACTIVE"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Fault::PeerRestart => {
            soak.peer_epoch.fetch_add(1, SeqCst);
            control(peer, ctl_port, "restart 1000")?;
        }
    }
    Ok(())
}

/// Waits until the engine is idle, closes its segments, waits for their
/// endpoints, and lists every counter that is not back to zero.
fn leaks(e: &Engine, who: &str) -> Res<Vec<String>> {
    let idle = e.wait_idle(Duration::from_secs(120));
    for s in e.segments() {
        let _ = e.close_segment(s);
    }
    let t0 = Instant::now();
    while e.stats().endpoints_live > 0 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = e.stats();
    let g = st.gate;
    let cc = e.cc_stats().ok_or("no controller")?;
    let rails = st.rails as usize;
    let charged: u64 = st.rail_charged_bytes[..rails].iter().sum();
    eprintln!(
        "SOAK counters {who}: tokens={} ep_outstanding={} qp_depth={} cq_outstanding={} slices={} endpoints_live={} cc_inflight_bytes={} permits={}/{} rail_charged_bytes={charged} pins={} bad_completions={} release_errors={} rail_accounting_errors={} illegal_transitions={} underflow_refusals={}",
        st.tokens_in_use,
        st.endpoint_outstanding,
        st.qp_depth,
        st.cq_outstanding,
        st.slices_pending,
        st.endpoints_live,
        g.in_flight_bytes,
        g.admitted,
        g.released,
        st.mem_pins,
        st.bad_completions,
        g.release_errors,
        st.rail_accounting_errors,
        cc.illegal_transitions,
        cc.underflow_refusals,
    );
    let mut bad = Vec::new();
    let mut want = |ok: bool, what: &str| {
        if !ok {
            bad.push(format!("{who}: {what}"));
        }
    };
    want(idle, "never idle");
    want(st.tokens_in_use == 0, "tokens");
    want(st.endpoint_outstanding == 0, "endpoint outstanding");
    want(st.qp_depth == 0, "QP depth");
    want(st.cq_outstanding == 0, "CQ outstanding");
    want(st.slices_pending == 0, "slices");
    want(st.endpoints_live == 0, "endpoints live after close");
    want(g.in_flight_bytes == 0, "CC in-flight bytes");
    want(g.admitted == g.released, "CC permits");
    want(charged == 0, "rail charges");
    want(st.mem_pins == 0, "memory pins");
    want(st.bad_completions == 0, "bad completions");
    want(g.release_errors == 0, "CC release errors");
    want(st.rail_accounting_errors == 0, "rail accounting errors");
    want(cc.illegal_transitions == 0, "illegal transitions");
    want(cc.underflow_refusals == 0, "CC underflow refusals");
    Ok(bad)
}

fn open(model: WorkerModel, name: &'static str, peer: &str, port: u16, lanes: usize) -> Res<Node> {
    let mut cfg = config()?;
    cfg.worker_model = model;
    let e = Engine::new(cfg).map_err(|e| format!("{name}: {e}"))?;
    let mem = e
        .alloc_memory(lanes * 2 * SLOT)
        .map_err(|e| e.to_string())?;
    let seg = two_guests::open_segment("soak: ", &e, peer, port)?;
    let s0 = e.stats();
    Ok(Node {
        model: name,
        e,
        mem,
        seg,
        heal: Mutex::new(()),
        verified: AtomicU64::new(0),
        verified_gen: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        interrupted: AtomicU64::new(0),
        mismatches: AtomicU64::new(0),
        reconnects: AtomicU64::new(0),
        reconnect_errors: AtomicU64::new(0),
        failures: Mutex::new(BTreeMap::new()),
        s0,
    })
}

fn verified(nodes: &[Node]) -> Vec<u64> {
    nodes.iter().map(|n| n.verified.load(SeqCst)).collect()
}

/// Waits until every node verified a transfer that started in generation
/// `generation` or later.
fn recovered(nodes: &[Node], generation: u64, within: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if nodes
            .iter()
            .all(|n| n.verified_gen.load(SeqCst) >= generation)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn initiator(peer: &str, port: u16, secs: u64, every: u64, lanes: usize) -> Res<()> {
    control(peer, port + 1, "ping")?;
    let nodes = [
        open(WorkerModel::Shared, "Shared", peer, port, lanes)?,
        open(
            WorkerModel::DedicatedPoller,
            "DedicatedPoller",
            peer,
            port,
            lanes,
        )?,
    ];
    eprintln!(
        "SOAK start: {secs} s, a fault every {every} s, {lanes} lanes per engine, models Shared + DedicatedPoller, CC enforce, device {}, peer {peer}:{port}",
        nodes[0].e.device()
    );
    let soak = Soak {
        stop: AtomicBool::new(false),
        peer_epoch: AtomicU64::new(0),
        window: AtomicUsize::new(0),
        generation: AtomicU64::new(0),
    };
    let mut injected = [0u64; FAULTS.len()];
    let mut not_injected = 0u64;
    let mut unrecovered = Vec::new();
    let mut recover_max = [Duration::ZERO; FAULTS.len()];
    let start = Instant::now();
    std::thread::scope(|sc| -> Res<()> {
        for (ni, n) in nodes.iter().enumerate() {
            for l in 0..lanes {
                let soak = &soak;
                sc.spawn(move || lane(soak, n, l, ni * lanes + l));
            }
        }
        let r = (|| -> Res<()> {
            let t0 = Instant::now();
            while verified(&nodes).contains(&0) && t0.elapsed() < RECOVER {
                std::thread::sleep(Duration::from_millis(20));
            }
            if verified(&nodes).contains(&0) {
                return Err(format!(
                    "no traffic before the first fault: {:?}",
                    verified(&nodes)
                ));
            }
            let mut i = 0usize;
            while start.elapsed() < Duration::from_secs(secs) {
                let slot = Instant::now();
                let f = FAULTS[i % FAULTS.len()];
                let n = &nodes[i % nodes.len()];
                soak.window.store(i % FAULTS.len() + 1, SeqCst);
                let on = if f.per_engine() { n.model } else { "all" };
                match inject(f, n, &soak, peer, port + 1) {
                    Ok(()) => injected[i % FAULTS.len()] += 1,
                    Err(e) => {
                        not_injected += 1;
                        eprintln!(
                            "SOAK t={:.1}s fault={} on={on}: not injected: {e}",
                            start.elapsed().as_secs_f64(),
                            f.name()
                        );
                    }
                }
                let t = Instant::now();
                let g = soak.generation.fetch_add(1, SeqCst) + 1;
                let ok = recovered(&nodes, g, RECOVER);
                let took = t.elapsed();
                let k = i % FAULTS.len();
                recover_max[k] = recover_max[k].max(took);
                eprintln!(
                    "SOAK t={:.1}s fault={} on={on} recovered={ok} in {:.2}s verified={:?}",
                    start.elapsed().as_secs_f64(),
                    f.name(),
                    took.as_secs_f64(),
                    verified(&nodes)
                );
                if !ok {
                    unrecovered.push(format!("{} on {on}", f.name()));
                    break;
                }
                let due = Duration::from_secs(every);
                if slot.elapsed() < due {
                    std::thread::sleep(due - slot.elapsed());
                }
                i += 1;
            }
            Ok(())
        })();
        soak.stop.store(true, SeqCst);
        r
    })?;
    let ran = start.elapsed();

    // The report.
    let mut fail = Vec::new();
    println!(
        "SOAK report: {:.0} s of traffic, models Shared + DedicatedPoller, CC enforce",
        ran.as_secs_f64()
    );
    let inj: Vec<String> = FAULTS
        .iter()
        .zip(&injected)
        .zip(&recover_max)
        .map(|((f, n), r)| format!("{}={n}(max recovery {:.1}s)", f.name(), r.as_secs_f64()))
        .collect();
    println!(
        "SOAK faults injected: {} total: {} (not injected: {not_injected})",
        injected.iter().sum::<u64>(),
        inj.join(" ")
    );
    for (f, n) in FAULTS.iter().zip(&injected) {
        if *n == 0 {
            fail.push(format!("fault {} never injected (run longer)", f.name()));
        }
    }
    for u in &unrecovered {
        fail.push(format!(
            "no recovery after {u} within {} s",
            RECOVER.as_secs()
        ));
    }
    let mut total = 0;
    for n in &nodes {
        let v = n.verified.load(SeqCst);
        total += v;
        let st = n.e.stats();
        let d = |a: u64, b: u64| a - b;
        println!(
            "SOAK transfers {}: verified={v} (WRITE + READ + compare) bytes={} interrupted_by_peer_restart={} mismatches={} reconnects={} reconnect_errors={} | engine: retired={} reclaimed={} retries={} async_events={} avoids={} force_flushes={} stale_completions={}",
            n.model,
            n.bytes.load(SeqCst),
            n.interrupted.load(SeqCst),
            n.mismatches.load(SeqCst),
            n.reconnects.load(SeqCst),
            n.reconnect_errors.load(SeqCst),
            d(st.retired, n.s0.retired),
            d(st.reclaimed, n.s0.reclaimed),
            d(st.retries, n.s0.retries),
            d(st.async_events, n.s0.async_events),
            d(st.avoids, n.s0.avoids),
            d(st.force_flushes, n.s0.force_flushes),
            d(st.stale_completions, n.s0.stale_completions),
        );
        let failures = n.failures.lock().unwrap();
        let sum: u64 = failures.values().sum();
        let list: Vec<String> = failures.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!(
            "SOAK failures {} (fault window/class): {sum} total: {}",
            n.model,
            if list.is_empty() {
                "none".into()
            } else {
                list.join(" ")
            }
        );
        if v == 0 {
            fail.push(format!("{}: no verified transfer", n.model));
        }
        if n.mismatches.load(SeqCst) > 0 {
            fail.push(format!("{}: data mismatch", n.model));
        }
        if let Some(k) = failures
            .keys()
            .find(|k| k.starts_with("none/") || k.contains("hung") || k.starts_with("local:"))
        {
            fail.push(format!(
                "{}: failure outside any fault or hung: {k}",
                n.model
            ));
        }
    }
    println!("SOAK transfers total verified: {total}");
    for n in &nodes {
        fail.extend(leaks(&n.e, n.model)?);
    }
    control(peer, port + 1, "exit")?;
    if !fail.is_empty() {
        return Err(fail.join("; "));
    }
    println!("soak initiator: OK");
    Ok(())
}
