//! Receiver-advertised credits (RFC 2849) across two nodes: a receiver
//! engine with small capacities and a slow consumer on one node, two
//! sender engines in one process on the other, writing disjoint ranges
//! with read-back verification.
//!
//! ```text
//! credit_pair receiver <listen-addr:port>
//! credit_pair senders  <receiver-addr:port>
//! ```
//!
//! The receiver (`MC_RECEIVER_CREDIT=required`, 192 KiB / 4 requests /
//! 6 consumer slots) returns one consumer slot per sender every 4 ms,
//! samples its allocator (free + outstanding + fencing == capacity, Σ
//! outstanding ≤ capacity) every millisecond, and once every slice was
//! consumed verifies every byte and that it is idle, then prints
//! `credit_pair receiver: OK`. The senders (required too) each write
//! [`TASKS`] 40 KiB transfers, check that all completed, read them back,
//! check that every reservation was released and the engine is idle, and
//! print `credit_pair senders: OK`. `ci/rxe.sh` runs it across two
//! Soft-RoCE guests (`scripts/rxe-vm --two`). Exit code 0 on success, 1 on
//! any failure, 2 on usage.

use railyard_verbs::engine::{
    CreditPolicy, Engine, EngineConfig, Op, SegmentId, TaskState, Transfer,
};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Transfers per sender.
const TASKS: usize = 32;
/// Bytes per transfer (one slice).
const LEN: usize = 40 << 10;
/// Sender engines.
const SENDERS: usize = 2;
const TIMEOUT: Duration = Duration::from_secs(120);

type Res<T> = Result<T, String>;

fn pattern(sender: usize, task: usize) -> Vec<u8> {
    (0..LEN)
        .map(|i| ((i * 31 + task * 7 + sender * 101 + 5) % 251) as u8 + 1)
        .collect()
}

fn config() -> Res<EngineConfig> {
    let mut c = EngineConfig::from_env().map_err(|e| e.to_string())?;
    c.credit.policy = CreditPolicy::Required;
    c.credit.refresh = Duration::from_millis(20);
    c.credit.ttl = Duration::from_secs(3);
    Ok(c)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 || (args[1] != "receiver" && args[1] != "senders") {
        eprintln!("usage: credit_pair receiver|senders <addr:port>");
        std::process::exit(2);
    }
    let r = match args[2].parse::<SocketAddr>() {
        Ok(a) if args[1] == "receiver" => receiver(a),
        Ok(a) => senders(a),
        Err(e) => Err(format!("{}: {e}", args[2])),
    };
    match r {
        Ok(()) => println!("credit_pair {}: OK", args[1]),
        Err(e) => {
            eprintln!("credit_pair {}: FAILED: {e}", args[1]);
            std::process::exit(1);
        }
    }
}

