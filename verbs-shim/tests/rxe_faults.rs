//! The real-verbs fault matrix (issue #7): each test runs two engines on
//! one RDMA device (Soft-RoCE `rxe0` in CI) over loopback, forces a real
//! verbs fault through the `fault-injection` hooks, and checks
//!
//! * the classification against RFC 4162's WC / async-event tables,
//! * that the failure scope does not widen,
//! * the path state machine's arrows (a tracer hooked into the engine's
//!   controller records every (health, generation) change of every route),
//! * that afterwards every token, permit, QP-depth and CQ-outstanding
//!   counter is zero (receiver credits do not exist in the engine yet, #4),
//!   and completed data reads back,
//! * each failed task's `task_anomaly` against the caller-visible table.
//!
//! Every test prints one machine-readable line
//! `FAULT <scenario> wc=.. class=.. scope=.. path=.. counters=.. source=real|scripted`.
//! Rows Soft-RoCE cannot produce are exercised through the engine's
//! scripted seams and say `source=scripted` (and `scripted` in the name).
//!
//! The worker model comes from the environment; `ci/rxe.sh` runs this
//! binary once per model. Without a device each test prints `SKIP`.

use railyard_core::classify::{classify_event, classify_wc, wc, Effect};
use railyard_verbs::engine::{
    AnomalyState, BatchId, CcMode, Engine, EngineConfig, EngineError, Health, Op, SegmentId,
    TaskState, Transfer, WorkerModel,
};
use railyard_verbs::MemoryRegion;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[macro_use]
mod support;
use support::netdev::netdev_of;
use support::tracer::{health_name, wcs_str, Tracer, DEV};
use support::{assert_idle, pattern, skips_without_device};

const WAIT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------
// The control-path log: every `railyard*` event at INFO or above is kept in
// `LOG` (as "LEVEL target: message fields"); with `RUST_LOG` set it is also
// printed to stderr through tracing-subscriber's EnvFilter, as the CLI does.

static LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct Capture;

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let _ = if f.name() == "message" {
            write!(self.0, " {v:?}")
        } else {
            write!(self.0, " {}={v:?}", f.name())
        };
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let m = e.metadata();
        if *m.level() > tracing::Level::INFO || !m.target().starts_with("railyard") {
            return;
        }
        let mut f = Fields(String::new());
        e.record(&mut f);
        let line = format!("{} {}:{}", m.level(), m.target(), f.0);
        LOG.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
}

fn init_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::Layer as _;
        let print = std::env::var_os("RUST_LOG").map(|_| {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(tracing_subscriber::EnvFilter::from_default_env())
        });
        let sub = tracing_subscriber::registry().with(print).with(Capture);
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// The captured lines since the last call.
fn take_log() -> Vec<String> {
    std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()))
}

// ---------------------------------------------------------------------------
// Engines.

fn base_config() -> EngineConfig {
    let mut c = EngineConfig::from_env().expect("MC_* variables must be valid");
    c.cc.mode = CcMode::Enforce;
    c.cc.hard_error_threshold = 2;
    c.cc.cooldown_ms = 300;
    // No drain-time pressure verdicts from TCG slowness: window changes in
    // these tests come from the faults only.
    c.cc.target_drain_us = 10_000_000;
    c.cc.high_pressure_epochs = 10_000;
    c.transfer_timeout = Duration::from_secs(30);
    if let Ok(d) = std::env::var("RAILYARD_RDMA_DEVICE") {
        c.device = Some(d);
    }
    if let Ok(g) = std::env::var("RAILYARD_GID_INDEX") {
        c.gid_index = g.parse().expect("RAILYARD_GID_INDEX must be 0..=255");
    }
    c
}

struct Node {
    e: Engine,
    gate: Arc<Tracer>,
    mem: Arc<MemoryRegion>,
}

fn node(cfg: EngineConfig, mem: usize) -> Result<Node, EngineError> {
    let e = Engine::new(cfg)?;
    let gate = Tracer::install(&e);
    let mem = e.alloc_memory(mem)?;
    Ok(Node { e, gate, mem })
}

/// The initiator, or `None` after a SKIP line.
fn first_node(test: &str, cfg: EngineConfig, mem: usize) -> Option<Node> {
    match node(cfg, mem) {
        Ok(n) => Some(n),
        Err(e) if skips_without_device(test, &e) => None,
        Err(e) => panic!("{test}: cannot start the engine: {e}"),
    }
}

struct Pair {
    a: Node,
    b: Node,
    seg: SegmentId,
}

fn pair(test: &str, len: usize, tweak: impl Fn(&mut EngineConfig)) -> Option<Pair> {
    init_log();
    let mut cfg = base_config();
    tweak(&mut cfg);
    let a = first_node(test, cfg.clone(), len)?;
    let b = node(cfg, len).expect("target engine");
    let seg = a.e.open_segment(b.e.listen_addr()).expect("open_segment");
    say!(
        "RAN {test} on {} ({:?}, {} workers, {} QPs/ep)",
        a.e.device(),
        a.e.config().worker_model,
        a.e.config().workers,
        a.e.config().qps_per_endpoint
    );
    Some(Pair { a, b, seg })
}

fn write_t(a: &Node, b: &Node, seg: SegmentId, off: usize, len: usize) -> Transfer {
    Transfer {
        op: Op::Write,
        local: a.mem.addr() + off as u64,
        len: len as u64,
        segment: seg,
        remote_offset: b.mem.addr() + off as u64,
    }
}

fn submit(e: &Engine, ts: &[Transfer]) -> BatchId {
    let b = e.allocate_batch(ts.len()).unwrap();
    e.submit(b, ts).unwrap();
    b
}

