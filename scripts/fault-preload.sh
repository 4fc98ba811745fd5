#!/usr/bin/env bash
# fault-preload: faults under Mooncake TE's own Python TransferEngine (the
# PyPI wheel, unmodified), stock against railyard's verbs preload (CC
# enforce), same program, one Soft-RoCE guest. An experiment, not a test: it
# prints what happened and asserts nothing.
#
# The driver is scripts/mooncake_rw.py --expect-failures (write, read back,
# compare, in rounds; it counts failed and stranded batches instead of
# stopping at the first). Faults, mid-run:
#   qp-err       every QP of the process is moved to ERR with work posted
#                (scripts/qp_fault.c, an LD_PRELOAD of its own that neither
#                the program nor railyard knows about: it sits behind
#                railyard's preload and calls libibverbs directly), then the
#                run continues;
#   kill-target  the peer process (a second mooncake_rw.py engine pair's
#                target side) is killed: here, the target is a
#                transfer_engine_bench --mode=target in its own process,
#                killed with SIGKILL, and the driver writes to it.
# Reported per run: the driver's summary (rounds, blocks verified,
# mismatched, failed, stranded) and, for the preload, railyard's counters
# at exit (every flushed / stale completion counted; gauges back to zero).
#
# Env: FAULT_SECS (driver run, default 12), FAULT_AT_MS (default 3000),
#      FAULTS (default "qp-err kill-target"), FAULT_TIMEOUT (guest, 900 s).
# Run it under the shared guest lock:
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock scripts/fault-preload.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${FAULT_SECS:-12}"
AT_MS="${FAULT_AT_MS:-3000}"
FAULTS="${FAULTS:-qp-err kill-target}"
TIMEOUT="${FAULT_TIMEOUT:-900}"
out="$PWD/target/fault-preload"
mkdir -p "$out"
cargo build -q --release -p railyard-preload
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
so="$tdir/release/librailyard_preload.so"
share=(); case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
cc -shared -fPIC -O2 -o "$out/qp_fault.so" scripts/qp_fault.c -ldl -lpthread
source scripts/mooncake-wheel.sh
mooncake_wheel "$out"
py=$mc_py bench=$mc_bench
scripts/rxe-vm --setup >/dev/null
guest="$out/guest.sh"
cat > "$guest" <<GUEST
set -u
export MC_GID_INDEX=1 GLOG_logtostderr=1
ip=\${RXE_VM_SELF_IP:-10.77.1.1}
for fault in $FAULTS; do
  for v in stock preload; do
    log=$out/\$fault-\$v.log
    stats=$out/\$fault-\$v.json
    rm -f "\$stats"
    pre=""
    [[ \$v == preload ]] && pre="LD_PRELOAD=$so MC_ADAPTIVE_CC_MODE=enforce MC_RAILYARD_STATS=\$stats"
    echo "=== \$fault, \$v"
    case \$fault in
      qp-err)
        # Ours first: qp_fault's own calls then go straight to libibverbs,
        # behind railyard's back, like a NIC error.
        [[ \$v == preload ]] && pre="LD_PRELOAD=$so:$out/qp_fault.so MC_ADAPTIVE_CC_MODE=enforce MC_RAILYARD_STATS=\$stats" \
          || pre="LD_PRELOAD=$out/qp_fault.so"
        env \$pre QP_FAULT_AFTER_MS=$AT_MS timeout $(( SECS + 200 )) $py $PWD/scripts/mooncake_rw.py \
          --seconds $SECS --expect-failures --batch-timeout 20 --host \$ip > \$log 2>&1 ;;
      kill-target)
        $bench --mode=target --metadata_server=P2PHANDSHAKE --protocol=rdma --device_name=rxe0 \
          --local_server_name=\$ip --buffer_size=67108864 > /tmp/target.log 2>&1 &
        tpid=\$!
        seg=""
        for _ in \$(seq 1 150); do
          seg=\$(sed -n 's/.*listening on \([^ ]*:[0-9]*\).*/\1/p' /tmp/target.log | head -n 1)
          [[ -n "\$seg" ]] && break; sleep 0.2
        done
        ( sleep \$(awk -v m=$AT_MS 'BEGIN{print m/1000 + 2}'); kill -9 \$tpid; echo "fault: killed the target" ) &
        env \$pre timeout $(( SECS + 200 )) $bench --mode=initiator --metadata_server=P2PHANDSHAKE \
          --protocol=rdma --device_name=rxe0 --local_server_name=\$ip --buffer_size=67108864 \
          --segment_id=\$seg --operation=write --threads=2 --batch_size=128 --block_size=65536 \
          --duration=$SECS > \$log 2>&1
        echo "initiator exit code \$?"
        wait ;;
    esac
    tail -n 3 \$log | cut -c1-200
    grep -E '^\{"rounds"' \$log
    echo "  Mooncake log lines: flush errors \$(grep -c 'WR flush error\|FLUSH' \$log), failed slices \$(grep -c 'Process failed\|failed' \$log)"
    [[ -f \$stats ]] && python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("  railyard:", {k: s[k] for k in ["posted_wrs","completions","error_completions","flushed_at_teardown","late_restored","deferred_wrs","deferred_flushed","deferred_dropped","endpoints_retired","tokens_in_use","endpoint_outstanding","cc_in_flight","deferred_now","release_faults","panics"]})' \$stats
  done
done
GUEST
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$TIMEOUT" -- bash "$guest" 2>&1 | tee "$out/fault-guest.log"
