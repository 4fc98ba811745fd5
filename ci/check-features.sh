#!/usr/bin/env bash
# check-features: every feature combination of railyard-core builds and
# passes its unit, integration and example tests (cargo hack
# --feature-powerset: 14 distinct combinations of alloc, std, adaptive-cc,
# peer-feedback and default, the no_std no-alloc build among them), then
# the doctests once with every feature on. Installs cargo-hack from
# crates.io if missing. Tests that need the pools and tables declare
# required-features = ["alloc"] in core/Cargo.toml.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo-hack >/dev/null || cargo install cargo-hack --locked
start=$(date +%s)
cargo hack test -p railyard-core --feature-powerset --lib --tests --examples
cargo test -p railyard-core --doc --features std,peer-feedback
echo "check-features: every feature combination of railyard-core passed in $(( $(date +%s) - start ))s"
