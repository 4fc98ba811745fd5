#!/usr/bin/env bash
# The test command (README): installs what a fresh Debian machine lacks,
# then runs every check CI runs. Each checker also has its own script.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - start ))s)"; }

step "setup"
export PATH="$HOME/.cargo/bin:$PATH"
# Build dependencies of railyard-verbs (rdma-sys runs bindgen on the headers).
# cmake: the README's C++ example consumes the installed package with it.
pkgs=(libibverbs-dev librdmacm-dev libclang-dev pkg-config clang bc valgrind cmake)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy || true
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
command -v cargo-hack >/dev/null || cargo install cargo-hack --locked
# The C ABI's stale-header test regenerates ffi/include/railyard.h.
command -v cbindgen >/dev/null || cargo install cbindgen --locked

step "fmt"
cargo fmt --all -- --check
(cd fuzz && cargo fmt -- --check)

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "core without default features (no_std, no alloc)"
cargo build -p railyard-core --no-default-features
cargo build -p railyard-core --no-default-features --features alloc

step "tests"
cargo test --workspace --exclude railyard-ffi
# railyard bench with real verbs (the workspace run builds the CLI without):
# its argument and report tests, and clippy; ci/rxe.sh runs it on Soft-RoCE.
cargo test -p railyard-cli --features verbs --bins
cargo clippy -p railyard-cli --all-targets --features verbs -- -D warnings
# ... and with the controller compiled out (no `sim`, whose simulator turns
# railyard-core's `adaptive-cc` on): scripts/bench-peers.sh's railyard-nocc arm.
cargo clippy -p railyard-cli --no-default-features --features verbs -- -D warnings
# scripts/bench-peers.sh is a benchmark (never run here): its syntax, its arm
# plan (no guest), and its report's arithmetic on synthetic records.
bash -n scripts/bench-peers.sh
scripts/bench-peers.sh --dry-run >/dev/null
python3 scripts/bench_peers.py selftest
# scripts/bench-chains.sh and bench-signal.sh (benchmarks too): their syntax and their Python's.
bash -n scripts/bench-chains.sh
python3 -m py_compile scripts/bench_arm.py scripts/bench_chains.py scripts/bench_signal.py
bash -n scripts/bench-signal.sh
# The preload's benchmark and fault scripts (benchmarks, never run here).
bash -n scripts/bench-preload.sh scripts/fault-preload.sh scripts/preload-check.sh
python3 scripts/bench_preload.py selftest
python3 -m py_compile scripts/mooncake_rw.py
# scripts/bench-lat.sh (issue #34's latency benchmark, never run here): its
# syntax, its Python's, and its report's arithmetic on synthetic records.
bash -n scripts/bench-lat.sh
python3 -m py_compile python/bench/sync_lat.py
python3 scripts/bench_lat.py selftest

step "C ABI (ci/ffi.sh)"
# Header freshness, C11/C++17 compiles, the C and C++ examples (-Wall
# -Wextra -Werror), ABI layout checks and the boundary tests; then again
# with the verbs engine (feature `engine`: examples/c/engine.c linked
# against libibverbs; on the host it SKIPs the device part, ci/rxe.sh runs
# it on Soft-RoCE).
bash ci/ffi.sh
cargo clippy -p railyard-ffi --all-targets --features engine -- -D warnings

step "core: every feature combination (ci/check-features.sh)"
# The workspace run unifies in the sim's std + peer-feedback; this builds
# and tests each of core's own feature sets (no_std without alloc, the
# controller compiled out, the RFC 4534 peer ledger, ...).
bash ci/check-features.sh
cargo clippy -p railyard-core --all-targets --features std,peer-feedback -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc -p railyard-core --no-deps --features std,peer-feedback
# The verbs shim's default build has the RFC 4534 peer ledger compiled in
# (the workspace run covers it, examples/rfc4534_eval.rs included); this is
# the shim with it compiled out: unit tests (no device needed) and clippy.
cargo test -p railyard-verbs --no-default-features --features adaptive-cc --lib
cargo clippy -p railyard-verbs --all-targets --no-default-features --features adaptive-cc -- -D warnings
# The shim's docs, with and without the test hooks (a link to a
# feature-gated item breaks the build without that feature).
RUSTDOCFLAGS="-D warnings" cargo doc -p railyard-verbs --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -p railyard-verbs --no-deps --features fault-injection
# Every crate's docs (the preload, the C ABI, the CLI, the Python module).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

step "miri (ci/miri.sh; SKIPPED without a nightly toolchain with miri)"
bash ci/miri.sh

step "README commands, exactly as written"
# The main job, cargo install, the C library's install + pkg-config link
# lines (shared and static) and the CMake C++ example (ci/readme.sh).
bash ci/readme.sh

# The criterion benches and icount examples: `clippy --all-targets` above
# type-checks them (a release `cargo bench --no-run` added ~4 min).

step "loom"
bash ci/loom.sh

step "broken twins cannot reach a real build"
bash ci/broken-guard.sh

step "real verbs on Soft-RoCE (qemu guests)"
bash ci/rxe.sh

step "mixed-fault soak on Soft-RoCE, short (ci/soak.sh; SOAK_CI_SECS, default 90 s)"
# Two guests, both worker models, CC enforce, wrong rkey / QP to ERR /
# poller pause / port down-up / peer restart under read-back verification;
# every counter back to zero. The full run is `SOAK_SECS=600 bash ci/soak.sh`.
SOAK_SECS="${SOAK_CI_SECS:-90}" SOAK_FAULT_EVERY=8 bash ci/soak.sh

step "python: the wheel in a fresh venv, pytest on the host and in Soft-RoCE guests"
bash ci/python.sh

step "railyard under unmodified programs: the verbs preload on Mooncake's wheel and perftest (ci/preload.sh)"
# Mooncake TE's transfer_engine_bench and Python TransferEngine (PyPI wheel)
# and perftest, unmodified, under LD_PRELOAD=librailyard_preload.so in a
# Soft-RoCE guest: data read back equal, the same results as without it,
# every railyard gauge zero at exit.
bash ci/preload.sh

step "fuzz"
FUZZ_SECONDS="${FUZZ_SECONDS:-15}" bash ci/fuzz.sh

step "all checks passed"
