//! Observability, off the per-WR path: the control-path log lines that
//! need more than their call site knows (a retire with its segment, rail
//! and route; the CC health watch), and the one-call stats snapshot
//! ([`EngineSnapshot`]: [`EngineStats`] plus every route's CC state).
//!
//! Logging goes through the `tracing` crate, with these targets (filter
//! them with e.g. `RUST_LOG=railyard=info` under the CLI, or
//! `ry_set_log_callback` from C):
//!
//! | target | what | levels |
//! |---|---|---|
//! | `railyard::handshake` | passive handshakes accepted / refused (typed reason), segments opened | info, warn |
//! | `railyard::endpoint` | endpoints opened, retired (with the error completion's classification), force-flushed, reclaimed, abandoned | debug, info, warn |
//! | `railyard::qp` | QP state changes (RESET → INIT → RTR → RTS, → ERR) | debug |
//! | `railyard::reconnect` | reconnect started / done / failed | info, warn |
//! | `railyard::cc` | route and device health changes (quarantine, probing, recovery), controller left off; per control epoch, each domain holding bytes: window, in flight, base drain (`CcGate::on_epoch`) | info, warn; trace |
//! | `railyard::event` | async events and where they landed | info, warn |
//! | `railyard::config` | configuration values refused | warn |
//!
//! Nothing is logged per work request or per completion: a retire logs
//! once per endpoint (the first error completion retires it; the flushes
//! after it find it retired), and the health watch samples the controller
//! once per monitor tick.

use super::error::EngineError;
use super::shared::Shared;
use super::stats::EngineStats;
use super::types::{SegmentId, MAX_RAILS};
use railyard_core::cc::{DrainSignal, Health};
use railyard_core::endpoint::{EndpointHandle, RetireReason};
use std::collections::HashMap;

/// One CC route domain's state (local device × peer NIC), as
/// [`Engine::snapshot`](super::Engine::snapshot) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RouteState {
    /// The route domain's index.
    pub route: u32,
    /// Its local device (rail).
    pub device: u16,
    /// Health state.
    #[cfg_attr(feature = "serde", serde(serialize_with = "health_name"))]
    pub health: Health,
    /// Route generation (advanced by every reconnect).
    pub generation: u32,
    /// Hard errors counted towards the quarantine threshold.
    pub errors: u16,
    /// Byte window.
    pub window_bytes: u64,
    /// Bytes in flight on the route.
    pub in_flight_bytes: u64,
    /// What drain-time pressure does on the route: its device's signal
    /// (advisory on software providers by default: observed, never
    /// shrinking the window).
    #[cfg_attr(feature = "serde", serde(serialize_with = "drain_signal_name"))]
    pub drain_signal: DrainSignal,
}

#[cfg(feature = "serde")]
fn health_name<S: serde::Serializer>(h: &Health, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{h:?}"))
}

#[cfg(feature = "serde")]
fn drain_signal_name<S: serde::Serializer>(d: &DrainSignal, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(d.as_str())
}

#[cfg(feature = "serde")]
impl EngineStats {
    /// Every counter as a flat `(name, value)` list, in declaration order:
    /// a nested struct's fields are named `outer_inner` (`gate_admitted`,
    /// `handshakes_busy`), arrays stay lists (`rail_slices_posted`), values
    /// are JSON numbers, booleans and lists. It is derived from the struct
    /// itself (`serde`), so it is the one field list every other view of
    /// the stats follows: the C `ry_engine_stats`, the Python
    /// `Engine.stats()` dict and its stub (railyard-ffi's tests fail when
    /// one of them lacks a field).
    ///
    /// ```
    /// use railyard_verbs::engine::EngineStats;
    /// let mut s = EngineStats::default();
    /// s.gate.admitted = 3;
    /// let f = s.fields();
    /// assert_eq!(f[0].0, "tokens_in_use");
    /// assert!(f.iter().any(|(k, v)| k == "gate_admitted" && *v == 3));
    /// assert!(f.iter().any(|(k, v)| k == "rail_slices_posted" && v.is_array()));
    /// ```
    pub fn fields(&self) -> Vec<(String, serde_json::Value)> {
        fn flatten(prefix: &str, v: serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        let name = if prefix.is_empty() {
                            k
                        } else {
                            format!("{prefix}_{k}")
                        };
                        flatten(&name, v, out);
                    }
                }
                v => out.push((prefix.to_owned(), v)),
            }
        }
        let mut out = Vec::new();
        // Plain integers, booleans and arrays of them: serializing cannot fail.
        let v = serde_json::to_value(self).unwrap_or_default();
        flatten("", v, &mut out);
        out
    }
}

/// Everything a host exports about an engine, in one call
/// ([`Engine::snapshot`](super::Engine::snapshot)): the counters and leak
/// gauges, and the CC state of every route domain the engine assigned
/// (empty without a controller compiled in).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EngineSnapshot {
    /// [`Engine::stats`](super::Engine::stats).
    pub stats: EngineStats,
    /// Every assigned route, by route index.
    pub routes: Vec<RouteState>,
}

/// The CC state of every assigned route.
pub(crate) fn route_states(sh: &Shared) -> Vec<RouteState> {
    sh.registry
        .assigned_routes()
        .into_iter()
        .filter_map(|(route, device)| {
            let s = sh.gate.route_snapshot(route)?;
            Some(RouteState {
                route,
                device,
                health: s.health,
                generation: s.generation,
                errors: s.errors,
                window_bytes: s.window,
                in_flight_bytes: s.in_flight,
                drain_signal: sh.gate.drain_signal(device).unwrap_or_default(),
            })
        })
        .collect()
}