fn receiver(listen: SocketAddr) -> Res<()> {
    let mut c = config()?;
    c.listen = listen;
    c.credit.bytes = 192 << 10;
    c.credit.requests = 4;
    c.credit.consumers = 6;
    let e = Engine::new(c).map_err(|e| e.to_string())?;
    let mem = e
        .alloc_memory(SENDERS * TASKS * LEN)
        .map_err(|e| e.to_string())?;
    println!(
        "credit_pair receiver: listening on {} ({}), region {:#x}",
        e.listen_addr(),
        e.device(),
        mem.addr()
    );
    let t0 = Instant::now();
    let (mut consumed, mut samples, mut peak) = (0u64, 0u64, 0u64);
    let total = (SENDERS * TASKS) as u64;
    let mut last_consume = Instant::now();
    while consumed < total {
        if t0.elapsed() > TIMEOUT {
            return Err(format!("only {consumed} of {total} slices consumed"));
        }
        let s = e.credit_stats().ok_or("credit is off")?;
        for k in [0usize, 1, 3] {
            let m = &s.receiver;
            if m.free[k] + m.outstanding[k] + m.fencing[k] != s.capacity[k] {
                return Err(format!("resource {k} not conserved: {m:?}"));
            }
            let sum: u64 = s.peers.iter().map(|p| p.receiver_outstanding[k]).sum();
            if sum > s.capacity[k] {
                return Err(format!("Σ outstanding {sum} > capacity {}", s.capacity[k]));
            }
        }
        if s.receiver.violations != 0 || s.malformed != 0 {
            return Err(format!("violations / malformed frames: {s:?}"));
        }
        peak = peak.max(s.receiver.outstanding[3]);
        samples += 1;
        // The slow consumer: one slot per sender every 4 ms.
        if last_consume.elapsed() >= Duration::from_millis(4) {
            last_consume = Instant::now();
            for p in s.peers.iter().filter(|p| p.receiver_consumable > 0) {
                if e.consume(SegmentId(p.segment), 1).is_ok() {
                    consumed += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut got = vec![0u8; LEN];
    for s in 0..SENDERS {
        for t in 0..TASKS {
            mem.read_at((s * TASKS + t) * LEN, &mut got)
                .map_err(|e| e.to_string())?;
            if got != pattern(s, t) {
                return Err(format!("sender {s} task {t}: bytes differ"));
            }
        }
    }
    // The senders read back after writing: stay up until both closed
    // their engines (their control channels end).
    while e.credit_stats().map_or(0, |s| s.channels_lost) < SENDERS as u64 {
        if t0.elapsed() > TIMEOUT {
            return Err("the senders did not finish".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if !e.wait_idle(TIMEOUT) {
        return Err(format!("not idle: {:?}", e.stats()));
    }
    let s = e.credit_stats().ok_or("credit is off")?;
    println!(
        "credit_pair receiver: {consumed} slices consumed, {samples} samples, peak consumer slots out {peak}/{}, {} frames sent, {} received",
        s.capacity[3], s.frames_sent, s.frames_received
    );
    Ok(())
}

fn senders(peer: SocketAddr) -> Res<()> {
    let engines: Vec<Engine> = (0..SENDERS)
        .map(|_| Engine::new(config()?).map_err(|e| e.to_string()))
        .collect::<Res<_>>()?;
    std::thread::scope(|sc| {
        let runs: Vec<_> = engines
            .iter()
            .enumerate()
            .map(|(i, e)| sc.spawn(move || send_one(i, e, peer)))
            .collect();
        runs.into_iter()
            .map(|r| r.join().map_err(|_| "a sender panicked".to_string())?)
            .collect::<Res<Vec<()>>>()
    })?;
    Ok(())
}

fn send_one(i: usize, e: &Engine, peer: SocketAddr) -> Res<()> {
    let t0 = Instant::now();
    let seg = loop {
        match e.open_segment(peer) {
            Ok(s) => break s,
            Err(err) if t0.elapsed() < Duration::from_secs(30) => {
                eprintln!("credit_pair senders: {i}: connecting: {err}; retrying");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(err) => return Err(err.to_string()),
        }
    };
    let remote = *e
        .segment_regions(seg)
        .map_err(|e| e.to_string())?
        .first()
        .ok_or("the receiver exported no memory")?;
    let local = e.alloc_memory(2 * TASKS * LEN).map_err(|e| e.to_string())?;
    let at = |t: usize| remote.addr + ((i * TASKS + t) * LEN) as u64;
    let mut ts = Vec::new();
    for t in 0..TASKS {
        local
            .write_at(t * LEN, &pattern(i, t))
            .map_err(|e| e.to_string())?;
        ts.push(Transfer {
            op: Op::Write,
            local: local.addr() + (t * LEN) as u64,
            len: LEN as u64,
            segment: seg,
            remote_offset: at(t),
        });
    }
    let b = e.allocate_batch(TASKS).map_err(|e| e.to_string())?;
    e.submit(b, &ts).map_err(|e| e.to_string())?;
    wait(e, b)?;
    let stalled = (0..TASKS)
        .filter(|&t| matches!(e.task_backpressure(b, t), Ok(Some(_))))
        .count();
    e.free_batch(b).map_err(|e| e.to_string())?;
    // Read everything back into the second half and compare.
    let rs: Vec<Transfer> = (0..TASKS)
        .map(|t| Transfer {
            op: Op::Read,
            local: local.addr() + ((TASKS + t) * LEN) as u64,
            len: LEN as u64,
            segment: seg,
            remote_offset: at(t),
        })
        .collect();
    let b = e.allocate_batch(TASKS).map_err(|e| e.to_string())?;
    e.submit(b, &rs).map_err(|e| e.to_string())?;
    wait(e, b)?;
    e.free_batch(b).map_err(|e| e.to_string())?;
    let mut got = vec![0u8; LEN];
    for t in 0..TASKS {
        local
            .read_at((TASKS + t) * LEN, &mut got)
            .map_err(|e| e.to_string())?;
        if got != pattern(i, t) {
            return Err(format!("sender {i}: read-back of task {t} differs"));
        }
    }
    if !e.wait_idle(TIMEOUT) {
        return Err(format!("sender {i} not idle: {:?}", e.stats()));
    }
    let s = e.credit_stats().ok_or("credit is off")?;
    if !s.sender_idle() || s.sender.violations != 0 || s.malformed != 0 {
        return Err(format!("sender {i}: credit not settled: {s:?}"));
    }
    println!(
        "credit_pair senders: {i}: {TASKS} WRITEs + READs verified, {stalled} tasks credit-stalled, {} updates applied",
        s.sender.updates_applied
    );
    Ok(())
}

fn wait(e: &Engine, b: railyard_verbs::engine::BatchId) -> Res<()> {
    let t0 = Instant::now();
    loop {
        let st = e.batch_status(b).map_err(|e| e.to_string())?;
        if st.iter().all(|s| s.state.is_terminal()) {
            if let Some(bad) = st.iter().find(|s| s.state != TaskState::Completed) {
                return Err(format!("a task ended {:?}", bad.state));
            }
            return Ok(());
        }
        if t0.elapsed() > TIMEOUT {
            return Err(format!("batch did not finish: {st:?}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
