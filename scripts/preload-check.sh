#!/usr/bin/env bash
# preload-check: the guest side of ci/preload.sh (run it through that
# script, inside a Soft-RoCE guest). Runs unmodified programs with
# LD_PRELOAD=$RAILYARD_PRELOAD and CC enforcing, each writing its railyard
# counters to $PRELOAD_OUT/<name>.json, and prints "RAN <step>" for every
# step that ran; ci/preload.sh checks the rest.
# Env (set by ci/preload.sh): RAILYARD_PRELOAD, PRELOAD_OUT, PRELOAD_PY (a
# venv python with the Mooncake wheel), PRELOAD_BENCH (the wheel's
# transfer_engine_bench), PRELOAD_SECS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
ip=${RXE_VM_SELF_IP:-10.77.1.1}
export MC_GID_INDEX=1 GLOG_logtostderr=1
pre() { # name: the environment that puts a process under railyard
  echo "LD_PRELOAD=$RAILYARD_PRELOAD MC_ADAPTIVE_CC_MODE=enforce MC_RAILYARD_STATS=$PRELOAD_OUT/$1.json"
}
common="--metadata_server=P2PHANDSHAKE --protocol=rdma --device_name=rxe0 --local_server_name=$ip --buffer_size=67108864"
fail=0

# 1. Mooncake's transfer_engine_bench, target and initiator.
for op in write read; do
  env $(pre "bench-target-$op") "$PRELOAD_BENCH" --mode=target $common > /tmp/target.log 2>&1 &
  tpid=$!
  seg=""
  for _ in $(seq 1 150); do
    seg=$(sed -n 's/.*listening on \([^ ]*:[0-9]*\).*/\1/p' /tmp/target.log | head -n 1)
    [[ -n "$seg" ]] && break
    sleep 0.2
  done
  if [[ -z "$seg" ]]; then
    echo "the target did not report its listener:"; tail -n 20 /tmp/target.log; fail=1
  else
    env $(pre "bench-initiator-$op") timeout 120 "$PRELOAD_BENCH" --mode=initiator $common \
      --segment_id="$seg" --operation=$op --threads=2 --batch_size=128 --block_size=65536 \
      --duration="$PRELOAD_SECS" > /tmp/init.log 2>&1
    rc=$?
    grep -E "Test completed|ERROR|FATAL" /tmp/init.log | tail -n 5
    [[ $rc == 0 ]] && grep -q "Test completed" /tmp/init.log && echo "RAN bench $op" || { echo "bench $op: exit $rc"; tail -n 20 /tmp/init.log; fail=1; }
  fi
  # The target never exits by itself: its counters on SIGUSR1, then stop it.
  kill -USR1 $tpid 2>/dev/null; sleep 0.5
  kill $tpid 2>/dev/null; wait $tpid 2>/dev/null
done

# 2. The wheel's Python TransferEngine: write, read back, compare.
env $(pre rw) timeout 300 "$PRELOAD_PY" "$here/mooncake_rw.py" --rounds 20 --host "$ip" && echo "RAN rw" || fail=1

# 2b. The same under a byte window of one 64 KiB block per domain: most
# requests are held back by CC and posted later, in order, and the data
# still reads back equal.
env $(pre rw-deferred) MC_ADAPTIVE_CC_MIN_WINDOW_BYTES=65536 MC_ADAPTIVE_CC_MAX_WINDOW_BYTES=65536 \
  MC_ADAPTIVE_CC_PROBE_WINDOW_BYTES=65536 timeout 300 "$PRELOAD_PY" "$here/mooncake_rw.py" --rounds 5 --host "$ip" \
  && echo "RAN rw-deferred" || fail=1

# 3. The same script with and without the preload: the same results.
compat="$here/../python/tests/compat_script.py"
(cd /tmp && COMPAT_HOST=$ip timeout 300 "$PRELOAD_PY" "$compat" mooncake > /tmp/compat-stock.txt 2>/tmp/compat-stock.err)
(cd /tmp && env $(pre compat) COMPAT_HOST=$ip timeout 300 "$PRELOAD_PY" "$compat" mooncake > /tmp/compat-preload.txt 2>/tmp/compat-preload.err)
n=$(grep -c '"step"' /tmp/compat-stock.txt)
if [[ $n -gt 10 ]] && cmp -s /tmp/compat-stock.txt /tmp/compat-preload.txt; then
  echo "RAN compat"; echo "COMPAT SAME $n steps"
else
  echo "compat: the preloaded run differs ($n steps without it):"; diff /tmp/compat-stock.txt /tmp/compat-preload.txt | head -n 20
  tail -n 5 /tmp/compat-preload.err; fail=1
fi

# 4. perftest, both sides preloaded, timed (-D) and with -F (in iteration
# mode perftest refuses to report when its CPU clock estimate is noisy, as
# under a loaded TCG guest; scripts/bench-peers.sh runs it the same way).
# The WRITE run signals one request in 16 (--cq-mod): the others complete
# with the next completion.
for t in write read; do
  mod=""; [[ $t == write ]] && mod="-Q 16"
  env $(pre ${t}_bw-server) timeout 60 ib_${t}_bw -d rxe0 -x 1 -s 65536 -D "$PRELOAD_SECS" $mod -F -p 18620 > /tmp/srv.log 2>&1 &
  spid=$!
  for _ in $(seq 50); do ss -ltn | grep -q :18620 && break; sleep 0.1; done
  env $(pre ${t}_bw-client) timeout 60 ib_${t}_bw -d rxe0 -x 1 -s 65536 -D "$PRELOAD_SECS" $mod -F -p 18620 "$ip" > /tmp/cli.log 2>&1
  rc=$?
  wait $spid
  grep -A1 '#bytes' /tmp/cli.log | tail -n 1
  [[ $rc == 0 ]] && echo "RAN ${t}_bw" || { echo "ib_${t}_bw: exit $rc"; tail -n 20 /tmp/cli.log; fail=1; }
done
exit $fail
