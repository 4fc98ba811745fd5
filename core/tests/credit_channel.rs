//! A fake bounded control channel with loss, delay, duplication, reordering
//! and disconnect, between one receiver and three senders, driven by
//! arbitrary proptest schedules. Two properties are checked after every
//! step, against occupancy the test tracks on its own:
//!
//! 1. the receiver's physically occupied resources (reserved + dispatched and
//!    not yet freed, across all senders and epochs) never exceed capacity —
//!    and, stronger, occupied + free never exceeds capacity (no occupied unit
//!    is ever handed out again, e.g. by fencing too early);
//! 2. no sender dispatches without its full charge: every dispatch went
//!    through a successful reserve that took exactly the charge from every
//!    resource at once, and was committed.
#![cfg(feature = "alloc")]
use proptest::prelude::*;
use railyard_core::credit::*;
use railyard_core::wire::credit::{self as wire, CreditUpdateV1, CreditUsageV1, Message};

const SENDERS: usize = 3;
const CAPACITY: [u64; 4] = [64 * 1024, 8, 4, 6];
const QUEUE: usize = 4;
const RX: SessionId = SessionId::new(1, 0xFEED);

#[derive(Clone, Debug)]
enum Op {
    Dispatch {
        s: usize,
        staged: bool,
        kib: u32,
    },
    Complete {
        pick: usize,
    },
    Consume {
        pick: usize,
    },
    Grant {
        s: usize,
        add: [u64; 4],
    },
    Report {
        s: usize,
    },
    Return {
        s: usize,
    },
    Deliver {
        to_sender: bool,
        s: usize,
        pick: usize,
        dup: bool,
    },
    Lose {
        to_sender: bool,
        s: usize,
        pick: usize,
    },
    Disconnect {
        s: usize,
    },
    RestartSender {
        s: usize,
    },
    FenceComplete {
        s: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let s = 0..SENDERS;
    prop_oneof![
        4 => (s.clone(), any::<bool>(), 1u32..24).prop_map(|(s, staged, kib)| Op::Dispatch { s, staged, kib }),
        3 => any::<usize>().prop_map(|pick| Op::Complete { pick }),
        3 => any::<usize>().prop_map(|pick| Op::Consume { pick }),
        3 => (s.clone(), (0u64..20_000, 0u64..4, 0u64..3, 0u64..3)).prop_map(|(s, (a, b, c, d))| Op::Grant { s, add: [a, b, c, d] }),
        2 => s.clone().prop_map(|s| Op::Report { s }),
        1 => s.clone().prop_map(|s| Op::Return { s }),
        6 => (any::<bool>(), s.clone(), any::<usize>(), any::<bool>()).prop_map(|(to_sender, s, pick, dup)| Op::Deliver { to_sender, s, pick, dup }),
        1 => (any::<bool>(), s.clone(), any::<usize>()).prop_map(|(to_sender, s, pick)| Op::Lose { to_sender, s, pick }),
        1 => s.clone().prop_map(|s| Op::Disconnect { s }),
        1 => s.clone().prop_map(|s| Op::RestartSender { s }),
        1 => s.prop_map(|s| Op::FenceComplete { s }),
    ]
}

struct Payload {
    s: usize,
    epoch: u64,
    charge: Charge,
    /// Held until the completion releases it (exactly once).
    committed: Option<CommittedCharge>,
    landed: bool,
    /// The sender process that dispatched it restarted: nobody releases it.
    orphan: bool,
}

struct Sender {
    ledger: SenderLedger,
    ctl: SenderControl,
    link: CreditLink,
}

struct World {
    alloc: ReceiverAllocator,
    senders: Vec<Sender>,
    to_sender: Vec<Vec<Vec<u8>>>,
    to_receiver: Vec<Vec<Vec<u8>>>,
    payloads: Vec<Payload>,
    occupancy: [u64; 4],
    dispatched: u64,
    commits: u64,
}

fn sender() -> Sender {
    let (ledger, ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 1,
        max_classes: 1,
        window: [1 << 20, 15, 7, 7],
    })
    .unwrap();
    let mut link = CreditLink::new(CreditMode::Required);
    link.on(LinkEvent::Start).unwrap();
    link.on(LinkEvent::PeerCompatible(1)).unwrap();
    Sender { ledger, ctl, link }
}

impl World {
    fn new() -> World {
        let mut alloc =
            ReceiverAllocator::new(AllocatorConfig::new(RX, SENDERS as u32, 1, CAPACITY)).unwrap();
        let mut senders = vec![];
        for s in 0..SENDERS {
            let e = alloc.open(s as u32).unwrap();
            let mut x = sender();
            x.ctl.bind(&x.ledger, 0, RX, e).unwrap();
            senders.push(x);
        }
        World {
            alloc,
            senders,
            to_sender: vec![vec![]; SENDERS],
            to_receiver: vec![vec![]; SENDERS],
            payloads: vec![],
            occupancy: [0; 4],
            dispatched: 0,
            commits: 0,
        }
    }

