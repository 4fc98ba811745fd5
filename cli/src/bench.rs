//! `railyard bench`: an RDMA WRITE/READ bandwidth benchmark over the
//! railyard engine that speaks perftest's flags (`ib_write_bw -d rxe0 -x 1
//! -s 64K -D 5 HOST`) and Mooncake `transfer_engine_bench`'s
//! (`--threads`, `--batch_size`, `--block_size`, `--operation`,
//! `--device_name`, `--segment_id`, `--buffer_size`).
//!
//! Like perftest, one side is the server (no peer given) and one the
//! client; they meet on a TCP control connection (`-p`, default 18515):
//! the client says how much memory it needs, the server registers it and
//! answers with its engine's handshake port, the client opens the segment
//! and runs, and at the end sends its report, which both sides print.
//!
//! The client runs `--threads` submitter threads; each keeps `--depth`
//! batches of `--batch_size` transfers of `--size` bytes in flight over
//! its own part of the buffer (slots wrap when the part is smaller than
//! depth × batch × size; `--verify` needs them not to), for `--duration`
//! seconds or `--iters` transfers per thread. The report has perftest's
//! columns (`#bytes #iterations BW peak BW average MsgRate`), the batch
//! latency p50/p99/p99.9 (HDR histogram, nearest rank: the same
//! definition as the simulator's `report::percentile`) and the process's
//! CPU seconds (user + system, getrusage), also as `--json`.
//!
//! Without the `verbs` feature only the argument checks run (and the
//! tests of the report); the run itself says the build has no RDMA.
#![cfg_attr(not(feature = "verbs"), allow(dead_code))]

use std::io::IsTerminal as _;
use std::process::ExitCode;

use crate::int_in::int_in;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

/// The control connection's default port (perftest's).
pub const DEFAULT_PORT: u16 = 18515;
/// Tasks one engine tracks at once (`EngineConfig::max_tasks` default):
/// threads × depth × batch must fit.
pub const MAX_TASKS: u64 = 1 << 14;
/// `-a`: perftest's sweep, 2 B to 8 MiB in powers of two.
pub const SWEEP: std::ops::RangeInclusive<u32> = 1..=23;
/// Largest buffer a client may ask for.
pub const MAX_BUFFER: u64 = 16 << 30;

/// Transfer direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// RDMA WRITE: local buffer to the server's memory
    Write,
    /// RDMA READ: the server's memory into the local buffer
    Read,
}

impl Op {
    fn perftest_name(self) -> &'static str {
        match self {
            Op::Write => "RDMA_Write",
            Op::Read => "RDMA_Read",
        }
    }
}

/// Parses a byte size: `65536`, `64K`, `64KiB`, `1M`, `1MB`, `2G` (K, M,
/// G are powers of 1024, as in perftest).
///
/// Errors say `not a size` for text that is not one, and `out of range`
/// for a size of 0 or above 16 GiB.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = t.split_at(digits);
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => {
            return Err(format!(
                "not a size: '{s}' (bytes, or with a suffix: 64K, 1M, 2G)"
            ))
        }
    };
    if num.is_empty() {
        return Err(format!(
            "not a size: '{s}' (bytes, or with a suffix: 64K, 1M, 2G)"
        ));
    }
    let range = || format!("out of range: '{s}' (1 B ..= 16 GiB)");
    let v = num.parse::<u64>().map_err(|_| range())?;
    let bytes = v
        .checked_shl(shift)
        .filter(|b| b >> shift == v)
        .ok_or_else(range)?;
    if bytes == 0 || bytes > MAX_BUFFER {
        return Err(range());
    }
    Ok(bytes)
}

fn size_in(s: &str) -> Result<u64, String> {
    parse_size(s)
}

/// `1 KiB`, `64 KiB`, `8 MiB`, `3000 B`.
pub fn fmt_size(b: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if b >= 1 << shift && b % (1 << shift) == 0 {
            return format!("{} {unit}", b >> shift);
        }
    }
    format!("{b} B")
}

/// RDMA WRITE/READ bandwidth benchmark over the railyard engine, with perftest's and Mooncake's flags.
///
/// Without PEER this is the server: it waits on --port for one client,
/// registers the memory the client asks for and exits when the client is
/// done, like perftest. With PEER it is the client: --threads submitter
/// threads each keep --depth batches of --batch_size transfers of --size
/// bytes in flight for --duration seconds (or --iters transfers), then it
/// prints a perftest-style table with the batch latency and CPU time (or
/// --json). Flags that shape the load are the client's; the server takes
/// only -p, --listen, -d, -x, -q, --json and --quiet.
///
/// Engine settings without a flag come from the MC_* environment
/// (MC_SLICE_SIZE, MC_NUM_QP_PER_EP, MC_MAX_WR, MC_WORKERS_PER_CTX,
/// MC_RDMA_DEDICATED_POLLER, MC_ADAPTIVE_CC_*); a flag wins over its
/// variable.
#[derive(Clone, Debug, PartialEq, Eq, Args)]
#[command(after_help = "Examples:
  railyard bench -d rxe0 -x 1                      # server
  railyard bench -d rxe0 -x 1 -s 64K -D 5 HOST     # client: 64 KiB WRITEs for 5 s
  railyard bench -d rxe0 -a --report_gbits HOST    # sweep 2 B .. 8 MiB
  railyard bench --device_name=rxe0 --threads=8 --batch_size=128 --block_size=65536 --operation=read HOST")]
