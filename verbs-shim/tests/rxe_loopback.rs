//! Real-verbs tests: two RC QPs on one device (Soft-RoCE `rxe0` in CI),
//! connected through the TCP descriptor handshake over loopback.
//!
//! Without an RDMA device each test prints a `SKIP` line and passes; with
//! `RAILYARD_REQUIRE_RDMA=1` it fails instead (that is how `ci/rxe.sh` runs
//! them, inside the guest `scripts/rxe-vm` boots).
//!
//! Environment: `RAILYARD_RDMA_DEVICE` (default: first device),
//! `RAILYARD_GID_INDEX` (default 1, the IPv4-mapped RoCE v2 GID).

use railyard_verbs::handshake::Handshake;
use railyard_verbs::wire::{EndpointDescriptor, QpEndpoint};
use railyard_verbs::{
    Access, CompletionQueue, Context, MemoryRegion, ProtectionDomain, QpCaps, QpConfig, QpState,
    QueuePair, RdmaOp, RdmaWr, RemoteQp, VerbsError, WorkCompletion, MAX_POST_BATCH, PORT_ACTIVE,
    WC_SUCCESS,
};
use std::io::Write;
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const PORT: u8 = 1;
const HS_TIMEOUT: Duration = Duration::from_secs(30);
const CQ_TIMEOUT: Duration = Duration::from_secs(60);
/// `IBV_WC_REM_ACCESS_ERR`.
const WC_REM_ACCESS_ERR: u32 = 10;

/// Writes a line straight to stderr, past libtest's output capture, so SKIP
/// and RAN lines are on screen (and in CI logs) even for passing tests.
macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