    fn send(q: &mut Vec<Vec<u8>>, m: &Message) {
        if q.len() >= QUEUE {
            return; // bounded channel: overflow is loss
        }
        let mut buf = [0u8; wire::MAX_MESSAGE_LEN];
        let n = wire::encode(m, &mut buf).unwrap();
        q.push(buf[..n].to_vec());
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Dispatch { s, staged, kib } => {
                let x = &self.senders[s];
                let charge = if staged {
                    Charge::staged_write(kib * 1024)
                } else {
                    Charge::direct_write(kib * 1024)
                };
                if x.link.gate() != Gate::Reserve {
                    // Required mode: nothing dispatches on a non-active link.
                    assert!(matches!(
                        x.link.gate(),
                        Gate::Block {
                            fallback_allowed: false
                        } | Gate::Fail
                    ));
                }
                let e = x.ledger.entry(0, 0).unwrap();
                let (before, _) = x.ledger.available(e).unwrap();
                let Ok(r) = x.ledger.try_reserve(e, &charge) else {
                    assert_eq!(
                        x.ledger.available(e).unwrap().0,
                        before,
                        "failed reserve took credit"
                    );
                    return;
                };
                let (after, _) = x.ledger.available(e).unwrap();
                for k in 0..4 {
                    assert_eq!(
                        before.0[k] - after.0[k],
                        charge.0[k],
                        "reserve did not take the full charge"
                    );
                }
                let c = r.commit().expect("single-threaded commit");
                assert_eq!(c.charge(), charge);
                self.commits += 1;
                self.dispatched += 1;
                for k in 0..4 {
                    self.occupancy[k] += charge.0[k];
                }
                let epoch = x.ctl.binding(0).unwrap().1;
                self.payloads.push(Payload {
                    s,
                    epoch,
                    charge: c.charge(),
                    committed: Some(c),
                    landed: false,
                    orphan: false,
                });
            }
            Op::Complete { pick } => {
                let flying: Vec<usize> = (0..self.payloads.len())
                    .filter(|&i| !self.payloads[i].landed)
                    .collect();
                if flying.is_empty() {
                    return;
                }
                let i = flying[pick % flying.len()];
                let p = &mut self.payloads[i];
                p.landed = true;
                let c = p.committed.take().expect("a payload completes once");
                if !p.orphan {
                    let x = &self.senders[p.s];
                    x.ledger.release(c).expect("honest release refused");
                }
                let ch = p.charge;
                // Bytes and request slots are free once the WRITE completes.
                self.occupancy[0] -= ch.0[0];
                self.occupancy[1] -= ch.0[1];
            }
            Op::Consume { pick } => {
                let landed: Vec<usize> = (0..self.payloads.len())
                    .filter(|&i| self.payloads[i].landed)
                    .collect();
                if landed.is_empty() {
                    return;
                }
                let i = landed[pick % landed.len()];
                let p = self.payloads.swap_remove(i);
                let ch = p.charge;
                let local = Charge([0, 0, ch.0[2], ch.0[3]]);
                if Some(p.epoch) == self.alloc.epoch(p.s as u32) {
                    self.alloc
                        .consumed(p.s as u32, 0, &local)
                        .expect("consumption of a current-epoch payload");
                }
                self.occupancy[2] -= ch.0[2];
                self.occupancy[3] -= ch.0[3];
            }
            Op::Grant { s, add } => {
                if let Ok(u) = self.alloc.grant(s as u32, 0, &Charge(add)) {
                    Self::send(
                        &mut self.to_sender[s],
                        &Message::CreditUpdate(CreditUpdateV1::from_update(&u)),
                    );
                }
            }
            Op::Report { s } => {
                let x = &mut self.senders[s];
                if let Ok(u) = x.ctl.usage(&x.ledger, 0, 0, Charge::ZERO) {
                    Self::send(
                        &mut self.to_receiver[s],
                        &Message::CreditUsage(CreditUsageV1::from_usage(&u)),
                    );
                }
            }
            Op::Return { s } => {
                let x = &mut self.senders[s];
                x.ctl
                    .return_unused(&x.ledger, 0, 0, Charge([4096, 1, 1, 1]))
                    .unwrap();
                if let Ok(u) = x.ctl.usage(&x.ledger, 0, 0, Charge::ZERO) {
                    Self::send(
                        &mut self.to_receiver[s],
                        &Message::CreditUsage(CreditUsageV1::from_usage(&u)),
                    );
                }
            }
            Op::Deliver {
                to_sender,
                s,
                pick,
                dup,
            } => {
                let q = if to_sender {
                    &mut self.to_sender[s]
                } else {
                    &mut self.to_receiver[s]
                };
                if q.is_empty() {
                    return;
                }
                let i = pick % q.len();
                let bytes = if dup { q[i].clone() } else { q.remove(i) };
                match wire::decode(&bytes).expect("channel carries valid frames") {
                    Message::CreditUpdate(u) => {
                        let u = u.to_update();
                        let x = &mut self.senders[s];
                        let mut res = x.ctl.apply_update(&x.ledger, 0, &u, 0);
                        if let Err(UpdateError::EpochMismatch { ours, theirs }) = res {
                            if theirs > ours {
                                // The receiver moved to a new epoch: fence, then apply.
                                x.ctl
                                    .bind(&x.ledger, 0, u.receiver_session, theirs)
                                    .unwrap();
                                let _ = x.link.on(LinkEvent::NewSessionOrEpoch);
                                res = x.ctl.apply_update(&x.ledger, 0, &u, 0);
                                if res.is_ok() {
                                    let _ = x.link.on(LinkEvent::Fenced);
                                }
                            }
                        }
                        match res {
                            Ok(_) => {
                                let _ = x.link.on(LinkEvent::UpdateAccepted);
                            }
                            Err(e) => assert!(!e.is_protocol_error(), "honest receiver caused {e}"),
                        }
                    }
                    Message::CreditUsage(u) => {
                        let r = self.alloc.on_usage(s as u32, &u.to_usage());
                        assert!(
                            !matches!(r, Err(AllocError::Violation(_) | AllocError::Decreasing(_))),
                            "honest sender caused {r:?}"
                        );
                    }
                    m => panic!("unexpected {m:?}"),
                }
            }
            Op::Lose { to_sender, s, pick } => {
                let q = if to_sender {
                    &mut self.to_sender[s]
                } else {
                    &mut self.to_receiver[s]
                };
                if !q.is_empty() {
                    let i = pick % q.len();
                    q.remove(i);
                }
            }
            Op::Disconnect { s } => {
                self.to_sender[s].clear();
                self.to_receiver[s].clear();
                let x = &mut self.senders[s];
                x.ctl.mark_stale(&x.ledger, 0).unwrap();
                let _ = x.link.on(LinkEvent::StaleOrDisconnect);
            }
            Op::RestartSender { s } => {
                // The sender process restarts: fresh ledger; its old payloads
                // are still physically in flight. The receiver opens a new epoch.
                let e = self.alloc.open(s as u32).unwrap();
                self.to_sender[s].clear();
                self.to_receiver[s].clear();
                let mut x = sender();
                x.ctl.bind(&x.ledger, 0, RX, e).unwrap();
                self.senders[s] = x;
                // Old payloads still land, but the process that would have
                // released them is gone.
                for p in self.payloads.iter_mut().filter(|p| p.s == s) {
                    p.orphan = true;
                }
            }
            Op::FenceComplete { s } => {
                let epoch = self.alloc.epoch(s as u32).unwrap();
                // Only once the old epochs' work is drained (here: consumed).
                if self.payloads.iter().any(|p| p.s == s && p.epoch < epoch) {
                    return;
                }
                let _ = self.alloc.fence_complete(s as u32, epoch - 1);
            }
        }
        self.check();
    }

    fn check(&self) {
        let free = self.alloc.free();
        for k in 0..4 {
            // Every physically occupied unit is accounted as not free.
            assert!(
                self.occupancy[k] + free[k] <= CAPACITY[k],
                "resource {k}: occupancy {} + free {} > capacity {}",
                self.occupancy[k],
                free[k],
                CAPACITY[k]
            );
            assert!(
                self.occupancy[k] <= CAPACITY[k],
                "resource {k}: occupancy {} > capacity {}",
                self.occupancy[k],
                CAPACITY[k]
            );
        }
        assert!(
            self.alloc.conserved(),
            "free + outstanding + fencing != capacity"
        );
        assert_eq!(self.dispatched, self.commits);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn reservations_never_exceed_capacity_over_any_schedule(ops in proptest::collection::vec(op(), 1..300)) {
        let mut w = World::new();
        for op in &ops {
            w.step(op);
        }
    }
}

