/* railyard from C: every part of the ABI with real calls and real results.
 * Built with -std=c11 -Wall -Wextra -Werror and run by
 * ffi/tests/c_examples.rs against the static library. Exits 0 on success;
 * any failed CHECK aborts. */
#define _POSIX_C_SOURCE 200809L /* setenv */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "abi_check.h"
#include "check.h"
#include "railyard.h"

/* A bad handle, a NULL out-pointer and a destroyed handle are errors, not
 * crashes; the message names the problem. */
static void error_model(void) {
  ry_token_pool zero = {0};
  uint32_t n = 0;
  FAILS_WITH(ry_token_pool_in_use(zero, &n), RY_STATUS_INVALID_HANDLE);
  CHECK(strstr(ry_last_error_message(), "token pool") != NULL);

  ry_token_pool pool;
  OK(ry_token_pool_create(4, &pool));
  CHECK(ry_last_error_message()[0] == '\0'); /* cleared by a success */
  FAILS_WITH(ry_token_pool_in_use(pool, NULL), RY_STATUS_NULL_ARGUMENT);

  /* A pool handle passed as a controller is foreign. */
  ry_cc foreign = {pool.bits};
  ry_domain_snapshot snap;
  FAILS_WITH(ry_cc_route_snapshot(foreign, 0, &snap), RY_STATUS_INVALID_HANDLE);
  /* Random bits. */
  ry_cc garbage = {0x0123456789abcdefULL};
  FAILS_WITH(ry_cc_route_snapshot(garbage, 0, &snap), RY_STATUS_INVALID_HANDLE);

  OK(ry_token_pool_destroy(pool));
  FAILS_WITH(ry_token_pool_in_use(pool, &n), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_token_pool_destroy(pool), RY_STATUS_INVALID_HANDLE);
  CHECK(strstr(ry_last_error_message(), "destroyed") != NULL);

  CHECK(strcmp(ry_status_name(RY_STATUS_TOKEN_DUPLICATE),
               "RY_STATUS_TOKEN_DUPLICATE") == 0);
  CHECK(strcmp(ry_status_name(12345), "RY_STATUS_UNKNOWN") == 0);
}

static void token_pool(void) {
  ry_token_pool pool;
  FAILS_WITH(ry_token_pool_create(0, &pool), RY_STATUS_TOKEN_INVALID_CAPACITY);
  OK(ry_token_pool_create(2, &pool));
  uint32_t cap = 0, in_use = 99;
  OK(ry_token_pool_capacity(pool, &cap));
  CHECK(cap == 2);

  ry_token_record rec;
  memset(&rec, 0, sizeof rec);
  rec.slice_index = 7;
  rec.slice_attempt = 3;
  rec.bytes = 65536;
  rec.has_peer = 1;
  rec.peer = 0; /* peer 0 is a real peer, distinct from "unknown" */
  rec.holds = RY_HOLDS_OUTSTANDING;

  uint64_t a, b, c;
  OK(ry_token_claim(pool, &rec, &a));
  OK(ry_token_claim(pool, &rec, &b));
  CHECK(a != b);
  FAILS_WITH(ry_token_claim(pool, &rec, &c), RY_STATUS_TOKEN_EXHAUSTED);
  OK(ry_token_pool_in_use(pool, &in_use));
  CHECK(in_use == 2);

  ry_token_record back;
  OK(ry_token_complete(pool, a, &back));
  CHECK(memcmp(&back, &rec, sizeof rec) == 0);
  CHECK(back.has_peer == 1 && back.peer == 0 && back.has_credit_key == 0);
  /* Exactly once: a duplicate completion releases nothing. */
  FAILS_WITH(ry_token_complete(pool, a, &back), RY_STATUS_TOKEN_DUPLICATE);
  /* The slot is reused by a new attempt: the old id is now stale. */
  OK(ry_token_claim(pool, &rec, &c));
  CHECK((uint32_t)c == (uint32_t)a && c != a);
  FAILS_WITH(ry_token_complete(pool, a, &back), RY_STATUS_TOKEN_STALE);
  FAILS_WITH(ry_token_complete(pool, 1000, &back), RY_STATUS_TOKEN_OUT_OF_RANGE);
  FAILS_WITH(ry_token_complete(pool, 0, &back), RY_STATUS_TOKEN_FORGED);
  FAILS_WITH(ry_token_complete(pool, b, NULL), RY_STATUS_NULL_ARGUMENT);
  OK(ry_token_complete(pool, b, &back)); /* the NULL above completed nothing */
  OK(ry_token_complete(pool, c, &back));
  OK(ry_token_pool_in_use(pool, &in_use));
  CHECK(in_use == 0);
  OK(ry_token_pool_destroy(pool));
}

