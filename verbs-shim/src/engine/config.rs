//! Engine configuration and its environment variables.
//!
//! | variable | field | default | allowed |
//! |---|---|---|---|
//! | `MC_SLICE_SIZE` | [`EngineConfig::slice_size`] | 65536 | 1 ..= 1 GiB (bytes) |
//! | `MC_NUM_QP_PER_EP` | [`EngineConfig::qps_per_endpoint`] | 2 | 1 ..= 64 |
//! | `MC_MAX_WR` | [`EngineConfig::max_wr`] | 256 | 1 ..= 32768 |
//! | `MC_MAX_EP_PER_CTX` | [`EngineConfig::max_endpoints`] | 64 | 1 ..= 65536 (a full store evicts its least recently used idle segment) |
//! | `MC_WORKERS_PER_CTX` | [`EngineConfig::workers`] | 2 | 1 ..= 64 (≥ 2 with a dedicated poller) |
//! | `MC_RDMA_DEDICATED_POLLER` | [`EngineConfig::worker_model`] | `0` (shared) | `0`/`1`/`false`/`true` |
//! | `MC_GID_INDEX` | [`EngineConfig::gid_index`] | 1 | 0 ..= 255 |
//! | `MC_RDMA_DEVICE` | [`EngineConfig::device`] / [`EngineConfig::devices`] | first device | a device name, or a comma-separated list of 2..=8 distinct names (the rails, in rail order) |
//! | `MC_RDMA_DEVICES` | [`EngineConfig::devices`] | unset | a comma-separated list of 1..=8 distinct names; set together with `MC_RDMA_DEVICE` the two must agree |
//! | `MC_RDMA_IDLE_PARK_US` | [`EngineConfig::idle_sleep`] | 50000 | 0 (busy-poll) ..= 1000000 |
//! | `MC_RDMA_INFLIGHT_NAP_US` | [`EngineConfig::inflight_nap`] | 0 (poll) | 0 ..= 1000000 |
//! | `MC_SIGNAL_INTERVAL` | [`EngineConfig::signal_interval`] | 1 (every WR signaled) | 1 ..= 1024 |
//! | `MC_IB_TIMEOUT` | [`EngineConfig::qp_timeout`] | 14 | 1 ..= 31 (4.096 µs × 2^n) |
//! | `MC_IB_RETRY_CNT` | [`EngineConfig::qp_retry_cnt`] | 7 | 0 ..= 7 |
//! | `MC_RAIL_PEER_ACCOUNTING` | [`RailConfig::peer_accounting`] | `0` | `0`/`1`/`false`/`true`; `1` needs the `peer-feedback` feature (in the default build) |
//! | `MC_RAIL_VARIANT` | [`RailConfig::variant`] | `V1` | `V0`, `V1`, `V2`, `V3` (RFC 4534) |
//! | `MC_RAIL_PEER_TTL_US` | [`RailConfig::peer_ttl_ns`] | 10000 | 1 ..= 60000000 (µs) |
//! | `MC_RAIL_TRACE` | [`RailConfig::trace`] | `0` | `0`/`1`/`false`/`true` (per-decision sample ages for TTL calibration; diagnostics only) |
//! | `MC_RAIL_EWMA_FLOOR_Q8` | [`RailConfig::ewma_floor_q8`] | 4 (1/64 of nominal) | 1 ..= 256 (Q8 multiple of the nominal rate) |
//! | `MC_RAIL_NOMINAL_MBPS` | [`EngineConfig::rail_nominal_bps`] | 12500 (100 Gb/s) | 1 ..= 1000000 (MB/s, 10^6 bytes/s) |
//!
//! | `MC_ADAPTIVE_CC_*` | [`EngineConfig::cc`] | CC off | see `railyard_core::cc::config` (RFC 4162) |
//! | `MC_RECEIVER_CREDIT*` | [`EngineConfig::credit`] | credit off | see [`CreditConfig`] (RFC 2849) |
//!
//! Unset or empty means the default. Anything else that does not parse or
//! is out of range is a [`ConfigError`] naming the variable, never a silent
//! fallback. The `MC_ADAPTIVE_CC_*` variables are parsed by
//! `CcConfig::from_lookup` (core) with the same lookup; an invalid one (or
//! an invalid combination, named by the variable that is checked against
//! the others) is a [`ConfigError`] too. A [`CcConfig`] set in code that
//! does not validate leaves the controller **off** (RFC 4162), and
//! [`Engine::cc_config_error`](super::Engine::cc_config_error) surfaces why.

use super::error::ConfigError;
use super::types::MAX_RAILS;
use railyard_core::cc::{CcConfig, ConfigError as CcError, Param};
use railyard_core::completion::{SignalPolicy, MAX_SIGNAL_INTERVAL};
use railyard_core::rail::{ConfigError as RailConfigError, DeviceSpec, RailConfig, Variant};
use railyard_core::wire::credit as credit_wire;
use railyard_core::wire::handshake::CreditCapability;

/// [`EngineConfig::signal_interval`]'s default: every work request
/// signaled. Selective signaling is correct on Soft-RoCE (the `signal_*`
/// tests of `rxe_faults`, and every engine test binary run with
/// `MC_SIGNAL_INTERVAL=32`), but `scripts/bench-signal.sh` showed no clear
/// 4 KiB message-rate gain there (per-round k=32 / k=1 ratios 0.6–2.1,
/// medians 0.95–1.34, host loaded by other guests): rxe's own per-WQE work
/// dominates, not the CQE. Its gain is a NIC's CQE writes and the polls
/// saved; measure on the NIC before turning it on.
pub const DEFAULT_SIGNAL_INTERVAL: u32 = 1;

/// Parses a comma-separated device list for `var`: non-empty names,
/// distinct, at most [`MAX_RAILS`].
fn device_list(var: &'static str, raw: &str) -> Result<Vec<String>, ConfigError> {
    let err = |expected| ConfigError {
        var,
        value: raw.to_owned(),
        expected,
    };
    let names: Vec<String> = raw.split(',').map(|n| n.trim().to_owned()).collect();
    if names.iter().any(|n| n.is_empty()) {
        return Err(err("comma-separated device names, none empty"));
    }
    if names.len() > MAX_RAILS {
        return Err(err("at most 8 devices"));
    }
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(err("distinct device names (each device is one rail)"));
        }
    }
    Ok(names)
}
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// How workers split posting and polling (RFC 3136, "Current Worker Models").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkerModel {
    /// The default: worker `i` posts shard `i` and polls the CQ of shard `i`.
    Shared,
    /// `MC_RDMA_DEDICATED_POLLER=1`: worker 0 polls every CQ, workers
    /// `1..N` post. Safe here because completions resolve through tokens.
    DedicatedPoller,
}

