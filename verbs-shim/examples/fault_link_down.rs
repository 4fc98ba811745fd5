//! Fault scenario 5 of issue #7, across two Soft-RoCE guests: the peer
//! guest takes its link down (`ip link set eth0 down`) while the initiator
//! transfers to it.
//!
//! ```text
//! fault_link_down target    [netdev]        # node 1: engine on :18610, control on :18611
//! fault_link_down initiator <peer-ip> [ms]  # node 0
//! ```
//!
//! The initiator holds two routes on its device: one to the peer (remote
//! NIC) and one to a local engine on its own rxe0 (loopback, another route
//! domain). It checks that
//!
//! * the peer route times out (`RETRY_EXC_ERR`, RouteTimeout) and goes
//!   HEALTHY → SUSPECT → QUARANTINED (threshold 2, two QPs), while the
//!   loopback route keeps completing transfers, stays HEALTHY with no
//!   error, and the device domain is untouched (isolation at route scope);
//! * after the link is back, the segment reconnects (new generation), the
//!   route goes PROBING and back to HEALTHY through a successful bounded
//!   probe, and data written then read back over it is intact;
//! * every token, permit, QP-depth and CQ-outstanding counter is zero.
//!
//! It prints `FAULT s5_link_down ...` and exits 0, or 1 with a message.
//! `ci/rxe.sh` runs it with `scripts/rxe-vm --two`.

use railyard_core::classify::{classify_wc, wc};
use railyard_verbs::engine::{BatchId, Engine, Health, Op, SegmentId, TaskState, Transfer};
use railyard_verbs::MemoryRegion;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

const ENGINE_PORT: u16 = 18610;
const CONTROL_PORT: u16 = 18611;
const LEN: usize = 2 << 20;
const WAIT: Duration = Duration::from_secs(120);

type Res<T> = Result<T, String>;

// The tracing gate of the fault matrix (the real controller, plus every WC
// status and route (health, generation) change), shared with the tests.
#[path = "../tests/support/tracer.rs"]
mod tracer;
use tracer::{wcs_str, Tracer};

// The fault configuration, the control channel and `ip link`, shared with
// the soak.
#[path = "support/two_guests.rs"]
mod two_guests;
use two_guests::{fault_config, ip_link};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = match args.get(1).map(String::as_str) {
        Some("target") => target(args.get(2).map(String::as_str).unwrap_or("eth0")),
        Some("initiator") if args.len() >= 3 => initiator(
            &args[2],
            args.get(3).and_then(|m| m.parse().ok()).unwrap_or(6000),
        ),
        _ => {
            eprintln!("usage: fault_link_down target [netdev] | initiator <peer-ip> [down-ms]");
            std::process::exit(2);
        }
    };
    if let Err(e) = r {
        eprintln!("fault_link_down: FAIL: {e}");
        std::process::exit(1);
    }
}

/// Node 1: an engine to be written to, and a control socket: `down <ms>`
/// takes `netdev` down for that long; `exit` ends.
fn target(netdev: &str) -> Res<()> {
    let mut cfg = fault_config()?;
    cfg.listen = SocketAddr::from(([0, 0, 0, 0], ENGINE_PORT));
    let e = Engine::new(cfg).map_err(|e| e.to_string())?;
    let _mem = e.alloc_memory(2 * LEN).map_err(|e| e.to_string())?;
    let ctl = TcpListener::bind(("0.0.0.0", CONTROL_PORT)).map_err(|e| e.to_string())?;
    eprintln!("fault_link_down target: ready on :{ENGINE_PORT}, control :{CONTROL_PORT}");
    two_guests::serve(&ctl, Duration::from_secs(90), |cmd, mut s| {
        if let Some(ms) = cmd.strip_prefix("down ") {
            let ms: u64 = ms.parse().map_err(|_| format!("bad command {cmd:?}"))?;
            let _ = s.write_all(b"ok\n");
            drop(s);
            std::thread::sleep(Duration::from_millis(50));
            ip_link(netdev, "down")?;
            eprintln!("fault_link_down target: {netdev} down for {ms} ms");
            std::thread::sleep(Duration::from_millis(ms));
            ip_link(netdev, "up")?;
            eprintln!("fault_link_down target: {netdev} up");
        } else if cmd == "exit" {
            let _ = s.write_all(b"ok\n");
            return Ok(false);
        }
        Ok(true)
    })?;
    let st = e.stats();
    eprintln!(
        "fault_link_down target: OK (async events {}, endpoints retired {})",
        st.async_events, st.retired
    );
    Ok(())
}