/* Rows of the RFC 4162 classification tables. */
static void classification(void) {
  static const struct {
    uint32_t status;
    ry_failure_class class_;
    ry_failure_scope scope;
    ry_effect effect;
    uint32_t reason;
    int known;
    int hard;
  } wc_rows[] = {
      {0 /* SUCCESS */, RY_FAILURE_CLASS_SUCCESS, RY_FAILURE_SCOPE_OPERATION,
       RY_EFFECT_SUCCESS, RY_REASON_NONE, 1, 0},
      {13 /* RNR_RETRY_EXC_ERR */, RY_FAILURE_CLASS_RECEIVER_PRESSURE,
       RY_FAILURE_SCOPE_QP, RY_EFFECT_RECEIVER_PRESSURE,
       RY_REASON_RECEIVER_PRESSURE, 1, 0},
      {12 /* RETRY_EXC_ERR */, RY_FAILURE_CLASS_ROUTE_TIMEOUT,
       RY_FAILURE_SCOPE_QP, RY_EFFECT_HARD_ERROR, RY_REASON_ROUTE_TIMEOUT, 1, 1},
      {5 /* WR_FLUSH_ERR */, RY_FAILURE_CLASS_DERIVED_FLUSH, RY_FAILURE_SCOPE_QP,
       RY_EFFECT_NONE, RY_REASON_DERIVED_FLUSH, 1, 0},
      {10 /* REM_ACCESS_ERR */, RY_FAILURE_CLASS_REMOTE_METADATA,
       RY_FAILURE_SCOPE_OPERATION, RY_EFFECT_NONE, RY_REASON_REMOTE_METADATA, 1, 0},
      {4 /* LOC_PROT_ERR */, RY_FAILURE_CLASS_LOCAL_CONFIGURATION,
       RY_FAILURE_SCOPE_OPERATION, RY_EFFECT_NONE,
       RY_REASON_LOCAL_CONFIGURATION, 1, 0},
      /* Unknown status: fail closed at QP scope. */
      {4242, RY_FAILURE_CLASS_FATAL, RY_FAILURE_SCOPE_QP, RY_EFFECT_HARD_ERROR,
       RY_REASON_FATAL, 0, 1},
  };
  for (size_t i = 0; i < sizeof wc_rows / sizeof wc_rows[0]; i++) {
    ry_wc_classification c;
    OK(ry_classify_wc(wc_rows[i].status, 0xabc, &c));
    CHECK(c.status == wc_rows[i].status && c.vendor_err == 0xabc);
    CHECK(c.class_ == wc_rows[i].class_);
    CHECK(c.scope == wc_rows[i].scope);
    CHECK(c.effect == wc_rows[i].effect);
    CHECK(c.reason == wc_rows[i].reason);
    CHECK(c.known == (wc_rows[i].known != 0));
    CHECK(c.counts_hard_error == (wc_rows[i].hard != 0));
  }

  ry_event_classification e;
  OK(ry_classify_event(0 /* CQ_ERR */, &e));
  CHECK(e.class_ == RY_FAILURE_CLASS_FATAL && e.scope == RY_FAILURE_SCOPE_CQ &&
        e.handling == RY_OBJECT_HANDLING_ISOLATE_CQ &&
        e.effect == RY_EFFECT_QUARANTINE && e.known);
  OK(ry_classify_event(8 /* DEVICE_FATAL */, &e));
  CHECK(e.scope == RY_FAILURE_SCOPE_DEVICE && e.effect == RY_EFFECT_QUARANTINE);
  OK(ry_classify_event(9 /* PORT_ACTIVE */, &e));
  CHECK(e.class_ == RY_FAILURE_CLASS_NON_FAILURE && e.effect == RY_EFFECT_NONE &&
        !e.counts_hard_error);
  OK(ry_classify_event(777, &e));
  CHECK(!e.known && e.class_ == RY_FAILURE_CLASS_UNCLASSIFIED &&
        e.effect == RY_EFFECT_NONE);

  ry_signal_classification s;
  OK(ry_classify_signal(RY_SIGNAL_ACQUIRE_DEFERRED, &s));
  CHECK(s.reason == RY_REASON_BYTE_WINDOW &&
        s.task_state == RY_TASK_STATE_CONGESTED);
  FAILS_WITH(ry_classify_signal(999, &s), RY_STATUS_INVALID_ARGUMENT);
}