/// Logs how a reconnect of `seg` ended.
pub(crate) fn log_reconnect(sh: &Shared, seg: usize, r: &Result<u32, EngineError>) {
    match r {
        Ok(generation) => tracing::info!(target: "railyard::reconnect", segment = seg,
            endpoint_generation = generation, rails = sh.registry.segment_rails(SegmentId(seg as u32)).unwrap_or(0),
            "reconnect done"),
        Err(e) => tracing::warn!(target: "railyard::reconnect", segment = seg,
            reason = %e, "reconnect failed"),
    }
}

/// The stats snapshot ([`EngineStats`]).
pub(crate) fn stats(sh: &Shared) -> EngineStats {
    let mut s = EngineStats {
        tokens_in_use: sh.tokens.in_use() as u64,
        tokens_cached: (sh.tokens.capacity() - sh.tokens.in_use())
            .saturating_sub(sh.tokens.free_in_pool()) as u64,
        endpoint_outstanding: sh.endpoints.outstanding_total(),
        qp_depth: sh.endpoints.qp_depth_total(),
        cq_outstanding: sh.fabric.cq_outstanding(),
        slices_pending: sh.tables.slices.pending() as u64,
        endpoints_live: sh.endpoints.live() as u64,
        gate: sh.gate.stats(),
        rails: sh.fabric.devs.len() as u16,
        mem_regions: sh.mem.count(),
        mem_pins: sh.mem.pins_total(),
        ..EngineStats::default()
    };
    for d in 0..sh.fabric.devs.len().min(MAX_RAILS) {
        s.rail_charged_bytes[d] = sh.rails.nic_inflight(d).unwrap_or(0);
    }
    let rc = sh.rails.counters();
    s.rail_accounting_errors = rc.nic_accounting_errors + rc.peer_accounting_errors;
    sh.telemetry.add_to(&mut s, |w| {
        sh.fabric
            .post_shard(w)
            .map(|shard| sh.fabric.topo.device_of(shard))
    });
    s
}

/// [`EngineSnapshot`]: stats and route states.
pub(crate) fn snapshot(sh: &Shared) -> EngineSnapshot {
    EngineSnapshot {
        stats: stats(sh),
        routes: route_states(sh),
    }
}

/// Logs that `h` was retired for `reason`, with its segment, device and
/// route (looked up without waiting: a caller holding the segment lock
/// gets the line without them). Warn for faults, info for teardown.
pub(crate) fn log_retired(sh: &Shared, h: EndpointHandle, reason: RetireReason) {
    let rail = sh.registry.rail_of(h);
    let (segment, device, route) = match rail {
        Some((s, d, r)) => (Some(s), Some(d), Some(r)),
        None => (None, None, None),
    };
    let (slot, generation) = (h.slot, h.generation);
    if matches!(
        reason,
        RetireReason::Shutdown | RetireReason::PassiveHandshakeStale
    ) {
        tracing::info!(target: "railyard::endpoint", slot, generation, ?segment, ?device,
            ?route, ?reason, "endpoint retired");
    } else {
        tracing::warn!(target: "railyard::endpoint", slot, generation, ?segment, ?device,
            ?route, ?reason, "endpoint retired");
    }
}

/// The monitor's CC health watch: compares every route's and device's
/// health with the previous tick and logs each change (the controller
/// changes state on the data path too; the watch reports it from the
/// control side, at most once per state per tick). A state that came and
/// went between two ticks is not seen.
#[derive(Default)]
pub(crate) struct HealthWatch {
    routes: HashMap<u32, (Health, u32)>,
    devices: Vec<Health>,
}

impl HealthWatch {
    /// One tick: log the changes since the last one.
    pub(crate) fn tick(&mut self, sh: &Shared) {
        for s in route_states(sh) {
            let now = (s.health, s.generation);
            let before = self.routes.insert(s.route, now);
            let from = before.map_or(Health::Healthy, |b| b.0);
            if from != s.health {
                log_health("route", Some(s.route), s.device, from, &s);
            }
        }
        let n = sh.fabric.devs.len();
        self.devices.resize(n, Health::Healthy);
        for d in 0..n {
            let Some(snap) = sh.gate.device_snapshot(d as u16) else {
                continue;
            };
            let from = std::mem::replace(&mut self.devices[d], snap.health);
            if from != snap.health {
                let s = RouteState {
                    route: u32::MAX,
                    device: d as u16,
                    health: snap.health,
                    generation: snap.generation,
                    errors: snap.errors,
                    window_bytes: snap.window,
                    in_flight_bytes: snap.in_flight,
                    drain_signal: sh.gate.drain_signal(d as u16).unwrap_or_default(),
                };
                log_health("device", None, d as u16, from, &s);
            }
        }
    }
}

fn log_health(domain: &str, route: Option<u32>, device: u16, from: Health, s: &RouteState) {
    let to = s.health;
    let (generation, errors, window, in_flight) =
        (s.generation, s.errors, s.window_bytes, s.in_flight_bytes);
    if to == Health::Quarantined {
        tracing::warn!(target: "railyard::cc", domain, ?route, device, ?from, ?to, generation,
            errors, window, in_flight, "quarantined");
    } else {
        tracing::info!(target: "railyard::cc", domain, ?route, device, ?from, ?to, generation,
            errors, window, in_flight, "health changed");
    }
}