fn wait_batch(e: &Engine, batch: BatchId) -> Vec<TaskState> {
    support::wait_batch_for(e, batch, WAIT, Duration::from_micros(200))
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes `data` at `off` on `a`, WRITEs it to `b`, checks it arrived.
fn write_and_verify(a: &Node, b: &Node, seg: SegmentId, off: usize, data: &[u8]) {
    a.mem.write_at(off, data).unwrap();
    let batch = submit(&a.e, &[write_t(a, b, seg, off, data.len())]);
    assert_eq!(wait_batch(&a.e, batch), vec![TaskState::Completed]);
    a.e.free_batch(batch).unwrap();
    assert_reads_back(b, off, data);
}

fn assert_reads_back(b: &Node, off: usize, data: &[u8]) {
    let mut got = vec![0u8; data.len()];
    b.mem.read_at(off, &mut got).unwrap();
    assert!(got == data, "completed data does not read back intact");
}

/// Every gauge back to zero; returns the `counters=` text.
fn quiescent(n: &Node, who: &str) -> String {
    let e = &n.e;
    let s = assert_idle(e, who, WAIT);
    let g = s.gate;
    let cc = e.cc_stats().expect("controller");
    assert_eq!(cc.illegal_transitions, 0, "{who}: illegal arrows: {cc:?}");
    assert_eq!(cc.underflow_refusals, 0, "{who}: underflow: {cc:?}");
    format!(
        "tokens={},ep_outstanding={},qp_depth={},cq_outstanding={},slices={},permits={}/{},inflight_bytes={}",
        s.tokens_in_use,
        s.endpoint_outstanding,
        s.qp_depth,
        s.cq_outstanding,
        s.slices_pending,
        g.admitted,
        g.released,
        g.in_flight_bytes
    )
}

/// The engine's refusal totals, for a `FAULT` line: a worker that re-tried
/// a refused slice every round showed here as thousands of avoids per
/// cooldown; parked (issue #18), one per state change.
fn refusals(n: &Node) -> String {
    let s = n.e.stats();
    format!(
        "avoids={},deferrals={},backpressure={},parks={}",
        s.avoids, s.deferrals, s.backpressure, s.parks
    )
}

/// Pauses CQ polling and lets a poll round already running finish.
fn pause_polling(n: &Node) {
    n.e.fault_pause_polling(true);
    std::thread::sleep(Duration::from_millis(50));
}

fn route_of(n: &Node, seg: SegmentId) -> u32 {
    n.e.segment_info(seg).unwrap().route
}

fn snap(n: &Node, seg: SegmentId) -> railyard_core::cc::DomainSnapshot {
    n.e.route_snapshot(seg).unwrap().expect("a controller")
}

fn class_of(status: u32) -> (String, String) {
    let k = classify_wc(status, 0);
    (format!("{:?}", k.class), format!("{:?}", k.scope))
}

/// Whether `want` occurs in order (not necessarily adjacent) in `path`.
fn has_arrows(path: &[(Health, u32)], want: &[Health]) -> bool {
    let mut i = 0;
    for (h, _) in path {
        if i < want.len() && *h == want[i] {
            i += 1;
        }
    }
    i == want.len()
}

// ---------------------------------------------------------------------------
// Scenario 1: wrong rkey.

#[test]
fn fault1_wrong_rkey_is_remote_metadata_and_the_retry_succeeds_after_refresh() {
    const LEN: usize = 256 * 1024;
    let Some(p) = pair("fault1_wrong_rkey", 2 * LEN, |_| {}) else {
        return;
    };
    let route = route_of(&p.a, p.seg);
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(1, LEN));
    let before = snap(&p.a, p.seg);
    assert_eq!(before.health, Health::Healthy);

    p.a.e.fault_corrupt_rkey(p.seg).unwrap();
    let data = pattern(2, LEN);
    p.a.mem.write_at(LEN, &data).unwrap();
    let batch = submit(&p.a.e, &[write_t(&p.a, &p.b, p.seg, LEN, LEN)]);
    let st = wait_batch(&p.a.e, batch);
    p.a.e.fault_restore_rkey();
    let rem = p.a.gate.wc_count(wc::REM_ACCESS_ERR);
    assert!(rem >= 1, "no REM_ACCESS_ERR: {:?}", p.a.gate.errors_seen());
    // The existing retry ran on the refreshed endpoint and succeeded.
    assert_eq!(st, vec![TaskState::Completed], "{:?}", p.a.e.stats());
    assert_reads_back(&p.b, LEN, &data);
    let info = p.a.e.segment_info(p.seg).unwrap();
    assert!(info.reconnects >= 1 && info.active, "{info:?}");
    // RemoteMetadata: no route failure counted, window not shrunk, only a
    // new generation (the refreshed endpoint).
    let after = snap(&p.a, p.seg);
    assert_eq!(after.health, Health::Healthy, "{after:?}");
    assert_eq!(after.errors, 0, "{after:?}");
    assert!(after.window >= before.window, "{before:?} -> {after:?}");
    assert!(after.generation > before.generation);
    let path = p.a.gate.route_path(route);
    assert!(path.iter().all(|(h, _)| *h == Health::Healthy), "{path:?}");
    let anomaly = p.a.e.task_anomaly(batch, 0).unwrap();
    assert_eq!(anomaly, AnomalyState::Normal);
    p.a.e.free_batch(batch).unwrap();
    let (class, scope) = class_of(wc::REM_ACCESS_ERR);
    assert_eq!(class, "RemoteMetadata");
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    say!(
        "FAULT s1_wrong_rkey wc={} class={class} scope={scope} path={} retired={} task=Completed anomaly={anomaly:?} counters={counters} source=real",
        wcs_str(&p.a.gate.errors_seen()),
        p.a.gate.path_str(route),
        p.a.e.stats().retired,
    );
}

/// Scenario 1 twice, with 2 and with 32 slices in flight when the rkey is
/// wrong: the control-path log (INFO and up, both engines) carries the
/// classification, the retire and the reconnect, and the same number of
/// lines both times: nothing per work request or completion (the first
/// error retires the endpoint; its flushes, the retries and the successes
/// log nothing).
#[test]
fn fault1_log_lines_do_not_scale_with_work_requests() {
    const SLICE: usize = 64 * 1024;
    const MANY: usize = 32;
    let Some(p) = pair("fault1_log_lines", 2 * MANY * SLICE, |c| {
        c.slice_size = SLICE as u32
    }) else {
        return;
    };
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(1, SLICE));
    let mut counts = Vec::new();
    for (round, slices) in [2usize, MANY].into_iter().enumerate() {
        let reconnects = p.a.e.segment_info(p.seg).unwrap().reconnects;
        // Settle what the set-up (or the last round) still logs: reclaims.
        let live = |n: &Node| n.e.stats().endpoints_live;
        wait_for("old endpoints reclaimed", || {
            live(&p.a) == 1 && live(&p.b) == 1
        });
        take_log();
        let len = slices * SLICE;
        let off = (round % 2) * MANY * SLICE;
        let data = pattern(10 + round as u64, len);
        p.a.mem.write_at(off, &data).unwrap();
        p.a.e.fault_corrupt_rkey(p.seg).unwrap();
        let batch = submit(&p.a.e, &[write_t(&p.a, &p.b, p.seg, off, len)]);
        let st = wait_batch(&p.a.e, batch);
        p.a.e.fault_restore_rkey();
        assert_eq!(st, vec![TaskState::Completed], "{:?}", p.a.e.stats());
        assert_reads_back(&p.b, off, &data);
        p.a.e.free_batch(batch).unwrap();
        assert!(p.a.e.segment_info(p.seg).unwrap().reconnects > reconnects);
        quiescent(&p.a, "initiator");
        quiescent(&p.b, "target");
        wait_for("old endpoints reclaimed", || {
            live(&p.a) == 1 && live(&p.b) == 1
        });
        std::thread::sleep(Duration::from_millis(50));
        let log = take_log();
        let has = |what: &str| log.iter().any(|l| l.contains(what));
        assert!(
            has("error completion classified") && has("class=RemoteMetadata"),
            "no classification line: {log:#?}"
        );
        assert!(
            has("endpoint retired") && has("reason=CqError"),
            "no retire line: {log:#?}"
        );
        assert!(
            has("reconnect started") && has("reconnect done"),
            "no reconnect lines: {log:#?}"
        );
        assert!(has("handshake accepted"), "no handshake line: {log:#?}");
        for l in &log {
            say!("LOG s1 slices={slices} {l}");
        }
        counts.push((slices, log.len()));
    }
    let (few, many) = (counts[0].1, counts[1].1);
    // A line per work request would add at least MANY - 2 = 30.
    assert!(
        many <= few + 2,
        "log lines grew with the work requests: {counts:?}"
    );
    say!("FAULT s1_log_lines lines={counts:?} (slices, INFO+ lines) per_wr=none source=real");
}

