//! The receiver's global capacity allocator.
//!
//! Per-`(sender peer, class)` grants are *carved* from one global capacity
//! per resource, so for every resource, at all times:
//!
//! ```text
//! free + Σ outstanding(peer, class) + Σ fencing(peer) == capacity
//! outstanding = granted_total - reclaimed_total      (never negative)
//! ```
//!
//! Capacity comes back only through
//! * consumption reports: receiver-local consumption
//!   ([`ReceiverAllocator::consumed`], for [`ReturnPath::ReceiverConsumption`]
//!   resources) or sender completions reported in usage
//!   ([`ReceiverAllocator::on_usage`], for [`ReturnPath::SenderCompletion`]
//!   resources);
//! * explicit returns of unused credit (the `returned` totals of a usage
//!   report);
//! * fencing: a new epoch or a disconnect moves a peer's outstanding grants
//!   into its *fencing* bucket, which becomes free only when the caller
//!   confirms with [`ReceiverAllocator::fence_complete`] that the old
//!   session's QPs and in-flight work are drained or failed.
//!
//! # Epochs are named
//!
//! Each sender peer's epochs count up from 1 ([`ReceiverAllocator::open`];
//! epoch 0 means "never opened" and is refused wherever an epoch is named).
//! Every call that ends an epoch names it, so a message that arrives late
//! can never act on a newer one:
//!
//! * [`ReceiverAllocator::close`]`(peer, epoch)` closes only that epoch; a
//!   stale close (for an epoch a later `open` already replaced) is refused
//!   with [`AllocError::EpochMismatch`] and changes nothing;
//! * [`ReceiverAllocator::fence_complete`]`(peer, epoch)` confirms that
//!   every epoch up to `epoch` is drained. The fencing bucket remembers only
//!   the newest epoch it holds (one `u64` per peer, however many epochs
//!   were fenced); a confirmation older than that frees nothing
//!   (fail-closed: the bucket also holds capacity of a newer epoch whose
//!   drain nobody confirmed), so old capacity is never reused before its
//!   session is fenced.
//!
//! Usage reports name their session and epoch too, and anything but the
//! peer's live epoch of this receiver's session is stale.
//!
//! The allocator is control-path state with one owner (`&mut self`); it is
//! not shared between threads. All storage is allocated at construction.
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use super::{
    Charge, CreditUpdate, CreditUsage, KeyError, Resource, SessionId, Totals, ZeroField, RESOURCES,
};

/// Which report returns a resource's capacity to the free pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnPath {
    /// The sender's completion (reported as `released` in usage), e.g.
    /// in-flight DATA_BYTES and REQUEST_SLOTS.
    SenderCompletion,
    /// The receiver's own consumer, e.g. CONSUMER_SLOTS, STAGING_SLOTS.
    ReceiverConsumption,
}

/// Receiver allocator configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatorConfig {
    /// This receiver's session id: a new incarnation must use a larger one
    /// (see [`SessionId`]); 0 is reserved.
    pub session: SessionId,
    /// Sender peers.
    pub max_peers: u32,
    /// QoS classes per peer.
    pub max_classes: u32,
    /// Global capacity per resource; 0 = not modeled.
    pub capacity: [u64; RESOURCES],
    /// Per-entry outstanding cap per resource (the sender's negotiated
    /// tracking window); 0 = no cap beyond capacity.
    pub entry_cap: [u64; RESOURCES],
    /// How each resource's capacity returns.
    pub return_path: [ReturnPath; RESOURCES],
}

impl AllocatorConfig {
    /// A configuration with default return paths and no per-entry caps.
    ///
    /// ```
    /// use railyard_core::credit::{AllocatorConfig, ReturnPath, SessionId};
    /// let cfg = AllocatorConfig::new(SessionId::new(1, 5), 16, 1, [64 << 20, 256, 0, 256]);
    /// assert_eq!(cfg.return_path[0], ReturnPath::SenderCompletion); // bytes: the sender's completion
    /// assert_eq!(cfg.return_path[3], ReturnPath::ReceiverConsumption); // consumer slots: ours
    /// ```
    pub const fn new(
        session: SessionId,
        max_peers: u32,
        max_classes: u32,
        capacity: [u64; RESOURCES],
    ) -> Self {
        AllocatorConfig {
            session,
            max_peers,
            max_classes,
            capacity,
            entry_cap: [0; RESOURCES],
            return_path: [
                ReturnPath::SenderCompletion,
                ReturnPath::SenderCompletion,
                ReturnPath::ReceiverConsumption,
                ReturnPath::ReceiverConsumption,
            ],
        }
    }
}

