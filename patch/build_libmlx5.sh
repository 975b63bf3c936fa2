#!/usr/bin/env bash
# Build a libmlx5.so whose medium-latency doorbell count is not capped at 12.
#
# Usage: patch/build_libmlx5.sh RDMA_CORE_SRC_DIR
#
# The given rdma-core tree is never modified: it is copied to a scratch
# directory, libmlx5-medium-bfregs.patch is applied to the copy, only the
# mlx5 provider target (plus what it links against) is built with
# rdma-core's CMake build, and the resulting libmlx5.so* files are copied
# into the project's build/ directory.
#
# Environment:
#   BUILD_DIR        where libmlx5.so* is copied (default: <project>/build)
#   WORK_DIR         scratch directory for the copy and the CMake build tree;
#                    kept afterwards when given (default: a fresh temporary
#                    directory that is removed on exit)
#   RDMA_CMAKE_ARGS  extra arguments for the CMake configure step
#                    (split on whitespace)
#   JOBS             parallel build jobs (default: nproc)
#   CMAKE / NINJA    override the cmake / ninja executables

set -euo pipefail

SCRIPT_NAME=$(basename "$0")
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT_ROOT=$(dirname "$SCRIPT_DIR")
PATCH_FILE="$SCRIPT_DIR/libmlx5-medium-bfregs.patch"
# The statement the patch removes; used to confirm the result.
CLAMP_LINE='num = max(num, tot_uuars - MLX5_MED_BFREGS_TSHOLD);'

say()  { printf '[%s] %s\n' "$SCRIPT_NAME" "$*"; }
warn() { printf '[%s] warning: %s\n' "$SCRIPT_NAME" "$*" >&2; }
die()  { printf '[%s] error: %s\n' "$SCRIPT_NAME" "$*" >&2; exit 1; }

usage() {
    cat <<USAGE
Usage: $SCRIPT_NAME RDMA_CORE_SRC_DIR

Copies the rdma-core source tree RDMA_CORE_SRC_DIR, applies
$(basename "$PATCH_FILE") to the copy, builds the mlx5 provider
and copies libmlx5.so* into \$BUILD_DIR (default: $PROJECT_ROOT/build).
The source tree itself is left untouched.
USAGE
}

trap 'rc=$?; if [ "$rc" -ne 0 ]; then printf "[%s] failed (exit %s)\n" "$SCRIPT_NAME" "$rc" >&2; fi' EXIT

# ---------------------------------------------------------------- arguments
if [ "$#" -eq 1 ] && { [ "$1" = "-h" ] || [ "$1" = "--help" ]; }; then
    usage
    exit 0
fi
if [ "$#" -ne 1 ]; then
    usage >&2
    die "expected exactly one argument: the rdma-core source directory"
fi

[ -f "$PATCH_FILE" ] || die "patch file not found: $PATCH_FILE"

SRC_ARG=$1
[ -e "$SRC_ARG" ] || die "'$SRC_ARG' does not exist"
[ -d "$SRC_ARG" ] || die "'$SRC_ARG' is not a directory"
SRC_DIR=$(cd "$SRC_ARG" && pwd)

# ------------------------------------------------- is this an rdma-core tree?
check_rdma_core_tree() {
    local dir=$1 missing=()
    local f
    for f in CMakeLists.txt buildlib/rdma_functions.cmake \
             providers/mlx5/CMakeLists.txt providers/mlx5/mlx5.c; do
        [ -f "$dir/$f" ] || missing+=("$f")
    done
    if [ "${#missing[@]}" -ne 0 ]; then
        die "'$dir' is not an rdma-core source tree (missing: ${missing[*]}).
Pass the top directory of an unpacked rdma-core release, e.g. rdma-core-44.0/."
    fi
    if ! grep -q 'project(rdma-core' "$dir/CMakeLists.txt"; then
        die "'$dir' is not an rdma-core source tree: its CMakeLists.txt does not declare project(rdma-core ...)"
    fi
    if ! grep -q 'get_num_low_lat_uuars' "$dir/providers/mlx5/mlx5.c"; then
        die "'$dir/providers/mlx5/mlx5.c' has no get_num_low_lat_uuars(); this rdma-core version is not supported by the patch"
    fi
}
check_rdma_core_tree "$SRC_DIR"

