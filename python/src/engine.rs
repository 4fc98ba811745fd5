//! `railyard.Engine` (native part): railyard's own API, with typed
//! exceptions, the RFC 4162 anomaly queries, the stats snapshot and the
//! `MC_*` configuration. The buffer-protocol `register` lives in the Python
//! subclass (`railyard/__init__.py`).

use crate::core::{Core, Failure};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use railyard_core::evidence::{AnomalyState, Observed};
use railyard_verbs::engine::{
    BatchId, CcMode, Engine as RustEngine, EngineConfig, EngineError, EngineStats, Negotiated, Op,
    SegmentId, TaskStatus, Transfer, WorkerModel,
};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

fn raise(py: Python<'_>, f: impl Into<Failure>) -> PyErr {
    f.into().into_pyerr(py)
}

/// `SomeName` → `SOME_NAME` (the RFC's spelling of reasons and states).
fn screaming(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_uppercase());
    }
    s
}

/// The engine configuration, named by its `MC_*` variables.
///
/// `Config()` reads the environment; `Config({"MC_SLICE_SIZE": "131072"})`
/// reads the mapping over it (`use_env=False`: over the defaults). A bad
/// value raises `railyard.ConfigError` whose `var` names the variable.
#[pyclass(module = "railyard._native", frozen)]
#[derive(Clone)]
pub struct Config {
    pub(crate) cfg: EngineConfig,
}

#[pymethods]
impl Config {
    #[new]
    #[pyo3(signature = (overrides = None, *, use_env = true))]
    fn new(
        py: Python<'_>,
        overrides: Option<HashMap<String, String>>,
        use_env: bool,
    ) -> PyResult<Self> {
        let o = overrides.unwrap_or_default();
        if let Some(k) = o.keys().find(|k| !k.starts_with("MC_")) {
            return Err(raise(
                py,
                Failure::invalid(format!("{k:?} is not an MC_* variable")),
            ));
        }
        let cfg = EngineConfig::from_lookup(|k| {
            o.get(k)
                .cloned()
                .or_else(|| use_env.then(|| std::env::var(k).ok()).flatten())
        })
        .map_err(|e| raise(py, EngineError::from(e)))?;
        Ok(Self { cfg })
    }

    /// The settings as `MC_*` variables (strings, as the environment
    /// would hold them). `Config(c.as_env(), use_env=False)` equals `c`
    /// for everything listed.
    fn as_env(&self) -> HashMap<&'static str, String> {
        let c = &self.cfg;
        let us = |d: Option<Duration>| d.map_or(0, |d| d.as_micros()).to_string();
        let mut m = HashMap::from([
            ("MC_SLICE_SIZE", c.slice_size.to_string()),
            ("MC_NUM_QP_PER_EP", c.qps_per_endpoint.to_string()),
            ("MC_MAX_WR", c.max_wr.to_string()),
            ("MC_WORKERS_PER_CTX", c.workers.to_string()),
            (
                "MC_RDMA_DEDICATED_POLLER",
                u8::from(c.worker_model == WorkerModel::DedicatedPoller).to_string(),
            ),
            ("MC_GID_INDEX", c.gid_index.to_string()),
            ("MC_RDMA_IDLE_PARK_US", us(c.idle_sleep)),
            ("MC_RDMA_INFLIGHT_NAP_US", us(c.inflight_nap)),
            ("MC_SIGNAL_INTERVAL", c.signal_interval.to_string()),
            ("MC_IB_TIMEOUT", c.qp_timeout.to_string()),
            ("MC_IB_RETRY_CNT", c.qp_retry_cnt.to_string()),
            (
                "MC_ADAPTIVE_CC_MODE",
                match c.cc.mode {
                    CcMode::Off => "off",
                    CcMode::Observe => "observe",
                    CcMode::Enforce => "enforce",
                }
                .to_owned(),
            ),
        ]);
        let devs = c.device_names();
        if let [Some(_), ..] = devs.as_slice() {
            let names: Vec<&str> = devs.iter().flatten().copied().collect();
            m.insert("MC_RDMA_DEVICE", names.join(","));
        }
        m
    }

    /// `MC_SLICE_SIZE`: bytes per slice.
    #[getter]
    fn slice_size(&self) -> u32 {
        self.cfg.slice_size
    }
    /// `MC_NUM_QP_PER_EP`.
    #[getter]
    fn qps_per_endpoint(&self) -> u16 {
        self.cfg.qps_per_endpoint
    }
    /// `MC_MAX_WR`.
    #[getter]
    fn max_wr(&self) -> u32 {
        self.cfg.max_wr
    }
    /// `MC_WORKERS_PER_CTX`.
    #[getter]
    fn workers(&self) -> u16 {
        self.cfg.workers
    }
    /// `MC_RDMA_DEDICATED_POLLER`.
    #[getter]
    fn dedicated_poller(&self) -> bool {
        self.cfg.worker_model == WorkerModel::DedicatedPoller
    }
    /// `MC_GID_INDEX`.
    #[getter]
    fn gid_index(&self) -> u8 {
        self.cfg.gid_index
    }
    /// `MC_RDMA_DEVICE`: the devices (rails), `[]` for the first device.
    #[getter]
    fn devices(&self) -> Vec<String> {
        self.cfg
            .device_names()
            .into_iter()
            .flatten()
            .map(str::to_owned)
            .collect()
    }
    /// `MC_ADAPTIVE_CC_MODE`: `"off"`, `"observe"` or `"enforce"`.
    #[getter]
    fn cc_mode(&self) -> String {
        format!("{:?}", self.cfg.cc.mode).to_lowercase()
    }

    fn __repr__(&self) -> String {
        let mut v: Vec<_> = self.as_env().into_iter().collect();
        v.sort();
        format!("Config({v:?})")
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.cfg == other.cfg
    }
}

