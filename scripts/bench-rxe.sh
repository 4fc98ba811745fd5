#!/usr/bin/env bash
# bench-rxe: `railyard bench --op write -s 65536` against `ib_write_bw -s
# 65536` in the SAME Soft-RoCE guest and the same run, and their ratio.
# Not part of the test run (absolute numbers under TCG mean nothing; the
# ratio is the point). Goal from issue #6: ratio >= 0.95.
#
# Each round runs railyard twice, with MC_ADAPTIVE_CC_MODE=off and =enforce
# (RFC 4162 controller in the post gate), then ib_write_bw once; a ratio per
# CC mode. Both run as loopback server + client on rxe0 (two processes each):
#   railyard bench -d rxe0 -x 1 --listen 127.0.0.1 --quiet &
#   railyard bench -d rxe0 -x 1 -s 65536 --op write -D SECS --json 127.0.0.1
#   ib_write_bw -d rxe0 -x 1 -s 65536 -D SECS &
#   ib_write_bw -d rxe0 -x 1 -s 65536 -D SECS 127.0.0.1
# ib_write_bw's "BW average[MB/sec]" is MiB/s (perftest: 1 MB = 2^20 B),
# compared with railyard's MiB/s.
#
# Measured on this machine (3 alternating rounds each, median ratio):
#   defaults (2 QPs/ep, idle park 1 ms)            0.73
#   MC_RDMA_IDLE_PARK_US=50                         1.36
#   MC_RDMA_IDLE_PARK_US=50 MC_NUM_QP_PER_EP=1      0.46
#   ... and BENCH_ARGS="--batch 4 --depth 32"       0.70
# With the CC round (engine-cc branch; host shared with other agents' builds,
# so absolute MiB/s drift by 2x between runs — compare within one run):
#                                      CC off   CC enforce  (median ratio)
#   defaults                           0.781    0.519
#   defaults, a second run             0.806    0.432  (2 rounds: see harness note)
#   MC_RDMA_IDLE_PARK_US=50            0.843    0.503
#   MC_ADAPTIVE_CC_TARGET_DRAIN_US=20000  1.588 1.557  (quiet host: off 157-167 MiB/s)
#   defaults, quiet host (final run)   1.660    1.412  (off 162-169, enforce 136-150 MiB/s,
#                                                       ib_write_bw 99-102 MiB/s)
#   after rails + reconnect + fault hooks merged,  1.558    1.308  (quiet host, off 162 MiB/s,
#   quiet host (2026-11-29, second stop)                     enforce 134 MiB/s, ib_write_bw 103 MiB/s)
# Enforce at the RFC default target drain time (200 us) shrinks the window to
# the 256 KiB minimum: Soft-RoCE under TCG drains 256 KiB in ~3 ms, which
# the controller rightly reads as pressure. With a target that fits the link
# (20 ms) enforce is within 2% of off: the gate itself costs little; the
# gap at defaults is policy on a ~100 MB/s "NIC", not overhead.
# The idle-park default stays 1 ms: at 50 us railyard's own MiB/s did not
# rise (70.9/70.1/68.0 vs 72.8/78.4/71.7 at 1 ms); the earlier 1.36 came
# from ib_write_bw/host drift. A worker only parks with nothing queued and
# nothing in flight, and submit/post unpark it at once.
# Under TCG, rxe's protocol work runs in softirq/tasklets or inline in the
# posting syscall; frequent wakeups and frequent doorbells feed it, so these
# ratios say more about Soft-RoCE scheduling than about the engine.
#
# Env: BENCH_SECS (default 5), BENCH_ROUNDS (default 3), BENCH_TIMEOUT (guest limit, default 400),
#      BENCH_ARGS (extra railyard client args, e.g. "--batch_size 64 --depth 4 --threads 2"),
#      MC_* engine settings (passed into the guest).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${BENCH_SECS:-5}"
ROUNDS="${BENCH_ROUNDS:-3}"
TIMEOUT="${BENCH_TIMEOUT:-400}"
EXTRA="${BENCH_ARGS:-}"

scripts/rxe-vm --setup >/dev/null
timeout 1800 cargo build --release -p railyard-cli --features verbs >&2
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
bin="$tdir/release/railyard"
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac

# The guest sees the checkout (and its target/), not the host's /tmp.
CACHE="${RXE_VM_CACHE:-$PWD/target/rxe-vm}"
mkdir -p "$CACHE"
guest="$CACHE/bench-guest.sh"
cat > "$guest" <<GUEST
set -u
# Alternate railyard and ib_write_bw ROUNDS times in this one guest (host
# load from other jobs drifts; alternating and taking the median ratio is
# fairer than one run of each).
ratios_off=""
ratios_enf=""
# run_ry MODE: one railyard bench round with MC_ADAPTIVE_CC_MODE=MODE on both
# sides; sets ry (MiB/s, empty on failure).
run_ry() {
  echo "=== round \$round: railyard bench --op write -s 65536 (${SECS} s, CC \$1)"
  MC_ADAPTIVE_CC_MODE=\$1 $bin bench -d rxe0 -x 1 --listen 127.0.0.1 --quiet > /tmp/ry-target.log 2>&1 &
  tpid=\$!
  # The client retries while the server is not listening yet.
  MC_ADAPTIVE_CC_MODE=\$1 timeout \$(( $SECS + 90 )) $bin bench -d rxe0 -x 1 -s 65536 --op write -D $SECS --json $EXTRA 127.0.0.1 > /tmp/ry.json 2> /tmp/ry.log
  rc=\$?
  echo "railyard client exit code \$rc"
  cat /tmp/ry.json
  wait \$tpid 2>/dev/null
  ry=\$(sed -n 's/.*"bw_average_mib_per_s":\([0-9.]*\).*/\1/p' /tmp/ry.json)
  if [ -z "\$ry" ]; then
    echo "--- railyard initiator log:"; tail -n 20 /tmp/ry.log
    echo "--- railyard target log:"; tail -n 5 /tmp/ry-target.log
  fi
}
for round in \$(seq 1 $ROUNDS); do
  run_ry off; ry_off=\$ry
  run_ry enforce; ry_enf=\$ry
  echo "=== round \$round: ib_write_bw -s 65536 (${SECS} s)"
  ib=""
  # perftest sometimes cannot calibrate its clock under TCG ("Correlation
  # coefficient r^2 < 0.9: Can't produce a report"): retry up to 3 times.
  for attempt in 1 2 3; do
    timeout 120 ib_write_bw -d rxe0 -x 1 -s 65536 -D $SECS > /tmp/bw-server.log 2>&1 &
    spid=\$!
    sleep 1
    timeout 120 ib_write_bw -d rxe0 -x 1 -s 65536 -D $SECS 127.0.0.1 > /tmp/bw.log 2>&1
    wait \$spid 2>/dev/null
    ib=\$(awk '/^ *65536 / && \$4 > 0 {print \$4}' /tmp/bw.log)
    [ -n "\$ib" ] && break
    echo "ib_write_bw attempt \$attempt produced no report"
  done
  sed -n '/#bytes/,/^ *65536/p' /tmp/bw.log
  if [ -n "\$ib" ] && [ -n "\$ry_off" ]; then
    r=\$(awk -v a="\$ry_off" -v b="\$ib" 'BEGIN{printf "%.3f", a/b}')
    echo "round \$round: CC off:     railyard \$ry_off MiB/s, ib_write_bw \$ib MiB/s, ratio \$r"
    ratios_off="\$ratios_off \$r"
  fi
  if [ -n "\$ib" ] && [ -n "\$ry_enf" ]; then
    r=\$(awk -v a="\$ry_enf" -v b="\$ib" 'BEGIN{printf "%.3f", a/b}')
    echo "round \$round: CC enforce: railyard \$ry_enf MiB/s, ib_write_bw \$ib MiB/s, ratio \$r"
    ratios_enf="\$ratios_enf \$r"
  fi
  [ -n "\$ib" ] || echo "round \$round: ib_write_bw failed"
done
median() { echo \$1 | tr ' ' '\n' | sort -n | awk -v what="\$2" '{a[NR]=\$1} END{printf "%s: median ratio = %.3f over %d rounds (goal >= 0.95)\n", what, a[int((NR+1)/2)], NR}'; }
echo "=== result"
[ -n "\$ratios_off\$ratios_enf" ] || { echo "ratio: n/a (every round failed)"; exit 1; }
echo "ratios railyard / ib_write_bw per round: CC off:\$ratios_off; CC enforce:\$ratios_enf"
[ -n "\$ratios_off" ] && median "\$ratios_off" "CC off"
[ -n "\$ratios_enf" ] && median "\$ratios_enf" "CC enforce"
true
GUEST
scripts/rxe-vm "${share[@]}" --timeout "$TIMEOUT" -- bash "$guest"
