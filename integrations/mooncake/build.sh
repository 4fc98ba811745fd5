#!/usr/bin/env bash
# Builds Mooncake's transfer_engine_bench (and mc_driver, linked like it)
# twice from the pinned Mooncake source fixture, into target/mooncake/:
#
#   stock    the fixture as it is
#   patched  the fixture with integrations/mooncake/railyard.patch applied and
#            -DUSE_RAILYARD=ON, linking railyard's C library
#            (target/<profile>/librailyard_ffi.a, built here by cargo)
#
# Usage: integrations/mooncake/build.sh [FIXTURE]
#   FIXTURE is mooncake-te-3b5a59413.tar.gz (or a directory holding its
#   unpacked tree); default $MOONCAKE_SRC, else
#   <checkout>/../shared/third_party/mooncake-te-3b5a59413.tar.gz (or the
#   same next to the clone's main worktree, for a `git worktree` checkout).
#
# Env: MOONCAKE_VARIANTS (default "stock patched"), MOONCAKE_JOBS (default 2;
#      a compiler process takes ~1.6 GB), RAILYARD_PROFILE (release|debug,
#      default release).
#
# Exit codes: 0 built; 3 no fixture (nothing done; a fresh clone has none);
#             4 build packages missing and not root; 1 any other failure.
#
# Everything is cached under target/mooncake/: the unpacked trees (re-unpacked
# only when the fixture changes; a changed patch is reverted and re-applied in
# place, so ninja recompiles only what it touches), the yalantinglibs install,
# and one cmake/ninja build directory per variant. A re-run with nothing
# changed takes seconds. Mooncake's code never enters the railyard repository:
# only this script and the patch do.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"
start=$(date +%s)
say() { echo "mooncake: $*" >&2; }

name=mooncake-te-3b5a59413.tar.gz
# Default: ../shared next to this checkout, else next to the clone's main
# worktree (a `git worktree` checkout lives elsewhere).
default_fixture() {
  local d common
  common="$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
  for d in "$repo/.." "${common:+$(dirname "$common")/..}"; do
    [[ -n "$d" && -e "$d/shared/third_party/$name" ]] && { echo "$d/shared/third_party/$name"; return; }
  done
  echo "$repo/../shared/third_party/$name"
}
fixture="${1:-${MOONCAKE_SRC:-$(default_fixture)}}"
if [[ ! -e "$fixture" ]]; then
  say "no Mooncake source fixture at $fixture"
  say "pass it as the first argument or set MOONCAKE_SRC ($name)"
  exit 3