fn require_rdma() -> bool {
    std::env::var("RAILYARD_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

/// Opens the test device, or returns None after printing a SKIP line.
fn open_or_skip(test: &str) -> Option<Context> {
    let name = std::env::var("RAILYARD_RDMA_DEVICE").ok();
    match Context::open(name.as_deref()) {
        Ok(c) => Some(c),
        Err(VerbsError::NoDevice) if !require_rdma() => {
            say!(
                "SKIP {test}: no RDMA device found (run through ci/rxe.sh, or set \
                 RAILYARD_REQUIRE_RDMA=1 to fail instead of skipping)"
            );
            None
        }
        Err(e) => panic!(
            "{test}: cannot open RDMA device: {e} (RAILYARD_REQUIRE_RDMA=1 or a device exists)"
        ),
    }
}

fn config(ctx: &Context) -> QpConfig {
    let gid_index = std::env::var("RAILYARD_GID_INDEX")
        .ok()
        .map(|v| v.parse().expect("RAILYARD_GID_INDEX must be 0..=255"))
        .unwrap_or(1);
    let port = ctx.port(PORT).expect("ibv_query_port");
    assert_eq!(
        port.state,
        PORT_ACTIVE,
        "port {PORT} of {} is not active",
        ctx.name()
    );
    let caps = ctx.caps().expect("ibv_query_device");
    let cap = |v: u32| u8::try_from(v.clamp(1, 16)).unwrap_or(16);
    QpConfig {
        gid_index,
        mtu: port.active_mtu.expect("port reports an active MTU"),
        max_rd_atomic: cap(caps.max_qp_init_rd_atom),
        max_dest_rd_atomic: cap(caps.max_qp_rd_atom),
        ..QpConfig::default()
    }
}

/// Shape of one side.
#[derive(Clone, Copy)]
struct Shape {
    mr_len: usize,
    n_qps: usize,
    max_send_wr: u32,
}

/// One end of a connection: its own context, PD, one CQ shared by its QPs,
/// `n_qps` RC QPs and one MR.
struct Side {
    ctx: Context,
    pd: ProtectionDomain,
    cfg: QpConfig,
    cq: CompletionQueue,
    qps: Vec<QueuePair>,
    mr: MemoryRegion,
    psn_base: u32,
}

impl Side {
    fn new(ctx: Context, shape: Shape, psn_base: u32) -> Self {
        let cfg = config(&ctx);
        let pd = ctx.alloc_pd().expect("ibv_alloc_pd");
        let cq = ctx.create_cq(1024).expect("ibv_create_cq");
        let caps = QpCaps {
            max_send_wr: shape.max_send_wr,
            ..QpCaps::default()
        };
        let qps: Vec<QueuePair> = (0..shape.n_qps)
            .map(|_| QueuePair::create_rc(&pd, &cq, &cq, caps).expect("ibv_create_qp"))
            .collect();
        for qp in &qps {
            assert_eq!(qp.state(), QpState::Reset);
            assert!(qp.caps().max_send_wr >= shape.max_send_wr);
        }
        let mr = MemoryRegion::alloc(&pd, shape.mr_len, Access::ALL_RDMA).expect("ibv_reg_mr");
        Self {
            ctx,
            pd,
            cfg,
            cq,
            qps,
            mr,
            psn_base,
        }
    }

    /// Distinct 24-bit PSNs per QP, so a mixed-up QP order cannot connect.
    fn psn(&self, i: usize) -> u32 {
        (self.psn_base + 0x1111 * i as u32) & 0xff_ffff
    }

    fn descriptor(&self) -> EndpointDescriptor {
        EndpointDescriptor {
            gid: self
                .ctx
                .gid(PORT, self.cfg.gid_index)
                .expect("ibv_query_gid"),
            lid: self.ctx.port(PORT).expect("ibv_query_port").lid,
            qps: (0..self.qps.len())
                .map(|i| QpEndpoint {
                    qpn: self.qps[i].qpn(),
                    psn: self.psn(i),
                })
                .collect(),
            segments: vec![self.mr.descriptor()],
        }
    }

    fn connect(&mut self, peer: &EndpointDescriptor) {
        assert_eq!(peer.qps.len(), self.qps.len(), "peer QP count");
        let psns: Vec<u32> = (0..self.qps.len()).map(|i| self.psn(i)).collect();
        for ((qp, remote), psn) in self.qps.iter_mut().zip(&peer.qps).zip(psns) {
            let remote = RemoteQp {
                qp: *remote,
                gid: peer.gid,
                lid: peer.lid,
            };
            qp.connect(&self.cfg, psn, &remote)
                .expect("INIT -> RTR -> RTS");
            assert_eq!(qp.state(), QpState::Rts);
        }
    }
}

/// Polls until one completion arrives (or panics after CQ_TIMEOUT).
fn wait_one(cq: &CompletionQueue) -> WorkCompletion {
    let start = Instant::now();
    let mut wc = [WorkCompletion::default(); 1];
    loop {
        if cq.poll(&mut wc).expect("ibv_poll_cq") == 1 {
            return wc[0];
        }
        assert!(
            start.elapsed() < CQ_TIMEOUT,
            "no completion within {CQ_TIMEOUT:?} (outstanding {})",
            cq.outstanding()
        );
        thread::yield_now();
    }
}

/// Deterministic, position- and case-dependent bytes (never all-zero, so a
/// transfer that did nothing cannot pass against zeroed memory).
fn pattern(case: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + case * 17 + 1) % 251) as u8 + 1)
        .collect()
}

/// A connected pair: `init` in this thread, the target in `target`, which
/// waits at a final barrier and then hands its Side back.
struct Pair {
    init: Side,
    /// The target's descriptor, as the handshake delivered it.
    peer: EndpointDescriptor,
    hs: Handshake,
    target: thread::JoinHandle<Side>,
}

