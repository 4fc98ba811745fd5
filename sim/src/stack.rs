//! The sender stack's policy layers and what the simulator observes of
//! them: one congestion controller (`core::cc`) and one rail selector
//! (`core::rail`) per sender host.
//!
//! The simulator's [`Sim`](crate::model::Sim) posts and completes every
//! work request through the composed hot path (`core::completion::HotPath`)
//! with these layers — the same composition, admission order and WC
//! mapping the engine and the C ABI use — and reports to the stack what
//! happened ([`Stack::on_posted`], [`Stack::on_refusal`],
//! [`Stack::on_completion`]); [`Stack::on_async_event`] /
//! [`Stack::on_epoch`] come from the "monitor".

use railyard_core::cc::{CcConfig, Controller, Health, Mode, Monitor, PollerStatus, Settlement};
use railyard_core::classify::{classify_event, FailureScope};
use railyard_core::completion::{Completed, Posted, Refusal};
use railyard_core::rail::{
    bandwidth_sample, ewma_step, sample_state, DeviceSpec, RailConfig, SampleState, Selector,
    TtlCalibrator,
};

use crate::report::Series;

/// Receiver-credit settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditConfig {
    /// Slots granted per lease (RFC 2849's "lease batch").
    pub lease_batch: u32,
}

/// The sender stack's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackConfig {
    /// Local dispatch window: WRs posted and not yet completed, per sender.
    pub window_ops: u32,
    /// Receiver credit, if on.
    pub credit: Option<CreditConfig>,
    /// The congestion controller's configuration (`mode: Off` = off).
    pub cc: CcConfig,
    /// The rail selector's configuration.
    pub rail: RailConfig,
    /// Measure RFC 4534 attribution error for `(device, peer)` of sender 0.
    pub attribution: Option<(u16, u32)>,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            window_ops: 2,
            credit: None,
            cc: CcConfig::default(),
            rail: RailConfig::default(),
            attribution: None,
        }
    }
}

/// A route health change seen by the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthChange {
    /// When, ns.
    pub at_ns: u64,
    /// Sender.
    pub sender: u32,
    /// Route (receiver × NICs + local NIC).
    pub route: u32,
    /// Previous state.
    pub from: Health,
    /// New state.
    pub to: Health,
}

/// What the stack observed.
#[derive(Clone, Debug, Default)]
pub struct StackReport {
    /// `(key, value)` observations, in a stable order.
    pub values: Vec<(String, f64)>,
    /// Every route health change, in order.
    pub timeline: Vec<HealthChange>,
}

impl StackReport {
    /// The value of `key`, 0 if absent.
    pub fn get(&self, key: &str) -> f64 {
        self.values
            .iter()
            .find(|(k, _)| k == key)
            .map_or(0.0, |(_, v)| *v)
    }
}

struct PerSender {
    cc: Controller,
    monitor: Monitor,
    rail: Selector,
    health: Vec<Health>,
}

/// Per-run stack state: one controller + monitor and one rail selector per
/// sender host.
pub struct Stack {
    nics: usize,
    routes: usize,
    senders: Vec<PerSender>,
    timeline: Vec<HealthChange>,
    defers: u64,
    avoids: u64,
    stale_settlements: u64,
    release_errors: u64,
    rail_fallbacks: u64,
    posts_on_quarantined: u64,
    calibrator: Option<Box<TtlCalibrator<65536>>>,
    attribution: Option<Attribution>,
}

/// RFC 4534 attribution error: the bandwidth estimate the selector's
/// variant uses for `peer` on `device`, against an oracle EWMA (same
/// alpha and clamps) of that peer's own completions on that device.
struct Attribution {
    device: u16,
    peer: u32,
    nominal: u64,
    oracle: u64,
    err_sum: f64,
    samples: u64,
    bytes_per_device: Vec<u64>,
}

