#!/usr/bin/env bash
# rfc4534-eval: RFC 4534's own evaluation protocol on Soft-RoCE guests, through
# the engine (issue #17): does peer-attributed feedback fix NIC-scope
# attribution? A benchmark, not a test (CI runs `--ci`, which asserts only
# invariants).
#
# Topology (scripts/rxe-vm --two --rxe-devs 2 --shape RATE; drawn in rxe-vm's
# header): node 0 holds the sender engine on rxe0+rxe1 and the fast peer F (an
# engine in its own process on rxe0+rxe1, reached over rxe loopback on both
# rails); node 1 holds the slow peer S (an engine on rxe0 only), reached on rail
# 0 only, across the qemu socket link that --shape rate-limits with tbf. Before
# the workload, ib_write_bw shows in the same boot that F and S really differ
# (F loopback on rxe0, on rxe1, on both at once; S across the shaped link).
#
# The workload and the protocol are verbs-shim/examples/rfc4534_eval.rs: two
# independent open-loop Poisson streams of 2 MiB WRITEs (64 KiB slices, the
# 32-slice case) with disjoint registered slots, per-request scheduled /
# submitted / terminal-visibility times, completion and RDMA READ-back checks;
# one traced V1 run calibrates the TTL by the RFC's rule; then EVAL_BLOCKS
# paired blocks of baseline (ledger off), V1, V2, V3 on the same schedules;
# then a selector CPU-cost micro-benchmark. Offered loads are derived from the
# same boot's ib_write_bw figures (F at EVAL_FAST_LOAD of one rxe0 loopback, S
# at EVAL_SLOW_LOAD of the shaped link) unless given; the nominal rail rate is
# the rxe0 loopback figure.
#
# Scenarios (EVAL_SCENARIOS, one guest boot each, each calibrated once):
#   default     the selector's defaults (EWMA floor 4/256 of nominal);
#   wide-floor  MC_RAIL_EWMA_FLOOR_Q8=1 (floor 1/256), so the slow peer's
#               completion samples are not held up by the floor.
#
# Usage (guests are heavy: each boot takes the shared lock, released between
# scenarios, via EVAL_LOCK):
#   EVAL_LOCK=/work/locks/guest.lock RXE_VM_CACHE=/work/cache/rxe-vm scripts/rfc4534-eval.sh
#   RXE_VM_CACHE=... flock /work/locks/guest.lock scripts/rfc4534-eval.sh --ci
#                     # CI: one small block of the default scenario, invariants only
#   scripts/rfc4534-eval.sh --report-only
#                     # no guests: the report again from target/rfc4534-eval/
#
# Output: docs/rfc4534-eval.md (the tables, beside `railyard sim peer-feedback`),
# and the raw data in target/rfc4534-eval/<scenario>/ (runs.jsonl, requests.csv,
# topology.txt, guest.log) and target/rfc4534-eval/sim.jsonl. Exit code:
# non-zero if a guest run or any invariant failed (every planned run is still
# recorded and reported).
#
# Env: EVAL_SCENARIOS (default "default wide-floor"), EVAL_LOCK (a lock file to
#      flock around each guest boot), EVAL_SHAPE (tbf rate of the cross-guest
#      link, default 64mbit), EVAL_BLOCKS (default 5), EVAL_DURATION_S (per
#      run, default 10), EVAL_WARMUP_S (default 1), EVAL_FAST_LOAD /
#      EVAL_SLOW_LOAD (default 0.25 / 0.5), EVAL_FAST_INTERVAL_MS /
#      EVAL_SLOW_INTERVAL_MS / EVAL_NOMINAL_MBPS (override the derived values),
#      EVAL_LOCK_PAUSE (seconds between boots with EVAL_LOCK, default 90),
#      EVAL_BW_SECS (ib_write_bw seconds, default 3), EVAL_TIMEOUT (guest
#      wall-clock limit per boot, default 570 s), EVAL_OUT (default
#      docs/rfc4534-eval.md), MC_* (engine settings, passed into the guest).
set -euo pipefail
cd "$(dirname "$0")/.."
CI_MODE=0; REPORT_ONLY=0
[[ "${1:-}" == "--ci" ]] && CI_MODE=1
[[ "${1:-}" == "--report-only" ]] && REPORT_ONLY=1
SHAPE="${EVAL_SHAPE:-64mbit}"
BW_SECS="${EVAL_BW_SECS:-3}"
if [[ $CI_MODE == 1 ]]; then
  BLOCKS=1; DURATION=3; WARMUP=0.5; TIMEOUT="${EVAL_TIMEOUT:-300}"; PROFILE=debug
  FAST_SLOTS=4; SLOW_SLOTS=2; COST_ITERS=200; SCENARIOS=default