pub struct BenchArgs {
    /// The server, HOST or HOST:PORT; without it, run as the server
    #[arg(value_name = "PEER")]
    pub peer: Option<String>,
    /// The server, as a flag (Mooncake: --segment_id)
    #[arg(
        long = "peer",
        visible_alias = "segment_id",
        value_name = "HOST[:PORT]",
        conflicts_with = "peer"
    )]
    pub peer_flag: Option<String>,
    /// Control connection port (server: listen on it; client: the server's, unless PEER has one)
    #[arg(short, long, value_name = "PORT", default_value_t = DEFAULT_PORT as u64, value_parser = int_in(1, 65535))]
    pub port: u64,
    /// Server: the address to listen on
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    pub listen: std::net::IpAddr,
    /// RDMA device [default: MC_RDMA_DEVICE, else the first] (Mooncake: --device_name)
    #[arg(
        short = 'd',
        long = "ib-dev",
        visible_alias = "device_name",
        value_name = "NAME"
    )]
    pub ib_dev: Option<String>,
    /// GID index [default: MC_GID_INDEX, else 1, the RoCE v2 IPv4 GID]
    #[arg(short = 'x', long = "gid-index", value_name = "N", value_parser = int_in(0, 255))]
    pub gid_index: Option<u64>,
    /// QPs per endpoint [default: MC_NUM_QP_PER_EP, else 2]
    #[arg(short = 'q', long = "qp", value_name = "N", value_parser = int_in(1, 64))]
    pub qp: Option<u64>,
    /// Bytes per transfer: 65536, 64K, 1M (Mooncake: --block_size)
    #[arg(short, long, value_name = "SIZE", visible_alias = "block_size", default_value = "64K", value_parser = size_in, conflicts_with = "all")]
    pub size: u64,
    /// Sweep sizes 2 B ..= 8 MiB in powers of two (each for --iters, or --duration [default 1 s])
    #[arg(short, long)]
    pub all: bool,
    /// Transfers per thread (per size with -a) instead of a duration
    #[arg(short = 'n', long, value_name = "N", value_parser = int_in(1, 1 << 40), conflicts_with = "duration")]
    pub iters: Option<u64>,
    /// Seconds to run (per size with -a) [default: 5; 1 with -a]
    #[arg(short = 'D', long, value_name = "SECS", value_parser = int_in(1, 86_400))]
    pub duration: Option<u64>,
    /// Submitter threads, each with its own batches and part of the buffer
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = int_in(1, 64))]
    pub threads: u64,
    /// Transfers per batch
    #[arg(long = "batch_size", visible_alias = "batch-size", value_name = "N", default_value_t = 32, value_parser = int_in(1, 4096))]
    pub batch_size: u64,
    /// Batches each thread keeps in flight (Mooncake's bench: 1)
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = int_in(1, 1024))]
    pub depth: u64,
    /// Operation (Mooncake: --operation)
    #[arg(long, value_enum, visible_alias = "operation", default_value_t = Op::Write)]
    pub op: Op,
    /// Registered memory on each side, shared by the threads (Mooncake: --buffer_size)
    #[arg(long = "buffer_size", visible_alias = "buffer-size", value_name = "SIZE", default_value = "64M", value_parser = size_in)]
    pub buffer_size: u64,
    /// Check every block: read back what was written, or compare what was read
    #[arg(long)]
    pub verify: bool,
    /// Report bandwidth in Gb/s (10^9 bits) instead of MiB/s
    #[arg(long = "report_gbits", visible_alias = "report-gbits")]
    pub report_gbits: bool,
    /// Print the report as JSON on stdout
    #[arg(long)]
    pub json: bool,
    /// Only the result table (or JSON): no header, no progress
    #[arg(long)]
    pub quiet: bool,
    /// Write the engine's final snapshot (stats and every route's CC state) to FILE as JSON
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<std::path::PathBuf>,
}

/// How long each size runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Seconds.
    Seconds(u64),
    /// Transfers per thread.
    Transfers(u64),
}

/// A validated client run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// `HOST:PORT` of the server's control connection.
    pub peer: String,
    /// Sizes, in order.
    pub sizes: Vec<u64>,
    /// Per size.
    pub stop: Stop,
    /// Submitter threads.
    pub threads: u64,
    /// Transfers per batch.
    pub batch: u64,
    /// Batches in flight per thread.
    pub depth: u64,
    /// Buffer on each side.
    pub buffer: u64,
}

impl Plan {
    /// Each thread's part of the buffer.
    pub fn per_thread(&self) -> u64 {
        self.buffer / self.threads
    }
    /// Distinct `size` slots in one thread's part.
    pub fn slots(&self, size: u64) -> u64 {
        self.per_thread() / size
    }
}

/// `HOST`, `HOST:PORT`, `IP`, `[IPv6]:PORT` → `host:port`.
pub fn peer_addr(peer: &str, port: u16) -> String {
    use std::net::{IpAddr, SocketAddr};
    if peer.parse::<SocketAddr>().is_ok() {
        return peer.to_string();
    }
    if let Ok(ip) = peer.parse::<IpAddr>() {
        return SocketAddr::new(ip, port).to_string();
    }
    match peer.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') && p.parse::<u16>().is_ok() => {
            peer.to_string()
        }
        _ => format!("{peer}:{port}"),
    }
}

impl BenchArgs {
    /// The peer, positional or `--peer`.
    pub fn peer(&self) -> Option<&str> {
        self.peer.as_deref().or(self.peer_flag.as_deref())
    }