/// Why an allocator operation was refused. Refusals change nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// Bad peer, class or resource.
    Key(KeyError),
    /// `max_peers * max_classes` is zero or too large.
    BadConfig,
    /// Not enough free capacity for the whole grant.
    Insufficient(Resource),
    /// The grant would exceed the entry's outstanding cap.
    EntryCap(Resource),
    /// The peer has no open session (closed, fencing-only or quarantined).
    PeerNotOpen,
    /// Usage for another session or epoch (e.g. an old completion after a
    /// new epoch): ignored, counted. Its capacity is in the fencing bucket.
    Stale,
    /// Violation: totals exceed what was granted/consumed (RFC 2849 rule
    /// 4). The peer is quarantined.
    Violation(Resource),
    /// Rejected: a cumulative usage total decreased (RFC 2849 rule 5). The
    /// report changed nothing and is counted in
    /// [`AllocatorMetrics::protocol_errors`]; the peer is not quarantined.
    Decreasing(Resource),
    /// A receiver-local consumption report larger than what is outstanding
    /// (refused, counted).
    OverRelease(Resource),
    /// `fence_complete` with nothing fencing.
    NothingFencing,
    /// `close` or `fence_complete` named another epoch than the one it may
    /// act on (a stale close after a newer `open`, or a fence confirmation
    /// older than the newest fenced epoch). Nothing changed.
    EpochMismatch {
        /// The epoch the call may act on: the peer's current epoch for
        /// `close`, the newest fenced epoch for `fence_complete`.
        ours: u64,
        /// The epoch the call named.
        theirs: u64,
    },
    /// A reserved zero session, epoch or sequence (malformed).
    Zero(ZeroField),
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocError::Key(k) => write!(f, "allocator: {k}"),
            AllocError::BadConfig => f.write_str("allocator: bad table size"),
            AllocError::Insufficient(r) => write!(f, "allocator: not enough free {r}"),
            AllocError::EntryCap(r) => {
                write!(f, "allocator: grant would exceed the entry cap for {r}")
            }
            AllocError::PeerNotOpen => f.write_str("allocator: peer session not open"),
            AllocError::Stale => f.write_str("allocator: usage for an old session or epoch"),
            AllocError::Violation(r) => write!(f, "allocator: protocol violation on {r}"),
            AllocError::Decreasing(r) => {
                write!(
                    f,
                    "allocator: usage report rejected: cumulative {r} decreased"
                )
            }
            AllocError::OverRelease(r) => {
                write!(f, "allocator: release of {r} exceeds outstanding")
            }
            AllocError::NothingFencing => f.write_str("allocator: nothing to fence"),
            AllocError::EpochMismatch { ours, theirs } => {
                write!(f, "allocator: call names epoch {theirs}, expected {ours}")
            }
            AllocError::Zero(z) => write!(f, "allocator: {z}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AllocError {}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum PeerState {
    #[default]
    Closed,
    Open,
    Quarantined,
}

#[derive(Clone, Copy, Debug, Default)]
struct Peer {
    state: PeerState,
    /// Current (newest) epoch; 0 = never opened.
    epoch: u64,
    fencing: [u64; RESOURCES],
    /// The newest epoch whose grants are in `fencing` (0 = none).
    fenced_through: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    granted: [u64; RESOURCES],
    reclaimed: [u64; RESOURCES],
    consumed: [u64; RESOURCES],
    released: [u64; RESOURCES],
    returned: [u64; RESOURCES],
    local: [u64; RESOURCES],
    update_seq: u64,
    usage_seq: Option<u64>,
}

