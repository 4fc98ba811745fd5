//! The verbs transfer engine (`railyard_verbs::engine`, Mooncake-like
//! batches of READ/WRITE transfers over RC QPs) from C.
//!
//! The `ry_engine_*` functions exist only in a library built with the
//! cargo feature `engine` (it links libibverbs); in the header they are
//! declared under `#if defined(RY_ENGINE)`: define `RY_ENGINE` before
//! including `railyard.h` when linking such a library. The plain-data
//! types below are always declared (their layout is checked by
//! `ry_abi_layout` either way).
//!
//! | C | Rust |
//! |---|---|
//! | `ry_engine_config_default` / `ry_engine_config_from_env` | `EngineConfig::default` / `EngineConfig::from_env` (`MC_*`) |
//! | `ry_engine_create` / `ry_engine_destroy` | `Engine::new` / drop (clean shutdown) |
//! | `ry_engine_listen_addr`, `ry_engine_device_name` | `Engine::listen_addr`, `Engine::device` |
//! | `ry_engine_alloc_memory`, `ry_engine_register_memory`, `ry_engine_deregister_memory` | `Engine::alloc_memory`, `Engine::register_memory`, `Engine::deregister_memory` |
//! | `ry_engine_open_segment`, `ry_engine_segment_regions`, `ry_engine_close_segment` | `Engine::open_segment`, `Engine::segment_regions`, `Engine::close_segment` |
//! | `ry_engine_allocate_batch`, `ry_engine_submit` | `Engine::allocate_batch`, `Engine::submit` |
//! | `ry_engine_task_status_get`, `ry_engine_batch_status` | `Engine::task_status`, `Engine::batch_status` |
//! | `ry_engine_task_anomaly`, `ry_engine_task_anomaly_detail` | `Engine::task_anomaly`, `Engine::task_anomaly_detail` (RFC 4162) |
//! | `ry_engine_cancel_batch`, `ry_engine_free_batch` | `Engine::cancel_batch`, `Engine::free_batch` |
//! | `ry_engine_stats_get`, `ry_engine_wait_idle` | `Engine::stats`, `Engine::wait_idle` |
//! | `ry_engine_snapshot` | `Engine::snapshot` (stats + every route's CC state) |
//!
//! Every `EngineError` variant has its own `RY_STATUS_ENGINE_*` code
//! (`EngineError::Verbs` is split into NO_DEVICE, DEVICE_NOT_FOUND and
//! VERBS), and `ry_last_error_message()` carries the engine's message
//! (a configuration error names the `MC_*` variable or the field).
//!
//! Engines are generation-checked handles; batches (`uint64_t`) and
//! segments (`uint32_t`) are ids checked by their engine (a freed batch is
//! `RY_STATUS_ENGINE_NO_SUCH_BATCH`; batch ids are never reused).
//!
//! Deregistration is refused (`RY_STATUS_ENGINE_MEMORY_BUSY`) while any
//! transfer may still touch the region, so no posted work outlives its
//! memory.

use std::ffi::c_char;

use crate::cc::ry_cc_config;

/// Bytes of `ry_engine_config.device` and `.listen`, NUL included.
pub const RY_ENGINE_NAME_CAPACITY: usize = 64;

/// Most devices (rails) one engine drives: the length of
/// `ry_engine_stats.rail_slices_posted` and `.rail_charged_bytes`.
pub const RY_ENGINE_MAX_RAILS: usize = 8;

/// An engine handle. Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine {
    /// Opaque handle bits.
    pub bits: u64,
}

/// How workers split posting and polling (RFC 3136).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_engine_worker_model {
    /// Worker `i` posts shard `i` and polls its CQ (the default).
    Shared = 0,
    /// Worker 0 polls every CQ, workers `1..N` post (needs `workers >= 2`).
    DedicatedPoller = 1,
}

/// RDMA operation of a transfer.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_engine_op {
    /// Remote → local.
    Read = 0,
    /// Local → remote.
    Write = 1,
}

/// Mooncake's task states (`ry_engine_task_status.state`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_engine_task_state {
    /// Submitted, nothing posted yet.
    Waiting = 0,
    /// At least one slice posted, not all settled.
    Pending = 1,
    /// Every slice succeeded.
    Completed = 2,
    /// Every slice settled and at least one failed.
    Failed = 3,
    /// Settled, none failed, at least one timed out.
    Timeout = 4,
    /// Settled, none failed or timed out, at least one canceled.
    Canceled = 5,
}

/// Everything `ry_engine_create` needs. Start from
/// `ry_engine_config_default` or `ry_engine_config_from_env`, then change
/// fields. Strings are NUL-terminated inside their arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_engine_config {
    /// RDMA device name (`MC_RDMA_DEVICE`), or a comma-separated list of
    /// device names used as rails in that order (`MC_RDMA_DEVICES`); empty
    /// = the first device. Rail selection uses its default constants.
    pub device: [c_char; RY_ENGINE_NAME_CAPACITY],
    /// Handshake listener, `"ip:port"`; empty = `"127.0.0.1:0"` (port 0
    /// picks a free port; `ry_engine_listen_addr` tells which).
    pub listen: [c_char; RY_ENGINE_NAME_CAPACITY],
    /// A task not finished after this long is settled TIMEOUT (ms, > 0).
    pub transfer_timeout_ms: u64,
    /// How long a retired endpoint may drain before its QPs are forced to
    /// ERR (ms, > 0).
    pub drain_timeout_ms: u64,
    /// Handshake socket timeout (ms, > 0).
    pub handshake_timeout_ms: u64,
    /// Longest park of an idle worker (µs, `MC_RDMA_IDLE_PARK_US`;
    /// default 50000: work unparks it at once); 0 = busy-poll.
    pub idle_park_us: u64,
    /// Sleep between polls while work is in flight but nothing completes
    /// (µs, `MC_RDMA_INFLIGHT_NAP_US`); 0 = keep polling.
    pub inflight_nap_us: u64,
    /// Slice size in bytes (`MC_SLICE_SIZE`, 1..=1 GiB).
    pub slice_size: u32,
    /// Send-queue depth per QP (`MC_MAX_WR`, 1..=32768).
    pub max_wr: u32,
    /// Endpoint slots (initiated plus accepted connections).
    pub max_endpoints: u32,
    /// Slices that may exist at once, across all batches.
    pub max_slices: u32,
    /// Tasks that may exist at once, across all batches.
    pub max_tasks: u32,
    /// Posted work requests in flight at once (also every CQ's depth).
    pub max_inflight: u32,
    /// `ry_engine_worker_model` (`MC_RDMA_DEDICATED_POLLER`).
    pub worker_model: u32,
    /// RC QPs per endpoint (`MC_NUM_QP_PER_EP`, 1..=64).
    pub qps_per_endpoint: u16,
    /// Worker threads (`MC_WORKERS_PER_CTX`, 1..=64).
    pub workers: u16,
    /// Port number (from 1).
    pub port: u8,
    /// GID index (`MC_GID_INDEX`).
    pub gid_index: u8,
    /// RC local ACK timeout exponent, 1..=31 (4.096 µs × 2^n;
    /// `MC_IB_TIMEOUT`).
    pub qp_timeout: u8,
    /// RC transport retries, 0..=7 (`MC_IB_RETRY_CNT`).
    pub qp_retry_cnt: u8,
    /// Selective signaling (`MC_SIGNAL_INTERVAL`, 1..=1024): every n-th
    /// work request of a doorbell chain and always its last is signaled;
    /// 1 signals every request. 0 (what a zeroed reserved field of ABI 3
    /// reads as) means the default.
    pub signal_interval: u16,
    /// Drain-time pressure on software RDMA providers (rxe, siw;
    /// `MC_ADAPTIVE_CC_SOFTWARE_DRAIN`): 0 (what a zeroed reserved byte of
    /// ABI 3 reads as) follows `cc.target_mode` (adaptive: advisory, i.e.
    /// observed but never shrinking the window; fixed: enforced, the RFC
    /// meaning), 1 enforces it, 2 makes it advisory. Hardware devices
    /// always enforce. Anything else is
    /// `RY_STATUS_CC_CONFIG_INVALID_SOFTWARE_DRAIN`.
    pub cc_software_drain: u8,
    /// Reserved, zero (explicit: the struct has no implicit padding).
    pub reserved: u8,
    /// The congestion controller (`MC_ADAPTIVE_CC_*`, RFC 4162; mode off
    /// by default). Validated by `ry_engine_create`: an invalid one is a
    /// `RY_STATUS_CC_CONFIG_*` error and nothing is created.
    pub cc: ry_cc_config,
    /// Receiver-advertised credits (`MC_RECEIVER_CREDIT*`, RFC 2849; off
    /// by default).
    pub credit: crate::engine_credit::ry_engine_credit_config,
}