impl Stack {
    /// Builds the stack `cfg` for `senders` senders with `nics` NICs each
    /// (every one at `line_rate` bytes/s) and `receivers` receivers (one
    /// route per receiver and NIC). [`Stack::new`] builds it for a
    /// [`SimConfig`](crate::model::SimConfig).
    pub fn build(
        cfg: &StackConfig,
        senders: usize,
        receivers: usize,
        nics: usize,
        line_rate: u64,
    ) -> Result<Stack, String> {
        let n = nics;
        let routes = receivers * n;
        let route_devices: Vec<u16> = (0..routes).map(|r| (r % n) as u16).collect();
        let specs = vec![DeviceSpec::new(line_rate); n];
        let mut sender_stacks = Vec::with_capacity(senders);
        for _ in 0..senders {
            let (cc, monitor) = Controller::new(&cfg.cc, n as u16, &route_devices)
                .map_err(|e| format!("cc config: {e}"))?;
            let rail = Selector::new(&specs, cfg.rail).map_err(|e| format!("rail config: {e}"))?;
            sender_stacks.push(PerSender {
                cc,
                monitor,
                rail,
                health: vec![Health::Healthy; routes],
            });
        }
        Ok(Stack {
            nics: n,
            routes,
            senders: sender_stacks,
            timeline: vec![],
            defers: 0,
            avoids: 0,
            stale_settlements: 0,
            release_errors: 0,
            rail_fallbacks: 0,
            posts_on_quarantined: 0,
            calibrator: cfg.rail.trace.then(|| Box::new(TtlCalibrator::new())),
            attribution: cfg.attribution.map(|(device, peer)| Attribution {
                device,
                peer,
                nominal: line_rate,
                oracle: 0,
                err_sum: 0.0,
                samples: 0,
                bytes_per_device: vec![0; n],
            }),
        })
    }

    /// The rail selector of `sender` (read-only views for the scenarios).
    pub fn selector(&self, sender: u32) -> &Selector {
        &self.senders[sender as usize].rail
    }

    /// The controller of `sender`.
    pub fn controller(&self, sender: u32) -> &Controller {
        &self.senders[sender as usize].cc
    }

    /// The time series the run samples: four from the fabric, then the
    /// stack's own (same order as [`Stack::sample`]).
    pub fn series_names(&self) -> Vec<Series> {
        let mk = |n: &str, u: &str| Series {
            name: n.into(),
            unit: u.into(),
            points: vec![],
        };
        vec![
            mk("in-flight", "MiB"),
            mk("receiver occupancy", "slots"),
            mk("switch queue (max port)", "MiB"),
            mk("receiver throughput", "GB/s"),
            mk("cc window, sender 0 route 0", "MiB"),
            mk("path state, sender 0 route 0", "0 H,1 C,2 S,3 Q,4 P"),
        ]
    }

    /// The layers of `sender`'s composed hot path: its controller and its
    /// rail selector.
    pub fn layers(&self, sender: u32) -> (&Controller, &Selector) {
        let s = &self.senders[sender as usize];
        (&s.cc, &s.rail)
    }

    /// A post of `sender` went through: counts the rail's fallback and
    /// feeds its decision trace to the TTL calibrator; candidates the
    /// composition dropped (quarantined) count as avoids; a post on a path
    /// quarantined at that moment is counted (in enforce mode the rail
    /// never chooses one while another is usable).
    pub fn on_posted(&mut self, sender: u32, p: &Posted) {
        self.avoids += u64::from(p.skipped);
        let cc = &self.senders[sender as usize].cc;
        let quarantined = |h: Option<railyard_core::cc::DomainSnapshot>| {
            h.is_some_and(|h| h.health == Health::Quarantined)
        };
        if quarantined(cc.route_snapshot(p.path.route))
            || quarantined(cc.device_snapshot(p.path.device))
        {
            self.posts_on_quarantined += 1;
        }
        if let Some(c) = p.rail {
            if c.fallback {
                self.rail_fallbacks += 1;
            }
            if let Some(cal) = self.calibrator.as_mut() {
                cal.observe(c.trace);
            }
        }
    }

    /// The composed hot path refused a post (it gave everything back).
    pub fn on_refusal(&mut self, r: &Refusal) {
        match r {
            Refusal::Deferred { .. } => self.defers += 1,
            Refusal::Avoided { .. } => self.avoids += 1,
            Refusal::Invalid(_) => self.release_errors += 1,
            _ => {}
        }
    }

