//! ABI checks: the size and alignment of every `repr(C)` type and every
//! enum as Rust lays them out, so the C side can assert its own layout
//! matches (`examples/c/abi_check.h`), and the ABI version.

use crate::error::{guard, RyStatus};
use crate::ptr::write_out;

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
pub const RY_ABI_VERSION: u32 = 3;

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
}

/// Number of `ry_abi_type` values.
pub const RY_ABI_TYPE_COUNT: u32 = 88;

/// The size and alignment of one ABI type.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ry_abi_layout_t {
    /// `sizeof` as Rust lays the type out.
    pub size: usize,
    /// `alignof` as Rust lays the type out.
    pub align: usize,
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
    guard(|| {
        use std::mem::{align_of, size_of};
        let l = match which {
            0 => (
                size_of::<crate::token::ry_token_record>(),
                align_of::<crate::token::ry_token_record>(),
            ),
            1 => (
                size_of::<crate::token::ry_token_pool>(),
                align_of::<crate::token::ry_token_pool>(),
            ),
            2 => (
                size_of::<crate::cc::ry_cc_config>(),
                align_of::<crate::cc::ry_cc_config>(),
            ),
            3 => (
                size_of::<crate::cc::ry_cc>(),
                align_of::<crate::cc::ry_cc>(),
            ),
            4 => (
                size_of::<crate::cc::ry_permit>(),
                align_of::<crate::cc::ry_permit>(),
            ),
            5 => (
                size_of::<crate::cc::ry_admission>(),
                align_of::<crate::cc::ry_admission>(),
            ),
            6 => (
                size_of::<crate::cc::ry_domain_snapshot>(),
                align_of::<crate::cc::ry_domain_snapshot>(),
            ),
            7 => (
                size_of::<crate::cc::ry_cc_stats>(),
                align_of::<crate::cc::ry_cc_stats>(),
            ),
            8 => (
                size_of::<crate::cc::ry_epoch_report>(),
                align_of::<crate::cc::ry_epoch_report>(),
            ),
            9 => (
                size_of::<crate::classify::ry_wc_classification>(),
                align_of::<crate::classify::ry_wc_classification>(),
            ),
            10 => (
                size_of::<crate::classify::ry_event_classification>(),
                align_of::<crate::classify::ry_event_classification>(),
            ),
            11 => (
                size_of::<crate::classify::ry_signal_classification>(),
                align_of::<crate::classify::ry_signal_classification>(),
            ),
            12 => (
                size_of::<crate::evidence::ry_observation>(),
                align_of::<crate::evidence::ry_observation>(),
            ),
            13 => (
                size_of::<crate::evidence::ry_task_detail>(),
                align_of::<crate::evidence::ry_task_detail>(),
            ),
            14 => (
                size_of::<crate::evidence::ry_task>(),
                align_of::<crate::evidence::ry_task>(),
            ),
            15 => (
                size_of::<crate::rail::ry_device_spec>(),
                align_of::<crate::rail::ry_device_spec>(),
            ),
            16 => (
                size_of::<crate::rail::ry_rail_config>(),
                align_of::<crate::rail::ry_rail_config>(),
            ),
            17 => (
                size_of::<crate::rail::ry_rail>(),
                align_of::<crate::rail::ry_rail>(),
            ),
            18 => (
                size_of::<crate::rail::ry_rail_charge>(),
                align_of::<crate::rail::ry_rail_charge>(),
            ),
            19 => (
                size_of::<crate::rail::ry_rail_pick_result>(),
                align_of::<crate::rail::ry_rail_pick_result>(),
            ),
            20 => (
                size_of::<crate::rail::ry_rail_counters>(),
                align_of::<crate::rail::ry_rail_counters>(),
            ),
            21 => (
                size_of::<crate::error::RyStatus>(),
                align_of::<crate::error::RyStatus>(),
            ),
            22 => (
                size_of::<crate::enums::ry_failure_class>(),
                align_of::<crate::enums::ry_failure_class>(),
            ),
            23 => (
                size_of::<crate::enums::ry_failure_scope>(),
                align_of::<crate::enums::ry_failure_scope>(),
            ),
            24 => (
                size_of::<crate::enums::ry_object_handling>(),
                align_of::<crate::enums::ry_object_handling>(),
            ),
            25 => (
                size_of::<crate::enums::ry_effect>(),
                align_of::<crate::enums::ry_effect>(),
            ),
            26 => (
                size_of::<crate::enums::ry_signal>(),
                align_of::<crate::enums::ry_signal>(),
            ),
            27 => (
                size_of::<crate::enums::ry_reason>(),
                align_of::<crate::enums::ry_reason>(),
            ),
            28 => (
                size_of::<crate::enums::ry_task_state>(),
                align_of::<crate::enums::ry_task_state>(),
            ),
            29 => (
                size_of::<crate::enums::ry_health>(),
                align_of::<crate::enums::ry_health>(),
            ),
            30 => (
                size_of::<crate::enums::ry_mode>(),
                align_of::<crate::enums::ry_mode>(),
            ),
            31 => (
                size_of::<crate::enums::ry_domain_kind>(),
                align_of::<crate::enums::ry_domain_kind>(),
            ),
            32 => (
                size_of::<crate::enums::ry_poller_status>(),
                align_of::<crate::enums::ry_poller_status>(),
            ),
            33 => (
                size_of::<crate::enums::ry_settlement>(),
                align_of::<crate::enums::ry_settlement>(),
            ),
            34 => (
                size_of::<crate::enums::ry_variant>(),
                align_of::<crate::enums::ry_variant>(),
            ),
            35 => (
                size_of::<crate::cc::ry_admission_kind>(),
                align_of::<crate::cc::ry_admission_kind>(),
            ),
            36 => (
                size_of::<crate::evidence::ry_recorded>(),
                align_of::<crate::evidence::ry_recorded>(),
            ),
            37 => (
                size_of::<crate::credit::ry_charge>(),
                align_of::<crate::credit::ry_charge>(),
            ),
            38 => (
                size_of::<crate::credit::ry_totals>(),
                align_of::<crate::credit::ry_totals>(),
            ),
            39 => (
                size_of::<crate::credit::ry_session_id>(),
                align_of::<crate::credit::ry_session_id>(),
            ),
            40 => (
                size_of::<crate::credit::ry_credit_update>(),
                align_of::<crate::credit::ry_credit_update>(),
            ),
            41 => (
                size_of::<crate::credit::ry_credit_usage>(),
                align_of::<crate::credit::ry_credit_usage>(),
            ),
            42 => (
                size_of::<crate::credit::ry_credit_ledger_config>(),
                align_of::<crate::credit::ry_credit_ledger_config>(),
            ),
            43 => (
                size_of::<crate::credit::ry_credit_sender>(),
                align_of::<crate::credit::ry_credit_sender>(),
            ),
            44 => (
                size_of::<crate::credit::ry_committed_charge>(),
                align_of::<crate::credit::ry_committed_charge>(),
            ),
            45 => (
                size_of::<crate::credit::ry_credit_metrics>(),
                align_of::<crate::credit::ry_credit_metrics>(),
            ),
            46 => (
                size_of::<crate::credit::ry_credit_allocator_config>(),
                align_of::<crate::credit::ry_credit_allocator_config>(),
            ),
            47 => (
                size_of::<crate::credit::ry_credit_receiver>(),
                align_of::<crate::credit::ry_credit_receiver>(),
            ),
            48 => (
                size_of::<crate::credit::ry_update_outcome>(),
                align_of::<crate::credit::ry_update_outcome>(),
            ),
            49 => (
                size_of::<crate::credit::ry_credit_release_outcome>(),
                align_of::<crate::credit::ry_credit_release_outcome>(),
            ),
            50 => (
                size_of::<crate::credit::ry_return_path>(),
                align_of::<crate::credit::ry_return_path>(),
            ),
            51 => (
                size_of::<crate::wire::ry_capability_offer>(),
                align_of::<crate::wire::ry_capability_offer>(),
            ),
            52 => (
                size_of::<crate::wire::ry_capability_answer>(),
                align_of::<crate::wire::ry_capability_answer>(),
            ),
            53 => (
                size_of::<crate::wire::ry_wire_message>(),
                align_of::<crate::wire::ry_wire_message>(),
            ),
            54 => (
                size_of::<crate::wire::ry_msg_type>(),
                align_of::<crate::wire::ry_msg_type>(),
            ),
            55 => (
                size_of::<crate::wire::ry_negotiation_result>(),
                align_of::<crate::wire::ry_negotiation_result>(),
            ),
            56 => (
                size_of::<crate::engine::ry_engine>(),
                align_of::<crate::engine::ry_engine>(),
            ),
            57 => (
                size_of::<crate::engine::ry_engine_config>(),
                align_of::<crate::engine::ry_engine_config>(),
            ),
            58 => (
                size_of::<crate::engine::ry_engine_region>(),
                align_of::<crate::engine::ry_engine_region>(),
            ),
            59 => (
                size_of::<crate::engine::ry_engine_remote_region>(),
                align_of::<crate::engine::ry_engine_remote_region>(),
            ),
            60 => (
                size_of::<crate::engine::ry_engine_transfer>(),
                align_of::<crate::engine::ry_engine_transfer>(),
            ),
            61 => (
                size_of::<crate::engine::ry_engine_task_status>(),
                align_of::<crate::engine::ry_engine_task_status>(),
            ),
            62 => (
                size_of::<crate::engine::ry_engine_stats>(),
                align_of::<crate::engine::ry_engine_stats>(),
            ),
            63 => (
                size_of::<crate::engine::ry_engine_worker_model>(),
                align_of::<crate::engine::ry_engine_worker_model>(),
            ),
            64 => (
                size_of::<crate::engine::ry_engine_op>(),
                align_of::<crate::engine::ry_engine_op>(),
            ),
            65 => (
                size_of::<crate::engine::ry_engine_task_state>(),
                align_of::<crate::engine::ry_engine_task_state>(),
            ),
            66 => (
                size_of::<crate::hotpath::ry_hotpath>(),
                align_of::<crate::hotpath::ry_hotpath>(),
            ),
            67 => (
                size_of::<crate::hotpath::ry_hotpath_config>(),
                align_of::<crate::hotpath::ry_hotpath_config>(),
            ),
            68 => (
                size_of::<crate::hotpath::ry_endpoint>(),
                align_of::<crate::hotpath::ry_endpoint>(),
            ),
            69 => (
                size_of::<crate::hotpath::ry_slice_ref>(),
                align_of::<crate::hotpath::ry_slice_ref>(),
            ),
            70 => (
                size_of::<crate::hotpath::ry_path>(),
                align_of::<crate::hotpath::ry_path>(),
            ),
            71 => (
                size_of::<crate::hotpath::ry_credit_use>(),
                align_of::<crate::hotpath::ry_credit_use>(),
            ),
            72 => (
                size_of::<crate::hotpath::ry_post_request>(),
                align_of::<crate::hotpath::ry_post_request>(),
            ),
            73 => (
                size_of::<crate::hotpath::ry_refusal>(),
                align_of::<crate::hotpath::ry_refusal>(),
            ),
            74 => (
                size_of::<crate::hotpath::ry_post_result>(),
                align_of::<crate::hotpath::ry_post_result>(),
            ),
            75 => (
                size_of::<crate::hotpath::ry_slice_effect>(),
                align_of::<crate::hotpath::ry_slice_effect>(),
            ),
            76 => (
                size_of::<crate::hotpath::ry_slice_state>(),
                align_of::<crate::hotpath::ry_slice_state>(),
            ),
            77 => (
                size_of::<crate::hotpath::ry_completion>(),
                align_of::<crate::hotpath::ry_completion>(),
            ),
            78 => (
                size_of::<crate::hotpath::ry_reclaim_kind>(),
                align_of::<crate::hotpath::ry_reclaim_kind>(),
            ),
            79 => (
                size_of::<crate::hotpath::ry_reclaim_event>(),
                align_of::<crate::hotpath::ry_reclaim_event>(),
            ),
            80 => (
                size_of::<crate::hotpath::ry_hotpath_stats>(),
                align_of::<crate::hotpath::ry_hotpath_stats>(),
            ),
            81 => (
                size_of::<crate::enums::ry_target_mode>(),
                align_of::<crate::enums::ry_target_mode>(),
            ),
            82 => (
                size_of::<crate::engine::ry_engine_route_state>(),
                align_of::<crate::engine::ry_engine_route_state>(),
            ),
            83 => (
                size_of::<crate::log::ry_log_level>(),
                align_of::<crate::log::ry_log_level>(),
            ),
            84 => (
                size_of::<crate::engine_credit::ry_engine_credit_config>(),
                align_of::<crate::engine_credit::ry_engine_credit_config>(),
            ),
            85 => (
                size_of::<crate::engine_credit::ry_engine_credit_stats>(),
                align_of::<crate::engine_credit::ry_engine_credit_stats>(),
            ),
            86 => (
                size_of::<crate::engine_credit::ry_engine_credit_peer>(),
                align_of::<crate::engine_credit::ry_engine_credit_peer>(),
            ),
            87 => (
                size_of::<crate::token_cache::ry_token_cache>(),
                align_of::<crate::token_cache::ry_token_cache>(),
            ),
            _ => {
                return Err(crate::error::Error::invalid(format_args!(
                    "{which} is not an ry_abi_type"
                )))
            }
        };
        // SAFETY: caller contract: valid for writes.
        unsafe {
            write_out(
                out,
                ry_abi_layout_t {
                    size: l.0,
                    align: l.1,
                },
                "out",
            )
        }
    })
}