static void cc_config(void) {
  ry_cc_config cfg;
  OK(ry_cc_config_default(&cfg));
  CHECK(cfg.mode == RY_MODE_OFF && cfg.decrease_percent == 50);
  OK(ry_cc_config_validate(&cfg));
  cfg.decrease_percent = 100;
  FAILS_WITH(ry_cc_config_validate(&cfg), RY_STATUS_CC_CONFIG_DECREASE_OUT_OF_RANGE);
  cfg.decrease_percent = 50;
  cfg.min_window_bytes = cfg.max_window_bytes + 1;
  FAILS_WITH(ry_cc_config_validate(&cfg), RY_STATUS_CC_CONFIG_MIN_ABOVE_MAX);
  cfg.min_window_bytes = 4096;
  /* Drain time is judged against the path by default; FIXED is RFC 4162's
   * absolute target. */
  CHECK(cfg.target_mode == RY_TARGET_MODE_ADAPTIVE);
  cfg.target_mode = RY_TARGET_MODE_FIXED;
  OK(ry_cc_config_validate(&cfg));
  cfg.target_mode = 9;
  FAILS_WITH(ry_cc_config_validate(&cfg), RY_STATUS_CC_CONFIG_INVALID_TARGET_MODE);
  cfg.target_mode = RY_TARGET_MODE_ADAPTIVE;
  cfg.mode = 17;
  FAILS_WITH(ry_cc_config_validate(&cfg), RY_STATUS_CC_CONFIG_INVALID_MODE);

  /* From the environment: malformed values are errors naming the variable,
   * and the output is left untouched. */
  ry_cc_config env;
  memset(&env, 0xEE, sizeof env);
  setenv("MC_ADAPTIVE_CC_MODE", "sideways", 1);
  FAILS_WITH(ry_cc_config_from_env(&env), RY_STATUS_CC_CONFIG_INVALID_MODE);
  CHECK(strstr(ry_last_error_message(), "MC_ADAPTIVE_CC_MODE") != NULL);
  CHECK(env.mode == 0xEEEEEEEEu);
  setenv("MC_ADAPTIVE_CC_MODE", "enforce", 1);
  setenv("MC_ADAPTIVE_CC_COOLDOWN_MS", "12x", 1);
  FAILS_WITH(ry_cc_config_from_env(&env), RY_STATUS_CC_CONFIG_NOT_A_NUMBER);
  CHECK(strstr(ry_last_error_message(), "MC_ADAPTIVE_CC_COOLDOWN_MS") != NULL);
  setenv("MC_ADAPTIVE_CC_COOLDOWN_MS", "250", 1);
  OK(ry_cc_config_from_env(&env));
  CHECK(env.mode == RY_MODE_ENFORCE && env.cooldown_ms == 250);
  CHECK(env.target_mode == RY_TARGET_MODE_ADAPTIVE);
  /* An explicit target keeps the RFC's absolute meaning. */
  setenv("MC_ADAPTIVE_CC_TARGET_DRAIN_US", "500", 1);
  OK(ry_cc_config_from_env(&env));
  CHECK(env.target_mode == RY_TARGET_MODE_FIXED && env.target_drain_us == 500);
  setenv("MC_ADAPTIVE_CC_TARGET_MODE", "sometimes", 1);
  FAILS_WITH(ry_cc_config_from_env(&env), RY_STATUS_CC_CONFIG_INVALID_TARGET_MODE);
  CHECK(strstr(ry_last_error_message(), "MC_ADAPTIVE_CC_TARGET_MODE") != NULL);
  unsetenv("MC_ADAPTIVE_CC_TARGET_MODE");
  unsetenv("MC_ADAPTIVE_CC_TARGET_DRAIN_US");
  unsetenv("MC_ADAPTIVE_CC_MODE");
  unsetenv("MC_ADAPTIVE_CC_COOLDOWN_MS");
}

