//! The run itself (needs the `verbs` feature): the server waits for one
//! client, starts its engine with the client's QPs per endpoint and
//! registers the memory asked for; the client opens the server's segment
//! and drives `--threads` submitter threads per size, then reports.

use super::args::{fmt_size, BenchArgs, Op, Plan, Stop, WaitMode, MAX_BUFFER};
use super::control::{recv, send, wire, Msg};
use super::report::{
    cpu_times, header, histogram, peak_rate, print_report, table, Latency, Report, SizeResult,
};
use super::BenchError;
use railyard_verbs::engine::{
    BatchId, CcMode, Engine, EngineConfig, EngineStats, Op as EOp, SegmentId, TaskState, Transfer,
    WorkerModel,
};
use railyard_verbs::MemoryRegion;
use std::collections::VecDeque;
use std::io::{BufReader, IsTerminal as _};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether progress lines go to stderr.
pub fn progress_enabled(a: &BenchArgs) -> bool {
    !a.quiet && std::io::stderr().is_terminal()
}

fn engine(a: &BenchArgs, listen: SocketAddr, qps: Option<u16>) -> Result<Engine, BenchError> {
    let mut c = EngineConfig::from_env()?;
    if let Some(d) = &a.ib_dev {
        // `-d` wins over MC_RDMA_DEVICE(S), a device list included.
        c.device = Some(d.clone());
        c.devices.clear();
    }
    if let Some(g) = a.gid_index {
        c.gid_index = g as u8;
    }
    if let Some(q) = qps.or(a.qp.map(|q| q as u16)) {
        c.qps_per_endpoint = q;
    }
    c.listen = listen;
    Ok(Engine::new(c)?)
}

fn cc_name(m: CcMode) -> &'static str {
    match m {
        CcMode::Off => "off",
        CcMode::Observe => "observe",
        CcMode::Enforce => "enforce",
    }
}

fn report_base(a: &BenchArgs, e: &Engine, p: &Plan) -> Report {
    let c = e.config();
    Report {
        format: 1,
        op: match a.op {
            Op::Write => "write".into(),
            Op::Read => "read".into(),
        },
        device: e.device().to_string(),
        peer: p.peer.clone(),
        threads: p.threads,
        batch_size: p.batch,
        depth: p.depth,
        qps_per_endpoint: u64::from(c.qps_per_endpoint),
        slice_bytes: u64::from(c.slice_size),
        workers: u64::from(c.workers),
        worker_model: match c.worker_model {
            WorkerModel::Shared => "shared".into(),
            WorkerModel::DedicatedPoller => "dedicated-poller".into(),
        },
        cc_mode: cc_name(c.cc.mode).into(),
        cc_compiled_in: railyard_core::cc::Controller::compiled_in(),
        buffer_bytes: p.buffer,
        verified: a.verify,
        latency_mode: p.latency,
        wait: match p.wait {
            WaitMode::Block => "block".into(),
            WaitMode::Poll => "poll".into(),
        },
        results: vec![],
    }
}

/// `--metrics FILE`: the engine's snapshot ([`Engine::snapshot`]:
/// stats and every route's CC state) as one JSON object, with the
/// side that wrote it.
fn write_metrics(a: &BenchArgs, e: &Engine, role: &str) -> Result<(), BenchError> {
    let Some(path) = &a.metrics else {
        return Ok(());
    };
    let j = serde_json::json!({ "format": 1, "role": role, "device": e.device(),
        "snapshot": e.snapshot() });
    let text = serde_json::to_string_pretty(&j).expect("the snapshot serializes");
    std::fs::write(path, text + "\n").map_err(|source| BenchError::Metrics {
        path: path.clone(),
        source,
    })
}

