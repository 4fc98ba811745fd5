#!/usr/bin/env bash
# ffi: the C ABI. Installs cbindgen if missing (the stale-header test must
# not be skipped), then runs railyard-ffi's tests: header freshness, header
# as C11 and C++17, the C (static library) and C++ (shared library)
# examples with -Wall -Wextra -Werror -pedantic, ABI layout checks, and the
# boundary tests; then again with the verbs engine (`--features engine`).
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
if [ "${FFI_MIRI:-0}" = 1 ]; then
  MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" CARGO_TARGET_DIR=target/miri \
    cargo +nightly miri test -p railyard-ffi --lib
  MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" CARGO_TARGET_DIR=target/miri \
    cargo +nightly miri test -p railyard-ffi --test boundary destroy
fi
echo "ffi: all checks passed in $(( $(date +%s) - start ))s"
