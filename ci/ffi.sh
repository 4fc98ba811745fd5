#!/usr/bin/env bash
# ffi: the C ABI. Installs cbindgen if missing (the stale-header test must
# not be skipped), then runs railyard-ffi's tests: header freshness, header
# as C11 and C++17, the C (static library) and C++ (shared library)
# examples with -Wall -Wextra -Werror -pedantic, ABI layout checks, and the
# boundary tests; then again with the verbs engine (`--features engine`).
# The tests build the library with the per-layer ABI (`layers`); last, the
# default library is built and must export the hot path but no layer
# function.
# FFI_MIRI=1 also runs the handle registry and the
# destroy-during-use race under Miri (nightly + miri component; tree
# borrows: crossbeam-epoch's internals trip stacked borrows upstream).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cbindgen >/dev/null || cargo install cbindgen --locked
start=$(date +%s)
cargo test -p railyard-ffi
# With the verbs engine (links libibverbs): engine.c is linked and run too.
cargo test -p railyard-ffi --features engine
# The default library: the composed hot path, not the per-layer ABI.
cargo build -p railyard-ffi
exports=$(nm -D --defined-only "${CARGO_TARGET_DIR:-target}/debug/librailyard_ffi.so" | awk '{print $3}')
for want in ry_hotpath_post ry_cc_config_from_env ry_task_create ry_token_cache_destroy; do
  grep -qx "$want" <<<"$exports" || { echo "ffi: default library lacks $want" >&2; exit 1; }
done
if grep -E '^ry_(cc_create|token_claim|rail_pick|credit_bind)$' <<<"$exports"; then
  echo "ffi: the default library exports per-layer functions (feature \`layers\` leaked in)" >&2; exit 1
fi
if [ "${FFI_MIRI:-0}" = 1 ]; then
  MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" CARGO_TARGET_DIR=target/miri \
    cargo +nightly miri test -p railyard-ffi --lib
  MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" CARGO_TARGET_DIR=target/miri \
    cargo +nightly miri test -p railyard-ffi --test boundary destroy
fi
echo "ffi: all checks passed in $(( $(date +%s) - start ))s"