    /// A completion the composed hot path processed: what its release
    /// settled (stale CC feedback, refused releases) and, for RFC 4534's
    /// attribution error, the oracle EWMA of the attributed peer.
    pub fn on_completion(&mut self, sender: u32, done: &Completed, now: u64) {
        let rec = &done.record;
        let ok = done.wc.status == railyard_core::classify::wc::SUCCESS;
        if let Some(a) = self.attribution.as_mut() {
            if sender == 0 && ok && rec.peer == Some(a.peer) {
                a.bytes_per_device[usize::from(rec.device)] += u64::from(rec.bytes);
            }
            if sender == 0 && ok && rec.device == a.device && rec.peer == Some(a.peer) {
                let rc = self.senders[0].rail.config();
                let sample =
                    bandwidth_sample(u64::from(rec.bytes), now.saturating_sub(rec.post_ns));
                a.oracle = ewma_step(
                    a.oracle,
                    sample,
                    rc.ewma_alpha_q16,
                    a.nominal,
                    rc.ewma_floor_q8,
                    rc.ewma_ceil_q8,
                );
            }
        }
        if done.released.cc() == Some(Settlement::Stale) {
            self.stale_settlements += 1;
        }
        self.release_errors += u64::from(done.faults().count());
        self.observe(sender, now);
    }

    /// An async event on a sender NIC (`route` for QP-scope events):
    /// classified, then applied at its scope and no wider.
    pub fn on_async_event(
        &mut self,
        sender: u32,
        nic: u16,
        route: Option<u32>,
        code: u32,
        now: u64,
    ) {
        let e = classify_event(code);
        let s = &self.senders[sender as usize];
        match e.scope {
            FailureScope::Qp | FailureScope::Cq | FailureScope::Route => {
                if let Some(r) = route {
                    let g = s.cc.route_generation(r).unwrap_or(0);
                    if s.cc.route_feedback(r, g, e.effect).is_err() {
                        self.release_errors += 1;
                    }
                }
            }
            FailureScope::Port => {
                for r in
                    (0..self.routes as u32).filter(|r| *r as usize % self.nics == usize::from(nic))
                {
                    let g = s.cc.route_generation(r).unwrap_or(0);
                    if s.cc.route_feedback(r, g, e.effect).is_err() {
                        self.release_errors += 1;
                    }
                }
            }
            FailureScope::Device => {
                if s.cc.quarantine_device(nic).is_err() {
                    self.release_errors += 1;
                }
            }
            FailureScope::None | FailureScope::Operation => {}
        }
        self.observe(sender, now);
    }

    /// The endpoint of `route` was rebuilt: a new route generation, so late
    /// completions of the old QP only settle accounting.
    pub fn on_reconnect(&mut self, sender: u32, route: u32, now: u64) {
        let _ = self.senders[sender as usize].cc.advance_generation(route);
        self.observe(sender, now);
    }

    /// One control epoch (monitor thread): AIMD, hysteresis, cooldown →
    /// probing; idle peer entries reclaimed.
    pub fn on_epoch(&mut self, now: u64) {
        for i in 0..self.senders.len() {
            let s = &mut self.senders[i];
            let _ = s.monitor.on_epoch(&s.cc, now, PollerStatus::Progressing);
            let _ = s.rail.reclaim_idle(now);
            self.observe(i as u32, now);
        }
        if let Some(a) = self.attribution.as_mut() {
            let sel = &self.senders[0].rail;
            let d = usize::from(a.device);
            let rc = sel.config();
            let peer = sel.peer_view(d, a.peer);
            // V2/V3 fall back to NIC feedback for the whole candidate set
            // when any candidate's peer sample is missing or expired.
            let fresh = (0..sel.len()).all(|k| {
                sample_state(sel.peer_view(k, a.peer).as_ref(), now, rc.peer_ttl_ns)
                    == SampleState::Fresh
            });
            let used = if rc.peer_accounting && rc.variant.uses_peer_feedback() && fresh {
                peer.map_or(0, |p| p.bw)
            } else {
                sel.nic_view(d).map_or(0, |v| v.bw)
            };
            if a.oracle > 0 {
                a.err_sum += (used as f64 - a.oracle as f64).abs() / a.oracle as f64;
                a.samples += 1;
            }
        }
    }

