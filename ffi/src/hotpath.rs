//! The composed hot path (`railyard_core::completion`): the way a C or C++
//! transport integrates railyard. One object owns the token pool, the
//! slice and endpoint tables, the congestion controller and, if
//! configured, the rail selector and the receiver-credit ledger; every
//! posted work request goes through `ry_hotpath_post` and every polled
//! completion through `ry_hotpath_complete`. The transport never takes a
//! permit, a rail charge or a credit itself, and never maps a WC status to
//! what happens to its slice.
//!
//! | transport event | call |
//! |---|---|
//! | a QP pair (endpoint) is connected | `ry_hotpath_endpoint_open` (its `cookie`: your endpoint pointer or id) |
//! | a fragment (slice) is created | `ry_hotpath_slice_open` (optionally with an `ry_task` for anomaly evidence) |
//! | right before `ibv_post_send` | `ry_hotpath_post` → `wr.wr_id`, or a typed refusal (`RY_STATUS_POST_REFUSED`) |
//! | `ibv_post_send` returned `bad_wr` | `ry_hotpath_unposted` for each WR from `bad_wr` on |
//! | `ibv_poll_cq` returned a WC | `ry_hotpath_complete(wc.wr_id, wc.status, wc.vendor_err)` → settle / retry / stale |
//! | an async event | `ry_hotpath_async_event` (classified, applied at its scope) |
//! | the endpoint is torn down (any reason) | `ry_hotpath_endpoint_retire`; destroy its QPs when `ry_hotpath_poll_reclaim` reports it reclaimed |
//! | every control epoch (monitor thread) | `ry_hotpath_on_epoch`, `ry_hotpath_poll_reclaim` |
//! | a reconnect replaced a route's QPs | `ry_hotpath_new_generation` |
//!
//! Every post and completion that has something to say records it in the
//! slice's `ry_task` (if one was given at `ry_hotpath_slice_open`): a
//! refusal's `BYTE_WINDOW` / `PATH_QUARANTINED` / credit pressure, an
//! error completion's class, a success resolves; query it with
//! `ry_task_state_get` / `ry_task_detail_get` (RFC 4162 anomaly queries).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use railyard_core::cc::PollerStatus;
use railyard_core::classify::classify_event;
use railyard_core::completion::{
    CreditDemand, HotPathConfig, HotPathControl, HotPathTables, InvalidPost, Path, PathChoice,
    PostRequest, Refusal, SliceEffect,
};
use railyard_core::credit::{Charge, LedgerConfig};
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, ReclaimEvent, RetireReason};
use railyard_core::evidence::Observation;
use railyard_core::rail::DeviceSpec;
use railyard_core::slice::{Outcome, SliceRef, SliceState};

use crate::cc::{ry_cc_config, ry_epoch_report};
use crate::classify::{ry_event_classification, ry_wc_classification};
use crate::credit::{
    charge_or_zero, ry_charge, ry_credit_ledger_config, ry_credit_update, ry_credit_usage,
    ry_session_id, ry_update_outcome, update_outcome,
};
use crate::enums::{ry_domain_kind, ry_poller_status, ry_reason};
use crate::error::{guard, ret, ret_opt, Error, Result, RyStatus};
use crate::evidence::{ry_task, with_task};
use crate::handle::Registry;
use crate::mirror::{mirror, CEnum};
use crate::ptr::{in_ref, in_slice, write_out};
use crate::rail::ry_rail_config;
use crate::token::ry_token_record;

/// A hot-path handle. Zero is never valid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_hotpath {
    /// Opaque handle bits.
    pub bits: u64,
}

/// How to build a hot path. Fill with `ry_hotpath_config_default`, then
/// edit.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_hotpath_config {
    /// The congestion controller (mode off keeps it off).
    pub cc: ry_cc_config,
    /// The rail selector, used when `rail_enabled` is nonzero.
    pub rail: ry_rail_config,
    /// The sender credit ledger, used when `credit_enabled` is nonzero.
    pub credit: ry_credit_ledger_config,
    /// How long a retired endpoint may drain before a forced flush (ns).
    pub drain_timeout_ns: u64,
    /// Every device's nominal link rate for the rail selector (bytes/s).
    pub nominal_bps: u64,
    /// Token pool capacity: posted attempts in flight at once.
    pub tokens: u32,
    /// Slice table capacity (slice indices are `0..slices`).
    pub slices: u32,
    /// Endpoint table capacity.
    pub endpoints: u32,
    /// Send-queue depth per QP (posts outstanding per QP at most).
    pub max_wr_per_qp: u32,
    /// QPs per endpoint.
    pub qps_per_endpoint: u16,
    /// Retry budget per slice.
    pub max_retries: u16,
    /// Local devices (device domains, rails).
    pub devices: u16,
    /// Nonzero: the rail selector chooses among a post's candidate paths.
    pub rail_enabled: u8,
    /// Nonzero: posts may consume receiver credit (RFC 2849).
    pub credit_enabled: u8,
}

impl ry_hotpath_config {
    fn to_core(self, route_devices: &[u16]) -> Result<HotPathConfig> {
        let cc = self.cc.to_core()?;
        let rail = if self.rail_enabled != 0 {
            let spec = DeviceSpec::new(self.nominal_bps);
            Some((self.rail.to_core()?, vec![spec; usize::from(self.devices)]))
        } else {
            None
        };
        let credit = (self.credit_enabled != 0).then_some(LedgerConfig::from(self.credit));
        Ok(HotPathConfig {
            tokens: self.tokens as usize,
            slices: self.slices as usize,
            endpoints: EndpointConfig {
                capacity: self.endpoints,
                qps_per_endpoint: self.qps_per_endpoint,
                max_wr_per_qp: self.max_wr_per_qp,
                drain_timeout_ns: self.drain_timeout_ns,
            },
            max_retries: self.max_retries,
            cc,
            devices: self.devices,
            route_devices: route_devices.to_vec(),
            rail,
            credit,
        })
    }
}

/// An endpoint handle: slot and generation (a reclaimed slot is reused
/// only with a new generation, so an old handle can never act on its
/// replacement).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_endpoint {
    /// Slot in the endpoint table.
    pub slot: u32,
    /// Generation of the slot.
    pub generation: u32,
}

impl From<ry_endpoint> for EndpointHandle {
    fn from(e: ry_endpoint) -> Self {
        EndpointHandle {
            slot: e.slot,
            generation: e.generation,
        }
    }
}

impl From<EndpointHandle> for ry_endpoint {
    fn from(h: EndpointHandle) -> Self {
        ry_endpoint {
            slot: h.slot,
            generation: h.generation,
        }
    }
}

/// A slice and the attempt the caller believes current.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_slice_ref {
    /// Slice index (`0..slices`).
    pub index: u32,
    /// Attempt id.
    pub attempt: u32,
}

impl From<ry_slice_ref> for SliceRef {
    fn from(s: ry_slice_ref) -> Self {
        SliceRef {
            index: s.index,
            attempt: s.attempt,
        }
    }
}

impl From<SliceRef> for ry_slice_ref {
    fn from(s: SliceRef) -> Self {
        ry_slice_ref {
            index: s.index,
            attempt: s.attempt,
        }
    }
}

/// One resolved RDMA path: device (rail), route domain, endpoint, QP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_path {
    /// The endpoint carrying the path.
    pub endpoint: ry_endpoint,
    /// Route domain (local device × remote NIC).
    pub route: u32,
    /// Local device (rail).
    pub device: u16,
    /// QP index within the endpoint.
    pub qp: u16,
}

impl From<ry_path> for Path {
    fn from(p: ry_path) -> Self {
        Path {
            device: p.device,
            qp: p.qp,
            route: p.route,
            endpoint: p.endpoint.into(),
        }
    }
}

/// Most candidate paths one post may name.
pub const RY_HOTPATH_MAX_PATHS: usize = 64;

