/* Per-thread token caches from C: a standalone pool's cache (claim,
 * complete, flush, idle, typed errors), then the composed hot path with
 * four poster threads, each posting and completing through its own cache
 * (ry_hotpath_post_via / ry_hotpath_complete_via), more tokens wanted than
 * the pool holds once the caches are counted, so exhaustion and the flush
 * requests that answer it are exercised. Ends by proving no token was
 * lost: after the caches are destroyed, the pool alone serves its full
 * capacity again. */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "abi_check.h"
#include "check.h"

#define POOL_TOKENS 64
#define THREADS 4
#define ROUNDS 50
#define IN_FLIGHT 8 /* per thread: 4 x 8 live + 4 x 16 cached > 64 */
#define CACHE_CAP 16

static void standalone_pool(void) {
  ry_token_pool pool, other;
  ry_token_cache c, d, zero = {0};
  ry_token_record rec, out;
  uint64_t ids[POOL_TOKENS];
  uint32_t n = 0, cap = 0, returned = 0, in_use = 0;
  int i;

  OK(ry_token_pool_create(POOL_TOKENS, &pool));
  OK(ry_token_pool_create(4, &other));
  /* Bad input: typed, nothing created. */
  FAILS_WITH(ry_token_cache_create(pool, 0, &c), RY_STATUS_TOKEN_INVALID_CAPACITY);
  FAILS_WITH(ry_token_cache_create(pool, 3, &c), RY_STATUS_TOKEN_INVALID_CAPACITY);
  FAILS_WITH(ry_token_cache_create(pool, RY_TOKEN_CACHE_MAX_CAPACITY * 2, &c),
             RY_STATUS_TOKEN_INVALID_CAPACITY);
  FAILS_WITH(ry_token_cache_create(pool, 8, NULL), RY_STATUS_NULL_ARGUMENT);
  FAILS_WITH(ry_token_cache_create((ry_token_pool){0}, 8, &c), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_token_cache_cached(zero, &n, NULL), RY_STATUS_INVALID_HANDLE);
  OK(ry_token_cache_create(pool, 8, &c));
  OK(ry_token_cache_create(pool, 8, &d));
  OK(ry_token_cache_cached(c, &n, &cap));
  CHECK(n == 0 && cap == 8);

  memset(&rec, 0, sizeof rec);
  rec.bytes = 4096;
  FAILS_WITH(ry_token_cache_claim(c, other, &rec, &ids[0]), RY_STATUS_TOKEN_CACHE_WRONG_POOL);
  FAILS_WITH(ry_token_cache_claim(c, pool, NULL, &ids[0]), RY_STATUS_NULL_ARGUMENT);
  FAILS_WITH(ry_token_cache_claim(c, pool, &rec, NULL), RY_STATUS_NULL_ARGUMENT);
  OK(ry_token_pool_in_use(other, &in_use));
  CHECK(in_use == 0);

  /* c claims, d completes (the dedicated-poller model). */
  for (i = 0; i < 40; i++) {
    rec.slice_index = (uint32_t)i;
    OK(ry_token_cache_claim(c, pool, &rec, &ids[i]));
  }
  OK(ry_token_pool_in_use(pool, &in_use));
  CHECK(in_use == 40);
  for (i = 0; i < 40; i++) {
    OK(ry_token_cache_complete(d, pool, ids[i], &out));
    CHECK(out.slice_index == (uint32_t)i && out.bytes == 4096);
    OK(ry_token_cache_cached(d, &n, NULL));
    CHECK(n <= 8);
  }
  FAILS_WITH(ry_token_cache_complete(d, pool, ids[0], &out), RY_STATUS_TOKEN_DUPLICATE);
  FAILS_WITH(ry_token_cache_complete(d, other, ids[1], &out), RY_STATUS_TOKEN_CACHE_WRONG_POOL);
  OK(ry_token_pool_in_use(pool, &in_use));
  CHECK(in_use == 0); /* cached free tokens are not in use */

  OK(ry_token_cache_flush(d, &returned));
  OK(ry_token_cache_cached(d, &n, NULL));
  CHECK(n == 0 && returned <= 8);
  OK(ry_token_cache_idle(c, /*parking*/ 1, &returned));
  OK(ry_token_cache_cached(c, &n, NULL));
  CHECK(n == 0);

  /* Destroy returns a cache's tokens: the pool alone serves all of them. */
  OK(ry_token_cache_claim(d, pool, &rec, &ids[0]));
  OK(ry_token_cache_complete(d, pool, ids[0], &out));
  OK(ry_token_cache_destroy(c));
  OK(ry_token_cache_destroy(d));
  FAILS_WITH(ry_token_cache_destroy(d), RY_STATUS_INVALID_HANDLE);
  for (i = 0; i < POOL_TOKENS; i++) OK(ry_token_claim(pool, &rec, &ids[i]));
  FAILS_WITH(ry_token_claim(pool, &rec, &ids[0]), RY_STATUS_TOKEN_EXHAUSTED);
  for (i = 0; i < POOL_TOKENS; i++) OK(ry_token_complete(pool, ids[i], &out));
  OK(ry_token_pool_destroy(pool));
  OK(ry_token_pool_destroy(other));
}