/// The server: one client, then exit. Its engine starts when the
/// client has said what it needs (memory, QPs per endpoint).
pub(super) fn server(a: &BenchArgs) -> Result<(), BenchError> {
    let ctl = SocketAddr::new(a.listen, a.port as u16);
    let listener =
        TcpListener::bind(ctl).map_err(|source| BenchError::Listen { addr: ctl, source })?;
    if !a.quiet && !a.json {
        println!("railyard bench server: waiting for a client on {ctl}");
    }
    let (stream, from) = listener
        .accept()
        .map_err(|source| BenchError::Accept { addr: ctl, source })?;
    let mut w = stream.try_clone().map_err(BenchError::Socket)?;
    let mut r = BufReader::new(stream);
    // A refusal is also the client's `error` message.
    let mut refuse = |e: BenchError| {
        let _ = send(
            &mut w,
            &Msg::Error {
                message: e.to_string(),
            },
        );
        Err(e)
    };
    let (buffer_bytes, qps) = match recv(&mut r)? {
        Some(Msg::Hello {
            version: 1,
            buffer_bytes,
            qps_per_endpoint,
        }) if (1..=MAX_BUFFER).contains(&buffer_bytes) => (buffer_bytes, qps_per_endpoint),
        Some(m) => {
            return refuse(BenchError::UnexpectedFirst {
                from,
                message: wire(&m),
            })
        }
        None => return Err(BenchError::ClosedAtOnce { from }),
    };
    if let Some(q) = a.qp.filter(|&q| q != u64::from(qps)) {
        return refuse(BenchError::QpMismatch {
            server: q,
            client: qps,
        });
    }
    let e = match engine(a, SocketAddr::new(a.listen, 0), Some(qps)) {
        Ok(e) => e,
        Err(err) => return refuse(BenchError::ServerEngine(Box::new(err))),
    };
    let mem = match e.alloc_memory(buffer_bytes as usize) {
        Ok(m) => m,
        Err(source) => {
            return refuse(BenchError::ServerMemory {
                bytes: buffer_bytes,
                source,
            })
        }
    };
    send(
        &mut w,
        &Msg::Ready {
            engine_port: e.listen_addr().port(),
        },
    )?;
    if !a.quiet && !a.json {
        println!(
            "railyard bench server: client {from}; device {}, QPs/endpoint {}, serving {} at {:#x}, engine handshake port {}",
            e.device(),
            e.config().qps_per_endpoint,
            fmt_size(mem.len() as u64),
            mem.addr(),
            e.listen_addr().port()
        );
    }
    // Receiver credit (MC_RECEIVER_CREDIT, RFC 2849): the server is the
    // receiver of a WRITE bench and its "application" consumes what
    // was written at once, returning the consumer slots.
    let stop = AtomicBool::new(false);
    let done = std::thread::scope(|sc| {
        let consumer = e
            .credit_stats()
            .map(|_| sc.spawn(|| consume_all(&e, &stop)));
        let got = recv(&mut r);
        stop.store(true, Ordering::Release);
        if let Some((peak, slots)) = consumer.and_then(|c| c.join().ok()) {
            if let Some(st) = e.credit_stats() {
                eprintln!(
                    "railyard bench server: credit: peak receiver occupancy {peak} B, {slots} consumer slots returned, {} control frames sent, {} received, {} violations",
                    st.frames_sent,
                    st.frames_received,
                    st.receiver.violations + st.sender.violations
                );
            }
        }
        got
    });
    write_metrics(a, &e, "server")?;
    match done? {
        Some(Msg::Done { report }) => {
            print_report(a, &report, "client");
            Ok(())
        }
        Some(Msg::Error { message }) => Err(BenchError::ClientFailed(message)),
        Some(m) => Err(BenchError::UnexpectedMessage {
            from,
            message: wire(&m),
        }),
        None => Err(BenchError::ClientGone { from }),
    }
}