fn connect_pair(ctx: Context, init: Shape, target: Shape) -> Pair {
    let (init_shape, target_shape) = (init, target);
    let (tx, rx) = mpsc::channel();
    let target_ctx = Context::open(Some(ctx.name())).expect("open the device a second time");
    let target = thread::spawn(move || {
        let mut side = Side::new(target_ctx, target_shape, 0x00_5eed);
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        tx.send(l.local_addr().unwrap()).unwrap();
        let hs = Handshake::accept(&l, HS_TIMEOUT).expect("accept");
        let (peer, mut hs) = hs
            .exchange_as_target(&side.descriptor())
            .expect("target exchange");
        side.connect(&peer);
        hs.barrier().expect("target: RTS barrier");
        // The initiator works now; wait until it is done.
        hs.barrier().expect("target: done barrier");
        side
    });
    let addr = rx.recv_timeout(HS_TIMEOUT).expect("target listening");
    let mut init = Side::new(ctx, init_shape, 0xabcdef);
    let hs = Handshake::connect(addr, HS_TIMEOUT).expect("connect");
    let (peer, mut hs) = hs
        .exchange_as_initiator(&init.descriptor())
        .expect("initiator exchange");
    assert_eq!(peer.segments.len(), 1);
    init.connect(&peer);
    hs.barrier().expect("initiator: RTS barrier");
    Pair {
        init,
        peer,
        hs,
        target,
    }
}

/// One QP, 256-deep send queue, `mr_len` bytes.
fn one(mr_len: usize) -> Shape {
    Shape {
        mr_len,
        n_qps: 1,
        max_send_wr: 256,
    }
}

/// (len, local offset, remote offset): 1 B to 8 MiB, unaligned offsets.
const CASES: &[(usize, usize, u64)] = &[
    (1, 0, 0),
    (7, 3, 5),
    (64, 1, 4093),
    (4095, 5, 1),
    (4096, 0, 4096),
    (65_537, 13, 7),
    ((1 << 20) + 3, 4099, 12_345),
    (8 << 20, 64, 999),
];

#[test]
fn rdma_write_then_read_back_verifies() {
    let Some(ctx) = open_or_skip("rdma_write_then_read_back_verifies") else {
        return;
    };
    let t0 = Instant::now();
    // Lay the cases out back to back: each gets its own local source, local
    // read-back destination and remote range.
    let mut src_at = Vec::new();
    let mut remote_at = Vec::new();
    // Remote ranges start after a 64-byte guard so the byte before each is checkable.
    let (mut lcur, mut rcur) = (0usize, 64u64);
    for &(len, lo, ro) in CASES {
        src_at.push(lcur + lo);
        remote_at.push(rcur + ro);
        lcur += lo + len + 64;
        rcur += ro + len as u64 + 64;
    }
    let dst_base = lcur;
    let pair = connect_pair(ctx, one(2 * lcur), one(rcur as usize));
    let Pair {
        init,
        peer,
        mut hs,
        target,
    } = pair;
    let remote = peer.segments[0];
    assert_eq!(remote.len, rcur);

    // Bounds are checked before anything is posted, and nothing leaks.
    // SAFETY: `init.mr` outlives every completion polled in this test.
    unsafe {
        let e = init.qps[0]
            .post_write(1, &init.mr, init.mr.len() - 3, 4, &remote, 0)
            .unwrap_err();
        assert!(
            matches!(e, VerbsError::OutOfBounds { side: "local", .. }),
            "{e}"
        );
        let e = init.qps[0]
            .post_read(1, &init.mr, 0, 4, &remote, remote.len - 3)
            .unwrap_err();
        assert!(
            matches!(e, VerbsError::OutOfBounds { side: "remote", .. }),
            "{e}"
        );
        let e = init.qps[0]
            .post_write(1, &init.mr, 0, 0, &remote, 0)
            .unwrap_err();
        assert_eq!(e, VerbsError::ZeroLength);
    }
    assert_eq!(init.cq.outstanding(), 0);

    for (case, &(len, _, _)) in CASES.iter().enumerate() {
        let data = pattern(case, len);
        init.mr.write_at(src_at[case], &data).unwrap();
        let wr = 1000 + 2 * case as u64;
        let n = u32::try_from(len).unwrap();
        // SAFETY: `init.mr` lives until after this completion is polled below.
        unsafe { init.qps[0].post_write(wr, &init.mr, src_at[case], n, &remote, remote_at[case]) }
            .expect("post RDMA WRITE");
        assert_eq!(init.cq.outstanding(), 1);
        let wc = wait_one(&init.cq);
        assert_eq!(
            (wc.wr_id, wc.status),
            (wr, WC_SUCCESS),
            "write case {case} ({len} B): {wc:?}"
        );
        assert_eq!(wc.qp_num, init.qps[0].qpn());

        let dst = dst_base + src_at[case] + 1; // a different, odd offset
                                               // SAFETY: as above.
        unsafe { init.qps[0].post_read(wr + 1, &init.mr, dst, n, &remote, remote_at[case]) }
            .expect("post RDMA READ");
        let wc = wait_one(&init.cq);
        assert_eq!(
            (wc.wr_id, wc.status),
            (wr + 1, WC_SUCCESS),
            "read case {case} ({len} B): {wc:?}"
        );
        assert_eq!(wc.byte_len as usize, len, "READ byte_len");
        let mut back = vec![0u8; len];
        init.mr.read_at(dst, &mut back).unwrap();
        assert!(
            back == data,
            "case {case}: {len} B read back differ from what was written"
        );
    }
    assert_eq!(
        init.cq.outstanding(),
        0,
        "CQ outstanding must return to zero"
    );
    assert_eq!(init.cq.unexpected_completions(), 0);

    hs.barrier().expect("initiator: done barrier");
    let t = target.join().expect("target thread");
    // The target's memory holds exactly what was written, and the bytes
    // around each range are untouched (still zero).
    for (case, &(len, _, _)) in CASES.iter().enumerate() {
        let at = remote_at[case] as usize;
        let mut got = vec![0u8; len + 2];
        t.mr.read_at(at - 1, &mut got).unwrap();
        assert_eq!(got[0], 0, "case {case}: byte before the range was written");
        assert_eq!(
            got[len + 1],
            0,
            "case {case}: byte after the range was written"
        );
        assert!(
            got[1..=len] == pattern(case, len)[..],
            "case {case}: target memory differs"
        );
    }
    assert_eq!(t.cq.outstanding(), 0);
    say!(
        "RAN rdma_write_then_read_back_verifies on {}: {} cases, 1 B..8 MiB, in {:?}",
        init.ctx.name(),
        CASES.len(),
        t0.elapsed()
    );
}

