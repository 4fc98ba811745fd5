#!/usr/bin/env bash
# bench-chains: a candidate `railyard` against a baseline `railyard` (e.g.
# main's) and ib_write_bw / ib_read_bw -q <QPs>, in ONE Soft-RoCE guest run,
# arms alternating: WRITE and READ, 4 KiB and 64 KiB, 1 and 8 submitter
# threads, each worker model of --models (shared, w1, dedicated), with
# posts per doorbell from `railyard bench --json`. A benchmark, not a test:
# never part of CI. Build both binaries first (release, --features verbs);
# both must live under the checkout (the guest sees it, not the host's /tmp).
#
# Usage:
#   scripts/bench-chains.sh --base BIN --new BIN [--ops write,read]
#       [--sizes 4096,65536] [--threads 1,8] [--models shared,dedicated]
#       [--rounds 2] [--secs 3] [--qps 2] [--lock FILE]
#   RXE_VM_CACHE=/work/cache/rxe-vm scripts/bench-chains.sh --lock /work/locks/guest.lock \
#       --base target/main-target/release/railyard --new target/release/railyard
# Output: the table on stdout, raw records in target/bench-chains/raw.jsonl,
# every process's log in target/bench-chains/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
lock="${PEERS_LOCK:-}"; args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lock) lock="$2"; shift ;;
    --base|--new) args+=("$1" "$(realpath "$2")"); shift ;;
    --ops|--sizes|--threads|--models|--rounds|--secs|--qps) args+=("$1" "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-chains: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
out="$PWD/target/bench-chains"
rm -rf "$out"; mkdir -p "$out"
run=(scripts/rxe-vm --timeout 3600 -- python3 scripts/bench_chains.py --out "$out" "${args[@]}")
if [[ -n "$lock" ]]; then flock "$lock" "${run[@]}"; else "${run[@]}"; fi