fi
fixture="$(cd "$(dirname "$fixture")" && pwd)/$(basename "$fixture")"
variants="${MOONCAKE_VARIANTS:-stock patched}"
jobs="${MOONCAKE_JOBS:-2}"
profile="${RAILYARD_PROFILE:-release}"
tdir="${CARGO_TARGET_DIR:-target}"; [[ "$tdir" = /* ]] || tdir="$repo/$tdir"
out="$tdir/mooncake"
patchfile="$here/railyard.patch"
mkdir -p "$out"

# --- Debian build packages (measured in ../shared/third_party/README.md).
pkgs=(build-essential cmake ninja-build pkg-config python3-dev libibverbs-dev
      libgoogle-glog-dev libgflags-dev libjsoncpp-dev libyaml-cpp-dev libnuma-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_=""
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null || { say "missing packages (run as root): ${missing[*]}"; exit 4; }
    sudo_=sudo
  fi
  say "installing: ${missing[*]}"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- The source trees. The stamp names the fixture (and, for the patched
# tree, the patch applied in place).
fixture_id() {
  if [[ -d "$fixture" ]]; then echo "dir:$fixture"; else sha256sum "$fixture" | cut -c1-16; fi
}
fid="$(fixture_id)"
unpack() { # DEST
  rm -rf "$1"; mkdir -p "$1"
  if [[ -d "$fixture" ]]; then cp -a "$fixture"/. "$1"/
  else tar xzf "$fixture" -C "$1" --strip-components=1; fi
  echo "$fid" > "$1/.railyard-fixture"
}
tree() { # VARIANT -> path of its source tree, unpacked / patched as needed
  local src="$out/src/$1"
  if [[ "$(cat "$src/.railyard-fixture" 2>/dev/null)" != "$fid" ]]; then
    say "unpacking the fixture for $1"
    unpack "$src"
  fi
  if [[ $1 == patched ]] && ! cmp -s "$patchfile" "$src/.railyard.patch"; then
    # Files the old or new patch touch, saved with their mtimes: the ones
    # that come out unchanged get their mtimes back (no needless rebuild).
    local keep="$out/src/.keep" f
    rm -rf "$keep"; mkdir -p "$keep"
    while read -r f; do
      if [[ -f "$src/$f" ]]; then mkdir -p "$keep/$(dirname "$f")"; cp -p "$src/$f" "$keep/$f"; fi
    done < <(sed -n 's|^+++ b/||p' "$patchfile" "$src/.railyard.patch" 2>/dev/null | sort -u)
    if [[ -f "$src/.railyard.patch" ]]; then
      say "the patch changed: reverting the old one in place"
      if ! patch -s -R -p1 -d "$src" < "$src/.railyard.patch"; then
        say "could not revert the old patch: unpacking afresh"; unpack "$src"
      fi
      rm -f "$src/.railyard.patch"
    fi
    say "applying $(basename "$patchfile")"
    patch -s -p1 --no-backup-if-mismatch -d "$src" < "$patchfile" || { say "FAIL: the patch does not apply"; exit 1; }
    cp "$patchfile" "$src/.railyard.patch"
    (cd "$keep" && find . -type f) | while read -r f; do
      cmp -s "$keep/$f" "$src/$f" && touch -r "$keep/$f" "$src/$f"
    done
    rm -rf "$keep"
  fi
  echo "$src"
}

# --- railyard's C library.
lib=""
if [[ " $variants " == *" patched "* ]]; then
  t=$(date +%s)
  pflag=(); [[ $profile == release ]] && pflag=(--release)
  cargo build -q "${pflag[@]}" -p railyard-ffi
  lib="$tdir/$profile/librailyard_ffi.a"
  [[ -f "$lib" ]] || { say "FAIL: $lib was not built"; exit 1; }
  say "railyard-ffi ($profile) built in $(( $(date +%s) - t ))s"
fi

# --- yalantinglibs: header-only, but Mooncake finds it as a CMake package.
ylt="$out/ylt-prefix"
if [[ "$(cat "$ylt/.railyard-fixture" 2>/dev/null)" != "$fid" ]]; then
  t=$(date +%s)
  src="$(tree stock)"
  rm -rf "$ylt" "$out/ylt-build"
  cmake -S "$src/extern/yalantinglibs" -B "$out/ylt-build" -G Ninja -DCMAKE_INSTALL_PREFIX="$ylt" \
    -DBUILD_EXAMPLES=OFF -DBUILD_BENCHMARK=OFF -DBUILD_UNIT_TESTS=OFF >/dev/null
  cmake --install "$out/ylt-build" >/dev/null
  echo "$fid" > "$ylt/.railyard-fixture"
  say "yalantinglibs installed in $(( $(date +%s) - t ))s"
fi

# --- Mooncake, per variant.
common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$ylt"
        -DPython3_EXECUTABLE=/usr/bin/python3
        -DWITH_TE=ON -DWITH_STORE=OFF -DWITH_STORE_RUST=OFF -DWITH_P2P_STORE=OFF -DWITH_EP=OFF
        -DUSE_TENT=OFF -DUSE_CUDA=OFF -DUSE_ETCD=OFF -DUSE_REDIS=OFF -DUSE_HTTP=OFF
        -DBUILD_UNIT_TESTS=OFF -DBUILD_EXAMPLES=ON -DBUILD_BENCHMARK=OFF)
for v in $variants; do
  t=$(date +%s)
  src="$(tree "$v")"
  b="$out/build-$v"
  args=("${common[@]}")
  case $v in
    stock) args+=(-DUSE_RAILYARD=OFF) ;;
    patched) args+=(-DUSE_RAILYARD=ON -DRAILYARD_INCLUDE_DIR="$repo/ffi/include" -DRAILYARD_LIBRARY="$lib") ;;
    *) say "unknown variant $v (stock|patched)"; exit 1 ;;
  esac
  # Configure only when the arguments changed (ninja re-runs cmake itself
  # when a CMakeLists.txt changes).
  key="$(printf '%s\n' "${args[@]}" | sha256sum | cut -c1-16)"
  if [[ ! -f "$b/build.ninja" || "$(cat "$b/.railyard-args" 2>/dev/null)" != "$key" ]]; then
    cmake -S "$src" -B "$b" "${args[@]}" > "$out/configure-$v.log" 2>&1 \
      || { tail -n 30 "$out/configure-$v.log" >&2; say "FAIL: configuring $v (log: $out/configure-$v.log)"; exit 1; }
    echo "$key" > "$b/.railyard-args"
  fi
  if ! cmake --build "$b" --target transfer_engine_bench -j "$jobs" > "$out/build-$v.log" 2>&1; then
    grep -E 'error|Error' "$out/build-$v.log" | head -n 30 >&2 || tail -n 30 "$out/build-$v.log" >&2
    say "FAIL: building $v (log: $out/build-$v.log)"; exit 1
  fi
  mkdir -p "$out/$v"
  bin="$b/mooncake-transfer-engine/example/transfer_engine_bench"
  [[ -x "$bin" ]] || { say "FAIL: $bin was not built"; exit 1; }
  rm -f "$out/$v/transfer_engine_validator"
  ln -sfn "$bin" "$out/$v/transfer_engine_bench"
  # mc_driver (the CI check and the fault run) is compiled and linked exactly
  # like transfer_engine_bench: its two commands from ninja, with the source,
  # object and output renamed.
  drv="$b/mc_driver"
  if [[ ! -x "$drv" || "$here/mc_driver.cpp" -nt "$drv" || "$b/mooncake-transfer-engine/src/libtransfer_engine.a" -nt "$drv" ]]; then
    all="$(ninja -C "$b" -t commands transfer_engine_bench)"
    cmds="$(grep -F -- "-c $src/mooncake-transfer-engine/example/transfer_engine_bench.cpp" <<<"$all" || true)
$(grep -F -- "-o mooncake-transfer-engine/example/transfer_engine_bench " <<<"$all" || true)"
    [[ "$(grep -c . <<<"$cmds")" == 2 ]] \
      || { say "FAIL: cannot find transfer_engine_bench's compile and link commands"; exit 1; }
    cmds="${cmds//$src\/mooncake-transfer-engine\/example\/transfer_engine_bench.cpp/$here/mc_driver.cpp}"
    cmds="${cmds//transfer_engine_bench.dir\/transfer_engine_bench.cpp.o/mc_driver.dir/mc_driver.cpp.o}"
    cmds="${cmds//-o mooncake-transfer-engine\/example\/transfer_engine_bench /-o mc_driver }"
    mkdir -p "$b/mooncake-transfer-engine/example/CMakeFiles/mc_driver.dir"
    (cd "$b" && bash -e -c "$cmds") >> "$out/build-$v.log" 2>&1 \
      || { tail -n 20 "$out/build-$v.log" >&2; say "FAIL: building mc_driver ($v)"; exit 1; }
  fi
  ln -sfn "$drv" "$out/$v/mc_driver"
  say "$v built in $(( $(date +%s) - t ))s: $out/$v/transfer_engine_bench"
done
# The fault injector for the fault run (an LD_PRELOAD shim; no Mooncake code).
if [[ ! -f "$out/qp_fault.so" || "$here/qp_fault.c" -nt "$out/qp_fault.so" ]]; then
  "${CC:-cc}" -shared -fPIC -O2 -Wall -Wextra -Werror -o "$out/qp_fault.so" "$here/qp_fault.c" -ldl -lpthread
fi
say "done in $(( $(date +%s) - start ))s"