/// What a post consumes of receiver credit (RFC 2849).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_credit_use {
    /// Not credit-gated (a READ, or credit off).
    None = 0,
    /// A direct WRITE: DATA_BYTES + REQUEST_SLOT + CONSUMER_SLOT.
    DirectWrite = 1,
    /// A staged WRITE: the direct charge plus a STAGING_SLOT.
    StagedWrite = 2,
}

/// One post: the slice attempt, its bytes, its peer and the candidate
/// paths (one = the caller resolved it; several = the rail layer chooses,
/// never a quarantined one while another is usable).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ry_post_request {
    /// The caller's clock (ns).
    pub now_ns: u64,
    /// `n_paths` candidate paths (1..=`RY_HOTPATH_MAX_PATHS`).
    pub paths: *const ry_path,
    /// Number of candidates.
    pub n_paths: usize,
    /// The slice attempt.
    pub slice: ry_slice_ref,
    /// Bytes in this work request (nonzero).
    pub bytes: u32,
    /// Remote peer (segment id), meaningful if `has_peer`.
    pub peer: u32,
    /// Credit QoS class, with `credit_use` other than NONE.
    pub credit_class: u32,
    /// `ry_credit_use`.
    pub credit_use: u32,
    /// Nonzero if `peer` is known (peer 0 is a real peer).
    pub has_peer: u8,
    /// Reserved, zero.
    pub reserved: [u8; 7],
}

/// Who refused a post (`RY_REFUSAL_NONE` when it was posted).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_refusal {
    /// Posted.
    None = 0,
    /// The slice attempt is not current (or the slice is terminal).
    Slice = 1,
    /// No candidate path is usable at all.
    NoUsablePath = 2,
    /// The endpoint refused (retired, stale generation, QP full):
    /// `detail_status` is its `RY_STATUS_ENDPOINT_*`.
    Endpoint = 3,
    /// CC deferred (`BYTE_WINDOW`): `domain`, `window`, `in_flight`.
    Deferred = 4,
    /// CC avoided a quarantined path (`PATH_QUARANTINED`): `domain`.
    Avoided = 5,
    /// Receiver credit is short or not open: `exhausted`, `peer`, `class`.
    Backpressure = 6,
    /// No token is free.
    Token = 7,
}

/// The result of `ry_hotpath_post`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_post_result {
    /// The work-request id to post with (when posted).
    pub wr_id: u64,
    /// `ry_domain_kind` window of a deferral: its window.
    pub window: u64,
    /// In-flight bytes of the deferring domain.
    pub in_flight: u64,
    /// `ry_refusal`.
    pub refusal: u32,
    /// `ry_reason` recorded as task evidence, or `RY_REASON_NONE`.
    pub reason: u32,
    /// The status of the refusing layer (`RY_STATUS_ENDPOINT_*`,
    /// `RY_STATUS_SLICE_*`, `RY_STATUS_TOKEN_*`), 0 if none.
    pub detail_status: i32,
    /// Index in `paths` of the path posted on (or refused on).
    pub path_index: u32,
    /// `ry_domain_kind` of a deferral or avoidance.
    pub domain: u32,
    /// Credit backpressure: exhausted resources (`RY_RESOURCE_*` bits).
    pub exhausted: u32,
    /// Credit backpressure: the peer and class.
    pub credit_peer: u32,
    /// Credit backpressure: the QoS class.
    pub credit_class: u32,
    /// `RY_HOLDS_*` bits the posted record holds.
    pub holds: u8,
    /// Candidates dropped before the one admitted (quarantined, refused endpoint).
    pub skipped: u8,
    /// The rail layer's choice was a probe.
    pub rail_probe: u8,
    /// The rail layer fell back to NIC-scope feedback.
    pub rail_fallback: u8,
}

/// What a completion did to its slice.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_slice_effect {
    /// The slice settled: `slice_state` says how.
    Settled = 0,
    /// Retry: re-queue the slice as `next_slice` (a new attempt).
    Retry = 1,
    /// A stale attempt's completion: it released its own resources only.
    StaleReleaseOnly = 2,
}

/// A slice's state (`ry_completion.slice_state`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_slice_state {
    /// Never opened, or reset.
    Idle = 0,
    /// Open.
    Pending = 1,
    /// Succeeded.
    Succeeded = 2,
    /// Failed.
    Failed = 3,
    /// Timed out.
    TimedOut = 4,
    /// Canceled.
    Canceled = 5,
}

mirror!(ry_slice_state <=> SliceState: Idle, Pending, Succeeded, Failed, TimedOut, Canceled);
mirror!(ry_credit_use: None, DirectWrite, StagedWrite);

/// The result of `ry_hotpath_complete`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_completion {
    /// The record the token owned (holds all released by now).
    pub record: ry_token_record,
    /// The WC's classification (computed once, here).
    pub wc: ry_wc_classification,
    /// The next attempt, with `effect == RY_SLICE_EFFECT_RETRY`.
    pub next_slice: ry_slice_ref,
    /// `ry_slice_effect`.
    pub effect: u32,
    /// `ry_slice_state` with `effect == RY_SLICE_EFFECT_SETTLED`.
    pub slice_state: u32,
    /// `RY_HOLDS_*` bits the record held.
    pub held: u8,
    /// This completion drained a retired endpoint: run `ry_hotpath_poll_reclaim`.
    pub drained: u8,
    /// The endpoint had been abandoned and reclaimed (a late completion).
    pub endpoint_stale: u8,
    /// The CC permit came from an older route generation (accounting only).
    pub cc_stale: u8,
    /// Layers that refused their release (`RY_FAULT_*` bits; 0 when correct).
    pub faults: u8,
    /// Reserved, zero.
    pub reserved: [u8; 3],
}

/// What `ry_hotpath_poll_reclaim` reports about one endpoint.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_reclaim_kind {
    /// The drain timed out: move the endpoint's QPs to ERR now (the NIC
    /// then flushes its posted work).
    ForceFlush = 0,
    /// Drained: destroy the QPs; the slot is free.
    Reclaimed = 1,
    /// Never drained: reclaimed anyway (late completions get stale).
    Abandoned = 2,
}

/// One reclaim event.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_reclaim_event {
    /// The endpoint's cookie.
    pub cookie: u64,
    /// The endpoint.
    pub endpoint: ry_endpoint,
    /// `ry_reclaim_kind`.
    pub kind: u32,
    /// Posts still outstanding (for ForceFlush / Abandoned).
    pub outstanding: u32,
}

/// A reclaim callback: called once per event, on the calling thread.
pub type ry_reclaim_fn =
    Option<unsafe extern "C" fn(user: *mut core::ffi::c_void, ev: *const ry_reclaim_event)>;

/// The hot path's counters and leak gauges.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_hotpath_stats {
    /// Posts admitted.
    pub posts: u64,
    /// Posts refused, by `ry_refusal` (index 0 unused).
    pub refusals: [u64; 8],
    /// Completions processed.
    pub completions: u64,
    /// Completions of stale attempts (released only their own holds).
    pub stale_completions: u64,
    /// Completions that started a retry.
    pub retries: u64,
    /// `wr_id`s refused by the token pool (duplicate, stale, forged).
    pub bad_wr_ids: u64,
    /// Unposted releases (`bad_wr` tails).
    pub unposted: u64,
    /// Releases a layer refused (must stay 0).
    pub faults: u64,
    /// Tokens owned by posted attempts now.
    pub tokens_in_use: u64,
    /// Posts counted in endpoints now.
    pub endpoint_outstanding: u64,
    /// Bytes in flight in every CC domain (device + route).
    pub cc_in_flight: u64,
    /// Bytes charged to every rail and not released.
    pub rail_in_flight: u64,
}

/// Counters, each on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