/// A memory region registered with an engine (local side).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_region {
    /// Address of the first byte (a transfer's `local` lies in
    /// `addr..addr+len`).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Local key.
    pub lkey: u32,
    /// Remote key (what peers see in their segment regions).
    pub rkey: u32,
}

/// A region a peer exported at handshake time (a transfer's `remote`
/// lies in `addr..addr+len` of one of them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_remote_region {
    /// Remote virtual address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// One transfer request (Mooncake's `TransferRequest`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_transfer {
    /// Local address, inside memory registered with this engine.
    pub local: u64,
    /// Bytes (> 0).
    pub len: u64,
    /// Remote address, inside one region the peer exported.
    pub remote: u64,
    /// `ry_engine_op`.
    pub op: u32,
    /// The peer (`ry_engine_open_segment`).
    pub segment: u32,
}

/// A task's state and progress.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_engine_task_status {
    /// Bytes of slices that succeeded.
    pub transferred_bytes: u64,
    /// Bytes requested.
    pub total_bytes: u64,
    /// The state.
    pub state: ry_engine_task_state,
    /// Reserved, zero.
    pub reserved: u32,
}

/// Counters and leak checks: every field of the engine's `EngineStats`
/// (a nested struct's fields as `outer_inner`, e.g. `gate_admitted`). The
/// gauges (`tokens_in_use`, `endpoint_outstanding`, `qp_depth`,
/// `cq_outstanding`, `slices_pending`, `parked`, `mem_pins`, every
/// `rail_charged_bytes`, and `gate_in_flight_bytes` with a controller) are
/// all zero when the engine is idle; anything else is a leak.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(serde::Serialize))]
pub struct ry_engine_stats {
    /// Tokens (posted attempts) not yet completed. A free token in a
    /// worker's token cache is not in use (see `tokens_cached`).
    pub tokens_in_use: u64,
    /// Posts admitted on endpoints and not released.
    pub endpoint_outstanding: u64,
    /// Sum of per-QP depths.
    pub qp_depth: u64,
    /// Signaled WRs posted and not yet polled, over all CQs.
    pub cq_outstanding: u64,
    /// Slices open and not settled.
    pub slices_pending: u64,
    /// Live endpoints (active or draining).
    pub endpoints_live: u64,
    /// Work requests posted.
    pub posts: u64,
    /// `ibv_post_send` calls (doorbells).
    pub doorbells: u64,
    /// Completions polled.
    pub completions: u64,
    /// Completions whose slice attempt was stale (release only).
    pub stale_completions: u64,
    /// Completions the token pool refused (duplicate/forged/stale ids).
    pub bad_completions: u64,
    /// Gate `Defer` decisions.
    pub deferrals: u64,
    /// Gate `Avoid` decisions.
    pub avoids: u64,
    /// Posts refused for backpressure (no token, QP full).
    pub backpressure: u64,
    /// WRs of a `bad_wr` tail released unposted.
    pub unposted: u64,
    /// Slices re-queued for a retry.
    pub retries: u64,
    /// Async events read.
    pub async_events: u64,
    /// Endpoints retired (all reasons).
    pub retired: u64,
    /// Endpoints reclaimed after draining.
    pub reclaimed: u64,
    /// Forced flushes (drain timeout).
    pub force_flushes: u64,
    /// Congestion-control permits admitted.
    pub gate_admitted: u64,
    /// Congestion-control permits released.
    pub gate_released: u64,
    /// In-flight bytes over every controller domain.
    pub gate_in_flight_bytes: u64,
    /// Controller `try_acquire` errors (admitted without a permit).
    pub gate_acquire_errors: u64,
    /// Controller release refusals.
    pub gate_release_errors: u64,
    /// Control epochs run.
    pub gate_epochs: u64,
    /// Memory regions registered now.
    pub mem_regions: u64,
    /// Memory pins over every region (slices queued plus work requests in
    /// flight); zero when idle. `ry_engine_deregister_memory` is refused
    /// while a region has any.
    pub mem_pins: u64,
    /// Whether a controller is in the gate and not in mode off.
    pub gate_enabled: bool,
    /// Reserved, zero.
    pub reserved: [u8; 3],
    /// Free tokens held in the workers' token caches: not in use and not on
    /// the pool's own lists (a gauge, at most 32 per worker; 0 after
    /// shutdown). `tokens_in_use + tokens_cached` never exceeds the token
    /// pool's capacity (`max_inflight`). In what were reserved bytes of
    /// ABI 3 (the struct's layout is unchanged; older libraries write 0).
    pub tokens_cached: u32,
    /// Slices parked after a refusal (deferred, avoided, backpressure),
    /// each held until the event that can change the answer (ABI 4).
    pub parks: u64,
    /// Slices parked right now (a gauge; 0 when idle).
    pub parked: u64,
    /// Control epochs that saw the pollers stalled.
    pub gate_stalled_epochs: u64,
    /// Software route timeouts (task deadlines) the control epochs counted
    /// as route hard errors (the poller progressing).
    pub gate_route_timeouts: u64,
    /// Software route timeouts suppressed because the poller stalled.
    pub gate_suppressed_timeouts: u64,
    /// Domain-epochs whose drain-time pressure was observed but not
    /// enforced (devices whose drain signal is advisory: software providers).
    pub gate_advisory_pressure_epochs: u64,
    /// Rail releases the selector refused (NIC underflow, peer ledger
    /// errors); must stay zero.
    pub rail_accounting_errors: u64,
    /// Slices moved to another rail of their segment (its device or route
    /// was quarantined, or its endpoint retired).
    pub rail_moves: u64,
    /// Posts the composed hot path refused as invalid input (an engine bug;
    /// the slice failed instead of posting without its holds): 0.
    pub invalid_posts: u64,
    /// Handshakes the listener accepted (each connection counts in exactly
    /// one `handshakes_*`): became a segment.
    pub handshakes_accepted: u64,
    /// Refused at once: `max_handshakes` were in progress.
    pub handshakes_busy: u64,
    /// Bytes that are not a descriptor, or a wrong barrier byte.
    pub handshakes_malformed: u64,
    /// Silent or too slow past the handshake timeout.
    pub handshakes_timed_out: u64,
    /// Closed or reset by the peer mid-handshake.
    pub handshakes_closed: u64,
    /// A replayed descriptor (the QPs of a connection already made).
    pub handshakes_replayed: u64,
    /// Failed after a valid descriptor arrived (mismatched peer, QP setup,
    /// endpoint table full).
    pub handshakes_failed: u64,
    /// Work requests posted per local device (rail), `[..rails]`.
    pub rail_slices_posted: [u64; RY_ENGINE_MAX_RAILS],
    /// Bytes of rail charges outstanding per device, `[..rails]` (the
    /// selector's NIC in-flight); zero when the engine is idle.
    pub rail_charged_bytes: [u64; RY_ENGINE_MAX_RAILS],
    /// Devices (rails) the engine drives.
    pub rails: u16,
    /// Reserved, zero (explicit: the struct has no implicit padding).
    pub reserved2: [u8; 6],
    /// Segments the endpoint store evicted (idle, least recently used) to
    /// open another connection when every endpoint slot was taken; the
    /// next transfer to an evicted segment reconnects it (ABI 6).
    pub evictions: u64,
    /// Descriptor fetches (connect and descriptor exchange of an open or a
    /// reconnect) retried once after a transport failure (ABI 6).
    pub fetch_retries: u64,
}

