//! The engine's control threads, off the per-WR path: the monitor (the CC
//! control epoch, reclaim, forced flush, task timeouts), one async-event
//! thread per device (events land at their classified scope:
//! [`event_targets`]) and the handshake listener. [`spawn_all`] starts
//! them with the workers (`worker.rs`, which post and poll).

use super::config::MONITOR_TICK;
use super::connect::{accept_peer, retire};
use super::fault::TraceEvent;
use super::observe::HealthWatch;
use super::reclaim;
use super::shared::Shared;
use super::worker;
use crate::handshake::{serve, ListenLimits};
use crate::wire::PeerDescriptor;
use railyard_core::cc::PollerStatus;
use railyard_core::classify::{
    classify_event, event_action, EventAction, EventClassification, FailureScope,
};
use railyard_core::endpoint::{EndpointHandle, RetireReason};
use railyard_core::evidence::{Observation, Observed};
use railyard_core::slice::Outcome;
use railyard_core::token::TokenRecord;
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Starts the workers, the monitor, the async-event thread and the
/// listener. If a thread cannot be spawned, the ones already running are
/// stopped and joined, and the OS error is returned.
pub(crate) fn spawn_all(
    sh: &Arc<Shared>,
    listener: TcpListener,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let mut v: Vec<JoinHandle<()>> = Vec::new();
    let r = (|| {
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name).spawn(f)
        };
        for w in 0..sh.telemetry.workers.len() {
            let s = sh.clone();
            v.push(spawn(
                format!("railyard-w{w}"),
                Box::new(move || worker::worker(&s, w)),
            )?);
        }
        sh.fabric
            .set_workers(v.iter().map(|h| h.thread().clone()).collect());
        let s = sh.clone();
        v.push(spawn(
            "railyard-monitor".into(),
            Box::new(move || monitor(&s)),
        )?);
        for d in 0..sh.fabric.devs.len() {
            let s = sh.clone();
            v.push(spawn(
                format!("railyard-async{d}"),
                Box::new(move || async_events(&s, d)),
            )?);
        }
        if sh.credit.is_some() {
            let s = sh.clone();
            v.push(spawn(
                "railyard-credit".into(),
                Box::new(move || credit_loop(&s)),
            )?);
        }
        let s = sh.clone();
        v.push(spawn(
            "railyard-listen".into(),
            Box::new(move || listen(&s, listener)),
        )?);
        Ok(())
    })();
    match r {
        Ok(()) => Ok(v),
        Err(e) => {
            sh.lifecycle.stop.store(true, Ordering::Release);
            sh.fabric.wake_all();
            for t in v {
                let _ = t.join();
            }
            Err(e)
        }
    }
}

/// Moves every live endpoint's QPs to ERR (shutdown).
pub(crate) fn flush_all(sh: &Shared) {
    let local = sh.endpoints.register();
    let guard = local.pin();
    for h in sh.registry.qp_endpoints() {
        reclaim::flush_endpoint(sh, h, &guard);
    }
}

/// Reclaim, forced flush and task timeouts, every [`MONITOR_TICK`].
fn monitor(sh: &Shared) {
    let local = sh.endpoints.register();
    let mut tick = 0u64;
    let mut last_polls = u64::MAX;
    let mut health = HealthWatch::default();
    while !sh.lifecycle.stop.load(Ordering::Acquire) {
        let now = sh.now();
        // The CC control epoch: the pollers stalled if work was on a CQ and
        // no poller ran a round since the last epoch.
        let polls = sh.telemetry.polls();
        let outstanding = sh.fabric.cqs.iter().any(|q| q.outstanding() > 0);
        let poller = if outstanding && polls == last_polls {
            PollerStatus::Stalled
        } else {
            PollerStatus::Progressing
        };
        last_polls = polls;
        sh.gate.on_epoch(now, poller);
        sh.fault.trace(&sh.gate, TraceEvent::Epoch(poller));
        health.tick(sh);
        reclaim::reclaim_pass(sh, now, &local.pin());
        if tick % 4 == 0 {
            expire_tasks(sh, now, poller);
        }
        tick += 1;
        std::thread::sleep(MONITOR_TICK);
    }
}

/// The receiver-credit control thread: one [`EngineCredit::tick`] every
/// quarter refresh (200 µs ..= 2 ms) until the engine stops; the slices
/// parked on a peer whose credit changed are offered again.
///
/// [`EngineCredit::tick`]: super::credit::EngineCredit::tick
fn credit_loop(sh: &Shared) {
    let Some(c) = sh.credit.as_ref() else { return };
    let nap = (c.cfg.refresh / 4).clamp(Duration::from_micros(200), Duration::from_millis(2));
    let drain = 2 * sh.cfg.drain_timeout.as_nanos() as u64;
    while !sh.lifecycle.stop.load(Ordering::Acquire) {
        let changed = c.tick(sh.now(), sh.cfg.slice_size, drain, |eps| sh.any_active(eps));
        for seg in changed {
            sh.fabric.credit_changed(seg);
        }
        std::thread::sleep(nap);
    }
}

