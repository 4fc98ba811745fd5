//! `railyard bench`'s arguments: [`BenchArgs`] (clap derive; its doc
//! comments are `railyard bench --help`, which the README quotes), the
//! cross-flag checks that turn a client's flags into a [`Plan`], and the
//! size and address syntax they accept.

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use super::BenchError;
use crate::int_in::int_in;

/// The control connection's default port (perftest's).
pub const DEFAULT_PORT: u16 = 18515;
/// Tasks one engine tracks at once (`EngineConfig::max_tasks` default):
/// threads × depth × batch must fit.
pub const MAX_TASKS: u64 = 1 << 14;
/// `-a`: perftest's sweep, 2 B to 8 MiB in powers of two.
pub const SWEEP: std::ops::RangeInclusive<u32> = 1..=23;
/// `--lat` without `-n` or `-D`: iterations per size (perftest's default).
pub const LAT_ITERS: u64 = 1000;
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
    pub(super) fn perftest_name(self) -> &'static str {
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

/// RDMA WRITE/READ bandwidth and latency benchmark over the railyard engine, with perftest's and Mooncake's flags.
///
/// Without PEER this is the server: it waits on --port for one client,
/// registers the memory the client asks for and exits when the client is
/// done, like perftest. With PEER it is the client: --threads submitter
/// threads each keep --depth batches of --batch_size transfers of --size
/// bytes in flight for --duration seconds (or --iters transfers), then it
/// prints a perftest-style table with the batch latency and CPU time (or
/// --json). With --lat it is perftest's latency test instead: one transfer
/// in flight, -n round trips per size (1000), and the table
/// gives t_min, t_max, t_typical (P50), t_avg, P99 and P99.9 in µs. Flags
/// that shape the load are the client's; the server takes
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
  railyard bench -d rxe0 --lat -s 8 --op read HOST # ib_read_lat's shape: 1000 round trips of 8 B
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
    /// Latency test (perftest's ib_write_lat / ib_read_lat): one transfer in flight, each round trip timed (P50/P99/P99.9/max µs)
    #[arg(long = "lat", visible_alias = "latency", conflicts_with_all = ["threads", "batch_size", "depth"])]
    pub lat: bool,
    /// How a submitter waits for its batch: sleep until it settles, or busy-poll it (perftest's way, a core spinning)
    #[arg(long, value_enum, value_name = "HOW", default_value_t = WaitMode::Block)]
    pub wait: WaitMode,
    /// Transfers per thread (per size with -a) instead of a duration [default with --lat: 1000]
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

/// How a submitter waits for its batch (`--wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// Sleep until the batch's last task settles (`Engine::wait_batch`):
    /// the cores stay with the workers.
    Block,
    /// Busy-poll `Engine::batch_done` (perftest's latency tests spin on
    /// their CQ the same way): no wake-up in the round trip, one core
    /// spinning. In a 2-vCPU Soft-RoCE guest it measured slower than
    /// `block` (the spinner takes a vCPU from the engine's workers and the
    /// kernel doing the NIC's work).
    Poll,
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
    /// `--lat`: one transfer in flight, each one's round trip recorded.
    pub latency: bool,
    /// How each submitter waits for its batch.
    pub wait: WaitMode,
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
    pub fn plan(&self) -> Result<Option<Plan>, BenchError> {
        let Some(peer) = self.peer() else {
            return Ok(None);
        };
        if peer.trim().is_empty() {
            return Err(BenchError::EmptyPeer);
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
            // perftest's latency tests: 1000 iterations per size.
            (None, None) if self.lat => Stop::Transfers(LAT_ITERS),
            (None, None) => Stop::Seconds(if self.all { 1 } else { 5 }),
        };
        // --lat is one thread with one batch of one transfer in flight
        // (clap refuses --threads, --batch_size and --depth beside it).
        let (threads, batch, depth) = if self.lat {
            (1, 1, 1)
        } else {
            (self.threads, self.batch_size, self.depth)
        };
        let tasks = threads * depth * batch;
        if tasks > MAX_TASKS {
            return Err(BenchError::TooManyInFlight {
                threads: self.threads,
                depth: self.depth,
                batch: self.batch_size,
            });
        }
        let plan = Plan {
            peer: peer_addr(peer.trim(), self.port as u16),
            sizes,
            stop,
            threads,
            batch,
            depth,
            buffer: self.buffer_size,
            latency: self.lat,
            wait: self.wait,
        };
        if plan.slots(max) == 0 {
            return Err(BenchError::BufferTooSmall {
                buffer: self.buffer_size,
                threads: self.threads,
                per_thread: plan.per_thread(),
                size: max,
            });
        }
        if self.verify && plan.slots(max) < depth * batch {
            return Err(BenchError::VerifyDoesNotFit {
                needed: threads * depth * batch * max,
                buffer: self.buffer_size,
            });
        }
        Ok(Some(plan))
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
            let e = parse(args).unwrap().plan().expect_err(args).to_string();
            assert!(e.contains(want), "{args}: {e}");
        }
    }

    #[test]
    fn lat_is_one_transfer_in_flight() {
        let p = parse("--lat -s 8 h").unwrap().plan().unwrap().unwrap();
        assert!(p.latency);
        assert_eq!((p.threads, p.batch, p.depth), (1, 1, 1));
        assert_eq!(
            (p.sizes.clone(), p.stop),
            (vec![8], Stop::Transfers(LAT_ITERS))
        );
        assert_eq!(p.wait, WaitMode::Block);
        let p = parse("--lat -a -D 2 --wait poll h")
            .unwrap()
            .plan()
            .unwrap()
            .unwrap();
        assert_eq!((p.sizes.len(), p.stop), (23, Stop::Seconds(2)));
        assert_eq!(p.wait, WaitMode::Poll);
        // The bandwidth test keeps its shape.
        let p = parse("--threads 2 h").unwrap().plan().unwrap().unwrap();
        assert!(!p.latency);
        assert_eq!((p.threads, p.wait), (2, WaitMode::Block));
        for bad in [
            "--lat --threads 2 h",
            "--lat --batch_size 4 h",
            "--lat --depth 2 h",
        ] {
            let e = parse(bad).expect_err(bad).to_string();
            assert!(e.contains("cannot be used with"), "{bad}: {e}");
        }
        assert!(parse("--wait spin h")
            .expect_err("spin")
            .to_string()
            .contains("invalid value 'spin'"));
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
}