/// Nominal link rate every rail starts with in the selector (bytes/s,
/// 100 Gb/s); completions then teach it each rail's real rate (EWMA).
pub const NOMINAL_RAIL_BPS: u64 = 12_500_000_000;

/// How often the monitor runs reclaim (task timeouts: every 4th tick).
/// Reclaim and timeouts are millisecond-scale policies; a faster tick only
/// steals CPU from the workers.
pub(crate) const MONITOR_TICK: Duration = Duration::from_millis(5);

/// Everything [`Engine::new`](super::Engine::new) needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// RDMA device name; `None` opens the first device. Used when
    /// [`devices`](Self::devices) is empty.
    pub device: Option<String>,
    /// The rails: device names in rail order (local device `i` is rail
    /// `i`). Empty (the default) = the one device of
    /// [`device`](Self::device). See [`EngineConfig::device_names`].
    pub devices: Vec<String>,
    /// Rail selection (RFC 4534, `railyard_core::rail`): the selector's
    /// constants and the opt-in peer ledger. Used with any number of
    /// devices (one device: every slice picks rail 0).
    pub rail: RailConfig,
    /// Nominal link rate of every rail, bytes per second: the selector's
    /// starting bandwidth estimate and the base of its EWMA clamps (floor
    /// and ceiling are multiples of it). The port's rate is not queried.
    /// Default [`NOMINAL_RAIL_BPS`](NOMINAL_RAIL_BPS) (100 Gb/s);
    /// set it near the real per-rail rate (e.g. a few hundred MB/s for
    /// Soft-RoCE under qemu TCG, `MC_RAIL_NOMINAL_MBPS`), or every
    /// completion sample lands on the EWMA floor and the rails look alike.
    pub rail_nominal_bps: u64,
    /// Port number (from 1).
    pub port: u8,
    /// GID index (1 = the IPv4-mapped RoCE v2 GID on rxe and most RoCE NICs).
    pub gid_index: u8,
    /// Slice size in bytes; see the tail rule in [`slice_count`].
    pub slice_size: u32,
    /// RC QPs per endpoint.
    pub qps_per_endpoint: u16,
    /// Send-queue depth per QP (the endpoint table enforces it too).
    pub max_wr: u32,
    /// Worker threads.
    pub workers: u16,
    /// Shared or dedicated-poller model.
    pub worker_model: WorkerModel,
    /// Where the handshake listener binds (`:0` picks a free port).
    pub listen: SocketAddr,
    /// Endpoint slots (initiated plus accepted connections; a segment
    /// takes one per rail). Also the CC route domains per device. When
    /// every slot is taken, opening a connection evicts the least recently
    /// used idle segment this engine opened (RFC 3136 `StoreEviction`);
    /// the next transfer to it reconnects it.
    pub max_endpoints: u32,
    /// Slices that may exist at once (across all batches).
    pub max_slices: u32,
    /// Tasks that may exist at once (across all batches).
    pub max_tasks: u32,
    /// Posted work requests in flight at once (token pool size). Also the
    /// depth of every CQ, so a CQ can never overflow.
    pub max_inflight: u32,
    /// A task not finished after this long is settled `TIMEOUT`.
    pub transfer_timeout: Duration,
    /// How long a retired endpoint may drain before its QPs are forced to
    /// ERR (twice this: reclaimed anyway).
    pub drain_timeout: Duration,
    /// Handshake timeout: of each socket read and write, and, on the
    /// listener, of a whole passive handshake (accept to barrier), so a
    /// slow peer is dropped after it.
    pub handshake_timeout: Duration,
    /// Passive handshakes the listener runs at once (1..=1024; default 8);
    /// a connection beyond them is refused at once, never queued.
    pub max_handshakes: u16,
    /// RC local ACK timeout exponent (4.096 µs × 2^n) of every QP: with
    /// [`qp_retry_cnt`](Self::qp_retry_cnt), how long a dead peer takes to
    /// surface as `IBV_WC_RETRY_EXC_ERR` (`MC_IB_TIMEOUT`).
    pub qp_timeout: u8,
    /// RC transport retries, 0..=7 (`MC_IB_RETRY_CNT`).
    pub qp_retry_cnt: u8,
    /// The longest an idle worker (nothing queued, nothing in flight)
    /// parks before polling again; submits, retries, credit grants, posts
    /// for its CQ and shutdown unpark it at once, so this is a safety net,
    /// not a latency: default 50 ms. A short timeout only adds wake-ups
    /// (1 ms gave every engine 1000 per worker per second, each one a
    /// timer interrupt and a context switch; across two Soft-RoCE guests
    /// 1 ms ran at 0.80–0.97× of 50 ms, `scripts/bench-peers.sh --two
    /// --variants`). `None` busy-polls forever
    /// (lowest latency, one core per worker).
    pub idle_sleep: Option<Duration>,
    /// With work in flight but no completion for a long while (4096 empty
    /// polls), sleep this long between polls instead of yielding. `None`
    /// (the default) keeps polling. Meant for CPU-starved hosts such as
    /// Soft-RoCE guests, where the "NIC" needs the CPU the poller spins on
    /// (`MC_RDMA_INFLIGHT_NAP_US`).
    pub inflight_nap: Option<Duration>,
    /// Selective signaling (`MC_SIGNAL_INTERVAL`): in each doorbell chain
    /// of one QP, every `signal_interval`-th work request and always the
    /// chain's last one is signaled; the CQE of a signaled request
    /// completes the unsignaled ones posted before it on that QP, in
    /// posting order (`railyard_core::completion::PostOrder`). 1 signals
    /// every request. An unsignaled request never waits for a later post:
    /// its chain's last request covers it.
    pub signal_interval: u32,
    /// The congestion controller (`MC_ADAPTIVE_CC_*`, RFC 4162). Off by
    /// default.
    pub cc: CcConfig,
    /// Receiver-advertised credits (`MC_RECEIVER_CREDIT*`, RFC 2849). Off
    /// by default.
    pub credit: CreditConfig,
}

