#!/usr/bin/env bash
# bench-peers: railyard against the engines users would pick instead, side by
# side in ONE Soft-RoCE guest run (issue #18). A benchmark, not a test: never
# part of CI's test run (CI only checks the plan and the report's arithmetic).
#
# Arms, per op (WRITE, READ) x block (64 KiB, 4 KiB) x submitter threads (1, 4, 8):
#   railyard-nocc     `railyard bench` built without the controller
#                     (cargo build -p railyard-cli --no-default-features --features verbs)
#   railyard-off      `railyard bench` with the controller, MC_ADAPTIVE_CC_MODE=off
#   railyard-observe  ... MC_ADAPTIVE_CC_MODE=observe
#   railyard-enforce  ... MC_ADAPTIVE_CC_MODE=enforce (RFC 4162 defaults)
#   mooncake          Mooncake TE's transfer_engine_bench (classic backend) from the
#                     PyPI wheel mooncake-transfer-engine-non-cuda (pinned below,
#                     installed into target/bench-peers/venv), P2P handshake,
#                     MC_GID_INDEX=1, MC_NUM_QP_PER_EP = railyard's QPs
# and per op x block (perftest has no submitter threads: it runs once per
# op/block and round, and every thread count is compared with it):
#   perftest          ib_write_bw / ib_read_bw -q <railyard's QPs per endpoint>
#
# Every arm is a target process + an initiator process on rxe0 (loopback; with
# --two the target runs in the second guest, across the qemu socket link). The
# workload shape is Mooncake's bench: batches of 128 transfers, one batch in
# flight per thread (railyard: --batch_size 128 --depth 1), 64 MiB registered
# on each side, the same QPs per endpoint everywhere (default 2, railyard's
# EngineConfig::qps_per_endpoint and Mooncake's MC_NUM_QP_PER_EP default).
# Arms alternate inside each round (the order rotates per round and point);
# the table gives medians over rounds and the medians of per-round ratios:
# vs Mooncake, vs perftest, and nocc / observe / enforce vs off.
# CPU s/GiB: user+sys of both processes over their whole lives (wait4), per GiB.
#
# Usage:
#   scripts/bench-peers.sh [--quick] [--two] [--rounds N] [--secs S]
#                          [--ops write,read] [--sizes 64K,4K] [--threads 1,4,8]
#                          [--qps N] [--ry-args "..."] [--lock FILE] [--timeout S]
#                          [--arms railyard-off,perftest,...] [--ry-env K=V,...]
#                          [--variants "off~NAME:K=V,...;..."]
#                          [--results DIR]
#   scripts/bench-peers.sh --dry-run [...]      # print the arm plan, boot nothing
#   scripts/bench-peers.sh --report-only        # the table again from the last raw data
# On this shared machine take the guest lock and the shared kernel cache:
#   RXE_VM_CACHE=/work/cache/rxe-vm scripts/bench-peers.sh --lock /work/locks/guest.lock
# (--lock, or env PEERS_LOCK, flocks only the guest boot, not the builds;
# RXE_VM_LOCK=FILE, scripts/rxe-vm's own lock, works as well).
#
#   --quick   1 round, 2 s per arm, 1 thread only (24 arms, ~5 min with the boot):
#             a smoke test of every engine, op and block size.
# The full default matrix (3 rounds x 64 arms of 6 s) takes ~45 min under qemu
# TCG (~15 s per arm with start-up); where guest time is shared, reduce it,
# e.g. --rounds 2 --secs 3 --threads 1,8 (88 arms, ~15 min).
#   --two     two guests (rxe-vm --two): targets in node 1, initiators in node 0.
#   --arms    only these arms (railyard-nocc, -off, -observe, -enforce, mooncake,
#             perftest); --ry-env adds K=V to both railyard processes' environment
#             (a variant, e.g. MC_WORKERS_PER_CTX=1); --results DIR writes the
#             results there instead of target/bench-peers[/two-guests] (keep a
#             variant's run apart from the default one). --variants adds arms
#             railyard-MODE~NAME with their own variables beside the plain ones,
#             in the same rotation, compared with railyard-off of the same round.
#
# Output: the table on stdout and in target/bench-peers/table.txt; JSON (config,
# rows with medians and per-round ratios, goals, every raw record) in
# target/bench-peers/results.json; raw records in target/bench-peers/raw.jsonl;
# every process's log in target/bench-peers/logs/ (with --two: the same under
# target/bench-peers/two-guests/). --report-only [--two] prints the table again.
set -euo pipefail
cd "$(dirname "$0")/.."
MOONCAKE_WHEEL="mooncake-transfer-engine-non-cuda==0.3.13.post1"   # the version ci/python.sh pins
out="$PWD/target/bench-peers"
py=scripts/bench_peers.py