/// Bounded allocator metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorMetrics {
    /// Free capacity.
    pub free: [u64; RESOURCES],
    /// Outstanding (granted, not reclaimed) capacity in live epochs.
    pub outstanding: [u64; RESOURCES],
    /// Capacity waiting for old sessions to be fenced.
    pub fencing: [u64; RESOURCES],
    /// Explicitly returned unused credit.
    pub returned: [u64; RESOURCES],
    /// Grants refused for lack of capacity.
    pub refused_grants: u64,
    /// Stale usage reports (old session/epoch).
    pub stale_usage: u64,
    /// Duplicate usage reports.
    pub duplicate_usage: u64,
    /// Epoch resets and disconnects fenced.
    pub epoch_resets: u64,
    /// Protocol violations (peer quarantined).
    pub violations: u64,
    /// Usage reports rejected for a decreasing cumulative total (nothing
    /// changed; the peer was not quarantined).
    pub protocol_errors: u64,
}

/// Outcome of a usage report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageOutcome {
    /// Applied; this much capacity returned to the free pool.
    Applied(Charge),
    /// Duplicate or older sequence: no-op.
    Duplicate,
}

/// The receiver's global capacity allocator.
#[derive(Debug)]
pub struct ReceiverAllocator {
    cfg: AllocatorConfig,
    free: [u64; RESOURCES],
    peers: Box<[Peer]>,
    slots: Box<[Slot]>,
    m: AllocatorMetrics,
}

impl ReceiverAllocator {
    /// Builds an allocator with all capacity free. Session 0 is reserved
    /// ([`AllocError::Zero`]).
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let cfg = AllocatorConfig::new(SessionId::new(1, 5), 4, 1, [1 << 20, 8, 0, 8]);
    /// let a = ReceiverAllocator::new(cfg).unwrap();
    /// assert_eq!(a.free(), [1 << 20, 8, 0, 8]);
    /// let bad = AllocatorConfig::new(SessionId::NONE, 4, 1, [1, 1, 0, 1]);
    /// assert!(ReceiverAllocator::new(bad).is_err()); // session 0 is reserved
    /// ```
    pub fn new(cfg: AllocatorConfig) -> Result<ReceiverAllocator, AllocError> {
        let n = cfg.max_peers as u64 * cfg.max_classes as u64;
        if n == 0 || n > 1 << 16 {
            return Err(AllocError::BadConfig);
        }
        if cfg.session.is_none() {
            return Err(AllocError::Zero(ZeroField::Session));
        }
        Ok(ReceiverAllocator {
            cfg,
            free: cfg.capacity,
            peers: (0..cfg.max_peers)
                .map(|_| Peer::default())
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            slots: (0..n)
                .map(|_| Slot::default())
                .collect::<Vec<_>>()
                .into_boxed_slice(),
            m: AllocatorMetrics::default(),
        })
    }

    fn idx(&self, peer: u32, class: u32) -> Result<usize, AllocError> {
        if peer >= self.cfg.max_peers {
            return Err(AllocError::Key(KeyError::UnknownPeer(peer)));
        }
        if class >= self.cfg.max_classes {
            return Err(AllocError::Key(KeyError::UnknownClass(class)));
        }
        Ok((peer * self.cfg.max_classes + class) as usize)
    }

    fn classes(&self, peer: u32) -> core::ops::Range<usize> {
        let s = (peer * self.cfg.max_classes) as usize;
        s..s + self.cfg.max_classes as usize
    }

    /// This receiver's session id.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// assert_eq!(a.session(), SessionId::new(1, 5));
    /// ```
    pub fn session(&self) -> SessionId {
        self.cfg.session
    }

    /// The current epoch of `peer`.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// assert_eq!(a.epoch(0), Some(0)); // never opened
    /// a.open(0).unwrap();
    /// assert_eq!((a.epoch(0), a.epoch(7)), (Some(1), None));
    /// ```
    pub fn epoch(&self, peer: u32) -> Option<u64> {
        self.peers.get(peer as usize).map(|p| p.epoch)
    }

