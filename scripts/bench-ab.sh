#!/usr/bin/env bash
# bench-ab: two builds of `railyard bench` (e.g. main and a branch) against
# each other in ONE Soft-RoCE guest, arms alternating inside every round (the
# order flips each round), per worker model; prints each arm's message rate,
# bandwidth and CPU s/GiB and the median over rounds of the per-round ratio
# B/A. A benchmark, not a test. Runs inside a guest; from the host:
#
#   cargo build --release -p railyard-cli --features verbs   # B (this tree)
#   (build A the same way from another checkout into another target dir)
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock \
#     scripts/rxe-vm --timeout 900 -- scripts/bench-ab.sh A_BIN B_BIN
#
# Usage: scripts/bench-ab.sh A_BIN B_BIN
# Env:   AB_ROUNDS (3), AB_SECS (4), AB_SIZE (4K), AB_OP (write),
#        AB_THREADS (8 submitter threads), AB_MODELS ("shared:2 dedicated:3":
#        worker model:MC_WORKERS_PER_CTX; shared:2 = two workers that each
#        post and poll, dedicated:3 = one poller + two posters),
#        AB_OUT (target/bench-ab: raw JSON per arm and the table),
#        AB_ARGS (extra client arguments, e.g. "--batch_size 128 --depth 1",
#        the bench-peers shape).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { sed -n 2,22p "$0"; exit 2; }
A=$1 B=$2
# Two builds in one target dir can leave cargo's second build "fresh" and
# both paths the same bytes: an A/B of a binary against itself.
if cmp -s "$A" "$B"; then
  echo "bench-ab: $A and $B are byte-identical (A needs its own checkout and target dir)" >&2
  exit 2
fi
rounds=${AB_ROUNDS:-3} secs=${AB_SECS:-4} size=${AB_SIZE:-4K} op=${AB_OP:-write}
threads=${AB_THREADS:-8} models=${AB_MODELS:-"shared:2 dedicated:3"}
out=${AB_OUT:-target/bench-ab}
mkdir -p "$out"
: > "$out/raw.jsonl"
port=19000
arm() { # label bin model workers round
  local label=$1 bin=$2 model=$3 workers=$4 round=$5
  local ded=0; [ "$model" = dedicated ] && ded=1
  port=$((port + 1))
  MC_RDMA_DEDICATED_POLLER=$ded MC_WORKERS_PER_CTX=$workers \
    "$bin" bench -d rxe0 -x 1 -p $port --listen 127.0.0.1 --quiet > "$out/server-$label-$model-$round.log" 2>&1 &
  local srv=$!
  sleep 0.5
  if MC_RDMA_DEDICATED_POLLER=$ded MC_WORKERS_PER_CTX=$workers timeout $((secs + 120)) \
      "$bin" bench -d rxe0 -x 1 -p $port -s "$size" --operation "$op" -D "$secs" \
      --threads "$threads" ${AB_ARGS:-} --json 127.0.0.1 > "$out/client.json" 2> "$out/client-$label-$model-$round.log"; then
    wait "$srv" || true
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
x = r["results"][0]
print(json.dumps({"arm": sys.argv[2], "model": sys.argv[3], "workers": int(sys.argv[4]),
  "round": int(sys.argv[5]), "mops": x["msg_rate_mops"], "mib_s": x["bw_average_mib_per_s"],
  "cpu_s_per_gib": x["cpu_s_per_gib"], "posts": x["posts"], "doorbells": x["doorbells"]}))
' "$out/client.json" "$label" "$model" "$workers" "$round" | tee -a "$out/raw.jsonl"
  else
    echo "bench-ab: arm $label $model round $round FAILED" >&2
    kill "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    return 1
  fi
}
for r in $(seq 1 "$rounds"); do
  for m in $models; do
    model=${m%%:*} workers=${m##*:}
    if [ $((r % 2)) -eq 1 ]; then
      arm A "$A" "$model" "$workers" "$r"; arm B "$B" "$model" "$workers" "$r"
    else
      arm B "$B" "$model" "$workers" "$r"; arm A "$A" "$model" "$workers" "$r"
    fi
  done
done
python3 - "$out/raw.jsonl" "$size" "$op" "$threads" <<'EOF' | tee "$out/table.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"bench-ab: {sys.argv[3]} {sys.argv[2]}, {sys.argv[4]} submitter threads; "
      "A vs B alternating per round, medians over rounds")
print(f"{'model':<10} {'w':>2} {'arm':<3} {'Mops':>8} {'MiB/s':>9} {'CPU s/GiB':>10}   per-round B/A Mops")
for (model, w) in sorted({(r["model"], r["workers"]) for r in rows}):
    by = {a: {r["round"]: r for r in rows if r["model"] == model and r["arm"] == a} for a in "AB"}
    for a in "AB":
        rs = list(by[a].values())
        med = lambda k: statistics.median(r[k] for r in rs)
        ratios = ""
        if a == "B":
            rr = [by["B"][k]["mops"] / by["A"][k]["mops"] for k in by["B"] if k in by["A"] and by["A"][k]["mops"] > 0]
            ratios = " ".join(f"{x:.3f}" for x in rr) + (f"  median {statistics.median(rr):.3f}" if rr else "")
        print(f"{model:<10} {w:>2} {a:<3} {med('mops'):>8.4f} {med('mib_s'):>9.1f} {med('cpu_s_per_gib'):>10.2f}   {ratios}")
EOF