struct poster {
  ry_hotpath hp;
  ry_endpoint ep;
  ry_token_cache cache;
  uint32_t first_slice;
  unsigned exhausted; /* token refusals seen (and retried) */
};

static void *poster_main(void *arg) {
  struct poster *p = (struct poster *)arg;
  ry_path path;
  int round, k;
  memset(&path, 0, sizeof path);
  path.endpoint = p->ep;
  for (round = 0; round < ROUNDS; round++) {
    uint64_t wr[IN_FLIGHT];
    for (k = 0; k < IN_FLIGHT; k++) {
      ry_slice_ref s;
      ry_post_request req;
      ry_post_result r;
      ry_status st;
      OK(ry_hotpath_slice_open(p->hp, p->first_slice + (uint32_t)(round * IN_FLIGHT + k),
                               (ry_task){0}, &s));
      memset(&req, 0, sizeof req);
      req.now_ns = 1;
      req.paths = &path;
      req.n_paths = 1;
      req.slice = s;
      req.bytes = 4096;
      for (;;) {
        st = ry_hotpath_post_via(p->hp, p->cache, &req, &r);
        if (st == RY_STATUS_OK) break;
        /* The only refusal here: no free token (the other threads' caches
         * hold them). Answer our own flush requests and retry. */
        CHECK(st == RY_STATUS_POST_REFUSED && r.refusal == RY_REFUSAL_TOKEN);
        CHECK(r.detail_status == RY_STATUS_TOKEN_EXHAUSTED);
        p->exhausted++;
        OK(ry_token_cache_idle(p->cache, 0, NULL));
        sched_yield();
      }
      wr[k] = r.wr_id;
    }
    /* ... ibv_post_send, ibv_poll_cq: the completions come back. */
    for (k = 0; k < IN_FLIGHT; k++) {
      ry_completion done;
      OK(ry_hotpath_complete_via(p->hp, p->cache, wr[k], /*IBV_WC_SUCCESS*/ 0, 0, 2, &done));
      CHECK(done.effect == RY_SLICE_EFFECT_SETTLED && done.slice_state == RY_SLICE_STATE_SUCCEEDED);
      FAILS_WITH(ry_hotpath_complete_via(p->hp, p->cache, wr[k], 0, 0, 3, &done),
                 RY_STATUS_TOKEN_DUPLICATE);
    }
  }
  /* The thread stops: everything its cache holds goes back. */
  OK(ry_token_cache_idle(p->cache, /*parking*/ 1, NULL));
  return NULL;
}

