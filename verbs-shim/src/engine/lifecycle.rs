//! The engine's run state ([`Lifecycle`]): whether it posts, drains
//! (shutdown: queued slices are canceled) or stops (every thread ends), and
//! the automatic reconnect threads it joins at shutdown.

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The engine's run state (see the module docs).
#[derive(Default)]
pub(crate) struct Lifecycle {
    /// Workers, monitor and event thread stop.
    pub(crate) stop: AtomicBool,
    /// Posting stops (shutdown drain): queued slices are canceled.
    pub(crate) draining: AtomicBool,
    /// Automatic reconnect threads (joined at shutdown).
    reconnect_threads: Mutex<Vec<JoinHandle<()>>>,
    /// Serializes reconnects.
    reconnect_lock: Mutex<()>,
}

impl Lifecycle {
    /// Forgets the reconnect threads that finished and keeps `t`, if given,
    /// to be joined at shutdown.
    pub(crate) fn keep_reconnect(&self, t: Option<JoinHandle<()>>) {
        let mut threads = self
            .reconnect_threads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        threads.retain(|t| !t.is_finished());
        threads.extend(t);
    }

    /// Every reconnect thread kept so far, to join (shutdown).
    pub(crate) fn take_reconnects(&self) -> Vec<JoinHandle<()>> {
        self.reconnect_threads
            .lock()
            .map(|mut v| v.drain(..).collect())
            .unwrap_or_default()
    }

    /// Held for the whole of one reconnect: reconnects are serialized, so
    /// no new endpoint is ever orphaned.
    pub(crate) fn one_reconnect(&self) -> MutexGuard<'_, ()> {
        self.reconnect_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}
