//! Receiver-advertised credit (RFC 2849) through the real `core::credit`:
//! one [`SenderLedger`] + [`SenderControl`] per sender, one
//! [`ReceiverAllocator`] per receiver, messages carried by the fabric's
//! control channel (2 hops, lossless).
//!
//! * Negotiation at start: the receiver `open`s each sender (epoch 1), the
//!   sender `bind`s to the receiver's session and epoch.
//! * Dispatch: the composed hot path (`core::completion`) reserves
//!   `Charge::direct_write(bytes)` in the sender's ledger after rail and CC
//!   admitted the slice, names it in the token record and commits it once
//!   the token is claimed. Short of credit (typed backpressure): the slice
//!   stays queued and the sender sends its demand ([`CreditPlane::stalled`]).
//! * The receiver grants lease batches (`lease_batch` × the charge of one
//!   WR, less if less is free) round robin over demanding senders with
//!   `ReceiverAllocator::grant`; the sender applies the cumulative update
//!   with `SenderControl::apply_update`.
//! * Resources: DATA_BYTES and CONSUMER_SLOTS return to the receiver's
//!   free pool when its consumer has consumed the WR
//!   (`ReceiverAllocator::consumed`, [`ReturnPath::ReceiverConsumption`]):
//!   that is the receiver capacity the RFC's incast bounds. REQUEST_SLOTS
//!   return through the sender's completion (released by the hot path)
//!   reported in usage (`SenderControl::usage` → `ReceiverAllocator::on_usage`,
//!   sent once per control epoch when something changed).
//! * At the end every sender returns its unused credit
//!   (`SenderControl::return_unused` → usage → `on_usage`), after which the
//!   allocator must be whole: `free == capacity` and `conserved()`.

use std::collections::VecDeque;

use railyard_core::credit::{
    AllocatorConfig, Charge, CommittedCharge, CreditUpdate, CreditUsage, LedgerConfig,
    ReceiverAllocator, ReleaseOutcome, Resource, ReturnPath, SenderControl, SenderLedger,
    SessionId, RESOURCES,
};
use railyard_core::token::TokenRecord;

/// Capacity of one receiver.
#[derive(Clone, Copy, Debug)]
pub struct RxCapacity {
    /// Receive buffer bytes (DATA_BYTES).
    pub bytes: u64,
    /// Consumer slots (CONSUMER_SLOTS).
    pub slots: u64,
    /// Request slots (REQUEST_SLOTS).
    pub request_slots: u64,
}

struct SenderSide {
    ledger: SenderLedger,
    control: SenderControl,
    demand_sent: Vec<bool>,
    dirty: Vec<bool>,
}

struct ReceiverSide {
    alloc: ReceiverAllocator,
    demand: VecDeque<u32>,
    unit_bytes: u64,
}

/// Counters of the credit plane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditCounters {
    /// Reservations refused for lack of credit.
    pub stalls: u64,
    /// Grants sent.
    pub grants: u64,
    /// Usage reports sent.
    pub usage_reports: u64,
    /// Errors from the credit API (must stay 0).
    pub errors: u64,
    /// Commits whose post was then refused (credit given back by the
    /// receiver; must stay 0 in the shipped scenarios).
    pub refused_after_commit: u64,
}

/// Messages the fabric carries for the credit plane.
#[derive(Clone, Copy, Debug)]
pub enum CreditMsg {
    /// Sender → receiver: demand.
    Demand {
        /// Sender.
        sender: u32,
        /// Receiver.
        rx: u32,
    },
    /// Receiver → sender: a cumulative grant update.
    Grant {
        /// Sender.
        sender: u32,
        /// Receiver.
        rx: u32,
        /// Index into the update store.
        update: u32,
    },
    /// Sender → receiver: a usage report.
    Usage {
        /// Sender.
        sender: u32,
        /// Receiver.
        rx: u32,
        /// Index into the usage store.
        usage: u32,
    },
}

/// The credit plane of one run.
pub struct CreditPlane {
    senders: Vec<SenderSide>,
    rxs: Vec<ReceiverSide>,
    lease_batch: u32,
    updates: Vec<CreditUpdate>,
    usages: Vec<CreditUsage>,
    counters: CreditCounters,
    capacity: Vec<[u64; RESOURCES]>,
}

fn consumption_part(c: &Charge) -> Charge {
    Charge::ZERO
        .with(Resource::DataBytes, c.get(Resource::DataBytes))
        .with(Resource::ConsumerSlots, c.get(Resource::ConsumerSlots))
}