pub(crate) struct HotPathHandle {
    stack: HotPathTables<()>,
    /// Per endpoint slot: (generation, cookie), written at open; read by
    /// reclaim under the same lock, so a reopened slot never lends its
    /// cookie to an older generation's event.
    cookies: Mutex<Vec<(u32, u64)>>,
    control: Mutex<HotPathControl>,
    /// Per slice index: the `ry_task` handle bits its evidence goes to (0 = none).
    tasks: Box<[AtomicU64]>,
    posts: Padded,
    refusals: [AtomicU64; 8],
    completions: Padded,
    stale: AtomicU64,
    retries: AtomicU64,
    bad: AtomicU64,
    unposted: AtomicU64,
    faults: AtomicU64,
}

impl HotPathHandle {
    /// The hot path's token pool.
    pub(crate) fn tokens(&self) -> &railyard_core::token::TokenPool {
        &self.stack.tokens
    }
}

// Behind an `Arc`: a token cache over the hot path's pool keeps it alive.
static HOTPATHS: Registry<Arc<HotPathHandle>> = Registry::new(8, "hot path");

pub(crate) fn hotpath(h: ry_hotpath) -> Result<crate::handle::Pinned<Arc<HotPathHandle>>> {
    HOTPATHS.get(h.bits)
}

/// Writes a default configuration: 4096 tokens and slices, 256 endpoints
/// of 2 QPs × 256 WRs, 5 s drain timeout, one device, CC off (RFC 4162
/// defaults otherwise), rail and credit off.
///
/// Ownership: writes plain data to `*out`. Thread-safety: pure.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_config_default(out: *mut ry_hotpath_config) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            let d = HotPathConfig::default();
            Ok(ry_hotpath_config {
                cc: ry_cc_config::from(&d.cc),
                rail: ry_rail_config::from(&railyard_core::rail::RailConfig::default()),
                credit: LedgerConfig::default().into(),
                drain_timeout_ns: d.endpoints.drain_timeout_ns,
                nominal_bps: 12_500_000_000,
                tokens: d.tokens as u32,
                slices: d.slices as u32,
                endpoints: d.endpoints.capacity,
                max_wr_per_qp: d.endpoints.max_wr_per_qp,
                qps_per_endpoint: d.endpoints.qps_per_endpoint,
                max_retries: d.max_retries,
                devices: d.devices,
                rail_enabled: 0,
                credit_enabled: 0,
            })
        })
    }
}

/// Builds a hot path. `route_devices[r]` is the device route domain `r` is
/// bound to (`n_routes` routes). Every table is allocated here; nothing on
/// the data path allocates afterwards. An invalid configuration is a typed
/// error naming the part (`RY_STATUS_CC_CONFIG_*`, `RY_STATUS_RAIL_CONFIG`,
/// `RY_STATUS_CREDIT_CONFIG`, `RY_STATUS_HOTPATH_CONFIG`) and builds nothing.
///
/// Ownership: `*out` is the caller's; destroy it with `ry_hotpath_destroy`.
/// Thread-safety: any thread.
///
/// # Safety
/// `cfg` is valid for reads; `route_devices` holds `n_routes` values (NULL
/// only with `n_routes == 0`); `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_create(
    cfg: *const ry_hotpath_config,
    route_devices: *const u16,
    n_routes: usize,
    out: *mut ry_hotpath,
) -> RyStatus {
    // SAFETY: caller contract: `cfg` valid for reads, `route_devices` holds
    // `n_routes` values, `out` valid for writes.
    unsafe {
        ret(out, "out", || {
            let routes = in_slice(route_devices, n_routes, "route_devices")?;
            let sc = in_ref(cfg, "cfg")?.to_core(routes)?;
            let (stack, control) = HotPathTables::<()>::new(&sc).map_err(stack_error)?;
            let bits = HOTPATHS.insert(Arc::new(HotPathHandle {
                stack,
                cookies: Mutex::new(vec![(0, 0); sc.endpoints.capacity as usize]),
                control: Mutex::new(control),
                tasks: (0..sc.slices).map(|_| AtomicU64::new(0)).collect(),
                posts: Padded::default(),
                refusals: Default::default(),
                completions: Padded::default(),
                stale: AtomicU64::new(0),
                retries: AtomicU64::new(0),
                bad: AtomicU64::new(0),
                unposted: AtomicU64::new(0),
                faults: AtomicU64::new(0),
            }))?;
            Ok(ry_hotpath { bits })
        })
    }
}

fn stack_error(e: railyard_core::completion::HotPathError) -> Error {
    use railyard_core::completion::HotPathError as E;
    match e {
        E::Tokens(t) => t.into(),
        E::Slices(s) => s.into(),
        E::Endpoints(x) => x.into(),
        E::Cc(c) => c.into(),
        E::Rail(r) => r.into(),
        E::Credit(c) => c.into(),
        E::RailDevices { .. } => Error::new(RyStatus::HotpathConfig, e),
    }
}

/// Destroys a hot path. Posted attempts still in flight are forgotten:
/// destroy only after every QP is drained or destroyed.
///
/// Ownership: consumes the handle; every copy becomes invalid.
/// Thread-safety: any thread; calls racing on other threads finish on the
/// old object, later ones get `RY_STATUS_INVALID_HANDLE`.
#[no_mangle]
pub extern "C" fn ry_hotpath_destroy(hp: ry_hotpath) -> RyStatus {
    guard(|| HOTPATHS.remove(hp.bits))
}

/// Opens an endpoint (one connected QP set) carrying `cookie` (your
/// endpoint pointer or id; handed back in completions and reclaim events).
///
/// Ownership: writes `*out`. Thread-safety: any thread (control path).
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_endpoint_open(
    hp: ry_hotpath,
    cookie: u64,
    out: *mut ry_endpoint,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            let h = hotpath(hp)?;
            let mut c = h.cookies.lock().unwrap_or_else(|e| e.into_inner());
            let e = h.stack.endpoints.open(())?;
            if let Some(x) = c.get_mut(e.slot as usize) {
                *x = (e.generation, cookie);
            }
            Ok(e.into())
        })
    }
}

/// Retires an endpoint: the one teardown API (CQ error, QP fatal, device
/// fatal, GID change, passive-handshake stale, eviction, shutdown). From
/// this call on it admits no post; its posted work drains; destroy its QPs
/// only when `ry_hotpath_poll_reclaim` reports it reclaimed. `reason` is
/// 1..=7 (`CQ_ERROR`, `QP_FATAL`, `CONTEXT_FATAL`, `GID_CHANGE`,
/// `PASSIVE_HANDSHAKE_STALE`, `STORE_EVICTION`, `SHUTDOWN`).
///
/// Ownership: none. Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn ry_hotpath_endpoint_retire(
    hp: ry_hotpath,
    endpoint: ry_endpoint,
    reason: u32,
    now_ns: u64,
) -> RyStatus {
    guard(|| {
        let h = hotpath(hp)?;
        let r = RetireReason::ALL
            .into_iter()
            .find(|r| *r as u32 == reason)
            .ok_or_else(|| Error::invalid(format_args!("reason: {reason} is not 1..=7")))?;
        Ok(h.stack.endpoints.retire(endpoint.into(), r, now_ns)?)
    })
}

