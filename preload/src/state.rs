//! The preload's process-wide state and its two hot paths.
//!
//! One [`HotPathTables`] (token pool, slice and endpoint tables, the congestion
//! controller) serves every context the process opens: the same composed
//! hot path the engine runs, with the application's QPs as endpoints.
//!
//! | application event | what railyard does |
//! |---|---|
//! | `ibv_open_device` | a device domain; the context's `ops.post_send` / `ops.poll_cq` wrapped |
//! | `ibv_create_qp` (RC) | a QP slot: its post-order ring and its deferral queue (sized by the QP's caps) |
//! | `ibv_modify_qp` to RTR | the route domain: (local device, remote GID, or LID) |
//! | `ibv_modify_qp` to RTS | the endpoint opened (a reconnect moves the route to a new generation) |
//! | `ibv_post_send` | each WR admitted in order (slice, endpoint depth, CC permit, token), `wr_id` swapped for the token and the chain posted as the application built it; a refused WR and every later one held back, copied |
//! | `ibv_poll_cq` | each completion of a managed QP's send queue: the work requests it covers, then its own token completed (classified once, in core) and the application's `wr_id` restored |
//! | WC error, `ibv_modify_qp` to ERR / SQE, an async QP error | the endpoint retired (one API); held-back work completes as flushed |
//! | `ibv_modify_qp` to RESET, `ibv_destroy_qp` | the endpoint retired, outstanding tokens completed as flushed, held-back work dropped |
//! | `ibv_get_async_event` | classified in core, applied to CC at its scope, endpoints retired at its scope |
//!
//! Locks: the post path takes its QP's post lock (the provider takes its
//! send-queue lock right after: both are per QP and uncontended when one
//! thread posts a QP); the poll path takes its CQ's lock around the real
//! poll and the processing of what it returned, so the completions of one
//! send queue are processed in order (the provider takes its CQ lock in
//! the same place). Lock order: CQ lock before post lock. Lookups of a QP
//! or CQ are lock-free ([`Lookup`]); nothing on either path allocates.

use std::ffi::c_int;
use std::sync::atomic::{
    AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Mutex, MutexGuard};

use railyard_core::cc::{Controller, PollerStatus, SoftwareProvider};
use railyard_core::classify::{classify_event, event_action, wc, EventAction};
use railyard_core::completion::{
    HotPathConfig, HotPathControl, HotPathTables, Path, PostOrder, PostRequest, Refusal,
};
use railyard_core::endpoint::{
    EndpointConfig, EndpointError, EndpointHandle, ReclaimEvent, RetireReason,
};
use railyard_core::lookup::Lookup;
use railyard_core::slice::Outcome;
use railyard_core::token::{TokenCookies, TokenError};
use rdma_sys::{ibv_cq, ibv_qp, ibv_send_wr, ibv_wc};

use crate::config::{LogLevel, PreloadConfig};
use crate::defer::{wr_bytes, DeferError, DeferQueue};
use crate::stats::PreloadStats;

/// The composed hot path over the preload's stack.
type HotOwner<'a> =
    railyard_core::completion::HotPath<'a, u32, railyard_core::completion::HotPathLayers<'a>>;

/// The provider's `post_send`.
pub type PostSendFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
/// The provider's `poll_cq`.
pub type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;

/// Contexts (open devices) at most.
pub const MAX_CONTEXTS: usize = 64;
/// CQs tracked at most (more are polled under one shared lock).
pub const MAX_CQS: usize = 4096;
/// Work requests admitted per provider call at most (a longer chain goes
/// down in pieces, in order).
const SEGMENT: usize = 64;

const IBV_WC_RECV: u32 = 1 << 7;

/// A QP slot's phase.
const FREE: u8 = 0;
/// Created, not yet RTS: posts pass through untouched.
const CREATED: u8 = 1;
/// RTS with an open endpoint.
const ACTIVE: u8 = 2;
/// Endpoint retired (error): posts are held back and completed as flushed.
const DEAD: u8 = 3;
/// Being destroyed: nothing may post to it any more.
const CLOSING: u8 = 4;

/// The clock every hot-path call reads once (CLOCK_MONOTONIC, ns).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000) + ts.tv_nsec as u64
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pack(h: EndpointHandle) -> u64 {
    (u64::from(h.generation) << 32) | u64::from(h.slot)
}

fn unpack(v: u64) -> EndpointHandle {
    EndpointHandle {
        slot: v as u32,
        generation: (v >> 32) as u32,
    }
}

/// One opened device context.
#[derive(Default)]
pub(crate) struct CtxSlot {
    /// `ibv_context *` (0: free).
    pub ptr: AtomicUsize,
    /// Device domain.
    pub device: AtomicU16,
    /// The provider's `post_send` / `poll_cq`.
    pub post_send: AtomicUsize,
    pub poll_cq: AtomicUsize,
    /// The provider's `create_qp_ex` / `create_cq_ex` (extended API).
    pub create_qp_ex: AtomicUsize,
    pub create_cq_ex: AtomicUsize,
}

/// The tokens of one run of work requests being posted and the
/// application's `wr_id`s they stand for (kept per QP, under its post lock,
/// so a post call does not zero a kilobyte of stack every time).
#[derive(Debug)]
struct Scratch {
    toks: [u64; SEGMENT],
    apps: [u64; SEGMENT],
}

impl Default for Scratch {
    fn default() -> Self {
        Self {
            toks: [0; SEGMENT],
            apps: [0; SEGMENT],
        }
    }
}

/// Per-QP work-request side, under the QP's post lock.
#[derive(Debug, Default)]
struct PostSide {
    queue: Option<DeferQueue>,
    /// Next slice position (`slice_base + seq % depth`).
    seq: u32,
    /// The route domain chosen at RTR.
    pending_route: Option<u32>,
    /// Whether the slot ever had an endpoint (a later RTS is a reconnect).
    connected_before: bool,
    scratch: Scratch,
}

/// Counters kept per QP (summed for the stats): written by the QP's post
/// or poll path only, so no two threads share the lines.
#[derive(Default)]
struct QpCounters {
    post_calls: AtomicU64,
    posted: AtomicU64,
    passthrough: AtomicU64,
    completions: AtomicU64,
    covered: AtomicU64,
    errors: AtomicU64,
    late_restored: AtomicU64,
    foreign: AtomicU64,
    deferred: AtomicU64,
    deferred_behind: AtomicU64,
    deferred_cc: AtomicU64,
    deferred_quarantine: AtomicU64,
    deferred_capacity: AtomicU64,
    deferred_retired: AtomicU64,
    deferred_posted: AtomicU64,
    deferred_flushed: AtomicU64,
    enomem: AtomicU64,
    provider_errors: AtomicU64,
    faults: AtomicU64,
}

/// One managed RC QP.
pub(crate) struct QpSlot {
    qp: AtomicUsize,
    ctx: AtomicU32,
    qpn: AtomicU32,
    send_cq: AtomicUsize,
    phase: AtomicU8,
    /// Whether `endpoint` names an endpoint not yet retired for a reset.
    has_endpoint: AtomicBool,
    endpoint: AtomicU64,
    route: AtomicU32,
    device: AtomicU16,
    /// Held-back work requests now (fast check without the post lock).
    deferred: AtomicU32,
    /// Listed in `State::flush_waiting` (dead, with held-back work).
    flush_listed: AtomicBool,
    index: u32,
    slice_base: u32,
    /// Every token posted on the QP, in posting order (producer: the post
    /// lock; consumer: the send CQ's lock).
    order: PostOrder,
    post: Mutex<PostSide>,
    c: QpCounters,
}

