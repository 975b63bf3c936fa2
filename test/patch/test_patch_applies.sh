#!/usr/bin/env bash
# Checks patch/libmlx5-medium-bfregs.patch and patch/build_libmlx5.sh
# against a small fake rdma-core tree, with cmake and ninja replaced by
# stubs. Needs only bash, coreutils, patch and diff; runnable from any cwd.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PATCH_FILE="$ROOT/patch/libmlx5-medium-bfregs.patch"
BUILD_SCRIPT="$ROOT/patch/build_libmlx5.sh"
CLAMP_LINE='num = max(num, tot_uuars - MLX5_MED_BFREGS_TSHOLD);'
TAB=$(printf '\t')

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_patch_applies.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
ok()   { printf 'ok - %s\n' "$*"; }

[ -f "$PATCH_FILE" ] || fail "missing $PATCH_FILE"
[ -f "$BUILD_SCRIPT" ] || fail "missing $BUILD_SCRIPT"

# The build script must not pick up overrides from the caller's environment.
unset CMAKE NINJA WORK_DIR RDMA_CMAKE_ARGS BUILD_DIR JOBS

# ------------------------------------------------------------ fake rdma-core
# A tree with just the files build_libmlx5.sh looks for. mlx5.c holds the
# functions around get_num_low_lat_uuars() as they read in rdma-core 44.0,
# placed at the same line numbers the patch's hunk header names.
make_fake_tree() {
    local dir=$1 i
    mkdir -p "$dir/providers/mlx5" "$dir/buildlib"

    cat > "$dir/CMakeLists.txt" <<'EOF'
# Minimal stand-in for the rdma-core top-level CMakeLists.txt (test only).
cmake_minimum_required(VERSION 3.18.1 FATAL_ERROR)
project(rdma-core C)
set(PACKAGE_VERSION "44.0")
set(IBVERBS_PABI_VERSION "34")
add_subdirectory(providers/mlx5)
EOF
    cat > "$dir/buildlib/rdma_functions.cmake" <<'EOF'
# Stand-in for rdma-core's helper functions (test only).
function(rdma_shared_provider DEST VERSION_SCRIPT SOVERSION VERSION)
endfunction()
EOF
    cat > "$dir/providers/mlx5/CMakeLists.txt" <<'EOF'
rdma_shared_provider(mlx5 libmlx5.map
  1 1.24.${PACKAGE_VERSION}
  mlx5.c
)
EOF
    {
        for i in $(seq 1 542); do
            printf '/* placeholder line %d standing in for the rest of mlx5.c */\n' "$i"
        done
        # '~' stands for a tab, as in the real source.
        sed 's/~/\t/g' <<'EOF'
static int get_shut_up_bf(void)
{
~char *env;

~env = getenv("MLX5_SHUT_UP_BF");
~if (!env)
~~return 0;

~return strcmp(env, "0") ? 1 : 0;
}

static int get_num_low_lat_uuars(int tot_uuars)
{
~char *env;
~int num = 4;

~env = getenv("MLX5_NUM_LOW_LAT_UUARS");
~if (env)
~~num = atoi(env);

~if (num < 0)
~~return -EINVAL;

~num = max(num, tot_uuars - MLX5_MED_BFREGS_TSHOLD);
~return num;
}

/* The library allocates an array of uuar contexts. The one in index zero does
 * not to execersize odd/even policy so it can avoid a lock but it may not use
 * blue flame. The upper ones, low_lat_uuars can use blue flame with no lock
 * since they are assigned to one QP only. The rest can use blue flame but since
 * they are shared they need a lock
 */
static int need_uuar_lock(struct mlx5_context *ctx, int uuarn)
{
~int i;

~if (uuarn == 0 || mlx5_single_threaded)
~~return 0;

~i = (uuarn / 2) + (uuarn % 2);
~if (i >= ctx->tot_uuars - ctx->low_lat_uuars)
~~return 0;

~return 1;
}
EOF
    } > "$dir/providers/mlx5/mlx5.c"

    grep -qF "$CLAMP_LINE" "$dir/providers/mlx5/mlx5.c" \
        || fail "fake tree was not built as intended (no clamp line)"
    [ "$(grep -n '^static int get_num_low_lat_uuars' "$dir/providers/mlx5/mlx5.c" | cut -d: -f1)" = 554 ] \
        || fail "fake tree was not built as intended (function not at line 554)"
}

# ----------------------------------------------- (a) patch applies, (b) result
TREE_A="$TMP/apply/rdma-core-44.0"
make_fake_tree "$TREE_A"

if ! out=$(cd "$TREE_A" && patch -p1 -N --dry-run < "$PATCH_FILE" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "(a) patch -p1 --dry-run failed on the fake v44 tree"
fi
case "$out" in
    *fuzz*|*FAILED*|*offset*) printf '%s\n' "$out" >&2; fail "(a) dry run did not apply cleanly" ;;
esac
ok "(a) patch -p1 --dry-run succeeds"