/// Runs endpoint reclamation at `now_ns` (monitor thread): calls `cb(user,
/// event)` for every endpoint that drained (destroy its QPs), whose drain
/// timed out (move its QPs to ERR) or that was abandoned. Writes how many
/// were reclaimed to `*reclaimed_out` (optional).
///
/// Ownership: the event pointer is valid during the callback only.
/// Thread-safety: any thread; meant for one monitor thread.
///
/// # Safety
/// `cb` is NULL or a function safe to call with `user`; `reclaimed_out` is
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_poll_reclaim(
    hp: ry_hotpath,
    now_ns: u64,
    cb: ry_reclaim_fn,
    user: *mut core::ffi::c_void,
    reclaimed_out: *mut u32,
) -> RyStatus {
    // SAFETY: caller contract: `cb` is NULL or safe to call with `user`,
    // `reclaimed_out` NULL or valid for writes.
    unsafe {
        ret_opt(reclaimed_out, || {
            let h = hotpath(hp)?;
            let local = h.stack.endpoints.register();
            let g = local.pin();
            let mut events: Vec<ry_reclaim_event> = Vec::new();
            let n = {
                let cookies = h.cookies.lock().unwrap_or_else(|e| e.into_inner());
                h.stack.endpoints.poll_reclaim(now_ns, &g, |e| {
                    let (kind, handle, outstanding) = match e {
                        ReclaimEvent::ForceFlush {
                            handle,
                            outstanding,
                        } => (ry_reclaim_kind::ForceFlush, handle, outstanding),
                        ReclaimEvent::Reclaimed { handle, .. } => {
                            (ry_reclaim_kind::Reclaimed, handle, 0)
                        }
                        ReclaimEvent::Abandoned {
                            handle,
                            outstanding,
                        } => (ry_reclaim_kind::Abandoned, handle, outstanding),
                    };
                    let cookie = match cookies.get(handle.slot as usize) {
                        Some(&(g, c)) if g == handle.generation => c,
                        _ => 0,
                    };
                    events.push(ry_reclaim_event {
                        cookie,
                        endpoint: handle.into(),
                        kind: kind as u32,
                        outstanding,
                    });
                })?
            };
            if let Some(f) = cb {
                for ev in &events {
                    f(user, ev);
                }
            }
            Ok(n as u32)
        })
    }
}

/// Opens slice `index` (a fragment of a transfer) as a new attempt and
/// names the `ry_task` its anomaly evidence goes to (`task.bits == 0`:
/// none). Writes the attempt to `*out`.
///
/// Ownership: the task handle is not owned; keep it alive while the slice
/// is open. Thread-safety: any thread.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_slice_open(
    hp: ry_hotpath,
    index: u32,
    task: ry_task,
    out: *mut ry_slice_ref,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            let h = hotpath(hp)?;
            let s = h.stack.slices.open(index)?;
            if let Some(t) = h.tasks.get(index as usize) {
                t.store(task.bits, Ordering::Release);
            }
            Ok(s.into())
        })
    }
}

/// Settles a slice's current attempt by the caller's decision: `outcome`
/// 0 = canceled, 1 = timed out, 2 = failed. A posted attempt of it still
/// completes later, releasing only its own holds.
///
/// Ownership: none. Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn ry_hotpath_slice_settle(
    hp: ry_hotpath,
    slice: ry_slice_ref,
    outcome: u32,
) -> RyStatus {
    guard(|| {
        let h = hotpath(hp)?;
        let o = match outcome {
            0 => Outcome::Canceled,
            1 => Outcome::TimedOut,
            2 => Outcome::Failure,
            v => return Err(Error::invalid(format_args!("outcome: {v} is not 0..=2"))),
        };
        h.stack.slices.settle(slice.into(), o)?;
        Ok(())
    })
}

fn refusal_code(r: &Refusal) -> ry_refusal {
    match r {
        Refusal::Slice(_) => ry_refusal::Slice,
        Refusal::NoUsablePath => ry_refusal::NoUsablePath,
        Refusal::Endpoint { .. } => ry_refusal::Endpoint,
        Refusal::Deferred { .. } => ry_refusal::Deferred,
        Refusal::Avoided { .. } => ry_refusal::Avoided,
        Refusal::Backpressure(_) => ry_refusal::Backpressure,
        Refusal::Token(_) => ry_refusal::Token,
        Refusal::Invalid(_) => ry_refusal::None,
    }
}

fn invalid_error(e: InvalidPost) -> Error {
    match e {
        InvalidPost::ZeroBytes => Error::from(railyard_core::cc::AcquireError::ZeroBytes),
        InvalidPost::NoCandidates => Error::invalid("n_paths: a post needs at least one path"),
        InvalidPost::BadCandidate(d) => {
            Error::invalid(format_args!("paths: device {d} named twice, or beyond 63"))
        }
        InvalidPost::Cc(a) => a.into(),
        InvalidPost::Rail(r) => r.into(),
        InvalidPost::Credit(k) => k.into(),
        InvalidPost::CreditRecord(r) => r.into(),
    }
}

fn record_evidence(h: &HotPathHandle, slice: SliceRef, o: Option<Observation>) {
    let Some(o) = o else { return };
    let Some(t) = h.tasks.get(slice.index as usize) else {
        return;
    };
    let bits = t.load(Ordering::Acquire);
    if bits != 0 {
        let _ = with_task(ry_task { bits }, |e| e.record(slice, o));
    }
}

fn task_of(h: &HotPathHandle, slice: SliceRef) -> Option<ry_task> {
    let bits = h.tasks.get(slice.index as usize)?.load(Ordering::Acquire);
    (bits != 0).then_some(ry_task { bits })
}

/// Admits and tokenizes one post, right before `ibv_post_send`, through
/// the one composed hot path: slice attempt → rail choice → endpoint →
/// rail charge → CC → credit → token. Returns `RY_STATUS_OK` with
/// `out->wr_id` to post with; or `RY_STATUS_POST_REFUSED` with the typed
/// refusal in `*out` (nothing held; the refusal's evidence is recorded in
/// the slice's task); or a typed error for invalid input (nothing held).
///
/// Ownership: reads `*req` and its paths during the call; writes `*out`.
/// Thread-safety: any thread, concurrently (lock-free; never allocates).
///
/// # Safety
/// `req` is valid for reads and `req->paths` holds `req->n_paths` paths;
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_post(
    hp: ry_hotpath,
    req: *const ry_post_request,
    out: *mut ry_post_result,
) -> RyStatus {
    // SAFETY: the caller's contract is `post`'s.
    guard(|| unsafe { post(hp, None, req, out) })
}

/// `ry_hotpath_post`, claiming the token through `cache` (this thread's
/// `ry_token_cache`, from `ry_hotpath_token_cache_create` on this hot
/// path): the same admission order, refusals, `wr_id` and errors, but the
/// claim touches no shared cache line until the cache runs dry. A cache of
/// another hot path or pool is `RY_STATUS_TOKEN_CACHE_WRONG_POOL` (nothing
/// held). A `RY_REFUSAL_TOKEN` refusal means the cache and the pool were
/// empty; it also asked every other cache to return its free tokens.
///
/// Ownership: as `ry_hotpath_post`. Thread-safety: any thread; `cache` is
/// the calling thread's (a cache in use by another thread at that moment is
/// bypassed: the token comes from the pool directly).
///
/// # Safety
/// As `ry_hotpath_post`.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_post_via(
    hp: ry_hotpath,
    cache: crate::token_cache::ry_token_cache,
    req: *const ry_post_request,
    out: *mut ry_post_result,
) -> RyStatus {
    // SAFETY: the caller's contract is `post`'s.
    guard(|| unsafe { post(hp, Some(cache), req, out) })
}

/// Runs `$call` on `$owner` through the token source `$cache` names:
/// `Option<ry_token_cache>`, `None` for the pool. A wrong pool is a typed
/// error before anything is done.
macro_rules! via {
    ($h:expr, $cache:expr, $src:ident => $call:expr) => {
        match $cache {
            None => {
                let $src = &mut ();
                $call
            }
            Some(c) => {
                let c = crate::token_cache::lookup(c)?;
                let lock = c.lock_for($h.tokens())?;
                let r = match lock {
                    Some(mut g) => crate::token_cache::with_cache!(&mut *g, $src => $call),
                    None => {
                        let $src = &mut ();
                        $call
                    }
                };
                r
            }
        }
    };
}

