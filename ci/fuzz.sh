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
  cargo fuzz run "$t" -s none -- -max_total_time="$secs" -max_len=4096 2>&1 \
    | grep -E "^(#[0-9]+ +DONE|Done|==|thread|panicked|SUMMARY)" || true
  # cargo fuzz exits non-zero on a crash; pipefail carries it through grep.
done
echo "fuzz: all targets clean"
