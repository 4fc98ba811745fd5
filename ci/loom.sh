#!/usr/bin/env bash
# loom: every model in loom-tests/ against the real core, then each
# deliberately broken variant, which must be caught (its test is should_panic).
# A variant is switched on by RAILYARD_BROKEN=<variant>, which core's and
# loom-tests' build scripts turn into --cfg railyard_broken="<variant>";
# without --cfg railyard_loom core's build script refuses it (ci/broken-guard.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom"
start=$(date +%s)
RUSTFLAGS="--cfg railyard_loom" cargo test -p railyard-loom-tests --release -- --test-threads=2
echo "loom: models passed in $(( $(date +%s) - start ))s"
variants=$(grep -ho 'railyard_broken = "[a-z0-9_]*"' loom-tests/tests/*.rs | cut -d'"' -f2 | sort -u)
for v in $variants; do
  echo "loom: broken variant '$v' must be caught"
  RAILYARD_BROKEN="$v" RUSTFLAGS="--cfg railyard_loom" \
    cargo test -p railyard-loom-tests --release -- "broken_$v" --test-threads=2
done
echo "loom: all done in $(( $(date +%s) - start ))s"