/// [`EngineConfig::idle_sleep`]'s default: the longest park of an idle
/// worker (every event that gives it work unparks it at once).
pub const DEFAULT_IDLE_PARK: Duration = Duration::from_millis(50);

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            device: None,
            devices: Vec::new(),
            rail: RailConfig::default(),
            rail_nominal_bps: NOMINAL_RAIL_BPS,
            port: 1,
            gid_index: 1,
            slice_size: 65536,
            qps_per_endpoint: 2,
            max_wr: 256,
            workers: 2,
            worker_model: WorkerModel::Shared,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_endpoints: 64,
            max_slices: 1 << 16,
            max_tasks: 1 << 14,
            max_inflight: 4096,
            transfer_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(10),
            max_handshakes: 8,
            qp_timeout: 14,
            qp_retry_cnt: 7,
            idle_sleep: Some(DEFAULT_IDLE_PARK),
            inflight_nap: None,
            signal_interval: DEFAULT_SIGNAL_INTERVAL,
            cc: CcConfig::default(),
            credit: CreditConfig::default(),
        }
    }
}

fn num<T: std::str::FromStr + PartialOrd + Copy + fmt::Display>(
    var: &'static str,
    raw: &str,
    lo: T,
    hi: T,
    expected: &'static str,
) -> Result<T, ConfigError> {
    let err = || ConfigError {
        var,
        value: raw.to_owned(),
        expected,
    };
    let v: T = raw.trim().parse().map_err(|_| err())?;
    if v < lo || v > hi {
        return Err(err());
    }
    Ok(v)
}

impl EngineConfig {
    /// The defaults overridden by the `MC_*` environment variables (see the
    /// module table).
    ///
    /// ```
    /// use railyard_verbs::engine::EngineConfig;
    ///
    /// std::env::set_var("MC_SLICE_SIZE", "131072");
    /// let cfg = EngineConfig::from_env()?;
    /// assert_eq!(cfg.slice_size, 131072);
    ///
    /// std::env::set_var("MC_SLICE_SIZE", "0");
    /// let e = EngineConfig::from_env().unwrap_err(); // never a silent fallback
    /// assert_eq!(e.var, "MC_SLICE_SIZE");
    /// # Ok::<(), railyard_verbs::engine::ConfigError>(())
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// As [`from_env`](Self::from_env), reading variables through `get`
    /// (for tests and for embedding in another configuration system).
    /// A refused value is also logged (`railyard::config`, warn).
    ///
    /// ```
    /// use railyard_verbs::engine::{EngineConfig, WorkerModel};
    /// use std::collections::HashMap;
    ///
    /// let vars = HashMap::from([
    ///     ("MC_RDMA_DEVICE", "mlx5_0,mlx5_1"),
    ///     ("MC_NUM_QP_PER_EP", "4"),
    ///     ("MC_RDMA_DEDICATED_POLLER", "1"),
    /// ]);
    /// let cfg = EngineConfig::from_lookup(|k| vars.get(k).map(|v| v.to_string()))?;
    /// assert_eq!(cfg.devices, ["mlx5_0", "mlx5_1"]);
    /// assert_eq!(cfg.qps_per_endpoint, 4);
    /// assert_eq!(cfg.worker_model, WorkerModel::DedicatedPoller);
    ///
    /// let e = EngineConfig::from_lookup(|k| (k == "MC_MAX_WR").then(|| "lots".into())).unwrap_err();
    /// assert_eq!(e.to_string(), r#"invalid MC_MAX_WR="lots": expected an integer in 1..=32768"#);
    /// # Ok::<(), railyard_verbs::engine::ConfigError>(())
    /// ```
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::parse_lookup(get).inspect_err(|e| {
            tracing::warn!(target: "railyard::config", var = e.var, value = %e.value,
                expected = e.expected, "configuration value refused");
        })
    }

    fn parse_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut c = Self::default();
        let var = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        if let Some(v) = var("MC_SLICE_SIZE") {
            c.slice_size = num("MC_SLICE_SIZE", &v, 1, 1 << 30, "bytes in 1..=1073741824")?;
        }
        if let Some(v) = var("MC_NUM_QP_PER_EP") {
            c.qps_per_endpoint = num("MC_NUM_QP_PER_EP", &v, 1, 64, "an integer in 1..=64")?;
        }
        if let Some(v) = var("MC_MAX_WR") {
            c.max_wr = num("MC_MAX_WR", &v, 1, 32768, "an integer in 1..=32768")?;
        }
        if let Some(v) = var("MC_MAX_EP_PER_CTX") {
            c.max_endpoints = num("MC_MAX_EP_PER_CTX", &v, 1, 65536, "an integer in 1..=65536")?;
        }
        if let Some(v) = var("MC_WORKERS_PER_CTX") {
            c.workers = num("MC_WORKERS_PER_CTX", &v, 1, 64, "an integer in 1..=64")?;
        }
        if let Some(v) = var("MC_RDMA_DEDICATED_POLLER") {
            c.worker_model = if flag("MC_RDMA_DEDICATED_POLLER", &v)? {
                WorkerModel::DedicatedPoller
            } else {
                WorkerModel::Shared
            };
        }
        if let Some(v) = var("MC_GID_INDEX") {
            c.gid_index = num("MC_GID_INDEX", &v, 0, 255, "an integer in 0..=255")?;
        }
        if let Some(v) = var("MC_RDMA_IDLE_PARK_US") {
            let us: u64 = num(
                "MC_RDMA_IDLE_PARK_US",
                &v,
                0,
                1_000_000,
                "microseconds in 0..=1000000 (0 = busy-poll)",
            )?;
            c.idle_sleep = (us > 0).then(|| Duration::from_micros(us));
        }
        if let Some(v) = var("MC_SIGNAL_INTERVAL") {
            c.signal_interval = num(
                "MC_SIGNAL_INTERVAL",
                &v,
                1,
                MAX_SIGNAL_INTERVAL,
                "an integer in 1..=1024 (1 = every work request signaled)",
            )?;
        }
        if let Some(v) = var("MC_RDMA_INFLIGHT_NAP_US") {
            let us: u64 = num(
                "MC_RDMA_INFLIGHT_NAP_US",
                &v,
                0,
                1_000_000,
                "microseconds in 0..=1000000 (0 = keep polling)",
            )?;
            c.inflight_nap = (us > 0).then(|| Duration::from_micros(us));
        }
        if let Some(v) = var("MC_IB_TIMEOUT") {
            c.qp_timeout = num("MC_IB_TIMEOUT", &v, 1, 31, "an integer in 1..=31")?;
        }
        if let Some(v) = var("MC_IB_RETRY_CNT") {
            c.qp_retry_cnt = num("MC_IB_RETRY_CNT", &v, 0, 7, "an integer in 0..=7")?;
        }
        if let Some(v) = var("MC_RDMA_DEVICE") {
            let names = device_list("MC_RDMA_DEVICE", &v)?;
            if names.len() == 1 {
                c.device = names.into_iter().next();
            } else {
                c.devices = names;
            }
        }
        if let Some(v) = var("MC_RDMA_DEVICES") {
            let names = device_list("MC_RDMA_DEVICES", &v)?;
            let agrees = match (&c.device, c.devices.is_empty()) {
                (None, true) => true,
                (Some(d), true) => names.len() == 1 && &names[0] == d,
                (_, false) => c.devices == names,
            };
            if !agrees {
                return Err(ConfigError {
                    var: "MC_RDMA_DEVICES",
                    value: v,
                    expected: "the same devices as MC_RDMA_DEVICE (or leave one of them unset)",
                });
            }
            c.device = None;
            c.devices = names;
        }
        c.rail_from_lookup(&var)?;
        c.cc = CcConfig::from_lookup(&var).map_err(|e| cc_error(e, &var))?;
        c.credit.read_lookup(&var)?;
        c.validate()?;
        Ok(c)
    }

    /// Checks combinations the per-variable ranges cannot: a dedicated
    /// poller needs a second worker to post; sizes must be non-zero.
    ///
    /// ```
    /// use railyard_verbs::engine::{EngineConfig, WorkerModel};
    ///
    /// let mut cfg = EngineConfig::default();
    /// assert!(cfg.validate().is_ok());
    /// cfg.worker_model = WorkerModel::DedicatedPoller;
    /// cfg.workers = 1; // the poller would have no worker to post
    /// assert_eq!(cfg.validate().unwrap_err().var, "MC_WORKERS_PER_CTX");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |var: &'static str, value: String, expected: &'static str| {
            Err(ConfigError {
                var,
                value,
                expected,
            })
        };
        if self.worker_model == WorkerModel::DedicatedPoller && self.workers < 2 {
            return bad(
                "MC_WORKERS_PER_CTX",
                self.workers.to_string(),
                "at least 2 with MC_RDMA_DEDICATED_POLLER=1 (one polls, the rest post)",
            );
        }
        if self.workers == 0 || self.workers > 64 {
            return bad(
                "MC_WORKERS_PER_CTX",
                self.workers.to_string(),
                "an integer in 1..=64",
            );
        }
        if self.slice_size == 0 || self.slice_size > 1 << 30 {
            return bad(
                "MC_SLICE_SIZE",
                self.slice_size.to_string(),
                "bytes in 1..=1073741824",
            );
        }
        if self.qps_per_endpoint == 0 || usize::from(self.qps_per_endpoint) > crate::wire::MAX_QPS {
            return bad(
                "MC_NUM_QP_PER_EP",
                self.qps_per_endpoint.to_string(),
                "an integer in 1..=64",
            );
        }
        if SignalPolicy::new(self.signal_interval).is_err() {
            return bad(
                "MC_SIGNAL_INTERVAL",
                self.signal_interval.to_string(),
                "an integer in 1..=1024 (1 = every work request signaled)",
            );
        }
        if self.max_wr == 0 || self.max_wr > 32768 {
            return bad(
                "MC_MAX_WR",
                self.max_wr.to_string(),
                "an integer in 1..=32768",
            );
        }
        for (var, v) in [
            ("max_endpoints", self.max_endpoints),
            ("max_slices", self.max_slices),
            ("max_tasks", self.max_tasks),
            ("max_inflight", self.max_inflight),
        ] {
            if v == 0 || v == u32::MAX {
                return bad(var, v.to_string(), "1..u32::MAX");
            }
        }
        if self.port == 0 {
            return bad("port", "0".into(), "a port number from 1");
        }
        if self.max_handshakes == 0 || self.max_handshakes > 1024 {
            return bad(
                "max_handshakes",
                self.max_handshakes.to_string(),
                "an integer in 1..=1024",
            );
        }
        self.credit.validate()?;
        if self.rail_nominal_bps == 0 {
            return bad("rail_nominal_bps", "0".into(), "bytes per second from 1");
        }
        if !self.devices.is_empty() {
            device_list("devices", &self.devices.join(","))?;
        }
        let specs = vec![DeviceSpec::new(1); self.rails()];
        if let Err(e) = self.rail.validate(&specs) {
            return bad(
                "rail",
                e.to_string(),
                "a valid railyard_core::rail::RailConfig",
            );
        }
        Ok(())
    }
}

