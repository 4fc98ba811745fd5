#!/usr/bin/env bash
# python: the railyard wheel, installed in a fresh venv, tested with pytest
# on the host and on real verbs in Soft-RoCE guests.
#
# 1. Builds the abi3 wheel with maturin (pip install maturin into a build
#    venv): python/ -> target/py-ci/wheels/railyard-*-cp39-abi3-*.whl.
# 2. Creates a fresh venv (target/py-ci/venv: under the checkout, since the
#    guest hides the host's /tmp), installs the wheel, pytest, numpy and
#    Mooncake's own wheel (mooncake-transfer-engine-non-cuda, for the
#    compatibility test; RAILYARD_CI_MOONCAKE=0 leaves it out and lets that
#    test skip), and copies the tests next to it: they import railyard from
#    the venv's site-packages, never from the source tree.
# 3. Host: the whole suite; the unit tests run, the real-verbs ones skip.
# 4. One guest (rxe0, CC enforce): the suite with RAILYARD_REQUIRE_RDMA=1
#    and RAILYARD_REQUIRE_MOONCAKE=1 (a missing device or Mooncake fails);
#    fails if anything was skipped.
# 5. Two guests (--two): test_two_node.py on node 0 against
#    two_node_peer.py on node 1 (RAILYARD_TWO_NODE=1).
#
# Env: RXE_CI_TIMEOUT (guest wall-clock limit, default 600 s).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
TIMEOUT="${RXE_CI_TIMEOUT:-600}"
root="$PWD/target/py-ci"
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac

# Mooncake's wheel links libnuma and libcurl (libibverbs comes with the
# verbs stage's packages).
missing=()
for p in libnuma1 libcurl4; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_=""; [[ "$(id -u)" -eq 0 ]] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi
scripts/rxe-vm --setup

t=$(date +%s)
rm -rf "$root"
python3 -m venv "$root/build"
"$root/build/bin/pip" install -q maturin
"$root/build/bin/maturin" build --release -m python/Cargo.toml -o "$root/wheels"
wheel=$(ls "$root"/wheels/railyard-*-cp39-abi3-*.whl)
echo "python: built $(basename "$wheel") in $(( $(date +%s) - t ))s"

t=$(date +%s)
python3 -m venv "$root/venv"
py="$root/venv/bin/python"
# numpy < 2: numpy 2 needs x86-64-v2, which qemu's default guest CPU lacks (SIGILL).
"$py" -m pip install -q "$wheel" pytest "numpy<2"
if [[ "${RAILYARD_CI_MOONCAKE:-1}" == 1 ]]; then
  # Pinned: the version the compatibility script was checked against.
  "$py" -m pip install -q mooncake-transfer-engine-non-cuda==0.3.13.post1
  require_mc=1
else
  require_mc=0
fi
cp -r python/tests "$root/tests"
echo "python: fresh venv with the wheel in $(( $(date +%s) - t ))s"

fail=0
t=$(date +%s)
(cd "$root/tests" && RAILYARD_EXPECT_INSTALLED=1 "$py" -m pytest -p no:cacheprovider -q -rs) | tee "$root/host.log" || fail=1
echo "python: host run in $(( $(date +%s) - t ))s"

t=$(date +%s)
set +e
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$TIMEOUT" \
  -e RAILYARD_REQUIRE_RDMA=1 -e RAILYARD_REQUIRE_MOONCAKE="$require_mc" -e RAILYARD_EXPECT_INSTALLED=1 \
  -e MC_GID_INDEX=1 -e MC_ADAPTIVE_CC_MODE=enforce -- \
  bash -c 'cd "$1" && "$2" -m pytest -p no:cacheprovider -v -rs --ignore=test_two_node.py' \
  _ "$root/tests" "$py" 2>&1 | tee "$root/guest.log"
rc=${PIPESTATUS[0]}
set -e
echo "python: guest run in $(( $(date +%s) - t ))s"
[[ $rc == 0 ]] || { echo "python: FAIL: guest pytest exited $rc" >&2; fail=1; }
if grep -Eq '^SKIPPED|[0-9]+ skipped' "$root/guest.log"; then
  if [[ $require_mc == 1 ]] || grep -v test_compat "$root/guest.log" | grep -Eq '^SKIPPED'; then
    echo "python: FAIL: tests skipped inside the guest" >&2; fail=1
  fi
fi
grep -q 'test_same_script_same_results_railyard_and_mooncake PASSED' "$root/guest.log" || [[ $require_mc == 0 ]] \
  || { echo "python: FAIL: the Mooncake compatibility test did not pass" >&2; fail=1; }

t=$(date +%s)
if scripts/rxe-vm "${share[@]}" --two --timeout "$TIMEOUT" \
     --peer-cmd "cd $root/tests && $py two_node_peer.py" \
     -e RAILYARD_TWO_NODE=1 -e RAILYARD_REQUIRE_RDMA=1 -e MC_GID_INDEX=1 -- \
     bash -c 'cd "$1" && "$2" -m pytest -p no:cacheprovider -v -rs test_two_node.py' _ "$root/tests" "$py" \
     2>&1 | tee "$root/two.log"; then
  grep -q 'test_across_two_guests PASSED' "$root/two.log" || { echo "python: FAIL: two-guest test did not pass" >&2; fail=1; }
  grep -q 'two_node_peer: OK' "$root/two.log" || { echo "python: FAIL: two-guest peer did not finish" >&2; fail=1; }
else
  echo "python: FAIL: two-guest run" >&2; fail=1
fi
echo "python: two-guest run in $(( $(date +%s) - t ))s"

echo "python: total $(( $(date +%s) - start ))s"
[[ $fail == 0 ]] && echo "python: OK"
exit $fail
