#!/usr/bin/env bash
# bench-preload: railyard under Mooncake TE's unmodified transfer_engine_bench
# (PyPI wheel) and perftest, through the verbs preload, in ONE Soft-RoCE
# guest, arms alternating (scripts/bench_preload.py has the method and the
# goals). A benchmark, not a test: absolute MiB/s under TCG mean nothing,
# the same-round ratios are the point.
#
#   stock            the wheel's transfer_engine_bench as shipped
#   preload-off      the same binary, LD_PRELOAD=librailyard_preload.so, CC off
#   preload-enforce  the same, MC_ADAPTIVE_CC_MODE=enforce
#   perftest         ib_write_bw / ib_read_bw, stock and preload-off
#
# Usage: scripts/bench-preload.sh [bench_preload.py run options]
#   e.g. --rounds 3 --secs 5 --ops write,read --sizes 65536,4096 --threads 1,4
# Env: BENCH_TIMEOUT (guest limit, default 3600 s). Results: target/bench-preload/.
# Run it under the shared guest lock:
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock scripts/bench-preload.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TIMEOUT="${BENCH_TIMEOUT:-3600}"
out="$PWD/target/bench-preload"
mkdir -p "$out"
cargo build -q --release -p railyard-preload
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
so="$tdir/release/librailyard_preload.so"
share=(); case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
source scripts/mooncake-wheel.sh
mooncake_wheel "$out"
bench=$mc_bench
scripts/rxe-vm --setup >/dev/null
raw="$out/raw-$(date +%Y%m%d-%H%M%S).jsonl"
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$TIMEOUT" -- \
  python3 scripts/bench_preload.py run --raw "$raw" --bench "$bench" --preload "$so" "$@"
python3 scripts/bench_preload.py report --raw "$raw" --json "$out/results.json"
echo "bench-preload: raw records in $raw"
