#!/usr/bin/env bash
# preload: railyard under programs nobody here wrote, unmodified (the CI
# stage of the verbs preload, preload/). In one Soft-RoCE guest, each with
# LD_PRELOAD=librailyard_preload.so and CC enforcing:
#   1. Mooncake TE's own transfer_engine_bench from its PyPI wheel
#      (mooncake-transfer-engine-non-cuda): a target and an initiator
#      (WRITE, then READ, a few seconds each);
#   2. the wheel's Python TransferEngine: write / read back / compare
#      rounds (scripts/mooncake_rw.py), also under a one-block CC window
#      (requests held back and posted later, in order, on real verbs);
#   3. python/tests/compat_script.py on the wheel, with and without the
#      preload: every step's result (return codes, data compared) the same;
#   4. perftest's ib_write_bw (one request in 16 signaled: the rest covered)
#      and ib_read_bw (Debian), both sides preloaded.
# Every preloaded process writes its counters (MC_RAILYARD_STATS); each must
# show work done (posted_wrs, completions > 0) and every gauge back to zero
# at exit (tokens_in_use, endpoint_outstanding, cc_in_flight, deferred_now,
# release_faults, panics). Fails when any step did not run.
#
# Env: PRELOAD_CI_SECS (per bench run, default 3), RXE_CI_TIMEOUT (guest
# limit, default 600), RAILYARD_PROFILE (debug | release, default debug:
# the workspace tests built it already).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
SECS="${PRELOAD_CI_SECS:-3}"
TIMEOUT="${RXE_CI_TIMEOUT:-600}"
PROFILE="${RAILYARD_PROFILE:-debug}"
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
share=()
case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac

# Mooncake's wheel links libnuma and libcurl; perftest is Debian's.
missing=()
for p in libnuma1 libcurl4 perftest; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_=""; [[ "$(id -u)" -eq 0 ]] || sudo_=sudo
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi
scripts/rxe-vm --setup >/dev/null

flag=(); [[ "$PROFILE" == release ]] && flag=(--release)
cargo build -q -p railyard-preload "${flag[@]}"
so="$tdir/$PROFILE/librailyard_preload.so"
[[ -f "$so" ]] || { echo "preload: FAIL: no $so" >&2; exit 1; }

root="$PWD/target/preload-ci"
rm -rf "$root/out"; mkdir -p "$root/out"
source scripts/mooncake-wheel.sh
mooncake_wheel "$root"
py=$mc_py bench=$mc_bench

set +e
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$TIMEOUT" \
  -e RAILYARD_PRELOAD="$so" -e PRELOAD_OUT="$root/out" -e PRELOAD_PY="$py" \
  -e PRELOAD_BENCH="$bench" -e PRELOAD_SECS="$SECS" -- \
  bash scripts/preload-check.sh 2>&1 | tee "$root/guest.log"
rc=${PIPESTATUS[0]}
set -e
echo "preload: guest run exited $rc"
chk=0
"$py" - "$root/out" "$root/guest.log" <<'PY' || chk=$?
import json, os, re, sys
out, log = sys.argv[1], open(sys.argv[2]).read()
fail = []
need = ["bench-target-write", "bench-initiator-write", "bench-target-read",
        "bench-initiator-read", "rw", "rw-deferred", "compat", "write_bw-server",
        "write_bw-client", "read_bw-server", "read_bw-client"]
gauges = ["tokens_in_use", "endpoint_outstanding", "cc_in_flight", "deferred_now",
          "release_faults", "panics"]
for name in need:
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p):
        fail.append(f"{name}: no counters written (did it run under the preload?)")
        continue
    s = json.load(open(p))
    if s["cc_mode"] != "enforce":
        fail.append(f"{name}: cc_mode {s['cc_mode']}, expected enforce")
    if "target" not in name and "server" not in name and (s["posted_wrs"] == 0 or s["completions"] == 0):
        fail.append(f"{name}: no work went through railyard ({s['posted_wrs']} posted)")
    for g in gauges:
        if s[g] != 0:
            fail.append(f"{name}: {g} = {s[g]} at exit")
    print(f"preload: {name}: posted {s['posted_wrs']}, completions {s['completions']}, "
          f"covered {s['covered']}, deferred {s['deferred_wrs']} (posted later "
          f"{s['deferred_posted']}), flushed at teardown "
          f"{s['flushed_at_teardown']}, gauges 0")
# The deferral path ran on real verbs: held back, all posted later.
d = json.load(open(os.path.join(out, "rw-deferred.json"))) if os.path.exists(os.path.join(out, "rw-deferred.json")) else None
if d is not None and (d["deferred_cc"] == 0 or d["deferred_posted"] != d["deferred_wrs"]):
    fail.append(f"rw-deferred: deferred {d['deferred_wrs']} (cc {d['deferred_cc']}), posted later {d['deferred_posted']}")
c = json.load(open(os.path.join(out, "write_bw-client.json"))) if os.path.exists(os.path.join(out, "write_bw-client.json")) else None
if c is not None and c["covered"] == 0:
    fail.append("write_bw --cq-mod 16: no unsignaled request was covered")
for step in ["RAN bench write", "RAN bench read", "RAN rw", "RAN rw-deferred", "RAN compat", "RAN write_bw", "RAN read_bw"]:
    if step not in log:
        fail.append(f"step did not run: {step}")
m = re.findall(r'^\{"rounds": \d+.*\}$', log, re.M)
if not m:
    fail.append("mooncake_rw printed no summary")
else:
    r = json.loads(m[-1])
    for r in (json.loads(x) for x in m):
        if r["blocks_verified"] == 0 or r["mismatched"] or r["failed"] or r["stranded"]:
            fail.append(f"mooncake_rw under the preload: {r}")
        else:
            print(f"preload: Mooncake's Python engine: {r['rounds']} rounds, {r['blocks_verified']} blocks read back equal")
if "COMPAT SAME" not in log:
    fail.append("compat_script.py: results differ with the preload, or it did not run")
for f in fail:
    print("preload: FAIL:", f, file=sys.stderr)
sys.exit(1 if fail else 0)
PY
echo "preload: total $(( $(date +%s) - start ))s"
[[ $rc == 0 && $chk == 0 ]] || exit 1
echo "preload: OK"
