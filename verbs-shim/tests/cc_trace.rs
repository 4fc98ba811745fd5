//! `railyard::cc` TRACE lines from [`CcGate::on_epoch`]: one per active
//! domain per epoch, nothing below TRACE.
//!
//! This is its own test binary on purpose, with one test: tracing caches
//! each callsite's `Interest` globally. When another test thread hits a
//! callsite for the first time (`on_epoch`'s `enabled!` is hit by every
//! engine test) while this test's scoped subscriber is being installed, the
//! other thread can store "never" for that callsite after this thread's
//! rebuild, and every later event there is lost (seen in CI: the first epoch
//! logged, the second did not). In a process of its own nothing races.
#![cfg(feature = "adaptive-cc")]

use std::sync::{Arc, Mutex};

use railyard_core::cc::{CcConfig, Mode, PollerStatus};
use railyard_core::classify::classify_wc;
use railyard_core::completion::CcLayer;
use railyard_core::slice::SliceRef;
use railyard_core::token::TokenRecord;
use railyard_verbs::engine::CcGate;

/// A `MakeWriter` that appends formatted lines to a shared buffer.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Two epochs under a fresh subscriber at `level`; what it printed.
fn two_epochs(level: tracing::Level, g: &CcGate) -> String {
    let buf = Buf::default();
    let w = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    tracing::subscriber::with_default(sub, || {
        g.on_epoch(1_000_000, PollerStatus::Progressing);
        g.on_epoch(2_000_000, PollerStatus::Progressing);
    });
    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    out
}

#[test]
fn trace_level_logs_each_active_domain_per_epoch_and_nothing_below_it() {
    let cfg = CcConfig {
        mode: Mode::Enforce,
        min_window_bytes: 256 * 1024,
        max_window_bytes: 1 << 20,
        ..CcConfig::default()
    };
    let g = CcGate::new(&cfg, 4).unwrap();
    let mut r = TokenRecord {
        slice: SliceRef {
            index: 0,
            attempt: 1,
        },
        route: 2,
        bytes: 65536,
        ..TokenRecord::default()
    };
    assert_eq!(CcLayer::acquire(&g, &mut r, 1), Ok(()));
    let out = two_epochs(tracing::Level::TRACE, &g);
    let epochs: Vec<&str> = out.lines().filter(|l| l.contains(" epoch ")).collect();
    // Route 2 and device 0 hold the slice; routes 0, 1, 3 are idle.
    assert_eq!(epochs.len(), 4, "{out}");
    assert_eq!(
        epochs.iter().filter(|l| l.contains("route=2 ")).count(),
        2,
        "{out}"
    );
    assert_eq!(
        epochs.iter().filter(|l| l.contains("device=0 ")).count(),
        2,
        "{out}"
    );
    assert!(
        epochs.iter().all(|l| l.contains("in_flight=65536")),
        "{out}"
    );
    assert!(
        epochs
            .iter()
            .all(|l| l.contains("drain_signal=\"enforce\"") || l.contains("drain_signal=enforce")),
        "{out}"
    );
    assert!(epochs.iter().all(|l| l.contains("pressured=")), "{out}");
    assert!(!two_epochs(tracing::Level::DEBUG, &g).contains(" epoch "));
    let effect = classify_wc(0, 0).effect;
    assert!(CcLayer::release(&g, &mut r, effect).is_ok());
    assert!(
        !two_epochs(tracing::Level::TRACE, &g).contains(" epoch "),
        "idle domains are not logged"
    );
}
