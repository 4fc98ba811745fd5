/* ABI check: every repr(C) type and enum of railyard.h must have the size
 * and alignment the Rust library was built with (ry_abi_layout). Shared
 * by the C and C++ examples; tests/header.rs checks that every typedef in
 * the header is listed here. */
#ifndef RY_EXAMPLE_ABI_CHECK_H
#define RY_EXAMPLE_ABI_CHECK_H

#include "check.h"

#ifdef __cplusplus
#define RY_ALIGNOF(T) alignof(T)
#else
#define RY_ALIGNOF(T) _Alignof(T)
#endif

#define RY_CHECK_LAYOUT(TAG, T)                                              \
  do {                                                                       \
    ry_abi_layout_t l_;                                                      \
    OK(ry_abi_layout(TAG, &l_));                                             \
    if (l_.size != sizeof(T) || l_.align != RY_ALIGNOF(T)) {                 \
      fprintf(stderr, "ABI mismatch for %s: C size %zu align %zu, "          \
              "Rust size %zu align %zu\n", #T, sizeof(T),                    \
              (size_t)RY_ALIGNOF(T), l_.size, l_.align);                     \
      abort();                                                               \
    }                                                                        \
    checked_++;                                                              \
  } while (0)

static inline void ry_check_abi(void) {
  unsigned checked_ = 0;
  CHECK(ry_abi_version() == RY_ABI_VERSION);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TOKEN_RECORD, ry_token_record);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TOKEN_POOL, ry_token_pool);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CC_CONFIG, ry_cc_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CC, ry_cc);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_PERMIT, ry_permit);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ADMISSION, ry_admission);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_DOMAIN_SNAPSHOT, ry_domain_snapshot);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CC_STATS, ry_cc_stats);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_EPOCH_REPORT, ry_epoch_report);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_WC_CLASSIFICATION, ry_wc_classification);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_EVENT_CLASSIFICATION, ry_event_classification);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SIGNAL_CLASSIFICATION, ry_signal_classification);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_OBSERVATION, ry_observation);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TASK_DETAIL, ry_task_detail);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TASK, ry_task);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_DEVICE_SPEC, ry_device_spec);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RAIL_CONFIG, ry_rail_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RAIL, ry_rail);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RAIL_CHARGE, ry_rail_charge);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RAIL_PICK_RESULT, ry_rail_pick_result);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RAIL_COUNTERS, ry_rail_counters);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_STATUS, ry_status);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_FAILURE_CLASS, ry_failure_class);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_FAILURE_SCOPE, ry_failure_scope);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_OBJECT_HANDLING, ry_object_handling);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_EFFECT, ry_effect);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SIGNAL, ry_signal);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_REASON, ry_reason);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TASK_STATE, ry_task_state);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_HEALTH, ry_health);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_MODE, ry_mode);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_DOMAIN_KIND, ry_domain_kind);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_POLLER_STATUS, ry_poller_status);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SETTLEMENT, ry_settlement);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_VARIANT, ry_variant);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ADMISSION_KIND, ry_admission_kind);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RECORDED, ry_recorded);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CHARGE, ry_charge);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TOTALS, ry_totals);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SESSION_ID, ry_session_id);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_UPDATE, ry_credit_update);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_USAGE, ry_credit_usage);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_LEDGER_CONFIG, ry_credit_ledger_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_SENDER, ry_credit_sender);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_COMMITTED_CHARGE, ry_committed_charge);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_METRICS, ry_credit_metrics);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_ALLOCATOR_CONFIG, ry_credit_allocator_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_RECEIVER, ry_credit_receiver);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_UPDATE_OUTCOME, ry_update_outcome);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_RELEASE_OUTCOME, ry_credit_release_outcome);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RETURN_PATH, ry_return_path);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CAPABILITY_OFFER, ry_capability_offer);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CAPABILITY_ANSWER, ry_capability_answer);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_WIRE_MESSAGE, ry_wire_message);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_MSG_TYPE, ry_msg_type);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_NEGOTIATION_RESULT, ry_negotiation_result);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE, ry_engine);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_CONFIG, ry_engine_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_REGION, ry_engine_region);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_REMOTE_REGION, ry_engine_remote_region);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_TRANSFER, ry_engine_transfer);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_TASK_STATUS, ry_engine_task_status);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_STATS, ry_engine_stats);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_WORKER_MODEL, ry_engine_worker_model);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_OP, ry_engine_op);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_TASK_STATE, ry_engine_task_state);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_HOTPATH, ry_hotpath);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_HOTPATH_CONFIG, ry_hotpath_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENDPOINT, ry_endpoint);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SLICE_REF, ry_slice_ref);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_PATH, ry_path);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_CREDIT_USE, ry_credit_use);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_POST_REQUEST, ry_post_request);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_REFUSAL, ry_refusal);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_POST_RESULT, ry_post_result);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SLICE_EFFECT, ry_slice_effect);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_SLICE_STATE, ry_slice_state);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_COMPLETION, ry_completion);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RECLAIM_KIND, ry_reclaim_kind);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_RECLAIM_EVENT, ry_reclaim_event);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_HOTPATH_STATS, ry_hotpath_stats);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TARGET_MODE, ry_target_mode);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_ROUTE_STATE, ry_engine_route_state);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_LOG_LEVEL, ry_log_level);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_CREDIT_CONFIG, ry_engine_credit_config);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_CREDIT_STATS, ry_engine_credit_stats);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_CREDIT_PEER, ry_engine_credit_peer);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_TOKEN_CACHE, ry_token_cache);
  RY_CHECK_LAYOUT(RY_ABI_TYPE_ENGINE_BACKPRESSURE, ry_engine_backpressure);
  /* Every ry_abi_type value was checked, and the library knows no more. */
  CHECK(checked_ == RY_ABI_TYPE_COUNT);
  {
    ry_abi_layout_t l_;
    FAILS_WITH(ry_abi_layout(RY_ABI_TYPE_COUNT, &l_), RY_STATUS_INVALID_ARGUMENT);
  }
}

#endif