static ry_cc make_cc(uint64_t window) {
  ry_cc_config cfg;
  OK(ry_cc_config_default(&cfg));
  cfg.mode = RY_MODE_ENFORCE;
  cfg.min_window_bytes = window / 2;
  cfg.max_window_bytes = window;
  cfg.hard_error_threshold = 3;
  cfg.cooldown_ms = 1;
  const uint16_t route_devices[2] = {0, 0}; /* two routes on device 0 */
  ry_cc cc;
  FAILS_WITH(ry_cc_create(&cfg, 1, (const uint16_t[]){0, 1}, 2, &cc),
             RY_STATUS_CC_CONFIG_ROUTE_DEVICE_OUT_OF_RANGE);
  OK(ry_cc_create(&cfg, 1, route_devices, 2, &cc));
  return cc;
}

static void expect_in_flight(ry_cc cc, uint64_t device_bytes, uint64_t route0_bytes) {
  ry_domain_snapshot d, r;
  OK(ry_cc_device_snapshot(cc, 0, &d));
  OK(ry_cc_route_snapshot(cc, 0, &r));
  CHECK(d.in_flight == device_bytes);
  CHECK(r.in_flight == route0_bytes);
}

/* Admission, split, record, completion: permit accounting back to zero. */
static void cc_permits(void) {
  ry_cc cc = make_cc(8192);
  ry_admission a1, a2, a3;
  OK(ry_cc_try_acquire(cc, 0, 0, 4096, 0, &a1));
  OK(ry_cc_try_acquire(cc, 0, 1, 4096, 0, &a2));
  CHECK(a1.kind == RY_ADMISSION_KIND_ADMIT && a1.permit.held == 1);
  CHECK(a2.kind == RY_ADMISSION_KIND_ADMIT);
  expect_in_flight(cc, 8192, 4096);
  /* The device window is full: defer, no permit, nothing reserved. */
  OK(ry_cc_try_acquire(cc, 0, 0, 4096, 0, &a3));
  CHECK(a3.kind == RY_ADMISSION_KIND_DEFER && a3.permit.held == 0);
  CHECK(a3.domain == RY_DOMAIN_KIND_DEVICE && a3.window == 8192 &&
        a3.in_flight == 8192);
  expect_in_flight(cc, 8192, 4096);
  FAILS_WITH(ry_cc_try_acquire(cc, 0, 0, 0, 0, &a3), RY_STATUS_CC_ZERO_BYTES);
  FAILS_WITH(ry_cc_try_acquire(cc, 0, 9, 1, 0, &a3), RY_STATUS_CC_NO_SUCH_ROUTE);

  /* A chain of two WRs; the second was rejected at bad_wr: release only
   * the unposted tail. */
  ry_permit tail;
  FAILS_WITH(ry_permit_split(&a1.permit, 4096, &tail), RY_STATUS_CC_SPLIT_OUT_OF_RANGE);
  CHECK(a1.permit.held == 1 && a1.permit.bytes == 4096); /* unchanged */
  OK(ry_permit_split(&a1.permit, 1024, &tail));
  CHECK(a1.permit.bytes == 1024 && tail.bytes == 3072 && tail.held == 1);
  ry_settlement st;
  OK(ry_cc_release(cc, &tail, RY_EFFECT_NONE, &st));
  CHECK(st == RY_SETTLEMENT_CURRENT && tail.held == 0);
  FAILS_WITH(ry_cc_release(cc, &tail, RY_EFFECT_NONE, NULL), RY_STATUS_CC_NOT_HELD);
  expect_in_flight(cc, 5120, 1024);

  /* The posted head travels in the token record through the pool. */
  ry_token_pool pool;
  OK(ry_token_pool_create(8, &pool));
  ry_token_record rec;
  memset(&rec, 0, sizeof rec);
  CHECK(ry_cc_is_current(cc, &a1.permit, &(bool){false}) == RY_STATUS_OK);
  OK(ry_permit_record_into(&a1.permit, &rec));
  CHECK(a1.permit.held == 0 && (rec.holds & RY_HOLDS_PERMIT) && rec.bytes == 1024);
  FAILS_WITH(ry_permit_record_into(&a2.permit, &rec), RY_STATUS_CC_ALREADY_HELD);
  CHECK(a2.permit.held == 1); /* nothing moved */
  uint64_t wr_id;
  OK(ry_token_claim(pool, &rec, &wr_id));

  /* ... the completion arrives: the poller only has the wr_id. */
  ry_token_record done;
  OK(ry_token_complete(pool, wr_id, &done));
  ry_wc_classification wc;
  OK(ry_classify_wc(0, 0, &wc));
  OK(ry_cc_release_record(cc, &done, wc.effect, &st));
  CHECK(!(done.holds & RY_HOLDS_PERMIT));
  FAILS_WITH(ry_cc_release_record(cc, &done, wc.effect, NULL), RY_STATUS_CC_NOT_HELD);
  OK(ry_cc_release(cc, &a2.permit, RY_EFFECT_SUCCESS, NULL));
  expect_in_flight(cc, 0, 0);

  /* A forged record that would drive in-flight negative is refused and
   * counted; nothing goes below zero. */
  ry_token_record forged;
  memset(&forged, 0, sizeof forged);
  forged.bytes = 1;
  forged.holds = RY_HOLDS_PERMIT;
  FAILS_WITH(ry_cc_release_record(cc, &forged, RY_EFFECT_NONE, NULL), RY_STATUS_CC_UNDERFLOW);
  ry_cc_stats stats;
  OK(ry_cc_stats_get(cc, &stats));
  CHECK(stats.underflow_refusals >= 1 && stats.illegal_transitions == 0);
  expect_in_flight(cc, 0, 0);
  FAILS_WITH(ry_cc_release(cc, &a1.permit, 99, NULL), RY_STATUS_INVALID_ARGUMENT);

  OK(ry_token_pool_destroy(pool));
  OK(ry_cc_destroy(cc));
}