/// `0`/`1`/`false`/`true`.
fn flag(var: &'static str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim() {
        "0" | "false" => Ok(false),
        "1" | "true" => Ok(true),
        _ => Err(ConfigError {
            var,
            value: raw.to_owned(),
            expected: "0, 1, false or true",
        }),
    }
}

impl EngineConfig {
    /// The `MC_RAIL_*` variables (RFC 4534's selector and peer ledger).
    fn rail_from_lookup(
        &mut self,
        var: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        if let Some(v) = var("MC_RAIL_PEER_ACCOUNTING") {
            self.rail.peer_accounting = flag("MC_RAIL_PEER_ACCOUNTING", &v)?;
            if self.rail.validate(&[DeviceSpec::new(1)])
                == Err(RailConfigError::PeerFeedbackNotCompiled)
            {
                return Err(ConfigError {
                    var: "MC_RAIL_PEER_ACCOUNTING",
                    value: v,
                    expected: "0 (railyard-core was built without the peer-feedback feature)",
                });
            }
        }
        if let Some(v) = var("MC_RAIL_VARIANT") {
            self.rail.variant = match v.trim().to_ascii_uppercase().as_str() {
                "V0" => Variant::V0,
                "V1" => Variant::V1,
                "V2" => Variant::V2,
                "V3" => Variant::V3,
                _ => {
                    return Err(ConfigError {
                        var: "MC_RAIL_VARIANT",
                        value: v,
                        expected: "V0, V1, V2 or V3",
                    })
                }
            };
        }
        if let Some(v) = var("MC_RAIL_PEER_TTL_US") {
            let us: u64 = num(
                "MC_RAIL_PEER_TTL_US",
                &v,
                1,
                60_000_000,
                "microseconds in 1..=60000000",
            )?;
            self.rail.peer_ttl_ns = us * 1000;
        }
        if let Some(v) = var("MC_RAIL_TRACE") {
            self.rail.trace = flag("MC_RAIL_TRACE", &v)?;
        }
        if let Some(v) = var("MC_RAIL_EWMA_FLOOR_Q8") {
            self.rail.ewma_floor_q8 = num(
                "MC_RAIL_EWMA_FLOOR_Q8",
                &v,
                1,
                self.rail.ewma_ceil_q8,
                "an integer in 1..=256 (Q8 of the nominal rate, at most the ceiling)",
            )?;
        }
        if let Some(v) = var("MC_RAIL_NOMINAL_MBPS") {
            let mbps: u64 = num(
                "MC_RAIL_NOMINAL_MBPS",
                &v,
                1,
                1_000_000,
                "MB/s (10^6 bytes/s) in 1..=1000000",
            )?;
            self.rail_nominal_bps = mbps * 1_000_000;
        }
        Ok(())
    }