/// One CC route domain (local device × peer NIC) of an engine, as
/// `ry_engine_snapshot` reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_engine_route_state {
    /// The route domain's index.
    pub route: u32,
    /// Its local device (rail).
    pub device: u16,
    /// Hard errors counted towards the quarantine threshold.
    pub errors: u16,
    /// Health state (`ry_health`).
    pub health: u32,
    /// Route generation (advanced by every reconnect).
    pub generation: u32,
    /// Byte window.
    pub window_bytes: u64,
    /// Bytes in flight on the route.
    pub in_flight_bytes: u64,
}

#[cfg(feature = "engine")]
pub use imp::*;

#[cfg(feature = "engine")]
mod imp {
    use std::ffi::{c_char, CStr};
    use std::net::SocketAddr;
    use std::sync::RwLock;
    use std::time::Duration;

    use railyard_core::cc::{CcConfig, ConfigError as CcConfigError, DrainSignal};
    use railyard_verbs::engine::{
        BatchId, Engine, EngineConfig, EngineError, EngineStats, GateStats, HandshakeStats, Op,
        SegmentId, TaskState, TaskStatus, Transfer, WorkerModel, MAX_RAILS,
    };
    use railyard_verbs::VerbsError;

    use super::*;
    use crate::enums::{ry_health, ry_task_state};
    use crate::error::{guard, ret, ret_opt, status_of, Error, Result, RyStatus};
    use crate::evidence::ry_task_detail;
    use crate::handle::{Pinned, Registry};
    use crate::mirror::{mirror, CEnum};
    use crate::ptr::{in_ref, in_slice, write_out};

    /// The handshake listener's default address.
    const RY_ENGINE_DEFAULT_LISTEN: &str = "127.0.0.1:0";

    const _: () = assert!(RY_ENGINE_MAX_RAILS == MAX_RAILS);

    mirror!(ry_engine_worker_model <=> WorkerModel: Shared, DedicatedPoller);
    mirror!(ry_engine_op <=> Op: Read, Write);
    mirror!(ry_engine_task_state <=> TaskState: Waiting, Pending, Completed, Failed, Timeout, Canceled);

    status_of! {
        EngineError => {
            E::Config(_) => S::EngineConfig,
            E::Verbs(VerbsError::NoDevice) => S::EngineNoDevice,
            E::Verbs(VerbsError::DeviceNotFound { .. }) => S::EngineDeviceNotFound,
            E::Verbs(_) => S::EngineVerbs,
            E::Handshake(_) => S::EngineHandshake,
            E::PeerMismatch { .. } => S::EnginePeerMismatch,
            E::Endpoint(_) => S::EngineEndpoint,
            E::Io(_) => S::EngineIo,
            E::NoSuchBatch(_) => S::EngineNoSuchBatch,
            E::NoSuchTask { .. } => S::EngineNoSuchTask,
            E::NoSuchSegment(_) => S::EngineNoSuchSegment,
            E::SegmentClosed(_) => S::EngineSegmentClosed,
            E::BatchFull { .. } => S::EngineBatchFull,
            E::BatchBusy(_) => S::EngineBatchBusy,
            E::OutOfTasks => S::EngineOutOfTasks,
            E::OutOfSlices { .. } => S::EngineOutOfSlices,
            E::ZeroLength => S::EngineZeroLength,
            E::LocalRange { .. } => S::EngineLocalRange,
            E::RemoteRange { .. } => S::EngineRemoteRange,
            E::TooManyRegions => S::EngineTooManyRegions,
            E::Unsupported(_) => S::EngineUnsupported,
            E::Core(_) => S::EngineCore,
            E::RegionOverlap { .. } => S::EngineRegionOverlap,
            E::NoSuchRegion { .. } => S::EngineNoSuchRegion,
            E::MemoryBusy { .. } => S::EngineMemoryBusy,
            E::CreditRefused { .. } => S::EngineCreditRefused,
            E::CreditNotActive(_) => S::EngineCreditNotActive,
            E::CreditConsume { .. } => S::EngineCreditConsume,
        }
    }

    pub(crate) fn config_error(
        field: &str,
        value: impl std::fmt::Display,
        expected: &str,
    ) -> Error {
        Error::new(
            RyStatus::EngineConfig,
            format_args!(
                "invalid {field}={:?}: expected {expected}",
                value.to_string()
            ),
        )
    }

    /// Writes `s` NUL-terminated into `buf`; `s` must be shorter than it.
    fn put_name(buf: &mut [c_char; RY_ENGINE_NAME_CAPACITY], s: &str, field: &str) -> Result<()> {
        if s.len() >= RY_ENGINE_NAME_CAPACITY || s.contains('\0') {
            return Err(config_error(
                field,
                s,
                "at most 63 bytes without NUL (ry_engine_config)",
            ));
        }
        *buf = [0; RY_ENGINE_NAME_CAPACITY];
        for (d, b) in buf.iter_mut().zip(s.bytes()) {
            *d = b as c_char;
        }
        Ok(())
    }

    /// The string in `buf` (up to its first NUL), which must be UTF-8 and
    /// NUL-terminated.
    fn get_name(buf: &[c_char; RY_ENGINE_NAME_CAPACITY], field: &str) -> Result<String> {
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        let s = CStr::from_bytes_until_nul(&bytes)
            .map_err(|_| config_error(field, "(no NUL)", "a NUL-terminated string"))?;
        s.to_str()
            .map(str::to_owned)
            .map_err(|_| config_error(field, s.to_string_lossy(), "UTF-8"))
    }

    fn ms(v: u64, field: &str) -> Result<Duration> {
        if v == 0 {
            return Err(config_error(field, v, "milliseconds > 0"));
        }
        Ok(Duration::from_millis(v))
    }

    impl ry_engine_config {
        fn from_core(c: &EngineConfig) -> Result<Self> {
            let mut out = ry_engine_config {
                device: [0; RY_ENGINE_NAME_CAPACITY],
                listen: [0; RY_ENGINE_NAME_CAPACITY],
                transfer_timeout_ms: c.transfer_timeout.as_millis() as u64,
                drain_timeout_ms: c.drain_timeout.as_millis() as u64,
                handshake_timeout_ms: c.handshake_timeout.as_millis() as u64,
                idle_park_us: c.idle_sleep.map_or(0, |d| d.as_micros() as u64),
                inflight_nap_us: c.inflight_nap.map_or(0, |d| d.as_micros() as u64),
                slice_size: c.slice_size,
                max_wr: c.max_wr,
                max_endpoints: c.max_endpoints,
                max_slices: c.max_slices,
                max_tasks: c.max_tasks,
                max_inflight: c.max_inflight,
                worker_model: ry_engine_worker_model::from(c.worker_model) as u32,
                qps_per_endpoint: c.qps_per_endpoint,
                workers: c.workers,
                port: c.port,
                gid_index: c.gid_index,
                qp_timeout: c.qp_timeout,
                qp_retry_cnt: c.qp_retry_cnt,
                signal_interval: c.signal_interval as u16,
                cc_software_drain: match c.cc.software_drain {
                    None => 0,
                    Some(DrainSignal::Enforce) => 1,
                    Some(DrainSignal::Advisory) => 2,
                },
                reserved: 0,
                cc: ry_cc_config::from(&c.cc),
                credit: crate::engine_credit::ry_engine_credit_config::from(&c.credit),
            };
            if !c.devices.is_empty() {
                put_name(&mut out.device, &c.devices.join(","), "MC_RDMA_DEVICES")?;
            } else if let Some(d) = &c.device {
                put_name(&mut out.device, d, "MC_RDMA_DEVICE")?;
            }
            put_name(&mut out.listen, &c.listen.to_string(), "listen")?;
            Ok(out)
        }