cp "$TREE_A/providers/mlx5/mlx5.c" "$TMP/mlx5.c.before"
if ! out=$(cd "$TREE_A" && patch -p1 -N --no-backup-if-mismatch < "$PATCH_FILE" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "(a) patch -p1 failed on the fake v44 tree"
fi
ok "(a) patch -p1 applies"

if grep -qF "$CLAMP_LINE" "$TREE_A/providers/mlx5/mlx5.c"; then
    fail "(b) the clamp line is still present after applying the patch"
fi
# Exactly one statement goes away; nothing else of the function changes.
removed=$(diff "$TMP/mlx5.c.before" "$TREE_A/providers/mlx5/mlx5.c" | grep -c '^<' || true)
[ "$removed" = 1 ] || fail "(b) expected exactly one line removed, diff shows $removed"
grep -q "^${TAB}return num;\$" "$TREE_A/providers/mlx5/mlx5.c" \
    || fail "(b) 'return num;' vanished from get_num_low_lat_uuars"
grep -q "^${TAB}if (num < 0)\$" "$TREE_A/providers/mlx5/mlx5.c" \
    || fail "(b) the negative-value check vanished"
ls "$TREE_A/providers/mlx5/" | grep -qE '\.(orig|rej)$' \
    && fail "(b) patch left .orig/.rej files behind"
ok "(b) the clamp line is gone and the rest of the function is intact"

# -------------------------------------------------- (c) second apply refused
if out=$(cd "$TREE_A" && patch -p1 -N --dry-run < "$PATCH_FILE" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "(c) applying the patch a second time was not refused"
fi
ok "(c) patch refuses a second application"

BUILD_OUT="$TMP/out-c"
if out=$(BUILD_DIR="$BUILD_OUT" bash "$BUILD_SCRIPT" "$TREE_A" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "(c) build_libmlx5.sh accepted an already patched tree"
fi
case "$out" in
    *"already applied"*) ;;
    *) printf '%s\n' "$out" >&2; fail "(c) build_libmlx5.sh gave no clear 'already applied' message" ;;
esac
[ ! -e "$BUILD_OUT/libmlx5.so" ] || fail "(c) something was copied despite the refusal"
ok "(c) build_libmlx5.sh refuses an already patched tree"

# ------------------------------------------------------ (d) not an rdma-core
NOT_TREE="$TMP/not-rdma-core"
mkdir -p "$NOT_TREE"
printf 'project(something-else C)\n' > "$NOT_TREE/CMakeLists.txt"
if out=$(BUILD_DIR="$TMP/out-d" bash "$BUILD_SCRIPT" "$NOT_TREE" 2>&1); then
    fail "(d) build_libmlx5.sh accepted a directory that is not an rdma-core tree"
fi
case "$out" in
    *"not an rdma-core source tree"*) ;;
    *) printf '%s\n' "$out" >&2; fail "(d) no clear message for a non-rdma-core directory" ;;
esac
ok "(d) non-rdma-core directory rejected: $(printf '%s\n' "$out" | grep -m1 'not an rdma-core')"

if out=$(BUILD_DIR="$TMP/out-d" bash "$BUILD_SCRIPT" "$TMP/does-not-exist" 2>&1); then
    fail "(d) build_libmlx5.sh accepted a missing directory"
fi
case "$out" in
    *"does not exist"*) ;;
    *) printf '%s\n' "$out" >&2; fail "(d) no clear message for a missing directory" ;;
esac
if out=$(bash "$BUILD_SCRIPT" 2>&1); then
    fail "(d) build_libmlx5.sh ran without an argument"
fi
case "$out" in
    *Usage:*) ;;
    *) printf '%s\n' "$out" >&2; fail "(d) no usage message without an argument" ;;
esac
[ ! -e "$TMP/out-d" ] || fail "(d) BUILD_DIR was created despite the error"
ok "(d) missing directory and missing argument rejected"

# ------------------------------------------ (e) build with stubbed cmake/ninja
STUB_BIN="$TMP/stub-bin"
STUB_LOG="$TMP/stub-log"
mkdir -p "$STUB_BIN" "$STUB_LOG"

cat > "$STUB_BIN/cmake" <<'EOF'
#!/usr/bin/env bash
# Stub cmake: records its arguments and prepares a fake build tree.
set -euo pipefail
printf '%s\n' "$*" >> "$STUB_LOG/cmake.args"
src="" bld=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        -S) src=$2; shift 2 ;;
        -B) bld=$2; shift 2 ;;
        *) shift ;;
    esac
done
if [ -z "$src" ] || [ -z "$bld" ]; then
    echo "stub cmake: expected -S SRC -B BUILD" >&2
    exit 2
fi
[ -f "$src/CMakeLists.txt" ] || { echo "stub cmake: no CMakeLists.txt in $src" >&2; exit 2; }
mkdir -p "$bld"
printf '%s\n' "$src" > "$bld/stub-source-dir"
: > "$bld/build.ninja"
EOF