    /// Opens `peer` for grants in a new epoch (the first is 1). Any
    /// outstanding grants of the previous epoch move to the fencing bucket
    /// (not reusable until [`fence_complete`](Self::fence_complete)).
    /// Returns the new epoch.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// assert_eq!(a.open(0), Ok(1)); // the first epoch is 1
    /// assert_eq!(a.open(0), Ok(2)); // a reconnect: the old epoch's grants are fenced
    /// assert!(a.conserved());
    /// ```
    pub fn open(&mut self, peer: u32) -> Result<u64, AllocError> {
        self.fence_old(peer)?;
        let p = &mut self.peers[peer as usize];
        p.epoch += 1;
        p.state = PeerState::Open;
        Ok(p.epoch)
    }

    /// Disconnect of `peer`'s epoch `epoch`: moves its outstanding grants
    /// into the fencing bucket and closes it. The close names the epoch it
    /// closes: one for any other epoch — a stale close that arrives after a
    /// newer [`open`](Self::open) — is refused with
    /// [`AllocError::EpochMismatch`] and changes nothing. Closing a closed
    /// epoch again is a no-op; a quarantined peer stays quarantined.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let cfg = AllocatorConfig::new(SessionId::new(1, 5), 1, 1, [1 << 20, 8, 0, 8]);
    /// let mut a = ReceiverAllocator::new(cfg).unwrap();
    /// let e1 = a.open(0).unwrap();
    /// let e2 = a.open(0).unwrap(); // the sender reconnected
    /// // The close for the first connection arrives late: refused.
    /// assert_eq!(a.close(0, e1), Err(AllocError::EpochMismatch { ours: e2, theirs: e1 }));
    /// assert!(a.grant(0, 0, &Charge([4096, 1, 0, 1])).is_ok());
    /// a.close(0, e2).unwrap();
    /// assert_eq!(a.grant(0, 0, &Charge([1, 0, 0, 0])), Err(AllocError::PeerNotOpen));
    /// ```
    pub fn close(&mut self, peer: u32, epoch: u64) -> Result<(), AllocError> {
        self.idx(peer, 0)?;
        if epoch == 0 {
            return Err(AllocError::Zero(ZeroField::Epoch));
        }
        let p = self.peers[peer as usize];
        if epoch != p.epoch {
            return Err(AllocError::EpochMismatch {
                ours: p.epoch,
                theirs: epoch,
            });
        }
        if p.state == PeerState::Closed {
            return Ok(());
        }
        self.fence_old(peer)?;
        let p = &mut self.peers[peer as usize];
        if p.state == PeerState::Open {
            p.state = PeerState::Closed;
        }
        Ok(())
    }

    fn fence_old(&mut self, peer: u32) -> Result<(), AllocError> {
        self.idx(peer, 0)?;
        let mut any = false;
        for i in self.classes(peer) {
            let s = self.slots[i];
            for k in 0..RESOURCES {
                let out = s.granted[k] - s.reclaimed[k];
                any |= out != 0;
                self.peers[peer as usize].fencing[k] += out;
            }
            self.slots[i] = Slot::default();
        }
        let p = &mut self.peers[peer as usize];
        if any {
            p.fenced_through = p.epoch;
        }
        if p.epoch != 0 || any {
            self.m.epoch_resets += 1;
        }
        Ok(())
    }