    fn observe(&mut self, sender: u32, now: u64) {
        let s = &mut self.senders[sender as usize];
        if s.cc.mode() == Mode::Off {
            return;
        }
        for r in 0..self.routes {
            let h =
                s.cc.route_snapshot(r as u32)
                    .map_or(Health::Healthy, |x| x.health);
            if h != s.health[r] {
                self.timeline.push(HealthChange {
                    at_ns: now,
                    sender,
                    route: r as u32,
                    from: s.health[r],
                    to: h,
                });
                s.health[r] = h;
            }
        }
    }

    /// The stack's series values (same order as its names).
    pub fn sample(&mut self, _now: u64) -> Vec<f64> {
        let s = &self.senders[0];
        let snap = s.cc.route_snapshot(0);
        let window = match (s.cc.mode(), snap) {
            (Mode::Off, _) | (_, None) => 0.0,
            (_, Some(x)) => x.window as f64 / f64::from(1u32 << 20),
        };
        let state = snap.map_or(0.0, |x| f64::from(x.health as u8));
        vec![window, state]
    }

    /// Bytes the stack still holds (cc in-flight in every device domain,
    /// rail in-flight on every NIC): must be 0 at the end.
    pub fn held(&self) -> u64 {
        let mut h = 0;
        for s in &self.senders {
            for d in 0..self.nics {
                h += s.cc.device_snapshot(d as u16).map_or(0, |x| x.in_flight);
                h += s.rail.nic_inflight(d).unwrap_or(0);
            }
            for r in 0..self.routes {
                h += s.cc.route_snapshot(r as u32).map_or(0, |x| x.in_flight);
            }
        }
        h
    }

    /// Final observations.
    pub fn report(&self) -> StackReport {
        let mut v: Vec<(String, f64)> = vec![];
        let mut illegal = 0;
        let mut stale = 0;
        let (mut decisions, mut probes, mut fallbacks, mut missing, mut expired, mut acct) =
            (0, 0, 0, 0, 0, 0);
        for s in &self.senders {
            let st = s.cc.stats();
            illegal += st.illegal_transitions;
            stale += st.stale_feedback;
            let rc = s.rail.counters();
            decisions += rc.decisions;
            probes += rc.probes;
            fallbacks += rc.fallbacks;
            missing += rc.missing_samples;
            expired += rc.expired_samples;
            acct += rc.peer_accounting_errors + rc.nic_accounting_errors;
        }
        for (k, x) in [
            ("illegal_transitions", illegal),
            ("cc_stale_feedback", stale),
            ("cc_defers", self.defers),
            ("cc_avoids", self.avoids),
            ("posts_on_quarantined", self.posts_on_quarantined),
            ("stale_settlements", self.stale_settlements),
            ("release_errors", self.release_errors),
            ("rail_decisions", decisions),
            ("rail_probes", probes),
            ("rail_fallbacks", fallbacks),
            ("rail_missing_samples", missing),
            ("rail_expired_samples", expired),
            ("rail_accounting_errors", acct),
        ] {
            v.push((k.into(), x as f64));
        }
        if let Some(a) = &self.attribution {
            v.push((
                "attribution_error".into(),
                a.err_sum / a.samples.max(1) as f64,
            ));
            v.push(("attribution_samples".into(), a.samples as f64));
            let total: u64 = a.bytes_per_device.iter().sum();
            v.push((
                "a_nic1_share".into(),
                a.bytes_per_device[usize::from(a.device)] as f64 / total.max(1) as f64,
            ));
        }
        if let Some(c) = &self.calibrator {
            let mut c = c.clone();
            v.push((
                "calibrated_ttl_ns".into(),
                c.ttl_ns().map_or(-1.0, |t| t as f64),
            ));
            v.push(("calibration_cold".into(), c.cold() as f64));
        }
        if let Some(s) = self.senders.first() {
            for d in 0..self.nics {
                let h = s.cc.device_snapshot(d as u16).map_or(0, |x| x.health as u8);
                v.push((format!("sender0_device{d}_health"), f64::from(h)));
            }
            if let Some(b) = s.monitor.route_base_drain_ns(0) {
                v.push(("sender0_route0_base_drain_us".into(), b as f64 / 1e3));
            }
        }
        StackReport {
            values: v,
            timeline: self.timeline.clone(),
        }
    }
}
