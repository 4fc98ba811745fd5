#!/usr/bin/env bash
# soak: the mixed-fault soak on real verbs (issue #19, item 6).
#
# Two Soft-RoCE guests (scripts/rxe-vm --two): node 1 runs the target
# engine (`soak target`, restarted on command), node 0 runs two initiating
# engines, one per worker model (Shared, DedicatedPoller), CC enforce, with
# WRITE + READ-back + compare lanes, and injects a fault every
# SOAK_FAULT_EVERY seconds in rotation: wrong rkey, QP to ERR, poller
# pause, port down/up (ip link on rxe0's netdev), peer restart. It reports
# transfers verified, faults injected, failures by fault window and class,
# and every counter at the end; see verbs-shim/examples/soak.rs.
#
# Fails unless both sides end OK: every fault kind injected and recovered
# from, every counter back to zero (tokens, endpoints, CC bytes and permits,
# rail charges, pins), no data mismatch.
#
# Env: SOAK_SECS (traffic seconds, default 600; ci/test.sh runs 90),
#      SOAK_FAULT_EVERY (seconds between faults, default 10),
#      SOAK_TIMEOUT (guest wall-clock limit, default SOAK_SECS + 420).
# Run it under the shared guest lock on a shared machine:
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock bash ci/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SECS="${SOAK_SECS:-600}"
EVERY="${SOAK_FAULT_EVERY:-10}"
TIMEOUT="${SOAK_TIMEOUT:-$(( SECS + 420 ))}"
CACHE="${RXE_VM_CACHE:-$PWD/target/rxe-vm}"

scripts/rxe-vm --setup
timeout 900 cargo build -p railyard-verbs --example soak >&2 \
  || { echo "soak: FAIL: building the soak example" >&2; exit 1; }
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
bin="$tdir/debug/examples/soak"
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
echo "soak: built in $(( $(date +%s) - start ))s; ${SECS} s of traffic, a fault every ${EVERY} s"

mkdir -p "$CACHE"
log="$CACHE/soak.log"
t=$(date +%s)
set +e
scripts/rxe-vm "${share[@]}" --two --timeout "$TIMEOUT" -e RUST_BACKTRACE=1 \
  --peer-cmd "$bin target --idle-secs $(( TIMEOUT ))" -- \
  "$bin" initiator 10.77.0.2 --secs "$SECS" --fault-every "$EVERY" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "soak: two-guest run took $(( $(date +%s) - t ))s"
fail=0
[[ $rc == 0 ]] || { echo "soak: FAIL: guest run exited $rc" >&2; fail=1; }
grep -q '^soak initiator: OK' "$log" || { echo "soak: FAIL: the initiator did not end OK" >&2; fail=1; }
grep -q 'soak target: OK' "$log" || { echo "soak: FAIL: the target did not end OK" >&2; fail=1; }
if grep -q 'SOAK MISMATCH' "$log"; then echo "soak: FAIL: data mismatch" >&2; fail=1; fi
echo "soak: total $(( $(date +%s) - start ))s"
[[ $fail == 0 ]] && echo "soak: OK"
exit $fail