    /// Cross-flag checks for a client; `Ok(None)` for the server.
    pub fn plan(&self) -> Result<Option<Plan>, String> {
        let Some(peer) = self.peer() else {
            return Ok(None);
        };
        if peer.trim().is_empty() {
            return Err("PEER is empty: give the server as HOST or HOST:PORT".into());
        }
        let sizes: Vec<u64> = if self.all {
            SWEEP.map(|k| 1u64 << k).collect()
        } else {
            vec![self.size]
        };
        let max = *sizes.iter().max().expect("at least one size");
        let stop = match (self.iters, self.duration) {
            (Some(n), _) => Stop::Transfers(n),
            (None, Some(d)) => Stop::Seconds(d),
            (None, None) => Stop::Seconds(if self.all { 1 } else { 5 }),
        };
        let tasks = self.threads * self.depth * self.batch_size;
        if tasks > MAX_TASKS {
            return Err(format!(
                "out of range: --threads {} x --depth {} x --batch_size {} = {tasks} transfers in flight, the engine tracks at most {MAX_TASKS}",
                self.threads, self.depth, self.batch_size
            ));
        }
        let plan = Plan {
            peer: peer_addr(peer.trim(), self.port as u16),
            sizes,
            stop,
            threads: self.threads,
            batch: self.batch_size,
            depth: self.depth,
            buffer: self.buffer_size,
        };
        if plan.slots(max) == 0 {
            return Err(format!(
                "out of range: --buffer_size {} split over {} threads leaves {} each, less than one {} transfer",
                fmt_size(self.buffer_size),
                self.threads,
                fmt_size(plan.per_thread()),
                fmt_size(max)
            ));
        }
        if self.verify && plan.slots(max) < self.depth * self.batch_size {
            return Err(format!(
                "out of range: --verify needs --threads x --depth x --batch_size x --size = {} within --buffer_size {} (no slot may be reused while in flight)",
                fmt_size(self.threads * self.depth * self.batch_size * max),
                fmt_size(self.buffer_size)
            ));
        }
        Ok(Some(plan))
    }
}

/// Batch latency percentiles, µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// The nearest-rank percentiles of `h` (µs samples).
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            p50: h.value_at_quantile(0.50) as f64,
            p99: h.value_at_quantile(0.99) as f64,
            p99_9: h.value_at_quantile(0.999) as f64,
            max: h.max() as f64,
        }
    }
}

/// The histogram every thread records batch latencies into (µs, 1 µs to
/// one hour, 3 significant digits).
pub fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// One size's result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    /// Bytes per transfer.
    pub bytes: u64,
    /// Transfers completed (all threads).
    pub iterations: u64,
    /// Batches completed (all threads).
    pub batches: u64,
    /// Wall time, s.
    pub seconds: f64,
    /// Best 100 ms window, MiB/s (2^20 bytes).
    pub bw_peak_mib_per_s: f64,
    /// Bytes / seconds, MiB/s.
    pub bw_average_mib_per_s: f64,
    /// Bytes / seconds, Gb/s (10^9 bits).
    pub bw_average_gbit_per_s: f64,
    /// Transfers per second, millions.
    pub msg_rate_mops: f64,
    /// Batch latency: from submit until every transfer of the batch is complete.
    pub batch_latency_us: Latency,
    /// Process CPU time in user mode during the run (engine workers included), s.
    pub cpu_user_s: f64,
    /// Process CPU time in the kernel during the run, s.
    pub cpu_sys_s: f64,
    /// (user + system) CPU seconds per GiB moved.
    pub cpu_s_per_gib: f64,
    /// Work requests posted.
    pub posts: u64,
    /// `ibv_post_send` calls.
    pub doorbells: u64,
    /// Completions polled.
    pub completions: u64,
    /// CC gate deferrals.
    pub deferrals: u64,
    /// Slices retried.
    pub retries: u64,
}

/// What the client ran on and measured; printed by both sides.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `railyard bench` report format version.
    pub format: u32,
    /// `write` or `read`.
    pub op: String,
    /// The client's device.
    pub device: String,
    /// The server's control address.
    pub peer: String,
    /// Submitter threads.
    pub threads: u64,
    /// Transfers per batch.
    pub batch_size: u64,
    /// Batches in flight per thread.
    pub depth: u64,
    /// QPs per endpoint.
    pub qps_per_endpoint: u64,
    /// Engine slice size, bytes.
    pub slice_bytes: u64,
    /// Engine workers.
    pub workers: u64,
    /// `shared` or `dedicated-poller`.
    pub worker_model: String,
    /// `off`, `observe` or `enforce`.
    pub cc_mode: String,
    /// Whether the RFC 4162 controller is compiled into the engine (cli
    /// feature `adaptive-cc`); without it every mode admits through the
    /// zero-cost bypass. Absent in reports of older builds (then `false`).
    #[serde(default)]
    pub cc_compiled_in: bool,
    /// Registered buffer per side, bytes.
    pub buffer_bytes: u64,
    /// Whether every block was verified.
    pub verified: bool,
    /// One entry per size.
    pub results: Vec<SizeResult>,
}

