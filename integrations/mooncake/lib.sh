# shellcheck shell=bash
# The variables these functions set are for the caller (SC2034), and
# $common is a flag list split on purpose (SC2086).
# shellcheck disable=SC2034,SC2086
# Shared by ci/mooncake.sh, scripts/bench-mooncake.sh and
# scripts/fault-mooncake.sh (source it; it defines functions only).

# Host side, from the checkout root: sets mc (the build outputs), share (the
# rxe-vm flags sharing a target dir outside the checkout) and CACHE (the
# rxe-vm cache, where the guest scripts go).
mc_paths() {
  local tdir="${CARGO_TARGET_DIR:-target}"
  [[ "$tdir" = /* ]] || tdir="$PWD/$tdir"
  mc="$tdir/mooncake"
  share=()
  case "$tdir/" in "$PWD"/*) ;; *) share=(--rw "$tdir") ;; esac
  CACHE="${RXE_VM_CACHE:-$PWD/target/rxe-vm}"
  mkdir -p "$CACHE"
}

# Guest side: the environment and flags every Mooncake process shares (P2P
# handshake on rxe0, GID index 1). The guest's hostname is "(none)", so
# every process names the veth address rxe0 sits on.
mc_guest_init() {
  export MC_GID_INDEX=1 GLOG_logtostderr=1
  common="--metadata_server=P2PHANDSHAKE --device_name=rxe0 --local_server_name=${RXE_VM_SELF_IP:-10.77.1.1}"
}

# Guest side: starts a transfer_engine_bench target (64 MiB buffer) from
# build outputs $1, variant $2 (default stock; a target only registers
# memory and answers the handshake, it posts nothing); sets tpid and seg (the
# HOST:PORT it listens on).
mc_start_target() {
  "$1/${2:-stock}/transfer_engine_bench" --mode=target --protocol=rdma $common \
    --buffer_size=67108864 > /tmp/target.log 2>&1 &
  tpid=$!
  seg=""
  for _ in $(seq 1 150); do
    seg=$(sed -n 's/.*listening on \([^ ]*:[0-9]*\).*/\1/p' /tmp/target.log | head -n 1)
    [ -n "$seg" ] && return 0
    sleep 0.2
  done
  echo "the target did not report its listener:"; tail -n 20 /tmp/target.log
  return 1
}