// ---------------------------------------------------------------------------
// Scenario 2: wrong lkey (and a length beyond the MR).

#[test]
fn fault2_wrong_lkey_is_local_configuration_and_touches_no_path() {
    const LEN: usize = 64 * 1024;
    let Some(p) = pair("fault2_wrong_lkey", 4 * LEN, |_| {}) else {
        return;
    };
    let route = route_of(&p.a, p.seg);
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(3, LEN));
    let before = snap(&p.a, p.seg);

    // A length beyond the MR never reaches the NIC: a typed error, nothing
    // queued, nothing held.
    let posts = p.a.e.stats().posts;
    let b = p.a.e.allocate_batch(1).unwrap();
    let too_long = Transfer {
        len: (4 * LEN + 1) as u64,
        ..write_t(&p.a, &p.b, p.seg, 0, LEN)
    };
    assert!(matches!(
        p.a.e.submit(b, &[too_long]),
        Err(EngineError::LocalRange { .. })
    ));
    assert_eq!(p.a.e.stats().posts, posts);
    p.a.e.free_batch(b).unwrap();

    // A wrong lkey does: a LocalConfiguration status. rxe reports
    // LOC_QP_OP_ERR (QP scope, retried on each rebuilt endpoint until the
    // task fails); a hardware NIC typically LOC_PROT_ERR (operation scope).
    p.a.e.fault_bad_lkey(true).unwrap();
    let batch = submit(&p.a.e, &[write_t(&p.a, &p.b, p.seg, LEN, LEN)]);
    let st = wait_batch(&p.a.e, batch);
    p.a.e.fault_bad_lkey(false).unwrap();
    let errs = p.a.gate.errors_seen();
    let local: Vec<_> = errs
        .iter()
        .filter(|(s, _)| {
            classify_wc(*s, 0).class == railyard_core::classify::FailureClass::LocalConfiguration
        })
        .collect();
    assert!(
        !local.is_empty(),
        "no LocalConfiguration completion: {errs:?}"
    );
    let status = local[0].0;
    assert_eq!(st, vec![TaskState::Failed]);
    let detail = p.a.e.task_anomaly_detail(batch, 0).unwrap();
    assert_eq!(detail.state, AnomalyState::Unknown, "{detail:?}");
    assert_eq!(
        detail.winner.map(|w| w.reason),
        Some(railyard_core::evidence::Reason::LocalConfiguration),
        "{detail:?}"
    );
    p.a.e.free_batch(batch).unwrap();
    // No path or window touched.
    let after = snap(&p.a, p.seg);
    assert_eq!(after.health, Health::Healthy, "{after:?}");
    assert_eq!(after.errors, 0, "{after:?}");
    assert!(after.window >= before.window, "{before:?} -> {after:?}");
    // The QP was in ERR (RC): the endpoint was rebuilt, and the segment
    // works again.
    wait_for("the reconnect", || {
        let i = p.a.e.segment_info(p.seg).unwrap();
        i.active && !i.reconnecting
    });
    write_and_verify(&p.a, &p.b, p.seg, 2 * LEN, &pattern(4, LEN));
    let (class, scope) = class_of(status);
    assert_eq!(class, "LocalConfiguration");
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    say!(
        "FAULT s2_wrong_lkey wc={} class={class} scope={scope} path={} task=Failed anomaly=Unknown/{:?} over_long_len=EngineError::LocalRange(no post) counters={counters} source=real",
        wcs_str(&errs),
        p.a.gate.path_str(route),
        detail.winner.map(|w| w.reason),
    );
}

// ---------------------------------------------------------------------------
// Scenario 3: a QP forced to ERR with many WRs outstanding.

