#!/usr/bin/env bash
# Every public symbol of include/smart is documented:
#
#   check_docs.sh DOXYGEN DOXYFILE SOURCE_DIR OUT_DIR
#
# runs Doxygen with the project's Doxyfile (WARN_IF_UNDOCUMENTED on, the
# HTML into OUT_DIR, where the comments' markup is checked too) and fails on
# any warning, listing the undocumented symbols first. Before that it checks itself: a copy of a
# header with its documentation comments removed must produce warnings, so
# a Doxyfile that reads no header cannot pass. Exit 77 (skipped) without
# Doxygen.
set -euo pipefail
if (($# != 4)); then
  echo "usage: check_docs.sh DOXYGEN DOXYFILE SOURCE_DIR OUT_DIR" >&2
  exit 2
fi
doxygen=$1 doxyfile=$2 source_dir=$3 out=$4
if [[ -z $doxygen || $doxygen == *NOTFOUND* || ! -x $doxygen ]]; then
  echo "check_docs: Doxygen is not installed (apt-get install doxygen); skipped"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out/self-check/include/smart"

# Runs Doxygen with the project's settings plus the given overrides; the
# warnings land in $out/$name.log.
run_doxygen() {
  local name=$1
  shift
  {
    cat "$doxyfile"
    echo "OUTPUT_DIRECTORY = $out/$name"
    echo "WARN_LOGFILE = $out/$name.log"
    echo "WARN_IF_UNDOCUMENTED = YES"
    echo "WARN_NO_PARAMDOC = NO"
    echo "GENERATE_LATEX = NO"
    echo "GENERATE_XML = NO"
    printf '%s\n' "$@"
  } | "$doxygen" - >"$out/$name.out" 2>&1 || {
    cat "$out/$name.out" >&2
    echo "check_docs: doxygen failed" >&2
    exit 1
  }
}

# 1. The check can fail: status.h without its /// comments.
sed -e 's|///.*$||' "$source_dir/include/smart/status.h" >"$out/self-check/include/smart/status.h"
run_doxygen self-check "INPUT = $out/self-check/include/smart" "USE_MDFILE_AS_MAINPAGE =" \
  "STRIP_FROM_PATH = $out/self-check/include"
if ! grep -q "is not documented" "$out/self-check.log"; then
  echo "check_docs: a header stripped of its comments gave no 'not documented' warning;" \
    "the check cannot fail as configured ($doxyfile)" >&2
  exit 1
fi

# 2. The real headers and the concept pages.
run_doxygen api
undocumented=$(grep -c "is not documented" "$out/api.log" || true)
total=$(grep -c "warning:" "$out/api.log" || true)
if ((total > 0)); then
  echo "check_docs: $undocumented undocumented public symbol(s), $((total - undocumented)) other warning(s):" >&2
  { grep "is not documented" "$out/api.log" || true; grep -v "is not documented" "$out/api.log" || true; } |
    sed "s|$source_dir/||" >&2
  exit 1
fi
headers=$(ls "$source_dir"/include/smart/*.h | wc -l)
echo "check_docs: every public symbol in $headers headers of include/smart is documented; no Doxygen warning"
