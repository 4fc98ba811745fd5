//! The engine's control-path log, routed to a C function
//! (`ry_set_log_callback`), so a C++ host sends it into glog, spdlog or
//! its own logger.
//!
//! The engine logs through the `tracing` crate, on the control path only
//! (handshakes accepted / refused with their reason, QP state changes,
//! retire / reclaim / forced flush, reconnect, CC health changes and
//! quarantines, configuration values refused; never per work request).
//! The first `ry_set_log_callback` installs a small `tracing` subscriber
//! as the process's global one; it hands every event at or above the
//! chosen level to the callback as (level, target, message), the message
//! being the event's text followed by its fields as `key=value`.
//! Targets: `railyard::handshake`, `railyard::endpoint`, `railyard::qp`,
//! `railyard::reconnect`, `railyard::cc`, `railyard::event`,
//! `railyard::config`.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Once, RwLock};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

use crate::error::{guard, Error, RyStatus};

/// Log levels, most severe first: a callback installed at a level gets
/// that level and every more severe one.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ry_log_level {
    /// Nothing (as good as clearing the callback).
    Off = 0,
    /// Errors (the engine logs none today).
    Error = 1,
    /// Refusals and faults: a refused handshake, a retired endpoint after
    /// an error completion, a quarantine, a refused configuration value.
    Warn = 2,
    /// Lifecycle: segments opened, handshakes accepted, reconnects,
    /// endpoints reclaimed, health recovering.
    Info = 3,
    /// Detail: QP state changes, endpoints opened, route generations.
    Debug = 4,
    /// Everything (the engine logs nothing at this level today).
    Trace = 5,
}

/// The log callback: `level` (an `ry_log_level`), `target` (e.g.
/// `"railyard::handshake"`) and `message` are NUL-terminated strings that
/// live only for the call; `user` is the pointer given to
/// `ry_set_log_callback`. Called from the engine's threads (the monitor,
/// the listener, handshake and reconnect threads, the pollers when an
/// error completion retires an endpoint), possibly several at once; it
/// must not unwind and must not call `ry_set_log_callback`.
pub type ry_log_fn = Option<
    unsafe extern "C" fn(
        level: u32,
        target: *const c_char,
        message: *const c_char,
        user: *mut c_void,
    ),
>;

#[derive(Clone, Copy)]
struct Sink {
    f: unsafe extern "C" fn(u32, *const c_char, *const c_char, *mut c_void),
    user: *mut c_void,
}

// SAFETY: the user pointer is the caller's, only passed back verbatim; the
// caller promised (ry_set_log_callback's contract) that the callback may
// be called from any thread with it.
unsafe impl Send for Sink {}
// SAFETY: as for Send: nothing is ever dereferenced on the Rust side.
unsafe impl Sync for Sink {}

/// The callback (held under the read lock while it runs, so that clearing
/// or replacing it waits for running calls).
static SINK: RwLock<Option<Sink>> = RwLock::new(None);
/// The most verbose level forwarded (`ry_log_level`).
static LEVEL: AtomicU32 = AtomicU32::new(0);
static INSTALL: Once = Once::new();
static INSTALLED: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// This thread is inside the callback: nested events are dropped and
    /// `ry_set_log_callback` is refused (it would wait for itself).
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

fn level_code(l: &Level) -> u32 {
    match *l {
        Level::ERROR => ry_log_level::Error as u32,
        Level::WARN => ry_log_level::Warn as u32,
        Level::INFO => ry_log_level::Info as u32,
        Level::DEBUG => ry_log_level::Debug as u32,
        Level::TRACE => ry_log_level::Trace as u32,
    }
}

fn filter_of(code: u32) -> LevelFilter {
    match code {
        1 => LevelFilter::ERROR,
        2 => LevelFilter::WARN,
        3 => LevelFilter::INFO,
        4 => LevelFilter::DEBUG,
        5 => LevelFilter::TRACE,
        _ => LevelFilter::OFF,
    }
}

/// Renders an event: its message, then `key=value` for each other field.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }
}

fn c_string(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let mut v = e.into_vec();
        v.retain(|&b| b != 0);
        CString::new(v).unwrap_or_default()
    })
}

/// The global subscriber: events only (the engine opens no spans), at or
/// above [`LEVEL`], to [`SINK`].
struct Callback;

impl Subscriber for Callback {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Re-evaluated by `enabled` (the level can change at any time; the
        // callsite cache is rebuilt when it does).
        Interest::sometimes()
    }

