//! ABI checks: the size and alignment of every `repr(C)` type and every
//! enum as Rust lays them out, so the C side can assert its own layout
//! matches (`examples/c/abi_check.h`), and the ABI version.

use std::mem::{align_of, size_of};

use crate::error::{ret, RyStatus};
use crate::mirror::CEnum;

/// The ABI version of this header; bumped on any incompatible change.
/// Compare with `ry_abi_version()` at startup.
///
/// 2: `ry_engine_stats` gained `invalid_posts`, the handshake counters and
/// `mem_regions`/`mem_pins` (its layout changed); status codes -122..-124
/// and -130..-160 were added; the composed hot path (`ry_hotpath_*`);
/// `ry_cc_config` gained `target_mode` (`ry_target_mode`, status -29).
///
/// 3: `ry_engine_config` gained `credit` (`ry_engine_credit_config`, RFC
/// 2849 receiver credits; its layout changed); `ry_engine_consume`,
/// `ry_engine_credit_stats_get`, `ry_engine_credit_peer_get`; status codes
/// -125..-127; the log callback (`ry_set_log_callback`, `ry_log_level`,
/// status -6) and the stats snapshot (`ry_engine_snapshot`,
/// `ry_engine_route_state`) were added.
///
/// Compatible additions within 3 (no struct changed size or layout; a
/// field took bytes that were reserved and zero, and an older library
/// leaves them 0): `signal_interval` and `cc_software_drain` (status -38)
/// in `ry_engine_config`; `ry_engine_stats.tokens_cached`; per-thread
/// token caches (`ry_token_cache`, ABI type 87: `ry_token_cache_*`,
/// `ry_hotpath_token_cache_create`, `ry_hotpath_post_via`,
/// `ry_hotpath_complete_via`, `ry_hotpath_unposted_via`; status -16).
///
/// 4: `ry_engine_stats` carries every field of the engine's stats (its
/// size changed; the ABI 3 fields keep their offsets): `parks`, `parked`,
/// `gate_stalled_epochs`, `gate_route_timeouts`,
/// `gate_suppressed_timeouts`, `gate_advisory_pressure_epochs`,
/// `rail_accounting_errors`, `rail_moves`, `invalid_posts`, the
/// `handshakes_*` counters, `rail_slices_posted` / `rail_charged_bytes`
/// (`RY_ENGINE_MAX_RAILS` each) and `rails`. The per-layer functions
/// (`ry_cc_*` but the configuration's, `ry_permit_*`, `ry_rail_*` but
/// `ry_rail_config_default`, `ry_credit_*` but
/// `ry_credit_ledger_config_default`, `ry_committed_charge_*`,
/// `ry_token_*`, `ry_token_cache_create` / `_claim` / `_complete`) are
/// only in a library built with the cargo feature `layers` (declared
/// under `RY_LAYERS`); every name and value is unchanged.
///
/// 5: `ry_credit_metrics` and `ry_engine_credit_stats` gained
/// `protocol_errors` (RFC 2849 rule 5: a decreasing cumulative total is
/// rejected and counted, status `RY_STATUS_CREDIT_DECREASING` (-73), no
/// longer a quarantining violation); `ry_engine_task_backpressure` and
/// `ry_engine_backpressure` (ABI type 88, `RY_PRESSURE_*`).
///
/// 6: `ry_engine_stats` gained `evictions` and `fetch_retries` at its end
/// (its size changed; every earlier field keeps its offset): a full
/// endpoint store evicts its least recently used idle segment instead of
/// refusing with `RY_STATUS_ENDPOINT_TABLE_FULL` (RFC 3136
/// `StoreEviction`), and a descriptor fetch that failed in transport is
/// retried once (RFC 4162).
pub const RY_ABI_VERSION: u32 = 6;

/// The ABI version the library was built with.
///
/// Ownership: borrows its arguments for the call only; retains nothing.
/// Thread-safety: pure; any thread, concurrently.
#[no_mangle]
pub extern "C" fn ry_abi_version() -> u32 {
    RY_ABI_VERSION
}