#[test]
fn many_outstanding_writes_drain_to_zero() {
    let Some(ctx) = open_or_skip("many_outstanding_writes_drain_to_zero") else {
        return;
    };
    let t0 = Instant::now();
    const N: usize = 200; // below max_send_wr = 256
    const LEN: usize = 4099;
    let Pair {
        init,
        peer,
        mut hs,
        target,
    } = connect_pair(ctx, one(N * LEN), one(N * LEN));
    let remote = peer.segments[0];
    for i in 0..N {
        init.mr.write_at(i * LEN, &pattern(i, LEN)).unwrap();
    }
    for i in 0..N {
        // SAFETY: `init.mr` outlives the completions drained below.
        unsafe {
            init.qps[0].post_write(
                i as u64,
                &init.mr,
                i * LEN,
                LEN as u32,
                &remote,
                (i * LEN) as u64,
            )
        }
        .expect("post");
    }
    assert_eq!(init.cq.outstanding(), N as u64);
    let mut seen = [false; N];
    let mut wcs = [WorkCompletion::default(); 64];
    let start = Instant::now();
    let mut got = 0;
    while got < N {
        let n = init.cq.poll(&mut wcs).unwrap();
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WC_SUCCESS, "{wc:?}");
            let i = usize::try_from(wc.wr_id).unwrap();
            assert!(!seen[i], "wr_id {i} completed twice");
            seen[i] = true;
        }
        got += n;
        assert!(start.elapsed() < CQ_TIMEOUT, "only {got}/{N} completions");
        if n == 0 {
            thread::yield_now();
        }
    }
    assert_eq!(init.cq.outstanding(), 0);
    assert_eq!(init.cq.unexpected_completions(), 0);
    hs.barrier().unwrap();
    let t = target.join().unwrap();
    for i in 0..N {
        let mut b = vec![0u8; LEN];
        t.mr.read_at(i * LEN, &mut b).unwrap();
        assert!(b == pattern(i, LEN), "write {i} landed wrong");
    }
    say!(
        "RAN many_outstanding_writes_drain_to_zero: {N} x {LEN} B in {:?}",
        t0.elapsed()
    );
}

