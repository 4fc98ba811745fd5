#!/usr/bin/env bash
# broken-guard: a deliberately broken twin (RAILYARD_BROKEN=<variant>, see
# ci/loom.sh) cannot reach a real build. A release build of railyard-core
# with the variable set, or with --cfg railyard_broken in RUSTFLAGS, but
# without --cfg railyard_loom must fail with the build script's message;
# the same build without it must pass. Own target dir: the main one's
# caches stay as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/broken-guard"
start=$(date +%s)
variant=$(grep -ho 'railyard_broken = "[a-z0-9_]*"' core/src -r | head -n 1 | cut -d'"' -f2)
[ -n "$variant" ] || { echo "broken-guard: FAIL: no broken variant found in core/src"; exit 1; }
refused() { # label, command...
  local label=$1 log; shift
  log=$(mktemp)
  if "$@" >"$log" 2>&1; then
    echo "broken-guard: FAIL: $label built"; tail -n 20 "$log"; rm -f "$log"; exit 1
  fi
  if ! grep -q "deliberately broken twin" "$log"; then
    echo "broken-guard: FAIL: $label failed, but not with the guard's message:"; tail -n 30 "$log"; rm -f "$log"; exit 1
  fi
  echo "broken-guard: $label: refused: $(grep -m1 -o 'error: [^,]*, which compiles' "$log" | sed 's/, which compiles//')"
  rm -f "$log"
}
cargo build -q -p railyard-core --release
echo "broken-guard: release build without the variable: ok"
refused "RAILYARD_BROKEN=$variant, release" env RAILYARD_BROKEN="$variant" cargo build -p railyard-core --release
refused "RUSTFLAGS=--cfg railyard_broken=\"$variant\", release" \
  env RUSTFLAGS="--cfg railyard_broken=\"$variant\"" cargo build -p railyard-core --release
echo "broken-guard: all checks passed in $(( $(date +%s) - start ))s"