    /// Every old epoch of `peer` up to `epoch` is fenced: its QPs and
    /// in-flight work are drained or failed. Only now does the fenced
    /// capacity become free. The bucket remembers the newest epoch it
    /// holds; a confirmation for an older epoch frees nothing
    /// ([`AllocError::EpochMismatch`], fail-closed: a newer fenced epoch's
    /// drain was not confirmed), nor does one for an epoch never opened.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// let cfg = AllocatorConfig::new(SessionId::new(1, 5), 1, 1, [1 << 20, 8, 0, 8]);
    /// let mut a = ReceiverAllocator::new(cfg).unwrap();
    /// let e1 = a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// let e2 = a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// a.close(0, e2).unwrap();
    /// // Epoch 1 drained, epoch 2 not yet: nothing comes back.
    /// assert_eq!(a.fence_complete(0, e1), Err(AllocError::EpochMismatch { ours: e2, theirs: e1 }));
    /// assert_eq!(a.fence_complete(0, e2), Ok(Charge([8192, 2, 0, 2])));
    /// assert!(a.conserved());
    /// ```
    pub fn fence_complete(&mut self, peer: u32, epoch: u64) -> Result<Charge, AllocError> {
        self.idx(peer, 0)?;
        if epoch == 0 {
            return Err(AllocError::Zero(ZeroField::Epoch));
        }
        let p = &mut self.peers[peer as usize];
        if p.fencing == [0; RESOURCES] {
            return Err(AllocError::NothingFencing);
        }
        if epoch < p.fenced_through || epoch > p.epoch {
            return Err(AllocError::EpochMismatch {
                ours: p.fenced_through,
                theirs: epoch,
            });
        }
        let f = core::mem::take(&mut p.fencing);
        p.fenced_through = 0;
        for k in 0..RESOURCES {
            self.free[k] += f[k];
        }
        Ok(Charge(f))
    }

    /// Carves `add` from free capacity for `(peer, class)`, all or nothing,
    /// and returns the update to send (cumulative totals, next sequence;
    /// the first update of an epoch has sequence 1). An empty `add` is
    /// refused ([`KeyError::EmptyCharge`]).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// let u = a.grant(0, 0, &Charge([65536, 4, 0, 4])).unwrap(); // send `u` to the sender
    /// assert_eq!((u.epoch, u.sequence), (1, 1));
    /// let u = a.grant(0, 0, &Charge([65536, 0, 0, 0])).unwrap();
    /// assert_eq!(u.grants.get(Resource::DataBytes), Some(131072)); // cumulative totals
    /// assert_eq!(a.grant(0, 0, &Charge([1 << 30, 0, 0, 0])), Err(AllocError::Insufficient(Resource::DataBytes)));
    /// assert_eq!(a.grant(1, 0, &Charge([1, 0, 0, 0])), Err(AllocError::PeerNotOpen));
    /// ```
    pub fn grant(
        &mut self,
        peer: u32,
        class: u32,
        add: &Charge,
    ) -> Result<CreditUpdate, AllocError> {
        let i = self.idx(peer, class)?;
        if self.peers[peer as usize].state != PeerState::Open {
            return Err(AllocError::PeerNotOpen);
        }
        if *add == Charge::ZERO {
            return Err(AllocError::Key(KeyError::EmptyCharge));
        }
        let s = self.slots[i];
        for r in Resource::ALL {
            let k = r.index();
            if add.0[k] == 0 {
                continue;
            }
            if self.cfg.capacity[k] == 0 {
                return Err(AllocError::Key(KeyError::UnknownResource(r)));
            }
            if add.0[k] > self.free[k] {
                self.m.refused_grants += 1;
                return Err(AllocError::Insufficient(r));
            }
            let cap = self.cfg.entry_cap[k];
            if cap != 0 && (s.granted[k] - s.reclaimed[k]).saturating_add(add.0[k]) > cap {
                self.m.refused_grants += 1;
                return Err(AllocError::EntryCap(r));
            }
        }
        let s = &mut self.slots[i];
        for k in 0..RESOURCES {
            self.free[k] -= add.0[k];
            s.granted[k] += add.0[k];
        }
        s.update_seq += 1;
        Ok(self.update_for(peer, class, i))
    }

    /// A refresh of `(peer, class)`'s current cumulative grants under a new
    /// sequence, granting nothing: the heartbeat that keeps a sender's
    /// freshness TTL alive while no capacity is free (a duplicate sequence
    /// would not refresh it). Refused for a peer that is not open or an
    /// entry that was never granted (nothing to refresh).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// let g = a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// let h = a.heartbeat(0, 0).unwrap(); // nothing new to grant, but still alive
    /// assert_eq!((h.sequence, h.grants), (g.sequence + 1, g.grants));
    /// ```
    pub fn heartbeat(&mut self, peer: u32, class: u32) -> Result<CreditUpdate, AllocError> {
        let i = self.idx(peer, class)?;
        if self.peers[peer as usize].state != PeerState::Open {
            return Err(AllocError::PeerNotOpen);
        }
        if self.slots[i].update_seq == 0 {
            return Err(AllocError::Key(KeyError::EmptyCharge));
        }
        self.slots[i].update_seq += 1;
        Ok(self.update_for(peer, class, i))
    }

