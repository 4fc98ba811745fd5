//! `railyard._native._TransferEngine`: the native side of
//! `railyard.TransferEngine` (`railyard/_mooncake.py`), the methods,
//! arguments and return codes of Mooncake's
//! `mooncake.engine.TransferEngine`
//! (`mooncake-integration/transfer_engine/transfer_engine_py.cpp`) over
//! railyard's engine, so connector code runs unchanged. The Mooncake-named
//! transfer methods are thin Python over one call here, `_transfer`; the
//! rest are methods of this class.
//!
//! Conventions kept from Mooncake: every call returns `0` on success and a
//! negative code on failure (`-1` for transfers; Mooncake's `ERR_*` codes
//! for registration), batch ids are non-zero and `0` means failure,
//! addresses are plain integers, a failure is logged (Python `logging`,
//! logger `railyard`; printed to stderr when logging is not configured),
//! and every call that waits releases the GIL. Where Mooncake would crash
//! (unknown batch ids, addresses outside registered memory, mismatched
//! list lengths) this one returns `-1` (or raises `ValueError` for
//! `read_bytes_from_buffer`) instead.

use crate::core::{log_error, mc, transfer_timeout, Core, Failure};
use crate::managed::Managed;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use railyard_verbs::engine::{BatchId, Engine, EngineConfig, Op, TaskState, Transfer};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Local buffers, peer addresses and lengths of a transfer call.
type Lists<'a> = (&'a [u64], &'a [u64], &'a [u64]);

/// The only metadata server railyard speaks: its direct TCP handshake.
pub const P2PHANDSHAKE: &str = "P2PHANDSHAKE";

struct Live {
    core: Core,
    managed: Mutex<Managed>,
    hostname: String,
}

impl Live {
    /// Forgets batch `id`'s submit time and size (freed or abandoned).
    fn forget(&self, id: u64) {
        self.core
            .batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

/// The native base of the Mooncake-compatible transfer engine,
/// `railyard.TransferEngine` (a drop-in for
/// `mooncake.engine.TransferEngine`; its transfer methods are Python over
/// [`_transfer`](Self::_transfer)).
///
/// ```python
/// from railyard import TransferEngine      # was: from mooncake.engine import TransferEngine
/// te = TransferEngine()
/// assert te.initialize("10.0.0.1", "P2PHANDSHAKE", "rdma", "mlx5_0") == 0
/// peer = f"10.0.0.2:{peer_rpc_port}"
/// ret = te.transfer_sync_write(peer, local_addr, remote_addr, 65536)
/// ```
#[pyclass(
    module = "railyard._native",
    name = "_TransferEngine",
    subclass,
    frozen
)]
pub struct TransferEngine {
    live: RwLock<Option<Arc<Live>>>,
    last_error: Mutex<String>,
}

impl TransferEngine {
    fn live(&self) -> Result<Arc<Live>, Failure> {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                Failure::invalid("TransferEngine is not initialized (call initialize first)")
            })
    }

    /// Mooncake's convention: log the failure, remember it, return `code`.
    fn fail(&self, py: Python<'_>, op: &str, f: &Failure) -> i32 {
        let msg = format!("railyard TransferEngine.{op}: {}", f.message);
        log_error(py, &msg);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = msg;
        f.code
    }

    /// Runs `f` with the GIL released; `Ok(v)` → `v`, `Err` → logged, its
    /// code (or `on_err` for calls whose failure value is fixed).
    fn call(
        &self,
        py: Python<'_>,
        op: &str,
        on_err: Option<i64>,
        f: impl FnOnce(&Live) -> Result<i64, Failure> + Send,
    ) -> i64 {
        let r = self.live().and_then(|l| py.detach(|| f(&l)));
        match r {
            Ok(v) => v,
            Err(e) => {
                let c = self.fail(py, op, &e);
                on_err.unwrap_or(i64::from(c))
            }
        }
    }

    fn transfers(
        seg: railyard_verbs::engine::SegmentId,
        op: Op,
        (buffers, peers, lengths): Lists<'_>,
    ) -> Result<Vec<Transfer>, Failure> {
        if buffers.len() != peers.len() || buffers.len() != lengths.len() {
            return Err(Failure::invalid(format!(
                "buffers, peer_buffer_addresses and lengths have different sizes ({}, {}, {})",
                buffers.len(),
                peers.len(),
                lengths.len()
            )));
        }
        Ok(buffers
            .iter()
            .zip(peers)
            .zip(lengths)
            .map(|((&local, &remote), &len)| Transfer {
                op,
                local,
                len,
                segment: seg,
                remote_offset: remote,
            })
            .collect())
    }
}