quick=0; two=0; dry=0; report_only=0
lock="${PEERS_LOCK:-}"; timeout=""; results=""
plan_args=(); run_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --two) two=1 ;;
    --dry-run) dry=1 ;;
    --report-only) report_only=1 ;;
    --rounds|--secs|--ops|--sizes|--threads|--qps|--batch|--depth|--buffer|--arms|--variants)
      [[ $# -ge 2 ]] || { echo "bench-peers: $1 needs a value" >&2; exit 2; }
      plan_args+=("$1" "$2"); shift ;;
    --ry-args)
      [[ $# -ge 2 ]] || { echo "bench-peers: $1 needs a value" >&2; exit 2; }
      run_args+=("--ry-args=$2"); shift ;;
    --ry-env)
      [[ $# -ge 2 ]] || { echo "bench-peers: $1 needs a value" >&2; exit 2; }
      run_args+=("--ry-env=$2"); shift ;;
    --results)
      [[ $# -ge 2 ]] || { echo "bench-peers: $1 needs a value" >&2; exit 2; }
      results="$2"; shift ;;
    --lock|--timeout)
      [[ $# -ge 2 ]] || { echo "bench-peers: $1 needs a value" >&2; exit 2; }
      if [[ $1 == --lock ]]; then lock="$2"; else timeout="$2"; fi; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-peers: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
# --quick first, so explicit flags after it win (argparse: the last one counts).
if [[ $quick == 1 ]]; then plan_args=(--rounds 1 --secs 2 --threads 1 "${plan_args[@]}"); fi
# Results (raw records, logs, table, JSON): target/bench-peers/ for one guest,
# target/bench-peers/two-guests/ for --two. Binaries and the venv: target/bench-peers/.
res="$out"; [[ $two == 0 ]] || res="$out/two-guests"
if [[ -n "$results" ]]; then
  case "$results" in /*) res="$results" ;; *) res="$PWD/$results" ;; esac
  case "$res/" in "$PWD"/*) ;; *) echo "bench-peers: --results must be under the checkout (the guest sees only it)" >&2; exit 2 ;; esac
fi

if [[ $report_only == 1 ]]; then
  python3 "$py" report --raw "$res/raw.jsonl" --json "$res/results.json" \
    --host-note "$(cat "$res/host-note.txt" 2>/dev/null)" --identity "$res/identity.json" | tee "$res/table.txt"
  exit "${PIPESTATUS[0]}"
fi
if [[ $dry == 1 ]]; then
  python3 "$py" plan "${plan_args[@]}"
  [[ $two == 0 ]] || echo "(--two: targets in node 1, initiators in node 0)"
  exit 0
fi
mkdir -p "$out/bin" "$res"
python3 "$py" plan "${plan_args[@]}" > "$res/plan.txt"
head -n 1 "$res/plan.txt"
n_arms=$(( $(wc -l < "$res/plan.txt") - 1 ))

# Packages: the guest harness's (perftest, rdma-core, qemu) and what Mooncake's
# wheel links besides libibverbs (as ci/python.sh).
scripts/rxe-vm --setup >/dev/null
missing=()
for p in libnuma1 libcurl4 python3-venv; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_=""; [[ "$(id -u)" -eq 0 ]] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Two railyard binaries: without the controller (no `sim`, no `adaptive-cc`:
# the simulator would turn the controller on in railyard-core for the whole
# build), then with it. Same target dir (cargo keeps both feature sets).
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
timeout 2400 cargo build --release -p railyard-cli --no-default-features --features verbs >&2
cp "$tdir/release/railyard" "$out/bin/railyard-nocc"
timeout 2400 cargo build --release -p railyard-cli --features verbs >&2
cp "$tdir/release/railyard" "$out/bin/railyard"

# Mooncake TE's wheel in a venv under the checkout (the guest hides the host's /tmp).
venv="$out/venv"
if ! "$venv/bin/python" -m pip show -q "${MOONCAKE_WHEEL%%==*}" 2>/dev/null | grep -q "^Version: ${MOONCAKE_WHEEL##*==}$"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "$MOONCAKE_WHEEL"
fi
mc=$("$venv/bin/python" -c 'import mooncake, os; print(os.path.join(os.path.dirname(mooncake.__file__), "transfer_engine_bench"))')
[[ -x "$mc" ]] || chmod +x "$mc"
echo "bench-peers: Mooncake $("$venv/bin/python" -m pip show "${MOONCAKE_WHEEL%%==*}" | sed -n 's/^Version: //p') at $mc" >&2

# Source and binary identities (RFC 4162's benchmark protocol), from the host.
python3 "$py" identity --out "$res/identity.json" railyard="$out/bin/railyard" \
  railyard-nocc="$out/bin/railyard-nocc" transfer_engine_bench="$mc" \
  ib_write_bw="$(command -v ib_write_bw || true)" ib_read_bw="$(command -v ib_read_bw || true)" >&2

rm -rf "$res/logs" "$res/raw.jsonl"
mkdir -p "$res/logs"
secs=$(sed -n 's/.* arms, \([0-9]*\) s each.*/\1/p' "$res/plan.txt")
[[ -n "$timeout" ]] || timeout=$(( n_arms * (secs + 12) + 300 ))
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
common=("${plan_args[@]}" "${run_args[@]}" --raw "$res/raw.jsonl" --logs "$res/logs"
        --railyard "$out/bin/railyard" --railyard-nocc "$out/bin/railyard-nocc" --mooncake "$mc")
# Host load: the numbers swing with other jobs on this machine; the report says
# how loaded it was around the run.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# With --lock we hold the lock ourselves: rxe-vm must not wait for it again
# (RXE_VM_LOCK on the same file would deadlock). Without --lock, rxe-vm's own
# RXE_VM_LOCK, if set, applies.
locked=(); [[ -n "$lock" ]] && locked=(flock "$lock" env -u RXE_VM_LOCK)
t0=$(date +%s)
set +e
# The single-quoted $RXE_VM_* variables expand inside the guests (each its
# own address), not here.
# shellcheck disable=SC2016
if [[ $two == 1 ]]; then
  agent=(python3 "$py" agent --listen '$RXE_VM_SELF_IP':18600)
  "${locked[@]}" scripts/rxe-vm "${share[@]}" --two --timeout "$timeout" \
    --peer-cmd "${agent[*]}" -- \
    bash -c 'exec python3 "$0" run --agent "$RXE_VM_PEER_IP:18600" --target-ip "$RXE_VM_PEER_IP" --self-ip "$RXE_VM_SELF_IP" "$@"' \
    "$py" "${common[@]}"
else
  "${locked[@]}" scripts/rxe-vm "${share[@]}" --timeout "$timeout" -- python3 "$py" run "${common[@]}"
fi
rc=$?
set -e
note="load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after ($(nproc) cores); lock wait + boot + run $(( $(date +%s) - t0 )) s"
echo "bench-peers: guest exit $rc; $note" >&2
echo "$note" > "$res/host-note.txt"
[[ -s "$res/raw.jsonl" ]] || { echo "bench-peers: no results" >&2; exit 1; }
python3 "$py" report --raw "$res/raw.jsonl" --json "$res/results.json" --host-note "$note" \
  --identity "$res/identity.json" | tee "$res/table.txt"
exit "$rc"