/// Returns every consumer slot the senders reported written, every
/// millisecond, until `stop`; the peak DATA_BYTES the senders held of
/// this receiver's capacity, and the slots returned.
fn consume_all(e: &Engine, stop: &AtomicBool) -> (u64, u64) {
    let (mut peak, mut slots) = (0u64, 0u64);
    while !stop.load(Ordering::Acquire) {
        if let Some(st) = e.credit_stats() {
            peak = peak.max(st.receiver.outstanding[0]);
            for p in st.peers.iter().filter(|p| p.receiver_consumable > 0) {
                if e.consume(SegmentId(p.segment), p.receiver_consumable)
                    .is_ok()
                {
                    slots += p.receiver_consumable;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    (peak, slots)
}

fn connect(peer: &str) -> Result<TcpStream, BenchError> {
    let addrs: Vec<SocketAddr> = peer
        .to_socket_addrs()
        .map_err(|source| BenchError::Resolve {
            peer: peer.to_string(),
            source,
        })?
        .collect();
    let first = *addrs.first().ok_or_else(|| BenchError::NoAddress {
        peer: peer.to_string(),
    })?;
    // The server may still be opening its device: retry refused
    // connections for a while.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match TcpStream::connect_timeout(&first, Duration::from_secs(10)) {
            Ok(s) => return Ok(s),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(source) => {
                return Err(BenchError::Unreachable {
                    peer: peer.to_string(),
                    source,
                })
            }
        }
    }
}

/// The client: connect, run every size, report.
pub(super) fn client(a: &BenchArgs, p: &Plan) -> Result<(), BenchError> {
    let stream = connect(&p.peer)?;
    let server_ip = stream.peer_addr().map_err(BenchError::Socket)?.ip();
    let mut w = stream.try_clone().map_err(BenchError::Socket)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(BenchError::Socket)?;
    let mut r = BufReader::new(stream);
    let e = engine(a, "0.0.0.0:0".parse().expect("an address"), None)?;
    let max = *p.sizes.iter().max().expect("a size");
    let local = e
        .alloc_memory(p.buffer as usize)
        .map_err(|source| BenchError::LocalMemory {
            bytes: p.buffer,
            source,
        })?;
    let scratch = if a.verify {
        Some(e.alloc_memory((max * p.threads) as usize)?)
    } else {
        None
    };
    send(
        &mut w,
        &Msg::Hello {
            version: 1,
            buffer_bytes: p.buffer,
            qps_per_endpoint: e.config().qps_per_endpoint,
        },
    )?;
    let port = match recv(&mut r)? {
        Some(Msg::Ready { engine_port }) => engine_port,
        Some(Msg::Error { message }) => return Err(BenchError::ServerRefused(message)),
        Some(m) => return Err(BenchError::UnexpectedAnswer { message: wire(&m) }),
        None => return Err(BenchError::ServerClosed),
    };
    let result = (|| -> Result<Report, BenchError> {
        let seg = e
            .open_segment(SocketAddr::new(server_ip, port))
            .map_err(BenchError::OpenSegment)?;
        let remote = *e
            .segment_regions(seg)?
            .first()
            .ok_or(BenchError::NoRemoteMemory)?;
        if remote.len < p.buffer {
            return Err(BenchError::RemoteTooSmall {
                exported: remote.len,
                needed: p.buffer,
            });
        }
        let mut rep = report_base(a, &e, p);
        if !a.quiet && !a.json {
            print!("{}", header(&rep, "client"));
        }
        let side = Side {
            e: &e,
            seg,
            local: &local,
            remote: remote.addr,
            scratch: scratch.as_deref(),
            stride: max,
            how: p.wait,
        };
        if a.verify && a.op == Op::Read {
            side.seed(p.buffer)?;
        }
        for &size in &p.sizes {
            rep.results.push(run_size(a, p, &side, size)?);
        }
        if let Some(c) = e.credit_stats() {
            let p = c.peers.iter().find(|x| x.segment == seg.0);
            eprintln!(
                "railyard bench client: credit {:?}: stall {} ms over {} refusals, {} updates applied, {} control frames sent, {} received, {} violations",
                p.and_then(|x| x.negotiated),
                p.map_or(0, |x| x.stall_ns / 1_000_000),
                p.map_or(0, |x| x.stalls),
                c.sender.updates_applied,
                c.frames_sent,
                c.frames_received,
                c.sender.violations
            );
        }
        if !e.wait_idle(Duration::from_secs(10)) {
            let s = e.stats();
            return Err(BenchError::NotIdle {
                tokens: s.tokens_in_use,
                endpoint_posts: s.endpoint_outstanding,
                qp_depth: s.qp_depth,
                cq: s.cq_outstanding,
            });
        }
        Ok(rep)
    })();
    let out = match result {
        Ok(rep) => {
            send(
                &mut w,
                &Msg::Done {
                    report: Box::new(rep.clone()),
                },
            )?;
            if a.quiet || a.json {
                print_report(a, &rep, "client");
            } else {
                print!("{}", table(&rep, a.report_gbits));
            }
            Ok(())
        }
        Err(err) => {
            let _ = send(
                &mut w,
                &Msg::Error {
                    message: err.to_string(),
                },
            );
            Err(err)
        }
    };
    // The final snapshot, also (especially) of a run that failed.
    let m = write_metrics(a, &e, "client");
    out.and(m)
}

/// Both buffers and the segment, shared by the threads.
struct Side<'a> {
    e: &'a Engine,
    seg: SegmentId,
    local: &'a MemoryRegion,
    remote: u64,
    /// `--verify`: one block of the largest size per thread.
    scratch: Option<&'a MemoryRegion>,
    /// The largest size (each thread's scratch stride).
    stride: u64,
    /// Sleep or busy-poll until a batch is done.
    how: WaitMode,
}

fn pattern(off: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let x = (off + i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (x >> 56) as u8
        })
        .collect()
}

