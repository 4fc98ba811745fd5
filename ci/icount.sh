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
