#!/usr/bin/env bash
# bench-lat: single-transfer latency (issue #34 item 1). One transfer in
# flight, each timed, side by side in ONE Soft-RoCE guest run (or --two:
# targets in the second guest, across the qemu socket link):
#   perftest          ib_write_lat / ib_read_lat
#   railyard-off      `railyard bench --lat` (the submitter sleeps in wait_batch), CC off
#   railyard-enforce  ... CC enforce
#   (railyard-off-poll: --wait poll, busy-polling; only when named in --arms)
#   railyard-py       railyard's Python TransferEngine.transfer_sync_{write,read}
#   mooncake-py       Mooncake's (PyPI wheel, pinned below) transfer_sync_{write,read}
# per op (write, read) x size (8 B, 4 KiB, 64 KiB), arms alternating inside a
# round, N rounds. The table: medians over rounds of P50 / P99 / P99.9 / max
# (µs), CPU µs per transfer (initiator + target), and per-round ratios against
# perftest's round-trip reference (ib_read_lat; 2 x ib_write_lat, which reports
# half a ping-pong: see scripts/bench_lat.py). A benchmark, not a test: CI runs
# only `bench_lat.py selftest` (the report's arithmetic).
#
#   scripts/bench-lat.sh [--two] [--rounds N] [--iters N] [--sizes 8,4K,64K]
#                        [--ops write,read] [--arms perftest,railyard-off,...]
#                        [--lock FILE] [--timeout S]
#   scripts/bench-lat.sh --report-only [--two]
# On this shared machine:
#   RXE_VM_CACHE=/work/cache/rxe-vm scripts/bench-lat.sh --lock /work/locks/guest.lock
# Results: target/bench-lat[/two-guests]/{table.txt,results.json,raw.jsonl,logs/}.
set -euo pipefail
cd "$(dirname "$0")/.."
MOONCAKE_WHEEL="mooncake-transfer-engine-non-cuda==0.3.13.post1"
two=0 report_only=0 lock="" timeout="" run_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --two) two=1 ;;
    --report-only) report_only=1 ;;
    --lock) lock="$2"; shift ;;
    --timeout) timeout="$2"; shift ;;
    --rounds|--iters|--sizes|--ops|--arms) run_args+=("$1" "$2"); shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "bench-lat: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
out="$PWD/target/bench-lat"
res="$out"; [[ $two == 0 ]] || res="$out/two-guests"
py="$PWD/scripts/bench_lat.py"
if [[ $report_only == 1 ]]; then
  python3 "$py" report --raw "$res/raw.jsonl" --json "$res/results.json" | tee "$res/table.txt"
  exit "${PIPESTATUS[0]}"
fi

scripts/rxe-vm --setup >/dev/null
missing=()
for p in libnuma1 libcurl4 python3-venv perftest; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_=""; [[ "$(id -u)" -eq 0 ]] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi

tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
mkdir -p "$out/bin" "$res"
timeout 2400 cargo build --release -p railyard-cli --features verbs >&2
cp "$tdir/release/railyard" "$out/bin/railyard"

# One venv under the checkout (the guest hides the host's /tmp): railyard's
# wheel (maturin, rebuilt every run: it must be this checkout's) and
# Mooncake's from PyPI.
venv="$out/venv"
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q maturin
rm -rf "$out/wheels"
"$venv/bin/maturin" build -q --release -m python/Cargo.toml -o "$out/wheels" >&2
"$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$out"/wheels/railyard-*.whl
"$venv/bin/python" -m pip show -q "${MOONCAKE_WHEEL%%==*}" 2>/dev/null | grep -q "^Version: ${MOONCAKE_WHEEL##*==}$" \
  || "$venv/bin/python" -m pip install -q "$MOONCAKE_WHEEL"

rm -rf "$res/logs" "$res/raw.jsonl"
mkdir -p "$res/logs"
[[ -n "$timeout" ]] || timeout=2400
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
common=("${run_args[@]}" --raw "$res/raw.jsonl" --logs "$res/logs" --railyard "$out/bin/railyard"
        --python "$venv/bin/python" --checkout "$PWD")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
locked=(); [[ -n "$lock" ]] && locked=(flock "$lock" env -u RXE_VM_LOCK)
t0=$(date +%s)
set +e
# shellcheck disable=SC2016
if [[ $two == 1 ]]; then
  agent=(python3 "$py" agent --listen '$RXE_VM_SELF_IP':18600)
  "${locked[@]}" scripts/rxe-vm "${share[@]}" --two --mem 3072 --timeout "$timeout" -e MC_GID_INDEX=1 \
    --peer-cmd "${agent[*]}" -- \
    bash -c 'exec python3 "$0" run --agent "$RXE_VM_PEER_IP:18600" --target-ip "$RXE_VM_PEER_IP" --self-ip "$RXE_VM_SELF_IP" "$@"' \
    "$py" "${common[@]}"
else
  "${locked[@]}" scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$timeout" -e MC_GID_INDEX=1 -- \
    python3 "$py" run "${common[@]}"
fi
rc=$?
set -e
echo "bench-lat: guest exit $rc; load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after ($(nproc) cores); lock wait + boot + run $(( $(date +%s) - t0 )) s" >&2
[[ -s "$res/raw.jsonl" ]] || { echo "bench-lat: no results" >&2; exit 1; }
python3 "$py" report --raw "$res/raw.jsonl" --json "$res/results.json" | tee "$res/table.txt"
exit "$rc"