/// The body of `ry_hotpath_post` / `ry_hotpath_post_via`.
///
/// # Safety
/// `req` is valid for reads and `req->paths` holds `req->n_paths` paths;
/// `out` is valid for writes.
unsafe fn post(
    hp: ry_hotpath,
    cache: Option<crate::token_cache::ry_token_cache>,
    req: *const ry_post_request,
    out: *mut ry_post_result,
) -> Result<()> {
    {
        let h = hotpath(hp)?;
        // SAFETY: caller contract: valid for reads.
        let r = *unsafe { in_ref(req, "req") }?;
        // SAFETY: caller contract: `n_paths` valid paths.
        let cpaths = unsafe { in_slice(r.paths, r.n_paths, "paths") }?;
        if out.is_null() {
            return Err(Error::null("out"));
        }
        if cpaths.len() > RY_HOTPATH_MAX_PATHS {
            return Err(Error::invalid(format_args!(
                "n_paths: {} is more than {RY_HOTPATH_MAX_PATHS}",
                cpaths.len()
            )));
        }
        let mut buf = [Path::default(); RY_HOTPATH_MAX_PATHS];
        for (b, p) in buf.iter_mut().zip(cpaths) {
            *b = (*p).into();
        }
        let paths = &buf[..cpaths.len()];
        let slice: SliceRef = r.slice.into();
        let choice = match paths {
            [one] => PathChoice::Fixed(*one),
            many => PathChoice::Pick(many),
        };
        let charge = match ry_credit_use::from_u32(r.credit_use, "credit_use")? {
            ry_credit_use::None => None,
            ry_credit_use::DirectWrite => Some(Charge::direct_write(r.bytes)),
            ry_credit_use::StagedWrite => Some(Charge::staged_write(r.bytes)),
        };
        let credit = match charge {
            None => None,
            Some(charge) => {
                let ledger = h.stack.credit.as_ref().ok_or_else(|| {
                    Error::invalid("credit_use: this hot path was built with credit off")
                })?;
                if r.has_peer == 0 {
                    return Err(Error::invalid("credit_use needs a known peer (has_peer)"));
                }
                let entry = ledger.entry(r.peer, r.credit_class)?;
                Some(CreditDemand { entry, charge })
            }
        };
        let req = PostRequest {
            slice,
            bytes: r.bytes,
            peer: (r.has_peer != 0).then_some(r.peer),
            credit,
            path: choice,
            now: r.now_ns,
        };
        let owner = h.stack.hot_path();
        let index_of = |p: &Path| paths.iter().position(|x| x == p).unwrap_or(0) as u32;
        let mut o = ry_post_result::default();
        let posted = via!(h, cache, src => owner.post_via(src, req));
        let status = match posted {
            Ok(p) => {
                h.posts.0.fetch_add(1, Ordering::Relaxed);
                o.wr_id = p.wr_id;
                o.path_index = index_of(&p.path);
                o.holds = p.holds;
                o.skipped = p.skipped;
                if let Some(c) = p.rail {
                    o.rail_probe = u8::from(c.probe);
                    o.rail_fallback = u8::from(c.fallback);
                }
                RyStatus::Ok
            }
            Err(Refusal::Invalid(e)) => return Err(invalid_error(e)),
            Err(refusal) => {
                let code = refusal_code(&refusal);
                h.refusals[code as usize].fetch_add(1, Ordering::Relaxed);
                o.refusal = code as u32;
                o.reason = refusal
                    .reason()
                    .map_or(crate::classify::RY_REASON_NONE, |x| {
                        ry_reason::from(x) as u32
                    });
                if let Some(p) = refusal.path() {
                    o.path_index = index_of(&p);
                }
                match refusal {
                    Refusal::Slice(e) => o.detail_status = Error::from(e).status as i32,
                    Refusal::Endpoint { error, .. } => {
                        o.detail_status = Error::from(error).status as i32
                    }
                    Refusal::Token(e) => o.detail_status = Error::from(e).status as i32,
                    Refusal::Deferred { deferral, .. } => {
                        o.domain = ry_domain_kind::from(deferral.domain) as u32;
                        o.window = deferral.window;
                        o.in_flight = deferral.in_flight;
                    }
                    Refusal::Avoided { avoidance, .. } => {
                        o.domain = ry_domain_kind::from(avoidance.domain) as u32;
                    }
                    Refusal::Backpressure(b) => {
                        o.exhausted = u32::from(b.exhausted.bits());
                        o.credit_peer = b.peer;
                        o.credit_class = b.qos_class;
                    }
                    Refusal::NoUsablePath | Refusal::Invalid(_) => {}
                }
                record_evidence(&h, slice, owner.refusal_observation(&refusal, r.now_ns));
                RyStatus::PostRefused
            }
        };
        // SAFETY: caller contract: valid for writes.
        unsafe { write_out(out, o, "out") }?;
        if status == RyStatus::PostRefused {
            return Err(Error::new(
                RyStatus::PostRefused,
                "post refused; see ry_post_result.refusal",
            ));
        }
        Ok(())
    }
}

/// Releases a tokenized work request that never reached the NIC (the
/// `bad_wr` tail of a partially posted chain): its token and every hold
/// its record names, without feedback. The slice's attempt stays current:
/// re-queue it as it is. A duplicate or stale `wr_id` is a typed error and
/// changes nothing.
///
/// Ownership: none. Thread-safety: any thread.
#[no_mangle]
pub extern "C" fn ry_hotpath_unposted(hp: ry_hotpath, wr_id: u64, now_ns: u64) -> RyStatus {
    guard(|| unposted(hp, None, wr_id, now_ns))
}

/// `ry_hotpath_unposted`, returning the token to `cache` (the calling
/// thread's, over this hot path: `RY_STATUS_TOKEN_CACHE_WRONG_POOL`
/// otherwise, nothing released). The same typed errors.
///
/// Ownership: none. Thread-safety: any thread; `cache` is the caller's.
#[no_mangle]
pub extern "C" fn ry_hotpath_unposted_via(
    hp: ry_hotpath,
    cache: crate::token_cache::ry_token_cache,
    wr_id: u64,
    now_ns: u64,
) -> RyStatus {
    guard(|| unposted(hp, Some(cache), wr_id, now_ns))
}

fn unposted(
    hp: ry_hotpath,
    cache: Option<crate::token_cache::ry_token_cache>,
    wr_id: u64,
    now_ns: u64,
) -> Result<()> {
    let h = hotpath(hp)?;
    let owner = h.stack.hot_path();
    let (_, rel) = via!(h, cache, src => owner.unposted_via(src, wr_id, now_ns))?;
    h.unposted.fetch_add(1, Ordering::Relaxed);
    if rel.faults().count() != 0 {
        h.faults.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Processes one polled completion: hands the token's record back exactly
/// once, classifies the WC once (RFC 4162's table), releases every hold in
/// reverse admission order (the endpoint last), and settles or retries the
/// slice only if the attempt is current (RFC 3136). Evidence goes to the
/// slice's task: a success resolves it, an error records its class.
///
/// A duplicate, stale, forged or out-of-range `wr_id` gets its
/// `RY_STATUS_TOKEN_*` and changes nothing.
///
/// Ownership: writes `*out`. Thread-safety: any thread, concurrently.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_complete(
    hp: ry_hotpath,
    wr_id: u64,
    status: u32,
    vendor_err: u32,
    now_ns: u64,
    out: *mut ry_completion,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            complete(hp, None, wr_id, status, vendor_err, now_ns)
        })
    }
}

