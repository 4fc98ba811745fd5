#!/usr/bin/env bash
# Instructions per token round trip under callgrind, railyard vs baselines.
# Repeatable on a noisy machine. Not part of the test run (a benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || apt-get install -y valgrind
cargo build --release -q -p railyard-benches --example token_icount
bin=target/release/examples/token_icount
n=1000000
refs() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 | awk '/Collected/ {print $4}'; }
base_aq=""
printf "%-12s %14s %10s\n" contender "instr/round" "vs aq"
for c in array_queue railyard mutex_vec; do
  a=$(refs "$c" 0); b=$(refs "$c" "$n")
  per=$(( (b - a) / n ))
  [ -z "$base_aq" ] && base_aq=$per
  printf "%-12s %14d %9.2fx\n" "$c" "$per" "$(echo "$per / $base_aq" | bc -l)"
done

# Rail pick+release, 4 devices: no ledger compiled in vs compiled in, flag off.
echo
printf "%-28s %14s\n" "rail pick+release (4 dev)" "instr/op"
for feat in "" "peer-feedback"; do
  dir=target/icount-${feat:-noledger}
  CARGO_TARGET_DIR=$dir cargo build --release -q -p railyard-benches --example rail_icount ${feat:+--features $feat}
  r() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$dir/release/examples/rail_icount" 4 "$1" 2>&1 | awk '/Collected/ {print $4}'; }
  a=$(r 0); b=$(r "$n")
  printf "%-28s %14d\n" "${feat:-no ledger compiled}${feat:+ (flag off)}" $(( (b - a) / n ))
done
