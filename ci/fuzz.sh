#!/usr/bin/env bash
# fuzz: every cargo-fuzz target, on stable (-s none), for a bounded time.
# FUZZ_SECONDS per target (default 20); FUZZ_TARGETS to pick a subset.
# handshake_decode (what a network peer sends us) runs twice as long and
# must reach FUZZ_MIN_RUNS_HANDSHAKE executions (default 1,000,000): if the
# timed run fell short (a loaded machine), it continues, from the same
# corpus, for the missing runs (capped at 120 s more).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
secs="${FUZZ_SECONDS:-20}"
targets="${FUZZ_TARGETS:-$(cargo fuzz list)}"
cargo fuzz build -s none $targets 2>&1 | tail -n 2 || cargo fuzz build -s none
secs_of() { case "$1" in handshake_decode) echo $(( secs * 2 )) ;; *) echo "$secs" ;; esac; }
floor_of() { case "$1" in handshake_decode) echo "${FUZZ_MIN_RUNS_HANDSHAKE:-1000000}" ;; *) echo 0 ;; esac; }
# One libFuzzer run; prints its DONE line, echoes its execution count to fd 3.
run() { # target, libFuzzer args...
  local t=$1 log rc=0; shift
  log=$(mktemp)
  cargo fuzz run "$t" -s none -- -max_len=4096 "$@" >"$log" 2>&1 || rc=$?
  grep -E "^(#[0-9]+ +DONE|Done)" "$log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc):"; tail -n 60 "$log"; rm -f "$log"; exit 1
  fi
  sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -n 1 >&3
  rm -f "$log"
}
for t in $targets; do
  s=$(secs_of "$t"); floor=$(floor_of "$t")
  echo "fuzz: $t for ${s}s"
  t0=$(date +%s)
  n=$(run "$t" -max_total_time="$s" 3>&1 >&2); n=${n:-0}
  if [ "$n" -lt "$floor" ]; then
    echo "fuzz: $t reached $n of $floor executions; continuing"
    more=$(run "$t" -runs=$(( floor - n )) -max_total_time=120 3>&1 >&2)
    n=$(( n + ${more:-0} ))
    [ "$n" -ge "$floor" ] || { echo "fuzz: $t FAILED: $n executions, fewer than $floor"; exit 1; }
  fi
  echo "fuzz: $t: $n executions, 0 crashes, in $(( $(date +%s) - t0 ))s"
done
echo "fuzz: all targets clean"
