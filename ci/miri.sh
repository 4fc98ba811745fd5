#!/usr/bin/env bash
# miri: railyard-core's unsafe and lock-free structures under Miri with tree
# borrows (crossbeam-epoch's internals trip stacked borrows upstream): the
# token pool, slice table and endpoint table unit tests, the credit ledger's
# unit tests and its protocol tests (core/tests/credit_protocol.rs).
# Needs a nightly toolchain with the miri and rust-src components; only
# stable is guaranteed on a fresh machine, so without them this prints
# "miri: SKIPPED (...)" and exits 0. It never downloads a toolchain.
# MIRI_TIMEOUT bounds the whole run (default 1200 s).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
skip() { echo "miri: SKIPPED ($*)"; exit 0; }
command -v rustup >/dev/null || skip "no rustup"
# RUSTUP_AUTO_INSTALL=0: asking must never install anything.
export RUSTUP_AUTO_INSTALL=0
rustup run nightly rustc --version >/dev/null 2>&1 || skip "no nightly toolchain"
installed=$(rustup component list --toolchain nightly --installed 2>/dev/null || true)
grep -q '^miri' <<<"$installed" || skip "the nightly toolchain has no miri component"
grep -q '^rust-src' <<<"$installed" || skip "the nightly toolchain has no rust-src component (miri needs it)"
start=$(date +%s)
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-tree-borrows -Zmiri-ignore-leaks}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/miri"
# Proptest cases are ~1000x slower under Miri: a handful each.
export PROPTEST_CASES="${PROPTEST_CASES:-4}"
t="${MIRI_TIMEOUT:-1200}"
cargo +nightly miri setup
timeout "$t" cargo +nightly miri test -p railyard-core --lib -- \
  token:: slice:: endpoint:: credit::ledger::
timeout "$t" cargo +nightly miri test -p railyard-core --test credit_protocol
echo "miri: passed in $(( $(date +%s) - start ))s"