static void hot_path_threads(void) {
  ry_hotpath_config cfg;
  ry_hotpath hp, other;
  ry_endpoint ep;
  ry_token_cache foreign, pool_cache, c;
  ry_token_pool pool;
  ry_hotpath_stats st;
  struct poster posters[THREADS];
  pthread_t tid[THREADS];
  const uint16_t route_devices[1] = {0};
  unsigned exhausted = 0;
  uint64_t wr[POOL_TOKENS];
  int t, i;

  OK(ry_hotpath_config_default(&cfg));
  cfg.tokens = POOL_TOKENS;
  OK(ry_hotpath_create(&cfg, route_devices, 1, &hp));
  OK(ry_hotpath_create(&cfg, route_devices, 1, &other));
  OK(ry_hotpath_endpoint_open(hp, 1, &ep));
  FAILS_WITH(ry_hotpath_token_cache_create(hp, 0, &c), RY_STATUS_TOKEN_INVALID_CAPACITY);
  FAILS_WITH(ry_hotpath_token_cache_create(hp, 1024, &c), RY_STATUS_TOKEN_INVALID_CAPACITY);
  FAILS_WITH(ry_hotpath_token_cache_create((ry_hotpath){0}, 16, &c), RY_STATUS_INVALID_HANDLE);
  FAILS_WITH(ry_hotpath_token_cache_create(hp, 16, NULL), RY_STATUS_NULL_ARGUMENT);

  /* A cache of another hot path, or of a standalone pool: refused, nothing
   * held. */
  OK(ry_hotpath_token_cache_create(other, 16, &foreign));
  OK(ry_token_pool_create(8, &pool));
  OK(ry_token_cache_create(pool, 8, &pool_cache));
  {
    ry_slice_ref s;
    ry_path path = {ep, 0, 0, 0};
    ry_post_request req;
    ry_post_result r;
    ry_completion done;
    memset(&req, 0, sizeof req);
    OK(ry_hotpath_slice_open(hp, 4000, (ry_task){0}, &s));
    req.paths = &path;
    req.n_paths = 1;
    req.slice = s;
    req.bytes = 4096;
    FAILS_WITH(ry_hotpath_post_via(hp, foreign, &req, &r), RY_STATUS_TOKEN_CACHE_WRONG_POOL);
    FAILS_WITH(ry_hotpath_post_via(hp, pool_cache, &req, &r), RY_STATUS_TOKEN_CACHE_WRONG_POOL);
    FAILS_WITH(ry_hotpath_post_via(hp, (ry_token_cache){0}, &req, &r), RY_STATUS_INVALID_HANDLE);
    FAILS_WITH(ry_hotpath_post_via(hp, foreign, NULL, &r), RY_STATUS_NULL_ARGUMENT);
    /* Posted through the pool, completed through a cache: the same wr_id. */
    OK(ry_hotpath_post(hp, &req, &r));
    FAILS_WITH(ry_hotpath_complete_via(hp, foreign, r.wr_id, 0, 0, 2, &done),
               RY_STATUS_TOKEN_CACHE_WRONG_POOL);
    FAILS_WITH(ry_hotpath_unposted_via(hp, pool_cache, r.wr_id, 2),
               RY_STATUS_TOKEN_CACHE_WRONG_POOL);
    OK(ry_hotpath_token_cache_create(hp, 16, &c));
    OK(ry_hotpath_unposted_via(hp, c, r.wr_id, 2)); /* a bad_wr tail */
    FAILS_WITH(ry_hotpath_unposted_via(hp, c, r.wr_id, 2), RY_STATUS_TOKEN_DUPLICATE);
    OK(ry_token_cache_destroy(c));
  }
  OK(ry_hotpath_stats_get(hp, &st));
  CHECK(st.posts == 1 && st.unposted == 1 && st.tokens_in_use == 0 && st.endpoint_outstanding == 0);

  for (t = 0; t < THREADS; t++) {
    posters[t].hp = hp;
    posters[t].ep = ep;
    posters[t].first_slice = (uint32_t)(t * ROUNDS * IN_FLIGHT);
    posters[t].exhausted = 0;
    OK(ry_hotpath_token_cache_create(hp, CACHE_CAP, &posters[t].cache));
  }
  for (t = 0; t < THREADS; t++) CHECK(pthread_create(&tid[t], NULL, poster_main, &posters[t]) == 0);
  for (t = 0; t < THREADS; t++) {
    CHECK(pthread_join(tid[t], NULL) == 0);
    exhausted += posters[t].exhausted;
  }
  OK(ry_hotpath_stats_get(hp, &st));
  CHECK(st.posts == 1 + THREADS * ROUNDS * IN_FLIGHT);
  CHECK(st.completions == THREADS * ROUNDS * IN_FLIGHT);
  CHECK(st.tokens_in_use == 0 && st.endpoint_outstanding == 0 && st.faults == 0);
  CHECK(st.bad_wr_ids == THREADS * ROUNDS * IN_FLIGHT); /* the duplicate checks */
  for (t = 0; t < THREADS; t++) OK(ry_token_cache_destroy(posters[t].cache));

  /* No token lost: the pool alone serves its full capacity again. */
  for (i = 0; i < POOL_TOKENS; i++) {
    ry_slice_ref s;
    ry_path path = {ep, 0, 0, 0};
    ry_post_request req;
    ry_post_result r;
    memset(&req, 0, sizeof req);
    OK(ry_hotpath_slice_open(hp, 3000 + (uint32_t)i, (ry_task){0}, &s));
    req.paths = &path;
    req.n_paths = 1;
    req.slice = s;
    req.bytes = 4096;
    OK(ry_hotpath_post(hp, &req, &r));
    wr[i] = r.wr_id;
  }
  {
    ry_slice_ref s;
    ry_path path = {ep, 0, 0, 0};
    ry_post_request req;
    ry_post_result r;
    memset(&req, 0, sizeof req);
    OK(ry_hotpath_slice_open(hp, 3999, (ry_task){0}, &s));
    req.paths = &path;
    req.n_paths = 1;
    req.slice = s;
    req.bytes = 4096;
    FAILS_WITH(ry_hotpath_post(hp, &req, &r), RY_STATUS_POST_REFUSED);
    CHECK(r.refusal == RY_REFUSAL_TOKEN);
  }
  for (i = 0; i < POOL_TOKENS; i++) {
    ry_completion done;
    OK(ry_hotpath_complete(hp, wr[i], 0, 0, 5, &done));
  }
  OK(ry_hotpath_stats_get(hp, &st));
  CHECK(st.tokens_in_use == 0);

  /* A cache outliving its hot path stays safe: its calls are refused. */
  OK(ry_hotpath_destroy(other));
  FAILS_WITH(ry_hotpath_unposted_via(other, foreign, 1, 0), RY_STATUS_INVALID_HANDLE);
  OK(ry_token_cache_destroy(foreign));
  OK(ry_token_cache_destroy(pool_cache));
  OK(ry_token_pool_destroy(pool));
  OK(ry_hotpath_destroy(hp));
  printf("token_cache: %d threads x %d posts through their caches, %u exhausted claims retried\n",
         THREADS, ROUNDS * IN_FLIGHT, exhausted);
}

int main(void) {
  ry_check_abi();
  standalone_pool();
  hot_path_threads();
  printf("token_cache: all checks passed\n");
  return 0;
}