/// The perftest-style table (`#bytes #iterations BW peak BW average
/// MsgRate`, then the batch latency and CPU seconds).
pub fn table(r: &Report, gbits: bool) -> String {
    use std::fmt::Write as _;
    let rule = "-".repeat(132);
    let (unit, bw) = if gbits {
        (
            "Gb/sec",
            (|mib: f64| mib * (1u64 << 20) as f64 * 8.0 / 1e9) as fn(f64) -> f64,
        )
    } else {
        ("MiB/sec", (|mib: f64| mib) as fn(f64) -> f64)
    };
    let mut s = String::new();
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(
        s,
        " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]   lat p50[usec]   lat p99[usec]   lat p99.9[usec]   CPU[sec]"
    );
    for x in &r.results {
        let _ = writeln!(
            s,
            " {:<10} {:<14} {:<19.2} {:<22.2} {:<15.6} {:<15.1} {:<15.1} {:<17.1} {:.2}",
            x.bytes,
            x.iterations,
            bw(x.bw_peak_mib_per_s),
            bw(x.bw_average_mib_per_s),
            x.msg_rate_mops,
            x.batch_latency_us.p50,
            x.batch_latency_us.p99,
            x.batch_latency_us.p99_9,
            x.cpu_user_s + x.cpu_sys_s
        );
    }
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(
        s,
        " latency: per batch of {}, submit until every transfer is complete; CPU: user + system of the whole process",
        r.batch_size
    );
    s
}

/// The header perftest prints before its table.
pub fn header(r: &Report, role: &str) -> String {
    let rule = "-".repeat(132);
    format!(
        "{rule}\n{:^132}\n {role}: device {}  peer {}  threads {}  batch {}  depth {}  QPs/endpoint {}  slice {}  workers {} ({})  CC {}  buffer {}{}\n",
        format!("{} BW Test (railyard bench)", if r.op == "read" { Op::Read.perftest_name() } else { Op::Write.perftest_name() }),
        r.device,
        r.peer,
        r.threads,
        r.batch_size,
        r.depth,
        r.qps_per_endpoint,
        fmt_size(r.slice_bytes),
        r.workers,
        r.worker_model,
        if r.cc_compiled_in {
            r.cc_mode.clone()
        } else {
            format!("{} (compiled out)", r.cc_mode)
        },
        fmt_size(r.buffer_bytes),
        if r.verified { "  verify" } else { "" }
    )
}

/// The best rate (bytes/s) over any window of `samples` (`(seconds since
/// the start, bytes done)`, ascending) at least a tenth of the run and at
/// least 100 ms long: bytes are counted per completed batch, so shorter
/// windows would measure how batches happen to bunch up, not bandwidth.
/// A run with fewer than two such windows has no peak (0).
pub fn peak_rate(samples: &[(f64, u64)]) -> f64 {
    let Some(&(end, _)) = samples.last() else {
        return 0.0;
    };
    let w = (end / 10.0).max(0.1);
    let mut best = 0.0f64;
    let mut j = 0;
    for (i, &(t, b)) in samples.iter().enumerate() {
        // The latest start j with a window of at least w ending at i.
        while j + 1 < i && t - samples[j + 1].0 >= w {
            j += 1;
        }
        let (t0, b0) = samples[j];
        if j < i && t - t0 >= w && t - t0 < end {
            best = best.max((b - b0) as f64 / (t - t0));
        }
    }
    best
}

/// Messages of the control connection, one JSON object per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Msg {
    /// Client → server: the memory it needs.
    Hello {
        /// Protocol version (1).
        version: u32,
        /// Bytes to register.
        buffer_bytes: u64,
        /// The client's QPs per endpoint: both ends of an endpoint must
        /// agree, so the server takes the client's.
        qps_per_endpoint: u16,
    },
    /// Server → client: memory registered; the engine's handshake port.
    Ready {
        /// Port of the server engine's handshake listener.
        engine_port: u16,
    },
    /// Either way: why it cannot go on.
    Error {
        /// One line.
        message: String,
    },
    /// Client → server: the run is over.
    Done {
        /// What the client measured.
        report: Report,
    },
}

/// Whether progress lines go to stderr.
pub fn progress_enabled(a: &BenchArgs) -> bool {
    !a.quiet && std::io::stderr().is_terminal()
}

/// Entry point of `railyard bench`.
pub fn main(a: BenchArgs) -> ExitCode {
    let plan = match a.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("railyard: error: {e}; see 'railyard bench --help'");
            return ExitCode::from(crate::error::USAGE);
        }
    };
    run(&a, plan)
}

#[cfg(not(feature = "verbs"))]
fn run(_: &BenchArgs, _: Option<Plan>) -> ExitCode {
    eprintln!(
        "railyard: error: this build has no RDMA support; rebuild with \
         `cargo build --release -p railyard-cli --features verbs` (needs libibverbs)"
    );
    ExitCode::from(crate::error::USAGE)
}