/// Every type of the ABI, for `ry_abi_layout`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ry_abi_type {
    /// `ry_token_record`.
    TokenRecord = 0,
    /// `ry_token_pool`.
    TokenPool = 1,
    /// `ry_cc_config`.
    CcConfig = 2,
    /// `ry_cc`.
    Cc = 3,
    /// `ry_permit`.
    Permit = 4,
    /// `ry_admission`.
    Admission = 5,
    /// `ry_domain_snapshot`.
    DomainSnapshot = 6,
    /// `ry_cc_stats`.
    CcStats = 7,
    /// `ry_epoch_report`.
    EpochReport = 8,
    /// `ry_wc_classification`.
    WcClassification = 9,
    /// `ry_event_classification`.
    EventClassification = 10,
    /// `ry_signal_classification`.
    SignalClassification = 11,
    /// `ry_observation`.
    Observation = 12,
    /// `ry_task_detail`.
    TaskDetail = 13,
    /// `ry_task`.
    Task = 14,
    /// `ry_device_spec`.
    DeviceSpec = 15,
    /// `ry_rail_config`.
    RailConfig = 16,
    /// `ry_rail`.
    Rail = 17,
    /// `ry_rail_charge`.
    RailCharge = 18,
    /// `ry_rail_pick_result`.
    RailPickResult = 19,
    /// `ry_rail_counters`.
    RailCounters = 20,
    /// `ry_status`.
    Status = 21,
    /// `ry_failure_class`.
    FailureClass = 22,
    /// `ry_failure_scope`.
    FailureScope = 23,
    /// `ry_object_handling`.
    ObjectHandling = 24,
    /// `ry_effect`.
    Effect = 25,
    /// `ry_signal`.
    Signal = 26,
    /// `ry_reason`.
    Reason = 27,
    /// `ry_task_state`.
    TaskState = 28,
    /// `ry_health`.
    Health = 29,
    /// `ry_mode`.
    Mode = 30,
    /// `ry_domain_kind`.
    DomainKind = 31,
    /// `ry_poller_status`.
    PollerStatus = 32,
    /// `ry_settlement`.
    Settlement = 33,
    /// `ry_variant`.
    Variant = 34,
    /// `ry_admission_kind`.
    AdmissionKind = 35,
    /// `ry_recorded`.
    Recorded = 36,
    /// `ry_charge`.
    Charge = 37,
    /// `ry_totals`.
    Totals = 38,
    /// `ry_session_id`.
    SessionId = 39,
    /// `ry_credit_update`.
    CreditUpdate = 40,
    /// `ry_credit_usage`.
    CreditUsage = 41,
    /// `ry_credit_ledger_config`.
    CreditLedgerConfig = 42,
    /// `ry_credit_sender`.
    CreditSender = 43,
    /// `ry_committed_charge`.
    CommittedCharge = 44,
    /// `ry_credit_metrics`.
    CreditMetrics = 45,
    /// `ry_credit_allocator_config`.
    CreditAllocatorConfig = 46,
    /// `ry_credit_receiver`.
    CreditReceiver = 47,
    /// `ry_update_outcome`.
    UpdateOutcome = 48,
    /// `ry_credit_release_outcome`.
    CreditReleaseOutcome = 49,
    /// `ry_return_path`.
    ReturnPath = 50,
    /// `ry_capability_offer`.
    CapabilityOffer = 51,
    /// `ry_capability_answer`.
    CapabilityAnswer = 52,
    /// `ry_wire_message`.
    WireMessage = 53,
    /// `ry_msg_type`.
    MsgType = 54,
    /// `ry_negotiation_result`.
    NegotiationResult = 55,
    /// `ry_engine`.
    Engine = 56,
    /// `ry_engine_config`.
    EngineConfig = 57,
    /// `ry_engine_region`.
    EngineRegion = 58,
    /// `ry_engine_remote_region`.
    EngineRemoteRegion = 59,
    /// `ry_engine_transfer`.
    EngineTransfer = 60,
    /// `ry_engine_task_status`.
    EngineTaskStatus = 61,
    /// `ry_engine_stats`.
    EngineStats = 62,
    /// `ry_engine_worker_model`.
    EngineWorkerModel = 63,
    /// `ry_engine_op`.
    EngineOp = 64,
    /// `ry_engine_task_state`.
    EngineTaskState = 65,
    /// `ry_hotpath`.
    Hotpath = 66,
    /// `ry_hotpath_config`.
    HotpathConfig = 67,
    /// `ry_endpoint`.
    Endpoint = 68,
    /// `ry_slice_ref`.
    SliceRef = 69,
    /// `ry_path`.
    Path = 70,
    /// `ry_credit_use`.
    CreditUse = 71,
    /// `ry_post_request`.
    PostRequest = 72,
    /// `ry_refusal`.
    Refusal = 73,
    /// `ry_post_result`.
    PostResult = 74,
    /// `ry_slice_effect`.
    SliceEffect = 75,
    /// `ry_slice_state`.
    SliceState = 76,
    /// `ry_completion`.
    Completion = 77,
    /// `ry_reclaim_kind`.
    ReclaimKind = 78,
    /// `ry_reclaim_event`.
    ReclaimEvent = 79,
    /// `ry_hotpath_stats`.
    HotpathStats = 80,
    /// `ry_target_mode`.
    TargetMode = 81,
    /// `ry_engine_route_state`.
    EngineRouteState = 82,
    /// `ry_log_level`.
    LogLevel = 83,
    /// `ry_engine_credit_config`.
    EngineCreditConfig = 84,
    /// `ry_engine_credit_stats`.
    EngineCreditStats = 85,
    /// `ry_engine_credit_peer`.
    EngineCreditPeer = 86,
    /// `ry_token_cache`.
    TokenCache = 87,
    /// `ry_engine_backpressure`.
    EngineBackpressure = 88,
}