#[test]
fn fault3_qp_forced_to_err_flushes_count_once_and_everything_is_released() {
    const LEN: usize = 16 << 20;
    let Some(p) = pair("fault3_qp_to_err_flush_burst", LEN, |c| {
        c.max_wr = 512;
    }) else {
        return;
    };
    let route = route_of(&p.a, p.seg);
    let data = pattern(5, LEN);
    p.a.mem.write_at(0, &data).unwrap();
    let s0 = p.a.e.stats();
    // The target's QPs go to ERR first (a responder in ERR drops requests
    // silently), so the initiator's WRs stay outstanding on the wire;
    // then the initiator's QPs are forced to ERR under them.
    let b_seg = *p.b.e.segments().first().expect("the accepted segment");
    p.b.e.fault_qps_to_error(b_seg).unwrap();
    let batch = submit(&p.a.e, &[write_t(&p.a, &p.b, p.seg, 0, LEN)]);
    wait_for("WRs outstanding", || p.a.e.stats().tokens_in_use >= 32);
    let outstanding = p.a.e.stats().tokens_in_use;
    p.a.e.fault_qps_to_error(p.seg).unwrap();
    let st = wait_batch(&p.a.e, batch);
    let flushes = p.a.gate.wc_count(wc::WR_FLUSH_ERR);
    assert!(
        flushes >= 32,
        "no flush burst: {:?}",
        p.a.gate.errors_seen()
    );
    // The flushed slices retried on the rebuilt endpoint: all data arrived.
    assert_eq!(st, vec![TaskState::Completed], "{:?}", p.a.e.stats());
    assert_reads_back(&p.b, 0, &data);
    assert_eq!(p.a.e.task_anomaly(batch, 0).unwrap(), AnomalyState::Normal);
    p.a.e.free_batch(batch).unwrap();
    let counters = quiescent(&p.a, "initiator");
    // Counted once: one retire for the whole burst, no route hard error.
    let s1 = p.a.e.stats();
    assert_eq!(s1.retired - s0.retired, 1, "{s1:?}");
    let after = snap(&p.a, p.seg);
    assert_eq!(after.errors, 0, "{after:?}");
    assert_eq!(after.health, Health::Healthy, "{after:?}");
    // The retired endpoint is reclaimed after its drain.
    wait_for("the reclaim", || p.a.e.stats().reclaimed > s0.reclaimed);
    quiescent(&p.b, "target");
    let (class, scope) = class_of(wc::WR_FLUSH_ERR);
    assert_eq!(class, "DerivedFlush");
    say!(
        "FAULT s3_qp_err_flush wc={} class={class} scope={scope} outstanding_at_err={outstanding} retired=+1 reclaimed=+{} path={} task=Completed(retried on new endpoint) counters={counters} source=real",
        wcs_str(&p.a.gate.errors_seen()),
        p.a.e.stats().reclaimed - s0.reclaimed,
        p.a.gate.path_str(route),
    );
}

// ---------------------------------------------------------------------------
// Scenario 4: the peer dies mid-transfer.