/// `ry_hotpath_complete`, returning the token to `cache` (the calling
/// thread's `ry_token_cache` over this hot path, whichever thread or cache
/// claimed it; `RY_STATUS_TOKEN_CACHE_WRONG_POOL` otherwise, nothing
/// completed): the same exactly-once record, release order, slice rules
/// and typed errors.
///
/// Ownership: writes `*out`. Thread-safety: any thread; `cache` is the
/// caller's (bypassed for the pool if another thread is using it).
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_complete_via(
    hp: ry_hotpath,
    cache: crate::token_cache::ry_token_cache,
    wr_id: u64,
    status: u32,
    vendor_err: u32,
    now_ns: u64,
    out: *mut ry_completion,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            complete(hp, Some(cache), wr_id, status, vendor_err, now_ns)
        })
    }
}

/// The body of `ry_hotpath_complete` / `ry_hotpath_complete_via`.
fn complete(
    hp: ry_hotpath,
    cache: Option<crate::token_cache::ry_token_cache>,
    wr_id: u64,
    status: u32,
    vendor_err: u32,
    now_ns: u64,
) -> Result<ry_completion> {
    {
        let h = hotpath(hp)?;
        let owner = h.stack.hot_path();
        let done =
            via!(h, cache, src => owner.complete_via(src, wr_id, status, vendor_err, now_ns));
        let d = match done {
            Ok(d) => d,
            Err(e) => {
                h.bad.fetch_add(1, Ordering::Relaxed);
                return Err(e.into());
            }
        };
        h.completions.0.fetch_add(1, Ordering::Relaxed);
        if d.faults().count() != 0 {
            h.faults.fetch_add(1, Ordering::Relaxed);
        }
        let slice = d.record.slice;
        let (effect, state, next) = match d.slice {
            SliceEffect::Settled(s) => (ry_slice_effect::Settled, s, SliceRef::default()),
            SliceEffect::Retry(n) => {
                h.retries.fetch_add(1, Ordering::Relaxed);
                (ry_slice_effect::Retry, SliceState::Pending, n)
            }
            SliceEffect::StaleReleaseOnly => {
                h.stale.fetch_add(1, Ordering::Relaxed);
                (
                    ry_slice_effect::StaleReleaseOnly,
                    SliceState::Idle,
                    SliceRef::default(),
                )
            }
        };
        // Evidence of the current attempt only.
        if effect != ry_slice_effect::StaleReleaseOnly {
            if let Some(t) = task_of(&h, slice) {
                match owner.completion_observation(&d, now_ns) {
                    None => {
                        let _ = with_task(t, |e| e.resolve(slice, now_ns));
                    }
                    Some(o) => {
                        let _ = with_task(t, |e| {
                            e.record(slice, o);
                            if effect == ry_slice_effect::Retry {
                                e.begin_attempt(next);
                            }
                        });
                    }
                }
            }
        }
        Ok(ry_completion {
            record: ry_token_record::from(&d.record),
            wc: ry_wc_classification::from(&d.wc),
            next_slice: next.into(),
            effect: effect as u32,
            slice_state: ry_slice_state::from(state) as u32,
            held: d.record.holds,
            drained: u8::from(d.released.endpoint == Ok(true)),
            endpoint_stale: u8::from(d.released.endpoint.is_err()),
            cc_stale: u8::from(d.released.cc() == Some(railyard_core::cc::Settlement::Stale)),
            faults: d.faults().bits(),
            reserved: [0; 3],
        })
    }
}

/// One control epoch at `now_ns` (the monitor thread): AIMD, hysteresis,
/// the health state machine, cooldowns and pending software timeouts
/// (suppressed when `poller` is `RY_POLLER_STATUS_STALLED`).
/// `*report_out` is optional.
///
/// Ownership: writes `*report_out`. Thread-safety: serialised by an
/// internal mutex the data path never takes.
///
/// # Safety
/// `report_out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_on_epoch(
    hp: ry_hotpath,
    now_ns: u64,
    poller: u32,
    report_out: *mut ry_epoch_report,
) -> RyStatus {
    // SAFETY: caller contract: `report_out` NULL or valid for writes.
    unsafe {
        ret_opt(report_out, || {
            let h = hotpath(hp)?;
            let poller: PollerStatus = ry_poller_status::to_core(poller, "poller")?;
            let mut c = h.control.lock().unwrap_or_else(|e| e.into_inner());
            Ok(c.monitor.on_epoch(&h.stack.cc, now_ns, poller).into())
        })
    }
}

/// Route value meaning "no route" in `ry_hotpath_async_event`.
pub const RY_HOTPATH_NO_ROUTE: u32 = u32::MAX;

/// An async event (`ibv_async_event.event_type`) on local `device`
/// (`route`: the route of the event's QP, or `RY_HOTPATH_NO_ROUTE`):
/// classified (RFC 4162's async-event table) and applied to the
/// controller at its scope and no wider (core's `Controller::apply_event`)
/// — QP / CQ / route scope to `route`, port scope to every route bound to
/// `device`, device scope to the device domain. A `device` or `route` out
/// of range is `RY_STATUS_CC_NO_SUCH_DEVICE` / `RY_STATUS_CC_NO_SUCH_ROUTE`.
/// Retiring the affected endpoints is the caller's (through
/// `ry_hotpath_endpoint_retire`), at the classification's scope (core's
/// `event_action`). `*out` (optional) gets the classification.
///
/// Ownership: writes `*out`. Thread-safety: any thread.
///
/// # Safety
/// `out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_async_event(
    hp: ry_hotpath,
    event_type: u32,
    device: u16,
    route: u32,
    out: *mut ry_event_classification,
) -> RyStatus {
    // SAFETY: caller contract: `out` NULL or valid for writes.
    unsafe {
        ret_opt(out, || {
            let h = hotpath(hp)?;
            let c = classify_event(event_type);
            let route = (route != RY_HOTPATH_NO_ROUTE).then_some(route);
            h.stack.cc.apply_event(&c, device, route)?;
            Ok(ry_event_classification::from(&c))
        })
    }
}

/// The transport replaced `route`'s QPs (a reconnect): the route moves to
/// a new generation, its state kept; late completions of the old QPs only
/// settle accounting. Writes the new generation to `*out` (optional).
///
/// Ownership: writes `*out`. Thread-safety: any thread.
///
/// # Safety
/// `out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_new_generation(
    hp: ry_hotpath,
    route: u32,
    out: *mut u32,
) -> RyStatus {
    // SAFETY: caller contract: `out` NULL or valid for writes.
    unsafe {
        ret_opt(out, || {
            Ok(hotpath(hp)?.stack.cc.advance_generation(route)?)
        })
    }
}

fn credit_control<T>(
    h: &HotPathHandle,
    f: impl FnOnce(
        &railyard_core::credit::SenderLedger,
        &mut railyard_core::credit::SenderControl,
    ) -> Result<T>,
) -> Result<T> {
    let ledger = h
        .stack
        .credit
        .as_ref()
        .ok_or_else(|| Error::invalid("this hot path was built with credit off"))?;
    let mut c = h.control.lock().unwrap_or_else(|e| e.into_inner());
    let ctl = c
        .credit
        .as_mut()
        .ok_or_else(|| Error::invalid("this hot path was built with credit off"))?;
    f(ledger, ctl)
}

/// Binds `peer` to a receiver session and epoch (after capability
/// negotiation, or on a new session / epoch): older epochs' commits and
/// completions are fenced from then on.
///
/// Ownership: none. Thread-safety: control path (internal mutex).
#[no_mangle]
pub extern "C" fn ry_hotpath_credit_bind(
    hp: ry_hotpath,
    peer: u32,
    session: ry_session_id,
    epoch: u64,
) -> RyStatus {
    guard(|| {
        let h = hotpath(hp)?;
        credit_control(&h, |l, c| Ok(c.bind(l, peer, session.into(), epoch)?))
    })
}