cmake_var() {
    # Value of set(NAME "VALUE") in the top-level CMakeLists.txt, or empty.
    sed -n "s/^[[:space:]]*set([[:space:]]*$1[[:space:]]\{1,\}\"\{0,1\}\([^\")[:space:]]*\).*/\1/p" \
        "$SRC_DIR/CMakeLists.txt" | head -n 1
}
SRC_VERSION=$(cmake_var PACKAGE_VERSION)
SRC_PABI=$(cmake_var IBVERBS_PABI_VERSION)
say "rdma-core source: $SRC_DIR (version ${SRC_VERSION:-unknown}, provider ABI ${SRC_PABI:-unknown})"

# The preloaded provider binds to the system libibverbs.so.1, so the source
# should be the same release as the installed libibverbs. Only warn: the
# user may know better (e.g. a libibverbs installed from source).
check_installed_version() {
    local installed="" dirs d
    if command -v dpkg-query >/dev/null 2>&1; then
        installed=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null || true)
    fi
    if [ -n "$installed" ] && [ -n "$SRC_VERSION" ]; then
        # Debian versions look like 44.0-2; compare the upstream part.
        if [ "${installed%%-*}" != "$SRC_VERSION" ]; then
            warn "installed libibverbs1 is $installed but the source is $SRC_VERSION;" \
                 "build from the matching rdma-core release to avoid symbol-version errors at load time"
        else
            say "installed libibverbs1 $installed matches the source version"
        fi
    fi
    if [ -n "$SRC_PABI" ]; then
        dirs=$(ls -d /usr/lib/*/libibverbs /usr/lib64/libibverbs /usr/lib/libibverbs 2>/dev/null || true)
        for d in $dirs; do
            if ls "$d"/libmlx5-rdmav*.so >/dev/null 2>&1 && [ ! -e "$d/libmlx5-rdmav$SRC_PABI.so" ]; then
                warn "$d has no libmlx5-rdmav$SRC_PABI.so: the installed libibverbs uses a different provider ABI than this source"
            fi
        done
    fi
}
check_installed_version

# -------------------------------------------------------------------- tools
need_tool() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found in PATH; $2"; }
need_tool patch "install it (Debian: apt-get install patch)"
CMAKE=${CMAKE:-}
if [ -z "$CMAKE" ]; then
    if command -v cmake >/dev/null 2>&1; then CMAKE=cmake
    elif command -v cmake3 >/dev/null 2>&1; then CMAKE=cmake3
    else die "cmake not found in PATH; install it (Debian: apt-get install cmake)"
    fi
fi
command -v "$CMAKE" >/dev/null 2>&1 || die "CMAKE='$CMAKE' is not an executable"
NINJA=${NINJA:-}
if [ -z "$NINJA" ]; then
    if command -v ninja >/dev/null 2>&1; then NINJA=ninja
    elif command -v ninja-build >/dev/null 2>&1; then NINJA=ninja-build
    fi
fi
if [ -n "$NINJA" ]; then
    command -v "$NINJA" >/dev/null 2>&1 || die "NINJA='$NINJA' is not an executable"
    GENERATOR=Ninja
else
    need_tool make "install ninja-build or make"
    GENERATOR="Unix Makefiles"
fi
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}

# ---------------------------------------------------------- scratch copy
if [ -n "${WORK_DIR:-}" ]; then
    mkdir -p "$WORK_DIR"
    WORK_DIR=$(cd "$WORK_DIR" && pwd)
    [ -z "$(ls -A "$WORK_DIR")" ] || die "WORK_DIR '$WORK_DIR' is not empty"
    say "scratch directory (kept): $WORK_DIR"
else
    WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/libmlx5-build.XXXXXX")
    trap 'rc=$?; rm -rf "$WORK_DIR"; if [ "$rc" -ne 0 ]; then printf "[%s] failed (exit %s)\n" "$SCRIPT_NAME" "$rc" >&2; fi' EXIT
    say "scratch directory (removed on exit): $WORK_DIR"
fi
case "$WORK_DIR/" in
    "$SRC_DIR"/*) die "WORK_DIR must not be inside the source tree" ;;
esac

SRC_COPY="$WORK_DIR/rdma-core"
BUILD_TREE="$WORK_DIR/build"
mkdir -p "$SRC_COPY" "$BUILD_TREE"

say "copying $SRC_DIR -> $SRC_COPY (skipping .git and build/)"
shopt -s dotglob nullglob
for entry in "$SRC_DIR"/*; do
    case "$(basename "$entry")" in
        .git|build) continue ;;
    esac
    cp -a "$entry" "$SRC_COPY/"
done
shopt -u dotglob nullglob

# ----------------------------------------------------------------- patching
say "checking that $(basename "$PATCH_FILE") applies"
if patch -p1 -R --dry-run -s -f -d "$SRC_COPY" < "$PATCH_FILE" >/dev/null 2>&1; then
    die "the patch is already applied in '$SRC_DIR'; pass a pristine rdma-core tree"
fi
if ! grep -qF "$CLAMP_LINE" "$SRC_COPY/providers/mlx5/mlx5.c"; then
    die "'$SRC_DIR/providers/mlx5/mlx5.c' does not contain the line
    $CLAMP_LINE
so the clamp was already removed or rewritten by hand; pass a pristine rdma-core tree"
fi
if ! out=$(patch -p1 -N --dry-run -d "$SRC_COPY" < "$PATCH_FILE" 2>&1); then
    printf '%s\n' "$out" >&2
    die "the patch does not apply to '$SRC_DIR' (rdma-core ${SRC_VERSION:-unknown}); see the output above"
fi
say "applying the patch to the copy"
patch -p1 -N --no-backup-if-mismatch -d "$SRC_COPY" < "$PATCH_FILE"
if grep -qF "$CLAMP_LINE" "$SRC_COPY/providers/mlx5/mlx5.c"; then
    die "the medium-bfreg clamp is still present after patching"
fi

# -------------------------------------------------------------------- build
# Only libmlx5 is wanted: skip pyverbs, man pages and libnl-based neighbour
# resolution (the latter only lives in libibverbs, which is not shipped).
# No build RPATH, so the copied library binds to the system libibverbs
# exactly like the distribution's libmlx5 does.
CMAKE_ARGS=(
    -G "$GENERATOR"
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DNO_PYVERBS=1
    -DNO_MAN_PAGES=1
    -DENABLE_RESOLVE_NEIGH=0
    -DENABLE_STATIC=0
    -DCMAKE_SKIP_BUILD_RPATH=ON
)
if [ -n "${RDMA_CMAKE_ARGS:-}" ]; then
    read -r -a extra_args <<< "$RDMA_CMAKE_ARGS"
    if [ "${#extra_args[@]}" -gt 0 ]; then
        CMAKE_ARGS+=("${extra_args[@]}")
    fi
fi

say "configuring: $CMAKE -S $SRC_COPY -B $BUILD_TREE ${CMAKE_ARGS[*]}"
"$CMAKE" -S "$SRC_COPY" -B "$BUILD_TREE" "${CMAKE_ARGS[@]}"

# rdma_shared_provider(mlx5 ...) in providers/mlx5/CMakeLists.txt defines
# the shared-library target 'mlx5', written to <build>/lib/libmlx5.so.1.*
# together with the libmlx5.so.1 and libmlx5.so links.
if [ "$GENERATOR" = Ninja ]; then
    say "building: $NINJA -C $BUILD_TREE -j $JOBS mlx5"
    "$NINJA" -C "$BUILD_TREE" -j "$JOBS" mlx5
else
    say "building: $CMAKE --build $BUILD_TREE --target mlx5 -j $JOBS"
    "$CMAKE" --build "$BUILD_TREE" --target mlx5 -j "$JOBS"
fi

# --------------------------------------------------------------------- copy
shopt -s nullglob
built=("$BUILD_TREE"/lib/libmlx5.so*)
shopt -u nullglob
[ "${#built[@]}" -gt 0 ] || die "the build finished but produced no $BUILD_TREE/lib/libmlx5.so*"
[ -e "$BUILD_TREE/lib/libmlx5.so" ] || die "the build produced no usable $BUILD_TREE/lib/libmlx5.so"

BUILD_DIR=${BUILD_DIR:-$PROJECT_ROOT/build}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
say "copying ${#built[@]} file(s) to $BUILD_DIR"
for f in "${built[@]}"; do
    cp -a --remove-destination "$f" "$BUILD_DIR/"
    say "  $BUILD_DIR/$(basename "$f")"
done
[ -e "$BUILD_DIR/libmlx5.so" ] || die "$BUILD_DIR/libmlx5.so is missing after the copy"

say "done. Run with:"
say "  LD_PRELOAD=$BUILD_DIR/libmlx5.so MLX5_TOTAL_UUARS=100 MLX5_NUM_LOW_LAT_UUARS=4 <program>"