impl Side<'_> {
    fn wait(&self, b: BatchId) -> Result<(), BenchError> {
        let limit = Duration::from_secs(60);
        let done = match self.how {
            // A blocking wait (issue #18): the waiter sleeps until the
            // task it watches settles instead of yielding and napping,
            // leaving the cores to the workers (and, on Soft-RoCE, to the
            // kernel doing the NIC's work).
            WaitMode::Block => self.e.wait_batch(b, limit)?,
            // No wake-up inside the round trip (perftest spins on its CQ
            // the same way), one core spinning.
            WaitMode::Poll => {
                let start = Instant::now();
                let mut spins = 0u32;
                loop {
                    if self.e.batch_done(b)? {
                        break true;
                    }
                    spins = spins.wrapping_add(1);
                    if spins % 4096 == 0 && start.elapsed() > limit {
                        break false;
                    }
                    std::hint::spin_loop();
                }
            }
        };
        if !done {
            return Err(BenchError::BatchTimeout);
        }
        let st = self.e.batch_status(b)?;
        if let Some(bad) = st.iter().find(|s| s.state != TaskState::Completed) {
            let how = match bad.state {
                TaskState::Failed => "failed",
                TaskState::Timeout => "timed out",
                TaskState::Canceled => "was canceled",
                _ => "did not complete",
            };
            return Err(BenchError::TransferFailed {
                how,
                moved: bad.transferred_bytes,
                total: bad.total_bytes,
            });
        }
        Ok(self.e.free_batch(b)?)
    }

    fn one(&self, op: EOp, local: u64, len: u64, remote_off: u64) -> Result<(), BenchError> {
        let b = self.e.allocate_batch(1)?;
        let t = Transfer {
            op,
            local,
            len,
            segment: self.seg,
            remote_offset: self.remote + remote_off,
        };
        self.e.submit(b, &[t])?;
        self.wait(b)
    }

    /// For `--op read --verify`: write the pattern to the server.
    fn seed(&self, len: u64) -> Result<(), BenchError> {
        self.local.write_at(0, &pattern(0, len as usize))?;
        self.one(EOp::Write, self.local.addr(), len, 0)
    }

    /// Checks the block at `off` of `len` bytes (thread `t`'s scratch).
    fn verify(&self, t: u64, off: u64, len: u64, op: Op) -> Result<(), BenchError> {
        let scratch = self.scratch.expect("allocated with --verify");
        let s_off = t * self.stride;
        self.one(EOp::Read, scratch.addr() + s_off, len, off)?;
        let mut got = vec![0u8; len as usize];
        scratch.read_at(s_off as usize, &mut got)?;
        let mut here = vec![0u8; len as usize];
        self.local.read_at(off as usize, &mut here)?;
        let want = pattern(off, len as usize);
        let ok = match op {
            Op::Write => got == here,
            Op::Read => got == want && here == want,
        };
        if ok {
            Ok(())
        } else {
            Err(BenchError::VerifyFailed { len, offset: off })
        }
    }
}

