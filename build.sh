#!/usr/bin/env bash
# Configures and builds the SMART framework into build/ (binaries in build/bin/).
#
#   ./build.sh                 Release build
#   ./build.sh Debug           another CMake build type
#   JOBS=8 ./build.sh          parallel jobs (default: number of cores)
#   BUILD_DIR=out ./build.sh   another build directory
set -euo pipefail
cd "$(dirname "$0")"
build_type=${1:-Release}
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type"
cmake --build "$build_dir" -j "$jobs"
echo "build.sh: binaries are in $build_dir/bin/"
