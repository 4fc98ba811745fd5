//! What `railyard bench` measures and prints: one [`SizeResult`] per
//! transfer size in a [`Report`], shown as perftest's table ([`table`],
//! after its [`header`]) or as JSON; the batch-latency histogram, the peak
//! bandwidth window and the process's CPU seconds.

use serde::{Deserialize, Serialize};

use super::args::{fmt_size, BenchArgs, Op};

/// Latency percentiles, µs (recorded in ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Smallest (absent in reports of older builds: 0).
    #[serde(default)]
    pub min: f64,
    /// Mean (absent in reports of older builds: 0).
    #[serde(default)]
    pub mean: f64,
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
    /// The nearest-rank percentiles of `h` (ns samples), in µs.
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        Latency {
            min: us(h.min()),
            mean: h.mean() / 1e3,
            p50: us(h.value_at_quantile(0.50)),
            p99: us(h.value_at_quantile(0.99)),
            p99_9: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// The histogram every thread records latencies into (ns, 1 ns to one
/// hour, 3 significant digits).
pub fn histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
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
    /// Batch latency: from submit until every transfer of the batch is
    /// complete (with `--lat`, a batch is one transfer: its round trip).
    pub batch_latency_us: Latency,
    /// Process CPU time in user mode during the run (engine workers included), s.
    pub cpu_user_s: f64,
    /// Process CPU time in the kernel during the run, s.
    pub cpu_sys_s: f64,
    /// (user + system) CPU seconds per GiB moved.
    pub cpu_s_per_gib: f64,
    /// (user + system) CPU µs per transfer (absent in reports of older
    /// builds: 0).
    #[serde(default)]
    pub cpu_us_per_transfer: f64,
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
    /// The most bytes submitted and not yet completed at once, over every
    /// thread (the offered window the run actually held; absent in reports
    /// of older builds: 0).
    #[serde(default)]
    pub peak_inflight_bytes: u64,
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
    /// `--lat`: one transfer in flight, the table is perftest's latency
    /// table (absent in reports of older builds: `false`).
    #[serde(default)]
    pub latency_mode: bool,
    /// How the submitters waited: `block` or `poll` (absent in reports of
    /// older builds: empty).
    #[serde(default)]
    pub wait: String,
    /// One entry per size.
    pub results: Vec<SizeResult>,
}

/// The perftest-style table (`#bytes #iterations BW peak BW average
/// MsgRate`, then the batch latency and CPU seconds), or with `--lat`
/// [`lat_table`].
pub fn table(r: &Report, gbits: bool) -> String {
    use std::fmt::Write as _;
    if r.latency_mode {
        return lat_table(r);
    }
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

/// perftest's latency table (`ib_write_lat`: `#bytes #iterations t_min
/// t_max t_typical t_avg 99% 99.9%`, t_typical being the median), then
/// the CPU µs per transfer.
pub fn lat_table(r: &Report) -> String {
    use std::fmt::Write as _;
    let rule = "-".repeat(132);
    let mut s = String::new();
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(
        s,
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    99% percentile[usec]   99.9% percentile[usec]   CPU/transfer[usec]"
    );
    for x in &r.results {
        let l = &x.batch_latency_us;
        let _ = writeln!(
            s,
            " {:<6} {:<11} {:<14.2} {:<12.2} {:<16.2} {:<14.2} {:<22.2} {:<24.2} {:.2}",
            x.bytes,
            x.iterations,
            l.min,
            l.max,
            l.p50,
            l.mean,
            l.p99,
            l.p99_9,
            x.cpu_us_per_transfer
        );
    }
    let _ = writeln!(s, "{rule}");
    let _ = writeln!(
        s,
        " latency: one transfer in flight, submit until its completion is seen ({}); CPU: user + system of the whole process",
        if r.wait == "block" { "sleeping until it settles" } else { "busy-polling the batch" }
    );
    s
}

/// The header perftest prints before its table.
pub fn header(r: &Report, role: &str) -> String {
    let rule = "-".repeat(132);
    format!(
        "{rule}\n{:^132}\n {role}: device {}  peer {}  threads {}  batch {}  depth {}  QPs/endpoint {}  slice {}  workers {} ({})  CC {}  buffer {}{}\n",
        format!(
            "{} {} Test (railyard bench)",
            if r.op == "read" { Op::Read.perftest_name() } else { Op::Write.perftest_name() },
            if r.latency_mode { "Latency" } else { "BW" }
        ),
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

/// Prints `r` as the table (with the header unless `--quiet`) or JSON.
pub(super) fn print_report(a: &BenchArgs, r: &Report, role: &str) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::control::Msg;

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
        // Recorded in ns, reported in µs.
        let l = Latency::of(&h);
        assert_eq!((l.min, l.p50, l.max), (0.001, 1.0, 2.0));
        assert!((l.mean - 1.0005).abs() < 1e-3, "{}", l.mean);
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
                    ..Latency::default()
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
        let m = Msg::Done {
            report: Box::new(r.clone()),
        };
        let back: Msg = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let j: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(j["results"][0]["batch_latency_us"]["p99_9"], 30.0);
        assert_eq!(j["results"][0]["cpu_user_s"], 1.0);
    }

    #[test]
    fn lat_table_has_perftest_lat_columns() {
        let r = Report {
            op: "read".into(),
            latency_mode: true,
            wait: "poll".into(),
            results: vec![SizeResult {
                bytes: 8,
                iterations: 1000,
                batch_latency_us: Latency {
                    min: 3.25,
                    mean: 4.5,
                    p50: 4.0,
                    p99: 9.0,
                    p99_9: 12.5,
                    max: 20.0,
                },
                cpu_us_per_transfer: 7.5,
                ..SizeResult::default()
            }],
            ..Report::default()
        };
        let t = table(&r, false);
        for col in [
            "t_min[usec]",
            "t_typical[usec]",
            "99.9% percentile[usec]",
            "CPU/transfer[usec]",
        ] {
            assert!(t.contains(col), "{col}: {t}");
        }
        assert!(!t.contains("BW average"), "{t}");
        assert!(
            t.contains(" 8      1000        3.25           20.00        4.00             4.50"),
            "{t}"
        );
        assert!(t.contains("busy-polling"), "{t}");
        assert!(header(&r, "client").contains("RDMA_Read Latency Test"));
        // An older report (no new fields) still parses.
        let old = r#"{"bytes":8,"iterations":1,"batches":1,"seconds":1.0,"bw_peak_mib_per_s":0.0,"bw_average_mib_per_s":0.0,"bw_average_gbit_per_s":0.0,"msg_rate_mops":0.0,"batch_latency_us":{"p50":1.0,"p99":1.0,"p99_9":1.0,"max":1.0},"cpu_user_s":0.0,"cpu_sys_s":0.0,"cpu_s_per_gib":0.0,"posts":0,"doorbells":0,"completions":0,"deferrals":0,"retries":0}"#;
        let x: SizeResult = serde_json::from_str(old).unwrap();
        assert_eq!((x.batch_latency_us.min, x.cpu_us_per_transfer), (0.0, 0.0));
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
