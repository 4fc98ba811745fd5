#!/usr/bin/env bash
# bench-python: a Python loop of batch_transfer_sync_write (64 KiB x 128 per
# batch) through railyard and through Mooncake's wheel, and the same loop on
# the Rust engine directly, all in one Soft-RoCE guest and run (absolute
# numbers under qemu TCG mean nothing; compare the ratios).
#
#   scripts/bench-python.sh [ITERS]       (default 200; not part of CI)
#
# Uses the wheel + venv ci/python.sh leaves in target/py-ci (run it first,
# or set PY=/path/to/venv/bin/python with railyard and
# mooncake-transfer-engine-non-cuda installed). Runs each twice, alternating.
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS="${1:-200}"
PY="${PY:-$PWD/target/py-ci/venv/bin/python}"
[[ -x "$PY" ]] || { echo "bench-python: no venv at $PY (run ci/python.sh first)" >&2; exit 2; }
cargo build --release -p railyard-verbs --example batch_sync_loop >&2
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
rust="$tdir/release/examples/batch_sync_loop"
log="$PWD/target/bench-python.log"
scripts/rxe-vm --mem 3072 --timeout 1200 -e MC_GID_INDEX=1 -- bash -c '
  for round in 1 2; do
    "$1" "$3" rxe0
    "$2" python/bench/batch_write.py railyard "$3" rxe0
    "$2" python/bench/batch_write.py mooncake "$3" rxe0 2>/dev/null
  done' _ "$rust" "$PY" "$ITERS" 2>&1 | tee "$log"
grep '^RESULT' "$log" | awk '
  { split($4, m, "="); split($5, u, "="); mibs[$2] += m[2]; us[$2] += u[2]; n[$2]++ }
  END {
    for (k in n) printf "bench-python: %-8s %9.1f MiB/s %9.1f us/call (mean of %d)\n", k, mibs[k]/n[k], us[k]/n[k], n[k]
    if (n["rust"] && n["railyard"]) printf "bench-python: Python overhead per call (railyard - rust): %.1f us\n", us["railyard"]/n["railyard"] - us["rust"]/n["rust"]
    if (n["mooncake"] && n["railyard"]) printf "bench-python: railyard / mooncake throughput: %.2f\n", (mibs["railyard"]/n["railyard"]) / (mibs["mooncake"]/n["mooncake"])
  }'
