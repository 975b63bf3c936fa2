#!/usr/bin/env bash
# The installed package, as an outside project sees it:
#
#   package_test.sh BUILD_DIR
#
# 1. cmake --install into a prefix, then move the prefix: nothing in it may
#    name the build or source tree, and the installed programs read their
#    default configuration from the moved prefix's share/smart.
# 2. The examples build against the moved prefix with find_package(smart)
#    and with pkg-config, compiling no rdma-core or CLI11 header, and run
#    against an installed memory blade and against one embedded in the
#    program.
# 3. cpack -G DEB builds a Debian package whose dependencies are installed
#    packages and whose files, unpacked, build and run the examples too.
set -euo pipefail
BUILD=$(cd "${1:?usage: package_test.sh BUILD_DIR}" && pwd)
SMART_BIN=${SMART_BIN:-$BUILD/bin}
export SMART_BIN
source "$(dirname "$0")/../integration/lib.sh"
# The installed programs must find their configuration on their own.
unset SMART_CONFIG_PATH APP_CONFIG_PATH TEST_RDMA_CONF
T=$WORK_DIR
JOBS=${JOBS:-2}

# --- 1. install, move, and nothing points back ------------------------------
cmake --install "$BUILD" --prefix "$T/stage" >"$T/install.log" 2>&1 || { cat "$T/install.log" >&2; fail "cmake --install"; }
mv "$T/stage" "$T/moved"
P=$T/moved
for f in lib/libsmart.a lib/libsmart_bench.a include/smart/bench/kv_bench.h lib/cmake/smart/smartConfig.cmake lib/cmake/smart/smartConfigVersion.cmake \
  lib/cmake/smart/smartTargets.cmake lib/pkgconfig/smart.pc include/smart/initiator.h \
  share/smart/smart_config.json share/smart/backend.json bin/hashtable_backend bin/hashtable_bench bin/test_rdma; do
  [[ -e $P/$f ]] || fail "the install has no $f"
done
if grep -rl -e "$SMART_SOURCE" -e "$BUILD" -e "$T/stage" "$P/lib/cmake" "$P/lib/pkgconfig" "$P/share" >"$T/leaks" 2>/dev/null; then
  fail "installed files name the source, build or staging tree: $(tr '\n' ' ' <"$T/leaks")"
fi
if strings "$P/lib/libsmart.a" | grep -q -e "$SMART_SOURCE/config" -e "$BUILD/config"; then
  fail "libsmart.a names the source or build tree's config/"
fi
pass "installed, moved; no installed file names the source, build or staging tree"

# The default backend.json is the prefix's: give it a capacity no other file
# has and start the installed blade from a directory without config/.
python3 - "$P/share/smart/backend.json" <<'PY'
import json, sys
path = sys.argv[1]
with open(path) as f:
    c = json.load(f)
c["capacity"] = 24
with open(path, "w") as f:
    json.dump(c, f)
PY
mkdir -p "$T/elsewhere"
cd "$T/elsewhere"
start_blade "$P/bin/hashtable_backend" --port 0
grep -q "hashtable_backend: 24 MiB on " "$WORK_DIR/blade0.log" ||
  fail "the installed blade did not read the moved prefix's share/smart/backend.json: $(cat "$WORK_DIR/blade0.log")"
pass "the installed hashtable_backend read its default configuration from the moved prefix"

# --- 2. the examples against the moved prefix --------------------------------
# Each example's result line: the counts must agree (a lost update, a
# wrong value or a failed verb shows here) and be more than nothing.
declare -A EXPECT=(
  [remote_counter]='counter = \([1-9][0-9]*\), acknowledged increments = \1, failed = 0$'
  [locked_record]='counter = \([1-9][0-9]*\), acknowledged updates = \1, failed = 0, take-overs = 0, record consistent'
  [lookup_table]='speculative hits = [1-9][0-9]*, mismatches = [1-9][0-9]*, cold = [0-9]*, absent = [0-9]*, wrong = 0, failed = 0$'
)
EXAMPLES=(remote_counter locked_record lookup_table)
# run_example WHAT EXE ARGS...: EXE's basename names the example.
run_example() {
  local what=$1 exe=$2
  shift 2
  local name
  name=$(basename "$exe")
  name=${name%_pc}
  "$exe" "$@" >"$T/example.log" 2>&1 || { cat "$T/example.log" >&2; fail "$what: $name $*"; }
  grep -q "^$name: .*${EXPECT[$name]}" "$T/example.log" || fail "$what: $(cat "$T/example.log")"
}
run_examples() {
  local what=$1 dir=$2 suffix=$3
  shift 3
  for name in "${EXAMPLES[@]}"; do
    run_example "$what" "$dir/$name$suffix" "$@"
  done
}
build_examples_cmake() {
  local what=$1 prefix=$2 dir=$3
  cmake -S "$SMART_SOURCE/examples" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$dir.log" 2>&1 || { cat "$dir.log" >&2; fail "$what: cmake configure"; }
  cmake --build "$dir" -j "$JOBS" >>"$dir.log" 2>&1 || { cat "$dir.log" >&2; fail "$what: cmake build"; }
}
build_examples_cmake "find_package(smart)" "$P" "$T/ex-cmake"
run_examples "find_package build, embedded blade" "$T/ex-cmake" "" 2 4 200
run_examples "find_package build, installed blade" "$T/ex-cmake" "" 2 4 200 "127.0.0.1:$BLADE_PORT"
pass "examples (${EXAMPLES[*]}) built with find_package(smart) from the moved prefix run against both blades"

