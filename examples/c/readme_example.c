/* The README's example (between the markers; cli/tests/readme.rs checks
 * that the README quotes it verbatim), compiled and run by the test suite
 * and by the README's own link lines in CI, followed by test-only checks of
 * what it did. */
#include <stdio.h>
#include "railyard.h"

int main(void) {
  /* --- README example begins --- */
  ry_cc_config cfg; ry_cc cc; ry_admission adm; ry_wc_classification wc;
  ry_status released = RY_STATUS_PANIC;
  ry_cc_config_default(&cfg);
  cfg.mode = RY_MODE_ENFORCE;
  const uint16_t route_devices[1] = {0};                  /* route 0 on device 0 */
  if (ry_cc_create(&cfg, 1, route_devices, 1, &cc) != RY_STATUS_OK) {
    fprintf(stderr, "%s\n", ry_last_error_message()); return 1;
  }
  ry_cc_try_acquire(cc, 0, 0, 65536, /*now_ns=*/0, &adm);  /* admit / defer / avoid */
  if (adm.kind == RY_ADMISSION_KIND_ADMIT) {
    /* ... ibv_post_send; the completion arrives with status 0 ... */
    ry_classify_wc(/*IBV_WC_SUCCESS*/ 0, 0, &wc);
    released = ry_cc_release(cc, &adm.permit, wc.effect, NULL);  /* exactly once; again: RY_STATUS_CC_NOT_HELD */
  }
  /* --- README example ends --- */
  ry_domain_snapshot route;
  int ok = adm.kind == RY_ADMISSION_KIND_ADMIT && released == RY_STATUS_OK &&
           wc.effect == RY_EFFECT_SUCCESS &&
           ry_cc_route_snapshot(cc, 0, &route) == RY_STATUS_OK && route.in_flight == 0 &&
           ry_cc_release(cc, &adm.permit, wc.effect, NULL) == RY_STATUS_CC_NOT_HELD;
  ry_cc_destroy(cc);
  if (!ok) { fprintf(stderr, "readme example: a check failed\n"); return 1; }
  printf("readme example: all checks passed\n");
  return 0;
}
