//! The tracing gate shared by the fault matrix (`tests/rxe_faults.rs`)
//! and its two-guest scenario (`examples/fault_link_down.rs`, which
//! includes this file with `#[path]`): the real controller, plus a record
//! of what it saw, and names for what it recorded.

use railyard_core::classify::{wc, Effect};
use railyard_core::token::TokenRecord;
use railyard_verbs::engine::{CcGate, EngineConfig, GateDecision, GateStats, Health, PostGate};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Delegates everything to a [`CcGate`] and records every work-completion
/// status, every poller status of the control epoch, and every change of
/// (health, generation) of routes 0..8 and of the device.
pub struct Tracer {
    /// The real controller gate.
    pub inner: CcGate,
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
    /// A tracer around the controller `cfg` describes.
    pub fn new(cfg: &EngineConfig) -> Result<Self, railyard_core::cc::ConfigError> {
        let t = Self {
            inner: CcGate::new(&cfg.cc, cfg.max_endpoints)?,
            wc: Mutex::new(BTreeMap::new()),
            path: Mutex::new(Vec::new()),
            dev_path: Mutex::new(Vec::new()),
            stalled_epochs: AtomicU64::new(0),
            events: Mutex::new(Vec::new()),
        };
        t.note();
        Ok(t)
    }

    pub fn note(&self) {
        let mut p = self.path.lock().unwrap();
        for r in 0..8u32 {
            let Some(s) = self.inner.route_snapshot(r) else {
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
        if let Some(s) = self.inner.device_snapshot(0) {
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

impl PostGate for Tracer {
    fn admit(&self, rec: &mut TokenRecord, now_ns: u64) -> GateDecision {
        self.inner.admit(rec, now_ns)
    }
    fn release(&self, rec: &TokenRecord, wc_status: Option<u32>, now_ns: u64) {
        self.inner.release(rec, wc_status, now_ns);
        if let Some(s) = wc_status {
            *self.wc.lock().unwrap().entry(s).or_default() += 1;
            self.note();
        }
    }
    fn on_epoch(&self, now_ns: u64, poller: railyard_core::cc::PollerStatus) {
        if poller == railyard_core::cc::PollerStatus::Stalled {
            self.stalled_epochs.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.on_epoch(now_ns, poller);
        self.note();
    }
    fn event_feedback(&self, route: Option<u32>, effect: Effect) {
        self.events.lock().unwrap().push(effect);
        self.inner.event_feedback(route, effect);
        self.note();
    }
    fn observe(
        &self,
        rec: &TokenRecord,
        reason: railyard_core::evidence::Reason,
        now_ns: u64,
    ) -> railyard_core::evidence::Observation {
        self.inner.observe(rec, reason, now_ns)
    }
    fn new_generation(&self, route: u32) -> Option<u32> {
        let g = self.inner.new_generation(route);
        self.note();
        g
    }
    fn route_snapshot(&self, route: u32) -> Option<railyard_core::cc::DomainSnapshot> {
        self.inner.route_snapshot(route)
    }
    fn device_snapshot(&self, device: u16) -> Option<railyard_core::cc::DomainSnapshot> {
        self.inner.device_snapshot(device)
    }
    fn usable(&self, device: u16, route: u32) -> bool {
        self.inner.usable(device, route)
    }
    fn cc_stats(&self) -> Option<railyard_core::cc::CcStats> {
        self.inner.cc_stats()
    }
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }
    fn stats(&self) -> GateStats {
        self.inner.stats()
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