#[test]
fn bad_rkey_completes_with_error_and_flushes_to_zero() {
    let Some(ctx) = open_or_skip("bad_rkey_completes_with_error_and_flushes_to_zero") else {
        return;
    };
    let Pair {
        mut init,
        peer,
        mut hs,
        target,
    } = connect_pair(ctx, one(8192), one(8192));
    let mut bad = peer.segments[0];
    bad.rkey ^= 0x00ff_ff00; // a key the target never issued
                             // SAFETY: `init.mr` outlives the completions polled below.
    unsafe { init.qps[0].post_read(7, &init.mr, 0, 64, &bad, 0) }.expect("post");
    // SAFETY: as above.
    unsafe { init.qps[0].post_write(8, &init.mr, 64, 64, &peer.segments[0], 0) }.expect("post");
    let first = wait_one(&init.cq);
    assert_eq!(first.wr_id, 7);
    assert_eq!(first.status, WC_REM_ACCESS_ERR, "{first:?}");
    // The device moved the QP to ERR by itself; the cached state cannot know.
    assert_eq!(init.qps[0].state(), QpState::Rts);
    assert_eq!(
        init.qps[0].query_state().expect("ibv_query_qp"),
        QpState::Error
    );
    assert_eq!(init.qps[0].state(), QpState::Error);
    // The QP is now in error; what follows is flushed (or, if it raced ahead,
    // succeeded). Move it to ERR explicitly and drain: nothing may stay
    // outstanding.
    init.qps[0].to_error().expect("to ERR");
    let second = wait_one(&init.cq);
    assert_eq!(second.wr_id, 8);
    assert_ne!(second.status, WC_REM_ACCESS_ERR);
    assert_eq!(init.cq.outstanding(), 0);
    // SAFETY: as above.
    let e = unsafe { init.qps[0].post_write(9, &init.mr, 0, 1, &peer.segments[0], 0) }.unwrap_err();
    assert!(
        matches!(e, VerbsError::WrongState { state: "ERR", .. }),
        "{e}"
    );
    assert_eq!(init.cq.outstanding(), 0);
    hs.barrier().unwrap();
    target.join().unwrap();
    say!("RAN bad_rkey_completes_with_error_and_flushes_to_zero");
}

#[test]
fn discovery_reports_the_device_or_skips() {
    let Some(ctx) = open_or_skip("discovery_reports_the_device_or_skips") else {
        return;
    };
    let devs = railyard_verbs::devices().expect("devices() with a device open");
    assert!(devs.iter().any(|d| d.name == ctx.name()), "{devs:?}");
    let gid = ctx.gid(PORT, config(&ctx).gid_index).unwrap();
    assert_ne!(gid, [0; 16], "GID index must be populated");
    let e = Context::open(Some("railyard-no-such-device")).unwrap_err();
    assert!(matches!(e, VerbsError::DeviceNotFound { .. }), "{e}");
    say!("RAN discovery_reports_the_device_or_skips: {devs:?}, gid {gid:02x?}");
}

/// Drains exactly `n` completions, all successful, each wr_id once; returns
/// them in arrival order.
fn drain(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::with_capacity(n);
    let mut wcs = [WorkCompletion::default(); 32];
    let start = Instant::now();
    while out.len() < n {
        let k = cq.poll(&mut wcs[..(n - out.len()).min(32)]).unwrap();
        for wc in &wcs[..k] {
            assert_eq!(wc.status, WC_SUCCESS, "{wc:?}");
            assert!(
                out.iter().all(|o: &WorkCompletion| o.wr_id != wc.wr_id),
                "wr_id {} twice",
                wc.wr_id
            );
            out.push(*wc);
        }
        assert!(
            start.elapsed() < CQ_TIMEOUT,
            "only {}/{n} completions",
            out.len()
        );
        if k == 0 {
            thread::yield_now();
        }
    }
    out
}