#[cfg(feature = "verbs")]
fn run(a: &BenchArgs, plan: Option<Plan>) -> ExitCode {
    let r = match plan {
        None => verbs::server(a),
        Some(p) => verbs::client(a, &p),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("railyard bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints `r` as the table (with the header unless `--quiet`) or JSON.
fn print_report(a: &BenchArgs, r: &Report, role: &str) {
    if a.json {
        println!(
            "{}",
            serde_json::to_string(r).expect("the report serializes")
        );
    } else {
        if !a.quiet {
            print!("{}", header(r, role));
        }
        print!("{}", table(r, a.report_gbits));
    }
}

/// Process CPU time so far: (user, system) seconds.
pub fn cpu_times() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let s = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (s(u.user_time()), s(u.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}

#[cfg(feature = "verbs")]
mod verbs {
    use super::{
        cpu_times, histogram, print_report, progress_enabled, BenchArgs, Latency, Msg, Op, Plan,
        Report, SizeResult, Stop,
    };
    use railyard_verbs::engine::{
        BatchId, CcMode, Engine, EngineConfig, EngineStats, Op as EOp, SegmentId, TaskState,
        Transfer, WorkerModel,
    };
    use railyard_verbs::MemoryRegion;
    use std::collections::VecDeque;
    use std::io::{BufRead, BufReader, Read as _, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    fn engine(a: &BenchArgs, listen: SocketAddr, qps: Option<u16>) -> Result<Engine, String> {
        let mut c = EngineConfig::from_env().map_err(|e| e.to_string())?;
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
        Engine::new(c).map_err(|e| e.to_string())
    }

    /// A message as it travels (for errors).
    fn wire(m: &Msg) -> String {
        serde_json::to_string(m).expect("a message serializes")
    }

    fn send(s: &mut TcpStream, m: &Msg) -> Result<(), String> {
        let mut line = wire(m);
        line.push('\n');
        s.write_all(line.as_bytes())
            .map_err(|e| format!("control connection: {e}"))
    }

    fn recv(r: &mut BufReader<TcpStream>) -> Result<Option<Msg>, String> {
        let mut line = String::new();
        let n = (&mut *r)
            .take(1 << 20)
            .read_line(&mut line)
            .map_err(|e| format!("control connection: {e}"))?;
        if n == 0 {
            return Ok(None);
        }
        serde_json::from_str(&line)
            .map(Some)
            .map_err(|e| format!("control connection: not a railyard bench message ({e})"))
    }

    fn cc_name(m: CcMode) -> &'static str {
        match m {
            CcMode::Off => "off",
            CcMode::Observe => "observe",
            CcMode::Enforce => "enforce",
        }
    }

    fn report_base(a: &BenchArgs, e: &Engine, peer: &str, buffer: u64) -> Report {
        let c = e.config();
        Report {
            format: 1,
            op: match a.op {
                Op::Write => "write".into(),
                Op::Read => "read".into(),
            },
            device: e.device().to_string(),
            peer: peer.to_string(),
            threads: a.threads,
            batch_size: a.batch_size,
            depth: a.depth,
            qps_per_endpoint: u64::from(c.qps_per_endpoint),
            slice_bytes: u64::from(c.slice_size),
            workers: u64::from(c.workers),
            worker_model: match c.worker_model {
                WorkerModel::Shared => "shared".into(),
                WorkerModel::DedicatedPoller => "dedicated-poller".into(),
            },
            cc_mode: cc_name(c.cc.mode).into(),
            cc_compiled_in: railyard_core::cc::Controller::compiled_in(),
            buffer_bytes: buffer,
            verified: a.verify,
            results: vec![],
        }
    }

    /// `--metrics FILE`: the engine's snapshot ([`Engine::snapshot`]:
    /// stats and every route's CC state) as one JSON object, with the
    /// side that wrote it.
    fn write_metrics(a: &BenchArgs, e: &Engine, role: &str) -> Result<(), String> {
        let Some(path) = &a.metrics else {
            return Ok(());
        };
        let j = serde_json::json!({ "format": 1, "role": role, "device": e.device(),
            "snapshot": e.snapshot() });
        let text = serde_json::to_string_pretty(&j).expect("the snapshot serializes");
        std::fs::write(path, text + "\n")
            .map_err(|err| format!("--metrics {}: {err}", path.display()))
    }

    /// The server: one client, then exit. Its engine starts when the
    /// client has said what it needs (memory, QPs per endpoint).
    pub(super) fn server(a: &BenchArgs) -> Result<(), String> {
        let ctl = SocketAddr::new(a.listen, a.port as u16);
        let listener =
            TcpListener::bind(ctl).map_err(|e| format!("cannot listen on {ctl}: {e}"))?;
        if !a.quiet && !a.json {
            println!("railyard bench server: waiting for a client on {ctl}");
        }
        let (stream, from) = listener
            .accept()
            .map_err(|e| format!("accept on {ctl}: {e}"))?;
        let mut w = stream.try_clone().map_err(|e| e.to_string())?;
        let mut r = BufReader::new(stream);
        let mut refuse = |message: String| {
            let _ = send(
                &mut w,
                &Msg::Error {
                    message: message.clone(),
                },
            );
            Err(message)
        };
        let (buffer_bytes, qps) = match recv(&mut r)? {
            Some(Msg::Hello {
                version: 1,
                buffer_bytes,
                qps_per_endpoint,
            }) if (1..=super::MAX_BUFFER).contains(&buffer_bytes) => {
                (buffer_bytes, qps_per_endpoint)
            }
            Some(m) => {
                return refuse(format!(
                    "unexpected first message from {from}: {}",
                    wire(&m)
                ))
            }
            None => return Err(format!("{from} closed the control connection at once")),
        };
        if let Some(q) = a.qp.filter(|&q| q != u64::from(qps)) {
            return refuse(format!(
                "QPs per endpoint: the server was started with -q {q}, the client uses {qps}; both ends must agree"
            ));
        }
        let e = match engine(a, SocketAddr::new(a.listen, 0), Some(qps)) {
            Ok(e) => e,
            Err(err) => return refuse(format!("the server's engine: {err}")),
        };
        let mem = match e.alloc_memory(buffer_bytes as usize) {
            Ok(m) => m,
            Err(err) => {
                return refuse(format!(
                    "the server cannot register {buffer_bytes} bytes: {err}"
                ))
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
                super::fmt_size(mem.len() as u64),
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
            Some(Msg::Error { message }) => Err(format!("the client failed: {message}")),
            Some(m) => Err(format!("unexpected message from {from}: {}", wire(&m))),
            None => Err(format!("the client {from} went away before it finished")),
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

    fn connect(peer: &str) -> Result<TcpStream, String> {
        let addrs: Vec<SocketAddr> = peer
            .to_socket_addrs()
            .map_err(|e| format!("PEER {peer}: {e}"))?
            .collect();
        let first = *addrs
            .first()
            .ok_or_else(|| format!("PEER {peer}: no address"))?;
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
                Err(e) => return Err(format!("cannot reach the server at {peer}: {e}")),
            }
        }
    }

    /// The client: connect, run every size, report.
    pub(super) fn client(a: &BenchArgs, p: &Plan) -> Result<(), String> {
        let stream = connect(&p.peer)?;
        let server_ip = stream.peer_addr().map_err(|e| e.to_string())?.ip();
        let mut w = stream.try_clone().map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        let mut r = BufReader::new(stream);
        let e = engine(a, "0.0.0.0:0".parse().expect("an address"), None)?;
        let max = *p.sizes.iter().max().expect("a size");
        let local = e
            .alloc_memory(p.buffer as usize)
            .map_err(|e| format!("registering {} local bytes: {e}", p.buffer))?;
        let scratch = if a.verify {
            Some(
                e.alloc_memory((max * p.threads) as usize)
                    .map_err(|e| e.to_string())?,
            )
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
            Some(Msg::Error { message }) => return Err(format!("the server: {message}")),
            Some(m) => return Err(format!("unexpected answer from the server: {}", wire(&m))),
            None => return Err("the server closed the control connection".into()),
        };
        let result = (|| {
            let seg = e
                .open_segment(SocketAddr::new(server_ip, port))
                .map_err(|e| format!("opening the server's segment: {e}"))?;
            let remote = *e
                .segment_regions(seg)
                .map_err(|e| e.to_string())?
                .first()
                .ok_or("the server exported no memory")?;
            if remote.len < p.buffer {
                return Err(format!(
                    "the server exported {} bytes, {} needed",
                    remote.len, p.buffer
                ));
            }
            let mut rep = report_base(a, &e, &p.peer, p.buffer);
            if !a.quiet && !a.json {
                print!("{}", super::header(&rep, "client"));
            }
            let side = Side {
                e: &e,
                seg,
                local: &local,
                remote: remote.addr,
                scratch: scratch.as_deref(),
                stride: max,
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
                return Err(format!(
                    "the engine did not go idle within 10 s: {} tokens in use, {} endpoint posts, QP depth {}, {} CQ entries outstanding",
                    s.tokens_in_use, s.endpoint_outstanding, s.qp_depth, s.cq_outstanding
                ));
            }
            Ok(rep)
        })();
        let out = match result {
            Ok(rep) => {
                send(
                    &mut w,
                    &Msg::Done {
                        report: rep.clone(),
                    },
                )?;
                if a.quiet || a.json {
                    print_report(a, &rep, "client");
                } else {
                    print!("{}", super::table(&rep, a.report_gbits));
                }
                Ok(())
            }
            Err(err) => {
                let _ = send(
                    &mut w,
                    &Msg::Error {
                        message: err.clone(),
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
        fn wait(&self, b: BatchId) -> Result<(), String> {
            // A blocking wait (issue #18): the waiter sleeps until the task
            // it watches settles instead of yielding and napping, leaving
            // the cores to the workers (and, on Soft-RoCE, to the kernel
            // doing the NIC's work).
            if !self
                .e
                .wait_batch(b, Duration::from_secs(60))
                .map_err(|e| e.to_string())?
            {
                return Err("a batch did not finish within 60 s".into());
            }
            let st = self.e.batch_status(b).map_err(|e| e.to_string())?;
            if let Some(bad) = st.iter().find(|s| s.state != TaskState::Completed) {
                let how = match bad.state {
                    TaskState::Failed => "failed",
                    TaskState::Timeout => "timed out",
                    TaskState::Canceled => "was canceled",
                    _ => "did not complete",
                };
                return Err(format!(
                    "a transfer {how} ({} of {} bytes moved)",
                    bad.transferred_bytes, bad.total_bytes
                ));
            }
            self.e.free_batch(b).map_err(|e| e.to_string())
        }

        fn one(&self, op: EOp, local: u64, len: u64, remote_off: u64) -> Result<(), String> {
            let b = self.e.allocate_batch(1).map_err(|e| e.to_string())?;
            let t = Transfer {
                op,
                local,
                len,
                segment: self.seg,
                remote_offset: self.remote + remote_off,
            };
            self.e.submit(b, &[t]).map_err(|e| e.to_string())?;
            self.wait(b)
        }

        /// For `--op read --verify`: write the pattern to the server.
        fn seed(&self, len: u64) -> Result<(), String> {
            self.local
                .write_at(0, &pattern(0, len as usize))
                .map_err(|e| e.to_string())?;
            self.one(EOp::Write, self.local.addr(), len, 0)
        }

        /// Checks the block at `off` of `len` bytes (thread `t`'s scratch).
        fn verify(&self, t: u64, off: u64, len: u64, op: Op) -> Result<(), String> {
            let scratch = self.scratch.expect("allocated with --verify");
            let s_off = t * self.stride;
            self.one(EOp::Read, scratch.addr() + s_off, len, off)?;
            let mut got = vec![0u8; len as usize];
            scratch
                .read_at(s_off as usize, &mut got)
                .map_err(|e| e.to_string())?;
            let mut here = vec![0u8; len as usize];
            self.local
                .read_at(off as usize, &mut here)
                .map_err(|e| e.to_string())?;
            let want = pattern(off, len as usize);
            let ok = match op {
                Op::Write => got == here,
                Op::Read => got == want && here == want,
            };
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "verify failed: block of {len} B at offset {off} differs"
                ))
            }
        }
    }

    /// Totals every thread adds to.
    struct Shared {
        bytes: AtomicU64,
        abort: AtomicBool,
    }

    fn thread_run(
        a: &BenchArgs,
        p: &Plan,
        side: &Side<'_>,
        size: u64,
        t: u64,
        shared: &Shared,
        end: Option<Instant>,
    ) -> Result<(u64, u64, hdrhistogram::Histogram<u64>), String> {
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
        let submit = |slot: u64, n: u64| -> Result<BatchId, String> {
            let b = e.allocate_batch(n as usize).map_err(|e| e.to_string())?;
            let ts: Vec<Transfer> = (0..n)
                .map(|k| Transfer {
                    op,
                    local: side.local.addr() + offset(slot, k),
                    len: size,
                    segment: side.seg,
                    remote_offset: side.remote + offset(slot, k),
                })
                .collect();
            e.submit(b, &ts).map_err(|e| e.to_string())?;
            Ok(b)
        };
        if a.verify && a.op == Op::Write {
            for slot in 0..slots.min(p.depth * p.batch) {
                let off = base + slot * size;
                side.local
                    .write_at(off as usize, &pattern(off, size as usize))
                    .map_err(|e| e.to_string())?;
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
            left -= n;
        }
        while let Some((b, slot, n, t0)) = inflight.pop_front() {
            if shared.abort.load(Ordering::Relaxed) {
                return Err("another thread failed".into());
            }
            side.wait(b)?;
            let _ = hist.record((t0.elapsed().as_micros() as u64).max(1));
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

    fn run_size(a: &BenchArgs, p: &Plan, side: &Side<'_>, size: u64) -> Result<SizeResult, String> {
        let e = side.e;
        let shared = Shared {
            bytes: AtomicU64::new(0),
            abort: AtomicBool::new(false),
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
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
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
            hist.add(&h).map_err(|e| e.to_string())?;
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
            bw_peak_mib_per_s: super::peak_rate(&samples).max(avg) / mib,
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
            posts,
            doorbells,
            completions,
            deferrals,
            retries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        b: BenchArgs,
    }

    fn parse(s: &str) -> Result<BenchArgs, clap::Error> {
        T::try_parse_from(std::iter::once("bench").chain(s.split_whitespace())).map(|t| t.b)
    }

    #[test]
    fn perftest_flags() {
        let a = parse("-d rxe0 -x 3 -q 4 -s 64K -D 3 --report_gbits 10.0.0.2").unwrap();
        assert_eq!(a.ib_dev.as_deref(), Some("rxe0"));
        assert_eq!((a.gid_index, a.qp, a.size), (Some(3), Some(4), 65536));
        assert!(a.report_gbits);
        let p = a.plan().unwrap().unwrap();
        assert_eq!(p.peer, "10.0.0.2:18515");
        assert_eq!(p.sizes, vec![65536]);
        assert_eq!(p.stop, Stop::Seconds(3));
        let p = parse("-n 1000 -s 1M -p 9000 host")
            .unwrap()
            .plan()
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.peer.as_str(), p.stop),
            ("host:9000", Stop::Transfers(1000))
        );
        assert_eq!(p.sizes, vec![1 << 20]);
        // -a: 2 B ..= 8 MiB, 1 s each by default.
        let p = parse("-a host:7000").unwrap().plan().unwrap().unwrap();
        assert_eq!(p.sizes.len(), 23);
        assert_eq!((p.sizes[0], p.sizes[22]), (2, 8 << 20));
        assert_eq!((p.peer.as_str(), p.stop), ("host:7000", Stop::Seconds(1)));
        // No peer: the server.
        assert_eq!(parse("-d rxe0").unwrap().plan().unwrap(), None);
    }

    #[test]
    fn mooncake_flags_and_equals_form() {
        let a = parse(
            "--device_name=rxe0 --threads=8 --batch_size=128 --block_size=65536 --operation=read --segment_id=10.0.0.2:18515 --buffer_size=1G --depth=1",
        )
        .unwrap();
        assert_eq!(a.ib_dev.as_deref(), Some("rxe0"));
        assert_eq!(
            (a.threads, a.batch_size, a.size, a.depth),
            (8, 128, 65536, 1)
        );
        assert_eq!(a.op, Op::Read);
        assert_eq!(a.buffer_size, 1 << 30);
        assert_eq!(a.plan().unwrap().unwrap().peer, "10.0.0.2:18515");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1mb"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").unwrap_err().starts_with("out of range"));
        assert!(parse_size("17G").unwrap_err().starts_with("out of range"));
        assert!(parse_size("99999999999999999999")
            .unwrap_err()
            .starts_with("out of range"));
        assert!(parse_size("1T").unwrap_err().starts_with("not a size"));
        assert!(parse_size("K").unwrap_err().starts_with("not a size"));
        assert!(parse_size("-1").unwrap_err().starts_with("not a size"));
        assert_eq!(fmt_size(65536), "64 KiB");
        assert_eq!(fmt_size(3000), "3000 B");
    }

    #[test]
    fn peers() {
        assert_eq!(peer_addr("10.0.0.2", 18515), "10.0.0.2:18515");
        assert_eq!(peer_addr("10.0.0.2:1", 18515), "10.0.0.2:1");
        assert_eq!(peer_addr("node-b", 5), "node-b:5");
        assert_eq!(peer_addr("node-b:6", 5), "node-b:6");
        assert_eq!(peer_addr("::1", 5), "[::1]:5");
        assert_eq!(peer_addr("[::1]:7", 5), "[::1]:7");
    }

    /// Every bad input: a clap error or a plan error naming the problem.
    #[test]
    fn bad_input_is_refused_with_the_reason() {
        for (args, want) in [
            ("-x 300 h", "out of range"),
            ("-x abc h", "not a number"),
            ("-q 0 h", "out of range"),
            ("-q 65 h", "out of range"),
            ("-s 0 h", "out of range"),
            ("-s 64Q h", "not a size"),
            ("--threads 0 h", "out of range"),
            ("--threads 65 h", "out of range"),
            ("--batch_size 0 h", "out of range"),
            ("-D 0 h", "out of range"),
            ("-n 0 h", "out of range"),
            ("-p 70000 h", "out of range"),
            ("--op copy h", "invalid value 'copy'"),
            ("-a -s 4K h", "cannot be used with"),
            ("-n 5 -D 5 h", "cannot be used with"),
            ("--peer a b", "cannot be used with"),
            ("--frobnicate h", "unexpected argument"),
            ("--treads 4 h", "--threads"),
            ("--listen nowhere", "invalid value"),
        ] {
            let e = parse(args).expect_err(args).to_string();
            assert!(e.contains(want), "{args}: {e}");
        }
        for (args, want) in [
            ("--threads 64 --depth 64 --batch_size 64 h", "out of range"),
            ("--threads 64 --buffer_size 1M -s 64K h", "out of range"),
            ("--verify --buffer_size 1M h", "--verify"),
            ("-a --buffer_size 4M h", "8 MiB"),
        ] {
            let e = parse(args).unwrap().plan().expect_err(args);
            assert!(e.contains(want), "{args}: {e}");
        }
    }

    #[test]
    fn threads_batch_and_qp_reach_the_plan() {
        let a = parse("--threads 4 --batch_size 8 --depth 2 -q 3 h").unwrap();
        let p = a.plan().unwrap().unwrap();
        assert_eq!((p.threads, p.batch, p.depth), (4, 8, 2));
        assert_eq!(p.per_thread(), 16 << 20);
        assert_eq!(p.slots(65536), 256);
        assert_eq!(a.qp, Some(3));
    }

    #[test]
    fn hdr_quantiles_match_the_sims_nearest_rank() {
        // One percentile definition: on values the histogram holds exactly
        // (< 2048 at 3 significant digits) both give the same sample.
        let v: Vec<u64> = (1..=2000).map(|i| (i * 7919) % 2000 + 1).collect();
        let mut h = histogram();
        for &x in &v {
            h.record(x).unwrap();
        }
        for (q, p) in [(0.5, 50.0), (0.99, 99.0), (0.999, 99.9)] {
            assert_eq!(
                h.value_at_quantile(q),
                railyard_sim::report::percentile(&v, p),
                "p{p}"
            );
        }
        let l = Latency::of(&h);
        assert_eq!((l.p50, l.max), (1000.0, 2000.0));
    }

    #[test]
    fn table_has_perftest_columns_and_json_round_trips() {
        let r = Report {
            format: 1,
            op: "write".into(),
            batch_size: 32,
            results: vec![SizeResult {
                bytes: 65536,
                iterations: 1000,
                bw_peak_mib_per_s: 120.0,
                bw_average_mib_per_s: 100.0,
                msg_rate_mops: 0.0016,
                batch_latency_us: Latency {
                    p50: 10.0,
                    p99: 20.0,
                    p99_9: 30.0,
                    max: 40.0,
                },
                cpu_user_s: 1.0,
                cpu_sys_s: 0.5,
                ..SizeResult::default()
            }],
            ..Report::default()
        };
        let t = table(&r, false);
        for col in [
            "#bytes",
            "#iterations",
            "BW peak[MiB/sec]",
            "BW average[MiB/sec]",
            "MsgRate[Mpps]",
            "lat p99.9[usec]",
        ] {
            assert!(t.contains(col), "{col}: {t}");
        }
        assert!(t.contains(" 65536      1000           120.00"), "{t}");
        assert!(t.contains("1.50\n"), "{t}");
        let g = table(&r, true);
        assert!(
            g.contains("BW average[Gb/sec]") && g.contains("0.84"),
            "{g}"
        );
        let m = Msg::Done { report: r.clone() };
        let back: Msg = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let j: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(j["results"][0]["batch_latency_us"]["p99_9"], 30.0);
        assert_eq!(j["results"][0]["cpu_user_s"], 1.0);
    }

    #[test]
    fn peak_is_the_best_window_of_a_tenth_of_the_run() {
        // 10 s at 100 B/s with one 1 s burst at 1000 B/s from t = 5 s.
        let mut v = vec![(0.0, 0u64)];
        let mut b = 0;
        for k in 1..=100 {
            let t = k as f64 / 10.0;
            b += if (5.0..6.0).contains(&(t - 0.1)) {
                100
            } else {
                10
            };
            v.push((t, b));
        }
        let p = peak_rate(&v);
        assert!((p - 1000.0).abs() < 1e-6, "{p}");
        // Too short a run for two windows: no peak.
        assert_eq!(peak_rate(&[(0.0, 0), (0.05, 10)]), 0.0);
        assert_eq!(peak_rate(&[]), 0.0);
        // Steady: the peak is the average.
        let steady: Vec<(f64, u64)> = (0..=50).map(|k| (k as f64 * 0.1, k * 7)).collect();
        assert!((peak_rate(&steady) - 70.0).abs() < 1e-6);
    }

    #[test]
    fn cpu_times_move() {
        let (u0, s0) = cpu_times();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let (u1, s1) = cpu_times();
        assert!(u1 + s1 > u0 + s0, "{u0}+{s0} -> {u1}+{s1}");
    }
}