fn target_at(cfg: &EngineConfig, addr: SocketAddr, len: usize) -> Node {
    let mut c = cfg.clone();
    c.listen = addr;
    // The old listener may linger for a moment.
    let t0 = Instant::now();
    loop {
        match node(c.clone(), len) {
            Ok(n) => return n,
            Err(EngineError::Io(e)) if t0.elapsed() < Duration::from_secs(10) => {
                say!("target_at: {e}; retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("target at {addr}: {e}"),
        }
    }
}

#[test]
fn fault4_peer_killed_retry_exc_suspect_quarantine_probe_healthy_and_late_completions_fenced() {
    const LEN: usize = 16 << 20;
    let test = "fault4_peer_killed";
    let mut cfg = base_config();
    cfg.qps_per_endpoint = 1;
    cfg.qp_timeout = 15; // 134 ms
    cfg.qp_retry_cnt = 2;
    cfg.cc.cooldown_ms = 1500;
    let Some(a) = first_node(test, cfg.clone(), 2 * LEN) else {
        return;
    };
    let b = node(cfg.clone(), 2 * LEN).expect("target");
    let addr = b.e.listen_addr();
    let seg = a.e.open_segment(addr).unwrap();
    say!(
        "RAN {test} on {} ({:?}, {} workers)",
        a.e.device(),
        a.e.config().worker_model,
        a.e.config().workers
    );
    let route = route_of(&a, seg);
    write_and_verify(&a, &b, seg, 0, &pattern(6, LEN));
    let g0 = snap(&a, seg).generation;

    // (a) The peer process dies mid-transfer: RETRY_EXC_ERR → SUSPECT.
    // Killed right after the submit: the NIC is far ahead of the CQ
    // poller, so waiting for polled progress first would often find the
    // whole transfer already acknowledged.
    let batch = submit(&a.e, &[write_t(&a, &b, seg, 0, LEN)]);
    drop(b);
    let st = wait_batch(&a.e, batch);
    assert!(
        a.gate.wc_count(wc::RETRY_EXC_ERR) >= 1,
        "no RETRY_EXC_ERR: {:?} (task {st:?})",
        a.gate.errors_seen()
    );
    assert_eq!(st, vec![TaskState::Failed]);
    let an_a = a.e.task_anomaly_detail(batch, 0).unwrap();
    a.e.free_batch(batch).unwrap();
    let s = snap(&a, seg);
    assert_eq!((s.health, s.errors), (Health::Suspect, 1), "{s:?}");
    // The automatic reconnect found nobody: no usable path.
    assert_eq!(an_a.state, AnomalyState::LongUnavailable, "{an_a:?}");
    wait_for("the failed auto-reconnect", || {
        !a.e.segment_info(seg).unwrap().reconnecting
    });
    quiescent(&a, "initiator after (a)");

    // (b) The peer returns, the refreshed generation times out again →
    // QUARANTINED (threshold 2).
    let b2 = target_at(&cfg, addr, 2 * LEN);
    let g1 =
        a.e.reconnect_segment(seg)
            .map(|_| snap(&a, seg).generation)
            .unwrap();
    assert!(g1 > g0);
    assert_eq!(
        snap(&a, seg).health,
        Health::Suspect,
        "state kept on a new generation"
    );
    // It dies again before the new generation completed anything (a
    // success would take SUSPECT → HEALTHY first, as the diagram says).
    let t = write_t(&a, &b2, seg, 0, LEN);
    drop(b2);
    let avoids_b0 = a.e.stats().avoids;
    let batch = submit(&a.e, &[t]);
    let st = wait_batch(&a.e, batch);
    assert_eq!(st, vec![TaskState::Failed]);
    let an_b = a.e.task_anomaly(batch, 0).unwrap();
    assert_eq!(an_b, AnomalyState::LongUnavailable);
    a.e.free_batch(batch).unwrap();
    // Threshold reached on the refreshed generation: QUARANTINED. Its
    // retries were never posted again: the composed hot path admits the
    // endpoint before the CC permit, so a retry finds the dead peer's
    // endpoint retired (refused, the reconnect finds nobody → no usable
    // path) or, if a fresh endpoint is already up, is avoided by CC until
    // the cooldown. Which one depends on timing; (c) checks the avoidance.
    let path = a.gate.route_path(route);
    assert!(
        path.contains(&(Health::Quarantined, g1)),
        "no QUARANTINED on the refreshed generation: {path:?}"
    );
    let avoided_b = a.e.stats().avoids - avoids_b0;
    wait_for("the failed auto-reconnect", || {
        !a.e.segment_info(seg).unwrap().reconnecting
    });
    quiescent(&a, "initiator after (b)");

    // (c) The peer returns: new posts are avoided while QUARANTINED; after
    // the cooldown the route probes on a new generation; the probe
    // succeeds → HEALTHY.
    let b3 = target_at(&cfg, addr, 2 * LEN);
    a.e.reconnect_segment(seg).unwrap();
    let avoids0 = a.e.stats().avoids;
    let data = pattern(7, LEN / 8);
    a.mem.write_at(0, &data).unwrap();
    let batch = submit(&a.e, &[write_t(&a, &b3, seg, 0, LEN / 8)]);
    let quarantined_at_submit = snap(&a, seg).health == Health::Quarantined;
    let st = wait_batch(&a.e, batch);
    assert_eq!(st, vec![TaskState::Completed]);
    assert_reads_back(&b3, 0, &data);
    let avoided = a.e.stats().avoids - avoids0 + avoided_b;
    if quarantined_at_submit {
        assert!(avoided > 0, "posts on a QUARANTINED route were not avoided");
    }
    assert_eq!(a.e.task_anomaly(batch, 0).unwrap(), AnomalyState::Normal);
    a.e.free_batch(batch).unwrap();
    let s = snap(&a, seg);
    assert_eq!(s.health, Health::Healthy, "{s:?}");
    // Sampled after every controller call; each real step is checked by
    // the controller itself (`illegal_transitions` == 0 in `quiescent`).
    let path = a.gate.route_path(route);
    assert!(
        has_arrows(
            &path,
            &[
                Health::Healthy,
                Health::Suspect,
                Health::Quarantined,
                Health::Probing,
                Health::Healthy
            ]
        ),
        "{path:?}"
    );
    let qgen = path
        .iter()
        .find(|(h, _)| *h == Health::Quarantined)
        .unwrap()
        .1;
    let pgen = path.iter().find(|(h, _)| *h == Health::Probing).unwrap().1;
    assert!(pgen > qgen, "PROBING must be on a new generation: {path:?}");
    // The monitor's health watch logged the quarantine (warn) and the
    // recovery (info) from the control side (`railyard::cc`).
    wait_for("the health watch's quarantine and recovery lines", || {
        let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
        let cc = |w: &str| {
            log.iter()
                .any(|l| l.contains("railyard::cc") && l.contains(w))
        };
        cc("WARN") && cc("quarantined") && cc("to=Healthy")
    });
    quiescent(&a, "initiator after (c)");

    // (d) Late completions of an old generation change nothing: with the
    // pollers stalled, work is posted to a dead peer, the segment is
    // reconnected (new generation), and only then its RETRY_EXC_ERR and
    // flushes are polled.
    let stale0 = a.e.cc_stats().unwrap().stale_feedback;
    let retry0 = a.gate.wc_count(wc::RETRY_EXC_ERR);
    let flush0 = a.gate.wc_count(wc::WR_FLUSH_ERR);
    let data = pattern(8, LEN / 2);
    a.mem.write_at(0, &data).unwrap();
    pause_polling(&a);
    let t = write_t(&a, &b3, seg, 0, LEN / 2);
    drop(b3);
    let batch = submit(&a.e, &[t]);
    wait_for("posts on the wire", || a.e.stats().tokens_in_use >= 1);
    // Long enough for the QP's retries to run out (unpolled).
    std::thread::sleep(Duration::from_secs(3));
    let b4 = target_at(&cfg, addr, 2 * LEN);
    a.e.reconnect_segment(seg).unwrap();
    let before = snap(&a, seg);
    a.e.fault_pause_polling(false);
    let st = wait_batch(&a.e, batch);
    let late = a.gate.wc_count(wc::RETRY_EXC_ERR) - retry0;
    let after = snap(&a, seg);
    assert_eq!(
        (after.health, after.errors, after.generation),
        (before.health, before.errors, before.generation),
        "a late completion moved the new generation"
    );
    let stale = a.e.cc_stats().unwrap().stale_feedback - stale0;
    assert!(stale >= 1, "no stale feedback settled");
    assert!(late >= 1, "no late RETRY_EXC_ERR of the old generation");
    // The retried (and the not yet posted) slices ran on the new
    // endpoint: each 64 KiB slice on the new peer holds its data, or is
    // untouched (it completed on the old peer before it died).
    assert_eq!(st, vec![TaskState::Completed]);
    let retried = late + a.gate.wc_count(wc::WR_FLUSH_ERR) - flush0;
    let mut got = vec![0u8; data.len()];
    b4.mem.read_at(0, &mut got).unwrap();
    let mut on_new = 0;
    for (g, d) in got.chunks(65536).zip(data.chunks(65536)) {
        if g == d {
            on_new += 1;
        } else {
            assert!(g.iter().all(|&x| x == 0), "a slice arrived corrupted");
        }
    }
    assert!(
        on_new >= retried,
        "{on_new} slices on the new peer, {retried} retried"
    );
    a.e.free_batch(batch).unwrap();
    let counters = quiescent(&a, "initiator");
    quiescent(&b4, "target");
    let (class, scope) = class_of(wc::RETRY_EXC_ERR);
    assert_eq!(class, "RouteTimeout");
    let refusals = refusals(&a);
    say!(
        "FAULT s4_peer_killed wc={} class={class} scope={scope} path={} anomaly=a:{:?}({:?}),b:{an_b:?} avoided_while_quarantined={avoided} refusals={refusals} late_old_gen: retry_exc={late} slices_on_new_peer={on_new} stale_feedback={stale} state_kept={}@g{} counters={counters} source=real",
        wcs_str(&a.gate.errors_seen()),
        a.gate.path_str(route),
        an_a.state,
        an_a.winner.map(|w| w.reason),
        health_name(after.health),
        after.generation,
    );
}

// ---------------------------------------------------------------------------
// Scenario 6: poller stall.

#[test]
fn fault6_poller_stall_counts_no_route_timeout() {
    const LEN: usize = 1 << 20;
    let Some(p) = pair("fault6_poller_stall", LEN, |c| {
        c.transfer_timeout = Duration::from_millis(400);
    }) else {
        return;
    };
    let route = route_of(&p.a, p.seg);
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(9, LEN / 4));
    let before = snap(&p.a, p.seg);
    let stalled0 = p.a.gate.stalled_epochs.load(Ordering::Relaxed);
    pause_polling(&p.a);
    let batch = submit(&p.a.e, &[write_t(&p.a, &p.b, p.seg, 0, LEN)]);
    // Longer than the deadline, network healthy.
    let st = wait_batch(&p.a.e, batch);
    std::thread::sleep(Duration::from_millis(200));
    let stalled = p.a.gate.stalled_epochs.load(Ordering::Relaxed) - stalled0;
    p.a.e.fault_pause_polling(false);
    assert_eq!(st, vec![TaskState::Timeout]);
    assert!(stalled > 0, "the monitor never saw the stall");
    let anomaly = p.a.e.task_anomaly(batch, 0).unwrap();
    assert_eq!(
        anomaly,
        AnomalyState::Unknown,
        "deadline during a poller stall"
    );
    p.a.e.free_batch(batch).unwrap();
    let after = snap(&p.a, p.seg);
    assert_eq!(after.errors, 0, "a route timeout was counted: {after:?}");
    assert_eq!(after.health, before.health, "{after:?}");
    assert!(
        p.a.gate.errors_seen().is_empty(),
        "{:?}",
        p.a.gate.errors_seen()
    );
    // Still healthy: a new transfer completes.
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(10, LEN / 4));
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    say!(
        "FAULT s6_poller_stall wc=none(task TIMEOUT, all WCs SUCCESS and stale) class=PollerStall scope=None stalled_epochs={stalled} route_errors=0 path={} anomaly={anomaly:?} counters={counters} source=real",
        p.a.gate.path_str(route),
    );
}