impl CreditPlane {
    /// Builds and negotiates: every receiver opens every sender, every
    /// sender binds to every receiver's session.
    pub fn new(
        senders: usize,
        caps: &[RxCapacity],
        unit_bytes: &[u64],
        lease_batch: u32,
    ) -> Result<CreditPlane, String> {
        let mut rxs = Vec::with_capacity(caps.len());
        let mut capacity = vec![];
        for (r, c) in caps.iter().enumerate() {
            let cap = [c.bytes, c.request_slots, 0, c.slots];
            let mut cfg =
                AllocatorConfig::new(SessionId(0x5eed_0000 + r as u128), senders as u32, 1, cap);
            cfg.return_path[Resource::DataBytes.index()] = ReturnPath::ReceiverConsumption;
            let mut alloc = ReceiverAllocator::new(cfg).map_err(|e| e.to_string())?;
            for s in 0..senders as u32 {
                alloc.open(s).map_err(|e| e.to_string())?;
            }
            rxs.push(ReceiverSide {
                alloc,
                demand: VecDeque::new(),
                unit_bytes: unit_bytes[r],
            });
            capacity.push(cap);
        }
        let mut ss = Vec::with_capacity(senders);
        for s in 0..senders as u32 {
            let (ledger, mut control) = SenderLedger::new(LedgerConfig {
                max_peers: caps.len() as u32,
                max_classes: 1,
                window: [u64::from(u32::MAX), 2047, 0, 63],
            })
            .map_err(|e| e.to_string())?;
            for (r, rx) in rxs.iter().enumerate() {
                let epoch = rx.alloc.epoch(s).ok_or("allocator has no epoch")?;
                control
                    .bind(&ledger, r as u32, rx.alloc.session(), epoch)
                    .map_err(|e| e.to_string())?;
            }
            ss.push(SenderSide {
                ledger,
                control,
                demand_sent: vec![false; caps.len()],
                dirty: vec![false; caps.len()],
            });
        }
        Ok(CreditPlane {
            senders: ss,
            rxs,
            lease_batch,
            updates: vec![],
            usages: vec![],
            counters: CreditCounters::default(),
            capacity,
        })
    }

    /// `sender`'s ledger: the credit layer of its composed hot path.
    pub fn ledger(&self, sender: u32) -> &SenderLedger {
        &self.senders[sender as usize].ledger
    }

    /// A post of `sender` to `rx` was refused for credit (the composed hot
    /// path's typed backpressure): counts the stall; the first stall since
    /// the last grant returns the demand message to send.
    pub fn stalled(&mut self, sender: u32, rx: u32) -> Option<CreditMsg> {
        self.counters.stalls += 1;
        let s = &mut self.senders[sender as usize];
        let sent = s.demand_sent.get_mut(rx as usize)?;
        if *sent {
            return None;
        }
        *sent = true;
        Some(CreditMsg::Demand { sender, rx })
    }

    /// Counts an error of the credit API.
    pub fn count_error(&mut self) {
        self.counters.errors += 1;
    }

    /// A completion (any status) of a WR holding credit: the composed hot
    /// path released it (`outcome`); it is reported in the next usage
    /// report.
    pub fn released(&mut self, sender: u32, rx: u32, outcome: Option<ReleaseOutcome>) {
        match outcome {
            Some(ReleaseOutcome::Released) => {
                if let Some(d) = self.senders[sender as usize].dirty.get_mut(rx as usize) {
                    *d = true;
                }
            }
            _ => self.counters.errors += 1,
        }
    }

    /// The WR failed before the consumer could take it: the receiver gives
    /// its buffer bytes and consumer slot back at once (model
    /// simplification; see README).
    pub fn never_consumed(&mut self, sender: u32, rx: u32, rec: &TokenRecord) {
        if rec.holds & TokenRecord::HOLDS_CREDIT == 0 {
            return;
        }
        match CommittedCharge::from_record(rec) {
            Ok(c) => self.consumed(sender, rx, &consumption_part(&c.charge())),
            Err(_) => self.counters.errors += 1,
        }
    }

    /// The receiver's consumer finished a WR of `bytes` from `sender`.
    pub fn consumer_done(&mut self, sender: u32, rx: u32, bytes: u64) {
        let c = Charge::ZERO
            .with(Resource::DataBytes, bytes)
            .with(Resource::ConsumerSlots, 1);
        self.consumed(sender, rx, &c);
    }

    fn consumed(&mut self, sender: u32, rx: u32, c: &Charge) {
        if self.rxs[rx as usize].alloc.consumed(sender, 0, c).is_err() {
            self.counters.errors += 1;
        }
    }