#[test]
fn four_qps_per_endpoint_each_carry_traffic() {
    let Some(ctx) = open_or_skip("four_qps_per_endpoint_each_carry_traffic") else {
        return;
    };
    const Q: usize = 4;
    const LEN: usize = 65_536 + 5;
    let shape = Shape {
        mr_len: 2 * Q * LEN,
        n_qps: Q,
        max_send_wr: 64,
    };
    let Pair {
        init,
        peer,
        mut hs,
        target,
    } = connect_pair(ctx, shape, shape);
    assert_eq!(peer.qps.len(), Q);
    let remote = peer.segments[0];
    // QP i writes region i; then QP (i+1)%Q reads it back: every QP pairing
    // must have been wired to the right peer QP for the data to line up.
    for i in 0..Q {
        init.mr.write_at(i * LEN, &pattern(100 + i, LEN)).unwrap();
        // SAFETY: `init.mr` outlives the completions drained below.
        unsafe {
            init.qps[i].post_write(
                i as u64,
                &init.mr,
                i * LEN,
                LEN as u32,
                &remote,
                (i * LEN) as u64,
            )
        }
        .unwrap();
    }
    let wcs = drain(&init.cq, Q);
    for wc in &wcs {
        assert_eq!(
            wc.qp_num,
            init.qps[wc.wr_id as usize].qpn(),
            "completion on the wrong QP"
        );
    }
    for i in 0..Q {
        let reader = &init.qps[(i + 1) % Q];
        // SAFETY: as above.
        unsafe {
            reader.post_read(
                10 + i as u64,
                &init.mr,
                (Q + i) * LEN,
                LEN as u32,
                &remote,
                (i * LEN) as u64,
            )
        }
        .unwrap();
    }
    drain(&init.cq, Q);
    for i in 0..Q {
        let mut b = vec![0u8; LEN];
        init.mr.read_at((Q + i) * LEN, &mut b).unwrap();
        assert!(b == pattern(100 + i, LEN), "QP {i}: read back differs");
    }
    assert_eq!(init.cq.outstanding(), 0);
    hs.barrier().unwrap();
    target.join().unwrap();
    say!("RAN four_qps_per_endpoint_each_carry_traffic: {Q} QPs x {LEN} B");
}