// ---------------------------------------------------------------------------
// Scenario 7: retire racing posts, in the worker model from the environment.
// `RAILYARD_FAULT7_ROUNDS` (default 6, at least 1) shortens it for the
// valgrind pass in ci/rxe.sh (under valgrind on TCG: 6 rounds 290 s,
// 2 rounds 230 s; most of it is start-up).

#[test]
fn fault7_retire_races_two_posting_workers() {
    const LEN: usize = 1 << 20;
    const TASKS: usize = 4;
    let Some(p) = pair("fault7_retire_races_posts", TASKS * LEN, |c| {
        c.workers = match c.worker_model {
            WorkerModel::Shared => 2,
            WorkerModel::DedicatedPoller => 3,
        };
        c.qps_per_endpoint = 2;
    }) else {
        return;
    };
    let route = route_of(&p.a, p.seg);
    let data = pattern(11, TASKS * LEN);
    p.a.mem.write_at(0, &data).unwrap();
    let s0 = p.a.e.stats();
    let mut failed = 0;
    let mut states = BTreeMap::<String, u32>::new();
    let rounds = std::env::var("RAILYARD_FAULT7_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<u64>().ok())
        .map_or(6, |r| r.max(1));
    for round in 0..rounds {
        let ts: Vec<Transfer> = (0..TASKS)
            .map(|i| write_t(&p.a, &p.b, p.seg, i * LEN, LEN))
            .collect();
        let batch = submit(&p.a.e, &ts);
        // Retire at a different point of the posting each round.
        std::thread::sleep(Duration::from_micros(300 * round));
        p.a.e.close_segment(p.seg).unwrap();
        let st = wait_batch(&p.a.e, batch);
        for (i, s) in st.iter().enumerate() {
            *states.entry(format!("{s:?}")).or_default() += 1;
            let ts = p.a.e.task_status(batch, i).unwrap();
            assert!(
                ts.transferred_bytes <= ts.total_bytes,
                "double completion: {ts:?}"
            );
            match s {
                TaskState::Completed => {
                    assert_eq!(ts.transferred_bytes, ts.total_bytes);
                    assert_reads_back(&p.b, i * LEN, &data[i * LEN..(i + 1) * LEN]);
                }
                TaskState::Failed => {
                    failed += 1;
                    // Teardown by the owner: no new root failure.
                    let a = p.a.e.task_anomaly(batch, i).unwrap();
                    assert_eq!(a, AnomalyState::Unknown, "round {round} task {i}");
                }
                other => panic!("round {round} task {i}: {other:?}"),
            }
        }
        p.a.e.free_batch(batch).unwrap();
        quiescent(&p.a, "initiator");
        p.a.e.reconnect_segment(p.seg).unwrap();
    }
    let s1 = p.a.e.stats();
    assert_eq!(s1.bad_completions, 0);
    wait_for("every retired endpoint reclaimed", || {
        let s = p.a.e.stats();
        s.reclaimed - s0.reclaimed >= s.retired - s0.retired
    });
    let after = snap(&p.a, p.seg);
    assert_eq!(
        after.errors, 0,
        "a teardown counted as a path failure: {after:?}"
    );
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    say!(
        "FAULT s7_retire_races_posts model={:?} workers={} wc={} class=Cancelled(teardown) scope=Qp(endpoint) tasks={states:?} failed_anomaly=Unknown path={} retired={} reclaimed={} counters={counters} source=real",
        p.a.e.config().worker_model,
        p.a.e.config().workers,
        wcs_str(&p.a.gate.errors_seen()),
        p.a.gate.path_str(route),
        s1.retired - s0.retired,
        p.a.e.stats().reclaimed - s0.reclaimed,
    );
    let _ = failed;
}

// ---------------------------------------------------------------------------
// Scenario 8: async events.

fn ip_link(dev: &str, state: &str) {
    let st = std::process::Command::new("ip")
        .args(["link", "set", dev, state])
        .status()
        .expect("ip");
    assert!(st.success(), "ip link set {dev} {state}");
}

/// Real: `ip link set <netdev> down` under rxe raises `IBV_EVENT_PORT_ERR`
/// (port scope: on this single-port device, the device domain is
/// quarantined and every endpoint of the context retired, never the peer);
/// link up raises `PORT_ACTIVE` (no direct recovery); recovery goes
/// through the cooldown and a probe. Needs `RAILYARD_FAULT_NETDEV=1`
/// (it takes the device's link down: CI guests only).
#[test]
fn fault8_port_err_from_link_down_isolates_the_port() {
    const LEN: usize = 256 * 1024;
    if std::env::var("RAILYARD_FAULT_NETDEV").as_deref() != Ok("1") {
        say!("SKIP fault8_port_err_link_down: set RAILYARD_FAULT_NETDEV=1 (takes the RDMA netdev down; CI guests only)");
        return;
    }
    let Some(p) = pair("fault8_port_err_link_down", 2 * LEN, |_| {}) else {
        return;
    };
    let dev = p.a.e.device().to_owned();
    let netdev = netdev_of(&dev).expect("rdma link show names the netdev");
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(12, LEN));
    let ev0 = p.a.e.stats().async_events;
    ip_link(&netdev, "down");
    wait_for("PORT_ERR", || {
        p.a.gate
            .events
            .lock()
            .unwrap()
            .contains(&Effect::Quarantine)
    });
    let dev_snap = p.a.e.device_snapshot().unwrap();
    let seg_info = p.a.e.segment_info(p.seg).unwrap();
    ip_link(&netdev, "up");
    wait_for("the port to come back", || {
        std::process::Command::new("rdma")
            .args(["link", "show", &format!("{dev}/1")])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).contains("state ACTIVE"))
            .unwrap_or(false)
    });
    let events = p.a.e.stats().async_events - ev0;
    assert_eq!(dev_snap.health, Health::Quarantined, "{dev_snap:?}");
    assert!(
        !seg_info.active,
        "port scope retires the context's endpoints"
    );
    let k = classify_event(railyard_core::classify::event::PORT_ERR);
    // Recovery: cooldown → PROBING (new generation) → a probe on a rebuilt
    // endpoint → HEALTHY.
    wait_for("the segment to reconnect", || {
        p.a.e.reconnect_segment(p.seg).is_ok()
    });
    let data = pattern(13, LEN);
    p.a.mem.write_at(LEN, &data).unwrap();
    let batch = submit(&p.a.e, &[write_t(&p.a, &p.b, p.seg, LEN, LEN)]);
    assert_eq!(wait_batch(&p.a.e, batch), vec![TaskState::Completed]);
    assert_reads_back(&p.b, LEN, &data);
    p.a.e.free_batch(batch).unwrap();
    // Fatal evidence takes HEALTHY → SUSPECT → QUARANTINED inside one
    // controller call (two arrows; `illegal_transitions` stays 0, checked
    // below), so the sampled path shows HEALTHY then QUARANTINED.
    let dpath = p.a.gate.route_path(DEV);
    assert!(
        has_arrows(
            &dpath,
            &[
                Health::Healthy,
                Health::Quarantined,
                Health::Probing,
                Health::Healthy
            ]
        ),
        "{dpath:?}"
    );
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    say!(
        "FAULT s8_port_err event=PORT_ERR+PORT_ACTIVE(async_events={events}) class={:?} scope={:?} device_path={} refusals={} counters={counters} source=real",
        k.class,
        k.scope,
        p.a.gate.path_str(DEV),
        refusals(&p.a),
    );
}

