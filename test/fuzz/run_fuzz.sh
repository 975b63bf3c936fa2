#!/usr/bin/env bash
# Runs one fuzz target on seeds made by fuzz_seeds, then on --runs inputs
# derived from them (test/fuzz/standalone_main.cc):
#
#   run_fuzz.sh BIN_DIR TARGET [RUNS]
set -euo pipefail
bin=${1:?usage: run_fuzz.sh BIN_DIR TARGET [RUNS]}
target=${2:?usage: run_fuzz.sh BIN_DIR TARGET [RUNS]}
runs=${3:-100000}
work=$(mktemp -d "${TMPDIR:-/tmp}/smart-fuzz-$target.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bin/fuzz_seeds" "$work"
seeds=("$work/$target"/*)
[[ -e ${seeds[0]} ]] || { echo "no seeds for $target in $work" >&2; exit 1; }
"$bin/fuzz_$target" --runs "$runs" "${seeds[@]}"
