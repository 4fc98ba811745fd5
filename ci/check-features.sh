#!/usr/bin/env bash
# check-features: railyard-core under every feature combination.
#  1. `cargo hack check --feature-powerset --all-targets`: every one of the
#     14 combinations of alloc, std, adaptive-cc, peer-feedback and default
#     type-checks, tests and examples included (no linking: seconds each);
#  2. the combinations that change behaviour run their unit, integration and
#     example tests: no_std without alloc (lib), the controller compiled out
#     (alloc), the RFC 4534 peer ledger with the controller out
#     (alloc,peer-feedback), and the defaults without std. The workspace
#     test run covers std + peer-feedback + default; doctests run once with
#     every feature on.
# Tests that need the pools and tables declare required-features = ["alloc"]
# in core/Cargo.toml. Installs cargo-hack from crates.io if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-hack >/dev/null || cargo install cargo-hack --locked
start=$(date +%s)
cargo hack check -p railyard-core --feature-powerset --all-targets
t=(--lib --tests --examples)
cargo test -p railyard-core --no-default-features --lib
cargo test -p railyard-core --no-default-features --features alloc "${t[@]}"
cargo test -p railyard-core --no-default-features --features alloc,peer-feedback "${t[@]}"
cargo test -p railyard-core "${t[@]}"
# (Core's doctests run once, in ci/test.sh's workspace test: the workspace
# unifies std + peer-feedback into core, the same features.)
echo "check-features: every feature combination of railyard-core checked, 4 tested, in $(( $(date +%s) - start ))s"
