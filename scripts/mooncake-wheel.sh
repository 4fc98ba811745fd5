# shellcheck shell=bash
# Source it: mooncake_wheel DIR installs Mooncake TE's PyPI wheel (pinned:
# the version ci/python.sh and scripts/bench-peers.sh use) into DIR/venv,
# and sets mc_py (that venv's python) and mc_bench (the wheel's
# transfer_engine_bench). The wheel is used as its publisher ships it.
mooncake_wheel() {
  local dir=$1
  [[ -x "$dir/venv/bin/python" ]] || python3 -m venv "$dir/venv"
  "$dir/venv/bin/pip" install -q mooncake-transfer-engine-non-cuda==0.3.13.post1
  mc_py="$dir/venv/bin/python"
  mc_bench=$("$mc_py" -c 'import mooncake, os; print(os.path.join(os.path.dirname(mooncake.__file__), "transfer_engine_bench"))')
  [[ -x "$mc_bench" ]] || { echo "the Mooncake wheel has no transfer_engine_bench" >&2; return 1; }
}