#[test]
fn batch_post_refused_tail_is_reported_and_reposted() {
    let Some(ctx) = open_or_skip("batch_post_refused_tail_is_reported_and_reposted") else {
        return;
    };
    const LEN: usize = 1000;
    let shape = Shape {
        mr_len: 4 * MAX_POST_BATCH * LEN,
        n_qps: 1,
        max_send_wr: 8,
    };
    let Pair {
        init,
        peer,
        mut hs,
        target,
    } = connect_pair(ctx, shape, shape);
    let remote = peer.segments[0];
    let qp = &init.qps[0];
    let depth = qp.caps().max_send_wr as usize;
    assert!(
        depth < 3 * MAX_POST_BATCH,
        "provider granted a {depth}-deep SQ; test expects < {}",
        3 * MAX_POST_BATCH
    );
    for i in 0..4 * MAX_POST_BATCH {
        init.mr.write_at(i * LEN, &pattern(300 + i, LEN)).unwrap();
    }
    let wr = |i: usize| RdmaWr {
        wr_id: i as u64,
        op: RdmaOp::Write,
        local: &init.mr,
        local_off: i * LEN,
        len: LEN as u32,
        remote,
        remote_off: (i * LEN) as u64,
        signaled: true,
    };

    // A bad request anywhere in the batch: nothing is posted.
    let mut bad_batch: Vec<RdmaWr> = (0..4).map(wr).collect();
    bad_batch[2].remote_off = remote.len;
    // SAFETY: `init.mr` outlives every completion drained in this test.
    let e = unsafe { qp.post_batch(&bad_batch) }.unwrap_err();
    assert_eq!(e.posted, 0);
    assert!(
        matches!(e.error, VerbsError::OutOfBounds { side: "remote", .. }),
        "{e}"
    );
    assert_eq!(init.cq.outstanding(), 0);

    // Fill the send queue without polling until the provider refuses part
    // of a batch: the refused tail is reported by index, never counted.
    let mut next = 0;
    let refused = loop {
        let batch: Vec<RdmaWr> = (next..next + MAX_POST_BATCH / 2).map(wr).collect();
        // SAFETY: as above.
        match unsafe { qp.post_batch(&batch) } {
            Ok(()) => next += batch.len(),
            Err(e) => {
                assert!(e.posted < batch.len(), "{e}");
                assert!(
                    matches!(
                        e.error,
                        VerbsError::Os {
                            op: "ibv_post_send",
                            ..
                        }
                    ),
                    "{e}"
                );
                next += e.posted;
                break batch.len() - e.posted;
            }
        }
        assert!(
            next <= 3 * MAX_POST_BATCH,
            "send queue of {depth} never filled"
        );
    };
    assert!(
        next >= depth.min(8),
        "only {next} posted before refusal; depth {depth}"
    );
    assert_eq!(
        init.cq.outstanding(),
        next as u64,
        "only posted requests are outstanding"
    );
    drain(&init.cq, next);
    assert_eq!(init.cq.outstanding(), 0);
    // The refused tail is the caller's to retry: post it now, it completes.
    let tail: Vec<RdmaWr> = (next..next + refused.min(MAX_POST_BATCH)).map(wr).collect();
    // SAFETY: as above.
    unsafe { qp.post_batch(&tail) }.unwrap();
    drain(&init.cq, tail.len());
    assert_eq!(init.cq.outstanding(), 0);
    assert_eq!(init.cq.unexpected_completions(), 0);
    let total = next + tail.len();
    hs.barrier().unwrap();
    let t = target.join().unwrap();
    for i in 0..total {
        let mut b = vec![0u8; LEN];
        t.mr.read_at(i * LEN, &mut b).unwrap();
        assert!(b == pattern(300 + i, LEN), "write {i} landed wrong");
    }
    say!("RAN batch_post_refused_tail_is_reported_and_reposted: SQ depth {depth}, refused after {next}, {refused} re-posted");
}

#[test]
fn caller_memory_registration_is_a_read_target() {
    let Some(ctx) = open_or_skip("caller_memory_registration_is_a_read_target") else {
        return;
    };
    const LEN: usize = 12_345;
    let Pair {
        init,
        peer,
        mut hs,
        target,
    } = connect_pair(ctx, one(2 * LEN), one(2 * LEN));
    let remote = peer.segments[0];
    let data = pattern(900, LEN);
    init.mr.write_at(7, &data).unwrap();
    // SAFETY: `init.mr` outlives the completion drained below.
    unsafe { init.qps[0].post_write(1, &init.mr, 7, LEN as u32, &remote, 3) }.unwrap();
    drain(&init.cq, 1);

    // Memory the shim does not own (as an engine's KV-cache pool would be).
    let mut pool = vec![0u8; LEN + 10].into_boxed_slice();
    // SAFETY: `pool` outlives `ext` (dropped below, before `pool` is read
    // again) and is not touched through references while `ext` lives.
    let ext = unsafe {
        MemoryRegion::register(&init.pd, pool.as_mut_ptr(), pool.len(), Access::ALL_RDMA)
    }
    .expect("register caller memory");
    assert_eq!(ext.addr(), pool.as_ptr() as u64);
    // SAFETY: `ext` (and `pool` behind it) outlive the completion drained below.
    unsafe { init.qps[0].post_read(2, &ext, 5, LEN as u32, &remote, 3) }.unwrap();
    drain(&init.cq, 1);
    assert_eq!(init.cq.outstanding(), 0);
    drop(ext);
    assert_eq!(
        &pool[..5],
        &[0; 5],
        "bytes before the READ target were touched"
    );
    assert!(
        pool[5..5 + LEN] == data[..],
        "READ into caller memory differs"
    );
    assert_eq!(
        &pool[5 + LEN..],
        &[0; 5],
        "bytes after the READ target were touched"
    );
    hs.barrier().unwrap();
    target.join().unwrap();
    say!("RAN caller_memory_registration_is_a_read_target");
}