/// Applies a receiver's credit update for `peer` (identity from the
/// endpoint, never the payload). `*outcome_out` is optional.
///
/// Ownership: reads `*update`. Thread-safety: control path.
///
/// # Safety
/// `update` is valid for reads; `outcome_out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_credit_apply_update(
    hp: ry_hotpath,
    peer: u32,
    update: *const ry_credit_update,
    now_ns: u64,
    outcome_out: *mut ry_update_outcome,
) -> RyStatus {
    // SAFETY: caller contract: `update` valid for reads, `outcome_out` NULL
    // or valid for writes.
    unsafe {
        ret_opt(outcome_out, || {
            let h = hotpath(hp)?;
            let u = in_ref(update, "update")?.to_core()?;
            let o = credit_control(&h, |l, c| Ok(c.apply_update(l, peer, &u, now_ns)?))?;
            Ok(update_outcome(o).0)
        })
    }
}

/// Builds `(peer, class)`'s usage report (cumulative consumed, released
/// and returned totals) for the receiver, with an optional pending demand.
///
/// Ownership: writes `*out`. Thread-safety: control path.
///
/// # Safety
/// `pending_demand` is NULL or valid for reads; `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_credit_usage_report(
    hp: ry_hotpath,
    peer: u32,
    class: u32,
    pending_demand: *const ry_charge,
    out: *mut ry_credit_usage,
) -> RyStatus {
    // SAFETY: caller contract: `pending_demand` NULL or valid for reads,
    // `out` valid for writes.
    unsafe {
        ret(out, "out", || {
            let h = hotpath(hp)?;
            let demand = charge_or_zero(pending_demand);
            let u = credit_control(&h, |l, c| Ok(c.usage(l, peer, class, demand)?))?;
            Ok(ry_credit_usage::from_core(&u))
        })
    }
}

