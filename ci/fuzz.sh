#!/usr/bin/env bash
# fuzz: every cargo-fuzz target, on stable (-s none), for a bounded time.
# FUZZ_SECONDS per target (default 20); FUZZ_TARGETS to pick a subset.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
secs="${FUZZ_SECONDS:-20}"
targets="${FUZZ_TARGETS:-$(cargo fuzz list)}"
cargo fuzz build -s none $targets 2>&1 | tail -n 2 || cargo fuzz build -s none
for t in $targets; do
  echo "fuzz: $t for ${secs}s"
  log=$(mktemp)
  rc=0
  cargo fuzz run "$t" -s none -- -max_total_time="$secs" -max_len=4096 >"$log" 2>&1 || rc=$?
  grep -E "^(#[0-9]+ +DONE|Done)" "$log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc):"; tail -n 60 "$log"; rm -f "$log"; exit 1
  fi
  rm -f "$log"
done
echo "fuzz: all targets clean"