    fn enabled(&self, m: &Metadata<'_>) -> bool {
        level_code(m.level()) <= LEVEL.load(Ordering::Acquire)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(filter_of(LEVEL.load(Ordering::Acquire)))
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, e: &Event<'_>) {
        if IN_CALLBACK.with(Cell::get) {
            return;
        }
        let Ok(sink) = SINK.read() else {
            return;
        };
        let Some(s) = *sink else {
            return;
        };
        let m = e.metadata();
        let mut t = Text::default();
        e.record(&mut t);
        t.message.push_str(&t.fields);
        let target = c_string(m.target().to_owned());
        let message = c_string(t.message);
        IN_CALLBACK.with(|c| c.set(true));
        // SAFETY: the caller of ry_set_log_callback promised `f` is a valid
        // function taking these arguments; the strings outlive the call.
        unsafe {
            (s.f)(
                level_code(m.level()),
                target.as_ptr(),
                message.as_ptr(),
                s.user,
            )
        };
        IN_CALLBACK.with(|c| c.set(false));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// Routes the engine's log to `callback`: every event at `level`
/// (`ry_log_level`) or more severe is passed to it as (level, target,
/// message, `user`). `callback` NULL (or `level` OFF) clears it: once this
/// returns, the previous callback is not running and is never called
/// again, so its `user` may be freed. Replacing works the same way.
///
/// The first call installs railyard's subscriber as the process's global
/// `tracing` subscriber; if another one is installed already (a Rust host
/// that set its own), the call is `RY_STATUS_LOG_UNAVAILABLE` (that
/// subscriber gets the engine's events instead). An unknown `level` is
/// `RY_STATUS_INVALID_ARGUMENT`, and a call from inside the callback too
/// (it would wait for itself).
///
/// Ownership: retains `callback` and `user` until cleared or replaced.
/// Thread-safety: any thread; the callback itself is called from the
/// engine's threads, concurrently (see `ry_log_fn`).
///
/// # Safety
/// `callback` is NULL or a function of the `ry_log_fn` signature that is
/// safe to call from any thread with `user`, until this function is
/// called again.
#[no_mangle]
pub unsafe extern "C" fn ry_set_log_callback(
    level: u32,
    callback: ry_log_fn,
    user: *mut c_void,
) -> RyStatus {
    guard(|| {
        if level > ry_log_level::Trace as u32 {
            return Err(Error::invalid(format_args!(
                "log level {level}: expected RY_LOG_LEVEL_OFF (0) ..= RY_LOG_LEVEL_TRACE (5)"
            )));
        }
        if IN_CALLBACK.with(Cell::get) {
            return Err(Error::invalid(
                "ry_set_log_callback called from inside the log callback",
            ));
        }
        INSTALL.call_once(|| {
            if tracing::subscriber::set_global_default(Callback).is_ok() {
                INSTALLED.store(1, Ordering::Release);
            }
        });
        if INSTALLED.load(Ordering::Acquire) == 0 {
            return Err(Error::new(
                RyStatus::LogUnavailable,
                "another tracing subscriber is already the process's global one",
            ));
        }
        let sink = callback.map(|f| Sink { f, user });
        let mut g = SINK.write().unwrap_or_else(|e| e.into_inner());
        *g = sink;
        let code = if sink.is_some() { level } else { 0 };
        LEVEL.store(code, Ordering::Release);
        drop(g);
        tracing::callsite::rebuild_interest_cache();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<(u32, String, String)>> = Mutex::new(Vec::new());

    unsafe extern "C" fn collect(
        level: u32,
        target: *const c_char,
        message: *const c_char,
        user: *mut c_void,
    ) {
        assert_eq!(user as usize, 42);
        let s = |p: *const c_char| {
            // SAFETY: NUL-terminated strings valid for the call (the contract).
            let c = unsafe { std::ffi::CStr::from_ptr(p) };
            c.to_string_lossy().into_owned()
        };
        SEEN.lock().unwrap().push((level, s(target), s(message)));
    }

    fn set(level: u32, cb: ry_log_fn) -> RyStatus {
        let user = if cb.is_some() { 42usize } else { 0 } as *mut c_void;
        // SAFETY: `collect` has the signature and is thread-safe (a mutex).
        unsafe { ry_set_log_callback(level, cb, user) }
    }

    #[test]
    fn events_reach_the_callback_at_their_level_and_clearing_stops_them() {
        assert_eq!(set(9, Some(collect)), RyStatus::InvalidArgument);
        assert_eq!(set(2, Some(collect)), RyStatus::Ok);
        tracing::warn!(target: "railyard::config", var = "MC_X", value = %"bad", "refused");
        tracing::info!(target: "railyard::handshake", "not at warn");
        assert_eq!(set(3, Some(collect)), RyStatus::Ok);
        tracing::info!(target: "railyard::handshake", peer = 7, "accepted");
        // NULL clears.
        assert_eq!(set(3, None), RyStatus::Ok);
        tracing::warn!(target: "railyard::config", "after clearing");
        let seen = SEEN.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                (
                    2,
                    "railyard::config".into(),
                    "refused var=MC_X value=bad".into()
                ),
                (3, "railyard::handshake".into(), "accepted peer=7".into()),
            ]
        );
    }
}