    /// The devices to open, in rail order: [`devices`](Self::devices) if
    /// set, else [`device`](Self::device) alone; `[None]` = the first
    /// device found.
    ///
    /// ```
    /// use railyard_verbs::engine::EngineConfig;
    ///
    /// assert_eq!(EngineConfig::default().device_names(), [None]); // the first device found
    /// let cfg = EngineConfig { devices: vec!["rxe0".into(), "rxe1".into()], ..EngineConfig::default() };
    /// assert_eq!(cfg.device_names(), [Some("rxe0"), Some("rxe1")]);
    /// ```
    pub fn device_names(&self) -> Vec<Option<&str>> {
        if self.devices.is_empty() {
            vec![self.device.as_deref()]
        } else {
            self.devices.iter().map(|d| Some(d.as_str())).collect()
        }
    }

    /// Number of rails (devices) this configuration opens.
    ///
    /// ```
    /// use railyard_verbs::engine::EngineConfig;
    ///
    /// assert_eq!(EngineConfig::default().rails(), 1);
    /// let cfg = EngineConfig { devices: vec!["rxe0".into(), "rxe1".into()], ..EngineConfig::default() };
    /// assert_eq!(cfg.rails(), 2);
    /// ```
    pub fn rails(&self) -> usize {
        self.devices.len().max(1)
    }
}

/// Maps a controller configuration error to the variable it names (for a
/// combination, the variable checked against the others).
fn cc_error(e: CcError, var: &impl Fn(&str) -> Option<String>) -> ConfigError {
    let (p, expected) = match e {
        CcError::InvalidMode => (Param::Mode, "off, observe or enforce"),
        CcError::InvalidTargetMode => (Param::TargetMode, "adaptive or fixed"),
        CcError::InvalidSoftwareDrain => (Param::SoftwareDrain, "advisory or enforce"),
        CcError::NotANumber(p) => (p, "a decimal integer"),
        CcError::Zero(p) => (p, "a positive integer"),
        CcError::TooLarge(p) => (p, "a smaller integer (see railyard_core::cc::config)"),
        CcError::MinAboveMax { .. } => (
            Param::MinWindowBytes,
            "at most MC_ADAPTIVE_CC_MAX_WINDOW_BYTES",
        ),
        CcError::ProbeAboveMin { .. } => (
            Param::ProbeWindowBytes,
            "at most MC_ADAPTIVE_CC_MIN_WINDOW_BYTES",
        ),
        CcError::InitialOutOfRange { .. } => (
            Param::InitialWindowBytes,
            "within [MC_ADAPTIVE_CC_MIN_WINDOW_BYTES, MC_ADAPTIVE_CC_MAX_WINDOW_BYTES]",
        ),
        CcError::DecreaseOutOfRange(_) => (Param::DecreasePercent, "a percentage in 1..=99"),
        CcError::RouteDeviceOutOfRange { .. } => (Param::Mode, "a valid route topology"),
    };
    ConfigError {
        var: p.env_name(),
        value: var(p.env_name()).unwrap_or_else(|| "(default)".into()),
        expected,
    }
}

/// The credit schema versions this engine speaks.
pub const CREDIT_VERSIONS: (u16, u16) = (credit_wire::SCHEMA_V1, credit_wire::SCHEMA_V1);

/// `MC_RECEIVER_CREDIT`: whether this engine negotiates receiver credit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CreditPolicy {
    /// `off` (default): no capability offered; everything as before.
    #[default]
    Off,
    /// `optional`: credit with peers that offer it, legacy bounded local
    /// dispatch (counted) with peers that do not.
    Optional,
    /// `required`: a peer without a compatible capability is refused.
    Required,
}

impl CreditPolicy {
    /// The policy's name as `MC_RECEIVER_CREDIT` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            CreditPolicy::Off => "off",
            CreditPolicy::Optional => "optional",
            CreditPolicy::Required => "required",
        }
    }
}

/// Receiver-credit configuration ([`EngineConfig::credit`]).
///
/// | variable | field | default | range |
/// |---|---|---|---|
/// | `MC_RECEIVER_CREDIT` | [`policy`](Self::policy) | `off` | `off`, `optional`, `required` |
/// | `MC_RECEIVER_CREDIT_BYTES` | [`bytes`](Self::bytes) | 67108864 | 1 ..= 4294967295 |
/// | `MC_RECEIVER_CREDIT_REQUESTS` | [`requests`](Self::requests) | 1024 | 1 ..= 2047 |
/// | `MC_RECEIVER_CREDIT_CONSUMERS` | [`consumers`](Self::consumers) | 1024 | 1 ..= 2047 |
/// | `MC_RECEIVER_CREDIT_PEERS` | [`peers`](Self::peers) | 64 | 1 ..= 1024 |
/// | `MC_RECEIVER_CREDIT_TTL_MS` | [`ttl`](Self::ttl) | 2000 | 0 (no expiry) ..= 600000 |
/// | `MC_RECEIVER_CREDIT_REFRESH_MS` | [`refresh`](Self::refresh) | 100 | 1 ..= 60000, below the TTL |
///
/// ```
/// use railyard_verbs::engine::{CreditPolicy, EngineConfig};
/// let env = |k: &str| match k {
///     "MC_RECEIVER_CREDIT" => Some("required".to_string()),
///     "MC_RECEIVER_CREDIT_CONSUMERS" => Some("8".to_string()),
///     _ => None,
/// };
/// let c = EngineConfig::from_lookup(env).unwrap();
/// assert_eq!(c.credit.policy, CreditPolicy::Required);
/// assert_eq!(c.credit.consumers, 8);
/// let bad = EngineConfig::from_lookup(|k| (k == "MC_RECEIVER_CREDIT").then(|| "yes".into()));
/// assert_eq!(bad.unwrap_err().var, "MC_RECEIVER_CREDIT");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditConfig {
    /// Off, optional or required.
    pub policy: CreditPolicy,
    /// DATA_BYTES capacity this engine grants as a receiver, over all
    /// senders.
    pub bytes: u64,
    /// REQUEST_SLOTS capacity (work requests in flight towards us).
    pub requests: u64,
    /// CONSUMER_SLOTS capacity (written slices not yet consumed by the
    /// application, [`Engine::consume`](super::Engine::consume)).
    pub consumers: u64,
    /// Most credit peers on each side; a connection beyond them is
    /// refused in required mode, legacy in optional mode. The sender side
    /// indexes its ledger by [`SegmentId`](super::SegmentId), and segment
    /// ids are never reused, so this bounds the segments ever credit-gated
    /// over the engine's life (a reconnect keeps its segment; a peer's
    /// reconnect to us records a new one).
    pub peers: u32,
    /// Freshness TTL the receiver advertises; a sender without an update
    /// for this long marks the peer Stale. Zero: no expiry.
    pub ttl: Duration,
    /// How often the receiver refreshes (top-up or heartbeat) and the
    /// sender reports usage when nothing else triggered it.
    pub refresh: Duration,
}