/// One tracked CQ.
#[derive(Default)]
pub(crate) struct CqSlot {
    ptr: AtomicUsize,
    lock: Mutex<()>,
    polls: AtomicU64,
}

/// Route domains: (local device, remote address) → route index.
struct Routes {
    keys: Vec<Option<(u16, [u8; 16])>>,
    warned_full: bool,
}

/// Process-wide counters outside the QP slots (control path).
#[derive(Default)]
struct Globals {
    contexts: AtomicU64,
    qps_created: AtomicU64,
    qps_not_rc: AtomicU64,
    qps_over_capacity: AtomicU64,
    qps_ext: AtomicU64,
    cqs_ext: AtomicU64,
    qps_mlx5dv: AtomicU64,
    flushed_at_teardown: AtomicU64,
    deferred_dropped: AtomicU64,
    async_events: AtomicU64,
    retired: AtomicU64,
    reclaimed: AtomicU64,
    abandoned: AtomicU64,
    panics: AtomicU64,
    passthrough_unknown: AtomicU64,
    foreign_unknown: AtomicU64,
    late_restored: AtomicU64,
}

/// The preload's state (one per process; see the module docs).
pub struct State {
    pub(crate) cfg: PreloadConfig,
    pub(crate) stack: HotPathTables<u32>,
    control: Mutex<HotPathControl>,
    key: u64,
    /// The application's `wr_id` of every posted token.
    cookies: TokenCookies,
    pub(crate) ctxs: Box<[CtxSlot]>,
    qps: Box<[QpSlot]>,
    qp_by_ptr: Lookup,
    qp_by_num: Lookup,
    cqs: Box<[CqSlot]>,
    cq_by_ptr: Lookup,
    /// CQ slots ever used (the monitor sums their poll counts only).
    cq_slots_used: AtomicUsize,
    /// Serialises creation and destruction (the lookups' one writer).
    writer: Mutex<()>,
    /// Polls of CQs this state does not track.
    spare_cq: Mutex<()>,
    routes: Mutex<Routes>,
    devices: u16,
    deferred_total: AtomicU64,
    flush_waiting: AtomicU32,
    g: Globals,
    warned: [AtomicBool; 5],
}

/// Which one-time warning (each printed once per process).
#[derive(Clone, Copy)]
pub(crate) enum Warn {
    OverCapacity = 0,
    Ext = 1,
    NotRc = 2,
    Mlx5dv = 3,
    ExtCq = 4,
}

/// Why a work request is held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// Behind work already held back on the QP (posting order).
    Behind,
    Cc,
    Quarantine,
    Capacity,
    Retired,
}

fn qpn_key(ctx: u32, qpn: u32) -> u64 {
    ((u64::from(ctx) + 1) << 32) | u64::from(qpn)
}

fn random_key() -> u64 {
    let mut k = 0u64;
    // SAFETY: writes at most 8 bytes into `k`.
    let n = unsafe { libc::getrandom(&mut k as *mut u64 as *mut libc::c_void, 8, 0) };
    if n != 8 {
        // SAFETY: getpid has no preconditions.
        k = now_ns() ^ (u64::from(unsafe { libc::getpid() } as u32) << 40);
    }
    k | 1
}

