#!/usr/bin/env bash
# Instructions per token round trip under callgrind, railyard vs baselines.
# Repeatable on a noisy machine. Not part of the test run (a benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || apt-get install -y valgrind
cargo build --release -q -p railyard-benches --example token_icount
bin=target/release/examples/token_icount
n=1000000
refs() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 | awk '/Collected/ {print $4}'; }
# Modes: 1t one thread; 2t two threads each doing n round trips on the shared
# contender; pp the dedicated-poller pattern (claimed through one handle,
# completed through another; on one thread, see the example's docs).
# Valgrind serializes threads: these count instructions, criterion
# (benches/token.rs) measures contention in time.
for mode in 1t 2t pp; do
  case $mode in 1t) m=$n ops=$n ;; 2t) m=200000 ops=400000 ;; pp) m=$n ops=$n ;; esac
  base_aq=""
  printf "%-16s %-4s %14s %10s\n" contender mode "instr/op" "vs aq"
  cs="array_queue railyard railyard_cache mutex_vec"
  # The real 56-byte TokenRecord instead of a u64 (one thread only).
  [ "$mode" = 1t ] && cs="$cs railyard_full_record"
  for c in $cs; do
    a=$(refs "$c" 0 "$mode"); b=$(refs "$c" "$m" "$mode")
    per=$(( (b - a) / ops ))
    [ -z "$base_aq" ] && base_aq=$per
    printf "%-16s %-4s %14d %9.2fx\n" "$c" "$mode" "$per" "$(echo "$per / $base_aq" | bc -l)"
  done
  echo
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

# The composed hot path (completion::Owner) against the same work composed
# by hand, per slice (post + complete); see core::completion's docs.
echo
cargo build --release -q -p railyard-benches --example hotpath_icount
hp=target/release/examples/hotpath_icount
printf "%-26s %14s\n" "hot path arm" "instr/slice"
for arm in hand_nocc composed_nocc composed_off composed_observe hand_enforce composed_enforce composed_enforce_chain composed_enforce_covered hand_all composed_all composed_enforce_cached composed_all_cached; do
  a=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$hp" "$arm" 0 2>&1 | awk '/Collected/ {print $4}')
  b=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$hp" "$arm" 200000 2>&1 | awk '/Collected/ {print $4}')
  printf "%-26s %14d\n" "$arm" $(( (b - a) / 200000 ))
done

# The verbs preload per work request (post + its completion) against the
# provider alone (the host tests' fake one): the preload's own cost.
echo
cargo build --release -q -p railyard-preload --example icount
pl=target/release/examples/icount
printf "%-26s %14s\n" "preload arm" "instr/WR"
for arm in provider preload-off preload-enforce; do
  a=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$pl" "$arm" 0 2>&1 | awk '/Collected/ {print $4}')
  b=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$pl" "$arm" 100000 2>&1 | awk '/Collected/ {print $4}')
  printf "%-26s %14d\n" "$arm" $(( (b - a) / 100000 ))
done