/// `host` or `host:port` → the address to bind (port 0: the engine picks).
fn bind_addr(local_hostname: &str) -> Result<(String, SocketAddr), Failure> {
    let bad = |why: &str| Failure::invalid(format!("local_hostname {local_hostname:?}: {why}"));
    let (host, port) = match local_hostname.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
            h.trim_matches(['[', ']']),
            p.parse::<u16>().map_err(|_| bad("bad port"))?,
        ),
        _ => (local_hostname, 0),
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => (host, 0)
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve: {e}")))?
            .map(|a| a.ip())
            .find(IpAddr::is_ipv4)
            .ok_or_else(|| bad("no IPv4 address"))?,
    };
    Ok((host.to_owned(), SocketAddr::new(ip, port)))
}

#[pymethods]
impl TransferEngine {
    #[new]
    fn new() -> Self {
        Self {
            live: RwLock::new(None),
            last_error: Mutex::new(String::new()),
        }
    }

    /// Starts the engine: `metadata_server` must be `"P2PHANDSHAKE"` (the
    /// engine's direct TCP handshake; it listens on `local_hostname` at a
    /// port it picks, see `get_rpc_port`) and `protocol` `"rdma"`.
    /// `device_name` is a device or a comma-separated list of devices (the
    /// rails); empty: `MC_RDMA_DEVICE` or the first device. The other
    /// settings come from the `MC_*` variables. Returns 0, or -1 (logged).
    #[pyo3(signature = (local_hostname, metadata_server, protocol, device_name))]
    fn initialize(
        &self,
        py: Python<'_>,
        local_hostname: &str,
        metadata_server: &str,
        protocol: &str,
        device_name: &str,
    ) -> i32 {
        let r = (|| -> Result<Live, Failure> {
            if self.live.read().map(|g| g.is_some()).unwrap_or(true) {
                return Err(Failure::invalid("already initialized"));
            }
            if metadata_server != P2PHANDSHAKE {
                return Err(Failure::new(
                    "Unsupported",
                    "InternalError",
                    mc::NOT_IMPLEMENTED,
                    format!(
                        "metadata server {metadata_server:?} is not supported: railyard connects peers \
                         directly (use \"P2PHANDSHAKE\"; etcd, redis and http metadata are not implemented)"
                    ),
                ));
            }
            if protocol != "rdma" {
                return Err(Failure::new(
                    "Unsupported",
                    "InternalError",
                    mc::NOT_IMPLEMENTED,
                    format!(
                        "protocol {protocol:?} is not supported: railyard speaks \"rdma\" only"
                    ),
                ));
            }
            let (host, listen) = bind_addr(local_hostname)?;
            let device = device_name.trim().to_owned();
            let mut cfg = EngineConfig::from_lookup(|k| {
                if k == "MC_RDMA_DEVICE" && !device.is_empty() {
                    return Some(device.clone());
                }
                std::env::var(k).ok()
            })
            .map_err(|e| Failure::from(railyard_verbs::engine::EngineError::from(e)))?;
            let timeout = transfer_timeout()?;
            cfg.transfer_timeout = timeout;
            cfg.listen = listen;
            let engine = py.detach(|| Engine::new(cfg))?;
            Ok(Live {
                core: Core::new(engine, timeout),
                managed: Mutex::new(Managed::default()),
                hostname: host,
            })
        })();
        match r {
            Ok(l) => {
                *self.live.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(l));
                0
            }
            Err(e) => {
                self.fail(py, "initialize", &e);
                -1
            }
        }
    }

    /// The TCP port of the handshake listener (the peer names this engine
    /// `"<local_hostname>:<rpc_port>"`); -1 before `initialize`.
    fn get_rpc_port(&self) -> i32 {
        self.live()
            .map(|l| i32::from(l.core.engine.listen_addr().port()))
            .unwrap_or(-1)
    }

    /// The `local_hostname` given to `initialize` (without a port); empty
    /// before it.
    fn get_local_hostname(&self) -> String {
        self.live().map(|l| l.hostname.clone()).unwrap_or_default()
    }

    /// This engine's segment name, `"<local_hostname>:<rpc_port>"`: what a
    /// peer passes as `target_hostname`.
    fn get_session_id(&self) -> String {
        self.live()
            .map(|l| format!("{}:{}", l.hostname, l.core.engine.listen_addr().port()))
            .unwrap_or_default()
    }

    /// The message of the last failure (railyard extension).
    fn last_error(&self) -> String {
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Registers `buffer_addr..+capacity` (caller memory; must stay valid
    /// until `unregister_memory`). 0, or Mooncake's code: -1 zero length,
    /// -7 overlaps a registered region.
    #[pyo3(signature = (buffer_addr, capacity, location = "*"))]
    fn register_memory(
        &self,
        py: Python<'_>,
        buffer_addr: u64,
        capacity: u64,
        location: &str,
    ) -> i32 {
        let _ = location;
        self.call(py, "register_memory", None, |l| {
            // SAFETY: the caller's promise (Mooncake's contract).
            unsafe { l.core.register(buffer_addr, capacity) }.map(|()| 0)
        }) as i32
    }

    /// Deregisters the region that starts at `buffer_addr`. 0; -3 if no
    /// region starts there; -4 while transfers may still touch it
    /// (railyard refuses instead of freeing memory the NIC may touch).
    fn unregister_memory(&self, py: Python<'_>, buffer_addr: u64) -> i32 {
        self.call(py, "unregister_memory", None, |l| {
            l.core.deregister(buffer_addr).map(|()| 0)
        }) as i32
    }

    /// Registers several regions: all or nothing (on a failure the ones
    /// registered by this call are deregistered again).
    #[pyo3(signature = (buffer_addresses, capacities, location = "*"))]
    fn batch_register_memory(
        &self,
        py: Python<'_>,
        buffer_addresses: Vec<u64>,
        capacities: Vec<u64>,
        location: &str,
    ) -> i32 {
        let _ = location;
        self.call(py, "batch_register_memory", None, |l| {
            if buffer_addresses.len() != capacities.len() {
                return Err(Failure::invalid(format!(
                    "{} addresses but {} capacities",
                    buffer_addresses.len(),
                    capacities.len()
                )));
            }
            let mut done = Vec::new();
            for (&a, &n) in buffer_addresses.iter().zip(&capacities) {
                // SAFETY: the caller's promise (Mooncake's contract).
                if let Err(e) = unsafe { l.core.register(a, n) } {
                    for d in done {
                        let _ = l.core.deregister(d);
                    }
                    return Err(e);
                }
                done.push(a);
            }
            Ok(0)
        }) as i32
    }

    /// Deregisters each address; returns the first error code (the others
    /// are still deregistered).
    fn batch_unregister_memory(&self, py: Python<'_>, buffer_addresses: Vec<u64>) -> i32 {
        self.call(py, "batch_unregister_memory", None, |l| {
            let mut first = Ok(0);
            for &a in &buffer_addresses {
                if let Err(e) = l.core.deregister(a) {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
            first
        }) as i32
    }

    /// Allocates `length` bytes of registered memory (Mooncake's slab
    /// classes, 8 KiB .. 256 MiB, larger sizes exactly); returns its
    /// address, or 0.
    fn allocate_managed_buffer(&self, py: Python<'_>, length: u64) -> u64 {
        self.call(py, "allocate_managed_buffer", Some(0), |l| {
            let mut m = l.managed.lock().unwrap_or_else(|e| e.into_inner());
            m.allocate(&l.core, length).map(|a| a as i64)
        }) as u64
    }

    /// Returns a managed buffer (`length` as allocated). 0; -1 for an
    /// address this engine did not hand out with that length.
    fn free_managed_buffer(&self, py: Python<'_>, buffer_addr: u64, length: u64) -> i32 {
        self.call(py, "free_managed_buffer", None, |l| {
            let mut m = l.managed.lock().unwrap_or_else(|e| e.into_inner());
            m.free(&l.core, buffer_addr, length).map(|()| 0)
        }) as i32
    }

    /// Copies `length` bytes of `src` (bytes or str) to `dest_address`,
    /// which must lie in memory registered with this engine. 0, or -1.
    fn write_bytes_to_buffer(
        &self,
        py: Python<'_>,
        dest_address: u64,
        src: &Bound<'_, PyAny>,
        length: u64,
    ) -> PyResult<i32> {
        let text: String;
        let data: &[u8] = if let Ok(b) = src.cast::<PyBytes>() {
            b.as_bytes()
        } else if let Ok(s) = src.cast::<PyString>() {
            text = s.to_cow()?.into_owned();
            text.as_bytes()
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "write_bytes_to_buffer: src must be bytes or str",
            ));
        };
        let r = self.live().and_then(|l| {
            if length > data.len() as u64 {
                return Err(Failure::invalid(format!(
                    "length {length} is larger than src ({} bytes)",
                    data.len()
                )));
            }
            if !l.core.covers(dest_address, length) {
                return Err(Failure::invalid(format!(
                    "{dest_address:#x}+{length} is not inside memory registered with this engine"
                )));
            }
            // SAFETY: the range lies inside memory registered with this
            // engine (which keeps it mapped until deregistered); `data` is
            // a distinct Python object.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    data.as_ptr(),
                    dest_address as *mut u8,
                    length as usize,
                )
            };
            Ok(0)
        });
        Ok(match r {
            Ok(v) => v,
            Err(e) => self.fail(py, "write_bytes_to_buffer", &e).min(-1),
        })
    }

    /// `length` bytes at `source_address` (inside memory registered with
    /// this engine; else `railyard.InvalidArgument`, a `ValueError`).
    fn read_bytes_from_buffer<'py>(
        &self,
        py: Python<'py>,
        source_address: u64,
        length: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let l = self.live().map_err(|e| e.into_pyerr(py))?;
        if !l.core.covers(source_address, length) {
            return Err(Failure::invalid(format!(
                "{source_address:#x}+{length} is not inside memory registered with this engine"
            ))
            .into_pyerr(py));
        }
        // SAFETY: inside registered memory, mapped until deregistered (the
        // `Arc` keeps the engine, and so the registration, alive).
        let s = unsafe { std::slice::from_raw_parts(source_address as *const u8, length as usize) };
        Ok(PyBytes::new(py, s))
    }

    /// The one native call behind the Mooncake-named transfer methods of
    /// `railyard.TransferEngine` (`transfer_sync_write` / `_read`,
    /// `batch_transfer_sync_write` / `_read`, `batch_transfer_async_write`
    /// / `_read`, `transfer_submit_write`): `op` (`"write"` or `"read"`)
    /// from each local `buffers[i]` to or from the peer's
    /// `peer_buffer_addresses[i]`, `lengths[i]` bytes, as one batch. `sync`:
    /// waits for it (GIL released) and returns 0, or -1; otherwise returns
    /// its batch id (non-zero; wait with `get_batch_transfer_status` or
    /// `transfer_check_status`), or 0. A failure is logged and kept under
    /// `method`'s name. `transport_hint` is accepted and ignored.
    #[pyo3(signature = (method, target_hostname, op, buffers, peer_buffer_addresses, lengths, sync, transport_hint = ""))]
    #[allow(clippy::too_many_arguments)]
    fn _transfer(
        &self,
        py: Python<'_>,
        method: &str,
        target_hostname: &str,
        op: &str,
        buffers: Vec<u64>,
        peer_buffer_addresses: Vec<u64>,
        lengths: Vec<u64>,
        sync: bool,
        transport_hint: &str,
    ) -> i64 {
        let _ = transport_hint;
        let start = Instant::now();
        let lists = (&buffers[..], &peer_buffer_addresses[..], &lengths[..]);
        self.call(py, method, Some(if sync { -1 } else { 0 }), |l| {
            let op = match op {
                "write" => Op::Write,
                "read" => Op::Read,
                _ => {
                    return Err(Failure::invalid(format!(
                        "op {op:?}: \"write\" or \"read\""
                    )))
                }
            };
            let seg = l.core.segment(target_hostname)?;
            let t = Self::transfers(seg, op, lists)?;
            if sync {
                return l.core.run(seg, &t, start).map(|()| 0);
            }
            let total = lengths.iter().sum();
            let b = l.core.submit_new(seg, &t)?;
            l.core
                .batches
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(b.0, (Instant::now(), total));
            // Batch ids count up from 1: they fit an i64.
            Ok(b.0 as i64)
        })
    }

    /// 1 completed (batch freed), 0 pending, -1 failed (freed), -2 timeout.
    fn transfer_check_status(&self, py: Python<'_>, batch_id: u64) -> i32 {
        self.call(py, "transfer_check_status", Some(-1), |l| {
            let b = BatchId(batch_id);
            let s = l.core.engine.task_status(b, 0)?;
            let code = match s.state {
                TaskState::Completed => 1,
                TaskState::Failed | TaskState::Canceled => -1,
                TaskState::Timeout => return Ok(-2),
                TaskState::Waiting | TaskState::Pending => return Ok(0),
            };
            let _ = l.core.engine.free_batch(b);
            l.forget(batch_id);
            Ok(code)
        }) as i32
    }

    /// Waits (GIL released) until every batch completed (each is freed as
    /// it completes): 0. A failed batch, or one past its deadline
    /// (`MC_TRANSFER_TIMEOUT` + 1 ns per byte since submit), ends the wait:
    /// -1, and every batch not yet completed is canceled and freed. Unknown
    /// ids: -1.
    fn get_batch_transfer_status(&self, py: Python<'_>, batch_ids: Vec<u64>) -> i32 {
        self.call(py, "get_batch_transfer_status", Some(-1), |l| {
            let mut left: Vec<(u64, Instant)> = Vec::with_capacity(batch_ids.len());
            {
                let b = l.core.batches.lock().unwrap_or_else(|e| e.into_inner());
                for id in &batch_ids {
                    let (start, total) = b
                        .get(id)
                        .copied()
                        .ok_or_else(|| Failure::invalid(format!("unknown batch id {id}")))?;
                    left.push((*id, start + l.core.timeout + Duration::from_nanos(total)));
                }
            }
            let mut failure: Option<Failure> = None;
            let mut spins = 0u32;
            while !left.is_empty() && failure.is_none() {
                let mut i = 0;
                while i < left.len() {
                    let (id, deadline) = left[i];
                    let st = l.core.engine.batch_status(BatchId(id))?;
                    if st.iter().all(|s| s.state == TaskState::Completed) {
                        let _ = l.core.engine.free_batch(BatchId(id));
                        l.forget(id);
                        left.swap_remove(i);
                        continue;
                    }
                    if let Some(s) = st
                        .iter()
                        .find(|s| s.state.is_terminal() && s.state != TaskState::Completed)
                    {
                        failure = Some(Failure::transfer(
                            "Failed",
                            format!(
                                "batch {id}: a transfer ended {}",
                                crate::core::state_name(s.state)
                            ),
                        ));
                        break;
                    }
                    if Instant::now() > deadline {
                        failure = Some(Failure::transfer(
                            "WaitTimeout",
                            format!("batch {id} timed out"),
                        ));
                        break;
                    }
                    i += 1;
                }
                spins += 1;
                if failure.is_none() && !left.is_empty() {
                    if spins < 64 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            }
            match failure {
                None => Ok(0),
                Some(f) => {
                    for (id, _) in left {
                        l.core.abandon(BatchId(id));
                        l.forget(id);
                    }
                    Err(f)
                }
            }
        }) as i32
    }

    /// The address of the first region the peer `segment_name` exported
    /// (connecting first if needed), or 0.
    fn get_first_buffer_address(&self, py: Python<'_>, segment_name: &str) -> u64 {
        self.call(py, "get_first_buffer_address", Some(0), |l| {
            let seg = l.core.segment(segment_name)?;
            Ok(l.core
                .engine
                .segment_regions(seg)?
                .first()
                .map_or(0, |d| d.addr as i64))
        }) as u64
    }

    /// Stops the engine now (also done when the object is collected):
    /// in-flight work is flushed, registrations released. Later calls fail
    /// as before `initialize` (railyard extension).
    fn close(&self, py: Python<'_>) {
        let l = self.live.write().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(move || drop(l));
    }
}
