#!/usr/bin/env bash
# fault-mooncake: the fault run of issue #21, stock against patched Mooncake
# (integrations/mooncake), in one Soft-RoCE guest. An experiment, not a test:
# it prints what happened, it asserts nothing.
#
# For each variant, mc_driver (WRITE a pattern, READ it back, compare, in
# rounds; it counts completed / failed / stranded tasks instead of exiting on
# the first failure) runs against a stock transfer_engine_bench target, and
# mid-transfer one of:
#   qp-err       every QP of the initiator is moved to ERR with work posted
#                (integrations/mooncake/qp_fault.c, an LD_PRELOAD shim:
#                neither build is changed for it), then the run continues;
#   kill-target  the target process is killed (SIGKILL), then the run
#                continues against the dead peer.
# Reported per run: the driver's summary (rounds, tasks ok / failed /
# stranded, blocks verified / mismatched, per batch that did not complete),
# counts of Mooncake's own log lines (MC_LOG_LEVEL=TRACE: flushes, completion
# errors, CQ timeouts, endpoint write-offs at teardown), and for patched
# railyard's counters after the engine is destroyed (MC_RAILYARD_STATS=1).
# The driver tears the engine down even with tasks stranded.
#
# Env: FAULT_SECS (driver run, default 12), FAULT_AT_MS (default 3000),
#      FAULTS (default "qp-err kill-target"), FAULT_TIMEOUT (guest limit,
#      default 900 s), FAULT_DRIVER_ARGS (extra mc_driver flags).
# Run it under the shared guest lock:
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock scripts/fault-mooncake.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${FAULT_SECS:-12}"
AT_MS="${FAULT_AT_MS:-3000}"
FAULTS="${FAULTS:-qp-err kill-target}"
TIMEOUT="${FAULT_TIMEOUT:-900}"
EXTRA="${FAULT_DRIVER_ARGS:-}"

scripts/rxe-vm --setup >/dev/null
integrations/mooncake/build.sh
source integrations/mooncake/lib.sh
mc_paths
mkdir -p "$mc/fault-logs"

guest="$CACHE/fault-mooncake-guest.sh"
cat > "$guest" <<GUEST
set -u
source $PWD/integrations/mooncake/lib.sh
mc_guest_init
for fault in $FAULTS; do
  for v in stock patched; do
    log=$mc/fault-logs/\$fault-\$v.log
    mc_start_target $mc || exit 1
    echo "=== \$fault, \$v (target \$seg)"
    pre=""
    case \$fault in
      qp-err) pre="LD_PRELOAD=$mc/qp_fault.so QP_FAULT_AFTER_MS=$AT_MS" ;;
      kill-target) ( sleep \$(awk -v m=$AT_MS 'BEGIN{print m/1000 + 2}'); kill -9 \$tpid; echo "fault: killed the target" >&2 ) & ;;
    esac
    t0=\$(date +%s.%N)
    env \$pre MC_RAILYARD_STATS=1 MC_LOG_LEVEL=TRACE timeout $(( SECS + 200 )) $mc/\$v/mc_driver \$common --segment_id=\$seg \
      --duration=$SECS --expect_failures --task_timeout=20 $EXTRA > \$log 2>&1
    rc=\$?
    echo "driver exit code \$rc after \$(awk -v s=\$t0 -v e=\$(date +%s.%N) 'BEGIN{printf "%.1f", e-s}') s"
    grep -E '^(qp_fault|fault|mc-driver|railyard-stats)|written-off' \$log | cut -c1-220
    for pat in 'WR flush error' 'Worker: Process failed' 'CQ completion timeout diagnostic' \
               'Endpoint reclaim timed out' 'Outstanding work requests found' 'written-off work requests' \
               'Cannot make connection' 'Rail paused' 'railyard: endpoint'; do
      echo "  log lines '\$pat': \$(grep -c "\$pat" \$log)"
    done
    echo "  completion errors by status:"
    grep -o 'Process failed for slice.*): .*' \$log | sed 's/.*): //' | sort | uniq -c | sed 's/^/    /'
    kill -9 \$tpid 2>/dev/null; wait \$tpid 2>/dev/null
    wait 2>/dev/null
  done
done
GUEST
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$TIMEOUT" -- bash "$guest" 2>&1 | tee "$mc/fault-guest.log"
echo "full logs: $mc/fault-logs/"
