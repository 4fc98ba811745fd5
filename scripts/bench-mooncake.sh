#!/usr/bin/env bash
# bench-mooncake: Mooncake's own transfer_engine_bench, stock against
# patched (railyard's hot path, integrations/mooncake) with CC off and with
# CC enforce, in ONE Soft-RoCE guest, same run. A benchmark, not a test
# (absolute numbers under TCG mean nothing; the per-round ratios are the
# point). RFC 4162's gates, inside the transport the RFC was written for:
# patched-off >= 0.99x stock, patched-enforce >= 0.97x stock.
#
# Cases: WRITE and READ, 64 KiB blocks, 1 and 4 threads. Each round runs
# every case once per arm, the arms in a rotating order (round r starts at
# arm r mod 3), against one target started for the round:
#   stock/transfer_engine_bench --mode=target   (logs "listening on H:P")
#   <arm>/transfer_engine_bench --mode=initiator --segment_id=H:P
#     --operation=write|read --threads=1|4 --block_size=65536 --duration=S
# both with --metadata_server=P2PHANDSHAKE --protocol=rdma
# --device_name=rxe0 and MC_GID_INDEX=1. Throughput = batch count x
# batch_size x block_size / duration, from the initiator's "Test completed"
# line; CPU = the initiator's user+sys seconds (rxe's protocol work runs in
# the posting process's syscalls, so it is in there too) per GiB moved.
# Result per case: the median over rounds of the per-round ratios
# patched/stock, and the median CPU-seconds per GiB of each arm.
#
# Env: BENCH_ROUNDS (default 5), BENCH_SECS (per run, default 5),
#      BENCH_TIMEOUT (guest limit, default 1500 s), BENCH_ENFORCE_ENV
#      (environment of the enforce arm, default MC_ADAPTIVE_CC_MODE=enforce),
#      BENCH_CASES (default "write:1 write:4 read:1 read:4"),
#      MOONCAKE_SRC (the fixture, see integrations/mooncake/build.sh).
# Run it under the shared guest lock:
#   RXE_VM_CACHE=/work/cache/rxe-vm flock /work/locks/guest.lock scripts/bench-mooncake.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${BENCH_ROUNDS:-5}"
SECS="${BENCH_SECS:-5}"
TIMEOUT="${BENCH_TIMEOUT:-1500}"
ENFORCE_ENV="${BENCH_ENFORCE_ENV:-MC_ADAPTIVE_CC_MODE=enforce}"
CASES="${BENCH_CASES:-write:1 write:4 read:1 read:4}"

scripts/rxe-vm --setup >/dev/null
integrations/mooncake/build.sh
source integrations/mooncake/lib.sh
mc_paths
results="$mc/bench-results.txt"
: > "$results"

guest="$CACHE/bench-mooncake-guest.sh"
cat > "$guest" <<GUEST
set -u
source $PWD/integrations/mooncake/lib.sh
mc_guest_init
bench="\$common --protocol=rdma --buffer_size=67108864"
run_arm() { # round case-op threads arm
  local bin env=""
  case \$4 in
    stock) bin=$mc/stock/transfer_engine_bench ;;
    off) bin=$mc/patched/transfer_engine_bench; env="MC_ADAPTIVE_CC_MODE=off" ;;
    enforce) bin=$mc/patched/transfer_engine_bench; env="$ENFORCE_ENV" ;;
  esac
  TIMEFORMAT='%U %S'
  { time env \$env timeout $(( SECS + 60 )) \$bin --mode=initiator \$bench --segment_id=\$seg \
      --operation=\$2 --threads=\$3 --batch_size=128 --block_size=65536 --duration=$SECS > /tmp/init.log 2>&1 ; } 2> /tmp/time.log
  local line cpu
  line=\$(grep 'Test completed' /tmp/init.log | tail -n 1)
  cpu=\$(tail -n 1 /tmp/time.log | awk '{print \$1 + \$2}')
  if [ -z "\$line" ]; then
    echo "round \$1 \$2:\$3 \$4: no result"; tail -n 15 /tmp/init.log
    return
  fi
  # "Test completed: duration D, batch count N, throughput ..."
  echo "\$line" | awk -v r=\$1 -v c=\$2:\$3 -v a=\$4 -v cpu="\$cpu" '{
    for (i = 1; i <= NF; i++) { if (\$i == "duration") d = \$(i+1); if (\$i == "count") n = \$(i+1) }
    gsub(",", "", d); gsub(",", "", n)
    bytes = n * 128 * 65536
    printf "RESULT round=%s case=%s arm=%s mib_s=%.2f cpu_s=%.2f bytes=%d\n", r, c, a, bytes / d / 1048576, cpu, bytes }'
}
for round in \$(seq 1 $ROUNDS); do
  mc_start_target $mc || exit 1
  echo "=== round \$round (target \$seg)"
  for c in $CASES; do
    op=\${c%:*}; th=\${c#*:}
    case \$(( (round - 1) % 3 )) in
      0) order="stock off enforce" ;;
      1) order="off enforce stock" ;;
      *) order="enforce stock off" ;;
    esac
    for a in \$order; do run_arm \$round \$op \$th \$a; done
  done
  kill \$tpid 2>/dev/null; wait \$tpid 2>/dev/null
done
GUEST

set +e
scripts/rxe-vm "${share[@]}" --mem 3072 --timeout "$TIMEOUT" -- bash "$guest" 2>&1 | tee "$mc/bench-guest.log"
rc=${PIPESTATUS[0]}
set -e
grep '^RESULT' "$mc/bench-guest.log" > "$results" || true
/usr/bin/python3 - "$results" "$ENFORCE_ENV" <<'PY'
import statistics as st, sys
rows = {}
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    rows.setdefault((kv["case"], int(kv["round"])), {})[kv["arm"]] = kv
print(f"\nMooncake transfer_engine_bench, 64 KiB, Soft-RoCE guest; enforce arm: {sys.argv[2]}")
print("| case | stock MiB/s | off MiB/s | enforce MiB/s | off/stock | enforce/stock | CPU-s/GiB stock / off / enforce | rounds |")
print("|---|---|---|---|---|---|---|---|")
cases = sorted({c for c, _ in rows}, key=lambda c: (c.split(":")[0] != "write", c))
for c in cases:
    rounds = [v for (cc, _), v in sorted(rows.items()) if cc == c]
    full = [r for r in rounds if all(a in r for a in ("stock", "off", "enforce"))]
    if not full:
        print(f"| {c} | n/a | | | | | | 0 |"); continue
    med = lambda arm, k: st.median(float(r[arm][k]) for r in full)
    ratio = lambda arm: st.median(float(r[arm]["mib_s"]) / float(r["stock"]["mib_s"]) for r in full)
    cpu = lambda arm: st.median(float(r[arm]["cpu_s"]) / (int(r[arm]["bytes"]) / 2**30) for r in full)
    print(f"| {c.replace(':', ', ')} thr | {med('stock','mib_s'):.1f} | {med('off','mib_s'):.1f} | "
          f"{med('enforce','mib_s'):.1f} | {ratio('off'):.3f} | {ratio('enforce'):.3f} | "
          f"{cpu('stock'):.2f} / {cpu('off'):.2f} / {cpu('enforce'):.2f} | {len(full)} |")
print("(ratios: median of per-round ratios; goal off >= 0.99, enforce >= 0.97)")
PY
exit "$rc"
