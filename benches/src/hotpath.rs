//! The composed hot path (`completion::HotPath` with its layers) against the
//! same work composed by hand from the layers' own APIs, as integrators did
//! before the composition existed. Shared by the criterion bench
//! (`benches/hotpath.rs`) and the callgrind driver
//! (`examples/hotpath_icount.rs`), so both measure exactly the same code.
//!
//! One op = one slice: open the slice, admit and post it (token claimed),
//! complete it with `IBV_WC_SUCCESS` (classified, every hold released, the
//! slice settled). Two layer sets:
//!
//! * `enforce`: CC in enforce mode, rail and credit off (and the same op
//!   with CC off, observing, or not composed at all: `composed_off`,
//!   `composed_observe`, `composed_nocc`, what enforce costs per slice; by
//!   hand with no layer at all: `hand_nocc`);
//! * `all`: CC enforce + rail charge (2 devices, ledger off) + receiver
//!   credit (DATA_BYTES + REQUEST_SLOT; the control half refills the grant
//!   every [`REFILL_EVERY`] ops, identically for both arms).

use std::hint::black_box;

use railyard_core::cc::{Admission, CcConfig, Controller, Mode, Monitor};
use railyard_core::classify::{classify_wc, wc, wc_outcome, WcOutcome};
use railyard_core::completion::{
    CcLayer, CreditDemand, HotPath, Layers, Path, PostOrder, PostRequest, SliceEffect, TokenSource,
};
use railyard_core::credit::{
    Charge, CreditUpdate, EntryId, LedgerConfig, SenderControl, SenderLedger, SessionId, Totals,
};
use railyard_core::endpoint::{EndpointConfig, EndpointTable};
use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
use railyard_core::slice::{Outcome, SliceTable};
use railyard_core::token::{OptId, TokenCache, TokenPool, TokenRecord};

/// Slice bytes.
pub const BYTES: u32 = 64 * 1024;
/// Ops between two credit refills.
pub const REFILL_EVERY: u64 = 1024;
/// Requests per chain in the selective-signaling arm (one signaled: the
/// last, as `MC_SIGNAL_INTERVAL` >= 16 gives for chains of 16).
pub const CHAIN: usize = 16;
const SESSION: SessionId = SessionId(9);

/// What an integrator reads after a completion (the slice, the path, the
/// status, whether the slice settled, whether the endpoint drained), folded
/// so that both arms consume the same outputs the same way.
#[inline(always)]
fn use_completion(
    rec: &TokenRecord,
    status: u32,
    settled: bool,
    drained: Result<bool, railyard_core::endpoint::EndpointError>,
) -> u64 {
    u64::from(rec.slice.index)
        ^ u64::from(rec.device) << 32
        ^ u64::from(status) << 16
        ^ u64::from(settled) << 48
        ^ u64::from(drained == Ok(true)) << 49
}

/// The tables and layers, built once.
pub struct Fixture {
    /// Leaked once at construction, so a cache over it ([`Self::cache`])
    /// borrows nothing of the fixture.
    tokens: &'static TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    cc: Controller,
    _monitor: Monitor,
    /// The same controller shape in [`Mode::Off`] and [`Mode::Observe`].
    cc_off: Controller,
    _monitor_off: Monitor,
    cc_observe: Controller,
    _monitor_observe: Monitor,
    rails: Selector,
    ledger: SenderLedger,
    ctl: SenderControl,
    entry: EntryId,
    path: Path,
    seq: u64,
    granted: u64,
    ops: u64,
    order: PostOrder,
    pending: [u64; CHAIN],
    chained: usize,
}

impl Default for Fixture {
    fn default() -> Self {
        Self::new()
    }
}