# The bench library is a target of its own (smart::bench) that brings the
# engine with it: a program on it alone builds and runs.
mkdir -p "$T/bench-user"
cat >"$T/bench-user/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(bench_user CXX)
find_package(smart REQUIRED)
add_executable(bench_user bench_user.cc)
target_link_libraries(bench_user PRIVATE smart::bench)
CMAKE
cat >"$T/bench-user/bench_user.cc" <<'CXX'
#include <smart/bench/bench.h>
#include <cstdio>
int main() {
  smart::Histogram h;
  for (uint64_t v = 1; v <= 1000; ++v) h.record(v);
  std::printf("median %llu\n", static_cast<unsigned long long>(h.percentile(0.5)));
  return 0;
}
CXX
cmake -S "$T/bench-user" -B "$T/bench-user/build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$T/bench-user.log" 2>&1 &&
  cmake --build "$T/bench-user/build" >>"$T/bench-user.log" 2>&1 || { cat "$T/bench-user.log" >&2; fail "a program on smart::bench"; }
median=$("$T/bench-user/build/bench_user")
[[ $median =~ ^median\ (49[0-9]|50[0-9])$ ]] || fail "the program on smart::bench printed \"$median\""
pass "a program on smart::bench alone builds from the moved prefix and runs ($median)"

PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --exists --print-errors smart || fail "pkg-config does not find smart.pc"
# The engine's installed headers pull in neither rdma-core's nor CLI11's:
# every header an example compiles (g++ -M) is the standard library's, the
# package's or one of its declared dependencies' (Boost, nlohmann_json).
for name in "${EXAMPLES[@]}"; do
  # shellcheck disable=SC2046
  g++ -M "$SMART_SOURCE/examples/$name.cc" $(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags smart) \
    >"$T/$name.deps" 2>&1 || { cat "$T/$name.deps" >&2; fail "g++ -M $name"; }
  if grep -o -E "[^ ]*(infiniband|rdma|CLI)/[^ ]*" "$T/$name.deps" >"$T/$name.leaks"; then
    fail "$name compiles $(sort -u "$T/$name.leaks" | tr '\n' ' ')through the installed headers"
  fi
  # Built on the engine alone: no header of the bench library either.
  if grep -o -E "[^ ]*include/smart/bench/[^ ]*" "$T/$name.deps" >"$T/$name.bench"; then
    fail "$name compiles the bench library's $(sort -u "$T/$name.bench" | tr '\n' ' ')"
  fi
done
if grep -l -E '#include [<"]smart/bench/' "$P"/include/smart/*.h >"$T/engine_bench" 2>/dev/null; then
  fail "engine headers include the bench library's: $(tr '\n' ' ' <"$T/engine_bench")"
fi
if grep -rl -E "#include <(infiniband|rdma|CLI)/" "$P/include" >"$T/leaks"; then
  fail "installed headers include rdma-core or CLI11: $(tr '\n' ' ' <"$T/leaks")"
fi
[[ ! -e $P/include/smart/transport.h && ! -e $P/include/smart/command_line.h ]] ||
  fail "the provider API or the command-line helper was installed"
pass "the examples compile no rdma-core or CLI11 header: the installed headers include none"
for name in "${EXAMPLES[@]}"; do
  # shellcheck disable=SC2046
  g++ -O2 -o "$T/${name}_pc" "$SMART_SOURCE/examples/$name.cc" \
    $(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs smart) 2>"$T/pc.log" ||
    { cat "$T/pc.log" >&2; fail "building $name with pkg-config"; }
done
run_examples "pkg-config build, installed blade" "$T" _pc 3 2 200 "127.0.0.1:$BLADE_PORT"
pass "examples built with pkg-config from the moved prefix run"
stop_blades

# --- 3. the Debian package ---------------------------------------------------
(cd "$BUILD" && cpack -G DEB -B "$T/deb") >"$T/cpack.log" 2>&1 || { cat "$T/cpack.log" >&2; fail "cpack -G DEB"; }
deb=$(ls "$T"/deb/*.deb 2>/dev/null | head -n 1)
[[ -n $deb ]] || fail "cpack made no .deb: $(cat "$T/cpack.log")"
dpkg-deb --info "$deb" >/dev/null || fail "dpkg-deb cannot read $deb"
dpkg-deb --contents "$deb" >"$T/contents"
for f in ./usr/lib/libsmart.a ./usr/lib/cmake/smart/smartConfig.cmake ./usr/lib/pkgconfig/smart.pc \
  ./usr/include/smart/initiator.h ./usr/share/smart/backend.json ./usr/bin/hashtable_bench; do
  grep -q " $f\$" "$T/contents" || fail "the package has no $f"
done
# Each dependency (first of each alternative) is a package this machine has.
depends=$(dpkg-deb --field "$deb" Depends)
IFS=',' read -ra alternatives <<<"$depends"
for alt in "${alternatives[@]}"; do
  name=$(sed 's/^ *//; s/[ (|].*//' <<<"$alt")
  dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" ||
    fail "the package depends on $name, which is not an installed package here (Depends: $depends)"
done
dpkg-deb -x "$deb" "$T/root"
build_examples_cmake "the unpacked .deb" "$T/root/usr" "$T/ex-deb"
run_examples "the unpacked .deb's build" "$T/ex-deb" "" 2 2 100
pass "cpack -G DEB: $(basename "$deb") holds the library, headers, CMake and pkg-config files, tools and config; its dependencies are installed; unpacked, it builds the examples"
