//! The CC tracer shared by the fault matrix (`tests/rxe_faults.rs`) and
//! its two-guest scenario (`examples/fault_link_down.rs`, which includes
//! this file with `#[path]`): hooked into the engine's controller through
//! the `fault-injection` trace hook, it records what the controller saw,
//! and names for what it recorded.

use railyard_core::cc::PollerStatus;
use railyard_core::classify::{wc, Effect};
use railyard_verbs::engine::{CcGate, Engine, Health, TraceEvent};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Records every work-completion status, every poller status of the
/// control epoch, every event / timeout feedback, and every change of
/// (health, generation) of routes 0..8 and of device 0, as the engine's
/// controller processes them.
#[derive(Default)]
pub struct Tracer {
    /// Completions seen, per WC status.
    pub wc: Mutex<BTreeMap<u32, u64>>,
    path: Mutex<Vec<(u32, Health, u32)>>,
    dev_path: Mutex<Vec<(Health, u32)>>,
    /// Control epochs that saw the pollers stalled.
    pub stalled_epochs: AtomicU64,
    /// Event feedback effects, in order.
    pub events: Mutex<Vec<Effect>>,
}

/// The route id [`Tracer::route_path`] uses for device 0's domain.
pub const DEV: u32 = u32::MAX;

impl Tracer {
    /// A tracer hooked into `engine`'s controller (before any traffic).
    pub fn install(engine: &Engine) -> Arc<Self> {
        let t = Arc::new(Tracer::default());
        let t2 = t.clone();
        assert!(
            engine.fault_trace_cc(move |cc, ev| t2.on(cc, ev)),
            "a CC trace hook was already installed"
        );
        t
    }

    fn on(&self, cc: &CcGate, ev: TraceEvent) {
        match ev {
            TraceEvent::Completion(s) => *self.wc.lock().unwrap().entry(s).or_default() += 1,
            TraceEvent::Epoch(p) => {
                if p == PollerStatus::Stalled {
                    self.stalled_epochs.fetch_add(1, Ordering::Relaxed);
                }
            }
            TraceEvent::Feedback(_, effect) => self.events.lock().unwrap().push(effect),
            TraceEvent::NewGeneration(_) => {}
        }
        self.note(cc);
    }

    fn note(&self, cc: &CcGate) {
        let mut p = self.path.lock().unwrap();
        for r in 0..8u32 {
            let Some(s) = cc.route_snapshot(r) else {
                continue;
            };
            let last = p
                .iter()
                .rev()
                .find(|(x, _, _)| *x == r)
                .map(|&(_, h, g)| (h, g));
            if last != Some((s.health, s.generation)) {
                p.push((r, s.health, s.generation));
            }
        }
        if let Some(s) = cc.device_snapshot(0) {
            let mut d = self.dev_path.lock().unwrap();
            if d.last() != Some(&(s.health, s.generation)) {
                d.push((s.health, s.generation));
            }
        }
    }

    pub fn wc_count(&self, status: u32) -> u64 {
        self.wc.lock().unwrap().get(&status).copied().unwrap_or(0)
    }

    pub fn errors_seen(&self) -> Vec<(u32, u64)> {
        self.wc
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| **s != wc::SUCCESS)
            .map(|(s, n)| (*s, *n))
            .collect()
    }

    /// (health, generation) of `route` (or of device 0, [`DEV`]) each time
    /// it changed; the first entry is the state at the first trace event.
    pub fn route_path(&self, route: u32) -> Vec<(Health, u32)> {
        if route == DEV {
            return self.dev_path.lock().unwrap().clone();
        }
        self.path
            .lock()
            .unwrap()
            .iter()
            .filter(|(r, _, _)| *r == route)
            .map(|&(_, h, g)| (h, g))
            .collect()
    }

    pub fn path_str(&self, route: u32) -> String {
        self.route_path(route)
            .iter()
            .map(|(h, g)| format!("{}@g{g}", health_name(*h)))
            .collect::<Vec<_>>()
            .join(">")
    }
}

pub fn health_name(h: Health) -> &'static str {
    match h {
        Health::Healthy => "HEALTHY",
        Health::Congested => "CONGESTED",
        Health::Suspect => "SUSPECT",
        Health::Quarantined => "QUARANTINED",
        Health::Probing => "PROBING",
    }
}

pub fn wc_name(s: u32) -> String {
    let n = match s {
        wc::SUCCESS => "SUCCESS",
        wc::LOC_LEN_ERR => "LOC_LEN_ERR",
        wc::LOC_QP_OP_ERR => "LOC_QP_OP_ERR",
        wc::LOC_PROT_ERR => "LOC_PROT_ERR",
        wc::WR_FLUSH_ERR => "WR_FLUSH_ERR",
        wc::LOC_ACCESS_ERR => "LOC_ACCESS_ERR",
        wc::REM_INV_REQ_ERR => "REM_INV_REQ_ERR",
        wc::REM_ACCESS_ERR => "REM_ACCESS_ERR",
        wc::REM_OP_ERR => "REM_OP_ERR",
        wc::RETRY_EXC_ERR => "RETRY_EXC_ERR",
        wc::RNR_RETRY_EXC_ERR => "RNR_RETRY_EXC_ERR",
        wc::FATAL_ERR => "FATAL_ERR",
        wc::GENERAL_ERR => "GENERAL_ERR",
        _ => return format!("status{s}"),
    };
    n.to_owned()
}

pub fn wcs_str(v: &[(u32, u64)]) -> String {
    if v.is_empty() {
        return "none".into();
    }
    v.iter()
        .map(|(s, n)| format!("{}x{n}", wc_name(*s)))
        .collect::<Vec<_>>()
        .join(",")
}