    /// The current update for `(peer, class)` (same sequence: a refresh /
    /// retransmission that the sender treats as a duplicate), or `None` if
    /// nothing was granted in this epoch yet (there is no update to repeat:
    /// sequence 0 is reserved).
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// assert_eq!(a.current_update(0, 0), Ok(None)); // nothing granted yet
    /// let g = a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// assert_eq!(a.current_update(0, 0), Ok(Some(g))); // a retransmission
    /// ```
    pub fn current_update(
        &self,
        peer: u32,
        class: u32,
    ) -> Result<Option<CreditUpdate>, AllocError> {
        let i = self.idx(peer, class)?;
        if self.slots[i].update_seq == 0 {
            return Ok(None);
        }
        Ok(Some(self.update_for(peer, class, i)))
    }

    fn update_for(&self, peer: u32, class: u32, i: usize) -> CreditUpdate {
        let mut grants = Totals::default();
        for r in Resource::ALL {
            if self.cfg.capacity[r.index()] != 0 {
                grants = grants.with(r, self.slots[i].granted[r.index()]);
            }
        }
        CreditUpdate {
            receiver_session: self.cfg.session,
            epoch: self.peers[peer as usize].epoch,
            sequence: self.slots[i].update_seq,
            qos_class: class,
            freshness_ttl_ms: 0,
            grants,
        }
    }

    fn reclaim(&mut self, i: usize, k: usize, amount: u64) {
        self.slots[i].reclaimed[k] += amount;
        self.free[k] += amount;
    }