/// Totals every thread adds to.
struct Shared {
    bytes: AtomicU64,
    abort: AtomicBool,
    /// Bytes submitted and not yet completed, over every thread.
    inflight: AtomicU64,
    /// The most `inflight` ever held.
    peak_inflight: AtomicU64,
}

impl Shared {
    /// `n` bytes were submitted.
    fn submitted(&self, n: u64) {
        let now = self.inflight.fetch_add(n, Ordering::Relaxed) + n;
        self.peak_inflight.fetch_max(now, Ordering::Relaxed);
    }

    /// `n` bytes completed.
    fn completed(&self, n: u64) {
        self.inflight.fetch_sub(n, Ordering::Relaxed);
    }
}

fn thread_run(
    a: &BenchArgs,
    p: &Plan,
    side: &Side<'_>,
    size: u64,
    t: u64,
    shared: &Shared,
    end: Option<Instant>,
) -> Result<(u64, u64, hdrhistogram::Histogram<u64>), BenchError> {
    let e = side.e;
    let base = t * p.per_thread();
    let slots = p.slots(size);
    let op = match a.op {
        Op::Write => EOp::Write,
        Op::Read => EOp::Read,
    };
    let mut left = match p.stop {
        Stop::Transfers(n) => n,
        Stop::Seconds(_) => u64::MAX,
    };
    let offset = |slot: u64, k: u64| base + ((slot * p.batch + k) % slots) * size;
    let submit = |slot: u64, n: u64| -> Result<BatchId, BenchError> {
        let b = e.allocate_batch(n as usize)?;
        let ts: Vec<Transfer> = (0..n)
            .map(|k| Transfer {
                op,
                local: side.local.addr() + offset(slot, k),
                len: size,
                segment: side.seg,
                remote_offset: side.remote + offset(slot, k),
            })
            .collect();
        e.submit(b, &ts)?;
        Ok(b)
    };
    if a.verify && a.op == Op::Write {
        for slot in 0..slots.min(p.depth * p.batch) {
            let off = base + slot * size;
            side.local
                .write_at(off as usize, &pattern(off, size as usize))?;
        }
    }
    let mut hist = histogram();
    let (mut transfers, mut batches) = (0u64, 0u64);
    let mut inflight: VecDeque<(BatchId, u64, u64, Instant)> = VecDeque::new();
    let more = |left: u64| left > 0 && end.map_or(true, |end| Instant::now() < end);
    for slot in 0..p.depth {
        if !more(left) {
            break;
        }
        let n = left.min(p.batch);
        inflight.push_back((submit(slot, n)?, slot, n, Instant::now()));
        shared.submitted(n * size);
        left -= n;
    }
    while let Some((b, slot, n, t0)) = inflight.pop_front() {
        if shared.abort.load(Ordering::Relaxed) {
            return Err(BenchError::OtherThreadFailed);
        }
        side.wait(b)?;
        let _ = hist.record((t0.elapsed().as_nanos() as u64).max(1));
        shared.completed(n * size);
        transfers += n;
        batches += 1;
        shared.bytes.fetch_add(n * size, Ordering::Relaxed);
        if a.verify {
            for k in 0..n {
                side.verify(t, offset(slot, k), size, a.op)?;
            }
        }
        if more(left) {
            let n = left.min(p.batch);
            inflight.push_back((submit(slot, n)?, slot, n, Instant::now()));
            shared.submitted(n * size);
            left -= n;
        }
    }
    Ok((transfers, batches, hist))
}

