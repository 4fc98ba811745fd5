#!/usr/bin/env bash
# Regenerates ffi/include/railyard.h with cbindgen (cargo install cbindgen --locked).
set -euo pipefail
cd "$(dirname "$0")"
command -v cbindgen >/dev/null || { echo "cbindgen missing: cargo install cbindgen --locked" >&2; exit 1; }
cbindgen --quiet --config cbindgen.toml --crate railyard-ffi --output include/railyard.h