/// A task's state and progress (Mooncake's `TransferStatus`).
#[pyclass(module = "railyard._native", name = "TaskStatus", frozen, get_all)]
pub struct TaskStatusPy {
    /// `"WAITING"`, `"PENDING"`, `"COMPLETED"`, `"FAILED"`, `"TIMEOUT"` or
    /// `"CANCELED"`.
    state: &'static str,
    /// Bytes of slices that succeeded.
    transferred_bytes: u64,
    /// Bytes requested.
    total_bytes: u64,
}

#[pymethods]
impl TaskStatusPy {
    fn __repr__(&self) -> String {
        format!(
            "TaskStatus(state={:?}, transferred_bytes={}, total_bytes={})",
            self.state, self.transferred_bytes, self.total_bytes
        )
    }
}

impl From<TaskStatus> for TaskStatusPy {
    fn from(s: TaskStatus) -> Self {
        Self {
            state: crate::core::state_name(s.state),
            transferred_bytes: s.transferred_bytes,
            total_bytes: s.total_bytes,
        }
    }
}

/// railyard's engine (native base of `railyard.Engine`).
#[pyclass(module = "railyard._native", name = "_Engine", subclass, frozen)]
pub struct NativeEngine {
    core: RwLock<Option<Arc<Core>>>,
}

fn op_of(op: &str) -> Result<Op, Failure> {
    match op {
        "read" | "READ" | "Read" => Ok(Op::Read),
        "write" | "WRITE" | "Write" => Ok(Op::Write),
        _ => Err(Failure::invalid(format!(
            "op {op:?}: expected \"read\" or \"write\""
        ))),
    }
}

impl NativeEngine {
    fn core(&self, py: Python<'_>) -> PyResult<Arc<Core>> {
        self.core
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| raise(py, Failure::invalid("the engine is closed")))
    }

    /// `f` on the core with the GIL released; failures raised.
    fn detached<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Core) -> Result<T, Failure> + Send,
    ) -> PyResult<T> {
        let c = self.core(py)?;
        py.detach(|| f(&c)).map_err(|e| raise(py, e))
    }
}

#[pymethods]
impl NativeEngine {
    /// Opens the device(s) and starts the engine. `listen`: where the
    /// handshake listener binds (`"ip:port"`, port 0 picks one); `device`
    /// overrides `MC_RDMA_DEVICE` (a name or a comma-separated rail list).
    #[new]
    #[pyo3(signature = (config = None, *, listen = "127.0.0.1:0", device = None))]
    fn new(
        py: Python<'_>,
        config: Option<PyRef<'_, Config>>,
        listen: &str,
        device: Option<&str>,
    ) -> PyResult<Self> {
        let mut cfg = match config {
            Some(c) => c.cfg.clone(),
            None => EngineConfig::from_env().map_err(|e| raise(py, EngineError::from(e)))?,
        };
        cfg.listen = listen.parse::<SocketAddr>().map_err(|_| {
            raise(
                py,
                Failure::invalid(format!("listen {listen:?}: expected \"ip:port\"")),
            )
        })?;
        if let Some(d) = device {
            let names: Vec<String> = d.split(',').map(|s| s.trim().to_owned()).collect();
            if names.len() > 1 {
                cfg.devices = names;
                cfg.device = None;
            } else {
                cfg.devices.clear();
                cfg.device = Some(names[0].clone());
            }
        }
        let timeout = cfg.transfer_timeout;
        let e = py
            .detach(|| RustEngine::new(cfg))
            .map_err(|e| raise(py, e))?;
        Ok(Self {
            core: RwLock::new(Some(Arc::new(Core::new(e, timeout)))),
        })
    }