else
  BLOCKS="${EVAL_BLOCKS:-5}"; DURATION="${EVAL_DURATION_S:-10}"; WARMUP="${EVAL_WARMUP_S:-1}"
  TIMEOUT="${EVAL_TIMEOUT:-570}"; PROFILE=release
  FAST_SLOTS=16; SLOW_SLOTS=4; COST_ITERS=4000; SCENARIOS="${EVAL_SCENARIOS:-default wide-floor}"
fi
for sc in $SCENARIOS; do
  case "$sc" in default|wide-floor) ;; *) echo "rfc4534-eval: unknown scenario '$sc'" >&2; exit 2 ;; esac
done
OUT="${EVAL_OUT:-docs/rfc4534-eval.md}"
t_start=$(date +%s)

scripts/rxe-vm --setup >/dev/null
cargo_flags=(-p railyard-verbs --features peer-feedback --example rfc4534_eval)
[[ $PROFILE == release ]] && cargo_flags+=(--release)
timeout 1800 cargo build "${cargo_flags[@]}" >&2
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
bin="$tdir/$PROFILE/examples/rfc4534_eval"
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
top="$tdir/rfc4534-eval"; [[ $CI_MODE == 1 ]] && top="$tdir/rfc4534-eval-ci"
[[ $REPORT_ONLY == 1 ]] || { rm -rf "$top"; mkdir -p "$top"; }
echo "rfc4534-eval: built in $(( $(date +%s) - t_start ))s"
lock=(); [[ -n "${EVAL_LOCK:-}" ]] && lock=(flock "$EVAL_LOCK")
rc_all=0
runs_args=()
first=1
for scenario in $SCENARIOS; do
if [[ $REPORT_ONLY == 1 ]]; then # regenerate the report from the last run's data
  [[ -s "$top/$scenario/runs.jsonl" ]] && runs_args+=(--runs "$top/$scenario/runs.jsonl")
  continue