    /// Applies a sender's usage report for `peer` (identity from the
    /// endpoint). Refuses a zero session, epoch or sequence
    /// ([`AllocError::Zero`]). Checks session, epoch, sequence, monotonicity and
    /// `released <= consumed`, `consumed + returned <= granted`; returns
    /// capacity for completion-released resources and returned credit.
    ///
    /// ```
    /// use railyard_core::credit::*;
    /// // Receiver side.
    /// let session = SessionId::new(1, 5);
    /// let mut rx = ReceiverAllocator::new(AllocatorConfig::new(session, 1, 1, [1 << 20, 8, 0, 8])).unwrap();
    /// let epoch = rx.open(0).unwrap();
    /// let update = rx.grant(0, 0, &Charge([8192, 2, 0, 2])).unwrap();
    /// // Sender side: apply the grant, write 4 KiB, complete it, report usage.
    /// let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    /// ctl.bind(&ledger, 0, session, epoch).unwrap();
    /// ctl.apply_update(&ledger, 0, &update, 0).unwrap();
    /// let e = ledger.entry(0, 0).unwrap();
    /// let c = ledger.try_reserve(e, &Charge::direct_write(4096)).unwrap().commit().unwrap();
    /// ledger.release(c).unwrap();
    /// let usage = ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
    /// // Back on the receiver: the completed bytes and request slot come back.
    /// assert_eq!(rx.on_usage(0, &usage), Ok(UsageOutcome::Applied(Charge([4096, 1, 0, 0]))));
    /// assert_eq!(rx.on_usage(0, &usage), Ok(UsageOutcome::Duplicate));
    /// assert!(rx.conserved());
    /// ```
    pub fn on_usage(&mut self, peer: u32, u: &CreditUsage) -> Result<UsageOutcome, AllocError> {
        let i = self.idx(peer, u.qos_class)?;
        ZeroField::check(u.receiver_session.0, u.epoch, u.sequence).map_err(AllocError::Zero)?;
        let p = self.peers[peer as usize];
        if p.state == PeerState::Quarantined {
            return Err(AllocError::PeerNotOpen);
        }
        if u.receiver_session != self.cfg.session
            || u.epoch != p.epoch
            || p.state != PeerState::Open
        {
            self.m.stale_usage += 1;
            return Err(AllocError::Stale);
        }
        let s = self.slots[i];
        if s.usage_seq.is_some_and(|last| u.sequence <= last) {
            self.m.duplicate_usage += 1;
            return Ok(UsageOutcome::Duplicate);
        }
        let get = |t: &Totals, k: usize, old: u64| t.get(Resource::ALL[k]).unwrap_or(old);
        for r in Resource::ALL {
            let k = r.index();
            let (c, rel, ret) = (
                get(&u.consumed, k, s.consumed[k]),
                get(&u.released, k, s.released[k]),
                get(&u.returned, k, s.returned[k]),
            );
            // Rule 5: a total that went down rejects the report (nothing
            // changed yet), counted; not a quarantine.
            if c < s.consumed[k] || rel < s.released[k] || ret < s.returned[k] {
                self.m.protocol_errors = self.m.protocol_errors.saturating_add(1);
                return Err(AllocError::Decreasing(r));
            }
            let bad = rel > c
                || c.checked_add(ret).map_or(true, |t| t > s.granted[k])
                || (self.cfg.capacity[k] == 0 && (c | rel | ret) != 0);
            // Capacity may come back at most once: returned + released (for
            // completion resources) + locally consumed never exceed granted.
            let mut back = ret.saturating_sub(s.returned[k]);
            if self.cfg.return_path[k] == ReturnPath::SenderCompletion {
                back = back.saturating_add(rel.saturating_sub(s.released[k]));
            }
            let over = s.reclaimed[k]
                .checked_add(back)
                .map_or(true, |t| t > s.granted[k])
                || ret.saturating_add(s.local[k]) > s.granted[k];
            if bad || over {
                self.violation(peer);
                return Err(AllocError::Violation(r));
            }
        }
        let mut back = Charge::ZERO;
        for r in Resource::ALL {
            let k = r.index();
            let c = get(&u.consumed, k, s.consumed[k]);
            let rel = get(&u.released, k, s.released[k]);
            let ret = get(&u.returned, k, s.returned[k]);
            let mut amount = ret - s.returned[k];
            if self.cfg.return_path[k] == ReturnPath::SenderCompletion {
                amount += rel - s.released[k];
            }
            self.m.returned[k] += ret - s.returned[k];
            let sl = &mut self.slots[i];
            sl.consumed[k] = c;
            sl.released[k] = rel;
            sl.returned[k] = ret;
            self.reclaim(i, k, amount);
            back.0[k] = amount;
        }
        self.slots[i].usage_seq = Some(u.sequence);
        Ok(UsageOutcome::Applied(back))
    }

    /// What the receiver's consumer may return for `(peer, class)` right
    /// now: for each [`ReturnPath::ReceiverConsumption`] resource, what the
    /// sender reported committed (its WRITEs were handed to the transport)
    /// minus what was consumed locally already; 0 for the others. A
    /// consumer that returns only this never frees a slot the sender still
    /// holds unused.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([8192, 2, 0, 2])).unwrap();
    /// // Nothing reported committed yet: nothing for the consumer to return.
    /// assert_eq!(a.consumable(0, 0), Ok(Charge::ZERO));
    /// ```
    pub fn consumable(&self, peer: u32, class: u32) -> Result<Charge, AllocError> {
        let i = self.idx(peer, class)?;
        let s = &self.slots[i];
        let mut c = Charge::ZERO;
        for k in 0..RESOURCES {
            if self.cfg.return_path[k] == ReturnPath::ReceiverConsumption {
                c.0[k] = s.consumed[k].saturating_sub(s.local[k]);
            }
        }
        Ok(c)
    }