impl Default for CreditConfig {
    fn default() -> Self {
        Self {
            policy: CreditPolicy::Off,
            bytes: 64 << 20,
            requests: 1024,
            consumers: 1024,
            peers: 64,
            ttl: Duration::from_millis(2000),
            refresh: Duration::from_millis(100),
        }
    }
}

/// Largest REQUEST/CONSUMER capacity (the sender ledger's 11-bit window).
pub(crate) const MAX_SLOTS: u64 = 2047;

impl CreditConfig {
    /// Reads the `MC_RECEIVER_CREDIT*` variables through `var` (unset or
    /// empty: default).
    pub(crate) fn read_lookup(
        &mut self,
        var: &impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let err = |var: &'static str, value: String, expected: &'static str| ConfigError {
            var,
            value,
            expected,
        };
        if let Some(v) = var("MC_RECEIVER_CREDIT") {
            self.policy = match v.trim().to_ascii_lowercase().as_str() {
                "off" => CreditPolicy::Off,
                "optional" => CreditPolicy::Optional,
                "required" => CreditPolicy::Required,
                _ => return Err(err("MC_RECEIVER_CREDIT", v, "off, optional or required")),
            };
        }
        let num = |name: &'static str, lo: u64, hi: u64, expected: &'static str| {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| (lo..=hi).contains(n))
                        .ok_or_else(|| err(name, v, expected))
                })
                .transpose()
        };
        if let Some(n) = num(
            "MC_RECEIVER_CREDIT_BYTES",
            1,
            u64::from(u32::MAX),
            "bytes in 1..=4294967295",
        )? {
            self.bytes = n;
        }
        if let Some(n) = num(
            "MC_RECEIVER_CREDIT_REQUESTS",
            1,
            MAX_SLOTS,
            "an integer in 1..=2047",
        )? {
            self.requests = n;
        }
        if let Some(n) = num(
            "MC_RECEIVER_CREDIT_CONSUMERS",
            1,
            MAX_SLOTS,
            "an integer in 1..=2047",
        )? {
            self.consumers = n;
        }
        if let Some(n) = num(
            "MC_RECEIVER_CREDIT_PEERS",
            1,
            1024,
            "an integer in 1..=1024",
        )? {
            self.peers = n as u32;
        }
        if let Some(n) = num(
            "MC_RECEIVER_CREDIT_TTL_MS",
            0,
            600_000,
            "milliseconds in 0..=600000 (0 = no expiry)",
        )? {
            self.ttl = Duration::from_millis(n);
        }
        if let Some(n) = num(
            "MC_RECEIVER_CREDIT_REFRESH_MS",
            1,
            60_000,
            "milliseconds in 1..=60000",
        )? {
            self.refresh = Duration::from_millis(n);
        }
        self.validate()
    }

    /// Checks the ranges and that the refresh comes before the TTL.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |var: &'static str, value: String, expected: &'static str| {
            Err(ConfigError {
                var,
                value,
                expected,
            })
        };
        if self.bytes == 0 || self.bytes > u64::from(u32::MAX) {
            return bad(
                "MC_RECEIVER_CREDIT_BYTES",
                self.bytes.to_string(),
                "bytes in 1..=4294967295",
            );
        }
        for (var, v) in [
            ("MC_RECEIVER_CREDIT_REQUESTS", self.requests),
            ("MC_RECEIVER_CREDIT_CONSUMERS", self.consumers),
        ] {
            if v == 0 || v > MAX_SLOTS {
                return bad(var, v.to_string(), "an integer in 1..=2047");
            }
        }
        if self.peers == 0 || self.peers > 1024 {
            return bad(
                "MC_RECEIVER_CREDIT_PEERS",
                self.peers.to_string(),
                "an integer in 1..=1024",
            );
        }
        if self.refresh.is_zero() || self.refresh > Duration::from_secs(60) {
            return bad(
                "MC_RECEIVER_CREDIT_REFRESH_MS",
                self.refresh.as_millis().to_string(),
                "milliseconds in 1..=60000",
            );
        }
        if !self.ttl.is_zero() && self.ttl <= self.refresh {
            return bad(
                "MC_RECEIVER_CREDIT_TTL_MS",
                self.ttl.as_millis().to_string(),
                "0 or longer than MC_RECEIVER_CREDIT_REFRESH_MS",
            );
        }
        Ok(())
    }

    /// The capability this engine offers in its descriptor (`None` = off).
    pub fn capability(&self) -> Option<CreditCapability> {
        (self.policy != CreditPolicy::Off).then_some(CreditCapability {
            min_version: CREDIT_VERSIONS.0,
            max_version: CREDIT_VERSIONS.1,
            required: self.policy == CreditPolicy::Required,
        })
    }
}

