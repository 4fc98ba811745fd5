#!/usr/bin/env bash
# credit-bench: RFC 2849 acceptance 7 on Soft-RoCE (issue #15): the healthy
# path with receiver credit on vs off vs a tuned fixed window, same guest,
# same boot, interleaved repetitions. A benchmark, not a test.
#
# Arms (railyard bench WRITE, one server + one client engine on rxe0 in one
# guest, 64 KiB blocks, --threads 2, batch 32):
#   off       MC_RECEIVER_CREDIT=off, --depth 4 (the baseline)
#   credit    MC_RECEIVER_CREDIT=required on both ends, --depth 4; the
#             server's "application" returns consumer slots every 1 ms
#             (railyard bench's consume loop); default capacities
#             (64 MiB, 1024 requests, 1024 consumer slots)
#   credit-dN the same at --depth N for N in CREDIT_DEPTHS (e.g. the tuned
#             fixed window's depth: credit at the same offered load)
#   fixed-dN  MC_RECEIVER_CREDIT=off, --depth N for N in FIXED_DEPTHS: a
#             sender-local static window; the best of them is the "tuned
#             fixed window" the RFC compares against
# Every arm runs REPS times, interleaved (off, credit, fixed..., off, ...),
# DURATION seconds each. Reported: median MiB/s per arm and its ratio to the
# off arm of the same boot; the credit arm's stall time and control frames
# per GiB (from the bench's credit lines on stderr) and the receiver's peak
# occupancy.
#
# Usage:
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock scripts/credit-bench.sh
# Env: REPS (3), DURATION (4), FIXED_DEPTHS ("1 2"), CREDIT_DEPTHS (""),
# TIMEOUT (900).
# Output: target/credit-bench/summary.txt (+ raw JSON and logs there).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${REPS:-3}"
DURATION="${DURATION:-4}"
FIXED_DEPTHS="${FIXED_DEPTHS:-1 2}"
CREDIT_DEPTHS="${CREDIT_DEPTHS:-}"
TIMEOUT="${TIMEOUT:-900}"
out="$PWD/target/credit-bench"
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.log "$out"/summary.txt
cargo build -p railyard-cli --features verbs --release >&2
bin="$PWD/target/release/railyard"

guest="$out/guest.sh"
cat > "$guest" <<'GUEST'
set -u
bin=$1 out=$2 reps=$3 dur=$4 fixed=$5 cdepths=$6
port=18700
run() { # label credit depth rep
  local label=$1 credit=$2 depth=$3 rep=$4
  port=$((port + 1))
  MC_RECEIVER_CREDIT=$credit "$bin" bench -d rxe0 -x 1 -p "$port" --listen 127.0.0.1 --quiet \
    > "$out/$label-$rep.server.log" 2>&1 &
  local srv=$!
  MC_RECEIVER_CREDIT=$credit timeout 120 "$bin" bench -d rxe0 -x 1 -p "$port" -s 64K -D "$dur" \
    --threads 2 --depth "$depth" --json 127.0.0.1 > "$out/$label-$rep.json" 2> "$out/$label-$rep.client.log"
  local rc=$?
  wait "$srv"
  echo "credit-bench: $label rep $rep rc $rc"
}
for rep in $(seq 1 "$reps"); do
  run off off 4 "$rep"
  run credit required 4 "$rep"
  for d in $fixed; do run "fixed-d$d" off "$d" "$rep"; done
  for d in $cdepths; do run "credit-d$d" required "$d" "$rep"; done
done
GUEST

scripts/rxe-vm --timeout "$TIMEOUT" -- bash "$guest" "$bin" "$out" "$REPS" "$DURATION" "$FIXED_DEPTHS" "$CREDIT_DEPTHS" \
  2>&1 | tee "$out/guest.log"

python3 - "$out" "$FIXED_DEPTHS" "$CREDIT_DEPTHS" <<'PY' | tee "$out/summary.txt"
import glob, json, os, re, statistics, sys
out, fixed, cdepths = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
arms = ["off", "credit"] + [f"fixed-d{d}" for d in fixed] + [f"credit-d{d}" for d in cdepths]
def bw(label):
    v = []
    for f in sorted(glob.glob(f"{out}/{label}-[0-9]*.json")):
        try:
            r = json.load(open(f))
            res = r["results"][0]
            v.append((res["bw_average_mib_per_s"], res["bytes"] * res["iterations"]))
        except Exception as e:
            print(f"{f}: unreadable ({e})")
    return v
med = {}
print("arm          runs  median MiB/s  ratio vs off  (runs)")
for a in arms:
    v = [x[0] for x in bw(a)]
    med[a] = statistics.median(v) if v else float("nan")
print_rows = []
for a in arms:
    v = [x[0] for x in bw(a)]
    ratio = med[a] / med["off"] if med["off"] == med["off"] and med["off"] > 0 else float("nan")
    print(f"{a:12s} {len(v):4d}  {med[a]:12.1f}  {ratio:12.3f}  {' '.join(f'{x:.0f}' for x in v)}")
best = max((a for a in arms if a.startswith("fixed")), key=lambda a: med[a], default=None)
if best:
    print(f"tuned fixed window: {best} ({med[best]:.1f} MiB/s); credit / tuned fixed = {med['credit'] / med[best]:.3f}")
    d = best.split("-d")[1]
    if f"credit-d{d}" in med:
        # Per repetition: credit and fixed at the same depth ran back to back.
        per = [c[0] / f[0] for c, f in zip(bw(f"credit-d{d}"), bw(best)) if f[0] > 0]
        print(f"credit at the tuned depth d{d} / tuned fixed: median {statistics.median(per):.3f} "
              f"(per repetition {' '.join(f'{x:.2f}' for x in per)})")
stall, frames, peak = [], [], []
for f in sorted(glob.glob(f"{out}/credit-[0-9]*.client.log")):
    t = open(f).read()
    m = re.search(r"stall (\d+) ms over (\d+) refusals.*?(\d+) control frames sent, (\d+) received", t)
    if m:
        stall.append(int(m.group(1)))
        frames.append(int(m.group(3)) + int(m.group(4)))
for f in sorted(glob.glob(f"{out}/credit-[0-9]*.server.log")):
    t = open(f).read()
    m = re.search(r"peak receiver occupancy (\d+) B", t)
    if m:
        peak.append(int(m.group(1)))
gib = [x[1] / 2**30 for x in bw("credit")]
print(f"credit arm: stall ms per run {stall}; client control frames per run {frames}; receiver peak occupancy B {peak}")
if gib and frames and len(gib) == len(frames):
    print("control frames per GiB (client side): " + ", ".join(f"{f / g:.1f}" for f, g in zip(frames, gib) if g > 0))
PY