        fn to_core(self) -> Result<EngineConfig> {
            let device = get_name(&self.device, "device")?;
            let listen = get_name(&self.listen, "listen")?;
            let listen = if listen.is_empty() {
                RY_ENGINE_DEFAULT_LISTEN.to_owned()
            } else {
                listen
            };
            let listen: SocketAddr = listen
                .parse()
                .map_err(|_| config_error("listen", &listen, "\"ip:port\""))?;
            let worker_model =
                ry_engine_worker_model::to_core(self.worker_model, "").map_err(|_| {
                    let want = "RY_ENGINE_WORKER_MODEL_SHARED or _DEDICATED_POLLER";
                    config_error("worker_model", self.worker_model, want)
                })?;
            let us = |v: u64| (v > 0).then(|| Duration::from_micros(v));
            // One name, or a comma-separated list: the rails, in order.
            let devices: Vec<String> = if device.contains(',') {
                device.split(',').map(|d| d.trim().to_owned()).collect()
            } else {
                Vec::new()
            };
            let c = EngineConfig {
                device: (!device.is_empty() && devices.is_empty()).then_some(device),
                devices,
                rail: Default::default(),
                rail_nominal_bps: railyard_verbs::engine::NOMINAL_RAIL_BPS,
                port: self.port,
                gid_index: self.gid_index,
                qp_timeout: self.qp_timeout,
                qp_retry_cnt: self.qp_retry_cnt,
                slice_size: self.slice_size,
                qps_per_endpoint: self.qps_per_endpoint,
                max_wr: self.max_wr,
                workers: self.workers,
                worker_model,
                listen,
                max_endpoints: self.max_endpoints,
                max_slices: self.max_slices,
                max_tasks: self.max_tasks,
                max_inflight: self.max_inflight,
                transfer_timeout: ms(self.transfer_timeout_ms, "transfer_timeout_ms")?,
                drain_timeout: ms(self.drain_timeout_ms, "drain_timeout_ms")?,
                handshake_timeout: ms(self.handshake_timeout_ms, "handshake_timeout_ms")?,
                max_handshakes: EngineConfig::default().max_handshakes,
                idle_sleep: us(self.idle_park_us),
                inflight_nap: us(self.inflight_nap_us),
                signal_interval: match self.signal_interval {
                    0 => railyard_verbs::engine::DEFAULT_SIGNAL_INTERVAL,
                    n => u32::from(n),
                },
                cc: CcConfig {
                    software_drain: match self.cc_software_drain {
                        0 => None,
                        1 => Some(DrainSignal::Enforce),
                        2 => Some(DrainSignal::Advisory),
                        _ => return Err(CcConfigError::InvalidSoftwareDrain.into()),
                    },
                    ..self.cc.to_core()?
                },
                credit: self.credit.to_core()?,
            };
            c.validate().map_err(EngineError::from)?;
            Ok(c)
        }
    }

    impl From<&railyard_verbs::MemoryRegion> for ry_engine_region {
        fn from(r: &railyard_verbs::MemoryRegion) -> Self {
            ry_engine_region {
                addr: r.addr(),
                len: r.len() as u64,
                lkey: r.lkey(),
                rkey: r.rkey(),
            }
        }
    }

    impl From<TaskStatus> for ry_engine_task_status {
        fn from(s: TaskStatus) -> Self {
            ry_engine_task_status {
                transferred_bytes: s.transferred_bytes,
                total_bytes: s.total_bytes,
                state: s.state.into(),
                reserved: 0,
            }
        }
    }

    impl From<EngineStats> for ry_engine_stats {
        /// Every field (no `..`: a field added to `EngineStats`, `GateStats`
        /// or `HandshakeStats` does not compile until it is here).
        fn from(s: EngineStats) -> Self {
            let EngineStats {
                tokens_in_use,
                tokens_cached,
                endpoint_outstanding,
                qp_depth,
                cq_outstanding,
                slices_pending,
                endpoints_live,
                posts,
                doorbells,
                completions,
                stale_completions,
                bad_completions,
                deferrals,
                avoids,
                backpressure,
                parks,
                parked,
                unposted,
                retries,
                async_events,
                retired,
                reclaimed,
                evictions,
                fetch_retries,
                force_flushes,
                gate,
                rails,
                rail_slices_posted,
                rail_charged_bytes,
                rail_accounting_errors,
                rail_moves,
                invalid_posts,
                handshakes,
                mem_regions,
                mem_pins,
            } = s;
            let GateStats {
                enabled,
                admitted,
                released,
                in_flight_bytes,
                acquire_errors,
                release_errors,
                epochs,
                stalled_epochs,
                route_timeouts,
                suppressed_timeouts,
                advisory_pressure_epochs,
            } = gate;
            let HandshakeStats {
                accepted,
                busy,
                malformed,
                timed_out,
                closed,
                replayed,
                failed,
            } = handshakes;
            ry_engine_stats {
                tokens_in_use,
                endpoint_outstanding,
                qp_depth,
                cq_outstanding,
                slices_pending,
                endpoints_live,
                posts,
                doorbells,
                completions,
                stale_completions,
                bad_completions,
                deferrals,
                avoids,
                backpressure,
                unposted,
                retries,
                async_events,
                retired,
                reclaimed,
                force_flushes,
                gate_admitted: admitted,
                gate_released: released,
                gate_in_flight_bytes: in_flight_bytes,
                gate_acquire_errors: acquire_errors,
                gate_release_errors: release_errors,
                gate_epochs: epochs,
                mem_regions,
                mem_pins,
                gate_enabled: enabled,
                reserved: [0; 3],
                tokens_cached: u32::try_from(tokens_cached).unwrap_or(u32::MAX),
                parks,
                parked,
                gate_stalled_epochs: stalled_epochs,
                gate_route_timeouts: route_timeouts,
                gate_suppressed_timeouts: suppressed_timeouts,
                gate_advisory_pressure_epochs: advisory_pressure_epochs,
                rail_accounting_errors,
                rail_moves,
                invalid_posts,
                handshakes_accepted: accepted,
                handshakes_busy: busy,
                handshakes_malformed: malformed,
                handshakes_timed_out: timed_out,
                handshakes_closed: closed,
                handshakes_replayed: replayed,
                handshakes_failed: failed,
                rail_slices_posted,
                rail_charged_bytes,
                rails,
                reserved2: [0; 6],
                evictions,
                fetch_retries,
            }
        }
    }

    impl ry_engine_transfer {
        fn to_core(self, index: usize) -> Result<Transfer> {
            let op = ry_engine_op::to_core(self.op, "op").map_err(|_| {
                let v = self.op;
                Error::invalid(format_args!(
                    "transfers[{index}].op: {v} is not a valid ry_engine_op"
                ))
            })?;
            Ok(Transfer {
                op,
                local: self.local,
                len: self.len,
                segment: SegmentId(self.segment),
                remote_offset: self.remote,
            })
        }
    }

    /// An engine slot: `None` once `ry_engine_destroy` took the engine out
    /// to shut it down in the destroying thread. Calls hold the read lock
    /// for their duration, so destroy waits for calls already running.
    type Slot = RwLock<Option<Engine>>;

    static ENGINES: Registry<Slot> = Registry::new(7, "engine");