    /// A receiver-local consumption report: the consumer freed `amounts` of
    /// [`ReturnPath::ReceiverConsumption`] resources for `(peer, class)` in
    /// the current epoch. Refused (and nothing changes) if it exceeds what
    /// is outstanding.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([8192, 2, 0, 2])).unwrap();
    /// a.consumed(0, 0, &Charge([0, 0, 0, 1])).unwrap(); // the application consumed one write
    /// assert_eq!(a.consumed(0, 0, &Charge([0, 0, 0, 5])), Err(AllocError::OverRelease(Resource::ConsumerSlots)));
    /// assert!(a.conserved());
    /// ```
    pub fn consumed(&mut self, peer: u32, class: u32, amounts: &Charge) -> Result<(), AllocError> {
        let i = self.idx(peer, class)?;
        let s = self.slots[i];
        for r in Resource::ALL {
            let k = r.index();
            let a = amounts.0[k];
            if a == 0 {
                continue;
            }
            if self.cfg.capacity[k] == 0
                || self.cfg.return_path[k] != ReturnPath::ReceiverConsumption
            {
                return Err(AllocError::Key(KeyError::UnknownResource(r)));
            }
            // Only what the sender has consumed (committed) can be consumed here.
            if s.local[k].saturating_add(a) > s.granted[k] - s.returned[k]
                || a > s.granted[k] - s.reclaimed[k]
            {
                return Err(AllocError::OverRelease(r));
            }
        }
        for k in 0..RESOURCES {
            self.slots[i].local[k] += amounts.0[k];
            self.reclaim(i, k, amounts.0[k]);
        }
        Ok(())
    }

    fn violation(&mut self, peer: u32) {
        self.m.violations += 1;
        self.peers[peer as usize].state = PeerState::Quarantined;
    }

    /// Free capacity per resource.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// assert_eq!(a.free(), [(1 << 20) - 4096, 7, 0, 7]);
    /// ```
    pub fn free(&self) -> [u64; RESOURCES] {
        self.free
    }

    /// Configured capacity per resource.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// assert_eq!(a.capacity(), [1 << 20, 8, 0, 8]);
    /// ```
    pub fn capacity(&self) -> [u64; RESOURCES] {
        self.cfg.capacity
    }

    /// Outstanding grants of `(peer, class)` in its current epoch.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// assert_eq!(a.outstanding(0, 0), Ok(Charge([4096, 1, 0, 1])));
    /// ```
    pub fn outstanding(&self, peer: u32, class: u32) -> Result<Charge, AllocError> {
        let s = self.slots[self.idx(peer, class)?];
        let mut c = Charge::ZERO;
        for k in 0..RESOURCES {
            c.0[k] = s.granted[k] - s.reclaimed[k];
        }
        Ok(c)
    }

    /// Bounded metrics, including the conservation totals.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// assert!(a.grant(0, 0, &Charge([1 << 30, 0, 0, 0])).is_err());
    /// assert_eq!(a.metrics().refused_grants, 1);
    /// ```
    pub fn metrics(&self) -> AllocatorMetrics {
        let mut m = self.m;
        m.free = self.free;
        for s in self.slots.iter() {
            for k in 0..RESOURCES {
                m.outstanding[k] += s.granted[k] - s.reclaimed[k];
            }
        }
        for p in self.peers.iter() {
            for k in 0..RESOURCES {
                m.fencing[k] += p.fencing[k];
            }
        }
        m
    }

    /// Checks `free + outstanding + fencing == capacity` for every resource.
    ///
    /// ```
    /// # use railyard_core::credit::*;
    /// # let cfg = AllocatorConfig::new(SessionId::new(1, 5), 2, 1, [1 << 20, 8, 0, 8]);
    /// # let mut a = ReceiverAllocator::new(cfg).unwrap();
    ///
    /// a.open(0).unwrap();
    /// a.grant(0, 0, &Charge([4096, 1, 0, 1])).unwrap();
    /// a.open(0).unwrap(); // fenced, not yet free
    /// assert!(a.conserved()); // free + outstanding + fencing == capacity
    /// ```
    pub fn conserved(&self) -> bool {
        let m = self.metrics();
        (0..RESOURCES).all(|k| m.free[k] + m.outstanding[k] + m.fencing[k] == self.cfg.capacity[k])
    }
}
