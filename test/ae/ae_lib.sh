# Helpers for the tests of ae/run.sh. Source it; it needs SMART_BIN (the
# build's bin/ directory, set by ctest) and finds the source tree itself.
set -euo pipefail

: "${SMART_BIN:?SMART_BIN must name the bin directory of a build}"
SMART_SOURCE=${SMART_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
RUN="$SMART_SOURCE/ae/run.sh"
TEST_NAME=$(basename "$0" .sh)
WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/smart-${TEST_NAME}.XXXXXX")
trap 'rm -rf "$WORK_DIR"' EXIT

fail() {
  echo "FAIL: $TEST_NAME: $*" >&2
  exit 1
}

pass() {
  echo "ok: $*"
}

# expect_refusal MESSAGE-PART ARGS...: run.sh ARGS must exit 2 and say MESSAGE-PART.
expect_refusal() {
  local want=$1 out status=0
  shift
  out=$("$RUN" "$@" 2>&1) || status=$?
  ((status == 2)) || fail "run.sh $* exited $status, expected 2: $out"
  [[ $out == *"$want"* ]] || fail "run.sh $* did not say '$want': $out"
}
