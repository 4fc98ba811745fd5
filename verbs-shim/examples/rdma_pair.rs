//! Two-process (two-node) smoke test of the shim: a target and an initiator
//! connect one RC QP through the TCP descriptor handshake; the initiator
//! RDMA-WRITEs patterns, READs them back and verifies them, then measures a
//! short stream of 64 KiB WRITEs. The target checks its memory at the end.
//!
//! ```text
//! rdma_pair target    <bind-addr:port>   [device] [gid-index]
//! rdma_pair initiator <target-addr:port> [device] [gid-index]
//! ```
//!
//! `ci/rxe.sh` runs it across two Soft-RoCE guests (`scripts/rxe-vm --two`).
//! Exit code 0 on success, 1 on any failure (with a message), 2 on usage.

use railyard_verbs::handshake::Handshake;
use railyard_verbs::wire::{EndpointDescriptor, QpEndpoint};
use railyard_verbs::{
    Access, CompletionQueue, Context, MemoryRegion, QpCaps, QpConfig, QueuePair, RdmaOp, RdmaWr,
    RemoteQp, WorkCompletion, MAX_POST_BATCH, PORT_ACTIVE, WC_SUCCESS,
};
use std::net::TcpListener;
use std::time::{Duration, Instant};

const REGION: usize = 20 << 20;
const SIZES: &[(usize, usize, u64)] = &[
    (1, 0, 0),
    (4095, 3, 5),
    (65_537, 1, 8191),
    (8 << 20, 64, (1 << 17) + 4099),
];
const STREAM_BYTES: usize = 64 << 10;
const STREAM_COUNT: usize = 512;
const TIMEOUT: Duration = Duration::from_secs(60);

type Res<T> = Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 || (args[1] != "target" && args[1] != "initiator") {
        eprintln!("usage: rdma_pair target|initiator <addr:port> [device] [gid-index]");
        std::process::exit(2);
    }
    let r = run(
        &args[1],
        &args[2],
        args.get(3).map(String::as_str),
        args.get(4),
    );
    if let Err(e) = r {
        eprintln!("rdma_pair {}: FAILED: {e}", args[1]);
        std::process::exit(1);
    }
}

fn pattern(case: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 29 + case * 13 + 3) % 251) as u8 + 1)
        .collect()
}

struct Node {
    ctx: Context,
    cfg: QpConfig,
    cq: CompletionQueue,
    qp: QueuePair,
    mr: MemoryRegion,
    psn: u32,
}