impl Fixture {
    /// Builds everything (allocates here only).
    pub fn new() -> Self {
        let cfg = CcConfig {
            mode: Mode::Enforce,
            ..CcConfig::default()
        };
        let (cc, monitor) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
        let in_mode = |mode| Controller::new(&CcConfig { mode, ..cfg }, 2, &[0, 1]).unwrap();
        let (cc_off, monitor_off) = in_mode(Mode::Off);
        let (cc_observe, monitor_observe) = in_mode(Mode::Observe);
        let rails = Selector::new(
            &[DeviceSpec::new(100_000_000_000); 2],
            RailConfig::default(),
        )
        .unwrap();
        let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
        let path = Path {
            device: 1,
            qp: 0,
            route: 1,
            endpoint: eps.open(()).unwrap(),
        };
        let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
            max_peers: 1,
            max_classes: 1,
            window: [u32::MAX as u64, (1 << 20) - 1, 0, 0],
        })
        .unwrap();
        ctl.bind(&ledger, 0, SESSION, 1).unwrap();
        let entry = ledger.entry(0, 0).unwrap();
        let tokens: &'static TokenPool = Box::leak(Box::new(TokenPool::new(1024).unwrap()));
        let mut f = Fixture {
            tokens,
            slices: SliceTable::new(64).unwrap(),
            eps,
            cc,
            _monitor: monitor,
            cc_off,
            _monitor_off: monitor_off,
            cc_observe,
            _monitor_observe: monitor_observe,
            rails,
            ledger,
            ctl,
            entry,
            path,
            seq: 0,
            granted: 0,
            ops: 0,
            order: PostOrder::new(CHAIN).unwrap(),
            pending: [0; CHAIN],
            chained: 0,
        };
        f.refill();
        f
    }

    fn charge() -> Charge {
        Charge([u64::from(BYTES), 1, 0, 0])
    }

    /// Control half: drain the released credit and grant more.
    fn refill(&mut self) {
        self.granted += 2 * REFILL_EVERY;
        self.seq += 1;
        self.ctl.usage(&self.ledger, 0, 0, Charge::ZERO).unwrap();
        let u = CreditUpdate {
            receiver_session: SESSION,
            epoch: 1,
            sequence: self.seq,
            grants: Totals::from_charge(&Charge([
                self.granted * u64::from(BYTES),
                self.granted,
                0,
                0,
            ])),
            ..Default::default()
        };
        self.ctl.apply_update(&self.ledger, 0, &u, 0).unwrap();
    }

    #[inline]
    fn tick(&mut self) {
        self.ops += 1;
        if self.ops.is_multiple_of(REFILL_EVERY) {
            self.refill();
        }
    }

    /// One op through the composition, CC only.
    #[inline]
    pub fn composed_enforce(&mut self, now: u64) {
        self.enforce_via(&mut (), now)
    }

    /// A worker's token cache over the fixture's pool (the engine's size).
    pub fn cache(&self) -> TokenCache<'static, TokenRecord, 32> {
        self.tokens.cache()
    }

    /// [`composed_enforce`](Self::composed_enforce) claiming and completing
    /// through a worker's token cache.
    #[inline]
    pub fn composed_enforce_cached(
        &mut self,
        cache: &mut TokenCache<'static, TokenRecord, 32>,
        now: u64,
    ) {
        self.enforce_via(cache, now)
    }

    /// [`composed_enforce`](Self::composed_enforce) with the controller in
    /// [`Mode::Off`] (compiled in, switched off: the engine's
    /// `MC_ADAPTIVE_CC_MODE=off`).
    #[inline]
    pub fn composed_off(&mut self, now: u64) {
        self.cc_via(&self.cc_off, &mut (), now)
    }

    /// [`composed_enforce`](Self::composed_enforce) with the controller in
    /// [`Mode::Observe`].
    #[inline]
    pub fn composed_observe(&mut self, now: u64) {
        self.cc_via(&self.cc_observe, &mut (), now)
    }

    /// [`composed_enforce`](Self::composed_enforce) with no CC layer
    /// composed at all (`()`: the controller compiled out).
    #[inline]
    pub fn composed_nocc(&mut self, now: u64) {
        self.cc_via((), &mut (), now)
    }

    #[inline(always)]
    fn enforce_via<T: TokenSource>(&self, tokens: &mut T, now: u64) {
        self.cc_via(&self.cc, tokens, now)
    }

    #[inline(always)]
    fn cc_via<C: CcLayer, T: TokenSource>(&self, cc: C, tokens: &mut T, now: u64) {
        let owner = HotPath::new(self.tokens, &self.slices, &self.eps).with_layers(Layers {
            credit: (),
            rail: (),
            cc,
        });
        let s = self.slices.open(0).unwrap();
        let p = owner
            .post_via(tokens, PostRequest::on(s, self.path, black_box(BYTES), now))
            .unwrap();
        let d = owner
            .complete_via(
                tokens,
                black_box(p.wr_id),
                black_box(wc::SUCCESS),
                0,
                now + 1,
            )
            .unwrap();
        black_box(use_completion(
            &d.record,
            d.wc.status,
            matches!(d.slice, SliceEffect::Settled(_)),
            d.released.endpoint,
        ));
    }

    /// One op through the composition, CC only, selectively signaled:
    /// chains of [`CHAIN`] posts recorded in posting order, the last one's
    /// CQE covering the rest (`HotPath::complete_covered`), as the engine
    /// does with `MC_SIGNAL_INTERVAL` >= 16. Per slice, like the others
    /// (run it with N a multiple of [`CHAIN`]).
    #[inline]
    pub fn composed_enforce_covered(&mut self, now: u64) {
        self.chains(now, true)
    }

    /// [`composed_enforce_covered`](Self::composed_enforce_covered)'s
    /// baseline: the same chains of [`CHAIN`] in flight, every request
    /// completed by its own CQE.
    #[inline]
    pub fn composed_enforce_chain(&mut self, now: u64) {
        self.chains(now, false)
    }

    #[inline(always)]
    fn chains(&mut self, now: u64, covered: bool) {
        let owner = HotPath::new(self.tokens, &self.slices, &self.eps).with_layers(Layers {
            credit: (),
            rail: (),
            cc: &self.cc,
        });
        let k = self.chained;
        let s = self.slices.open(k as u32).unwrap();
        let p = owner
            .post(PostRequest::on(s, self.path, black_box(BYTES), now))
            .unwrap();
        self.pending[k] = p.wr_id;
        self.chained = (k + 1) % CHAIN;
        if self.chained != 0 {
            return;
        }
        if !covered {
            // The baseline: the same chains, every request signaled.
            for &w in &self.pending {
                let d = owner
                    .complete(black_box(w), black_box(wc::SUCCESS), 0, now + 1)
                    .unwrap();
                black_box(use_completion(
                    &d.record,
                    d.wc.status,
                    matches!(d.slice, SliceEffect::Settled(_)),
                    d.released.endpoint,
                ));
            }
            return;
        }
        assert!(self.order.record(&self.pending));
        let use_it = |d: &railyard_core::completion::Completed| {
            black_box(use_completion(
                &d.record,
                d.wc.status,
                matches!(d.slice, SliceEffect::Settled(_)),
                d.released.endpoint,
            ))
        };
        for w in self.order.covered_by(black_box(p.wr_id)) {
            use_it(
                &owner
                    .complete_covered(w, black_box(wc::SUCCESS), now + 1)
                    .unwrap(),
            );
        }
        use_it(
            &owner
                .complete(black_box(p.wr_id), black_box(wc::SUCCESS), 0, now + 1)
                .unwrap(),
        );
    }

    /// [`composed_nocc`](Self::composed_nocc)'s op composed by hand: the
    /// slice, the endpoint and the token, no policy layer (what the
    /// composition costs without any layer).
    #[inline]
    pub fn hand_nocc(&mut self, now: u64) {
        let s = self.slices.open(0).unwrap();
        assert!(self.slices.is_current(s));
        let mut rec = TokenRecord {
            slice: s,
            endpoint: self.path.endpoint,
            post_ns: now,
            bytes: black_box(BYTES),
            route: self.path.route,
            qp: self.path.qp,
            device: self.path.device,
            ..TokenRecord::default()
        };
        self.eps.admit_post(rec.endpoint, rec.qp).unwrap();
        rec.holds |= TokenRecord::HOLDS_OUTSTANDING;
        let wr = self.tokens.claim(rec).unwrap();
        let rec = self.tokens.complete(black_box(wr)).unwrap();
        let c = classify_wc(black_box(wc::SUCCESS), 0);
        let drained = self.eps.release_post(rec.endpoint, rec.qp);
        let out = match wc_outcome(&c) {
            WcOutcome::Success => Outcome::Success,
            _ => Outcome::Failure,
        };
        let settled = self.slices.settle(rec.slice, out);
        black_box(use_completion(&rec, c.status, settled.is_ok(), drained));
    }

    /// The same op composed by hand, CC only.
    #[inline]
    pub fn hand_enforce(&mut self, now: u64) {
        let s = self.slices.open(0).unwrap();
        // post
        assert!(self.slices.is_current(s));
        let mut rec = TokenRecord {
            slice: s,
            endpoint: self.path.endpoint,
            post_ns: now,
            bytes: black_box(BYTES),
            route: self.path.route,
            qp: self.path.qp,
            device: self.path.device,
            ..TokenRecord::default()
        };
        self.eps.admit_post(rec.endpoint, rec.qp).unwrap();
        rec.holds |= TokenRecord::HOLDS_OUTSTANDING;
        let Ok(Admission::Admit(permit)) =
            self.cc.try_acquire(rec.device, rec.route, rec.bytes, now)
        else {
            panic!("not admitted")
        };
        permit.record_into(&mut rec).unwrap();
        let wr = self.tokens.claim(rec).unwrap();
        // complete
        let mut rec = self.tokens.complete(black_box(wr)).unwrap();
        let c = classify_wc(black_box(wc::SUCCESS), 0);
        self.cc.release_record(&mut rec, c.effect).unwrap();
        let drained = self.eps.release_post(rec.endpoint, rec.qp);
        let out = match wc_outcome(&c) {
            WcOutcome::Success => Outcome::Success,
            _ => Outcome::Failure,
        };
        let settled = self.slices.settle(rec.slice, out);
        // What the caller goes on with (as the composition returns it).
        black_box(use_completion(&rec, c.status, settled.is_ok(), drained));
    }

    /// One op through the composition, every layer on.
    #[inline]
    pub fn composed_all(&mut self, now: u64) {
        self.all_via(&mut (), now);
        self.tick();
    }

    /// [`composed_all`](Self::composed_all) through a worker's token cache.
    #[inline]
    pub fn composed_all_cached(
        &mut self,
        cache: &mut TokenCache<'static, TokenRecord, 32>,
        now: u64,
    ) {
        self.all_via(cache, now);
        self.tick();
    }

    #[inline(always)]
    fn all_via<T: TokenSource>(&self, tokens: &mut T, now: u64) {
        let owner = HotPath::new(self.tokens, &self.slices, &self.eps).with_layers(Layers {
            credit: &self.ledger,
            rail: &self.rails,
            cc: &self.cc,
        });
        let demand = CreditDemand {
            entry: self.entry,
            charge: Self::charge(),
        };
        let s = self.slices.open(0).unwrap();
        let p = owner
            .post_via(
                tokens,
                PostRequest::on(s, self.path, black_box(BYTES), now)
                    .to_peer(0)
                    .with_credit(demand),
            )
            .unwrap();
        let d = owner
            .complete_via(
                tokens,
                black_box(p.wr_id),
                black_box(wc::SUCCESS),
                0,
                now + 1,
            )
            .unwrap();
        black_box(use_completion(
            &d.record,
            d.wc.status,
            matches!(d.slice, SliceEffect::Settled(_)),
            d.released.endpoint,
        ));
    }

    /// The same op composed by hand, every layer on.
    #[inline]
    pub fn hand_all(&mut self, now: u64) {
        let s = self.slices.open(0).unwrap();
        assert!(self.slices.is_current(s));
        let mut rec = TokenRecord {
            slice: s,
            endpoint: self.path.endpoint,
            post_ns: now,
            bytes: black_box(BYTES),
            route: self.path.route,
            peer: OptId::some(0),
            qp: self.path.qp,
            device: self.path.device,
            ..TokenRecord::default()
        };
        self.eps.admit_post(rec.endpoint, rec.qp).unwrap();
        rec.holds |= TokenRecord::HOLDS_OUTSTANDING;
        self.rails
            .charge(rec.device, rec.peer.get(), rec.bytes, now)
            .unwrap()
            .record_into(&mut rec);
        let Ok(Admission::Admit(permit)) =
            self.cc.try_acquire(rec.device, rec.route, rec.bytes, now)
        else {
            panic!("not admitted")
        };
        permit.record_into(&mut rec).unwrap();
        let r = self
            .ledger
            .try_reserve(self.entry, black_box(&Self::charge()))
            .unwrap();
        r.record_into(&mut rec).unwrap();
        let wr = self.tokens.claim(rec).unwrap();
        let _committed = r.commit().unwrap();
        // complete
        let mut rec = self.tokens.complete(black_box(wr)).unwrap();
        let c = classify_wc(black_box(wc::SUCCESS), 0);
        self.ledger.release_record(&mut rec).unwrap();
        self.cc.release_record(&mut rec, c.effect).unwrap();
        self.rails
            .release_record(&mut rec, c.status == wc::SUCCESS, now + 1)
            .unwrap();
        let drained = self.eps.release_post(rec.endpoint, rec.qp);
        let out = match wc_outcome(&c) {
            WcOutcome::Success => Outcome::Success,
            _ => Outcome::Failure,
        };
        let settled = self.slices.settle(rec.slice, out);
        black_box(use_completion(&rec, c.status, settled.is_ok(), drained));
        self.tick();
    }

    /// Nothing is held between ops.
    pub fn check_idle(&self) {
        assert_eq!(self.tokens.in_use(), 0);
        assert_eq!(self.eps.outstanding_total(), 0);
        assert_eq!(self.rails.nic_inflight(1), Some(0));
        assert_eq!(self.cc.route_snapshot(1).unwrap().in_flight, 0);
        assert_eq!(self.cc_observe.route_snapshot(1).unwrap().in_flight, 0);
        assert_eq!(self.cc_off.route_snapshot(1).unwrap().in_flight, 0);
    }

    /// Runs `n` ops of arm `which` (`hand_enforce`, `composed_enforce`,
    /// `composed_observe`, `composed_off`, `hand_nocc`, `composed_nocc`,
    /// `composed_enforce_chain`, `composed_enforce_covered`, `hand_all`,
    /// `composed_all`, and two arms through a worker's token cache:
    /// `composed_enforce_cached`, `composed_all_cached`).
    pub fn run(&mut self, which: &str, n: u64) {
        let f: fn(&mut Self, u64) = match which {
            "hand_enforce" => Self::hand_enforce,
            "hand_nocc" => Self::hand_nocc,
            "composed_enforce" => Self::composed_enforce,
            "composed_observe" => Self::composed_observe,
            "composed_off" => Self::composed_off,
            "composed_nocc" => Self::composed_nocc,
            "composed_enforce_covered" => Self::composed_enforce_covered,
            "composed_enforce_chain" => Self::composed_enforce_chain,
            "hand_all" => Self::hand_all,
            "composed_all" => Self::composed_all,
            "composed_enforce_cached" | "composed_all_cached" => {
                let mut cache = self.cache();
                let f: fn(&mut Self, &mut TokenCache<'static, TokenRecord, 32>, u64) =
                    if which == "composed_all_cached" {
                        Self::composed_all_cached
                    } else {
                        Self::composed_enforce_cached
                    };
                for i in 0..n {
                    f(self, &mut cache, i * 1000);
                }
                drop(cache);
                self.check_idle();
                return;
            }
            other => panic!("unknown arm {other}"),
        };
        for i in 0..n {
            f(self, i * 1000);
        }
        self.check_idle();
    }
}
