/* The verbs transfer engine from C (library built with the cargo feature
 * `engine`, header declarations under RY_ENGINE).
 *
 * Without an RDMA device: runs the configuration and handle checks, then
 * prints "SKIP ry_engine_c: no RDMA device found" and exits 0, unless
 * RAILYARD_REQUIRE_RDMA=1 (then it fails). With a device (ci/rxe.sh runs
 * it inside the Soft-RoCE guest): two engines on the same device, one
 * connects to the other, a WRITE and a READ of several slices each are
 * polled to COMPLETED and their bytes compared, the anomaly queries are
 * read, error paths return their specific codes, every leak gauge is back
 * to zero, and both engines are destroyed. Prints "RAN ry_engine_c (...)"
 * and "ry_engine_c: all checks passed". */
#define _POSIX_C_SOURCE 200809L
#ifndef RY_ENGINE
#define RY_ENGINE
#endif

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "abi_check.h"

/* Bytes per transfer: four 64 KiB slices plus a 123-byte tail slice. */
#define LEN ((size_t)4 * 65536 + 123)
/* Polling limit: Soft-RoCE under qemu TCG is ~50x slower than hardware. */
#define POLL_LIMIT_MS 120000

static void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

static int has(const char *needle) {
  return strstr(ry_last_error_message(), needle) != NULL;
}

/* Polls task `task` until it is terminal; returns its final status. */
static ry_engine_task_status wait_task(ry_engine e, uint64_t batch, size_t task) {
  ry_engine_task_status s;
  long waited = 0;
  for (;;) {
    OK(ry_engine_task_status_get(e, batch, task, &s));
    if (s.state != RY_ENGINE_TASK_STATE_WAITING && s.state != RY_ENGINE_TASK_STATE_PENDING)
      return s;
    CHECK(waited < POLL_LIMIT_MS);
    sleep_ms(1);
    waited++;
  }
}

/* What the log callback saw (called from any thread: counters are atomic;
 * the last message is written only by the checks that run on this thread). */
static atomic_int log_count, log_handshake;
static uint32_t log_level;
static char log_target[64], log_message[512];

static void on_log(uint32_t level, const char *target, const char *message, void *user) {
  CHECK(user == &log_count);
  if (strncmp(target, "railyard::handshake", 19) == 0) atomic_fetch_add(&log_handshake, 1);
  if (atomic_fetch_add(&log_count, 1) == 0) {
    log_level = level;
    snprintf(log_target, sizeof log_target, "%s", target);
    snprintf(log_message, sizeof log_message, "%s", message);
  }
}

/* ry_set_log_callback: a refused MC_* value reaches the callback at WARN
 * from railyard::config, naming the variable and the value; a stricter
 * level filters it out; NULL clears the callback; an unknown level is
 * refused. Leaves the callback installed at INFO (the device part counts
 * the handshake lines). */