    /// The receiver handles a demand.
    pub fn on_demand(&mut self, sender: u32, rx: u32) {
        let r = &mut self.rxs[rx as usize];
        if !r.demand.contains(&sender) {
            r.demand.push_back(sender);
        }
    }

    /// The receiver grants lease batches from free capacity to demanding
    /// senders, round robin; returns the grant messages to send.
    pub fn try_grant(&mut self, rx: u32, out: &mut Vec<CreditMsg>) {
        let r = &mut self.rxs[rx as usize];
        loop {
            let free = r.alloc.free();
            let unit = r.unit_bytes.max(1);
            let fit = [
                free[Resource::DataBytes.index()] / unit,
                free[Resource::RequestSlots.index()],
                free[Resource::ConsumerSlots.index()],
            ]
            .into_iter()
            .min()
            .unwrap_or(0)
            .min(u64::from(self.lease_batch));
            if fit == 0 {
                return;
            }
            let Some(sender) = r.demand.pop_front() else {
                return;
            };
            let add = Charge::ZERO
                .with(Resource::DataBytes, fit * unit)
                .with(Resource::RequestSlots, fit)
                .with(Resource::ConsumerSlots, fit);
            match r.alloc.grant(sender, 0, &add) {
                Ok(u) => {
                    self.updates.push(u);
                    self.counters.grants += 1;
                    out.push(CreditMsg::Grant {
                        sender,
                        rx,
                        update: (self.updates.len() - 1) as u32,
                    });
                }
                Err(_) => {
                    self.counters.errors += 1;
                    return;
                }
            }
        }
    }

    /// The sender applies a grant update.
    pub fn on_grant(&mut self, sender: u32, rx: u32, update: u32, now: u64) {
        let u = self.updates[update as usize];
        let s = &mut self.senders[sender as usize];
        s.demand_sent[rx as usize] = false;
        if s.control.apply_update(&s.ledger, rx, &u, now).is_err() {
            self.counters.errors += 1;
        }
    }

    /// Control epoch on the sender side: a usage report per receiver whose
    /// totals changed.
    pub fn on_epoch(&mut self, out: &mut Vec<CreditMsg>) {
        for (si, s) in self.senders.iter_mut().enumerate() {
            for rx in 0..s.dirty.len() {
                if !s.dirty[rx] {
                    continue;
                }
                s.dirty[rx] = false;
                match s.control.usage(&s.ledger, rx as u32, 0, Charge::ZERO) {
                    Ok(u) => {
                        self.usages.push(u);
                        self.counters.usage_reports += 1;
                        out.push(CreditMsg::Usage {
                            sender: si as u32,
                            rx: rx as u32,
                            usage: (self.usages.len() - 1) as u32,
                        });
                    }
                    Err(_) => self.counters.errors += 1,
                }
            }
        }
    }

    /// The receiver applies a usage report.
    pub fn on_usage(&mut self, sender: u32, rx: u32, usage: u32) {
        let u = self.usages[usage as usize];
        if self.rxs[rx as usize].alloc.on_usage(sender, &u).is_err() {
            self.counters.errors += 1;
        }
    }

    /// End of run: every sender returns its unused credit and reports it;
    /// returns the capacity still missing from the receivers' free pools
    /// (must be 0) and whether every allocator is conserved.
    pub fn settle(&mut self) -> (u64, bool) {
        for (si, s) in self.senders.iter_mut().enumerate() {
            for (rx, r) in self.rxs.iter_mut().enumerate() {
                let all = Charge([u64::MAX; RESOURCES]);
                if s.control
                    .return_unused(&s.ledger, rx as u32, 0, all)
                    .is_err()
                {
                    self.counters.errors += 1;
                }
                match s.control.usage(&s.ledger, rx as u32, 0, Charge::ZERO) {
                    Ok(u) => {
                        if r.alloc.on_usage(si as u32, &u).is_err() {
                            self.counters.errors += 1;
                        }
                    }
                    Err(_) => self.counters.errors += 1,
                }
            }
        }
        let mut missing = 0;
        let mut conserved = true;
        for (r, cap) in self.rxs.iter().zip(&self.capacity) {
            let free = r.alloc.free();
            for k in 0..RESOURCES {
                missing += cap[k].saturating_sub(free[k]);
            }
            conserved &= r.alloc.conserved();
        }
        (missing, conserved)
    }

    /// Counters.
    pub fn counters(&self) -> CreditCounters {
        self.counters
    }
}
