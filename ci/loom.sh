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
# No debuginfo: it only slows the many rebuilds below (a failing model still
# prints its interleaving).
export CARGO_PROFILE_RELEASE_DEBUG=0
start=$(date +%s)
RUSTFLAGS="--cfg railyard_loom" cargo test -p railyard-loom-tests --release -- --test-threads=2
echo "loom: models passed in $(( $(date +%s) - start ))s"
variants=$(grep -ho 'railyard_broken = "[a-z0-9_]*"' loom-tests/tests/*.rs | cut -d'"' -f2 | sort -u)
# Each variant rebuilds core, so build only the model file that names it
# (one test binary, not all of them): the rebuilds, not the models, are
# most of this script's time.
for v in $variants; do
  echo "loom: broken variant '$v' must be caught"
  for f in $(grep -l "railyard_broken = \"$v\"" loom-tests/tests/*.rs); do
    out=$(RAILYARD_BROKEN="$v" RUSTFLAGS="--cfg railyard_loom" \
      cargo test -p railyard-loom-tests --release --test "$(basename "$f" .rs)" \
      -- "broken_$v" --test-threads=2 2>&1) || { echo "$out"; exit 1; }
    echo "$out" | grep -E '^test |^test result'
    # A filter that matches nothing passes vacuously: the twin must have run.
    echo "$out" | grep -qE '^test result: ok\. [1-9]' \
      || { echo "loom: no test named broken_$v ran in $f"; exit 1; }
  done
done
echo "loom: all done in $(( $(date +%s) - start ))s"