static void log_checks(void) {
  ry_engine_config cfg;
  FAILS_WITH(ry_set_log_callback(6, on_log, &log_count), RY_STATUS_INVALID_ARGUMENT);
  OK(ry_set_log_callback(RY_LOG_LEVEL_WARN, on_log, &log_count));
  CHECK(setenv("MC_MAX_WR", "lots", 1) == 0);
  FAILS_WITH(ry_engine_config_from_env(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(atomic_load(&log_count) == 1);
  CHECK(log_level == RY_LOG_LEVEL_WARN);
  CHECK(strcmp(log_target, "railyard::config") == 0);
  CHECK(strstr(log_message, "MC_MAX_WR") != NULL && strstr(log_message, "lots") != NULL);
  OK(ry_set_log_callback(RY_LOG_LEVEL_ERROR, on_log, &log_count));
  FAILS_WITH(ry_engine_config_from_env(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(atomic_load(&log_count) == 1); /* filtered: a warning */
  OK(ry_set_log_callback(RY_LOG_LEVEL_WARN, NULL, NULL));
  FAILS_WITH(ry_engine_config_from_env(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(atomic_load(&log_count) == 1); /* cleared */
  CHECK(unsetenv("MC_MAX_WR") == 0);
  OK(ry_set_log_callback(RY_LOG_LEVEL_INFO, on_log, &log_count));
}

/* Everything that needs no device: configuration (struct and environment)
 * errors naming the field or variable, and bad handles. */
static void host_checks(void) {
  ry_engine_config cfg, good;
  ry_engine e, zero = {0};
  ry_task task;
  ry_engine_stats st;
  uint64_t batch;

  ry_check_abi();
  log_checks();
  OK(ry_engine_config_default(&good));
  CHECK(good.slice_size == 65536 && good.device[0] == '\0' && good.listen[0] != '\0');
  CHECK(good.worker_model == RY_ENGINE_WORKER_MODEL_SHARED && good.cc.mode == RY_MODE_OFF);
  OK(ry_engine_config_validate(&good));

  cfg = good;
  cfg.slice_size = 0;
  FAILS_WITH(ry_engine_config_validate(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("MC_SLICE_SIZE"));
  e = zero;
  FAILS_WITH(ry_engine_create(&cfg, &e), RY_STATUS_ENGINE_CONFIG); /* before any device */
  CHECK(e.bits == 0);
  {
    ry_engine_backpressure bp;
    bool present;
    FAILS_WITH(ry_engine_task_backpressure(zero, 1, 0, &bp, &present), RY_STATUS_INVALID_HANDLE);
    FAILS_WITH(ry_engine_task_backpressure(zero, 1, 0, &bp, NULL), RY_STATUS_NULL_ARGUMENT);
  }
  cfg = good;
  cfg.workers = 1;
  cfg.worker_model = RY_ENGINE_WORKER_MODEL_DEDICATED_POLLER;
  FAILS_WITH(ry_engine_config_validate(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("MC_WORKERS_PER_CTX"));
  cfg = good;
  cfg.worker_model = 7;
  FAILS_WITH(ry_engine_config_validate(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("worker_model"));
  cfg = good;
  strcpy(cfg.listen, "not an address");
  FAILS_WITH(ry_engine_config_validate(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("listen"));
  cfg = good;
  memset(cfg.device, 'x', sizeof cfg.device); /* no NUL */
  FAILS_WITH(ry_engine_config_validate(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("device"));
  cfg = good;
  cfg.transfer_timeout_ms = 0;
  FAILS_WITH(ry_engine_config_validate(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("transfer_timeout_ms"));
  cfg = good;
  cfg.cc.min_window_bytes = cfg.cc.max_window_bytes + 1;
  FAILS_WITH(ry_engine_create(&cfg, &e), RY_STATUS_CC_CONFIG_MIN_ABOVE_MAX);
  FAILS_WITH(ry_engine_create(NULL, &e), RY_STATUS_NULL_ARGUMENT);
  FAILS_WITH(ry_engine_create(&good, NULL), RY_STATUS_NULL_ARGUMENT);

  /* From the environment: a bad variable is named, never defaulted. */
  CHECK(setenv("MC_SLICE_SIZE", "abc", 1) == 0);
  cfg = good;
  FAILS_WITH(ry_engine_config_from_env(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("MC_SLICE_SIZE") && has("abc"));
  CHECK(memcmp(&cfg, &good, sizeof cfg) == 0); /* untouched */
  CHECK(setenv("MC_SLICE_SIZE", "4096", 1) == 0);
  CHECK(setenv("MC_RDMA_DEDICATED_POLLER", "maybe", 1) == 0);
  FAILS_WITH(ry_engine_config_from_env(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("MC_RDMA_DEDICATED_POLLER"));
  CHECK(unsetenv("MC_RDMA_DEDICATED_POLLER") == 0);
  CHECK(setenv("MC_ADAPTIVE_CC_MODE", "sometimes", 1) == 0);
  FAILS_WITH(ry_engine_config_from_env(&cfg), RY_STATUS_ENGINE_CONFIG);
  CHECK(has("MC_ADAPTIVE_CC_MODE"));
  CHECK(setenv("MC_ADAPTIVE_CC_MODE", "enforce", 1) == 0);
  OK(ry_engine_config_from_env(&cfg));
  CHECK(cfg.slice_size == 4096 && cfg.cc.mode == RY_MODE_ENFORCE);
  CHECK(unsetenv("MC_SLICE_SIZE") == 0 && unsetenv("MC_ADAPTIVE_CC_MODE") == 0);

  /* Zero and foreign handles are refused, not dereferenced. */
  FAILS_WITH(ry_engine_allocate_batch(zero, 1, &batch), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_engine_stats_get(zero, &st), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_engine_destroy(zero), RY_STATUS_INVALID_HANDLE);
  OK(ry_task_create(&task));
  e.bits = task.bits; /* a task-evidence handle is not an engine */
  FAILS_WITH(ry_engine_stats_get(e, &st), RY_STATUS_INVALID_HANDLE);
  OK(ry_task_destroy(task));
}

int main(void) {
  ry_engine_config cfg;
  ry_engine a, b;
  ry_engine_region am, bm, own_r;
  ry_engine_remote_region regs[8];
  ry_engine_transfer t, bad[3];
  ry_engine_task_status s, all[4];
  ry_engine_stats st;
  ry_task_state anomaly;
  ry_task_detail detail;
  char addr[64], dev[64], tiny[4];
  size_t alen = 0, n = 0, i;
  uint32_t seg, gen = 0;
  uint64_t batch, batch2;
  uint8_t *own, *amem, *bmem;
  const char *require = getenv("RAILYARD_REQUIRE_RDMA");
  const char *want_dev = getenv("RAILYARD_RDMA_DEVICE");
  ry_status rc;
  bool idle = false;
  int found = 0;
  const char *cancel_path;
  int busy_seen;

  host_checks();
  printf("ry_engine_c: host checks passed\n");

  OK(ry_engine_config_default(&cfg));
  cfg.cc.mode = RY_MODE_ENFORCE; /* the anomaly query needs the controller */
  cfg.transfer_timeout_ms = POLL_LIMIT_MS;
  if (want_dev != NULL && strlen(want_dev) < sizeof cfg.device) strcpy(cfg.device, want_dev);
  rc = ry_engine_create(&cfg, &a);
  if (rc == RY_STATUS_ENGINE_NO_DEVICE) {
    if (require != NULL && strcmp(require, "1") == 0) {
      fprintf(stderr, "ry_engine_c: RAILYARD_REQUIRE_RDMA=1 but: %s\n", ry_last_error_message());
      return 1;
    }
    printf("SKIP ry_engine_c: no RDMA device found (run through ci/rxe.sh, or set "
           "RAILYARD_REQUIRE_RDMA=1 to fail instead of skipping)\n");
    return 0;
  }
  CHECK(rc == RY_STATUS_OK);
  OK(ry_engine_create(&cfg, &b));
  OK(ry_engine_device_name(a, dev, sizeof dev, NULL));
  OK(ry_engine_listen_addr(b, addr, sizeof addr, &alen));
  CHECK(alen == strlen(addr) && alen > 0);
  FAILS_WITH(ry_engine_listen_addr(b, tiny, sizeof tiny, &alen), RY_STATUS_BUFFER_TOO_SMALL);
  CHECK(alen == strlen(addr));

  /* Memory, registered before connecting so the handshake exports it:
   * engine-owned on both sides, plus caller memory on A. */
  OK(ry_engine_alloc_memory(a, 2 * LEN, &am));
  OK(ry_engine_alloc_memory(b, LEN, &bm));
  CHECK(am.len == 2 * LEN && bm.len == LEN && am.addr != 0 && bm.addr != 0);
  own = (uint8_t *)aligned_alloc(4096, 65536);
  CHECK(own != NULL);
  OK(ry_engine_register_memory(a, own, 65536, &own_r));
  CHECK(own_r.addr == (uint64_t)(uintptr_t)own && own_r.len == 65536);
  FAILS_WITH(ry_engine_register_memory(a, NULL, 64, NULL), RY_STATUS_NULL_ARGUMENT);
  amem = (uint8_t *)(uintptr_t)am.addr;
  bmem = (uint8_t *)(uintptr_t)bm.addr;

  OK(ry_engine_open_segment(a, addr, &seg));
  CHECK(atomic_load(&log_handshake) >= 1); /* "segment opened" (info) */
  FAILS_WITH(ry_engine_segment_regions(a, seg, NULL, 0, &n), RY_STATUS_BUFFER_TOO_SMALL);
  CHECK(n >= 1 && n <= 8);
  OK(ry_engine_segment_regions(a, seg, regs, 8, &n));
  for (i = 0; i < n; i++) found |= regs[i].addr == bm.addr && regs[i].len == bm.len && regs[i].rkey == bm.rkey;
  CHECK(found);
  FAILS_WITH(ry_engine_segment_regions(a, seg + 100, regs, 8, &n), RY_STATUS_ENGINE_NO_SUCH_SEGMENT);

  /* WRITE A[0..LEN) -> B, then change B and READ it into A[LEN..2LEN). */
  for (i = 0; i < LEN; i++) amem[i] = (uint8_t)(i * 7 + 3);
  OK(ry_engine_allocate_batch(a, 4, &batch));
  memset(&t, 0, sizeof t);
  t.local = am.addr;
  t.len = LEN;
  t.remote = bm.addr;
  t.op = RY_ENGINE_OP_WRITE;
  t.segment = seg;
  OK(ry_engine_submit(a, batch, &t, 1));
  s = wait_task(a, batch, 0);
  CHECK(s.state == RY_ENGINE_TASK_STATE_COMPLETED);
  CHECK(s.transferred_bytes == LEN && s.total_bytes == LEN);
  CHECK(memcmp(amem, bmem, LEN) == 0);

  for (i = 0; i < LEN; i++) bmem[i] ^= 0x5a;
  t.local = am.addr + LEN;
  t.op = RY_ENGINE_OP_READ;
  OK(ry_engine_submit(a, batch, &t, 1));
  s = wait_task(a, batch, 1);
  CHECK(s.state == RY_ENGINE_TASK_STATE_COMPLETED && s.transferred_bytes == LEN);
  CHECK(memcmp(amem + LEN, bmem, LEN) == 0);
  CHECK(memcmp(amem + LEN, amem, LEN) != 0);

  /* Anomaly queries: with the controller on, a clean success is NORMAL and
   * nothing unresolved is left. */
  OK(ry_engine_task_anomaly(a, batch, 0, &anomaly));
  CHECK(anomaly == RY_TASK_STATE_NORMAL);
  OK(ry_engine_task_anomaly_detail(a, batch, 1, &detail));
  CHECK(detail.state == RY_TASK_STATE_NORMAL);
  CHECK(!detail.has_winner || detail.winner.resolved);
  /* Typed backpressure: credit is off here, so never RECEIVER_CREDIT; a
   * task the CC window deferred (its evidence says BYTE_WINDOW) shows
   * TRANSPORT, with a fallback allowed. */
  {
    ry_engine_backpressure bp;
    bool present = true;
    OK(ry_engine_task_backpressure(a, batch, 1, &bp, &present));
    CHECK(!present || bp.source == RY_PRESSURE_TRANSPORT || bp.source == RY_PRESSURE_LOCAL_QUEUE);
    if (detail.has_winner && detail.winner.reason == RY_REASON_BYTE_WINDOW)
      CHECK(present && bp.source == RY_PRESSURE_TRANSPORT && bp.fallback_allowed);
    FAILS_WITH(ry_engine_task_backpressure(a, batch, 0, NULL, &present), RY_STATUS_NULL_ARGUMENT);
    FAILS_WITH(ry_engine_task_backpressure(a, batch, 99, &bp, &present), RY_STATUS_ENGINE_NO_SUCH_TASK);
  }
  OK(ry_engine_batch_status(a, batch, all, 4, &n));
  CHECK(n == 2 && all[0].state == RY_ENGINE_TASK_STATE_COMPLETED &&
        all[1].state == RY_ENGINE_TASK_STATE_COMPLETED);

  /* Refused submits queue nothing and say why. */
  bad[0] = t;
  bad[0].local = am.addr + 2 * LEN - 10;
  bad[0].len = 100;
  FAILS_WITH(ry_engine_submit(a, batch, bad, 1), RY_STATUS_ENGINE_LOCAL_RANGE);
  bad[0] = t;
  bad[0].remote = bm.addr + LEN - 10;
  bad[0].len = 100;
  FAILS_WITH(ry_engine_submit(a, batch, bad, 1), RY_STATUS_ENGINE_REMOTE_RANGE);
  bad[0] = t;
  bad[0].len = 0;
  FAILS_WITH(ry_engine_submit(a, batch, bad, 1), RY_STATUS_ENGINE_ZERO_LENGTH);
  bad[0] = t;
  bad[0].op = 9;
  FAILS_WITH(ry_engine_submit(a, batch, bad, 1), RY_STATUS_INVALID_ARGUMENT);
  bad[0] = t;
  bad[0].segment = seg + 100;
  FAILS_WITH(ry_engine_submit(a, batch, bad, 1), RY_STATUS_ENGINE_NO_SUCH_SEGMENT);
  bad[0] = t;
  bad[1] = t;
  bad[2] = t; /* valid, but 2 + 3 > capacity 4 */
  FAILS_WITH(ry_engine_submit(a, batch, bad, 3), RY_STATUS_ENGINE_BATCH_FULL);
  FAILS_WITH(ry_engine_submit(a, batch, NULL, 1), RY_STATUS_NULL_ARGUMENT);
  FAILS_WITH(ry_engine_submit(a, batch + 1000, &t, 1), RY_STATUS_ENGINE_NO_SUCH_BATCH);
  OK(ry_engine_batch_status(a, batch, all, 4, &n));
  CHECK(n == 2);
  FAILS_WITH(ry_engine_task_status_get(a, batch, 2, &s), RY_STATUS_ENGINE_NO_SUCH_TASK);

  /* Caller memory works as a source too. */
  for (i = 0; i < 65536; i++) own[i] = (uint8_t)(255 - i % 251);
  t.local = own_r.addr;
  t.len = 65536;
  t.op = RY_ENGINE_OP_WRITE;
  OK(ry_engine_submit(a, batch, &t, 1));
  s = wait_task(a, batch, 2);
  CHECK(s.state == RY_ENGINE_TASK_STATE_COMPLETED);
  CHECK(memcmp(own, bmem, 65536) == 0);

  /* Reconnect: new endpoints on a new route generation; the segment id
   * stays and works. */
  FAILS_WITH(ry_engine_reconnect_segment(a, seg + 100, NULL), RY_STATUS_ENGINE_NO_SUCH_SEGMENT);
  OK(ry_engine_reconnect_segment(a, seg, &gen));
  for (i = 0; i < 65536; i++) own[i] = (uint8_t)(i % 253);
  OK(ry_engine_submit(a, batch, &t, 1));
  s = wait_task(a, batch, 3);
  CHECK(s.state == RY_ENGINE_TASK_STATE_COMPLETED);
  CHECK(memcmp(own, bmem, 65536) == 0);

  OK(ry_engine_free_batch(a, batch));
  FAILS_WITH(ry_engine_free_batch(a, batch), RY_STATUS_ENGINE_NO_SUCH_BATCH);
  FAILS_WITH(ry_engine_task_status_get(a, batch, 0, &s), RY_STATUS_ENGINE_NO_SUCH_BATCH);
  {
    ry_engine_backpressure bp;
    bool present;
    FAILS_WITH(ry_engine_task_backpressure(a, batch, 0, &bp, &present), RY_STATUS_ENGINE_NO_SUCH_BATCH);
  }

  /* Cancel: a batch is freed only once every task is terminal. */
  OK(ry_engine_allocate_batch(a, 1, &batch2));
  t.local = am.addr;
  t.len = LEN;
  t.op = RY_ENGINE_OP_READ;
  OK(ry_engine_submit(a, batch2, &t, 1));
  rc = ry_engine_free_batch(a, batch2);
  cancel_path = rc == RY_STATUS_OK ? "finished before free" : "busy, canceled";
  if (rc != RY_STATUS_OK) {
    CHECK(rc == RY_STATUS_ENGINE_BATCH_BUSY);
    OK(ry_engine_cancel_batch(a, batch2));
    s = wait_task(a, batch2, 0);
    CHECK(s.state == RY_ENGINE_TASK_STATE_CANCELED || s.state == RY_ENGINE_TASK_STATE_COMPLETED);
    OK(ry_engine_free_batch(a, batch2));
  }

  /* Deregistration: refused while a transfer is queued or posted on the
   * region, accepted once idle; only a region's start address is accepted;
   * overlapping memory is refused. */
  OK(ry_engine_allocate_batch(a, 1, &batch2));
  t.local = own_r.addr;
  t.len = 65536;
  t.op = RY_ENGINE_OP_WRITE;
  OK(ry_engine_submit(a, batch2, &t, 1));
  rc = ry_engine_deregister_memory(a, own_r.addr);
  CHECK(rc == RY_STATUS_OK || rc == RY_STATUS_ENGINE_MEMORY_BUSY);
  CHECK(rc == RY_STATUS_OK || has("in use by transfers"));
  busy_seen = rc == RY_STATUS_ENGINE_MEMORY_BUSY;
  s = wait_task(a, batch2, 0);
  CHECK(s.state == RY_ENGINE_TASK_STATE_COMPLETED);
  OK(ry_engine_free_batch(a, batch2));
  OK(ry_engine_wait_idle(a, 30000, &idle));
  CHECK(idle);
  if (busy_seen) OK(ry_engine_deregister_memory(a, own_r.addr));
  FAILS_WITH(ry_engine_deregister_memory(a, own_r.addr), RY_STATUS_ENGINE_NO_SUCH_REGION);
  FAILS_WITH(ry_engine_deregister_memory(a, am.addr + 1), RY_STATUS_ENGINE_NO_SUCH_REGION);
  FAILS_WITH(ry_engine_register_memory(a, amem + 8, 64, NULL), RY_STATUS_ENGINE_REGION_OVERLAP);
  OK(ry_engine_register_memory(a, own, 65536, &own_r)); /* the freed slot is reused */
  OK(ry_engine_stats_get(a, &st));
  CHECK(st.mem_regions == 2);
  OK(ry_engine_deregister_memory(a, own_r.addr));

  /* Nothing leaked: every gauge is back to zero. */
  OK(ry_engine_wait_idle(a, 30000, &idle));
  CHECK(idle);
  OK(ry_engine_stats_get(a, &st));
  CHECK(st.tokens_in_use == 0 && st.endpoint_outstanding == 0 && st.qp_depth == 0 &&
        st.cq_outstanding == 0 && st.slices_pending == 0 && st.mem_pins == 0);
  CHECK(st.mem_regions == 1);
  CHECK(st.gate_enabled && st.gate_in_flight_bytes == 0 && st.gate_admitted == st.gate_released);
  CHECK(st.posts >= 11 && st.completions >= 11 && st.bad_completions == 0);
  /* One rail (device 0) carried every post; its charges, the park and the
   * hot path's refusals are back to zero (fields of ABI 4). */
  CHECK(st.rails == 1 && st.rail_slices_posted[0] == st.posts && st.rail_charged_bytes[0] == 0);
  CHECK(st.parked == 0 && st.invalid_posts == 0 && st.rail_accounting_errors == 0);
  /* Free tokens in the workers' caches: neither in use nor lost, at most
   * 32 per worker, within the pool (max_inflight). */
  CHECK(st.tokens_in_use + st.tokens_cached <= cfg.max_inflight);
  CHECK(st.tokens_cached <= 32u * cfg.workers);
  {
    /* The snapshot: the same counters plus every route's CC state. */
    ry_engine_stats snap;
    ry_engine_route_state routes[4];
    size_t nr = 99;
    FAILS_WITH(ry_engine_snapshot(a, &snap, NULL, 0, &nr), RY_STATUS_BUFFER_TOO_SMALL);
    CHECK(nr == 1); /* one device, one peer NIC */
    FAILS_WITH(ry_engine_snapshot(a, NULL, routes, 4, &nr), RY_STATUS_NULL_ARGUMENT);
    FAILS_WITH(ry_engine_snapshot(a, &snap, routes, 4, NULL), RY_STATUS_NULL_ARGUMENT);
    OK(ry_engine_snapshot(a, &snap, routes, 4, &nr));
    CHECK(nr == 1 && snap.posts == st.posts && snap.tokens_in_use == 0);
    CHECK(snap.tokens_cached <= 32u * cfg.workers);
    CHECK(routes[0].device == 0 && routes[0].in_flight_bytes == 0 && routes[0].window_bytes > 0);
    CHECK(routes[0].health == RY_HEALTH_HEALTHY);
  }

  /* Receiver credit (RFC 2849): off by default, so nothing to consume. */
  {
    ry_engine_credit_stats cs;
    ry_engine_credit_peer cp;
    ry_engine c, d;
    uint32_t cseg;
    int tries = 0;
    FAILS_WITH(ry_engine_consume(a, seg, 1), RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE);
    FAILS_WITH(ry_engine_credit_stats_get(a, &cs), RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE);
    /* Two engines with credit optional: negotiated active, granted. */
    cfg.credit.policy = RY_ENGINE_CREDIT_OPTIONAL;
    OK(ry_engine_create(&cfg, &c));
    OK(ry_engine_create(&cfg, &d));
    OK(ry_engine_listen_addr(d, addr, sizeof addr, &alen));
    OK(ry_engine_open_segment(c, addr, &cseg));
    do {
      OK(ry_engine_credit_peer_get(c, cseg, &cp));
      if (cp.phase != 2) sleep_ms(5);
    } while (cp.phase != 2 && ++tries < 2000);
    CHECK(cp.negotiated == RY_ENGINE_CREDIT_NEGOTIATED_ACTIVE && cp.version == 1);
    CHECK(cp.phase == 2 && cp.granted[0] > 0 && cp.available[3] > 0);
    FAILS_WITH(ry_engine_credit_peer_get(c, cseg + 100, &cp), RY_STATUS_ENGINE_CREDIT_NOT_ACTIVE);
    OK(ry_engine_credit_stats_get(c, &cs));
    CHECK(cs.policy == RY_ENGINE_CREDIT_OPTIONAL && cs.peers == 1 && cs.updates_applied >= 1);
    CHECK(cs.violations == 0 && cs.malformed == 0 && cs.frames_received >= 1);
    /* Nothing written yet: nothing to consume. */
    FAILS_WITH(ry_engine_consume(d, 0, 1), RY_STATUS_ENGINE_CREDIT_CONSUME);
    OK(ry_engine_destroy(c));
    OK(ry_engine_destroy(d));
    cfg.credit.policy = RY_ENGINE_CREDIT_OFF;
  }

  OK(ry_engine_destroy(a));
  OK(ry_engine_destroy(b));
  FAILS_WITH(ry_engine_destroy(a), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_engine_stats_get(a, &st), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_engine_allocate_batch(b, 1, &batch), RY_STATUS_INVALID_HANDLE);
  free(own); /* deregistered above: the caller's again */

  printf("RAN ry_engine_c (device %s, %zu-byte WRITE + READ verified, %llu posts, "
         "reconnected to endpoint generation %u, last batch %s, deregistration %s)\n",
         dev, (size_t)LEN, (unsigned long long)st.posts, (unsigned)gen, cancel_path,
         busy_seen ? "refused while busy, then done" : "done (transfer finished first)");
  printf("ry_engine_c: all checks passed\n");
  return 0;
}