/// Where one async event lands (RFC 4162, async-event matrix): the
/// endpoints to retire (through the one retire API) and the controller
/// feedback, at the classified scope and no wider.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct EventTargets {
    /// Endpoints to retire.
    pub(crate) retire: Vec<EndpointHandle>,
    /// Routes that get the event's effect (route feedback).
    pub(crate) routes: Vec<u32>,
    /// The device gets the event's effect (device feedback).
    pub(crate) device: bool,
}

/// One live rail endpoint as the event mapping sees it: (device, handle,
/// route, shard of each QP).
pub(crate) type RailEp = (u16, EndpointHandle, u32, Vec<u16>);

/// Maps an event on device `dev` to its targets. `qp_ep` is the endpoint of
/// the event's QP (if it names one of ours); `cq_shard` the shard whose CQ
/// the event names (if it names one of ours); `eps` every live rail
/// endpoint.
///
/// * QP / route scope: the QP's endpoint; feedback to its route.
/// * CQ scope: every endpoint with a QP on that CQ (all of them use the
///   CQ's shard), feedback to each of their routes (immediately fatal
///   route evidence); QPs on other CQs and other devices are untouched. A
///   CQ the engine does not know (or an event without one) falls back to
///   the device's endpoints, with no controller feedback.
/// * port / device scope: every endpoint on `dev`; device feedback.
/// * `EventAction::RetireAll` of a non-failure event (GID change): every
///   endpoint on `dev`, no feedback.
pub(crate) fn event_targets(
    dev: u16,
    scope: FailureScope,
    action: EventAction,
    qp_ep: Option<EndpointHandle>,
    cq_shard: Option<usize>,
    eps: &[RailEp],
) -> EventTargets {
    let mut t = EventTargets::default();
    let on_dev = || eps.iter().filter(|e| e.0 == dev);
    match scope {
        FailureScope::Qp | FailureScope::Route => {
            if let Some(h) = qp_ep {
                if let Some(e) = eps.iter().find(|e| e.1 == h) {
                    t.routes.push(e.2);
                }
            }
        }
        FailureScope::Cq => {
            if let Some(s) = cq_shard {
                for e in on_dev().filter(|e| e.3.iter().any(|&q| usize::from(q) == s)) {
                    t.retire.push(e.1);
                    if !t.routes.contains(&e.2) {
                        t.routes.push(e.2);
                    }
                }
                return t;
            }
        }
        FailureScope::Port | FailureScope::Device => t.device = true,
        FailureScope::Operation | FailureScope::None => {}
    }
    match action {
        EventAction::Ignore => {}
        EventAction::RetireQp(_) => t.retire.extend(qp_ep),
        EventAction::RetireAll(_) => t.retire.extend(on_dev().map(|e| e.1)),
    }
    t
}