/// **Scripted**: Soft-RoCE raises no `IBV_EVENT_QP_FATAL` on demand, so
/// the engine's async-event handling runs on a synthetic QP_FATAL for one
/// segment's QP (`Engine::fault_async_event`); the QPs themselves are
/// real. QP scope: only that endpoint is retired and only its route gets
/// one hard error; a second segment on the same device is untouched.
#[test]
fn fault8_scripted_qp_fatal_isolates_one_qp() {
    const LEN: usize = 128 * 1024;
    let Some(p) = pair("fault8_scripted_qp_fatal", 2 * LEN, |_| {}) else {
        return;
    };
    let c = node(base_config(), 2 * LEN).expect("third engine");
    let seg_c = p.a.e.open_segment(c.e.listen_addr()).unwrap();
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(14, LEN));
    write_and_verify(&p.a, &c, seg_c, 0, &pattern(15, LEN));
    let route = route_of(&p.a, p.seg);
    let ep_b = p.a.e.segment_info(p.seg).unwrap().endpoint;
    let ep_c = p.a.e.segment_info(seg_c).unwrap().endpoint;
    let before = snap(&p.a, p.seg);
    p.a.e
        .fault_async_event(railyard_core::classify::event::QP_FATAL, Some(p.seg))
        .unwrap();
    let after = snap(&p.a, p.seg);
    // One hard error on the route; the device domain untouched.
    assert_eq!(after.errors, before.errors + 1, "{after:?}");
    assert_eq!(after.health, Health::Suspect);
    assert_eq!(p.a.e.device_snapshot().unwrap().health, Health::Healthy);
    // Only the QP's endpoint was retired (then rebuilt automatically).
    assert_eq!(p.a.e.segment_info(seg_c).unwrap().endpoint, ep_c);
    assert!(p.a.e.segment_info(seg_c).unwrap().active);
    wait_for("the auto-reconnect", || {
        let i = p.a.e.segment_info(p.seg).unwrap();
        i.endpoint != ep_b && i.active
    });
    write_and_verify(&p.a, &p.b, p.seg, LEN, &pattern(16, LEN));
    write_and_verify(&p.a, &c, seg_c, LEN, &pattern(17, LEN));
    let k = classify_event(railyard_core::classify::event::QP_FATAL);
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    quiescent(&c, "second target");
    say!(
        "FAULT s8_qp_fatal event=QP_FATAL class={:?} scope={:?} path={} other_segment=untouched counters={counters} source=scripted",
        k.class,
        k.scope,
        p.a.gate.path_str(route),
    );
}

/// **Scripted**: on Soft-RoCE (Linux 6.1) `rdma link delete rxe0` raises no
/// `IBV_EVENT_DEVICE_FATAL`: rxe cannot disassociate user contexts, so the
/// delete blocks in the kernel until every process closed the device (seen
/// with `ibv_asyncwatch`). The engine's handling runs on a synthetic
/// DEVICE_FATAL instead. Device scope: the local device is quarantined and
/// every endpoint of the context retired; the peer (another engine) is not
/// declared failed; recovery goes through the cooldown, a reconnect and a
/// probe.
#[test]
fn fault8_scripted_device_fatal_isolates_the_local_device_only() {
    const LEN: usize = 128 * 1024;
    let Some(p) = pair("fault8_scripted_device_fatal", 2 * LEN, |_| {}) else {
        return;
    };
    write_and_verify(&p.a, &p.b, p.seg, 0, &pattern(18, LEN));
    let retired0 = p.a.e.stats().retired;
    p.a.e
        .fault_async_event(railyard_core::classify::event::DEVICE_FATAL, None)
        .unwrap();
    let dev = p.a.e.device_snapshot().unwrap();
    assert_eq!(dev.health, Health::Quarantined, "{dev:?}");
    assert!(!p.a.e.segment_info(p.seg).unwrap().active);
    assert_eq!(p.a.e.stats().retired - retired0, 1);
    // No automatic reconnect at device scope.
    assert_eq!(p.a.e.segment_info(p.seg).unwrap().reconnects, 0);
    // The peer is not declared failed: its device and endpoint are untouched.
    assert_eq!(p.b.e.device_snapshot().unwrap().health, Health::Healthy);
    let b_seg = *p.b.e.segments().first().unwrap();
    assert!(p.b.e.segment_info(b_seg).unwrap().active);
    // Recovery: reconnect, the probe (avoided until the cooldown ends).
    p.a.e.reconnect_segment(p.seg).unwrap();
    let avoids0 = p.a.e.stats().avoids;
    write_and_verify(&p.a, &p.b, p.seg, LEN, &pattern(19, LEN));
    // Avoided slices are parked until the cooldown deadline (issue #18):
    // a few avoids per quarantine (the first refusal, the epoch that first
    // records the deadline, the deadline itself), not one per worker round
    // (hundreds to thousands in a 300 ms cooldown before parking).
    let avoided = p.a.e.stats().avoids - avoids0;
    assert!(
        avoided <= 32,
        "{avoided} avoids in one cooldown: refused slices are re-tried in a loop"
    );
    assert_eq!(p.a.e.device_snapshot().unwrap().health, Health::Healthy);
    let dpath = p.a.gate.route_path(DEV);
    assert!(
        has_arrows(
            &dpath,
            &[
                Health::Healthy,
                Health::Quarantined,
                Health::Probing,
                Health::Healthy
            ]
        ),
        "{dpath:?}"
    );
    let k = classify_event(railyard_core::classify::event::DEVICE_FATAL);
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    say!(
        "FAULT s8_device_fatal event=DEVICE_FATAL class={:?} scope={:?} device_path={} peer=untouched refusals={} counters={counters} source=scripted (rdma link delete raises no event on rxe)",
        k.class,
        k.scope,
        p.a.gate.path_str(DEV),
        refusals(&p.a),
    );
}

