# Sourced by the linearizability tests: sets up the Go toolchain that ctest
# found (GO, empty when none) with every cache under SMART_GO_DIR (a
# directory of the build), so that a clean clone builds as any user, and
# defines build_checker. Without Go the test is skipped (exit 77), saying
# why. The porcupine module comes from the Go module proxy (go.sum pins it).
# Not in the Soft-RoCE guest yet: it would build the checker under full
# emulation (the tier treats 77 as skipped).
if [[ ${SMART_TEST_TRANSPORT:-shm} == verbs ]]; then
  echo "SKIPPED: the linearizability tests run on shm only (no Go build in the Soft-RoCE guest)" >&2
  exit 77
fi
LINEARIZABILITY_SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -z ${GO:-} || $GO == *NOTFOUND* || ! -x $GO ]]; then
  echo "SKIPPED: no Go toolchain (GO='${GO:-}'); install golang-go (./deps.sh) and reconfigure" >&2
  exit 77
fi
: "${SMART_GO_DIR:?SMART_GO_DIR must name a directory of the build for the Go caches}"
export GOPATH=$SMART_GO_DIR/path GOCACHE=$SMART_GO_DIR/cache GOTOOLCHAIN=local
# -modcacherw: the module cache can be deleted with the build directory.
export GOFLAGS="-mod=mod -modcacherw"
mkdir -p "$SMART_GO_DIR/bin"

# Builds the checker into $SMART_GO_DIR/bin/linearizability and sets CHECKER.
build_checker() {
  CHECKER=$SMART_GO_DIR/bin/linearizability
  (cd "$LINEARIZABILITY_SOURCE" && "$GO" build -o "$CHECKER" .) || {
    echo "FAIL: building the linearizability checker with $GO failed" >&2
    exit 1
  }
}