/// Number of `ry_abi_type` values.
pub const RY_ABI_TYPE_COUNT: u32 = 89;

/// The size and alignment of one ABI type.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_abi_layout_t {
    /// `sizeof` as Rust lays the type out.
    pub size: usize,
    /// `alignof` as Rust lays the type out.
    pub align: usize,
}

/// `ry_abi_type`'s validation and the layout of each type, from one list
/// (an exhaustive `match`: a variant without a type does not compile).
macro_rules! layouts {
    ($($v:ident => $t:ty,)+) => {
        crate::mirror::mirror!(ry_abi_type: $($v),+);

        fn layout(t: ry_abi_type) -> ry_abi_layout_t {
            match t {
                $(ry_abi_type::$v => ry_abi_layout_t {
                    size: size_of::<$t>(),
                    align: align_of::<$t>(),
                },)+
            }
        }
    };
}

layouts! {
    TokenRecord => crate::token::ry_token_record,
    TokenPool => crate::token::ry_token_pool,
    CcConfig => crate::cc::ry_cc_config,
    Cc => crate::cc::ry_cc,
    Permit => crate::cc::ry_permit,
    Admission => crate::cc::ry_admission,
    DomainSnapshot => crate::cc::ry_domain_snapshot,
    CcStats => crate::cc::ry_cc_stats,
    EpochReport => crate::cc::ry_epoch_report,
    WcClassification => crate::classify::ry_wc_classification,
    EventClassification => crate::classify::ry_event_classification,
    SignalClassification => crate::classify::ry_signal_classification,
    Observation => crate::evidence::ry_observation,
    TaskDetail => crate::evidence::ry_task_detail,
    Task => crate::evidence::ry_task,
    DeviceSpec => crate::rail::ry_device_spec,
    RailConfig => crate::rail::ry_rail_config,
    Rail => crate::rail::ry_rail,
    RailCharge => crate::rail::ry_rail_charge,
    RailPickResult => crate::rail::ry_rail_pick_result,
    RailCounters => crate::rail::ry_rail_counters,
    Status => crate::error::RyStatus,
    FailureClass => crate::enums::ry_failure_class,
    FailureScope => crate::enums::ry_failure_scope,
    ObjectHandling => crate::enums::ry_object_handling,
    Effect => crate::enums::ry_effect,
    Signal => crate::enums::ry_signal,
    Reason => crate::enums::ry_reason,
    TaskState => crate::enums::ry_task_state,
    Health => crate::enums::ry_health,
    Mode => crate::enums::ry_mode,
    DomainKind => crate::enums::ry_domain_kind,
    PollerStatus => crate::enums::ry_poller_status,
    Settlement => crate::enums::ry_settlement,
    Variant => crate::enums::ry_variant,
    AdmissionKind => crate::cc::ry_admission_kind,
    Recorded => crate::evidence::ry_recorded,
    Charge => crate::credit::ry_charge,
    Totals => crate::credit::ry_totals,
    SessionId => crate::credit::ry_session_id,
    CreditUpdate => crate::credit::ry_credit_update,
    CreditUsage => crate::credit::ry_credit_usage,
    CreditLedgerConfig => crate::credit::ry_credit_ledger_config,
    CreditSender => crate::credit::ry_credit_sender,
    CommittedCharge => crate::credit::ry_committed_charge,
    CreditMetrics => crate::credit::ry_credit_metrics,
    CreditAllocatorConfig => crate::credit::ry_credit_allocator_config,
    CreditReceiver => crate::credit::ry_credit_receiver,
    UpdateOutcome => crate::credit::ry_update_outcome,
    CreditReleaseOutcome => crate::credit::ry_credit_release_outcome,
    ReturnPath => crate::credit::ry_return_path,
    CapabilityOffer => crate::wire::ry_capability_offer,
    CapabilityAnswer => crate::wire::ry_capability_answer,
    WireMessage => crate::wire::ry_wire_message,
    MsgType => crate::wire::ry_msg_type,
    NegotiationResult => crate::wire::ry_negotiation_result,
    Engine => crate::engine::ry_engine,
    EngineConfig => crate::engine::ry_engine_config,
    EngineRegion => crate::engine::ry_engine_region,
    EngineRemoteRegion => crate::engine::ry_engine_remote_region,
    EngineTransfer => crate::engine::ry_engine_transfer,
    EngineTaskStatus => crate::engine::ry_engine_task_status,
    EngineStats => crate::engine::ry_engine_stats,
    EngineWorkerModel => crate::engine::ry_engine_worker_model,
    EngineOp => crate::engine::ry_engine_op,
    EngineTaskState => crate::engine::ry_engine_task_state,
    Hotpath => crate::hotpath::ry_hotpath,
    HotpathConfig => crate::hotpath::ry_hotpath_config,
    Endpoint => crate::hotpath::ry_endpoint,
    SliceRef => crate::hotpath::ry_slice_ref,
    Path => crate::hotpath::ry_path,
    CreditUse => crate::hotpath::ry_credit_use,
    PostRequest => crate::hotpath::ry_post_request,
    Refusal => crate::hotpath::ry_refusal,
    PostResult => crate::hotpath::ry_post_result,
    SliceEffect => crate::hotpath::ry_slice_effect,
    SliceState => crate::hotpath::ry_slice_state,
    Completion => crate::hotpath::ry_completion,
    ReclaimKind => crate::hotpath::ry_reclaim_kind,
    ReclaimEvent => crate::hotpath::ry_reclaim_event,
    HotpathStats => crate::hotpath::ry_hotpath_stats,
    TargetMode => crate::enums::ry_target_mode,
    EngineRouteState => crate::engine::ry_engine_route_state,
    LogLevel => crate::log::ry_log_level,
    EngineCreditConfig => crate::engine_credit::ry_engine_credit_config,
    EngineCreditStats => crate::engine_credit::ry_engine_credit_stats,
    EngineCreditPeer => crate::engine_credit::ry_engine_credit_peer,
    TokenCache => crate::token_cache::ry_token_cache,
    EngineBackpressure => crate::engine_credit::ry_engine_backpressure,
}

/// Writes the Rust layout of type `which` (`ry_abi_type`); an unknown
/// value is `RY_STATUS_INVALID_ARGUMENT`. Thread-safety: pure.
///
/// Ownership: writes plain data to the caller's out-pointers; retains nothing.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_abi_layout(which: u32, out: *mut ry_abi_layout_t) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            Ok(layout(ry_abi_type::from_u32(which, "which")?))
        })
    }
}
