//! `railyard bench`: an RDMA READ/WRITE benchmark over the railyard engine,
//! following ib_write_bw and Mooncake's transfer_engine_bench.
//!
//! ```text
//! node B$ railyard bench target    --listen 0.0.0.0:18515 -d rxe0 -s 65536 --duration 10
//! node A$ railyard bench initiator --peer B:18515 -d rxe0 -s 65536 --batch 32 --duration 5 --op write
//! ```
//!
//! The target registers a buffer and serves it (and prints its stats each
//! second) for `--duration` seconds plus a grace period; the initiator
//! connects, keeps `--depth` batches of `--batch` transfers of
//! `--block-size` bytes in flight for `--duration` seconds, prints progress
//! each second, then a summary: throughput, p50/p99 batch latency,
//! completions, and the CC state (mode, deferrals, avoids, in-flight bytes). `--verify` reads
//! every written block back (or checks every read block against a known
//! pattern) and compares.
//!
//! Engine knobs come from the `MC_*` environment (`MC_SLICE_SIZE`,
//! `MC_NUM_QP_PER_EP`, `MC_MAX_WR`, `MC_WORKERS_PER_CTX`,
//! `MC_RDMA_DEDICATED_POLLER`).

use std::process::ExitCode;

const HELP: &str = "usage: railyard bench <target|initiator> [options]

  -d, --device NAME       RDMA device (default: first; env MC_RDMA_DEVICE)
      --gid-index N       GID index (default 1, the RoCE v2 IPv4 GID)
  -s, --block-size BYTES  bytes per transfer (default 65536)
      --batch N           transfers per batch (default 32)
      --depth N           batches in flight (default 4)
      --duration SECS     run time (default 5)
      --op read|write     operation (default write)
      --verify            read back / compare every block (slow; correctness)
      --listen ADDR       target: handshake address (default 0.0.0.0:18515)
      --peer ADDR         initiator: the target's ADDR (host:port)
  -h, --help              this help

Engine settings come from MC_SLICE_SIZE, MC_NUM_QP_PER_EP, MC_MAX_WR,
MC_WORKERS_PER_CTX and MC_RDMA_DEDICATED_POLLER.
";

/// Which side of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Serves memory.
    Target,
    /// Drives traffic.
    Initiator,
}

/// Parsed options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opts {
    /// Side.
    pub mode: Mode,
    /// Device name.
    pub device: Option<String>,
    /// GID index.
    pub gid_index: Option<u8>,
    /// Bytes per transfer.
    pub block_size: u64,
    /// Transfers per batch.
    pub batch: usize,
    /// Batches in flight.
    pub depth: usize,
    /// Seconds.
    pub duration: u64,
    /// WRITE (true) or READ.
    pub write: bool,
    /// Verify data.
    pub verify: bool,
    /// Target listen address.
    pub listen: String,
    /// Initiator's peer.
    pub peer: Option<String>,
}

/// A command-line error, naming the flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError(pub String);

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn num<T>(flag: &str, v: Option<String>, min: T) -> Result<T, ArgError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let v = v.ok_or_else(|| ArgError(format!("{flag} needs a value")))?;
    let n: T = v
        .parse()
        .map_err(|_| ArgError(format!("{flag}: {v:?} is not a number")))?;
    if n < min {
        return Err(ArgError(format!("{flag}: must be at least {min}")));
    }
    Ok(n)
}

/// Parses `bench` arguments (after the word `bench`). `Ok(None)` = help.
pub fn parse(args: &[String]) -> Result<Option<Opts>, ArgError> {
    let mut it = args.iter().cloned();
    let mode = match it.next().as_deref() {
        Some("target") => Mode::Target,
        Some("initiator") => Mode::Initiator,
        Some("-h") | Some("--help") | None => return Ok(None),
        Some(m) => {
            return Err(ArgError(format!(
                "unknown mode {m:?}: expected target or initiator"
            )))
        }
    };
    let mut o = Opts {
        mode,
        device: None,
        gid_index: None,
        block_size: 65536,
        batch: 32,
        depth: 4,
        duration: 5,
        write: true,
        verify: false,
        listen: "0.0.0.0:18515".into(),
        peer: None,
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "-d" | "--device" => {
                o.device = Some(
                    it.next()
                        .ok_or_else(|| ArgError(format!("{a} needs a value")))?,
                )
            }
            "--gid-index" => o.gid_index = Some(num(&a, it.next(), 0u8)?),
            "-s" | "--block-size" => o.block_size = num(&a, it.next(), 1u64)?,
            "--batch" => o.batch = num(&a, it.next(), 1usize)?,
            "--depth" => o.depth = num(&a, it.next(), 1usize)?,
            "--duration" | "-D" => o.duration = num(&a, it.next(), 1u64)?,
            "--op" => {
                o.write = match it.next().as_deref() {
                    Some("write") => true,
                    Some("read") => false,
                    other => {
                        return Err(ArgError(format!(
                            "--op: expected read or write, got {other:?}"
                        )))
                    }
                }
            }
            "--verify" => o.verify = true,
            "--listen" => {
                o.listen = it
                    .next()
                    .ok_or_else(|| ArgError(format!("{a} needs a value")))?
            }
            "--peer" => {
                o.peer = Some(
                    it.next()
                        .ok_or_else(|| ArgError(format!("{a} needs a value")))?,
                )
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(ArgError(format!("unknown option {other:?}"))),
        }
    }
    if o.mode == Mode::Initiator && o.peer.is_none() {
        return Err(ArgError("initiator needs --peer host:port".into()));
    }
    let total = (o.batch as u64)
        .checked_mul(o.depth as u64)
        .and_then(|n| o.block_size.checked_mul(n));
    if !matches!(total, Some(b) if b <= 1 << 34) {
        return Err(ArgError(
            "--block-size x --batch x --depth must stay within 16 GiB".into(),
        ));
    }
    Ok(Some(o))
}

