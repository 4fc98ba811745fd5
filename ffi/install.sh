#!/usr/bin/env bash
# Builds the railyard C library (release) and installs it into a prefix the
# way C libraries are installed:
#
#   PREFIX/lib/librailyard.so.X.Y.Z      SONAME librailyard.so.ABI, with the
#   PREFIX/lib/librailyard.so.ABI        symlinks (ABI = the major version, or
#   PREFIX/lib/librailyard.so            0.MINOR while the major is 0)
#   PREFIX/lib/librailyard.a
#   PREFIX/include/railyard.h, railyard.hpp
#   PREFIX/lib/pkgconfig/railyard.pc, railyard-static.pc
#   PREFIX/lib/cmake/railyard/railyardConfig.cmake, ...ConfigVersion.cmake
#   PREFIX/share/doc/railyard/LICENSE
#   PREFIX/lib/librailyard_preload.so    with --engine: the verbs preload
#                                        (LD_PRELOAD it under an unmodified
#                                        RDMA program; see preload/)
#
# Usage: ffi/install.sh --prefix DIR [--engine] [--layers] [--destdir DIR]
#   --engine   with the verbs transfer engine (cargo feature `engine`; links
#              libibverbs and librdmacm; consumers get -DRY_ENGINE) and the
#              verbs preload library
#   --layers   with the per-layer ABI for tools and tests (cargo feature
#              `layers`: ry_cc_*, ry_rail_*, ry_credit_*, ry_token_*;
#              consumers get -DRY_LAYERS)
#   --destdir  stage under DIR (packaging): files go to DIR/PREFIX, while the
#              pkg-config and CMake files stay relocatable anyway
# Env: CARGO (default cargo), CARGO_TARGET_DIR.
set -euo pipefail
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
prefix="" engine=0 layers=0 destdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --engine) engine=1; shift ;;
    --layers) layers=1; shift ;;
    --destdir) destdir="${2:?--destdir needs a directory}"; shift 2 ;;
    --destdir=*) destdir="${1#--destdir=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "ffi/install.sh: error: unknown argument '$1'; see 'ffi/install.sh --help'" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "ffi/install.sh: error: --prefix DIR is required; see 'ffi/install.sh --help'" >&2; exit 2; }
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac

root="$(cd "$(dirname "$0")/.." && pwd)"
cargo="${CARGO:-cargo}"
version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
url=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^repository *= *"\(.*\)"/\1/p' "$root/Cargo.toml")
[ -n "$version" ] || { echo "ffi/install.sh: error: no version in $root/Cargo.toml" >&2; exit 1; }
major=${version%%.*}; rest=${version#*.}; minor=${rest%%.*}
if [ "$major" = 0 ]; then abi="0.$minor"; else abi="$major"; fi
soname="librailyard.so.$abi"
libfile="librailyard.so.$version"

features=()
[ "$engine" = 1 ] && features+=(--features engine)
[ "$layers" = 1 ] && features+=(--features layers)
RAILYARD_SONAME="$soname" "$cargo" build --release -p railyard-ffi "${features[@]}" --manifest-path "$root/Cargo.toml"
tdir="${CARGO_TARGET_DIR:-$root/target}"
case "$tdir" in /*) ;; *) tdir="$root/$tdir" ;; esac
built="$tdir/release"
got=$(readelf -d "$built/librailyard_ffi.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$got" = "$soname" ] || { echo "ffi/install.sh: error: built library has SONAME '$got', want '$soname'" >&2; exit 1; }

# The native libraries a program linking the static archive needs: what
# rustc reports for the standard library on this target, plus the verbs
# libraries with the engine.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo '// an empty crate: only the standard library' > "$probe/probe.rs"
native=$(cd "$probe" && rustc --crate-type staticlib --print native-static-libs probe.rs -o libprobe.a 2>&1 \
  | sed -n 's/.*native-static-libs: //p')
[ -n "$native" ] || native="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
defines="" cflags_extra="" engine_note="" engine_cmake=FALSE layers_cmake=FALSE
if [ "$engine" = 1 ]; then
  native="-libverbs -lrdmacm $native"
  defines="RY_ENGINE" cflags_extra=" -DRY_ENGINE" engine_cmake=TRUE
  engine_note=" and RY_ENGINE (the verbs engine is in)"
fi
if [ "$layers" = 1 ]; then
  defines="${defines:+$defines;}RY_LAYERS" cflags_extra="$cflags_extra -DRY_LAYERS" layers_cmake=TRUE
  engine_note="$engine_note and RY_LAYERS (the per-layer ABI is in)"
fi
native_cmake=$(echo "$native" | sed 's/ /;/g')

dest="$destdir$prefix"
install -d "$dest/lib/pkgconfig" "$dest/lib/cmake/railyard" "$dest/include" "$dest/share/doc/railyard"
install -m 0755 "$built/librailyard_ffi.so" "$dest/lib/$libfile"
ln -sfn "$libfile" "$dest/lib/$soname"
ln -sfn "$soname" "$dest/lib/librailyard.so"
install -m 0644 "$built/librailyard_ffi.a" "$dest/lib/librailyard.a"
install -m 0644 "$root/ffi/include/railyard.h" "$root/ffi/include/railyard.hpp" "$dest/include/"
install -m 0644 "$root/LICENSE" "$dest/share/doc/railyard/LICENSE"
subst() {
  sed -e "s|@VERSION@|$version|g" -e "s|@ABI@|$abi|g" -e "s|@SONAME@|$soname|g" \
      -e "s|@LIBFILE@|$libfile|g" -e "s|@URL@|$url|g" -e "s|@NATIVE_LIBS@|$native|g" \
      -e "s|@NATIVE_LIBS_CMAKE@|$native_cmake|g" -e "s|@CFLAGS_EXTRA@|$cflags_extra|g" \
      -e "s|@DEFINES@|$defines|g" -e "s|@ENGINE@|$engine_cmake|g" -e "s|@ENGINE_NOTE@|$engine_note|g" \
      -e "s|@LAYERS@|$layers_cmake|g" \
      "$1" > "$2"
  chmod 0644 "$2"
}
subst "$root/ffi/pkg/railyard.pc.in" "$dest/lib/pkgconfig/railyard.pc"
subst "$root/ffi/pkg/railyard-static.pc.in" "$dest/lib/pkgconfig/railyard-static.pc"
subst "$root/ffi/pkg/railyardConfig.cmake.in" "$dest/lib/cmake/railyard/railyardConfig.cmake"
subst "$root/ffi/pkg/railyardConfigVersion.cmake.in" "$dest/lib/cmake/railyard/railyardConfigVersion.cmake"
if [ "$engine" = 1 ]; then
  "$cargo" build --release -p railyard-preload --manifest-path "$root/Cargo.toml"
  install -m 0755 "$built/librailyard_preload.so" "$dest/lib/librailyard_preload.so"
fi
echo "ffi/install.sh: railyard $version ($soname$([ "$engine" = 1 ] && echo ', engine')$([ "$layers" = 1 ] && echo ', layers')) installed into $dest"