/// A schedule that exercises everything at least once, so a regression in
/// the harness itself (e.g. nothing ever dispatching) is caught.
#[test]
fn scripted_schedule_dispatches_and_recovers() {
    let mut w = World::new();
    w.step(&Op::Grant {
        s: 0,
        add: [16384, 2, 1, 2],
    });
    w.step(&Op::Deliver {
        to_sender: true,
        s: 0,
        pick: 0,
        dup: true,
    });
    w.step(&Op::Deliver {
        to_sender: true,
        s: 0,
        pick: 0,
        dup: false,
    });
    w.step(&Op::Dispatch {
        s: 0,
        staged: true,
        kib: 8,
    });
    w.step(&Op::Dispatch {
        s: 0,
        staged: false,
        kib: 8,
    });
    w.step(&Op::Dispatch {
        s: 0,
        staged: false,
        kib: 1,
    });
    assert_eq!(w.dispatched, 2);
    w.step(&Op::Disconnect { s: 0 });
    w.step(&Op::Complete { pick: 0 });
    w.step(&Op::RestartSender { s: 0 });
    w.step(&Op::FenceComplete { s: 0 });
    assert_eq!(w.alloc.metrics().fencing, [16384, 2, 1, 2]);
    w.step(&Op::Complete { pick: 0 });
    w.step(&Op::Consume { pick: 0 });
    w.step(&Op::Consume { pick: 0 });
    w.step(&Op::FenceComplete { s: 0 });
    assert_eq!(w.alloc.free(), CAPACITY);
    assert_eq!(w.occupancy, [0; 4]);
}