/// Percentile (0..=100) of sorted samples.
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub fn percentile(sorted: &[u64], p: u32) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as u64 * u64::from(p.min(100)) / 100) as usize;
    sorted[i]
}

/// Entry point of `railyard bench`.
pub fn main(args: Vec<String>) -> ExitCode {
    let opts = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("railyard bench: {e}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    run(opts)
}

#[cfg(not(feature = "verbs"))]
fn run(_: Opts) -> ExitCode {
    eprintln!(
        "railyard bench: this build has no RDMA support; rebuild with \
         `cargo build -p railyard-cli --features verbs` (needs libibverbs)"
    );
    ExitCode::from(2)
}

#[cfg(feature = "verbs")]
fn run(o: Opts) -> ExitCode {
    match verbs::run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("railyard bench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "verbs")]
mod verbs {
    use super::{percentile, Mode, Opts};
    use railyard_verbs::engine::{
        BatchId, Engine, EngineConfig, EngineError, EngineStats, Op, TaskState, Transfer,
    };
    use std::collections::VecDeque;
    use std::time::{Duration, Instant};

    fn engine(o: &Opts, listen: &str) -> Result<Engine, String> {
        let mut c = EngineConfig::from_env().map_err(|e| e.to_string())?;
        if let Some(d) = &o.device {
            // `-d` wins over MC_RDMA_DEVICE(S), a device list included.
            c.device = Some(d.clone());
            c.devices.clear();
        }
        if let Some(g) = o.gid_index {
            c.gid_index = g;
        }
        c.listen = listen
            .parse()
            .map_err(|_| format!("--listen: {listen:?} is not host:port"))?;
        Engine::new(c).map_err(|e| e.to_string())
    }

    fn buf_len(o: &Opts) -> usize {
        (o.block_size as usize) * o.batch * o.depth
    }

    fn fill(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    pub(super) fn run(o: &Opts) -> Result<(), String> {
        match o.mode {
            Mode::Target => target(o),
            Mode::Initiator => initiator(o),
        }
    }

    fn target(o: &Opts) -> Result<(), String> {
        let e = engine(o, &o.listen)?;
        let mem = e.alloc_memory(buf_len(o)).map_err(|e| e.to_string())?;
        println!(
            "railyard bench target: {} on {} ({:?}), serving {} bytes at {:#x}, for {} s",
            e.listen_addr(),
            e.device(),
            e.config().worker_model,
            mem.len(),
            mem.addr(),
            o.duration + 30
        );
        let end = Instant::now() + Duration::from_secs(o.duration + 30);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_secs(1));
            let s = e.stats();
            if s.endpoints_live > 0 {
                println!(
                    "target: endpoints {} completions {} (peer posts are one-sided)",
                    s.endpoints_live, s.completions
                );
            }
        }
        Ok(())
    }

    /// `"  cc window W KiB in-flight F KiB"` for device 0, or nothing with
    /// the controller off or compiled out.
    fn cc_window(e: &Engine) -> String {
        match e.device_snapshot() {
            Some(d) if e.stats().gate.enabled => format!(
                "  cc window {} KiB in-flight {} KiB {:?}",
                d.window / 1024,
                d.in_flight / 1024,
                d.health
            ),
            _ => String::new(),
        }
    }

    fn wait(e: &Engine, b: BatchId) -> Result<(), String> {
        let t0 = Instant::now();
        let mut spins = 0u32;
        loop {
            let st = e.batch_status(b).map_err(|e| e.to_string())?;
            if st.iter().all(|s| s.state.is_terminal()) {
                if let Some(bad) = st.iter().find(|s| s.state != TaskState::Completed) {
                    return Err(format!("a transfer ended {:?}", bad.state));
                }
                return e.free_batch(b).map_err(|e| e.to_string());
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err("a batch did not finish within 60 s".into());
            }
            // Yield first (low latency); then nap, so that the waiting
            // thread does not take a core from the workers (or, on
            // Soft-RoCE, from the kernel doing the NIC's work).
            spins = spins.saturating_add(1);
            if spins < 1000 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn initiator(o: &Opts) -> Result<(), String> {
        let e = engine(o, "0.0.0.0:0")?;
        let len = buf_len(o);
        // Local: the data buffer, plus a scratch buffer for --verify.
        let local = e.alloc_memory(len).map_err(|e| e.to_string())?;
        let scratch = e
            .alloc_memory(o.block_size as usize)
            .map_err(|e| e.to_string())?;
        let peer = o.peer.as_deref().unwrap_or_default();
        let seg = e.open_segment(peer).map_err(|e| e.to_string())?;
        let remote = *e
            .segment_regions(seg)
            .map_err(|e| e.to_string())?
            .first()
            .ok_or("the target exported no memory")?;
        if (remote.len as usize) < len {
            return Err(format!(
                "the target exported {} bytes, need {len} (same -s/--batch/--depth on both)",
                remote.len
            ));
        }
        let pattern = fill(7, len);
        local.write_at(0, &pattern).map_err(|e| e.to_string())?;
        let op = if o.write { Op::Write } else { Op::Read };
        if !o.write && o.verify {
            // Seed the target with the pattern so reads can be checked.
            let b = e.allocate_batch(1).map_err(|e| e.to_string())?;
            let t = Transfer {
                op: Op::Write,
                local: local.addr(),
                len: len as u64,
                segment: seg,
                remote_offset: remote.addr,
            };
            e.submit(b, &[t]).map_err(|e| e.to_string())?;
            wait(&e, b)?;
        }
        println!(
            "railyard bench initiator: {} -> {peer} on {} ({:?}, {} workers, {} QPs/ep, slice {} B), \
             op {}, block {} B, batch {}, depth {}, {} s{}",
            e.listen_addr(),
            e.device(),
            e.config().worker_model,
            e.config().workers,
            e.config().qps_per_endpoint,
            e.config().slice_size,
            if o.write { "write" } else { "read" },
            o.block_size,
            o.batch,
            o.depth,
            o.duration,
            if o.verify { ", verify" } else { "" }
        );
        let batch_bytes = o.block_size * o.batch as u64;
        let mk = |slot: usize| -> Vec<Transfer> {
            (0..o.batch)
                .map(|k| {
                    let off = ((slot * o.batch + k) as u64) * o.block_size;
                    Transfer {
                        op,
                        local: local.addr() + off,
                        len: o.block_size,
                        segment: seg,
                        remote_offset: remote.addr + off,
                    }
                })
                .collect()
        };
        let verify = |slot: usize| -> Result<(), String> {
            for k in 0..o.batch {
                let off = ((slot * o.batch + k) as u64) * o.block_size;
                let b = e.allocate_batch(1).map_err(|e| e.to_string())?;
                let t = Transfer {
                    op: Op::Read,
                    local: scratch.addr(),
                    len: o.block_size,
                    segment: seg,
                    remote_offset: remote.addr + off,
                };
                e.submit(b, &[t]).map_err(|e| e.to_string())?;
                wait(&e, b)?;
                let mut got = vec![0u8; o.block_size as usize];
                scratch.read_at(0, &mut got).map_err(|e| e.to_string())?;
                let want = &pattern[off as usize..(off + o.block_size) as usize];
                let mut here = vec![0u8; o.block_size as usize];
                if o.write {
                    here.copy_from_slice(want);
                } else {
                    local
                        .read_at(off as usize, &mut here)
                        .map_err(|e| e.to_string())?;
                }
                if got != here || here != want {
                    return Err(format!("verify failed at offset {off}"));
                }
            }
            Ok(())
        };
        let before = e.stats();
        let start = Instant::now();
        let end = start + Duration::from_secs(o.duration);
        let mut inflight: VecDeque<(BatchId, usize, Instant)> = VecDeque::new();
        let mut lat_us: Vec<u64> = Vec::new();
        let mut bytes = 0u64;
        let mut next_report = start + Duration::from_secs(1);
        let mut last_bytes = 0u64;
        let submit = |slot: usize| -> Result<BatchId, EngineError> {
            let b = e.allocate_batch(o.batch)?;
            e.submit(b, &mk(slot))?;
            Ok(b)
        };
        for slot in 0..o.depth {
            let b = submit(slot).map_err(|e| e.to_string())?;
            inflight.push_back((b, slot, Instant::now()));
        }
        while let Some((b, slot, t0)) = inflight.pop_front() {
            wait(&e, b)?;
            lat_us.push(t0.elapsed().as_micros() as u64);
            bytes += batch_bytes;
            if o.verify {
                verify(slot)?;
            }
            let now = Instant::now();
            if now >= next_report {
                let s = e.stats();
                println!(
                    "{:6.1} s  {:8.3} GB/s  completions {}  deferrals {}{}",
                    (now - start).as_secs_f64(),
                    (bytes - last_bytes) as f64 / 1e9,
                    s.completions - before.completions,
                    s.deferrals - before.deferrals,
                    cc_window(&e)
                );
                last_bytes = bytes;
                next_report += Duration::from_secs(1);
            }
            if now < end {
                let b = submit(slot).map_err(|e| e.to_string())?;
                inflight.push_back((b, slot, Instant::now()));
            }
        }
        let secs = start.elapsed().as_secs_f64();
        lat_us.sort_unstable();
        let s = e.stats();
        summary(o, bytes, secs, &lat_us, &before, &s, e.config().cc.mode);
        if !e.wait_idle(Duration::from_secs(10)) {
            return Err(format!("engine did not go idle: {:?}", e.stats()));
        }
        Ok(())
    }

    fn summary(
        o: &Opts,
        bytes: u64,
        secs: f64,
        lat: &[u64],
        b: &EngineStats,
        s: &EngineStats,
        cc: railyard_verbs::engine::CcMode,
    ) {
        let gbs = bytes as f64 / secs / 1e9;
        let mibs = bytes as f64 / secs / (1u64 << 20) as f64;
        println!("---");
        println!(
            "summary: op {} block {} B batch {} depth {}: {} bytes in {:.2} s",
            if o.write { "write" } else { "read" },
            o.block_size,
            o.batch,
            o.depth,
            bytes,
            secs
        );
        println!("  bandwidth   {gbs:.3} GB/s ({mibs:.2} MiB/s)");
        println!(
            "  latency     batch p50 {} us  p99 {} us  ({} batches)",
            percentile(lat, 50),
            percentile(lat, 99),
            lat.len()
        );
        println!(
            "  completions {}  posts {}  doorbells {}  stale {}  retries {}",
            s.completions - b.completions,
            s.posts - b.posts,
            s.doorbells - b.doorbells,
            s.stale_completions - b.stale_completions,
            s.retries - b.retries
        );
        println!(
            "  cc          mode {:?}  deferrals {}  avoids {}  backpressure {}  in-flight {} B  permit errors {}",
            cc,
            s.deferrals - b.deferrals,
            s.avoids - b.avoids,
            s.backpressure - b.backpressure,
            s.gate.in_flight_bytes,
            s.gate.acquire_errors + s.gate.release_errors
        );
        println!("railyard-bench-result mib_per_s={mibs:.2} gb_per_s={gbs:.3}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_ib_write_bw_style_flags() {
        let o = parse(&args(
            "initiator --peer 10.0.0.2:18515 -d rxe0 -s 4096 --batch 8 --depth 2 --duration 3 --op read --verify --gid-index 3",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(o.mode, Mode::Initiator);
        assert_eq!(o.peer.as_deref(), Some("10.0.0.2:18515"));
        assert_eq!(o.device.as_deref(), Some("rxe0"));
        assert_eq!(
            (o.block_size, o.batch, o.depth, o.duration),
            (4096, 8, 2, 3)
        );
        assert!(!o.write && o.verify);
        assert_eq!(o.gid_index, Some(3));
        let t = parse(&args("target --listen 0.0.0.0:1")).unwrap().unwrap();
        assert_eq!(
            (t.mode, t.listen.as_str(), t.write),
            (Mode::Target, "0.0.0.0:1", true)
        );
        assert_eq!(parse(&args("--help")).unwrap(), None);
    }

    #[test]
    fn bad_arguments_name_the_flag() {
        for (a, flag) in [
            ("initiator", "--peer"),
            ("initiator --peer x -s 0", "-s"),
            ("initiator --peer x --op copy", "--op"),
            ("initiator --peer x --batch", "--batch"),
            ("target --gid-index 300", "--gid-index"),
            ("target --frobnicate", "--frobnicate"),
            ("sideways", "sideways"),
        ] {
            let e = parse(&args(a)).unwrap_err();
            assert!(e.0.contains(flag), "{a}: {e}");
        }
    }

    #[test]
    fn percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), 50);
        assert_eq!(percentile(&v, 99), 99);
        assert_eq!(percentile(&v, 100), 100);
        assert_eq!(percentile(&[], 50), 0);
    }
}