/* Hard errors quarantine a route; admission avoids it; the monitor's epoch
 * moves it to PROBING on a new generation after the cooldown; old permits
 * are no longer current. Task evidence tells the caller why. */
static void cc_health_and_evidence(void) {
  ry_cc cc = make_cc(1 << 20);
  ry_admission a;
  OK(ry_cc_try_acquire(cc, 0, 0, 4096, 0, &a));
  CHECK(a.kind == RY_ADMISSION_KIND_ADMIT);
  ry_domain_snapshot r;
  OK(ry_cc_route_snapshot(cc, 0, &r));
  uint32_t gen0 = r.generation;

  ry_task task;
  OK(ry_task_create(&task));
  ry_task_state ts;
  OK(ry_task_state_get(task, &ts));
  CHECK(ts == RY_TASK_STATE_UNKNOWN);

  for (int i = 0; i < 3; i++) {
    OK(ry_cc_route_feedback(cc, 0, gen0, RY_EFFECT_HARD_ERROR, NULL));
  }
  OK(ry_cc_route_snapshot(cc, 0, &r));
  CHECK(r.health == RY_HEALTH_QUARANTINED);
  CHECK(!r.cooldown_until_observed); /* the monitor has not seen it yet */

  ry_admission avoid;
  OK(ry_cc_try_acquire(cc, 0, 0, 4096, 10, &avoid));
  CHECK(avoid.kind == RY_ADMISSION_KIND_AVOID && avoid.domain == RY_DOMAIN_KIND_ROUTE);
  CHECK(avoid.permit.held == 0);

  ry_observation obs;
  OK(ry_cc_route_observation(cc, 0, 0, RY_REASON_PATH_QUARANTINED, 10, &obs));
  CHECK(obs.path_observed && obs.path_device == 0 && obs.path_route == 0);
  CHECK(obs.generation_observed && obs.generation == gen0);
  CHECK(obs.window_observed && obs.in_flight_observed && obs.in_flight == 4096);
  CHECK(!obs.cooldown_remaining_observed && !obs.scope_observed);
  ry_recorded rec;
  OK(ry_task_record(task, 0, 1, &obs, &rec));
  CHECK(rec == RY_RECORDED_STORED);
  OK(ry_task_state_get(task, &ts));
  CHECK(ts == RY_TASK_STATE_LONG_UNAVAILABLE);
  ry_task_detail d;
  OK(ry_task_detail_get(task, &d));
  CHECK(d.has_winner && d.state == RY_TASK_STATE_LONG_UNAVAILABLE);
  CHECK(d.winner.reason == RY_REASON_PATH_QUARANTINED);
  CHECK(d.winner.slice_index == 0 && d.winner.slice_attempt == 1);
  CHECK(d.winner.window_observed && !d.winner.cooldown_remaining_observed);
  CHECK(!d.winner.resolved && d.dropped == 0 && d.stale == 0);

  /* Epoch 1 observes the quarantine and starts the 1 ms cooldown. */
  ry_epoch_report rep;
  OK(ry_cc_on_epoch(cc, 1000, RY_POLLER_STATUS_PROGRESSING, &rep));
  CHECK(rep.quarantined >= 1 && rep.probes_started == 0);
  OK(ry_cc_route_snapshot(cc, 0, &r));
  CHECK(r.cooldown_until_observed && r.cooldown_until_ns == 1000 + 1000000);
  OK(ry_cc_route_observation(cc, 0, 0, RY_REASON_PATH_QUARANTINED, 2000, &obs));
  CHECK(obs.cooldown_remaining_observed && obs.cooldown_remaining_ns == 1000000 - 1000);
  FAILS_WITH(ry_cc_on_epoch(cc, 1000, 7, NULL), RY_STATUS_INVALID_ARGUMENT);

  /* Epoch 2, after the cooldown: PROBING on a new generation. */
  OK(ry_cc_on_epoch(cc, 1000 + 1000000 + 1, RY_POLLER_STATUS_PROGRESSING, &rep));
  CHECK(rep.probes_started >= 1);
  OK(ry_cc_route_snapshot(cc, 0, &r));
  CHECK(r.health == RY_HEALTH_PROBING && r.generation != gen0);
  bool current = true;
  OK(ry_cc_is_current(cc, &a.permit, &current));
  CHECK(!current);
  /* Late completion of the old generation settles accounting only. */
  ry_settlement st;
  OK(ry_cc_release(cc, &a.permit, RY_EFFECT_SUCCESS, &st));
  CHECK(st == RY_SETTLEMENT_STALE);
  expect_in_flight(cc, 0, 0);

  /* A later attempt succeeds: the task is NORMAL again. */
  OK(ry_task_begin_attempt(task, 0, 2));
  bool resolved = false;
  OK(ry_task_resolve(task, 0, 2, 3000000, &resolved));
  OK(ry_task_state_get(task, &ts));
  CHECK(ts == RY_TASK_STATE_NORMAL);
  OK(ry_task_detail_get(task, &d));
  CHECK(d.has_winner && d.winner.resolved);
  /* Evidence of the old attempt arriving late is stale. */
  OK(ry_task_record(task, 0, 1, &obs, &rec));
  CHECK(rec == RY_RECORDED_STALE);
  obs.reason = 1000;
  FAILS_WITH(ry_task_record(task, 0, 3, &obs, NULL), RY_STATUS_INVALID_ARGUMENT);

  uint32_t g = 0;
  OK(ry_cc_advance_generation(cc, 1, &g));
  OK(ry_cc_quarantine_device(cc, 0));
  OK(ry_cc_device_snapshot(cc, 0, &r));
  CHECK(r.health == RY_HEALTH_QUARANTINED);

  OK(ry_task_destroy(task));
  OK(ry_cc_destroy(cc));
  FAILS_WITH(ry_task_destroy(task), RY_STATUS_INVALID_HANDLE);
}