fi
if [[ $first == 0 && ${#lock[@]} -gt 0 ]]; then
  # Let whoever waits for the guest lock in before the next boot (a blocked
  # flock gets it as soon as nobody else asks).
  echo "rfc4534-eval: pausing ${EVAL_LOCK_PAUSE:-90}s between guest boots"; sleep "${EVAL_LOCK_PAUSE:-90}"
fi
first=0
work="$top/$scenario"; mkdir -p "$work"
scenario_env=""
[[ $scenario == wide-floor ]] && scenario_env="export MC_RAIL_EWMA_FLOOR_Q8=1"

# ---------------------------------------------------------------- node 1: S
cat > "$work/node1.sh" <<EOF
set -u
if [[ $CI_MODE == 0 ]]; then
  # The topology check's server for S (one client, then it exits).
  timeout 200 ib_write_bw -F -d rxe0 -x 1 -s 65536 -D $BW_SECS -p 18700 > $work/bw-s-server.log 2>&1 || true
fi
exec $bin target --listen 0.0.0.0:18630 --control 0.0.0.0:18631 --devices rxe0 \
  --bytes $(( SLOW_SLOTS * 2097152 )) --max-secs $TIMEOUT
EOF

# ---------------------------------------------------------------- node 0: sender + F
cat > "$work/node0.sh" <<EOF
set -u
peer=\$RXE_VM_PEER_IP
bw() { # label, ib_write_bw client args...: prints "label=MiB/s" (empty on failure)
  local label=\$1; shift
  local v
  v=\$(timeout 120 ib_write_bw -F -x 1 -s 65536 -D $BW_SECS "\$@" 2>&1 | awk '/^ *65536 /{print \$4}')
  echo "\$label=\${v:-failed}" | tee -a $work/topology.txt
}
wait_port() { # host port
  for _ in \$(seq 1 600); do (exec 3<>/dev/tcp/\$1/\$2) 2>/dev/null && return 0; sleep 0.2; done
  echo "rfc4534-eval: \$1:\$2 never listened" >&2; return 1
}
: > $work/topology.txt
fbw=""; sbw=""
if [[ $CI_MODE == 0 ]]; then
  echo "=== topology check: ib_write_bw -s 65536 -D $BW_SECS (MiB/s), same boot"
  ib_write_bw -F -d rxe0 -x 1 -s 65536 -D $BW_SECS -p 18701 >/dev/null 2>&1 & sleep 1
  bw "F via rxe0 (loopback, rail 0)" -d rxe0 -p 18701 127.0.0.1; wait
  ib_write_bw -F -d rxe1 -x 1 -s 65536 -D $BW_SECS -p 18702 >/dev/null 2>&1 & sleep 1
  bw "F via rxe1 (loopback, rail 1)" -d rxe1 -p 18702 127.0.0.1; wait
  ib_write_bw -F -d rxe0 -x 1 -s 65536 -D $BW_SECS -p 18703 >/dev/null 2>&1 &
  ib_write_bw -F -d rxe1 -x 1 -s 65536 -D $BW_SECS -p 18704 >/dev/null 2>&1 & sleep 1
  bw "F via rxe0, while rxe1 runs too" -d rxe0 -p 18703 127.0.0.1 &
  bw "F via rxe1, while rxe0 runs too" -d rxe1 -p 18704 127.0.0.1; wait
  for _ in \$(seq 1 20); do
    v=\$(timeout 120 ib_write_bw -F -d rxe0 -x 1 -s 65536 -D $BW_SECS -p 18700 \$peer 2>&1 | awk '/^ *65536 /{print \$4}')
    [[ -n "\$v" ]] && break; sleep 0.5
  done
  echo "S via rxe0 (cross-guest, tbf $SHAPE)=\${v:-failed}" | tee -a $work/topology.txt
  fbw=\$(sed -n 's/^F via rxe0 (loopback, rail 0)=\([0-9.]*\)\$/\1/p' $work/topology.txt)
  sbw=\${v:-}
fi
# Offered loads and the nominal rail rate from this boot's figures.
awk_or() { awk "BEGIN{v=\$1; if (v+0 <= 0) v=\$2; printf \"%.1f\", v}"; }
fbw=\$(awk_or "\${fbw:-0}" 70); sbw=\$(awk_or "\${sbw:-0}" 7)
# (EVAL_* overrides are expanded on the host: rxe-vm passes only MC_*/RAILYARD_*.)
fast_ms="${EVAL_FAST_INTERVAL_MS:-}"; slow_ms="${EVAL_SLOW_INTERVAL_MS:-}"; nominal="${EVAL_NOMINAL_MBPS:-}"
if [[ $CI_MODE == 1 ]]; then fast_ms=\${fast_ms:-200}; slow_ms=\${slow_ms:-1000}; nominal=\${nominal:-100}; fi
[[ -n "\$fast_ms" ]] || fast_ms=\$(awk "BEGIN{printf \"%.1f\", 2 / (${EVAL_FAST_LOAD:-0.25} * \$fbw) * 1000}")
[[ -n "\$slow_ms" ]] || slow_ms=\$(awk "BEGIN{printf \"%.1f\", 2 / (${EVAL_SLOW_LOAD:-0.5} * \$sbw) * 1000}")
[[ -n "\$nominal" ]] || nominal=\$(awk "BEGIN{v=int(\$fbw * 1.048576 + 0.5); if (v < 1) v = 1; print v}")
export MC_RAIL_NOMINAL_MBPS=\$nominal
# RC local ACK timeout 2^18 x 4.096 us = 1.07 s (default 14: 67 ms): under TCG
# and a loaded host, ACKs across the shaped link can take longer than 67 ms
# seven times in a row, which retires S's endpoint mid-run.
export MC_IB_TIMEOUT=${MC_IB_TIMEOUT:-18}
$scenario_env
echo "rfc4534-eval: scenario $scenario: F every \$fast_ms ms, S every \$slow_ms ms, nominal \$MC_RAIL_NOMINAL_MBPS MB/s"
$bin target --listen 127.0.0.1:18620 --control 127.0.0.1:18621 --devices rxe0,rxe1 \
  --bytes $(( FAST_SLOTS * 2097152 )) --max-secs $TIMEOUT &
fpid=\$!
wait_port 127.0.0.1 18621 && wait_port \$peer 18631 || exit 1
rc=0
$bin sender --fast 127.0.0.1:18620 --fast-control 127.0.0.1:18621 \
  --slow \$peer:18630 --slow-control \$peer:18631 --devices rxe0,rxe1 \
  --fast-interval-ms \$fast_ms --slow-interval-ms \$slow_ms \
  --duration-s $DURATION --warmup-s $WARMUP --blocks $BLOCKS \
  --fast-slots $FAST_SLOTS --slow-slots $SLOW_SLOTS --cost-iters $COST_ITERS \
  --scenario $scenario --topology $work/topology.txt \\
  --out $work/runs.jsonl --requests $work/requests.csv || rc=\$?
if [[ \$rc != 0 ]]; then # a sender that failed early never said done: end both targets
  for hp in 127.0.0.1/18621 \$peer/18631; do (printf done >/dev/tcp/\$hp) 2>/dev/null || true; done
fi
wait \$fpid || rc=1
exit \$rc
EOF

t=$(date +%s)
set +e
"${lock[@]}" scripts/rxe-vm "${share[@]}" --two --rxe-devs 2 --shape "$SHAPE" --timeout "$TIMEOUT" \
  --peer-cmd "bash $work/node1.sh" -- bash "$work/node0.sh" 2>&1 | tee "$work/guest.log"
rc=${PIPESTATUS[0]}
set -e
echo "rfc4534-eval: scenario $scenario: guest run took $(( $(date +%s) - t ))s (exit $rc), host load $(cut -d' ' -f1-3 /proc/loadavg)"
[[ $rc == 0 ]] || rc_all=$rc
if [[ -s "$work/runs.jsonl" ]]; then
  # The host's load (1/5/15-min averages) as the boot ended, for the report.
  printf '{"kind":"host","loadavg":"%s","cores":%s}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)" >> "$work/runs.jsonl"
  runs_args+=(--runs "$work/runs.jsonl")
else
  echo "rfc4534-eval: FAIL: scenario $scenario produced no results (guest exit $rc)" >&2; rc_all=1
fi
done

[[ ${#runs_args[@]} -gt 0 ]] || exit 1
if [[ $CI_MODE == 1 ]]; then
  # Exercise the report generator too (not written to docs/).
  "$bin" report "${runs_args[@]}" --command "scripts/rfc4534-eval.sh --ci" --out "$top/report.md"
else
  timeout 900 cargo run --release -q -p railyard-cli -- sim peer-feedback --json > "$top/sim.jsonl"
  "$bin" report "${runs_args[@]}" --sim "$top/sim.jsonl" \
    --command "scripts/rfc4534-eval.sh (EVAL_SCENARIOS=\"$SCENARIOS\" EVAL_SHAPE=$SHAPE EVAL_BLOCKS=$BLOCKS EVAL_DURATION_S=$DURATION)" \
    --out "$OUT"
fi
echo "rfc4534-eval: total $(( $(date +%s) - t_start ))s"
exit "$rc_all"