/// The hot path's counters and leak gauges (every gauge is 0 when nothing
/// is in flight).
///
/// Ownership: writes `*out`. Thread-safety: any thread (a snapshot of
/// independent counters).
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_hotpath_stats_get(
    hp: ry_hotpath,
    out: *mut ry_hotpath_stats,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            let h = hotpath(hp)?;
            let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
            let cc = &h.stack.cc;
            let cc_in_flight = (0..cc.devices() as u16)
                .filter_map(|d| cc.device_snapshot(d))
                .chain((0..cc.routes() as u32).filter_map(|r| cc.route_snapshot(r)))
                .map(|s| s.in_flight)
                .fold(0u64, u64::saturating_add);
            let rail_in_flight = h.stack.rail.as_ref().map_or(0, |r| {
                (0..r.len())
                    .filter_map(|d| r.nic_inflight(d))
                    .fold(0u64, u64::saturating_add)
            });
            Ok(ry_hotpath_stats {
                posts: l(&h.posts.0),
                refusals: std::array::from_fn(|i| l(&h.refusals[i])),
                completions: l(&h.completions.0),
                stale_completions: l(&h.stale),
                retries: l(&h.retries),
                bad_wr_ids: l(&h.bad),
                unposted: l(&h.unposted),
                faults: l(&h.faults),
                tokens_in_use: h.stack.tokens.in_use() as u64,
                endpoint_outstanding: h.stack.endpoints.outstanding_total(),
                cc_in_flight,
                rail_in_flight,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_core::classify::wc;

    fn build(credit: bool, rail: bool, mode: u32) -> ry_hotpath {
        let mut c = std::mem::MaybeUninit::<ry_hotpath_config>::uninit();
        let st = {
            // SAFETY: valid out-pointer.
            unsafe { ry_hotpath_config_default(c.as_mut_ptr()) }
        };
        assert_eq!(st, RyStatus::Ok);
        // SAFETY: initialised by the call above.
        let mut c = unsafe { c.assume_init() };
        c.cc.mode = mode;
        c.devices = 2;
        c.rail_enabled = u8::from(rail);
        c.credit_enabled = u8::from(credit);
        let routes = [0u16, 1];
        let mut hp = ry_hotpath::default();
        // SAFETY: valid pointers.
        let st = unsafe { ry_hotpath_create(&c, routes.as_ptr(), 2, &mut hp) };
        assert_eq!(st, RyStatus::Ok);
        hp
    }

    fn open_ep(hp: ry_hotpath, cookie: u64) -> ry_endpoint {
        let mut e = ry_endpoint::default();
        let st = {
            // SAFETY: valid out-pointer.
            unsafe { ry_hotpath_endpoint_open(hp, cookie, &mut e) }
        };
        assert_eq!(st, RyStatus::Ok);
        e
    }

    fn slice(hp: ry_hotpath, i: u32) -> ry_slice_ref {
        let mut s = ry_slice_ref::default();
        let st = {
            // SAFETY: valid out-pointer.
            unsafe { ry_hotpath_slice_open(hp, i, ry_task::default(), &mut s) }
        };
        assert_eq!(st, RyStatus::Ok);
        s
    }

    fn post(
        hp: ry_hotpath,
        s: ry_slice_ref,
        paths: &[ry_path],
        bytes: u32,
    ) -> (RyStatus, ry_post_result) {
        let req = ry_post_request {
            now_ns: 1,
            paths: paths.as_ptr(),
            n_paths: paths.len(),
            slice: s,
            bytes,
            peer: 0,
            credit_class: 0,
            credit_use: 0,
            has_peer: 1,
            reserved: [0; 7],
        };
        let mut o = ry_post_result::default();
        // SAFETY: valid pointers.
        let st = unsafe { ry_hotpath_post(hp, &req, &mut o) };
        (st, o)
    }

    fn stats(hp: ry_hotpath) -> ry_hotpath_stats {
        let mut s = ry_hotpath_stats::default();
        // SAFETY: valid out-pointer.
        assert_eq!(unsafe { ry_hotpath_stats_get(hp, &mut s) }, RyStatus::Ok);
        s
    }

    #[test]
    fn post_complete_retry_and_leak_gauges_through_the_c_abi() {
        let hp = build(false, true, 2 /* enforce */);
        let paths = [0u16, 1].map(|d| ry_path {
            endpoint: open_ep(hp, 100 + u64::from(d)),
            route: u32::from(d),
            device: d,
            qp: 0,
        });
        let s = slice(hp, 3);
        let (st, p) = post(hp, s, &paths, 65536);
        assert_eq!(st, RyStatus::Ok);
        assert_ne!(stats(hp).cc_in_flight, 0);
        // A flush completion retries on a new attempt.
        let mut c = std::mem::MaybeUninit::<ry_completion>::uninit();
        // SAFETY: valid out-pointer.
        let st =
            unsafe { ry_hotpath_complete(hp, p.wr_id, wc::WR_FLUSH_ERR, 0, 2, c.as_mut_ptr()) };
        assert_eq!(st, RyStatus::Ok);
        // SAFETY: written by the call.
        let c = unsafe { c.assume_init() };
        assert_eq!(c.effect, ry_slice_effect::Retry as u32);
        assert_eq!(c.next_slice.attempt, s.attempt + 1);
        assert_eq!(c.record.device, paths[p.path_index as usize].device);
        // The same wr_id again: a typed duplicate, nothing moves.
        let mut c2 = std::mem::MaybeUninit::<ry_completion>::uninit();
        // SAFETY: valid out-pointer.
        let st = unsafe { ry_hotpath_complete(hp, p.wr_id, 0, 0, 3, c2.as_mut_ptr()) };
        assert_eq!(st, RyStatus::TokenDuplicate);
        // The retry, refused by a stale attempt first.
        let (st, r) = post(hp, s, &paths, 65536);
        assert_eq!(
            (st, r.refusal),
            (RyStatus::PostRefused, ry_refusal::Slice as u32)
        );
        assert_eq!(r.detail_status, RyStatus::SliceStaleAttempt as i32);
        let (st, p2) = post(hp, c.next_slice, &paths, 65536);
        assert_eq!(st, RyStatus::Ok);
        let st = {
            // SAFETY: valid.
            unsafe { ry_hotpath_complete(hp, p2.wr_id, 0, 0, 4, c2.as_mut_ptr()) }
        };
        assert_eq!(st, RyStatus::Ok);
        let s = stats(hp);
        assert_eq!(
            (
                s.tokens_in_use,
                s.endpoint_outstanding,
                s.cc_in_flight,
                s.rail_in_flight
            ),
            (0, 0, 0, 0)
        );
        assert_eq!(
            (s.posts, s.completions, s.retries, s.bad_wr_ids, s.faults),
            (2, 2, 1, 1, 0)
        );
        assert_eq!(s.refusals[ry_refusal::Slice as usize], 1);
        assert_eq!(ry_hotpath_destroy(hp), RyStatus::Ok);
        assert_eq!(ry_hotpath_destroy(hp), RyStatus::InvalidHandle);
    }

    #[test]
    fn bad_input_is_typed_and_holds_nothing() {
        let hp = build(false, false, 2);
        let ep = open_ep(hp, 1);
        let s = slice(hp, 0);
        let good = [ry_path {
            endpoint: ep,
            route: 0,
            device: 0,
            qp: 0,
        }];
        assert_eq!(post(hp, s, &good, 0).0, RyStatus::CcZeroBytes);
        assert_eq!(post(hp, s, &[], 10).0, RyStatus::InvalidArgument);
        let bad_route = [ry_path {
            route: 77,
            ..good[0]
        }];
        assert_eq!(post(hp, s, &bad_route, 10).0, RyStatus::CcNoSuchRoute);
        let bad_qp = [ry_path { qp: 9, ..good[0] }];
        let (st, r) = post(hp, s, &bad_qp, 10);
        assert_eq!(
            (st, r.refusal),
            (RyStatus::PostRefused, ry_refusal::Endpoint as u32)
        );
        assert_eq!(r.detail_status, RyStatus::EndpointBadQp as i32);
        // NULL pointers.
        let mut o = ry_post_result::default();
        let st = {
            // SAFETY: NULL is refused before any read.
            unsafe { ry_hotpath_post(hp, std::ptr::null(), &mut o) }
        };
        assert_eq!(st, RyStatus::NullArgument);
        assert_eq!(ry_hotpath_unposted(hp, 12345, 0), RyStatus::TokenOutOfRange);
        assert_eq!(
            ry_hotpath_endpoint_retire(hp, ep, 99, 0),
            RyStatus::InvalidArgument
        );
        // A retired endpoint refuses posts and drains.
        assert_eq!(ry_hotpath_endpoint_retire(hp, ep, 1, 0), RyStatus::Ok);
        let (st, r) = post(hp, s, &good, 10);
        assert_eq!(
            (st, r.refusal),
            (RyStatus::PostRefused, ry_refusal::Endpoint as u32)
        );
        unsafe extern "C" fn count(user: *mut core::ffi::c_void, ev: *const ry_reclaim_event) {
            // SAFETY: the test passes a valid *mut u32 and a valid event.
            unsafe {
                assert_eq!((*ev).cookie, 1);
                *(user as *mut u32) += 1;
            }
        }
        let mut seen = 0u32;
        let mut n = 0u32;
        // SAFETY: valid callback and pointers.
        let st = unsafe {
            ry_hotpath_poll_reclaim(hp, 10, Some(count), (&mut seen as *mut u32).cast(), &mut n)
        };
        assert_eq!((st, seen, n), (RyStatus::Ok, 1, 1));
        let s = stats(hp);
        assert_eq!(
            (s.tokens_in_use, s.endpoint_outstanding, s.cc_in_flight),
            (0, 0, 0)
        );
        // Credit use on a stack without credit is a typed error.
        let s2 = slice(hp, 1);
        let ep2 = open_ep(hp, 2);
        let req = ry_post_request {
            now_ns: 1,
            paths: &ry_path {
                endpoint: ep2,
                route: 0,
                device: 0,
                qp: 0,
            },
            n_paths: 1,
            slice: s2,
            bytes: 10,
            peer: 0,
            credit_class: 0,
            credit_use: 1,
            has_peer: 1,
            reserved: [0; 7],
        };
        let st = {
            // SAFETY: valid pointers.
            unsafe { ry_hotpath_post(hp, &req, &mut o) }
        };
        assert_eq!(st, RyStatus::InvalidArgument);
        assert_eq!(ry_hotpath_destroy(hp), RyStatus::Ok);
    }

    #[test]
    fn async_events_land_at_their_scope_and_bad_indices_are_typed_errors() {
        use railyard_core::cc::Health;
        use railyard_core::classify::event;
        let hp = build(false, false, 2);
        let ev = |e: u32, device: u16, route: u32| {
            // SAFETY: NULL `out` is allowed.
            unsafe { ry_hotpath_async_event(hp, e, device, route, std::ptr::null_mut()) }
        };
        let health = |r: u32| {
            let Ok(h) = hotpath(hp) else {
                panic!("a live hot path")
            };
            h.stack.cc.route_snapshot(r).unwrap().health
        };
        // Port scope: every route bound to the device (route 1 is on
        // device 1), none of another device's.
        assert_eq!(ev(event::PORT_ERR, 1, RY_HOTPATH_NO_ROUTE), RyStatus::Ok);
        assert_eq!(
            (health(0), health(1)),
            (Health::Healthy, Health::Quarantined)
        );
        // Informational events change nothing.
        assert_eq!(ev(event::PORT_ACTIVE, 0, 0), RyStatus::Ok);
        assert_eq!(health(0), Health::Healthy);
        // Out-of-range indices are typed errors.
        assert_eq!(ev(event::QP_FATAL, 0, 7), RyStatus::CcNoSuchRoute);
        assert_eq!(
            ev(event::PORT_ERR, 9, RY_HOTPATH_NO_ROUTE),
            RyStatus::CcNoSuchDevice
        );
        assert_eq!(ry_hotpath_destroy(hp), RyStatus::Ok);
    }

    #[test]
    fn a_refusal_records_task_evidence_and_a_success_resolves_it() {
        let hp = build(false, false, 2);
        let ep = open_ep(hp, 1);
        let mut task = ry_task::default();
        let st = {
            // SAFETY: valid out-pointer.
            unsafe { crate::evidence::ry_task_create(&mut task) }
        };
        assert_eq!(st, RyStatus::Ok);
        let path = [ry_path {
            endpoint: ep,
            route: 0,
            device: 0,
            qp: 0,
        }];
        // Quarantine the route: the post is avoided (PATH_QUARANTINED).
        // SAFETY: valid out-pointer (NULL is allowed).
        let st = unsafe {
            ry_hotpath_async_event(
                hp,
                railyard_core::classify::event::DEVICE_FATAL,
                0,
                RY_HOTPATH_NO_ROUTE,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(st, RyStatus::Ok);
        let mut s = ry_slice_ref::default();
        let st = {
            // SAFETY: valid out-pointer.
            unsafe { ry_hotpath_slice_open(hp, 0, task, &mut s) }
        };
        assert_eq!(st, RyStatus::Ok);
        let (st, r) = post(hp, s, &path, 4096);
        assert_eq!(
            (st, r.refusal),
            (RyStatus::PostRefused, ry_refusal::Avoided as u32)
        );
        assert_eq!(r.domain, ry_domain_kind::Device as u32);
        let mut state = crate::enums::ry_task_state::Normal;
        let st = {
            // SAFETY: valid out-pointer.
            unsafe { crate::evidence::ry_task_state_get(task, &mut state) }
        };
        assert_eq!(st, RyStatus::Ok);
        assert_eq!(state, crate::enums::ry_task_state::LongUnavailable);
        assert_eq!(crate::evidence::ry_task_destroy(task), RyStatus::Ok);
        assert_eq!(ry_hotpath_destroy(hp), RyStatus::Ok);
    }
}
