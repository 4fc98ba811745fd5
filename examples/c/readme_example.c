/* The README's example (between the markers; cli/tests/readme.rs checks
 * that the README quotes it verbatim), compiled and run by the test suite
 * and by the README's own link lines in CI, followed by test-only checks of
 * what it did. */
#include <stdio.h>
#include "railyard.h"

int main(void) {
  /* --- README example begins --- */
  ry_hotpath_config cfg; ry_hotpath hp; ry_endpoint ep; ry_slice_ref s; ry_post_result posted; ry_completion done;
  ry_hotpath_config_default(&cfg);
  cfg.cc.mode = RY_MODE_ENFORCE;
  const uint16_t route_devices[1] = {0};                     /* route 0 on device 0 */
  if (ry_hotpath_create(&cfg, route_devices, 1, &hp) != RY_STATUS_OK) { fprintf(stderr, "%s\n", ry_last_error_message()); return 1; }
  ry_hotpath_endpoint_open(hp, /*cookie: your QP pair*/ 1, &ep);
  ry_hotpath_slice_open(hp, 0, (ry_task){0}, &s);
  ry_path path = {ep, /*route*/ 0, /*device*/ 0, /*qp*/ 0};
  ry_post_request req = {.now_ns = 0, .paths = &path, .n_paths = 1, .slice = s, .bytes = 65536};
  if (ry_hotpath_post(hp, &req, &posted) == RY_STATUS_OK) {  /* else: posted.refusal says who */
    /* ... ibv_post_send with wr_id = posted.wr_id; the WC arrives: */
    ry_hotpath_complete(hp, posted.wr_id, /*wc.status*/ 0, /*wc.vendor_err*/ 0, /*now_ns*/ 1, &done);
  }                                                          /* done.effect: settled / retry / stale */
  /* --- README example ends --- */
  ry_hotpath_stats st;
  ry_completion again;
  int ok = posted.refusal == RY_REFUSAL_NONE && done.effect == RY_SLICE_EFFECT_SETTLED &&
           done.slice_state == RY_SLICE_STATE_SUCCEEDED && done.wc.effect == RY_EFFECT_SUCCESS &&
           ry_hotpath_complete(hp, posted.wr_id, 0, 0, 2, &again) == RY_STATUS_TOKEN_DUPLICATE &&
           ry_hotpath_stats_get(hp, &st) == RY_STATUS_OK && st.tokens_in_use == 0 &&
           st.cc_in_flight == 0 && st.endpoint_outstanding == 0 && st.posts == 1;
  ry_hotpath_destroy(hp);
  if (!ok) { fprintf(stderr, "readme example: a check failed\n"); return 1; }
  printf("readme example: all checks passed\n");
  return 0;
}
