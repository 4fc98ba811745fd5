#!/usr/bin/env bash
# readme: runs README.md's commands exactly as written: every ```sh block
# right after a `<!-- ci: run -->` line, in order, from the repository root,
# each as one `bash -euo pipefail` script. (The quoted --help texts and the
# C example are checked by `cargo test -p railyard-cli --test readme`.)
#
# So that CI leaves the machine as it was, `cargo install` goes to a
# temporary CARGO_INSTALL_ROOT (its bin/ first on PATH) and the C library to
# a temporary PREFIX (the README's default is $HOME/.local); the commands
# themselves are unchanged. Needs cmake and pkg-config (ci/test.sh installs
# them).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CARGO_INSTALL_ROOT="$tmp/cargo" PREFIX="$tmp/prefix"
export PATH="$CARGO_INSTALL_ROOT/bin:$HOME/.cargo/bin:$PATH"
awk -v dir="$tmp" '
  /^<!-- ci: run -->$/ { armed = 1; next }
  armed && /^```sh$/   { n++; file = sprintf("%s/block-%02d.sh", dir, n); inblock = 1; armed = 0; next }
  inblock && /^```$/   { inblock = 0; close(file); next }
  inblock              { print > file; next }
  { armed = 0 }
' README.md
blocks=("$tmp"/block-*.sh)
[ -e "${blocks[0]}" ] || { echo "readme: FAIL: no <!-- ci: run --> blocks in README.md" >&2; exit 1; }
for b in "${blocks[@]}"; do
  t=$(date +%s)
  echo "=== readme: $(basename "$b" .sh)"
  sed 's/^/  | /' "$b"
  bash -euo pipefail "$b" || { echo "readme: FAIL: $(basename "$b" .sh) (above) failed" >&2; exit 1; }
  echo "readme: $(basename "$b" .sh) passed in $(( $(date +%s) - t ))s"
done
echo "readme: ${#blocks[@]} blocks passed in $(( $(date +%s) - start ))s"