fn node(dev: Option<&str>, gid: Option<&String>, psn: u32) -> Res<Node> {
    let ctx = Context::open(dev).map_err(|e| e.to_string())?;
    let port = ctx.port(1).map_err(|e| e.to_string())?;
    if port.state != PORT_ACTIVE {
        return Err(format!("port 1 of {} is not active", ctx.name()));
    }
    let gid_index = match gid {
        Some(g) => g.parse().map_err(|_| format!("bad gid index {g:?}"))?,
        None => 1,
    };
    let cfg = QpConfig {
        gid_index,
        mtu: port.active_mtu.ok_or("no active MTU")?,
        ..QpConfig::default()
    };
    let pd = ctx.alloc_pd().map_err(|e| e.to_string())?;
    let cq = ctx.create_cq(1024).map_err(|e| e.to_string())?;
    let qp = QueuePair::create_rc(
        &pd,
        &cq,
        &cq,
        QpCaps {
            max_send_wr: 512,
            ..QpCaps::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mr = MemoryRegion::alloc(&pd, REGION, Access::ALL_RDMA).map_err(|e| e.to_string())?;
    Ok(Node {
        ctx,
        cfg,
        cq,
        qp,
        mr,
        psn,
    })
}

impl Node {
    fn descriptor(&self) -> Res<EndpointDescriptor> {
        Ok(EndpointDescriptor {
            gid: self
                .ctx
                .gid(1, self.cfg.gid_index)
                .map_err(|e| e.to_string())?,
            lid: 0,
            qps: vec![QpEndpoint {
                qpn: self.qp.qpn(),
                psn: self.psn,
            }],
            segments: vec![self.mr.descriptor()],
        })
    }

    fn connect(&mut self, peer: &EndpointDescriptor) -> Res<()> {
        let qp = *peer.qps.first().ok_or("peer sent no QP")?;
        let remote = RemoteQp {
            qp,
            gid: peer.gid,
            lid: peer.lid,
        };
        self.qp
            .connect(&self.cfg, self.psn, &remote)
            .map_err(|e| e.to_string())
    }

    fn drain(&self, n: usize) -> Res<()> {
        let mut wcs = [WorkCompletion::default(); 32];
        let (mut got, start) = (0, Instant::now());
        while got < n {
            let k = self
                .cq
                .poll(&mut wcs[..(n - got).min(32)])
                .map_err(|e| e.to_string())?;
            if let Some(bad) = wcs[..k].iter().find(|w| w.status != WC_SUCCESS) {
                return Err(format!("completion failed: {bad:?}"));
            }
            got += k;
            if start.elapsed() > TIMEOUT {
                return Err(format!("only {got}/{n} completions in {TIMEOUT:?}"));
            }
        }
        Ok(())
    }
}

fn run(role: &str, addr: &str, dev: Option<&str>, gid: Option<&String>) -> Res<()> {
    if role == "target" {
        let mut n = node(dev, gid, 0x00_7a76)?;
        let l = TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
        println!("rdma_pair target: {} listening on {addr}", n.ctx.name());
        let hs = Handshake::accept(&l, TIMEOUT).map_err(|e| e.to_string())?;
        let (peer, mut hs) = hs
            .exchange_as_target(&n.descriptor()?)
            .map_err(|e| e.to_string())?;
        n.connect(&peer)?;
        hs.barrier().map_err(|e| e.to_string())?; // both in RTS
        hs.barrier().map_err(|e| e.to_string())?; // initiator done
        for (case, &(len, _, ro)) in SIZES.iter().enumerate() {
            let mut got = vec![0u8; len];
            n.mr.read_at(ro as usize, &mut got)
                .map_err(|e| e.to_string())?;
            if got != pattern(case, len) {
                return Err(format!("case {case}: target memory differs"));
            }
        }
        println!(
            "rdma_pair target: OK, memory verified for {} cases",
            SIZES.len()
        );
        return Ok(());
    }

    let mut n = node(dev, gid, 0x00_1417)?;
    // The target boots alongside us: retry until it listens.
    let start = Instant::now();
    let hs = loop {
        match Handshake::connect(addr, Duration::from_secs(5)) {
            Ok(h) => break h,
            Err(e) if start.elapsed() < TIMEOUT => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(format!("connect {addr}: {e}")),
        }
    };
    let (peer, mut hs) = hs
        .exchange_as_initiator(&n.descriptor()?)
        .map_err(|e| e.to_string())?;
    n.connect(&peer)?;
    hs.barrier().map_err(|e| e.to_string())?;
    let remote = peer.segments[0];
    // Remote ranges do not overlap (the target verifies each at the end);
    // read-backs land at the top of the local region, away from the sources.
    for (case, &(len, lo, ro)) in SIZES.iter().enumerate() {
        let data = pattern(case, len);
        n.mr.write_at(lo, &data).map_err(|e| e.to_string())?;
        // SAFETY: `n.mr` outlives the completion drained right after.
        unsafe {
            n.qp.post_write(case as u64, &n.mr, lo, len as u32, &remote, ro)
        }
        .map_err(|e| e.to_string())?;
        n.drain(1)?;
        let back_at = REGION - len - 1;
        // SAFETY: as above.
        unsafe {
            n.qp.post_read(100 + case as u64, &n.mr, back_at, len as u32, &remote, ro)
        }
        .map_err(|e| e.to_string())?;
        n.drain(1)?;
        let mut back = vec![0u8; len];
        n.mr.read_at(back_at, &mut back)
            .map_err(|e| e.to_string())?;
        if back != data {
            return Err(format!("case {case} ({len} B): read back differs"));
        }
    }
    println!(
        "rdma_pair initiator: WRITE+READ verified for {} sizes (1 B..8 MiB)",
        SIZES.len()
    );

    // A short WRITE stream into a scratch area past the verified ranges, in
    // batches of MAX_POST_BATCH, one signaled completion per request.
    let scratch = 9 << 20;
    let t0 = Instant::now();
    let mut posted = 0;
    while posted < STREAM_COUNT {
        let k = MAX_POST_BATCH.min(STREAM_COUNT - posted);
        let batch: Vec<RdmaWr> = (0..k)
            .map(|i| RdmaWr {
                wr_id: 1000 + (posted + i) as u64,
                op: RdmaOp::Write,
                local: &n.mr,
                local_off: 0,
                len: STREAM_BYTES as u32,
                remote,
                remote_off: scratch + ((posted + i) % 64 * STREAM_BYTES) as u64,
                signaled: true,
            })
            .collect();
        // SAFETY: `n.mr` outlives the completions drained right after.
        unsafe { n.qp.post_batch(&batch) }.map_err(|e| e.to_string())?;
        n.drain(k)?;
        posted += k;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "rdma_pair initiator: {STREAM_COUNT} x {STREAM_BYTES} B WRITEs in {secs:.2}s = {:.1} MB/s (batches of {MAX_POST_BATCH}, drained per batch)",
        (STREAM_COUNT * STREAM_BYTES) as f64 / secs / 1e6
    );
    if n.cq.outstanding() != 0 {
        return Err(format!(
            "{} completions still outstanding",
            n.cq.outstanding()
        ));
    }
    hs.barrier().map_err(|e| e.to_string())?;
    println!("rdma_pair initiator: OK");
    Ok(())
}