impl State {
    /// Builds the state for `devices` local devices (every table and queue
    /// slot allocated here).
    pub fn new(cfg: PreloadConfig, devices: u16) -> Result<Self, String> {
        let devices = devices.max(1);
        let qps = cfg.qps as usize;
        let depth = cfg.qp_depth;
        let sc = HotPathConfig {
            tokens: cfg.tokens as usize,
            slices: qps * depth as usize,
            endpoints: EndpointConfig {
                capacity: cfg.qps,
                qps_per_endpoint: 1,
                max_wr_per_qp: depth,
                drain_timeout_ns: 5_000_000_000,
            },
            max_retries: 0,
            cc: cfg.cc,
            devices,
            route_devices: vec![0; cfg.routes as usize],
            rail: None,
            credit: None,
        };
        let (stack, control) = HotPathTables::<u32>::new(&sc).map_err(|e| e.to_string())?;
        let order_err = |e| format!("{e:?}");
        let slots = (0..qps)
            .map(|i| {
                Ok(QpSlot {
                    qp: AtomicUsize::new(0),
                    ctx: AtomicU32::new(0),
                    qpn: AtomicU32::new(0),
                    send_cq: AtomicUsize::new(0),
                    phase: AtomicU8::new(FREE),
                    has_endpoint: AtomicBool::new(false),
                    endpoint: AtomicU64::new(0),
                    route: AtomicU32::new(0),
                    device: AtomicU16::new(0),
                    deferred: AtomicU32::new(0),
                    flush_listed: AtomicBool::new(false),
                    index: i as u32,
                    slice_base: (i as u32) * depth,
                    order: PostOrder::new(depth as usize).map_err(order_err)?,
                    post: Mutex::new(PostSide::default()),
                    c: QpCounters::default(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let e = |e: railyard_core::lookup::LookupError| e.to_string();
        Ok(Self {
            stack,
            control: Mutex::new(control),
            key: random_key(),
            cookies: TokenCookies::new(cfg.tokens as usize),
            ctxs: (0..MAX_CONTEXTS).map(|_| CtxSlot::default()).collect(),
            qps: slots.into_boxed_slice(),
            qp_by_ptr: Lookup::new(qps * 4).map_err(e)?,
            qp_by_num: Lookup::new(qps * 4).map_err(e)?,
            cqs: (0..MAX_CQS).map(|_| CqSlot::default()).collect(),
            cq_by_ptr: Lookup::new(MAX_CQS * 2).map_err(e)?,
            cq_slots_used: AtomicUsize::new(0),
            writer: Mutex::new(()),
            spare_cq: Mutex::new(()),
            routes: Mutex::new(Routes {
                keys: vec![None; cfg.routes as usize],
                warned_full: false,
            }),
            devices,
            deferred_total: AtomicU64::new(0),
            flush_waiting: AtomicU32::new(0),
            g: Globals::default(),
            warned: Default::default(),
            cfg,
        })
    }

    /// Logs `msg` at `level` (stderr, control path only).
    pub(crate) fn log(&self, level: LogLevel, msg: std::fmt::Arguments<'_>) {
        if level <= self.cfg.log && level != LogLevel::Off {
            eprintln!("railyard-preload: {msg}");
        }
    }

    /// Logs a warning once per process.
    pub(crate) fn warn_once(&self, w: Warn, msg: std::fmt::Arguments<'_>) {
        if !self.warned[w as usize].swap(true, Ordering::Relaxed) {
            self.log(LogLevel::Warn, msg);
        }
    }

    /// Counts a panic caught at the boundary.
    pub(crate) fn count_panic(&self) {
        self.g.panics.fetch_add(1, Ordering::Relaxed);
    }

    // ---- contexts and CQs (control path) ----

    /// The slot of context `ctx`, if opened through the preload.
    pub(crate) fn ctx_index(&self, ctx: usize) -> Option<usize> {
        if ctx == 0 {
            return None;
        }
        self.ctxs
            .iter()
            .position(|c| c.ptr.load(Ordering::Acquire) == ctx)
    }

    /// Registers an opened context on `device` with its provider's entry
    /// points; `None` when every context slot is taken.
    pub(crate) fn add_context(
        &self,
        ctx: usize,
        device: u16,
        post_send: PostSendFn,
        poll_cq: PollCqFn,
        vendor_id: u32,
    ) -> Option<usize> {
        let _w = lock(&self.writer);
        let i = self
            .ctxs
            .iter()
            .position(|c| c.ptr.load(Ordering::Relaxed) == 0)?;
        let c = &self.ctxs[i];
        let device = device.min(self.devices - 1);
        c.device.store(device, Ordering::Relaxed);
        c.post_send.store(post_send as usize, Ordering::Relaxed);
        c.poll_cq.store(poll_cq as usize, Ordering::Relaxed);
        c.ptr.store(ctx, Ordering::Release);
        self.g.contexts.fetch_add(1, Ordering::Relaxed);
        if SoftwareProvider::from_vendor_id(vendor_id).is_some() {
            let mut ctl = lock(&self.control);
            let _ = ctl
                .monitor
                .set_drain_signal(device, self.cfg.cc.software_drain_signal());
        }
        self.log(
            LogLevel::Info,
            format_args!("context {ctx:#x} on device {device} (vendor {vendor_id:#x})"),
        );
        Some(i)
    }

    /// Forgets a context (before the provider frees it).
    pub(crate) fn remove_context(&self, ctx: usize) {
        let _w = lock(&self.writer);
        if let Some(i) = self.ctx_index(ctx) {
            self.ctxs[i].ptr.store(0, Ordering::Release);
        }
    }

    /// The provider's `post_send` of context slot `i`.
    pub(crate) fn post_send_of(&self, i: usize) -> Option<PostSendFn> {
        let p = self.ctxs.get(i)?.post_send.load(Ordering::Relaxed);
        // SAFETY: only ever stored from a `PostSendFn` (add_context).
        (p != 0).then(|| unsafe { std::mem::transmute::<usize, PostSendFn>(p) })
    }

    /// The provider's `poll_cq` of context slot `i`.
    pub(crate) fn poll_cq_of(&self, i: usize) -> Option<PollCqFn> {
        let p = self.ctxs.get(i)?.poll_cq.load(Ordering::Relaxed);
        // SAFETY: only ever stored from a `PollCqFn` (add_context).
        (p != 0).then(|| unsafe { std::mem::transmute::<usize, PollCqFn>(p) })
    }

    /// Tracks a new CQ (its own poll lock). Untracked CQs share one lock.
    pub(crate) fn add_cq(&self, cq: usize) {
        let _w = lock(&self.writer);
        if let Some(i) = self
            .cqs
            .iter()
            .position(|c| c.ptr.load(Ordering::Relaxed) == 0)
        {
            self.cqs[i].ptr.store(cq, Ordering::Relaxed);
            let _ = self.cq_by_ptr.insert(cq as u64, i as u32);
            self.cq_slots_used.fetch_max(i + 1, Ordering::Relaxed);
        }
    }

    /// Forgets a CQ about to be destroyed (before the provider frees it:
    /// a CQ created at the same address right after is a new one).
    /// Returns its slot for [`cq_close_aborted`](Self::cq_close_aborted).
    pub(crate) fn remove_cq(&self, cq: usize) -> Option<u32> {
        let _w = lock(&self.writer);
        let i = self.cq_by_ptr.remove(cq as u64)?;
        self.cqs[i as usize].ptr.store(0, Ordering::Relaxed);
        Some(i)
    }

    /// The provider refused to destroy the CQ: tracked again.
    pub(crate) fn cq_close_aborted(&self, cq: usize, i: u32) {
        let _w = lock(&self.writer);
        self.cqs[i as usize].ptr.store(cq, Ordering::Relaxed);
        let _ = self.cq_by_ptr.insert(cq as u64, i);
    }

    /// Counts an object passed through untouched: an extended-API QP
    /// (`Ext`) or CQ (`ExtCq`), or an mlx5dv QP.
    pub(crate) fn count_ext(&self, what: Warn) {
        let c = match what {
            Warn::Ext => &self.g.qps_ext,
            Warn::ExtCq => &self.g.cqs_ext,
            Warn::Mlx5dv => &self.g.qps_mlx5dv,
            Warn::OverCapacity | Warn::NotRc => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn cq_lock(&self, cq: usize) -> (&Mutex<()>, Option<&CqSlot>) {
        match self.cq_by_ptr.get(cq as u64) {
            Some(i) => {
                let s = &self.cqs[i as usize];
                (&s.lock, Some(s))
            }
            None => (&self.spare_cq, None),
        }
    }

    // ---- QPs (control path) ----

    /// Registers a new RC QP (`qp_type` is the QP's type; only RC is
    /// managed). `caps`: (max_send_wr, max_send_sge, max_inline_data) as
    /// the provider granted them.
    pub(crate) fn add_qp(
        &self,
        qp: usize,
        ctx: usize,
        qpn: u32,
        send_cq: usize,
        is_rc: bool,
        caps: (u32, u32, u32),
    ) {
        if !is_rc {
            self.g.qps_not_rc.fetch_add(1, Ordering::Relaxed);
            self.warn_once(
                Warn::NotRc,
                format_args!(
                    "a QP that is not RC is passed through untouched (counted: qps_not_rc)"
                ),
            );
            return;
        }
        let Some(ci) = self.ctx_index(ctx) else {
            return;
        };
        let _w = lock(&self.writer);
        let Some(i) = self
            .qps
            .iter()
            .position(|s| s.phase.load(Ordering::Relaxed) == FREE)
        else {
            self.g.qps_over_capacity.fetch_add(1, Ordering::Relaxed);
            self.warn_once(
                Warn::OverCapacity,
                format_args!(
                    "more than MC_RAILYARD_QPS={} QPs: the rest are passed through untouched (counted: qps_over_capacity)",
                    self.cfg.qps
                ),
            );
            return;
        };
        let s = &self.qps[i];
        let depth = self.cfg.defer_wrs.unwrap_or(caps.0).max(1) as usize;
        {
            let mut side = lock(&s.post);
            *side = PostSide {
                queue: Some(DeferQueue::new(depth, caps.1 as usize, caps.2 as usize)),
                ..PostSide::default()
            };
        }
        let device = self.ctxs[ci].device.load(Ordering::Relaxed);
        s.ctx.store(ci as u32, Ordering::Relaxed);
        s.qpn.store(qpn, Ordering::Relaxed);
        s.send_cq.store(send_cq, Ordering::Relaxed);
        s.device.store(device, Ordering::Relaxed);
        s.route
            .store(self.route_for(device, None), Ordering::Relaxed);
        s.deferred.store(0, Ordering::Relaxed);
        s.qp.store(qp, Ordering::Release);
        s.phase.store(CREATED, Ordering::Release);
        let _ = self.qp_by_ptr.insert(qp as u64, i as u32);
        let _ = self.qp_by_num.insert(qpn_key(ci as u32, qpn), i as u32);
        self.g.qps_created.fetch_add(1, Ordering::Relaxed);
    }

    fn slot_of(&self, qp: usize) -> Option<&QpSlot> {
        let i = self.qp_by_ptr.get(qp as u64)?;
        let s = self.qps.get(i as usize)?;
        (s.qp.load(Ordering::Acquire) == qp).then_some(s)
    }

    /// The route domain of (device, remote address): a free route is bound
    /// on first use; when all are taken, routes of the same device are
    /// shared by hash (said once). `None`: the device's default route.
    fn route_for(&self, device: u16, remote: Option<[u8; 16]>) -> u32 {
        let key = remote.unwrap_or([0; 16]);
        let mut r = lock(&self.routes);
        if let Some(i) = r.keys.iter().position(|k| *k == Some((device, key))) {
            return i as u32;
        }
        if let Some(i) = r.keys.iter().position(|k| k.is_none()) {
            r.keys[i] = Some((device, key));
            let _ = self.stack.cc.rebind_route(i as u32, device);
            return i as u32;
        }
        if !r.warned_full {
            r.warned_full = true;
            drop(r);
            self.log(
                LogLevel::Warn,
                format_args!(
                    "more than MC_RAILYARD_ROUTES={} routes: routes of a device are shared from now on",
                    self.cfg.routes
                ),
            );
            r = lock(&self.routes);
        }
        let same: Vec<usize> = r
            .keys
            .iter()
            .enumerate()
            .filter(|(_, k)| k.is_some_and(|k| k.0 == device))
            .map(|(i, _)| i)
            .collect();
        let h = key
            .iter()
            .fold(0u64, |a, &b| a.wrapping_mul(131).wrapping_add(u64::from(b)));
        same.get((h % same.len().max(1) as u64) as usize)
            .copied()
            .unwrap_or(0) as u32
    }

    /// The QP reached RTR towards `remote` (its GID, or its LID in the
    /// first two bytes): its route domain.
    pub(crate) fn qp_rtr(&self, qp: usize, remote: [u8; 16]) {
        let Some(s) = self.slot_of(qp) else { return };
        let route = self.route_for(s.device.load(Ordering::Relaxed), Some(remote));
        lock(&s.post).pending_route = Some(route);
    }

    /// The QP reached RTS: its endpoint opens (a reconnect of the slot
    /// moves its route to a new generation: late feedback of the old QP
    /// settles accounting only).
    pub(crate) fn qp_rts(&self, qp: usize) {
        let Some(s) = self.slot_of(qp) else { return };
        if s.phase.load(Ordering::Acquire) == ACTIVE {
            return;
        }
        let mut side = lock(&s.post);
        let route = side
            .pending_route
            .unwrap_or_else(|| s.route.load(Ordering::Relaxed));
        if side.connected_before {
            let _ = self.stack.cc.advance_generation(route);
        }
        match self.stack.endpoints.open(s.index) {
            Ok(h) => {
                s.route.store(route, Ordering::Relaxed);
                s.endpoint.store(pack(h), Ordering::Relaxed);
                s.has_endpoint.store(true, Ordering::Relaxed);
                side.connected_before = true;
                s.phase.store(ACTIVE, Ordering::Release);
            }
            Err(e) => self.log(
                LogLevel::Warn,
                format_args!("QP {qp:#x}: no endpoint ({e}); its work passes through untouched"),
            ),
        }
    }

    /// Retires the QP's endpoint (the one retire API, once) and marks the
    /// slot dead if it was active. Takes no lock: the caller syncs the
    /// flush list ([`retire`](Self::retire) does).
    fn mark_dead(&self, s: &QpSlot, reason: RetireReason, now: u64) {
        let _ = s
            .phase
            .compare_exchange(ACTIVE, DEAD, Ordering::AcqRel, Ordering::Acquire);
        if !s.has_endpoint.load(Ordering::Relaxed) {
            return;
        }
        let h = unpack(s.endpoint.load(Ordering::Relaxed));
        if self.stack.endpoints.retire(h, reason, now).is_ok() {
            self.g.retired.fetch_add(1, Ordering::Relaxed);
            self.log(
                LogLevel::Debug,
                format_args!("endpoint {}:{} retired: {reason:?}", h.slot, h.generation),
            );
        }
    }

    /// [`mark_dead`](Self::mark_dead), then the flush list kept exact
    /// (takes the QP's post lock: never call it holding that lock).
    fn retire(&self, s: &QpSlot, reason: RetireReason, now: u64) {
        self.mark_dead(s, reason, now);
        if s.deferred.load(Ordering::Relaxed) > 0 {
            let side = lock(&s.post);
            self.sync_flush(s, &side);
        }
    }

    /// The application moved the QP to ERR / SQE.
    pub(crate) fn qp_error(&self, qp: usize) {
        if let Some(s) = self.slot_of(qp) {
            self.retire(s, RetireReason::QpFatal, now_ns());
        }
    }

    /// The application is about to destroy the QP: from now on nothing
    /// posts to it (held-back work stays until [`qp_reset`](Self::qp_reset)
    /// or [`qp_close_aborted`](Self::qp_close_aborted)). Returns the phase
    /// it had.
    ///
    /// Its address leaves the lookup now, before the provider frees it:
    /// a QP created at the same address right after must not be taken for
    /// this one. The slot and its phase are returned for
    /// [`qp_destroyed`](Self::qp_destroyed) / [`qp_close_aborted`](Self::qp_close_aborted).
    pub(crate) fn qp_closing(&self, qp: usize) -> Option<(u32, u8)> {
        let s = self.slot_of(qp)?;
        let _w = lock(&self.writer);
        let _side = lock(&s.post);
        let _ = self.qp_by_ptr.remove(qp as u64);
        Some((s.index, s.phase.swap(CLOSING, Ordering::AcqRel)))
    }

    /// The provider refused to destroy the QP: it is back in `phase`.
    pub(crate) fn qp_close_aborted(&self, qp: usize, (index, phase): (u32, u8)) {
        let Some(s) = self.qps.get(index as usize) else {
            return;
        };
        let _w = lock(&self.writer);
        let _side = lock(&s.post);
        let _ = self.qp_by_ptr.insert(qp as u64, index);
        let _ = s
            .phase
            .compare_exchange(CLOSING, phase, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The provider destroyed the QP of slot `index` (from
    /// [`qp_closing`](Self::qp_closing)).
    pub(crate) fn qp_destroyed(&self, (index, _): (u32, u8)) {
        if let Some(s) = self.qps.get(index as usize) {
            self.reset_slot(s, true);
        }
    }

    /// The application moved the QP to RESET.
    pub(crate) fn qp_reset(&self, qp: usize) {
        if let Some(s) = self.slot_of(qp) {
            self.reset_slot(s, false);
        }
    }

    /// The QP went to RESET (`destroyed`: it is gone). No completion will
    /// come for what was posted: its tokens complete as flushed, its
    /// held-back work is dropped, its endpoint retires.
    fn reset_slot(&self, s: &QpSlot, destroyed: bool) {
        let now = now_ns();
        let _w = lock(&self.writer);
        self.mark_dead(s, RetireReason::Shutdown, now);
        s.has_endpoint.store(false, Ordering::Relaxed);
        {
            let mut side = lock(&s.post);
            if let Some(q) = side.queue.as_mut() {
                let n = q.len();
                q.pop(n);
                self.g
                    .deferred_dropped
                    .fetch_add(n as u64, Ordering::Relaxed);
                self.deferred_total.fetch_sub(n as u64, Ordering::Relaxed);
            }
            s.deferred.store(0, Ordering::Relaxed);
            self.sync_flush(s, &side);
            if destroyed {
                side.queue = None;
            }
        }
        {
            let (l, _) = self.cq_lock(s.send_cq.load(Ordering::Relaxed));
            let _g = lock(l);
            let owner = self.stack.hot_path();
            for w in s.order.drain() {
                if owner.complete_covered(w, wc::WR_FLUSH_ERR, now).is_ok() {
                    self.g.flushed_at_teardown.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if destroyed {
            let ci = s.ctx.load(Ordering::Relaxed);
            let key = qpn_key(ci, s.qpn.load(Ordering::Relaxed));
            if self
                .qp_by_num
                .get(key)
                .is_some_and(|i| std::ptr::eq(&self.qps[i as usize], s))
            {
                let _ = self.qp_by_num.remove(key);
            }
            s.qp.store(0, Ordering::Release);
            s.phase.store(FREE, Ordering::Release);
        } else {
            s.phase.store(CREATED, Ordering::Release);
        }
    }

    /// Keeps `flush_waiting` (dead QPs with held-back work) exact; call
    /// under the QP's post lock after its queue or phase changed.
    fn sync_flush(&self, s: &QpSlot, _side: &PostSide) {
        let want =
            s.phase.load(Ordering::Acquire) == DEAD && s.deferred.load(Ordering::Relaxed) > 0;
        if s.flush_listed.swap(want, Ordering::Relaxed) != want {
            if want {
                self.flush_waiting.fetch_add(1, Ordering::Relaxed);
            } else {
                self.flush_waiting.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    // ---- the post path ----

    /// `ibv_post_send` on `qp` (see the module docs).
    ///
    /// # Safety
    /// The verbs contract of `ibv_post_send`: `qp` is a live QP, `wr` a
    /// valid chain, `bad` valid for writes; `real` is the provider's
    /// `post_send` for `qp`.
    pub unsafe fn post(
        &self,
        real: PostSendFn,
        qp: *mut ibv_qp,
        wr: *mut ibv_send_wr,
        bad: *mut *mut ibv_send_wr,
    ) -> c_int {
        let Some(s) = self.slot_of(qp as usize) else {
            self.g.passthrough_unknown.fetch_add(1, Ordering::Relaxed);
            // SAFETY: forwarded as given (caller contract).
            return unsafe { real(qp, wr, bad) };
        };
        s.c.post_calls.fetch_add(1, Ordering::Relaxed);
        let phase = s.phase.load(Ordering::Acquire);
        if phase == CREATED || phase == FREE {
            s.c.passthrough.fetch_add(1, Ordering::Relaxed);
            // SAFETY: forwarded as given (caller contract).
            return unsafe { real(qp, wr, bad) };
        }
        let mut side = lock(&s.post);
        let now = now_ns();
        if s.deferred.load(Ordering::Relaxed) > 0 {
            // SAFETY: `qp` is live and `real` its provider's (caller contract).
            unsafe { self.drain_locked(s, &mut side, real, qp, now) };
        }
        if s.deferred.load(Ordering::Relaxed) > 0 {
            // Keep posting order: behind what is already held back.
            // SAFETY: `wr` is a valid chain, `bad` writable (caller contract).
            return unsafe { self.hold(s, &mut side, wr, bad, None) };
        }
        let owner = self.stack.hot_path();
        let mut cur = wr;
        while !cur.is_null() {
            let first = cur;
            let mut last: *mut ibv_send_wr = std::ptr::null_mut();
            let mut n = 0;
            let mut held = None;
            let side = &mut *side;
            while !cur.is_null() && n < SEGMENT {
                // SAFETY: `cur` is an element of the caller's valid chain.
                let w = unsafe { &mut *cur };
                match self.admit(&owner, s, &mut side.seq, wr_bytes(w), now) {
                    Ok(t) => {
                        self.cookies.set(t, w.wr_id);
                        side.scratch.apps[n] = w.wr_id;
                        side.scratch.toks[n] = t;
                        w.wr_id = t ^ self.key;
                        n += 1;
                        last = cur;
                        cur = w.next;
                    }
                    Err(h) => {
                        held = Some(h);
                        break;
                    }
                }
            }
            if n > 0 {
                // SAFETY: `first..=last` are the caller's WRs we just
                // admitted; `last` is non-null when n > 0.
                let rc = unsafe {
                    self.post_segment(
                        &owner,
                        s,
                        real,
                        qp,
                        first,
                        last,
                        &side.scratch.toks[..n],
                        &side.scratch.apps[..n],
                        bad,
                        now,
                    )
                };
                if rc != 0 {
                    return rc;
                }
            }
            if let Some(h) = held {
                // SAFETY: `cur` and the rest of the chain are the caller's.
                return unsafe { self.hold(s, side, cur, bad, Some(h)) };
            }
        }
        0
    }

    /// Posts the admitted segment `first..=last` of the application's own
    /// chain: cut after `last`, recorded, posted, then the chain and every
    /// `wr_id` put back exactly as the application gave them. A `bad_wr`
    /// gives its tokens back and is the application's own pointer.
    ///
    /// # Safety
    /// As [`post`](Self::post); `first..=last` is a run of the chain whose
    /// `wr_id`s were swapped for `toks` (the application's in `apps`).
    #[allow(clippy::too_many_arguments)]
    unsafe fn post_segment(
        &self,
        owner: &HotOwner<'_>,
        s: &QpSlot,
        real: PostSendFn,
        qp: *mut ibv_qp,
        first: *mut ibv_send_wr,
        last: *mut ibv_send_wr,
        toks: &[u64],
        apps: &[u64],
        bad: *mut *mut ibv_send_wr,
        now: u64,
    ) -> c_int {
        let n = toks.len();
        // SAFETY: `last` is a valid element of the chain (caller contract).
        let after = unsafe { (*last).next };
        // SAFETY: as above; restored below before returning.
        unsafe { (*last).next = std::ptr::null_mut() };
        let recorded = s.order.record(toks);
        let mut b: *mut ibv_send_wr = std::ptr::null_mut();
        let rc = if recorded {
            // SAFETY: a valid, terminated chain on a live QP (caller contract).
            unsafe { real(qp, first, &mut b) }
        } else {
            libc::ENOMEM
        };
        // SAFETY: as above: the chain and its wr_ids, back as given.
        unsafe {
            (*last).next = after;
            let mut w = first;
            for &a in apps {
                (*w).wr_id = a;
                w = (*w).next;
            }
        }
        if rc == 0 {
            s.c.posted.fetch_add(n as u64, Ordering::Relaxed);
            return 0;
        }
        // Where the provider stopped (its bad_wr points into our run).
        let mut pos = 0;
        let mut w = first;
        while pos < n && !std::ptr::eq(w, b) {
            // SAFETY: walking the caller's chain within the segment.
            w = unsafe { (*w).next };
            pos += 1;
        }
        if pos == n {
            pos = 0;
            b = first;
        }
        self.give_back(owner, s, toks, pos, recorded, now);
        s.c.posted.fetch_add(pos as u64, Ordering::Relaxed);
        if !bad.is_null() {
            // SAFETY: caller contract: `bad` is valid for writes.
            unsafe { *bad = b };
        }
        rc
    }

    /// The provider took `toks[..pos]` of a recorded (or not) run and
    /// refused the rest: their record entries and tokens are given back.
    fn give_back(
        &self,
        owner: &HotOwner<'_>,
        s: &QpSlot,
        toks: &[u64],
        pos: usize,
        recorded: bool,
        now: u64,
    ) {
        if recorded {
            s.order.retract(toks.len() - pos);
        }
        for &t in &toks[pos..] {
            if owner.unposted(t, now).is_err() {
                s.c.faults.fetch_add(1, Ordering::Relaxed);
            }
        }
        s.c.provider_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Admits one work request of `bytes` on the QP (slice → endpoint →
    /// CC → token, in core); the token, or why it is held back.
    fn admit(
        &self,
        owner: &HotOwner<'_>,
        s: &QpSlot,
        seq: &mut u32,
        bytes: u32,
        now: u64,
    ) -> Result<u64, Hold> {
        if s.phase.load(Ordering::Acquire) != ACTIVE {
            return Err(Hold::Retired);
        }
        let depth = self.cfg.qp_depth;
        let idx = s.slice_base + *seq % depth;
        *seq = seq.wrapping_add(1);
        let slice = self.stack.slices.open(idx).map_err(|_| Hold::Capacity)?;
        let path = Path {
            device: s.device.load(Ordering::Relaxed),
            qp: 0,
            route: s.route.load(Ordering::Relaxed),
            endpoint: unpack(s.endpoint.load(Ordering::Relaxed)),
        };
        match owner.post(PostRequest::on(slice, path, bytes, now)) {
            Ok(p) => Ok(p.wr_id),
            Err(r) => {
                let _ = self.stack.slices.settle(slice, Outcome::Canceled);
                Err(match r {
                    Refusal::Deferred { .. } => Hold::Cc,
                    Refusal::Avoided { .. } | Refusal::NoUsablePath => Hold::Quarantine,
                    Refusal::Endpoint {
                        error: EndpointError::Retired | EndpointError::StaleGeneration,
                        ..
                    } => {
                        // Retired behind our back (an async event): the
                        // post lock is held, so no flush-list sync here;
                        // `hold` does it.
                        self.mark_dead(s, RetireReason::CqError, now);
                        Hold::Retired
                    }
                    _ => Hold::Capacity,
                })
            }
        }
    }

    /// Holds back `wr` and every later request of its chain (copied), in
    /// order; `ENOMEM` with `bad_wr` at the first that does not fit.
    ///
    /// # Safety
    /// `wr` is a valid chain (the verbs contract); `bad` valid for writes.
    unsafe fn hold(
        &self,
        s: &QpSlot,
        side: &mut PostSide,
        wr: *mut ibv_send_wr,
        bad: *mut *mut ibv_send_wr,
        why: Option<Hold>,
    ) -> c_int {
        let Some(q) = side.queue.as_mut() else {
            if !bad.is_null() {
                // SAFETY: caller contract.
                unsafe { *bad = wr };
            }
            return libc::ENOMEM;
        };
        let mut cur = wr;
        let mut n = 0u64;
        let mut rc = 0;
        while !cur.is_null() {
            // SAFETY: `cur` is an element of the caller's valid chain.
            match unsafe { q.push(cur) } {
                Ok(()) => {
                    n += 1;
                    // SAFETY: as above.
                    cur = unsafe { (*cur).next };
                }
                Err(e) => {
                    rc = match e {
                        DeferError::Full => {
                            s.c.enomem.fetch_add(1, Ordering::Relaxed);
                            libc::ENOMEM
                        }
                        DeferError::TooManySge(_) | DeferError::InlineTooLong(_) => libc::EINVAL,
                    };
                    if !bad.is_null() {
                        // SAFETY: caller contract.
                        unsafe { *bad = cur };
                    }
                    break;
                }
            }
        }
        s.deferred.store(q.len() as u32, Ordering::Relaxed);
        self.deferred_total.fetch_add(n, Ordering::Relaxed);
        s.c.deferred.fetch_add(n, Ordering::Relaxed);
        let why = why.unwrap_or(Hold::Behind);
        let c = match why {
            Hold::Behind => &s.c.deferred_behind,
            Hold::Cc => &s.c.deferred_cc,
            Hold::Quarantine => &s.c.deferred_quarantine,
            Hold::Capacity => &s.c.deferred_capacity,
            Hold::Retired => &s.c.deferred_retired,
        };
        c.fetch_add(n, Ordering::Relaxed);
        self.sync_flush(s, side);
        rc
    }

    /// Posts held-back work of the QP, front first, while admission allows.
    ///
    /// # Safety
    /// `qp` is the slot's live QP and `real` its provider's `post_send`.
    unsafe fn drain_locked(
        &self,
        s: &QpSlot,
        side: &mut PostSide,
        real: PostSendFn,
        qp: *mut ibv_qp,
        now: u64,
    ) {
        if s.phase.load(Ordering::Acquire) != ACTIVE {
            return;
        }
        let owner = self.stack.hot_path();
        let Some(mut q) = side.queue.take() else {
            return;
        };
        loop {
            let mut toks = [0u64; SEGMENT];
            let mut n = 0;
            while n < q.len() && n < SEGMENT {
                let bytes = q.bytes(n).unwrap_or(1);
                match self.admit(&owner, s, &mut side.seq, bytes, now) {
                    Ok(t) => {
                        self.cookies.set(t, q.app_id(n).unwrap_or(0));
                        if let Some(w) = q.get_mut(n) {
                            w.wr_id = t ^ self.key;
                        }
                        toks[n] = t;
                        n += 1;
                    }
                    Err(_) => break,
                }
            }
            if n == 0 {
                break;
            }
            let head = q.chain(n);
            let recorded = s.order.record(&toks[..n]);
            let mut b: *mut ibv_send_wr = std::ptr::null_mut();
            let rc = if recorded {
                // SAFETY: `head` is a terminated chain of our own copies;
                // `qp` is live (caller contract).
                unsafe { real(qp, head, &mut b) }
            } else {
                libc::ENOMEM
            };
            let pos = if rc == 0 {
                n
            } else {
                q.position(b, n).unwrap_or(0)
            };
            if pos < n {
                self.give_back(&owner, s, &toks[..n], pos, recorded, now);
                for i in pos..n {
                    let app = q.app_id(i).unwrap_or(0);
                    if let Some(w) = q.get_mut(i) {
                        w.wr_id = app;
                    }
                }
            }
            q.pop(pos);
            s.c.posted.fetch_add(pos as u64, Ordering::Relaxed);
            s.c.deferred_posted.fetch_add(pos as u64, Ordering::Relaxed);
            self.deferred_total.fetch_sub(pos as u64, Ordering::Relaxed);
            if pos < n {
                if rc != libc::ENOMEM && rc != libc::EAGAIN {
                    // The provider will never take it: the QP is unusable
                    // for this work; it completes as flushed.
                    self.mark_dead(s, RetireReason::CqError, now);
                }
                break;
            }
            if q.is_empty() {
                break;
            }
        }
        s.deferred.store(q.len() as u32, Ordering::Relaxed);
        side.queue = Some(q);
        self.sync_flush(s, side);
    }

    /// Tries to post held-back work on every QP of context slot `ci`
    /// (`None`: all), skipping QPs whose post lock is busy.
    pub(crate) fn drain_some(&self, ci: Option<usize>) {
        if self.deferred_total.load(Ordering::Relaxed) == 0 {
            return;
        }
        let now = now_ns();
        for s in self.qps.iter() {
            if s.deferred.load(Ordering::Relaxed) == 0 || s.phase.load(Ordering::Acquire) != ACTIVE
            {
                continue;
            }
            let c = s.ctx.load(Ordering::Relaxed) as usize;
            if ci.is_some_and(|x| x != c) {
                continue;
            }
            let Ok(mut side) = s.post.try_lock() else {
                continue;
            };
            let (Some(real), qp) = (self.post_send_of(c), s.qp.load(Ordering::Acquire)) else {
                continue;
            };
            if qp == 0 {
                continue;
            }
            // SAFETY: `drain_locked` posts only to an ACTIVE slot, checked
            // under this post lock; the destroy path moves the slot to
            // CLOSING under the same lock before the provider destroys the
            // QP, so an ACTIVE slot's QP is live. `real` is its context's
            // provider entry.
            unsafe { self.drain_locked(s, &mut side, real, qp as *mut ibv_qp, now) };
        }
    }

    // ---- the poll path ----

    /// `ibv_poll_cq` on `cq` (see the module docs).
    ///
    /// # Safety
    /// The verbs contract of `ibv_poll_cq`: `cq` is a live CQ and `wc`
    /// holds `n` entries; `real` is the provider's `poll_cq` for `cq`;
    /// `ci` is the CQ's context slot.
    pub unsafe fn poll(
        &self,
        real: PollCqFn,
        ci: usize,
        cq: *mut ibv_cq,
        n: c_int,
        wcs: *mut ibv_wc,
    ) -> c_int {
        let (l, slot) = self.cq_lock(cq as usize);
        let g = lock(l);
        // SAFETY: forwarded as given (caller contract).
        let k = unsafe { real(cq, n, wcs) };
        if let Some(c) = slot {
            c.polls.fetch_add(1, Ordering::Relaxed);
        }
        if k > 0 {
            let now = now_ns();
            let owner = self.stack.hot_path();
            for i in 0..k as usize {
                // SAFETY: the provider wrote `k` entries (caller contract).
                let w = unsafe { &mut *wcs.add(i) };
                self.on_wc(&owner, ci, cq as usize, w, now);
            }
        }
        drop(g);
        let mut k = k;
        if k >= 0 && k < n && self.flush_waiting.load(Ordering::Relaxed) > 0 {
            // SAFETY: `wcs` has room for `n` entries (caller contract).
            k += unsafe { self.flush_held(cq as usize, wcs.add(k as usize), (n - k) as usize) }
                as c_int;
        }
        if self.deferred_total.load(Ordering::Relaxed) > 0 {
            self.drain_some(Some(ci));
        }
        k
    }

    fn on_wc(&self, owner: &HotOwner<'_>, ci: usize, cq: usize, w: &mut ibv_wc, now: u64) {
        let Some(i) = self.qp_by_num.get(qpn_key(ci as u32, w.qp_num)) else {
            // A QP destroyed with completions still in its CQ: those of
            // our tokens are restored from their record (the tokens were
            // completed as flushed at the destroy).
            match self.cookies.get(w.wr_id ^ self.key) {
                Some(a) => {
                    w.wr_id = a;
                    self.g.late_restored.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    self.g.foreign_unknown.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        };
        let s = &self.qps[i as usize];
        if s.send_cq.load(Ordering::Relaxed) != cq {
            return; // the QP's receive CQ: not ours
        }
        let status = w.status;
        if status == wc::SUCCESS && w.opcode & IBV_WC_RECV != 0 {
            return; // a receive on a shared CQ
        }
        let token = w.wr_id ^ self.key;
        let app = self.cookies.get(token);
        // Every request posted before this one on the QP completed with it
        // (RC completes a send queue in order): the unsignaled ones first.
        let cov = s.order.covered_by(token);
        if cov.found() {
            for c in cov {
                if owner.complete_covered(c, status, now).is_ok() {
                    s.c.covered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        match owner.complete(token, status, w.vendor_err, now) {
            Ok(d) => {
                if let Some(a) = app {
                    w.wr_id = a;
                }
                s.c.completions.fetch_add(1, Ordering::Relaxed);
                if d.faults().count() != 0 {
                    s.c.faults.fetch_add(1, Ordering::Relaxed);
                }
                if status != wc::SUCCESS {
                    s.c.errors.fetch_add(1, Ordering::Relaxed);
                    // The QP is in ERR now: retire its endpoint (one API).
                    self.retire(s, RetireReason::CqError, now);
                }
            }
            Err(TokenError::Duplicate | TokenError::Stale) if app.is_some() => {
                w.wr_id = app.unwrap_or(w.wr_id);
                s.c.late_restored.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                s.c.foreign.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Completes held-back work of dead QPs on `cq` whose posted work has
    /// all completed, as `IBV_WC_WR_FLUSH_ERR` (what the provider does with
    /// work posted to a QP in error), into `out` (room for `room`).
    ///
    /// # Safety
    /// `out` is valid for `room` writes.
    unsafe fn flush_held(&self, cq: usize, out: *mut ibv_wc, room: usize) -> usize {
        let mut k = 0;
        for s in self.qps.iter() {
            if k == room {
                break;
            }
            if !s.flush_listed.load(Ordering::Relaxed)
                || s.send_cq.load(Ordering::Relaxed) != cq
                || !s.order.is_empty()
            {
                continue;
            }
            let Ok(mut side) = s.post.try_lock() else {
                continue;
            };
            let qpn = s.qpn.load(Ordering::Relaxed);
            if let Some(q) = side.queue.as_mut() {
                let mut popped = 0;
                while k < room && popped < q.len() {
                    let (app, opcode) = match q.get_mut(popped) {
                        Some(w) => (0u64, w.opcode),
                        None => break,
                    };
                    let app = q.app_id(popped).unwrap_or(app);
                    // SAFETY: `k < room` and `out` has room (caller contract);
                    // an all-zero `ibv_wc` is valid and every field we do not
                    // set stays zero, as a flushed completion reports.
                    unsafe {
                        let wc_out = &mut *out.add(k);
                        *wc_out = std::mem::zeroed();
                        wc_out.wr_id = app;
                        wc_out.status = wc::WR_FLUSH_ERR;
                        wc_out.opcode = wc_opcode(opcode);
                        wc_out.qp_num = qpn;
                    }
                    k += 1;
                    popped += 1;
                }
                q.pop(popped);
                s.c.deferred_flushed
                    .fetch_add(popped as u64, Ordering::Relaxed);
                self.deferred_total
                    .fetch_sub(popped as u64, Ordering::Relaxed);
                s.deferred.store(q.len() as u32, Ordering::Relaxed);
            }
            self.sync_flush(s, &side);
            drop(side);
        }
        k
    }

    // ---- async events ----

    /// An async event of `event_type` on context slot `ci`; `qp` / `cq`:
    /// the event's object, when it names one.
    pub(crate) fn on_event(
        &self,
        ci: usize,
        event_type: u32,
        qp: Option<usize>,
        cq: Option<usize>,
    ) {
        self.g.async_events.fetch_add(1, Ordering::Relaxed);
        let now = now_ns();
        let device = self.ctxs[ci].device.load(Ordering::Relaxed);
        let c = classify_event(event_type);
        let of_cq = |s: &&QpSlot| cq.is_some_and(|c| s.send_cq.load(Ordering::Relaxed) == c);
        let on_ctx = |s: &&QpSlot| {
            s.ctx.load(Ordering::Relaxed) as usize == ci && s.phase.load(Ordering::Acquire) != FREE
        };
        match qp.and_then(|q| self.slot_of(q)) {
            Some(s) => {
                let _ =
                    self.stack
                        .cc
                        .apply_event(&c, device, Some(s.route.load(Ordering::Relaxed)));
            }
            None if cq.is_some() => {
                for s in self.qps.iter().filter(on_ctx).filter(of_cq) {
                    let _ = self.stack.cc.apply_event(
                        &c,
                        device,
                        Some(s.route.load(Ordering::Relaxed)),
                    );
                }
            }
            None => {
                let _ = self.stack.cc.apply_event(&c, device, None);
            }
        }
        match event_action(event_type) {
            EventAction::Ignore => {}
            EventAction::RetireQp(r) => {
                if let Some(s) = qp.and_then(|q| self.slot_of(q)) {
                    self.retire(s, r, now);
                }
            }
            EventAction::RetireAll(r) => {
                for s in self.qps.iter().filter(on_ctx) {
                    if cq.is_none() || of_cq(&s) {
                        self.retire(s, r, now);
                    }
                }
            }
        }
        self.log(
            LogLevel::Info,
            format_args!(
                "async event {event_type} on device {device}: scope {:?}, effect {:?}",
                c.scope, c.effect
            ),
        );
    }

    // ---- the monitor ----

    /// One monitor tick: the CC epoch (poller stalled when work is posted
    /// and no CQ was polled since the last tick), endpoint reclaim, and
    /// held-back work posted where permits freed up. Returns the polls seen.
    pub(crate) fn tick(&self, last_polls: u64) -> u64 {
        let now = now_ns();
        let used = self.cq_slots_used.load(Ordering::Relaxed);
        let polls: u64 = self.cqs[..used]
            .iter()
            .map(|c| c.polls.load(Ordering::Relaxed))
            .sum();
        let poller = if polls == last_polls && self.stack.tokens.in_use() > 0 {
            PollerStatus::Stalled
        } else {
            PollerStatus::Progressing
        };
        {
            let mut ctl = lock(&self.control);
            let _ = ctl.monitor.on_epoch(&self.stack.cc, now, poller);
        }
        let local = self.stack.endpoints.register();
        let guard = local.pin();
        let _ = self.stack.endpoints.poll_reclaim(now, &guard, |e| match e {
            ReclaimEvent::Reclaimed { .. } => {
                self.g.reclaimed.fetch_add(1, Ordering::Relaxed);
            }
            ReclaimEvent::Abandoned { .. } => {
                self.g.abandoned.fetch_add(1, Ordering::Relaxed);
            }
            ReclaimEvent::ForceFlush { .. } => {}
        });
        self.drain_some(None);
        polls
    }

    // ---- stats ----

    /// Every counter and gauge now.
    pub fn stats(&self) -> PreloadStats {
        let sum = |f: fn(&QpCounters) -> &AtomicU64| -> u64 {
            self.qps
                .iter()
                .map(|s| f(&s.c).load(Ordering::Relaxed))
                .sum()
        };
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let cc = &self.stack.cc;
        let mut cc_in_flight = 0;
        for r in 0..cc.routes() as u32 {
            cc_in_flight += cc.route_snapshot(r).map_or(0, |s| s.in_flight);
        }
        for d in 0..cc.devices() as u16 {
            cc_in_flight += cc.device_snapshot(d).map_or(0, |s| s.in_flight);
        }
        PreloadStats {
            cc_mode: cc.mode().as_str(),
            cc_compiled_in: Controller::compiled_in(),
            contexts: g(&self.g.contexts),
            qps_created: g(&self.g.qps_created),
            qps_live: self
                .qps
                .iter()
                .filter(|s| s.phase.load(Ordering::Relaxed) != FREE)
                .count() as u64,
            qps_not_rc: g(&self.g.qps_not_rc),
            qps_over_capacity: g(&self.g.qps_over_capacity),
            qps_ext: g(&self.g.qps_ext),
            cqs_ext: g(&self.g.cqs_ext),
            qps_mlx5dv: g(&self.g.qps_mlx5dv),
            post_calls: sum(|c| &c.post_calls),
            posted_wrs: sum(|c| &c.posted),
            passthrough_wrs: sum(|c| &c.passthrough) + g(&self.g.passthrough_unknown),
            completions: sum(|c| &c.completions),
            covered: sum(|c| &c.covered),
            error_completions: sum(|c| &c.errors),
            flushed_at_teardown: g(&self.g.flushed_at_teardown),
            late_restored: sum(|c| &c.late_restored) + g(&self.g.late_restored),
            foreign_completions: sum(|c| &c.foreign) + g(&self.g.foreign_unknown),
            deferred_wrs: sum(|c| &c.deferred),
            deferred_behind: sum(|c| &c.deferred_behind),
            deferred_cc: sum(|c| &c.deferred_cc),
            deferred_quarantine: sum(|c| &c.deferred_quarantine),
            deferred_capacity: sum(|c| &c.deferred_capacity),
            deferred_retired: sum(|c| &c.deferred_retired),
            deferred_posted: sum(|c| &c.deferred_posted),
            deferred_flushed: sum(|c| &c.deferred_flushed),
            deferred_dropped: g(&self.g.deferred_dropped),
            deferred_now: self.deferred_total.load(Ordering::Relaxed),
            enomem_returns: sum(|c| &c.enomem),
            provider_post_errors: sum(|c| &c.provider_errors),
            async_events: g(&self.g.async_events),
            endpoints_retired: g(&self.g.retired),
            endpoints_reclaimed: g(&self.g.reclaimed),
            endpoints_abandoned: g(&self.g.abandoned),
            endpoints_live: self.stack.endpoints.live() as u64,
            tokens_in_use: self.stack.tokens.in_use() as u64,
            endpoint_outstanding: self.stack.endpoints.outstanding_total(),
            cc_in_flight,
            release_faults: sum(|c| &c.faults) + cc.stats().underflow_refusals,
            panics: g(&self.g.panics),
        }
    }
}

/// The completion opcode of a flushed work request of `wr_opcode`
/// (`enum ibv_wr_opcode` → `enum ibv_wc_opcode`).
fn wc_opcode(wr_opcode: u32) -> u32 {
    match wr_opcode {
        0 | 1 => 1,     // RDMA_WRITE[_WITH_IMM] → RDMA_WRITE
        2 | 3 | 9 => 0, // SEND[_WITH_IMM | _WITH_INV] → SEND
        4 => 2,         // RDMA_READ
        5 => 3,         // ATOMIC_CMP_AND_SWP → COMP_SWAP
        6 => 4,         // ATOMIC_FETCH_AND_ADD → FETCH_ADD
        7 => 7,         // LOCAL_INV
        8 => 5,         // BIND_MW
        10 => 8,        // TSO
        other => other,
    }
}
