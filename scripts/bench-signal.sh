#!/usr/bin/env bash
# bench-signal: selective signaling's effect on the 4 KiB message rate
# (issue #18 item 6). In ONE Soft-RoCE guest run, arms alternating:
# `railyard bench` (CC off, Mooncake's shape: batches of 128, one in flight
# per thread) with MC_SIGNAL_INTERVAL=1 (every work request signaled) and
# with each other interval of --ks, at 1 and 8 submitter threads, beside
# ib_write_bw / ib_read_bw -q <QPs> (perftest signals every 100th, --cq-mod).
# A benchmark, not a test: never part of CI.
#
# Usage:
#   scripts/bench-signal.sh [--ks 1,16] [--ops write,read] [--threads 1,8]
#                           [--rounds 2] [--secs 3] [--qps 2] [--lock FILE]
#   RXE_VM_CACHE=/work/cache/rxe-vm scripts/bench-signal.sh --lock /work/locks/guest.lock
# Output: the table on stdout, raw records in target/bench-signal/raw.jsonl,
# every process's log in target/bench-signal/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
lock="${PEERS_LOCK:-}"; args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lock) lock="$2"; shift ;;
    --ks|--ops|--threads|--rounds|--secs|--qps) args+=("$1" "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-signal: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
cargo build --release -p railyard-cli --features verbs
out="$PWD/target/bench-signal"
rm -rf "$out"; mkdir -p "$out"
run=(scripts/rxe-vm --timeout 3600 -- python3 scripts/bench_signal.py
     --railyard "$PWD/target/release/railyard" --out "$out" "${args[@]}")
if [[ -n "$lock" ]]; then flock "$lock" "${run[@]}"; else "${run[@]}"; fi