/// The tail rule: a transfer of `len` bytes is cut into
/// `ceil(len / slice_size)` slices; every slice but the last is exactly
/// `slice_size` bytes and the last carries the remainder (`1..=slice_size`
/// bytes). No slice is empty and none is merged with its neighbour, so
/// slice `i` always starts at `i * slice_size` (in both the local and the
/// remote range). A zero-length transfer is refused.
pub fn slice_count(len: u64, slice_size: u32) -> u64 {
    len.div_ceil(u64::from(slice_size.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<EngineConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        EngineConfig::from_lookup(|k| m.get(k).cloned())
    }

    /// RFC 4534's gate as the RFC names it: the default build has the peer
    /// ledger compiled in, off until `MC_RAIL_PEER_ACCOUNTING=1` (built
    /// without `peer-feedback`, the variable is refused by name).
    #[test]
    fn peer_accounting_is_a_run_time_switch_of_the_default_build() {
        assert!(!cfg(&[]).unwrap().rail.peer_accounting);
        let on = cfg(&[("MC_RAIL_PEER_ACCOUNTING", "1")]);
        if cfg!(feature = "peer-feedback") {
            assert!(on.unwrap().rail.peer_accounting);
        } else {
            assert_eq!(on.unwrap_err().var, "MC_RAIL_PEER_ACCOUNTING");
        }
    }

    #[test]
    fn defaults_without_variables() {
        assert_eq!(cfg(&[]).unwrap(), EngineConfig::default());
        assert_eq!(EngineConfig::default().slice_size, 65536);
        assert_eq!(EngineConfig::default().worker_model, WorkerModel::Shared);
    }

    #[test]
    fn variables_override() {
        let c = cfg(&[
            ("MC_SLICE_SIZE", "4096"),
            ("MC_NUM_QP_PER_EP", "4"),
            ("MC_MAX_WR", "64"),
            ("MC_WORKERS_PER_CTX", "3"),
            ("MC_RDMA_DEDICATED_POLLER", "1"),
            ("MC_GID_INDEX", "0"),
            ("MC_RDMA_DEVICE", "mlx5_0"),
            ("MC_SIGNAL_INTERVAL", "16"),
            ("MC_MAX_EP_PER_CTX", "3"),
        ])
        .unwrap();
        assert_eq!(c.signal_interval, 16);
        assert_eq!(c.max_endpoints, 3);
        assert_eq!(c.slice_size, 4096);
        assert_eq!(c.qps_per_endpoint, 4);
        assert_eq!(c.max_wr, 64);
        assert_eq!(c.workers, 3);
        assert_eq!(c.worker_model, WorkerModel::DedicatedPoller);
        assert_eq!(c.gid_index, 0);
        assert_eq!(c.device.as_deref(), Some("mlx5_0"));
        assert_eq!(cfg(&[("MC_SLICE_SIZE", "")]).unwrap().slice_size, 65536);
    }

    #[test]
    fn invalid_values_name_the_variable() {
        for (k, v) in [
            ("MC_SLICE_SIZE", "0"),
            ("MC_SLICE_SIZE", "64k"),
            ("MC_SLICE_SIZE", "2000000000"),
            ("MC_NUM_QP_PER_EP", "0"),
            ("MC_NUM_QP_PER_EP", "65"),
            ("MC_MAX_WR", "-1"),
            ("MC_MAX_WR", "99999"),
            ("MC_MAX_EP_PER_CTX", "0"),
            ("MC_MAX_EP_PER_CTX", "65537"),
            ("MC_WORKERS_PER_CTX", "0"),
            ("MC_WORKERS_PER_CTX", "x"),
            ("MC_RDMA_DEDICATED_POLLER", "yes"),
            ("MC_GID_INDEX", "256"),
            ("MC_RDMA_INFLIGHT_NAP_US", "-5"),
            ("MC_SIGNAL_INTERVAL", "0"),
            ("MC_SIGNAL_INTERVAL", "1025"),
            ("MC_SIGNAL_INTERVAL", "8x"),
            ("MC_RDMA_IDLE_PARK_US", "1000001"),
            ("MC_RDMA_DEVICE", "rxe0,"),
            ("MC_RDMA_DEVICE", "rxe0,rxe0"),
            ("MC_RDMA_DEVICE", "a,b,c,d,e,f,g,h,i"),
            ("MC_RDMA_DEVICES", "rxe0,,rxe1"),
        ] {
            let e = cfg(&[(k, v)]).unwrap_err();
            assert_eq!(e.var, k, "{k}={v}");
            assert_eq!(e.value, v);
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    #[test]
    fn device_lists_are_the_rails() {
        let c = cfg(&[("MC_RDMA_DEVICE", "rxe0, rxe1")]).unwrap();
        assert_eq!(c.devices, ["rxe0", "rxe1"]);
        assert_eq!(c.device_names(), [Some("rxe0"), Some("rxe1")]);
        assert_eq!(c.rails(), 2);
        let c = cfg(&[("MC_RDMA_DEVICES", "mlx5_0,mlx5_1,mlx5_2")]).unwrap();
        assert_eq!(c.rails(), 3);
        assert_eq!(c.device, None);
        // One name: the single-device configuration of before.
        let c = cfg(&[("MC_RDMA_DEVICE", "mlx5_0")]).unwrap();
        assert_eq!((c.device.as_deref(), c.rails()), (Some("mlx5_0"), 1));
        assert_eq!(cfg(&[]).unwrap().device_names(), [None]);
        // Both variables: they must agree.
        assert!(cfg(&[("MC_RDMA_DEVICE", "a,b"), ("MC_RDMA_DEVICES", "a,b")]).is_ok());
        let e = cfg(&[("MC_RDMA_DEVICE", "a"), ("MC_RDMA_DEVICES", "a,b")]).unwrap_err();
        assert_eq!(e.var, "MC_RDMA_DEVICES");
        // Set in code: checked by validate.
        let c = EngineConfig {
            devices: vec!["x".into(), "x".into()],
            ..EngineConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().var, "devices");
        let c = EngineConfig {
            rail: RailConfig {
                probe_interval: 3,
                ..RailConfig::default()
            },
            ..EngineConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().var, "rail");
    }

    #[test]
    fn adaptive_cc_variables() {
        use railyard_core::cc::Mode;
        let c = cfg(&[
            ("MC_ADAPTIVE_CC_MODE", "enforce"),
            ("MC_ADAPTIVE_CC_MAX_WINDOW_BYTES", "1048576"),
            ("MC_ADAPTIVE_CC_COOLDOWN_MS", "50"),
        ])
        .unwrap();
        assert_eq!(c.cc.mode, Mode::Enforce);
        assert_eq!(c.cc.max_window_bytes, 1 << 20);
        assert_eq!(c.cc.cooldown_ms, 50);
        assert_eq!(cfg(&[]).unwrap().cc.mode, Mode::Off);
        let c = cfg(&[("MC_ADAPTIVE_CC_SOFTWARE_DRAIN", "enforce")]).unwrap();
        assert_eq!(
            c.cc.software_drain,
            Some(railyard_core::cc::DrainSignal::Enforce)
        );
        for (k, v) in [
            ("MC_ADAPTIVE_CC_MODE", "on"),
            ("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "fast"),
            ("MC_ADAPTIVE_CC_COOLDOWN_MS", "0"),
            ("MC_ADAPTIVE_CC_HARD_ERROR_THRESHOLD", "70000"),
            ("MC_ADAPTIVE_CC_DECREASE_PERCENT", "100"),
            ("MC_ADAPTIVE_CC_MIN_WINDOW_BYTES", "999999999999"),
            ("MC_ADAPTIVE_CC_SOFTWARE_DRAIN", "ignore"),
        ] {
            let e = cfg(&[(k, v)]).unwrap_err();
            assert_eq!(e.var, k, "{k}={v}");
            assert_eq!(e.value, v);
            assert!(e.to_string().contains(k), "{e}");
        }
    }

    #[test]
    fn rail_variables() {
        let c = cfg(&[
            ("MC_RAIL_VARIANT", "v3"),
            ("MC_RAIL_PEER_TTL_US", "2500"),
            ("MC_RAIL_TRACE", "1"),
            ("MC_RAIL_NOMINAL_MBPS", "400"),
            ("MC_RAIL_EWMA_FLOOR_Q8", "1"),
        ])
        .unwrap();
        assert_eq!(c.rail.ewma_floor_q8, 1);
        assert_eq!(c.rail.variant, Variant::V3);
        assert_eq!(c.rail.peer_ttl_ns, 2_500_000);
        assert!(c.rail.trace);
        assert_eq!(c.rail_nominal_bps, 400_000_000);
        let d = cfg(&[]).unwrap();
        assert_eq!(d.rail, RailConfig::default());
        assert_eq!(d.rail_nominal_bps, super::NOMINAL_RAIL_BPS);
        let on = cfg(&[("MC_RAIL_PEER_ACCOUNTING", "1")]);
        let compiled = RailConfig {
            peer_accounting: true,
            ..RailConfig::default()
        }
        .validate(&[DeviceSpec::new(1)])
        .is_ok();
        if compiled {
            assert!(on.unwrap().rail.peer_accounting);
        } else {
            assert_eq!(on.unwrap_err().var, "MC_RAIL_PEER_ACCOUNTING");
        }
        assert!(
            !cfg(&[("MC_RAIL_PEER_ACCOUNTING", "false")])
                .unwrap()
                .rail
                .peer_accounting
        );
        for (k, v) in [
            ("MC_RAIL_PEER_ACCOUNTING", "on"),
            ("MC_RAIL_VARIANT", "V4"),
            ("MC_RAIL_PEER_TTL_US", "0"),
            ("MC_RAIL_PEER_TTL_US", "1ms"),
            ("MC_RAIL_TRACE", "yes"),
            ("MC_RAIL_NOMINAL_MBPS", "0"),
            ("MC_RAIL_NOMINAL_MBPS", "1000001"),
            ("MC_RAIL_EWMA_FLOOR_Q8", "0"),
            ("MC_RAIL_EWMA_FLOOR_Q8", "257"),
        ] {
            let e = cfg(&[(k, v)]).unwrap_err();
            assert_eq!(e.var, k, "{k}={v}");
            assert_eq!(e.value, v);
            assert!(e.to_string().contains(k), "{e}");
        }
        let c = EngineConfig {
            rail_nominal_bps: 0,
            ..EngineConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().var, "rail_nominal_bps");
    }

    #[test]
    fn dedicated_poller_needs_two_workers() {
        let e = cfg(&[
            ("MC_RDMA_DEDICATED_POLLER", "1"),
            ("MC_WORKERS_PER_CTX", "1"),
        ])
        .unwrap_err();
        assert_eq!(e.var, "MC_WORKERS_PER_CTX");
    }

    #[test]
    fn tail_rule() {
        assert_eq!(slice_count(1, 65536), 1);
        assert_eq!(slice_count(65536, 65536), 1);
        assert_eq!(slice_count(65537, 65536), 2);
        assert_eq!(slice_count(8 << 20, 65536), 128);
        assert_eq!(slice_count(0, 65536), 0);
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn variables_parse_and_bad_values_name_the_variable() {
        let c = EngineConfig::from_lookup(env(&[
            ("MC_RECEIVER_CREDIT", "Optional"),
            ("MC_RECEIVER_CREDIT_BYTES", "1048576"),
            ("MC_RECEIVER_CREDIT_REQUESTS", "16"),
            ("MC_RECEIVER_CREDIT_CONSUMERS", "4"),
            ("MC_RECEIVER_CREDIT_PEERS", "8"),
            ("MC_RECEIVER_CREDIT_TTL_MS", "500"),
            ("MC_RECEIVER_CREDIT_REFRESH_MS", "20"),
        ]))
        .unwrap()
        .credit;
        assert_eq!(c.policy, CreditPolicy::Optional);
        assert_eq!(
            (c.bytes, c.requests, c.consumers, c.peers),
            (1 << 20, 16, 4, 8)
        );
        assert_eq!(c.ttl, Duration::from_millis(500));
        assert_eq!(c.refresh, Duration::from_millis(20));
        assert_eq!(
            c.capability(),
            Some(CreditCapability {
                min_version: 1,
                max_version: 1,
                required: false
            })
        );
        for (var, val) in [
            ("MC_RECEIVER_CREDIT", "on"),
            ("MC_RECEIVER_CREDIT_BYTES", "0"),
            ("MC_RECEIVER_CREDIT_REQUESTS", "2048"),
            ("MC_RECEIVER_CREDIT_CONSUMERS", "x"),
            ("MC_RECEIVER_CREDIT_PEERS", "0"),
            ("MC_RECEIVER_CREDIT_TTL_MS", "-1"),
            ("MC_RECEIVER_CREDIT_REFRESH_MS", "0"),
        ] {
            let e =
                EngineConfig::from_lookup(|k| (k == var).then(|| val.to_string())).expect_err(var);
            assert_eq!(e.var, var);
            assert_eq!(e.value, val);
        }
        // A TTL not longer than the refresh could never stay fresh.
        let e = EngineConfig::from_lookup(env(&[
            ("MC_RECEIVER_CREDIT_TTL_MS", "100"),
            ("MC_RECEIVER_CREDIT_REFRESH_MS", "100"),
        ]))
        .unwrap_err();
        assert_eq!(e.var, "MC_RECEIVER_CREDIT_TTL_MS");
    }
}