fn delta(b: &EngineStats, s: &EngineStats) -> (u64, u64, u64, u64, u64) {
    (
        s.posts - b.posts,
        s.doorbells - b.doorbells,
        s.completions - b.completions,
        s.deferrals - b.deferrals,
        s.retries - b.retries,
    )
}

fn run_size(a: &BenchArgs, p: &Plan, side: &Side<'_>, size: u64) -> Result<SizeResult, BenchError> {
    let e = side.e;
    let shared = Shared {
        bytes: AtomicU64::new(0),
        abort: AtomicBool::new(false),
        inflight: AtomicU64::new(0),
        peak_inflight: AtomicU64::new(0),
    };
    let before = e.stats();
    let cpu0 = cpu_times();
    let start = Instant::now();
    let end = match p.stop {
        Stop::Seconds(s) => Some(start + Duration::from_secs(s)),
        Stop::Transfers(_) => None,
    };
    let progress = progress_enabled(a);
    let tick = Duration::from_millis(100);
    let (outs, samples) = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..p.threads)
            .map(|t| {
                let shared = &shared;
                sc.spawn(move || {
                    let r = thread_run(a, p, side, size, t, shared, end);
                    if r.is_err() {
                        shared.abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        // This thread samples the byte counter (for the peak) and
        // shows progress on a terminal.
        let mut samples: Vec<(f64, u64)> = vec![(0.0, 0)];
        let mut last = start;
        let mut next_print = start + Duration::from_secs(1);
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
            let now = Instant::now();
            if now - last >= tick {
                samples.push((
                    (now - start).as_secs_f64(),
                    shared.bytes.load(Ordering::Relaxed),
                ));
                last = now;
            }
            if progress && now >= next_print {
                let b = shared.bytes.load(Ordering::Relaxed);
                eprint!(
                    "\r  {:>7} B  {:6.1} s  {:10.2} MiB/s average  ",
                    size,
                    (now - start).as_secs_f64(),
                    b as f64 / (now - start).as_secs_f64() / f64::from(1u32 << 20)
                );
                next_print += Duration::from_secs(1);
            }
        }
        if progress {
            eprint!("\r{:70}\r", "");
        }
        let outs: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(BenchError::ThreadPanicked)))
            .collect();
        samples.push((
            start.elapsed().as_secs_f64(),
            shared.bytes.load(Ordering::Relaxed),
        ));
        (outs, samples)
    });
    let secs = start.elapsed().as_secs_f64();
    let cpu1 = cpu_times();
    let mut hist = histogram();
    let (mut transfers, mut batches) = (0, 0);
    for o in outs {
        let (t, b, h) = o?;
        transfers += t;
        batches += b;
        hist.add(&h).map_err(BenchError::Histogram)?;
    }
    let bytes = transfers * size;
    let avg = bytes as f64 / secs;
    let mib = f64::from(1u32 << 20);
    let (user, sys) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let (posts, doorbells, completions, deferrals, retries) = delta(&before, &e.stats());
    Ok(SizeResult {
        bytes: size,
        iterations: transfers,
        batches,
        seconds: secs,
        bw_peak_mib_per_s: peak_rate(&samples).max(avg) / mib,
        bw_average_mib_per_s: avg / mib,
        bw_average_gbit_per_s: avg * 8.0 / 1e9,
        msg_rate_mops: transfers as f64 / secs / 1e6,
        batch_latency_us: Latency::of(&hist),
        cpu_user_s: user,
        cpu_sys_s: sys,
        cpu_s_per_gib: if bytes == 0 {
            0.0
        } else {
            (user + sys) / (bytes as f64 / f64::from(1u32 << 30))
        },
        cpu_us_per_transfer: if transfers == 0 {
            0.0
        } else {
            (user + sys) * 1e6 / transfers as f64
        },
        posts,
        doorbells,
        completions,
        deferrals,
        retries,
        peak_inflight_bytes: shared.peak_inflight.load(Ordering::Relaxed),
    })
}