    /// Where peers reach this engine (`"ip:port"`; pass it to `connect`).
    #[getter]
    fn listen_addr(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.core(py)?.engine.listen_addr().to_string())
    }

    /// The devices (rails), in rail order.
    #[getter]
    fn devices(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .core(py)?
            .engine
            .devices()
            .into_iter()
            .map(str::to_owned)
            .collect())
    }

    /// The configuration in use.
    #[getter]
    fn config(&self, py: Python<'_>) -> PyResult<Config> {
        Ok(Config {
            cfg: self.core(py)?.engine.config().clone(),
        })
    }

    /// Registers `addr..addr+length` (caller memory that stays valid
    /// until `deregister(addr)`). Prefer `register(buffer)`.
    fn register_address(&self, py: Python<'_>, addr: u64, length: u64) -> PyResult<()> {
        // SAFETY: the caller's promise (documented above); the Python
        // `register(buffer)` keeps the buffer exported until deregistered.
        self.detached(py, |c| unsafe { c.register(addr, length) })
    }

    /// Allocates `length` zeroed bytes of engine memory, registered;
    /// returns the address. Freed by `deregister(addr)` (or with the
    /// engine).
    fn alloc(&self, py: Python<'_>, length: u64) -> PyResult<u64> {
        self.detached(py, |c| c.alloc(length))
    }

    /// Deregisters the region that starts at `addr`; raises
    /// `railyard.BusyError` (kind `MemoryBusy`) while transfers may still
    /// touch it, `railyard.InvalidArgument` (kind `NoSuchRegion`) if no
    /// region starts there.
    #[pyo3(name = "_deregister_address")]
    fn deregister_address(&self, py: Python<'_>, addr: u64) -> PyResult<()> {
        self.detached(py, |c| c.deregister(addr))
    }

    /// `length` bytes at `addr` (inside registered memory).
    fn read(&self, py: Python<'_>, addr: u64, length: u64) -> PyResult<Py<PyBytes>> {
        let c = self.core(py)?;
        if !c.covers(addr, length) {
            return Err(raise(
                py,
                Failure::invalid(format!(
                    "{addr:#x}+{length} is not inside registered memory"
                )),
            ));
        }
        // SAFETY: inside a region registered with this engine, mapped until
        // deregistered; `c` keeps the engine alive.
        let s = unsafe { std::slice::from_raw_parts(addr as *const u8, length as usize) };
        Ok(PyBytes::new(py, s).unbind())
    }

    /// Copies `data` to `addr` (inside registered memory).
    fn write(&self, py: Python<'_>, addr: u64, data: &[u8]) -> PyResult<()> {
        let c = self.core(py)?;
        if !c.covers(addr, data.len() as u64) {
            return Err(raise(
                py,
                Failure::invalid(format!(
                    "{addr:#x}+{} is not inside registered memory",
                    data.len()
                )),
            ));
        }
        // SAFETY: inside registered memory (above); `data` is a distinct
        // Python bytes object.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
        Ok(())
    }

    /// Connects to the engine at `peer` (`"host:port"`; once per name,
    /// later calls return the same segment). Returns the segment id.
    fn connect(&self, py: Python<'_>, peer: &str) -> PyResult<u32> {
        self.detached(py, |c| c.segment(peer).map(|s| s.0))
    }

    /// The regions the peer exported: `[(addr, length), ...]`.
    fn segment_regions(&self, py: Python<'_>, segment: u32) -> PyResult<Vec<(u64, u64)>> {
        self.detached(py, |c| {
            Ok(c.engine
                .segment_regions(SegmentId(segment))?
                .iter()
                .map(|d| (d.addr, d.len))
                .collect())
        })
    }

    /// Re-runs the handshake of `segment` (fresh endpoints and region
    /// descriptors, new route generation). Returns the new endpoint
    /// generation.
    fn reconnect(&self, py: Python<'_>, segment: u32) -> PyResult<u32> {
        self.detached(py, |c| {
            Ok(c.engine.reconnect_segment(SegmentId(segment))?)
        })
    }

    /// A new empty batch of up to `capacity` tasks.
    fn allocate_batch(&self, py: Python<'_>, capacity: usize) -> PyResult<u64> {
        self.detached(py, |c| Ok(c.engine.allocate_batch(capacity)?.0))
    }

    /// Submits `transfers`, each `(op, local, length, segment, remote)`
    /// with `op` `"read"` or `"write"`, into `batch` (all or nothing).
    fn submit(
        &self,
        py: Python<'_>,
        batch: u64,
        transfers: Vec<(String, u64, u64, u32, u64)>,
    ) -> PyResult<()> {
        let t: Vec<Transfer> = transfers
            .iter()
            .map(|(op, local, len, seg, remote)| {
                Ok(Transfer {
                    op: op_of(op)?,
                    local: *local,
                    len: *len,
                    segment: SegmentId(*seg),
                    remote_offset: *remote,
                })
            })
            .collect::<Result<_, Failure>>()
            .map_err(|e| raise(py, e))?;
        self.detached(py, |c| Ok(c.engine.submit(BatchId(batch), &t)?))
    }

    /// The state and progress of task `task` of `batch`.
    fn task_status(&self, py: Python<'_>, batch: u64, task: usize) -> PyResult<TaskStatusPy> {
        self.detached(py, |c| {
            Ok(c.engine.task_status(BatchId(batch), task)?.into())
        })
    }

    /// Every task of `batch`, in submission order.
    fn batch_status(&self, py: Python<'_>, batch: u64) -> PyResult<Vec<TaskStatusPy>> {
        self.detached(py, |c| {
            Ok(c.engine
                .batch_status(BatchId(batch))?
                .into_iter()
                .map(Into::into)
                .collect())
        })
    }

    /// Waits (GIL released) until every task of `batch` is terminal and
    /// returns their statuses; raises `railyard.TransferError` (kind
    /// `WaitTimeout`) after `timeout` seconds (default: the engine's
    /// transfer timeout plus a margin).
    #[pyo3(signature = (batch, timeout = None))]
    fn wait(
        &self,
        py: Python<'_>,
        batch: u64,
        timeout: Option<f64>,
    ) -> PyResult<Vec<TaskStatusPy>> {
        self.detached(py, |c| {
            let t = timeout.map_or(c.timeout + Duration::from_secs(5), |s| {
                Duration::from_secs_f64(s.clamp(0.0, 1e9))
            });
            match c.wait(BatchId(batch), Instant::now() + t)? {
                Some(st) => Ok(st.into_iter().map(Into::into).collect()),
                None => Err(Failure::transfer(
                    "WaitTimeout",
                    format!("batch {batch} not finished after {t:?}"),
                )),
            }
        })
    }

    /// One transfer in its own batch, waited for (GIL released) and freed;
    /// raises `railyard.TransferError` unless it completed.
    fn transfer(
        &self,
        py: Python<'_>,
        op: &str,
        local: u64,
        length: u64,
        segment: u32,
        remote: u64,
    ) -> PyResult<()> {
        let op = op_of(op).map_err(|e| raise(py, e))?;
        let t = [Transfer {
            op,
            local,
            len: length,
            segment: SegmentId(segment),
            remote_offset: remote,
        }];
        self.detached(py, |c| c.run(SegmentId(segment), &t, Instant::now()))
    }

    /// Cancels every unsettled slice of `batch` (its tasks end CANCELED).
    fn cancel_batch(&self, py: Python<'_>, batch: u64) -> PyResult<()> {
        self.detached(py, |c| Ok(c.engine.cancel_batch(BatchId(batch))?))
    }

    /// Frees a finished batch (`railyard.BusyError`, kind `BatchBusy`,
    /// while a task is unfinished).
    fn free_batch(&self, py: Python<'_>, batch: u64) -> PyResult<()> {
        self.detached(py, |c| Ok(c.engine.free_batch(BatchId(batch))?))
    }

    /// RFC 4162's minimal anomaly query: `"NORMAL"`, `"CONGESTED"`,
    /// `"LONG_UNAVAILABLE"` or `"UNKNOWN"` (always `"UNKNOWN"` with the
    /// controller off). Read-only; valid until the batch is freed.
    fn task_anomaly(&self, py: Python<'_>, batch: u64, task: usize) -> PyResult<String> {
        self.detached(py, |c| {
            Ok(anomaly_name(c.engine.task_anomaly(BatchId(batch), task)?))
        })
    }

    /// RFC 4162's detailed anomaly query: a dict with `state`, `winner`
    /// (the deciding observation, or `None`: `reason`, `scope`, `path`
    /// (`{"device", "route"}`), `observed_ns`, `resolved`, `slice`
    /// (`{"index", "attempt"}`), `generation`, `window`, `in_flight`,
    /// `cooldown_remaining_ns`; `None` where not observed), `dropped` and
    /// `stale`.
    fn task_anomaly_detail(&self, py: Python<'_>, batch: u64, task: usize) -> PyResult<Py<PyDict>> {
        let d = self.detached(py, |c| {
            Ok(c.engine.task_anomaly_detail(BatchId(batch), task)?)
        })?;
        let out = PyDict::new(py);
        out.set_item("state", anomaly_name(d.state))?;
        out.set_item("dropped", d.dropped)?;
        out.set_item("stale", d.stale)?;
        match d.winner {
            None => out.set_item("winner", py.None())?,
            Some(o) => {
                let w = PyDict::new(py);
                w.set_item("reason", screaming(&format!("{:?}", o.reason)))?;
                w.set_item("scope", o.scope.get().map(|s| screaming(&format!("{s:?}"))))?;
                match o.path {
                    Observed::Value(p) => {
                        let pd = PyDict::new(py);
                        pd.set_item("device", p.device)?;
                        pd.set_item("route", p.route)?;
                        w.set_item("path", pd)?;
                    }
                    Observed::Unobserved => w.set_item("path", py.None())?,
                }
                w.set_item("observed_ns", o.observed_ns)?;
                w.set_item("resolved", o.resolved)?;
                let sd = PyDict::new(py);
                sd.set_item("index", o.slice.index)?;
                sd.set_item("attempt", o.slice.attempt)?;
                w.set_item("slice", sd)?;
                w.set_item("generation", o.generation.get())?;
                w.set_item("window", o.window.get())?;
                w.set_item("in_flight", o.in_flight.get())?;
                w.set_item("cooldown_remaining_ns", o.cooldown_remaining_ns.get())?;
                out.set_item("winner", w)?;
            }
        }
        Ok(out.unbind())
    }

    /// Receiver credit (RFC 2849), receiving side: the application has
    /// consumed `slots` of what the sender on `segment` wrote, so the
    /// engine may grant them again. `railyard.InvalidArgument` (kind
    /// `CreditNotActive` with credit off, `CreditConsume` for more slots
    /// than were written); nothing changes then.
    fn consume(&self, py: Python<'_>, segment: u32, slots: u64) -> PyResult<()> {
        self.detached(py, |c| Ok(c.engine.consume(SegmentId(segment), slots)?))
    }

    /// The receiver-credit metrics as a dict, or `None` with credit off
    /// (`MC_RECEIVER_CREDIT=off`): `policy`, `session`, the control
    /// plane's `frames_sent` / `frames_received` / `malformed` /
    /// `channels_lost`, `legacy_fallbacks`, `refused`, `fences_completed`,
    /// `consumed_slots`, `capacity` (per resource, in `RESOURCES` order);
    /// `sender` (`updates_applied`, `duplicate_updates`, `stale_updates`,
    /// `sequence_gaps`, `epoch_resets`, `violations`, `protocol_errors`,
    /// `stalls`, `stall_ns`, `refused_ops`, `legacy_fallbacks`, and per
    /// resource `granted`, `consumed`, `available`, `returned`);
    /// `receiver` (`free`, `outstanding`, `fencing`, `returned` per
    /// resource, `refused_grants`, `stale_usage`, `duplicate_usage`,
    /// `epoch_resets`, `violations`, `protocol_errors`); and `peers`, one
    /// dict per credit peer (`segment`, `negotiated` (`None`,
    /// `"UNSUPPORTED"`, `"OPTIONAL_LEGACY"` or `"ACTIVE"`), `version`,
    /// `phase`, `stalls`, `stall_ns`, `update_age_ms`, `granted`,
    /// `available`, `receiver_outstanding`, `receiver_epoch`,
    /// `receiver_consumable`).
    fn credit_stats(&self, py: Python<'_>) -> PyResult<Option<Py<PyDict>>> {
        let Some(s) = self.detached(py, |c| Ok(c.engine.credit_stats()))? else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("policy", screaming(&format!("{:?}", s.policy)))?;
        d.set_item("session", s.session)?;
        d.set_item("capacity", s.capacity.to_vec())?;
        for (k, v) in [
            ("legacy_fallbacks", s.legacy_fallbacks),
            ("refused", s.refused),
            ("frames_sent", s.frames_sent),
            ("frames_received", s.frames_received),
            ("malformed", s.malformed),
            ("channels_lost", s.channels_lost),
            ("fences_completed", s.fences_completed),
            ("consumed_slots", s.consumed_slots),
        ] {
            d.set_item(k, v)?;
        }
        let m = &s.sender;
        let tx = PyDict::new(py);
        for (k, v) in [
            ("updates_applied", m.updates_applied),
            ("duplicate_updates", m.duplicate_updates),
            ("stale_updates", m.stale_updates),
            ("sequence_gaps", m.sequence_gaps),
            ("epoch_resets", m.epoch_resets),
            ("violations", m.violations),
            ("protocol_errors", m.protocol_errors),
            ("stalls", m.stalls),
            ("stall_ns", m.stall_ns),
            ("refused_ops", m.refused_ops),
            ("legacy_fallbacks", m.legacy_fallbacks),
        ] {
            tx.set_item(k, v)?;
        }
        for (k, v) in [
            ("granted", m.granted),
            ("consumed", m.consumed),
            ("available", m.available),
            ("returned", m.returned),
        ] {
            tx.set_item(k, v.to_vec())?;
        }
        d.set_item("sender", tx)?;
        let r = &s.receiver;
        let rx = PyDict::new(py);
        for (k, v) in [
            ("free", r.free),
            ("outstanding", r.outstanding),
            ("fencing", r.fencing),
            ("returned", r.returned),
        ] {
            rx.set_item(k, v.to_vec())?;
        }
        for (k, v) in [
            ("refused_grants", r.refused_grants),
            ("stale_usage", r.stale_usage),
            ("duplicate_usage", r.duplicate_usage),
            ("epoch_resets", r.epoch_resets),
            ("violations", r.violations),
            ("protocol_errors", r.protocol_errors),
        ] {
            rx.set_item(k, v)?;
        }
        d.set_item("receiver", rx)?;
        let peers = PyList::empty(py);
        for p in &s.peers {
            let x = PyDict::new(py);
            x.set_item("segment", p.segment)?;
            let (neg, version) = match p.negotiated {
                None => (None, None),
                Some(Negotiated::Unsupported) => (Some("UNSUPPORTED"), None),
                Some(Negotiated::OptionalLegacy) => (Some("OPTIONAL_LEGACY"), None),
                Some(Negotiated::Active(v)) => (Some("ACTIVE"), Some(v)),
            };
            x.set_item("negotiated", neg)?;
            x.set_item("version", version)?;
            x.set_item("phase", screaming(&format!("{:?}", p.phase)))?;
            x.set_item("stalls", p.stalls)?;
            x.set_item("stall_ns", p.stall_ns)?;
            x.set_item("update_age_ms", p.update_age_ms)?;
            x.set_item("granted", p.sender.granted.to_vec())?;
            x.set_item("available", p.sender.available.to_vec())?;
            x.set_item("receiver_outstanding", p.receiver_outstanding.to_vec())?;
            x.set_item("receiver_epoch", p.receiver_epoch)?;
            x.set_item("receiver_consumable", p.receiver_consumable)?;
            peers.append(x)?;
        }
        d.set_item("peers", peers)?;
        Ok(Some(d.unbind()))
    }

    /// The last backpressure a post of task `task` of `batch` met (RFC
    /// 2849's typed `BackpressureInfo`) as a dict, or `None` if nothing
    /// pushed back: `source` (`"RECEIVER_CREDIT"`; `"TRANSPORT"` for the CC
    /// window, a quarantined path or a full QP; `"LOCAL_QUEUE"` for no free
    /// token), `peer`, `qos_class`,
    /// `exhausted` (resource names, e.g. `["DATA_BYTES"]`),
    /// `retry_after_us`, `fallback_allowed`. Valid until the batch is freed.
    fn task_backpressure(
        &self,
        py: Python<'_>,
        batch: u64,
        task: usize,
    ) -> PyResult<Option<Py<PyDict>>> {
        let Some(b) = self.detached(py, |c| {
            Ok(c.engine.task_backpressure(BatchId(batch), task)?)
        })?
        else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("source", b.source.to_string())?;
        d.set_item("peer", b.peer)?;
        d.set_item("qos_class", b.qos_class)?;
        let ex: Vec<String> = b.exhausted.iter().map(|r| r.to_string()).collect();
        d.set_item("exhausted", ex)?;
        d.set_item("retry_after_us", b.retry_after_us)?;
        d.set_item("fallback_allowed", b.fallback_allowed)?;
        Ok(Some(d.unbind()))
    }

    /// The counters and leak gauges as a dict, one key per field of the
    /// engine's stats (the stub's `EngineStats`): `tokens_in_use`,
    /// `endpoint_outstanding`, `qp_depth`, `cq_outstanding`,
    /// `slices_pending`, `parked`, `mem_pins` (all zero when idle),
    /// `tokens_cached` (free tokens in the workers' caches: at most 32 per
    /// worker, never in use; `tokens_in_use + tokens_cached <=
    /// max_inflight`), `mem_regions`, `posts`, `completions`, ..., the post
    /// gate's `gate_*`, the listener's `handshakes_*` and the per-rail
    /// lists `rail_slices_posted` / `rail_charged_bytes`.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let s = self.core(py)?.engine.stats();
        Ok(stats_dict(py, &s)?.unbind())
    }

    /// Everything to export in one call: `{"stats": <stats()>, "routes":
    /// [...]}`, one dict per CC route domain the engine assigned (`route`,
    /// `device`, `health` as a name such as `"Healthy"` or
    /// `"Quarantined"`, `generation`, `errors`, `window_bytes`,
    /// `in_flight_bytes`); no routes without a controller compiled in.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let snap = self.core(py)?.engine.snapshot();
        let d = PyDict::new(py);
        d.set_item("stats", stats_dict(py, &snap.stats)?)?;
        let routes = PyList::empty(py);
        for r in &snap.routes {
            let x = PyDict::new(py);
            x.set_item("route", r.route)?;
            x.set_item("device", r.device)?;
            x.set_item("health", format!("{:?}", r.health))?;
            x.set_item("generation", r.generation)?;
            x.set_item("errors", r.errors)?;
            x.set_item("window_bytes", r.window_bytes)?;
            x.set_item("in_flight_bytes", r.in_flight_bytes)?;
            routes.append(x)?;
        }
        d.set_item("routes", routes)?;
        Ok(d.unbind())
    }

    /// Waits (GIL released) until nothing is in flight or queued; returns
    /// whether it got there within `timeout` seconds.
    #[pyo3(signature = (timeout = 30.0))]
    fn wait_idle(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        self.detached(py, |c| {
            Ok(c.engine
                .wait_idle(Duration::from_secs_f64(timeout.clamp(0.0, 1e9))))
        })
    }

    /// Shuts the engine down (GIL released): stops posting, flushes
    /// in-flight work, releases every registration. Later calls raise.
    fn close(&self, py: Python<'_>) {
        let c = self.core.write().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(move || drop(c));
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.read().map(|c| c.is_none()).unwrap_or(true)
    }
}

fn anomaly_name(s: AnomalyState) -> String {
    screaming(&format!("{s:?}"))
}

/// [`NativeEngine::stats`]'s dict: every field of [`EngineStats`], as
/// [`EngineStats::fields`] names it (`gate_admitted`, `handshakes_busy`,
/// ...; the stub's `EngineStats` lists them and railyard-ffi's tests check
/// it); the per-rail lists cut to the engine's `rails`.
fn stats_dict<'py>(py: Python<'py>, s: &EngineStats) -> PyResult<Bound<'py, PyDict>> {
    use serde_json::Value;
    let d = PyDict::new(py);
    let rails = usize::from(s.rails);
    for (k, v) in s.fields() {
        match v {
            Value::Bool(b) => d.set_item(k, b)?,
            Value::Array(a) => {
                let a: Vec<u64> = a.iter().take(rails).filter_map(Value::as_u64).collect();
                d.set_item(k, a)?
            }
            v => d.set_item(k, v.as_u64().unwrap_or_default())?,
        }
    }
    Ok(d)
}
