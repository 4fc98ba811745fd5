//! What both Python classes share: the engine, its registered memory as
//! Python sees it, segments by name, waits with the GIL released, and the
//! mapping of engine errors to Python exceptions and Mooncake codes.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use railyard_verbs::engine::{
    BatchId, Engine, EngineError, SegmentId, TaskState, TaskStatus, Transfer,
};
use railyard_verbs::VerbsError;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Mooncake's error codes (`mooncake-transfer-engine/include/error.h`).
pub mod mc {
    macro_rules! codes {
        ($($(#[$doc:meta])* $name:ident = $py:literal $v:literal;)*) => {
            $($(#[$doc])* pub const $name: i32 = $v;)*
            /// Every code with its Mooncake name (exported by the module).
            pub const ALL: &[(&str, i32)] = &[$(($py, $v)),*];
        };
    }
    codes! {
        /// `ERR_INVALID_ARGUMENT`.
        INVALID_ARGUMENT = "ERR_INVALID_ARGUMENT" -1;
        /// `ERR_TOO_MANY_REQUESTS`.
        TOO_MANY_REQUESTS = "ERR_TOO_MANY_REQUESTS" -2;
        /// `ERR_ADDRESS_NOT_REGISTERED`.
        ADDRESS_NOT_REGISTERED = "ERR_ADDRESS_NOT_REGISTERED" -3;
        /// `ERR_BATCH_BUSY` (also: memory still in use by transfers).
        BATCH_BUSY = "ERR_BATCH_BUSY" -4;
        /// `ERR_DEVICE_NOT_FOUND`.
        DEVICE_NOT_FOUND = "ERR_DEVICE_NOT_FOUND" -6;
        /// `ERR_ADDRESS_OVERLAPPED`.
        ADDRESS_OVERLAPPED = "ERR_ADDRESS_OVERLAPPED" -7;
        /// `ERR_SOCKET`.
        SOCKET = "ERR_SOCKET" -102;
        /// `ERR_REJECT_HANDSHAKE`.
        REJECT_HANDSHAKE = "ERR_REJECT_HANDSHAKE" -104;
        /// `ERR_ENDPOINT`.
        ENDPOINT = "ERR_ENDPOINT" -201;
        /// `ERR_CONTEXT`.
        CONTEXT = "ERR_CONTEXT" -202;
        /// `ERR_MEMORY`.
        MEMORY = "ERR_MEMORY" -302;
        /// `ERR_NOT_IMPLEMENTED`.
        NOT_IMPLEMENTED = "ERR_NOT_IMPLEMENTED" -303;
    }
}

/// The engine error's kind: its variant name (what `RailyardError.kind`
/// carries), the Python exception class in `railyard._errors`, and
/// Mooncake's code for it.
pub fn classify(e: &EngineError) -> (&'static str, &'static str, i32) {
    use EngineError as E;
    match e {
        E::Config(_) => ("Config", "ConfigError", mc::INVALID_ARGUMENT),
        E::Verbs(VerbsError::NoDevice) => ("NoDevice", "DeviceError", mc::DEVICE_NOT_FOUND),
        E::Verbs(VerbsError::DeviceNotFound { .. }) => {
            ("DeviceNotFound", "DeviceError", mc::DEVICE_NOT_FOUND)
        }
        E::Verbs(_) => ("Verbs", "DeviceError", mc::CONTEXT),
        E::Handshake(_) => ("Handshake", "PeerError", mc::REJECT_HANDSHAKE),
        E::PeerMismatch { .. } => ("PeerMismatch", "PeerError", mc::REJECT_HANDSHAKE),
        E::Endpoint(_) => ("Endpoint", "PeerError", mc::ENDPOINT),
        E::Io(_) => ("Io", "InternalError", mc::SOCKET),
        E::NoSuchBatch(_) => ("NoSuchBatch", "InvalidArgument", mc::INVALID_ARGUMENT),
        E::NoSuchTask { .. } => ("NoSuchTask", "InvalidArgument", mc::INVALID_ARGUMENT),
        E::NoSuchSegment(_) => ("NoSuchSegment", "InvalidArgument", mc::INVALID_ARGUMENT),
        E::SegmentClosed(_) => ("SegmentClosed", "PeerError", mc::ENDPOINT),
        E::BatchFull { .. } => ("BatchFull", "InvalidArgument", mc::TOO_MANY_REQUESTS),
        E::BatchBusy(_) => ("BatchBusy", "BusyError", mc::BATCH_BUSY),
        E::OutOfTasks => ("OutOfTasks", "ResourceExhausted", mc::TOO_MANY_REQUESTS),
        E::OutOfSlices { .. } => ("OutOfSlices", "ResourceExhausted", mc::TOO_MANY_REQUESTS),
        E::ZeroLength => ("ZeroLength", "InvalidArgument", mc::INVALID_ARGUMENT),
        E::LocalRange { .. } => ("LocalRange", "InvalidArgument", mc::ADDRESS_NOT_REGISTERED),
        E::RemoteRange { .. } => ("RemoteRange", "InvalidArgument", mc::ADDRESS_NOT_REGISTERED),
        E::TooManyRegions => ("TooManyRegions", "ResourceExhausted", mc::TOO_MANY_REQUESTS),
        E::RegionOverlap { .. } => ("RegionOverlap", "InvalidArgument", mc::ADDRESS_OVERLAPPED),
        E::NoSuchRegion { .. } => (
            "NoSuchRegion",
            "InvalidArgument",
            mc::ADDRESS_NOT_REGISTERED,
        ),
        E::MemoryBusy { .. } => ("MemoryBusy", "BusyError", mc::BATCH_BUSY),
        E::CreditRefused { .. } => ("CreditRefused", "PeerError", mc::REJECT_HANDSHAKE),
        E::CreditNotActive(_) => ("CreditNotActive", "InvalidArgument", mc::INVALID_ARGUMENT),
        E::CreditConsume { .. } => ("CreditConsume", "InvalidArgument", mc::INVALID_ARGUMENT),
        E::Unsupported(_) => ("Unsupported", "InternalError", mc::NOT_IMPLEMENTED),
        E::Core(_) => ("Core", "InternalError", mc::MEMORY),
        // EngineError is not #[non_exhaustive]; a new variant fails here.
    }
}

/// An error as Python will see it: message, kind, exception class, code,
/// and the variable a configuration error names.
#[derive(Clone, Debug)]
pub struct Failure {
    pub message: String,
    pub kind: &'static str,
    pub class: &'static str,
    pub code: i32,
    pub var: Option<&'static str>,
}

impl Failure {
    pub fn new(
        kind: &'static str,
        class: &'static str,
        code: i32,
        message: impl Into<String>,
    ) -> Self {
        Self {
            message: message.into(),
            kind,
            class,
            code,
            var: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(
            "InvalidArgument",
            "InvalidArgument",
            mc::INVALID_ARGUMENT,
            message,
        )
    }

    /// A transfer that ended FAILED / TIMEOUT / CANCELED (or timed out in
    /// the wait).
    pub fn transfer(kind: &'static str, message: impl Into<String>) -> Self {
        Self::new(kind, "TransferError", -1, message)
    }

    /// The exception, from `railyard._errors` (imported once).
    pub fn into_pyerr(self, py: Python<'_>) -> PyErr {
        static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
        let build = || -> PyResult<PyErr> {
            let m =
                ERRORS.get_or_try_init(py, || py.import("railyard._errors").map(Bound::unbind))?;
            let cls = m.bind(py).getattr(self.class)?.cast_into::<PyType>()?;
            let exc = cls.call1((self.message.clone(),))?;
            exc.setattr("kind", self.kind)?;
            exc.setattr("code", self.code)?;
            exc.setattr("var", self.var)?;
            Ok(PyErr::from_value(exc))
        };
        build().unwrap_or_else(|e| e)
    }
}

impl From<EngineError> for Failure {
    fn from(e: EngineError) -> Self {
        let (kind, class, code) = classify(&e);
        let var = match &e {
            EngineError::Config(c) => Some(c.var),
            _ => None,
        };
        Self {
            message: e.to_string(),
            kind,
            class,
            code,
            var,
        }
    }
}

/// Logs `msg` through Python's `logging` (logger `railyard`, level
/// ERROR): with no logging configured, Python prints it to stderr, as
/// Mooncake's glog does.
pub fn log_error(py: Python<'_>, msg: &str) {
    let r = py
        .import("logging")
        .and_then(|l| l.call_method1("getLogger", ("railyard",)))
        .and_then(|l| l.call_method1("error", ("%s", msg)));
    if let Err(e) = r {
        e.print(py);
    }
}

/// One region of memory registered through Python (for bounds checks of
/// `read_bytes_from_buffer` / `write_bytes_to_buffer` and managed buffers).
#[derive(Clone, Copy, Debug)]
pub struct Region {
    pub len: u64,
}

/// The engine plus what the bindings keep beside it.
pub struct Core {
    pub engine: Engine,
    /// Registered regions by start address.
    regions: Mutex<BTreeMap<u64, Region>>,
    /// Segments by peer name (`"host:port"`).
    segments: Mutex<HashMap<String, SegmentId>>,
    /// Async batches: start and total bytes (Mooncake's timeout rule).
    pub batches: Mutex<HashMap<u64, (Instant, u64)>>,
    /// How long a synchronous call waits, plus 1 ns per byte
    /// (`MC_TRANSFER_TIMEOUT`, Mooncake's rule).
    pub timeout: Duration,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Core {
    pub fn new(engine: Engine, timeout: Duration) -> Self {
        Self {
            engine,
            regions: Mutex::new(BTreeMap::new()),
            segments: Mutex::new(HashMap::new()),
            batches: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Registers caller memory.
    ///
    /// # Safety
    /// `addr..addr+len` stays valid until it is deregistered (or the
    /// engine dropped).
    pub unsafe fn register(&self, addr: u64, len: u64) -> Result<(), Failure> {
        if addr == 0 {
            return Err(Failure::invalid("memory address 0"));
        }
        if len == 0 {
            return Err(Failure::from(EngineError::ZeroLength));
        }
        let len_usize = usize::try_from(len).map_err(|_| Failure::invalid("length too large"))?;
        // SAFETY: forwarded from the caller's promise.
        let r = unsafe { self.engine.register_memory(addr as *mut u8, len_usize) }?;
        drop(r);
        lock(&self.regions).insert(addr, Region { len });
        Ok(())
    }

    /// Allocates engine memory; returns its address.
    pub fn alloc(&self, len: u64) -> Result<u64, Failure> {
        let len_usize = usize::try_from(len).map_err(|_| Failure::invalid("length too large"))?;
        let r = self.engine.alloc_memory(len_usize)?;
        let addr = r.addr();
        // Dropped here: the engine's registration is the last one, so
        // deregistration frees the buffer.
        drop(r);
        lock(&self.regions).insert(addr, Region { len });
        Ok(addr)
    }

    pub fn deregister(&self, addr: u64) -> Result<(), Failure> {
        self.engine.deregister_memory(addr)?;
        lock(&self.regions).remove(&addr);
        Ok(())
    }

    /// Whether `addr..addr+len` lies inside one registered region.
    pub fn covers(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        lock(&self.regions)
            .range(..=addr)
            .next_back()
            .is_some_and(|(&a, r)| end <= a + r.len)
    }

    /// The segment for peer `name`, opened (handshake) on first use.
    pub fn segment(&self, name: &str) -> Result<SegmentId, Failure> {
        let mut m = lock(&self.segments);
        if let Some(&s) = m.get(name) {
            return Ok(s);
        }
        let s = self.engine.open_segment(name)?;
        m.insert(name.to_owned(), s);
        Ok(s)
    }

    /// Submits into a new batch of `transfers.len()`; on a remote range
    /// the peer may have registered memory after we connected: the
    /// segment is reconnected (fresh descriptors) and the submit tried once
    /// more. On failure the batch is freed.
    pub fn submit_new(&self, seg: SegmentId, transfers: &[Transfer]) -> Result<BatchId, Failure> {
        let b = self.engine.allocate_batch(transfers.len().max(1))?;
        let mut r = self.engine.submit(b, transfers);
        if matches!(r, Err(EngineError::RemoteRange { .. }))
            && self.engine.reconnect_segment(seg).is_ok()
        {
            r = self.engine.submit(b, transfers);
        }
        if let Err(e) = r {
            let _ = self.engine.free_batch(b);
            return Err(e.into());
        }
        Ok(b)
    }

    /// Waits (the caller released the GIL) until every task of `batch` is
    /// terminal or `deadline` passes; returns the statuses, or `None` on the
    /// deadline. Blocks in [`Engine::wait_batch`] (no spinning, issue #18).
    pub fn wait(
        &self,
        batch: BatchId,
        deadline: Instant,
    ) -> Result<Option<Vec<TaskStatus>>, Failure> {
        let left = deadline.saturating_duration_since(Instant::now());
        if !self.engine.wait_batch(batch, left)? {
            return Ok(None);
        }
        Ok(Some(self.engine.batch_status(batch)?))
    }

    /// Cancels `batch` and frees it once its tasks are terminal (they are
    /// right after the cancel; posted work still completes on the wire,
    /// keeping its memory pinned until then).
    pub fn abandon(&self, batch: BatchId) {
        let _ = self.engine.cancel_batch(batch);
        let _ = self.engine.free_batch(batch);
    }

    /// Submits, waits until done or the Mooncake deadline (timeout + 1 ns
    /// per byte from `start`), frees the batch. `Ok(())` only if every task
    /// completed.
    pub fn run(
        &self,
        seg: SegmentId,
        transfers: &[Transfer],
        start: Instant,
    ) -> Result<(), Failure> {
        let total: u64 = transfers.iter().map(|t| t.len).sum();
        let b = self.submit_new(seg, transfers)?;
        let deadline = start + self.timeout + Duration::from_nanos(total);
        match self.wait(b, deadline)? {
            Some(st) => {
                let _ = self.engine.free_batch(b);
                match st.iter().find(|s| s.state != TaskState::Completed) {
                    None => Ok(()),
                    Some(s) => Err(Failure::transfer(
                        state_kind(s.state),
                        format!("transfer ended {}", state_name(s.state)),
                    )),
                }
            }
            None => {
                self.abandon(b);
                Err(Failure::transfer(
                    "WaitTimeout",
                    format!("transfer not finished after {:?}", deadline - start),
                ))
            }
        }
    }
}

/// Mooncake's name of a task state.
pub fn state_name(s: TaskState) -> &'static str {
    match s {
        TaskState::Waiting => "WAITING",
        TaskState::Pending => "PENDING",
        TaskState::Completed => "COMPLETED",
        TaskState::Failed => "FAILED",
        TaskState::Timeout => "TIMEOUT",
        TaskState::Canceled => "CANCELED",
    }
}

fn state_kind(s: TaskState) -> &'static str {
    match s {
        TaskState::Timeout => "Timeout",
        TaskState::Canceled => "Canceled",
        _ => "Failed",
    }
}

/// `MC_TRANSFER_TIMEOUT` as Mooncake's Python binding reads it: whole
/// seconds, at least 5; 30 when unset. A value that is not a number is an
/// error here (Mooncake's `atoi` would read 0, i.e. 5 s).
pub fn transfer_timeout() -> Result<Duration, Failure> {
    match std::env::var("MC_TRANSFER_TIMEOUT") {
        Err(_) => Ok(Duration::from_secs(30)),
        Ok(v) if v.trim().is_empty() => Ok(Duration::from_secs(30)),
        Ok(v) => match v.trim().parse::<i64>() {
            Ok(s) => Ok(Duration::from_secs(s.max(5) as u64)),
            Err(_) => {
                let mut f = Failure::new(
                    "Config",
                    "ConfigError",
                    mc::INVALID_ARGUMENT,
                    format!("invalid MC_TRANSFER_TIMEOUT={v:?}: expected whole seconds"),
                );
                f.var = Some("MC_TRANSFER_TIMEOUT");
                Err(f)
            }
        },
    }
}