static void rail(void) {
  ry_device_spec nics[2] = {{25000000000ULL, 256}, {25000000000ULL, 512}};
  ry_rail_config cfg;
  OK(ry_rail_config_default(&cfg));
  cfg.probe_interval = 0;
  ry_rail sel;
  FAILS_WITH(ry_rail_create(nics, 0, &cfg, &sel), RY_STATUS_RAIL_CONFIG);
  cfg.peer_accounting = 1; /* needs the peer-feedback build feature (default) */
#ifdef RY_EXAMPLE_PEER_FEEDBACK
  OK(ry_rail_create(nics, 2, &cfg, &sel));
  OK(ry_rail_destroy(sel));
#else
  FAILS_WITH(ry_rail_create(nics, 2, &cfg, &sel), RY_STATUS_RAIL_CONFIG);
#endif
  cfg.peer_accounting = 0;
  OK(ry_rail_create(nics, 2, &cfg, &sel));

  uint32_t peer = 7;
  ry_rail_pick_result p;
  OK(ry_rail_pick(sel, &peer, 65536, 1000, &p));
  CHECK(p.charge.device == 0 && p.charge.held == 1 && !p.probe); /* better tier */
  uint64_t inflight = 0;
  OK(ry_rail_nic_inflight(sel, 0, &inflight));
  CHECK(inflight == 65536);

  /* Record it into the attempt's token record; the completion releases it. */
  ry_token_record rec;
  memset(&rec, 0, sizeof rec);
  rec.post_ns = 1000;
  OK(ry_rail_charge_record_into(&p.charge, &rec));
  CHECK(p.charge.held == 0 && (rec.holds & RY_HOLDS_RAIL_CHARGE));
  FAILS_WITH(ry_rail_release(sel, &p.charge, 1, 1000, 9000), RY_STATUS_RAIL_NOT_HELD);
  OK(ry_rail_release_record(sel, &rec, 1, 9000));
  FAILS_WITH(ry_rail_release_record(sel, &rec, 1, 9000), RY_STATUS_RAIL_NOT_HELD);
  OK(ry_rail_nic_inflight(sel, 0, &inflight));
  CHECK(inflight == 0);

  /* A multi-slice plan: 32 slices, charged and released one by one. */
  uint32_t counts[2] = {0, 0};
  OK(ry_rail_plan(sel, NULL, 32, 65536, 2000, counts, 2));
  CHECK(counts[0] + counts[1] == 32 && counts[0] >= counts[1]);
  FAILS_WITH(ry_rail_plan(sel, NULL, 32, 65536, 2000, counts, 1), RY_STATUS_BUFFER_TOO_SMALL);
  ry_rail_charge charges[32];
  size_t n = 0;
  for (uint16_t dev = 0; dev < 2; dev++) {
    for (uint32_t i = 0; i < counts[dev]; i++) {
      OK(ry_rail_charge_device(sel, dev, NULL, 65536, 2000, &charges[n++]));
    }
  }
  FAILS_WITH(ry_rail_charge_device(sel, 5, NULL, 1, 0, &charges[0]), RY_STATUS_RAIL_UNKNOWN_DEVICE);
  for (size_t i = 0; i < n; i++) {
    OK(ry_rail_release(sel, &charges[i], 0, 0, 3000));
  }
  for (uint16_t dev = 0; dev < 2; dev++) {
    OK(ry_rail_nic_inflight(sel, dev, &inflight));
    CHECK(inflight == 0);
  }
  ry_rail_counters c;
  OK(ry_rail_counters_get(sel, &c));
  CHECK(c.decisions == 2 && c.nic_accounting_errors == 0);
  OK(ry_rail_destroy(sel));
}

int main(void) {
  ry_check_abi();
  error_model();
  token_pool();
  classification();
  cc_config();
  cc_permits();
  cc_health_and_evidence();
  rail();
  printf("railyard C example: all checks passed\n");
  return 0;
}