// ---------------------------------------------------------------------------
// Selective signaling (issue #18 item 6): `signal_interval` > 1, so most
// work requests are posted unsignaled and completed by the CQE of a later
// one on their QP (`railyard_core::completion::PostOrder`).

const SIG_K: u32 = 8;
const SIG_N: usize = 256;
const SIG_LEN: usize = 4096;

fn signaled_pair(test: &str) -> Option<Pair> {
    pair(test, SIG_N * SIG_LEN, |c| {
        c.signal_interval = SIG_K;
        c.slice_size = SIG_LEN as u32;
    })
}

/// `SIG_N` 4 KiB WRITEs of a fresh pattern, one slice each, in one batch.
fn many_writes(p: &Pair, seed: u64) -> (BatchId, Vec<u8>) {
    let data = pattern(seed, SIG_N * SIG_LEN);
    p.a.mem.write_at(0, &data).unwrap();
    let ts: Vec<Transfer> = (0..SIG_N)
        .map(|i| write_t(&p.a, &p.b, p.seg, i * SIG_LEN, SIG_LEN))
        .collect();
    (submit(&p.a.e, &ts), data)
}

#[test]
fn signal_interval_every_slice_completes_exactly_once() {
    let Some(p) = signaled_pair("signal_exactly_once") else {
        return;
    };
    let before = p.a.e.stats();
    for round in 0..4u64 {
        let (batch, data) = many_writes(&p, 10 + round);
        let st = wait_batch(&p.a.e, batch);
        assert!(
            st.iter().all(|s| *s == TaskState::Completed),
            "round {round}: {st:?} {:?}",
            p.a.e.stats()
        );
        p.a.e.free_batch(batch).unwrap();
        assert_reads_back(&p.b, 0, &data);
    }
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    let s = p.a.e.stats();
    let posts = s.posts - before.posts;
    let cqes = s.completions - before.completions;
    // Every slice posted once (no retries), and it took fewer CQEs than
    // posts: requests really went unsignaled, and each was still
    // completed exactly once (no token, pin or CQ count left, no double
    // completion: `quiescent`).
    assert_eq!(s.retries, before.retries, "{s:?}");
    assert_eq!(posts, 4 * SIG_N as u64, "{s:?}");
    // Each doorbell chain signals every k-th request and its last, so a
    // success-only run polls at most one CQE per chain plus posts / k.
    // (A chain is one QP's run of a shard queue: in the dedicated-poller
    // model with 2 workers one poster's queue interleaves both QPs, so
    // chains are mostly single requests and all signaled.)
    let doorbells = s.doorbells - before.doorbells;
    assert!(
        cqes <= doorbells + posts / u64::from(SIG_K),
        "{cqes} CQEs for {posts} posts in {doorbells} doorbells at k={SIG_K}"
    );
    if doorbells * 2 <= posts {
        assert!(
            cqes < posts,
            "{cqes} CQEs for {posts} posts: nothing unsignaled"
        );
    }
    say!("SIGNAL exactly_once k={SIG_K} posts={posts} cqes={cqes} doorbells={doorbells} counters={counters}");
}

#[test]
fn signal_interval_wrong_rkey_releases_every_unsignaled_token() {
    let Some(p) = signaled_pair("signal_wrong_rkey") else {
        return;
    };
    let (b0, d0) = many_writes(&p, 30);
    assert!(wait_batch(&p.a.e, b0)
        .iter()
        .all(|s| *s == TaskState::Completed));
    p.a.e.free_batch(b0).unwrap();
    assert_reads_back(&p.b, 0, &d0);
    let before = p.a.e.stats();
    // The rkey goes bad with a whole batch about to stream: the first
    // request that reaches the responder fails (REM_ACCESS_ERR), the QP
    // goes to ERR and every request behind it, signaled or not, flushes.
    p.a.e.fault_corrupt_rkey(p.seg).unwrap();
    let (b1, d1) = many_writes(&p, 31);
    let st = wait_batch(&p.a.e, b1);
    p.a.e.fault_restore_rkey();
    let rem = p.a.gate.wc_count(wc::REM_ACCESS_ERR);
    assert!(rem >= 1, "no REM_ACCESS_ERR: {:?}", p.a.gate.errors_seen());
    // Every task retried onto the refreshed endpoint and completed; the
    // data is there.
    assert!(
        st.iter().all(|s| *s == TaskState::Completed),
        "{st:?} {:?}",
        p.a.e.stats()
    );
    p.a.e.free_batch(b1).unwrap();
    assert_reads_back(&p.b, 0, &d1);
    // Nothing leaked: tokens (the pool is full again), pins, QP depth, CQ
    // outstanding, permits, and no token completed twice.
    let counters = quiescent(&p.a, "initiator");
    quiescent(&p.b, "target");
    let s = p.a.e.stats();
    assert!(s.retries > before.retries, "{s:?}");
    say!(
        "SIGNAL wrong_rkey k={SIG_K} wc={} posts={} cqes={} retries={} stale={} counters={counters}",
        wcs_str(&p.a.gate.errors_seen()),
        s.posts - before.posts,
        s.completions - before.completions,
        s.retries - before.retries,
        s.stale_completions - before.stale_completions,
    );
}