cat > "$STUB_BIN/ninja" <<'EOF'
#!/usr/bin/env bash
# Stub ninja: records its arguments; for the 'mlx5' target it writes what
# rdma-core's build writes: lib/libmlx5.so.1.24.44.0 plus the two links.
set -euo pipefail
printf '%s\n' "$*" >> "$STUB_LOG/ninja.args"
if [ "${STUB_NINJA_FAIL:-0}" = 1 ]; then
    echo "stub ninja: simulated compiler error" >&2
    exit 1
fi
dir=. targets=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        -C) dir=$2; shift 2 ;;
        -j) shift 2 ;;
        -*) shift ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ -f "$dir/build.ninja" ] || { echo "stub ninja: no build.ninja in $dir" >&2; exit 2; }
src=$(cat "$dir/stub-source-dir")
for t in "${targets[@]}"; do
    [ "$t" = mlx5 ] || continue
    if grep -qF 'num = max(num, tot_uuars - MLX5_MED_BFREGS_TSHOLD);' "$src/providers/mlx5/mlx5.c"; then
        state=unpatched
    else
        state=patched
    fi
    mkdir -p "$dir/lib"
    printf 'fake libmlx5 built from %s source\n' "$state" > "$dir/lib/libmlx5.so.1.24.44.0"
    ln -sfn libmlx5.so.1.24.44.0 "$dir/lib/libmlx5.so.1"
    ln -sfn libmlx5.so.1 "$dir/lib/libmlx5.so"
done
EOF
chmod +x "$STUB_BIN/cmake" "$STUB_BIN/ninja"

TREE_E="$TMP/build/rdma-core-44.0"
PRISTINE="$TMP/build/pristine"
make_fake_tree "$TREE_E"
make_fake_tree "$PRISTINE"
BUILD_OUT="$TMP/out-e"
SCRATCH="$TMP/scratch"
mkdir -p "$SCRATCH"

# A failing build must fail the script and copy nothing.
if out=$(cd "$TMP" && PATH="$STUB_BIN:$PATH" STUB_LOG="$STUB_LOG" STUB_NINJA_FAIL=1 \
        TMPDIR="$SCRATCH" BUILD_DIR="$BUILD_OUT" bash "$BUILD_SCRIPT" "$TREE_E" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "(e) build_libmlx5.sh succeeded although the build failed"
fi
[ ! -e "$BUILD_OUT/libmlx5.so" ] || fail "(e) a failed build still copied libmlx5.so"
rm -f "$STUB_LOG"/*.args
ok "(e) a failing build makes build_libmlx5.sh fail"

if ! out=$(cd / && PATH="$STUB_BIN:$PATH" STUB_LOG="$STUB_LOG" \
        TMPDIR="$SCRATCH" BUILD_DIR="$BUILD_OUT" bash "$BUILD_SCRIPT" "$TREE_E" 2>&1); then
    printf '%s\n' "$out" >&2
    fail "(e) build_libmlx5.sh failed on the fake tree with stubbed cmake/ninja"
fi

[ -e "$BUILD_OUT/libmlx5.so" ] || { printf '%s\n' "$out" >&2; fail "(e) $BUILD_OUT/libmlx5.so is missing"; }
[ -e "$BUILD_OUT/libmlx5.so.1" ] || fail "(e) $BUILD_OUT/libmlx5.so.1 is missing"
[ -f "$BUILD_OUT/libmlx5.so.1.24.44.0" ] || fail "(e) $BUILD_OUT/libmlx5.so.1.24.44.0 is missing"
content=$(cat "$BUILD_OUT/libmlx5.so")
[ "$content" = "fake libmlx5 built from patched source" ] \
    || fail "(e) copied library was not built from patched source: '$content'"
ok "(e) libmlx5.so* copied into BUILD_DIR, built from the patched copy"

diff -r "$PRISTINE" "$TREE_E" >/dev/null \
    || fail "(e) build_libmlx5.sh modified the original tree"
built_from=$(cat "$STUB_LOG/cmake.args")
case "$built_from" in
    *"$TREE_E"*) fail "(e) cmake was pointed at the original tree instead of a copy" ;;
esac
ok "(e) original tree left untouched; cmake ran on a copy"

grep -q -- '-G Ninja' "$STUB_LOG/cmake.args" || fail "(e) cmake was not asked for the Ninja generator"
grep -q -- '-DNO_PYVERBS=1' "$STUB_LOG/cmake.args" || fail "(e) cmake did not get -DNO_PYVERBS=1"
grep -qw 'mlx5' "$STUB_LOG/ninja.args" || fail "(e) ninja was not asked for the mlx5 target"
[ -z "$(ls -A "$SCRATCH")" ] || fail "(e) scratch directory was not cleaned up: $(ls -A "$SCRATCH")"
ok "(e) configure/build arguments as expected and scratch directory removed"

echo "all patch tests passed"
