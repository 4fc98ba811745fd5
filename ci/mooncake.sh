#!/usr/bin/env bash
# mooncake: railyard inside Mooncake's transfer engine (issue #21), the
# short version. Builds patched Mooncake from the pinned source fixture
# (integrations/mooncake/build.sh, cached under target/mooncake), then in one
# Soft-RoCE guest runs the patched mc_driver for a few seconds against a
# transfer_engine_bench target (WRITE a pattern, READ it back, compare, every
# round) with railyard's CC enforcing, and checks:
#   - the driver ran rounds, every task completed, every block read back
#     equal, nothing stranded;
#   - railyard's counters at engine teardown: posts > 0, every post
#     completed (or released unposted), tokens in use, endpoint outstanding,
#     CC bytes in flight and release faults all 0.
# Fails if any of that did not happen, including when it did not run.
#
# Without the fixture (a fresh user clone has no ../shared) it says NOT RUN
# and exits 3, which ci/test.sh reports and tolerates; under MOONCAKE_REQUIRED=1
# (.ci/run sets it: CI has the fixture) that is a failure instead.
# MOONCAKE_CI=0 skips the stage explicitly (it then says SKIPPED).
# Only the patched variant is built by default: a cold Mooncake build is
# ~2.5 min per variant on two idle cores (~13 min on a loaded shared host),
# and the stock build, an unmodified tree, tests nothing of railyard's; the
# target is then the patched build's transfer_engine_bench (a target posts
# nothing). MOONCAKE_CI_VARIANTS="stock patched" builds both and uses a stock
# target, as bench-mooncake.sh and fault-mooncake.sh do.
# Env: MOONCAKE_SRC (the fixture), MOONCAKE_CI_SECS (driver run, default 5),
#      MOONCAKE_CI_VARIANTS (default "patched"),
#      RAILYARD_PROFILE (default debug: the workspace tests built it already).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
if [[ "${MOONCAKE_CI:-1}" == 0 ]]; then
  echo "mooncake: SKIPPED (MOONCAKE_CI=0)"; exit 0
fi
SECS="${MOONCAKE_CI_SECS:-5}"
VARIANTS="${MOONCAKE_CI_VARIANTS:-patched}"
case " $VARIANTS " in
  *" patched "*) ;;
  *) echo "mooncake: FAIL: MOONCAKE_CI_VARIANTS must include patched" >&2; exit 1 ;;
esac
target=patched
case " $VARIANTS " in *" stock "*) target=stock ;; esac

set +e
MOONCAKE_VARIANTS="$VARIANTS" RAILYARD_PROFILE="${RAILYARD_PROFILE:-debug}" integrations/mooncake/build.sh
rc=$?
set -e
if [[ $rc == 3 ]]; then
  if [[ "${MOONCAKE_REQUIRED:-0}" == 1 ]]; then
    echo "mooncake: FAIL: no Mooncake source fixture, and MOONCAKE_REQUIRED=1 (set MOONCAKE_SRC)" >&2; exit 1
  fi
  echo "mooncake: NOT RUN: no Mooncake source fixture (a fresh clone has none; set MOONCAKE_SRC to run it)" >&2
  exit 3
fi
[[ $rc == 0 ]] || { echo "mooncake: FAIL: build.sh exited $rc" >&2; exit 1; }
built=$(date +%s)
echo "mooncake: builds ready in $(( built - start ))s"

source integrations/mooncake/lib.sh
mc_paths
scripts/rxe-vm --setup >/dev/null
guest="$CACHE/ci-mooncake-guest.sh"
cat > "$guest" <<GUEST
source $PWD/integrations/mooncake/lib.sh
mc_guest_init
mc_start_target $mc $target || exit 1
echo "RAN mooncake patched mc_driver against \$seg ($target target)"
MC_RAILYARD_STATS=1 MC_ADAPTIVE_CC_MODE=enforce timeout 120 $mc/patched/mc_driver \$common \
  --segment_id=\$seg --duration=$SECS > /tmp/driver.log 2>&1
rc=\$?
grep -E 'railyard|mc-driver|ERROR|FATAL' /tmp/driver.log | tail -n 30
echo "mc_driver exit code \$rc"
exit \$rc
GUEST
log="$CACHE/ci-mooncake.log"
set +e
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout 300 -- bash "$guest" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "mooncake: guest run took $(( $(date +%s) - built ))s"

fail=0
[[ $rc == 0 ]] || { echo "mooncake: FAIL: guest run exited $rc" >&2; fail=1; }
grep -q '^RAN mooncake patched mc_driver' "$log" || { echo "mooncake: FAIL: the driver did not run" >&2; fail=1; }
summary=$(grep '^mc-driver: rounds=' "$log" | tail -n 1)
stats=$(grep '^railyard-stats ' "$log" | tail -n 1)
num() { sed -n "s/.*[ :]$1=\([0-9]*\).*/\1/p" <<<"$2"; }
if [[ -z "$summary" ]]; then
  echo "mooncake: FAIL: no mc-driver summary" >&2; fail=1
else
  [[ "$(num rounds "$summary")" -gt 0 && "$(num verified_blocks "$summary")" -gt 0 ]] \
    || { echo "mooncake: FAIL: nothing was read back ($summary)" >&2; fail=1; }
  for k in tasks_failed stranded mismatched_blocks; do
    [[ "$(num $k "$summary")" == 0 ]] || { echo "mooncake: FAIL: $k != 0 ($summary)" >&2; fail=1; }
  done
fi
if [[ -z "$stats" ]]; then
  echo "mooncake: FAIL: the patched build printed no railyard-stats" >&2; fail=1
else
  [[ "$(num posts "$stats")" -gt 0 && "$(num posts "$stats")" == "$(( $(num completions "$stats") + $(num unposted "$stats") ))" ]] \
    || { echo "mooncake: FAIL: posts != completions + unposted ($stats)" >&2; fail=1; }
  for k in tokens_in_use endpoint_outstanding cc_in_flight faults; do
    [[ "$(num $k "$stats")" == 0 ]] || { echo "mooncake: FAIL: railyard $k != 0 ($stats)" >&2; fail=1; }
  done
fi
echo "mooncake: total $(( $(date +%s) - start ))s"
[[ $fail == 0 ]] && echo "mooncake: OK"
exit $fail