fn control(peer: &str, cmd: &str) -> Res<()> {
    two_guests::send("", peer, CONTROL_PORT, cmd)
}

fn wait_batch(e: &Engine, b: BatchId) -> Res<TaskState> {
    let t0 = Instant::now();
    loop {
        let s = e.task_status(b, 0).map_err(|e| e.to_string())?;
        if s.state.is_terminal() {
            e.free_batch(b).map_err(|e| e.to_string())?;
            return Ok(s.state);
        }
        if t0.elapsed() > WAIT {
            return Err(format!("transfer did not finish: {s:?}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn run(e: &Engine, t: Transfer) -> Res<TaskState> {
    let b = e.allocate_batch(1).map_err(|e| e.to_string())?;
    e.submit(b, &[t]).map_err(|e| e.to_string())?;
    wait_batch(e, b)
}

/// WRITE `seed`'s pattern to `seg` at `remote`, READ it back elsewhere,
/// compare.
fn write_read(e: &Engine, mem: &MemoryRegion, seg: SegmentId, remote: u64, seed: u8) -> Res<()> {
    let data: Vec<u8> = (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    mem.write_at(0, &data).map_err(|e| e.to_string())?;
    mem.write_at(LEN, &vec![0u8; LEN])
        .map_err(|e| e.to_string())?;
    let w = Transfer {
        op: Op::Write,
        local: mem.addr(),
        len: LEN as u64,
        segment: seg,
        remote_offset: remote,
    };
    let st = run(e, w)?;
    if st != TaskState::Completed {
        return Err(format!("WRITE: {st:?}"));
    }
    let st = run(
        e,
        Transfer {
            op: Op::Read,
            local: mem.addr() + LEN as u64,
            ..w
        },
    )?;
    if st != TaskState::Completed {
        return Err(format!("READ: {st:?}"));
    }
    let mut back = vec![0u8; LEN];
    mem.read_at(LEN, &mut back).map_err(|e| e.to_string())?;
    (back == data)
        .then_some(())
        .ok_or("read-back differs".to_owned())
}

fn check(cond: bool, what: String) -> Res<()> {
    cond.then_some(()).ok_or(what)
}

fn initiator(peer: &str, down_ms: u64) -> Res<()> {
    let cfg = fault_config()?;
    let a = Engine::new(cfg.clone()).map_err(|e| e.to_string())?;
    let gate = Tracer::install(&a);
    let mem = a.alloc_memory(2 * LEN).map_err(|e| e.to_string())?;
    let local = Engine::new(cfg).map_err(|e| e.to_string())?;
    let local_mem = local.alloc_memory(2 * LEN).map_err(|e| e.to_string())?;
    // The peer's engine: its control socket opens only after its memory is
    // registered (regions are exported at handshake time).
    control(peer, "ping")?;
    let seg = two_guests::open_segment("", &a, peer, ENGINE_PORT)?;
    let seg_local = a
        .open_segment(local.listen_addr())
        .map_err(|e| e.to_string())?;
    let remote = a
        .segment_regions(seg)
        .map_err(|e| e.to_string())?
        .first()
        .ok_or("the peer exported no region")?
        .addr;
    let route = a.segment_info(seg).map_err(|e| e.to_string())?.route;
    let route_local = a.segment_info(seg_local).map_err(|e| e.to_string())?.route;
    check(route != route_local, "two routes expected".into())?;
    eprintln!(
        "RAN fault5_link_down on {} ({:?}); peer route {route}, loopback route {route_local}",
        a.device(),
        a.config().worker_model
    );
    write_read(&a, &mem, seg, remote, 1)?;
    write_read(&a, &mem, seg_local, local_mem.addr(), 2)?;

    // The peer's link goes down (`ip` may take a while to start under
    // TCG: wait until the peer stops answering).
    control(peer, &format!("down {down_ms}"))?;
    let t0 = Instant::now();
    loop {
        let addr: SocketAddr = format!("{peer}:{CONTROL_PORT}")
            .parse()
            .map_err(|e| format!("{e}"))?;
        if TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_err() {
            break;
        }
        check(
            t0.elapsed() < Duration::from_secs(30),
            "the peer link never went down".into(),
        )?;
        std::thread::sleep(Duration::from_millis(50));
    }
    let down_at = Instant::now();
    let b = a.allocate_batch(1).map_err(|e| e.to_string())?;
    a.submit(
        b,
        &[Transfer {
            op: Op::Write,
            local: mem.addr(),
            len: LEN as u64,
            segment: seg,
            remote_offset: remote,
        }],
    )
    .map_err(|e| e.to_string())?;
    // Meanwhile the loopback route keeps working.
    let mut local_ok = 0;
    while !a
        .task_status(b, 0)
        .map_err(|e| e.to_string())?
        .state
        .is_terminal()
    {
        write_read(&a, &mem, seg_local, local_mem.addr(), 3 + local_ok as u8)?;
        local_ok += 1;
        check(
            down_at.elapsed() < WAIT,
            "peer transfer never settled".into(),
        )?;
    }
    let st = wait_batch(&a, b)?;
    check(
        st == TaskState::Failed,
        format!("peer transfer during link down: {st:?}"),
    )?;
    check(
        gate.wc_count(wc::RETRY_EXC_ERR) >= 1,
        format!("no RETRY_EXC_ERR: {:?}", gate.wc.lock().unwrap()),
    )?;
    let path = gate.route_path(route);
    check(
        path.iter().any(|(h, _)| *h == Health::Quarantined),
        format!("peer route never QUARANTINED: {path:?}"),
    )?;
    // Isolation: the loopback route and the device are untouched.
    let lp = a
        .route_snapshot(seg_local)
        .map_err(|e| e.to_string())?
        .unwrap();
    check(
        lp.health == Health::Healthy && lp.errors == 0,
        format!("loopback route touched: {lp:?}"),
    )?;
    check(
        gate.route_path(route_local)
            .iter()
            .all(|(h, _)| *h == Health::Healthy),
        format!("loopback route path: {}", gate.path_str(route_local)),
    )?;
    let dev = a.device_snapshot().unwrap();
    check(
        dev.health == Health::Healthy,
        format!("device touched: {dev:?}"),
    )?;
    check(
        local_ok > 0,
        "no loopback transfer ran during the outage".into(),
    )?;

    // The link comes back: reconnect, probe, HEALTHY.
    let t0 = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        match a.reconnect_segment(seg) {
            Ok(_) => break,
            Err(e) if t0.elapsed() < WAIT => eprintln!("reconnect: {e}; retrying"),
            Err(e) => return Err(format!("reconnect: {e}")),
        }
    }
    write_read(&a, &mem, seg, remote, 99)?;
    let s = a.route_snapshot(seg).map_err(|e| e.to_string())?.unwrap();
    check(
        s.health == Health::Healthy,
        format!("peer route after recovery: {s:?}"),
    )?;
    let path = gate.route_path(route);
    // Sampled after each controller call: the two QPs' RETRY_EXC_ERRs may
    // be released concurrently by two pollers, so the sample can skip the
    // SUSPECT in between; every real step is checked by the controller
    // (`illegal_transitions` must stay 0, below).
    let want = [
        Health::Healthy,
        Health::Quarantined,
        Health::Probing,
        Health::Healthy,
    ];
    let mut i = 0;
    for (h, _) in &path {
        if i < want.len() && *h == want[i] {
            i += 1;
        }
    }
    check(i == want.len(), format!("peer route path: {path:?}"))?;
    // Quiescence.
    check(a.wait_idle(WAIT), "initiator never idle".into())?;
    let st = a.stats();
    let g = st.gate;
    let cc = a.cc_stats().unwrap();
    check(
        st.tokens_in_use == 0
            && st.endpoint_outstanding == 0
            && st.qp_depth == 0
            && st.cq_outstanding == 0
            && st.slices_pending == 0
            && st.bad_completions == 0
            && g.in_flight_bytes == 0
            && g.admitted == g.released
            && g.release_errors == 0
            && cc.illegal_transitions == 0,
        format!("not quiescent: {st:?} {cc:?}"),
    )?;
    control(peer, "exit")?;
    let k = classify_wc(wc::RETRY_EXC_ERR, 0);
    println!(
        "FAULT s5_link_down wc={} class={:?} scope={:?} path={} loopback_route={} (transfers during outage: {local_ok}) device={:?} counters=tokens=0,ep_outstanding=0,qp_depth=0,cq_outstanding=0,permits={}/{},inflight_bytes=0 source=real(two guests)",
        wcs_str(&gate.errors_seen()),
        k.class,
        k.scope,
        gate.path_str(route),
        gate.path_str(route_local),
        dev.health,
        g.admitted,
        g.released,
    );
    println!("fault_link_down initiator: OK");
    Ok(())
}