/// Reads device `dev`'s `ibv_get_async_event` (non-blocking fd + poll with
/// a timeout, so it stops within 50 ms), retires the affected endpoints
/// through the one retire API and feeds the controller, at the scope
/// [`event_targets`] gives.
fn async_events(sh: &Shared, dev: usize) {
    while !sh.lifecycle.stop.load(Ordering::Acquire) {
        let ev = match sh.fabric.devs[dev].ctx.next_async_event(50) {
            Ok(Some(ev)) => ev,
            Ok(None) => continue,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        handle_async_event(sh, dev, ev.event_type, ev.qp_num, ev.cq);
    }
}

/// Handles one async event of device `dev`: controller feedback and
/// retire at the classified scope ([`event_targets`]). Also the path of
/// scripted events (`Engine::fault_async_event`).
pub(crate) fn handle_async_event(
    sh: &Shared,
    dev: usize,
    event_type: u32,
    qp_num: Option<u32>,
    cq: Option<crate::verbs::CqId>,
) {
    let d16 = dev as u16;
    sh.telemetry.async_events.fetch_add(1, Ordering::Relaxed);
    let qp_ep = qp_num.and_then(|q| sh.registry.endpoint_of_qpn(d16, q));
    let cq_shard = cq.and_then(|id| sh.fabric.cq_shard(dev, id));
    let k = classify_event(event_type);
    let action = event_action(event_type);
    let reason = match action {
        EventAction::RetireQp(r) | EventAction::RetireAll(r) => r,
        EventAction::Ignore => RetireReason::ContextFatal,
    };
    let t = event_targets(
        d16,
        k.scope,
        action,
        qp_ep,
        cq_shard,
        &sh.registry.rail_endpoints(),
    );
    if t == EventTargets::default() {
        tracing::info!(target: "railyard::event", device = dev, event_type, ?qp_num,
            scope = ?k.scope, effect = ?k.effect, "async event: nothing to retire");
    } else {
        tracing::warn!(target: "railyard::event", device = dev, event_type, ?qp_num,
            scope = ?k.scope, effect = ?k.effect, retire = t.retire.len(),
            routes = ?t.routes, device_feedback = t.device, "async event");
    }
    // The controller side is core's (`Controller::apply_event`), once per
    // target route; the engine opens one port per device (rail), so a port
    // event reaches that device's domain, as a device event does.
    for &r in &t.routes {
        let _ = sh.gate.apply_event(&k, d16, Some(r));
        sh.fault
            .trace(&sh.gate, TraceEvent::Feedback(Some(r), k.effect));
    }
    if t.device {
        let at_device = EventClassification {
            scope: FailureScope::Device,
            ..k
        };
        let _ = sh.gate.apply_event(&at_device, d16, None);
        sh.fault
            .trace(&sh.gate, TraceEvent::Feedback(None, k.effect));
    }
    for h in t.retire {
        retire(sh, h, reason);
    }
}

/// Accepts peers' handshakes (the passive side of `open_segment`): each
/// on its own thread, at most `max_handshakes` at once, each bounded by
/// `handshake_timeout` from accept to barrier; every connection is counted
/// in [`EngineStats::handshakes`](super::stats::EngineStats::handshakes).
fn listen(sh: &Shared, listener: TcpListener) {
    let limits = ListenLimits {
        max_concurrent: usize::from(sh.cfg.max_handshakes),
        deadline: sh.cfg.handshake_timeout,
    };
    serve(
        &listener,
        &limits,
        &sh.lifecycle.stop,
        |peer: PeerDescriptor, hs| {
            let from = hs.stream().peer_addr().ok();
            let peer_nics = peer.nics.len();
            let r = accept_peer(sh, peer, hs);
            match &r {
                Ok(()) => tracing::info!(target: "railyard::handshake", peer = ?from, peer_nics,
                    "handshake accepted"),
                Err(e) => tracing::warn!(target: "railyard::handshake", peer = ?from,
                    reason = %e, "handshake refused"),
            }
            sh.telemetry.handshakes.finished(&r)
        },
        // `serve` logs these with the peer's address.
        |r| sh.telemetry.handshakes.refused(&r),
    );
}

/// Times out tasks past their deadline (monitor thread), RFC 4162's
/// non-WC signal table: a deadline on an attempt that was posted is a
/// software completion timeout. One software route timeout per
/// timed-out task and route goes to the controller, which counts it at
/// its next control epoch as a route hard error, or suppresses it if
/// the pollers stalled in that epoch ([`GateStats::route_timeouts`] /
/// [`GateStats::suppressed_timeouts`]). The task evidence follows the
/// monitor's poller status at expiry: pollers progressing →
/// `ROUTE_TIMEOUT` (scope QP; task CONGESTED before quarantine);
/// stalled → `POLLER_STALL` (task UNKNOWN: the network is not blamed
/// for CPU scheduling). A slice that never got a token (still queued)
/// is no route evidence: if the task has no evidence at all, it gets
/// `POLLER_STALL` (UNKNOWN: the deadline passed in local scheduling),
/// never NORMAL; otherwise what held it (a deferral, a quarantine) is
/// already recorded and stands.
pub(crate) fn expire_tasks(sh: &Shared, now: u64, poller: railyard_core::cc::PollerStatus) {
    use railyard_core::classify::{classify_signal, Signal};
    let sig = classify_signal(match poller {
        railyard_core::cc::PollerStatus::Stalled => Signal::DeadlinePollerStalled,
        _ => Signal::DeadlinePollerProgressing,
    });
    let stall = classify_signal(Signal::DeadlinePollerStalled);
    let mut fed: Vec<(u32, u32)> = Vec::new();
    sh.tables.settle_where(
        &sh.mem,
        Outcome::TimedOut,
        |_, t| now > t.deadline_ns.load(Ordering::Relaxed),
        |r| {
            let m = &sh.tables.meta[r.index as usize];
            if m.posted.load(Ordering::Acquire) != r.attempt {
                if sh.tables.task_of(r.index).anomalies.load(Ordering::Acquire) == 0 {
                    let mut o = Observation::new(stall.reason, now);
                    o.scope = Observed::Value(stall.scope);
                    sh.tables.note(r, o);
                }
                return;
            }
            let rec = TokenRecord {
                slice: r,
                route: m.route.load(Ordering::Relaxed),
                device: m.dev.load(Ordering::Relaxed) as u16,
                peer: Some(m.segment.load(Ordering::Relaxed)).into(),
                bytes: m.len.load(Ordering::Relaxed),
                ..TokenRecord::default()
            };
            let mut o = sh.gate.observe(&rec, sig.reason, now);
            o.scope = Observed::Value(sig.scope);
            sh.tables.note(r, o);
            let key = (m.task.load(Ordering::Relaxed), rec.route);
            if !fed.contains(&key) {
                fed.push(key);
            }
        },
    );
    for (_, route) in fed {
        sh.gate
            .event_feedback(Some(route), railyard_core::classify::Effect::Timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::{EVENT_CQ_ERR, EVENT_DEVICE_FATAL, EVENT_PORT_ERR, EVENT_QP_FATAL};

    fn h(slot: u32) -> EndpointHandle {
        EndpointHandle {
            slot,
            generation: 1,
        }
    }

    /// Device 0 has shards 0 and 1, device 1 shards 2 and 3. Endpoint 1
    /// (route 10) uses shards 0+1, endpoint 2 (route 11) shard 1 only,
    /// endpoint 3 (route 12) shard 0 only, endpoint 4 (route 20) is on
    /// device 1.
    fn eps() -> Vec<RailEp> {
        vec![
            (0, h(1), 10, vec![0, 1]),
            (0, h(2), 11, vec![1, 1]),
            (0, h(3), 12, vec![0, 0]),
            (1, h(4), 20, vec![2, 3]),
        ]
    }

    fn targets(ev: u32, qp: Option<EndpointHandle>, cq: Option<usize>, dev: u16) -> EventTargets {
        event_targets(
            dev,
            classify_event(ev).scope,
            event_action(ev),
            qp,
            cq,
            &eps(),
        )
    }

    /// The engine's event constants through core's mapping: every row
    /// lands at its scope.
    #[test]
    fn every_event_row_lands_at_its_scope() {
        use crate::verbs::*;
        use railyard_core::classify::Effect;
        let all = EventAction::RetireAll(RetireReason::ContextFatal);
        assert_eq!(event_action(EVENT_DEVICE_FATAL), all);
        assert_eq!(event_action(EVENT_CQ_ERR), all);
        assert_eq!(event_action(EVENT_PORT_ERR), all);
        assert_eq!(
            event_action(7),
            EventAction::RetireQp(RetireReason::QpFatal)
        ); // PATH_MIG_ERR
        assert_eq!(
            event_action(EVENT_QP_FATAL),
            EventAction::RetireQp(RetireReason::QpFatal)
        );
        assert_eq!(event_action(4), EventAction::Ignore); // COMM_EST
        assert_eq!(event_action(12345), EventAction::Ignore); // unknown
        assert_eq!(event_action(EVENT_PORT_ACTIVE), EventAction::Ignore);
        assert_eq!(
            event_action(EVENT_GID_CHANGE),
            EventAction::RetireAll(RetireReason::GidChange)
        );
        assert_eq!(classify_event(EVENT_PORT_ERR).effect, Effect::Quarantine);
    }

    #[test]
    fn cq_error_isolates_only_the_qps_on_that_cq() {
        // CQ of shard 1: endpoints 1 and 2 use it; 3 (shard 0) and 4
        // (another device) do not.
        let t = targets(EVENT_CQ_ERR, None, Some(1), 0);
        assert_eq!(t.retire, vec![h(1), h(2)]);
        assert_eq!(t.routes, vec![10, 11]);
        assert!(!t.device);
        // Fatal route evidence (RFC 4162: "immediately fatal evidence for
        // the route").
        assert_eq!(
            classify_event(EVENT_CQ_ERR).effect,
            railyard_core::classify::Effect::Quarantine
        );
        // A CQ the engine does not know: the device's endpoints, no
        // controller feedback.
        let t = targets(EVENT_CQ_ERR, None, None, 0);
        assert_eq!(t.retire, vec![h(1), h(2), h(3)]);
        assert!(t.routes.is_empty() && !t.device);
    }

    #[test]
    fn qp_port_and_device_events_keep_their_scope() {
        let t = targets(EVENT_QP_FATAL, Some(h(3)), None, 0);
        assert_eq!(t.retire, vec![h(3)]);
        assert_eq!(t.routes, vec![12]);
        assert!(!t.device);
        // A QP event for a QP the engine does not know: nothing.
        assert_eq!(
            targets(EVENT_QP_FATAL, None, None, 0),
            EventTargets::default()
        );
        // Port / device: every endpoint of that device only, device feedback.
        for ev in [EVENT_PORT_ERR, EVENT_DEVICE_FATAL] {
            let t = targets(ev, None, None, 1);
            assert_eq!(t.retire, vec![h(4)]);
            assert!(t.device && t.routes.is_empty());
        }
        // Unknown events change nothing.
        assert_eq!(targets(12345, None, None, 0), EventTargets::default());
    }
}