    pub(crate) fn with_engine<R>(h: ry_engine, f: impl FnOnce(&Engine) -> Result<R>) -> Result<R> {
        let slot: Pinned<Slot> = ENGINES.get(h.bits)?;
        let g = slot.read().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(e) => f(e),
            None => Err(Error::new(
                RyStatus::InvalidHandle,
                format_args!("invalid engine handle {:#018x}: already destroyed", h.bits),
            )),
        }
    }

    /// Writes `s` NUL-terminated to `buf` (`cap` bytes) and its length
    /// without the NUL to `*len_out` (optional). Too small a buffer is
    /// `RY_STATUS_BUFFER_TOO_SMALL` with `*len_out` still written.
    ///
    /// # Safety
    /// `buf` is NULL or valid for `cap` bytes of writes; `len_out` is NULL
    /// or valid for writes.
    unsafe fn write_str(s: &str, buf: *mut c_char, cap: usize, len_out: *mut usize) -> Result<()> {
        if !len_out.is_null() {
            // SAFETY: caller contract: NULL or valid for writes.
            unsafe { write_out(len_out, s.len(), "len_out") }?;
        }
        if cap < s.len() + 1 {
            return Err(Error::new(
                RyStatus::BufferTooSmall,
                format_args!("{} bytes needed (NUL included), {cap} given", s.len() + 1),
            ));
        }
        if buf.is_null() {
            return Err(Error::null("buf"));
        }
        // SAFETY: `buf` is non-NULL and valid for `cap >= s.len() + 1`
        // bytes; the source is a distinct Rust string.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
            buf.add(s.len()).write(0);
        }
        Ok(())
    }

    /// Writes `items` to `out` (`cap` elements) and their number to
    /// `*count_out`; too small a buffer is `RY_STATUS_BUFFER_TOO_SMALL`
    /// with `*count_out` written and nothing in `out`.
    ///
    /// # Safety
    /// `out` is NULL or valid for `cap` element writes; `count_out` is
    /// valid for writes.
    unsafe fn write_array<T>(
        items: Vec<T>,
        out: *mut T,
        cap: usize,
        count_out: *mut usize,
    ) -> Result<()> {
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(count_out, items.len(), "count_out") }?;
        if cap < items.len() {
            return Err(Error::new(
                RyStatus::BufferTooSmall,
                format_args!("{} elements needed, {cap} given", items.len()),
            ));
        }
        if items.is_empty() {
            return Ok(());
        }
        if out.is_null() {
            return Err(Error::null("out"));
        }
        for (i, v) in items.into_iter().enumerate() {
            // SAFETY: `out` is non-NULL and valid for `cap > i` writes.
            unsafe { out.add(i).write(v) };
        }
        Ok(())
    }

    /// Writes the default configuration (first device, `127.0.0.1:0`,
    /// 64 KiB slices, controller off).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: pure; any thread, concurrently.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_config_default(out: *mut ry_engine_config) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                ry_engine_config::from_core(&EngineConfig::default())
            })
        }
    }

    /// Reads the `MC_*` variables (`MC_SLICE_SIZE`, `MC_NUM_QP_PER_EP`,
    /// `MC_MAX_WR`, `MC_WORKERS_PER_CTX`, `MC_RDMA_DEDICATED_POLLER`,
    /// `MC_GID_INDEX`, `MC_RDMA_DEVICE`, `MC_RDMA_IDLE_PARK_US`,
    /// `MC_RDMA_INFLIGHT_NAP_US`, `MC_ADAPTIVE_CC_*`) over the defaults and
    /// validates the result. A set but malformed or out-of-range variable
    /// is `RY_STATUS_ENGINE_CONFIG` whose `ry_last_error_message()` names
    /// it (e.g. `invalid MC_SLICE_SIZE="abc": expected ...`), and `*out`
    /// is left untouched: never a silent fallback.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: reads the environment; do not call concurrently with
    /// `setenv` in another thread (a libc restriction).
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_config_from_env(out: *mut ry_engine_config) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let c = EngineConfig::from_env().map_err(EngineError::from)?;
                ry_engine_config::from_core(&c)
            })
        }
    }

    /// Validates a configuration without opening a device (what
    /// `ry_engine_create` checks first): `RY_STATUS_ENGINE_CONFIG` naming
    /// the variable or field, or a `RY_STATUS_CC_CONFIG_*` code for `cc`.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: pure; any thread, concurrently.
    ///
    /// # Safety
    /// `cfg` is valid for reads.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_config_validate(cfg: *const ry_engine_config) -> RyStatus {
        guard(|| {
            // SAFETY: caller contract: valid for reads.
            unsafe { in_ref(cfg, "cfg") }?.to_core().map(drop)
        })
    }

    /// Opens the device and starts the engine: workers, monitor, async-event
    /// thread and the handshake listener. An invalid configuration is
    /// refused before anything is opened (see `ry_engine_config_validate`);
    /// no device is `RY_STATUS_ENGINE_NO_DEVICE`.
    ///
    /// Ownership: on success `*out` names a new engine owned by the caller;
    /// free it with `ry_engine_destroy`. `*cfg` is copied; not retained.
    /// Thread-safety: any thread. The engine's own threads run until it is
    /// destroyed.
    ///
    /// # Safety
    /// `cfg` is valid for reads; `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_create(
        cfg: *const ry_engine_config,
        out: *mut ry_engine,
    ) -> RyStatus {
        // SAFETY: caller contract: `cfg` valid for reads, `out` valid for
        // writes (checked non-NULL before the engine starts).
        unsafe {
            ret(out, "out", || {
                let engine = Engine::new(in_ref(cfg, "cfg")?.to_core()?)?;
                // On a full registry the engine is dropped (shut down) here.
                let bits = ENGINES.insert(RwLock::new(Some(engine)))?;
                Ok(ry_engine { bits })
            })
        }
    }

    /// Shuts the engine down in the calling thread and frees it: stops
    /// posting, retires every endpoint, flushes in-flight work (bounded by
    /// twice the drain timeout), joins the engine's threads, deregisters
    /// its memory. Calls already running on the engine in other threads
    /// finish first (destroy waits for them); later calls, and a second
    /// destroy, are `RY_STATUS_INVALID_HANDLE`.
    ///
    /// Ownership: consumes the handle; every copy of it, every batch and
    /// segment id, and every `ry_engine_region` of the engine become
    /// invalid (its memory is unmapped or deregistered).
    /// Thread-safety: any thread except from within the engine's callbacks
    /// (it has none); blocks until the shutdown completes.
    #[no_mangle]
    pub extern "C" fn ry_engine_destroy(engine: ry_engine) -> RyStatus {
        guard(|| {
            let slot = ENGINES.get(engine.bits)?;
            // The one destroy that unlinks the handle takes the engine.
            ENGINES.remove(engine.bits)?;
            let taken = slot.write().unwrap_or_else(|e| e.into_inner()).take();
            // Unpin before the (blocking) shutdown.
            drop(slot);
            drop(taken);
            Ok(())
        })
    }

    /// Writes the handshake listener's address (`"ip:port"`, what peers
    /// pass to `ry_engine_open_segment`) NUL-terminated to `buf` (`cap`
    /// bytes) and its length to `*len_out` (optional). Too small a buffer
    /// is `RY_STATUS_BUFFER_TOO_SMALL` (`*len_out` still written); 64 bytes
    /// always suffice.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    /// `buf` is valid for `cap` bytes of writes; `len_out` is NULL or valid
    /// for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_listen_addr(
        engine: ry_engine,
        buf: *mut c_char,
        cap: usize,
        len_out: *mut usize,
    ) -> RyStatus {
        guard(|| {
            let a = with_engine(engine, |e| Ok(e.listen_addr().to_string()))?;
            // SAFETY: caller contract, forwarded.
            unsafe { write_str(&a, buf, cap, len_out) }
        })
    }

    /// Writes the RDMA device name, as `ry_engine_listen_addr` writes the
    /// address.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    /// `buf` is valid for `cap` bytes of writes; `len_out` is NULL or valid
    /// for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_device_name(
        engine: ry_engine,
        buf: *mut c_char,
        cap: usize,
        len_out: *mut usize,
    ) -> RyStatus {
        guard(|| {
            let d = with_engine(engine, |e| Ok(e.device().to_owned()))?;
            // SAFETY: caller contract, forwarded.
            unsafe { write_str(&d, buf, cap, len_out) }
        })
    }

    /// Allocates `len` zeroed, page-aligned bytes owned by the engine and
    /// registers them for RDMA; writes where they are. Peers see the region
    /// if it is registered before they connect.
    ///
    /// Ownership: the memory belongs to the engine and stays valid (for
    /// the caller's reads and writes through `addr`, outside transfers that
    /// touch it) until `ry_engine_deregister_memory` or
    /// `ry_engine_destroy`; do not free it.
    /// Thread-safety: any thread, concurrently with other calls.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_alloc_memory(
        engine: ry_engine,
        len: usize,
        out: *mut ry_engine_region,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let r = with_engine(engine, |e| Ok(e.alloc_memory(len)?))?;
                Ok(ry_engine_region::from(&*r))
            })
        }
    }

    /// Registers caller memory `addr..addr+len` (a KV-cache pool, say) for
    /// RDMA with every access right; writes the region (`out` optional).
    ///
    /// A range overlapping a registered region is
    /// `RY_STATUS_ENGINE_REGION_OVERLAP` (nothing registered).
    ///
    /// Ownership: the memory stays the caller's; the engine keeps the
    /// registration until `ry_engine_deregister_memory(engine, addr)`
    /// returns OK or `ry_engine_destroy`: the caller must keep
    /// `addr..addr+len` mapped and valid until then, and must not touch
    /// bytes a transfer in flight reads or writes.
    /// Thread-safety: any thread, concurrently with other calls.
    ///
    /// # Safety
    /// `addr..addr+len` is valid for reads and writes until it is
    /// deregistered or the engine is destroyed; `out` is NULL or valid for
    /// writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_register_memory(
        engine: ry_engine,
        addr: *mut u8,
        len: usize,
        out: *mut ry_engine_region,
    ) -> RyStatus {
        // SAFETY: caller contract: `addr..addr+len` valid for reads and writes
        // until deregistered, `out` NULL or valid for writes.
        unsafe {
            ret_opt(out, || {
                if addr.is_null() {
                    return Err(Error::null("addr"));
                }
                let r = with_engine(engine, |e| Ok(e.register_memory(addr, len)?))?;
                Ok(ry_engine_region::from(&*r))
            })
        }
    }

    /// Deregisters the memory region that starts at `addr` (an
    /// `ry_engine_region.addr` from `ry_engine_alloc_memory` or
    /// `ry_engine_register_memory`): every device's registration is
    /// released before this returns, and engine-allocated memory is freed.
    /// Refused, changing nothing, with `RY_STATUS_ENGINE_MEMORY_BUSY` while
    /// a transfer may still touch the region (slices queued or posted on it,
    /// including the attempts of a canceled or timed-out task still on the
    /// wire: retry once they completed, e.g. after `ry_engine_wait_idle`);
    /// any other address is `RY_STATUS_ENGINE_NO_SUCH_REGION`. Peers that
    /// connected before keep the region in their segment regions; their
    /// transfers to it then fail at the NIC, without touching the memory.
    ///
    /// Ownership: on OK, caller memory is the caller's again (it may be
    /// freed); engine memory is gone (do not touch it).
    /// Thread-safety: any thread, concurrently with other calls.
    #[no_mangle]
    pub extern "C" fn ry_engine_deregister_memory(engine: ry_engine, addr: u64) -> RyStatus {
        guard(|| with_engine(engine, |e| Ok(e.deregister_memory(addr)?)))
    }

    /// Connects to the engine listening at `peer` (`"host:port"`): RC QPs,
    /// the versioned descriptor handshake, a barrier. Writes the segment id
    /// transfers to that peer name. Blocks up to the handshake timeout.
    ///
    /// Ownership: `peer` is borrowed for the call. The segment lives until
    /// `ry_engine_close_segment` or the engine's destruction.
    /// Thread-safety: any thread, concurrently with other calls; a
    /// concurrent `ry_engine_destroy` waits until this returns.
    ///
    /// # Safety
    /// `peer` is a NUL-terminated string; `segment_out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_open_segment(
        engine: ry_engine,
        peer: *const c_char,
        segment_out: *mut u32,
    ) -> RyStatus {
        // SAFETY: caller contract: `peer` NUL-terminated, `segment_out` valid
        // for writes.
        unsafe {
            ret(segment_out, "segment_out", || {
                if peer.is_null() {
                    return Err(Error::null("peer"));
                }
                let peer = CStr::from_ptr(peer)
                    .to_str()
                    .map_err(|_| Error::invalid("peer: not UTF-8"))?;
                Ok(with_engine(engine, |e| Ok(e.open_segment(peer)?))?.0)
            })
        }
    }

    /// Writes the regions the peer of `segment` exported (transfers'
    /// `remote` must lie in one) to `out` (`cap` elements) and their number
    /// to `*count_out`. Too small a buffer is `RY_STATUS_BUFFER_TOO_SMALL`
    /// with `*count_out` written: call with `cap == 0` to size it.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    /// `out` is NULL or valid for `cap` element writes; `count_out` is
    /// valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_segment_regions(
        engine: ry_engine,
        segment: u32,
        out: *mut ry_engine_remote_region,
        cap: usize,
        count_out: *mut usize,
    ) -> RyStatus {
        guard(|| {
            let regs = with_engine(engine, |e| Ok(e.segment_regions(SegmentId(segment))?))?;
            let regs = regs
                .into_iter()
                .map(|d| ry_engine_remote_region {
                    addr: d.addr,
                    len: d.len,
                    rkey: d.rkey,
                    reserved: 0,
                })
                .collect();
            // SAFETY: caller contract, forwarded.
            unsafe { write_array(regs, out, cap, count_out) }
        })
    }

    /// Retires the segment's endpoint: no new posts; posted work drains (or
    /// is flushed after the drain timeout). Later submits to it are
    /// `RY_STATUS_ENGINE_SEGMENT_CLOSED`.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: any thread, concurrently.
    #[no_mangle]
    pub extern "C" fn ry_engine_close_segment(engine: ry_engine, segment: u32) -> RyStatus {
        guard(|| with_engine(engine, |e| Ok(e.close_segment(SegmentId(segment))?)))
    }

    /// Replaces the segment's endpoints (one per rail; a segment this engine
    /// opened) with new ones: the old ones are retired if still active
    /// (posted work drains or is flushed; late completions settle
    /// accounting only), the handshake runs again (fresh rkeys), and each
    /// rail's CC route moves to a new generation. Retries waiting on the
    /// old endpoints move to the new ones. Writes rail 0's new endpoint
    /// generation to `*generation_out` (optional). Blocks for the
    /// handshake (bounded by the handshake timeout). A segment a peer
    /// opened is `RY_STATUS_ENGINE_UNSUPPORTED` (the peer reconnects it).
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: any thread; reconnects are serialized.
    ///
    /// # Safety
    /// `generation_out` is NULL or valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_reconnect_segment(
        engine: ry_engine,
        segment: u32,
        generation_out: *mut u32,
    ) -> RyStatus {
        // SAFETY: caller contract: `generation_out` NULL or valid for writes.
        unsafe {
            ret_opt(generation_out, || {
                with_engine(engine, |e| Ok(e.reconnect_segment(SegmentId(segment))?))
            })
        }
    }

    /// Creates an empty batch for up to `capacity` tasks and writes its id.
    ///
    /// Ownership: the batch belongs to the caller until
    /// `ry_engine_free_batch`. Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    /// `batch_out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_allocate_batch(
        engine: ry_engine,
        capacity: usize,
        batch_out: *mut u64,
    ) -> RyStatus {
        // SAFETY: caller contract: `batch_out` is valid for writes.
        unsafe {
            ret(batch_out, "batch_out", || {
                Ok(with_engine(engine, |e| Ok(e.allocate_batch(capacity)?))?.0)
            })
        }
    }

    /// Submits `count` transfers into `batch`. All are validated first
    /// (op, zero length, local and remote ranges, segment, batch capacity,
    /// task and slice slots): if any is refused, nothing is queued and the
    /// status says why. Transfer `i` of this call becomes task
    /// `previous tasks of the batch + i`. Never blocks on the network.
    ///
    /// Ownership: `transfers` is copied; not retained. The memory the
    /// transfers name must stay valid until their tasks finish.
    /// Thread-safety: any thread, concurrently (submits into one batch
    /// from several threads get their task indices in lock order).
    ///
    /// # Safety
    /// `transfers` points to `count` valid elements (NULL only if
    /// `count == 0`).
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_submit(
        engine: ry_engine,
        batch: u64,
        transfers: *const ry_engine_transfer,
        count: usize,
    ) -> RyStatus {
        guard(|| {
            // SAFETY: caller contract: `count` valid elements.
            let ts = unsafe { in_slice(transfers, count, "transfers") }?;
            let ts = ts
                .iter()
                .enumerate()
                .map(|(i, t)| t.to_core(i))
                .collect::<Result<Vec<_>>>()?;
            with_engine(engine, |e| Ok(e.submit(BatchId(batch), &ts)?))
        })
    }

    /// Writes task `task`'s state and progress. Read-only.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently (a snapshot).
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_task_status_get(
        engine: ry_engine,
        batch: u64,
        task: usize,
        out: *mut ry_engine_task_status,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes. Checked first.
        unsafe {
            ret(out, "out", || {
                Ok(with_engine(engine, |e| Ok(e.task_status(BatchId(batch), task)?))?.into())
            })
        }
    }

    /// Writes every task of `batch`, in submission order, to `out` (`cap`
    /// elements) and their number to `*count_out` (too small a buffer:
    /// `RY_STATUS_BUFFER_TOO_SMALL`, `*count_out` written).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently (a snapshot).
    ///
    /// # Safety
    /// `out` is NULL or valid for `cap` element writes; `count_out` is
    /// valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_batch_status(
        engine: ry_engine,
        batch: u64,
        out: *mut ry_engine_task_status,
        cap: usize,
        count_out: *mut usize,
    ) -> RyStatus {
        guard(|| {
            let v = with_engine(engine, |e| Ok(e.batch_status(BatchId(batch))?))?;
            let v = v.into_iter().map(ry_engine_task_status::from).collect();
            // SAFETY: caller contract, forwarded.
            unsafe { write_array(v, out, cap, count_out) }
        })
    }

    /// The minimal anomaly query (RFC 4162, caller observability): NORMAL,
    /// CONGESTED, LONG_UNAVAILABLE or UNKNOWN (always UNKNOWN with the
    /// controller off, as the RFC says). Read-only: never posts, polls or
    /// probes. Valid until the batch is freed.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_task_anomaly(
        engine: ry_engine,
        batch: u64,
        task: usize,
        out: *mut ry_task_state,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes. Checked first.
        unsafe {
            ret(out, "out", || {
                Ok(with_engine(engine, |e| Ok(e.task_anomaly(BatchId(batch), task)?))?.into())
            })
        }
    }

    /// The detailed anomaly query: the minimal state plus the winning
    /// observation with a `*_observed` flag per optional field (an
    /// unobserved field is never a silent zero), and the dropped / stale
    /// evidence counts. With the controller off `state` is UNKNOWN but the
    /// evidence is still shown. Read-only.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread, concurrently.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_task_anomaly_detail(
        engine: ry_engine,
        batch: u64,
        task: usize,
        out: *mut ry_task_detail,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes.
        unsafe {
            ret(out, "out", || {
                let d = with_engine(engine, |e| Ok(e.task_anomaly_detail(BatchId(batch), task)?))?;
                Ok(ry_task_detail::from_core(&d))
            })
        }
    }

    /// Cancels every unsettled slice of `batch`: its unfinished tasks end
    /// CANCELED (unless a slice already failed or timed out). Work already
    /// posted still completes on the wire; its completion only releases
    /// resources.
    ///
    /// Ownership: borrows its arguments for the call only; retains nothing.
    /// Thread-safety: any thread, concurrently.
    #[no_mangle]
    pub extern "C" fn ry_engine_cancel_batch(engine: ry_engine, batch: u64) -> RyStatus {
        guard(|| with_engine(engine, |e| Ok(e.cancel_batch(BatchId(batch))?)))
    }

    /// Frees a batch whose tasks are all finished; its task and slice slots
    /// return to the engine. A batch with unfinished tasks is
    /// `RY_STATUS_ENGINE_BATCH_BUSY` (cancel it first); a freed one
    /// `RY_STATUS_ENGINE_NO_SUCH_BATCH`.
    ///
    /// Ownership: consumes the batch id (ids are never reused).
    /// Thread-safety: any thread, concurrently.
    #[no_mangle]
    pub extern "C" fn ry_engine_free_batch(engine: ry_engine, batch: u64) -> RyStatus {
        guard(|| with_engine(engine, |e| Ok(e.free_batch(BatchId(batch))?)))
    }

    /// Writes the engine's counters and leak-check gauges.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_stats_get(
        engine: ry_engine,
        out: *mut ry_engine_stats,
    ) -> RyStatus {
        // SAFETY: caller contract: `out` is valid for writes. Checked first.
        unsafe {
            ret(out, "out", || {
                Ok(with_engine(engine, |e| Ok(e.stats()))?.into())
            })
        }
    }

    /// One consistent call for a host's metrics export: writes the
    /// engine's counters to `*stats_out` (as `ry_engine_stats_get`) and
    /// the CC state of every route domain it assigned so far (health,
    /// generation, window, in-flight bytes) to `routes_out[..cap]`, their
    /// number to `*count_out`. Too small an array is
    /// `RY_STATUS_BUFFER_TOO_SMALL` with `*stats_out` and `*count_out`
    /// written and nothing in `routes_out` (call again with `*count_out`
    /// elements; `routes_out` may be NULL with `cap` 0 to ask). Without a
    /// controller compiled in there are no routes (`*count_out` = 0).
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; a snapshot that concurrent calls may change at once.
    ///
    /// # Safety
    /// `stats_out` and `count_out` are valid for writes; `routes_out` is
    /// NULL or valid for `cap` element writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_snapshot(
        engine: ry_engine,
        stats_out: *mut ry_engine_stats,
        routes_out: *mut ry_engine_route_state,
        cap: usize,
        count_out: *mut usize,
    ) -> RyStatus {
        // SAFETY: caller contract: `stats_out` and `count_out` valid for
        // writes (checked first), `routes_out` NULL or valid for `cap` writes.
        guard(|| unsafe {
            let stats = crate::ptr::out_ref(stats_out, "stats_out")?;
            if count_out.is_null() {
                return Err(Error::null("count_out"));
            }
            let snap = with_engine(engine, |e| Ok(e.snapshot()))?;
            *stats = snap.stats.into();
            let routes: Vec<ry_engine_route_state> = snap
                .routes
                .iter()
                .map(|r| ry_engine_route_state {
                    route: r.route,
                    device: r.device,
                    errors: r.errors,
                    health: ry_health::from(r.health) as u32,
                    generation: r.generation,
                    window_bytes: r.window_bytes,
                    in_flight_bytes: r.in_flight_bytes,
                })
                .collect();
            write_array(routes, routes_out, cap, count_out)
        })
    }

    /// Waits up to `timeout_ms` until no work request is in flight and no
    /// slice is queued (e.g. after cancel, for the stale completions);
    /// `*idle_out` says whether it got there.
    ///
    /// Ownership: writes plain data to the caller's out-pointers; retains nothing.
    /// Thread-safety: any thread; blocks the caller (1 ms sleeps), and
    /// delays a concurrent `ry_engine_destroy` until it returns.
    ///
    /// # Safety
    /// `idle_out` is valid for writes.
    #[no_mangle]
    pub unsafe extern "C" fn ry_engine_wait_idle(
        engine: ry_engine,
        timeout_ms: u64,
        idle_out: *mut bool,
    ) -> RyStatus {
        // SAFETY: caller contract: `idle_out` is valid for writes. Checked first.
        unsafe {
            ret(idle_out, "idle_out", || {
                with_engine(engine, |e| {
                    Ok(e.wait_idle(Duration::from_millis(timeout_ms)))
                })
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use railyard_core::endpoint::EndpointError;
        use railyard_verbs::handshake::HandshakeError;
        use std::collections::HashSet;

        #[test]
        fn every_engine_error_has_its_own_status() {
            let cfg = railyard_verbs::engine::ConfigError {
                var: "MC_SLICE_SIZE",
                value: "x".into(),
                expected: "bytes",
            };
            let all = vec![
                EngineError::Config(cfg),
                EngineError::Verbs(VerbsError::NoDevice),
                EngineError::Verbs(VerbsError::DeviceNotFound {
                    name: "mlx5_9".into(),
                    available: vec![],
                }),
                EngineError::Verbs(VerbsError::ZeroLength),
                EngineError::Handshake(HandshakeError::Timeout { during: "hello" }),
                EngineError::PeerMismatch {
                    what: "slice size",
                    ours: 1,
                    theirs: 2,
                },
                EngineError::Endpoint(EndpointError::Retired),
                EngineError::Io(std::io::Error::other("bind")),
                EngineError::NoSuchBatch(BatchId(1)),
                EngineError::NoSuchTask {
                    batch: BatchId(1),
                    task: 2,
                },
                EngineError::NoSuchSegment(SegmentId(3)),
                EngineError::SegmentClosed(SegmentId(3)),
                EngineError::BatchFull { capacity: 4 },
                EngineError::BatchBusy(BatchId(1)),
                EngineError::OutOfTasks,
                EngineError::OutOfSlices { needed: 9 },
                EngineError::ZeroLength,
                EngineError::LocalRange { addr: 1, len: 2 },
                EngineError::RemoteRange { addr: 1, len: 2 },
                EngineError::TooManyRegions,
                EngineError::Unsupported("x"),
                EngineError::Core("x"),
                EngineError::RegionOverlap {
                    addr: 1,
                    len: 2,
                    other: 0,
                },
                EngineError::NoSuchRegion { addr: 1 },
                EngineError::MemoryBusy { addr: 1, pins: 3 },
                EngineError::CreditRefused {
                    ours: "required",
                    theirs: "off",
                    why: "x",
                },
                EngineError::CreditNotActive(1),
                EngineError::CreditConsume {
                    segment: 1,
                    slots: 2,
                    why: "x",
                },
            ];
            let n = all.len();
            let mut seen = HashSet::new();
            for e in all {
                let text = e.to_string();
                let err = Error::from(e);
                assert_eq!(err.message, text, "the engine's message is kept");
                assert!((-127..=-100).contains(&(err.status as i32)), "{text}");
                assert!(seen.insert(err.status), "{text}: status reused");
            }
            assert_eq!(seen.len(), n);
        }

        #[test]
        fn config_round_trips_through_c() {
            let mut core = EngineConfig::default();
            let c = ry_engine_config::from_core(&core).ok().unwrap();
            assert!(c.to_core().ok().unwrap() == core);
            core.device = Some("rxe0".into());
            core.worker_model = WorkerModel::DedicatedPoller;
            core.idle_sleep = None;
            core.inflight_nap = Some(Duration::from_micros(50));
            core.listen = "10.0.0.1:18515".parse().unwrap();
            core.signal_interval = 16;
            let c = ry_engine_config::from_core(&core).ok().unwrap();
            assert_eq!(c.signal_interval, 16);
            assert!(c.to_core().ok().unwrap() == core);
            // A zeroed field (ABI 3's reserved bytes) is the default; an
            // out-of-range one is refused.
            let mut z = c;
            z.signal_interval = 0;
            assert_eq!(
                z.to_core().ok().unwrap().signal_interval,
                railyard_verbs::engine::DEFAULT_SIGNAL_INTERVAL
            );
            z.signal_interval = 2000;
            assert!(z.to_core().is_err());
            // The software-drain byte (ABI 3's reserved byte): 0 follows
            // the target mode, 1 / 2 are explicit, anything else refused.
            for (v, want) in [
                (None, 0u8),
                (Some(DrainSignal::Enforce), 1),
                (Some(DrainSignal::Advisory), 2),
            ] {
                core.cc.software_drain = v;
                let c = ry_engine_config::from_core(&core).ok().unwrap();
                assert_eq!(c.cc_software_drain, want);
                assert!(c.to_core().ok().unwrap() == core);
            }
            let mut z = ry_engine_config::from_core(&core).ok().unwrap();
            z.cc_software_drain = 3;
            assert_eq!(
                z.to_core().err().unwrap().status,
                RyStatus::CcConfigInvalidSoftwareDrain
            );
            core.device = Some("d".repeat(64));
            let e = ry_engine_config::from_core(&core).err().unwrap();
            assert_eq!(e.status, RyStatus::EngineConfig);
            assert!(e.message.contains("MC_RDMA_DEVICE"), "{}", e.message);
        }

        /// One field list for the stats: every field of `EngineStats` (as
        /// `EngineStats::fields` names it, from its serde derive) reaches
        /// `ry_engine_stats` with its own value, the header declares it,
        /// and the Python stub's `EngineStats` (the keys of
        /// `Engine.stats()`, which python/src/engine.rs builds from the same
        /// list) names it; none of them has a field the Rust struct lacks.
        #[test]
        fn every_stats_field_reaches_c_the_header_and_the_python_stub() {
            use serde_json::Value;
            use std::collections::BTreeSet;
            fn fill(v: &mut Value, n: &mut u64) {
                match v {
                    Value::Object(m) => m.values_mut().for_each(|x| fill(x, n)),
                    Value::Array(a) => a.iter_mut().for_each(|x| fill(x, n)),
                    Value::Bool(b) => *b = true,
                    _ => {
                        *n += 1;
                        *v = Value::from(*n);
                    }
                }
            }
            // A distinct value in every field.
            let mut json = serde_json::to_value(EngineStats::default()).unwrap();
            fill(&mut json, &mut 0);
            let stats: EngineStats = serde_json::from_value(json).unwrap();
            let rust = stats.fields();
            let names: BTreeSet<&str> = rust.iter().map(|(k, _)| k.as_str()).collect();
            assert!(names.contains("gate_admitted") && names.contains("handshakes_busy"));
            let Value::Object(c) = serde_json::to_value(ry_engine_stats::from(stats)).unwrap()
            else {
                panic!("ry_engine_stats serializes as a map");
            };
            for (k, v) in &rust {
                assert_eq!(c.get(k), Some(v), "ry_engine_stats.{k}");
            }
            let c_only: Vec<&String> = c
                .keys()
                .filter(|k| !names.contains(k.as_str()) && !k.starts_with("reserved"))
                .collect();
            assert!(
                c_only.is_empty(),
                "ry_engine_stats fields not in EngineStats: {c_only:?}"
            );
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let header = std::fs::read_to_string(dir.join("include/railyard.h")).unwrap();
            let body = header.split("} ry_engine_stats;").next().unwrap();
            let body = body.rsplit("typedef struct {").next().unwrap();
            let declared: BTreeSet<&str> = body
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("//") && l.ends_with(';'))
                .filter_map(|l| l.split(['[', ';']).next()?.rsplit(' ').next())
                .filter(|n| !n.starts_with("reserved"))
                .collect();
            assert_eq!(declared, names, "railyard.h's ry_engine_stats");
            let pyi = dir.join("../python/railyard/_native.pyi");
            let pyi = std::fs::read_to_string(pyi).unwrap();
            let class = pyi.split("class EngineStats(TypedDict):").nth(1);
            let stub: BTreeSet<&str> = class
                .expect("_native.pyi declares `class EngineStats(TypedDict):`")
                .lines()
                .skip(1)
                .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
                .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k))
                .collect();
            assert_eq!(stub, names, "_native.pyi's EngineStats");
        }

        #[test]
        fn stats_carry_every_gauge_to_c() {
            let s = EngineStats {
                tokens_in_use: 3,
                tokens_cached: 29,
                ..EngineStats::default()
            };
            let c = ry_engine_stats::from(s);
            assert_eq!((c.tokens_in_use, c.tokens_cached), (3, 29));
            assert_eq!(c.reserved, [0; 3]);
            let big = EngineStats {
                tokens_cached: u64::MAX,
                ..EngineStats::default()
            };
            assert_eq!(ry_engine_stats::from(big).tokens_cached, u32::MAX);
        }
    }
}

#[cfg(test)]
mod layout_tests {
    use super::ry_engine_stats;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn the_abi3_prefix_of_ry_engine_stats_is_unchanged() {
        // ABI 3: 28 u64 counters, `gate_enabled`, 3 reserved bytes,
        // `tokens_cached`; ABI 4 and 6 append after them.
        assert_eq!(offset_of!(ry_engine_stats, gate_enabled), 28 * 8);
        assert_eq!(offset_of!(ry_engine_stats, reserved), 28 * 8 + 1);
        assert_eq!(offset_of!(ry_engine_stats, tokens_cached), 28 * 8 + 4);
        assert_eq!(offset_of!(ry_engine_stats, parks), 29 * 8);
        // ABI 6 appends `evictions` and `fetch_retries` after ABI 4's last word.
        assert_eq!(
            offset_of!(ry_engine_stats, evictions),
            (29 + 16 + 2 * 8 + 1) * 8
        );
        assert_eq!(size_of::<ry_engine_stats>(), (29 + 16 + 2 * 8 + 3) * 8);
        assert_eq!(align_of::<ry_engine_stats>(), 8);
    }
}
